# The ROCm System Management Interface library (librocm_smi64) and the
# rocm-smi tool, from Debian's upstream tarball. gfx-independent.
{ stdenv, rocmLib, licenses }:
stdenv.mkDerivation {
  pname = "rocm-smi-lib";
  version = "6.4.1";
  src = rocmLib.origSource {
    pname = "rocm-smi-lib";
    file = "rocm-smi-lib_6.4.1.orig.tar.gz";

    size = 934752;
    sha256 = "527eedf3022567efc2720fd5309b9b8471f92f061d24f552c4af91aeda36cd97";
  };
  cmakeFlags = [ "-GNinja" "-DCMAKE_INSTALL_LIBDIR=lib" "-DBUILD_TESTS=OFF" ];
  meta = {
    description = "ROCm System Management Interface library and rocm-smi";
    homepage = "https://github.com/ROCm/rocm_smi_lib";
    license = licenses.mit;
    debianVersion = "6.4.1-1.1";
  };
}
