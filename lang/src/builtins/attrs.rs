//! Primops: attribute sets.
//!
//! Owns `attrNames`, `attrValues`, `getAttr`, `hasAttr`, `mapAttrs`,
//! `removeAttrs` and `intersectAttrs`, plus [`expect_string_no_ctx`] (Nix's
//! `forceStringNoCtx`, for attribute names given as strings). Values stay lazy:
//! nothing here forces an attribute value except `getAttr`'s result. List-shaped
//! set builders (`listToAttrs`, `zipAttrsWith`, `catAttrs`) live in
//! `lists/sets.rs`.

use std::rc::Rc;

use super::context::reject_context;
use super::op;
use crate::eval::{raise, EResult, ErrorExt, EvalError, Evaluator, RResult};
use crate::value::{Args, Attrs, NixString, PrimOp, Sym, Value};

pub(crate) static BUILTINS: &[PrimOp] = &[
    op("attrNames", 1, attr_names).doc(
        "set",
        "Return the names of the attributes in the set, sorted alphabetically.",
    ),
    op("attrValues", 1, attr_values).doc(
        "set",
        "Return the values of the attributes in the set, in the order of the sorted attribute names.",
    ),
    op("getAttr", 2, get_attr).doc(
        "s set",
        "Return the attribute named s from set; evaluation aborts if it does not exist (a dynamic version of the . operator).",
    ),
    op("hasAttr", 2, has_attr).doc(
        "s set",
        "Return true if set has an attribute named s, and false otherwise (a dynamic version of the ? operator).",
    ),
    op("mapAttrs", 2, map_attrs).doc(
        "f attrset",
        "Apply the function f to every element of attrset: each value v of name n becomes f n v.",
    ),
    op("removeAttrs", 2, remove_attrs).doc(
        "set list",
        "Remove the attributes listed in list from set; they do not have to exist in set.",
    ),
    op("intersectAttrs", 2, intersect_attrs).doc(
        "e1 e2",
        "Return a set consisting of the attributes in the set e2 which have the same name as some attribute in e1.",
    ),
];

/// A string without context (Nix's `forceStringNoCtx`): attribute names and
/// similar identifiers may not refer to store paths.
pub(crate) fn expect_string_no_ctx(ev: &mut Evaluator, v: &Value) -> EResult<NixString> {
    let s = ev.expect_string(v)?;
    reject_context(&s)?;
    Ok(s)
}

/// `f name value`, unevaluated: one thunk that gives `f` both arguments at
/// once when forced, so a curried `n: v: …` runs in one scope. As two nested
/// applications (`(f name) value`), forcing it made the partial application
/// `f name` first, a closure and a scope copied for `v`, and a thunk more.
pub(crate) fn lazy_apply2(ev: &mut Evaluator, f: &Value, name: Sym, v: Value) -> Value {
    let f = f.clone();
    let name = ev.name_value(name);
    Value::lazy(move |ev| ev.call2(&f, name.clone(), v.clone()))
}

/// Return the names of the attributes in the set, sorted alphabetically.
fn attr_names(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let set = ev.expect_attrs(&a[0]).frame(None, || {
        "while evaluating the argument passed to builtins.attrNames".into()
    })?;
    Ok(Value::list(set.keys().map(|k| ev.name_value(*k)).collect()))
}

/// Return the values of the attributes in the set, in the order of the sorted attribute names.
fn attr_values(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let set = ev.expect_attrs(&a[0]).frame(None, || {
        "while evaluating the argument passed to builtins.attrValues".into()
    })?;
    Ok(Value::list(set.values().cloned().collect()))
}

/// Return the attribute named s from set; evaluation aborts if it does not exist (a dynamic version of the . operator).
fn get_attr(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let name = expect_string_no_ctx(ev, &a[0]).frame(None, || {
        "while evaluating the first argument passed to builtins.getAttr".into()
    })?;
    let set = ev.expect_attrs(&a[1]).frame(None, || {
        "while evaluating the second argument passed to builtins.getAttr".into()
    })?;
    match set.get(name.as_str()) {
        Some(v) => ev.force_owned(v.clone()),
        None => raise(EvalError::missing_attribute(name.as_str(), None))
            .frame(None, || "in the attribute set under consideration".into()),
    }
}

