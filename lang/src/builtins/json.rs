//! Primops: serialisation formats — `toJSON`, `fromJSON`, `fromTOML`, `toXML`.
//!
//! Owns the conversions between values and JSON (Nix's nlohmann-based output:
//! sorted keys, shortest round-trip floats, `outPath`/`__toString` peeling, paths
//! copied to the store), the JSON parser behind `fromJSON` (nlohmann-style error
//! messages), the TOML reader behind `fromTOML` and the XML writer behind
//! `toXML`. It must not touch the filesystem except through
//! [`Evaluator::copy_path_to_store`].

mod from_toml;
mod parser;
mod to_xml;

use std::fmt::Write as _;

use super::context::reject_context;
use super::op;
use crate::eval::{CoerceMode, EResult, ErrorExt, ErrorKind, EvalError, Evaluator, RResult};
use crate::value::{Args, Context, ContextElem, NixString, PrimOp, Value};

pub(crate) use from_toml::toml_to_value;

pub(crate) static BUILTINS: &[PrimOp] = &[
    op("toJSON", 1, to_json).doc(
        "e",
        "Return a string containing a JSON representation of e; derivations and paths become store paths.",
    ),
    op("fromJSON", 1, from_json).doc("e", "Convert a JSON string to a Nix value."),
    op("fromTOML", 1, from_toml).doc("e", "Convert a TOML string to a Nix value."),
    op("toXML", 1, to_xml::to_xml).doc(
        "e",
        "Return a string containing an XML representation of e.",
    ),
];

// ---- toJSON -------------------------------------------------------------------

/// Return a string containing a JSON representation of e; derivations and paths become store paths.
fn to_json(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let (s, ctx) = value_to_json(ev, &a[0], true)?;
    Ok(Value::String(NixString::with_context(s, ctx)))
}

/// Serialises a value as JSON the way `builtins.toJSON` does (forcing it deeply),
/// returning the text and the union of the string contexts met. With
/// `copy_to_store` false, paths are written as they are instead of being copied
/// (as `__structuredAttrs` needs for some callers).
pub(crate) fn value_to_json(
    ev: &mut Evaluator,
    v: &Value,
    copy_to_store: bool,
) -> EResult<(String, Context)> {
    let mut w = JsonWriter {
        out: String::new(),
        ctx: Context::default(),
        copy_to_store,
    };
    w.write(ev, v, 0)?;
    Ok((w.out, w.ctx))
}

struct JsonWriter {
    out: String,
    ctx: Context,
    copy_to_store: bool,
}

/// Nix's wording for a value that has no JSON form.
pub(crate) fn show_type_for_conversion(v: &Value) -> String {
    match v {
        Value::PrimOp(app) if app.args.is_empty() => {
            format!("the built-in function '{}'", app.op.name)
        }
        Value::PrimOp(app) => format!("the partially applied built-in function '{}'", app.op.name),
        other => other.type_().described().to_string(),
    }
}

fn depth_error(ev: &Evaluator) -> Box<EvalError> {
    EvalError::new(
        ErrorKind::CallDepth {
            limit: ev.settings.max_call_depth,
        },
        "stack overflow; max-call-depth exceeded",
    )
}

impl JsonWriter {
    fn write(&mut self, ev: &mut Evaluator, v: &Value, depth: usize) -> EResult<()> {
        if depth > ev.settings.max_call_depth {
            return Err(depth_error(ev));
        }
        stacker::maybe_grow(64 * 1024, 2 * 1024 * 1024, || {
            self.write_inner(ev, v, depth)
        })
    }

