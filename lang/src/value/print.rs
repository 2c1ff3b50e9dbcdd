//! Printing values the way `nix-instantiate --eval` prints them.
//!
//! Owns the textual form of values: `{ a = 1; "b c" = [ 2 3 ]; }`, string
//! escaping, float formatting (C++ `ostream` default, i.e. `%g` with 6 significant
//! digits), `<LAMBDA>`, `<PRIMOP>`, `<PRIMOP-APP>`, `«thunk»` for unevaluated
//! values and `«repeated»` for a list or set already printed on the current path
//! of the output. It never forces anything: callers force first (`--strict`).
//!
//! Also owns the JSON rendering used by `--json` (see [`crate::builtins`] for
//! `toJSON`, which needs the evaluator to coerce).

use std::collections::HashSet;
use std::fmt::Write;

use super::Value;

/// Prints a value; forced thunks show their value, unforced ones `«thunk»`.
pub fn print_value(v: &Value) -> String {
    let mut out = String::new();
    let mut seen = HashSet::new();
    print_into(&mut out, v, &mut seen, None);
    out
}

/// Like [`print_value`], for error messages (same format).
pub fn print_value_shallow(v: &Value) -> String {
    print_value(v)
}

fn print_into(out: &mut String, v: &Value, seen: &mut HashSet<usize>, holder: Option<usize>) {
    stacker::maybe_grow(64 * 1024, 4 * 1024 * 1024, || match v {
        Value::Thunk(t) => match t.value() {
            Some(inner) => print_into(out, &inner, seen, Some(t.ptr())),
            None => out.push_str("«thunk»"),
        },
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if b.get() { "true" } else { "false" }),
        Value::Int(i) => {
            let _ = write!(out, "{i}");
        }
        Value::Float(f) => out.push_str(&format_float(f.get())),
        Value::String(s) => out.push_str(&escape_string(s.as_str())),
        Value::Path(p) => out.push_str(&p.to_string_lossy()),
        Value::Lambda(_) => out.push_str("<LAMBDA>"),
        Value::PrimOp(app) => out.push_str(if app.args.is_empty() {
            "<PRIMOP>"
        } else {
            "<PRIMOP-APP>"
        }),
        Value::List(l) => {
            let key = holder.unwrap_or(std::rc::Rc::as_ptr(l) as *const u8 as usize);
            if !seen.insert(key) {
                out.push_str("«repeated»");
                return;
            }
            if l.is_empty() {
                out.push_str("[ ]");
            } else {
                out.push_str("[ ");
                for x in l.iter() {
                    print_into(out, x, seen, None);
                    out.push(' ');
                }
                out.push(']');
            }
        }
        Value::Attrs(a) => {
            let key = holder.unwrap_or(a.ptr());
            if !seen.insert(key) {
                out.push_str("«repeated»");
                return;
            }
            if a.is_empty() {
                out.push_str("{ }");
            } else {
                out.push_str("{ ");
                for (k, x) in a.iter() {
                    out.push_str(&print_attr_name(k));
                    out.push_str(" = ");
                    print_into(out, x, seen, None);
                    out.push_str("; ");
                }
                out.push('}');
            }
        }
    })
}

/// An attribute name, quoted unless it is a plain identifier.
pub fn print_attr_name(k: &str) -> String {
    if is_plain_ident(k) {
        k.to_string()
    } else {
        escape_string(k)
    }
}

fn is_plain_ident(k: &str) -> bool {
    let mut chars = k.chars();
    let Some(first) = chars.next() else {
        return false;
    };
    if !(first.is_ascii_alphabetic() || first == '_') {
        return false;
    }
    if !chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '\'' | '-')) {
        return false;
    }
    !matches!(
        k,
        "if" | "then" | "else" | "assert" | "with" | "let" | "in" | "rec" | "inherit" | "or"
    )
}

/// A string literal: `"` `\` newline, CR, tab and `${` escaped.
pub fn escape_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '$' if chars.peek() == Some(&'{') => out.push_str("\\$"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Formats a float as C++ `std::ostream << double` does by default (`%g`, 6
/// significant digits): `3.4`, `1e+06`, `1.5e-05`, `0`.
pub fn format_float(f: f64) -> String {
    if f.is_nan() {
        return if f.is_sign_negative() { "-nan" } else { "nan" }.into();
    }
    if f.is_infinite() {
        return if f < 0.0 { "-inf" } else { "inf" }.into();
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0" } else { "0" }.into();
    }
    let sci = format!("{:.5e}", f);
    let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if !(-4..6).contains(&exp) {
        let mant = strip_zeros(mant);
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mant}e{sign}{:02}", exp.abs())
    } else {
        let decimals = (5 - exp).max(0) as usize;
        strip_zeros(&format!("{:.*}", decimals, f)).to_string()
    }
}

fn strip_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_like_cpp() {
        let cases = [
            (3.4, "3.4"),
            (1.0, "1"),
            (1e6, "1e+06"),
            (123456.0, "123456"),
            (1234567.0, "1.23457e+06"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (-2.5, "-2.5"),
            (1.23456789, "1.23457"),
            (0.1 + 0.2, "0.3"),
        ];
        for (f, s) in cases {
            assert_eq!(format_float(f), s, "{f}");
        }
    }

    #[test]
    fn strings_and_names() {
        assert_eq!(escape_string("a\"b\\c\n${x}$y"), r#""a\"b\\c\n\${x}$y""#);
        assert_eq!(print_attr_name("foo-bar'"), "foo-bar'");
        assert_eq!(print_attr_name("a b"), "\"a b\"");
        assert_eq!(print_attr_name("if"), "\"if\"");
        assert_eq!(print_attr_name(""), "\"\"");
    }
}
