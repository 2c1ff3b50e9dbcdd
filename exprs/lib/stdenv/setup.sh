# rocmx's generic builder: the phases of a package build, in POSIX sh so that
# it runs under dash (the Debian root) and busybox alike.
#
# A derivation made by mkDerivation runs `sh -e setup.sh`. The phases are
#   unpack patch configure build check install fixup
# each a shell function `<name>Phase`, replaced by the derivation attribute
# `<name>Phase` when set, skipped with `dont<Name> = "1"`, and surrounded by
# the hooks `pre<Name>` / `post<Name>` (shell code in attributes). `phases`
# replaces the list; `buildCommand` replaces everything. Each phase announces
# itself with Nix's marker `@nix {"action":"setPhase","phase":"…"}`, which the
# progress display shows. Parallelism follows ROCMX_BUILD_CORES (--cores).

set -e

: "${out:?setup.sh: no \$out}"
NIX_BUILD_CORES=${ROCMX_BUILD_CORES:-1}
export NIX_BUILD_CORES
export HOME=/homeless-shelter
export TMPDIR=${TMPDIR:-/build}
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-1}
export LC_ALL=C
NIX_STORE=${NIX_STORE:-/rocmx/store}

# Inputs: each input's bin/ goes on PATH; lib/pkgconfig, include and lib are
# offered to the usual tools, and inputs with CMake packages go on
# CMAKE_PREFIX_PATH (colon-separated in the environment, like PATH).
# Debian's multiarch directory (lib/x86_64-linux-gnu, as in packages taken
# from Debian binaries) counts as lib/.
_multiarch=x86_64-linux-gnu
# Inputs are the derivation's nativeBuildInputs, buildInputs and
# propagatedBuildInputs, and, transitively, what each of them propagates
# (listed in its nix-support/propagated-build-inputs, as in nixpkgs).
_inputs=""
_addInput() {
    case " $_inputs " in *" $1 "*) return 0 ;; esac
    _inputs="$_inputs $1"
    if [ -f "$1/nix-support/propagated-build-inputs" ]; then
        for _q in $(cat "$1/nix-support/propagated-build-inputs"); do _addInput "$_q"; done
    fi
}
for p in ${nativeBuildInputs:-} ${buildInputs:-} ${propagatedBuildInputs:-}; do _addInput "$p"; done
for p in $_inputs; do
    [ -d "$p/bin" ] && PATH="$p/bin:$PATH"
    for _l in "$p/lib" "$p/lib/$_multiarch"; do
        [ -d "$_l/pkgconfig" ] && PKG_CONFIG_PATH="$_l/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
        [ -d "$_l" ] && LIBRARY_PATH="$_l${LIBRARY_PATH:+:$LIBRARY_PATH}"
    done
    [ -d "$p/share/pkgconfig" ] && PKG_CONFIG_PATH="$p/share/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
    [ -d "$p/include" ] && CPATH="$p/include${CPATH:+:$CPATH}"
    [ -d "$p/lib/cmake" ] || [ -d "$p/share/cmake" ] || [ -d "$p/lib/$_multiarch/cmake" ] \
        && CMAKE_PREFIX_PATH="$p${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
done
export PATH PKG_CONFIG_PATH CPATH LIBRARY_PATH CMAKE_PREFIX_PATH

runHook() {
    eval "_hook=\${$1:-}"
    if [ -n "$_hook" ]; then
        eval "$_hook"
    fi
}

