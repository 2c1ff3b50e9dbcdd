# MIOpen, AMD's deep-learning primitives, taken from Debian's binary (the
# mirror does not serve miopen_6.4.3+dfsg.orig.tar.xz). Debian's index records
# no targets for it: sid's default list is assumed for the request check.
{ rocmLib, licenses, gpuTargets, rocblas, clr }:
rocmLib.debianBinary {
  pname = "miopen";
  version = "6.4.3+dfsg-1+b1";
  debs = [ "libmiopen1" "libmiopen-dev" ];
  reason = "the mirror does not serve miopen_6.4.3+dfsg.orig.tar.xz";
  inherit gpuTargets;
  assumedTargets = rocmLib.debianTargets;
  buildInputs = [ rocblas clr ];
  meta = {
    description = "MIOpen: deep-learning primitives for AMD GPUs";
    homepage = "https://github.com/ROCm/MIOpen";
    license = licenses.mit;
  };
}
