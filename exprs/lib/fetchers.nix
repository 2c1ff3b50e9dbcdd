# Fetchers: fixed-output derivations built by `builtin:fetchurl`.
#
#   let f = import ./fetchers.nix; in
#   f.fetchurl { urls = [ "mirror://debian/pool/…/x.orig.tar.xz" "https://…/x.tar.xz" ]; hash = "sha256-…"; }
#   f.fetchzip { url = "https://…/x.tar.gz"; hash = "sha256-…"; }   # unpacked, NAR hash
#
# The URLs are tried in order (`url` first, then `urls`); the declared hash
# decides what is right, so any mirror will do. `hash` is SRI (`sha256-…`,
# `sha512-…`, `blake3-…`) or typed (`sha256:…`); `sha256` is a bare SHA-256 in
# Nix base32 or hex. Without a hash the call throws and says how to get one:
# `rocmx store prefetch URL` (`--unpack` for fetchzip) prints it and puts the
# download in the store, so the build that follows downloads nothing; a file no
# mirror serves is seeded with `rocmx store add-fixed sha256 FILE`
# (`--recursive` for an unpacked tree, named `source`).
#
# The output path depends only on the name, the hash and flat/recursive, so it
# is the same whichever URL delivered the bytes.
let
  inherit (builtins) elemAt filter head isString length match split tail toString;

  # The last non-empty path segment of a URL, query and fragment dropped, as
  # builtin:fetchurl and `rocmx store prefetch` name a download.
  urlName = url:
    let
      path = head (split "[?#]" url);
      segs = filter (s: isString s && s != "" && match ".*:" s == null) (split "/" path);
    in
    if segs == [ ] then "download" else elemAt segs (length segs - 1);

  candidates = fn: url: urls:
    let all = (if url == null then [ ] else [ url ]) ++ urls; in
    if all == [ ] then throw "${fn}: give `url` or `urls`" else all;

  # outputHash and outputHashAlgo from `hash` or `sha256`.
  outputHashOf = { fn, url, hash, sha256, prefetch }:
    let
      given = h: h != null && h != "";
    in
    if given hash && given sha256 then
      throw "${fn}: give either `hash` or `sha256` for '${url}', not both"
    else if given hash then
      { outputHash = hash; }
    else if given sha256 then
      { outputHash = sha256; outputHashAlgo = "sha256"; }
    else
      throw "${fn}: no hash given for '${url}'; run `rocmx store prefetch ${prefetch}${url}` to download it and print its hash, then pass it as `hash = \"sha256-…\";`";

  fetch = { fn, url, urls, hash, sha256, name, executable, unpack, size, failureHint ? null }:
    let
      all = candidates fn url urls;
      first = head all;
      recursive = executable || unpack;
    in
    derivation ({
      inherit name;
      builder = "builtin:fetchurl";
      system = "builtin";
      url = first;
      urls = tail all;
      outputHashMode = if recursive then "recursive" else "flat";
    }
    // outputHashOf {
      inherit fn hash sha256;
      url = first;
      prefetch = if unpack then "--unpack " else if executable then "--executable " else "";
    }
    // (if executable then { executable = "1"; } else { })
    // (if unpack then { unpack = "1"; } else { })
    // (if size == null then { } else { size = toString size; })
    // (if failureHint == null then { } else { inherit failureHint; }));
in
{
  inherit urlName;

  # One file, flat hash (a NAR hash when `executable`). `name` defaults to the
  # first URL's last path segment; `size` is the exact size in bytes, when known.
  fetchurl =
    { url ? null
    , urls ? [ ]
    , hash ? null
    , sha256 ? null
    , name ? urlName (head (candidates "fetchurl" url urls))
    , executable ? false
    , size ? null
      # Appended to the error when every URL fails (how to recover).
    , failureHint ? null
    }:
    fetch {
      fn = "fetchurl";
      inherit url urls hash sha256 name executable size failureHint;
      unpack = false;
    };

  # A tarball (tar, gz, xz, zstd) unpacked; its single top-level directory,
  # when that is all it holds, becomes the output. Recursive (NAR) hash.
  fetchzip =
    { url ? null
    , urls ? [ ]
    , hash ? null
    , sha256 ? null
    , name ? "source"
    , size ? null
    }:
    fetch {
      fn = "fetchzip";
      inherit url urls hash sha256 name size;
      executable = false;
      unpack = true;
    };
}
