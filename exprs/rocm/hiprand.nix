# hipRAND, the HIP interface to rocRAND, taken from Debian's binary (the
# mirror does not serve hiprand_6.4.3.orig.tar.gz). It runs on this set's
# rocrand (RUNPATH), built for the requested targets.
{ rocmLib, licenses, gpuTargets, wantSource, rocrand, clr }:
if wantSource "hiprand" then
  throw "hiprand from source: no expression yet; supply hiprand_6.4.3.orig.tar.gz (sha256 15b67f1b0dcad6319d2fa54d3330a075e74d52a650b682f44afa086cb0f526f0) with 'rocmx store add-fixed sha256 ./hiprand_6.4.3.orig.tar.gz' and write one after rocrand.nix"
else
rocmLib.debianBinary {
  pname = "hiprand";
  version = "6.4.3-1";
  debs = [ "libhiprand1" "libhiprand-dev" ];
  reason = "the mirror does not serve hiprand_6.4.3.orig.tar.gz";
  inherit gpuTargets;
  buildInputs = [ rocrand clr ];
  meta = {
    description = "hipRAND: the HIP random number interface, on rocRAND";
    homepage = "https://github.com/ROCm/hipRAND";
    license = licenses.mit;
  };
}
