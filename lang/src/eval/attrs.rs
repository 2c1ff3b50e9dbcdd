//! Attribute sets in the evaluator: building a set literal (a `rec` set's
//! scope, dynamic names, `__overrides`), the scope of a `let`, selection
//! (`a.b.c`, `or` defaults) and `?`, and the peek at a selection from sets
//! already evaluated, shared by `delay` and the compiler's constant folding.
//!
//! It must not force what Nix leaves lazy: attribute values are delayed, and
//! the peek only reads values already evaluated, never running a thunk.

use std::rc::Rc;

use super::ir::*;
use super::raised::{raise, RResult};
use super::{error, forced, CoerceMode, ErrorExt, ErrorKind, EvalError, Evaluator};
use crate::value::{Attrs, Sym, Thunk, ThunkState, Value};

impl Evaluator {
    /// The new scope of a `rec` set, a `let` or a set with `inherit (e)`
    /// sources ([`AttrsDef::needs_env`]): for `rec`/`let` one slot per static
    /// binding (null until set), then each source, delayed in the scope.
    fn new_scope(&mut self, def: &AttrsDef, env: &Env) -> Env {
        let n = if def.rec { def.statics.len() } else { 0 } + def.hidden.len();
        let scope = Env::new(Some(env), Slots::with_capacity(n));
        if def.rec {
            for _ in 0..def.statics.len() {
                scope.push(Value::Null);
            }
        }
        for h in &def.hidden {
            let v = self.delay_in_new_scope(h, &scope);
            scope.push(v);
        }
        scope
    }

    /// The scope of `let … in`: one slot per binding (then the `inherit (e)`
    /// sources), each delayed in the scope itself. No attribute set is built,
    /// and `__overrides` is an ordinary name here, as in Nix (only a `rec`
    /// set's, or a legacy `let { … }`'s, is applied). The parser refuses
    /// dynamic names in a `let`, so there are none.
    ///
    /// `now` is the binding the body forces first, when no binding reads it
    /// ([`Ir::strict_binding`]): evaluated here, once every other slot is
    /// filled; if that fails, its slot gets a thunk raising the error again
    /// ([`super::replay`]), which the body forces first.
    pub(super) fn let_scope(&mut self, def: &AttrsDef, env: &Env, now: Option<Forced>) -> Env {
        debug_assert!(def.rec && def.dynamics.is_empty());
        let scope = self.new_scope(def, env);
        let skip = now.map_or(u32::MAX, |f| f.slot);
        for (i, a) in def.statics.iter().enumerate() {
            if i as u32 != skip {
                let v = self.delay_in_new_scope(&a.value, &scope);
                scope.set(i as u32, v);
            }
        }
        if let Some(f) = now {
            let ir = &def.statics[f.slot as usize].value;
            let v = match self.nested(|ev| ev.eval(ir, &scope)) {
                Ok(v) => v,
                Err(e) => super::replay(e),
            };
            scope.set(f.slot, v);
        }
        scope
    }

    /// Builds a plain set literal ([`AttrsDef::is_plain`]): its values
    /// delayed in `env`, which is still being filled when `in_new_scope`
    /// (see [`Evaluator::delay_in_new_scope`]).
    pub(super) fn plain_attrs(
        &mut self,
        def: &AttrsDef,
        env: &Env,
        in_new_scope: bool,
    ) -> Rc<Attrs> {
        let entries: Vec<crate::value::attrs::Entry> = def
            .statics
            .iter()
            .map(|a| {
                let v = if in_new_scope {
                    self.delay_in_new_scope(&a.value, env)
                } else {
                    self.delay(&a.value, env)
                };
                (a.name, v, a.pos.into())
            })
            .collect();
        // The compiler sorted the statics by name (`compile_tree_with_body`).
        Rc::new(Attrs::from_sorted_pos(entries))
    }