    fn write_inner(&mut self, ev: &mut Evaluator, v: &Value, depth: usize) -> EResult<()> {
        let v = ev.force(v)?;
        match &v {
            Value::Null => self.out.push_str("null"),
            Value::Bool(b) => self.out.push_str(if b.get() { "true" } else { "false" }),
            Value::Int(i) => {
                let _ = write!(self.out, "{i}");
            }
            Value::Float(f) => self.out.push_str(&json_float(f.get())),
            Value::String(s) => {
                self.ctx.extend(s.context());
                json_escape_into(&mut self.out, s.as_str());
            }
            Value::Path(p) => {
                if self.copy_to_store {
                    let sp = ev.copy_path_to_store(p)?;
                    json_escape_into(&mut self.out, &sp);
                    self.ctx.insert(ContextElem::Opaque(sp.into()));
                } else {
                    json_escape_into(&mut self.out, &p.to_string_lossy());
                }
            }
            Value::Attrs(a) => {
                if let Some(f) = a.get("__toString").cloned() {
                    let s = to_string_attr(ev, &f, &v).frame(None, || {
                        "while using the result of the `__toString` attribute".into()
                    })?;
                    self.ctx.extend(s.context());
                    json_escape_into(&mut self.out, s.as_str());
                    return Ok(());
                }
                if let Some(o) = a.get("outPath").cloned() {
                    return self
                        .write(ev, &o, depth + 1)
                        .frame(None, || "while using the `outPath` attribute".into());
                }
                self.out.push('{');
                let mut first = true;
                for (k, x) in a.iter() {
                    if !first {
                        self.out.push(',');
                    }
                    first = false;
                    json_escape_into(&mut self.out, k);
                    self.out.push(':');
                    self.write(ev, x, depth + 1)
                        .frame(None, || format!("while evaluating attribute '{k}'"))?;
                }
                self.out.push('}');
            }
            Value::List(l) => {
                self.out.push('[');
                for (i, x) in l.iter().enumerate() {
                    if i > 0 {
                        self.out.push(',');
                    }
                    self.write(ev, x, depth + 1).frame(None, || {
                        format!("while evaluating list element at index {i}")
                    })?;
                }
                self.out.push(']');
            }
            Value::Lambda(_) | Value::PrimOp(_) | Value::Thunk(_) => {
                return Err(EvalError::new(
                    ErrorKind::Type,
                    format!("cannot convert {} to JSON", show_type_for_conversion(&v)),
                ))
            }
        }
        Ok(())
    }
}

/// Calls a set's `__toString` and checks that it produced something string-like
/// (a string, a path, or a set that itself coerces), as `toJSON` requires.
fn to_string_attr(ev: &mut Evaluator, f: &Value, this: &Value) -> EResult<NixString> {
    let r = ev.call(f, this.clone())?;
    match &r {
        Value::String(s) => Ok(s.clone()),
        Value::Path(p) => Ok(NixString::new(p.to_string_lossy().into_owned())),
        Value::Attrs(a) if a.contains("__toString") || a.contains("outPath") => {
            ev.coerce_to_string(&r, CoerceMode::NoCopy)
        }
        Value::Attrs(_) => Err(EvalError::new(
            ErrorKind::Type,
            format!(
                "`__toString` must return a string, but got a set: {}",
                ev.print_short(&r)
            ),
        )),
        other => Err(EvalError::new(
            ErrorKind::Type,
            format!(
                "`__toString` should return a string, but got {}",
                ev.describe_value(other)
            ),
        )),
    }
}

