# Workload: `n` independent trivial derivations (no edges at all), each
# writing its index into its output: the wide graph of bench/slurm.sh. The
# builder is the static busybox named `sh` in ./bb (made by bench/slurm.sh),
# as in bench/build/chain.nix; `seed` makes every run's derivations new.
{ seed ? "0", n ? 200 }:
let
  one = i: derivation {
    name = "wide-${toString i}";
    system = builtins.currentSystem;
    builder = "${./bb}/bin/sh";
    args = [ "-c" "echo ${seed} ${toString i} > $out" ];
  };
in
builtins.listToAttrs (builtins.genList (i: { name = "w${toString i}"; value = one i; }) n)
