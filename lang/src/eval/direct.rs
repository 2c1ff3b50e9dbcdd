//! Direct evaluation of small lambda bodies that cannot fail once their
//! inputs are known: a comparator `a: b: a.k < b.k || (a.k == b.k && a.v < b.v)`,
//! a predicate `d: d.priority == best`, an accessor `x: x.defined`, an
//! arithmetic helper `a: b: a - (a / b) * b`.
//!
//! Owns two things: the compile-time test of whether a body is made only of
//! nodes this module evaluates ([`is_direct`], recorded as
//! `LambdaDef::direct`), and the evaluation itself ([`eval`]), which a call
//! supplying the whole curried chain tries before it makes the chain's scope
//! (`Evaluator::apply_args`, `call2`, `call_lambda`). The evaluation reads the
//! arguments where the caller holds them and the closure's scopes in place;
//! it makes no scope, no thunk and no error frame, and it passes through no
//! dispatch table.
//!
//! It must not force, allocate a scope, or raise an error: whenever an input
//! is not already evaluated (a thunk not yet forced), or an operation could
//! fail or needs the evaluator (a type mismatch, an overflow, a division by
//! zero, comparing lists or sets), it answers `None` and the caller runs the
//! call the ordinary way, from the start. Nothing it did is observable, so
//! that second run behaves exactly as if it had never been tried; when it
//! answers, the answer is the one the ordinary evaluation gives (its
//! operations are `ops.rs`'s on the same types, compared in
//! `direct_evaluation_agrees_with_the_evaluator`).
//!
//! Nix has no equivalent: every call makes an environment. A lambda whose
//! body makes no closure, thunk or call cannot have its scope captured,
//! which is what makes skipping it invisible.

use super::attrs::evaluated_set;
use super::forced;
use super::ir::{Env, Ir};
use super::ops::{equal_scalars, int_fast_path, less_scalars};
use crate::syntax::ast::BinaryOp;
use crate::value::Value;

/// Bodies larger than this many nodes are not tried: the walk before an
/// input turns out unevaluated is wasted, and small bodies are the ones
/// whose scope costs as much as their evaluation.
const MAX_NODES: u32 = 32;

/// Whether [`eval`] can evaluate `body`: constants, variables, selections
/// of a static name from a variable, `!`, `if`, and the operators `== != <
/// <= > >= && || -> + - * /`, in at most [`MAX_NODES`] nodes. Anything else
/// (a call, a lambda, a set or list literal, `with`, interpolation, `?`,
/// `or`, a `let`, `++`, `//`) makes the body an ordinary one.
pub(super) fn is_direct(body: &Ir) -> bool {
    let mut budget = MAX_NODES;
    fits(body, &mut budget)
}

fn fits(ir: &Ir, budget: &mut u32) -> bool {
    if *budget == 0 {
        return false;
    }
    *budget -= 1;
    match ir {
        Ir::Const(_) | Ir::Var { .. } | Ir::SelectVar { .. } => true,
        Ir::Not(e, _) => fits(e, budget),
        Ir::If {
            cond, then, else_, ..
        } => fits(cond, budget) && fits(then, budget) && fits(else_, budget),
        Ir::Binary { op, lhs, rhs, .. } => {
            use BinaryOp::*;
            matches!(
                op,
                Eq | NotEq | Lt | Le | Gt | Ge | And | Or | Impl | Add | Sub | Mul | Div
            ) && fits(lhs, budget)
                && fits(rhs, budget)
        }
        _ => false,
    }
}

/// Where a direct body reads its variables: the chain's arguments (slot `i`
/// of the scope the call would make, `up` 0) and the closure's scope
/// (`up` 1 and beyond).
pub(super) struct Inputs<'a> {
    pub args: &'a [Value],
    pub parent: &'a Env,
}

impl Inputs<'_> {
    #[inline(always)]
    fn slot<R>(&self, up: u32, idx: u32, f: impl FnOnce(&Value) -> Option<R>) -> Option<R> {
        if up == 0 {
            return f(self.args.get(idx as usize)?);
        }
        // A scope still being filled may lack the slot, or be borrowed for
        // filling: neither is read here.
        let scope = self.parent.ancestor(up - 1);
        let slots = scope.0.slots.try_borrow().ok()?;
        f(slots.get(idx as usize)?)
    }
}

