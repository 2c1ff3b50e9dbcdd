//! Primops: arithmetic, bitwise operations, ordering and rounding.
//!
//! Owns `add`, `sub`, `mul`, `div`, `bitAnd`, `bitOr`, `bitXor`, `lessThan`,
//! `ceil` and `floor`, plus [`less_than`], Nix's `<` ordering (used by `sort`'s
//! `lessThan` fast path and by `genericClosure`'s key comparison). Integer
//! overflow and division by zero are errors with Nix's wording, never a wrap
//! or a panic. It must not implement container algorithms.

use super::op;
use crate::eval::{EResult, ErrorExt, ErrorKind, EvalError, Evaluator};
use crate::syntax::ast::BinaryOp;
use crate::value::{print, PrimOp, Value};

pub(crate) static BUILTINS: &[PrimOp] = &[
    op("add", 2, add),
    op("sub", 2, sub),
    op("mul", 2, mul),
    op("div", 2, div),
    op("bitAnd", 2, bit_and),
    op("bitOr", 2, bit_or),
    op("bitXor", 2, bit_xor),
    op("lessThan", 2, less_than_op),
    op("ceil", 1, ceil),
    op("floor", 1, floor),
];

/// A value printed for an error message, bounded in length.
pub(crate) fn show_value(v: &Value) -> String {
    let s = print::print_value_shallow(v);
    if s.len() > 200 {
        let t: String = s.chars().take(200).collect();
        format!("{t}…")
    } else {
        s
    }
}

/// Nix's `showType` for a forced value ("an integer", "a string with context",
/// "the built-in function 'map'", …).
pub(crate) fn show_type(v: &Value) -> String {
    match v {
        Value::String(s) if s.has_context() => "a string with context".into(),
        Value::PrimOp(app) if app.args.is_empty() => {
            format!("the built-in function '{}'", app.op.name)
        }
        Value::PrimOp(app) => format!("the partially applied built-in function '{}'", app.op.name),
        other => other.type_().described().into(),
    }
}

/// `a < b` as Nix's `lessThan` defines it: numbers (ints and floats mixed),
/// strings, paths, and lists lexicographically (elements compared with `<` only
/// where they differ by `==`). Anything else is an error.
pub(crate) fn less_than(ev: &mut Evaluator, a: &Value, b: &Value) -> EResult<bool> {
    let a = ev.force(a)?;
    let b = ev.force(b)?;
    match (&a, &b) {
        (Value::Int(x), Value::Int(y)) => Ok(x < y),
        (Value::Float(x), Value::Float(y)) => Ok(x < y),
        (Value::Int(x), Value::Float(y)) => Ok((*x as f64) < *y),
        (Value::Float(x), Value::Int(y)) => Ok(*x < (*y as f64)),
        (Value::String(x), Value::String(y)) => Ok(x.as_str().as_bytes() < y.as_str().as_bytes()),
        (Value::Path(x), Value::Path(y)) => Ok(x.as_os_str() < y.as_os_str()),
        (Value::List(x), Value::List(y)) => {
            let mut i = 0;
            loop {
                if i == y.len() {
                    return Ok(false);
                }
                if i == x.len() {
                    return Ok(true);
                }
                let (p, q) = (&x[i], &y[i]);
                let same = match (p, q) {
                    (Value::Thunk(s), Value::Thunk(t)) if std::rc::Rc::ptr_eq(&s.0, &t.0) => true,
                    _ => ev.equal(p, q)?,
                };
                if !same {
                    return less_than(ev, p, q).frame(None, || "while comparing two list elements".into());
                }
                i += 1;
            }
        }
        _ if std::mem::discriminant(&a) != std::mem::discriminant(&b) => Err(EvalError::new(
            ErrorKind::Eval,
            format!(
                "cannot compare {} with {}; values are {} and {}",
                show_type(&a),
                show_type(&b),
                show_value(&a),
                show_value(&b)
            ),
        )),
        _ => Err(EvalError::new(
            ErrorKind::Eval,
            format!(
                "cannot compare {} with {}; values of that type are incomparable (values are {} and {})",
                show_type(&a),
                show_type(&b),
                show_value(&a),
                show_value(&b)
            ),
        )),
    }
}

fn less_than_op(ev: &mut Evaluator, a: Vec<Value>) -> EResult<Value> {
    less_than(ev, &a[0], &a[1]).map(Value::Bool)
}

#[derive(Clone, Copy)]
enum Arith {
    Add,
    Sub,
    Mul,
}

