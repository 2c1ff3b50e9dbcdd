# CMake modules shared by the ROCm projects. Taken from Debian's binary by
# default, because the mirror does not serve rocm-cmake_10.1.orig.tar.gz;
# `--set fromSource=rocm-cmake` builds it from that tarball once it is
# supplied (`rocmx store add-fixed sha256 ./rocm-cmake_10.1.orig.tar.gz`).
{ stdenv, rocmLib, licenses, wantSource }:
let
  meta = {
    description = "CMake modules for ROCm projects";
    homepage = "https://github.com/ROCm/rocm-cmake";
    license = licenses.mit;
  };
in
if wantSource "rocm-cmake" then
  stdenv.mkDerivation {
    pname = "rocm-cmake";
    version = "10.1";
    src = rocmLib.origSource {
      pname = "rocm-cmake";
      file = "rocm-cmake_10.1.orig.tar.gz";
      sha256 = "41b034780028684a3ee281fcc2b8ed0573a64b55a5ef38d10bb59deddd3d9710";
      size = 89926;
    };
    cmakeFlags = [ "-GNinja" ];
    meta = meta // { debianVersion = "10.1-1"; broken = "never built: its source is not served here"; };
  }
else
  rocmLib.debianBinary {
    pname = "rocm-cmake";
    version = "10.1-1";
    debs = [ "rocm-cmake" ];
    reason = "the mirror does not serve rocm-cmake_10.1.orig.tar.gz";
    inherit meta;
  }
