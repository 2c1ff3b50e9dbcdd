# Workload: a 200,000-element list of pseudo-random integers (two rounds of a
# linear congruential step, modulus computed with `/` and `*`), sorted with
# builtins.sort, filtered, and folded with foldl'.
# Measures: genList, integer arithmetic, the comparator-driven sort
# (about 3.5 million lambda calls), filter, and a strict left fold.
# All intermediate values stay below 2^62, so no evaluator overflows.
let
  n = 200000;
  m = 2147483648; # 2^31
  mod = a: b: a - (a / b) * b;
  step = x: mod (x * 1103515245 + 12345) m;
  xs = builtins.genList (i: step (step (i + 1))) n;
  sorted = builtins.sort (a: b: a < b) xs;
  kept = builtins.filter (x: mod x 3 == 0) sorted;
  # Order-sensitive checksum, so a wrong sort changes the result.
  checksum = builtins.foldl' (acc: x: mod (acc * 31 + x) 1000000007) 0 kept;
in
{
  length = builtins.length sorted;
  kept = builtins.length kept;
  min = builtins.head sorted;
  max = builtins.elemAt sorted (n - 1);
  inherit checksum;
}
