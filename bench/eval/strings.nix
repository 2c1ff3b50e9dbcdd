# Workload: 50,000 interpolated lines joined with concatStringsSep, then
# rewritten with builtins.replaceStrings (several patterns) and cut with
# builtins.split on a simple regex. Returns only lengths and counts.
# Measures: string interpolation and toString, building a ~2.6 MB string,
# multi-pattern replacement over it, and regex splitting.
let
  n = 50000;
  mod = a: b: a - (a / b) * b;
  line = i:
    "line ${toString i}: ${if mod i 2 == 0 then "even" else "odd"} value=${toString (i * i)} tag=${builtins.substring (mod i 5) 3 "abcdefgh"}\n";
  text = builtins.concatStringsSep "" (builtins.genList line n);
  replaced = builtins.replaceStrings
    [ "even" "odd" "line " "=" "abc" ]
    [ "EVEN" "ODD!" "L" " := " "" ]
    text;
  parts = builtins.split ":=" replaced;
  matches = builtins.filter builtins.isList parts;
in
{
  textLength = builtins.stringLength text;
  replacedLength = builtins.stringLength replaced;
  parts = builtins.length parts;
  matches = builtins.length matches;
  lastPiece = builtins.elemAt parts (builtins.length parts - 1);
}
