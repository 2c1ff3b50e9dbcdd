//! The `derivation` global: Nix's `derivation.nix` wrapper around
//! `derivationStrict`, with its common case built natively.
//!
//! Owns the attribute set a `derivation` call returns: the caller's attributes,
//! one attribute per output, `all`, `drvAttrs`, `outPath`, `drvPath`, `type` and
//! `outputName`, all lazy in `derivationStrict`. It must not compute the
//! derivation itself (that is [`super::derivation_strict`]).
//!
//! The wrapper stays written in the language ([`DERIVATION_NIX`]), so its formals
//! (`builtins.functionArgs derivation`), its argument check and every unusual
//! case (`outputs` not a list of plain strings, a duplicate or no output) keep
//! exactly the semantics and errors Nix users know. What it does for the common
//! case, one set per output built through `map`, `listToAttrs` and two `//`, cost
//! about 14,000 instructions and a dozen short-lived sets per derivation; a
//! package set makes thousands. [`derivation_fast`] builds the same sets directly
//! when `outputs` is absent or a list of distinct strings without context, and
//! otherwise forces the language version, passed to it unevaluated.
//!
//! The sets are the same, entry for entry and lazily so (nothing is forced
//! before `outPath` or `drvPath` is), with one difference: the attributes the
//! wrapper adds have no definition position (`builtins.unsafeGetAttrPos "type"`
//! is `null`, as it already was for the output attributes), where the language
//! version pointed into its own source, which is rocmx's, not the user's.

use std::rc::Rc;

use super::BUILTINS as STRICT;
use crate::builtins::op;
use crate::eval::{raise, EResult, EvalError, Evaluator, RResult};
use crate::value::attrs::{AttrPos, Entry};
use crate::value::{Args, Attrs, PrimOp, PrimOpApp, Sym, Thunk, Value};

/// `derivation`, as Nix writes it, behind `fast` (the language version is its
/// second argument, unevaluated unless `fast` needs it).
/// Laid out so that its lines are those of the wrapper without `fast` (errors
/// that point into it kept their line numbers).
const DERIVATION_NIX: &str = r#"fast:
drvAttrs @ { outputs ? [ "out" ], ... }:
fast drvAttrs (let
  strict = derivationStrict drvAttrs;
  commonAttrs = drvAttrs // (builtins.listToAttrs outputsList) // {
    all = map (x: x.value) outputsList;
    inherit drvAttrs;
  };
  outputToAttrListElement = outputName: {
    name = outputName;
    value = commonAttrs // {
      outPath = strict.${outputName};
      drvPath = strict.drvPath;
      type = "derivation";
      inherit outputName;
    };
  };
  outputsList = map outputToAttrListElement outputs;
in (builtins.head outputsList).value)
"#;

/// The native half, called as `fast drvAttrs slow`.
static FAST: PrimOp = op("derivation", 2, derivation_fast);

/// `derivation`'s language version with `fast` = "always the language version":
/// what [`derivation_fast`] must agree with (tests compare the two).
#[cfg(test)]
pub(super) fn language_version_expr() -> String {
    format!("({DERIVATION_NIX}) (drvAttrs: slow: slow)")
}

/// The `derivation` global: compiled from [`DERIVATION_NIX`] on first use.
pub(crate) fn derivation_wrapper() -> Value {
    Value::lazy(|ev| {
        let ir = ev.compile_source(
            "«rocmx-internal»/derivation.nix".into(),
            None,
            DERIVATION_NIX.into(),
            std::path::Path::new("/"),
        )?;
        let env = ev.globals().clone();
        let outer = ev.eval(&ir, &env)?;
        let fast = Value::PrimOp(Rc::new(PrimOpApp {
            op: &FAST,
            args: Args::new(),
        }));
        ev.call(&outer, fast)
    })
}

/// `fast drvAttrs slow`: the sets of [`DERIVATION_NIX`] built directly, or `slow`
/// forced when the outputs are not the plain case.
fn derivation_fast(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let attrs = ev.expect_attrs(&a[0])?;
    match plain_outputs(ev, &attrs)? {
        Some(names) => Ok(outputs_set(&a[0], &attrs, &names)),
        None => ev.force(&a[1]),
    }
}

