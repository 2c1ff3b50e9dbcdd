# The device libraries (ocml, ockl, …) as LLVM bitcode, from the AMD part of
# rocm-llvm (Debian's rocm-llvm 7.0.2+dfsg tarball holds amd/device-libs,
# amd/comgr and amd/hipcc), compiled with Debian's clang 21. Bitcode is
# target-independent within amdgcn: no gfx list.
{ stdenv, rocmLib, licenses }:
stdenv.mkDerivation {
  pname = "rocm-device-libs";
  version = "7.0.2";
  src = rocmLib.origSource {
    pname = "rocm-llvm";
    file = "rocm-llvm_7.0.2+dfsg.orig.tar.xz";

    size = 325280;
    sha256 = "c0abd0b9d526c6f486a0065edf0e2ab749519f4ad3c8dccfcaea3a545651e5f9";
  };
  # CMake 4 (Debian sid) no longer offers CMP0053's OLD behaviour, which the
  # OpenCL build rules ask for and do not need.
  postPatch = "sed -i '/cmake_policy(SET CMP0053 OLD)/d' amd/device-libs/cmake/OCL.cmake";
  preConfigure = "cd amd/device-libs";
  cmakeFlags = [
    "-GNinja"
    "-DLLVM_DIR=/usr/lib/llvm-21/lib/cmake/llvm"
    "-DClang_DIR=/usr/lib/llvm-21/lib/cmake/clang"
    "-DCMAKE_C_COMPILER=clang-21"
    "-DCMAKE_CXX_COMPILER=clang++-21"
  ];
  meta = {
    description = "AMD GPU device libraries (ocml, ockl, oclc) as LLVM bitcode";
    homepage = "https://github.com/ROCm/llvm-project/tree/amd-staging/amd/device-libs";
    license = licenses.ncsa;
    debianVersion = "7.0.2+dfsg-3";
  };
}
