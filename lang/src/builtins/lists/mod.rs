//! Primops: lists.
//!
//! Owns `map`, `filter`, `foldl'`, `length`, `elemAt`, `head`, `tail`,
//! `genList`, `concatLists`, `concatMap`, `elem`, `any`, `all`, `partition` and
//! `groupBy`, the table of every list primop, and the argument helpers the
//! submodules share: `sort` is in [`mod@sort`], `genericClosure` in
//! [`mod@generic_closure`], and the builtins over lists of sets (`listToAttrs`,
//! `zipAttrsWith`, `catAttrs`) in [`sets`]. Elements are never forced unless
//! Nix forces them (`map`, `genList` build lazy applications), and big lists are
//! shared (`Rc`) rather than copied where the result equals an input.

mod generic_closure;
mod sets;
mod sort;

use std::collections::HashMap;
use std::rc::Rc;

use self::generic_closure::generic_closure;
use self::sets::{cat_attrs, list_to_attrs, zip_attrs_with};
use self::sort::sort;
use super::attrs::expect_string_no_ctx;
use super::{mk_attrs, op};
use crate::eval::{raise, ErrorExt, ErrorKind, EvalError, Evaluator, RResult};
use crate::value::{Args, Attrs, PrimOp, Sym, Value};

/// Symbol number → position of its group (`groupBy`, `zipAttrsWith`): keyed by
/// the number, so no string is hashed, and with foldhash rather than SipHash
/// (a multiply for a number; SipHash was 0.35 % of `modules`' instructions).
type SymIndex = HashMap<usize, usize, foldhash::fast::FixedState>;

pub(crate) static BUILTINS: &[PrimOp] = &[
    op("map", 2, map).doc("f list", "Apply the function f to each element in the list list."),
    op("filter", 2, filter).doc(
        "f list",
        "Return a list consisting of the elements of list for which the function f returns true.",
    ),
    op("foldl'", 3, foldl_strict).doc(
        "op nul list",
        "Reduce a list by applying a binary operator, from left to right: op (op (op nul x0) x1) x2 …, forcing each step.",
    ),
    op("length", 1, length).doc("e", "Return the length of the list e."),
    op("elemAt", 2, elem_at).doc(
        "xs n",
        "Return element n from the list xs, counting from 0; a fatal error occurs if the index is out of bounds.",
    ),
    op("head", 1, head).doc(
        "list",
        "Return the first element of a list; abort evaluation if the argument is not a list or is an empty list.",
    ),
    op("tail", 1, tail).doc(
        "list",
        "Return the list without its first item; abort evaluation if the argument is not a list or is an empty list.",
    ),
    op("genList", 2, gen_list).doc(
        "generator length",
        "Generate a list of size length, with each element i equal to the value returned by generator i.",
    ),
    op("sort", 2, sort).doc(
        "comparator list",
        "Return list in sorted order (a stable sort), comparing elements with the less-than function comparator.",
    ),
    op("concatLists", 1, concat_lists).doc(
        "lists",
        "Concatenate a list of lists into a single list.",
    ),
    op("concatMap", 2, concat_map).doc(
        "f list",
        "This function is equivalent to builtins.concatLists (map f list) but is more efficient.",
    ),
    op("elem", 2, elem).doc(
        "x xs",
        "Return true if a value equal to x occurs in the list xs, and false otherwise.",
    ),
    op("any", 2, any).doc(
        "pred list",
        "Return true if the function pred returns true for at least one element of list, and false otherwise.",
    ),
    op("all", 2, all).doc(
        "pred list",
        "Return true if the function pred returns true for all elements of list, and false otherwise.",
    ),
    op("partition", 2, partition).doc(
        "pred list",
        "Split list into { right = the elements for which pred returns true; wrong = the others; }.",
    ),
    op("groupBy", 2, group_by).doc(
        "f list",
        "Group the elements of list by the string f returns for each: a set of lists, one per name returned.",
    ),
    op("genericClosure", 1, generic_closure).doc(
        "attrset",
        "Compute the transitive closure of attrset.startSet under attrset.operator, each element unique by its key attribute.",
    ),
    op("listToAttrs", 1, list_to_attrs).doc(
        "e",
        "Construct a set from a list of { name = …; value = …; } sets; of duplicate names, the first takes precedence.",
    ),
    op("zipAttrsWith", 2, zip_attrs_with).doc(
        "f list",
        "Transpose a list of attribute sets into an attribute set of lists, then apply mapAttrs: f name [ values ].",
    ),
    op("catAttrs", 2, cat_attrs).doc(
        "attr list",
        "Collect each attribute named attr from a list of attribute sets; sets that do not contain it are ignored.",
    ),
];

