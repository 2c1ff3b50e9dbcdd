# Licences by SPDX id, with the two properties policy needs: `free` (DFSG /
# OSI free: may be built without --allow-nonfree) and `redistributable` (may
# go into a binary cache). A package says `meta.license = licenses.mit;` or a
# list of them.
let
  free = spdxId: fullName: { inherit spdxId fullName; free = true; redistributable = true; };
in
{
  asl20 = free "Apache-2.0" "Apache License 2.0";
  bsd2 = free "BSD-2-Clause" "BSD 2-Clause \"Simplified\" License";
  bsd3 = free "BSD-3-Clause" "BSD 3-Clause \"New\" or \"Revised\" License";
  gpl2Only = free "GPL-2.0-only" "GNU General Public License v2.0 only";
  gpl2Plus = free "GPL-2.0-or-later" "GNU General Public License v2.0 or later";
  gpl3Only = free "GPL-3.0-only" "GNU General Public License v3.0 only";
  gpl3Plus = free "GPL-3.0-or-later" "GNU General Public License v3.0 or later";
  lgpl21Plus = free "LGPL-2.1-or-later" "GNU Lesser General Public License v2.1 or later";
  llvm-exception = free "Apache-2.0 WITH LLVM-exception" "Apache License 2.0 with LLVM Exception";
  mit = free "MIT" "MIT License";
  ncsa = free "NCSA" "University of Illinois/NCSA Open Source License";
  psfl = free "PSF-2.0" "Python Software Foundation License 2.0";
  zlib = free "Zlib" "zlib License";
  # Debian's main archive: every package DFSG-free, under its own licences
  # (each package's /usr/share/doc/PKG/copyright), as a root made of many.
  debianMain = { spdxId = "LicenseRef-Debian-main"; fullName = "Debian main (DFSG-free; per-package licences)"; free = true; redistributable = true; };
  # Not free: AMD's binary blobs and the like.
  unfree = { spdxId = "LicenseRef-unfree"; fullName = "Unfree"; free = false; redistributable = false; };
  unfreeRedistributable = {
    spdxId = "LicenseRef-unfree-redistributable";
    fullName = "Unfree, redistributable";
    free = false;
    redistributable = true;
  };
}
