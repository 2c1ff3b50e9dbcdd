# {fmt}, the C++ formatting library, from Debian's binary: a host library
# rocSOLVER's build needs (header-only: `ROCSOLVER_EMBED_FMT` links
# fmt::fmt-header-only privately, so nothing of it is loaded at run time) and
# the ROCm build root does not carry. Not a ROCm package: it takes no gfx
# targets, and its store path is the same for every target list.
{ rocmLib, licenses }:
rocmLib.debianBinary {
  pname = "fmt";
  version = "11.1.1+ds1-2";
  debs = [ "libfmt-dev" "libfmt11" ];
  reason = "a host library outside the ROCm stack, used header-only";
  meta = {
    description = "{fmt}: a C++ formatting library (header-only use)";
    homepage = "https://fmt.dev";
    license = licenses.mit;
  };
}
