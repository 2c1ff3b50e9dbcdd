# rocThrust, Thrust on top of rocPRIM (header-only); gfx-independent like
# rocprim, with a test program compiled for the requested targets.
{ stdenv, rocmLib, licenses, gpuTargets, hipcc, clr, rocm-cmake, rocprim }:
let
  self = stdenv.mkDerivation {
    pname = "rocthrust";
    version = "6.4.4";
    src = rocmLib.origSource {
      pname = "rocthrust";
      file = "rocthrust_6.4.4.orig.tar.gz";

      size = 1228234;
      sha256 = "38c5dcb42878acff734bae37e7e05e4f02ade8b0e5aaedcb1b257d57b2bbda66";
    };
    nativeBuildInputs = [ hipcc ];
    buildInputs = [ clr rocm-cmake rocprim ];
    propagatedBuildInputs = [ rocprim ];
    cmakeFlags = [ "-GNinja" "-DCMAKE_CXX_COMPILER=hipcc" "-DBUILD_TEST=OFF" "-DBUILD_BENCHMARKS=OFF" "-DGPU_TARGETS=gfx1100" ];
    passthru = {
      gfxDependent = false;
      tests.sort = rocmLib.hipTest {
        name = "rocthrust-sort";
        src = ./tests/rocthrust-sort.hip;
        targets = rocmLib.gfx { pname = "rocthrust"; supported = rocmLib.rocm64Targets; requested = gpuTargets; };
        nativeBuildInputs = [ hipcc ];
        buildInputs = [ self rocprim clr ];
      };
    };
    meta = {
      description = "rocThrust: the Thrust parallel algorithms library for HIP (header-only)";
      homepage = "https://github.com/ROCm/rocThrust";
      license = licenses.asl20;
      debianVersion = "6.4.4-1";
      gpuTargets = rocmLib.rocm64Targets;
    };
  };
in
self
