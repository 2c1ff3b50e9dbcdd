# rocSPARSE: sparse linear algebra on AMD GPUs, from Debian's upstream tarball, compiled for the requested gfx targets.
# Never built on the development machines yet (see meta.broken).
{ rocmLib, licenses, gpuTargets, hipcc, clr, rocm-cmake, rocprim }:
rocmLib.hipLibrary {
  pname = "rocsparse";
  version = "6.4.3";
  src = rocmLib.origSource {
    pname = "rocsparse";
    file = "rocsparse_6.4.3.orig.tar.gz";

    size = 1539584;
    sha256 = "fca59e70da33a046be36ea2fe83ba18ea8f0a5c9efd255e0427802ba3a134d0a";
  };
  inherit gpuTargets hipcc;
  buildInputs = [ clr rocm-cmake rocprim ];
  meta = {
    description = "rocSPARSE: sparse linear algebra on AMD GPUs";
    homepage = "https://github.com/ROCm/rocSPARSE";
    license = licenses.mit;
    debianVersion = "6.4.3-3";
    broken = "never built on the development machines (2 cores); expect to adjust its CMake flags on first build";
  };
}
