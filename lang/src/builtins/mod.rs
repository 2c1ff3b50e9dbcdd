//! The builtins: the global scope and the `builtins` set.
//!
//! Owns the registry of primops (each submodule exports a static table) and the
//! constants (`true`, `storeDir`, `nixPath`, …), and decides which names are
//! global without the `__` prefix. Each submodule owns one family of primops; none
//! of them may reach into the evaluator's internals beyond its public API.
//!
//! Documentation lives here too, once: every table entry carries its arguments'
//! names and one line in Nix's words ([`PrimOp::doc`], also the implementing
//! function's `///` line), the constants have [`CONSTANT_DOCS`], and [`docs`] /
//! [`doc`] serve both to `rocmx repl`'s `:doc`.

mod attrs;
mod context;
mod core;
mod derivation;
mod fs;
pub(crate) mod json;
mod lists;
mod math;
mod strings;
mod versions;

pub(crate) use self::context::reject_context;

use std::collections::HashMap;
use std::rc::Rc;

use crate::eval::Evaluator;
use crate::value::{Args, Attrs, PrimOp, PrimOpApp, Sym, Thunk, Value};

/// Builtins bound in the global scope under their plain name (the rest are
/// reachable as `builtins.x` and `__x`).
const PLAIN_GLOBALS: &[&str] = &[
    "abort",
    "baseNameOf",
    "break",
    "derivation",
    "derivationStrict",
    "dirOf",
    "fetchGit",
    "fetchMercurial",
    "fetchTarball",
    "fetchTree",
    "fromTOML",
    "import",
    "isNull",
    "map",
    "placeholder",
    "removeAttrs",
    "scopedImport",
    "throw",
    "toString",
];

/// Every primop table.
fn tables() -> [&'static [PrimOp]; 11] {
    [
        core::BUILTINS,
        attrs::BUILTINS,
        lists::BUILTINS,
        math::BUILTINS,
        strings::BUILTINS,
        versions::BUILTINS,
        context::BUILTINS,
        json::BUILTINS,
        fs::BUILTINS,
        derivation::BUILTINS,
        crate::flake::refs::BUILTINS,
    ]
}

/// Builds the global scope: its names (for the compiler) and slot values.
pub fn globals(ev: &mut Evaluator) -> (HashMap<Sym, u32>, Vec<Value>) {
    let mut entries: Vec<(Sym, Value)> = Vec::new();
    for table in tables() {
        for op in table {
            entries.push((
                Sym::new(op.name),
                Value::PrimOp(Rc::new(PrimOpApp {
                    op,
                    args: Args::new(),
                })),
            ));
        }
    }
    entries.push((Sym::new("true"), Value::bool(true)));
    entries.push((Sym::new("false"), Value::bool(false)));
    entries.push((Sym::new("null"), Value::Null));
    entries.push((
        Sym::new("currentSystem"),
        Value::str(ev.settings.system.clone()),
    ));
    entries.push((Sym::new("nixVersion"), Value::str("2.18.0")));
    entries.push((Sym::new("langVersion"), Value::Int(6)));
    entries.push((
        Sym::new("storeDir"),
        Value::str(ev.store.store_dir().to_string()),
    ));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    entries.push((Sym::new("currentTime"), Value::Int(now)));
    let nix_path: Vec<Value> = ev
        .settings
        .search_path
        .iter()
        .map(|(prefix, path)| {
            Value::attrs(Attrs::from_unsorted(vec![
                (Sym::new("path"), Value::str(path.clone())),
                (Sym::new("prefix"), Value::str(prefix.clone())),
            ]))
        })
        .collect();
    entries.push((Sym::new("nixPath"), Value::list(nix_path)));
    entries.push((Sym::new("derivation"), derivation::derivation_wrapper()));

    // `builtins.builtins` is the set itself.
    let self_ref = Thunk::unfilled();
    let mut with_self = entries.clone();
    with_self.push((Sym::new("builtins"), Value::Thunk(self_ref.clone())));
    let builtins_set = Value::attrs(Attrs::from_unsorted(with_self));
    self_ref.fill(builtins_set.clone());

    let mut names = HashMap::new();
    let mut slots = Vec::new();
    let mut bind = |name: String, v: Value| {
        if !names.contains_key(name.as_str()) {
            names.insert(Sym::new(&name), slots.len() as u32);
            slots.push(v);
        }
    };
    bind("builtins".into(), builtins_set);
    for (k, v) in entries {
        let plain =
            PLAIN_GLOBALS.contains(&k.as_str()) || matches!(k.as_str(), "true" | "false" | "null");
        if plain {
            bind(k.to_string(), v.clone());
        }
        bind(format!("__{k}"), v);
    }
    (names, slots)
}

