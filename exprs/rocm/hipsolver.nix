# hipSOLVER: the HIP LAPACK interface, on rocSOLVER, from Debian's upstream tarball, compiled for the requested gfx targets.
# Never built on the development machines yet (see meta.broken).
{ rocmLib, licenses, gpuTargets, hipcc, clr, rocm-cmake, rocblas, rocsolver, rocsparse }:
rocmLib.hipLibrary {
  pname = "hipsolver";
  version = "6.4.1";
  src = rocmLib.origSource {
    pname = "hipsolver";
    file = "hipsolver_6.4.1.orig.tar.gz";

    size = 2577495;
    sha256 = "86ac30d5cf741a254485ed54c7f51e4c9bc9803cda31dab8e86f11b39742b28e";
  };
  inherit gpuTargets hipcc;
  buildInputs = [ clr rocm-cmake rocblas rocsolver rocsparse ];
  meta = {
    description = "hipSOLVER: the HIP LAPACK interface, on rocSOLVER";
    homepage = "https://github.com/ROCm/hipSOLVER";
    license = licenses.mit;
    debianVersion = "6.4.1-1";
    broken = "never built on the development machines (2 cores); expect to adjust its CMake flags on first build";
  };
}
