//! Primops: string context introspection and manipulation.
//!
//! Owns `hasContext`, `getContext`, `appendContext`,
//! `unsafeDiscardStringContext`, `unsafeDiscardOutputDependency` and
//! `addDrvOutputDependencies`. `getContext`/`appendContext` expose a context as
//! a set keyed by store path: `{ path = true; }` for a plain store path,
//! `{ allOutputs = true; }` for a `.drv` with all its outputs (deep), and
//! `{ outputs = [ "out" … ]; }` for outputs of a derivation. It must not touch
//! the store beyond checking that names are store paths.

use super::mk_attrs;
use super::op;
use crate::eval::{raise, CoerceMode, EResult, ErrorExt, ErrorKind, EvalError, Evaluator, RResult};
use crate::value::{Args, Context, ContextElem, NixString, PrimOp, Value};

pub(crate) static BUILTINS: &[PrimOp] = &[
    op("hasContext", 1, has_context).doc("s", "Return true if string s has a non-empty context."),
    op("getContext", 1, get_context).doc(
        "s",
        "Return the string context of s: a set mapping each store path to what it refers to (path, allOutputs, outputs).",
    ),
    op("appendContext", 2, append_context).doc(
        "s context",
        "Return s with the string context described by the set context added.",
    ),
    op("unsafeDiscardStringContext", 1, unsafe_discard_string_context).doc(
        "s",
        "Discard the string context from a value that can be coerced to a string.",
    ),
    op("unsafeDiscardOutputDependency", 1, unsafe_discard_output_dependency).doc(
        "s",
        "Create a copy of the given string where every derivation deep string context element is turned into a constant one.",
    ),
    op("addDrvOutputDependencies", 1, add_drv_output_dependencies).doc(
        "s",
        "Create a copy of the given string where its single constant string context element (a .drv) is turned into a derivation deep one.",
    ),
];

/// Nix's `forceStringNoCtx` check, the one place its error is worded: `Ok` for
/// a string without context, else "the string '…' is not allowed to refer to a
/// store path (such as '…')" naming the first context element in Nix's order
/// (the encoded forms sorted as strings: `!out!…` before `/…` before `=…`),
/// rendered encoded, as Nix 2.8 prints it. Frames stay the caller's.
pub(crate) fn reject_context(s: &NixString) -> EResult<()> {
    match s.context().iter().map(ContextElem::encode).min() {
        None => Ok(()),
        Some(first) => Err(EvalError::new(
            ErrorKind::Eval,
            format!(
                "the string '{}' is not allowed to refer to a store path (such as '{first}')",
                s.as_str()
            ),
        )),
    }
}

fn is_derivation_path(p: &str) -> bool {
    p.ends_with(".drv")
}

/// Whether `s` is a store path directly below the store directory.
fn is_store_path(ev: &Evaluator, s: &str) -> bool {
    let dir = ev.store.store_dir();
    let Some(base) = s.strip_prefix(dir).and_then(|r| r.strip_prefix('/')) else {
        return false;
    };
    if dir == rocmx_store::STORE_DIR {
        return rocmx_store::StorePath::from_absolute(s).is_ok() && !s.ends_with('/');
    }
    // A store at another location: check the shape `<32 nix32 chars>-<name>`.
    let b = base.as_bytes();
    b.len() > 33
        && b[32] == b'-'
        && !base.contains('/')
        && b[..32]
            .iter()
            .all(|c| c.is_ascii_digit() || c.is_ascii_lowercase())
}

/// Return true if string s has a non-empty context.
fn has_context(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let s = ev.expect_string(&a[0]).frame(None, || {
        "while evaluating the argument passed to builtins.hasContext".into()
    })?;
    Ok(Value::bool(s.has_context()))
}

