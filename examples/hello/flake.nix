# A tiny flake built with a static busybox as the only tool.
#
#   ./make-bb                      # once: makes ./bb (the busybox builder)
#   rocmx build                    # builds .#default (creates flake.lock first)
#   rocmx build .#both --set who=rocm --json --no-link
#   rocmx flake show               # the outputs and the parameters
#   rocmx flake metadata
#
# The busybox builder stays until the Debian bootstrap gives a real stdenv.
{
  description = "Hello from rocmx: two tiny derivations built with busybox";

  inputs.bb = {
    url = "path:./bb";
    flake = false;
  };

  config.who = {
    type = "string";
    default = "world";
    description = "whom the greeting greets";
  };

  outputs = { self, config, bb }:
    let
      pkgs = import ./default.nix { inherit (config) who; bb = bb.outPath; };
    in
    {
      packages.${builtins.currentSystem} = {
        inherit (pkgs) greeting both;
        default = pkgs.greeting;
      };
    };
}