fn arg_list(ev: &mut Evaluator, v: &Value, which: &str, name: &str) -> RResult<Rc<Vec<Value>>> {
    ev.expect_list(v).frame(None, || {
        format!("while evaluating the {which} argument passed to builtins.{name}")
    })
}

fn arg_function(ev: &mut Evaluator, v: &Value, which: &str, name: &str) -> RResult<Value> {
    ev.expect_function(v).frame(None, || {
        format!("while evaluating the {which} argument passed to builtins.{name}")
    })
}

/// Calls a predicate and checks it returned a Boolean.
fn call_pred(ev: &mut Evaluator, f: &Value, x: &Value, ctx: &'static str) -> RResult<bool> {
    // A Boolean is not dropped through a call (`Value::into_bool`).
    let r = match ev.call(f, x.clone())?.into_bool() {
        Ok(b) => return Ok(b),
        Err(r) => r,
    };
    ev.expect_bool(&r).frame(None, || ctx.into())
}

/// Apply the function f to each element in the list list.
fn map(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let list = arg_list(ev, &a[1], "second", "map")?;
    if list.is_empty() {
        return Ok(Value::List(list));
    }
    let f = arg_function(ev, &a[0], "first", "map")?;
    Ok(Value::list(
        list.iter()
            .map(|x| Value::lazy_apply(f.clone(), x.clone()))
            .collect(),
    ))
}

/// Return a list consisting of the elements of list for which the function f returns true.
fn filter(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let list = arg_list(ev, &a[1], "second", "filter")?;
    if list.is_empty() {
        return Ok(Value::List(list));
    }
    let f = arg_function(ev, &a[0], "first", "filter")?;
    let mut out = Vec::with_capacity(list.len());
    for x in list.iter() {
        if call_pred(
            ev,
            &f,
            x,
            "while evaluating the return value of the filtering function passed to builtins.filter",
        )? {
            out.push(x.clone());
        }
    }
    if out.len() == list.len() {
        return Ok(Value::List(list));
    }
    out.shrink_to_fit();
    Ok(Value::list(out))
}

/// Reduce a list by applying a binary operator, from left to right: op (op (op nul x0) x1) x2 …, forcing each step.
fn foldl_strict(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let f = arg_function(ev, &a[0], "first", "foldlStrict")?;
    let list = arg_list(ev, &a[2], "third", "foldlStrict")?;
    let mut acc = a[1].clone();
    if list.is_empty() {
        return ev.force(&acc);
    }
    for x in list.iter() {
        // `call` forces each intermediate result: foldl' is strict in the
        // accumulator, not in the elements.
        acc = ev.call2(&f, acc, x.clone())?;
    }
    Ok(acc)
}

/// Return the length of the list e.
fn length(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let list = arg_list(ev, &a[0], "first", "length")?;
    Ok(Value::Int(list.len() as i64))
}

/// Return element n from the list xs, counting from 0; a fatal error occurs if the index is out of bounds.
fn elem_at(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let n = ev.expect_int(&a[1]).frame(None, || {
        "while evaluating the second argument passed to 'builtins.elemAt'".into()
    })?;
    let list = ev.expect_list(&a[0]).frame(None, || {
        "while evaluating the first argument passed to 'builtins.elemAt'".into()
    })?;
    match usize::try_from(n).ok().and_then(|i| list.get(i)) {
        Some(v) => ev.force_owned(v.clone()),
        None => raise(EvalError::new(
            ErrorKind::Eval,
            format!(
                "'builtins.elemAt' called with index {n} on a list of size {}",
                list.len()
            ),
        )),
    }
}

/// Return the first element of a list; abort evaluation if the argument is not a list or is an empty list.
fn head(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let list = ev.expect_list(&a[0]).frame(None, || {
        "while evaluating the first argument passed to 'builtins.head'".into()
    })?;
    match list.first() {
        Some(v) => ev.force_owned(v.clone()),
        None => raise(EvalError::new(
            ErrorKind::Eval,
            "'builtins.head' called on an empty list",
        )),
    }
}

/// Return the list without its first item; abort evaluation if the argument is not a list or is an empty list.
fn tail(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let list = ev.expect_list(&a[0]).frame(None, || {
        "while evaluating the first argument passed to 'builtins.tail'".into()
    })?;
    match list.split_first() {
        Some((_, rest)) => Ok(Value::list(rest.to_vec())),
        None => raise(EvalError::new(
            ErrorKind::Eval,
            "'builtins.tail' called on an empty list",
        )),
    }
}

