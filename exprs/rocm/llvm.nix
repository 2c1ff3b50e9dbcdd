# LLVM/clang 21 with the AMDGPU backend, as the build root carries it
# (Debian's llvm-toolchain-21 binaries: clang-21, lld-21, llvm-21). Building
# LLVM itself from source is a multi-hour job on two cores that this set does
# not attempt; the root's copy is the seed that everything here compiles with.
# This package makes the toolchain's bin/ directory a store path of its own
# (links into the root), so that the closure graph and `rocmx licenses` show it.
{ stdenv, licenses }:
stdenv.mkDerivation {
  pname = "llvm";
  version = "21.1.8";
  dontUnpack = "1";
  dontConfigure = "1";
  dontBuild = "1";
  installPhase = ''
    mkdir -p "$out/bin"
    for t in clang clang++ lld ld.lld llvm-objcopy llvm-objdump llvm-readelf llvm-mc clang-offload-bundler llvm-ar; do
      ln -s "$rootfs/usr/lib/llvm-21/bin/$t" "$out/bin/$t"
    done
  '';
  meta = {
    description = "LLVM and clang 21 with the AMDGPU backend (Debian's llvm-toolchain-21 in the build root)";
    homepage = "https://llvm.org";
    license = licenses.llvm-exception;
    debianVersion = "1:21.1.8-14";
    fromBinary = "LLVM is the seed: Debian's llvm-toolchain-21 binaries in the build root (exprs/bootstrap rocm-dev)";
  };
}
