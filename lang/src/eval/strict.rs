//! Strictness: which variable an expression forces before it does anything
//! else, and whether an expression reads a given scope slot at all.
//!
//! Owns the two analyses of the lowered form that let the evaluator skip a
//! thunk nothing could tell apart from the value: an argument of a call
//! whose callee forces it first (`LambdaDef::forces`, used by
//! `Evaluator::apply_args`), and the binding of a `let` whose body forces it
//! first and that no binding reads (`Ir::Let`'s `now`, used by
//! `Evaluator::let_scope`). Both run once, when an expression is compiled.
//! They must follow the evaluator's order of evaluation exactly (a wrong
//! "first" changes which of two errors, or traces, comes first) and say
//! "no" whenever they are not sure; they must not evaluate anything.
//!
//! Nix itself delays every argument and binding; this is what GHC calls a
//! strictness analysis, reduced to the first forcing, where it is exact.

use super::ir::{AttrsDef, Forced, Ir, IrAttrName, IrParam};

impl Ir {
    /// The binding of a `let` (`def`, with body `body`) that can be
    /// evaluated when its scope is made: the one its body forces before
    /// anything else ([`Ir::forced_first`]), provided that no binding's
    /// expression (its own included) reads it. Then nothing can observe the
    /// difference: its slot is not read before the body runs, and the body
    /// starts by forcing it.
    pub fn strict_binding(def: &AttrsDef, body: &Ir) -> Option<Forced> {
        let f = body.forced_first().filter(|f| f.up == 0)?;
        if f.slot as usize >= def.statics.len() {
            // An `inherit (e)` source.
            return None;
        }
        let mut read = def
            .statics
            .iter()
            .map(|a| &*a.value)
            .chain(def.hidden.iter().map(|h| &**h));
        if read.any(|e| e.reads_slot(0, f.slot)) {
            return None;
        }
        Some(f)
    }

    /// Whether this node, or anything inside it (a nested lambda's body, a
    /// thunk it makes), reads slot `slot` of the scope `up` levels out.
    /// Follows where the evaluator makes scopes: a lambda (but the
    /// continuation of a curried chain, which shares its chain's), a `let`,
    /// a `with`'s body, an attribute set that needs one
    /// ([`AttrsDef::needs_env`]). Iterative, for the same reason as
    /// [`Ir::forced_first`].
    pub fn reads_slot(&self, up: u32, slot: u32) -> bool {
        let mut todo: Vec<(&Ir, u32)> = vec![(self, up)];
        fn names(path: &[IrAttrName]) -> impl Iterator<Item = &Ir> {
            path.iter().filter_map(|n| match n {
                IrAttrName::Dynamic(e) => Some(&**e),
                IrAttrName::Static(_) => None,
            })
        }
        while let Some((ir, d)) = todo.pop() {
            match ir {
                Ir::Const(_) | Ir::WithVar { .. } => {}
                Ir::Var { up, idx, .. } => {
                    if *up == d && *idx == slot {
                        return true;
                    }
                }
                Ir::SelectVar {
                    up, idx, general, ..
                } => {
                    if *up == d && *idx == slot {
                        return true;
                    }
                    todo.push((general, d));
                }
                Ir::Str { parts, .. } | Ir::Path { parts, .. } | Ir::List(parts) => {
                    todo.extend(parts.iter().map(|p| (&**p, d)));
                }
                Ir::Attrs(def) => {
                    let inner = if def.needs_env() { d + 1 } else { d };
                    todo.extend(def.statics.iter().map(|a| (&*a.value, inner)));
                    todo.extend(def.hidden.iter().map(|h| (&**h, inner)));
                    for (k, v, _) in &def.dynamics {
                        todo.push((k, inner));
                        todo.push((v, inner));
                    }
                }
                Ir::Let { def, body, .. } => {
                    todo.extend(def.statics.iter().map(|a| (&*a.value, d + 1)));
                    todo.extend(def.hidden.iter().map(|h| (&**h, d + 1)));
                    for (k, v, _) in &def.dynamics {
                        todo.push((k, d + 1));
                        todo.push((v, d + 1));
                    }
                    todo.push((body, d + 1));
                }
                Ir::Lambda(def) => {
                    let inner = if def.extends { d } else { d + 1 };
                    if let IrParam::Formals { formals, .. } = &def.param {
                        todo.extend(
                            formals
                                .iter()
                                .filter_map(|(_, x)| x.as_deref())
                                .map(|x| (x, inner)),
                        );
                    }
                    todo.push((&def.body, inner));
                }
                Ir::Apply { func, arg, .. } => {
                    todo.push((func, d));
                    todo.push((arg, d));
                }
                Ir::Call { func, args, .. } => {
                    todo.push((func, d));
                    todo.extend(args.iter().map(|a| (&**a, d)));
                }
                Ir::Select {
                    expr,
                    path,
                    default,
                    ..
                } => {
                    todo.push((expr, d));
                    todo.extend(names(path).map(|n| (n, d)));
                    if let Some(x) = default {
                        todo.push((x, d));
                    }
                }
                Ir::HasAttr { expr, path, .. } => {
                    todo.push((expr, d));
                    todo.extend(names(path).map(|n| (n, d)));
                }
                Ir::With { env, body } => {
                    todo.push((env, d));
                    todo.push((body, d + 1));
                }
                Ir::Assert { cond, body, .. } => {
                    todo.push((cond, d));
                    todo.push((body, d));
                }
                Ir::If {
                    cond, then, else_, ..
                } => {
                    todo.push((cond, d));
                    todo.push((then, d));
                    todo.push((else_, d));
                }
                Ir::Not(e, _) | Ir::Neg(e, _) => todo.push((e, d)),
                Ir::Binary { lhs, rhs, .. } => {
                    todo.push((lhs, d));
                    todo.push((rhs, d));
                }
            }
        }
        false
    }