/// Generate a list of size length, with each element i equal to the value returned by generator i.
fn gen_list(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let n = ev.expect_int(&a[1]).frame(None, || {
        "while evaluating the second argument passed to builtins.genList".into()
    })?;
    if n < 0 {
        return raise(EvalError::new(
            ErrorKind::Eval,
            format!("cannot create list of size {n}"),
        ));
    }
    let f = arg_function(ev, &a[0], "first", "genList")?;
    let n = usize::try_from(n)
        .map_err(|_| EvalError::new(ErrorKind::Eval, format!("cannot create list of size {n}")))?;
    let mut out = Vec::new();
    out.try_reserve_exact(n)
        .map_err(|_| EvalError::new(ErrorKind::Eval, format!("cannot create list of size {n}")))?;
    out.extend((0..n).map(|i| Value::lazy_apply(f.clone(), Value::Int(i as i64))));
    Ok(Value::list(out))
}

// ---- concatenation and searching ----------------------------------------------

/// Concatenates lists, sharing the input when only one is non-empty.
fn concat(parts: Vec<Rc<Vec<Value>>>) -> Value {
    let mut non_empty = parts.iter().filter(|l| !l.is_empty());
    match (non_empty.next(), non_empty.next()) {
        (None, _) => Value::list(Vec::new()),
        (Some(only), None) => Value::List(only.clone()),
        _ => {
            let total = parts.iter().map(|l| l.len()).sum();
            let mut out = Vec::with_capacity(total);
            for l in &parts {
                out.extend(l.iter().cloned());
            }
            Value::list(out)
        }
    }
}

/// Concatenate a list of lists into a single list.
fn concat_lists(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let lists = arg_list(ev, &a[0], "first", "concatLists")?;
    let mut parts = Vec::with_capacity(lists.len());
    for l in lists.iter() {
        parts.push(ev.expect_list(l).frame(None, || {
            "while evaluating a value of the list passed to builtins.concatLists".into()
        })?);
    }
    Ok(concat(parts))
}

/// This function is equivalent to builtins.concatLists (map f list) but is more efficient.
fn concat_map(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let f = arg_function(ev, &a[0], "first", "concatMap")?;
    let list = arg_list(ev, &a[1], "second", "concatMap")?;
    let mut parts = Vec::with_capacity(list.len());
    for x in list.iter() {
        let r = ev.call(&f, x.clone())?;
        parts.push(ev.expect_list(&r).frame(None, || {
            "while evaluating the return value of the function passed to builtins.concatMap".into()
        })?);
    }
    Ok(concat(parts))
}

/// Return true if a value equal to x occurs in the list xs, and false otherwise.
fn elem(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let list = arg_list(ev, &a[1], "second", "elem")?;
    for x in list.iter() {
        if ev.equal(&a[0], x)? {
            return Ok(Value::bool(true));
        }
    }
    Ok(Value::bool(false))
}

fn any_or_all(ev: &mut Evaluator, a: &[Value], any: bool) -> RResult<Value> {
    let name = if any { "any" } else { "all" };
    let f = arg_function(ev, &a[0], "first", name)?;
    let list = arg_list(ev, &a[1], "second", name)?;
    let ctx = if any {
        "while evaluating the return value of the function passed to builtins.any"
    } else {
        "while evaluating the return value of the function passed to builtins.all"
    };
    for x in list.iter() {
        if call_pred(ev, &f, x, ctx)? == any {
            return Ok(Value::bool(any));
        }
    }
    Ok(Value::bool(!any))
}

/// Return true if the function pred returns true for at least one element of list, and false otherwise.
fn any(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    any_or_all(ev, &a, true)
}

/// Return true if the function pred returns true for all elements of list, and false otherwise.
fn all(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    any_or_all(ev, &a, false)
}

/// Split list into { right = the elements for which pred returns true; wrong = the others; }.
fn partition(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let f = arg_function(ev, &a[0], "first", "partition")?;
    let list = arg_list(ev, &a[1], "second", "partition")?;
    let (mut right, mut wrong) = (Vec::new(), Vec::new());
    for x in list.iter() {
        let x = ev.force(x)?;
        if call_pred(
            ev,
            &f,
            &x,
            "while evaluating the return value of the partition function passed to builtins.partition",
        )? {
            right.push(x);
        } else {
            wrong.push(x);
        }
    }
    Ok(mk_attrs(vec![
        ("right", Value::list(right)),
        ("wrong", Value::list(wrong)),
    ]))
}

