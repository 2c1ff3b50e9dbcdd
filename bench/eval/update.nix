# Workload: a `//` fold that layers 2,000 small updates (1 to 3 keys each,
# some overwriting existing keys, some adding new ones) over a 20,000-key
# attribute set built with listToAttrs. Like nixpkgs overlays, each update
# is a function of the set so far (`prev: { … }`), and some new values read
# `prev`, so earlier layers stay reachable until the end.
# Measures: the cost of `//` on a large set, in time and in memory. An
# evaluator that copies the whole set on every update does ~40 million
# attribute copies and keeps ~2,000 full-size copies alive; persistent maps
# with structural sharing make this cheap.
let
  mod = a: b: a - (a / b) * b;
  size = 20000;
  base = builtins.listToAttrs
    (builtins.genList (i: { name = "k${toString i}"; value = i; }) size);
  updates = builtins.genList
    (j:
      let
        r = mod (j * 7919) size;
        kind = mod j 3;
      in
      prev:
      if kind == 0 then { "k${toString r}" = -j; }
      else if kind == 1 then { "k${toString r}" = prev."k${toString r}" + j; "new${toString j}" = j; }
      else { "k${toString (mod (r + 1) size)}" = j * 3; "new${toString j}" = prev."new${toString (j - 1)}" + 1; "x${toString j}" = -1; })
    2000;
  result = builtins.foldl' (acc: update: acc // update acc) base updates;
  names = builtins.attrNames result;
in
{
  count = builtins.length names;
  first = builtins.head names;
  last = builtins.elemAt names (builtins.length names - 1);
  k0 = result.k0;
  k7919 = result.k7919;
  k19999 = result.k19999;
  new1999 = result.new1999;
  x1997 = result.x1997;
  sum = builtins.foldl' (acc: v: acc + v) 0 (builtins.attrValues result);
}