/// The value of the direct body `ir` (see [`is_direct`]) for `inputs`, in
/// weak head normal form; `None` when an input is not evaluated yet or the
/// ordinary evaluation could fail, add a frame or need the evaluator.
pub(super) fn eval(ir: &Ir, inputs: &Inputs<'_>) -> Option<Value> {
    match ir {
        Ir::Binary { op, lhs, rhs, .. } => match op {
            BinaryOp::And | BinaryOp::Or | BinaryOp::Impl => Some(Value::bool(test(ir, inputs)?)),
            _ => {
                let l = operand(lhs, inputs)?;
                let r = operand(rhs, inputs)?;
                let v = strict(*op, &l, &r);
                l.discard();
                r.discard();
                v
            }
        },
        Ir::Not(..) => Some(Value::bool(test(ir, inputs)?)),
        Ir::If {
            cond, then, else_, ..
        } => {
            if test(cond, inputs)? {
                eval(then, inputs)
            } else {
                eval(else_, inputs)
            }
        }
        _ => leaf(ir, inputs),
    }
}

/// An operand: a leaf read where it is, anything else evaluated.
#[inline(always)]
fn operand(ir: &Ir, inputs: &Inputs<'_>) -> Option<Value> {
    match ir {
        Ir::Const(_) | Ir::Var { .. } | Ir::SelectVar { .. } => leaf(ir, inputs),
        _ => eval(ir, inputs),
    }
}

/// A constant, a variable or a selection from a variable, when evaluated.
#[inline(always)]
fn leaf(ir: &Ir, inputs: &Inputs<'_>) -> Option<Value> {
    match ir {
        Ir::Const(v) => forced(v),
        Ir::Var { up, idx, .. } => inputs.slot(*up, *idx, forced),
        Ir::SelectVar { up, idx, name, .. } => {
            inputs.slot(*up, *idx, |v| forced(evaluated_set(v)?.get(*name)?))
        }
        _ => None,
    }
}

/// A condition or an operand of `&&`, `||`, `->`, `!`: a Boolean, else `None`
/// (the ordinary evaluation raises the type error). Comparisons are
/// answered without making their Boolean value.
fn test(ir: &Ir, inputs: &Inputs<'_>) -> Option<bool> {
    match ir {
        Ir::Binary { op, lhs, rhs, .. } => {
            use BinaryOp::*;
            match op {
                And => Some(test(lhs, inputs)? && test(rhs, inputs)?),
                Or => Some(test(lhs, inputs)? || test(rhs, inputs)?),
                Impl => Some(!test(lhs, inputs)? || test(rhs, inputs)?),
                Eq | NotEq | Lt | Le | Gt | Ge => {
                    let l = operand(lhs, inputs)?;
                    let r = operand(rhs, inputs)?;
                    let b = compare(*op, &l, &r);
                    l.discard();
                    r.discard();
                    b
                }
                // Arithmetic is never a Boolean: a type error.
                _ => None,
            }
        }
        Ir::Not(e, _) => Some(!test(e, inputs)?),
        _ => eval(ir, inputs)?.into_bool().ok(),
    }
}

/// A comparison operator (`== != < <= > >=`) on two evaluated operands,
/// where it cannot fail.
#[inline(always)]
fn compare(op: BinaryOp, l: &Value, r: &Value) -> Option<bool> {
    use BinaryOp::*;
    if let (Value::Int(a), Value::Int(b)) = (l, r) {
        return Some(match op {
            Eq => a == b,
            NotEq => a != b,
            Lt => a < b,
            Le => a <= b,
            Gt => a > b,
            _ => a >= b,
        });
    }
    match op {
        Eq => equal_scalars(l, r),
        NotEq => equal_scalars(l, r).map(|e| !e),
        // As `binary_values` desugars them: `a > b` is `b < a`, `a <= b`
        // is `!(b < a)`.
        Lt => less_scalars(l, r),
        Le => less_scalars(r, l).map(|x| !x),
        Gt => less_scalars(r, l),
        _ => less_scalars(l, r).map(|x| !x),
    }
}

