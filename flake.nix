# rocmx's own flake: the ROCm 6.4 package set (exprs/rocm), parameterised by
# the gfx targets its GPU libraries are built for.
#
#   rocmx flake show
#   rocmx build .#rocr-runtime                       # gfx-independent
#   rocmx build .#rocrand --gfx gfx1100              # compiled for gfx1100
#   rocmx build .#rocprim.tests.reduce --gfx gfx1100 # a test program, code objects checked
#   rocmx build .#pytorch-rocm --gfx gfx1100 --dry-run
#   rocmx graph .#pytorch-rocm --format svg > closure.svg
#   rocmx licenses .#pytorch-rocm
#
# README.md "The ROCm package set" says which packages are built from source,
# which are taken from Debian binaries (meta.fromBinary) and why, and which have
# never been built (meta.broken).
{
  description = "The ROCm 6.4 stack, from the compiler seed to pytorch-rocm, for the gfx targets you choose";

  config = {
    gfxTargets = {
      type = "gfx targets";
      default = [ "gfx1100" ];
      description = "the GPU targets the gfx-dependent libraries are compiled for (--gfx LIST|native|all)";
    };
    fromSource = {
      type = "list of string";
      default = [ ];
      description = "packages taken from Debian binaries to build from source instead, once their source is supplied with 'rocmx store add-fixed'";
    };
    fromBinary = {
      type = "list of string";
      default = [ ];
      description = "packages built from source to take from Debian's binary instead (rocsolver: hours per target on a small machine)";
    };
    allowNonfree = {
      type = "bool";
      default = false;
      description = "accept packages whose licence is not free (--allow-nonfree)";
    };
  };

  outputs = { self, config }:
    let
      system = builtins.currentSystem;
      rocmFor = args: import ./exprs/rocm ({
        gpuTargets = config.gfxTargets;
        inherit (config) fromSource fromBinary allowNonfree;
      } // args);
      rocm = rocmFor { };
      names = [
        "llvm" "rocm-device-libs" "comgr" "hipcc" "rocr-runtime" "clr" "rocm-cmake" "rocminfo" "rocm-smi-lib"
        "rocprim" "hipcub" "rocthrust" "rocrand" "hiprand" "rocsparse" "hipsparse" "rocsolver" "hipsolver"
        "rocfft" "hipfft" "rocblas" "hipblas" "hipblaslt" "miopen" "magma-rocm" "pytorch-rocm"
      ];
    in
    {
      packages.${system} = builtins.listToAttrs (map (n: { name = n; value = rocm.${n}; }) names);

      # The whole scope (callPackage, overrideScope, the stdenv), as nixpkgs'
      # legacyPackages: `rocmx build .#rocmPackages.rocprim`.
      legacyPackages.${system}.rocmPackages = rocm;

      lib = {
        # The set for other arguments: rocmPackagesFor { gpuTargets = [ "gfx90a" ]; overlays = [ … ]; }
        rocmPackagesFor = rocmFor;
      };
    };
}
