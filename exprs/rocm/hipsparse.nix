# hipSPARSE: the HIP sparse interface, on rocSPARSE, from Debian's upstream tarball, compiled for the requested gfx targets.
# Never built on the development machines yet (see meta.broken).
{ rocmLib, licenses, gpuTargets, hipcc, clr, rocm-cmake, rocsparse }:
rocmLib.hipLibrary {
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
  meta = {
    description = "hipSPARSE: the HIP sparse interface, on rocSPARSE";
    homepage = "https://github.com/ROCm/hipSPARSE";
    license = licenses.mit;
    debianVersion = "6.4.3-1";
    broken = "never built on the development machines (2 cores); expect to adjust its CMake flags on first build";
  };
}