impl Arith {
    /// (noun for the "while evaluating the … argument of the X" frames, verb, symbol)
    fn words(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Arith::Add => ("addition", "adding", "+"),
            Arith::Sub => ("subtraction", "subtracting", "-"),
            Arith::Mul => ("multiplication", "multiplying", "*"),
        }
    }
}

/// The numeric builtins on two values, as Nix's `-`, `*` and `/` operators
/// (which call `__sub`, `__mul`, `__div`) and `builtins.add` compute them:
/// mixed int/float promotes to float, integer overflow and division by zero are
/// errors with Nix's wording. Other operators are not numeric here.
#[allow(dead_code)] // for the evaluator's operators (re-export from `builtins` to use it)
pub(crate) fn numeric_op(ev: &mut Evaluator, op: BinaryOp, l: &Value, r: &Value) -> EResult<Value> {
    match op {
        BinaryOp::Add => arith(ev, l, r, Arith::Add),
        BinaryOp::Sub => arith(ev, l, r, Arith::Sub),
        BinaryOp::Mul => arith(ev, l, r, Arith::Mul),
        BinaryOp::Div => divide(ev, l, r),
        _ => Err(EvalError::new(ErrorKind::Eval, "not a numeric operator")),
    }
}

fn arith(ev: &mut Evaluator, l: &Value, r: &Value, kind: Arith) -> EResult<Value> {
    let l = ev.force(l)?;
    let r = ev.force(r)?;
    let (noun, verb, sym) = kind.words();
    if matches!(l, Value::Float(_)) || matches!(r, Value::Float(_)) {
        // Nix's own wording for the first operand of a float multiplication.
        let first = if matches!(kind, Arith::Mul) {
            "while evaluating the first of the multiplication".to_string()
        } else {
            format!("while evaluating the first argument of the {noun}")
        };
        let x = ev.expect_number(&l).frame(None, || first)?;
        let y = ev.expect_number(&r).frame(None, || {
            format!("while evaluating the second argument of the {noun}")
        })?;
        return Ok(Value::Float(match kind {
            Arith::Add => x + y,
            Arith::Sub => x - y,
            Arith::Mul => x * y,
        }));
    }
    let x = ev.expect_int(&l).frame(None, || {
        format!("while evaluating the first argument of the {noun}")
    })?;
    let y = ev.expect_int(&r).frame(None, || {
        format!("while evaluating the second argument of the {noun}")
    })?;
    let res = match kind {
        Arith::Add => x.checked_add(y),
        Arith::Sub => x.checked_sub(y),
        Arith::Mul => x.checked_mul(y),
    };
    res.map(Value::Int).ok_or_else(|| {
        EvalError::new(
            ErrorKind::Eval,
            format!("integer overflow in {verb} {x} {sym} {y}"),
        )
    })
}

fn add(ev: &mut Evaluator, a: Vec<Value>) -> EResult<Value> {
    arith(ev, &a[0], &a[1], Arith::Add)
}

fn sub(ev: &mut Evaluator, a: Vec<Value>) -> EResult<Value> {
    arith(ev, &a[0], &a[1], Arith::Sub)
}

fn mul(ev: &mut Evaluator, a: Vec<Value>) -> EResult<Value> {
    arith(ev, &a[0], &a[1], Arith::Mul)
}

fn div(ev: &mut Evaluator, a: Vec<Value>) -> EResult<Value> {
    divide(ev, &a[0], &a[1])
}

fn divide(ev: &mut Evaluator, l: &Value, r: &Value) -> EResult<Value> {
    let l = ev.force(l)?;
    let r = ev.force(r)?;
    let divisor = ev.expect_number(&r).frame(None, || {
        "while evaluating the second operand of the division".into()
    })?;
    if divisor == 0.0 {
        return Err(EvalError::new(ErrorKind::Eval, "division by zero"));
    }
    if matches!(l, Value::Float(_)) || matches!(r, Value::Float(_)) {
        let x = ev.expect_number(&l).frame(None, || {
            "while evaluating the first operand of the division".into()
        })?;
        return Ok(Value::Float(x / divisor));
    }
    let x = ev.expect_int(&l).frame(None, || {
        "while evaluating the first operand of the division".into()
    })?;
    let y = ev.expect_int(&r).frame(None, || {
        "while evaluating the second operand of the division".into()
    })?;
    x.checked_div(y).map(Value::Int).ok_or_else(|| {
        EvalError::new(
            ErrorKind::Eval,
            format!("integer overflow in dividing {x} / {y}"),
        )
    })
}

