# ROCr, the HSA runtime, with its kernel-driver interface (libhsakmt), built
# from the upstream tarball Debian ships (rocr-runtime 6.4.3+dfsg). Its blit
# and trap-handler kernels are compiled by clang for every GPU the runtime
# drives, whatever --gfx says: the runtime is gfx-independent.
{ stdenv, rocmLib, licenses }:
stdenv.mkDerivation {
  pname = "rocr-runtime";
  version = "6.4.3";
  src = rocmLib.origSource {
    pname = "rocr-runtime";
    file = "rocr-runtime_6.4.3+dfsg.orig.tar.xz";

    size = 1082292;
    sha256 = "1a19936c406071cd3e8868ef5263415568327137c96bcbb9452af331a9dfe46f";
  };
  # Debian's patch series (rocr-runtime_6.4.3+dfsg-5.debian.tar.xz) is not
  # served by the mirror; what building with LLVM 21 needs is redone here.
  patches = [
    ./patches/rocr-runtime-llvm21-gfx94x.patch
    # GCC 16 no longer pulls <cstdint> in through <string>.
    ./patches/rocr-runtime-gcc16-cstdint.patch
  ];
  cmakeFlags = [
    "-GNinja"
    "-DBUILD_SHARED_LIBS=ON"
    "-DCMAKE_INSTALL_LIBDIR=lib"
    "-DLLVM_DIR=/usr/lib/llvm-21/lib/cmake/llvm"
    "-DClang_DIR=/usr/lib/llvm-21/lib/cmake/clang"
    # No rocprofiler-register in Debian: the runtime is built without it.
    "-DCMAKE_DISABLE_FIND_PACKAGE_rocprofiler-register=ON"
  ];
  meta = {
    description = "ROCm runtime: the HSA runtime and the thunk (libhsakmt) to the amdgpu kernel driver";
    homepage = "https://github.com/ROCm/ROCR-Runtime";
    license = licenses.ncsa;
    debianVersion = "6.4.3+dfsg-5";
  };
}
