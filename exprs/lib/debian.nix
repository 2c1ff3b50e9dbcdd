# Root filesystems from pinned Debian binary packages.
#
#   let d = import ./debian.nix; in
#   d.debianRootfs { name = "base"; lock = ../bootstrap/base.lock.json; }
#
# `lock` is the JSON file `rocmx debian lock` writes: its `packages` list has,
# for each package, `package`, `version`, `filename` (the pool path),
# `sha256` (hex) and `size`. Each .deb is one fixed-output `builtin:fetchurl`
# derivation of `mirror://debian/<filename>` (the machine's apt sources, or
# `mirror.debian` in rocmx.conf), so it is fetched once, checked by its hash,
# and outlives the pool in a binary cache. The root is one derivation whose
# built-in builder `builtin:unpack-debs` unpacks them in lock order into merged
# /usr, runs no maintainer scripts, and makes the few links those scripts would
# have made that a toolchain needs (see debian/src/rootfs.rs). A derivation's
# `rootfs` attribute mounts the result as `/`.
let
  inherit (builtins) concatStringsSep fromJSON isString map readFile split;

  fetchers = import ./fetchers.nix;
  licenses = import ./licenses.nix;

  # A store path name from any text: characters outside [A-Za-z0-9+._?=-]
  # (the epoch's `:` in a version, say) become `_`.
  safeName = s:
    concatStringsSep "" (map (p: if isString p then p else "_") (split "[^A-Za-z0-9+._?=-]" s));

  # One pinned .deb of a lock entry.
  fetchDeb = p:
    fetchers.fetchurl {
      url = "mirror://debian/${p.filename}";
      sha256 = p.sha256;
      size = p.size;
      name = safeName "${p.package}_${p.version}.deb";
      failureHint = "the pinned ${p.package} ${p.version} is no longer on the mirror: run 'rocmx debian lock --update' and use the new lock, or fetch this fixed output from a binary cache that holds it";
    };

  debianRootfs = { name, lock }:
    let
      packages = (fromJSON (readFile lock)).packages;
    in
    (derivation {
      inherit name;
      system = builtins.currentSystem;
      builder = "builtin:unpack-debs";
      # In lock order: a later package's file replaces an earlier one's.
      debs = map fetchDeb packages;
    }) // {
      # For tools that walk packages (rocmx licenses, rocmx graph); not part
      # of the derivation.
      meta = {
        description = "Debian ${(fromJSON (readFile lock)).suite} root of ${toString (builtins.length packages)} pinned packages";
        license = licenses.debianMain;
        fromBinary = "Debian's pinned binary packages (${baseNameOf (toString lock)})";
      };
    };

  # The pool directory of a source package: `h` for hello, `libf` for libfoo.
  poolPrefix = src:
    if builtins.substring 0 3 src == "lib" then builtins.substring 0 4 src else builtins.substring 0 1 src;

  # "1:2.12.3-1" -> "2.12.3-1" (file names carry no epoch), and its upstream
  # part "2.12.3" (without the Debian revision).
  noEpoch = v: let m = builtins.match "[0-9]+:(.*)" v; in if m == null then v else builtins.head m;
  upstreamOf = v: let m = builtins.match "(.*)-[^-]*" (noEpoch v); in if m == null then noEpoch v else builtins.head m;

  # A Debian source package: the upstream `.orig.tar.*` and, when given, the
  # `.debian.tar.xz` whose `debian/patches/series` is applied in order (each
  # line `NAME [patch options]`, `-p1` by default; `#` comments). Both are
  # fixed-output fetches from the pool (`mirror://debian/pool/main/…`) unless
  # `url` says otherwise; the mirror serves only part of the source pool, so
  # `rocmx store add-fixed sha256 FILE` can seed one from elsewhere.
  #
  #   debianSource { inherit stdenv; pname = "hello"; version = "2.12.3-1";
  #     orig = { hash = "sha256-…"; }; debian = { hash = "sha256-…"; }; }
  #
  # `orig` and `debian` may also give `size` (bytes, as the Sources index
  # lists it), which `rocmx build --dry-run` shows; `orig.ext` is the
  # tarball's compression (gz by default). `qaExceptions` waives QA checks
  # for the source tree (`{ build-dir-reference = "why"; }` when the
  # upstream text itself names a `/build/…` path).
  debianSource = { stdenv, pname, version, orig, debian ? null, source ? pname, qaExceptions ? null }:
    let
      pool = "mirror://debian/pool/main/${poolPrefix source}/${source}";
      upstream = upstreamOf version;
      origSrc = fetchers.fetchurl {
        url = orig.url or "${pool}/${source}_${upstream}.orig.tar.${orig.ext or "gz"}";
        hash = orig.hash;
        size = orig.size or null;
      };
      debianSrc = if debian == null then null else fetchers.fetchurl {
        url = debian.url or "${pool}/${source}_${noEpoch version}.debian.tar.xz";
        hash = debian.hash;
        size = debian.size or null;
      };
    in
    stdenv.runCommand "${pname}-${upstream}-source" ({ orig = origSrc; debianTar = debianSrc; }
      # Only when given, so the sources without exceptions keep their derivations.
      // (if qaExceptions == null then { } else { meta.qaExceptions = qaExceptions; })) ''
      mkdir unpack
      case "$orig" in
        *.xz) xz -dc "$orig" | (cd unpack && tar -xf -) ;;
        *.gz) gzip -dc "$orig" | (cd unpack && tar -xf -) ;;
        *.bz2) bzip2 -dc "$orig" | (cd unpack && tar -xf -) ;;
        *) (cd unpack && tar -xf "$orig") ;;
      esac
      set -- unpack/*
      if [ "$#" -eq 1 ] && [ -d "$1" ]; then mv "$1" "$out"; else mv unpack "$out"; fi
      if [ -n "$debianTar" ]; then
        xz -dc "$debianTar" | (cd "$out" && tar -xf -)
        if [ -f "$out/debian/patches/series" ]; then
          while read -r name opts; do
            case "$name" in ""|"#"*) continue ;; esac
            echo "applying debian/patches/$name"
            (cd "$out" && patch ''${opts:--p1} < "debian/patches/$name")
          done < "$out/debian/patches/series"
        fi
      fi
    '';
in
{
  inherit debianSource debianRootfs fetchDeb safeName;
}