/// Group the elements of list by the string f returns for each: a set of lists, one per name returned.
fn group_by(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let f = arg_function(ev, &a[0], "first", "groupBy")?;
    let list = arg_list(ev, &a[1], "second", "groupBy")?;
    let mut index = SymIndex::default();
    let mut groups: Vec<(Sym, Vec<Value>)> = Vec::new();
    for x in list.iter() {
        let r = ev.call(&f, x.clone())?;
        let name = expect_string_no_ctx(ev, &r).frame(None, || {
            "while evaluating the return value of the grouping function passed to builtins.groupBy".into()
        })?;
        let key = Sym::new(name.as_str());
        let i = *index.entry(key.id()).or_insert_with(|| {
            groups.push((key, Vec::new()));
            groups.len() - 1
        });
        groups[i].1.push(x.clone());
    }
    groups.sort_unstable_by_key(|x| x.0);
    Ok(Value::attrs(Attrs::from_sorted(
        groups
            .into_iter()
            .map(|(k, v)| (k, Value::list(v)))
            .collect(),
    )))
}

#[cfg(test)]
mod tests {
    use crate::eval::testing::{fails, ok};

    #[test]
    fn map_filter_length() {
        assert_eq!(ok("map (x: x + 1) [ 1 2 3 ]"), "[ 2 3 4 ]");
        assert_eq!(ok("map 1 [ ]"), "[ ]");
        assert_eq!(ok("builtins.length (map (x: throw \"lazy\") [ 1 2 ])"), "2");
        assert_eq!(
            ok("builtins.filter (x: x / 2 * 2 == x) [ 0 1 2 3 4 5 ]"),
            "[ 0 2 4 ]"
        );
        assert_eq!(
            ok("builtins.filter (x: true) [ 1 (throw \"lazy\") ] == [ ] || true"),
            "true"
        );
        assert_eq!(
            ok("builtins.length (builtins.filter (x: true) [ 1 (throw \"lazy\") ])"),
            "2"
        );
        assert_eq!(ok("builtins.length [ 1 2 (throw \"x\") ]"), "3");
        fails(
            "map 1 \"foo\"",
            "error: expected a list but found a string: \"foo\"",
        );
        fails(
            "map 1 [ 1 ]",
            "error: expected a function but found an integer: 1",
        );
        fails(
            "builtins.filter (_: 5) [ \"foo\" ]",
            "error: expected a Boolean but found an integer: 5",
        );
        fails(
            "builtins.length 1",
            "error: expected a list but found an integer: 1",
        );
    }

    #[test]
    fn fold() {
        assert_eq!(ok("builtins.foldl' (a: b: a + b) 0 [ 1 2 3 ]"), "6");
        assert_eq!(ok("builtins.foldl' (a: b: a - b) 10 [ 1 2 ]"), "7");
        assert_eq!(ok("builtins.foldl' (a: b: a) 5 [ ]"), "5");
        assert_eq!(
            ok("builtins.head (builtins.foldl' (acc: x: acc ++ [ x ]) [ ] [ 42 (throw \"lazy\") ])"),
            "42"
        );
        fails(
            "builtins.foldl' (_: f: f null) null [ (_: throw \"forced\") (_: 23) ]",
            "error: forced",
        );
        fails(
            "builtins.foldl' 1 \"foo\" true",
            "error: expected a function but found an integer: 1",
        );
        fails(
            "builtins.foldl' (_: 1) \"foo\" true",
            "error: expected a list but found a Boolean: true",
        );
        fails(
            "builtins.foldl' (_: 1) \"foo\" [ true ]",
            "error: attempt to call something which is not a function but an integer",
        );
        fails(
            "builtins.foldl' (a: b: a) (throw \"nul\") [ ]",
            "error: nul",
        );
    }

    #[test]
    fn indexing() {
        assert_eq!(ok("[ (builtins.elemAt [ 1 2 3 ] 1) (builtins.head [ 4 5 ]) (builtins.tail [ 4 5 6 ]) ]"), "[ 2 4 [ 5 6 ] ]");
        assert_eq!(ok("builtins.tail [ 1 ]"), "[ ]");
        assert_eq!(ok("builtins.elemAt [ (throw \"a\") 2 ] 1"), "2");
        fails(
            "builtins.elemAt [ \"foo\" ] 3",
            "error: 'builtins.elemAt' called with index 3 on a list of size 1",
        );
        fails(
            "builtins.elemAt [ ] (-1)",
            "error: 'builtins.elemAt' called with index -1 on a list of size 0",
        );
        fails(
            "builtins.elemAt \"foo\" (-1)",
            "error: expected a list but found a string: \"foo\"",
        );
        fails(
            "builtins.head [ ]",
            "error: 'builtins.head' called on an empty list",
        );
        fails(
            "builtins.tail [ ]",
            "error: 'builtins.tail' called on an empty list",
        );
        fails(
            "builtins.tail 1",
            "error: expected a list but found an integer: 1",
        );
    }