/// Return true if set has an attribute named s, and false otherwise (a dynamic version of the ? operator).
fn has_attr(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let name = expect_string_no_ctx(ev, &a[0]).frame(None, || {
        "while evaluating the first argument passed to builtins.hasAttr".into()
    })?;
    let set = ev.expect_attrs(&a[1]).frame(None, || {
        "while evaluating the second argument passed to builtins.hasAttr".into()
    })?;
    Ok(Value::bool(set.contains(name.as_str())))
}

/// Apply the function f to every element of attrset: each value v of name n becomes f n v.
fn map_attrs(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let set = ev.expect_attrs(&a[1]).frame(None, || {
        "while evaluating the second argument passed to builtins.mapAttrs".into()
    })?;
    let f = &a[0];
    let out: Vec<(Sym, Value)> = set
        .iter()
        .map(|(k, v)| (*k, lazy_apply2(ev, f, *k, v.clone())))
        .collect();
    Ok(Value::attrs(Attrs::from_sorted(out)))
}

/// Remove the attributes listed in list from set; they do not have to exist in set.
fn remove_attrs(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let set = ev.expect_attrs(&a[0]).frame(None, || {
        "while evaluating the first argument passed to builtins.removeAttrs".into()
    })?;
    let names = ev.expect_list(&a[1]).frame(None, || {
        "while evaluating the second argument passed to builtins.removeAttrs".into()
    })?;
    let mut present: Vec<NixString> = Vec::new();
    for n in names.iter() {
        let s = expect_string_no_ctx(ev, n).frame(None, || {
            "while evaluating the values of the second argument passed to builtins.removeAttrs"
                .into()
        })?;
        if set.contains(s.as_str()) {
            present.push(s);
        }
    }
    if present.is_empty() {
        return Ok(Value::Attrs(set));
    }
    let out = match &*set {
        // Few removals from a big persistent map (or a layer over one):
        // O(k log n), sharing the rest.
        _ if set.is_map() && present.len() * 8 < set.len() => {
            let mut m = (*set).clone();
            for s in &present {
                m.remove(s.as_str());
            }
            m
        }
        _ => {
            let mut drop: Vec<&str> = present.iter().map(|s| s.as_str()).collect();
            drop.sort_unstable();
            let kept: Vec<(Sym, Value)> = set
                .iter()
                .filter(|(k, _)| drop.binary_search(&k.as_str()).is_err())
                .map(|(k, v)| (*k, v.clone()))
                .collect();
            Attrs::from_sorted(kept)
        }
    };
    Ok(Value::Attrs(Rc::new(out)))
}

/// Return a set consisting of the attributes in the set e2 which have the same name as some attribute in e1.
fn intersect_attrs(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let left = ev.expect_attrs(&a[0]).frame(None, || {
        "while evaluating the first argument passed to builtins.intersectAttrs".into()
    })?;
    let right = ev.expect_attrs(&a[1]).frame(None, || {
        "while evaluating the second argument passed to builtins.intersectAttrs".into()
    })?;
    // Iterate the smaller set (in name order), look names up in the bigger one;
    // values always come from the right-hand set. The sizes are compared
    // without counting a layered set's names (`pkgs // scope` in a
    // `callPackage`).
    let out: Vec<(Sym, Value)> = if left.len() < right.len_at_least() {
        left.keys()
            .filter_map(|k| right.get(k).map(|v| (*k, v.clone())))
            .collect()
    } else {
        right
            .iter()
            .filter(|(k, _)| left.contains(k))
            .map(|(k, v)| (*k, v.clone()))
            .collect()
    };
    if out.len() >= right.len_at_least() && out.len() == right.len() {
        return Ok(Value::Attrs(right));
    }
    Ok(Value::attrs(Attrs::from_sorted(out)))
}

#[cfg(test)]
mod tests {
    use crate::eval::testing::{fails, ok};

    #[test]
    fn names_and_values() {
        assert_eq!(
            ok("builtins.attrNames { y = 1; x = 2; \"a b\" = 3; }"),
            "[ \"a b\" \"x\" \"y\" ]"
        );
        assert_eq!(
            ok("builtins.attrValues { y = 1; x = 2; \"a b\" = 3; }"),
            "[ 3 2 1 ]"
        );
        assert_eq!(ok("builtins.attrNames { }"), "[ ]");
        // Values stay lazy.
        assert_eq!(
            ok("builtins.length (builtins.attrValues { a = throw \"no\"; })"),
            "1"
        );
        fails(
            "builtins.attrNames [ ]",
            "error: expected a set but found a list",
        );
        fails(
            "builtins.attrValues 1",
            "error: expected a set but found an integer: 1",
        );
    }

