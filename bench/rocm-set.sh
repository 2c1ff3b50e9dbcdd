#!/usr/bin/env bash
# The ROCm package set as a whole (issue 15): evaluating it, planning
# `.#pytorch-rocm`, and the no-op build of every package already built, with
# Nix 2.8 in the same run where it has an equivalent.
#
# Usage: STORE=DIR bench/rocm-set.sh
#
# Rows:
#   eval   the set evaluated to pytorch-rocm's drvPath:
#          `rocmx eval --expr E` against `nix-instantiate --readonly-mode
#          --eval --strict -E E`, E = (import ./exprs/rocm { gpuTargets =
#          [ GFX ]; }).pytorch-rocm.drvPath. Both must print a drv path of
#          pytorch-rocm.
#   plan   `rocmx --store STORE build .#pytorch-rocm --gfx GFX --dry-run`
#          (the flake: its source copied, its lock read, the closure queried
#          in the store) against `nix-build --dry-run -E` of the same package
#          with substituters off. Nix's store holds none of the closure, so it
#          plans to build everything; rocmx's holds what STORE holds.
#   no-op  `rocmx --store STORE build --no-link .#P…` of every package of the
#          flake whose closure STORE holds entirely (checked first with
#          --dry-run); no peer (Nix's store holds none of them).
#
# Environment:
#   ROCMX   rocmx binary (default target/release/rocmx under the repository
#           root, built with `cargo build --release` when missing)
#   STORE   a store holding the built layers, e.g. the ROCMX_E2E_STORE of
#           tests/rocm_e2e.rs (default: a fresh temporary store, where the
#           no-op row is skipped and `plan` is planned from nothing)
#   GFX     the target (default gfx1100)
#   RUNS    timed runs per command (default 7)
#   WARMUP  untimed runs per command first (default 1)
#   NIX_INSTANTIATE, NIX_BUILD   the peers (default nix-instantiate, nix-build)
#
# The table shows the median wall time of RUNS runs (commands alternate run
# by run) and rocmx/Nix. Exits 1 if a command fails or the eval outputs are
# not drv paths of pytorch-rocm, 2 for a usage or setup error. A slow ratio
# is reported, never asserted.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
if [[ -n ${ROCMX:-} && $ROCMX == */* && $ROCMX != /* ]]; then ROCMX=$PWD/$ROCMX; fi
if [[ -n ${STORE:-} && $STORE != /* ]]; then STORE=$PWD/$STORE; fi
cd "$root"

RUNS=${RUNS:-7}
WARMUP=${WARMUP:-1}
GFX=${GFX:-gfx1100}
NIX_INSTANTIATE=${NIX_INSTANTIATE:-nix-instantiate}
NIX_BUILD=${NIX_BUILD:-nix-build}
ROCMX=${ROCMX:-target/release/rocmx}

die() { echo "bench/rocm-set.sh: $*" >&2; exit 2; }
[[ $RUNS =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive integer, got '$RUNS'"
[[ $WARMUP =~ ^[0-9]+$ ]] || die "WARMUP must be a non-negative integer, got '$WARMUP'"
[[ $GFX =~ ^gfx[0-9a-z-]+$ ]] || die "GFX must be a gfx target such as gfx1100, got '$GFX'"
for tool in "$NIX_INSTANTIATE" "$NIX_BUILD"; do
    command -v "$tool" >/dev/null || die "'$tool' not found (apt-get install nix-bin)"
done
if ! command -v "$ROCMX" >/dev/null 2>&1; then
    [[ $ROCMX == target/release/rocmx ]] || die "ROCMX '$ROCMX' is not an executable"
    cargo build --release --quiet || die "cargo build --release failed"
fi
[[ $ROCMX == */* ]] && ROCMX=$(cd "$(dirname "$ROCMX")" && pwd)/$(basename "$ROCMX")

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [[ -z ${STORE:-} ]]; then
    STORE=$tmp/store
    echo "STORE is not set: a fresh store, so 'plan' starts from nothing and 'no-op' is skipped" >&2
fi

expr="(import ./exprs/rocm { gpuTargets = [ \"$GFX\" ]; }).pytorch-rocm"
rocmx=("$ROCMX" --store "$STORE")

# run NAME CMD...: one timed run; appends milliseconds to $tmp/NAME.
run() {
    local name=$1 t0 t1
    shift
    t0=$(date +%s%N)
    if ! "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"; then
        echo "bench/rocm-set.sh: '$name' failed: $*" >&2
        tail -5 "$tmp/$name.err" >&2
        exit 1
    fi
    t1=$(date +%s%N)
    echo $(((t1 - t0) / 1000000)) >>"$tmp/$name.ms"
}

median() { sort -n "$tmp/$1.ms" | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

# The packages whose whole closure STORE holds: their build is a no-op.
built=()
if [[ $STORE != "$tmp/store" ]]; then
    names=$("${rocmx[@]}" flake show --json | python3 -c 'import json, sys; print(" ".join(json.load(sys.stdin)["outputs"]["packages"]["x86_64-linux"]))') ||
        die "'rocmx flake show --json' failed"
    for p in $names; do
        plan=$("${rocmx[@]}" build ".#$p" --gfx "$GFX" --dry-run 2>&1) || continue
        if ! grep -q -e "will be built" -e "will be downloaded" <<<"$plan"; then
            built+=(".#$p")
        fi
    done
fi

for ((i = 0; i < WARMUP + RUNS; i++)); do
    if ((i == WARMUP)); then rm -f "$tmp"/*.ms; fi
    run eval-rocmx "$ROCMX" eval --expr "$expr.drvPath"
    run eval-nix "$NIX_INSTANTIATE" --readonly-mode --eval --strict -E "$expr.drvPath"
    run plan-rocmx "${rocmx[@]}" build .#pytorch-rocm --gfx "$GFX" --dry-run
    run plan-nix "$NIX_BUILD" --option substituters '' --dry-run -E "$expr"
    if ((${#built[@]} > 0)); then
        run noop-rocmx "${rocmx[@]}" build --no-link "${built[@]}" --gfx "$GFX"
    fi
done

for side in rocmx nix; do
    grep -q -- '-pytorch-rocm-[^"/]*\.drv"$' "$tmp/eval-$side.out" ||
        { echo "bench/rocm-set.sh: eval-$side printed $(cat "$tmp/eval-$side.out")" >&2; exit 1; }
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
echo
echo "rocmx: $ROCMX; store: $STORE; --gfx $GFX; $RUNS runs (median); load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| row | rocmx ms | Nix 2.8 ms | rocmx/Nix |"
echo "|---|---:|---:|---:|"
for row in eval plan; do
    r=$(median "$row-rocmx")
    n=$(median "$row-nix")
    echo "| $row | $r | $n | $(ratio "$r" "$n") |"
done
if ((${#built[@]} > 0)); then
    echo "| no-op build of ${#built[@]} packages | $(median noop-rocmx) | n/a | n/a |"
    echo
    echo "no-op: ${built[*]}"
else
    echo "| no-op | skipped: STORE holds no package's whole closure | | |"
fi
echo "plan (rocmx): $(grep -E '^these' "$tmp/plan-rocmx.out" "$tmp/plan-rocmx.err" 2>/dev/null | sed 's/^[^:]*://' | tr '\n' ' ')"
echo "plan (Nix 2.8): $(grep -E '^these' "$tmp/plan-nix.out" "$tmp/plan-nix.err" 2>/dev/null | sed 's/^[^:]*://' | tr '\n' ' ')"
