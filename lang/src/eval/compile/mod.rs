//! Lowering from the AST to the evaluator's IR.
//!
//! Owns the [`Compiler`] and the lowering of each expression (strings, lambdas
//! and curried chains, application spines, selections), path-literal anchoring
//! ([`canon_path`]), and the literal-lint options. Scope resolution (every
//! variable becomes a (depth, slot) pair, a run-time `with` lookup or a global's
//! value) and undefined-variable errors are in `scope.rs`; attribute sets and
//! `let` (the merging of nested attribute paths `a.b = 1; a.c = 2;`,
//! duplicate-attribute errors) in `attrs.rs`. It must not evaluate: everything
//! it builds is inert until `eval` runs it.

mod attrs;
mod scope;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use self::scope::Scope;
use super::error::{EResult, ErrorKind, EvalError};
use super::ir::*;
use crate::syntax::ast::{
    AttrName, BinaryOp, Expr, ExprKind, Param, PathAnchor, Span, StrPart, UnaryOp,
};
use crate::value::{Attrs, Sym, Value};

/// How strictly a discouraged literal form is treated.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LintLevel {
    #[default]
    Off,
    Warn,
    Fatal,
}

/// Lints on literal forms (`--lint-url-literals`, …).
#[derive(Clone, Copy, Debug, Default)]
pub struct Lints {
    pub url_literals: LintLevel,
    pub short_path_literals: LintLevel,
    pub absolute_path_literals: LintLevel,
}

/// The global scope a file is compiled against: its names' slots, and the
/// values in them.
#[derive(Clone, Copy)]
pub struct GlobalScope<'a> {
    pub names: &'a HashMap<Sym, u32>,
    pub values: &'a Env,
}

/// Compiles one file's AST against the global scope.
pub struct Compiler<'a> {
    scopes: Vec<Scope>,
    /// The global scope's values (`scopes[0]`'s slots): set once when the
    /// evaluator starts and never changed, so a variable that resolves to one
    /// compiles to the value itself ([`Self::global_const`]).
    global_values: &'a Env,
    file: u32,
    base_dir: &'a Path,
    text: &'a str,
    lints: Lints,
    /// Warnings to print (non-fatal lints).
    pub warnings: Vec<(Pos, String)>,
    /// `(line, column)` of a byte offset, for `__curPos`.
    line_col: &'a dyn Fn(u32) -> (usize, usize),
    file_name: &'a str,
}

impl<'a> Compiler<'a> {
    pub fn new(
        globals: GlobalScope<'a>,
        file: u32,
        file_name: &'a str,
        base_dir: &'a Path,
        text: &'a str,
        lints: Lints,
        line_col: &'a dyn Fn(u32) -> (usize, usize),
    ) -> Self {
        Compiler {
            scopes: vec![Scope::Static(globals.names.clone())],
            global_values: globals.values,
            file,
            base_dir,
            text,
            lints,
            warnings: Vec::new(),
            line_col,
            file_name,
        }
    }

    fn pos(&self, span: Span) -> Pos {
        Pos {
            file: self.file,
            span,
        }
    }

    fn err(&self, msg: impl Into<String>, span: Span) -> Box<EvalError> {
        EvalError::at(ErrorKind::Eval, msg, self.pos(span))
    }

    fn lint(&mut self, level: LintLevel, msg: String, span: Span) -> EResult<()> {
        match level {
            LintLevel::Off => Ok(()),
            LintLevel::Warn => {
                self.warnings.push((self.pos(span), msg));
                Ok(())
            }
            LintLevel::Fatal => Err(self.err(msg, span)),
        }
    }

    pub fn compile(&mut self, e: &Expr) -> EResult<Rc<Ir>> {
        self.grown(|c| c.compile_inner(e))
    }

    /// Runs one level of the compiler's recursion, growing the native stack
    /// onto the heap when little is left (the parser bounds the depth).
    fn grown<T>(&mut self, f: impl FnOnce(&mut Self) -> T) -> T {
        stacker::maybe_grow(128 * 1024, 4 * 1024 * 1024, || f(self))
    }

