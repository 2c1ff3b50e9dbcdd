# gfx targets for packages that compile GPU code.
#
# The table is ./gfx-targets.json, the same file the rocmx binary embeds
# (`rocmx gfx list`). A package that compiles GPU code takes `gpuTargets` (the
# `--gfx` list, feature suffixes allowed: "gfx90a:xnack-"), declares the base
# names it supports, and builds for
#
#   gpu.intersect { pname = "rocblas"; supported = [ "gfx90a" "gfx942" ]; requested = gpuTargets; }
#
# which keeps the requested targets (with their suffixes) that it supports and
# throws when none is left. Packages that compile no GPU code must not look at
# the target list, so that their store paths are shared by every target set.
let
  inherit (builtins) concatStringsSep elem filter fromJSON head map match readFile;

  table = (fromJSON (readFile ./gfx-targets.json)).targets;

  # "gfx90a:sramecc+:xnack-" -> "gfx90a"
  baseName = t: head (match "([^:]*).*" t);

  # Names of the table's targets that satisfy `pred` (an entry -> bool):
  #   supportedBy (t: t.family == "gfx11")
  #   supportedBy (t: elem "6.4" t.rocm)
  supportedBy = pred: map (t: t.name) (filter pred table);

  showList = l: "[" + concatStringsSep " " l + "]";

  intersect = { pname, supported, requested }:
    let
      bases = map baseName supported;
      kept = filter (t: elem (baseName t) bases) requested;
    in
    if kept == [ ] then
      throw "${pname} supports none of the requested gfx targets: requested ${showList requested}, supported ${showList supported}"
    else
      kept;
in
{
  inherit table baseName supportedBy intersect;

  # All known names, in table order.
  names = supportedBy (t: true);

  # The entry named `name`, or null.
  byName = name:
    let found = filter (t: t.name == name) table;
    in if found == [ ] then null else head found;

  # Targets of the ROCm release series `series` ("6.4").
  officiallySupported = series: supportedBy (t: elem series t.rocm);

  # A list as CMake wants it (AMDGPU_TARGETS, GPU_TARGETS): "gfx90a;gfx942".
  cmakeList = concatStringsSep ";";
}
