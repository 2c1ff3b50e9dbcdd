//! `builtins.sort`: a stable merge sort whose comparisons are the user's.
//!
//! Owns the comparison (`lessThan` called directly; `a: b: a < b` and its mirror
//! images compared without entering the lambda when both elements are numbers or
//! both strings; anything else called) and the merge sort of an index
//! permutation: every step only moves indices, so an inconsistent comparator
//! still yields a permutation, and a comparator's error is propagated. It must
//! not force anything but the elements (Nix forces every one before sorting) and
//! the comparator's results.

use super::{arg_function, arg_list};
use crate::eval::{EResult, ErrorExt, Evaluator, RResult};
use crate::value::{Args, Value};

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
    fn less(&mut self, a: usize, b: usize) -> RResult<bool> {
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
        // A Boolean is not dropped through a call (`Value::into_bool`).
        let r = match self.ev.call2(&self.f, x.clone(), y.clone())?.into_bool() {
            Ok(b) => return Ok(b),
            Err(r) => r,
        };
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
pub(super) fn sort(ev: &mut Evaluator, a: Args) -> RResult<Value> {
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

#[cfg(test)]
mod tests {
    use crate::eval::testing::{err, fails, ok, ok_all};

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
}
