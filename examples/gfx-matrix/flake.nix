# One package that compiles "GPU code" once per gfx target, and packages that
# compile none. Only the first depends on the target list, so only its store
# path changes with --gfx; the others are shared by every choice of targets.
#
#   ../hello/make-bb               # once: the busybox builder this example uses
#   rocmx build .#kernels --gfx gfx90a
#   rocmx build .#kernels --gfx gfx90a,gfx1100     # a new kernels; runtime unchanged
#   rocmx build .#app --gfx native                 # needs an AMD GPU (/dev/kfd)
#   rocmx flake show
{
  description = "gfx targets as a parameter: one artefact per target, shared GPU-free packages";

  inputs.bb = {
    url = "path:../hello/bb";
    flake = false;
  };

  config.gfxTargets = {
    type = "gfx targets";
    default = [ "gfx90a" "gfx942" "gfx1100" ];
    description = "the GPU targets to compile for (--gfx LIST|native|all)";
  };

  outputs = { self, config, bb }:
    let
      system = builtins.currentSystem;
      gpu = import ../../exprs/lib/gpu.nix;
      mk = name: script: attrs: derivation ({
        inherit name system;
        builder = "${bb}/bin/sh";
        args = [ "-c" script ];
        PATH = "${bb}/bin";
      } // attrs);

      # GPU-free: never sees the target list.
      runtime = mk "runtime" "echo 'a runtime: no GPU code here' > $out" { };
      tools = mk "tools" "{ echo 'tools built against:'; cat ${runtime}; } > $out" { };

      # Compiles for the requested targets it supports (a package declares what
      # it supports and intersects; none left is an error naming both lists).
      kernelsFor = gpuTargets:
        let
          targets = gpu.intersect {
            pname = "kernels";
            supported = [ "gfx906" "gfx908" "gfx90a" "gfx942" "gfx1030" "gfx1100" "gfx1101" "gfx1201" ];
            requested = gpuTargets;
          };
          one = t:
            let info = gpu.byName (gpu.baseName t);
            in "echo 'code object for ${t} (family ${info.family}, KFD version ${toString info.gfx_target_version})' > \"$out/${t}.co\"; ";
        in
        mk "kernels" ("mkdir $out; " + builtins.concatStringsSep "" (map one targets)) {
          gpuTargets = targets;
        };
      kernels = kernelsFor config.gfxTargets;

      app = mk "app" "mkdir $out; cat ${runtime} > $out/runtime; for f in ${kernels}/*.co; do cat \"$f\" >> $out/kernels; done" { };
    in
    {
      packages.${system} = {
        inherit runtime tools kernels app;
        default = app;
      };
      lib = { inherit kernelsFor; };
    };
}
