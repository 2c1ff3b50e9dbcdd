//! Primops: `derivationStrict`, and the `derivation` wrapper around it.
//!
//! Owns turning a set of attributes into a [`rocmx_store::derivation::Derivation`]:
//! the environment (every attribute coerced to a string, paths copied to the
//! store), the inputs (read from the string context of every attribute), the
//! outputs (floating, content-addressed, unless `outputHash` makes them fixed),
//! the `.drv` text object and its path. It must not build anything.
//!
//! Output names are checked as Nix checks them (no duplicates, not `drv`/`drvPath`, at
//! least one; without structured attributes they are the words of the coerced value)
//! and, beyond Nix 2.8, must be valid store path names, so that every `.drv` written
//! here parses again. With `__structuredAttrs` the attributes go to `__json` (paths
//! copied, string contexts kept as inputs) instead of the environment.
//!
//! Outputs are floating: in the environment an output is Nix's hash placeholder
//! (`/1rz4g4…` for `out`), and `outPath` is a store-path-shaped placeholder derived
//! from the `.drv` path and the output name, which resolution replaces by the
//! realised path. Fixed-output paths are exact at evaluation time.

use std::collections::{BTreeMap, BTreeSet};

use rocmx_store::derivation::{hash_placeholder, output_path_name, Derivation, DerivationOutput};
use rocmx_store::{Hash, HashAlgo, IngestionMethod, StorePath};

use super::op;

mod wrapper;
use crate::eval::{CoerceMode, EResult, ErrorExt, ErrorKind, EvalError, Evaluator, RResult};
use crate::value::{Args, Attrs, Context, ContextElem, NixString, PrimOp, Sym, Value};
pub(crate) use wrapper::derivation_wrapper;

pub(crate) static BUILTINS: &[PrimOp] = &[
    op("derivationStrict", 1, derivation_strict).doc(
        "attrs",
        "Write the store derivation described by attrs and return its drvPath and output paths (the primitive under derivation).",
    ),
];

fn err(msg: impl Into<String>) -> Box<EvalError> {
    EvalError::new(ErrorKind::Eval, msg)
}

/// Attributes that only steer `derivationStrict` and are not passed on.
fn is_env_attr(k: &str) -> bool {
    !matches!(k, "__ignoreNulls" | "__structuredAttrs")
}

/// Write the store derivation described by attrs and return its drvPath and output paths (the primitive under derivation).
fn derivation_strict(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let attrs = ev.expect_attrs(&a[0])?;
    let name_v = attrs
        .get("name")
        .cloned()
        .ok_or_else(|| EvalError::missing_attribute("name", None))?;
    let name = ev.expect_string(&name_v).frame(None, || {
        "while evaluating the `name` attribute passed to builtins.derivationStrict".into()
    })?;
    let name = name.as_str().to_string();
    // Errors about the whole derivation (a missing `system`, a bad name or output
    // hash) point at its `name`, as Nix's do.
    let r = build(ev, &attrs, &name)
        .at_pos_opt(attrs.get_pos("name"))
        .frame(None, || format!("while evaluating derivation '{name}'"));
    Ok(r?)
}

