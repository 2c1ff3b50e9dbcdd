#!/usr/bin/env bash
# A private one-node Slurm cluster for bench/slurm.sh: the shell twin of
# tests/common/slurm.rs. munged, slurmctld and slurmd run from a temporary
# directory in /tmp, talk over loopback on free ports, and read nothing of the
# host's /etc/slurm or /etc/munge; no service is started.
#
# Usage:
#   bench/slurm/cluster.sh start      # prints the cluster's directory DIR;
#                                     # DIR/env holds `export SLURM_CONF=…`
#   . DIR/env                         # then sbatch, squeue, rocmx --builders slurm…
#   bench/slurm/cluster.sh stop DIR   # scancel everything, stop the daemons, kill
#                                     # whatever process of the cluster is left,
#                                     # remove DIR
#
# Needs Debian's slurmctld slurmd slurm-client munge. The daemons run as the
# user running this (root is fine: SlurmUser and SlurmdUser are that user), and
# so do the jobs. Every daemon carries ROCMX_SLURM_BENCH=DIR in its environment
# and every job SLURM_CONF=DIR/slurm.conf: that is how `stop` finds what is left
# (slurmstepd, slurmscriptd, a job's processes), whatever their parent.
# Exit status: 0; 1 when the cluster did not come up (its logs are printed);
# 2 for a usage error or a missing program.
set -euo pipefail

PATH=$PATH:/usr/sbin:/sbin
MARKER=ROCMX_SLURM_BENCH
PARTITION=debug
NODE=localhost
START_TIMEOUT=15   # seconds until the node must be idle (measured: about 1 s)
KILL_WAIT=2        # seconds between SIGTERM and SIGKILL of a cancelled job

# Slurm's clients and daemons read these as options; none may leak in.
unset_slurm_env() {
  local v
  for v in $(compgen -e); do
    case $v in SLURM_* | SBATCH_* | SALLOC_* | SRUN_* | SQUEUE_* | SINFO_* | SCANCEL_* | SCONTROL_*) unset "$v" ;; esac
  done
}

