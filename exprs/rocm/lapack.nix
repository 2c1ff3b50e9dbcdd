# The reference BLAS and LAPACK (Netlib), from Debian's binaries: host
# libraries MAGMA's build needs (its CPU fallbacks and testers call LAPACK)
# and the ROCm build root does not carry. Not a ROCm package: it takes no gfx
# targets, and its store path is the same for every target list.
#
# Debian installs them under lib/x86_64-linux-gnu/{blas,lapack}/ and makes
# the usual liblapack.so names with update-alternatives in the packages'
# maintainer scripts, which unpacking does not run: a user names the files
# under those directories (passthru.libraries does).
{ rocmLib, licenses }:
let
  pkg = rocmLib.debianBinary {
    pname = "lapack";
    version = "3.12.1-8";
    debs = [ "liblapack-dev" "liblapack3" "libblas-dev" "libblas3" "libgfortran5" ];
    reason = "a host library outside the ROCm stack";
    passthru.libraries = "${pkg}/lib/x86_64-linux-gnu/lapack/liblapack.so;${pkg}/lib/x86_64-linux-gnu/blas/libblas.so";
    meta = {
      description = "Reference BLAS and LAPACK (Netlib), as Debian builds them";
      homepage = "https://www.netlib.org/lapack/";
      license = licenses.bsd3;
    };
  };
in
pkg
