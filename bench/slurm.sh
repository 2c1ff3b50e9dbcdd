#!/usr/bin/env bash
# Slurm benchmark (issue 16): what handing builds to Slurm costs, against the
# same graph built here and against raw Slurm jobs, on a private one-node
# cluster (bench/slurm/cluster.sh) started and stopped by this script.
#
#   1. chain: N (50) chained trivial derivations (bench/build/chain.nix), built
#      by `rocmx build` here (fresh store each run) and by `rocmx build
#      --builders slurm://…` (fresh submitter store, worker store, builder
#      cache each run): the per-derivation overhead of going through Slurm.
#   2. raw chain: N `sbatch --wrap true` jobs linked by
#      `--dependency=afterok:PREV --kill-on-invalid-dep=yes`, all submitted up
#      front, timed until the last one completes: Slurm's own floor per edge
#      when the whole graph is submitted at once (rocmx submits when ready).
#   3. wide: WIDE (200) independent trivial derivations (bench/slurm/wide.nix)
#      through rocmx with slots=WIDE (everything submitted at once) and with
#      slots=CPUS (the node's CPUs: submit when a slot frees), raw
#      `sbatch --wrap true` x WIDE submitted at once, and (for scale) a local
#      `rocmx build -j CPUS`: throughput in derivations (jobs) per second.
#
# Usage: bench/slurm.sh    (RUNS=3 for the chains, WIDE_RUNS=1 for the wide
#                           graph; ROCMX, N, WIDE, POLL_MS override)
# Needs slurmctld slurmd slurm-client munge and busybox-static. Timings are
# reported, never asserted. The tables show medians; every run's times, where
# the time of one job goes (from slurmctld's log) and the load average follow.
# Jobs run as the user running this (root is fine). Takes about 10 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
ROCMX=${ROCMX:-target/release/rocmx}
RUNS=${RUNS:-3}
WIDE_RUNS=${WIDE_RUNS:-1}
N=${N:-50}
WIDE=${WIDE:-200}
POLL_MS=${POLL_MS:-100}
[[ -x $ROCMX ]] || cargo build --release --bin rocmx
BUSYBOX=$(command -v busybox) || { echo "busybox not found" >&2; exit 2; }

