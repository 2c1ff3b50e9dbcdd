# shellcheck shell=bash
# A second evaluation peer for the benchmarks: Debian sid's `nix-bin`
# (Nix 2.34.x) in a chroot that this file makes with mmdebstrap, keeps in a
# cache directory outside the repository, and reuses.
#
# Sourced by bench/eval.sh and bench/nix234.sh; it defines functions and
# variables only. Nothing here exits the caller: a function that cannot do its
# part returns 1 and leaves the reason, one line, in NIX234_REASON.
#
# Environment:
#   NIX234_CACHE    cache directory (default
#                   ${XDG_CACHE_HOME:-$HOME/.cache}/rocmx-bench)
#   NIX234_DIR      the chroot (default $NIX234_CACHE/nix-sid)
#   NIX234_MIRROR   Debian mirror URI for mmdebstrap (default: the first
#                   Debian archive in the machine's apt sources)
#   NIX234_REFRESH  1: delete the chroot and make it again
#
# Making it: `mmdebstrap --variant=apt --include=nix-bin
# --aptopt='Acquire::Check-Valid-Until "false"' sid DIR MIRROR` (no
# Valid-Until check, so a snapshot mirror's old sid works too), then
# bench/nix234/nix.conf as its /etc/nix/nix.conf. It is made in DIR.new and
# renamed when complete, so an interrupted build leaves no half chroot.
#
# Using it: nix234_mount binds /proc and /dev into the chroot and a
# directory of .nix files read-only at a fresh /tmp/rocmx-bench.XXXXXX inside
# it; nix234_unmount (idempotent; call it from an EXIT trap) undoes that.
# Each evaluation is then `chroot DIR /usr/bin/nix-instantiate ...`: chroot(1)
# execs the command in its own process, so a wait4()/GNU time around it
# measures nix-instantiate itself.
#
# Several runs may share the chroot (a shared flock on DIR.lock); making or
# deleting it takes the lock exclusively. Mounts left by a run that was
# killed outright (SIGKILL) are swept when the lock is next taken
# exclusively. The chroot is never deleted while anything is mounted under
# it, and deletion stays on its file system (rm --one-file-system).

nix234_here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
NIX234_CACHE=${NIX234_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rocmx-bench}
NIX234_DIR=${NIX234_DIR:-$NIX234_CACHE/nix-sid}
NIX234_REFRESH=${NIX234_REFRESH:-0}
NIX234_REASON=
NIX234_VERSION=
NIX234_EVAL=
NIX234_MOUNTS=()
NIX234_LOCK_FD=

nix234_fail() { NIX234_REASON=$*; return 1; }

