# rocSOLVER: LAPACK on AMD GPUs, from Debian's upstream tarball, compiled for the requested gfx targets.
# Never built to the end on the development machines (see meta.broken).
# rocSOLVER needs {fmt} (header-only, `ROCSOLVER_EMBED_FMT`), which the build
# root lacks: it comes from Debian's binary (./fmt.nix).
#
# A machine that cannot spend those hours takes Debian's binary instead with
# `--set fromBinary=rocsolver` (built by Debian for generic targets that
# cover gfx1100 and most others; the request is checked against them).
{ rocmLib, licenses, gpuTargets, wantBinary, hipcc, clr, rocm-cmake, rocprim, rocblas, rocsparse, fmt }:
let
  meta = {
    description = "rocSOLVER: LAPACK on AMD GPUs";
    homepage = "https://github.com/ROCm/rocSOLVER";
    license = licenses.bsd2;
  };
in
if wantBinary "rocsolver" then
  rocmLib.debianBinary {
    pname = "rocsolver";
    version = "6.4.3-2+b1";
    debs = [ "librocsolver0" "librocsolver-dev" ];
    reason = "asked for with fromBinary: building it from source takes hours per target";
    inherit gpuTargets meta;
    # Debian's build links {fmt} as a shared library (libfmt.so.11), where
    # the source build here embeds it header-only.
    buildInputs = [ rocblas rocsparse fmt clr ];
  }
else
rocmLib.hipLibrary {
  pname = "rocsolver";
  version = "6.4.3";
  src = rocmLib.origSource {
    pname = "rocsolver";
    file = "rocsolver_6.4.3.orig.tar.gz";

    size = 3151118;
    sha256 = "6c2c6019eaf49abb30fc54f09b3d755ebcfbbd30d9b71052aa13bb0cbc26d2bb";
  };
  inherit gpuTargets hipcc;
  buildInputs = [ clr rocm-cmake rocprim rocblas rocsparse fmt ];
  meta = meta // {
    debianVersion = "6.4.3-2";
    broken = "never built to the end: on the development machine (2 cores) it configured and compiled 33 of its 248 build steps for one target in 14 min at nice 5 beside other builds, then was stopped for the session's time; its device compiles take 5-10 min each there, so expect 4-8 h per target";
  };
}
