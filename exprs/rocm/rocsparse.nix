# rocSPARSE: sparse linear algebra on AMD GPUs, from Debian's upstream tarball, compiled for the requested gfx targets.
# Built here for gfx1100 (2026-12-03): 54 min on two cores at nice 5 beside
# other work, 281 build steps; reproducible under all eleven `rocmx verify`
# variations.
#
# passthru.tests.spmv links a host program against it (a CSR matrix-vector
# product); its check is that the library holds code objects for exactly the
# requested targets, since the program has no kernels of its own.
{ rocmLib, licenses, gpuTargets, hipcc, clr, rocm-cmake, rocprim }:
let self = rocmLib.hipLibrary {
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
  passthru.tests.spmv = rocmLib.hipTest {
    name = "rocsparse-spmv";
    src = ./tests/rocsparse-spmv.cpp;
    targets = self.gpuTargets;
    nativeBuildInputs = [ hipcc ];
    buildInputs = [ self clr ];
    libs = "-lrocsparse";
    targetCheck = rocmLib.libraryBundleCheck self "lib/librocsparse.so";
  };
  meta = {
    description = "rocSPARSE: sparse linear algebra on AMD GPUs";
    homepage = "https://github.com/ROCm/rocSPARSE";
    license = licenses.mit;
    debianVersion = "6.4.3-3";
  };
}; in
self