    fn compile_inner(&mut self, e: &Expr) -> EResult<Rc<Ir>> {
        let pos = self.pos(e.span);
        Ok(Rc::new(match &e.kind {
            ExprKind::Int(i) => Ir::Const(Value::Int(*i)),
            ExprKind::Float(f) => Ir::Const(Value::float(*f)),
            ExprKind::Str(parts) => return self.compile_str(parts, pos),
            ExprKind::Path(anchor, parts) => return self.compile_path(*anchor, parts, e.span),
            ExprKind::SearchPath(name) => {
                // `<x>` is `__findFile __nixPath "x"`, so both may be rebound.
                let find = self.resolve("__findFile", e.span)?;
                let np = self.resolve("__nixPath", e.span)?;
                let inner = Rc::new(Ir::Apply {
                    func: find,
                    arg: np,
                    pos,
                });
                Ir::Apply {
                    func: inner,
                    arg: Rc::new(Ir::Const(Value::str(name.clone()))),
                    pos,
                }
            }
            ExprKind::Uri(u) => {
                self.lint(
                    self.lints.url_literals,
                    "URL literals are deprecated, allowing for ambiguity; quote the URL".into(),
                    e.span,
                )?;
                Ir::Const(Value::str(u.clone()))
            }
            ExprKind::Var(name) => return self.resolve(name, e.span),
            ExprKind::List(items) => {
                let mut v = Vec::with_capacity(items.len());
                for i in items {
                    v.push(self.compile(i)?);
                }
                Ir::List(v)
            }
            ExprKind::Attrs { rec, bindings } => {
                let tree = self.build_tree(*rec, bindings, e.span, false)?;
                Ir::Attrs(self.compile_tree(tree)?)
            }
            ExprKind::Let { bindings, body } => {
                let tree = self.build_tree(true, bindings, e.span, true)?;
                let (def, body) = self.compile_tree_with_body(tree, Some(body))?;
                let body = body.expect("body given");
                Ir::Let {
                    now: Ir::strict_binding(&def, &body),
                    def,
                    body,
                }
            }
            ExprKind::LegacyLet(bindings) => {
                let tree = self.build_tree(true, bindings, e.span, false)?;
                let def = self.compile_tree(tree)?;
                Ir::Select {
                    expr: Rc::new(Ir::Attrs(def)),
                    path: vec![IrAttrName::Static(Sym::new("body"))],
                    default: None,
                    pos,
                }
            }
            ExprKind::Lambda { param, body } => Ir::Lambda(self.compile_lambda(param, body, pos)?),
            ExprKind::Apply { .. } => {
                // Flatten the spine `((f a) b) c` into `f [a, b, c]`.
                let mut spine = Vec::new();
                let mut head = e;
                while let ExprKind::Apply { func, arg } = &head.kind {
                    spine.push(&**arg);
                    head = func;
                }
                let func = self.compile(head)?;
                let mut args = Vec::with_capacity(spine.len());
                for a in spine.into_iter().rev() {
                    args.push(self.compile(a)?);
                }
                Ir::Call { func, args, pos }
            }
            ExprKind::Select {
                expr,
                path,
                default,
            } => {
                let expr = self.compile(expr)?;
                let path = self.compile_attr_path(path)?;
                // Compiled even when unused: an undefined variable there is an
                // error of the file, as in Nix.
                let default = match default {
                    Some(d) => Some(self.compile(d)?),
                    None => None,
                };
                if let Some(v) = Self::fold_select(&expr, &path) {
                    return Ok(Rc::new(Ir::Const(v)));
                }
                let var_name = match (&*expr, path.as_slice(), &default) {
                    (Ir::Var { up, idx, .. }, [IrAttrName::Static(name)], None) => {
                        Some((*up, *idx, *name))
                    }
                    _ => None,
                };
                let general = Ir::Select {
                    expr,
                    path,
                    default,
                    pos,
                };
                match var_name {
                    Some((up, idx, name)) => Ir::SelectVar {
                        up,
                        idx,
                        name,
                        pos,
                        general: Rc::new(general),
                    },
                    None => general,
                }
            }
            ExprKind::HasAttr { expr, path } => Ir::HasAttr {
                expr: self.compile(expr)?,
                path: self.compile_attr_path(path)?,
                pos,
            },
            ExprKind::With { env, body } => {
                let env = self.compile(env)?;
                self.scopes.push(Scope::With);
                let body = self.compile(body);
                self.scopes.pop();
                Ir::With { env, body: body? }
            }
            ExprKind::Assert { cond, body } => Ir::Assert {
                cond: self.compile(cond)?,
                body: self.compile(body)?,
                pos: self.pos(cond.span),
            },
            ExprKind::If { cond, then, else_ } => Ir::If {
                cond: self.compile(cond)?,
                then: self.compile(then)?,
                else_: self.compile(else_)?,
                pos: self.pos(cond.span),
            },
            ExprKind::Unary { op, expr } => {
                let inner = self.compile(expr)?;
                match op {
                    UnaryOp::Not => Ir::Not(inner, pos),
                    UnaryOp::Neg => Ir::Neg(inner, pos),
                }
            }
            ExprKind::Binary { op, lhs, rhs } => {
                let l = self.compile(lhs)?;
                let r = self.compile(rhs)?;
                match op {
                    BinaryOp::PipeRight => Ir::Apply {
                        func: r,
                        arg: l,
                        pos,
                    },
                    BinaryOp::PipeLeft => Ir::Apply {
                        func: l,
                        arg: r,
                        pos,
                    },
                    _ => Ir::Binary {
                        op: *op,
                        lhs: l,
                        rhs: r,
                        pos,
                    },
                }
            }
            ExprKind::CurPos => {
                let (line, col) = (self.line_col)(e.span.start);
                Ir::Const(Value::attrs(Attrs::from_unsorted(vec![
                    (Sym::new("column"), Value::Int(col as i64)),
                    (Sym::new("file"), Value::str(self.file_name)),
                    (Sym::new("line"), Value::Int(line as i64)),
                ])))
            }
        }))
    }

