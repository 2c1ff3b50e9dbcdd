//! Lowering from the AST to the evaluator's IR.
//!
//! Owns scope resolution (every variable becomes a (depth, slot) pair, or a
//! run-time `with` lookup), the merging of nested attribute paths
//! (`a.b = 1; a.c = 2;`), duplicate-attribute and undefined-variable errors,
//! path-literal anchoring, and the literal-lint options. It must not evaluate:
//! everything it builds is inert until `eval` runs it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use super::error::{did_you_mean, EResult, ErrorExt, ErrorKind, EvalError};
use super::ir::*;
use crate::syntax::ast::{
    AttrName, BinaryOp, Binding, Expr, ExprKind, Param, PathAnchor, Span, StrPart, UnaryOp,
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

enum Scope {
    Static(HashMap<Sym, u32>),
    With,
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

/// One key of an attribute tree under construction.
enum Entry {
    Expr(Expr),
    /// `inherit x;`: `x` from the enclosing scope.
    Inherit(Sym, Span),
    /// `inherit (e) x;`: `e` is hidden slot `usize`.
    InheritFrom(usize, Sym, Span),
    Nested(Tree),
}

struct Tree {
    rec: bool,
    statics: Vec<(Sym, Entry, Span)>,
    index: HashMap<Sym, usize>,
    dynamics: Vec<(Expr, Entry, Span)>,
    hidden: Vec<Expr>,
    span: Span,
}

impl Tree {
    fn new(rec: bool, span: Span) -> Tree {
        Tree {
            rec,
            statics: Vec::new(),
            index: HashMap::new(),
            dynamics: Vec::new(),
            hidden: Vec::new(),
            span,
        }
    }
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

    /// Adds a static scope binding `names` to slots 0.. (for `scopedImport`).
    pub fn push_scope(&mut self, names: &[Sym]) {
        let map = names
            .iter()
            .enumerate()
            .map(|(i, n)| (*n, i as u32))
            .collect();
        self.scopes.push(Scope::Static(map));
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
                Ir::Let {
                    def,
                    body: body.expect("body given"),
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
                Ir::Select {
                    expr,
                    path,
                    default,
                    pos,
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

    /// Resolves a variable: lexical scopes (globals included) win over `with`.
    fn resolve(&self, name: &str, span: Span) -> EResult<Rc<Ir>> {
        self.resolve_from(name, span, 0)
    }

    /// Like [`Self::resolve`] but skipping the `skip` innermost scopes (used for
    /// `inherit x;` inside `rec`/`let`, which refers to the enclosing scope).
    fn resolve_from(&self, name: &str, span: Span, skip: usize) -> EResult<Rc<Ir>> {
        let mut withs = Vec::new();
        for (up, scope) in self.scopes.iter().rev().enumerate() {
            if up < skip {
                continue;
            }
            match scope {
                Scope::Static(map) => {
                    if let Some(idx) = map.get(name) {
                        if up + 1 == self.scopes.len() {
                            if let Some(v) = self.global_const(*idx) {
                                return Ok(Rc::new(Ir::Const(v)));
                            }
                        }
                        return Ok(Rc::new(Ir::Var {
                            up: up as u32,
                            idx: *idx,
                            pos: self.pos(span),
                        }));
                    }
                }
                Scope::With => withs.push(up as u32),
            }
        }
        if !withs.is_empty() {
            return Ok(Rc::new(Ir::WithVar {
                name: Sym::new(name),
                withs: withs.into_boxed_slice(),
                pos: self.pos(span),
            }));
        }
        let names = self.scopes.iter().flat_map(|s| match s {
            Scope::Static(m) => m.keys().map(|k| k.as_str()).collect::<Vec<_>>(),
            Scope::With => vec![],
        });
        let hint = did_you_mean(name, names.filter(|n| !n.starts_with("__")));
        Err(EvalError::undefined_variable(name, hint)).at_pos(self.pos(span))
    }

    /// The value of global slot `idx`, when it is evaluated (every global but the
    /// self-reference `builtins.builtins` is a plain value from the start).
    ///
    /// Globals are lexical and immutable: nothing can rebind them except a
    /// lexical scope, which [`Self::resolve_from`] finds first (`with` cannot:
    /// lexical bindings win over it, as in Nix). So `toString`, `true` or
    /// `builtins` compile to constants instead of a walk up every enclosing
    /// scope at each use.
    fn global_const(&self, idx: u32) -> Option<Value> {
        super::forced(self.global_values.0.slots.borrow().get(idx as usize)?)
    }

    /// `expr.a.b` when `expr` compiled to a constant set and every step is a
    /// static name it holds, down to an evaluated value: that value, selected
    /// now (`builtins.substring` is then the builtin itself). `None` leaves
    /// the selection to run time, with its errors, positions and `or` default.
    fn fold_select(expr: &Ir, path: &[IrAttrName]) -> Option<Value> {
        let Ir::Const(v) = expr else {
            return None;
        };
        super::select_evaluated(v.clone(), path)
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
        Ok(Rc::new(LambdaDef {
            param: IrParam::Ident(name),
            body,
            name: Default::default(),
            extends,
            pos,
        }))
    }

    // ---- attribute sets -------------------------------------------------

    fn build_tree(
        &mut self,
        rec: bool,
        bindings: &[Binding],
        span: Span,
        is_let: bool,
    ) -> EResult<Tree> {
        let mut tree = Tree::new(rec, span);
        for b in bindings {
            match b {
                Binding::Attr { path, value, span } => {
                    if is_let {
                        if let AttrName::Dynamic(e) = &path[0] {
                            return Err(self.err("dynamic attributes not allowed in let", e.span));
                        }
                    }
                    self.insert_path(&mut tree, path, value.clone(), *span, &mut Vec::new())?;
                }
                Binding::Inherit { from, names, .. } => {
                    let hidden = from.as_ref().map(|e| {
                        tree.hidden.push((**e).clone());
                        tree.hidden.len() - 1
                    });
                    for (n, nspan) in names {
                        let entry = match hidden {
                            Some(h) => Entry::InheritFrom(h, *n, *nspan),
                            None => Entry::Inherit(*n, *nspan),
                        };
                        if tree.index.contains_key(n) {
                            return Err(self.dup_error(&[n.as_str()], *nspan, &tree, n));
                        }
                        tree.index.insert(*n, tree.statics.len());
                        tree.statics.push((*n, entry, *nspan));
                    }
                }
            }
        }
        Ok(tree)
    }

    fn dup_error(&self, path: &[&str], span: Span, tree: &Tree, name: &Sym) -> Box<EvalError> {
        let prev = tree
            .index
            .get(name)
            .map(|i| tree.statics[*i].2)
            .unwrap_or(span);
        let (l, c) = (self.line_col)(prev.start);
        self.err(
            format!(
                "attribute '{}' already defined at {}:{l}:{c}",
                path.join("."),
                self.file_name
            ),
            span,
        )
    }

    /// Inserts `path = value` into `tree`, merging with literal sets already there.
    fn insert_path(
        &mut self,
        tree: &mut Tree,
        path: &[AttrName],
        value: Expr,
        span: Span,
        done: &mut Vec<String>,
    ) -> EResult<()> {
        let (head, rest) = path.split_first().expect("attribute paths are non-empty");
        match head {
            AttrName::Dynamic(key) => {
                let entry = if rest.is_empty() {
                    Entry::Expr(value)
                } else {
                    let mut t = Tree::new(false, span);
                    self.insert_path(&mut t, rest, value, span, done)?;
                    Entry::Nested(t)
                };
                tree.dynamics.push((key.clone(), entry, span));
                Ok(())
            }
            AttrName::Static(name, nspan) => {
                done.push(name.to_string());
                let existing = tree.index.get(name).copied();
                match existing {
                    None => {
                        let entry = if rest.is_empty() {
                            Entry::Expr(value)
                        } else {
                            let mut t = Tree::new(false, span);
                            self.insert_path(&mut t, rest, value, span, done)?;
                            Entry::Nested(t)
                        };
                        tree.index.insert(*name, tree.statics.len());
                        tree.statics.push((*name, entry, *nspan));
                        Ok(())
                    }
                    Some(i) => {
                        // Turn an existing literal set into a tree we can merge into.
                        // A `rec` literal merges too, and the merged attributes then
                        // see its scope (kept for compatibility, NixOS/nix#9020).
                        if let Entry::Expr(e) = &tree.statics[i].1 {
                            if let ExprKind::Attrs { rec, bindings } = &e.kind {
                                let t = self.build_tree(*rec, bindings, e.span, false)?;
                                tree.statics[i].1 = Entry::Nested(t);
                            }
                        }
                        let mergeable_new = !rest.is_empty()
                            || matches!(value.kind, ExprKind::Attrs { rec: false, .. });
                        match &mut tree.statics[i].1 {
                            Entry::Nested(sub) if mergeable_new => {
                                if rest.is_empty() {
                                    if let ExprKind::Attrs { bindings, .. } = &value.kind {
                                        let more =
                                            self.build_tree(false, bindings, value.span, false)?;
                                        return self.merge_trees(sub, more, done);
                                    }
                                    unreachable!("mergeable_new checked the kind");
                                }
                                self.insert_path(sub, rest, value, span, done)
                            }
                            _ => {
                                let parts: Vec<&str> = done.iter().map(|s| s.as_str()).collect();
                                Err(self.dup_error(&parts, *nspan, tree, name))
                            }
                        }
                    }
                }
            }
        }
    }

    fn merge_trees(&mut self, into: &mut Tree, from: Tree, done: &mut [String]) -> EResult<()> {
        let offset = into.hidden.len();
        into.hidden.extend(from.hidden);
        for (name, entry, span) in from.statics {
            let entry = match entry {
                Entry::InheritFrom(h, n, s) => Entry::InheritFrom(h + offset, n, s),
                e => e,
            };
            if into.index.contains_key(&name) {
                let mut parts: Vec<&str> = done.iter().map(|s| s.as_str()).collect();
                parts.push(&name);
                return Err(self.dup_error(&parts, span, into, &name));
            }
            into.index.insert(name, into.statics.len());
            into.statics.push((name, entry, span));
        }
        into.dynamics.extend(from.dynamics);
        Ok(())
    }

    fn compile_tree(&mut self, tree: Tree) -> EResult<Rc<AttrsDef>> {
        Ok(self.compile_tree_with_body(tree, None)?.0)
    }

    fn compile_tree_with_body(
        &mut self,
        tree: Tree,
        body: Option<&Expr>,
    ) -> EResult<(Rc<AttrsDef>, Option<Rc<Ir>>)> {
        // `AttrsDef::statics` is in name order, so the evaluator builds each set
        // already sorted instead of sorting it per evaluation; a `rec` set's or a
        // `let`'s slots follow that order. Entries are still compiled in source order
        // (so the first error and lint warnings are the first in the file):
        // `rank[i]` is where the i-th static in source order goes.
        let mut order: Vec<usize> = (0..tree.statics.len()).collect();
        order.sort_by(|&a, &b| tree.statics[a].0.cmp(&tree.statics[b].0));
        let mut rank = vec![0; order.len()];
        for (r, &i) in order.iter().enumerate() {
            rank[i] = r;
        }
        let rec = tree.rec;
        let new_env = rec || !tree.hidden.is_empty();
        let hidden_base = if rec { tree.statics.len() } else { 0 };
        if new_env {
            let mut names = HashMap::new();
            if rec {
                for (i, (n, _, _)) in tree.statics.iter().enumerate() {
                    names.insert(*n, rank[i] as u32);
                }
            }
            self.scopes.push(Scope::Static(names));
        }
        let result = (|| {
            let mut hidden = Vec::with_capacity(tree.hidden.len());
            for h in &tree.hidden {
                hidden.push(self.compile(h)?);
            }
            let mut statics: Vec<Option<AttrDef>> = Vec::with_capacity(tree.statics.len());
            statics.resize_with(tree.statics.len(), || None);
            for (i, (name, entry, span)) in tree.statics.into_iter().enumerate() {
                let value = self.compile_entry(entry, rec, hidden_base, Some(&name))?;
                statics[rank[i]] = Some(AttrDef {
                    name,
                    value,
                    pos: self.pos(span),
                });
            }
            let statics: Vec<AttrDef> = statics.into_iter().flatten().collect();
            let mut dynamics = Vec::with_capacity(tree.dynamics.len());
            for (key, entry, span) in tree.dynamics {
                let k = self.compile(&key)?;
                let v = self.compile_entry(entry, rec, hidden_base, None)?;
                dynamics.push((k, v, self.pos(span)));
            }
            let body = match body {
                Some(b) => Some(self.compile(b)?),
                None => None,
            };
            Ok((
                Rc::new(AttrsDef {
                    rec,
                    statics,
                    dynamics,
                    hidden,
                    pos: self.pos(tree.span),
                }),
                body,
            ))
        })();
        if new_env {
            self.scopes.pop();
        }
        result
    }

    fn compile_entry(
        &mut self,
        entry: Entry,
        rec: bool,
        hidden_base: usize,
        name: Option<&Sym>,
    ) -> EResult<Rc<Ir>> {
        Ok(match entry {
            Entry::Expr(e) => {
                let ir = self.compile(&e)?;
                if let (Ir::Lambda(def), Some(n)) = (&*ir, name) {
                    def.name.replace(Some(*n));
                }
                ir
            }
            Entry::Inherit(n, span) => self.resolve_from(&n, span, usize::from(rec))?,
            Entry::InheritFrom(h, n, span) => Rc::new(Ir::Select {
                expr: Rc::new(Ir::Var {
                    up: 0,
                    idx: (hidden_base + h) as u32,
                    pos: self.pos(span),
                }),
                path: vec![IrAttrName::Static(n)],
                default: None,
                pos: self.pos(span),
            }),
            Entry::Nested(t) => Rc::new(Ir::Attrs(self.compile_tree(t)?)),
        })
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
    use crate::eval::ir::Ir;
    use crate::eval::testing::{fails, ok_all};
    use crate::eval::{EvalSettings, Evaluator};

    /// The compiled form of `src` (no evaluation).
    fn compiled(src: &str) -> std::rc::Rc<Ir> {
        let store = std::rc::Rc::new(crate::store::MemStore::new());
        let mut ev = Evaluator::new(EvalSettings::default(), store);
        let dir = std::path::Path::new("/");
        ev.compile_source("«test»".into(), None, src.into(), dir)
            .unwrap_or_else(|e| panic!("{src}: {}", ev.sources.render(&e, false)))
    }

    #[test]
    fn globals_and_their_static_selections_compile_to_constants() {
        for src in [
            "toString",
            "true",
            "builtins",
            "builtins.substring",
            "builtins.builtins.map",
        ] {
            assert!(matches!(&*compiled(src), Ir::Const(_)), "{src}");
        }
        // Rebound lexically, missing, or a parameter: left to run time.
        for src in [
            "let builtins = { }; in builtins.map",
            "builtins.nonexistent",
            "x: x.map",
        ] {
            assert!(!matches!(&*compiled(src), Ir::Const(_)), "{src}");
        }
    }

    #[test]
    fn folded_globals_keep_nix_semantics() {
        // Each checked against Nix 2.8.
        let cases = [
            ("with { true = false; }; true", "true"),
            ("let builtins = { a = 1; }; in builtins.a", "1"),
            ("builtins.foo or 3", "3"),
            ("builtins.builtins.true", "true"),
            ("(x: x.true) builtins", "true"),
            ("(rec { toString = 1; y = toString; }).y", "1"),
            ("let f = builtins.map; in f (x: x + 1) [ 1 2 ]", "[ 2 3 ]"),
            ("builtins.substring 1 2 \"abcd\"", "\"bc\""),
            ("let x = { inherit (builtins) true; }; in x.true", "true"),
        ];
        ok_all(&cases);
        fails("builtins.nonexistent", "attribute 'nonexistent' missing");
        fails("builtins.true.x", "expected a set but found a Boolean");
        // The unused default is still compiled: its undefined variable is an error.
        fails(
            "builtins.map or undefinedVar",
            "undefined variable 'undefinedVar'",
        );
    }

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
