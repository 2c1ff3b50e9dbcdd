//! Dispatch of a compound IR node to its evaluation: one function per kind
//! of node ([`Ir`]'s variants but constants and variables, which
//! [`Evaluator::eval`] reads inline), called through [`HANDLERS`], a table
//! indexed by the node's tag.
//!
//! Why a table and not one `match`: `eval` is inlined wherever something is
//! evaluated, so the indirect call through the table sits at each of those
//! places, and the processor predicts each one from its own history (the
//! operand of a comparison is mostly a selection, the body of a lambda mostly
//! a call, …), as it predicts each virtual call of Nix's `Expr::eval`. A single
//! `match` is a single jump for every node evaluated anywhere, which the
//! predictor misses whenever the kind changes. Each handler is also a small
//! function with a small frame, where the `match` was one 30 KB function that
//! saved every register and reserved half a kilobyte of stack for its largest
//! arm at every node.
//!
//! This module must not evaluate anything itself: each handler is the arm the
//! `match` had, calling the evaluator's operations in `attrs.rs`, `call.rs`
//! and `ops.rs`.

use super::attrs;
use super::ir::*;
use super::raised::{raise, RResult};
use super::{ast_sub, ErrorExt, EvalError, Evaluator};
use crate::value::{Closure, Value};
use std::rc::Rc;

/// The evaluation of one kind of node: `ir` is always of that kind.
pub(super) type Handler = fn(&mut Evaluator, &Ir, &Env) -> RResult<Value>;

/// The handler of each kind of node, at the index [`tag`] gives it.
pub(super) static HANDLERS: [Handler; 20] = [
    plain,       // Const
    plain,       // Var
    with_var,    // WithVar
    str_interp,  // Str
    path_interp, // Path
    list,        // List
    attrs_lit,   // Attrs
    let_in,      // Let
    lambda,      // Lambda
    apply,       // Apply
    call,        // Call
    select,      // Select
    select_var,  // SelectVar
    has_attr,    // HasAttr
    with,        // With
    assert,      // Assert
    if_,         // If
    not,         // Not
    neg,         // Neg
    binary,      // Binary
];

/// The index of `ir`'s handler in [`HANDLERS`]. Compiles to a load of the
/// tag byte ([`Ir`] is `repr(u8)`, its variants numbered in this order).
#[inline(always)]
pub(super) fn tag(ir: &Ir) -> usize {
    match ir {
        Ir::Const(_) => 0,
        Ir::Var { .. } => 1,
        Ir::WithVar { .. } => 2,
        Ir::Str { .. } => 3,
        Ir::Path { .. } => 4,
        Ir::List(_) => 5,
        Ir::Attrs(_) => 6,
        Ir::Let { .. } => 7,
        Ir::Lambda(_) => 8,
        Ir::Apply { .. } => 9,
        Ir::Call { .. } => 10,
        Ir::Select { .. } => 11,
        Ir::SelectVar { .. } => 12,
        Ir::HasAttr { .. } => 13,
        Ir::With { .. } => 14,
        Ir::Assert { .. } => 15,
        Ir::If { .. } => 16,
        Ir::Not(..) => 17,
        Ir::Neg(..) => 18,
        Ir::Binary { .. } => 19,
    }
}

/// A handler given a node of another kind: [`HANDLERS`] and [`tag`] disagree.
#[cold]
#[inline(never)]
fn wrong_kind() -> ! {
    unreachable!("IR dispatch table out of step with the node's tag")
}

/// Constants and variables, which `eval` reads itself; here for completeness.
fn plain(ev: &mut Evaluator, ir: &Ir, env: &Env) -> RResult<Value> {
    ev.eval(ir, env)
}

fn select_var(ev: &mut Evaluator, ir: &Ir, env: &Env) -> RResult<Value> {
    let Ir::SelectVar {
        up,
        idx,
        name,
        pos,
        general,
    } = ir
    else {
        wrong_kind()
    };
    match attrs::select_var(env, *up, *idx, *name) {
        Some(t @ Value::Thunk(_)) => ev.force_attr(t, *name, *pos),
        Some(v) => Ok(v),
        None => match &**general {
            Ir::Select {
                expr,
                path,
                default,
                pos,
            } => ev.eval_select_general(expr, path, default.as_ref(), env, *pos),
            other => ev.eval(other, env),
        },
    }
}

fn with_var(ev: &mut Evaluator, ir: &Ir, env: &Env) -> RResult<Value> {
    let Ir::WithVar { name, withs, pos } = ir else {
        wrong_kind()
    };
    let v = ev.lookup_with(name, withs, env, *pos)?;
    ev.force_owned(v)
}

fn str_interp(ev: &mut Evaluator, ir: &Ir, env: &Env) -> RResult<Value> {
    let Ir::Str { parts, pos } = ir else {
        wrong_kind()
    };
    ev.eval_interp(parts, env, *pos)
}

fn path_interp(ev: &mut Evaluator, ir: &Ir, env: &Env) -> RResult<Value> {
    let Ir::Path { parts, pos } = ir else {
        wrong_kind()
    };
    ev.eval_path_interp(parts, env, *pos)
}

fn list(ev: &mut Evaluator, ir: &Ir, env: &Env) -> RResult<Value> {
    let Ir::List(items) = ir else { wrong_kind() };
    let v: Vec<Value> = items.iter().map(|i| ev.delay(i, env)).collect();
    Ok(Value::List(Rc::new(v)))
}

