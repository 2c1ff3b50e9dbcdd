//! The TOML reader behind `builtins.fromTOML`.
//!
//! Integers, floats, strings, Booleans, arrays and tables map to the obvious
//! values. Dates and times are an error unless timestamps are enabled (Nix's
//! `parse-toml-timestamps` experimental feature), in which case they become
//! `{ _type = "timestamp"; value = "…"; }` with the fraction of a second padded to
//! 3, 6 or 9 digits as Nix (toml11) prints it.

use crate::eval::{EResult, ErrorKind, EvalError};
use crate::value::{Attrs, Sym, Value};

use super::null_byte_error;

fn toml_error(msg: impl std::fmt::Display) -> Box<EvalError> {
    EvalError::new(ErrorKind::Eval, format!("while parsing TOML: {msg}"))
}

/// Parses a TOML document into an attribute set.
pub(crate) fn toml_to_value(text: &str, timestamps: bool) -> EResult<Value> {
    let table: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| toml_error(e.to_string().trim_end()))?;
    convert_table(&table, timestamps)
}

fn convert_table(t: &toml::Table, timestamps: bool) -> EResult<Value> {
    let mut entries = Vec::with_capacity(t.len());
    for (k, v) in t.iter() {
        if k.contains('\0') {
            return Err(toml_error(format!("error: {}", null_byte_error(k))));
        }
        entries.push((Sym::new(k), convert(v, timestamps)?));
    }
    Ok(Value::attrs(Attrs::from_unsorted(entries)))
}

fn convert(v: &toml::Value, timestamps: bool) -> EResult<Value> {
    stacker::maybe_grow(64 * 1024, 2 * 1024 * 1024, || {
        Ok(match v {
            toml::Value::String(s) => {
                if s.contains('\0') {
                    return Err(toml_error(format!("error: {}", null_byte_error(s))));
                }
                Value::str(s.clone())
            }
            toml::Value::Integer(i) => Value::Int(*i),
            toml::Value::Float(f) => Value::float(*f),
            toml::Value::Boolean(b) => Value::bool(*b),
            toml::Value::Datetime(d) => {
                if !timestamps {
                    return Err(toml_error("Dates and times are not supported"));
                }
                super::super::mk_attrs(vec![
                    ("_type", Value::str("timestamp")),
                    ("value", Value::str(format_timestamp(d))),
                ])
            }
            toml::Value::Array(a) => {
                let mut out = Vec::with_capacity(a.len());
                for x in a {
                    out.push(convert(x, timestamps)?);
                }
                Value::list(out)
            }
            toml::Value::Table(t) => convert_table(t, timestamps)?,
        })
    })
}

/// A TOML date/time as Nix prints it: RFC 3339 with `T`, the fraction of a second
/// as milli-, micro- or nanoseconds (3, 6 or 9 digits), `Z` or `±hh:mm`.
pub(crate) fn format_timestamp(d: &toml::value::Datetime) -> String {
    let mut s = String::new();
    if let Some(date) = &d.date {
        s.push_str(&format!(
            "{:04}-{:02}-{:02}",
            date.year, date.month, date.day
        ));
    }
    if let Some(time) = &d.time {
        if d.date.is_some() {
            s.push('T');
        }
        s.push_str(&format!(
            "{:02}:{:02}:{:02}",
            time.hour, time.minute, time.second
        ));
        let ns = time.nanosecond;
        if ns != 0 {
            if ns % 1_000_000 == 0 {
                s.push_str(&format!(".{:03}", ns / 1_000_000));
            } else if ns % 1_000 == 0 {
                s.push_str(&format!(".{:06}", ns / 1_000));
            } else {
                s.push_str(&format!(".{ns:09}"));
            }
        }
    }
    if let Some(off) = &d.offset {
        match off {
            toml::value::Offset::Z => s.push('Z'),
            toml::value::Offset::Custom { minutes } => {
                let sign = if *minutes < 0 { '-' } else { '+' };
                let m = minutes.unsigned_abs();
                s.push_str(&format!("{sign}{:02}:{:02}", m / 60, m % 60));
            }
        }
    }
    s
}
