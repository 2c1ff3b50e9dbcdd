# rocminfo and rocm_agent_enumerator, taken from Debian's binary (the mirror
# does not serve rocminfo_7.2.4.orig.tar.gz). Linked against this set's
# rocr-runtime (RUNPATH), so `./result/bin/rocminfo` runs the runtime built
# here; on a machine without a GPU it says so and exits non-zero.
{ rocmLib, licenses, rocr-runtime }:
rocmLib.debianBinary {
  pname = "rocminfo";
  version = "7.2.4-1";
  debs = [ "rocminfo" ];
  reason = "the mirror does not serve rocminfo_7.2.4.orig.tar.gz";
  buildInputs = [ rocr-runtime ];
  meta = {
    description = "ROCm agent information tool (rocminfo, rocm_agent_enumerator)";
    homepage = "https://github.com/ROCm/rocminfo";
    license = licenses.ncsa;
  };
}
