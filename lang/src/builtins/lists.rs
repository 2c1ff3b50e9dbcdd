//! Primops: lists, and the builtins that turn lists into sets.
//!
//! Owns `map`, `filter`, `foldl'`, `length`, `elemAt`, `head`, `tail`,
//! `genList`, `sort`, `concatLists`, `concatMap`, `elem`, `any`, `all`,
//! `partition`, `groupBy`, `genericClosure`, `listToAttrs`, `zipAttrsWith` and
//! `catAttrs`. Elements are never forced unless Nix forces them (`map`,
//! `genList` build lazy applications), big lists are shared (`Rc`) rather than
//! copied where the result equals an input, and `sort` is a merge sort that
//! tolerates inconsistent comparators and propagates their errors.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::rc::Rc;

use super::attrs::{expect_string_no_ctx, lazy_apply2};
use super::{mk_attrs, op};
use crate::eval::show_value;
use crate::eval::{EResult, ErrorExt, ErrorKind, EvalError, Evaluator};
use crate::value::{Args, Attrs, PrimOp, Sym, Value};

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

fn arg_list(ev: &mut Evaluator, v: &Value, which: &str, name: &str) -> EResult<Rc<Vec<Value>>> {
    ev.expect_list(v).frame(None, || {
        format!("while evaluating the {which} argument passed to builtins.{name}")
    })
}

fn arg_function(ev: &mut Evaluator, v: &Value, which: &str, name: &str) -> EResult<Value> {
    ev.expect_function(v).frame(None, || {
        format!("while evaluating the {which} argument passed to builtins.{name}")
    })
}

/// Calls a predicate and checks it returned a Boolean.
fn call_pred(ev: &mut Evaluator, f: &Value, x: &Value, ctx: &'static str) -> EResult<bool> {
    let r = ev.call(f, x.clone())?;
    ev.expect_bool(&r).frame(None, || ctx.into())
}

