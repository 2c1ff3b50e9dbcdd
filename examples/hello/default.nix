# A tiny package set built with a static busybox as the only tool, without
# the Debian root (flake.nix builds GNU hello on that root instead).
#
# The builder comes from a directory next to this file (not in the repository),
# made by `./make-bb` (a *static* busybox as bb/bin/sh, with cat and echo).
#
# Then:
#
#   rocmx build ./default.nix                 # builds `greeting` and `both`; ./result, ./result-2
#   rocmx build --file . both --json --no-link
#   rocmx build --file . both --argstr who rocm --dry-run
#   rocmx log result                          # the build log of ./result's derivation
#   rocmx derivation show result
{ who ? "world", bb ? ./bb }:
let
  mk = name: script: derivation {
    inherit name;
    system = builtins.currentSystem;
    builder = "${bb}/bin/sh";
    args = [ "-c" script ];
    PATH = "${bb}/bin";
  };
  greeting = mk "greeting" "echo 'Hello, ${who}!' > $out";
  shout = mk "shout" "echo building shout; { cat ${greeting}; echo '(loudly)'; } > $out";
in
{
  inherit greeting;
  both = mk "both" "{ cat ${greeting} ${shout}; } > $out";
}
