# GNU hello from Debian's source package, built with rocmx's stdenv in the
# sandbox on the pinned Debian root (exprs/bootstrap: `base`, about 150 MiB of
# .debs, fetched once and checked by hash).
#
#   rocmx build                    # .#default: GNU hello; ./result/bin/hello runs on the host
#   rocmx build --check            # rebuild and compare: bit-identical
#   rocmx flake show               # the outputs and the parameters
#   rocmx licenses                 # GPL-3.0-or-later
#
# The tiny busybox package set of ./default.nix builds without the Debian root
# (see its header: ./make-bb, then rocmx build ./default.nix).
{
  description = "GNU hello from Debian's source, built on the pinned Debian root";

  config.allowNonfree = {
    type = "bool";
    default = false;
    description = "accept packages whose licence is not free";
  };

  outputs = { self, config }:
    let
      system = builtins.currentSystem;
      roots = import ../../exprs/bootstrap;
      stdenv = import ../../exprs/lib/stdenv {
        rootfs = roots.base;
        inherit (config) allowNonfree;
      };
      debian = import ../../exprs/lib/debian.nix;
      licenses = import ../../exprs/lib/licenses.nix;
      hello = import ./gnu-hello.nix {
        inherit stdenv licenses;
        inherit (debian) debianSource;
      };
    in
    {
      packages.${system} = {
        inherit hello;
        default = hello;
        rootfs = roots.base;
      };
    };
}