    #[test]
    fn gen_list() {
        assert_eq!(ok("builtins.genList (x: x * x) 5"), "[ 0 1 4 9 16 ]");
        assert_eq!(ok("builtins.genList (x: x) 0"), "[ ]");
        assert_eq!(
            ok("builtins.length (builtins.genList (x: throw \"lazy\") 3)"),
            "3"
        );
        fails(
            "builtins.genList false (-3)",
            "error: cannot create list of size -3",
        );
        fails(
            "builtins.genList 1 2",
            "error: expected a function but found an integer: 1",
        );
        fails(
            "builtins.genList 1 \"foo\"",
            "error: expected an integer but found a string: \"foo\"",
        );
        fails("builtins.genList (x: x + \"foo\") 2", "\"foo\"");
    }

    #[test]
    fn concat_and_search() {
        assert_eq!(
            ok("builtins.concatLists [ [ 1 2 ] [ ] [ 3 ] ]"),
            "[ 1 2 3 ]"
        );
        assert_eq!(ok("builtins.concatLists [ ]"), "[ ]");
        assert_eq!(ok("builtins.concatMap (x: [ x x ]) [ 1 2 ]"), "[ 1 1 2 2 ]");
        assert_eq!(
            ok("builtins.concatMap (x: if x / 2 * 2 == x then [ ] else [ x ]) [ 0 1 2 3 4 5 ]"),
            "[ 1 3 5 ]"
        );
        assert_eq!(ok("[ (builtins.elem 2 [ 1 2 3 ]) (builtins.elem 4 [ 1 2 3 ]) (builtins.elem [ 1 ] [ [ 1 ] ]) ]"), "[ true false true ]");
        assert_eq!(ok("[ (builtins.any (x: x == 1) [ ]) (builtins.any (x: x == 1) [ 2 1 ]) (builtins.all (x: x == 1) [ ]) (builtins.all (x: x == 1) [ 1 2 ]) ]"), "[ false true true false ]");
        assert_eq!(
            ok("builtins.any (x: x) [ true (throw \"short-circuit\") ]"),
            "true"
        );
        fails(
            "builtins.concatLists [ [ 1 ] \"foo\" ]",
            "error: expected a list but found a string: \"foo\"",
        );
        fails(
            "builtins.concatLists 1",
            "error: expected a list but found an integer: 1",
        );
        fails(
            "builtins.concatMap (x: 1) [ \"foo\" ]",
            "error: expected a list but found an integer: 1",
        );
        fails(
            "builtins.concatMap 1 \"foo\"",
            "error: expected a function but found an integer: 1",
        );
        fails(
            "builtins.elem 1 \"foo\"",
            "error: expected a list but found a string: \"foo\"",
        );
        fails(
            "builtins.any 1 \"foo\"",
            "error: expected a function but found an integer: 1",
        );
        fails(
            "builtins.all (_: 1) [ \"foo\" ]",
            "error: expected a Boolean but found an integer: 1",
        );
    }

    #[test]
    fn partition_group_by() {
        assert_eq!(
            ok("builtins.partition (x: x > 10) [ 1 23 9 3 42 ]"),
            "{ right = [ 23 42 ]; wrong = [ 1 9 3 ]; }"
        );
        assert_eq!(
            ok("builtins.groupBy (x: if x == \"foo\" then \"f\" else \"b\") [ \"foo\" \"bar\" \"baz\" ]"),
            "{ b = [ \"bar\" \"baz\" ]; f = [ \"foo\" ]; }"
        );
        assert_eq!(ok("builtins.groupBy (x: x) [ ]"), "{ }");
        fails(
            "builtins.partition (_: 1) [ \"foo\" ]",
            "error: expected a Boolean but found an integer: 1",
        );
        fails(
            "builtins.partition 1 \"foo\"",
            "error: expected a function but found an integer: 1",
        );
        fails(
            "builtins.groupBy (x: x) [ \"foo\" \"bar\" 1 ]",
            "error: expected a string but found an integer: 1",
        );
        fails(
            "builtins.groupBy (_: 1) \"foo\"",
            "error: expected a list but found a string: \"foo\"",
        );
    }
}