    fn compile_str(&mut self, parts: &[StrPart], pos: Pos) -> EResult<Rc<Ir>> {
        for p in parts {
            if let StrPart::Lit(s) = p {
                if s.contains('\0') {
                    return Err(EvalError::at(
                        ErrorKind::Parse,
                        format!(
                            "input string '{}' cannot be represented as Nix string because it contains null bytes",
                            s.replace('\0', "␀")
                        ),
                        pos,
                    ));
                }
            }
        }
        if parts.iter().all(|p| matches!(p, StrPart::Lit(_))) {
            let s: String = parts
                .iter()
                .map(|p| match p {
                    StrPart::Lit(s) => s.as_str(),
                    StrPart::Interp(_) => "",
                })
                .collect();
            return Ok(Rc::new(Ir::Const(Value::str(s))));
        }
        let mut out = Vec::with_capacity(parts.len());
        for p in parts {
            out.push(match p {
                StrPart::Lit(s) => Rc::new(Ir::Const(Value::str(s.clone()))),
                StrPart::Interp(e) => self.compile(e)?,
            });
        }
        Ok(Rc::new(Ir::Str { parts: out, pos }))
    }

    fn compile_path(
        &mut self,
        anchor: PathAnchor,
        parts: &[StrPart],
        span: Span,
    ) -> EResult<Rc<Ir>> {
        let pos = self.pos(span);
        let first = match parts.first() {
            Some(StrPart::Lit(s)) => s.clone(),
            _ => String::new(),
        };
        let prefix: String = match anchor {
            PathAnchor::Absolute => {
                self.lint(
                    self.lints.absolute_path_literals,
                    format!("absolute path literal '{first}' is not allowed"),
                    span,
                )?;
                first.clone()
            }
            PathAnchor::Home => {
                self.lint(
                    self.lints.absolute_path_literals,
                    format!("home path literal '{first}' is not allowed"),
                    span,
                )?;
                let home = std::env::var("HOME").unwrap_or_default();
                format!("{home}{}", &first[1..])
            }
            PathAnchor::Relative => {
                if !first.starts_with("./") && !first.starts_with("../") {
                    self.lint(
                        self.lints.short_path_literals,
                        format!("relative path literal '{first}' should be prefixed with '.' for clarity: './{first}'"),
                        span,
                    )?;
                }
                let mut s = self.base_dir.to_string_lossy().into_owned();
                s.push('/');
                s.push_str(&first);
                s
            }
        };
        if parts.len() <= 1 {
            return Ok(Rc::new(Ir::Const(Value::Path(Rc::new(canon_path(
                &prefix,
            ))))));
        }
        // Keep a trailing slash of the prefix: `./a/${b}` is `/base/a/` + b.
        let mut anchored = canon_path(&prefix).to_string_lossy().into_owned();
        if prefix.ends_with('/') && !anchored.ends_with('/') {
            anchored.push('/');
        }
        let mut out = vec![Rc::new(Ir::Const(Value::str(anchored)))];
        for p in &parts[1..] {
            out.push(match p {
                StrPart::Lit(s) => Rc::new(Ir::Const(Value::str(s.clone()))),
                StrPart::Interp(e) => self.compile(e)?,
            });
        }
        Ok(Rc::new(Ir::Path { parts: out, pos }))
    }

    fn compile_attr_path(&mut self, path: &[AttrName]) -> EResult<Vec<IrAttrName>> {
        path.iter()
            .map(|a| {
                Ok(match a {
                    AttrName::Static(s, _) => IrAttrName::Static(*s),
                    AttrName::Dynamic(e) => IrAttrName::Dynamic(self.compile(e)?),
                })
            })
            .collect()
    }