/// A strict operator on two evaluated operands, where it cannot fail: what
/// `Evaluator::binary_values` gives for them, else `None`.
fn strict(op: BinaryOp, l: &Value, r: &Value) -> Option<Value> {
    use BinaryOp::*;
    if let (Value::Int(a), Value::Int(b)) = (l, r) {
        // `None` for overflow and division by zero, which are errors.
        return int_fast_path(op, *a, *b);
    }
    match op {
        Eq | NotEq | Lt | Le | Gt | Ge => compare(op, l, r).map(Value::bool),
        // Floats, strings (whose context `+` merges) and paths: the
        // evaluator's.
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use crate::eval::testing::{err, ok};

    /// Each expression is evaluated twice in one evaluation: first with
    /// inputs not yet forced (the ordinary path, which forces them), then
    /// again with them evaluated (the direct path); both must agree with
    /// the value Nix 2.8 gives, written after it.
    #[test]
    fn direct_evaluation_agrees_with_the_evaluator() {
        let cases = [
            // Comparators: ints, strings, ties broken by a second key.
            ("let f = a: b: a.k < b.k || (a.k == b.k && a.v < b.v); x = { k = 1; v = 2; }; y = { k = 1; v = 3; }; in [ (f x y) (f x y) (f y x) (f y x) ]", "[ true true false false ]"),
            ("let f = a: b: a.n < b.n; x = { n = \"abc\"; }; y = { n = \"abd\"; }; in [ (f x y) (f x y) (f y x) ]", "[ true true false ]"),
            ("let f = a: b: a <= b; in [ (f 1 1) (f 2 1) (f 1.5 2) (f \"a\" \"a\") ]", "[ true false true true ]"),
            ("let f = a: b: a >= b; in [ (f 1 1) (f 2 1) (f 1.5 2) (f \"b\" \"a\") ]", "[ true true false true ]"),
            ("let f = a: b: a > b; in [ (f 1 1.0) (f 2 1) (f 1.5 2) ]", "[ false true false ]"),
            // Equality across types: numbers mix, everything else differs.
            ("let f = a: b: a == b; in [ (f 1 1.0) (f 1 \"1\") (f null null) (f true true) (f null false) (f (x: x) (x: x)) (f ./a ./a) ]", "[ true false true true false false true ]"),
            ("let f = a: b: a != b; in [ (f 1 2) (f \"a\" \"a\") (f null 0) ]", "[ true false true ]"),
            // Arithmetic on integers, the helper `mod`.
            ("let mod = a: b: a - (a / b) * b; in [ (mod 17 5) (mod 17 5) (mod (-17) 5) (mod 100 1) ]", "[ 2 2 -2 0 ]"),
            // Logic, negation, conditionals, implication.
            ("let f = p: q: if p -> q then !p else p && q; in [ (f true true) (f true false) (f false true) (f false false) ]", "[ false false true true ]"),
            // Accessors and variables from the closure's scopes.
            ("let best = 3; f = d: d.priority == best; g = x: x.v; s = { priority = 3; v = [ 1 ]; }; in [ (f s) (f s) (g s) (g s) (f { priority = 4; }) ]", "[ true true [ 1 ] [ 1 ] false ]"),
            ("let k = { a = 1; }; f = x: k.a + x; in [ (f 1) (f 2) ]", "[ 2 3 ]"),
            // Through builtins: sort, filter, foldl'.
            ("builtins.sort (a: b: a.k < b.k) (map (k: { inherit k; }) [ 3 1 2 ])", "[ { k = 1; } { k = 2; } { k = 3; } ]"),
            ("builtins.foldl' (p: d: if d.priority < p then d.priority else p) 9999 [ { priority = 5; } { priority = 2; } ]", "2"),
            ("builtins.filter (x: x > 1) [ 1 2 3 ]", "[ 2 3 ]"),
            // Partial and over-application: a chain's later lambda called
            // alone, a direct result that is a function applied further.
            ("let f = a: b: a < b; g = f 1; in [ (g 2) (g 0) (f 1 2) ]", "[ true false true ]"),
            ("let id = a: a; in [ (id (x: x + 1) 2) (id id id 3) ]", "[ 3 3 ]"),
            ("let f = a: b: c: a + b * c; in [ (f 1 2 3) (f 1 2 3) ((f 1) 2 3) ]", "[ 7 7 7 ]"),
            // Bodies next to direct ones that are not: type predicates,
            // `or`, `?`.
            ("let t = v: if builtins.isAttrs v then v._type or \"\" else \"\"; a = { _type = \"if\"; }; b = { }; in [ (t a) (t a) (t b) (t b) (t 1) (t 1) ]", "[ \"if\" \"if\" \"\" \"\" \"\" \"\" ]"),
            ("let p = f: x: f x; in [ (p builtins.isInt 1) (p builtins.isInt 1) (p builtins.isString 1) (p builtins.isFunction p) (p builtins.isNull null) (p builtins.isList [ ]) ]", "[ true true false true true true ]"),
            ("let f = x: x.a.b or x; s = { a = { b = 1; }; }; t = { a = 2; }; in [ (f s) (f s) (f t) (f t) ]", "[ 1 1 { a = 2; } { a = 2; } ]"),
            ("let f = x: [ (x ? a) (x ? a.b) (x ? c) ]; s = { a = { b = 1; }; }; in [ (f s) (f s) (f 1) (f { a = 1; }) ]", "[ [ true true false ] [ true true false ] [ false false false ] [ true false false ] ]"),
            ("let f = x: x ? a.b; s = { a = { b = 1; }; }; g = x: x.a.b; in [ (f s) (f s) (f 1) (f { a = 1; }) (g s) (g s) ]", "[ true true false false 1 1 ]"),
            ("let f = x: x.a or 5; in [ (f 1) (f { }) (f { a = null; }) ]", "[ 5 5 null ]"),
            // A function that is not a type predicate is called.
            ("let p = f: x: f x; in [ (p (x: x + 1) 1) (p builtins.typeOf 1) ]", "[ 2 \"int\" ]"),
        ];
        for (expr, want) in cases {
            assert_eq!(ok(expr), want, "{expr}");
        }
    }

    /// Where the direct evaluation must give up, the ordinary one raises
    /// its error with the message, position and frames the same body gives
    /// when it is not direct (`assert true;` in front of it: no frame, no
    /// value changed), with its inputs forced first or not.
    #[test]
    fn failures_are_the_evaluators() {
        use crate::eval::{EvalError, EvalSettings, Evaluator};
        use crate::store::MemStore;
        use std::path::Path;
        use std::rc::Rc;
        let cases = [
            (
                "let f = a: b: BODY; x = 1; y = \"a\"; in builtins.seq x (builtins.seq y (f x y))",
                "a < b",
                "cannot compare an integer with a string",
            ),
            (
                "let f = a: b: BODY; in builtins.sort f [ 1 \"a\" ]",
                "a < b",
                "cannot compare a string with an integer",
            ),
            (
                "let f = a: b: BODY; in f 9223372036854775807 1",
                "a + b",
                "overflow",
            ),
            (
                "let f = a: b: BODY; x = 1; y = 0; in builtins.seq x (builtins.seq y (f x y))",
                "a / b",
                "division by zero",
            ),
            (
                "let f = c: BODY; in f 3",
                "if c then 1 else 2",
                "expected a Boolean but found an integer",
            ),
            (
                "let f = s: BODY; x = { a = 1; }; in builtins.seq x (f x)",
                "s.missing",
                "attribute 'missing' missing",
            ),
            (
                "let f = s: BODY; in builtins.filter f [ { } ]",
                "s.missing",
                "attribute 'missing' missing",
            ),
            (
                "let f = a: BODY; in f null",
                "!a",
                "expected a Boolean but found null",
            ),
            (
                "let f = a: b: BODY; in f [ 1 ] [ \"x\" ]",
                "a < b",
                "cannot compare an integer with a string",
            ),
            (
                "let f = a: b: BODY; in f { k = throw \"first\"; } { k = throw \"second\"; }",
                "a.k < b.k",
                "first",
            ),
            (
                "let f = a: b: BODY; in builtins.foldl' f 0 [ 1 true ]",
                "a + b",
                "cannot add",
            ),
        ];
        for (expr, body, want) in cases {
            let direct = expr.replace("BODY", body);
            let plain = expr.replace("BODY", &format!("assert true; {body}"));
            let mut ev = Evaluator::new(EvalSettings::default(), Rc::new(MemStore::new()));
            let e1 = ev.eval_string(&direct, Path::new("/")).expect_err(&direct);
            let e2 = ev.eval_string(&plain, Path::new("/")).expect_err(&plain);
            assert!(e1.msg.contains(want), "{direct}: {}", e1.msg);
            assert_eq!(e1.msg, e2.msg, "{direct}");
            let at = |e: &EvalError| e.pos.map(|p| ev.source_text(p));
            assert_eq!(at(&e1), at(&e2), "{direct}");
            let frames = |e: &EvalError| e.frames.iter().map(|f| f.msg.clone()).collect::<Vec<_>>();
            assert_eq!(frames(&e1), frames(&e2), "{direct}");
            assert!(
                frames(&e1).iter().any(|f| f.contains("while calling")),
                "{direct}"
            );
        }
        assert!(
            err("let f = a: b: a.k < b.k; in f { k = throw \"first\"; } { }").contains("first")
        );
    }

    fn compiled(src: &str) -> std::rc::Rc<crate::eval::ir::Ir> {
        use crate::eval::{EvalSettings, Evaluator};
        let mut ev = Evaluator::new(
            EvalSettings::default(),
            std::rc::Rc::new(crate::store::MemStore::new()),
        );
        ev.compile_source("t.nix".into(), None, src.into(), std::path::Path::new("/"))
            .unwrap()
    }

    #[test]
    fn which_bodies_are_direct() {
        use crate::eval::ir::Ir;
        let direct = |src: &str| match &*compiled(src) {
            Ir::Lambda(d) => d.direct,
            _ => panic!("{src}: not a lambda"),
        };
        for src in [
            "a: b: a.k < b.k || (a.k == b.k && a.v < b.v)",
            "a: b: a - (a / b) * b",
            "d: d.value",
            "x: x",
            "p: d: if d.priority < p then d.priority else p",
            "a: b: c: !(a -> b) && c != null",
        ] {
            assert!(direct(src), "{src}");
        }
        for src in [
            "x: x + (y: y) 1",
            "x: [ x ]",
            "x: { inherit x; }",
            "x: \"${x}\"",
            "x: x.${x}",
            "v: if builtins.isAttrs v then v._type or \"\" else \"\"",
            "x: x ? a",
            "x: x.a.b",
            "x: x.a or 1",
            "f: x: f x",
            "x: x ? ${x}",
            "x: (x 1).a or 2",
            "f: x: f x x",
            "x: builtins.isAttrs (x 1)",
            "x: x ++ [ ]",
            "x: x // { }",
            "x: let y = x; in y",
            "x: with x; a",
            "{ a }: a",
            "x: assert x; x",
            "x: -x",
            // Past the size limit.
            "x: x + x + x + x + x + x + x + x + x + x + x + x + x + x + x + x + x",
        ] {
            assert!(!direct(src), "{src}");
        }
    }

    /// `eval` answers only when every input it reads is evaluated.
    #[test]
    fn eval_declines_what_is_not_evaluated() {
        use super::{eval, Inputs};
        use crate::eval::ir::{Env, Ir};
        use crate::value::{Attrs, Sym, Thunk, ThunkState, Value};
        let Ir::Lambda(d) = &*compiled("a: b: a.k < b") else {
            panic!()
        };
        let Ir::Lambda(body) = &*d.body else { panic!() };
        let env = Env::new(None, Default::default());
        let set = |k: Value| Value::attrs(Attrs::from_sorted(vec![(Sym::new("k"), k)]));
        let unforced = || Value::Thunk(Thunk::new(ThunkState::Blackhole));
        let forced = |v: Value| {
            let t = Thunk::unfilled();
            t.fill(v);
            Value::Thunk(t)
        };
        let run = |a: Value, b: Value| {
            let args = [a, b];
            eval(
                &body.body,
                &Inputs {
                    args: &args,
                    parent: &env,
                },
            )
            .map(|v| format!("{v:?}"))
        };
        assert_eq!(
            run(set(Value::Int(1)), Value::Int(2)).as_deref(),
            Some("true")
        );
        assert_eq!(
            run(forced(set(forced(Value::Int(3)))), forced(Value::Int(2))).as_deref(),
            Some("false")
        );
        assert_eq!(run(set(unforced()), Value::Int(2)), None);
        assert_eq!(run(unforced(), Value::Int(2)), None);
        assert_eq!(run(set(Value::Int(1)), unforced()), None);
        assert_eq!(run(set(Value::Int(1)), Value::str("x")), None);
        assert_eq!(
            run(Value::attrs(Attrs::from_sorted(vec![])), Value::Int(2)),
            None
        );
        assert_eq!(
            run(set(Value::Int(i64::MAX)), Value::Int(2)).as_deref(),
            Some("false")
        );
    }
}