unpackPhase() {
    [ -n "${src:-}" ] || { echo "unpackPhase: no src (set src, or dontUnpack = \"1\")" >&2; exit 1; }
    if [ -d "$src" ]; then
        # -p keeps the store's uniform mtimes, so make sees generated files
        # (configure, aclocal.m4) as up to date.
        cp -pR "$src" ./source
        chmod -R u+w ./source
        sourceRoot=${sourceRoot:-source}
    else
        mkdir unpack
        case "$src" in
            *.tar.gz|*.tgz) (cd unpack && tar -xzf "$src") ;;
            *.tar.xz|*.txz) (cd unpack && xz -dc "$src" | tar -xf -) ;;
            *.tar.bz2) (cd unpack && tar -xjf "$src") ;;
            *.tar.zst) (cd unpack && zstd -dc "$src" | tar -xf -) ;;
            *.tar) (cd unpack && tar -xf "$src") ;;
            *.zip) (cd unpack && unzip -q "$src") ;;
            *) echo "unpackPhase: do not know how to unpack '$src'" >&2; exit 1 ;;
        esac
        if [ -z "${sourceRoot:-}" ]; then
            set -- unpack/*
            if [ "$#" -eq 1 ] && [ -d "$1" ]; then
                sourceRoot=$1
            else
                sourceRoot=unpack
            fi
        fi
    fi
    cd "$sourceRoot"
    # Compilers record source paths (__FILE__, debug info); map the build
    # directory away so outputs do not depend on where the build ran.
    _map="-ffile-prefix-map=$PWD=."
    export CFLAGS="${CFLAGS:--O2 -g} $_map" CXXFLAGS="${CXXFLAGS:--O2 -g} $_map"
}

patchPhase() {
    for p in $patches; do
        echo "applying patch $p"
        case "$p" in
            *.gz) gzip -dc "$p" | patch -p1 ;;
            *.xz) xz -dc "$p" | patch -p1 ;;
            *) patch -p1 < "$p" ;;
        esac
    done
}

configurePhase() {
    if [ -x ./configure ]; then
        ./configure --prefix="$out" $configureFlags
    elif [ -f CMakeLists.txt ]; then
        cmake -S . -B build -DCMAKE_INSTALL_PREFIX="$out" -DCMAKE_BUILD_TYPE=Release \
            -DCMAKE_SKIP_BUILD_RPATH=ON $cmakeFlags
        cmakeBuildDir=build
    else
        echo "configurePhase: no ./configure or CMakeLists.txt; nothing to configure"
    fi
}

buildPhase() {
    if [ -n "${cmakeBuildDir:-}" ]; then
        cmake --build "$cmakeBuildDir" -j "$NIX_BUILD_CORES"
    elif [ -f Makefile ] || [ -f makefile ] || [ -f GNUmakefile ]; then
        make -j "$NIX_BUILD_CORES" $makeFlags $buildFlags
    else
        echo "buildPhase: no Makefile; nothing to build"
    fi
}

checkPhase() {
    if [ -n "${cmakeBuildDir:-}" ]; then
        (cd "$cmakeBuildDir" && ctest -j "$NIX_BUILD_CORES" --output-on-failure)
    else
        make -j "$NIX_BUILD_CORES" $makeFlags ${checkTarget:-check}
    fi
}

installPhase() {
    if [ -n "${cmakeBuildDir:-}" ]; then
        cmake --install "$cmakeBuildDir"
    else
        make $makeFlags $installFlags install
    fi
}

# With a Debian root: every dynamic host ELF file of the output gets the
# root's dynamic loader as its interpreter and, in its RUNPATH, the output's
# own and its inputs' (propagated ones included) library directories (lib and lib/<multiarch>, those that
# exist) and then the root's (entries outside the store are dropped), so
# `./result/bin/x` runs on the host and the root becomes a runtime reference
# of the output. GPU code objects (AMDGPU ELF files) are left alone.
patchElfToRoot() {
    command -v patchelf >/dev/null 2>&1 || { echo "fixup: no patchelf in the root; ELF files left as they are"; return 0; }
    _triplet=$(cc -dumpmachine 2>/dev/null || echo x86_64-linux-gnu)
    _libdir="$rootfs/usr/lib/$_triplet"
    _interp=""
    for _l in "$_libdir"/ld-linux*.so.*; do [ -e "$_l" ] && _interp=$_l && break; done
    _own=""
    for _p in "$out" $_inputs; do
        for _l in "$_p/lib" "$_p/lib/$_triplet"; do
            [ -d "$_l" ] && _own="$_own${_own:+:}$_l"
        done
    done
    find "$out" -type f | while read -r f; do
        # e_machine 0x3e: x86-64 (AMDGPU code objects are 0xe0).
        [ "$(od -An -tx1 -j18 -N2 "$f" 2>/dev/null | tr -d ' ')" = 3e00 ] || continue
        patchelf --print-rpath "$f" >/dev/null 2>&1 || continue
        chmod u+w "$f"
        if [ -n "$_interp" ] && patchelf --print-interpreter "$f" >/dev/null 2>&1; then
            patchelf --set-interpreter "$_interp" "$f"
        fi
        _keep=""
        for _e in $(patchelf --print-rpath "$f" | tr ':' ' '); do
            case "$_e" in
                "$NIX_STORE"/*|'$ORIGIN'*) _keep="$_keep${_keep:+:}$_e" ;;
            esac
        done
        _keep="$_keep${_keep:+:}$_own"
        patchelf --set-rpath "$_keep${_keep:+:}$_libdir" "$f"
        echo "fixup: $f: interpreter and RUNPATH point into the root"
    done
}

# Debug information is stripped from ELF files (as Nix does by default;
# `dontStrip = true` keeps it).
stripDebug() {
    command -v strip >/dev/null 2>&1 || return 0
    find "$out" -type f | while read -r f; do
        case "$(od -An -c -N4 "$f" 2>/dev/null | tr -d ' ')" in
            177ELF) chmod u+w "$f"; strip --strip-debug "$f" 2>/dev/null || true ;;
        esac
    done
}

fixupPhase() {
    if [ -n "${propagatedBuildInputs:-}" ]; then
        mkdir -p "$out/nix-support"
        printf '%s\n' $propagatedBuildInputs > "$out/nix-support/propagated-build-inputs"
    fi
    if [ "${dontStrip:-}" != 1 ]; then
        stripDebug
    fi
    if [ -n "${rootfs:-}" ] && [ "${dontPatchELF:-}" != 1 ]; then
        patchElfToRoot
    fi
    runHook fixupHook
}

# A phase name with its first letter upper-cased: unpack → Unpack (for the
# dontUnpack, preUnpack and postUnpack attributes).
_capital() {
    case "$1" in
        unpack) echo Unpack ;; patch) echo Patch ;; configure) echo Configure ;;
        build) echo Build ;; check) echo Check ;; install) echo Install ;;
        fixup) echo Fixup ;;
        *) _first=$(printf %s "$1" | cut -c1 | tr '[:lower:]' '[:upper:]')
           echo "$_first$(printf %s "$1" | cut -c2-)" ;;
    esac
}

genericBuild() {
    if [ -n "${buildCommand:-}" ]; then
        echo '@nix {"action":"setPhase","phase":"buildCommand"}'
        eval "$buildCommand"
        return
    fi
    for phase in ${phases:-unpack patch configure build check install fixup}; do
        case "$phase" in
            check) [ "${doCheck:-}" = 1 ] || continue ;;
        esac
        _cap=$(_capital "$phase")
        eval "_dont=\${dont$_cap:-}"
        [ "$_dont" = 1 ] && continue
        echo "@nix {\"action\":\"setPhase\",\"phase\":\"${phase}Phase\"}"
        runHook "pre$_cap"
        eval "_custom=\${${phase}Phase:-}"
        if [ -n "$_custom" ] && [ "$_custom" != "${phase}Phase" ]; then
            eval "$_custom"
        else
            "${phase}Phase"
        fi
        runHook "post$_cap"
    done
}

genericBuild