    fn compile_lambda(&mut self, param: &Param, body: &Expr, pos: Pos) -> EResult<Rc<LambdaDef>> {
        let (formals, ellipsis, at) = match param {
            Param::Ident(name, _) => {
                self.scopes.push(Scope::Static(HashMap::from([(*name, 0)])));
                let result = self.compile_chain(*name, body, pos, false, 0);
                self.scopes.pop();
                return result;
            }
            Param::Formals {
                formals,
                ellipsis,
                at,
            } => (formals, *ellipsis, at),
        };
        let mut names = HashMap::new();
        for (i, f) in formals.iter().enumerate() {
            names.insert(f.name, i as u32);
        }
        if let Some((a, _)) = at {
            names.insert(*a, formals.len() as u32);
        }
        self.scopes.push(Scope::Static(names));
        let result = (|| {
            let mut fs = Vec::with_capacity(formals.len());
            for f in formals {
                let d = match &f.default {
                    Some(d) => Some(self.compile(d)?),
                    None => None,
                };
                fs.push((f.name, d));
            }
            let irparam = IrParam::Formals {
                formals: fs,
                ellipsis,
                at: at.as_ref().map(|(a, _)| *a),
                positions: formals.iter().map(|f| self.pos(f.span)).collect(),
            };
            let body = self.compile(body)?;
            Ok(Rc::new(LambdaDef {
                param: irparam,
                body,
                name: Default::default(),
                extends: false,
                rest: 1,
                forces: None,
                first: u32::MAX,
                direct: false,
                pos,
            }))
        })();
        self.scopes.pop();
        result
    }

    /// The `name: body` lambda whose argument is slot `slot` of the innermost
    /// scope (already holding `name`). A body that is itself an `x:` lambda
    /// continues the chain in the same scope (see [`LambdaDef::extends`]).
    fn compile_chain(
        &mut self,
        name: Sym,
        body: &Expr,
        pos: Pos,
        extends: bool,
        slot: u32,
    ) -> EResult<Rc<LambdaDef>> {
        let body = match &body.kind {
            ExprKind::Lambda {
                param: Param::Ident(next, _),
                body: inner,
            } => {
                let Some(Scope::Static(map)) = self.scopes.last_mut() else {
                    unreachable!("a lambda's own scope is static")
                };
                // A repeated name shadows: `x: x: x` is the second argument.
                map.insert(*next, slot + 1);
                let inner_pos = self.pos(body.span);
                let def =
                    self.grown(|c| c.compile_chain(*next, inner, inner_pos, true, slot + 1))?;
                Rc::new(Ir::Lambda(def))
            }
            _ => self.compile(body)?,
        };
        // What the chain's last body forces first, if it is one of the
        // chain's arguments (its scope is the innermost, `up` 0).
        let (rest, forces, direct) = match &*body {
            Ir::Lambda(d) if d.extends => (d.rest + 1, d.forces, d.direct),
            _ => (
                1,
                body.forced_first().filter(|f| f.up == 0).map(|f| f.slot),
                super::direct::is_direct(&body),
            ),
        };
        Ok(Rc::new(LambdaDef {
            param: IrParam::Ident(name),
            body,
            name: Default::default(),
            extends,
            rest,
            forces,
            first: forces.and_then(|f| f.checked_sub(slot)).unwrap_or(u32::MAX),
            direct,
            pos,
        }))
    }

    /// The source text being compiled (for diagnostics).
    pub fn text(&self) -> &str {
        self.text
    }
}

/// Lexically normalises an absolute path the way Nix's `canonPath` does:
/// collapses `//`, drops `.`, resolves `..`, removes a trailing slash.
pub fn canon_path(p: &str) -> PathBuf {
    let mut parts: Vec<&str> = Vec::new();
    for c in p.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            c => parts.push(c),
        }
    }
    let mut s = String::with_capacity(p.len());
    for c in &parts {
        s.push('/');
        s.push_str(c);
    }
    if s.is_empty() {
        s.push('/');
    }
    PathBuf::from(s)
}

#[cfg(test)]
mod tests {
    use super::canon_path;

    #[test]
    fn canon_vectors() {
        assert_eq!(
            canon_path("/a//b/./c/../d/"),
            std::path::Path::new("/a/b/d")
        );
        assert_eq!(canon_path("/.."), std::path::Path::new("/"));
        assert_eq!(canon_path("/"), std::path::Path::new("/"));
    }
}