    /// Builds a list literal: its items delayed in `env`, the careful way
    /// when `in_new_scope` (as [`Self::plain_attrs`]).
    pub(super) fn plain_list(&mut self, items: &[Rc<Ir>], env: &Env, in_new_scope: bool) -> Value {
        let v: Vec<Value> = items
            .iter()
            .map(|i| {
                if in_new_scope {
                    self.delay_in_new_scope(i, env)
                } else {
                    self.delay(i, env)
                }
            })
            .collect();
        Value::List(Rc::new(v))
    }

    /// Builds the set; a `rec` set's values close over its new scope.
    pub(super) fn eval_attrs(&mut self, def: &Rc<AttrsDef>, env: &Env) -> RResult<Rc<Attrs>> {
        if def.is_plain() {
            return Ok(self.plain_attrs(def, env, false));
        }
        let scope = if def.needs_env() {
            self.new_scope(def, env)
        } else {
            env.clone()
        };
        let mut entries: Vec<crate::value::attrs::Entry> =
            Vec::with_capacity(def.statics.len() + def.dynamics.len());
        let overridable = def.rec && def.statics.iter().any(|a| a.name == "__overrides");
        for (i, a) in def.statics.iter().enumerate() {
            let v = if overridable {
                // `__overrides` may replace any slot later: read nothing now.
                match &*a.value {
                    Ir::Const(c) => c.clone(),
                    _ => Value::Thunk(Thunk::new(ThunkState::Suspended(
                        a.value.clone(),
                        scope.clone(),
                    ))),
                }
            } else if def.needs_env() {
                self.delay_in_new_scope(&a.value, &scope)
            } else {
                self.delay(&a.value, &scope)
            };
            if def.rec {
                scope.set(i as u32, v.clone());
            }
            entries.push((a.name, v, a.pos.into()));
        }
        // The compiler sorted the statics by name (`compile_tree_with_body`).
        let mut attrs = Attrs::from_sorted_pos(entries);
        for (k, v, pos) in &def.dynamics {
            let key = self.eval(k, &scope)?;
            let key = match key {
                Value::Null => continue,
                Value::String(s) => Sym::new(s.as_str()),
                other => {
                    return raise(EvalError::at(
                        ErrorKind::Type,
                        format!(
                            "expected a string but found {}",
                            self.describe_value(&other)
                        ),
                        *pos,
                    ))
                }
            };
            if attrs.contains(key) {
                return raise(EvalError::at(
                    ErrorKind::Eval,
                    format!("dynamic attribute '{key}' already defined"),
                    *pos,
                ));
            }
            let val = self.delay(v, &scope);
            attrs.insert_pos(key, val, *pos);
        }
        // `rec { __overrides = { … }; }` replaces attributes, in the scope too.
        if def.rec {
            if let Some(ov) = attrs.get("__overrides").cloned() {
                let ov = self.expect_attrs(&ov).at_pos(def.pos)?;
                {
                    for (k, v) in ov.iter() {
                        if let Some(i) = def.statics.iter().position(|a| &a.name == k) {
                            scope.set(i as u32, v.clone());
                        }
                        attrs.insert(*k, v.clone());
                    }
                }
            }
        }
        Ok(Rc::new(attrs))
    }

    /// The name an attribute path element stands for; static names (nearly
    /// all) are a copy, so only dynamic ones leave the inlined path.
    #[inline]
    fn attr_name(&mut self, n: &IrAttrName, env: &Env) -> RResult<Sym> {
        match n {
            IrAttrName::Static(s) => Ok(*s),
            IrAttrName::Dynamic(ir) => self.dynamic_attr_name(ir, env),
        }
    }

    fn dynamic_attr_name(&mut self, ir: &Ir, env: &Env) -> RResult<Sym> {
        let v = self.eval(ir, env)?;
        let s = self.coerce_to_string(&v, CoerceMode::Interpolation)?;
        Ok(Sym::new(s.as_str()))
    }

