#!/usr/bin/env bash
# Flake no-op benchmark: `rocmx build .#default` on examples/hello (GNU hello
# on the pinned Debian root: evaluating it reads the root's lock of 177 .debs)
# with everything already realised, next to the no-op `rocmx build
# ./default.nix -A greeting` of the busybox set and Nix 2.8's no-op
# `nix-build` of that file (Nix 2.8 flakes are experimental, so `nix build` is
# not compared). Two flake layouts: the example in place (a git work tree:
# `git ls-files` and `git status` run) and a copy outside git (a plain path
# flake). The first realisation downloads the Debian root (~150 MiB).
#
# Usage: bench/flake.sh            (RUNS=21 by default; ROCMX overrides)
# Needs nix-bin and a static busybox. Medians are printed; nothing is asserted.
set -euo pipefail
cd "$(dirname "$0")/.."
ROCMX=$(realpath "${ROCMX:-target/release/rocmx}")
RUNS=${RUNS:-21}
[[ -x $ROCMX ]] || cargo build --release --bin rocmx
command -v nix-build >/dev/null || { echo "nix-build not found" >&2; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
store="$work/store"
examples/hello/make-bb >/dev/null
mkdir -p "$work/tree/examples"
cp -r examples/hello "$work/tree/examples/"
cp -r exprs "$work/tree/"
copy="$work/tree/examples/hello"

now() { date +%s%N; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
# time_ms DIR CMD...: median wall time of RUNS runs in DIR, in milliseconds.
time_ms() {
  local dir=$1; shift
  local ts=()
  for _ in $(seq 1 "$RUNS"); do
    local t0; t0=$(now)
    (cd "$dir" && "$@" >/dev/null 2>&1) || { echo "failed: $*" >&2; (cd "$dir" && "$@") >&2; exit 1; }
    ts+=("$(( ($(now) - t0) / 1000 ))")
  done
  printf '%s\n' "${ts[@]}" | median | awk '{printf "%.1f", $1/1000}'
}

# Realise everything once.
(cd examples/hello && "$ROCMX" --store "$store" build --no-link .#default >/dev/null 2>&1)
(cd "$copy" && "$ROCMX" --store "$store" build --no-link .#default >/dev/null 2>&1)
(cd "$copy" && "$ROCMX" --store "$store" build --no-link ./default.nix -A greeting >/dev/null 2>&1)
nix-build --no-out-link "$copy/default.nix" -A greeting >/dev/null 2>&1

git_flake=$(time_ms examples/hello "$ROCMX" --store "$store" build --no-link .#default)
path_flake=$(time_ms "$copy" "$ROCMX" --store "$store" build --no-link .#default)
file=$(time_ms "$copy" "$ROCMX" --store "$store" build --no-link ./default.nix -A greeting)
nix=$(time_ms "$copy" nix-build --no-out-link ./default.nix -A greeting)

printf '%-52s %8s %8s\n' "no-op build of examples/hello (median of $RUNS)" "ms" "vs Nix"
for row in "rocmx build .#default (git flake, in place)|$git_flake" \
           "rocmx build .#default (path flake, a copy)|$path_flake" \
           "rocmx build ./default.nix -A greeting|$file" \
           "nix-build ./default.nix -A greeting (Nix 2.8)|$nix"; do
  name=${row%|*} ms=${row#*|}
  printf '%-52s %8s %8.2f\n' "$name" "$ms" "$(echo "$ms / $nix" | bc -l)"
done
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
