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
    derivation {
      inherit name;
      system = builtins.currentSystem;
      builder = "builtin:unpack-debs";
      # In lock order: a later package's file replaces an earlier one's.
      debs = map fetchDeb packages;
    };
in
{
  inherit debianRootfs fetchDeb safeName;
}