/// Shorthand for building a primop table entry; its documentation comes from
/// [`PrimOp::doc`].
pub(crate) const fn op(name: &'static str, arity: usize, f: crate::value::PrimOpFn) -> PrimOp {
    PrimOp {
        name,
        arity,
        f,
        args: "",
        doc: "",
        tests: None,
    }
}

impl PrimOp {
    /// The entry with its arguments' names (`"f list"`) and its one-line
    /// documentation, the same line as the implementing function's `///`
    /// comment (a test checks both).
    pub(crate) const fn doc(self, args: &'static str, doc: &'static str) -> PrimOp {
        PrimOp { args, doc, ..self }
    }

    /// Marks a predicate of arity 1 true exactly of the values of type `t`
    /// (see [`PrimOp::tests`]).
    pub(crate) const fn tests(self, t: crate::value::Type) -> PrimOp {
        PrimOp {
            tests: Some(t),
            ..self
        }
    }
}

/// Builds an attribute set from `(name, value)` pairs in any order.
pub(crate) fn mk_attrs(pairs: Vec<(&str, Value)>) -> Value {
    Value::attrs(Attrs::from_unsorted(
        pairs.into_iter().map(|(k, v)| (Sym::new(k), v)).collect(),
    ))
}

/// The documentation of a name of the `builtins` set: a primop's (from its table
/// entry) or another value's ([`CONSTANT_DOCS`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BuiltinDoc {
    pub name: &'static str,
    /// The arguments' names, space-separated (`"f list"`); empty for values
    /// that are not functions.
    pub args: &'static str,
    /// One line in Nix's words.
    pub doc: &'static str,
}

/// The names of the `builtins` set that are not primops.
const CONSTANT_DOCS: &[BuiltinDoc] = &[
    constant("builtins", "The set of all builtins."),
    constant(
        "currentSystem",
        "The platform evaluation runs for (the system setting), e.g. x86_64-linux.",
    ),
    constant(
        "currentTime",
        "The Unix time at the moment evaluation started.",
    ),
    BuiltinDoc {
        name: "derivation",
        args: "attrs",
        doc: "Construct a derivation from attrs: writes the .drv and returns attrs with drvPath, outPath and one attribute per output.",
    },
    constant("false", "Primitive value: the Boolean false."),
    constant("langVersion", "The current version of the Nix language."),
    constant(
        "nixPath",
        "The search path entries used to resolve lookup paths (-I, ROCMX_PATH, NIX_PATH), as { prefix; path; } sets.",
    ),
    constant(
        "nixVersion",
        "The version of Nix (the one rocmx presents itself as).",
    ),
    constant("null", "Primitive value: null."),
    constant(
        "storeDir",
        "Logical file system location of the Nix store currently in use, /rocmx/store.",
    ),
    constant("true", "Primitive value: the Boolean true."),
];

const fn constant(name: &'static str, doc: &'static str) -> BuiltinDoc {
    BuiltinDoc {
        name,
        args: "",
        doc,
    }
}

/// Every documented name of the `builtins` set: the primops, then the other values.
pub fn docs() -> impl Iterator<Item = BuiltinDoc> {
    tables()
        .into_iter()
        .flatten()
        .map(|op| BuiltinDoc {
            name: op.name,
            args: op.args,
            doc: op.doc,
        })
        .chain(CONSTANT_DOCS.iter().copied())
}