# The Debian mirror to make sid from: NIX234_MIRROR, or the first deb entry of
# the apt sources (sources.list, sources.list.d/*.list one-line entries,
# sources.list.d/*.sources deb822 stanzas) whose suite is a Debian release
# (a codename or sid/unstable/testing/stable/...), security archives left
# out. Prints the URI.
nix234_mirror() {
    if [[ -n ${NIX234_MIRROR:-} ]]; then
        echo "$NIX234_MIRROR"
        return 0
    fi
    local -a files=()
    local f
    [[ -f /etc/apt/sources.list ]] && files+=(/etc/apt/sources.list)
    for f in /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
        [[ -f $f ]] && files+=("$f")
    done
    ((${#files[@]} > 0)) || return 1
    local uri
    uri=$(
        for f in "${files[@]}"; do
            if [[ $f == *.sources ]]; then
                # deb822: stanzas separated by blank lines; print "URI SUITE"
                # for each URI and suite of an enabled deb stanza.
                awk '
                    function flush(   nu, ns, u, s, i, j) {
                        if (types ~ /(^|[ \t])deb([ \t]|$)/ && tolower(enabled) != "no") {
                            nu = split(uris, u, /[ \t]+/); ns = split(suites, s, /[ \t]+/);
                            for (i = 1; i <= nu; i++) for (j = 1; j <= ns; j++)
                                if (u[i] != "" && s[j] != "") print u[i], s[j];
                        }
                        types = uris = suites = enabled = ""; last = "";
                    }
                    /^[ \t]*#/ { next }
                    /^[ \t]*$/ { flush(); next }
                    /^[ \t]/ { if (last == "uris") uris = uris " " $0; else if (last == "suites") suites = suites " " $0; next }
                    {
                        key = tolower($0); sub(/:.*/, "", key);
                        val = $0; sub(/^[^:]*:[ \t]*/, "", val);
                        last = key;
                        if (key == "types") types = val;
                        else if (key == "uris") uris = val;
                        else if (key == "suites") suites = val;
                        else if (key == "enabled") enabled = val;
                    }
                    END { flush() }' "$f"
            else
                # One-line style: deb [options] URI SUITE COMPONENT...
                awk '/^[ \t]*#/ { next }
                    $1 == "deb" {
                        i = 2;
                        if ($2 ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
                        if (i + 1 <= NF) print $i, $(i + 1);
                    }' "$f"
            fi
        done | awk '
            $1 ~ /^cdrom:/ || $1 ~ /security/ { next }
            {
                suite = $2; sub(/\/+$/, "", suite);
                if (suite ~ /^(sid|unstable|experimental|testing|stable|oldstable|oldoldstable|hamm|slink|potato|woody|sarge|etch|lenny|squeeze|wheezy|jessie|stretch|buster|bullseye|bookworm|trixie|forky|duke)$/ \
                    || (suite !~ /[-\/]/ && $1 ~ /\/debian\/?$/)) { print $1; exit }
            }'
    )
    [[ -n $uri ]] || return 1
    echo "$uri"
}

# Mount points under $1 (itself included), deepest first.
nix234_mounts_under() {
    local d=$1
    awk -v d="$d" '$5 == d || index($5, d "/") == 1 { print $5 }' /proc/self/mountinfo | sort -r
}

# Delete a chroot directory, refusing while anything is mounted under it.
nix234_remove() {
    local d=$1
    [[ -e $d ]] || return 0
    if [[ $d == / || ! ( -f $d/.rocmx-bench-ready || $d == *.new || -d $d/var/lib/dpkg ) ]]; then
        nix234_fail "$d does not look like a chroot made by bench/nix234; not deleting it"
        return 1
    fi
    if [[ -n $(nix234_mounts_under "$d") ]]; then
        nix234_fail "$d has mounts under it ($(nix234_mounts_under "$d" | tr '\n' ' ')); not deleting it"
        return 1
    fi
    rm -rf --one-file-system -- "$d"
}

# Make sure mmdebstrap is there, installing Debian's package when missing.
nix234_need_mmdebstrap() {
    command -v mmdebstrap >/dev/null 2>&1 && return 0
    command -v apt-get >/dev/null 2>&1 || { nix234_fail "mmdebstrap is not installed and there is no apt-get"; return 1; }
    echo "nix234: mmdebstrap is missing; running apt-get update && apt-get install -y mmdebstrap" >&2
    mkdir -p "$NIX234_CACHE"
    if ! { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y mmdebstrap; } \
        >"$NIX234_CACHE/apt-mmdebstrap.log" 2>&1; then
        nix234_fail "mmdebstrap is not installed and apt-get install failed (log: $NIX234_CACHE/apt-mmdebstrap.log)"
        return 1
    fi
    command -v mmdebstrap >/dev/null 2>&1 || { nix234_fail "mmdebstrap still missing after apt-get install"; return 1; }
}

# Make the chroot in $NIX234_DIR (the caller holds the lock exclusively).
nix234_build() {
    local mirror new log t0 t1 rc
    nix234_need_mmdebstrap || return 1
    mirror=$(nix234_mirror) || { nix234_fail "no Debian mirror found in the apt sources (set NIX234_MIRROR)"; return 1; }
    new=$NIX234_DIR.new
    log=$NIX234_DIR.log
    nix234_remove "$new" || return 1
    echo "nix234: making the Nix chroot in $NIX234_DIR (mmdebstrap sid from $mirror; log: $log)" >&2
    t0=$(date +%s%N)
    if mmdebstrap --variant=apt --include=nix-bin \
        --aptopt='Acquire::Check-Valid-Until "false"' \
        sid "$new" "$mirror" >"$log" 2>&1; then
        rc=0
    else
        rc=$?
    fi
    t1=$(date +%s%N)
    if ((rc != 0)); then
        local why
        why=$(grep -E '^E: ' "$log" | head -n 1)
        nix234_remove "$new" || true
        nix234_fail "mmdebstrap failed (exit $rc${why:+: $why}; log: $log)"
        return 1
    fi
    [[ -x $new/usr/bin/nix-instantiate ]] || { nix234_fail "mmdebstrap made no /usr/bin/nix-instantiate (log: $log)"; return 1; }
    mkdir -p "$new/etc/nix"
    cp "$nix234_here/nix.conf" "$new/etc/nix/nix.conf"
    touch "$new/.rocmx-bench-ready"
    nix234_remove "$NIX234_DIR" || return 1
    mv "$new" "$NIX234_DIR"
    echo "nix234: made in $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", (b - a) / 1e9 }') s, $(du -sm --one-file-system "$NIX234_DIR" | cut -f1) MiB" >&2
}

# With the lock held exclusively nobody else is using the chroot: whatever is
# mounted under it was left by a killed run.
nix234_sweep() {
    local m
    while read -r m; do
        [[ -n $m ]] && { umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; }
    done < <(nix234_mounts_under "$NIX234_DIR"; nix234_mounts_under "$NIX234_DIR.new")
    for m in "$NIX234_DIR"/tmp/rocmx-bench.*; do
        [[ -d $m ]] && { rmdir "$m" 2>/dev/null || true; }
    done
}

# Take the lock, sweep stale mounts, make the chroot if missing (or if
# NIX234_REFRESH=1), and leave a shared lock held. Sets NIX234_VERSION.
nix234_prepare() {
    NIX234_REASON=
    ((EUID == 0)) || { nix234_fail "needs root (chroot, mount)"; return 1; }
    local tool
    for tool in chroot mount umount flock; do
        command -v "$tool" >/dev/null 2>&1 || { nix234_fail "'$tool' not found"; return 1; }
    done
    [[ $NIX234_DIR != *[[:space:]]* ]] || { nix234_fail "NIX234_DIR must not contain white space"; return 1; }
    mkdir -p "$NIX234_CACHE" "$(dirname "$NIX234_DIR")" || { nix234_fail "cannot create $NIX234_CACHE"; return 1; }
    NIX234_DIR=$(cd "$(dirname "$NIX234_DIR")" && pwd -P)/$(basename "$NIX234_DIR")
    if [[ -z $NIX234_LOCK_FD ]]; then
        exec {NIX234_LOCK_FD}>>"$NIX234_DIR.lock" || { nix234_fail "cannot open $NIX234_DIR.lock"; return 1; }
    fi
    local ready=0
    [[ -f $NIX234_DIR/.rocmx-bench-ready ]] && ready=1
    if flock -x -n "$NIX234_LOCK_FD"; then
        nix234_sweep
    elif ((ready == 0 || NIX234_REFRESH == 1)); then
        echo "nix234: another run is using $NIX234_DIR; waiting for the lock to make or refresh the chroot" >&2
        flock -x "$NIX234_LOCK_FD"
        nix234_sweep
        # The other run may just have made it.
        ((NIX234_REFRESH != 1)) && [[ -f $NIX234_DIR/.rocmx-bench-ready ]] && ready=1
    else
        flock -s "$NIX234_LOCK_FD"
    fi
    if ((ready == 0 || NIX234_REFRESH == 1)); then
        if ! nix234_build; then
            flock -u "$NIX234_LOCK_FD"
            return 1
        fi
    fi
    # The configuration is part of the repository: keep the chroot's current.
    cmp -s "$nix234_here/nix.conf" "$NIX234_DIR/etc/nix/nix.conf" ||
        { mkdir -p "$NIX234_DIR/etc/nix" && cp "$nix234_here/nix.conf" "$NIX234_DIR/etc/nix/nix.conf"; }
    flock -s "$NIX234_LOCK_FD"
}

# Bind /proc, /dev and the directory $1 (read-only) into the chroot. Sets
# NIX234_EVAL to where $1 is seen inside, and NIX234_VERSION (Nix needs
# /proc even for --version: it reads /proc/self/exe).
nix234_mount() {
    local src=$1 mnt
    mkdir -p "$NIX234_DIR/proc" "$NIX234_DIR/dev" "$NIX234_DIR/tmp"
    mount --bind /proc "$NIX234_DIR/proc" || { nix234_fail "cannot bind /proc into $NIX234_DIR"; return 1; }
    NIX234_MOUNTS+=("$NIX234_DIR/proc")
    mount --bind /dev "$NIX234_DIR/dev" || { nix234_fail "cannot bind /dev into $NIX234_DIR"; return 1; }
    NIX234_MOUNTS+=("$NIX234_DIR/dev")
    mnt=$(mktemp -d "$NIX234_DIR/tmp/rocmx-bench.XXXXXX") || { nix234_fail "cannot create a mount point in $NIX234_DIR/tmp"; return 1; }
    if ! mount --bind "$src" "$mnt"; then
        rmdir "$mnt"
        nix234_fail "cannot bind $src into $NIX234_DIR"
        return 1
    fi
    NIX234_MOUNTS+=("$mnt")
    mount -o remount,bind,ro "$mnt" || { nix234_fail "cannot make $mnt read-only"; return 1; }
    NIX234_EVAL=${mnt#"$NIX234_DIR"}
    NIX234_VERSION=$(chroot "$NIX234_DIR" /usr/bin/nix-instantiate --version 2>&1) ||
        { nix234_fail "the chroot's nix-instantiate does not run ($(tail -n 1 <<<"$NIX234_VERSION"); try NIX234_REFRESH=1)"; return 1; }
}

# Undo nix234_mount, newest mount first; safe to call more than once.
nix234_unmount() {
    local i m
    for ((i = ${#NIX234_MOUNTS[@]} - 1; i >= 0; i--)); do
        m=${NIX234_MOUNTS[i]}
        umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null ||
            echo "nix234: could not unmount $m" >&2
        if [[ $m == "$NIX234_DIR"/tmp/rocmx-bench.* ]] && ! mountpoint -q "$m"; then
            rmdir "$m" 2>/dev/null || true
        fi
    done
    NIX234_MOUNTS=()
}
