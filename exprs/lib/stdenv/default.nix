# The build library: mkDerivation and the small builders around it.
#
#   stdenv = import ./exprs/lib/stdenv { rootfs = …; };    # a Debian root (debianRootfs)
#   stdenv.mkDerivation { pname = "hello"; version = "2.12"; src = …; }
#
# `rootfs` is mounted as the build's `/` (its /usr/bin is on PATH), `shell`
# runs setup.sh (the phases: unpack patch configure build check install fixup;
# see the header of setup.sh for hooks, dont… flags and buildCommand).
# Without a rootfs, `shell` must name a static shell in the store (tests use a
# static busybox).
#
# Attributes of mkDerivation: pname, version (or name), src, patches,
# nativeBuildInputs, buildInputs (lists of packages), configureFlags,
# cmakeFlags, makeFlags (lists of strings), doCheck (bool), outputs, passthru,
# meta, and any other attribute, exported to the build as an environment
# variable (lists are joined with spaces, bools become "1" or "").
# The result has `overrideAttrs (old: { … })`. After the build, QA checks run
# (build-dir-reference, world-writable, broken-symlink, runpath-outside-store,
# setuid, archive-mtime); `meta.qaExceptions = { CHECK = "reason"; }` waives one.
# `meta.broken = "why";` (or true) makes planning or building it warn.
{ rootfs ? null
, shell ? (if rootfs == null then throw "stdenv: give a rootfs or a shell" else "${rootfs}/bin/sh")
, path ? [ ]
  # DFSG-style gate: a package whose meta.license is not free is refused
  # unless this is true (a flake passes its `allowNonfree` parameter, which
  # `rocmx build --allow-nonfree` sets).
, allowNonfree ? false
}:
let
  inherit (builtins) isList isBool isAttrs isPath concatStringsSep removeAttrs map;

  setup = ./setup.sh;

  # Environment values: lists joined with spaces (paths copied to the store,
  # packages by their output path), bools "1"/"".
  item = x: if isPath x || isAttrs x then "${x}" else toString x;
  toEnv = v:
    if isList v then concatStringsSep " " (map item v)
    else if isBool v then (if v then "1" else "")
    else v;

  basePath = concatStringsSep ":" (map (p: "${p}/bin") path
    ++ (if rootfs == null then [ ] else [ "/usr/bin" "/usr/sbin" ]));

  licenseList = l: if l == null then [ ] else if isList l then l else [ l ];
  licenseName = l: l.spdxId or l.fullName or (toString l);
  # Licences given as plain strings are taken to be free SPDX ids.
  isFree = l: if isAttrs l then l.free or true else true;

  mkDerivation = args:
    let
      name0 = args.name or "${args.pname}-${args.version}";
      passthru = args.passthru or { };
      meta = args.meta or { };
      name = name0;
      nonfree = builtins.filter (l: !isFree l) (licenseList (meta.license or null));
      # The gate guards what building needs (drvPath, outPath), so that name
      # and meta stay readable (`rocmx licenses` lists non-free packages).
      # meta.broken (true, or a string saying why) warns when the package
      # is built or planned, without refusing: an expression that has never
      # built says so, and can still be tried.
      broken = meta.broken or false;
      guard = x:
        if nonfree != [ ] && !allowNonfree then
          throw "${name0} has a non-free licence (${concatStringsSep ", " (map licenseName nonfree)}); build it with --allow-nonfree if you accept it"
        else if broken != false then
          builtins.trace "warning: ${name0} is marked broken${if builtins.isString broken then ": ${broken}" else ""}" x
        else x;
      env = removeAttrs args [ "passthru" "meta" "name" ];
      drv = derivation ((builtins.mapAttrs (_: toEnv) env) // {
        inherit name;
        system = builtins.currentSystem;
        builder = shell;
        args = [ "-e" setup ];
        PATH = basePath;
        # QA checks after the build (builder/src/qa.rs), waived per check by
        # meta.qaExceptions = { CHECK = "reason"; }.
        rocmxQa = "1";
        rocmxQaExceptions = builtins.toJSON (meta.qaExceptions or { });
      } // (if rootfs == null then { } else { inherit rootfs; }));
    in
    drv // passthru // {
      inherit meta passthru;
      drvPath = guard drv.drvPath;
      outPath = guard drv.outPath;
      # The inputs as given (the derivation's own attributes are the strings
      # the build sees), for tools that walk packages (`rocmx licenses`).
      nativeBuildInputs = args.nativeBuildInputs or [ ];
      buildInputs = args.buildInputs or [ ];
      propagatedBuildInputs = args.propagatedBuildInputs or [ ];
      overrideAttrs = f: mkDerivation (args // f args);
    };

  # A file in the store with `text` (as Nix's writeText).
  writeText = name: text: mkDerivation {
    inherit name text;
    passAsFile = [ ];
    buildCommand = ''printf '%s' "$text" > "$out"'';
  };

  # An executable script.
  writeShellScript = name: text: mkDerivation {
    inherit name text;
    buildCommand = ''{ echo '#!/bin/sh'; printf '%s\n' "$text"; } > "$out"; chmod +x "$out"'';
  };

  # A derivation from a shell command (as Nix's runCommand).
  runCommand = name: env: buildCommand: mkDerivation (env // { inherit name buildCommand; });

  # One tree of symlinks to the given packages' files.
  symlinkJoin = { name, paths }: mkDerivation {
    inherit name paths;
    buildCommand = ''
      mkdir -p "$out"
      for p in $paths; do
        (cd "$p" && find . -type d) | while read -r d; do mkdir -p "$out/$d"; done
        (cd "$p" && find . ! -type d) | while read -r f; do
          f=''${f#./}
          [ -e "$out/$f" ] || [ -L "$out/$f" ] || ln -s "$p/$f" "$out/$f"
        done
      done
    '';
  };

  # `f args` with `.override newArgs` calling f again (as Nix's makeOverridable).
  makeOverridable = f: args:
    let r = f args; in
    if isAttrs r then r // { override = newArgs: makeOverridable f (args // newArgs); } else r;
in
{
  inherit mkDerivation writeText writeShellScript runCommand symlinkJoin makeOverridable rootfs shell;
}