/// The documentation of `name` (as spelled in the `builtins` set: `map`, not
/// `__map`).
pub fn doc(name: &str) -> Option<BuiltinDoc> {
    docs().find(|d| d.name == name)
}

/// Renders a value as JSON exactly as `builtins.toJSON` does (for `--json`).
pub fn value_to_json(ev: &mut Evaluator, v: &Value) -> crate::eval::EResult<String> {
    let op = tables()
        .iter()
        .flat_map(|t| t.iter())
        .find(|op| op.name == "toJSON")
        .ok_or_else(|| {
            crate::eval::EvalError::new(crate::eval::ErrorKind::Eval, "toJSON is not available")
        })?;
    let f = Value::PrimOp(Rc::new(PrimOpApp {
        op,
        args: Args::new(),
    }));
    let s = ev.call(&f, v.clone())?;
    Ok(ev.expect_string(&s)?.as_str().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_primop_has_a_one_line_doc_and_its_arguments() {
        for op in tables().into_iter().flatten() {
            assert!(!op.doc.is_empty(), "builtin '{}' has no doc", op.name);
            assert!(
                !op.doc.contains('\n') && op.doc.ends_with('.'),
                "builtin '{}': one sentence-ending line: {:?}",
                op.name,
                op.doc
            );
            assert_eq!(
                op.args.split_whitespace().count(),
                op.arity,
                "builtin '{}': one name per argument: {:?}",
                op.name,
                op.args
            );
        }
        for c in CONSTANT_DOCS {
            assert!(!c.doc.is_empty(), "'{}' has no doc", c.name);
        }
    }

    /// The table's doc of each primop is the `///` line of a function of the
    /// builtins' sources (its implementation's), so the two cannot drift.
    #[test]
    fn table_docs_are_the_functions_doc_comments() {
        let sources = [
            include_str!("attrs.rs"),
            include_str!("context.rs"),
            include_str!("core.rs"),
            include_str!("derivation.rs"),
            include_str!("fs/mod.rs"),
            include_str!("fs/store.rs"),
            include_str!("fs/fetch.rs"),
            include_str!("json.rs"),
            include_str!("json/to_xml.rs"),
            include_str!("lists/mod.rs"),
            include_str!("lists/sort.rs"),
            include_str!("lists/generic_closure.rs"),
            include_str!("lists/sets.rs"),
            include_str!("math.rs"),
            include_str!("strings.rs"),
            include_str!("versions.rs"),
            include_str!("../flake/refs.rs"),
        ]
        .concat();
        for op in tables().into_iter().flatten() {
            let line = format!("\n/// {}\n", op.doc);
            assert!(
                sources.contains(&line),
                "no function of builtin '{}' has the doc comment{line}",
                op.name
            );
        }
    }

    /// Every name of the `builtins` set is documented, and nothing else is.
    #[test]
    fn docs_cover_the_builtins_set() {
        let store = Rc::new(crate::store::MemStore::new());
        let mut ev = Evaluator::new(crate::eval::EvalSettings::default(), store);
        let v = ev
            .eval_string("builtins.attrNames builtins", std::path::Path::new("/"))
            .and_then(|v| ev.force_deep(&v))
            .expect("the names of builtins");
        let Value::List(names) = v else {
            panic!("a list")
        };
        let mut names: Vec<String> = names
            .iter()
            .map(|n| match n {
                Value::String(s) => s.as_str().to_string(),
                _ => panic!("a string"),
            })
            .collect();
        for n in &names {
            assert!(doc(n).is_some(), "'{n}' has no documentation");
        }
        let mut documented: Vec<String> = docs().map(|d| d.name.to_string()).collect();
        names.sort();
        documented.sort();
        assert_eq!(names, documented);
        assert_eq!(doc("map").map(|d| d.args), Some("f list"));
        assert!(doc("__map").is_none());
    }
}
