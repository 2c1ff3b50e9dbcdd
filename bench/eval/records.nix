# Workload: 150,000 records (small attribute sets) built from pseudo-random
# ints, sorted with a comparator that reads their attributes (two keys, a
# tie-break), then filtered, grouped with groupBy, partitioned and folded;
# plus list building with concatLists and a quadratic `[ x ] ++ acc` fold.
# Unlike list.nix, whose `a < b` comparator on plain integers lets an
# evaluator compare in place, every comparison here is a real call of a
# two-argument lambda that selects from two sets: the shape of sorting
# packages by name or version, or options by priority.
# Measures: lambda calls from builtins (sort, filter, foldl', groupBy,
# partition), attribute selection from small sets, set construction by map.
# Prints sums and counts that depend on the sorted order.
let
  n = 150000;
  mod = a: b: a - (a / b) * b;
  xs = builtins.genList (i: mod (i * 7919 + 13) 100003) n;
  records = map (x: { k = mod x 97; v = x; }) xs;
  sorted = builtins.sort (a: b: a.k < b.k || (a.k == b.k && a.v < b.v)) records;
  odd = builtins.filter (r: mod r.v 2 == 1) sorted;
  # Order-sensitive: a wrong sort changes it.
  checksum = builtins.foldl' (acc: r: mod (acc * 31 + r.k * 3 + r.v) 1000000007) 0 odd;
  groups = builtins.groupBy (r: toString r.k) (builtins.genList (i: builtins.elemAt records i) 20000);
  pairs = builtins.concatLists (builtins.genList (i: [ i (i * 2) ]) 50000);
  reversed = builtins.foldl' (acc: x: [ x ] ++ acc) [ ] (builtins.genList (x: x) 2000);
in
{
  inherit checksum;
  odd = builtins.length odd;
  first = (builtins.head sorted).v;
  last = (builtins.elemAt sorted (n - 1)).v;
  groups = builtins.length (builtins.attrNames groups);
  pairs = builtins.length pairs;
  reversedHead = builtins.head reversed;
  anyBig = builtins.any (x: x > 100000) xs;
  right = builtins.length (builtins.partition (x: x > 50000) xs).right;
}
