# The pinned Debian roots every build starts from (locks made by
# `rocmx debian lock --suite sid …`; see README.md "Bootstrap" for the exact
# commands that regenerate them).
#
#   base: build-essential cmake ninja-build pkgconf python3 perl patch
#         patchelf file xz-utils zstd (+ Essential and required)
#   rocm: base plus sid's ROCm compiler seed: clang/lld/llvm 21 (AMDGPU
#         backend), rocm-device-libs-21, comgr, hipcc, the HIP runtime and its
#         development files, rocm-cmake, rocminfo, pkg-rocm-tools.
#   rocm-dev: rocm plus the development files the ROCm libraries build
#         against (LLVM/clang libraries, libdrm, libelf, libnuma, …).
#   pytorch-dev: rocm-dev plus what PyTorch 2.6 builds against: Python 3.13
#         (python3.13-dev: PyTorch 2.6 refuses 3.14, sid's default), pybind11,
#         PyYAML, typing-extensions, setuptools, sympy, and the C++ libraries
#         Debian's pytorch uses instead of the bundled third_party (sleef,
#         cpuinfo, pthreadpool, FP16, FXdiv, psimd, protobuf, ONNX, fmt,
#         nlohmann-json, flatbuffers, Eigen, cpp-httplib, snappy, BLAS/LAPACK).
let
  debian = import ../lib/debian.nix;
in
{
  base = debian.debianRootfs { name = "debian-sid-base"; lock = ./base.lock.json; };
  rocm = debian.debianRootfs { name = "debian-sid-rocm"; lock = ./rocm.lock.json; };
  rocm-dev = debian.debianRootfs { name = "debian-sid-rocm-dev"; lock = ./rocm-dev.lock.json; };
  pytorch-dev = debian.debianRootfs { name = "debian-sid-pytorch-dev"; lock = ./pytorch-dev.lock.json; };
}