    /// The variable evaluating this node forces first, before anything
    /// observable happens (a trace, an error, another forcing, a
    /// non-termination): so that evaluating the variable's value earlier, at
    /// the moment its thunk would have been made, cannot be told apart.
    ///
    /// Follows the evaluator's order exactly: an operator's left operand, a
    /// condition, the set a selection or `?` looks into, the function of a
    /// call, the first interpolated part of a string, a `let`'s body (the
    /// bindings are only delayed). Anything else (a `with`, whose set is
    /// forced only by a lookup; a literal; a lambda) forces nothing first.
    pub fn forced_first(&self) -> Option<Forced> {
        // A loop, not recursion: a left-nested chain of operators is as deep
        // as the parser allows, and this runs on the compiler's stack.
        let mut ir = self;
        // How many `let` scopes were entered on the way down.
        let mut lets = 0;
        loop {
            ir = match ir {
                Ir::Var { up, idx, .. } => {
                    // A variable bound by one of those `let`s is not an
                    // argument.
                    return up.checked_sub(lets).map(|up| Forced { up, slot: *idx });
                }
                Ir::SelectVar { general, .. } => general,
                Ir::Select { expr, .. } | Ir::HasAttr { expr, .. } => expr,
                Ir::Call { func, .. } | Ir::Apply { func, .. } => func,
                Ir::If { cond, .. } | Ir::Assert { cond, .. } => cond,
                Ir::Not(e, _) | Ir::Neg(e, _) => e,
                Ir::Binary { lhs, .. } => lhs,
                Ir::Str { parts, .. } => parts.iter().find(|p| !matches!(***p, Ir::Const(_)))?,
                Ir::Let { body, .. } => {
                    lets += 1;
                    body
                }
                _ => return None,
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::rc::Rc;

    use super::super::{EvalSettings, Evaluator};
    use super::Ir;
    use crate::store::MemStore;

    fn compiled(src: &str) -> Rc<Ir> {
        let mut ev = Evaluator::new(EvalSettings::default(), Rc::new(MemStore::new()));
        ev.compile_source("t.nix".into(), None, src.into(), Path::new("/"))
            .unwrap()
    }

    /// What a call of the lambda `src` evaluates at once: the argument,
    /// counted from the lambda's own, its chain's last body forces first.
    fn first(src: &str) -> Option<u32> {
        match &*compiled(src) {
            Ir::Lambda(d) => (d.first != u32::MAX).then_some(d.first),
            _ => panic!("{src}: not a lambda"),
        }
    }

    /// The slot of the `let` binding `src` evaluates when its scope is made.
    fn now(src: &str) -> Option<u32> {
        match &*compiled(src) {
            Ir::Let { now, .. } => now.map(|f| f.slot),
            _ => panic!("{src}: not a let"),
        }
    }

    #[test]
    fn a_lambda_forces_first_what_its_body_evaluates_before_anything_else() {
        for src in [
            "x: x + 1",
            "x: if x then 1 else 2",
            "x: x.a.b or 3",
            "x: x ? a",
            "x: x 1",
            "x: assert x; 1",
            "x: !x",
            "x: -x",
            "x: \"a${x}b\"",
            "x: let y = 1; in x + y",
            "x: (x.f 1) == 2",
        ] {
            assert_eq!(first(src), Some(0), "{src}");
        }
        for src in [
            "x: 1 + x",
            "x: { a = x; }",
            "x: [ x ]",
            "x: y: x",
            "x: with x; a",
            "x: let x = 1; in x",
            "x: if true then x else 0",
            "x: builtins.seq x x",
            "x: \"a${toString 1}${x}\"",
        ] {
            let want = if src == "x: y: x" { Some(0) } else { None };
            assert_eq!(first(src), want, "{src}");
        }
        // A curried chain: counted from the head, for a call of all of it.
        assert_eq!(first("a: b: c: b + a"), Some(1));
        match &*compiled("a: b: c: c") {
            Ir::Lambda(d) => {
                assert_eq!((d.rest, d.first), (3, 2));
                let Ir::Lambda(b) = &*d.body else { panic!() };
                assert_eq!((b.rest, b.first), (2, 1));
            }
            _ => panic!(),
        }
        // An earlier argument of the chain is not the continuation's own.
        match &*compiled("a: b: a + b") {
            Ir::Lambda(d) => {
                let Ir::Lambda(b) = &*d.body else { panic!() };
                assert_eq!(b.first, u32::MAX);
            }
            _ => panic!(),
        }
        // Formals force the whole argument on every call; no slot to name.
        assert_eq!(first("{ a }: a"), None);
    }

    #[test]
    fn a_binding_is_evaluated_at_once_only_when_nothing_else_can_read_it() {
        // Bindings are numbered in name order.
        assert_eq!(now("let t = f 1; f = x: x; in t + 1"), Some(1));
        assert_eq!(now("let t = 1; in let u = 2; in t + u"), Some(0));
        assert_eq!(now("let a = 1; b = a; in b"), Some(1));
        for src in [
            // Read by another binding, by itself, through a set, a lambda,
            // a `rec` set, a chain, a `with`, a nested `let`.
            "let t = a; a = t; in t",
            "let t = { y = t; }; in t.y",
            "let t = x: t; in t 1",
            "let t = 1; s = rec { a = t; }; in t",
            "let t = 1; g = a: b: t; in t",
            "let t = 1; w = with {}; t; in t",
            "let t = 1; l = let u = t; in u; in t",
            "let t = 1; d = { a ? t }: a; in t",
            // Not forced first.
            "let t = 1; in 2",
            "let t = 1; in [ t ]",
            "let t = 1; in 2 + t",
            // A binding of an inner `let`.
            "let t = 1; in let t = 2; in t",
        ] {
            assert_eq!(now(src), None, "{src}");
        }
    }
}
