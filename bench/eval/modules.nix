# Workload: a module system shaped like NixOS's lib/modules.nix, in plain
# Nix (builtins only), evaluated for a deployment of 40 hosts.
# 50 service modules declare 450 options (`mkOption` with a tiny type system:
# int, str, bool, listOf, attrsOf, each with a `check` and a `merge`) and
# define values for their own options and for those of later modules, with
# mkDefault/mkForce/mkOverride priorities, mkIf (reading `config` of other
# options, so `config` is a fixed point) and mkMerge, at the top of a module,
# at a service and at an option value. Each host adds one module of its own
# (forcing a different port and service), so every host is a separate
# evaluation. Merging follows NixOS: properties are pushed down to the
# options, definitions are collected per option, mkIf false is discarded,
# only the highest-priority definitions are kept, every value is
# type-checked, lists are concatenated, attribute sets merged per key, and
# scalars must agree. Undeclared definitions, type errors and conflicting
# definitions are detected (three small evaluations that must fail, caught
# with tryEval).
# Measures: attribute-set-heavy laziness through a fixed point, zipAttrsWith
# and mapAttrs over many small sets, closures and thunks for deferred
# definitions, list concatenation, type checks with builtins.all.
# Prints counts and a checksum of every integer in the hosts' configs.
let
  inherit (builtins)
    all attrNames attrValues concatMap deepSeq filter
    foldl' genList head isAttrs isBool isInt isList isString length
    listToAttrs mapAttrs stringLength tryEval zipAttrsWith;

  mod = a: b: a - (a / b) * b;
  nMods = 50;
  nHosts = 40;

  # --- types -----------------------------------------------------------------
  mergeEqual = loc: defs:
    let first = (head defs).value; in
    if all (d: d.value == first) defs then first
    else throw "The option `${loc}' has conflicting definition values.";
  types = {
    int = { name = "int"; check = isInt; merge = mergeEqual; };
    str = { name = "str"; check = isString; merge = mergeEqual; };
    bool = { name = "bool"; check = isBool; merge = mergeEqual; };
    listOf = t: {
      name = "listOf ${t.name}";
      check = v: isList v && all t.check v;
      merge = loc: defs: concatMap (d: d.value) defs;
    };
    attrsOf = t: {
      name = "attrsOf ${t.name}";
      check = v: isAttrs v && all t.check (attrValues v);
      merge = loc: defs:
        zipAttrsWith (k: vs: t.merge "${loc}.${k}" (map (v: { value = v; }) vs)) (map (d: d.value) defs);
    };
  };

  # --- options and properties ---------------------------------------------
  mkOption = { type, default }: { _type = "option"; inherit type default; };
  mkIf = condition: content: { _type = "if"; inherit condition content; };
  mkMerge = contents: { _type = "merge"; inherit contents; };
  mkOverride = priority: content: { _type = "override"; inherit priority content; };
  mkOptionDefault = mkOverride 1500;
  mkDefault = mkOverride 1000;
  mkForce = mkOverride 50;
  typeOf = v: if isAttrs v then v._type or "" else "";

  # Push mkMerge/mkIf/mkOverride at the level of an attribute set down to
  # its attributes; the result is a list of plain attribute sets. A
  # condition is not evaluated here, so the set of names never depends on
  # `config`.
  pushDown = cfg:
    let t = typeOf cfg; in
    if t == "merge" then concatMap pushDown cfg.contents
    else if t == "if" then map (mapAttrs (n: v: mkIf cfg.condition v)) (pushDown cfg.content)
    else if t == "override" then map (mapAttrs (n: v: mkOverride cfg.priority v)) (pushDown cfg.content)
    else [ cfg ];
  # One option's definition to a list of { priority; value; }: mkMerge is
  # flattened, mkIf false dropped, and the outermost mkOverride gives the
  # priority (100 when there is none).
  discharge = prio: def:
    let t = typeOf def; in
    if t == "merge" then concatMap (discharge prio) def.contents
    else if t == "if" then (if def.condition then discharge prio def.content else [ ])
    else if t == "override" then discharge (if prio == null then def.priority else prio) def.content
    else [ { priority = if prio == null then 100 else prio; value = def; } ];

  evalOption = loc: opt: defs:
    let
      defined = concatMap (discharge null) defs;
      all' = defined ++ [ { priority = 1500; value = opt.default; } ];
      best = foldl' (p: d: if d.priority < p then d.priority else p) 9999 all';
      kept = filter (d: d.priority == best) all';
      checked = map
        (d: if opt.type.check d.value then d
            else throw "The option `${loc}' is not of type `${opt.type.name}'.")
        kept;
    in
    {
      value = opt.type.merge loc checked;
      defined = length defined;
      kept = length kept;
      isDefault = best == 1500;
    };

  evalModules = modules:
    let
      resolved = map (m: m { inherit config; }) modules;
      # Declarations: namespace -> option -> the one declaration.
      decls = zipAttrsWith
        (ns: sets: zipAttrsWith
          (o: ds: if length ds == 1 then head ds else throw "The option `${ns}.${o}' is declared more than once.")
          sets)
        (map (m: m.options or { }) resolved);
      # Definitions: namespace -> option -> list of definitions.
      defs = mapAttrs
        (ns: vs: zipAttrsWith (o: ds: ds) (concatMap pushDown vs))
        (zipAttrsWith (ns: vs: vs) (concatMap (m: pushDown (m.config or { })) resolved));
      results = mapAttrs
        (ns: opts: mapAttrs (o: opt: evalOption "${ns}.${o}" opt (defs.${ns}.${o} or [ ])) opts)
        decls;
      config = mapAttrs (ns: mapAttrs (o: r: r.value)) results;
      undeclared = concatMap
        (ns: filter (o: !(decls ? ${ns}.${o})) (attrNames defs.${ns}))
        (attrNames defs);
    in
    {
      inherit config results undeclared;
      config' = if undeclared == [ ] then config
        else throw "The option `${head undeclared}' does not exist.";
    };

  # --- the modules -----------------------------------------------------------
  s = j: "svc${toString j}";

  # What module m defines for a later service t, read from its own config.
  crossDefs = config: m: t:
    let c = config.${s m}; d = t - m; in
    {
      workers = mkOverride (100 + d) (c.workers + mod m 3);
      name = mkOverride (100 + d) "${c.name}>${toString t}";
      extraArgs = mkMerge [
        [ "--peer=${c.name}:${toString c.port}" ]
        (mkIf (c.workers > 3) [ "--busy-peer=${toString m}" ])
      ];
      env = { "FROM_${toString m}" = c.name; };
      limits = mkIf (mod m 2 == 0) { "m${toString m}" = c.workers * 2; };
      users = [ (m * 1000 + t) ];
    }
    // (if mod (m + t) 9 == 0 then { port = mkOverride (60 - d) (c.port + d); } else { })
    // (if mod (m * t) 4 == 1 then { enable = mkIf (c.port > 1100) (mkForce true); } else { });

  service = m: { config }:
    let
      ns = s m;
      self = config.${ns};
      targets = filter (t: t < nMods) [ (m + 1) (m + 2) (m + 5) (m + 11) ];
    in
    {
      options.${ns} = {
        enable = mkOption { type = types.bool; default = false; };
        port = mkOption { type = types.int; default = 0; };
        workers = mkOption { type = types.int; default = 1; };
        # A default that reads another option, as NixOS defaults often do.
        timeout = mkOption { type = types.int; default = if m == 0 then 30 else config.${s (m - 1)}.timeout + mod m 4; };
        name = mkOption { type = types.str; default = ns; };
        extraArgs = mkOption { type = types.listOf types.str; default = [ ]; };
        users = mkOption { type = types.listOf types.int; default = [ ]; };
        env = mkOption { type = types.attrsOf types.str; default = { }; };
        limits = mkOption { type = types.attrsOf types.int; default = { }; };
      };
      config = mkMerge [
        {
          ${ns} = {
            enable = mkDefault (mod (m + 1) 3 != 0);
            port = 1000 + m * 10;
            workers = mkDefault 2;
            extraArgs = [ "--port=${toString self.port}" "--workers=${toString self.workers}" "--timeout=${toString self.timeout}" ];
            users = genList (k: m * 100 + k) (10 + mod m 7);
            env = { NAME = self.name; };
            limits = { cpu = self.workers * 100; mem = 256 * (1 + mod m 4); };
          };
        }
        (mkIf self.enable (listToAttrs (map (t: { name = s t; value = crossDefs config m t; }) targets)))
      ];
    };

  services = genList service nMods;

  host = h: { config }: {
    config = mkMerge [
      { svc0.port = mkForce (2000 + h); }
      {
        ${s (mod (h * 7) nMods)} = {
          enable = mkForce true;
          users = [ h ];
          timeout = mkIf (mod h 2 == 0) (mkDefault (h + 1));
        };
      }
    ];
  };

  hosts = genList (h: evalModules (services ++ [ (host h) ])) nHosts;

  # Three evaluations that must fail, as NixOS would make them fail.
  fails = x: !(tryEval (deepSeq x x)).success;
  errors = length (filter (x: x) [
    (fails (evalModules [ (service 0) ({ config }: { config.svc0.port = "eighty"; }) ]).config.svc0.port)
    (fails (evalModules [ (service 0) ({ config }: { config.svc0.port = mkForce 1; }) ({ config }: { config.svc0.port = mkForce 2; }) ]).config.svc0.port)
    (fails (evalModules [ (service 0) ({ config }: { config.svc0.prot = 1; }) ]).config')
  ]);

  # --- summary ---------------------------------------------------------------
  p = 1000003;
  ints = v:
    if isInt v then [ v ]
    else if isList v then concatMap ints v
    else if isAttrs v then concatMap ints (attrValues v)
    else [ ];
  sumOver = f: foldl' (acc: x: acc + f x) 0;
  perHost = r:
    let
      results = concatMap attrValues (attrValues r.results);
      values = map (x: x.value) results;
    in
    {
      options = length results;
      defined = sumOver (x: x.defined) results;
      kept = sumOver (x: x.kept) results;
      defaults = length (filter (x: x.isDefault) results);
      enabled = length (filter (v: v == true) values);
      listItems = sumOver (v: if isList v then length v else 0) values;
      attrKeys = sumOver (v: if isAttrs v then length (attrNames v) else 0) values;
      strBytes = sumOver (v: if isString v then stringLength v
        else if isList v then sumOver (x: if isString x then stringLength x else 0) v
        else if isAttrs v then sumOver (x: if isString x then stringLength x else 0) (attrValues v)
        else 0) values;
      checksum = foldl' (acc: x: mod (acc * 31 + mod (x + p) p) p) 0 (ints values);
      undeclared = length r.undeclared;
    };
  stats = map perHost hosts;
  total = k: sumOver (st: st.${k}) stats;
in
{
  hosts = length stats;
  options = total "options";
  defined = total "defined";
  kept = total "kept";
  defaults = total "defaults";
  enabled = total "enabled";
  listItems = total "listItems";
  attrKeys = total "attrKeys";
  strBytes = total "strBytes";
  checksum = foldl' (acc: st: mod (acc * 7 + st.checksum) p) 0 stats;
  undeclared = total "undeclared";
  errorsCaught = errors;
}