now() { date +%s.%N; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
calc() { echo "$*" | bc -l; }

cluster=
work=$(mktemp -d /tmp/rocmx-bench-slurm-work-XXXXXX)
cleanup() {
  if [[ -n $cluster ]]; then "$REPO/bench/slurm/cluster.sh" stop "$cluster" || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
cluster=$(bench/slurm/cluster.sh start) || exit 1
# shellcheck disable=SC1091
. "$cluster/env"
CTLD_LOG=$cluster/log/slurmctld.log
CPUS=$(sinfo -h -o %c | head -n1)
SLOTS_FEW=${SLOTS_FEW:-$CPUS}

# The jobs run this copy (a concurrent cargo build cannot swap it underneath).
chmod 0755 "$work"
cp "$ROCMX" "$work/rocmx"
RX=$work/rocmx
cp bench/build/chain.nix "$work/chain.nix"
cp bench/slurm/wide.nix "$work/wide.nix"
mkdir -p "$work/bb/bin" "$work/no-config" "$work/home"
cp "$BUSYBOX" "$work/bb/bin/sh"
unset ROCMX_STORE
export XDG_CONFIG_HOME=$work/no-config HOME=$work/home
# One key signs on both sides and is trusted on both.
pk=$("$RX" --store "$work/keystore" key generate bench-slurm-1 --secret-key-file "$work/sk")
printf 'secret-key-files = %s\ntrusted-public-keys = %s\n' "$work/sk" "$pk" >"$work/rocmx.conf"
export ROCMX_CONFIG=$work/rocmx.conf
rm -rf "$work/keystore"
cd "$cluster/scratch" # raw jobs' working directory

# Waits until the node runs and finishes nothing (so phases do not overlap).
wait_idle() {
  local i
  for ((i = 0; i < 1200; i++)); do
    [[ $(sinfo -h -o %T) == idle ]] && return 0
    sleep 0.05
  done
  echo "the node is still busy: $(sinfo -h -o %T)" >&2
  exit 1
}

# rocmx build of FILE (a work file) with seed $2, n $3, into fresh stores; the
# rest are extra arguments. Prints the wall time.
rocmx_build() {
  local file=$1 seed=$2 n=$3 store t0 t1
  shift 3
  store=$(mktemp -d "$work/store-XXXXXX")
  t0=$(now)
  "$RX" --store "$store/sub" build --no-link --argstr seed "$seed" --arg n "$n" "$work/$file" "$@" \
    >/dev/null 2>"$work/rocmx.err" || { cat "$work/rocmx.err" >&2; exit 1; }
  t1=$(now)
  rm -rf "$store"
  calc "$t1 - $t0"
}

# The same through Slurm with `slots=$4`: a fresh submitter store, worker store,
# cache and log directory.
rocmx_slurm() {
  local file=$1 seed=$2 n=$3 slots=$4 d t0 t1
  d=$(mktemp -d "$work/slurm-XXXXXX")
  mkdir "$d/worker" "$d/cache" "$d/logs"
  t0=$(now)
  "$RX" --store "$d/sub" build --no-link --argstr seed "$seed" --arg n "$n" "$work/$file" \
    --builders "slurm://debug?store=$d/worker&logs=$d/logs&poll-ms=$POLL_MS&slots=$slots" \
    --builder-cache "file://$d/cache" >/dev/null 2>"$work/rocmx.err" ||
    { cat "$work/rocmx.err" >&2; exit 1; }
  t1=$(now)
  rm -rf "$d"
  calc "$t1 - $t0"
}

# Waits (polling every 50 ms) until every job in "$@" has ended; fails unless
# all COMPLETED.
wait_jobs() {
  local ids states
  ids=$(IFS=,; echo "$*")
  while [[ -n $(squeue -h -j "$ids" -t PD,CF,R,CG,S -o %A 2>/dev/null) ]]; do sleep 0.05; done
  states=$(squeue -h -j "$ids" -t all -o %T | sort | uniq -c | tr -s ' \n' '  ')
  [[ $states == " $# COMPLETED " ]] || { echo "raw jobs ended: $states" >&2; exit 1; }
}

# N raw jobs chained with afterok, submitted up front; prints the wall time
# from the first sbatch until the last job completed.
raw_chain() {
  local n=$1 prev t0 t1 i last
  t0=$(now)
  prev=$(sbatch --parsable -o /dev/null --wrap true)
  for ((i = 2; i <= n; i++)); do
    prev=$(sbatch --parsable -o /dev/null --dependency="afterok:$prev" --kill-on-invalid-dep=yes --wrap true)
  done
  last=$prev
  while :; do
    case $(squeue -h -j "$last" -t all -o %T) in
      COMPLETED) break ;;
      PENDING | CONFIGURING | RUNNING | COMPLETING) sleep 0.05 ;;
      *) echo "raw chain: job $last ended $(squeue -h -j "$last" -t all -o %T)" >&2; exit 1 ;;
    esac
  done
  t1=$(now)
  calc "$t1 - $t0"
}

# N raw independent jobs submitted at once; wall time until all completed.
raw_wide() {
  local n=$1 ids=() t0 t1 i
  t0=$(now)
  for ((i = 0; i < n; i++)); do ids+=("$(sbatch --parsable -o /dev/null --wrap true)"); done
  wait_jobs "${ids[@]}"
  t1=$(now)
  calc "$t1 - $t0"
}

