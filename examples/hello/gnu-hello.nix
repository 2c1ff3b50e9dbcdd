# GNU hello from Debian's .orig tarball, built with rocmx's stdenv on the
# pinned Debian root (exprs/bootstrap, base). Its binary's interpreter and
# RUNPATH point into that root, so ./result/bin/hello runs on the host.
{ stdenv, fetchurl, licenses }:
stdenv.mkDerivation {
  pname = "hello";
  version = "2.12.3";
  src = fetchurl {
    url = "mirror://debian/pool/main/h/hello/hello_2.12.3.orig.tar.gz";
    hash = "sha256-DV9gFUOC/uELEUocNOeF2LH0kgc64tOm97FHaHs2aqA=";
  };
  doCheck = true;
  meta = {
    description = "GNU hello, the program that greets";
    license = licenses.gpl3Plus;
  };
}
