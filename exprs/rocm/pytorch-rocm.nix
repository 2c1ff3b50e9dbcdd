# PyTorch built with ROCm: the Python package with its `torch` module
# (./result/lib/python3/dist-packages/torch), from Debian's pytorch 2.6.0
# source (trixie's 2.6.0+dfsg-7: upstream tarball with its bundled
# third_party removed, plus Debian's patch series; sid's 2.14.1 source is not
# served by the mirror), configured like the ROCm variant Debian's packaging
# started (USE_ROCM=1, USE_MIOPEN=1, PYTORCH_ROCM_ARCH) with Debian's system
# libraries (USE_SYSTEM_LIBS).
#
# It builds on its own root, `pytorch-dev` (exprs/bootstrap): PyTorch 2.6
# refuses Python 3.14, sid's default (torch/csrc/dynamo/cpython_defs.c stops
# with "#error Please ensure that the functions below still match the
# CPython implementation for 3.14"), so it is built for sid's python3.13.
# sid's python3-numpy carries extension modules for 3.14 and 3.15 only, so
# the NumPy bridge is off (meta.disabledFeatures).
#
# PyTorch's CMake expects one ROCm prefix (ROCM_PATH, /opt/rocm upstream):
# `rocmPath` joins the set's packages into one tree and adds what the
# separate packages lack there (rocm-core's version header, the FindHIP
# module under lib/cmake/hip).
#
# Switched off, because their dependencies are missing, stale or too new in
# Debian (see meta.disabledFeatures): RCCL and with it distributed training,
# composable-kernel, the flash and memory-efficient attention kernels
# (aotriton), the NumPy bridge, and the CPU back ends built on libraries
# whose sid versions are far past what 2.6 was written against (XNNPACK,
# oneDNN, QNNPACK, NNPACK, Kineto's profiler, Vulkan).
{ pytorchStdenv, rocmLib, licenses, gpuTargets, rocmVersion, hipcc, clr, comgr, rocr-runtime
, rocm-device-libs, rocm-cmake, rocprim, hipcub, rocthrust, rocrand, hiprand, rocblas, hipblas
, hipblaslt, rocsparse, hipsparse, rocsolver, hipsolver, rocfft, hipfft, miopen, magma-rocm
, rocm-smi-lib, withMagma ? true }:
let
  stdenv = pytorchStdenv;
  debianLib = import ../lib/debian.nix;
  targets = rocmLib.gfx { pname = "pytorch-rocm"; supported = rocmLib.rocm64Targets; requested = gpuTargets; };
  rocmInputs = [
    hipcc clr comgr rocr-runtime rocm-device-libs rocm-cmake rocprim hipcub rocthrust rocrand hiprand
    rocblas hipblas hipblaslt rocsparse hipsparse rocsolver hipsolver rocfft hipfft miopen rocm-smi-lib
  ] ++ (if withMagma then [ magma-rocm ] else [ ]);
  # The ROCm packages as the one prefix PyTorch's LoadHIP.cmake reads.
  rocmPath = stdenv.mkDerivation {
    name = "rocm-path-${rocmVersion}";
    paths = rocmInputs;
    buildCommand = ''
      mkdir -p "$out"
      for p in $paths; do
        (cd "$p" && find . -type d ! -name nix-support) | while read -r d; do mkdir -p "$out/$d"; done
        (cd "$p" && find . ! -type d ! -path './nix-support/*') | while read -r f; do
          f=''${f#./}
          [ -e "$out/$f" ] || [ -L "$out/$f" ] || ln -s "$p/$f" "$out/$f"
        done
      done
      # rocm-core is not packaged separately: its version header, as
      # LoadHIP.cmake parses it.
      mkdir -p "$out/include/rocm-core"
      cat > "$out/include/rocm-core/rocm_version.h" <<EOF
      #pragma once
      #define ROCM_VERSION_MAJOR 6
      #define ROCM_VERSION_MINOR 4
      #define ROCM_VERSION_PATCH 3
      EOF
      # LoadHIP.cmake puts ROCM_PATH/lib/cmake/hip on CMAKE_MODULE_PATH for
      # FindHIP.cmake; Debian's layout has it under the multiarch directory.
      mkdir -p "$out/lib/cmake"
      ln -s "$out/lib/x86_64-linux-gnu/cmake/hip" "$out/lib/cmake/hip"
    '';
  };
  sitePackages = "lib/python3/dist-packages";
in
let self =
stdenv.mkDerivation {
  pname = "pytorch-rocm";
  version = "2.6.0";
  src = debianLib.debianSource {
    inherit stdenv;
    pname = "pytorch";
    version = "2.6.0+dfsg-7";
    orig = { ext = "xz"; hash = "sha256:099a9601bc40d67656e75735c44abedb0fbe92d08817852ab7472eebb7e6ddff"; size = 27212640; };
    debian = { hash = "sha256:3290d4e5168b6e44191882213f61ad41c134a912fe11a44364c2e74f81f68af0"; size = 216036; };
    # A source tree, not build output: upstream's text names `/build/…`
    # paths (CMakeLists.txt's "''${PROJECT_SOURCE_DIR}/build/bin/ptxas" for
    # CUDA, tests, docs), and the DFSG tarball dropped the .gitignore that
    # .dockerignore links to.
    qaExceptions = {
      build-dir-reference = "upstream text naming /build/ paths (CUDA's ptxas lookup, tests, docs), nothing of this build";
      broken-symlink = ".dockerignore links to .gitignore, which Debian's repacked tarball does not carry";
    };
  };
  nativeBuildInputs = [ hipcc ];
  buildInputs = rocmInputs;
  inherit rocmPath;
  gpuTargets = targets;
  PYTORCH_ROCM_ARCH = builtins.concatStringsSep ";" targets;
  # The interpreter the module is built for (see the header).
  PYTHON = "python3.13";
  PYTORCH_BUILD_VERSION = "2.6.0";
  PYTORCH_BUILD_NUMBER = "0";
  USE_ROCM = "1";
  USE_CUDA = "0";
  USE_MIOPEN = "1";
  USE_MAGMA = if withMagma then "1" else "0";
  USE_SYSTEM_LIBS = "ON";
  USE_NCCL = "0";
  USE_RCCL = "0";
  USE_DISTRIBUTED = "0";
  USE_MPI = "0";
  USE_GLOO = "0";
  USE_TENSORPIPE = "0";
  USE_FLASH_ATTENTION = "0";
  USE_MEM_EFF_ATTENTION = "0";
  USE_CK = "0";
  USE_NUMPY = "0";
  USE_XNNPACK = "0";
  USE_MKLDNN = "0";
  USE_PYTORCH_QNNPACK = "0";
  USE_NNPACK = "0";
  USE_FBGEMM = "0";
  USE_KINETO = "0";
  USE_VULKAN = "0";
  USE_ITT = "0";
  USE_GFLAGS = "0";
  USE_GLOG = "0";
  BUILD_TEST = "0";
  BLAS = "Generic";
  GENERIC_BLAS_LIBRARIES = "blas";
  ONNX_NAMESPACE = "onnx";
  dontConfigure = "1";
  buildPhase = ''
    export ROCM_PATH="$rocmPath" HIP_PATH="$rocmPath"
    export MAX_JOBS="$NIX_BUILD_CORES"
    # setup.py hands CMAKE_* variables to CMake as -D options, where a list
    # is ';'-separated.
    export CMAKE_PREFIX_PATH="$(printf %s "$CMAKE_PREFIX_PATH" | tr : ';')"
    # The reference BLAS and LAPACK of the root, where Debian installs them
    # (the libblas.so/liblapack.so links are made by update-alternatives,
    # which unpacking the root does not run).
    export CMAKE_LIBRARY_PATH="/usr/lib/x86_64-linux-gnu/blas;/usr/lib/x86_64-linux-gnu/lapack"
    # Debian's override_dh_auto_configure: the mobile bytecode schema's header.
    (cd torch/csrc/jit/serialization && flatc --cpp --gen-mutable --scoped-enums mobile_bytecode.fbs)
    "$PYTHON" tools/amd_build/build_amd.py
    "$PYTHON" setup.py build
  '';
  installPhase = ''
    "$PYTHON" setup.py install --prefix="$out" --root=/ --single-version-externally-managed \
      --install-lib="$out/${sitePackages}" --install-scripts="$out/bin"
  '';
  passthru = {
    gfxDependent = true;
    gpuTargets = targets;
    inherit rocmPath sitePackages;
    # Imports torch and computes on the CPU while it is built (no GPU
    # needed), checks that libtorch_hip.so holds code for exactly the
    # requested targets, and installs `run-torch-tensor`, which repeats the
    # computation on the GPU where /dev/kfd exists (exit 77 elsewhere).
    # Never built: it needs pytorch-rocm itself.
    tests.tensor = stdenv.mkDerivation {
      name = "torch-tensor";
      src = ./tests/torch-tensor.py;
      torch = self;
      PYTHON = "python3.13";
      expected = map (t: "hipv4-amdgcn-amd-amdhsa--${t}") targets;
      nativeBuildInputs = [ hipcc ];
      dontUnpack = "1";
      dontConfigure = "1";
      buildPhase = ''
        export PYTHONPATH="$torch/${sitePackages}"
        "$PYTHON" "$src"
        (${rocmLib.libraryBundleCheck self "${sitePackages}/torch/lib/libtorch_hip.so"}) | sort -u > targets
        printf '%s\n' $expected | sort > expected
        if ! cmp -s targets expected; then
          echo "libtorch_hip.so holds code for: $(tr '\n' ' ' < targets), not the requested $(tr '\n' ' ' < expected)" >&2
          exit 1
        fi
      '';
      # The root's interpreter is copied so that the fixup points it at the
      # root's loader and libraries (it then runs on the host), and
      # PYTHONHOME names the root's standard library.
      installPhase = ''
        mkdir -p "$out/bin"
        cp targets "$out/targets"
        cp "$(command -v "$PYTHON")" "$out/bin/$PYTHON"
        cat > "$out/bin/run-torch-tensor" <<RUN
        #!/bin/sh
        if [ ! -e /dev/kfd ]; then
          echo "torch-tensor: no AMD GPU here (/dev/kfd is missing); compiled for: $(tr '\n' ' ' < targets)" >&2
          exit 77
        fi
        PYTHONHOME="${stdenv.rootfs}/usr" PYTHONPATH="$torch/${sitePackages}" exec "$out/bin/$PYTHON" "$src" --gpu
        RUN
        chmod +x "$out/bin/run-torch-tensor"
      '';
    };
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
      numpy = "sid's python3-numpy is built for Python 3.14 and 3.15, and PyTorch 2.6 (the only source served) builds for 3.13 at most";
      cpu-backends = "XNNPACK, oneDNN, QNNPACK, NNPACK, Kineto and Vulkan are off: sid's libraries are years past what PyTorch 2.6 was written against";
    };
    broken = "never built: a build takes 12-30 h on two cores (see README \"The ROCm package set\" for how far it got)";
  };
};
in
self
