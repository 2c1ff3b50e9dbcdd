# hipcc, the compiler driver for HIP (a thin wrapper around clang), from the
# AMD part of rocm-llvm 7.0.2.
#
# The installed `hipcc` is a wrapper that points the driver at the pieces of
# this set unless the caller says otherwise: clang 21 of the build root
# (HIP_CLANG_PATH), the device libraries built here (DEVICE_LIB_PATH), and
# the HIP runtime's headers and libraries (HIP_PATH, ROCM_PATH: clr).
#
# passthru.tests.math compiles a kernel calling device-library math for the
# requested targets (the only use of gpuTargets here: hipcc itself is the
# same for every target list).
{ stdenv, rocmLib, licenses, gpuTargets, rocm-device-libs, clr }:
let self =
stdenv.mkDerivation {
  pname = "hipcc";
  version = "7.0.2";
  src = rocmLib.origSource {
    pname = "rocm-llvm";
    file = "rocm-llvm_7.0.2+dfsg.orig.tar.xz";

    size = 325280;
    sha256 = "c0abd0b9d526c6f486a0065edf0e2ab749519f4ad3c8dccfcaea3a545651e5f9";
  };
  preConfigure = "cd amd/hipcc";
  cmakeFlags = [ "-GNinja" "-DHIPCC_BACKWARD_COMPATIBILITY=OFF" ];
  buildInputs = [ rocm-device-libs clr ];
  clangPath = "${stdenv.rootfs}/usr/lib/llvm-21/bin";
  postInstall = ''
    mkdir -p "$out/libexec/hipcc"
    for tool in hipcc hipconfig; do
      mv "$out/bin/$tool" "$out/libexec/hipcc/$tool"
      cat > "$out/bin/$tool" <<WRAP
    #!/bin/sh
    : "\''${HIP_CLANG_PATH:=$clangPath}"
    : "\''${DEVICE_LIB_PATH:=${rocm-device-libs}/amdgcn/bitcode}"
    : "\''${HIP_DEVICE_LIB_PATH:=\$DEVICE_LIB_PATH}"
    : "\''${HIP_PATH:=${clr}}"
    : "\''${ROCM_PATH:=${clr}}"
    export HIP_CLANG_PATH DEVICE_LIB_PATH HIP_DEVICE_LIB_PATH HIP_PATH ROCM_PATH
    exec "$out/libexec/hipcc/$tool" "\$@"
    WRAP
      chmod +x "$out/bin/$tool"
    done
  '';
  passthru.tests.math = rocmLib.hipTest {
    name = "hip-math";
    src = ./tests/hip-math.hip;
    targets = rocmLib.gfx { pname = "hipcc"; supported = rocmLib.rocm64Targets; requested = gpuTargets; };
    nativeBuildInputs = [ self ];
    buildInputs = [ clr ];
  };
  meta = {
    description = "HIP compiler driver";
    homepage = "https://github.com/ROCm/llvm-project/tree/amd-staging/amd/hipcc";
    license = licenses.mit;
    debianVersion = "7.0.2+dfsg-3";
  };
};
in
self
