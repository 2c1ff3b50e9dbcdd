# The ROCm 6.4 package set, as nixpkgs' rocmPackages: one file per package
# beside this one, assembled as a fixed point (exprs/lib/fixed-points.nix) so
# that an overlay replacing a package changes what every dependent gets.
#
#   rocm = import ./exprs/rocm { gpuTargets = [ "gfx1100" ]; };
#   rocm.rocprim                      # built for gfx1100
#   (import ./exprs/rocm {
#     overlays = [ (final: prev: { rocprim = prev.rocprim.overrideAttrs (o: { … }); }) ];
#   }).rocthrust                      # built against the overlay's rocprim
#
# Layers, bottom up (README "The ROCm package set" says which are built here):
#   compiler and runtime, gfx-independent: llvm, rocm-device-libs, comgr,
#     hipcc, rocr-runtime, clr, rocm-cmake, rocminfo, rocm-smi-lib
#   gfx-dependent libraries: rocprim, hipcub, rocthrust, rocrand, hiprand,
#     rocsparse, hipsparse, rocsolver, hipsolver, rocfft, hipfft, rocblas,
#     hipblas, hipblaslt, miopen, magma-rocm
#   pytorch-rocm
#   (and host libraries the build root lacks: fmt, lapack)
#
# Arguments:
#   gpuTargets    the gfx targets gfx-dependent packages are built for (the
#                 flake's gfxTargets, `--gfx`); gfx-independent packages never
#                 take it, so their store paths are the same for every list.
#   overlays      final: prev: { … } functions applied in order.
#   fromSource    names of packages that are taken from Debian binaries by
#                 default (their source is not served by the mirror) to build
#                 from source instead, once the source is supplied
#                 (`rocmx store add-fixed sha256 FILE`).
#   fromBinary    names of packages built from source by default to take from
#                 Debian's pinned binary instead (a machine that cannot spend
#                 the hours they take; the binary's recorded targets are
#                 checked against the request). Only those in `binaryCapable`.
#   allowNonfree  as the stdenv's.
{ gpuTargets ? [ "gfx1100" ]
, overlays ? [ ]
, fromSource ? [ ]
, fromBinary ? [ ]
, allowNonfree ? false
}:
let
  fp = import ../lib/fixed-points.nix;
  roots = import ../bootstrap;
  gpu = import ../lib/gpu.nix;
  licenses = import ../lib/licenses.nix;
  stdenv = import ../lib/stdenv { rootfs = roots.rocm-dev; inherit allowNonfree; };
  # PyTorch's own root: rocm-dev plus Python 3.13 and the libraries Debian's
  # pytorch builds against (exprs/bootstrap).
  pytorchStdenv = import ../lib/stdenv { rootfs = roots.pytorch-dev; inherit allowNonfree; };
  rocmLib = import ./lib.nix { inherit stdenv gpu; lock = ./binary.lock.json; };

  known = [
    "llvm" "rocm-device-libs" "comgr" "hipcc" "rocr-runtime" "clr" "rocm-cmake" "rocminfo" "rocm-smi-lib"
    "rocprim" "hipcub" "rocthrust" "rocrand" "hiprand" "rocsparse" "hipsparse" "rocsolver" "hipsolver"
    "rocfft" "hipfft" "rocblas" "hipblas" "hipblaslt" "miopen" "magma-rocm" "pytorch-rocm"
  ];
  badFromSource = builtins.filter (n: !(builtins.elem n known)) fromSource;
  # The packages built from source by default that can also be taken from
  # Debian's binary.
  binaryCapable = [ "rocsolver" ];
  badFromBinary = builtins.filter (n: !(builtins.elem n binaryCapable)) fromBinary;

  packages = self: {
    inherit gpuTargets stdenv pytorchStdenv gpu licenses;
    rocmLib = rocmLib;
    # Whether `name` is to be built from source although its source is not
    # served (see fromSource above).
    wantSource = name: builtins.elem name fromSource;
    # Whether `name` is to be taken from Debian's binary although it builds
    # from source (see fromBinary above).
    wantBinary = name: builtins.elem name fromBinary;
    rocmVersion = "6.4";

    # Compiler and runtime (gfx-independent).
    llvm = self.callPackage ./llvm.nix { };
    rocm-device-libs = self.callPackage ./rocm-device-libs.nix { };
    comgr = self.callPackage ./comgr.nix { };
    hipcc = self.callPackage ./hipcc.nix { };
    rocr-runtime = self.callPackage ./rocr-runtime.nix { };
    clr = self.callPackage ./clr.nix { };
    rocm-cmake = self.callPackage ./rocm-cmake.nix { };
    rocminfo = self.callPackage ./rocminfo.nix { };
    rocm-smi-lib = self.callPackage ./rocm-smi-lib.nix { };

    # Host libraries outside ROCm that a build needs and the build root lacks
    # (gfx-independent; `.#rocmPackages.fmt`, `.#rocmPackages.lapack`).
    fmt = self.callPackage ./fmt.nix { };
    lapack = self.callPackage ./lapack.nix { };

    # gfx-dependent libraries.
    rocprim = self.callPackage ./rocprim.nix { };
    hipcub = self.callPackage ./hipcub.nix { };
    rocthrust = self.callPackage ./rocthrust.nix { };
    rocrand = self.callPackage ./rocrand.nix { };
    hiprand = self.callPackage ./hiprand.nix { };
    rocsparse = self.callPackage ./rocsparse.nix { };
    hipsparse = self.callPackage ./hipsparse.nix { };
    rocsolver = self.callPackage ./rocsolver.nix { };
    hipsolver = self.callPackage ./hipsolver.nix { };
    rocfft = self.callPackage ./rocfft.nix { };
    hipfft = self.callPackage ./hipfft.nix { };
    rocblas = self.callPackage ./rocblas.nix { };
    hipblas = self.callPackage ./hipblas.nix { };
    hipblaslt = self.callPackage ./hipblaslt.nix { };
    miopen = self.callPackage ./miopen.nix { };
    magma-rocm = self.callPackage ./magma-rocm.nix { };

    pytorch-rocm = self.callPackage ./pytorch-rocm.nix { };
  };

  base = fp.makeScope (extra: fp.callPackageWith extra) packages;
in
if badFromSource != [ ] then
  throw "fromSource names ${builtins.concatStringsSep ", " badFromSource}, which the ROCm set does not have; its packages are: ${builtins.concatStringsSep " " known}"
else if badFromBinary != [ ] then
  throw "fromBinary names ${builtins.concatStringsSep ", " badFromBinary}, which the ROCm set cannot take from a Debian binary; the packages it can: ${builtins.concatStringsSep " " binaryCapable}"
else
  base.overrideScope (fp.composeManyExtensions overlays)
