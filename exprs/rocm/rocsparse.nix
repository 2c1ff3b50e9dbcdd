# rocSPARSE: sparse linear algebra on AMD GPUs, from Debian's upstream tarball, compiled for the requested gfx targets.
# Attempted once, not finished (see meta.broken).
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
    broken = "never built to the end: on the development machine (2 cores) it configured and compiled 91 of its 281 build steps for one target in 37 min at nice 19 beside other builds, then was stopped for the session's time; expect two hours or more per target";
  };
}
