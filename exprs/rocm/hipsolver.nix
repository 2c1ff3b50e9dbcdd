# hipSOLVER: the HIP LAPACK interface, on rocSOLVER, from Debian's upstream tarball, compiled for the requested gfx targets.
# Built here for gfx1100 (2026-12-03) on Debian's rocSOLVER (`--set
# fromBinary=rocsolver`; rocSOLVER from source takes 4-8 h per target on two
# cores): 28 s, its test program 25 s; reproducible under `rocmx verify`.
#
# passthru.tests.getrf links a host program against it (an LU factorisation
# through the HIP interface); hipSOLVER has no kernels of its own, so the
# check is on rocSOLVER's code objects: exactly the requested targets when
# rocSOLVER is built here, covered (itself or by its generic target) when it
# is Debian's binary (`--set fromBinary=rocsolver`).
{ rocmLib, licenses, gpuTargets, hipcc, clr, rocm-cmake, rocblas, rocsolver }:
let self = rocmLib.hipLibrary {
  pname = "hipsolver";
  version = "6.4.1";
  src = rocmLib.origSource {
    pname = "hipsolver";
    file = "hipsolver_6.4.1.orig.tar.gz";

    size = 2577495;
    sha256 = "86ac30d5cf741a254485ed54c7f51e4c9bc9803cda31dab8e86f11b39742b28e";
  };
  inherit gpuTargets hipcc;
  buildInputs = [ clr rocm-cmake rocblas rocsolver ];
  cmakeFlags = [
    # The Fortran bindings need gfortran, which the build root lacks.
    "-DBUILD_FORTRAN_BINDINGS=OFF"
    # Upstream's default, said here: the sparse solvers (hipsolverSp*) load
    # rocSPARSE and SuiteSparse's CHOLMOD with dlopen when first used (and
    # report HIPSOLVER_STATUS_NOT_SUPPORTED where they are missing) instead
    # of linking them, which would need CHOLMOD at build time.
    "-DBUILD_WITH_SPARSE=OFF"
  ];
  meta = {
    description = "hipSOLVER: the HIP LAPACK interface, on rocSOLVER";
    homepage = "https://github.com/ROCm/hipSOLVER";
    license = licenses.mit;
    debianVersion = "6.4.1-1";
  };
  passthru.tests.getrf = rocmLib.hipTest {
    name = "hipsolver-getrf";
    src = ./tests/hipsolver-getrf.cpp;
    targets = self.gpuTargets;
    nativeBuildInputs = [ hipcc ];
    buildInputs = [ self rocsolver rocblas clr ];
    libs = "-lhipsolver";
    targetCheck =
      if (rocsolver.meta.fromBinary or null) == null
      then rocmLib.libraryBundleCheck rocsolver "lib/librocsolver.so"
      else rocmLib.libraryCoversCheck rocsolver "lib/x86_64-linux-gnu/librocsolver.so.0" self.gpuTargets;
  };
};
in
self
