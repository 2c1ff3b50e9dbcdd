# Fixed points and overlays for package sets, as nixpkgs users know them
# (nixpkgs' lib.fixedPoints and the scope half of lib.customisation). This
# file owns: fix, extends, composeExtensions, composeManyExtensions,
# makeExtensible, callPackageWith and makeScope. `.override` on what
# callPackage returns is stdenv's makeOverridable (./stdenv), not a copy.
#
#   fp = import ./exprs/lib/fixed-points.nix;
#   pkgs = fp.makeScope (extra: fp.callPackageWith ({ inherit stdenv; } // extra)) (self: {
#     zlib = self.callPackage ./zlib.nix { };
#     curl = self.callPackage ./curl.nix { };      # { stdenv, zlib }: … gets self.zlib
#   });
#   pkgs' = pkgs.overrideScope (final: prev: {
#     zlib = prev.zlib.override { shared = false; };   # pkgs'.curl now uses this zlib
#   });
#
# An overlay is `final: prev: { … }`: `prev` is the set before it, `final` the
# set after every overlay (the fixed point), so a package replaced by an
# overlay is what its dependents get. Of several overlays, later ones win and
# see the earlier ones' results in `prev`.
#
# callPackageWith autoArgs fn args: fn is a function or a file (a path, imported)
# taking `{ a, b ? …, … }`; its formal arguments are taken from autoArgs, and
# `args` wins over autoArgs. A required argument found in neither throws,
# naming it, the file and line of the function, and names in scope it may have
# meant ("did you mean …?"). The result has `.override { … }`, which calls the
# function again with those arguments replaced (an attribute set: stdenv's
# makeOverridable does not take nixpkgs' `old: { … }` form).
let
  inherit (builtins)
    attrNames filter foldl' functionArgs genList head intersectAttrs isAttrs
    isFunction isPath length removeAttrs sort stringLength substring tail
    unsafeGetAttrPos elemAt concatStringsSep pathExists;

  # stdenv's makeOverridable needs none of stdenv's arguments (they are lazy).
  inherit (import ./stdenv { }) makeOverridable;

  # The value x with x == f x (f must not force its argument strictly).
  fix = f: let x = f x; in x;

  # The function of `final` that applies the overlay on top of f's result.
  extends = overlay: f: final:
    let prev = f final; in prev // overlay final prev;

  # One overlay doing f, then g (g's `prev` includes f's attributes).
  composeExtensions = f: g: final: prev:
    let
      fApplied = f final prev;
      prev' = prev // fApplied;
    in
    fApplied // g final prev';

  # A list of overlays as one, applied first to last.
  composeManyExtensions = foldl' composeExtensions (final: prev: { });

  # fix rattrs, with `extend overlay` giving the set with the overlay applied.
  makeExtensible = rattrs:
    fix (self: rattrs self // {
      extend = overlay: makeExtensible (extends overlay rattrs);
    });

  # The formal arguments of a function or of a functor ({ __functor; }).
  formalsOf = f:
    if isAttrs f && f ? __functor
    then f.__functionArgs or (formalsOf (f.__functor f))
    else functionArgs f;

  # Edit distance (insertions, deletions, substitutions), for suggestions.
  levenshtein = a: b:
    let
      la = stringLength a;
      lb = stringLength b;
      min = x: y: if x < y then x else y;
      row0 = genList (j: j) (lb + 1);
      step = prev: i:
        let
          ca = substring i 1 a;
          row = genList
            (j:
              if j == 0 then i + 1
              else
                min
                  (min (elemAt row (j - 1) + 1) (elemAt prev j + 1))
                  (elemAt prev (j - 1) + (if ca == substring (j - 1) 1 b then 0 else 1)))
            (lb + 1);
        in
        row;
    in
    elemAt (foldl' step row0 (genList (i: i) la)) lb;

  take = n: xs: if n == 0 || xs == [ ] then [ ] else [ (head xs) ] ++ take (n - 1) (tail xs);

  # Up to three names at most two edits away from `name` (and changed in at
  # most half their letters: "a" does not suggest "b"), nearest first.
  suggestions = name: names:
    let
      len = stringLength name;
      near = filter (c: c != name && len - stringLength c <= 2 && stringLength c - len <= 2) names;
      longer = c: if stringLength c > len then stringLength c else len;
      scored = filter (s: s.d <= 2 && 2 * s.d <= longer s.n)
        (map (c: { n = c; d = levenshtein name c; }) near);
      sorted = sort (x: y: x.d < y.d || (x.d == y.d && x.n < y.n)) scored;
    in
    map (s: s.n) (take 3 sorted);

  quote = s: "\"${s}\"";
  orList = xs:
    let n = length xs; in
    if n == 1 then head xs
    else concatStringsSep ", " (take (n - 1) xs) + " or " + elemAt xs (n - 1);

  # Where the function is: the position of the formal if the evaluator knows
  # it, else the file it was imported from. (Nix 2.8 gives the source text as
  # the "file" of an expression from -E; that becomes «string», as in rocmx.)
  whereIs = fn: fargs: arg:
    let
      pos = unsafeGetAttrPos arg fargs;
      file = if substring 0 1 pos.file == "/" || substring 0 1 pos.file == "«" then pos.file else "«string»";
    in
    if pos != null then "${file}:${toString pos.line}"
    else if isPath fn then
      (if pathExists (fn + "/default.nix") then toString fn + "/default.nix" else toString fn)
    else "<unknown location>";

  callPackageWith = autoArgs: fn: args:
    let
      f = if isFunction fn || (isAttrs fn && fn ? __functor) then fn else import fn;
      fargs = formalsOf f;
      allArgs = intersectAttrs fargs autoArgs // args;
      # Required formals (functionArgs says false) given by neither.
      missing = filter (n: !fargs.${n}) (attrNames (removeAttrs fargs (attrNames allArgs)));
      arg = head missing;
      others = tail missing;
      near = suggestions arg (attrNames (autoArgs // args));
      error =
        "callPackage: the function at ${whereIs fn fargs arg} needs argument ${quote arg}, "
        + "which is neither in the scope nor given"
        + (if others == [ ] then "" else " (also missing: ${concatStringsSep ", " (map quote others)})")
        + (if near == [ ] then "" else "; did you mean ${orList (map quote near)}?");
    in
    if missing == [ ] then makeOverridable f allArgs else throw error;

  # A package set made of the fixed point of f (self: { … }), where
  # self.callPackage fills arguments from the set itself (and from what
  # newScope's caller puts around it: newScope extra is a callPackage whose
  # autoArgs include `extra`). overrideScope overlay remakes the set with the
  # overlay (final: prev: { … }) applied; packages is f.
  makeScope = newScope: f:
    let
      self = f self // {
        newScope = scope: newScope (self // scope);
        callPackage = self.newScope { };
        overrideScope = g: makeScope newScope (extends g f);
        packages = f;
      };
    in
    self;
in
{
  inherit fix extends composeExtensions composeManyExtensions makeExtensible
    callPackageWith makeScope;
}