# The TCP ports something listens on (IPv4 and IPv6), one a line, decimal.
listening_ports() {
  local f
  for f in /proc/net/tcp /proc/net/tcp6; do
    [[ -r $f ]] || continue
    while read -r _ local _ st _; do
      [[ $st == 0A ]] && echo $((16#${local##*:}))
    done < <(tail -n +2 "$f")
  done
}

# One free port in 20000–59999 that is not in $1 (a space-separated list).
free_port() {
  local taken p
  taken=" $(listening_ports | tr '\n' ' ') $1 "
  while :; do
    p=$((20000 + RANDOM % 40000))
    [[ $taken == *" $p "* ]] || { echo "$p"; return; }
  done
}

# The pids of what the cluster in $1 runs: the daemons and what they start
# (slurmstepd, slurmscriptd) carry MARKER=$1; jobs and their children carry
# SLURM_CONF=$1/slurm.conf with a SLURM_JOB_ID. A shell that sourced $1/env
# has SLURM_CONF but no job id, so it is left alone, and so are this script and
# its ancestors whatever they hold.
cluster_pids() {
  local e pid p keep=" $BASHPID "
  p=$$
  while [[ -n $p && $p != 0 ]]; do
    keep+="$p "
    p=$(awk '/^PPid:/ { print $2 }' "/proc/$p/status" 2>/dev/null) || break
  done
  for e in /proc/[0-9]*/environ; do
    pid=${e#/proc/}; pid=${pid%/environ}
    [[ $keep == *" $pid "* ]] && continue
    if grep -qzxF "$MARKER=$1" "$e" 2>/dev/null ||
      { grep -qzxF "SLURM_CONF=$1/slurm.conf" "$e" 2>/dev/null &&
        grep -qz '^SLURM_JOB_ID=' "$e" 2>/dev/null; }; then
      echo "$pid"
    fi
  done
}

logs() {
  local f
  for f in "$1"/log/*; do
    [[ -f $f ]] || continue
    echo "--- $f"
    tail -n 15 "$f"
  done
}

node_state() { SLURM_CONF=$1/slurm.conf sinfo -h -o %T 2>/dev/null | head -n1; }

# Starts the daemons in $1; 0 when the node is idle, 1 when a daemon exited
# early (retry with other ports), 2 when it timed out.
start_once() {
  local dir=$1 user ports ctld_port d_port hw cpus mem pid name
  user=$(id -un)
  ctld_port=$(free_port "")
  d_port=$(free_port "$ctld_port")
  hw=$(slurmd -C 2>/dev/null | head -n1 | tr ' ' '\n' |
    grep -E '^(CPUs|Boards|SocketsPerBoard|CoresPerSocket|ThreadsPerCore|RealMemory)=' | tr '\n' ' ')
  cpus=$(sed -n 's/.*CPUs=\([0-9]*\).*/\1/p' <<<"$hw")
  mem=$(sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p' <<<"$hw")
  if [[ -z $cpus || -z $mem ]]; then
    cpus=$(nproc)
    mem=$(awk '/^MemTotal:/ { print int($2 / 1024) }' /proc/meminfo)
    hw="CPUs=$cpus RealMemory=$mem"
  fi
  cat >"$dir/slurm.conf" <<EOF
# A private one-node bench cluster (bench/slurm/cluster.sh); everything under $dir.
ClusterName=rocmxbench
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$d_port
SlurmUser=$user
SlurmdUser=$user
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
PlugStackConfig=$dir/plugstack.conf
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
MailProg=/bin/true
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=$(((mem / cpus) > 0 ? mem / cpus : 1))
SchedulerParameters=batch_sched_delay=0,sched_interval=1
ReturnToService=2
MinJobAge=3600
MaxJobCount=100000
KillWait=$KILL_WAIT
NodeName=$NODE NodeAddr=127.0.0.1 $hw State=UNKNOWN
PartitionName=$PARTITION Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
  : >"$dir/plugstack.conf"
  chmod 0644 "$dir/slurm.conf" "$dir/plugstack.conf"
  rm -rf "$dir/state" "$dir/spool"
  mkdir -m 0755 "$dir/state" "$dir/spool"
  echo "export SLURM_CONF=$dir/slurm.conf" >"$dir/env"
  : >"$dir/pids"
  # setsid: the daemons have a session of their own (no terminal's signals),
  # and hold none of the caller's pipes.
  spawn() {
    name=$1; shift
    env "$MARKER=$dir" SLURM_CONF="$dir/slurm.conf" setsid "$@" \
      </dev/null >"$dir/log/$name.out" 2>&1 &
    echo "$name $!" >>"$dir/pids"
  }
  exited() {
    local n p
    while read -r n p; do
      kill -0 "$p" 2>/dev/null || { echo "$n exited" >&2; return 0; }
    done <"$dir/pids"
    return 1
  }
  local t0=$SECONDS
  spawn slurmctld slurmctld -D -i -f "$dir/slurm.conf"
  spawn slurmd slurmd -D -N "$NODE" -f "$dir/slurm.conf"
  while [[ $(node_state "$dir") != idle ]]; do
    exited && return 1
    ((SECONDS - t0 > START_TIMEOUT)) && return 2
    sleep 0.05
  done
  return 0
}

start() {
  local prog missing=() dir socket rc=1 try
  for prog in munged slurmctld slurmd sbatch squeue scontrol scancel sinfo setsid; do
    command -v "$prog" >/dev/null || missing+=("$prog")
  done
  if ((${#missing[@]})); then
    echo "missing: ${missing[*]} (apt-get install -y slurmctld slurmd slurm-client munge)" >&2
    exit 2
  fi
  unset_slurm_env
  dir=$(mktemp -d /tmp/rocmx-bench-slurm-XXXXXX)
  chmod 0755 "$dir"
  mkdir -m 0755 "$dir/munge" "$dir/log"
  mkdir -m 1777 "$dir/scratch"
  # munge: a fresh 1024-bit key of mode 0400 (what mungekey makes).
  (umask 077 && head -c 128 /dev/urandom >"$dir/munge/munge.key")
  chmod 0400 "$dir/munge/munge.key"
  socket=$dir/munge/munge.socket
  env "$MARKER=$dir" setsid munged --foreground --key-file="$dir/munge/munge.key" \
    --socket="$socket" --pid-file="$dir/munge/munged.pid" \
    --log-file="$dir/log/munged.log" --seed-file="$dir/munge/munged.seed" \
    </dev/null >"$dir/log/munged.out" 2>&1 &
  local i=0
  while [[ ! -S $socket ]]; do
    ((i++ < 300)) || { echo "munged made no socket" >&2; logs "$dir" >&2; stop "$dir"; exit 1; }
    sleep 0.01
  done
  for try in 1 2 3; do
    if start_once "$dir"; then rc=0; break; else rc=$?; fi
    # A daemon that exited early (a port taken between choosing and binding
    # it): stop what is left and try other ports.
    kill_rest "$dir" slurm
    ((rc == 1)) || break
  done
  if ((rc != 0)); then
    echo "the Slurm bench cluster did not start (sinfo: $(node_state "$dir"))" >&2
    logs "$dir" >&2
    stop "$dir"
    exit 1
  fi
  echo "$dir"
}

# Kills the cluster's processes ($2 = slurm: only the Slurm daemons and their
# children, keeping munged) until none is left (at most 10 s).
kill_rest() {
  local dir=$1 only=${2:-} pid pids i
  for ((i = 0; i < 100; i++)); do
    pids=()
    for pid in $(cluster_pids "$dir"); do
      if [[ $only == slurm ]] && grep -q munged "/proc/$pid/comm" 2>/dev/null; then continue; fi
      pids+=("$pid")
    done
    ((${#pids[@]})) || return 0
    kill -KILL "${pids[@]}" 2>/dev/null || true
    sleep 0.1
  done
  echo "warning: processes of the bench cluster survive SIGKILL: ${pids[*]}" >&2
}

stop() {
  local dir=${1:?usage: cluster.sh stop DIR} pid ids t0 i
  [[ -f $dir/slurm.conf || -d $dir/munge ]] || { echo "not a bench cluster: $dir" >&2; exit 2; }
  unset_slurm_env
  export SLURM_CONF=$dir/slurm.conf
  # Cancel every job and wait (at most KILL_WAIT + 10 s) for an empty queue, so
  # slurmd and slurmstepd end the jobs' processes the ordinary way.
  t0=$SECONDS
  while ids=$(squeue -h -o %A 2>/dev/null) && [[ -n $ids ]] && ((SECONDS - t0 <= KILL_WAIT + 10)); do
    # shellcheck disable=SC2086
    scancel --quiet $ids 2>/dev/null || true
    sleep 0.05
  done
  # The daemons: SIGTERM (slurmd, slurmctld, munged: the reverse of the start),
  # SIGKILL after 5 s; then whatever is left.
  for name in slurmd slurmctld munged; do
    for pid in $(cluster_pids "$dir"); do
      grep -qx "$name" "/proc/$pid/comm" 2>/dev/null && kill -TERM "$pid" 2>/dev/null || true
    done
  done
  for ((i = 0; i < 50; i++)); do
    [[ -z $(cluster_pids "$dir") ]] && break
    sleep 0.1
  done
  kill_rest "$dir"
  rm -rf "$dir"
}

case ${1:-} in
  start) start ;;
  stop) stop "${2:-}" ;;
  *) echo "usage: $0 start | stop DIR" >&2; exit 2 ;;
esac
