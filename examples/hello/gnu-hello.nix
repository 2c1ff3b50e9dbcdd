# GNU hello from Debian's source package (the upstream .orig tarball plus
# Debian's debian/ directory, whose patch series — empty for hello — is
# applied), built with rocmx's stdenv on the pinned Debian root
# (exprs/bootstrap, base). Its binary's interpreter and RUNPATH point into
# that root, so ./result/bin/hello runs on the host.
{ stdenv, debianSource, licenses }:
stdenv.mkDerivation {
  pname = "hello";
  version = "2.12.3";
  src = debianSource {
    inherit stdenv;
    pname = "hello";
    version = "2.12.3-1";
    orig.hash = "sha256-DV9gFUOC/uELEUocNOeF2LH0kgc64tOm97FHaHs2aqA=";
    debian.hash = "sha256-eqvOV2uo/eAZ+Lf2NhMQAKb5Gjt5fpWbOH8lIK/qre8=";
  };
  doCheck = true;
  meta = {
    description = "GNU hello, the program that greets";
    license = licenses.gpl3Plus;
  };
}
