#!/usr/bin/env bash
# Every performance goal of issue 15 in one run: runs bench/eval.sh (Nix 2.8
# and Nix 2.34 as peers), bench/build.sh and bench/store.sh one after the
# other on the same machine, then prints one table of every ratio against its
# goal. The three scripts' own tables (and every run's times) are kept in
# OUT for the record.
#
# Usage: bench/goals.sh
#
# Environment:
#   ROCMX       rocmx binary, passed on to the three scripts
#   RUNS        timed runs per evaluation workload (default 5)
#   STORE_RUNS  timed runs of `store add` (default 5)
#   BUILD_RUNS  paired runs of the 50-chain (default 7, the issue's minimum)
#   OUT         directory for the three reports (default: a new mktemp -d,
#               kept and named at the end)
#   NIX234      0 to leave the Nix 2.34 peer out (its column says n/a)
#
# The goals (issue 15): every evaluation workload <= 0.5x of both Nix
# versions (the `//` fold <= 0.2x; `records`, sorting sets with a lambda, is
# held to the list goal), modules and pkgset also with less peak
# memory than both; `store add` <= 0.4x `nix-store --add`; 50 chained
# sandboxed builds <= 0.5x `nix-build --option sandbox true`; the no-op
# rebuild of the 50 <= 20 ms. Exits 1 when one of the scripts fails (a
# command failed or outputs disagree), 2 for a setup error; a missed goal
# never changes the exit status.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [[ -n ${ROCMX:-} && $ROCMX == */* && $ROCMX != /* ]]; then export ROCMX=$PWD/$ROCMX; fi
OUT=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/rocmx-goals.XXXXXX")}
mkdir -p "$OUT" || { echo "bench/goals.sh: cannot create $OUT" >&2; exit 2; }

status=0
run() {
    local name=$1
    shift
    echo "bench/goals.sh: $name ..." >&2
    if ! "$@" >"$OUT/$name.txt" 2>&1; then
        echo "bench/goals.sh: $name failed; see $OUT/$name.txt" >&2
        status=1
    fi
}
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
run eval env RUNS="${RUNS:-5}" "$here/eval.sh"
# Builds before `store add`: store.sh creates and deletes over 20,000 files,
# and ext4 without a journal (as on these machines) then avoids reusing the
# deleted inodes for one to six minutes, searching past them for every new
# one. That slowed the 50-chain run right after it (both tools; rocmx's more,
# its sandbox creating more inodes per build) from 0.40 s to 0.55 s.
run build env RUNS="${BUILD_RUNS:-7}" "$here/build.sh"
run store env RUNS="${STORE_RUNS:-5}" "$here/store.sh"
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

# field FILE PATTERN N: the N-th |-separated field (1-based, trimmed) of the
# first table row whose first field matches PATTERN; "n/a" when absent.
field() {
    awk -F'|' -v pat="$2" -v n="$3" '
        { k = $2; gsub(/^ +| +$/, "", k) }
        k ~ pat { v = $(n + 1); gsub(/^ +| +$/, "", v); print v; found = 1; exit }
        END { if (!found) print "n/a" }' "$1"
}
# met RATIO GOAL: yes/no/n/a.
met() {
    awk -v r="$1" -v g="$2" 'BEGIN {
        if (r !~ /^[0-9.]+$/) { print "n/a"; exit }
        print (r + 0 <= g + 0) ? "yes" : "no" }'
}
both() { # both VERDICT VERDICT: the goal holds against both peers
    if [[ $1 == yes && ($2 == yes || $2 == n/a) ]]; then echo yes
    elif [[ $1 == n/a ]]; then echo n/a
    else echo no; fi
}

rows=()
row() { rows+=("$(printf '| %s | %s | %s | %s | %s |' "$@")"); }
for w in fib list records update strings drv modules pkgset; do
    goal=0.5
    [[ $w == update ]] && goal=0.2
    t28=$(field "$OUT/eval.txt" "^$w\$" 5)
    t234=$(field "$OUT/eval.txt" "^$w\$" 6)
    verdict=$(both "$(met "$t28" "$goal")" "$(met "$t234" "$goal")")
    row "eval $w: time" "<= $goal" "$t28" "$t234" "$verdict"
    if [[ $w == modules || $w == pkgset ]]; then
        m28=$(field "$OUT/eval.txt" "^$w\$" 10)
        m234=$(field "$OUT/eval.txt" "^$w\$" 11)
        # "less peak memory": strictly below 1.
        mv=$(both "$(met "$m28" 0.999)" "$(met "$m234" 0.999)")
        row "eval $w: peak memory" "< 1" "$m28" "$m234" "$mv"
    fi
done
add=$(field "$OUT/store.txt" "^store add" 4)
row "store add (599 MiB of real files)" "<= 0.4" "$add" "-" "$(met "$add" 0.4)"
chain=$(field "$OUT/build.txt" "^build [0-9]+ from scratch" 4)
row "50 chained sandboxed builds" "<= 0.5" "$chain" "-" "$(met "$chain" 0.5)"
noop=$(field "$OUT/build.txt" "^no-op rebuild" 3)
noop_ms=$(awk -v s="$noop" 'BEGIN { if (s ~ /^[0-9.]+$/) printf "%.0f ms", s * 1000; else print "n/a" }')
noop_met=$(awk -v s="$noop" 'BEGIN { if (s !~ /^[0-9.]+$/) print "n/a"; else print (s <= 0.020) ? "yes" : "no" }')
row "no-op rebuild of the 50" "<= 20 ms" "$noop_ms" "-" "$noop_met"

echo "rocmx: ${ROCMX:-target/release/rocmx}; $(nproc) cores; load average $load_before before, $load_after after"
echo
echo "| job | goal | rocmx/Nix 2.8 | rocmx/Nix 2.34 | met |"
echo "|---|---|---:|---:|---|"
printf '%s\n' "${rows[@]}"
echo
echo "met: $(printf '%s\n' "${rows[@]}" | grep -c '| yes |$') of ${#rows[@]} goals"
echo "reports: $OUT/eval.txt $OUT/store.txt $OUT/build.txt"
exit "$status"