/// Apply the function f to each element in the list list.
fn map(ev: &mut Evaluator, a: Args) -> EResult<Value> {
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
fn filter(ev: &mut Evaluator, a: Args) -> EResult<Value> {
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
fn foldl_strict(ev: &mut Evaluator, a: Args) -> EResult<Value> {
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
fn length(ev: &mut Evaluator, a: Args) -> EResult<Value> {
    let list = arg_list(ev, &a[0], "first", "length")?;
    Ok(Value::Int(list.len() as i64))
}

/// Return element n from the list xs, counting from 0; a fatal error occurs if the index is out of bounds.
fn elem_at(ev: &mut Evaluator, a: Args) -> EResult<Value> {
    let n = ev.expect_int(&a[1]).frame(None, || {
        "while evaluating the second argument passed to 'builtins.elemAt'".into()
    })?;
    let list = ev.expect_list(&a[0]).frame(None, || {
        "while evaluating the first argument passed to 'builtins.elemAt'".into()
    })?;
    match usize::try_from(n).ok().and_then(|i| list.get(i)) {
        Some(v) => {
            let v = v.clone();
            ev.force(&v)
        }
        None => Err(EvalError::new(
            ErrorKind::Eval,
            format!(
                "'builtins.elemAt' called with index {n} on a list of size {}",
                list.len()
            ),
        )),
    }
}

/// Return the first element of a list; abort evaluation if the argument is not a list or is an empty list.
fn head(ev: &mut Evaluator, a: Args) -> EResult<Value> {
    let list = ev.expect_list(&a[0]).frame(None, || {
        "while evaluating the first argument passed to 'builtins.head'".into()
    })?;
    match list.first() {
        Some(v) => {
            let v = v.clone();
            ev.force(&v)
        }
        None => Err(EvalError::new(
            ErrorKind::Eval,
            "'builtins.head' called on an empty list",
        )),
    }
}

/// Return the list without its first item; abort evaluation if the argument is not a list or is an empty list.
fn tail(ev: &mut Evaluator, a: Args) -> EResult<Value> {
    let list = ev.expect_list(&a[0]).frame(None, || {
        "while evaluating the first argument passed to 'builtins.tail'".into()
    })?;
    match list.split_first() {
        Some((_, rest)) => Ok(Value::list(rest.to_vec())),
        None => Err(EvalError::new(
            ErrorKind::Eval,
            "'builtins.tail' called on an empty list",
        )),
    }
}

/// Generate a list of size length, with each element i equal to the value returned by generator i.
fn gen_list(ev: &mut Evaluator, a: Args) -> EResult<Value> {
    let n = ev.expect_int(&a[1]).frame(None, || {
        "while evaluating the second argument passed to builtins.genList".into()
    })?;
    if n < 0 {
        return Err(EvalError::new(
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

// ---- sort ------------------------------------------------------------------

/// The comparison used by `sort`: the user's function, or `lessThan` directly.
struct Sorter<'a> {
    ev: &'a mut Evaluator,
    f: Value,
    builtin_less_than: bool,
    /// `f` is `a: b: a < b` (`Some(false)`) or `a: b: b < a` (`Some(true)`),
    /// see [`plain_order`].
    plain: Option<bool>,
    items: &'a [Value],
}

/// Whether `f` is the comparator written most often, `a: b: a < b` (or
/// `a > b`, `b < a`, … : `Some(true)` when it orders the other way round).
/// Calling it on two numbers or two strings can only compare them, so the
/// sort compares them itself instead of entering the lambda: the same result,
/// no scope, no frame. Anything else (other types, errors) still calls `f`.
fn plain_order(f: &Value) -> Option<bool> {
    use crate::eval::ir::{Ir, IrParam};
    use crate::syntax::ast::BinaryOp;
    let Value::Lambda(c) = f else {
        return None;
    };
    let Ir::Lambda(inner) = &*c.def.body else {
        return None;
    };
    // A curried chain `a: b: …` runs in one scope: `a` in slot 0, `b` in 1.
    if !matches!(c.def.param, IrParam::Ident(_))
        || !matches!(inner.param, IrParam::Ident(_))
        || !inner.extends
    {
        return None;
    }
    let Ir::Binary { op, lhs, rhs, .. } = &*inner.body else {
        return None;
    };
    let slot = |ir: &Ir| match ir {
        Ir::Var { up: 0, idx, .. } => Some(*idx),
        _ => None,
    };
    match (op, slot(lhs)?, slot(rhs)?) {
        (BinaryOp::Lt, 0, 1) | (BinaryOp::Gt, 1, 0) => Some(false),
        (BinaryOp::Lt, 1, 0) | (BinaryOp::Gt, 0, 1) => Some(true),
        _ => None,
    }
}

impl Sorter<'_> {
    fn less(&mut self, a: usize, b: usize) -> EResult<bool> {
        let (x, y) = (&self.items[a], &self.items[b]);
        if self.builtin_less_than {
            return self.ev.less_than(x, y).frame(None, || {
                "while evaluating the ordering function passed to builtins.sort".into()
            });
        }
        if let Some(flip) = self.plain {
            let (p, q) = if flip { (y, x) } else { (x, y) };
            let comparable = matches!(
                (p, q),
                (
                    Value::Int(_) | Value::Float(_),
                    Value::Int(_) | Value::Float(_)
                ) | (Value::String(_), Value::String(_))
            );
            if comparable {
                return self.ev.less_than(p, q);
            }
        }
        let r = self.ev.call2(&self.f, x.clone(), y.clone())?;
        self.ev.expect_bool(&r).frame(None, || {
            "while evaluating the return value of the sorting function passed to builtins.sort"
                .into()
        })
    }
}

/// Runs shorter than this are sorted by binary insertion.
const INSERTION_MAX: usize = 12;

/// Stable top-down merge sort of the index permutation `v`. Every step only
/// moves indices, so an inconsistent comparator still yields a permutation.
fn merge_sort(s: &mut Sorter<'_>, v: &mut [usize], buf: &mut Vec<usize>) -> EResult<()> {
    let n = v.len();
    if n <= INSERTION_MAX {
        for i in 1..n {
            let x = v[i];
            // First position whose element is greater than x (after equals: stable).
            let (mut lo, mut hi) = (0, i);
            while lo < hi {
                let mid = lo + (hi - lo) / 2;
                if s.less(x, v[mid])? {
                    hi = mid;
                } else {
                    lo = mid + 1;
                }
            }
            v[lo..=i].rotate_right(1);
        }
        return Ok(());
    }
    let mid = n / 2;
    merge_sort(s, &mut v[..mid], buf)?;
    merge_sort(s, &mut v[mid..], buf)?;
    // Already in order (e.g. sorted input): one comparison, no merge.
    if !s.less(v[mid], v[mid - 1])? {
        return Ok(());
    }
    buf.clear();
    buf.extend_from_slice(&v[..mid]);
    let (mut i, mut j, mut k) = (0, mid, 0);
    while i < buf.len() && j < n {
        if s.less(v[j], buf[i])? {
            v[k] = v[j];
            j += 1;
        } else {
            v[k] = buf[i];
            i += 1;
        }
        k += 1;
    }
    while i < buf.len() {
        v[k] = buf[i];
        i += 1;
        k += 1;
    }
    Ok(())
}

/// Return list in sorted order (a stable sort), comparing elements with the less-than function comparator.
fn sort(ev: &mut Evaluator, a: Args) -> EResult<Value> {
    let list = arg_list(ev, &a[1], "second", "sort")?;
    if list.is_empty() {
        return Ok(Value::List(list));
    }
    let f = arg_function(ev, &a[0], "first", "sort")?;
    // Nix forces every element before sorting.
    let mut items = Vec::with_capacity(list.len());
    for x in list.iter() {
        items.push(ev.force(x)?);
    }
    let builtin_less_than =
        matches!(&f, Value::PrimOp(app) if app.args.is_empty() && app.op.name == "lessThan");
    let mut perm: Vec<usize> = (0..items.len()).collect();
    let mut buf = Vec::with_capacity(items.len() / 2 + 1);
    let plain = plain_order(&f);
    let mut s = Sorter {
        ev,
        f,
        builtin_less_than,
        plain,
        items: &items,
    };
    merge_sort(&mut s, &mut perm, &mut buf)?;
    Ok(Value::list(
        perm.into_iter().map(|i| items[i].clone()).collect(),
    ))
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
fn concat_lists(ev: &mut Evaluator, a: Args) -> EResult<Value> {
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
fn concat_map(ev: &mut Evaluator, a: Args) -> EResult<Value> {
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
fn elem(ev: &mut Evaluator, a: Args) -> EResult<Value> {
    let list = arg_list(ev, &a[1], "second", "elem")?;
    for x in list.iter() {
        if ev.equal(&a[0], x)? {
            return Ok(Value::bool(true));
        }
    }
    Ok(Value::bool(false))
}

fn any_or_all(ev: &mut Evaluator, a: &[Value], any: bool) -> EResult<Value> {
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
fn any(ev: &mut Evaluator, a: Args) -> EResult<Value> {
    any_or_all(ev, &a, true)
}

/// Return true if the function pred returns true for all elements of list, and false otherwise.
fn all(ev: &mut Evaluator, a: Args) -> EResult<Value> {
    any_or_all(ev, &a, false)
}

/// Split list into { right = the elements for which pred returns true; wrong = the others; }.
fn partition(ev: &mut Evaluator, a: Args) -> EResult<Value> {
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
fn group_by(ev: &mut Evaluator, a: Args) -> EResult<Value> {
    let f = arg_function(ev, &a[0], "first", "groupBy")?;
    let list = arg_list(ev, &a[1], "second", "groupBy")?;
    // Keyed by symbol number: no string hashing.
    let mut index: HashMap<usize, usize> = HashMap::new();
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

// ---- genericClosure --------------------------------------------------------------

/// The keys `genericClosure` has seen: hashed while they are all ints, all
/// strings or all paths (the common cases), otherwise a vector kept sorted by
/// Nix's `<`, holding each key's element for error messages.
enum KeySet {
    Empty,
    Ints(HashSet<i64>),
    Strings(HashSet<String>),
    Paths(HashSet<PathBuf>),
    Sorted(Vec<(Value, Value)>),
}

struct KeyTracker {
    keys: KeySet,
    /// The first key and its element, the other side of a type-mismatch error.
    first: Option<(Value, Value)>,
}

impl KeyTracker {
    /// Records `key` (forced); false if an equal key was seen before.
    fn insert(&mut self, ev: &mut Evaluator, key: &Value, elem: &Value) -> EResult<bool> {
        match (&mut self.keys, key) {
            (KeySet::Empty, _) => {
                self.first = Some((key.clone(), elem.clone()));
                self.keys = match key {
                    Value::Int(i) => KeySet::Ints(HashSet::from([*i])),
                    Value::String(s) => KeySet::Strings(HashSet::from([s.as_str().to_string()])),
                    Value::Path(p) => KeySet::Paths(HashSet::from([(**p).clone()])),
                    _ => {
                        let mut v = Vec::new();
                        let r = insert_sorted(ev, &mut v, key, elem);
                        self.keys = KeySet::Sorted(v);
                        return r;
                    }
                };
                Ok(true)
            }
            (KeySet::Ints(s), Value::Int(i)) => Ok(s.insert(*i)),
            (KeySet::Strings(s), Value::String(k)) => {
                if s.contains(k.as_str()) {
                    Ok(false)
                } else {
                    s.insert(k.as_str().to_string());
                    Ok(true)
                }
            }
            (KeySet::Paths(s), Value::Path(p)) => {
                if s.contains(p.as_path()) {
                    Ok(false)
                } else {
                    s.insert((**p).clone());
                    Ok(true)
                }
            }
            (KeySet::Ints(s), Value::Float(_)) => {
                // Mixed numbers: fall back to comparisons.
                let elem0 = self
                    .first
                    .as_ref()
                    .map(|f| f.1.clone())
                    .unwrap_or(Value::Null);
                let mut ints: Vec<i64> = s.iter().copied().collect();
                ints.sort_unstable();
                let mut v: Vec<(Value, Value)> = ints
                    .into_iter()
                    .map(|i| (Value::Int(i), elem0.clone()))
                    .collect();
                let r = insert_sorted(ev, &mut v, key, elem);
                self.keys = KeySet::Sorted(v);
                r
            }
            (KeySet::Sorted(v), _) => insert_sorted(ev, v, key, elem),
            // A key of another type than the first: the comparison fails.
            _ => {
                let (k0, e0) = self.first.clone().unwrap_or((Value::Null, Value::Null));
                let r = ev.less_than(key, &k0);
                let err = match r {
                    Err(e) => e,
                    Ok(_) => {
                        EvalError::new(ErrorKind::Eval, "cannot compare keys of different types")
                    }
                };
                Err(compare_traces(err, elem, &e0))
            }
        }
    }
}

fn compare_traces(err: Box<EvalError>, elem: &Value, other: &Value) -> Box<EvalError> {
    let r: EResult<()> = Err(err);
    let r = r.frame(None, || format!("with element {}", show_value(other)));
    let r = r.frame(None, || {
        format!("while comparing element {}", show_value(elem))
    });
    match r {
        Err(e) => e,
        Ok(()) => unreachable!("an error stays an error"),
    }
}

/// Inserts into a vector sorted by Nix's `<`; false if an equal key exists.
fn insert_sorted(
    ev: &mut Evaluator,
    v: &mut Vec<(Value, Value)>,
    key: &Value,
    elem: &Value,
) -> EResult<bool> {
    let (mut lo, mut hi) = (0, v.len());
    let mut step = || -> EResult<bool> {
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if ev.less_than(&v[mid].0, key)? {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        Ok(lo < v.len() && !ev.less_than(key, &v[lo].0)?)
    };
    match step() {
        Ok(true) => Ok(false),
        Ok(false) => {
            v.insert(lo, (key.clone(), elem.clone()));
            Ok(true)
        }
        Err(e) => {
            // Find an element the key cannot be compared with, for the trace.
            let other = v
                .iter()
                .find(|(k, _)| ev.less_than(key, k).is_err())
                .map(|(_, e)| e.clone());
            Err(match other {
                Some(o) => compare_traces(e, elem, &o),
                None => {
                    let r: EResult<()> = Err(e);
                    match r.frame(None, || {
                        format!("while checking key of element {}", show_value(elem))
                    }) {
                        Err(e) => e,
                        Ok(()) => unreachable!("an error stays an error"),
                    }
                }
            })
        }
    }
}

/// Compute the transitive closure of attrset.startSet under attrset.operator, each element unique by its key attribute.
fn generic_closure(ev: &mut Evaluator, a: Args) -> EResult<Value> {
    let args = ev.expect_attrs(&a[0]).frame(None, || {
        "while evaluating the first argument passed to builtins.genericClosure".into()
    })?;
    let missing = |name: &str| -> Box<EvalError> {
        let r: EResult<()> = Err(EvalError::missing_attribute(name, None));
        match r.frame(None, || {
            "in the attrset passed as argument to builtins.genericClosure".into()
        }) {
            Err(e) => e,
            Ok(()) => unreachable!("an error stays an error"),
        }
    };
    let start = args
        .get("startSet")
        .cloned()
        .ok_or_else(|| missing("startSet"))?;
    let start = ev.expect_list(&start).frame(None, || {
        "while evaluating the 'startSet' attribute passed as argument to builtins.genericClosure".into()
    })?;
    if start.is_empty() {
        return Ok(Value::List(start));
    }
    let op = args
        .get("operator")
        .cloned()
        .ok_or_else(|| missing("operator"))?;
    let op = ev.expect_function(&op).frame(None, || {
        "while evaluating the 'operator' attribute passed as argument to builtins.genericClosure".into()
    })?;

    let mut queue: Vec<Value> = start.iter().cloned().collect();
    let mut res = Vec::with_capacity(queue.len());
    let mut keys = KeyTracker {
        keys: KeySet::Empty,
        first: None,
    };
    let mut head = 0;
    while head < queue.len() {
        let e = queue[head].clone();
        head += 1;
        let e = ev.force(&e)?;
        let in_elem = || format!("in genericClosure element {}", show_value(&e));
        let set = match &e {
            Value::Attrs(s) => s.clone(),
            other => return Err(ev.type_error("a set", other)).frame(None, in_elem),
        };
        let Some(key) = set.get("key").cloned() else {
            return Err(EvalError::missing_attribute("key", None)).frame(None, in_elem);
        };
        let key = ev.force(&key)?;
        if !keys.insert(ev, &key, &e)? {
            continue;
        }
        res.push(e.clone());
        let step = (|| -> EResult<()> {
            let r = ev.call(&op, e.clone())?;
            let new = ev.expect_list(&r).frame(None, || {
                "while evaluating the return value of the `operator` passed to builtins.genericClosure".into()
            })?;
            for x in new.iter() {
                queue.push(ev.force(x)?);
            }
            Ok(())
        })();
        step.frame(None, || {
            format!(
                "while calling operator on genericClosure element {}",
                show_value(&e)
            )
        })?;
        // Drop consumed entries now and then so the queue does not hold the whole closure twice.
        if head > 4096 && head * 2 > queue.len() {
            queue.drain(..head);
            head = 0;
        }
    }
    Ok(Value::list(res))
}

// ---- lists to sets -----------------------------------------------------------------

/// Construct a set from a list of { name = …; value = …; } sets; of duplicate names, the first takes precedence.
fn list_to_attrs(ev: &mut Evaluator, a: Args) -> EResult<Value> {
    let list = ev.expect_list(&a[0]).frame(None, || {
        "while evaluating the argument passed to builtins.listToAttrs".into()
    })?;
    let mut named: Vec<(Sym, Rc<Attrs>)> = Vec::with_capacity(list.len());
    for x in list.iter() {
        let set = ev.expect_attrs(x).frame(None, || {
            "while evaluating an element of the list passed to builtins.listToAttrs".into()
        })?;
        let Some(name) = set.get("name").cloned() else {
            return Err(EvalError::missing_attribute("name", None))
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
            return Err(EvalError::missing_attribute("value", None))
                .frame(None, || "in a {name=...; value=...;} pair".into());
        };
        out.push((name, v));
    }
    Ok(Value::attrs(Attrs::from_sorted(out)))
}

/// Transpose a list of attribute sets into an attribute set of lists, then apply mapAttrs: f name [ values ].
fn zip_attrs_with(ev: &mut Evaluator, a: Args) -> EResult<Value> {
    let f = arg_function(ev, &a[0], "first", "zipAttrsWith")?;
    let list = arg_list(ev, &a[1], "second", "zipAttrsWith")?;
    // Keyed by symbol number: no string hashing.
    let mut index: HashMap<usize, usize> = HashMap::new();
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
fn cat_attrs(ev: &mut Evaluator, a: Args) -> EResult<Value> {
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
    use crate::eval::testing::{err, fails, ok, ok_all};

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
    fn sort_compares_plain_comparators_itself_with_the_same_results() {
        // Each checked against Nix 2.8.
        let cases = [
            (
                "builtins.sort (a: b: a > b) [ 3 1.5 2 0.5 7 ]",
                "[ 7 3 2 1.5 0.5 ]",
            ),
            (
                "builtins.sort (a: b: b < a) [ \"b\" \"a\" \"c\" ]",
                "[ \"c\" \"b\" \"a\" ]",
            ),
            ("builtins.sort (a: b: b > a) [ 3 1 2 ]", "[ 1 2 3 ]"),
            // Shadowed: `a < a` is always false, so nothing moves.
            ("builtins.sort (a: a: a < a) [ 3 1 2 ]", "[ 3 1 2 ]"),
            (
                "let b = 0; in builtins.sort (a: c: a < b) [ 3 1 2 ]",
                "[ 3 1 2 ]",
            ),
            // Lists are compared by calling the lambda.
            (
                "builtins.sort (a: b: a < b) [ [ 2 ] [ 1 ] ]",
                "[ [ 1 ] [ 2 ] ]",
            ),
            (
                "builtins.sort (a: b: a < b) [ \"b${toString 1}\" \"a\" ]",
                "[ \"a\" \"b1\" ]",
            ),
        ];
        ok_all(&cases);
        // Mixed types still fail inside the lambda, at its `<`.
        let e = err("builtins.sort (a: b: a < b) [ 3 1.5 2 \"x\" ]");
        assert!(e.contains("cannot compare a string with an integer"), "{e}");
        assert!(e.contains("1:22"), "{e}");
        assert_eq!(super::plain_order(&crate::value::Value::Null), None);
    }

    #[test]
    fn sort() {
        assert_eq!(
            ok("builtins.sort builtins.lessThan [ 483 249 526 147 42 77 ]"),
            "[ 42 77 147 249 483 526 ]"
        );
        assert_eq!(
            ok("builtins.sort (x: y: y < x) [ 483 249 526 147 42 77 ]"),
            "[ 526 483 249 147 77 42 ]"
        );
        assert_eq!(
            ok("builtins.sort builtins.lessThan [ \"foo\" \"bar\" \"xyzzy\" \"fnord\" ]"),
            "[ \"bar\" \"fnord\" \"foo\" \"xyzzy\" ]"
        );
        assert_eq!(ok("builtins.sort (a: b: a < b) [ ]"), "[ ]");
        assert_eq!(ok("builtins.sort 1 [ ]"), "[ ]");
        // Stable.
        assert_eq!(
            ok("map (x: x.v) (builtins.sort (a: b: a.k < b.k) [ { k = 1; v = \"a\"; } { k = 0; v = \"b\"; } { k = 1; v = \"c\"; } { k = 0; v = \"d\"; } ])"),
            "[ \"b\" \"d\" \"a\" \"c\" ]"
        );
        // Big inputs, including sorted and reversed ones, agree with a stable reference.
        assert_eq!(
            ok("let xs = builtins.genList (i: (i * 7919) - (i / 3) * 23737) 3000; s = builtins.sort (a: b: a < b) xs; in builtins.length s == 3000 && builtins.all (i: builtins.elemAt s i <= builtins.elemAt s (i + 1)) (builtins.genList (i: i) 2999)"),
            "true"
        );
        assert_eq!(ok("let s = builtins.sort builtins.lessThan (builtins.genList (i: 100 - i) 100); in [ (builtins.head s) (builtins.elemAt s 99) ]"), "[ 1 100 ]");
        // Stability on a big input with many equal keys.
        assert_eq!(
            ok("let xs = builtins.genList (i: { k = builtins.bitAnd i 3; i = i; }) 200; s = builtins.sort (a: b: a.k < b.k) xs; in builtins.all (j: let a = builtins.elemAt s j; b = builtins.elemAt s (j + 1); in a.k < b.k || (a.k == b.k && a.i < b.i)) (builtins.genList (j: j) 199)"),
            "true"
        );
        // Inconsistent comparators still yield a permutation.
        assert_eq!(
            ok("builtins.length (builtins.sort (a: b: true) (builtins.genList (i: i) 100))"),
            "100"
        );
        assert_eq!(
            ok("builtins.sort (a: b: true) [ 1 2 3 ] == [ 1 2 3 ] || true"),
            "true"
        );
        fails(
            "builtins.sort 1 \"foo\"",
            "error: expected a list but found a string: \"foo\"",
        );
        fails(
            "builtins.sort 1 [ \"foo\" ]",
            "error: expected a function but found an integer: 1",
        );
        fails(
            "builtins.sort (_: 1) [ \"foo\" \"bar\" ]",
            "error: attempt to call something which is not a function but an integer",
        );
        fails(
            "builtins.sort (_: _: 1) [ \"foo\" \"bar\" ]",
            "error: expected a Boolean but found an integer: 1",
        );
        fails(
            "builtins.sort builtins.lessThan [ 1 \"a\" ]",
            "error: cannot compare",
        );
        fails("builtins.sort (a: b: throw \"cmp\") [ 1 2 ]", "error: cmp");
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

    #[test]
    fn generic_closure() {
        assert_eq!(
            ok("builtins.genericClosure { startSet = [ { key = 5; } ]; operator = item: [ { key = if (item.key / 2) * 2 == item.key then item.key / 2 else 3 * item.key + 1; } ]; }"),
            "[ { key = 5; } { key = 16; } { key = 8; } { key = 4; } { key = 2; } { key = 1; } ]"
        );
        assert_eq!(ok("builtins.genericClosure { startSet = [ ]; }"), "[ ]");
        assert_eq!(
            ok("map (x: x.key) (builtins.genericClosure { startSet = [ { key = \"a\"; } { key = \"a\"; } ]; operator = x: [ { key = \"b\"; } ]; })"),
            "[ \"a\" \"b\" ]"
        );
        // Mixed ints and floats, and lists as keys.
        assert_eq!(
            ok("map (x: x.key) (builtins.genericClosure { startSet = [ { key = 1; } { key = 1.0; } { key = 2.5; } ]; operator = x: [ ]; })"),
            "[ 1 2.5 ]"
        );
        assert_eq!(
            ok("map (x: x.key) (builtins.genericClosure { startSet = [ { key = [ 1 2 ]; } { key = [ 1 ]; } { key = [ 1 2 ]; } ]; operator = x: [ ]; })"),
            "[ [ 1 2 ] [ 1 ] ]"
        );
        assert_eq!(
            ok("builtins.length (builtins.genericClosure { startSet = [ { key = 0; } ]; operator = x: if x.key < 10000 then [ { key = x.key + 1; } ] else [ ]; })"),
            "10001"
        );
        fails(
            "builtins.genericClosure { startSet = [ { nokey = 1; } ]; operator = x: [ ]; }",
            "error: attribute 'key' missing",
        );
        fails(
            "builtins.genericClosure { startSet = [ \"x\" ]; operator = x: [ ]; }",
            "error: expected a set but found a string: \"x\"",
        );
        fails(
            "builtins.genericClosure { startSet = [ { key = 1; } { key = \"string\"; } ]; operator = x: [ ]; }",
            "error: cannot compare a string with an integer; values are \"string\" and 1",
        );
        fails(
            "builtins.genericClosure { startSet = [ { key = { }; } { key = { }; } ]; operator = x: [ ]; }",
            "values of that type are incomparable",
        );
        fails(
            "builtins.genericClosure { startSet = [ { key = 1; } ]; }",
            "error: attribute 'operator' missing",
        );
        fails(
            "builtins.genericClosure { operator = x: [ ]; }",
            "error: attribute 'startSet' missing",
        );
        fails(
            "builtins.genericClosure \"x\"",
            "error: expected a set but found a string: \"x\"",
        );
        fails(
            "builtins.genericClosure { startSet = [ { key = 1; } ]; operator = \"f\"; }",
            "error: expected a function but found a string: \"f\"",
        );
        fails(
            "builtins.genericClosure { startSet = [ { key = 1; } ]; operator = x: \"l\"; }",
            "error: expected a list but found a string: \"l\"",
        );
        fails(
            "builtins.genericClosure { startSet = \"l\"; operator = x: [ ]; }",
            "error: expected a list but found a string: \"l\"",
        );
    }

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
