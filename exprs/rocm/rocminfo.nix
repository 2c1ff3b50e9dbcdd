# rocminfo and rocm_agent_enumerator. Taken from Debian's binary by default
# (the mirror does not serve rocminfo_7.2.4.orig.tar.gz); linked against this
# set's rocr-runtime (RUNPATH), so `./result/bin/rocminfo` runs the runtime
# built here, and on a machine without a GPU says so and exits non-zero.
# `--set fromSource=rocminfo` builds it from the tarball once supplied
# (`rocmx store add-fixed sha256 ./rocminfo_7.2.4.orig.tar.gz`).
{ stdenv, rocmLib, licenses, wantSource, rocr-runtime }:
let
  meta = {
    description = "ROCm agent information tool (rocminfo, rocm_agent_enumerator)";
    homepage = "https://github.com/ROCm/rocminfo";
    license = licenses.ncsa;
  };
in
if wantSource "rocminfo" then
  stdenv.mkDerivation {
    pname = "rocminfo";
    version = "7.2.4";
    src = rocmLib.origSource {
      pname = "rocminfo";
      file = "rocminfo_7.2.4.orig.tar.gz";
      sha256 = "8c4dbe41e03180311a61a13eb6be51faeb8e0f70850dc984076a0a09262fda5d";
      size = 29403;
    };
    buildInputs = [ rocr-runtime ];
    cmakeFlags = [ "-GNinja" "-DROCM_DIR=${rocr-runtime}" ];
    meta = meta // { debianVersion = "7.2.4-1"; broken = "never built: its source is not served here"; };
  }
else
  rocmLib.debianBinary {
    pname = "rocminfo";
    version = "7.2.4-1";
    debs = [ "rocminfo" ];
    reason = "the mirror does not serve rocminfo_7.2.4.orig.tar.gz";
    buildInputs = [ rocr-runtime ];
    inherit meta;
  }