    #[test]
    fn get_and_has() {
        assert_eq!(
            ok("builtins.getAttr \"x\" { x = 1; y = throw \"no\"; }"),
            "1"
        );
        assert_eq!(
            ok("[ (builtins.hasAttr \"x\" { x = 1; }) (builtins.hasAttr \"z\" { x = 1; }) ]"),
            "[ true false ]"
        );
        fails(
            "builtins.getAttr \"foo\" { }",
            "error: attribute 'foo' missing",
        );
        fails(
            "builtins.getAttr [ ] [ ]",
            "error: expected a string but found a list",
        );
        fails(
            "builtins.getAttr \"foo\" [ ]",
            "error: expected a set but found a list",
        );
        fails(
            "builtins.hasAttr \"foo\" [ ]",
            "error: expected a set but found a list",
        );
    }

    #[test]
    fn map_attrs() {
        assert_eq!(
            ok("builtins.mapAttrs (name: value: name + \"-\" + value) { x = \"foo\"; y = \"bar\"; }"),
            "{ x = \"x-foo\"; y = \"y-bar\"; }"
        );
        // Lazy in each value, and in the function.
        assert_eq!(
            ok("(builtins.mapAttrs (n: v: v * 10) { a = 1; b = throw \"no\"; }).a"),
            "10"
        );
        // Functions of every kind get both arguments (each thunk applies
        // `f` to the name and the value at once). Checked against Nix 2.8.
        assert_eq!(
            ok("[ (builtins.mapAttrs builtins.getAttr { a = { a = 5; }; }) \
                (builtins.mapAttrs { __functor = self: n: v: n + v; } { a = \"x\"; }) \
                (builtins.zipAttrsWith { __functor = self: n: vs: n + builtins.concatStringsSep \"\" vs; } \
                  [ { a = \"x\"; } { a = \"y\"; } ]) \
                (let s = builtins.mapAttrs (n: v: v + 3) { a = 1; }; in s.a + s.a) ]"),
            "[ { a = 5; } { a = \"ax\"; } { a = \"axy\"; } 8 ]"
        );
        assert_eq!(
            ok("builtins.attrNames (builtins.mapAttrs \"\" { a = 1; })"),
            "[ \"a\" ]"
        );
        fails(
            "builtins.mapAttrs [ ] [ ]",
            "error: expected a set but found a list",
        );
        fails(
            "builtins.mapAttrs \"\" { foo.bar = 1; }",
            "error: attempt to call something which is not a function but a string",
        );
    }

    #[test]
    fn remove_attrs() {
        assert_eq!(
            ok("removeAttrs { x = 1; y = 2; z = 3; } [ \"a\" \"x\" \"z\" ]"),
            "{ y = 2; }"
        );
        assert_eq!(ok("removeAttrs { x = 1; } [ ]"), "{ x = 1; }");
        assert_eq!(
            ok("builtins.attrNames (removeAttrs (builtins.listToAttrs (builtins.genList (i: { name = \"k${toString i}\"; value = i; }) 40)) [ \"k1\" \"k10\" \"k5\" ])"),
            ok("builtins.filter (n: n != \"k1\" && n != \"k10\" && n != \"k5\") (builtins.attrNames (builtins.listToAttrs (builtins.genList (i: { name = \"k${toString i}\"; value = i; }) 40)))")
        );
        fails(
            "removeAttrs \"\" \"\"",
            "error: expected a set but found a string: \"\"",
        );
        fails(
            "removeAttrs { } [ 1 ]",
            "error: expected a string but found an integer: 1",
        );
        fails(
            "(removeAttrs { x = 1; y = 2; } [ \"x\" ]).x",
            "attribute 'x' missing",
        );
    }

    #[test]
    fn intersect_attrs() {
        assert_eq!(
            ok("builtins.intersectAttrs { a = abort \"l\"; b = 1; } { a = 1; c = 3; }"),
            "{ a = 1; }"
        );
        assert_eq!(ok("builtins.intersectAttrs { a = 1; } { b = 2; }"), "{ }");
        assert_eq!(
            ok("builtins.intersectAttrs { a = 1; b = 2; c = 3; } { b = \"x\"; }"),
            "{ b = \"x\"; }"
        );
        fails(
            "builtins.intersectAttrs [ ] [ ]",
            "error: expected a set but found a list",
        );
        fails(
            "builtins.intersectAttrs { } [ ]",
            "error: expected a set but found a list",
        );
    }
}