fn bit_op(ev: &mut Evaluator, a: &[Value], name: &str, f: fn(i64, i64) -> i64) -> EResult<Value> {
    let x = ev.expect_int(&a[0]).frame(None, || {
        format!("while evaluating the first argument passed to builtins.{name}")
    })?;
    let y = ev.expect_int(&a[1]).frame(None, || {
        format!("while evaluating the second argument passed to builtins.{name}")
    })?;
    Ok(Value::Int(f(x, y)))
}

fn bit_and(ev: &mut Evaluator, a: Vec<Value>) -> EResult<Value> {
    bit_op(ev, &a, "bitAnd", |x, y| x & y)
}

fn bit_or(ev: &mut Evaluator, a: Vec<Value>) -> EResult<Value> {
    bit_op(ev, &a, "bitOr", |x, y| x | y)
}

fn bit_xor(ev: &mut Evaluator, a: Vec<Value>) -> EResult<Value> {
    bit_op(ev, &a, "bitXor", |x, y| x ^ y)
}

/// `ceil` / `floor`: a number rounded to an integer; an error when the result
/// does not fit in an i64 (including NaN and infinities).
fn round(ev: &mut Evaluator, a: &[Value], name: &str, f: fn(f64) -> f64) -> EResult<Value> {
    let v = ev.force(&a[0])?;
    let x = ev.expect_number(&v).frame(None, || {
        format!("while evaluating the first argument passed to builtins.{name}")
    })?;
    let r = f(x);
    // -2^63 is exactly representable; the valid range is [-2^63, 2^63).
    const MIN: f64 = i64::MIN as f64;
    let in_range = (MIN..-MIN).contains(&r);
    match v {
        Value::Int(i) => {
            if !in_range {
                return Err(EvalError::new(
                    ErrorKind::Eval,
                    format!(
                        "Due to a bug (see https://github.com/NixOS/nix/issues/12899) the NixInt argument {i} caused undefined behavior in previous Nix versions.\n\tFuture Nix versions might implement the correct behavior."
                    ),
                ));
            }
            let res = r as i64;
            if res != i {
                return Err(EvalError::new(
                    ErrorKind::Eval,
                    format!(
                        "Due to a bug (see https://github.com/NixOS/nix/issues/12899) a loss of precision occurred in previous Nix versions because the NixInt argument {i} was rounded to {res}.\n\tFuture Nix versions might implement the correct behavior."
                    ),
                ));
            }
            Ok(Value::Int(i))
        }
        _ => {
            if !in_range {
                return Err(EvalError::new(
                    ErrorKind::Eval,
                    format!(
                        "NixFloat argument {} is not in the range of NixInt",
                        print::format_float(x)
                    ),
                ));
            }
            Ok(Value::Int(r as i64))
        }
    }
}

fn ceil(ev: &mut Evaluator, a: Vec<Value>) -> EResult<Value> {
    round(ev, &a, "ceil", f64::ceil)
}

fn floor(ev: &mut Evaluator, a: Vec<Value>) -> EResult<Value> {
    round(ev, &a, "floor", f64::floor)
}

#[cfg(test)]
mod tests {
    use crate::eval::testing::{fails, ok};

    /// Asserts evaluation fails and the message contains `msg`.

    #[test]
    fn arithmetic() {
        assert_eq!(ok("[ (builtins.add 2 3) (builtins.add 2.0 2) (builtins.sub 10 7) (builtins.mul 3 4) (builtins.mul 1.5 2) ]"), "[ 5 4 3 12 3 ]");
        assert_eq!(ok("builtins.typeOf (builtins.add 2.0 2)"), "\"float\"");
        assert_eq!(ok("[ (builtins.div 7 2) (builtins.div (-7) 2) (builtins.div 7.0 2) (builtins.div 1 4.0) ]"), "[ 3 -3 3.5 0.25 ]");
        assert_eq!(ok("builtins.sub 0.5 1"), "-0.5");
    }

