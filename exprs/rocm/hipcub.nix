# hipCUB, CUB's interface on top of rocPRIM (header-only); gfx-independent
# like rocprim, with a test program compiled for the requested targets.
{ stdenv, rocmLib, licenses, gpuTargets, hipcc, clr, rocm-cmake, rocprim }:
let
  self = stdenv.mkDerivation {
    pname = "hipcub";
    version = "6.4.3";
    src = rocmLib.origSource {
      pname = "hipcub";
      file = "hipcub_6.4.3.orig.tar.gz";

      size = 419173;
      sha256 = "1246f2d23665e4c4ec58a923d96b35cbfa4079adeda8bac47ba8fad3f85437bf";
    };
    nativeBuildInputs = [ hipcc ];
    buildInputs = [ clr rocm-cmake rocprim ];
    propagatedBuildInputs = [ rocprim ];
    cmakeFlags = [ "-GNinja" "-DCMAKE_CXX_COMPILER=hipcc" "-DBUILD_TEST=OFF" "-DBUILD_BENCHMARK=OFF" "-DGPU_TARGETS=gfx1100" ];
    passthru = {
      gfxDependent = false;
      tests.scan = rocmLib.hipTest {
        name = "hipcub-scan";
        src = ./tests/hipcub-scan.hip;
        targets = rocmLib.gfx { pname = "hipcub"; supported = rocmLib.rocm64Targets; requested = gpuTargets; };
        nativeBuildInputs = [ hipcc ];
        buildInputs = [ self rocprim clr ];
      };
    };
    meta = {
      description = "hipCUB: CUB-compatible device primitives for HIP (header-only)";
      homepage = "https://github.com/ROCm/hipCUB";
      license = licenses.bsd3;
      debianVersion = "6.4.3-2";
      gpuTargets = rocmLib.rocm64Targets;
    };
  };
in
self
