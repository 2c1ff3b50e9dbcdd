#!/usr/bin/env bash
# Store benchmark: `rocmx hash path` and (once it exists) `rocmx store add`
# against Nix 2.8 and b3sum, on a tree of real files built for the run, in the
# same run.
#
# Usage: bench/store.sh
#
# Environment:
#   ROCMX     rocmx binary (default target/release/rocmx under the repository
#             root, built with `cargo build --release` when missing); a
#             relative path is taken from the caller's directory
#   SIZE_MIB  size of the tree's regular files in MiB (default 600)
#   SRC       directories whose files are copied into the tree, in order, until
#             SIZE_MIB is reached (default "/usr/lib/x86_64-linux-gnu /usr/share")
#   TREE      use this existing tree instead of building one (not deleted)
#   RUNS      timed runs per command (default 5)
#   WARMUP    untimed runs per command first (default 1)
#   TIMEOUT   seconds before one run is killed and counted as a failure
#             (default 300)
#   NIX_STORE_BIN, NIX_HASH_BIN, B3SUM_BIN   the peers (default nix-store, nix-hash, b3sum)
#
# Every run's wall time is taken with millisecond resolution; the table shows
# the median over RUNS and the ratio rocmx/reference. Runs of the commands
# alternate, so drift in machine load affects all alike. Outputs are checked:
# the sha256 digest must equal nix-hash's, the BLAKE3 digest must equal b3sum's
# over `nix-store --dump`. The script exits 1 if a command fails or a digest
# disagrees, 2 for a usage or setup error. A slow ratio is reported, never
# asserted.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
if [[ -n ${ROCMX:-} && $ROCMX == */* && $ROCMX != /* ]]; then ROCMX=$PWD/$ROCMX; fi
if [[ -n ${TREE:-} && $TREE != /* ]]; then TREE=$PWD/$TREE; fi
cd "$root"

RUNS=${RUNS:-5}
WARMUP=${WARMUP:-1}
TIMEOUT=${TIMEOUT:-300}
SIZE_MIB=${SIZE_MIB:-600}
SRC=${SRC:-/usr/lib/x86_64-linux-gnu /usr/share}
NIX_STORE_BIN=${NIX_STORE_BIN:-nix-store}
NIX_HASH_BIN=${NIX_HASH_BIN:-nix-hash}
B3SUM_BIN=${B3SUM_BIN:-b3sum}
default_rocmx=target/release/rocmx
ROCMX=${ROCMX:-$default_rocmx}

die() { echo "bench/store.sh: $*" >&2; exit 2; }

[[ $RUNS =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive integer, got '$RUNS'"
[[ $WARMUP =~ ^[0-9]+$ ]] || die "WARMUP must be a non-negative integer, got '$WARMUP'"
[[ $SIZE_MIB =~ ^[1-9][0-9]*$ ]] || die "SIZE_MIB must be a positive integer, got '$SIZE_MIB'"
command -v timeout >/dev/null || die "coreutils 'timeout' is needed"
command -v tar >/dev/null || die "'tar' is needed to copy the tree"
for tool in "$NIX_STORE_BIN" "$NIX_HASH_BIN"; do
    command -v "$tool" >/dev/null || die "'$tool' not found (apt-get install nix-bin)"
done
command -v "$B3SUM_BIN" >/dev/null || die "'$B3SUM_BIN' not found (apt-get install b3sum)"

if ! command -v "$ROCMX" >/dev/null 2>&1; then
    if [[ $ROCMX == "$default_rocmx" ]]; then
        echo "bench/store.sh: $ROCMX is missing; running cargo build --release" >&2
        cargo build --release --bin rocmx >&2
        [[ -x $ROCMX ]] || die "cargo build --release did not produce $ROCMX"
    else
        die "ROCMX=$ROCMX is not an executable"
    fi
fi
if [[ $ROCMX == */* ]]; then ROCMX=$(cd "$(dirname "$ROCMX")" && pwd)/$(basename "$ROCMX"); fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/rocmx-bench-store.XXXXXX")
nix_added=() # paths nix-store --add created, deleted on exit
cleanup() {
    local p
    for p in "${nix_added[@]}"; do
        "$NIX_STORE_BIN" --delete "$p" >/dev/null 2>&1 || true
    done
    chmod -R u+w "$tmp" 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT

now_ms() {
    if [[ -n ${EPOCHREALTIME:-} ]]; then
        local t=${EPOCHREALTIME/[.,]/}
        echo $((10#$t / 1000))
    else
        date +%s%3N
    fi
}
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# ---------------------------------------------------------------------------
# The tree: regular files and symlinks copied from SRC until about SIZE_MIB
# of regular files, keeping their relative paths (one subdirectory per
# source). Hard links are copied as separate files, so the tree really holds
# that much data.

if [[ -n ${TREE:-} ]]; then
    [[ -d $TREE ]] || die "TREE=$TREE is not a directory"
    tree=$TREE
else
    tree=$tmp/rocmx-bench-tree
    mkdir "$tree"
    budget=$((SIZE_MIB * 1024 * 1024))
    total=0
    for src in $SRC; do
        ((total < budget)) || break
        [[ -d $src ]] || die "SRC directory '$src' does not exist"
        list=$tmp/list.$(basename "$src")
        : >"$list"
        # Regular files and symlinks, in directory order so that whole
        # directories are copied; only readable files are taken.
        while IFS= read -r -d '' rec; do
            size=${rec%% *}
            path=${rec#* }
            [[ -L $src/$path || -r $src/$path ]] || continue
            if [[ ! -L $src/$path ]]; then
                # A file that would overshoot the budget by more than 2 % (a
                # 110 MiB libLLVM, say) is skipped in favour of smaller ones.
                ((total + size <= budget + budget / 50)) || continue
                total=$((total + size))
            fi
            printf '%s\0' "$path" >>"$list"
            ((total < budget - budget / 100)) || break
        done < <(find "$src" -mindepth 1 \( -type f -o -type l \) -printf '%s %P\0' 2>/dev/null)
        dest=$tree/$(basename "$src")
        mkdir -p "$dest"
        tar -C "$src" --null --no-recursion --hard-dereference --ignore-failed-read -T "$list" -cf - 2>/dev/null \
            | tar -C "$dest" -xf - || die "copying files from $src failed"
    done
    sync
fi

echo "rocmx:  $ROCMX"
echo "nix:    $(command -v "$NIX_HASH_BIN") ($("$NIX_HASH_BIN" --version 2>/dev/null || echo unknown version)), $(command -v "$NIX_STORE_BIN")"
echo "b3sum:  $(command -v "$B3SUM_BIN") ($("$B3SUM_BIN" --version 2>/dev/null || echo unknown version))"
echo "tree:   $tree: $(find "$tree" -type f | wc -l) files, $(find "$tree" -type l | wc -l) symlinks, $(find "$tree" -type d | wc -l) directories, $(du -sb "$tree" | cut -f1) bytes"
nar_size=$("$NIX_STORE_BIN" --dump "$tree" | wc -c)
echo "NAR:    $nar_size bytes ($((nar_size / 1024 / 1024)) MiB)"
echo "runs:   $RUNS timed (+$WARMUP warm-up) per command, on $(nproc) cores"
echo

# ---------------------------------------------------------------------------
# Commands. Each prints the digest (or store path) on stdout, nothing else.

cmd_nix_sha256() { "$NIX_HASH_BIN" --type sha256 "$tree"; }
cmd_rocmx_sha256() { "$ROCMX" hash path --type sha256 --base16 "$tree"; }
cmd_nar_b3sum() { "$NIX_STORE_BIN" --dump "$tree" | "$B3SUM_BIN" --no-names; }
cmd_rocmx_blake3() { "$ROCMX" hash path --base16 "$tree"; }
export -f cmd_nix_sha256 cmd_rocmx_sha256 cmd_nar_b3sum cmd_rocmx_blake3
export tree ROCMX NIX_HASH_BIN NIX_STORE_BIN B3SUM_BIN

# ---------------------------------------------------------------------------
# SECTION store add: `rocmx store add` against `nix-store --add`.
# The pair runs only when `rocmx store add --help` succeeds and does not say
# "not implemented", and a trial add of a small tree succeeds.
#
# Both sides copy the whole tree on every run:
# - rocmx adds TREE into a new, empty `--store` directory each run;
# - Nix adds, each run, a new hard-link copy of TREE (`cp -al`, made outside
#   the timing; same files, same page cache) holding one extra small file with
#   unique content, so that its store path is new and nothing is found valid.
#   The command prints only the name part of the path, which is stable.
# Nothing is deleted between runs (rocmx's stores and Nix's paths go on exit):
# on ext4 without a journal, creating inodes where many were deleted in the
# last 30 s is slow (`recently_deleted`), which would charge one side for the
# other's clean-up. After each add, `sync` (untimed) writes its data back, so
# that the next run, and rocmx's `syncfs`, do not pay for the previous one.

add_enabled=0
add_reason=""
if help=$("$ROCMX" store add --help 2>&1) && ! grep -qi "not implemented" <<<"$help"; then
    mkdir -p "$tmp/probe-src"
    echo probe >"$tmp/probe-src/file"
    if probe=$("$ROCMX" --store "$tmp/probe-store" store add "$tmp/probe-src" 2>&1) \
        && ! grep -qi "not implemented" <<<"$probe"; then
        add_enabled=1
    else
        add_reason="trial add failed: $(head -n 1 <<<"$probe")"
    fi
    chmod -R u+w "$tmp/probe-store" 2>/dev/null || true
    rm -rf "$tmp/probe-store" "$tmp/probe-src"
else
    add_reason="rocmx store add --help failed or says not implemented"
fi
store_seq=0
nix_seq=0
export NIX_ADD_LAST=$tmp/nix_add.path
cmd_rocmx_add() { "$ROCMX" --store "$ADD_STORE" store add "$tree"; }
cmd_nix_add() {
    local p
    p=$("$NIX_STORE_BIN" --add "$NIX_TREE") || return
    echo "$p" >"$NIX_ADD_LAST"
    echo "${p#/nix/store/*-}"
}
export -f cmd_rocmx_add cmd_nix_add
# The hard-link copy of the tree that the next `nix-store --add` adds (untimed).
next_nix_tree() {
    nix_seq=$((nix_seq + 1))
    local dir=$tmp/nix-tree.$nix_seq
    mkdir "$dir"
    # Hard links need one filesystem; a TREE elsewhere is copied (untimed).
    if ! cp -al "$tree" "$dir/$(basename "$tree")" 2>/dev/null; then
        rm -rf "$dir/$(basename "$tree")"
        cp -a "$tree" "$dir/$(basename "$tree")" || die "copying the tree for nix-store --add failed"
    fi
    printf 'rocmx bench run %s %s %s\n' "$nix_seq" "$$" "${EPOCHREALTIME:-$(date +%s%N)}" \
        >"$dir/$(basename "$tree")/.rocmx-bench-unique"
    export NIX_TREE=$dir/$(basename "$tree")
}
if ((add_enabled)); then
    next_nix_tree
    sync
fi
# Before each rocmx add run (untimed): a fresh, not yet existing store root.
before_rocmx_add() {
    store_seq=$((store_seq + 1))
    export ADD_STORE=$tmp/add-store.$store_seq
}
# After each add run (untimed): keep what it created until exit; write it back.
after_rocmx_add() {
    sync
}
after_nix_add() {
    nix_added+=("$(cat "$NIX_ADD_LAST")")
    next_nix_tree
    sync
}
# END SECTION store add
# ---------------------------------------------------------------------------

tasks=(nix_sha256 rocmx_sha256 nar_b3sum rocmx_blake3)
((add_enabled)) && tasks+=(nix_add rocmx_add)

# run_one TASK: one timed run of cmd_TASK (in a `bash -c`, the same small
# overhead for every command); output in $tmp/TASK.out, time appended to
# $tmp/TASK.samples. Returns the command's status.
run_one() {
    local task=$1 rc t0 t1
    if [[ $task == rocmx_add ]]; then before_rocmx_add; fi
    t0=$(now_ms)
    if timeout "$TIMEOUT" bash -o pipefail -c "cmd_$task" >"$tmp/$task.out" 2>"$tmp/$task.err" </dev/null; then
        rc=0
    else
        rc=$?
    fi
    t1=$(now_ms)
    awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f\n", (b - a) / 1000 }' >>"$tmp/$task.samples"
    if [[ $task == *_add ]] && ((rc == 0)); then "after_$task"; fi
    return "$rc"
}

failures=0
broke=0 # a run failed: the loop stopped and the figures are incomplete
for t in "${tasks[@]}"; do : >"$tmp/$t.samples"; done
for ((i = 0; i < WARMUP; i++)); do
    for t in "${tasks[@]}"; do run_one "$t" || true; done
done
for t in "${tasks[@]}"; do : >"$tmp/$t.samples"; done
for ((i = 1; i <= RUNS; i++)); do
    for t in "${tasks[@]}"; do
        if ! run_one "$t"; then
            echo "FAIL: $t (run $i)" >&2
            sed -n '1,20p' "$tmp/$t.err" | sed 's/^/    /' >&2
            failures=$((failures + 1)) broke=1
            break 2
        fi
        if [[ $i == 1 ]]; then
            cp "$tmp/$t.out" "$tmp/$t.first"
        elif ! cmp -s "$tmp/$t.out" "$tmp/$t.first"; then
            echo "FAIL: $t printed different results across runs" >&2
            failures=$((failures + 1)) broke=1
            break 2
        fi
    done
done

check() { # check A B: the two outputs agree
    if cmp -s "$tmp/$1.first" "$tmp/$2.first"; then
        echo ok
    else
        echo MISMATCH
        {
            echo "MISMATCH between $1 and $2:"
            echo "  $1: $(head -c 200 "$tmp/$1.first")"
            echo "  $2: $(head -c 200 "$tmp/$2.first")"
        } >&2
    fi
}

row() { # row LABEL REFTASK ROCMXTASK GOAL CHECK
    local label=$1 ref=$2 ours=$3 goal=$4 status=$5 rt ot ratio
    if [[ -s $tmp/$ref.samples && -s $tmp/$ours.samples ]] && ((broke == 0)); then
        rt=$(median <"$tmp/$ref.samples")
        ot=$(median <"$tmp/$ours.samples")
        ratio=$(awk -v r="$rt" -v o="$ot" 'BEGIN { print (r > 0) ? sprintf("%.2f", o / r) : "n/a" }')
        met=$(awk -v x="$ratio" -v g="$goal" 'BEGIN { if (g == "-") print "-"; else print (x + 0 <= g + 0) ? "yes" : "no" }')
        printf '| %-44s | %8.3f | %8.3f | %6s | %6s | %-4s | %-8s |\n' "$label" "$rt" "$ot" "$ratio" "$goal" "$met" "$status"
    else
        printf '| %-44s | %8s | %8s | %6s | %6s | %-4s | %-8s |\n' "$label" - - - "$goal" - "${status:-FAIL}"
    fi
}

if ((broke == 0)); then
    c_sha=$(check nix_sha256 rocmx_sha256)
    # b3sum prints "<hex>"; rocmx --base16 prints the same.
    c_b3=$(check nar_b3sum rocmx_blake3)
else
    c_sha=FAIL c_b3=FAIL
fi
if [[ $c_sha != ok || $c_b3 != ok ]]; then failures=$((failures + 1)); fi

printf '| %-44s | %8s | %8s | %6s | %6s | %-4s | %-8s |\n' "rocmx vs reference" "ref s" "rocmx s" "ratio" "goal" "met" "check"
echo "|----------------------------------------------|---------:|---------:|-------:|-------:|------|----------|"
row "hash path --type sha256 vs nix-hash sha256" nix_sha256 rocmx_sha256 - "$c_sha"
row "hash path (blake3) vs nix-store --dump|b3sum" nar_b3sum rocmx_blake3 1.5 "$c_b3"
row "hash path (blake3) vs nix-hash sha256" nix_sha256 rocmx_blake3 0.5 "$c_b3"
if ((add_enabled)); then
    # rocmx prints one store path named after the tree, the same on every run.
    c_add=FAIL
    if ((broke == 0)); then
        if grep -Eqx "/rocmx/store/[0-9a-df-np-sv-z]{32}-$(basename "$tree")" "$tmp/rocmx_add.first"; then
            c_add=ok
        else
            c_add=BADPATH
            echo "rocmx store add printed: $(head -c 300 "$tmp/rocmx_add.first")" >&2
            failures=$((failures + 1))
        fi
    fi
    row "store add (fresh) vs nix-store --add (fresh)" nix_add rocmx_add 0.4 "$c_add"
else
    printf '| %-44s | %8s | %8s | %6s | %6s | %-4s | %-8s |\n' "store add (fresh) vs nix-store --add (fresh)" - - - 0.4 - skipped
    echo
    echo "store add: skipped ($add_reason)"
fi
echo
for t in "${tasks[@]}"; do
    [[ -s $tmp/$t.samples ]] && printf '%-13s runs: %s\n' "$t" "$(tr '\n' ' ' <"$tmp/$t.samples")"
done

((failures == 0)) || exit 1
