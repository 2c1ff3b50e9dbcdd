# MAGMA: dense linear algebra on CPU and GPU (HIP build), from Debian's upstream tarball, compiled for the requested gfx targets.
# Never built on the development machines yet (see meta.broken).
{ rocmLib, licenses, gpuTargets, hipcc, clr, rocblas, hipblas, hipsparse }:
rocmLib.hipLibrary {
  pname = "magma-rocm";
  version = "2.9.0";
  src = rocmLib.origSource {
    pname = "magma-rocm";
    file = "magma-rocm_2.9.0+ds.orig.tar.xz";

    size = 3578340;
    sha256 = "1b1a65d941dc37890958964652bd606e1c3f7876fd3015f068cc918ba530d12d";
  };
  inherit gpuTargets hipcc;
  buildInputs = [ clr rocblas hipblas hipsparse ];
  cmakeFlags = [ "-DMAGMA_ENABLE_HIP=ON" ];
  meta = {
    description = "MAGMA: dense linear algebra on CPU and GPU (HIP build)";
    homepage = "https://icl.utk.edu/magma/";
    license = licenses.bsd3;
    debianVersion = "2.9.0+ds-3";
    broken = "never built on the development machines (2 cores); expect to adjust its CMake flags on first build";
  };
}
