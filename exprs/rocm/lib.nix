# Helpers of the ROCm package set (./default.nix): where a package's source
# comes from, taking a package from a pinned Debian binary, and the gfx checks.
# Owns the source policy; the packages themselves live one per file beside it.
#
#   origSource { pname = "rocprim"; file = "rocprim_6.4.3.orig.tar.gz"; sha256 = "…"; size = 868355; }
#     The upstream tarball of a Debian source package, fetched from the pool
#     (mirror://debian/pool/main/…) and checked by its SHA-256 (the hash in
#     Debian's Sources index; `size`, also from there, is what --dry-run
#     shows). When no mirror serves it, the fetch fails with
#     the exact `rocmx store add-fixed` command that supplies it.
#
#   debianBinary { pname; version; debs = [ "librocblas4" "librocblas-dev" ];
#                  gpuTargets ? null; reason; meta; }
#     A package taken from pinned Debian binaries (./binary.lock.json): the
#     named .debs unpacked into $out (usr/ moved to the top, so $out/lib,
#     $out/include, $out/bin), their ELF files pointed into the build root by
#     the stdenv's fixup like any build. `reason` says why it is not built from
#     source and becomes `meta.fromBinary`. With `gpuTargets`, the request is
#     checked against the targets Debian recorded for the binary
#     (X-Rocm-Gpu-Architecture), naming the ones it lacks.
#
#   gfx { pname; supported; requested; }
#     The requested targets the package supports (gpu.nix's intersect), after
#     checking every requested name is a known target.
#
#   rocm64Targets
#     The targets ROCm 6.4's libraries build for by default (rocPRIM's
#     DEFAULT_AMDGPU_TARGETS): what a library that follows them supports.
#
#   hipCmakeFlags targets
#     CMake flags for a HIP library compiled with this set's hipcc for
#     `targets` (GPU_TARGETS and AMDGPU_TARGETS; tests and benchmarks off),
#     through hipCuidLauncher.
#
#   hipCuidLauncher
#     A CMake compiler launcher that gives each HIP compile a compilation-unit
#     id independent of the build directory (see its definition).
#
#   hipLibrary { pname; version; src; gpuTargets; supported ? rocm64Targets;
#                hipcc; buildInputs; cmakeFlags ? [ ]; meta; passthru ? { }; }
#     A compiled HIP library: the requested targets it supports, CMake with
#     hipCmakeFlags, `gpuTargets` in the derivation (so its store path
#     changes with the list), passthru.gpuTargets and meta.gpuTargets.
#
#   hipTest { name; src (a .hip file); targets; buildInputs; libs; }
#     A package's passthru test: the program compiled with hipcc for exactly
#     `targets`, its offload bundle listed with clang-offload-bundler, and the
#     build failing unless the code objects are exactly those targets. The
#     output holds bin/NAME, `targets` (one bundle entry per line) and
#     bin/run-NAME, which runs the program where /dev/kfd exists and otherwise
#     says that no GPU is present and exits 77 (the "skipped" code of
#     automake and autopkgtest). `src` is a .hip file, or a .cpp file of
#     host code calling a library; then `targetCheck` (shell printing one
#     hipv4-amdgcn-amd-amdhsa--TARGET line per target the library holds code
#     for) replaces the bundle listing.
{ stdenv, lock, gpu }:
let
  inherit (builtins) concatStringsSep elem filter fromJSON head listToAttrs map readFile;

  debianLib = import ../lib/debian.nix;
  fetchers = import ../lib/fetchers.nix;

  locked = listToAttrs (map (p: { name = p.package; value = p; }) (fromJSON (readFile lock)).packages);

  poolPrefix = src:
    if builtins.substring 0 3 src == "lib" then builtins.substring 0 4 src else builtins.substring 0 1 src;

  origSource = { pname, file, sha256, size ? null, source ? pname }:
    fetchers.fetchurl {
      url = "mirror://debian/pool/main/${poolPrefix source}/${source}/${file}";
      inherit sha256 size;
      name = file;
      failureHint = "the mirror does not serve ${file} (Debian source package ${source}); get the file from elsewhere (upstream, snapshot.debian.org, a colleague) and supply it with 'rocmx store add-fixed sha256 ./${file}': the build takes it by its hash (sha256 ${sha256})";
    };

  showList = l: "[" + concatStringsSep " " l + "]";

  # Every requested target must be one rocmx knows (the flake parameter
  # checks this too; a file evaluated with --arg does not go through it).
  checkKnown = requested:
    let unknown = filter (t: gpu.byName (gpu.baseName t) == null) requested; in
    if unknown != [ ] then
      throw "unknown gfx target${if builtins.length unknown > 1 then "s" else ""} ${showList unknown}: 'rocmx gfx list' shows the known ones"
    else requested;

  gfx = { pname, supported, requested }:
    gpu.intersect { inherit pname supported; requested = checkKnown requested; };

  # The target names whose code runs on target `t`: itself and its LLVM
  # generic target (gfx1100: gfx1100, gfx11-generic).
  runsOn = t:
    let e = gpu.byName (gpu.baseName t); in
    [ (gpu.baseName t) ] ++ (if e != null && e.generic != null then [ e.generic ] else [ ]);

  # A request is covered by a binary built for one of those names.
  covers = recorded: t: builtins.any (n: elem n recorded) (runsOn t);

  # Debian sid's default target list (pkg-rocm-tools' rocm-target-arch), for
  # binaries whose index entry records none (`assumedTargets` below).
  debianTargets = [ "gfx803" "gfx900" "gfx906" "gfx908" "gfx90a" "gfx1010" "gfx1030" "gfx1100" "gfx1101" "gfx1102" ];

  debianBinary = { pname, version, debs, reason, gpuTargets ? null, assumedTargets ? null, buildInputs ? [ ], propagatedBuildInputs ? [ ], postInstall ? "", meta ? { }, passthru ? { } }:
    let
      entries = map (d: locked.${d} or (throw "${pname}: the Debian package ${d} is not in exprs/rocm/binary.lock.json; add it to the lock (see README \"The ROCm package set\")")) debs;
      recorded0 = concatLists (map (e: e.gfxArchitectures or [ ]) entries);
      recorded = if recorded0 == [ ] && assumedTargets != null then assumedTargets else recorded0;
      concatLists = builtins.concatLists;
      requested = if gpuTargets == null then null else checkKnown gpuTargets;
      lacking = if requested == null then [ ] else filter (t: !(covers recorded t)) requested;
      targets =
        if requested == null then null
        else if recorded == [ ] then throw "${pname}: Debian records no gfx targets for its binary; give assumedTargets"
        else if lacking != [ ] then
          throw "${pname} is taken from Debian's binary (${reason}), which is built for ${showList recorded} and lacks ${showList lacking}; drop ${showList lacking} from --gfx, or build ${pname} from source with --set fromSource=${pname} after supplying its source"
        else requested;
    in
    stdenv.mkDerivation ({
      inherit pname buildInputs propagatedBuildInputs postInstall;
      # The upstream part of the Debian version: "6.4.3-5" -> "6.4.3".
      version = let m = builtins.match "(.*)-[^-]*" version; in if m == null then version else head m;
      debs = map debianLib.fetchDeb entries;
      dontUnpack = "1";
      dontConfigure = "1";
      dontBuild = "1";
      installPhase = ''
        mkdir -p "$out" unpacked
        for d in $debs; do dpkg-deb -x "$d" unpacked; done
        if [ -d unpacked/usr ]; then cp -a unpacked/usr/. "$out"/; fi
        for top in unpacked/*; do
          case "$top" in unpacked/usr) ;; *) cp -a "$top" "$out"/ ;; esac
        done
        # Debian's layout is kept (lib/x86_64-linux-gnu, whose CMake files
        # find the rest relative to themselves); the stdenv looks there too.
        # Documentation and changelogs stay with Debian.
        rm -rf "$out/share/doc" "$out/share/lintian" "$out/share/man"
      '';
      passthru = passthru // { gpuTargets = targets; gfxDependent = gpuTargets != null; };
      meta = meta // {
        # Debian's buildds build under /build/reproducible-path/…, and some
        # binaries record it (assert messages, __FILE__): that is Debian's
        # build directory, not this build's.
        qaExceptions = { build-dir-reference = "Debian's own build path (/build/reproducible-path/…) recorded in its binaries"; } // (meta.qaExceptions or { });
        fromBinary = reason;
        debianVersion = version;
      } // (if recorded == [ ] then { } else { gpuTargets = recorded; });
    } // (if targets == null then { } else { gpuTargets = targets; }));
  rocm64Targets = [ "gfx803" "gfx900" "gfx906" "gfx908" "gfx90a" "gfx942" "gfx1030" "gfx1100" "gfx1101" "gfx1102" "gfx1151" "gfx1200" "gfx1201" ];

  # A CMake compiler launcher for hipcc, run as `hip-cuid COMPILER ARGS…`.
  # clang names each HIP compilation unit (`-cuid`, kept in the objects and
  # the device code as `__hip_cuid_<hash>`, and in the names of static
  # device variables the host reads) after a hash of the input's real path
  # and of every argument, so a library built in another directory differs
  # (`rocmx verify --vary build-path`: rocRAND's library). The launcher
  # gives `-cuid` a hash of the same things with the build directory written
  # as /build: still one id per source file and options, as relocatable
  # device code needs, but the same wherever the build ran. Commands that
  # are not compiles (`-c`), or that choose their own id, run unchanged.
  hipCuidLauncher = stdenv.writeShellScript "hip-cuid-launcher" ''
    top=''${NIX_BUILD_TOP:-/build}
    compile=
    for a in "$@"; do
      case "$a" in
        -c) compile=1 ;;
        -cuid=*|-fuse-cuid=*) exec "$@" ;;
      esac
    done
    [ -n "$compile" ] || exec "$@"
    cuid=$(printf '%s\n' "$PWD" "$@" | sed "s|$top|/build|g" | sha256sum | cut -c1-16)
    exec "$@" "-cuid=$cuid"
  '';

  hipCmakeFlags = targets: [
    "-GNinja"
    "-DCMAKE_CXX_COMPILER=hipcc"
    "-DCMAKE_CXX_COMPILER_LAUNCHER=${hipCuidLauncher}"
    "-DCMAKE_INSTALL_LIBDIR=lib"
    "-DGPU_TARGETS=${gpu.cmakeList targets}"
    "-DAMDGPU_TARGETS=${gpu.cmakeList targets}"
    "-DBUILD_TEST=OFF"
    "-DBUILD_BENCHMARK=OFF"
    "-DBUILD_CLIENTS_TESTS=OFF"
    "-DBUILD_CLIENTS_BENCHMARKS=OFF"
    "-DBUILD_CLIENTS_SAMPLES=OFF"
  ];

  hipLibrary = { pname, version, src, gpuTargets, supported ? rocm64Targets, hipcc, buildInputs ? [ ], propagatedBuildInputs ? [ ], cmakeFlags ? [ ], meta ? { }, passthru ? { }, postPatch ? "", patches ? [ ], buildPhase ? null }:
    let
      targets = gfx { inherit pname supported; requested = gpuTargets; };
    in
    # `patches` and `buildPhase` only when given, so the libraries without
    # them keep their derivations.
    stdenv.mkDerivation ((if patches == [ ] then { } else { inherit patches; })
      // (if buildPhase == null then { } else { inherit buildPhase; }) // {
      inherit pname version src buildInputs propagatedBuildInputs postPatch;
      nativeBuildInputs = [ hipcc ];
      gpuTargets = targets;
      cmakeFlags = hipCmakeFlags targets ++ cmakeFlags;
      passthru = passthru // { gfxDependent = true; gpuTargets = targets; };
      meta = meta // { gpuTargets = supported; };
    });

  # A hipTest targetCheck for a test program without kernels of its own:
  # the gfx targets of the offload bundle in a shared library of the package
  # (`file`, relative to the package).
  # A library built with `--offload-compress` (rocSPARSE) holds one
  # compressed bundle per translation unit, each padded, which the bundler
  # cannot read as one input: every one is cut out and listed. Header:
  # "CCOB", u16 version, u16 method, then the bundle's total size (u32 in
  # version 2, u64 in version 3).
  libraryBundleCheck = pkg: file: ''
    cp ${pkg}/${file} ./lib-bundle-src && chmod u+w ./lib-bundle-src
    objcopy --dump-section .hip_fatbin=lib-fatbin.o ./lib-bundle-src
    if [ "$(head -c 4 lib-fatbin.o)" = CCOB ]; then
      end=0
      for off in $(grep -obUa CCOB lib-fatbin.o | cut -d: -f1); do
        [ "$off" -ge "$end" ] || continue
        ver=$(od -An -t u2 -j $((off + 4)) -N 2 lib-fatbin.o | tr -d ' ')
        case $ver in
          2) size=$(od -An -t u4 -j $((off + 8)) -N 4 lib-fatbin.o | tr -d ' ') ;;
          3) size=$(od -An -t u8 -j $((off + 8)) -N 8 lib-fatbin.o | tr -d ' ') ;;
          *) echo "unknown compressed offload bundle version '$ver' at offset $off" >&2; echo unreadable-bundle; break ;;
        esac
        tail -c +$((off + 1)) lib-fatbin.o | head -c "$size" > one-bundle.o
        clang-offload-bundler --list --type=o --input=one-bundle.o
        end=$((off + size))
      done | grep -v '^host-'
    else
      clang-offload-bundler --list --type=o --input=lib-fatbin.o | grep -v '^host-'
    fi
  '';

  # A hipTest targetCheck for a program on a library taken from Debian's
  # binary, which Debian builds for LLVM generic targets: each requested
  # target whose code is in the library's bundles, as itself or as its
  # generic target (gfx1100 by gfx11-generic). Extra targets in the library
  # are Debian's choice, not a mismatch.
  libraryCoversCheck = pkg: file: targets: ''
    { ${libraryBundleCheck pkg file}
    } | sort -u > lib-targets
  '' + builtins.concatStringsSep "" (map (t: ''
    if grep -qE '^hipv4-amdgcn-amd-amdhsa--(${builtins.concatStringsSep "|" (runsOn t)})(:.*)?$' lib-targets; then echo 'hipv4-amdgcn-amd-amdhsa--${t}'; fi
  '') targets);

  hipTest = { name, src, targets, buildInputs ? [ ], nativeBuildInputs ? [ ], libs ? "", targetCheck ? null }:
    stdenv.mkDerivation {
      inherit name src buildInputs nativeBuildInputs libs;
      targetCheck = if targetCheck == null then "" else targetCheck;
      expected = map (t: "hipv4-amdgcn-amd-amdhsa--${t}") targets;
      dontUnpack = "1";
      dontConfigure = "1";
      buildPhase = ''
        offload=""
        for t in $expected; do offload="$offload --offload-arch=''${t#hipv4-amdgcn-amd-amdhsa--}"; done
        for p in $buildInputs; do
          for l in "$p/lib" "$p/lib/x86_64-linux-gnu"; do
            [ -d "$l" ] && rpath="$rpath -Wl,-rpath,$l"
          done
        done
        case "$src" in *.cpp) cp "$src" ./test.cpp; file=test.cpp ;; *) cp "$src" ./test.hip; file=test.hip ;; esac
        hipcc -O2 $offload "$file" -o "$name" $libs $rpath
        if [ -n "$targetCheck" ]; then
          # A program without kernels of its own: the check lists the
          # library's code objects for the requested targets instead.
          eval "$targetCheck" | sort -u > targets
        else
          cp "$name" ./bundle-src && chmod u+w ./bundle-src
          objcopy --dump-section .hip_fatbin=fatbin.o ./bundle-src
          clang-offload-bundler --list --type=o --input=fatbin.o | grep -v '^host-' | sort > targets
        fi
        printf '%s\n' $expected | sort > expected
        if ! cmp -s targets expected; then
          echo "the code objects of $name are not the requested targets:" >&2
          echo "  built:    $(tr '\n' ' ' < targets)" >&2
          echo "  expected: $(tr '\n' ' ' < expected)" >&2
          exit 1
        fi
        echo "code objects: $(tr '\n' ' ' < targets)"
      '';
      installPhase = ''
        mkdir -p "$out/bin"
        cp "$name" "$out/bin/"
        cp targets "$out/targets"
        cat > "$out/bin/run-$name" <<RUN
        #!/bin/sh
        if [ ! -e /dev/kfd ]; then
          echo "$name: no AMD GPU here (/dev/kfd is missing); compiled for: $(tr '\n' ' ' < targets)" >&2
          exit 77
        fi
        exec "$out/bin/$name" "\$@"
        RUN
        chmod +x "$out/bin/run-$name"
      '';
      meta.description = "test program ${name}, compiled for ${concatStringsSep " " targets}";
    };
in
{
  inherit origSource debianBinary debianTargets gfx checkKnown covers locked rocm64Targets hipCuidLauncher hipCmakeFlags hipLibrary hipTest libraryBundleCheck libraryCoversCheck;
}
