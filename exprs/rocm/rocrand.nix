# rocRAND, random number generators on the GPU: a compiled library whose
# kernels are built for the requested gfx targets (each target adds tens of
# minutes on two cores), from Debian's upstream tarball.
{ stdenv, rocmLib, licenses, gpuTargets, hipcc, clr, rocm-cmake }:
let
  targets = rocmLib.gfx { pname = "rocrand"; supported = rocmLib.rocm64Targets; requested = gpuTargets; };
  self = stdenv.mkDerivation {
    pname = "rocrand";
    version = "6.4.3";
    src = rocmLib.origSource {
      pname = "rocrand";
      file = "rocrand_6.4.3.orig.tar.gz";

      size = 44916345;
      sha256 = "6d174b679c1829e1740d8cb2a59bb43b7a34bd42e9234026860762ead90cccf9";
    };
    nativeBuildInputs = [ hipcc ];
    buildInputs = [ clr rocm-cmake ];
    gpuTargets = targets;
    cmakeFlags = rocmLib.hipCmakeFlags targets;
    passthru = {
      gfxDependent = true;
      gpuTargets = targets;
      tests.generate = rocmLib.hipTest {
        name = "rocrand-generate";
        src = ./tests/rocrand-generate.hip;
        inherit targets;
        nativeBuildInputs = [ hipcc ];
        buildInputs = [ self clr ];
        libs = "-lrocrand";
        targetCheck = rocmLib.libraryBundleCheck self "lib/librocrand.so";
      };
    };
    meta = {
      description = "rocRAND: pseudo- and quasi-random number generators for AMD GPUs";
      homepage = "https://github.com/ROCm/rocRAND";
      license = licenses.mit;
      debianVersion = "6.4.3-1";
      gpuTargets = rocmLib.rocm64Targets;
    };
  };
in
self
