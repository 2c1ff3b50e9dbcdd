# hipFFT: the HIP FFT interface, on rocFFT, from Debian's upstream tarball, compiled for the requested gfx targets.
# Never built on the development machines yet (see meta.broken).
{ rocmLib, licenses, gpuTargets, hipcc, clr, rocm-cmake, rocfft }:
rocmLib.hipLibrary {
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
    broken = "never built on the development machines (2 cores); expect to adjust its CMake flags on first build";
  };
}