/// Return the string context of s: a set mapping each store path to what it refers to (path, allOutputs, outputs).
fn get_context(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let s = ev.expect_string(&a[0]).frame(None, || {
        "while evaluating the argument passed to builtins.getContext".into()
    })?;
    // path → (plain, allOutputs, outputs); the context is sorted, so are the outputs.
    let mut infos: std::collections::BTreeMap<&str, (bool, bool, Vec<&str>)> = Default::default();
    for e in s.context().iter() {
        match e {
            ContextElem::Opaque(p) => infos.entry(p).or_default().0 = true,
            ContextElem::DrvDeep(p) => infos.entry(p).or_default().1 = true,
            ContextElem::Built { drv, output } => infos.entry(drv).or_default().2.push(output),
        }
    }
    let mut entries = Vec::with_capacity(infos.len());
    for (path, (plain, all, outputs)) in infos {
        let mut info = Vec::new();
        if plain {
            info.push(("path", Value::bool(true)));
        }
        if all {
            info.push(("allOutputs", Value::bool(true)));
        }
        if !outputs.is_empty() {
            info.push((
                "outputs",
                Value::list(outputs.into_iter().map(Value::str).collect()),
            ));
        }
        entries.push((path, mk_attrs(info)));
    }
    Ok(mk_attrs(entries))
}

/// Return s with the string context described by the set context added.
fn append_context(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let orig = ev.expect_string(&a[0]).frame(None, || {
        "while evaluating the first argument passed to builtins.appendContext".into()
    })?;
    let attrs = ev.expect_attrs(&a[1]).frame(None, || {
        "while evaluating the second argument passed to builtins.appendContext".into()
    })?;
    let mut ctx = orig.context().clone();
    for (name, v) in attrs.iter() {
        let name = name.as_str();
        if !is_store_path(ev, name) {
            return raise(EvalError::new(
                ErrorKind::Eval,
                format!("context key '{name}' is not a store path"),
            ));
        }
        let info = ev.expect_attrs(v).frame(None, || {
            "while evaluating the value of a string context".into()
        })?;
        if let Some(p) = info.get("path") {
            let p = p.clone();
            if ev.expect_bool(&p).frame(None, || {
                "while evaluating the `path` attribute of a string context".into()
            })? {
                ctx.insert(ContextElem::Opaque(name.into()));
            }
        }
        if let Some(all) = info.get("allOutputs") {
            let all = all.clone();
            if ev.expect_bool(&all).frame(None, || {
                "while evaluating the `allOutputs` attribute of a string context".into()
            })? {
                if !is_derivation_path(name) {
                    return raise(EvalError::new(
                        ErrorKind::Eval,
                        format!("tried to add all-outputs context of {name}, which is not a derivation, to a string"),
                    ));
                }
                ctx.insert(ContextElem::DrvDeep(name.into()));
            }
        }
        if let Some(outs) = info.get("outputs") {
            let outs = outs.clone();
            let outs = ev.expect_list(&outs).frame(None, || {
                "while evaluating the `outputs` attribute of a string context".into()
            })?;
            if !outs.is_empty() && !is_derivation_path(name) {
                return raise(EvalError::new(
                    ErrorKind::Eval,
                    format!("tried to add derivation output context of {name}, which is not a derivation, to a string"),
                ));
            }
            for o in outs.iter() {
                let out = super::strings::force_string_no_ctx(ev, o, || {
                    "while evaluating an output name within a string context".into()
                })?;
                ctx.insert(ContextElem::Built {
                    drv: name.into(),
                    output: out.as_str().into(),
                });
            }
        }
    }
    Ok(Value::String(NixString::with_context(
        orig.as_str().to_string(),
        ctx,
    )))
}

/// Discard the string context from a value that can be coerced to a string.
fn unsafe_discard_string_context(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let s = ev
        .coerce_to_string(&a[0], CoerceMode::Interpolation)
        .frame(None, || {
            "while evaluating the argument passed to builtins.unsafeDiscardStringContext".into()
        })?;
    Ok(Value::String(s.without_context()))
}

/// Create a copy of the given string where every derivation deep string context element is turned into a constant one.
fn unsafe_discard_output_dependency(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let s = ev
        .coerce_to_string(&a[0], CoerceMode::Interpolation)
        .frame(None, || {
            "while evaluating the argument passed to builtins.unsafeDiscardOutputDependency".into()
        })?;
    if !s
        .context()
        .iter()
        .any(|e| matches!(e, ContextElem::DrvDeep(_)))
    {
        return Ok(Value::String(s));
    }
    let mut ctx = Context::default();
    for e in s.context().iter() {
        match e {
            ContextElem::DrvDeep(p) => ctx.insert(ContextElem::Opaque(p.clone())),
            other => ctx.insert(other.clone()),
        }
    }
    Ok(Value::String(NixString::with_context(
        s.as_str().to_string(),
        ctx,
    )))
}

