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

# Inputs: each input's bin/ goes on PATH; lib/pkgconfig, include and lib are
# offered to the usual tools.
for p in $nativeBuildInputs $buildInputs; do
    [ -d "$p/bin" ] && PATH="$p/bin:$PATH"
    [ -d "$p/lib/pkgconfig" ] && PKG_CONFIG_PATH="$p/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
    [ -d "$p/share/pkgconfig" ] && PKG_CONFIG_PATH="$p/share/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
    [ -d "$p/include" ] && CPATH="$p/include${CPATH:+:$CPATH}"
    [ -d "$p/lib" ] && LIBRARY_PATH="$p/lib${LIBRARY_PATH:+:$LIBRARY_PATH}"
    [ -d "$p/lib/cmake" ] || [ -d "$p/share/cmake" ] && CMAKE_PREFIX_PATH="$p${CMAKE_PREFIX_PATH:+;$CMAKE_PREFIX_PATH}"
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
        cp -R "$src" ./source
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

fixupPhase() {
    # Outputs must not point back into the build directory; QA checks and
    # RUNPATH fixing are done by the hook the stdenv supplies, if any.
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
