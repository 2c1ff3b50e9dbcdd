# hipBLASLt, taken from Debian's binary (the mirror does not serve
# hipblaslt_7.1.1+dfsg.orig.tar.xz). Debian's index records no targets for it:
# sid's default list is assumed for the request check.
{ rocmLib, licenses, gpuTargets, clr }:
rocmLib.debianBinary {
  pname = "hipblaslt";
  version = "7.1.1+dfsg-4";
  debs = [ "libhipblaslt1" "libhipblaslt-dev" ];
  reason = "the mirror does not serve hipblaslt_7.1.1+dfsg.orig.tar.xz";
  inherit gpuTargets;
  assumedTargets = rocmLib.debianTargets;
  buildInputs = [ clr ];
  meta = {
    description = "hipBLASLt: general matrix multiplication with flexible epilogues";
    homepage = "https://github.com/ROCm/hipBLASLt";
    license = licenses.mit;
  };
}
