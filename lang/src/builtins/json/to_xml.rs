//! `builtins.toXML`: Nix's XML rendering of a value, forced deeply.
//!
//! The format is Nix's (`value-to-xml.cc` with an indenting writer): a
//! `<?xml …?>` header, an `<expr>` root, two spaces of indentation per level,
//! empty elements as `<x />`, attributes sorted by name and `" < > & newline`
//! escaped in attribute values. Derivations appear as `<derivation>` (their
//! attributes only the first time a `drvPath` is met, `<repeated />` after);
//! functions as their argument pattern; built-in functions as `<unevaluated />`.
//! Source locations are not included.

use std::collections::HashSet;

use crate::eval::{ir::IrParam, EResult, ErrorExt, Evaluator, RResult};
use crate::value::{Args, Context, NixString, Value};

/// Return a string containing an XML representation of e.
pub(super) fn to_xml(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let mut w = XmlWriter {
        out: String::from("<?xml version='1.0' encoding='utf-8'?>\n"),
        depth: 0,
        stack: Vec::new(),
        ctx: Context::default(),
        drvs_seen: HashSet::new(),
    };
    w.open("expr", &[]);
    w.value(ev, &a[0], 0)?;
    w.close();
    Ok(Value::String(NixString::with_context(w.out, w.ctx)))
}

struct XmlWriter {
    out: String,
    depth: usize,
    stack: Vec<&'static str>,
    ctx: Context,
    drvs_seen: HashSet<String>,
}

fn escape_attr(out: &mut String, s: &str) {
    for c in s.chars() {
        match c {
            '"' => out.push_str("&quot;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '\n' => out.push_str("&#xA;"),
            c => out.push(c),
        }
    }
}

impl XmlWriter {
    fn indent(&mut self) {
        for _ in 0..self.depth {
            self.out.push_str("  ");
        }
    }

    fn attrs(&mut self, attrs: &[(&str, &str)]) {
        let mut sorted: Vec<&(&str, &str)> = attrs.iter().collect();
        sorted.sort_by(|a, b| a.0.cmp(b.0));
        for (k, v) in sorted {
            self.out.push(' ');
            self.out.push_str(k);
            self.out.push_str("=\"");
            escape_attr(&mut self.out, v);
            self.out.push('"');
        }
    }

    fn open(&mut self, name: &'static str, attrs: &[(&str, &str)]) {
        self.indent();
        self.out.push('<');
        self.out.push_str(name);
        self.attrs(attrs);
        self.out.push_str(">\n");
        self.stack.push(name);
        self.depth += 1;
    }

    fn close(&mut self) {
        if let Some(name) = self.stack.pop() {
            self.depth -= 1;
            self.indent();
            self.out.push_str("</");
            self.out.push_str(name);
            self.out.push_str(">\n");
        }
    }

    fn empty(&mut self, name: &str, attrs: &[(&str, &str)]) {
        self.indent();
        self.out.push('<');
        self.out.push_str(name);
        self.attrs(attrs);
        self.out.push_str(" />\n");
    }

    fn value(&mut self, ev: &mut Evaluator, v: &Value, level: usize) -> EResult<()> {
        if level > ev.settings.max_call_depth {
            return Err(super::depth_error(ev));
        }
        stacker::maybe_grow(64 * 1024, 2 * 1024 * 1024, || {
            self.value_inner(ev, v, level)
        })
    }

    fn show_attrs(
        &mut self,
        ev: &mut Evaluator,
        a: &crate::value::Attrs,
        level: usize,
    ) -> EResult<()> {
        for (k, x) in a.iter() {
            self.open("attr", &[("name", k.as_str())]);
            self.value(ev, x, level + 1)
                .frame(None, || format!("while evaluating the attribute '{k}'"))?;
            self.close();
        }
        Ok(())
    }

    fn value_inner(&mut self, ev: &mut Evaluator, v: &Value, level: usize) -> EResult<()> {
        let v = ev.force(v)?;
        match &v {
            Value::Int(i) => self.empty("int", &[("value", i.to_string().as_str())]),
            Value::Bool(b) => {
                self.empty("bool", &[("value", if b.get() { "true" } else { "false" })])
            }
            Value::String(s) => {
                self.ctx.extend(s.context());
                self.empty("string", &[("value", s.as_str())]);
            }
            Value::Path(p) => self.empty("path", &[("value", p.to_string_lossy().as_ref())]),
            Value::Null => self.empty("null", &[]),
            Value::Float(f) => self.empty(
                "float",
                &[("value", crate::value::print::format_float(f.get()).as_str())],
            ),
            Value::Attrs(a) => {
                if ev.is_derivation(a)? {
                    let mut drv_path = None;
                    let mut out_path = None;
                    if let Some(d) = a.get("drvPath").cloned() {
                        if let Value::String(s) = ev.force(&d)? {
                            drv_path = Some(s.as_str().to_string());
                        }
                    }
                    if let Some(o) = a.get("outPath").cloned() {
                        if let Value::String(s) = ev.force(&o)? {
                            out_path = Some(s.as_str().to_string());
                        }
                    }
                    let mut xa: Vec<(&str, &str)> = Vec::new();
                    if let Some(d) = &drv_path {
                        xa.push(("drvPath", d.as_str()));
                    }
                    if let Some(o) = &out_path {
                        xa.push(("outPath", o.as_str()));
                    }
                    self.open("derivation", &xa);
                    let first = match &drv_path {
                        Some(d) if !d.is_empty() => self.drvs_seen.insert(d.clone()),
                        _ => false,
                    };
                    if first {
                        self.show_attrs(ev, a, level)?;
                    } else {
                        self.empty("repeated", &[]);
                    }
                    self.close();
                } else {
                    self.open("attrs", &[]);
                    self.show_attrs(ev, a, level)?;
                    self.close();
                }
            }
            Value::List(l) => {
                self.open("list", &[]);
                for (i, x) in l.iter().enumerate() {
                    self.value(ev, x, level + 1)
                        .frame(None, || format!("while evaluating list element {i}"))?;
                }
                self.close();
            }
            Value::Lambda(c) => {
                self.open("function", &[]);
                match &c.def.param {
                    IrParam::Ident(name) => self.empty("varpat", &[("name", name.as_str())]),
                    IrParam::Formals {
                        formals,
                        ellipsis,
                        at,
                        ..
                    } => {
                        let mut xa: Vec<(&str, &str)> = Vec::new();
                        if let Some(n) = at {
                            xa.push(("name", n.as_str()));
                        }
                        if *ellipsis {
                            xa.push(("ellipsis", "1"));
                        }
                        self.open("attrspat", &xa);
                        let mut names: Vec<&str> =
                            formals.iter().map(|(n, _)| n.as_str()).collect();
                        names.sort_unstable();
                        for n in names {
                            self.empty("attr", &[("name", n)]);
                        }
                        self.close();
                    }
                }
                self.close();
            }
            Value::PrimOp(_) | Value::Thunk(_) => self.empty("unevaluated", &[]),
        }
        Ok(())
    }
}