fn build(ev: &mut Evaluator, attrs: &Attrs, name: &str) -> EResult<Value> {
    if let Err(e) = rocmx_store::path::validate_name(name) {
        return Err(err(format!(
            "invalid derivation name: {e}. Please pass a different 'name'."
        )));
    }
    let structured = match attrs.get("__structuredAttrs") {
        Some(v) => ev.expect_bool(&v.clone())?,
        None => false,
    };
    let ignore_nulls = match attrs.get("__ignoreNulls") {
        Some(v) => ev.expect_bool(&v.clone())?,
        None => false,
    };

    let mut ctx = Context::default();
    let mut env: BTreeMap<String, String> = BTreeMap::new();
    let mut args: Vec<String> = Vec::new();
    let mut builder = None;
    let mut system = None;
    let mut outputs: Vec<String> = vec!["out".into()];
    let mut output_hash: Option<String> = None;
    let mut output_hash_algo: Option<String> = None;
    let mut output_hash_mode: Option<String> = None;
    let mut json_attrs: Vec<(Sym, Value)> = Vec::new();

    // The attribute being read: an error that has no position yet is shown at its
    // definition in the user's file, as Nix does (not at `derivationStrict`'s call
    // in the `derivation` wrapper).
    let mut current: Option<&str> = None;
    let read = (|| -> EResult<()> {
        for (k, v) in attrs.iter() {
            let key = k.as_str();
            current = Some(key);
            if !is_env_attr(key) {
                continue;
            }
            let forced = ev.force(v).frame(None, || {
                format!("while evaluating the attribute '{key}' of the derivation '{name}'")
            })?;
            if ignore_nulls && matches!(forced, Value::Null) {
                continue;
            }
            let coerce = |ev: &mut Evaluator, v: &Value, ctx: &mut Context| -> EResult<String> {
                let s = ev
                    .coerce_to_string(v, CoerceMode::ToStringCopy)
                    .frame(None, || {
                        format!("while evaluating the attribute '{key}' of the derivation '{name}'")
                    })?;
                ctx.extend(s.context());
                Ok(s.as_str().to_string())
            };
            match key {
                // Flags Nix reads as Booleans (rocmx's outputs are content-addressed
                // anyway; impure derivations are not supported): a type check only.
                "__contentAddressed" | "__impure" => {
                    ev.expect_bool(&forced).frame(None, || {
                        format!("while evaluating the attribute '{key}' of the derivation '{name}'")
                    })?;
                }
                "args" => {
                    let list = ev.expect_list(&forced)?;
                    for x in list.iter() {
                        args.push(coerce(ev, x, &mut ctx)?);
                    }
                    if structured {
                        json_attrs.push((*k, forced.clone()));
                    }
                    continue;
                }
                "outputs" if structured => {
                    // A list of strings, each one output (Nix's `forceStringNoCtx`).
                    let list = ev.expect_list(&forced).frame(None, || {
                        format!("while evaluating the attribute '{key}' of the derivation '{name}'")
                    })?;
                    let mut names = Vec::new();
                    for x in list.iter() {
                        let o = ev.expect_string(x).frame(None, || {
                            format!(
                                "while evaluating the attribute '{key}' of the derivation '{name}'"
                            )
                        })?;
                        names.push(o.as_str().to_string());
                    }
                    outputs = checked_outputs(name, names)
                        .at_pos_opt(attrs.get_pos(key))
                        .frame(None, || {
                            format!(
                                "while evaluating the attribute '{key}' of the derivation '{name}'"
                            )
                        })?;
                }
                _ => {}
            }
            let s = if structured {
                json_attrs.push((*k, forced.clone()));
                if matches!(
                    key,
                    "builder" | "system" | "outputHash" | "outputHashAlgo" | "outputHashMode"
                ) {
                    Some(coerce(ev, &forced, &mut ctx)?)
                } else {
                    None
                }
            } else {
                Some(coerce(ev, &forced, &mut ctx)?)
            };
            if let Some(s) = s {
                if key == "outputs" {
                    // Without structured attributes the outputs are the words of the
                    // coerced value (Nix tokenises it on whitespace).
                    let words = s.split([' ', '\t', '\n', '\r']).filter(|w| !w.is_empty());
                    outputs = checked_outputs(name, words.map(str::to_string).collect())
                        .at_pos_opt(attrs.get_pos(key))
                        .frame(None, || {
                            format!(
                                "while evaluating the attribute '{key}' of the derivation '{name}'"
                            )
                        })?;
                }
                match key {
                    "builder" => builder = Some(s.clone()),
                    "system" => system = Some(s.clone()),
                    "outputHash" => output_hash = Some(s.clone()),
                    "outputHashAlgo" => output_hash_algo = Some(s.clone()),
                    "outputHashMode" => output_hash_mode = Some(s.clone()),
                    _ => {}
                }
                if !structured {
                    env.insert(key.to_string(), s);
                }
            }
        }
        Ok(())
    })();
    read.at_pos_opt(current.and_then(|k| attrs.get_pos(k)))?;
    if structured {
        let set = Value::attrs(Attrs::from_sorted(json_attrs));
        // Paths are copied to the store and every string context met is an input,
        // as for the attributes of an unstructured derivation.
        let (json, json_ctx) = super::json::value_to_json(ev, &set, true)?;
        ctx.extend(&json_ctx);
        env.insert("__json".into(), json);
    }
    let builder = builder.ok_or_else(|| err("required attribute 'builder' missing"))?;
    let system = system.ok_or_else(|| err("required attribute 'system' missing"))?;

    // Inputs from the context.
    let mut input_srcs = BTreeSet::new();
    let mut input_drvs: BTreeMap<StorePath, BTreeSet<String>> = BTreeMap::new();
    for e in ctx.iter() {
        match e {
            ContextElem::Opaque(p) => {
                input_srcs.insert(parse_store_path(p)?);
            }
            ContextElem::Built { drv, output } => {
                input_drvs
                    .entry(parse_store_path(drv)?)
                    .or_default()
                    .insert(output.to_string());
            }
            ContextElem::DrvDeep(drv) => {
                let sp = parse_store_path(drv)?;
                let outs = read_drv_outputs(ev, drv)?;
                input_drvs.entry(sp).or_default().extend(outs);
            }
        }
    }

    // Outputs.
    let mut drv_outputs = BTreeMap::new();
    if let Some(h) = output_hash {
        if outputs != ["out"] {
            return Err(err(
                "multiple outputs are not supported in fixed-output derivations",
            ));
        }
        let method = match output_hash_mode.as_deref() {
            None | Some("flat") => IngestionMethod::Flat,
            Some("recursive") | Some("nar") => IngestionMethod::Nar,
            Some(m) => {
                return Err(err(format!(
                    "invalid value '{m}' for 'outputHashMode' attribute; expected 'flat' or 'recursive'"
                )))
            }
        };
        let hash = parse_output_hash(&h, output_hash_algo.as_deref())?;
        let out = DerivationOutput::fixed(name, method, hash).map_err(|e| err(e.to_string()))?;
        if let Some(p) = out.path() {
            env.insert("out".into(), p.to_absolute());
        }
        drv_outputs.insert("out".to_string(), out);
    } else {
        for o in &outputs {
            env.insert(o.clone(), hash_placeholder(o));
            drv_outputs.insert(
                o.clone(),
                DerivationOutput::Floating {
                    method: IngestionMethod::Nar,
                    algo: HashAlgo::Blake3,
                },
            );
        }
    }

    let drv = Derivation {
        outputs: drv_outputs,
        input_drvs,
        input_srcs,
        system,
        builder,
        args,
        env,
    };
    let drv_path = ev
        .store
        .add_text(&format!("{name}.drv"), &drv.to_aterm(), &drv.references())?;
    let drv_path_s = drv_path.to_absolute();
    let out_paths = drv
        .output_paths(&drv_path, name)
        .map_err(|e| err(e.to_string()))?;

    let drv_rc: std::rc::Rc<str> = drv_path_s.as_str().into();
    let mut result: Vec<(Sym, Value)> = Vec::new();
    result.push((
        Sym::new("drvPath"),
        Value::String(NixString::with_context(
            drv_path_s.clone(),
            Context::single(ContextElem::DrvDeep(drv_rc.clone())),
        )),
    ));
    for (o, p) in out_paths {
        result.push((
            Sym::new(&o),
            Value::String(NixString::with_context(
                p.to_absolute(),
                Context::single(ContextElem::Built {
                    drv: drv_rc.clone(),
                    output: o.as_str().into(),
                }),
            )),
        ));
    }
    Ok(Value::attrs(Attrs::from_unsorted(result)))
}

