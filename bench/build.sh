#!/usr/bin/env bash
# Build benchmark: 50 chained trivial derivations built from scratch, rocmx
# against Nix 2.8 (`nix-build --option sandbox true --option substituters ''`)
# on the same .nix file, in the same run; then the no-op rebuild (all valid).
#
# Usage: bench/build.sh            (RUNS=5 by default; ROCMX, N override)
# Needs nix-bin and a static busybox (busybox-static). Timings are reported,
# never asserted. Nix builds into /nix/store; every run uses a fresh seed, so
# both sides build 50 new derivations each time (the paths stay in /nix/store).
# The table shows medians; every run's times and the load average follow it,
# since other jobs on the machine (and the filesystem's state: on ext4 without
# a journal, creating files soon after many deletions is slow) move them a lot.
set -euo pipefail
cd "$(dirname "$0")/.."
ROCMX=${ROCMX:-target/release/rocmx}
RUNS=${RUNS:-5}
N=${N:-50}
[[ -x $ROCMX ]] || cargo build --release --bin rocmx
BUSYBOX=$(command -v busybox) || { echo "busybox not found" >&2; exit 2; }
command -v nix-build >/dev/null || { echo "nix-build not found" >&2; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp bench/build/chain.nix "$work/chain.nix"
mkdir -p "$work/bb/bin"
cp "$BUSYBOX" "$work/bb/bin/sh"

now() { date +%s.%N; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
nix_t=() rocmx_t=() noop_t=() nix_noop_t=()
for r in $(seq 1 "$RUNS"); do
  seed="$$-$r-$(date +%s%N)"
  t0=$(now)
  nix-build --option sandbox true --option substituters '' --no-out-link \
    --argstr seed "$seed" --arg n "$N" "$work/chain.nix" >/dev/null 2>"$work/nix.err" \
    || { cat "$work/nix.err" >&2; exit 1; }
  t1=$(now)
  nix_t+=("$(echo "$t1 - $t0" | bc)")
  t0=$(now)
  nix-build --option sandbox true --option substituters '' --no-out-link \
    --argstr seed "$seed" --arg n "$N" "$work/chain.nix" >/dev/null 2>&1
  t1=$(now)
  nix_noop_t+=("$(echo "$t1 - $t0" | bc)")

  store="$work/store-$r"
  t0=$(now)
  "$ROCMX" --store "$store" build --no-link --argstr seed "$seed" --arg n "$N" "$work/chain.nix" \
    >/dev/null 2>"$work/rocmx.err" || { cat "$work/rocmx.err" >&2; exit 1; }
  t1=$(now)
  rocmx_t+=("$(echo "$t1 - $t0" | bc)")
  t0=$(now)
  "$ROCMX" --store "$store" build --no-link --argstr seed "$seed" --arg n "$N" "$work/chain.nix" >/dev/null
  t1=$(now)
  noop_t+=("$(echo "$t1 - $t0" | bc)")
  # Kept until all runs are done, as Nix's paths stay in /nix/store: creating
  # files right after deleting many makes ext4 search its inode bitmaps for
  # inodes not recently deleted, which slowed each later run in turn (one
  # 7-run series: 0.386 s rising to 0.665 s).
done
rm -rf "$work"/store-*

nix_m=$(printf '%s\n' "${nix_t[@]}" | median)
rocmx_m=$(printf '%s\n' "${rocmx_t[@]}" | median)
nix_noop=$(printf '%s\n' "${nix_noop_t[@]}" | median)
rocmx_noop=$(printf '%s\n' "${noop_t[@]}" | median)
printf 'runs: %s, %s chained derivations each\n\n' "$RUNS" "$N"
printf '| job | nix s | rocmx s | ratio | goal |\n|---|---:|---:|---:|---:|\n'
printf '| build %s from scratch | %.3f | %.3f | %.2f | 0.5 |\n' "$N" "$nix_m" "$rocmx_m" "$(echo "$rocmx_m / $nix_m" | bc -l)"
printf '| no-op rebuild (all valid) | %.3f | %.3f | %.2f | rocmx <= 0.020 s |\n' "$nix_noop" "$rocmx_noop" "$(echo "$rocmx_noop / $nix_noop" | bc -l)"
printf '\nper derivation: nix %.1f ms, rocmx %.1f ms\n' "$(echo "$nix_m * 1000 / $N" | bc -l)" "$(echo "$rocmx_m * 1000 / $N" | bc -l)"
printf 'runs (s): nix %s; rocmx %s\n' "${nix_t[*]}" "${rocmx_t[*]}"
printf 'load average: %s before, %s after\n' "$load_before" "$(cut -d' ' -f1-3 /proc/loadavg)"
