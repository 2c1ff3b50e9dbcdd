#!/usr/bin/env bash
# Evaluation benchmark: `rocmx eval --strict` against Nix 2.8's
# `nix-instantiate --eval --strict`, on the same files, in the same run.
#
# Usage: bench/eval.sh [WORKLOAD...]      (default: every bench/eval/*.nix)
#
# Environment:
#   ROCMX    rocmx binary (default target/release/rocmx under the repository
#            root, built with `cargo build --release` when missing); a
#            relative path is taken from the caller's directory
#   NIX      nix-instantiate binary (default nix-instantiate)
#   RUNS     timed runs per evaluator and workload (default 5)
#   WARMUP   untimed runs per evaluator and workload first (default 1)
#   TIMEOUT  seconds before one run is killed and counted as a failure
#            (default 300)
#
# Each run is timed with GNU time (`/usr/bin/time -f '%e %M'`): wall time
# is taken with millisecond resolution around it (falling back to its `%e`),
# peak memory is its `%M` (max RSS). The table reports the median wall time
# and the largest max RSS over the runs. Nix and rocmx runs alternate, so
# drift in machine load affects both alike.
#
# Outputs are checked: fib, list, update and strings must print identical
# results; for drv only the fields that do not depend on store paths are
# compared (`pathBytes` is dropped, as store directory and hashes differ by
# design). The script exits non-zero if an evaluator fails (non-zero exit,
# timeout) or the outputs disagree. A slow ratio is reported, never
# asserted.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
# A relative ROCMX or NIX given by the caller means relative to the caller's
# directory; the default ROCMX is relative to the repository root.
if [[ -n ${ROCMX:-} && $ROCMX == */* && $ROCMX != /* ]]; then ROCMX=$PWD/$ROCMX; fi
if [[ -n ${NIX:-} && $NIX == */* && $NIX != /* ]]; then NIX=$PWD/$NIX; fi
cd "$root"

RUNS=${RUNS:-5}
WARMUP=${WARMUP:-1}
TIMEOUT=${TIMEOUT:-300}
NIX=${NIX:-nix-instantiate}
default_rocmx=target/release/rocmx
ROCMX=${ROCMX:-$default_rocmx}
TIME=/usr/bin/time

die() { echo "bench/eval.sh: $*" >&2; exit 2; }

[[ $RUNS =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive integer, got '$RUNS'"
[[ $WARMUP =~ ^[0-9]+$ ]] || die "WARMUP must be a non-negative integer, got '$WARMUP'"
[[ -x $TIME ]] || die "GNU time is needed at $TIME (apt-get install time)"
command -v timeout >/dev/null || die "coreutils 'timeout' is needed"
command -v "$NIX" >/dev/null || die "'$NIX' not found (apt-get install nix-bin)"

if ! command -v "$ROCMX" >/dev/null 2>&1; then
    if [[ $ROCMX == "$default_rocmx" ]]; then
        echo "bench/eval.sh: $ROCMX is missing; running cargo build --release" >&2
        cargo build --release --bin rocmx >&2
        [[ -x $ROCMX ]] || die "cargo build --release did not produce $ROCMX"
    else
        die "ROCMX=$ROCMX is not an executable"
    fi
fi
# Absolute, for the report.
if [[ $ROCMX == */* ]]; then ROCMX=$(cd "$(dirname "$ROCMX")" && pwd)/$(basename "$ROCMX"); fi