# Where the time of each job went, from slurmctld's log after line $1 (its
# timestamps have millisecond resolution): one line per job, in id order,
# "ID SUBMIT ALLOCATE COMPLETE" in seconds.
job_times() {
  tail -n +"$(($1 + 1))" "$CTLD_LOG" | awk '
    function t(s,   d, h) {  # [YYYY-MM-DDTHH:MM:SS.mmm] -> seconds (day changes counted)
      d = substr(s, 2, 10); if (day0 == "") day0 = d
      h = substr(s, 13, 12); split(h, x, ":")
      return (d != day0 ? 86400 : 0) + x[1] * 3600 + x[2] * 60 + x[3]
    }
    function id(s) { sub(/.*JobId=/, "", s); sub(/ .*/, "", s); return s + 0 }
    /_slurm_rpc_submit_batch_job: JobId=/ { j = id($0); sub_t[j] = t($1); ids[j] = 1 }
    /sched: Allocate JobId=|backfill: Started JobId=/ { alloc_t[id($0)] = t($1) }
    /_job_complete: JobId=[0-9]+ done/ { done_t[id($0)] = t($1) }
    END { for (j in ids) if ((j in alloc_t) && (j in done_t)) printf "%d %.3f %.3f %.3f\n", j, sub_t[j], alloc_t[j], done_t[j] }
  ' | sort -n
}
log_mark() { wc -l <"$CTLD_LOG"; }
ms() { printf '%.0f' "$(calc "$1 * 1000")"; }

# Medians in ms over the jobs of one chain (job_times lines on stdin):
# "WAIT RUN GAP": submit -> allocated (queued), allocated -> completed (launch,
# run, epilogue), completed -> the next job's submission (rocmx: noticing the
# end, fetching, pushing the next derivation, sbatch) or, for a chain submitted
# up front, completed -> the next job's allocation.
chain_breakdown() {
  awk -v mode="$1" '
    { s[NR] = $2; a[NR] = $3; c[NR] = $4 }
    END {
      for (i = 1; i <= NR; i++) {
        if (mode != "raw" || i == 1) print "W", (a[i] - s[i]) * 1000
        print "R", (c[i] - a[i]) * 1000
      }
      for (i = 1; i < NR; i++) print "G", ((mode == "raw" ? a[i + 1] : s[i + 1]) - c[i]) * 1000
    }' >"$work/bd"
  local k out=()
  for k in W R G; do out+=("$(awk -v k=$k '$1 == k { print $2 }' "$work/bd" | median)"); done
  printf '%.0f %.0f %.0f' "${out[@]}"
}

echo "Slurm $(sinfo -V | cut -d' ' -f2), one node of $CPUS CPUs; $(grep ^SchedulerParameters "$cluster/slurm.conf")" >&2
load_before=$(uptime)

# --- 1 and 2: the chain --------------------------------------------------------
local_t=() slurm_t=() raw_t=() bd_slurm=() bd_raw=()
for r in $(seq 1 "$RUNS"); do
  seed="$$-$r-$(date +%s%N)"
  wait_idle
  local_t+=("$(rocmx_build chain.nix "$seed" "$N")")
  wait_idle
  mark=$(log_mark)
  slurm_t+=("$(rocmx_slurm chain.nix "$seed" "$N" 64)")
  bd_slurm+=("$(job_times "$mark" | chain_breakdown rocmx)")
  wait_idle
  mark=$(log_mark)
  raw_t+=("$(raw_chain "$N")")
  bd_raw+=("$(job_times "$mark" | chain_breakdown raw)")
  echo "chain run $r: local ${local_t[-1]} s, slurm ${slurm_t[-1]} s, raw ${raw_t[-1]} s" >&2
done

# --- 3: the wide graph ---------------------------------------------------------
wlocal_t=() wall_t=() wfew_t=() wraw_t=()
for r in $(seq 1 "$WIDE_RUNS"); do
  seed="$$-w$r-$(date +%s%N)"
  wait_idle
  wlocal_t+=("$(rocmx_build wide.nix "$seed" "$WIDE" -j "$CPUS")")
  wait_idle
  wall_t+=("$(rocmx_slurm wide.nix "$seed-a" "$WIDE" "$WIDE")")
  wait_idle
  wfew_t+=("$(rocmx_slurm wide.nix "$seed-b" "$WIDE" "$SLOTS_FEW")")
  wait_idle
  wraw_t+=("$(raw_wide "$WIDE")")
  echo "wide run $r: local ${wlocal_t[-1]} s, slots=$WIDE ${wall_t[-1]} s, slots=$SLOTS_FEW ${wfew_t[-1]} s, raw ${wraw_t[-1]} s" >&2
done

