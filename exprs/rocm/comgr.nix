# The code object manager (libamd_comgr), which compiles and links GPU code at
# run time (hiprtc, the HIP runtime), built against Debian's LLVM 21 and the
# device libraries built here.
{ stdenv, rocmLib, licenses, rocm-device-libs }:
stdenv.mkDerivation {
  pname = "comgr";
  version = "7.0.2";
  src = rocmLib.origSource {
    pname = "rocm-llvm";
    file = "rocm-llvm_7.0.2+dfsg.orig.tar.xz";

    size = 325280;
    sha256 = "c0abd0b9d526c6f486a0065edf0e2ab749519f4ad3c8dccfcaea3a545651e5f9";
  };
  buildInputs = [ rocm-device-libs ];
  # Debian's patch series for rocm-llvm is not served by the mirror; what
  # building against Debian's LLVM 21 needs is redone here.
  patches = [
    ./patches/comgr-llvm21.patch
    # The embedded OpenCL PCHs named their input as <stdin> under the build
    # directory; compiled from the header's path they no longer depend on it.
    ./patches/comgr-pch-input-path.patch
  ];
  preConfigure = "cd amd/comgr";
  cmakeFlags = [
    "-GNinja"
    "-DCMAKE_INSTALL_LIBDIR=lib"
    "-DLLVM_DIR=/usr/lib/llvm-21/lib/cmake/llvm"
    "-DClang_DIR=/usr/lib/llvm-21/lib/cmake/clang"
    "-DLLD_DIR=/usr/lib/llvm-21/lib/cmake/lld"
    "-DBUILD_TESTING=OFF"
    "-DCOMGR_DISABLE_SPIRV=ON"
  ];
  meta = {
    description = "AMD code object manager: compiles, links and inspects GPU code objects at run time";
    homepage = "https://github.com/ROCm/llvm-project/tree/amd-staging/amd/comgr";
    license = licenses.ncsa;
    debianVersion = "7.0.2+dfsg-3";
  };
}
