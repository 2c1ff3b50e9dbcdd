# PyTorch built with ROCm: the Python package with its `torch` module
# (./result/lib/python3/dist-packages/torch), from Debian's pytorch 2.6.0
# source (trixie's 2.6.0+dfsg-7: upstream tarball plus Debian's patch series;
# sid's 2.14.1 source is not served by the mirror), configured like the ROCm
# variant Debian's packaging started (USE_ROCM=1, USE_MIOPEN=1,
# PYTORCH_ROCM_ARCH).
#
# Switched off, because their ROCm dependencies are missing or stale in Debian
# (see meta.disabledFeatures): RCCL and with it distributed training,
# composable-kernel, and the flash and memory-efficient attention kernels
# (aotriton).
{ stdenv, rocmLib, licenses, gpuTargets, hipcc, clr, rocm-cmake, rocprim, hipcub, rocthrust, rocrand
, hiprand, rocblas, hipblas, hipblaslt, rocsparse, hipsparse, rocsolver, hipsolver, rocfft, hipfft, miopen
, magma-rocm, rocm-smi-lib, rocr-runtime, comgr }:
let
  debianLib = import ../lib/debian.nix;
  targets = rocmLib.gfx { pname = "pytorch-rocm"; supported = rocmLib.rocm64Targets; requested = gpuTargets; };
in
stdenv.mkDerivation {
  pname = "pytorch-rocm";
  version = "2.6.0";
  src = debianLib.debianSource {
    inherit stdenv;
    pname = "pytorch";
    version = "2.6.0+dfsg-7";
    orig = { ext = "xz"; hash = "sha256:099a9601bc40d67656e75735c44abedb0fbe92d08817852ab7472eebb7e6ddff"; size = 27212640; };
    debian = { hash = "sha256:3290d4e5168b6e44191882213f61ad41c134a912fe11a44364c2e74f81f68af0"; size = 216036; };
  };
  nativeBuildInputs = [ hipcc ];
  buildInputs = [
    clr rocm-cmake rocprim hipcub rocthrust rocrand hiprand rocblas hipblas hipblaslt rocsparse hipsparse
    rocsolver hipsolver rocfft hipfft miopen magma-rocm rocm-smi-lib rocr-runtime comgr
  ];
  gpuTargets = targets;
  PYTORCH_ROCM_ARCH = builtins.concatStringsSep ";" targets;
  USE_ROCM = "1";
  USE_MIOPEN = "1";
  USE_NCCL = "0";
  USE_RCCL = "0";
  USE_DISTRIBUTED = "0";
  USE_FLASH_ATTENTION = "0";
  USE_MEM_EFF_ATTENTION = "0";
  USE_CK = "0";
  BUILD_TEST = "0";
  dontConfigure = "1";
  buildPhase = ''
    python3 tools/amd_build/build_amd.py
    python3 setup.py build
  '';
  installPhase = ''
    python3 setup.py install --prefix="$out" --install-layout=deb --root=/ --single-version-externally-managed
  '';
  passthru = {
    gfxDependent = true;
    gpuTargets = targets;
  };
  meta = {
    description = "PyTorch with the ROCm backend (HIP), for the requested gfx targets";
    homepage = "https://pytorch.org";
    license = licenses.bsd3;
    debianVersion = "2.6.0+dfsg-7";
    gpuTargets = rocmLib.rocm64Targets;
    disabledFeatures = {
      rccl = "Debian's rccl is 5.4.3, too old for ROCm 6.4; without it, torch.distributed is off";
      composable-kernel = "not packaged in Debian";
      flash-attention = "aotriton is not packaged in Debian";
      mem-efficient-attention = "aotriton is not packaged in Debian";
    };
    broken = "never built: the build root lacks PyTorch's Python build dependencies (python3-dev, numpy, pybind11, pyyaml, typing-extensions and Debian's libraries: sleef, fmt, onnx, protobuf, …) and a build takes 12-30 h on two cores";
  };
}
