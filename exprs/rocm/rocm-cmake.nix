# CMake modules shared by the ROCm projects, taken from Debian's binary (the
# mirror does not serve rocm-cmake_10.1.orig.tar.gz).
{ rocmLib, licenses }:
rocmLib.debianBinary {
  pname = "rocm-cmake";
  version = "10.1-1";
  debs = [ "rocm-cmake" ];
  reason = "the mirror does not serve rocm-cmake_10.1.orig.tar.gz";
  meta = {
    description = "CMake modules for ROCm projects";
    homepage = "https://github.com/ROCm/rocm-cmake";
    license = licenses.mit;
  };
}
