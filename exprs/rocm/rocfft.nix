# rocFFT: fast Fourier transforms on AMD GPUs, from Debian's upstream tarball, compiled for the requested gfx targets.
# Never built on the development machines yet (see meta.broken).
{ rocmLib, licenses, gpuTargets, hipcc, clr, rocm-cmake }:
rocmLib.hipLibrary {
  pname = "rocfft";
  version = "6.4.3";
  src = rocmLib.origSource {
    pname = "rocfft";
    file = "rocfft_6.4.3.orig.tar.gz";

    size = 1429076;
    sha256 = "9ccd198ab1ec1b729992d00fbe5f9e3955ed77690974d8bd1b713539b6c21c7e";
  };
  inherit gpuTargets hipcc;
  buildInputs = [ clr rocm-cmake ];
  meta = {
    description = "rocFFT: fast Fourier transforms on AMD GPUs";
    homepage = "https://github.com/ROCm/rocFFT";
    license = licenses.mit;
    debianVersion = "6.4.3-1";
    broken = "never built on the development machines (2 cores); expect to adjust its CMake flags on first build";
  };
}