/// The output names when `outputs` is absent (`out`) or a non-empty list of
/// distinct strings without context; `None` for anything else, which the language
/// version handles (and reports) as Nix does. Forces what the language version
/// would force when its result is: the list and each name, in order.
fn plain_outputs(ev: &mut Evaluator, attrs: &Attrs) -> EResult<Option<Vec<Sym>>> {
    let Some(outputs) = attrs.get("outputs") else {
        return Ok(Some(vec![Sym::new("out")]));
    };
    let Value::List(list) = ev.force(outputs)? else {
        return Ok(None);
    };
    let mut names: Vec<Sym> = Vec::with_capacity(list.len());
    for x in list.iter() {
        let Value::String(s) = ev.force(x)? else {
            return Ok(None);
        };
        if s.has_context() {
            return Ok(None);
        }
        let name = Sym::new(s.as_str());
        if names.contains(&name) {
            return Ok(None);
        }
        names.push(name);
    }
    Ok((!names.is_empty()).then_some(names))
}

thread_local! {
    /// The names every output's set gets, interned once.
    static ADDED: [Sym; 6] =
        ["all", "drvAttrs", "outPath", "drvPath", "type", "outputName"].map(Sym::new);
}

/// `strict.${name}` for the `strict` thunk.
fn select(strict: &Value, name: Sym) -> Value {
    let strict = strict.clone();
    Value::lazy(move |ev| {
        let set = ev.expect_attrs(&strict)?;
        match set.get(name) {
            Some(v) => ev.force(v),
            None => raise(EvalError::missing_attribute(name.as_str(), None)),
        }
    })
}