/// Checks the output names of derivation `drv_name`, in order, as Nix does: no
/// duplicates, not `drv` (refused by the `.drv` parser; Nix < 2.19 refuses it) nor
/// `drvPath` (it would hide the attribute of that name; Nix >= 2.19 refuses it), at
/// least one. Beyond Nix, each name must itself be a valid store path name (Nix's
/// documented rule, which the `.drv` parser enforces: no `/`, no leading `.`, not
/// empty), and so must the output's path name `<drv_name>-<output>`.
fn checked_outputs(drv_name: &str, names: Vec<String>) -> EResult<Vec<String>> {
    let mut outs: Vec<String> = Vec::with_capacity(names.len());
    for o in names {
        if outs.contains(&o) {
            return Err(err(format!("duplicate derivation output '{o}'")));
        }
        if o == "drv" || o == "drvPath" {
            return Err(err(format!("invalid derivation output name '{o}'")));
        }
        rocmx_store::path::validate_name(&o)
            .and_then(|()| rocmx_store::path::validate_name(&output_path_name(drv_name, &o)))
            .map_err(|e| err(format!("invalid derivation output name '{o}': {e}")))?;
        outs.push(o);
    }
    if outs.is_empty() {
        return Err(err("derivation cannot have an empty set of outputs"));
    }
    Ok(outs)
}