/// A JSON string literal as nlohmann's `dump()` writes it: UTF-8 kept as is,
/// `\b \f \n \r \t \" \\` short escapes, other control characters `\u00xx`.
pub(crate) fn json_escape_into(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// A float as nlohmann's `dump()` writes it: the shortest digits that round-trip,
/// fixed notation for decimal exponents in (-4, 15], a trailing `.0` on integral
/// values, `null` for NaN and infinities.
pub(crate) fn json_float(f: f64) -> String {
    if !f.is_finite() {
        return "null".into();
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0.0" } else { "0.0" }.into();
    }
    let sci = format!("{:e}", f.abs());
    let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mant.chars().filter(|c| c.is_ascii_digit()).collect();
    let k = digits.len() as i32;
    let n = exp + 1;
    const MIN_EXP: i32 = -4;
    const MAX_EXP: i32 = 15;
    let mut out = String::new();
    if f < 0.0 {
        out.push('-');
    }
    if k <= n && n <= MAX_EXP {
        out.push_str(&digits);
        for _ in 0..(n - k) {
            out.push('0');
        }
        out.push_str(".0");
    } else if 0 < n && n <= MAX_EXP {
        let (a, b) = digits.split_at(n as usize);
        out.push_str(a);
        out.push('.');
        out.push_str(b);
    } else if MIN_EXP < n && n <= 0 {
        out.push_str("0.");
        for _ in 0..(-n) {
            out.push('0');
        }
        out.push_str(&digits);
    } else {
        let (a, b) = digits.split_at(1);
        out.push_str(a);
        if !b.is_empty() {
            out.push('.');
            out.push_str(b);
        }
        out.push('e');
        let e = n - 1;
        out.push(if e < 0 { '-' } else { '+' });
        out.push_str(&format!("{:02}", e.abs()));
    }
    out
}

// ---- fromJSON -----------------------------------------------------------------

/// Convert a JSON string to a Nix value.
fn from_json(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let s = ev.expect_string(&a[0]).frame(None, || {
        "while evaluating the first argument passed to builtins.fromJSON".into()
    })?;
    reject_context(&s)?;
    Ok(parser::parse_json(s.as_str())?)
}

/// The message for a string that contains NUL, which Nix strings cannot hold.
pub(crate) fn null_byte_error(s: &str) -> String {
    format!(
        "input string '{}' cannot be represented as Nix string because it contains null bytes",
        s.replace('\0', "␀")
    )
}

// ---- fromTOML -----------------------------------------------------------------

/// Convert a TOML string to a Nix value.
fn from_toml(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let s = ev.expect_string(&a[0]).frame(None, || {
        "while evaluating the argument passed to builtins.fromTOML".into()
    })?;
    // Timestamps need the `parse-toml-timestamps` experimental feature.
    let timestamps = ev
        .settings
        .experimental_features
        .iter()
        .any(|f| f == "parse-toml-timestamps");
    Ok(toml_to_value(s.as_str(), timestamps)?)
}

#[cfg(test)]
mod tests {
    use crate::eval::testing::{err, ok};

    #[test]
    fn float_format_like_nlohmann() {
        let cases = [
            (1.0, "1.0"),
            (1.44, "1.44"),
            (0.1, "0.1"),
            (-2.5, "-2.5"),
            (100.0, "100.0"),
            (1e14, "100000000000000.0"),
            (1e15, "1e+15"),
            (1e16, "1e+16"),
            (123456789.123, "123456789.123"),
            (1e-4, "0.0001"),
            (1e-5, "1e-05"),
            (1.5e-7, "1.5e-07"),
            (1e300, "1e+300"),
            (5e-324, "5e-324"),
            (1.0 / 3.0, "0.3333333333333333"),
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (f64::NAN, "null"),
            (f64::INFINITY, "null"),
            (1.2345678901234568e20, "1.2345678901234568e+20"),
        ];
        for (f, s) in cases {
            assert_eq!(super::json_float(f), s, "{f}");
        }
    }

    #[test]
    fn to_json_basics() {
        assert_eq!(
            ok(r#"builtins.toJSON { b = [ 1 2.5 true false null ]; a = "x\ny\"z\\"; "é" = { }; }"#),
            r#""{\"a\":\"x\\ny\\\"z\\\\\",\"b\":[1,2.5,true,false,null],\"é\":{}}""#
        );
        assert_eq!(ok(r#"builtins.toJSON 1.0"#), r#""1.0""#);
        assert_eq!(
            ok(r#"builtins.toJSON (builtins.fromJSON "\"\\u0001\\b\\f\\u001f\"")"#),
            r#""\"\\u0001\\b\\f\\u001f\"""#
        );
        assert_eq!(ok(r#"builtins.toJSON [ ]"#), r#""[]""#);
    }

    #[test]
    fn to_json_peeling() {
        assert_eq!(
            ok(r#"builtins.toJSON { outPath = "hello"; }"#),
            r#""\"hello\"""#
        );
        assert_eq!(ok(r#"builtins.toJSON { outPath = 42; }"#), r#""42""#);
        assert_eq!(
            ok(r#"builtins.toJSON { outPath = { a = 1; }; }"#),
            r#""{\"a\":1}""#
        );
        assert_eq!(
            ok(r#"builtins.toJSON { __toString = self: "won"; outPath = abort "no"; }"#),
            r#""\"won\"""#
        );
        assert_eq!(
            ok(r#"builtins.toJSON { __toString = self: { outPath = "deep"; }; }"#),
            r#""\"deep\"""#
        );
        assert_eq!(
            ok(r#"builtins.toJSON { k = { __toString = self: self.a; a = "foo"; }; }"#),
            r#""{\"k\":\"foo\"}""#
        );
    }

    #[test]
    fn to_json_errors() {
        assert!(err("builtins.toJSON (x: x)").contains("cannot convert a function to JSON"));
        assert!(err("builtins.toJSON builtins.map")
            .contains("cannot convert the built-in function 'map' to JSON"));
        assert!(err("builtins.toJSON { __toString = self: 42; }")
            .contains("`__toString` should return a string, but got an integer: 42"));
        assert!(err("builtins.toJSON { __toString = self: { a = 1; }; }")
            .contains("`__toString` must return a string, but got a set: { a = 1; }"));
        assert!(
            err(r#"builtins.toJSON { a.b = [ 1 { c = throw "hah no"; } ]; }"#).contains("hah no")
        );
    }

    /// Runs `f` on a thread with a large stack: dropping a value nested 10^4+
    /// levels deep recurses once per level.
    fn big_stack(f: impl FnOnce() + Send + 'static) {
        std::thread::Builder::new()
            .stack_size(1 << 30)
            .spawn(f)
            .unwrap()
            .join()
            .unwrap();
    }

    #[test]
    fn to_json_depth_limit() {
        big_stack(|| {
            let deep = err("let f = n: if n == 0 then null else { x = f (n - 1); }; in builtins.toJSON (f 30000)");
            assert!(
                deep.contains("stack overflow; max-call-depth exceeded"),
                "{deep}"
            );
            let fine = ok("let f = n: if n == 0 then null else [ (f (n - 1)) ]; in builtins.fromJSON (builtins.toJSON (f 5000)) == f 5000");
            assert_eq!(fine, "true");
        });
    }

    #[test]
    fn to_json_keeps_context() {
        assert_eq!(
            ok(r#"builtins.getContext (builtins.toJSON [ (builtins.toFile "f" "x") ]) != { }"#),
            "true"
        );
        assert_eq!(
            ok(r#"builtins.getContext (builtins.toJSON [ "f" ]) == { }"#),
            "true"
        );
    }

    #[test]
    fn from_json_values() {
        assert_eq!(
            ok(
                r#"builtins.fromJSON ''{"a": [1, -2, 3.5, 1e2, -0, true, false, null], "b": {"c": "d"}, "a": 7}''"#
            ),
            "{ a = 7; b = { c = \"d\"; }; }"
        );
        assert_eq!(
            ok(
                r#"builtins.fromJSON ''[1, -2, 3.5, 1E2, -0, true, false, null, "\u00e9\ud83d\ude00\/"]''"#
            ),
            "[ 1 -2 3.5 100 0 true false null \"é😀/\" ]"
        );
        assert_eq!(
            ok(r#"builtins.fromJSON "9223372036854775807""#),
            "9223372036854775807"
        );
        assert_eq!(
            ok(r#"builtins.fromJSON "-9223372036854775809""#),
            "-9.22337e+18"
        );
        assert_eq!(
            ok(r#"builtins.fromJSON "18446744073709551616""#),
            "1.84467e+19"
        );
        assert_eq!(ok(r#"builtins.fromJSON " [ ] ""#), "[ ]");
        assert_eq!(ok(r#"builtins.fromJSON "[1e-400]""#), "[ 0 ]");
    }

    #[test]
    fn from_json_errors() {
        assert!(
            err(r#"builtins.fromJSON ''{"attr": 18446744073709551615}''"#)
                .contains("unsigned json number 18446744073709551615 outside of Nix integer range")
        );
        assert!(err(r#"builtins.fromJSON ''"a\u0000b"''"#).contains(
            "input string 'a␀b' cannot be represented as Nix string because it contains null bytes"
        ));
        assert!(err(r#"builtins.fromJSON ''{"a\u0000b": 1}''"#).contains("input string 'a␀b'"));
        assert!(err(r#"builtins.fromJSON "{""#).contains(
            "parse error at line 1, column 2: syntax error while parsing object key - unexpected end of input; expected string literal"
        ));
        assert!(err(r#"builtins.fromJSON "[1,]""#).contains(
            "parse error at line 1, column 4: syntax error while parsing value - unexpected ']'; expected '[', '{', or a literal"
        ));
        assert!(err(r#"builtins.fromJSON "tru""#).contains(
            "column 4: syntax error while parsing value - invalid literal; last read: 'tru'"
        ));
        assert!(err(r#"builtins.fromJSON "1 2""#)
            .contains("column 3: syntax error while parsing value - unexpected number literal; expected end of input"));
        assert!(err(r#"builtins.fromJSON """#)
            .contains("column 1: syntax error while parsing value - unexpected end of input; expected '[', '{', or a literal"));
        assert!(err(r#"builtins.fromJSON "1.5e999""#).contains("number overflow parsing '1.5e999'"));
        assert!(err(r#"builtins.fromJSON 1"#).contains("expected a string but found an integer: 1"));
    }

    #[test]
    fn from_json_deep_nesting() {
        big_stack(|| {
            let n = 50_000;
            let expr = format!(
                "builtins.length (builtins.fromJSON \"{}{}\")",
                "[".repeat(n),
                "]".repeat(n)
            );
            assert_eq!(ok(&expr), "1");
        });
    }

    #[test]
    fn from_toml_values() {
        assert_eq!(
            ok(r#"builtins.fromTOML ''
                a = 1
                b = "x"
                c = [1, 2.5, "s"]
                d.e = true
                f = { g = -3 }
                hex = 0xff
                [t]
                u = 1e6
                [[arr]]
                x = 1
                [[arr]]
              ''"#),
            "{ a = 1; arr = [ { x = 1; } { } ]; b = \"x\"; c = [ 1 2.5 \"s\" ]; d = { e = true; }; f = { g = -3; }; hex = 255; t = { u = 1e+06; }; }"
        );
    }

    #[test]
    fn from_toml_errors() {
        assert!(err(r#"builtins.fromTOML "a = 1979-05-27""#)
            .contains("while parsing TOML: Dates and times are not supported"));
        assert!(err(r#"builtins.fromTOML "attr = 9223372036854775808""#)
            .contains("while parsing TOML:"));
        assert!(err(r#"builtins.fromTOML ''k = "a\u0000b"''"#).contains(
            "while parsing TOML: error: input string 'a␀b' cannot be represented as Nix string because it contains null bytes"
        ));
        assert!(err(r#"builtins.fromTOML "a = ""#).contains("while parsing TOML:"));
    }

    #[test]
    fn toml_timestamps_with_feature() {
        use crate::eval::{EvalSettings, Evaluator};
        let settings = EvalSettings {
            experimental_features: vec!["parse-toml-timestamps".into()],
            ..EvalSettings::default()
        };
        let mut ev = Evaluator::new(settings, std::rc::Rc::new(crate::store::MemStore::new()));
        let v = ev
            .eval_string(
                r#"builtins.fromTOML "a = 1979-05-27T07:32:00.1Z\nb = 07:32:00""#,
                std::path::Path::new("/"),
            )
            .and_then(|v| ev.force_deep(&v))
            .map_err(|e| e.msg.clone())
            .unwrap();
        assert_eq!(
            crate::value::print::print_value(&v),
            r#"{ a = { _type = "timestamp"; value = "1979-05-27T07:32:00.100Z"; }; b = { _type = "timestamp"; value = "07:32:00"; }; }"#
        );
    }

    #[test]
    fn toml_timestamps_format() {
        use super::from_toml::format_timestamp;
        let f = |s: &str| format_timestamp(&s.parse().unwrap());
        assert_eq!(f("1979-05-27T07:32:00Z"), "1979-05-27T07:32:00Z");
        assert_eq!(f("1979-05-27 07:32:00.1Z"), "1979-05-27T07:32:00.100Z");
        assert_eq!(f("1979-05-27T00:32:00.1234"), "1979-05-27T00:32:00.123400");
        assert_eq!(
            f("1979-05-27T00:32:00.999999-07:00"),
            "1979-05-27T00:32:00.999999-07:00"
        );
        assert_eq!(f("00:32:00.1234567"), "00:32:00.123456700");
        assert_eq!(f("1979-05-27"), "1979-05-27");
    }

    #[test]
    fn to_xml_output() {
        assert_eq!(
            ok(r#"builtins.toXML { a = "s"; }"#),
            r#""<?xml version='1.0' encoding='utf-8'?>\n<expr>\n  <attrs>\n    <attr name=\"a\">\n      <string value=\"s\" />\n    </attr>\n  </attrs>\n</expr>\n""#
        );
        assert_eq!(
            ok(r#"builtins.toXML [ ("a" + "b") 10 (rec { x = "x"; y = x; }) ]"#),
            r#""<?xml version='1.0' encoding='utf-8'?>\n<expr>\n  <list>\n    <string value=\"ab\" />\n    <int value=\"10\" />\n    <attrs>\n      <attr name=\"x\">\n        <string value=\"x\" />\n      </attr>\n      <attr name=\"y\">\n        <string value=\"x\" />\n      </attr>\n    </attrs>\n  </list>\n</expr>\n""#
        );
        assert_eq!(
            ok(
                r#"builtins.toXML [ null true 1.5 "<&\"\n>" ({ b, a ? 1, ... }@args: 1) (x: x) builtins.map [ ] { } ]"#
            ),
            r#""<?xml version='1.0' encoding='utf-8'?>\n<expr>\n  <list>\n    <null />\n    <bool value=\"true\" />\n    <float value=\"1.5\" />\n    <string value=\"&lt;&amp;&quot;&#xA;&gt;\" />\n    <function>\n      <attrspat ellipsis=\"1\" name=\"args\">\n        <attr name=\"a\" />\n        <attr name=\"b\" />\n      </attrspat>\n    </function>\n    <function>\n      <varpat name=\"x\" />\n    </function>\n    <unevaluated />\n    <list>\n    </list>\n    <attrs>\n    </attrs>\n  </list>\n</expr>\n""#
        );
    }
}
