# MAGMA: dense linear algebra on CPU and GPU (HIP build), from Debian's upstream tarball, compiled for the requested gfx targets.
# Never built to the end on the development machines (see meta.broken); it
# configures and compiles on this root with the patch and flags below.
{ rocmLib, licenses, gpuTargets, hipcc, clr, rocblas, hipblas, hipsparse, lapack }:
rocmLib.hipLibrary {
  pname = "magma-rocm";
  version = "2.9.0";
  src = rocmLib.origSource {
    pname = "magma-rocm";
    file = "magma-rocm_2.9.0+ds.orig.tar.xz";

    size = 3578340;
    sha256 = "1b1a65d941dc37890958964652bd606e1c3f7876fd3015f068cc918ba530d12d";
  };
  inherit gpuTargets hipcc;
  buildInputs = [ clr rocblas hipblas hipsparse lapack ];
  # CMake 4 and no rocm-core in the root (see the patch's header).
  patches = [ ./patches/magma-rocm-cmake4.patch ];
  cmakeFlags = [
    "-DMAGMA_ENABLE_HIP=ON"
    # ROCm 6.4.3, as MAGMA encodes it (major * 10000 + minor * 100 + patch).
    "-DROCM_VERSION=60403"
    # MAGMA's Fortran interface and testers need gfortran, which the build
    # root lacks; the C/C++ library does not.
    "-DUSE_FORTRAN=OFF"
    # Its CPU side calls LAPACK and BLAS (Debian's reference builds, see
    # ./lapack.nix for why they are named by file).
    "-DLAPACK_LIBRARIES=${lapack.libraries}"
    # MAGMA's own target variable; its list of known targets stops at
    # gfx1033 and only feeds a variable nothing uses. The code objects'
    # targets come from hip::device (GPU_TARGETS, set for every HIP library).
    "-DGPU_TARGET=${builtins.concatStringsSep " " gpuTargets}"
  ];
  meta = {
    description = "MAGMA: dense linear algebra on CPU and GPU (HIP build)";
    homepage = "https://icl.utk.edu/magma/";
    license = licenses.bsd3;
    debianVersion = "2.9.0+ds-3";
    broken = "never built to the end: on the development machine (2 cores), on Debian's rocSOLVER (--set fromBinary=rocsolver), it configured and compiled 1326 of its 3394 build steps for gfx1100 in 50 min (all 787 host LAPACK drivers, 473 of 597 device-kernel files) beside other builds, then was stopped for the session's time; the rest (the sparse library's 664 files, 653 testers, links) puts a build at an estimated 2.5-3.5 h per target, after rocSPARSE's hour";
  };
}