fn attrs_lit(ev: &mut Evaluator, ir: &Ir, env: &Env) -> RResult<Value> {
    let Ir::Attrs(def) = ir else { wrong_kind() };
    ev.eval_attrs(def, env).map(Value::Attrs)
}

fn let_in(ev: &mut Evaluator, ir: &Ir, env: &Env) -> RResult<Value> {
    let Ir::Let { def, body, now } = ir else {
        wrong_kind()
    };
    let new_env = ev.let_scope(def, env, *now);
    ev.eval(body, &new_env)
}

fn lambda(_: &mut Evaluator, ir: &Ir, env: &Env) -> RResult<Value> {
    let Ir::Lambda(def) = ir else { wrong_kind() };
    Ok(Value::Lambda(Rc::new(Closure {
        def: def.clone(),
        env: env.clone(),
    })))
}

fn apply(ev: &mut Evaluator, ir: &Ir, env: &Env) -> RResult<Value> {
    let Ir::Apply { func, arg, pos } = ir else {
        wrong_kind()
    };
    let f = ev.eval(func, env)?;
    let a = ev.delay(arg, env);
    ev.call_at(&f, a, *pos)
}

fn call(ev: &mut Evaluator, ir: &Ir, env: &Env) -> RResult<Value> {
    let Ir::Call { func, args, pos } = ir else {
        wrong_kind()
    };
    let f = ev.eval(func, env)?;
    ev.apply_spine(f, args, env, *pos)
}

fn select(ev: &mut Evaluator, ir: &Ir, env: &Env) -> RResult<Value> {
    let Ir::Select {
        expr,
        path,
        default,
        pos,
    } = ir
    else {
        wrong_kind()
    };
    ev.eval_select(expr, path, default.as_ref(), env, *pos)
}

fn has_attr(ev: &mut Evaluator, ir: &Ir, env: &Env) -> RResult<Value> {
    let Ir::HasAttr { expr, path, pos } = ir else {
        wrong_kind()
    };
    ev.eval_has_attr(expr, path, env, *pos).map(Value::bool)
}

fn with(ev: &mut Evaluator, ir: &Ir, env: &Env) -> RResult<Value> {
    let Ir::With { env: e, body } = ir else {
        wrong_kind()
    };
    let attrs = ev.delay(e, env);
    let new_env = Env::new_with(env, attrs);
    ev.eval(body, &new_env)
}

fn assert(ev: &mut Evaluator, ir: &Ir, env: &Env) -> RResult<Value> {
    let Ir::Assert { cond, body, pos } = ir else {
        wrong_kind()
    };
    if ev.eval_bool(cond, env, *pos)? {
        ev.eval(body, env)
    } else {
        let text = ev.source_text(*pos);
        raise(EvalError::assertion_failed(text, *pos))
    }
}

fn if_(ev: &mut Evaluator, ir: &Ir, env: &Env) -> RResult<Value> {
    let Ir::If {
        cond,
        then,
        else_,
        pos,
    } = ir
    else {
        wrong_kind()
    };
    if ev.eval_bool(cond, env, *pos)? {
        ev.eval(then, env)
    } else {
        ev.eval(else_, env)
    }
}

fn not(ev: &mut Evaluator, ir: &Ir, env: &Env) -> RResult<Value> {
    let Ir::Not(e, pos) = ir else { wrong_kind() };
    Ok(Value::bool(!ev.eval_bool(e, env, *pos)?))
}

fn neg(ev: &mut Evaluator, ir: &Ir, env: &Env) -> RResult<Value> {
    let Ir::Neg(e, pos) = ir else { wrong_kind() };
    let v = ev.eval(e, env)?;
    ev.arith(ast_sub(), &Value::Int(0), &v).at_pos(*pos)
}

fn binary(ev: &mut Evaluator, ir: &Ir, env: &Env) -> RResult<Value> {
    let Ir::Binary { op, lhs, rhs, pos } = ir else {
        wrong_kind()
    };
    ev.eval_binary(*op, lhs, rhs, env, *pos)
}

#[cfg(test)]
mod tests {
    /// Every kind of node reaches its own handler: an expression evaluating
    /// each kind (a handler given another kind panics).
    #[test]
    fn each_kind_has_its_handler() {
        use crate::eval::testing::ok_all;
        ok_all(&[
            ("with { a = 1; }; a", "1"),
            ("let x = \"b\"; in \"a${x}\"", "\"ab\""),
            ("let x = 1; in [ x 2 ]", "[ 1 2 ]"),
            ("let x = 1; in { a = x; }", "{ a = 1; }"),
            ("let f = x: x; in f 1", "1"),
            ("let f = x: y: x + y; in f 1 2", "3"),
            ("let s = { a.b = 1; }; in s.a.b", "1"),
            ("let s = { a = 1; }; in s.a", "1"),
            ("let s = { a = 1; }; in s ? a", "true"),
            ("let x = true; in assert x; 1", "1"),
            ("let x = true; in if x then 1 else 2", "1"),
            ("let x = true; in !x", "false"),
            ("let x = 1; in -x", "-1"),
            ("let x = 1; in x * 3", "3"),
            ("let x = \"b\"; in baseNameOf ./a/${x}", "\"b\""),
        ]);
    }
}
