#!/usr/bin/env bash
# The Nix 2.34 peer of bench/eval.sh: Debian sid's nix-bin in a chroot made
# with mmdebstrap and kept outside the repository (see bench/nix234/chroot.sh).
# bench/eval.sh makes and uses it by itself; this script is for doing it by
# hand.
#
# Usage:
#   bench/nix234.sh [--refresh]            make the chroot if missing (or again,
#                                          with --refresh), print where and which Nix
#   bench/nix234.sh --overhead [N]         measure what going through chroot adds
#                                          to one launch (N launches per batch,
#                                          default 200)
#   bench/nix234.sh -- ARG...              run the chroot's nix-instantiate ARG...,
#                                          with bench/eval bound read-only at the
#                                          path printed on stderr
#
# Environment: NIX234_CACHE, NIX234_DIR, NIX234_MIRROR, NIX234_REFRESH as in
# bench/nix234/chroot.sh. Exit status 0, or 2 when the chroot cannot be made
# or used (the reason is printed).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/nix234/chroot.sh
source "$here/nix234/chroot.sh"

die() { echo "bench/nix234.sh: $*" >&2; exit 2; }

mode=info
n=200
args=()
while (($# > 0)); do
    case $1 in
        --refresh) NIX234_REFRESH=1; shift ;;
        --overhead)
            mode=overhead; shift
            if (($# > 0)) && [[ $1 =~ ^[1-9][0-9]*$ ]]; then n=$1; shift; fi ;;
        --) mode=run; shift; args=("$@"); break ;;
        -h | --help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
        *) die "unknown argument '$1' (see --help)" ;;
    esac
done

trap 'nix234_unmount' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

nix234_prepare || die "Nix 2.34 chroot unavailable: $NIX234_REASON"

case $mode in
    info)
        nix234_mount "$here/eval" || die "$NIX234_REASON"
        echo "chroot: $NIX234_DIR ($(du -sm --one-file-system "$NIX234_DIR" | cut -f1) MiB)"
        echo "nix:    $NIX234_VERSION"
        echo "mirror: $(nix234_mirror || echo 'none found in the apt sources')"
        ;;
    run)
        nix234_mount "$here/eval" || die "$NIX234_REASON"
        echo "bench/nix234.sh: bench/eval is $NIX234_EVAL inside the chroot" >&2
        chroot "$NIX234_DIR" /usr/bin/nix-instantiate "${args[@]}"
        ;;
    overhead)
        # Launch cost of the same /bin/true directly, through `chroot /` (the
        # chroot(1) exec and chroot(2) call only), and through the Nix chroot
        # (also sid's own dynamic loader and libc). Batches of N launches,
        # the three interleaved, 7 rounds; medians of the per-launch times.
        nix234_mount "$here/eval" || die "$NIX234_REASON"
        batch() {
            local s e i
            s=$EPOCHREALTIME
            for ((i = 0; i < n; i++)); do "$@" >/dev/null; done
            e=$EPOCHREALTIME
            awk -v a="$s" -v b="$e" -v n="$n" 'BEGIN { printf "%.4f\n", (b - a) * 1000 / n }'
        }
        tmp=$(mktemp -d "${TMPDIR:-/tmp}/rocmx-nix234.XXXXXX")
        trap 'nix234_unmount; rm -rf "$tmp"' EXIT
        for ((r = 0; r < 7; r++)); do
            batch /bin/true >>"$tmp/direct"
            batch chroot / /bin/true >>"$tmp/root"
            batch chroot "$NIX234_DIR" /bin/true >>"$tmp/sid"
            batch chroot "$NIX234_DIR" /usr/bin/nix-instantiate --version >>"$tmp/nix"
        done
        med() { sort -g "$1" | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
        d=$(med "$tmp/direct"); r=$(med "$tmp/root"); s=$(med "$tmp/sid"); x=$(med "$tmp/nix")
        echo "load average: $(cut -d' ' -f1-3 /proc/loadavg); $n launches per batch, 7 batches each, medians"
        awk -v d="$d" -v r="$r" -v s="$s" -v x="$x" 'BEGIN {
            printf "  /bin/true                          %.3f ms\n", d;
            printf "  chroot / /bin/true                 %.3f ms  (+%.3f ms: chroot itself)\n", r, r - d;
            printf "  chroot NIXDIR /bin/true            %.3f ms  (+%.3f ms: chroot and sid'"'"'s loader and libc)\n", s, s - d;
            printf "  chroot NIXDIR nix-instantiate --version  %.3f ms  (for scale)\n", x;
        }'
        ;;
esac
