//! How `rocmx repl` prints values.
//!
//! The default is shallow, as `rocmx eval` prints: the value itself is forced,
//! what is inside it is shown as far as it has been evaluated already
//! (`{ a = 1; b = «thunk»; }`). `:p` is deep: everything is forced, and an
//! error inside the value is shown in place (`«error: …»`) instead of ending the
//! print. Both show a derivation as `«derivation /rocmx/store/…drv»` (the top
//! value's `drvPath` is forced for it, as `nix repl` does), functions as
//! `«lambda NAME @ FILE:LINE:COL»` and `«primop NAME»`, and a set or list met
//! again on its own path as `«repeated»`.

use std::collections::HashSet;
use std::fmt::Write;

use rocmx_lang::value::print::{escape_string, format_float, print_attr_name};
use rocmx_lang::value::Attrs;
use rocmx_lang::{EResult, Evaluator, Value};

/// Shallow (`Shallow`) or deep (`:p`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Depth {
    Shallow,
    Deep,
}

/// Prints `v`, which the caller forced. An error while forcing the top value's
/// derivation attributes is returned; errors inside are printed in place.
pub(crate) fn print(ev: &mut Evaluator, v: &Value, depth: Depth) -> EResult<String> {
    let mut p = Printer {
        ev,
        depth,
        out: String::new(),
        path: HashSet::new(),
    };
    if let Value::Attrs(a) = v {
        if let Some(drv) = derivation_path(p.ev, a, true)? {
            return Ok(format!("«derivation {drv}»"));
        }
    }
    p.value(v, true);
    Ok(p.out)
}

/// `Some(drvPath)` when `a` is a derivation. With `force`, `type` and `drvPath`
/// are forced; without, only what is already evaluated counts.
fn derivation_path(ev: &mut Evaluator, a: &Attrs, force: bool) -> EResult<Option<String>> {
    let get = |ev: &mut Evaluator, name: &str| -> EResult<Option<Value>> {
        match a.get(name) {
            None => Ok(None),
            Some(v) if force => Ok(ev.force(&v.clone()).map(Some)?),
            Some(Value::Thunk(t)) => Ok(t.value()),
            Some(v) => Ok(Some(v.clone())),
        }
    };
    match get(ev, "type")? {
        Some(Value::String(s)) if s.as_str() == "derivation" => {}
        _ => return Ok(None),
    }
    Ok(match get(ev, "drvPath")? {
        Some(Value::String(s)) => Some(s.as_str().to_string()),
        _ if force => Some("???".into()),
        _ => None,
    })
}

struct Printer<'a> {
    ev: &'a mut Evaluator,
    depth: Depth,
    out: String,
    /// The sets and lists being printed (on the current path), by address.
    path: HashSet<usize>,
}

impl Printer<'_> {
    /// Prints `v`; `top` is the value the user asked for (already forced).
    fn value(&mut self, v: &Value, top: bool) {
        let v = match v {
            Value::Thunk(t) => match (t.value(), self.depth) {
                (Some(x), _) => x,
                (None, Depth::Shallow) => {
                    self.out.push_str("«thunk»");
                    return;
                }
                (None, Depth::Deep) => match self.ev.force(v) {
                    Ok(x) => x,
                    Err(e) => {
                        let _ = write!(self.out, "«error: {}»", e.take().msg);
                        return;
                    }
                },
            },
            v => v.clone(),
        };
        match &v {
            Value::Null => self.out.push_str("null"),
            Value::Bool(b) => self.out.push_str(if b.get() { "true" } else { "false" }),
            Value::Int(i) => {
                let _ = write!(self.out, "{i}");
            }
            Value::Float(f) => self.out.push_str(&format_float(f.get())),
            Value::String(s) => self.out.push_str(&escape_string(s.as_str())),
            Value::Path(p) => self.out.push_str(&p.to_string_lossy()),
            Value::Lambda(c) => {
                let name = *c.def.name.borrow();
                let at = self.ev.sources.describe(c.def.pos);
                match name {
                    Some(n) => {
                        let _ = write!(self.out, "«lambda {n} @ {at}»");
                    }
                    None => {
                        let _ = write!(self.out, "«lambda @ {at}»");
                    }
                }
            }
            Value::PrimOp(app) => {
                let what = if app.args.is_empty() {
                    "primop"
                } else {
                    "partially applied primop"
                };
                let _ = write!(self.out, "«{what} {}»", app.op.name);
            }
            Value::List(l) => {
                let key = std::rc::Rc::as_ptr(l) as *const u8 as usize;
                if !self.path.insert(key) {
                    self.out.push_str("«repeated»");
                    return;
                }
                if l.is_empty() {
                    self.out.push_str("[ ]");
                } else {
                    self.out.push_str("[ ");
                    for x in l.iter() {
                        self.value(x, false);
                        self.out.push(' ');
                    }
                    self.out.push(']');
                }
                self.path.remove(&key);
            }
            Value::Attrs(a) => {
                if !top {
                    // Deep printing forces `type` and `drvPath` of nested
                    // derivations too; shallow printing never forces.
                    match derivation_path(self.ev, a, self.depth == Depth::Deep) {
                        Ok(Some(d)) => {
                            let _ = write!(self.out, "«derivation {d}»");
                            return;
                        }
                        Ok(None) => {}
                        Err(e) => {
                            let _ = write!(self.out, "«error: {}»", e.msg);
                            return;
                        }
                    }
                }
                let key = a.ptr();
                if !self.path.insert(key) {
                    self.out.push_str("«repeated»");
                    return;
                }
                if a.is_empty() {
                    self.out.push_str("{ }");
                } else {
                    self.out.push_str("{ ");
                    let entries: Vec<(String, Value)> =
                        a.iter().map(|(k, x)| (k.to_string(), x.clone())).collect();
                    for (k, x) in entries {
                        self.out.push_str(&print_attr_name(&k));
                        self.out.push_str(" = ");
                        self.value(&x, false);
                        self.out.push_str("; ");
                    }
                    self.out.push('}');
                }
                self.path.remove(&key);
            }
            Value::Thunk(_) => self.out.push_str("«thunk»"),
        }
    }
}

/// `:t`'s answer: the type as Nix's messages name it ("an integer", "a set", …).
pub(crate) fn type_name(v: &Value) -> &'static str {
    v.type_().described()
}
