//! Primops over lists of attribute sets: `listToAttrs`, `zipAttrsWith` and
//! `catAttrs`.
//!
//! Owns building a set from a list (names sorted once, the first of equal names
//! winning) and collecting values by attribute name. It must not force the
//! values it moves: `listToAttrs` takes each `value` as it is, `zipAttrsWith`
//! applies its function lazily per name, `catAttrs` copies what it finds.

use std::rc::Rc;

use super::super::attrs::{expect_string_no_ctx, lazy_apply2};
use super::{arg_function, arg_list};
use crate::eval::{raise, ErrorExt, EvalError, Evaluator, RResult};
use crate::value::{Args, Attrs, Sym, Value};

/// Construct a set from a list of { name = …; value = …; } sets; of duplicate names, the first takes precedence.
pub(super) fn list_to_attrs(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let list = ev.expect_list(&a[0]).frame(None, || {
        "while evaluating the argument passed to builtins.listToAttrs".into()
    })?;
    let mut named: Vec<(Sym, Rc<Attrs>)> = Vec::with_capacity(list.len());
    for x in list.iter() {
        let set = ev.expect_attrs(x).frame(None, || {
            "while evaluating an element of the list passed to builtins.listToAttrs".into()
        })?;
        let Some(name) = set.get("name").cloned() else {
            return raise(EvalError::missing_attribute("name", None))
                .frame(None, || "in a {name=...; value=...;} pair".into());
        };
        let name = expect_string_no_ctx(ev, &name).frame(None, || {
            "while evaluating the `name` attribute of an element of the list passed to builtins.listToAttrs".into()
        })?;
        named.push((Sym::new(name.as_str()), set));
    }
    // Stable: among equal names the first occurrence comes first and wins.
    named.sort_by_key(|x| x.0);
    let mut out: Vec<(Sym, Value)> = Vec::with_capacity(named.len());
    for (name, set) in named {
        if out.last().is_some_and(|(k, _)| *k == name) {
            continue;
        }
        let Some(v) = set.get("value").cloned() else {
            return raise(EvalError::missing_attribute("value", None))
                .frame(None, || "in a {name=...; value=...;} pair".into());
        };
        out.push((name, v));
    }
    Ok(Value::attrs(Attrs::from_sorted(out)))
}

/// Transpose a list of attribute sets into an attribute set of lists, then apply mapAttrs: f name [ values ].
pub(super) fn zip_attrs_with(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let f = arg_function(ev, &a[0], "first", "zipAttrsWith")?;
    let list = arg_list(ev, &a[1], "second", "zipAttrsWith")?;
    let mut index = super::SymIndex::default();
    let mut groups: Vec<(Sym, Vec<Value>)> = Vec::new();
    for x in list.iter() {
        let set = ev.expect_attrs(x).frame(None, || {
            "while evaluating a value of the list passed as second argument to builtins.zipAttrsWith".into()
        })?;
        for (k, v) in set.iter() {
            let i = match index.get(&k.id()) {
                Some(i) => *i,
                None => {
                    index.insert(k.id(), groups.len());
                    groups.push((*k, Vec::new()));
                    groups.len() - 1
                }
            };
            groups[i].1.push(v.clone());
        }
    }
    groups.sort_unstable_by_key(|x| x.0);
    Ok(Value::attrs(Attrs::from_sorted(
        groups
            .into_iter()
            .map(|(k, vs)| {
                let v = lazy_apply2(ev, &f, k, Value::list(vs));
                (k, v)
            })
            .collect(),
    )))
}

/// Collect each attribute named attr from a list of attribute sets; sets that do not contain it are ignored.
pub(super) fn cat_attrs(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let name = expect_string_no_ctx(ev, &a[0]).frame(None, || {
        "while evaluating the first argument passed to builtins.catAttrs".into()
    })?;
    let list = arg_list(ev, &a[1], "second", "catAttrs")?;
    let mut out = Vec::new();
    for x in list.iter() {
        let set = ev.expect_attrs(x).frame(None, || {
            "while evaluating an element in the list passed as second argument to builtins.catAttrs".into()
        })?;
        if let Some(v) = set.get(name.as_str()) {
            out.push(v.clone());
        }
    }
    Ok(Value::list(out))
}

#[cfg(test)]
mod tests {
    use crate::eval::testing::{fails, ok};

    #[test]
    fn list_to_attrs() {
        assert_eq!(
            ok("builtins.listToAttrs [ { name = \"foo\"; value = 123; } { name = \"bar\"; value = 456; } { name = \"bar\"; value = 420; } ]"),
            "{ bar = 456; foo = 123; }"
        );
        assert_eq!(ok("(builtins.listToAttrs [ { name = \"a\"; value = 1; } { name = \"b\"; value = throw \"lazy\"; } ]).a"), "1");
        // A later duplicate need not even have a value.
        assert_eq!(
            ok("builtins.listToAttrs [ { name = \"a\"; value = 1; } { name = \"a\"; } ]"),
            "{ a = 1; }"
        );
        fails(
            "builtins.listToAttrs 1",
            "error: expected a list but found an integer: 1",
        );
        fails(
            "builtins.listToAttrs [ 1 ]",
            "error: expected a set but found an integer: 1",
        );
        fails(
            "builtins.listToAttrs [ { } ]",
            "error: attribute 'name' missing",
        );
        fails(
            "builtins.listToAttrs [ { name = 1; } ]",
            "error: expected a string but found an integer: 1",
        );
        fails(
            "builtins.listToAttrs [ { name = \"foo\"; } ]",
            "error: attribute 'value' missing",
        );
    }

    #[test]
    fn zip_and_cat() {
        assert_eq!(
            ok("builtins.zipAttrsWith (name: values: { inherit name values; }) [ { a = \"x\"; } { a = \"y\"; b = \"z\"; } ]"),
            "{ a = { name = \"a\"; values = [ \"x\" \"y\" ]; }; b = { name = \"b\"; values = [ \"z\" ]; }; }"
        );
        assert_eq!(ok("builtins.zipAttrsWith (n: v: v) [ ]"), "{ }");
        assert_eq!(
            ok("builtins.catAttrs \"a\" [ { a = 1; } { b = 0; } { a = 2; } ]"),
            "[ 1 2 ]"
        );
        fails(
            "builtins.zipAttrsWith [ ] [ 1 ]",
            "error: expected a function but found a list",
        );
        fails(
            "builtins.zipAttrsWith (_: 1) [ 1 ]",
            "error: expected a set but found an integer: 1",
        );
        fails(
            "builtins.zipAttrsWith (_: 1) [ { foo = 1; } ]",
            "error: attempt to call something which is not a function but an integer: 1",
        );
        fails(
            "builtins.catAttrs [ ] { }",
            "error: expected a string but found a list",
        );
        fails(
            "builtins.catAttrs \"foo\" { }",
            "error: expected a list but found a set",
        );
        fails(
            "builtins.catAttrs \"foo\" [ { foo = 1; } 1 ]",
            "error: expected a set but found an integer: 1",
        );
    }
}
