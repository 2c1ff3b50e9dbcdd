# rocPRIM, the HIP parallel primitives (header-only), from Debian's upstream
# tarball. The installed headers do not depend on the gfx targets, so the
# package itself is gfx-independent and shared by every --gfx; its test
# program (passthru.tests.reduce) is compiled for the requested targets.
{ stdenv, rocmLib, licenses, gpuTargets, hipcc, clr, rocm-cmake }:
let
  self = stdenv.mkDerivation {
    pname = "rocprim";
    version = "6.4.3";
    src = rocmLib.origSource {
      pname = "rocprim";
      file = "rocprim_6.4.3.orig.tar.gz";

      size = 868355;
      sha256 = "b66feed30fe53aa8f2f8902604394c72f156b6517f8e5174d5b9d0b3dfcbb3c1";
    };
    nativeBuildInputs = [ hipcc ];
    buildInputs = [ clr rocm-cmake ];
    cmakeFlags = [ "-GNinja" "-DCMAKE_CXX_COMPILER=hipcc" "-DONLY_INSTALL=ON" "-DBUILD_TEST=OFF" "-DGPU_TARGETS=gfx1100" ];
    passthru = {
      gfxDependent = false;
      tests.reduce = rocmLib.hipTest {
        name = "rocprim-reduce";
        src = ./tests/rocprim-reduce.hip;
        targets = rocmLib.gfx { pname = "rocprim"; supported = rocmLib.rocm64Targets; requested = gpuTargets; };
        nativeBuildInputs = [ hipcc ];
        buildInputs = [ self clr ];
      };
    };
    meta = {
      description = "rocPRIM: HIP parallel primitives (header-only)";
      homepage = "https://github.com/ROCm/rocPRIM";
      license = licenses.mit;
      debianVersion = "6.4.3-2";
      gpuTargets = rocmLib.rocm64Targets;
    };
  };
in
self
