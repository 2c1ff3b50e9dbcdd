//! Lowering attribute sets and `let`: the tree of a set's bindings (nested
//! paths `a.b = 1; a.c = 2;` merged, literal sets merged into, `inherit` and
//! `inherit (e)`), duplicate-attribute errors naming the first definition, and
//! the compiled [`AttrsDef`]: its statics in name order (a `rec` set's or a
//! `let`'s slots follow that order), its dynamic names and its hidden
//! `inherit (e)` sources.
//!
//! It must not evaluate, nor change what the user sees of the source order:
//! entries are compiled in source order, so the first error and the lint
//! warnings are the first in the file.

use std::collections::HashMap;
use std::rc::Rc;

use super::super::error::{EResult, EvalError};
use super::super::ir::*;
use super::scope::Scope;
use super::Compiler;
use crate::syntax::ast::{AttrName, Binding, Expr, ExprKind, Span};
use crate::value::Sym;

/// One key of an attribute tree under construction.
enum Entry {
    Expr(Expr),
    /// `inherit x;`: `x` from the enclosing scope.
    Inherit(Sym, Span),
    /// `inherit (e) x;`: `e` is hidden slot `usize`.
    InheritFrom(usize, Sym, Span),
    Nested(Tree),
}

pub(super) struct Tree {
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

impl Compiler<'_> {
    pub(super) fn build_tree(
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

    pub(super) fn compile_tree(&mut self, tree: Tree) -> EResult<Rc<AttrsDef>> {
        Ok(self.compile_tree_with_body(tree, None)?.0)
    }

    pub(super) fn compile_tree_with_body(
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
}
