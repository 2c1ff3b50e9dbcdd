# Workload: 3,000 `derivation` calls, each forced to its drvPath. Most depend
# on an earlier one through string interpolation of `${prev}`, so computing a
# drvPath also needs the hashes of its input derivations (chains of up to 5
# links, plus a second input from index i/2 for every 7th).
# Measures: derivation/derivationStrict, string context tracking, ATerm
# serialisation and hashing of .drv files.
# The absolute drvPath strings differ between Nix and rocmx by design
# (store directory and hash); `count` and `allDrv` must agree, while
# `pathBytes` is expected to differ and is not compared.
let
  n = 3000;
  mod = a: b: a - (a / b) * b;
  mk = i:
    let
      prev = if mod i 5 != 0 then "${builtins.elemAt drvs (i - 1)}" else "none";
      extra = if mod i 7 == 0 && i > 0 then "${builtins.elemAt drvs (i / 2)}" else "";
    in
    derivation {
      name = "d${toString i}";
      system = "x86_64-linux";
      builder = "/bin/sh";
      args = [ "-c" "echo ${toString i} ${prev} ${extra} > $out" ];
    };
  drvs = builtins.genList mk n;
  paths = map (d: d.drvPath) drvs;
  isDrv = p: builtins.substring (builtins.stringLength p - 4) 4 p == ".drv";
in
{
  count = builtins.length paths;
  allDrv = builtins.all isDrv paths;
  pathBytes = builtins.stringLength (builtins.concatStringsSep "" paths);
}
