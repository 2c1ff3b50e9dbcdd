# rocSOLVER: LAPACK on AMD GPUs, from Debian's upstream tarball, compiled for the requested gfx targets.
# Never built on the development machines yet (see meta.broken).
{ rocmLib, licenses, gpuTargets, hipcc, clr, rocm-cmake, rocprim, rocblas, rocsparse }:
rocmLib.hipLibrary {
  pname = "rocsolver";
  version = "6.4.3";
  src = rocmLib.origSource {
    pname = "rocsolver";
    file = "rocsolver_6.4.3.orig.tar.gz";

    size = 3151118;
    sha256 = "6c2c6019eaf49abb30fc54f09b3d755ebcfbbd30d9b71052aa13bb0cbc26d2bb";
  };
  inherit gpuTargets hipcc;
  buildInputs = [ clr rocm-cmake rocprim rocblas rocsparse ];
  meta = {
    description = "rocSOLVER: LAPACK on AMD GPUs";
    homepage = "https://github.com/ROCm/rocSOLVER";
    license = licenses.bsd2;
    debianVersion = "6.4.3-2";
    broken = "never built on the development machines (2 cores); expect to adjust its CMake flags on first build";
  };
}
