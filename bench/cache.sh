#!/usr/bin/env bash
# Binary cache benchmark: pushing one ~600 MiB path of real files to a file://
# cache and substituting it into an empty store, rocmx against Nix 2.8's
# `nix copy`, in the same run; then the same substitution through nginx over
# loopback.
#
#   push:  rocmx copy --to file://DIR PATH        (zstd level 3, all cores, signed)
#          nix copy --to 'file://DIR?compression=zstd' PATH
#   fetch: rocmx --store EMPTY copy --from file://DIR PATH   (signature checked,
#          NAR hash and content address checked)
#          nix copy --from file://DIR --store EMPTY --no-check-sigs PATH
#
# Usage: bench/cache.sh   (RUNS=3, SIZE_MIB=600, SRC="/usr/lib/x86_64-linux-gnu
# /usr/share"; needs nix-bin and, for the HTTP part, nginx). Each run writes a
# fresh cache or store; everything is deleted at the end. Nothing is asserted.
set -euo pipefail
cd "$(dirname "$0")/.."
ROCMX=$(realpath "${ROCMX:-target/release/rocmx}")
RUNS=${RUNS:-3}
SIZE_MIB=${SIZE_MIB:-600}
SRC=${SRC:-/usr/lib/x86_64-linux-gnu /usr/share}
NIX="nix --extra-experimental-features nix-command --option substituters ''"
command -v nix >/dev/null || { echo "nix not found (apt-get install nix-bin)" >&2; exit 2; }
tmp=$(mktemp -d /tmp/rocmx-bench-cache.XXXXXX)
nix_path=
ngx_pid=
cleanup() {
  [[ -n $ngx_pid ]] && kill -TERM "$ngx_pid" 2>/dev/null || true
  [[ -n $nix_path ]] && nix-store --delete "$nix_path" >/dev/null 2>&1 || true
  chmod -R u+w "$tmp" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
now() { date +%s%N; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
ms() { echo $(( ($(now) - $1) / 1000000 )); }

# The tree: files copied from SRC until SIZE_MIB (as bench/store.sh does, simpler).
tree=$tmp/tree
mkdir "$tree"
budget=$((SIZE_MIB * 1024 * 1024)) total=0
for src in $SRC; do
  while IFS= read -r -d '' rec; do
    size=${rec%% *} path=${rec#* }
    ((total + size <= budget + budget / 50)) || continue
    total=$((total + size))
    printf '%s\0' "$path"
    ((total < budget - budget / 100)) || break
  done < <(find "$src" -mindepth 1 -type f -readable -printf '%s %P\0' 2>/dev/null) >"$tmp/list"
  mkdir -p "$tree/$(basename "$src")"
  tar -C "$src" --null --no-recursion -T "$tmp/list" -cf - 2>/dev/null | tar -C "$tree/$(basename "$src")" -xf -
  ((total < budget - budget / 100)) || break
done
sync

"$ROCMX" key generate bench-1 --secret-key-file "$tmp/key" >"$tmp/pub"
p=$("$ROCMX" --store "$tmp/rs" store add "$tree")
nix_path=$(nix-store --add "$tree")
nar=$(nix-store --dump "$tree" | wc -c)
echo "path: $(find "$tree" -type f | wc -l) files, NAR $((nar / 1048576)) MiB"

push_r=() push_n=() fetch_r=() fetch_n=()
for r in $(seq 1 "$RUNS"); do
  t=$(now); "$ROCMX" --store "$tmp/rs" copy --to "file://$tmp/rc-$r" "$p" --option secret-key-files "$tmp/key" 2>/dev/null; push_r+=("$(ms "$t")")
  t=$(now); eval "$NIX" copy --to "'file://$tmp/nc-$r?compression=zstd'" "$nix_path"; push_n+=("$(ms "$t")")
  sync
  t=$(now); "$ROCMX" --store "$tmp/rf-$r" copy --from "file://$tmp/rc-1" "$p" --option trusted-public-keys "$(cat "$tmp/pub")" 2>/dev/null; fetch_r+=("$(ms "$t")")
  t=$(now); eval "$NIX" copy --from "file://$tmp/nc-1" --store "$tmp/nf-$r" --no-check-sigs "$nix_path"; fetch_n+=("$(ms "$t")")
  sync
done
row() { printf '%-62s %8.2f s\n' "$1" "$(echo "$2/1000" | bc -l)"; }
ratio() { printf '%-62s %8.2f\n' "$1" "$(echo "$2/$3" | bc -l)"; }
pr=$(printf '%s\n' "${push_r[@]}" | median) pn=$(printf '%s\n' "${push_n[@]}" | median)
fr=$(printf '%s\n' "${fetch_r[@]}" | median) fn=$(printf '%s\n' "${fetch_n[@]}" | median)
echo "medians of $RUNS ($(du -sb "$tmp/rc-1/nar" | cut -f1) bytes of zstd NAR for rocmx, $(du -sb "$tmp/nc-1/nar" | cut -f1) for nix)"
row "push, rocmx copy --to file://" "$pr"; row "push, nix copy --to file://?compression=zstd" "$pn"
ratio "  nix / rocmx (goal >= 2.5)" "$pn" "$pr"
row "fetch into an empty store, rocmx copy --from file://" "$fr"; row "fetch, nix copy --from file:// --no-check-sigs" "$fn"
ratio "  nix / rocmx (goal >= 3)" "$fn" "$fr"

if command -v nginx >/dev/null || [[ -x /usr/sbin/nginx ]]; then
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  mkdir -p "$tmp/ngx"
  cat >"$tmp/ngx/nginx.conf" <<EOF
$( [[ $(id -u) == 0 ]] && echo "user root;" ) master_process off; daemon off; pid $tmp/ngx/pid; error_log $tmp/ngx/error.log;
events { worker_connections 64; }
http { access_log off; sendfile on; client_body_temp_path $tmp/ngx/b; proxy_temp_path $tmp/ngx/p;
  fastcgi_temp_path $tmp/ngx/f; uwsgi_temp_path $tmp/ngx/u; scgi_temp_path $tmp/ngx/s;
  server { listen 127.0.0.1:$port; root $tmp; } }
EOF
  /usr/sbin/nginx -p "$tmp/ngx" -c "$tmp/ngx/nginx.conf" </dev/null >/dev/null 2>&1 &
  ngx_pid=$!
  sleep 0.5
  hr=() hn=()
  for r in $(seq 1 "$RUNS"); do
    t=$(now); "$ROCMX" --store "$tmp/rh-$r" copy --from "http://127.0.0.1:$port/rc-1" "$p" --option trusted-public-keys "$(cat "$tmp/pub")" 2>/dev/null; hr+=("$(ms "$t")")
    t=$(now); eval "$NIX" copy --from "http://127.0.0.1:$port/nc-1" --store "$tmp/nh-$r" --no-check-sigs "$nix_path"; hn+=("$(ms "$t")")
  done
  hr_=$(printf '%s\n' "${hr[@]}" | median) hn_=$(printf '%s\n' "${hn[@]}" | median)
  row "fetch through nginx, rocmx copy --from http://" "$hr_"; row "fetch through nginx, nix copy --from http://" "$hn_"
  ratio "  nix / rocmx" "$hn_" "$hr_"
fi
echo "runs (ms): push rocmx ${push_r[*]} nix ${push_n[*]}; fetch rocmx ${fetch_r[*]} nix ${fetch_n[*]}; load $(cut -d' ' -f1-3 /proc/loadavg)"
