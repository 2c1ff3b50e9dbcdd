# Workload: 50 chained trivial derivations, each writing its predecessor's
# output path into its own output. The builder is a static busybox named
# `sh` in ./bb (made by bench/build.sh), referenced by a path literal so that
# both Nix and rocmx copy it into their stores. Builds are fork-free (shell
# builtins only) because Nix's sandbox here kills builders that fork.
# `seed` makes every run's derivations new, so each run builds from scratch.
{ seed ? "0", n ? 50 }:
let
  step = i: prev: derivation {
    name = "chain-${toString i}";
    system = builtins.currentSystem;
    builder = "${./bb}/bin/sh";
    args = [ "-c" "echo ${seed} ${prev} > $out" ];
  };
  go = i: prev: if i > n then prev else go (i + 1) (step i prev);
in
go 1 "start"