m() { printf '%s\n' "$@" | median; }
local_m=$(m "${local_t[@]}") slurm_m=$(m "${slurm_t[@]}") raw_m=$(m "${raw_t[@]}")
bd_col() { local i=$1; shift; for b in "$@"; do echo "$b" | cut -d' ' -f"$i"; done | median; }

printf 'chain: %s chained derivations, %s runs; Slurm %s, one node of %s CPUs, poll-ms=%s\n\n' \
  "$N" "$RUNS" "$(sinfo -V | cut -d' ' -f2)" "$CPUS" "$POLL_MS"
printf '| chain of %s | s | ms per derivation (edge) | ratio to local |\n|---|---:|---:|---:|\n' "$N"
printf '| rocmx build, local | %.3f | %.1f | 1.00 |\n' "$local_m" "$(calc "$local_m * 1000 / $N")"
printf '| rocmx build --builders slurm (submit when ready) | %.3f | %.1f | %.1f |\n' \
  "$slurm_m" "$(calc "$slurm_m * 1000 / $N")" "$(calc "$slurm_m / $local_m")"
printf '| raw sbatch --wrap true, afterok chain submitted up front | %.3f | %.1f | %.1f |\n' \
  "$raw_m" "$(calc "$raw_m * 1000 / $N")" "$(calc "$raw_m / $local_m")"
printf '\nSlurm overhead per derivation: (slurm - local) / %s = %.0f ms; raw afterok per edge: %.0f ms; rocmx / raw: %.2f\n' \
  "$N" "$(calc "($slurm_m - $local_m) * 1000 / $N")" "$(calc "$raw_m * 1000 / $N")" "$(calc "$slurm_m / $raw_m")"
printf 'per job, medians over the chain (ms, from slurmctld.log):\n'
printf '  rocmx: queued %s, allocated->completed %s, completed->next submitted %s\n' \
  "$(bd_col 1 "${bd_slurm[@]}")" "$(bd_col 2 "${bd_slurm[@]}")" "$(bd_col 3 "${bd_slurm[@]}")"
printf '  raw:   queued (first job) %s, allocated->completed %s, completed->next allocated %s\n' \
  "$(bd_col 1 "${bd_raw[@]}")" "$(bd_col 2 "${bd_raw[@]}")" "$(bd_col 3 "${bd_raw[@]}")"
printf 'runs (s): local %s; slurm %s; raw %s\n' "${local_t[*]}" "${slurm_t[*]}" "${raw_t[*]}"

wl=$(m "${wlocal_t[@]}") wa=$(m "${wall_t[@]}") wf=$(m "${wfew_t[@]}") wr=$(m "${wraw_t[@]}")
printf '\nwide: %s independent derivations, %s run(s)\n\n' "$WIDE" "$WIDE_RUNS"
printf '| wide graph of %s | s | derivations/s | ratio to raw |\n|---|---:|---:|---:|\n' "$WIDE"
printf '| rocmx build --builders slurm, slots=%s (all at once) | %.3f | %.1f | %.2f |\n' "$WIDE" "$wa" "$(calc "$WIDE / $wa")" "$(calc "$wa / $wr")"
printf '| rocmx build --builders slurm, slots=%s (= CPUs) | %.3f | %.1f | %.2f |\n' "$SLOTS_FEW" "$wf" "$(calc "$WIDE / $wf")" "$(calc "$wf / $wr")"
printf '| raw sbatch --wrap true x %s, submitted at once | %.3f | %.1f | 1.00 |\n' "$WIDE" "$wr" "$(calc "$WIDE / $wr")"
printf '| rocmx build -j %s, local (for scale) | %.3f | %.1f | %.2f |\n' "$CPUS" "$wl" "$(calc "$WIDE / $wl")" "$(calc "$wl / $wr")"
printf '\nruns (s): slots=%s %s; slots=%s %s; raw %s; local %s\n' \
  "$WIDE" "${wall_t[*]}" "$SLOTS_FEW" "${wfew_t[*]}" "${wraw_t[*]}" "${wlocal_t[*]}"
printf 'uptime before: %s\nuptime after:  %s\n' "$load_before" "$(uptime)"