/// One set per output, each `drvAttrs // { <output> = <its set>; … } // { all;
/// drvAttrs; } // { outPath; drvPath; type; outputName; }`; the first output's
/// set is the result. The output attributes and `all` refer to the sets through
/// thunks filled once every set exists, as the language version's do.
fn outputs_set(drv_attrs: &Value, attrs: &Attrs, names: &[Sym]) -> Value {
    // `STRICT` is `derivationStrict` alone (a test checks it).
    let strict = Value::lazy_apply(
        Value::PrimOp(Rc::new(PrimOpApp {
            op: &STRICT[0],
            args: Args::new(),
        })),
        drv_attrs.clone(),
    );
    let added_names = ADDED.with(|n| *n);
    let drv_path = select(&strict, added_names[3]);
    let sets: Vec<Thunk> = names.iter().map(|_| Thunk::unfilled()).collect();
    let all = Value::list(sets.iter().cloned().map(Value::Thunk).collect());
    let derivation = Value::str("derivation");
    let mut first = None;
    for (name, set) in names.iter().zip(&sets) {
        let mut entries: Vec<Entry> = Vec::with_capacity(attrs.len() + names.len() + 6);
        entries.extend(attrs.entries().map(|(k, v, p)| (*k, v.clone(), p)));
        entries.extend(
            names
                .iter()
                .zip(&sets)
                .map(|(n, s)| (*n, Value::Thunk(s.clone()), AttrPos::NONE)),
        );
        let added = [
            all.clone(),
            drv_attrs.clone(),
            select(&strict, *name),
            drv_path.clone(),
            derivation.clone(),
            Value::str(name.as_str()),
        ];
        entries.extend(
            added_names
                .into_iter()
                .zip(added)
                .map(|(k, v)| (k, v, AttrPos::NONE)),
        );
        let value = Value::attrs(Attrs::from_unsorted_pos(entries));
        first.get_or_insert_with(|| value.clone());
        set.fill(value);
    }
    first.unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::{language_version_expr, STRICT};
    use crate::eval::testing::{err, ok};

    /// The first line of a rendered error: the message (the frames differ, the
    /// language version having more of them).
    fn message(e: &str) -> String {
        e.lines()
            .find(|l| l.starts_with("error:"))
            .unwrap_or_default()
            .to_string()
    }

    #[test]
    fn native_sets_equal_the_language_versions() {
        assert_eq!(STRICT[0].name, "derivationStrict");
        let base = r#"name = "a"; system = "x"; builder = "b";"#;
        let evaluates = [
            format!("let d = f {{ {base} }}; in [ d.type d.outputName d.name d.outPath d.drvPath d.out.outPath d.drvAttrs.name (map (x: x.outPath) d.all) (builtins.attrNames d) (d.out.out.outPath == d.outPath) ]"),
            format!("let d = f {{ {base} outputs = [ \"out\" \"dev\" ]; }}; in [ d.dev.outPath d.outputName d.dev.outputName (map (x: x.outputName) d.all) d.out.dev.outputName (builtins.attrNames d) d.dev.drvPath (d.dev.out.dev.outPath == d.dev.outPath) (builtins.attrNames d.dev) ]"),
            format!("let d = f {{ {base} outputs = [ \"dev\" \"out\" ]; }}; in [ d.outputName d.outPath (builtins.attrNames d.drvAttrs) ]"),
            format!("let d = f {{ {base} type = \"foo\"; all = 1; out = 2; drvPath = 3; outPath = 4; outputName = 5; drvAttrs = 6; }}; in [ d.type d.outputName (builtins.length d.all) d.drvAttrs.all d.out.outputName ]"),
            format!("let d = f {{ {base} __structuredAttrs = true; outputs = [ \"out\" \"lib\" ]; }}; in [ d.lib.outPath (builtins.getContext \"${{d.lib}}\") ]"),
            format!("let d = f {{ {base} }}; in [ \"${{d}}\" (builtins.getContext \"${{d.drvPath}}\") (builtins.toJSON d) ]"),
            format!("(f {{ {base} outputs = [ \"out\" \"out\" ]; }}).outputName"),
            format!("let x = {{ {base} }}; in builtins.unsafeGetAttrPos \"name\" (f x) == builtins.unsafeGetAttrPos \"name\" x"),
            // Laziness: nothing needs `derivationStrict` (which would fail here).
            "[ (f { builder = 1; }).type (f { builder = 1; }).builder (builtins.attrNames (f { })) ]".to_string(),
            "(f { outputs = [ \"a\" \"b\" ]; }).b.outputName".to_string(),
        ];
        let slow = language_version_expr();
        for body in &evaluates {
            let native = ok(&format!("let f = derivation; in {body}"));
            let language = ok(&format!("let f = {slow}; in {body}"));
            assert_eq!(native, language, "{body}");
        }
        let fail = [
            format!("(f {{ {base} outputs = \"out\"; }}).outPath"),
            format!("(f {{ {base} outputs = [ 1 ]; }}).outPath"),
            format!("(f {{ {base} outputs = [ \"out\" \"out\" ]; }}).outPath"),
            format!("(f {{ {base} outputs = [ ]; }}).name"),
            format!("(f {{ {base} outputs = [ (throw \"boom\") ]; }}).name"),
            format!("(f {{ {base} outputs = [ \"out\" (throw \"late\") ]; }}).name"),
            format!("(f {{ {base} outputs = throw \"early\"; }}).name"),
            format!("(f {{ {base} outputs = [ \"drv\" ]; }}).outPath"),
            format!("let d0 = f {{ {base} }}; in (f {{ {base} outputs = [ \"${{d0}}\" ]; }}).outputName"),
            "(f { system = \"x\"; builder = \"b\"; }).outPath".to_string(),
            "(f { name = \"a\"; builder = \"b\"; }).drvPath".to_string(),
            "(f 1).type".to_string(),
        ];
        for body in &fail {
            let native = err(&format!("let f = derivation; in {body}"));
            let language = err(&format!("let f = {slow}; in {body}"));
            assert_eq!(message(&native), message(&language), "{body}");
            assert!(!message(&native).is_empty(), "{body}: {native}");
        }
    }
}