/// Sets an error's position when one is known.
trait AtPosOpt<T> {
    fn at_pos_opt(self, pos: Option<crate::eval::ir::Pos>) -> EResult<T>;
}

impl<T> AtPosOpt<T> for EResult<T> {
    fn at_pos_opt(self, pos: Option<crate::eval::ir::Pos>) -> EResult<T> {
        match pos {
            Some(p) => self.at_pos(p),
            None => self,
        }
    }
}

fn parse_store_path(p: &str) -> EResult<StorePath> {
    StorePath::from_absolute(p).map_err(|e| err(format!("'{p}' is not a valid store path: {e}")))
}

/// The output names of the derivation stored at `drv` (for `=drv` context).
fn read_drv_outputs(ev: &mut Evaluator, drv: &str) -> EResult<Vec<String>> {
    let real = ev
        .store
        .realise_path(std::path::Path::new(drv))
        .ok_or_else(|| {
            err(format!(
                "derivation '{drv}' is not known to this evaluation"
            ))
        })?;
    let text = std::fs::read_to_string(&real).map_err(|e| err(format!("reading '{drv}': {e}")))?;
    let d = Derivation::parse(&text).map_err(|e| err(format!("parsing '{drv}': {e}")))?;
    Ok(d.outputs.keys().cloned().collect())
}

/// Parses `outputHash` given `outputHashAlgo` (which may be empty for SRI hashes).
fn parse_output_hash(h: &str, algo: Option<&str>) -> EResult<Hash> {
    let algo = match algo {
        None | Some("") => None,
        Some(a) => Some(
            HashAlgo::ALL
                .into_iter()
                .find(|x| x.name() == a)
                .ok_or_else(|| err(format!("unknown hash algorithm '{a}' in 'outputHashAlgo'")))?,
        ),
    };
    let parsed = match algo {
        Some(a) => Hash::parse_with_algo(h, a),
        None => Hash::parse(h),
    };
    parsed.map_err(|e| err(format!("invalid 'outputHash' '{h}': {e}")))
}

#[cfg(test)]
mod tests {
    use crate::eval::testing::{fails, ok};

    /// `derivationStrict` over a minimal set plus `extra`, printed.
    fn strict(extra: &str) -> String {
        format!(
            "builtins.attrNames (derivationStrict {{ name = \"a\"; system = \"x\"; builder = \"b\"; {extra} }})"
        )
    }

    /// The same through `derivation`, forcing only `drvPath` (as `nix-instantiate` does).
    fn wrapped(extra: &str) -> String {
        format!(
            "builtins.seq (derivation {{ name = \"a\"; system = \"x\"; builder = \"b\"; {extra} }}).drvPath 1"
        )
    }

    #[test]
    fn output_names_that_are_not_store_path_names_are_refused() {
        for bad in ["..", ".", ".x", "a/b", "é", "a$b"] {
            fails(
                &wrapped(&format!("outputs = [ \"{bad}\" ];")),
                &format!("invalid derivation output name '{bad}'"),
            );
            fails(
                &strict(&format!(
                    "__structuredAttrs = true; outputs = [ \"{bad}\" ];"
                )),
                &format!("invalid derivation output name '{bad}'"),
            );
        }
        // An empty name is a refused name with structured attributes; without, the
        // outputs are the words of the coerced list (Nix's tokenisation): none.
        fails(
            &strict("__structuredAttrs = true; outputs = [ \"\" ];"),
            "invalid derivation output name ''",
        );
        fails(
            &strict("outputs = [ \"\" ];"),
            "derivation cannot have an empty set of outputs",
        );
        fails(
            &wrapped("outputs = [ \"\" ];"),
            "derivation cannot have an empty set of outputs",
        );
    }

