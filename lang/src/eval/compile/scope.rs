//! The compiler's scopes and name resolution: a variable becomes a (depth,
//! slot) pair, a run-time `with` lookup carrying the depths of the enclosing
//! `with` scopes (innermost first), or, for a global, its value; an unknown name
//! is an undefined-variable error with a "did you mean". Also the folding of a
//! static selection from a constant set (`builtins.substring` is the builtin
//! itself).
//!
//! It must not evaluate: a global folds only when its value is already
//! evaluated, and a selection only through sets already evaluated.

use std::collections::HashMap;
use std::rc::Rc;

use super::super::error::{did_you_mean, EResult, ErrorExt, EvalError};
use super::super::ir::*;
use super::Compiler;
use crate::syntax::ast::Span;
use crate::value::{Sym, Value};

/// One level of the scopes a name is looked up in, innermost last.
pub(super) enum Scope {
    Static(HashMap<Sym, u32>),
    With,
}

impl Compiler<'_> {
    /// Adds a static scope binding `names` to slots 0.. (for `scopedImport`).
    pub fn push_scope(&mut self, names: &[Sym]) {
        let map = names
            .iter()
            .enumerate()
            .map(|(i, n)| (*n, i as u32))
            .collect();
        self.scopes.push(Scope::Static(map));
    }

    /// Resolves a variable: lexical scopes (globals included) win over `with`.
    pub(super) fn resolve(&self, name: &str, span: Span) -> EResult<Rc<Ir>> {
        self.resolve_from(name, span, 0)
    }

    /// Like [`Self::resolve`] but skipping the `skip` innermost scopes (used for
    /// `inherit x;` inside `rec`/`let`, which refers to the enclosing scope).
    pub(super) fn resolve_from(&self, name: &str, span: Span, skip: usize) -> EResult<Rc<Ir>> {
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
        crate::eval::forced(self.global_values.0.slots.borrow().get(idx as usize)?)
    }

    /// `expr.a.b` when `expr` compiled to a constant set and every step is a
    /// static name it holds, down to an evaluated value: that value, selected
    /// now (`builtins.substring` is then the builtin itself). `None` leaves
    /// the selection to run time, with its errors, positions and `or` default.
    pub(super) fn fold_select(expr: &Ir, path: &[IrAttrName]) -> Option<Value> {
        let Ir::Const(v) = expr else {
            return None;
        };
        crate::eval::select_evaluated(v.clone(), path)
    }
}

#[cfg(test)]
mod tests {
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
}