    #[test]
    fn arithmetic_errors() {
        fails(
            "builtins.add \"foo\" 1",
            "error: expected an integer but found a string: \"foo\"",
        );
        fails(
            "builtins.add 1 \"foo\"",
            "error: expected an integer but found a string: \"foo\"",
        );
        fails(
            "builtins.add 1.0 \"foo\"",
            "error: expected a float but found a string: \"foo\"",
        );
        fails(
            "builtins.mul \"foo\" 1",
            "error: expected an integer but found a string",
        );
        fails(
            "builtins.add 9223372036854775807 1",
            "error: integer overflow in adding 9223372036854775807 + 1",
        );
        fails(
            "builtins.sub (-9223372036854775807) 2",
            "error: integer overflow in subtracting -9223372036854775807 - 2",
        );
        fails(
            "builtins.mul 4294967297 4294967297",
            "error: integer overflow in multiplying 4294967297 * 4294967297",
        );
        fails(
            "builtins.div (builtins.sub (-9223372036854775807) 1) (-1)",
            "error: integer overflow in dividing -9223372036854775808 / -1",
        );
        fails("builtins.div 1 0", "error: division by zero");
        fails("builtins.div 1.0 0.0", "error: division by zero");
        fails("builtins.div \"foo\" 0", "error: division by zero");
        fails(
            "builtins.div \"foo\" 1",
            "error: expected an integer but found a string: \"foo\"",
        );
        fails(
            "builtins.div 1 \"foo\"",
            "error: expected a float but found a string: \"foo\"",
        );
    }

    #[test]
    fn numeric_op_helper() {
        use crate::syntax::ast::BinaryOp;
        use crate::value::Value;
        let store = std::rc::Rc::new(crate::store::MemStore::new());
        let mut ev = crate::eval::Evaluator::new(crate::eval::EvalSettings::default(), store);
        let r = super::numeric_op(&mut ev, BinaryOp::Sub, &Value::Int(10), &Value::Int(7));
        assert!(matches!(r, Ok(Value::Int(3))));
        let r = super::numeric_op(&mut ev, BinaryOp::Div, &Value::Int(7), &Value::Float(2.0));
        assert!(matches!(r, Ok(Value::Float(f)) if f == 3.5));
        let e = super::numeric_op(
            &mut ev,
            BinaryOp::Mul,
            &Value::Int(4294967297),
            &Value::Int(4294967297),
        )
        .err()
        .map(|e| e.msg);
        assert_eq!(
            e.as_deref(),
            Some("integer overflow in multiplying 4294967297 * 4294967297")
        );
        let e = super::numeric_op(&mut ev, BinaryOp::Div, &Value::Int(1), &Value::Int(0))
            .err()
            .map(|e| e.msg);
        assert_eq!(e.as_deref(), Some("division by zero"));
    }

    #[test]
    fn bits() {
        assert_eq!(ok("[ (builtins.bitAnd 12 10) (builtins.bitOr 12 10) (builtins.bitXor 12 10) (builtins.bitAnd (-1) 5) ]"), "[ 8 14 6 5 ]");
        fails(
            "builtins.bitAnd 1.1 2",
            "error: expected an integer but found a float",
        );
        fails(
            "builtins.bitXor 1 2.2",
            "error: expected an integer but found a float",
        );
    }

    #[test]
    fn less_than() {
        assert_eq!(
            ok("with builtins; [ (lessThan 1 2) (lessThan 2 1) (lessThan 1 1.5) (lessThan 1.5 1) (lessThan \"a\" \"b\") (lessThan [ 1 2 ] [ 1 3 ]) (lessThan [ 1 ] [ 1 0 ]) (lessThan [ ] [ ]) (lessThan /a /b) ]"),
            "[ true false true false true true true false true ]"
        );
        // Equal list elements are not compared with `<`.
        assert_eq!(ok("builtins.lessThan [ { } 1 ] [ { } 2 ]"), "true");
        fails(
            "builtins.lessThan 1 \"foo\"",
            "error: cannot compare an integer with a string; values are 1 and \"foo\"",
        );
        fails(
            "builtins.lessThan { } { }",
            "error: cannot compare a set with a set; values of that type are incomparable (values are { } and { })",
        );
        fails(
            "builtins.lessThan [ 1 2 ] [ \"foo\" ]",
            "error: cannot compare an integer with a string; values are 1 and \"foo\"",
        );
        fails(
            "builtins.lessThan true false",
            "values of that type are incomparable",
        );
    }

    #[test]
    fn rounding() {
        assert_eq!(ok("with builtins; [ (floor 23.5) (ceil 23.5) (floor 23) (ceil 23) (floor (-1.5)) (ceil (-1.5)) ]"), "[ 23 24 23 23 -2 -1 ]");
        fails(
            "builtins.ceil \"foo\"",
            "error: expected a float but found a string: \"foo\"",
        );
        fails(
            "builtins.floor 1.0e300",
            "error: NixFloat argument 1e+300 is not in the range of NixInt",
        );
        fails(
            "builtins.floor (1.0e308 * 10)",
            "error: NixFloat argument inf is not in the range of NixInt",
        );
        fails(
            "builtins.ceil 9223372036854775807",
            "caused undefined behavior",
        );
    }
}
