#!/usr/bin/env bash
# Where one build's time goes (issue 15): one trivial sandboxed derivation
# (static busybox as builder, `echo SEED > $out`), built by
# `rocmx --store S build --no-link -f one.nix` into a warm store (the busybox
# input was added by an earlier build of another derivation, so only the one
# build is measured), split into steps at system-call landmarks.
#
# Usage: bench/build-phases.sh   (RUNS=15 untraced runs, TRACED=7 traced runs;
#                                 ROCMX, NIX_RUNS=5 (0 skips nix-build) override)
# Needs strace (6.x, for --seccomp-bpf) and a static busybox; perf and
# nix-build are used when present. Timings are reported, never asserted.
#
# Method. Each traced run is `strace -f --seccomp-bpf -ttt -T -e trace=LANDMARKS`:
# only the landmark system calls stop the process (the rest pass through the
# seccomp filter untouched), so the build is slowed far less than by a full
# trace. The time between consecutive landmarks is given to the step they
# delimit (see the table's step names; the first landmark of a step is named
# in parentheses). Every run builds a new derivation (new seed); the table
# shows the median and the minimum of each step over the traced runs (the
# minimum is the better guess at a step's own cost when other jobs preempt
# the build), the medians scaled
# by (median untraced wall time) / (median traced wall time), and each step's
# share of the traced total. The scaling is uniform and therefore crude:
# strace's cost falls on the traced calls and on attaching to new threads and
# processes, which sit mostly in the build steps, so those are overstated and
# startup/evaluation understated. `build - no-op` (the same .nix evaluated
# again when everything is valid) is an untraced cross-check of what the
# build itself costs.
set -euo pipefail
cd "$(dirname "$0")/.."
ROCMX=$(realpath "${ROCMX:-target/release/rocmx}")
RUNS=${RUNS:-15}
TRACED=${TRACED:-7}
NIX_RUNS=${NIX_RUNS:-5}
[[ -x $ROCMX ]] || { echo "$ROCMX not found (cargo build --release --bin rocmx)" >&2; exit 2; }
BUSYBOX=$(command -v busybox) || { echo "busybox not found" >&2; exit 2; }
command -v strace >/dev/null || { echo "strace not found (apt-get install strace)" >&2; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bb/bin"
cp "$BUSYBOX" "$work/bb/bin/sh"
cat >"$work/one.nix" <<'EOF'
{ seed ? "0" }:
derivation {
  name = "one";
  system = builtins.currentSystem;
  builder = "${./bb}/bin/sh";
  args = [ "-c" "echo ${seed} > $out" ];
}
EOF
store=$work/store
cd "$work"
rx() { "$ROCMX" --store "$store" build --no-link --argstr seed "$1" -f one.nix >/dev/null 2>"$work/err" \
  || { cat "$work/err" >&2; exit 1; }; }
us() { echo $(( $(date +%s%N) / 1000 )); }
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
rx warm-$$            # adds ./bb to the store; later runs only build `one`
rx warm2-$$           # and a second one, so caches and the WAL are warm

# 1. Untraced wall time: a new derivation each run, then the no-op rebuild.
build_t=() noop_t=()
for r in $(seq 1 "$RUNS"); do
  s="w$$-$r-$(date +%s%N)"
  t0=$(us); rx "$s"; t1=$(us); rx "$s"; t2=$(us)
  build_t+=($((t1 - t0))); noop_t+=($((t2 - t1)))
done
build_m=$(printf '%s\n' "${build_t[@]}" | median)
noop_m=$(printf '%s\n' "${noop_t[@]}" | median)

# 2. CPU: user/sys and task-clock of one more build.
cpu=n/a
/usr/bin/time -o "$work/time" -f '%e s wall, %U s user, %S s sys' "$ROCMX" --store "$store" build --no-link \
  --argstr seed "t$$-$(date +%s%N)" -f one.nix >/dev/null 2>&1 && cpu=$(tail -1 "$work/time")
tc=n/a
if command -v perf >/dev/null; then
  tc=$(perf stat -x, -e task-clock "$ROCMX" --store "$store" build --no-link \
    --argstr seed "p$$-$(date +%s%N)" -f one.nix 2>&1 >/dev/null | awk -F, '/task-clock/ {printf "%.2f ms", $1}') || tc=n/a
fi

# 3. Traced runs.
LANDMARKS=execve,clone,clone3,mkdir,getcwd,fsync,fdatasync,syncfs,rename,lchown,mount,pivot_root,capset,exit_group,exit,wait4,sendmsg,recvmsg
for r in $(seq 1 "$TRACED"); do
  strace -f --seccomp-bpf -ttt -T -e trace="$LANDMARKS" -o "$work/trace.$r" \
    "$ROCMX" --store "$store" build --no-link --argstr seed "s$$-$r-$(date +%s%N)" -f one.nix \
    >/dev/null 2>"$work/err" || { cat "$work/err" >&2; exit 1; }
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

nix_m=
if [[ $NIX_RUNS -gt 0 ]] && command -v nix-build >/dev/null; then
  nix_t=()
  nix-build --option sandbox true --option substituters '' --no-out-link --argstr seed "nw$$" one.nix >/dev/null 2>&1
  for r in $(seq 1 "$NIX_RUNS"); do
    t0=$(us)
    nix-build --option sandbox true --option substituters '' --no-out-link \
      --argstr seed "n$$-$r-$(date +%s%N)" one.nix >/dev/null 2>"$work/nix.err" || { cat "$work/nix.err" >&2; exit 1; }
    t1=$(us); nix_t+=($((t1 - t0)))
  done
  nix_m=$(printf '%s\n' "${nix_t[@]}" | median)
fi

python3 - "$build_m" "$work"/trace.* <<'EOF'
import re, statistics, sys
native = float(sys.argv[1])
line_re = re.compile(r'^(\d+) +(\d+\.\d+) (.*)$')
STEPS = [
  ("process start: loader, runtime, threads (execve)", "exec"),
  ("store open, config (first store mkdir)", "mkdir0"),
  ("evaluation, importing ./bb (getcwd)", "getcwd"),
  (".drv written: fsync file + store dir (fsync)", "drv_fsync"),
  ("closure read, realisation lookup, build lock", "drv_done"),
  ("build thread, build directory (6 mkdir), id lease, spec (clone3)", "thread"),
  ("the sandbox to the zygote, which hands it to the init it made ahead, and replies (sendmsg)", "ns_clone"),
  ("id maps, chown, go-ahead; init decodes the sandbox (reply read)", "ns_done"),
  ("mounts: tmpfs root, inputs, /dev, /proc, overlays (mount)", "mount0"),
  ("pivot_root, hostname, lo, capability drops (pivot_root)", "pivot"),
  ("no_new_privs, seccomp filter, spawn builder (capset)", "caps_done"),
  ("builder: exec busybox, echo > $out (execve)", "bexec"),
  ("builder exit to the build thread going on: init reports the status (builder exit)", "bexit"),
  ("output moved, log file written and renamed (build thread goes on)", "reaped"),
  ("normalise, NAR hash, reference scan, output placed at its name (log renamed)", "log_done"),
  ("the committer thread makes it durable: syncfs (placed)", "placed"),
  ("register (SQLite), realisation; exit: report, exit_group (syncfs done)", "synced"),
  ("", "end"),
]
def parse(path):
  ev = []  # (pid, start, end, call, text)
  pending = {}
  for ln in open(path):
    m = line_re.match(ln.rstrip('\n'))
    if not m: continue
    pid, ts, rest = int(m.group(1)), float(m.group(2)), m.group(3)
    if rest.startswith('<...'):
      name = rest.split()[1]
      if (pid, name) in pending:
        i = pending.pop((pid, name))
        p, s, _, c, t = ev[i]
        ev[i] = (p, s, ts, c, t + rest)
      continue
    if rest.startswith('+++'):
      ev.append((pid, ts, ts, '+++', rest)); continue
    if rest.startswith('---'): continue
    call = rest.split('(', 1)[0]
    d = re.search(r'<(\d+\.\d+)>$', rest)
    if rest.endswith('<unfinished ...>'):
      pending[(pid, call)] = len(ev); ev.append((pid, ts, ts, call, rest))
    else:
      ev.append((pid, ts, ts + (float(d.group(1)) if d else 0.0), call, rest))
  ev.sort(key=lambda e: e[1])
  return ev
def marks(ev):
  main = ev[0][0]
  first = lambda f, after=0.0: next(e for e in ev if e[1] >= after and f(e))
  k = {}
  k['exec'] = ev[0][1]
  k['mkdir0'] = first(lambda e: e[3] == 'mkdir')[1]
  gc = first(lambda e: e[3] == 'getcwd')
  k['getcwd'] = gc[1]
  # The .drv files go in one batch: a syncfs (older builds: an fsync per
  # file), then an fsync of the store directory.
  f1 = first(lambda e: e[3] in ('fsync', 'syncfs'), gc[1])
  k['drv_fsync'] = f1[1]
  f2 = first(lambda e: e[3] == 'fsync', f1[2])
  k['drv_done'] = f2[2]
  # The build thread asks the zygote (forked at startup) for an init (a message
  # without descriptors), lays out the build, then sends the sandbox (with its
  # descriptors), which the zygote gives to the init it cloned meanwhile.
  req = first(lambda e: e[3] == 'sendmsg' and 'SCM_RIGHTS' in e[4], f2[2])
  bt = req[0]
  th = [e for e in ev if e[3] == 'clone3' and e[1] < req[1] and e[1] >= f2[2]]
  k['thread'] = th[-1][1] if th else f2[2]
  k['ns_clone'] = req[1]
  k['ns_done'] = first(lambda e: e[0] == bt and e[3] == 'recvmsg', req[1])[2]
  m0 = first(lambda e: e[3] == 'mount', req[1])
  init = m0[0]
  ns = next(e for e in ev if e[3] == 'clone' and 'CLONE_NEWUSER' in e[4]
            and (m := re.search(r'\) = (\d+)', e[4])) and int(m.group(1)) == init)
  k['ahead'] = (ns[2] - ns[1], ns[1] < req[1])
  k['mount0'] = m0[1]
  k['pivot'] = first(lambda e: e[0] == init and e[3] == 'pivot_root')[1]
  k['caps_done'] = [e for e in ev if e[0] == init and e[3] == 'capset'][-1][2]
  bx = first(lambda e: e[3] == 'execve' and e[0] not in (main, init), req[1])
  k['bexec'] = bx[1]
  k['bexit'] = first(lambda e: e[0] == bx[0] and e[3] == 'exit_group')[1]
  # init is reaped on a thread of its own now; the build thread goes on as
  # soon as the status pipe has the builder's status: its first landmark
  # after the builder's exit ends this step.
  k['reaped'] = first(lambda e: e[0] == bt and e[3] != '+++', k['bexit'])[1]
  lr = first(lambda e: e[0] == bt and e[3] == 'rename' and '.log' in e[4], k['reaped'])
  k['log_done'] = lr[2]
  # Placed: renamed to its store path by the build thread; the committer
  # thread then syncs the filesystem once and registers it.
  pl = first(lambda e: e[0] == bt and e[3] == 'rename' and '/store/' in e[4].split(',')[1], lr[2])
  k['placed'] = pl[2]
  k['synced'] = first(lambda e: e[3] == 'syncfs', pl[2])[2]
  k['end'] = [e for e in ev if e[0] == main and e[3] == '+++'][-1][1]
  return k
runs = []
ahead = []
for p in sys.argv[2:]:
  k = marks(parse(p))
  runs.append([ (k[STEPS[i+1][1]] - k[STEPS[i][1]]) * 1e6 for i in range(len(STEPS) - 1) ])
  ahead.append(k['ahead'])
tot = [ sum(r) for r in runs ]
tot_m = statistics.median(tot)
scale = native / tot_m
keys = [k for _, k in STEPS]
build_first, build_last = keys.index("thread"), keys.index("synced")   # thread .. register: the build proper
print(f"traced runs: {len(runs)}; traced total median {tot_m:.0f} µs, untraced {native:.0f} µs, scale {scale:.2f}\n")
print("| step | µs traced (median) | µs traced (min) | µs scaled | share |")
print("|---|---:|---:|---:|---:|")
for i in range(len(STEPS) - 1):
  m = statistics.median(r[i] for r in runs)
  lo = min(r[i] for r in runs)
  print(f"| {STEPS[i][0]} | {m:.0f} | {lo:.0f} | {m*scale:.0f} | {100*m/tot_m:.1f} % |")
b = statistics.median(sum(r[build_first:build_last + 1]) for r in runs)
bl = min(sum(r[build_first:build_last + 1]) for r in runs)
print(f"| **the build proper (build thread start .. registered)** | {b:.0f} | {bl:.0f} | {b*scale:.0f} | {100*b/tot_m:.1f} % |")
print(f"| **whole command** | {tot_m:.0f} | {min(tot):.0f} | {native:.0f} | 100 % |")
made = [d * 1e6 for d, before in ahead]
print(f"\noff the build's path: the zygote's clone of init into the namespaces, {statistics.median(made):.0f} µs traced (median; "
      f"made before the request in {sum(1 for _, b in ahead if b)} of {len(ahead)} runs)")
EOF
printf '\nuntraced, %s runs: build %.0f µs median (%s); no-op rebuild %.0f µs; build - no-op %.0f µs\n' \
  "$RUNS" "$build_m" "$(printf '%s\n' "${build_t[@]}" | sort -n | sed -n '1p;$p' | paste -sd- )" "$noop_m" "$((${build_m%.*} - ${noop_m%.*}))"
printf 'one build: %s; task-clock %s\n' "$cpu" "$tc"
[[ -n $nix_m ]] && printf 'nix-build --option sandbox true, same derivation, %s runs: %.0f µs median (ratio %.2f)\n' \
  "$NIX_RUNS" "$nix_m" "$(echo "$build_m / $nix_m" | bc -l)"
printf 'load average: %s before, %s after\n' "$load_before" "$load_after"
