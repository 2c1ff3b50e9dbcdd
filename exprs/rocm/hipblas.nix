# hipBLAS, the HIP marshalling layer over rocBLAS and rocSOLVER, taken from
# Debian's binary (the mirror does not serve hipblas_6.4.4.orig.tar.gz). It
# holds no GPU code of its own; its store path follows rocblas's targets.
{ rocmLib, licenses, rocblas, rocsolver, clr }:
rocmLib.debianBinary {
  pname = "hipblas";
  version = "6.4.4-1";
  debs = [ "libhipblas2" "libhipblas-dev" "libhipblas-common-dev" ];
  reason = "the mirror does not serve hipblas_6.4.4.orig.tar.gz";
  buildInputs = [ rocblas rocsolver clr ];
  meta = {
    description = "hipBLAS: BLAS marshalling library for HIP";
    homepage = "https://github.com/ROCm/hipBLAS";
    license = licenses.mit;
  };
}
