# hipFFT: the HIP FFT interface, on rocFFT, from Debian's upstream tarball, compiled for the requested gfx targets.
#
# passthru.tests.dft links a host program against it (a length-8 forward DFT
# through the HIP interface); hipFFT has no kernels of its own, so the check is
# that rocFFT holds code objects for exactly the requested targets.
{ rocmLib, licenses, gpuTargets, hipcc, clr, rocm-cmake, rocfft }:
let self = rocmLib.hipLibrary {
  pname = "hipfft";
  version = "6.4.3";
  src = rocmLib.origSource {
    pname = "hipfft";
    file = "hipfft_6.4.3.orig.tar.gz";

    size = 300245;
    sha256 = "3850864e40005c2a9ea7aa17680235137837b3eea544a32895639a7be160e631";
  };
  inherit gpuTargets hipcc;
  buildInputs = [ clr rocm-cmake rocfft ];
  meta = {
    description = "hipFFT: the HIP FFT interface, on rocFFT";
    homepage = "https://github.com/ROCm/hipFFT";
    license = licenses.mit;
    debianVersion = "6.4.3-2";
  };
  passthru.tests.dft = rocmLib.hipTest {
    name = "hipfft-dft";
    src = ./tests/hipfft-dft.cpp;
    targets = self.gpuTargets;
    nativeBuildInputs = [ hipcc ];
    buildInputs = [ self rocfft clr ];
    libs = "-lhipfft";
    targetCheck = rocmLib.libraryBundleCheck rocfft "lib/librocfft.so";
  };
};
in
self
