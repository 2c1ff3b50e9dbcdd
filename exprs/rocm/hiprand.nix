# hipRAND, the HIP interface to rocRAND. Taken from Debian's binary by
# default (the mirror does not serve hiprand_6.4.3.orig.tar.gz), running on
# this set's rocrand (RUNPATH), built for the requested targets. `--set
# fromSource=hiprand` builds it from the tarball once supplied (`rocmx store
# add-fixed sha256 ./hiprand_6.4.3.orig.tar.gz`).
{ rocmLib, licenses, gpuTargets, wantSource, hipcc, rocrand, clr, rocm-cmake }:
let
  meta = {
    description = "hipRAND: the HIP random number interface, on rocRAND";
    homepage = "https://github.com/ROCm/hipRAND";
    license = licenses.mit;
  };
in
if wantSource "hiprand" then
  rocmLib.hipLibrary {
    pname = "hiprand";
    version = "6.4.3";
    src = rocmLib.origSource {
      pname = "hiprand";
      file = "hiprand_6.4.3.orig.tar.gz";
      sha256 = "15b67f1b0dcad6319d2fa54d3330a075e74d52a650b682f44afa086cb0f526f0";
      size = 127204;
    };
    inherit gpuTargets hipcc;
    buildInputs = [ rocrand clr rocm-cmake ];
    meta = meta // { debianVersion = "6.4.3-1"; broken = "never built: its source is not served here"; };
  }
else
  rocmLib.debianBinary {
    pname = "hiprand";
    version = "6.4.3-1";
    debs = [ "libhiprand1" "libhiprand-dev" ];
    reason = "the mirror does not serve hiprand_6.4.3.orig.tar.gz";
    inherit gpuTargets meta;
    buildInputs = [ rocrand clr ];
  }
