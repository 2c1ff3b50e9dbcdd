# Workload: a package set shaped like nixpkgs, in plain Nix (builtins only).
# A self-referential set (`fix` of `final: { … }`, built with listToAttrs
# over genList) of 5,000 generated packages plus a few hand-written ones, a
# nested scope of 300 Python-style packages with `overrideScope`, and seven
# overlays (`final: prev: { … }`) applied by folding `extends`. Packages come
# from `callPackage` (functionArgs/intersectAttrs against `final`), wrapped by
# a small `makeOverridable`, and are built by a small `mkDerivation` with
# `overrideAttrs`, like nixpkgs' lib/customisation.nix and stdenv. Each
# package depends on up to four earlier ones taken from `final` (and on the
# stdenv, which an overlay replaces, so every package sees the overlays);
# overlays patch every 10th package with `.overrideAttrs`, change arguments
# of every 7th with `.override`, chain `.override`/`.overrideAttrs`/`.override`
# on every 13th, add an input to every 5th, add 250 applications, and
# override inside the nested scope. mkDerivation validates every package's
# meta first, as nixpkgs' check-meta does. Every package is a real
# `derivation` whose inputs are derivations (lists and `${…}`), and every
# drvPath is forced.
# Measures: the fixed point and overlay `//` layers over a 5,000-key set,
# attribute selection through `final`, functionArgs/intersectAttrs, the
# closures and `//` of override chains, derivationStrict with string context
# and input-derivation hashing, getContext and genericClosure.
# Prints only figures that do not depend on store paths (store directory and
# hash function differ between Nix and rocmx by design): counts, the total
# number of distinct input derivations (from getContext), the size of the
# genericClosure of every 50th package, how many versions carry the
# overlays' markers, and the total length of the names.
let
  inherit (builtins)
    attrNames attrValues concatStringsSep filter foldl'
    functionArgs genList getContext intersectAttrs isFunction length
    listToAttrs stringLength;

  mod = a: b: a - (a / b) * b;
  min = a: b: if a < b then a else b;
  n = 5000;
  pname = i: "p${toString i}";

  # --- lib/fixed-points.nix -------------------------------------------------
  fix = f: let x = f x; in x;
  extends = overlay: f: final: let prev = f final; in prev // overlay final prev;
  applyOverlays = overlays: f: foldl' (acc: o: extends o acc) f overlays;
  makeScope = f:
    let self = f self // { overrideScope = g: makeScope (extends g f); };
    in self;

  # --- lib/customisation.nix ------------------------------------------------
  makeOverridable = f: origArgs:
    let
      result = f origArgs;
      overrideWith = newArgs:
        origArgs // (if isFunction newArgs then newArgs origArgs else newArgs);
    in
    result // {
      override = newArgs: makeOverridable f (overrideWith newArgs);
      # Like nixpkgs: an overrideAttrs stays overridable, and a later
      # .override keeps it.
      overrideAttrs = g: makeOverridable (args: (f args).overrideAttrs g) origArgs;
    };
  callPackageWith = autoArgs: fn: args:
    makeOverridable fn (intersectAttrs (functionArgs fn) autoArgs // args);

  # --- stdenv.mkDerivation --------------------------------------------------
  # Like nixpkgs' check-meta.nix, every package's meta is validated before
  # its derivation is produced.
  allowedMeta = [ "description" "license" "platforms" "maintainers" "homepage" "broken" "priority" ];
  validMeta = meta:
    builtins.all (k: builtins.elem k allowedMeta) (attrNames meta)
    && builtins.elem "x86_64-linux" meta.platforms
    && !(meta.broken or false)
    && builtins.elem meta.license [ "mit" "bsd3" "gpl2Plus" "asl20" ];
  mkDerivationWith = stdenv: attrs:
    let
      a = {
        buildInputs = [ ];
        nativeBuildInputs = [ ];
        outputs = [ "out" ];
        patches = [ ];
        configureFlags = [ ];
        passthru = { };
        meta = { };
      } // attrs;
      name = "${a.pname}-${a.version}";
      meta = {
        description = "package ${a.pname}";
        license = "mit";
        platforms = [ "x86_64-linux" "aarch64-linux" ];
        maintainers = [ "alice" "bob" ];
        homepage = "https://example.org/${a.pname}";
      } // a.meta;
      drv = if !validMeta meta then throw "${name}: invalid meta" else derivation {
        inherit name stdenv;
        inherit (a) outputs buildInputs nativeBuildInputs patches;
        system = "x86_64-linux";
        builder = "/bin/sh";
        args = [
          "-c"
          ("source ${stdenv}/setup; " + concatStringsSep "; " (map (o: "echo ${name} ${concatStringsSep " " a.configureFlags} > \$${o}") a.outputs))
        ];
        configureFlags = concatStringsSep " " a.configureFlags;
      };
    in
    drv // a.passthru // {
      inherit (a) pname version;
      inherit meta;
      overrideAttrs = f: mkDerivationWith stdenv (attrs // f a);
    };

  # Up to four earlier packages: one from the first hundred ("core"
  # libraries), the others nearby, as in real sets.
  depsOf = i:
    let
      k = min i (mod (i * 7 + 3) 5);
      pick = j:
        if j == 0 then mod (i * 13 + 5) (min i 100)
        else i - 1 - mod (i * 31 + j * 17) (min i 60);
    in
    genList pick k;

  # The generated packages; formals are filled by callPackage from `final`.
  generic = { mkDerivation, index, deps, zlib ? null, withDocs ? false, enableTests ? true, extraFlags ? [ ] }:
    mkDerivation {
      pname = "pkg${toString index}";
      version = "1.${toString (mod index 10)}.${toString (mod index 7)}";
      outputs = if mod index 5 == 0 then [ "out" "dev" ] else [ "out" ];
      buildInputs = map (d: d.dev or d) deps ++ (if zlib != null && mod index 3 == 0 then [ zlib ] else [ ]);
      configureFlags =
        (if withDocs then [ "--enable-docs" ] else [ "--disable-docs" ])
        ++ (if enableTests then [ ] else [ "--disable-tests" ])
        ++ extraFlags;
      passthru = { inherit index; };
    };

  base = final:
    {
      bootstrap = derivation {
        name = "bootstrap-tools";
        system = "x86_64-linux";
        builder = "/bin/sh";
        args = [ "-c" "echo bootstrap > $out" ];
      };
      stdenv = mkDerivationWith final.bootstrap { pname = "stdenv"; version = "1"; };
      mkDerivation = mkDerivationWith final.stdenv;
      callPackage = callPackageWith final;

      zlib = final.callPackage ({ mkDerivation }: mkDerivation { pname = "zlib"; version = "1.2.13"; outputs = [ "out" "dev" ]; }) { };
      openssl = final.callPackage ({ mkDerivation, zlib }: mkDerivation { pname = "openssl"; version = "3.0.7"; buildInputs = [ zlib.dev ]; }) { };
      curl = final.callPackage ({ mkDerivation, zlib, openssl, withSsl ? true }: mkDerivation {
        pname = "curl"; version = "7.86.0";
        buildInputs = [ zlib ] ++ (if withSsl then [ openssl ] else [ ]);
      }) { };
      python = final.callPackage ({ mkDerivation, zlib, openssl, p1, p2 }: mkDerivation {
        pname = "python"; version = "3.10.8"; buildInputs = [ zlib openssl p1 p2 ];
      }) { };

      # A nested scope, like python3Packages: its members see the scope and
      # the top-level set.
      python3Packages = makeScope (self: listToAttrs (genList
        (i: {
          name = "py${toString i}";
          value = callPackageWith (final // self)
            ({ mkDerivation, python, index, pydeps }: mkDerivation {
              pname = "python3-py${toString index}"; version = "0.${toString (mod index 9)}";
              buildInputs = [ python ] ++ pydeps;
            })
            {
              index = i;
              pydeps = map (j: self."py${toString j}") (filter (j: j >= 0) [ (i - 1) (i - 1 - mod i 5) ])
                ++ [ final.${pname (mod (i * 37) n)} ];
            };
        })
        300));
    }
    // listToAttrs (genList
      (i: {
        name = pname i;
        value = final.callPackage generic {
          index = i;
          deps = map (j: final.${pname j}) (depsOf i);
        };
      })
      n);

  overlays = [
    # A new stdenv: every package's derivation changes.
    (final: prev: {
      stdenv = prev.stdenv.overrideAttrs (old: { version = "2"; patches = [ "stdenv-2.patch" ]; });
    })
    # Patch every 10th package.
    (final: prev: listToAttrs (genList
      (k:
        let i = k * 10 + 3; in {
          name = pname i;
          value = prev.${pname i}.overrideAttrs (old: {
            version = old.version + "-p1";
            patches = old.patches ++ [ "fix-${toString i}.patch" ];
          });
        })
      (n / 10)))
    # Change the arguments of every 7th package; every 14th gains zlib.
    (final: prev: listToAttrs (genList
      (k:
        let i = k * 7 + 1; in {
          name = pname i;
          value =
            if mod k 2 == 0 then prev.${pname i}.override { withDocs = true; }
            else prev.${pname i}.override (old: { zlib = final.zlib; deps = old.deps ++ [ final.curl ]; });
        })
      (n / 7)))
    # Chains on every 13th package: override, then overrideAttrs, then
    # override again (which must keep the overrideAttrs).
    (final: prev: listToAttrs (genList
      (k:
        let i = k * 13 + 6; in {
          name = pname i;
          value = ((prev.${pname i}.override { enableTests = false; }).overrideAttrs (old: {
            version = old.version + "-chain";
            nativeBuildInputs = old.nativeBuildInputs ++ [ final.python ];
          })).override (old: { extraFlags = [ "--chain=${toString i}" ]; });
        })
      (n / 13)))
    # A security update: every 5th package gains openssl, as an input
    # appended with overrideAttrs.
    (final: prev: listToAttrs (genList
      (k:
        let i = k * 5 + 2; in {
          name = pname i;
          value = prev.${pname i}.overrideAttrs (old: { buildInputs = old.buildInputs ++ [ final.openssl ]; });
        })
      (n / 5)))
    # Applications on top, each using up to four packages.
    (final: prev: listToAttrs (genList
      (k: {
        name = "app${toString k}";
        value = final.callPackage
          ({ mkDerivation, curl, python3Packages, index, uses }: mkDerivation {
            pname = "app${toString index}"; version = "2.${toString (mod index 4)}";
            buildInputs = [ curl python3Packages."py${toString (mod (index * 7) 300)}" ] ++ uses;
          })
          { index = k; uses = map (j: final.${pname (mod (k * 97 + j * 1193) n)}) (genList (j: j) (1 + mod k 4)); };
      })
      250))
    # Override inside the nested scope, and a top-level override that the
    # scope sees through `final`.
    (final: prev: {
      python = prev.python.override { p2 = final.p3; };
      python3Packages = prev.python3Packages.overrideScope (pself: pprev: {
        py0 = pprev.py0.overrideAttrs (old: { version = "0.0-fixed"; });
      });
    })
  ];

  pkgs = fix (applyOverlays overlays base);

  isDrv = v: builtins.isAttrs v && (v.type or null) == "derivation";
  topDrvs = filter isDrv (attrValues pkgs);
  pyDrvs = filter isDrv (attrValues pkgs.python3Packages);
  all = topDrvs ++ pyDrvs;
  drvPaths = map (d: d.drvPath) all;
  isDrvPath = p: builtins.substring (stringLength p - 4) 4 p == ".drv";
  # Distinct input derivations of each package, from the string context of
  # its inputs (path-independent as a count).
  inputs = d: length (attrNames (getContext (toString ((d.buildInputs or [ ]) ++ (d.nativeBuildInputs or [ ]) ++ [ (d.stdenv or "") ]))));
  closure = builtins.genericClosure {
    startSet = map (d: { key = d.name; inherit d; }) (filter (d: mod (d.index or 1) 50 == 0) topDrvs);
    operator = item: map (d: { key = d.name; inherit d; }) ((item.d.buildInputs or [ ]) ++ (item.d.nativeBuildInputs or [ ]));
  };
in
{
  count = length all;
  allDrv = builtins.all isDrvPath drvPaths;
  inputDrvs = foldl' (s: d: s + inputs d) 0 all;
  closure = length closure;
  patched = length (filter (d: builtins.match ".*-p1" (d.version or "") != null) topDrvs);
  chained = length (filter (d: builtins.match ".*-chain" (d.version or "") != null) topDrvs);
  nameBytes = foldl' (s: d: s + stringLength d.name) 0 all;
}