if (($# > 0)); then
    workloads=("$@")
else
    # The issue's order first, then any other workload files.
    workloads=()
    for w in fib list update strings drv; do
        [[ -f bench/eval/$w.nix ]] && workloads+=("$w")
    done
    for f in bench/eval/*.nix; do
        w=$(basename "$f" .nix)
        case " ${workloads[*]} " in *" $w "*) ;; *) workloads+=("$w") ;; esac
    done
fi
for w in "${workloads[@]}"; do
    [[ -f bench/eval/$w.nix ]] || die "no workload bench/eval/$w.nix"
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/rocmx-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

now_ms() {
    # EPOCHREALTIME (bash 5) gives microseconds; fall back to date.
    if [[ -n ${EPOCHREALTIME:-} ]]; then
        local t=${EPOCHREALTIME/[.,]/}
        echo $((10#$t / 1000))
    else
        date +%s%3N
    fi
}

# run_one EVALUATOR FILE TAG: one run; writes $tmp/TAG.{out,err} and appends
# "seconds kib" to $tmp/TAG.samples. Returns the evaluator's exit status.
run_one() {
    local who=$1 file=$2 tag=$3 rc t0 t1
    local -a cmd
    if [[ $who == nix ]]; then
        cmd=("$NIX" --eval --strict "$file")
    else
        cmd=("$ROCMX" eval --strict "$file")
    fi
    t0=$(now_ms)
    if "$TIME" -f '%e %M' -o "$tmp/$tag.time" \
        timeout "$TIMEOUT" "${cmd[@]}" >"$tmp/$tag.out" 2>"$tmp/$tag.err" </dev/null; then
        rc=0
    else
        rc=$?
    fi
    t1=$(now_ms)
    # GNU time writes "Command exited with non-zero status N" before the
    # figures when the command fails; the figures are the last line.
    local e m
    read -r e m < <(tail -n 1 "$tmp/$tag.time")
    if [[ ! $m =~ ^[0-9]+$ ]]; then m=0; fi
    local secs
    secs=$(awk -v a="$t0" -v b="$t1" -v e="$e" \
        'BEGIN { d = (b - a) / 1000; if (d <= 0) d = e + 0; printf "%.3f", d }')
    echo "$secs $m" >>"$tmp/$tag.samples"
    return "$rc"
}

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
max_col2() { awk 'BEGIN { m = 0 } $2 > m { m = $2 } END { print m }'; }

# Normalise output for comparison: drv's store-path-dependent field goes.
normalise() {
    local w=$1 f=$2
    if [[ $w == drv ]]; then
        sed -E 's/pathBytes = [0-9]+; ?//' "$f"
    else
        cat "$f"
    fi
}

echo "rocmx: $ROCMX"
echo "nix:   $(command -v "$NIX") ($("$NIX" --version 2>/dev/null || echo unknown version))"
echo "runs:  $RUNS timed (+$WARMUP warm-up) per evaluator and workload, on $(nproc) cores"
echo

failures=0
rows=()
summary_time=()
summary_mem=()
for w in "${workloads[@]}"; do
    file=$root/bench/eval/$w.nix
    status=ok
    for who in nix rocmx; do : >"$tmp/$w.$who.samples"; done

    for ((i = 0; i < WARMUP; i++)); do
        for who in nix rocmx; do
            run_one "$who" "$file" "$w.$who.warm" >/dev/null || true
        done
    done
    rm -f "$tmp/$w".*.warm.samples

    for ((i = 1; i <= RUNS; i++)); do
        for who in nix rocmx; do
            if run_one "$who" "$file" "$w.$who"; then
                rc=0
            else
                rc=$?
            fi
            if ((rc != 0)); then
                status="FAIL($who)"
                echo "FAIL: $who on $w (exit $rc$( ((rc == 124)) && echo ", timed out after ${TIMEOUT}s"))" >&2
                sed -n '1,20p' "$tmp/$w.$who.err" | sed 's/^/    /' >&2
                break 2
            fi
            # Every run must print the same result as the first.
            if [[ $i == 1 ]]; then
                cp "$tmp/$w.$who.out" "$tmp/$w.$who.first"
            elif ! cmp -s "$tmp/$w.$who.out" "$tmp/$w.$who.first"; then
                status="FAIL($who unstable)"
                echo "FAIL: $who printed different results across runs of $w" >&2
                break 2
            fi
        done
    done

    if [[ $status == ok ]]; then
        if ! cmp -s <(normalise "$w" "$tmp/$w.nix.first") <(normalise "$w" "$tmp/$w.rocmx.first"); then
            status=MISMATCH
            {
                echo "MISMATCH on $w:"
                echo "  nix:   $(head -c 400 "$tmp/$w.nix.first")"
                echo "  rocmx: $(head -c 400 "$tmp/$w.rocmx.first")"
            } >&2
        fi
    fi
    [[ $status == ok ]] || failures=$((failures + 1))

    # A failed run has no meaningful figures; a mismatch still shows them.
    if [[ $status != FAIL* && -s $tmp/$w.nix.samples && -s $tmp/$w.rocmx.samples ]]; then
        nt=$(median <"$tmp/$w.nix.samples")
        rt=$(median <"$tmp/$w.rocmx.samples")
        nm=$(max_col2 <"$tmp/$w.nix.samples")
        rm_=$(max_col2 <"$tmp/$w.rocmx.samples")
        read -r tr mr nmib rmib < <(awk -v nt="$nt" -v rt="$rt" -v nm="$nm" -v rm="$rm_" 'BEGIN {
            tr = (nt > 0) ? sprintf("%.2f", rt / nt) : "n/a";
            mr = (nm > 0) ? sprintf("%.2f", rm / nm) : "n/a";
            printf "%s %s %.0f %.0f\n", tr, mr, nm / 1024, rm / 1024 }')
        rows+=("$(printf '| %-8s | %8.3f | %8.3f | %10s | %8s | %9s | %9s | %-11s |' \
            "$w" "$nt" "$rt" "$tr" "$nmib" "$rmib" "$mr" "$status")")
        if [[ $status == ok ]]; then
            summary_time+=("$tr")
            summary_mem+=("$mr")
        fi
    else
        rows+=("$(printf '| %-8s | %8s | %8s | %10s | %8s | %9s | %9s | %-11s |' \
            "$w" - - - - - - "$status")")
    fi
done

printf '| %-8s | %8s | %8s | %10s | %8s | %9s | %9s | %-11s |\n' \
    workload "nix s" "rocmx s" "time ratio" "nix MiB" "rocmx MiB" "mem ratio" check
echo "|----------|---------:|---------:|-----------:|---------:|----------:|----------:|-------------|"
printf '%s\n' "${rows[@]}"
echo

# One-line summary: how many workloads meet each goal, and geometric means.
n=${#workloads[@]}
awk -v n="$n" -v fails="$failures" -v ts="${summary_time[*]:-}" -v ms="${summary_mem[*]:-}" 'BEGIN {
    k = split(ts, t, " "); split(ms, m, " ");
    fast = 0; lean = 0; lt = 0; lm = 0;
    for (i = 1; i <= k; i++) {
        if (t[i] + 0 <= 0.5) fast++;
        if (m[i] + 0 < 1) lean++;
        lt += log(t[i] > 0 ? t[i] : 1e-9); lm += log(m[i] > 0 ? m[i] : 1e-9);
    }
    gt = k ? sprintf("%.2f", exp(lt / k)) : "n/a";
    gm = k ? sprintf("%.2f", exp(lm / k)) : "n/a";
    printf "summary: %d/%d workloads ok; time <= 0.5x nix on %d/%d, less peak memory on %d/%d; geometric mean rocmx/nix: time %s, memory %s\n",
        n - fails, n, fast, k, lean, k, gt, gm
}'

((failures == 0)) || exit 1
