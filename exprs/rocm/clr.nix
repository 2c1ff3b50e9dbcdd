# The HIP runtime (clr: libamdhip64, hiprtc, the HIP headers), taken from
# Debian's binary: its source needs the second upstream tarball
# rocm-hipamd_6.4.3.orig-hip.tar.gz, which the mirror does not serve.
# Its RUNPATH puts this set's rocr-runtime and comgr (built from source)
# before the build root's, so the runtime runs on them; it propagates them and
# the device libraries, which its CMake package (hip-config) looks for.
{ rocmLib, licenses, wantSource, rocr-runtime, comgr, rocm-device-libs }:
if wantSource "clr" then
  throw "clr from source needs both rocm-hipamd_6.4.3.orig.tar.gz and rocm-hipamd_6.4.3.orig-hip.tar.gz (sha256 3def2459ca9258f04d35d1d3b0173237cea2b963814886bb8af6a0e317718d3d); no expression builds it from source yet"
else
rocmLib.debianBinary {
  pname = "clr";
  version = "6.4.3-5";
  debs = [ "libamdhip64-6" "libamdhip64-dev" "libhiprtc6" "libhiprtc-builtins6" ];
  reason = "the mirror does not serve rocm-hipamd_6.4.3.orig-hip.tar.gz, the HIP half of its source";
  propagatedBuildInputs = [ rocr-runtime comgr rocm-device-libs ];
  # hip-config.cmake checks that <prefix>/bin exists (Debian's /usr/bin).
  postInstall = "mkdir -p $out/bin";
  meta = {
    description = "HIP runtime for AMD GPUs (libamdhip64, hiprtc) and the HIP headers";
    homepage = "https://github.com/ROCm/clr";
    license = licenses.mit;
  };
}