/// Create a copy of the given string where its single constant string context element (a .drv) is turned into a derivation deep one.
fn add_drv_output_dependencies(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let s = ev
        .coerce_to_string(&a[0], CoerceMode::Interpolation)
        .frame(None, || {
            "while evaluating the argument passed to builtins.addDrvOutputDependencies".into()
        })?;
    let n = s.context().len();
    let elem = match s.context().iter().next() {
        Some(e) if n == 1 => e.clone(),
        _ => {
            return raise(EvalError::new(
                ErrorKind::Eval,
                format!(
                    "context of string '{}' must have exactly one element, but has {n}",
                    s.as_str()
                ),
            ))
        }
    };
    let new = match elem {
        ContextElem::Opaque(p) => {
            if !is_derivation_path(&p) {
                return raise(EvalError::new(ErrorKind::Eval, format!("path '{p}' is not a derivation")));
            }
            ContextElem::DrvDeep(p)
        }
        ContextElem::Built { output, .. } => {
            return raise(EvalError::new(
                ErrorKind::Eval,
                format!(
                    "`addDrvOutputDependencies` can only act on derivations, not on a derivation output such as '{output}'"
                ),
            ))
        }
        deep @ ContextElem::DrvDeep(_) => deep,
    };
    Ok(Value::String(NixString::with_context(
        s.as_str().to_string(),
        Context::single(new),
    )))
}

#[cfg(test)]
mod tests {
    use crate::eval::test_eval;
    use crate::eval::testing::err;

    fn ev(e: &str) -> String {
        match test_eval(e) {
            Ok(s) => s,
            Err(e) => panic!("unexpected error for {e}"),
        }
    }

    const P: &str = "/rocmx/store/00000000000000000000000000000000-foo";
    const D: &str = "/rocmx/store/00000000000000000000000000000000-foo.drv";

    #[test]
    fn plain_strings_have_no_context() {
        assert_eq!(ev("builtins.hasContext \"foo\""), "false");
        assert_eq!(ev("builtins.getContext \"foo\""), "{ }");
        assert_eq!(ev("builtins.unsafeDiscardStringContext \"foo\""), "\"foo\"");
        let e = err("builtins.hasContext 1");
        assert!(
            e.contains("expected a string but found an integer: 1"),
            "{e}"
        );
        let e = err("builtins.getContext { }");
        assert!(e.contains("expected a string but found a set"), "{e}");
    }

    #[test]
    fn append_and_get_roundtrip() {
        let e = format!(
            "let s = builtins.appendContext \"x\" {{ \"{D}\" = {{ outputs = [ \"out\" \"dev\" ]; allOutputs = true; }}; \"{P}\" = {{ path = true; }}; }}; in [ (builtins.hasContext s) (builtins.getContext s) ]"
        );
        assert_eq!(
            ev(&e),
            format!("[ true {{ \"{P}\" = {{ path = true; }}; \"{D}\" = {{ allOutputs = true; outputs = [ \"dev\" \"out\" ]; }}; }} ]")
        );
        // unsafeDiscardStringContext drops everything.
        let e = format!(
            "builtins.hasContext (builtins.unsafeDiscardStringContext (builtins.appendContext \"x\" {{ \"{P}\" = {{ path = true; }}; }}))"
        );
        assert_eq!(ev(&e), "false");
        // `path = false` and empty outputs add nothing.
        let e = format!("builtins.getContext (builtins.appendContext \"x\" {{ \"{P}\" = {{ path = false; outputs = [ ]; }}; }})");
        assert_eq!(ev(&e), "{ }");
    }

