# hipSPARSE: the HIP sparse interface, on rocSPARSE, from Debian's upstream tarball, compiled for the requested gfx targets.
# Built here for gfx1100 (2026-12-03): 24 s (one translation unit, host code
# only); `--check` bit-identical.
#
# passthru.tests.spmv links a host program against it (a CSR matrix-vector
# product through the HIP interface); hipSPARSE has no kernels of its own, so
# the check is that rocSPARSE holds code objects for exactly the requested
# targets.
{ rocmLib, licenses, gpuTargets, hipcc, clr, rocm-cmake, rocsparse }:
let self = rocmLib.hipLibrary {
  pname = "hipsparse";
  version = "6.4.3";
  src = rocmLib.origSource {
    pname = "hipsparse";
    file = "hipsparse_6.4.3.orig.tar.gz";

    size = 560457;
    sha256 = "0ac06136778a25e7d38c69d831d169b85ad370d0ae1cd45deb5f63a43797244e";
  };
  inherit gpuTargets hipcc;
  buildInputs = [ clr rocm-cmake rocsparse ];
  # Upstream always enables Fortran for an optional Fortran module (an object
  # library only the client programs use, and they are not built); the build
  # root has no Fortran compiler, so both go.
  postPatch = ''
    sed -i 's/set( fortran_language "Fortran" )//' CMakeLists.txt
    sed -i '/hipsparse_fortran/d' library/CMakeLists.txt
  '';
  passthru.tests.spmv = rocmLib.hipTest {
    name = "hipsparse-spmv";
    src = ./tests/hipsparse-spmv.cpp;
    targets = self.gpuTargets;
    nativeBuildInputs = [ hipcc ];
    buildInputs = [ self rocsparse clr ];
    libs = "-lhipsparse";
    targetCheck = rocmLib.libraryBundleCheck rocsparse "lib/librocsparse.so";
  };
  meta = {
    description = "hipSPARSE: the HIP sparse interface, on rocSPARSE";
    homepage = "https://github.com/ROCm/hipSPARSE";
    license = licenses.mit;
    debianVersion = "6.4.3-1";
  };
}; in
self
