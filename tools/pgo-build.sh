#!/usr/bin/env bash
# Profile-guided release build of rocmx (issue 15).
#
# Builds rocmx twice, apart from `cargo build --release`: an instrumented
# binary, which runs a training workload and records which branches and
# calls are hot; then the release binary again, compiled with that profile
# (rustc's `-Cprofile-use`), so that LLVM lays out, inlines and orders code for the
# paths that really run. The evaluator, a tree-walking interpreter whose
# time is spread over many small functions, gains most (bench/README.md,
# "eighteenth session": `modules` about a fifth less time).
#
# Usage: tools/pgo-build.sh [--install]
#   --install   also copy the result to $CARGO_HOME/bin/rocmx (~/.cargo/bin),
#               where `cargo install --path .` puts the plain build
#
# Output: target/pgo/release/rocmx (the profile: target/pgo-gen/rocmx.profdata).
# The plain `cargo build --release` (target/release/rocmx) is not touched:
# both builds keep their own target directories, since changing RUSTFLAGS
# rebuilds every crate.
#
# The training workload is held apart from what bench/ measures, so the
# benchmarks still say how rocmx does on code it was not tuned for:
#   - the Nix language conformance suite (../shared/conformance, or
#     ROCMX_CONFORMANCE_DIR), when present: every builtin and construct;
#   - the ROCm package set of exprs/rocm, every package's drvPath for three
#     gfx target lists: a real package set;
#   - `store add`, `hash path`, `store dump | store restore` and `store verify` of a tree
#     of this repository's sources, and 30 chained sandboxed builds with a
#     static busybox (when `busybox` is installed and the sandbox works here):
#     so the store and the builder are not left as never-run (cold) code.
# None of it touches a store but a temporary one.
#
# Needs: `llvm-profdata` of the same LLVM as rustc (`rustup component add
# llvm-tools`). Two release builds: about 10 minutes on two cores.
# Exits 1 when a build, the training or the merge fails, 2 for a setup error.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

die() { echo "tools/pgo-build.sh: $*" >&2; exit 2; }
fail() { echo "tools/pgo-build.sh: $*" >&2; exit 1; }

install=0
for a in "$@"; do
    case $a in
        --install) install=1 ;;
        -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown argument '$a' (usage: tools/pgo-build.sh [--install])" ;;
    esac
done

command -v cargo >/dev/null || die "cargo not found"
sysroot=$(rustc --print sysroot) || die "rustc not found"
profdata=$(find "$sysroot/lib/rustlib" -path '*/bin/llvm-profdata' -type f 2>/dev/null | head -n 1)
[[ -n $profdata ]] || die "llvm-profdata not found under $sysroot; install it with: rustup component add llvm-tools"
if [[ -n ${RUSTFLAGS:-} ]]; then
    echo "tools/pgo-build.sh: note: RUSTFLAGS='$RUSTFLAGS' is added to both builds" >&2
fi

gen_dir=$root/target/pgo-gen
use_dir=$root/target/pgo
raw=$gen_dir/profraw
profile=$gen_dir/rocmx.profdata

# --- 1. the instrumented binary ----------------------------------------------
echo "tools/pgo-build.sh: building the instrumented binary (target/pgo-gen)" >&2
rm -rf "$raw"
mkdir -p "$raw"
RUSTFLAGS="${RUSTFLAGS:+$RUSTFLAGS }-Cprofile-generate=$raw" CARGO_TARGET_DIR=$gen_dir \
    cargo build --release --locked --bin rocmx || fail "the instrumented build failed"
bin=$gen_dir/release/rocmx

# --- 2. training ---------------------------------------------------------------
work=$(mktemp -d "${TMPDIR:-/tmp}/rocmx-pgo.XXXXXX")
cleanup() { chmod -R u+w "$work" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
store=$work/store
export ROCMX_STORE=$store

echo "tools/pgo-build.sh: training" >&2
conf=${ROCMX_CONFORMANCE_DIR:-$root/../shared/conformance}
if [[ -x $conf/run-nix-lang ]]; then
    "$conf/run-nix-lang" "$bin" eval >"$work/conformance.log" 2>&1 \
        || echo "tools/pgo-build.sh: note: the conformance run reported failures (see its log); its profile is kept" >&2
    tail -n 1 "$work/conformance.log" >&2
else
    echo "tools/pgo-build.sh: note: no conformance suite at $conf (set ROCMX_CONFORMANCE_DIR); training without it" >&2
fi

for targets in '"gfx1100"' '"gfx90a" "gfx942"' '"gfx1030" "gfx1100" "gfx1201"'; do
    "$bin" eval --strict --expr "
      let s = import ./exprs/rocm { gpuTargets = [ $targets ]; };
      in map (n: (builtins.tryEval (s.\${n}.drvPath or \"\")).success) (builtins.attrNames s)" \
        >/dev/null 2>"$work/rocm.err" || { cat "$work/rocm.err" >&2; fail "evaluating exprs/rocm for [ $targets ] failed"; }
done

tree=$work/tree
mkdir -p "$tree"
cp -r lang/src store/src builder/src exprs "$tree/"
"$bin" store add "$tree" >/dev/null || fail "store add of the training tree failed"
"$bin" hash path "$tree" >/dev/null || fail "hash path failed"
"$bin" hash path --type sha256 --base16 "$tree" >/dev/null || fail "hash path --type sha256 failed"
"$bin" store dump "$tree" | "$bin" store restore "$work/restored" || fail "store dump | store restore failed"
"$bin" store verify --check-contents >/dev/null || fail "store verify failed"

if busybox=$(command -v busybox); then
    mkdir -p "$work/chain/bb/bin"
    cp bench/build/chain.nix "$work/chain/"
    cp "$busybox" "$work/chain/bb/bin/sh"
    for seed in 1 2; do
        if ! "$bin" build --no-link --argstr seed "pgo-$seed" --arg n 30 "$work/chain/chain.nix" \
            >/dev/null 2>"$work/build.err"; then
            echo "tools/pgo-build.sh: note: sandboxed builds fail here, trained without them:" >&2
            head -n 5 "$work/build.err" >&2
            break
        fi
    done
else
    echo "tools/pgo-build.sh: note: no busybox (apt-get install busybox-static): trained without builds" >&2
fi

shopt -s nullglob
raws=("$raw"/*.profraw)
((${#raws[@]} > 0)) || fail "the training wrote no profile into $raw"
"$profdata" merge -o "$profile" "${raws[@]}" || fail "llvm-profdata merge failed"

# --- 3. the optimised binary ------------------------------------------------------
echo "tools/pgo-build.sh: building with the profile (target/pgo)" >&2
RUSTFLAGS="${RUSTFLAGS:+$RUSTFLAGS }-Cprofile-use=$profile" CARGO_TARGET_DIR=$use_dir \
    cargo build --release --locked --bin rocmx || fail "the build with the profile failed"
out=$use_dir/release/rocmx
"$out" --version >/dev/null || fail "$out does not run"
echo "$out"

if ((install)); then
    dest=${CARGO_HOME:-$HOME/.cargo}/bin
    mkdir -p "$dest"
    cp "$out" "$dest/rocmx.new" && mv -f "$dest/rocmx.new" "$dest/rocmx"
    echo "tools/pgo-build.sh: installed $dest/rocmx" >&2
fi
