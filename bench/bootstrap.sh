#!/usr/bin/env bash
# Bootstrap benchmark: realising the pinned `base` and `rocm` roots
# (exprs/bootstrap) with rocmx against mmdebstrap building the same kind of
# root, in one run, with every .deb already local on both sides:
#   rocmx:      the root derivation only (builtin:unpack-debs: the .debs into
#               merged /usr, then hashing, scanning and registering the tree,
#               made durable); its .deb fetches are valid store paths, seeded
#               into a fresh store with `rocmx store add-fixed` before the clock
#               starts;
#   mmdebstrap: `--variant=buildd` (base) or `--variant=apt` (rocm), with
#               `--include=` the lock's request, into a directory, its apt cache
#               filled with the .debs (--skip=download/empty), so it unpacks and
#               configures (dpkg, maintainer scripts).
# Then the second realisation: the same store path, nothing to do.
#
# Nothing is deleted until the end. On an ext4 without a journal (these
# machines) a file created within minutes of a mass deletion pays for every
# recently deleted inode the allocator skips: deleting a root and realising it
# again at once doubles the time of either tool, which measures the
# filesystem, not the tool. Every timed run therefore writes a fresh tree and
# the trees go when the script exits (needs about 10 GB free for RUNS=3).
#
# Usage: bench/bootstrap.sh [base|rocm]…   (both by default; RUNS=3; needs
# mmdebstrap, and the network once to fill both caches). The roots are not
# exactly the same sets: rocmx's locks add Priority: required, the buildd and
# apt variants add their own; both counts are printed. Nothing is asserted.
set -euo pipefail
cd "$(dirname "$0")/.."
ROCMX=$(realpath "${ROCMX:-target/release/rocmx}")
RUNS=${RUNS:-3}
roots=("$@")
[[ ${#roots[@]} -gt 0 ]] || roots=(base rocm)
command -v mmdebstrap >/dev/null || { echo "mmdebstrap not found (apt-get install mmdebstrap)" >&2; exit 2; }
mirror=$(awk '/^URIs:/ {print $2; exit} /^deb / {print $2; exit}' /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null | head -1)
[[ -n $mirror ]] || { echo "no Debian mirror in the apt sources" >&2; exit 2; }
work=$(mktemp -d)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT

now() { date +%s%N; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
secs() { echo "$1/1000" | bc -l; }
report=()
for name in "${roots[@]}"; do
  case $name in
    base) variant=buildd ;;
    rocm) variant=apt ;;
    *) echo "unknown root '$name' (base or rocm)" >&2; exit 2 ;;
  esac
  lock=exprs/bootstrap/$name.lock.json
  include=$(python3 -c 'import json,sys; print(",".join(json.load(open(sys.argv[1]))["requested"]))' "$lock")
  npkg=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["packages"]))' "$lock")

  # Fill both caches: rocmx's .debs as plain files named as their store paths
  # are (so add-fixed gives the same paths), mmdebstrap's apt archive.
  "$ROCMX" --store "$work/warm-$name" build -f exprs/bootstrap "$name" --no-link -j 2 >/dev/null 2>&1
  mkdir -p "$work/debs-$name" "$work/apt-$name"
  for d in "$work/warm-$name"/store/*.deb; do
    cp "$d" "$work/debs-$name/$(basename "$d" | cut -d- -f2-)"
  done
  mmdebstrap --quiet --variant="$variant" --mode=unshare \
    --aptopt='Acquire::Check-Valid-Until "false"' --include="$include" \
    --skip=download/empty \
    --customize-hook="sync-out /var/cache/apt/archives $work/apt-$name" \
    sid "$work/warm-$name.tar" "$mirror"
  rm -f "$work/warm-$name.tar"
  sync; sleep 5

  r_t=() m_t=()
  for r in $(seq 1 "$RUNS"); do
    store="$work/store-$name-$r"
    "$ROCMX" --store "$store" store add-fixed sha256 "$work/debs-$name"/*.deb >/dev/null
    sync
    t0=$(now)
    "$ROCMX" --store "$store" build -f exprs/bootstrap "$name" --no-link >/dev/null 2>&1
    r_t+=("$(( ($(now) - t0) / 1000000 ))")
    sync
    t0=$(now)
    mmdebstrap --quiet --variant="$variant" --mode=unshare \
      --aptopt='Acquire::Check-Valid-Until "false"' --include="$include" \
      --skip=download/empty \
      --setup-hook="mkdir -p \"\$1\"/var/cache/apt/archives && cp $work/apt-$name/*.deb \"\$1\"/var/cache/apt/archives/" \
      sid "$work/mm-$name-$r" "$mirror"
    m_t+=("$(( ($(now) - t0) / 1000000 ))")
    sync
  done
  t0=$(now)
  "$ROCMX" --store "$store" build -f exprs/bootstrap "$name" --no-link >/dev/null 2>&1
  again=$(( ($(now) - t0) / 1000000 ))

  rm_=$(printf '%s\n' "${r_t[@]}" | median)
  mm_=$(printf '%s\n' "${m_t[@]}" | median)
  report+=("$(printf '%-60s %9s' "realise the $name root, .debs local (median of $RUNS)" "s")")
  report+=("$(printf '%-60s %9.2f' "  rocmx (unpack-debs, $npkg packages)" "$(secs "$rm_")")")
  report+=("$(printf '%-60s %9.2f' "  mmdebstrap --variant=$variant ($(ls "$work/apt-$name" | grep -c '\.deb$') packages)" "$(secs "$mm_")")")
  report+=("$(printf '%-60s %9.2f' "  ratio rocmx / mmdebstrap" "$(echo "$rm_/$mm_" | bc -l)")")
  report+=("$(printf '%-60s %9.3f' "  rocmx, second realisation (same store path)" "$(secs "$again")")")
  report+=("  runs (ms): rocmx ${r_t[*]}; mmdebstrap ${m_t[*]}")
done
printf '%s\n' "${report[@]}"
echo "load $(cut -d' ' -f1-3 /proc/loadavg)"
