//! The builtins: the global scope and the `builtins` set.
//!
//! Owns the registry of primops (each submodule exports a static table) and the
//! constants (`true`, `storeDir`, `nixPath`, …), and decides which names are
//! global without the `__` prefix. Each submodule owns one family of primops; none
//! of them may reach into the evaluator's internals beyond its public API.

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
use crate::value::{Attrs, PrimOp, PrimOpApp, Sym, Thunk, ThunkState, Value};

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
                    args: Vec::new(),
                })),
            ));
        }
    }
    entries.push((Sym::new("true"), Value::Bool(true)));
    entries.push((Sym::new("false"), Value::Bool(false)));
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
    let self_ref = Thunk::new(ThunkState::Blackhole);
    let mut with_self = entries.clone();
    with_self.push((Sym::new("builtins"), Value::Thunk(self_ref.clone())));
    let builtins_set = Value::attrs(Attrs::from_unsorted(with_self));
    *self_ref.0.borrow_mut() = ThunkState::Done(builtins_set.clone());

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

/// Shorthand for building a primop table entry.
pub(crate) const fn op(name: &'static str, arity: usize, f: crate::value::PrimOpFn) -> PrimOp {
    PrimOp { name, arity, f }
}

/// Builds an attribute set from `(name, value)` pairs in any order.
pub(crate) fn mk_attrs(pairs: Vec<(&str, Value)>) -> Value {
    Value::attrs(Attrs::from_unsorted(
        pairs.into_iter().map(|(k, v)| (Sym::new(k), v)).collect(),
    ))
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
        args: Vec::new(),
    }));
    let s = ev.call(&f, v.clone())?;
    Ok(ev.expect_string(&s)?.as_str().to_string())
}
