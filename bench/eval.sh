#!/usr/bin/env bash
# Evaluation benchmark: `rocmx eval --strict` against two peers running
# `nix-instantiate --eval --strict` on the same files, in the same run:
# Nix 2.8 (the host's nix-instantiate, Debian bookworm's nix-bin) and
# Nix 2.34 (Debian sid's nix-bin in a chroot this script makes once and keeps
# in a cache directory; see bench/nix234/chroot.sh).
#
# Usage: bench/eval.sh [--refresh] [WORKLOAD...]
#                                 (default: every bench/eval/*.nix)
#   --refresh  make the Nix 2.34 chroot again (same as NIX234_REFRESH=1)
#
# Environment:
#   ROCMX    rocmx binary (default target/release/rocmx under the repository
#            root, built with `cargo build --release` when missing); a
#            relative path is taken from the caller's directory
#   NIX      the Nix 2.8 peer's nix-instantiate (default nix-instantiate)
#   NIX234   0 to leave the Nix 2.34 peer out (default 1); NIX234_CACHE,
#            NIX234_DIR, NIX234_MIRROR, NIX234_REFRESH as in
#            bench/nix234/chroot.sh
#   RUNS     timed runs per evaluator and workload (default 5)
#   WARMUP   untimed runs per evaluator and workload first (default 1)
#   TIMEOUT  seconds before one run is killed and counted as a failure
#            (default 300)
#
# Each run is timed with GNU time (`/usr/bin/time -f '%e %M'`): wall time
# is taken with millisecond resolution around it (falling back to its `%e`),
# peak memory is its `%M` (max RSS). The table reports the median wall time
# and the largest max RSS over the runs. The evaluators take turns run by run
# (Nix 2.8, Nix 2.34, rocmx), so drift in machine load affects all alike.
# Nix 2.34 runs as `chroot DIR /usr/bin/nix-instantiate ...`; chroot(1)
# execs it in its own process, so GNU time's max RSS is nix-instantiate's
# own, and the chroot adds under a millisecond to its wall time (0.6-0.8 ms
# measured with bench/nix234.sh --overhead).
#
# Outputs are checked against rocmx's, for each peer: fib, list, records,
# update, strings, modules and pkgset must print identical results; for drv only the fields that do not
# depend on store paths are compared (`pathBytes` is dropped, as store
# directory and hashes differ by design). The script exits non-zero if an
# evaluator fails (non-zero exit, timeout) or the outputs disagree. A slow
# ratio is reported, never asserted. When the Nix 2.34 chroot cannot be made
# or used (no root, no mmdebstrap, no mirror, ...), its columns say n/a, the
# reason is printed, and the rest runs as before.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
# shellcheck source=bench/nix234/chroot.sh
source "$here/nix234/chroot.sh"
# A relative ROCMX or NIX given by the caller means relative to the caller's
# directory; the default ROCMX is relative to the repository root.
if [[ -n ${ROCMX:-} && $ROCMX == */* && $ROCMX != /* ]]; then ROCMX=$PWD/$ROCMX; fi
if [[ -n ${NIX:-} && $NIX == */* && $NIX != /* ]]; then NIX=$PWD/$NIX; fi
cd "$root"

NIX234=${NIX234:-1}
if (($# > 0)) && [[ $1 == --refresh ]]; then
    NIX234_REFRESH=1
    shift
fi

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
[[ $NIX234 == [01] ]] || die "NIX234 must be 0 or 1, got '$NIX234'"
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
    for w in fib list records update strings drv; do
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
# The chroot's mounts go on every exit, also on error and interruption.
trap 'nix234_unmount; rm -rf "$tmp"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# "2.8" from "nix-instantiate (Nix) 2.8.0".
short_version() { sed -nE 's/.* ([0-9]+\.[0-9]+)(\.[^ ]*)?$/\1/p' <<<"$1" | head -n 1; }

nix_version=$("$NIX" --version 2>/dev/null || echo unknown version)
nix_label=$(short_version "$nix_version")
nix_label=${nix_label:-nix}

# The Nix 2.34 peer: made (or found) and mounted now, or n/a with a reason.
evaluators=(nix)
nix234_label=2.34
nix234_why=
if ((NIX234 == 0)); then
    nix234_why="left out (NIX234=0)"
elif ! nix234_prepare || ! nix234_mount "$root/bench/eval"; then
    nix234_why=$NIX234_REASON
    nix234_unmount
else
    evaluators+=(nix234)
    l=$(short_version "$NIX234_VERSION")
    nix234_label=${l:-$nix234_label}
fi
evaluators+=(rocmx)

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
    case $who in
        nix) cmd=("$NIX" --eval --strict "$file") ;;
        # The same file, as the chroot sees it through the read-only bind.
        nix234) cmd=(chroot "$NIX234_DIR" /usr/bin/nix-instantiate --eval --strict
            "$NIX234_EVAL/$(basename "$file")") ;;
        *) cmd=("$ROCMX" eval --strict "$file") ;;
    esac
    t0=$(now_ms)
    if "$TIME" -f '%e %M' -o "$tmp/$tag.time" \
        timeout -k 10 "$TIMEOUT" "${cmd[@]}" >"$tmp/$tag.out" 2>"$tmp/$tag.err" </dev/null; then
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

echo "rocmx:    $ROCMX"
echo "nix $nix_label:  $(command -v "$NIX") ($nix_version)"
if [[ -z $nix234_why ]]; then
    echo "nix $nix234_label: chroot $NIX234_DIR ($NIX234_VERSION)"
else
    echo "nix $nix234_label: n/a: $nix234_why"
fi
echo "runs:     $RUNS timed (+$WARMUP warm-up) per evaluator and workload, on $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo

label() { case $1 in nix) echo "Nix $nix_label" ;; nix234) echo "Nix $nix234_label" ;; *) echo "$1" ;; esac; }

# Figures of one evaluator: median seconds and peak MiB, or "-" when it
# failed, "n/a" when it did not run at all. A mismatch still shows them.
figures() {
    local who=$1
    if [[ $who == nix234 && -n $nix234_why ]]; then
        echo "n/a n/a n/a"
    elif [[ -n ${failed[$who]:-} || ! -s $tmp/$w.$who.samples ]]; then
        echo "- - -"
    else
        echo "$(median <"$tmp/$w.$who.samples") $(max_col2 <"$tmp/$w.$who.samples")" |
            awk '{ printf "%.3f %.0f %s\n", $1, $2 / 1024, $2 }'
    fi
}

failures=0
rows=()
fmt='| %-8s | %7s | %7s | %7s | %8s | %9s | %8s | %8s | %9s | %8s | %8s | %-5s |'
# Per peer: the ratios of the workloads where it agreed with rocmx, and how
# many those were.
declare -A sum_time=() sum_mem=() agreed=()
for peer in nix nix234; do sum_time[$peer]=; sum_mem[$peer]=; agreed[$peer]=0; done
for w in "${workloads[@]}"; do
    file=$root/bench/eval/$w.nix
    declare -A failed=()
    problems=()
    for who in "${evaluators[@]}"; do : >"$tmp/$w.$who.samples"; done

    for ((i = 0; i < WARMUP; i++)); do
        for who in "${evaluators[@]}"; do
            run_one "$who" "$file" "$w.$who.warm" >/dev/null || true
        done
    done
    rm -f "$tmp/$w".*.warm.samples

    for ((i = 1; i <= RUNS; i++)); do
        for who in "${evaluators[@]}"; do
            # A peer that failed sits out the rest of this workload.
            [[ -z ${failed[$who]:-} ]] || continue
            if run_one "$who" "$file" "$w.$who"; then
                rc=0
            else
                rc=$?
            fi
            if ((rc != 0)); then
                failed[$who]=1
                problems+=("FAIL($(label "$who"))")
                echo "FAIL: $(label "$who") on $w (exit $rc$( ((rc == 124 || rc == 137)) && echo ", timed out after ${TIMEOUT}s"))" >&2
                sed -n '1,20p' "$tmp/$w.$who.err" | sed 's/^/    /' >&2
            elif [[ $i == 1 ]]; then
                # Every run must print the same result as the first.
                cp "$tmp/$w.$who.out" "$tmp/$w.$who.first"
            elif ! cmp -s "$tmp/$w.$who.out" "$tmp/$w.$who.first"; then
                failed[$who]=1
                problems+=("UNSTABLE($(label "$who"))")
                echo "FAIL: $(label "$who") printed different results across runs of $w" >&2
            fi
        done
        # Without rocmx there is nothing to compare against.
        [[ -z ${failed[rocmx]:-} ]] || break
    done

    # Each peer against rocmx.
    declare -A same=()
    if [[ -z ${failed[rocmx]:-} ]]; then
        for peer in "${evaluators[@]}"; do
            [[ $peer != rocmx && -z ${failed[$peer]:-} ]] || continue
            if cmp -s <(normalise "$w" "$tmp/$w.$peer.first") <(normalise "$w" "$tmp/$w.rocmx.first"); then
                same[$peer]=1
                agreed[$peer]=$((agreed[$peer] + 1))
            else
                problems+=("MISMATCH($(label "$peer"))")
                {
                    echo "MISMATCH on $w:"
                    echo "  $(label "$peer"): $(head -c 400 "$tmp/$w.$peer.first")"
                    echo "  rocmx:    $(head -c 400 "$tmp/$w.rocmx.first")"
                } >&2
            fi
        done
    fi
    if ((${#problems[@]} == 0)); then
        status=ok
    else
        status=$(IFS=' '; echo "${problems[*]}")
        failures=$((failures + 1))
    fi

    read -r rt rmib rk < <(figures rocmx)
    cells=()
    declare -A tr=() mr=()
    for peer in nix nix234; do
        read -r pt pmib pk < <(figures "$peer")
        if [[ $pt == n/a || $rt == - || $pt == - ]]; then
            tr[$peer]=$pt mr[$peer]=$pt
            [[ $rt == - && $pt != n/a ]] && tr[$peer]=- mr[$peer]=-
        else
            read -r tr[$peer] mr[$peer] < <(awk -v pt="$pt" -v rt="$rt" -v pk="$pk" -v rk="$rk" 'BEGIN {
                printf "%s %s\n", (pt > 0) ? sprintf("%.2f", rt / pt) : "n/a", (pk > 0) ? sprintf("%.2f", rk / pk) : "n/a" }')
        fi
        if [[ -n ${same[$peer]:-} && ${tr[$peer]} != n/a && ${mr[$peer]} != n/a ]]; then
            sum_time[$peer]+=" ${tr[$peer]}"
            sum_mem[$peer]+=" ${mr[$peer]}"
        fi
        cells+=("$pt" "$pmib")
    done
    rows+=("$(printf "$fmt" \
        "$w" "${cells[0]}" "${cells[2]}" "$rt" "${tr[nix]}" "${tr[nix234]}" \
        "${cells[1]}" "${cells[3]}" "$rmib" "${mr[nix]}" "${mr[nix234]}" "$status")")
    unset failed same tr mr
done

printf "$fmt\n" \
    workload "$nix_label s" "$nix234_label s" "rocmx s" "time/$nix_label" "time/$nix234_label" \
    "$nix_label MiB" "$nix234_label MiB" "rocmx MiB" "mem/$nix_label" "mem/$nix234_label" check
echo "|----------|--------:|--------:|--------:|---------:|----------:|---------:|---------:|----------:|---------:|---------:|-------|"
printf '%s\n' "${rows[@]}"
echo

# One summary line per peer: how many workloads meet each goal, and the
# geometric means of the ratios rocmx/peer.
n=${#workloads[@]}
for peer in nix nix234; do
    if [[ $peer == nix234 && -n $nix234_why ]]; then
        echo "summary against $(label nix234): n/a ($nix234_why)"
        continue
    fi
    awk -v who="$(label "$peer")" -v n="$n" -v ok="${agreed[$peer]}" -v ts="${sum_time[$peer]}" -v ms="${sum_mem[$peer]}" 'BEGIN {
        k = split(ts, t, " "); split(ms, m, " ");
        fast = 0; lean = 0; lt = 0; lm = 0;
        for (i = 1; i <= k; i++) {
            if (t[i] + 0 <= 0.5) fast++;
            if (m[i] + 0 < 1) lean++;
            lt += log(t[i] > 0 ? t[i] : 1e-9); lm += log(m[i] > 0 ? m[i] : 1e-9);
        }
        gt = k ? sprintf("%.2f", exp(lt / k)) : "n/a";
        gm = k ? sprintf("%.2f", exp(lm / k)) : "n/a";
        printf "summary against %s: %d/%d workloads ok; time <= 0.5x on %d/%d, less peak memory on %d/%d; geometric mean rocmx/%s: time %s, memory %s\n",
            who, ok, n, fast, k, lean, k, who, gt, gm
    }'
done

((failures == 0)) || exit 1