    #[test]
    fn append_context_errors() {
        let e = err("builtins.appendContext \"x\" { \"/tmp/foo\" = { path = true; }; }");
        assert!(
            e.contains("context key '/tmp/foo' is not a store path"),
            "{e}"
        );
        let e = err(&format!(
            "builtins.appendContext \"x\" {{ \"{P}\" = {{ allOutputs = true; }}; }}"
        ));
        assert!(
            e.contains(&format!(
                "tried to add all-outputs context of {P}, which is not a derivation, to a string"
            )),
            "{e}"
        );
        let e = err(&format!(
            "builtins.appendContext \"x\" {{ \"{P}\" = {{ outputs = [ \"out\" ]; }}; }}"
        ));
        assert!(
            e.contains("tried to add derivation output context of"),
            "{e}"
        );
    }

    #[test]
    fn output_dependencies() {
        let deep =
            format!("(builtins.appendContext \"d\" {{ \"{D}\" = {{ allOutputs = true; }}; }})");
        assert_eq!(
            ev(&format!(
                "builtins.getContext (builtins.unsafeDiscardOutputDependency {deep})"
            )),
            format!("{{ \"{D}\" = {{ path = true; }}; }}")
        );
        assert_eq!(
            ev(&format!(
                "builtins.getContext (builtins.addDrvOutputDependencies (builtins.unsafeDiscardOutputDependency {deep}))"
            )),
            format!("{{ \"{D}\" = {{ allOutputs = true; }}; }}")
        );
        // Idempotent on a deep element.
        assert_eq!(
            ev(&format!(
                "builtins.getContext (builtins.addDrvOutputDependencies {deep})"
            )),
            format!("{{ \"{D}\" = {{ allOutputs = true; }}; }}")
        );
        let e = err("builtins.addDrvOutputDependencies \"\"");
        assert!(
            e.contains("context of string '' must have exactly one element, but has 0"),
            "{e}"
        );
        let e = err(&format!(
            "builtins.addDrvOutputDependencies (builtins.appendContext \"o\" {{ \"{D}\" = {{ outputs = [ \"out\" ]; }}; }})"
        ));
        assert!(
            e.contains("`addDrvOutputDependencies` can only act on derivations, not on a derivation output such as 'out'"),
            "{e}"
        );
        let e = err(&format!(
            "builtins.addDrvOutputDependencies (builtins.appendContext \"p\" {{ \"{P}\" = {{ path = true; }}; }})"
        ));
        assert!(
            e.contains(&format!("path '{P}' is not a derivation")),
            "{e}"
        );
        let e = err(&format!(
            "builtins.addDrvOutputDependencies (builtins.appendContext \"p\" {{ \"{P}\" = {{ path = true; }}; \"{D}\" = {{ path = true; }}; }})"
        ));
        assert!(
            e.contains("must have exactly one element, but has 2"),
            "{e}"
        );
    }

    /// Every builtin that needs a plain string (attribute names, `fromJSON`,
    /// the string primops, the filesystem primops, `parseFlakeRef`) words the
    /// refusal the same way: Nix 2.8's, naming the first context element in
    /// its encoded form and Nix's (string) order.
    #[test]
    fn no_context_error_is_shared() {
        let s = format!(
            "(builtins.appendContext \"x\" {{ \"{D}\" = {{ outputs = [ \"out\" ]; allOutputs = true; }}; \"{P}\" = {{ path = true; }}; }})"
        );
        let want =
            format!("the string 'x' is not allowed to refer to a store path (such as '!out!{D}')");
        let sites = [
            format!("builtins.hasAttr {s} {{ }}"),
            format!("builtins.fromJSON {s}"),
            format!("builtins.match {s} \"x\""),
            format!("builtins.hashFile {s} ./."),
            format!("builtins.parseFlakeRef {s}"),
        ];
        for e in &sites {
            let got = err(e);
            let first = got.lines().next().unwrap_or_default();
            assert_eq!(first, format!("error: {want}"), "{e}:\n{got}");
        }
        // A single element of each kind, rendered encoded.
        for (ctx, shown) in [
            ("path = true;", P.to_string()),
            ("allOutputs = true;", format!("={D}")),
        ] {
            let path = if shown.ends_with(".drv") { D } else { P };
            let e = format!(
                "builtins.getAttr (builtins.appendContext \"x\" {{ \"{path}\" = {{ {ctx} }}; }}) {{ }}"
            );
            assert!(
                err(&e).contains(&format!("(such as '{shown}')")),
                "{e}:\n{}",
                err(&e)
            );
        }
    }
}