    /// The value of attribute `name` a selection at `pos` found, forced, with
    /// the "while evaluating the attribute" frame when forcing fails.
    #[inline(always)]
    pub(super) fn force_attr(&mut self, v: Value, name: Sym, pos: Pos) -> RResult<Value> {
        self.force_owned(v).frame(Some(pos), || {
            format!("while evaluating the attribute '{name}'")
        })
    }

    pub(super) fn eval_select(
        &mut self,
        expr: &Rc<Ir>,
        path: &[IrAttrName],
        default: Option<&Rc<Ir>>,
        env: &Env,
        pos: Pos,
    ) -> RResult<Value> {
        if let Some((name, found)) = select_in_place(expr, path, env) {
            match found {
                Some(v) => return self.force_attr(v, name, pos),
                None => {
                    if let Some(d) = default {
                        return self.eval(d, env);
                    }
                    // Missing: the general path below reports it.
                }
            }
        }
        self.eval_select_general(expr, path, default, env, pos)
    }

    /// [`Self::eval_select`] without its first look into the variable's
    /// slot: evaluates `expr`, then each step of the path. Where
    /// [`Ir::SelectVar`] found nothing evaluated to read, it comes here.
    pub(super) fn eval_select_general(
        &mut self,
        expr: &Rc<Ir>,
        path: &[IrAttrName],
        default: Option<&Rc<Ir>>,
        env: &Env,
        pos: Pos,
    ) -> RResult<Value> {
        let mut cur = self.eval(expr, env)?;
        for (i, n) in path.iter().enumerate() {
            let name = self.attr_name(n, env).at_pos(pos)?;
            let next = match &cur {
                Value::Attrs(a) => a.get(name).map(read_through),
                _ if default.is_some() => None,
                other => {
                    return raise(EvalError::at(
                        ErrorKind::Type,
                        format!(
                            "expected a set but found {} while selecting attribute '{name}'",
                            self.describe_value(other)
                        ),
                        pos,
                    ))
                }
            };
            match next {
                Some(v) => cur = self.force_attr(v, name, pos)?,
                None => {
                    if let Some(d) = default {
                        return self.eval(d, env);
                    }
                    let Value::Attrs(a) = &cur else {
                        unreachable!("non-sets handled above")
                    };
                    let hint = error::did_you_mean(&name, a.keys().map(|k| k.as_str()));
                    let _ = i;
                    return raise(EvalError::missing_attribute(&name, hint)).at_pos(pos);
                }
            }
        }
        Ok(cur)
    }

    pub(super) fn eval_has_attr(
        &mut self,
        expr: &Rc<Ir>,
        path: &[IrAttrName],
        env: &Env,
        pos: Pos,
    ) -> RResult<bool> {
        let mut cur = self.eval(expr, env)?;
        for (i, n) in path.iter().enumerate() {
            let name = self.attr_name(n, env).at_pos(pos)?;
            match &cur {
                Value::Attrs(a) => match a.get(name) {
                    Some(v) => {
                        if i + 1 < path.len() {
                            cur = self.force(&v.clone())?;
                        }
                    }
                    None => return Ok(false),
                },
                _ => return Ok(false),
            }
        }
        Ok(true)
    }
}

/// `x.a` where `x` is a variable holding an evaluated set: the name and the
/// attribute's value (`None` when the set has none), read with the set borrowed in
/// its slot, not cloned out and dropped again. `None` when the shape or the
/// variable's value does not allow it (the general path then evaluates).
#[inline]
fn select_in_place(expr: &Ir, path: &[IrAttrName], env: &Env) -> Option<(Sym, Option<Value>)> {
    let (Ir::Var { up, idx, .. }, [IrAttrName::Static(name)]) = (expr, path) else {
        return None;
    };
    slot_lookup(env, *up, *idx, *name).map(|found| (*name, found))
}

