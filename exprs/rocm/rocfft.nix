# rocFFT: fast Fourier transforms on AMD GPUs, from Debian's upstream tarball, compiled for the requested gfx targets.
# Built here for gfx1100 (2026-12-03): 709 s, 76 build steps. Without the
# ahead-of-time kernel cache (see cmakeFlags) the library holds code objects
# only for its helper kernels; FFT kernels are compiled by hipRTC on first use.
#
# passthru.tests.dft links a host program against it (a length-8 forward DFT);
# its check is that the library holds code objects for exactly the requested
# targets.
{ rocmLib, licenses, gpuTargets, hipcc, clr, rocm-cmake }:
let self = rocmLib.hipLibrary {
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
  # The generated build files' order followed a Python set's, which changes
  # from run to run (kept: the order of the build, not of the library).
  # clang 21 emitted powX.cpp's static device variables (the default
  # load/store callbacks, the one translation unit with device code) in an
  # order that followed their addresses in the compiler's memory, so every
  # compile gave another code object; the second patch names them from
  # device code in declaration order first (see its header). Found by
  # `rocmx verify` ("differs even without variations").
  patches = [
    ./patches/rocfft-sorted-kernel-list.patch
    ./patches/rocfft-default-callbacks-in-order.patch
  ];
  cmakeFlags = [
    # Upstream downloads an SQLite amalgamation at configure time; the build
    # has no network, and the build root carries Debian's libsqlite3-dev.
    "-DSQLITE_USE_SYSTEM_PACKAGE=ON"
    # The ahead-of-time kernel cache compiles thousands of kernels through
    # hipRTC at build time (hours per target on two cores); without it rocFFT
    # compiles each kernel at run time on first use and keeps it in the
    # user's cache (upstream's documented configure-time switch).
    "-DROCFFT_KERNEL_CACHE_ENABLE=OFF"
    # hipRAND only feeds the test clients' device-side input generation, and
    # the clients are not built.
    "-DUSE_HIPRAND=OFF"
  ];
  meta = {
    description = "rocFFT: fast Fourier transforms on AMD GPUs";
    homepage = "https://github.com/ROCm/rocFFT";
    license = licenses.mit;
    debianVersion = "6.4.3-1";
  };
  passthru.tests.dft = rocmLib.hipTest {
    name = "rocfft-dft";
    src = ./tests/rocfft-dft.cpp;
    targets = self.gpuTargets;
    nativeBuildInputs = [ hipcc ];
    buildInputs = [ self clr ];
    libs = "-lrocfft";
    targetCheck = rocmLib.libraryBundleCheck self "lib/librocfft.so";
  };
};
in
self