    #[test]
    fn reserved_duplicate_and_empty_outputs_are_refused() {
        for reserved in ["drv", "drvPath"] {
            fails(
                &strict(&format!("outputs = [ \"{reserved}\" ];")),
                &format!("invalid derivation output name '{reserved}'"),
            );
        }
        fails(
            &strict("outputs = [ \"out\" \"dev\" \"out\" ];"),
            "duplicate derivation output 'out'",
        );
        fails(
            &strict("__structuredAttrs = true; outputs = [ \"out\" \"out\" ];"),
            "duplicate derivation output 'out'",
        );
        fails(
            &strict("outputs = [ ];"),
            "derivation cannot have an empty set of outputs",
        );
        fails(
            &strict("__structuredAttrs = true; outputs = [ ];"),
            "derivation cannot have an empty set of outputs",
        );
        // The error points at the `outputs` attribute.
        let e = strict("outputs = [ \"..\" ];");
        let col = e.find("outputs").map_or(0, |i| i + 1);
        fails(&e, &format!("at «string»:1:{col}:"));
        // Flags that must be Booleans, as in Nix.
        for flag in ["__contentAddressed", "__impure"] {
            fails(
                &strict(&format!("outputs = \"out\"; {flag} = \"true\";")),
                "expected a Boolean but found a string",
            );
        }
        // Structured outputs must be a list of strings.
        fails(
            &strict("__structuredAttrs = true; outputs = \"out\";"),
            "expected a list but found a string",
        );
    }

    #[test]
    fn unstructured_outputs_are_the_words_of_the_coerced_value() {
        assert_eq!(
            ok(&strict("outputs = \"out  dev\\n\";")),
            "[ \"dev\" \"drvPath\" \"out\" ]"
        );
        assert_eq!(
            ok(&strict("outputs = [ \"\" \"out\" \"bin lib\" ];")),
            "[ \"bin\" \"drvPath\" \"lib\" \"out\" ]"
        );
    }

    #[test]
    fn structured_attributes_keep_their_string_contexts_as_inputs() {
        // A dependency named only inside the JSON is still an input of the `.drv`.
        let e = "let d = derivationStrict { name = \"d\"; system = \"x\"; builder = \"b\"; }; \
                 e = derivationStrict { name = \"e\"; system = \"x\"; builder = \"b\"; \
                 __structuredAttrs = true; deps = [ d.out ]; }; \
                 in [ (builtins.readFile e.drvPath) d.drvPath ]";
        let printed = ok(e);
        let (text, drv) = printed
            .trim_start_matches("[ \"")
            .trim_end_matches("\" ]")
            .rsplit_once("\" \"")
            .expect("two strings");
        assert!(
            text.contains(&format!("[(\\\"{drv}\\\",[\\\"out\\\"])]")),
            "{text} should name {drv} as an input"
        );
    }

    #[test]
    fn accepted_output_names_give_a_drv_that_parses_back() {
        // A `=drv` context makes a dependent derivation read the first one's `.drv`
        // back with the store's ATerm parser.
        let e = "let d = derivationStrict { name = \"a\"; system = \"x\"; builder = \"b\"; \
                 outputs = [ \"out\" \"dev-1\" \"x.y\" \"_u\" \"a+b=c?\" ]; }; \
                 e = derivationStrict { name = \"e\"; system = \"x\"; builder = \"b\"; dep = d.drvPath; }; \
                 in builtins.attrNames d";
        assert_eq!(
            ok(e),
            "[ \"_u\" \"a+b=c?\" \"dev-1\" \"drvPath\" \"out\" \"x.y\" ]"
        );
        let forced = e.replace("in builtins.attrNames d", "in builtins.seq e.drvPath true");
        assert_eq!(ok(&forced), "true");
    }
}