/// Looks `name` up in the set slot `idx`, `up` scopes out, holds, with the
/// set borrowed in its slot: `None` when the slot does not hold an evaluated
/// set (itself or as a forced thunk), `Some(None)` when the set has no such
/// name, else the value as the set holds it (a forced thunk read through).
#[inline(always)]
fn slot_lookup(env: &Env, up: u32, idx: u32, name: Sym) -> Option<Option<Value>> {
    let slots = env.ancestor(up).0.slots.borrow();
    let set = evaluated_set(slots.as_slice().get(idx as usize)?)?;
    Some(set.get(name).map(read_through))
}

/// The set `v` is when it is an evaluated one: itself, or the value of a
/// forced thunk. Shared with direct evaluation (`direct.rs`).
#[inline(always)]
pub(super) fn evaluated_set(v: &Value) -> Option<&Attrs> {
    match v {
        Value::Attrs(a) => Some(a),
        Value::Thunk(t) => match t.value_ref()? {
            Value::Attrs(a) => Some(a),
            _ => None,
        },
        _ => None,
    }
}

/// [`Ir::SelectVar`]'s answer without evaluating: the attribute `name` of the
/// set in slot `idx`, `up` scopes out, when the slot holds an evaluated set
/// (itself or as a forced thunk) and the attribute's value is evaluated.
/// `None` otherwise (the general selection then runs; a scope still being
/// filled may not have the slot yet).
#[inline(always)]
pub(super) fn select_var_evaluated(env: &Env, up: u32, idx: u32, name: Sym) -> Option<Value> {
    // `select_var` read a forced thunk through already: a thunk here is not
    // evaluated.
    match select_var(env, up, idx, name)? {
        Value::Thunk(_) => None,
        v => Some(v),
    }
}

/// The attribute `name` of the set in slot `idx`, `up` scopes out, as the set
/// holds it (a thunk forced already is read through): `None` when the slot
/// does not hold an evaluated set or the set has no such name.
#[inline(always)]
pub(super) fn select_var(env: &Env, up: u32, idx: u32, name: Sym) -> Option<Value> {
    slot_lookup(env, up, idx, name).flatten()
}

/// A set's value as a selection hands it on: a thunk already forced is read
/// through to its value, so the caller neither clones and drops the thunk
/// nor goes through `force_thunk` for it. (A set's entries are shared and
/// cannot take the forced value in place, as a variable's slot does.)
#[inline(always)]
fn read_through(v: &Value) -> Value {
    match v {
        Value::Thunk(t) => match t.value_ref() {
            Some(v) => v.clone(),
            None => v.clone(),
        },
        v => v.clone(),
    }
}

/// The value `expr.a.b` selects, when `expr` is a variable and every step is
/// already evaluated: a set holding the name, down to a final value that is
/// itself evaluated. Selecting then cannot fail, diverge or add an error
/// frame, so taking the value now is indistinguishable from a thunk for the
/// selection (`f cfg.contents`), and saves it. `None` (make the thunk) for
/// anything else, dynamic names included.
#[inline]
pub(super) fn peek_select(expr: &Ir, path: &[IrAttrName], env: &Env) -> Option<Value> {
    let Ir::Var { up, idx, .. } = expr else {
        return None;
    };
    // A scope still being filled may not have the slot yet (`@args` is
    // pushed after the formals' defaults are made).
    let root = forced(env.ancestor(*up).0.slots.borrow().get(*idx as usize)?)?;
    select_evaluated(root, path)
}

/// `v.a.b` when every step is a static name of a set already evaluated, down
/// to an evaluated value; `None` otherwise. Shared by [`peek_select`] (at run
/// time) and the compiler's folding of selections from constant sets.
#[inline]
pub(crate) fn select_evaluated(v: Value, path: &[IrAttrName]) -> Option<Value> {
    let mut cur = v;
    for n in path {
        let IrAttrName::Static(name) = n else {
            return None;
        };
        let Value::Attrs(a) = &cur else {
            return None;
        };
        let next = forced(a.get(*name)?)?;
        cur = next;
    }
    Some(cur)
}
