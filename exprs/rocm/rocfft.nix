# rocFFT: fast Fourier transforms on AMD GPUs, from Debian's upstream tarball, compiled for the requested gfx targets.
# Built here for gfx1100 (2026-12-03): 709 s, 76 build steps; not yet
# reproducible under `rocmx verify`'s variations (identical without them;
# README "What has been verified here"). Without the
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
  # from run to run. Not what makes librocfft.so differ between two builds
  # (`rocmx verify`: exception tables and device code; not fixed yet).
  patches = [ ./patches/rocfft-sorted-kernel-list.patch ];
  # clang 21's HIP compile of library/src/powX.cpp (the one translation unit
  # with device code) emits its static device variables (the default
  # load/store callbacks) in an order that follows their addresses: two
  # compiles of it differ, and with address-space randomisation off they do
  # not (checked: four compiles, two each way). So the build runs without
  # ASLR; found by `rocmx verify` ("differs even without variations"). The
  # variations still change it (addresses follow earlier allocations).
  buildPhase = ''
    setarch "$(uname -m)" -R cmake --build "$cmakeBuildDir" -j "$NIX_BUILD_CORES"
  '';
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
