//! Primops: arithmetic, bitwise operations, ordering and rounding.
//!
//! Owns `add`, `sub`, `mul`, `div`, `bitAnd`, `bitOr`, `bitXor`, `lessThan`,
//! `ceil` and `floor`. The arithmetic and the ordering are the evaluator's
//! (`Evaluator::arith`, `Evaluator::less_than` in `eval/ops.rs`), which its
//! operators use too, so `a - b` and `builtins.sub a b` cannot disagree. It
//! must not implement container algorithms.

use super::op;
use crate::eval::{EResult, ErrorExt, ErrorKind, EvalError, Evaluator, RResult};
use crate::syntax::ast::BinaryOp;
use crate::value::{print, Args, PrimOp, Value};

pub(crate) static BUILTINS: &[PrimOp] = &[
    op("add", 2, add).doc("e1 e2", "Return the sum of the numbers e1 and e2."),
    op("sub", 2, sub).doc("e1 e2", "Return the difference between the numbers e1 and e2."),
    op("mul", 2, mul).doc("e1 e2", "Return the product of the numbers e1 and e2."),
    op("div", 2, div).doc("e1 e2", "Return the quotient of the numbers e1 and e2."),
    op("bitAnd", 2, bit_and).doc("e1 e2", "Return the bitwise AND of the integers e1 and e2."),
    op("bitOr", 2, bit_or).doc("e1 e2", "Return the bitwise OR of the integers e1 and e2."),
    op("bitXor", 2, bit_xor).doc("e1 e2", "Return the bitwise XOR of the integers e1 and e2."),
    op("lessThan", 2, less_than_op).doc(
        "e1 e2",
        "Return true if the value e1 is less than the value e2, and false otherwise (numbers, strings, paths or lists).",
    ),
    op("ceil", 1, ceil).doc(
        "number",
        "Round and convert number to the next higher integer, if possible.",
    ),
    op("floor", 1, floor).doc(
        "number",
        "Round and convert number to the next lower integer, if possible.",
    ),
];

/// Return true if the value e1 is less than the value e2, and false otherwise (numbers, strings, paths or lists).
fn less_than_op(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    ev.less_than(&a[0], &a[1]).map(Value::bool)
}

/// Return the sum of the numbers e1 and e2.
fn add(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    ev.arith(BinaryOp::Add, &a[0], &a[1])
}

/// Return the difference between the numbers e1 and e2.
fn sub(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    ev.arith(BinaryOp::Sub, &a[0], &a[1])
}

/// Return the product of the numbers e1 and e2.
fn mul(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    ev.arith(BinaryOp::Mul, &a[0], &a[1])
}

/// Return the quotient of the numbers e1 and e2.
fn div(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    ev.arith(BinaryOp::Div, &a[0], &a[1])
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

/// Return the bitwise AND of the integers e1 and e2.
fn bit_and(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    Ok(bit_op(ev, &a, "bitAnd", |x, y| x & y)?)
}

/// Return the bitwise OR of the integers e1 and e2.
fn bit_or(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    Ok(bit_op(ev, &a, "bitOr", |x, y| x | y)?)
}

/// Return the bitwise XOR of the integers e1 and e2.
fn bit_xor(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    Ok(bit_op(ev, &a, "bitXor", |x, y| x ^ y)?)
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

/// Round and convert number to the next higher integer, if possible.
fn ceil(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    Ok(round(ev, &a, "ceil", f64::ceil)?)
}

/// Round and convert number to the next lower integer, if possible.
fn floor(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    Ok(round(ev, &a, "floor", f64::floor)?)
}

#[cfg(test)]
mod tests {
    use crate::eval::testing::{fails, ok};

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
