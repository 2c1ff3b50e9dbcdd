#!/usr/bin/env bash
# Bootstrap benchmark: realising the pinned `base` root (exprs/bootstrap)
# with rocmx against mmdebstrap building the same kind of root, in one run,
# with every .deb already local on both sides:
#   rocmx:      the root derivation only (builtin:unpack-debs: 177 .debs into
#               merged /usr, then hashing and registering the tree); its .deb
#               fetches are valid store paths;
#   mmdebstrap: --variant=buildd --include=<base's request> into a directory,
#               with the .debs copied into its apt cache (--skip=download/empty),
#               so it unpacks and configures (dpkg, maintainer scripts).
# Then the second realisation: the same store path, nothing to do.
#
# Usage: bench/bootstrap.sh        (RUNS=3 by default; needs mmdebstrap, and
# the network once to fill both caches). The two roots are not the same set:
# rocmx's lock adds Priority: required (177 packages), buildd has 123; both
# counts are printed. Nothing is asserted.
set -euo pipefail
cd "$(dirname "$0")/.."
ROCMX=$(realpath "${ROCMX:-target/release/rocmx}")
RUNS=${RUNS:-3}
command -v mmdebstrap >/dev/null || { echo "mmdebstrap not found (apt-get install mmdebstrap)" >&2; exit 2; }
mirror=$(awk '/^URIs:/ {print $2; exit} /^deb / {print $2; exit}' /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null | head -1)
[[ -n $mirror ]] || { echo "no Debian mirror in the apt sources" >&2; exit 2; }
work=$(mktemp -d)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
store="$work/store"
include=$(python3 -c 'import json,sys; print(",".join(json.load(open("exprs/bootstrap/base.lock.json"))["requested"]))')

now() { date +%s%N; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

# Fill both caches.
root=$("$ROCMX" --store "$store" build -f exprs/bootstrap base --no-link --print-out-paths -j 2 2>/dev/null)
mkdir -p "$work/cache"
mmdebstrap --quiet --variant=buildd --mode=unshare --aptopt='Acquire::Check-Valid-Until "false"' \
  --include="$include" --skip=download/empty \
  --customize-hook="sync-out /var/cache/apt/archives $work/cache" sid "$work/warm.tar" "$mirror"
rm -f "$work/warm.tar"

r_t=() m_t=()
for r in $(seq 1 "$RUNS"); do
  "$ROCMX" --store "$store" store delete "$root" >/dev/null
  t0=$(now)
  "$ROCMX" --store "$store" build -f exprs/bootstrap base --no-link >/dev/null 2>&1
  r_t+=("$(( ($(now) - t0) / 1000000 ))")
  t0=$(now)
  mmdebstrap --quiet --variant=buildd --mode=unshare --aptopt='Acquire::Check-Valid-Until "false"' \
    --include="$include" --skip=download/empty \
    --setup-hook="mkdir -p \"\$1\"/var/cache/apt/archives && cp $work/cache/*.deb \"\$1\"/var/cache/apt/archives/" \
    sid "$work/mm-$r" "$mirror"
  m_t+=("$(( ($(now) - t0) / 1000000 ))")
  rm -rf "$work/mm-$r"
done
t0=$(now)
"$ROCMX" --store "$store" build -f exprs/bootstrap base --no-link >/dev/null 2>&1
again=$(( ($(now) - t0) / 1000000 ))

rm=$(printf '%s\n' "${r_t[@]}" | median)
mm=$(printf '%s\n' "${m_t[@]}" | median)
printf '%-58s %9s\n' "realise the base root, .debs local (median of $RUNS)" "s"
printf '%-58s %9.2f\n' "rocmx (unpack-debs, $(python3 -c 'import json; print(len(json.load(open("exprs/bootstrap/base.lock.json"))["packages"]))') packages)" "$(echo "$rm/1000" | bc -l)"
printf '%-58s %9.2f\n' "mmdebstrap --variant=buildd ($(ls "$work/cache" | grep -c '\.deb$') packages)" "$(echo "$mm/1000" | bc -l)"
printf '%-58s %9.2f\n' "ratio rocmx / mmdebstrap" "$(echo "$rm/$mm" | bc -l)"
printf '%-58s %9.3f\n' "rocmx, second realisation (same store path)" "$(echo "$again/1000" | bc -l)"
echo "runs (ms): rocmx ${r_t[*]}; mmdebstrap ${m_t[*]}; load $(cut -d' ' -f1-3 /proc/loadavg)"
