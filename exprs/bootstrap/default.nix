# The pinned Debian roots every build starts from (locks made by
# `rocmx debian lock --suite sid …`; see README.md "Bootstrap" for the exact
# commands that regenerate them).
#
#   base: build-essential cmake ninja-build pkgconf python3 perl patch
#         patchelf file xz-utils zstd (+ Essential and required)
#   rocm: base plus sid's ROCm compiler seed: clang/lld/llvm 21 (AMDGPU
#         backend), rocm-device-libs-21, comgr, hipcc, the HIP runtime and its
#         development files, rocm-cmake, rocminfo, pkg-rocm-tools.
let
  debian = import ../lib/debian.nix;
in
{
  base = debian.debianRootfs { name = "debian-sid-base"; lock = ./base.lock.json; };
  rocm = debian.debianRootfs { name = "debian-sid-rocm"; lock = ./rocm.lock.json; };
  rocm-dev = debian.debianRootfs { name = "debian-sid-rocm-dev"; lock = ./rocm-dev.lock.json; };
}
