//! Function application: lambdas (their argument scopes, formals, curried
//! chains sharing one scope, the pool of emptied scopes), builtins (partial
//! applications, full calls), `__functor` sets, and the call-depth limit and
//! interrupt check every call passes. It must not evaluate anything but the
//! body it enters (`Evaluator::eval`, or `direct::eval` for a body that
//! needs no scope) and the arguments it is handed.

use std::rc::Rc;

use super::direct;
use super::error::{self, ErrorExt};
use super::ir::{Env, Ir, IrParam, LambdaDef, Pos, Slots, SLOTS_INLINE};
use super::raised::{raise, RResult};
use super::{EResult, ErrorKind, EvalError, Evaluator, GROW_EVERY, INTERRUPT_EVERY, SCOPE_POOL};
use crate::value::{Args, Closure, PrimOpApp, Value};

/// Where [`Evaluator::apply_args`] takes a call's arguments from.
pub(super) trait ArgSource {
    /// The `i`-th argument, unevaluated.
    fn delayed(&mut self, ev: &mut Evaluator, i: usize) -> Value;
    /// The `i`-th argument, which the callee forces before anything else:
    /// its value, evaluated now where that saves a thunk. When that fails,
    /// a thunk raising the same error ([`super::replay`]): the callee forces it
    /// first, so the error reaches the caller through the same frames as a
    /// thunk of the expression would have.
    fn forced_first(&mut self, ev: &mut Evaluator, i: usize) -> Value {
        self.delayed(ev, i)
    }
}

/// The arguments of a call spine, expressions in `env`.
struct SpineArgs<'a> {
    args: &'a [Rc<Ir>],
    env: &'a Env,
}

impl ArgSource for SpineArgs<'_> {
    #[inline(always)]
    fn delayed(&mut self, ev: &mut Evaluator, i: usize) -> Value {
        ev.delay(&self.args[i], self.env)
    }
    #[inline(always)]
    fn forced_first(&mut self, ev: &mut Evaluator, i: usize) -> Value {
        match ev.eval_forced_first(&self.args[i], self.env) {
            Ok(v) => v,
            Err(e) => super::replay(e),
        }
    }
}

/// Arguments that are values already (a builtin's callback).
struct Given<F>(F);

impl<F: FnMut(usize) -> Value> ArgSource for Given<F> {
    #[inline(always)]
    fn delayed(&mut self, _: &mut Evaluator, i: usize) -> Value {
        (self.0)(i)
    }
}

impl Evaluator {
    /// Applies `f` to `arg`, adding `pos` to errors as the call site.
    pub fn call_at(&mut self, f: &Value, arg: Value, pos: Pos) -> RResult<Value> {
        self.call(f, arg).at_pos(pos)
    }

    /// Applies `f` to the arguments of a call spine (delayed in `env`).
    pub(super) fn apply_spine(
        &mut self,
        f: Value,
        args: &[Rc<Ir>],
        env: &Env,
        pos: Pos,
    ) -> RResult<Value> {
        self.apply_args(f, args.len(), SpineArgs { args, env }, Some(pos))
    }

    /// Applies `f` to `n` arguments, taken from `arg` ([`ArgSource`]). A curried
    /// lambda chain (`a: b: …`) gets its scopes built directly, and a builtin
    /// gets all its arguments at once, so neither allocates intermediate
    /// closures or partial applications.
    ///
    /// An argument the callee forces before it does anything else
    /// ([`LambdaDef::forces`], a lambda with formals, a type predicate) is
    /// taken with [`ArgSource::forced_first`], which may evaluate it at once
    /// rather than delay it: nothing can tell that apart but the thunk saved
    /// (and its scope, which the thunk would have kept from the pool). Its
    /// errors get the frames the callee would have added forcing it.
    pub(super) fn apply_args(
        &mut self,
        mut f: Value,
        n: usize,
        mut arg: impl ArgSource,
        pos: Option<Pos>,
    ) -> RResult<Value> {
        let at = |r: RResult<Value>| match pos {
            Some(p) => r.at_pos(p),
            None => r,
        };
        let mut i = 0;
        while i < n {
            match &f {
                Value::Lambda(c) if matches!(c.def.param, IrParam::Ident(_)) => {
                    // The argument the chain's last body forces first, when
                    // this call reaches that body.
                    let now = if n - i >= c.def.rest as usize {
                        i + c.def.first as usize
                    } else {
                        usize::MAX
                    };
                    let rest = c.def.rest as usize;
                    if c.def.direct && !c.def.extends && rest <= 2 && n - i >= rest {
                        // The whole chain of one or two lambdas, its body
                        // direct: its arguments taken first, tried before
                        // any scope is made.
                        let mut take = |ev: &mut Evaluator, k: usize| {
                            if k == now {
                                arg.forced_first(ev, k)
                            } else {
                                arg.delayed(ev, k)
                            }
                        };
                        let r = if rest == 1 {
                            let a = take(self, i);
                            self.call_chain(c, &c.def, [a])
                        } else {
                            let Ir::Lambda(d) = &*c.def.body else {
                                unreachable!("a chain of two lambdas")
                            };
                            let a = take(self, i);
                            let b = take(self, i + 1);
                            self.call_chain(c, d, [a, b])
                        };
                        i += rest;
                        f = at(r)?;
                        continue;
                    }
                    let a = if i == now {
                        arg.forced_first(self, i)
                    } else {
                        arg.delayed(self, i)
                    };
                    i += 1;
                    // Borrowed, not cloned: the lambdas of a curried chain
                    // live in `c`, which `f` keeps alive until it is replaced.
                    let mut def = &c.def;
                    let scope = self.ident_scope(c, a);
                    // The rest of the chain's arguments go into the same scope:
                    // it was made just now and nothing else can see it yet.
                    while i < n {
                        let next = match &*def.body {
                            Ir::Lambda(d) if d.extends => d,
                            _ => break,
                        };
                        let a = if i == now {
                            arg.forced_first(self, i)
                        } else {
                            arg.delayed(self, i)
                        };
                        i += 1;
                        scope.push(a);
                        def = next;
                    }
                    let r = self.enter(def, &scope);
                    self.recycle_scope(scope);
                    f = at(r)?;
                }
                Value::PrimOp(app) if app.op.tests.is_some() && app.args.is_empty() => {
                    // A type predicate: answered here, as `f` would answer it.
                    let op = app.op;
                    let a = arg.forced_first(self, i);
                    i += 1;
                    let r = self
                        .forced_type(&a)
                        .map(|found| Value::bool(Some(found) == op.tests));
                    a.discard();
                    f = at(r.builtin_frame(op.name))?;
                }
                Value::PrimOp(app) if app.args.len() + (n - i) >= app.op.arity => {
                    let need = app.op.arity - app.args.len();
                    let mut v = Args::new();
                    // A push per argument: `extend` is an out-of-line call
                    // costing more than the (at most two) clones.
                    for x in app.args.iter() {
                        v.push(x.clone());
                    }
                    for k in i..i + need {
                        v.push(arg.delayed(self, k));
                    }
                    i += need;
                    f = at(self.call_primop(app.op, v))?;
                }
                Value::Thunk(_) => f = self.force_owned(f)?,
                _ => {
                    // A lambda with formals forces its argument first of all.
                    let now = matches!(&f, Value::Lambda(c)
                        if matches!(c.def.param, IrParam::Formals { .. }));
                    let a = if now {
                        arg.forced_first(self, i)
                    } else {
                        arg.delayed(self, i)
                    };
                    i += 1;
                    f = at(self.call(&f, a))?;
                }
            }
        }
        Ok(f)
    }

    /// Fails with [`ErrorKind::Interrupted`] when [`Evaluator::interrupt`] is raised.
    #[cold]
    pub(super) fn check_interrupt(&self, pos: Pos) -> EResult<()> {
        match &self.interrupt {
            Some(flag) if flag.load(std::sync::atomic::Ordering::Relaxed) => Err(EvalError::at(
                ErrorKind::Interrupted,
                "interrupted by the user".to_string(),
                pos,
            )),
            _ => Ok(()),
        }
    }

    /// A builtin (`app`, with the arguments it already has) applied to one
    /// more: called when that completes its arity, else a longer partial
    /// application.
    pub(super) fn call_primop_app(&mut self, app: &PrimOpApp, arg: Value) -> RResult<Value> {
        let mut args = Args::new();
        for x in app.args.iter() {
            args.push(x.clone());
        }
        args.push(arg);
        if args.len() == app.op.arity {
            self.call_primop(app.op, args)
        } else {
            Ok(Value::PrimOp(Rc::new(PrimOpApp { op: app.op, args })))
        }
    }

    /// Runs a builtin on its full argument list and forces the result.
    pub(super) fn call_primop(
        &mut self,
        op: &'static crate::value::PrimOp,
        args: Args,
    ) -> RResult<Value> {
        let r = (op.f)(self, args).builtin_frame(op.name)?;
        self.force_owned(r)
    }

    /// Evaluates a lambda's body in its argument scope: counts the call depth,
    /// grows the native stack when needed, and adds the "while calling" frame.
    pub(super) fn enter(&mut self, def: &Rc<LambdaDef>, scope: &Env) -> RResult<Value> {
        self.calls = self.calls.wrapping_add(1);
        if self.calls.is_multiple_of(INTERRUPT_EVERY) {
            self.check_interrupt(def.pos)?;
        }
        self.call_depth += 1;
        if self.call_depth > self.settings.max_call_depth {
            self.call_depth -= 1;
            return raise(EvalError::at(
                ErrorKind::CallDepth {
                    limit: self.settings.max_call_depth,
                },
                format!(
                    "stack overflow; max-call-depth exceeded ({}); raise it with --max-call-depth",
                    self.settings.max_call_depth
                ),
                def.pos,
            ));
        }
        // `nested`, written out so `eval` is inlined here on the common path.
        self.nest += 1;
        let r = if self.nest.is_multiple_of(GROW_EVERY) {
            self.nested_grow(|ev| ev.eval(&def.body, scope))
        } else {
            self.eval(&def.body, scope)
        };
        self.nest -= 1;
        self.call_depth -= 1;
        r.frame(Some(def.pos), || match &*def.name.borrow() {
            Some(n) => format!("while calling '{n}'"),
            None => "while calling anonymous lambda".to_string(),
        })
    }

    /// Applies a function value to one argument and forces the result.
    pub fn call(&mut self, f: &Value, arg: Value) -> RResult<Value> {
        if let Value::Lambda(c) = f {
            return self.call_lambda(c, arg);
        }
        if let Value::PrimOp(app) = f {
            return self.call_primop_app(app, arg);
        }
        let f = self.force(f)?;
        match &f {
            Value::Lambda(c) => self.call_lambda(c, arg),
            Value::PrimOp(app) => self.call_primop_app(app, arg),
            Value::Attrs(a) if a.contains(crate::sym::known().functor) => {
                let functor = a
                    .get(crate::sym::known().functor)
                    .cloned()
                    .unwrap_or(Value::Null);
                let inner = self.call(&functor, f.clone())?;
                self.call(&inner, arg)
            }
            other => raise(EvalError::new(
                ErrorKind::Type,
                format!(
                    "attempt to call something which is not a function but {}",
                    self.describe_value(other)
                ),
            )),
        }
    }

    /// Applies `f` to several arguments in turn.
    pub fn call_n(&mut self, f: &Value, args: impl IntoIterator<Item = Value>) -> RResult<Value> {
        let args: smallvec::SmallVec<[Value; 4]> = args.into_iter().collect();
        let r = self.apply_args(
            f.clone(),
            args.len(),
            Given(|i: usize| args[i].clone()),
            None,
        )?;
        self.force_owned(r)
    }

    /// `f a b`, the common shape of callbacks (`sort`, `foldl'`, `mapAttrs`).
    pub fn call2(&mut self, f: &Value, a: Value, b: Value) -> RResult<Value> {
        // `a: b: …`, the usual callback: one scope holding both, entered
        // directly, without the generic spine's clone of `f` and its argument
        // closure (about 40 instructions a call in a sort by a comparator).
        if let Value::Lambda(c) = f {
            if let (IrParam::Ident(_), Ir::Lambda(d)) = (&c.def.param, &*c.def.body) {
                if d.extends {
                    // The whole chain, its body direct: tried on the two
                    // arguments as they are, before any scope is made.
                    if c.def.direct && c.def.rest == 2 && !c.def.extends {
                        return self.call_chain(c, d, [a, b]);
                    }
                    let scope = self.ident_scope(c, a);
                    scope.push(b);
                    let r = self.enter(d, &scope);
                    self.recycle_scope(scope);
                    return r;
                }
            }
        }
        let mut args = [Some(a), Some(b)];
        let r = self.apply_args(
            f.clone(),
            2,
            Given(|i: usize| args[i].take().unwrap_or(Value::Null)),
            None,
        )?;
        self.force_owned(r)
    }

    /// Calls the chain `c` whose last lambda is `def` (`c.def` itself for a
    /// chain of one), with all its arguments, `args`: its direct body
    /// ([`LambdaDef::direct`]) evaluated on them where they are, or, when
    /// that declines, the body entered in a scope holding them.
    #[inline(always)]
    fn call_chain<const N: usize>(
        &mut self,
        c: &Closure,
        def: &Rc<LambdaDef>,
        args: [Value; N],
    ) -> RResult<Value> {
        let inputs = direct::Inputs {
            args: &args,
            parent: &c.env,
        };
        if let Some(v) = direct::eval(&def.body, &inputs) {
            for a in args {
                a.release();
            }
            // Counted as `enter` counts the calls it makes (those declined
            // here included), so that an evaluation made of direct calls
            // alone (a fold, a sort) still sees an interrupt.
            self.calls = self.calls.wrapping_add(1);
            if self.calls.is_multiple_of(INTERRUPT_EVERY) {
                self.check_interrupt(def.pos)?;
            }
            return Ok(v);
        }
        let mut args = args.into_iter();
        let scope = self.ident_scope(c, args.next().expect("a chain has an argument"));
        for a in args {
            scope.push(a);
        }
        let r = self.enter(def, &scope);
        self.recycle_scope(scope);
        r
    }

    pub(super) fn call_lambda(&mut self, c: &Rc<Closure>, arg: Value) -> RResult<Value> {
        if c.def.direct && c.def.rest == 1 && !c.def.extends {
            return self.call_chain(c, &c.def, [arg]);
        }
        let scope = self.bind_args(c, arg)?;
        let r = self.enter(&c.def, &scope);
        self.recycle_scope(scope);
        r
    }

    /// The scope the body of `x: …` (closure `c`) runs in with `arg`: a new
    /// one-slot scope over the closure's, or, for a lambda continuing a curried
    /// chain ([`LambdaDef::extends`]), a copy of the closure's scope (the
    /// chain's earlier arguments) with `arg` pushed, over the same parent.
    #[inline]
    pub(super) fn ident_scope(&mut self, c: &Closure, arg: Value) -> Env {
        if !c.def.extends {
            return self.arg_scope(&c.env, arg);
        }
        // The copy is made a push at a time (`SmallVec`'s `clone` is an
        // out-of-line `extend`, 60 instructions for one value), into a pooled
        // scope when it fits inline.
        let src = c.env.0.slots.borrow();
        let fill = |slots: &mut Slots| {
            for v in src.iter() {
                slots.push(v.clone());
            }
            slots.push(arg);
        };
        let parent = c.env.0.parent.as_ref();
        let fill = match parent {
            Some(p) if src.len() < SLOTS_INLINE => match self.pooled_scope(p, fill) {
                Ok(env) => return env,
                Err(fill) => fill,
            },
            _ => fill,
        };
        let mut slots = Slots::with_capacity(src.len() + 1);
        fill(&mut slots);
        Env::new(parent, slots)
    }

    /// The one-slot scope a lambda `x: …` runs in, over `parent`; reuses a
    /// pooled allocation when there is one.
    #[inline]
    pub(super) fn arg_scope(&mut self, parent: &Env, arg: Value) -> Env {
        match self.pooled_scope(parent, |slots| slots.push(arg)) {
            Ok(env) => env,
            Err(fill) => {
                let mut slots = Slots::new();
                fill(&mut slots);
                Env::new(Some(parent), slots)
            }
        }
    }

    /// The empty scope a lambda with formals runs in, over `parent`, with room
    /// for `n` slots: a pooled one when they fit inline (two formals, or one
    /// and `@`), else a new one.
    #[inline]
    fn formals_scope(&mut self, parent: &Env, n: usize) -> Env {
        if n <= SLOTS_INLINE {
            if let Ok(env) = self.pooled_scope(parent, |_| ()) {
                return env;
            }
        }
        Env::new(Some(parent), Slots::with_capacity(n))
    }

    /// A scope from the pool over `parent`, its (inline) slots filled by
    /// `fill`; `fill` back when the pool has none to give.
    #[inline(always)]
    fn pooled_scope<F: FnOnce(&mut Slots)>(&mut self, parent: &Env, fill: F) -> Result<Env, F> {
        let Some(mut rc) = self.scope_pool.pop() else {
            return Err(fill);
        };
        // Pooled scopes are unique, empty and parentless.
        let Some(inner) = Rc::get_mut(&mut rc) else {
            return Err(fill);
        };
        inner.parent = Some(parent.clone());
        fill(inner.slots.get_mut());
        Ok(Env(rc))
    }

    /// Called when a call's scope is done with: if nothing captured it (no
    /// closure or thunk holds it), empties it into the pool instead of freeing
    /// it. Its parent, the closure's scope, is kept alive by the closure, so
    /// it is not tried (a curried chain's arguments share one scope).
    #[inline]
    pub(super) fn recycle_scope(&mut self, scope: Env) {
        let mut rc = scope.0;
        if self.scope_pool.len() >= SCOPE_POOL {
            return;
        }
        let Some(inner) = Rc::get_mut(&mut rc) else {
            return;
        };
        let slots = inner.slots.get_mut();
        if slots.spilled() {
            return;
        }
        // Emptied a value at a time, each dropped with its variant's drop
        // inlined (`Value::release`), not through `clear`'s generic drops.
        while let Some(v) = slots.pop() {
            v.release();
        }
        inner.parent = None;
        self.scope_pool.push(rc);
    }

    /// Builds the scope a lambda's body runs in: the argument, or the formals
    /// matched against the argument set (with defaults and `@`).
    pub(super) fn bind_args(&mut self, c: &Rc<Closure>, arg: Value) -> RResult<Env> {
        let def = &c.def;
        match &def.param {
            IrParam::Ident(_) => Ok(self.ident_scope(c, arg)),
            IrParam::Formals {
                formals,
                ellipsis,
                at,
                ..
            } => {
                let forced = self.force(&arg)?;
                let Value::Attrs(attrs) = &forced else {
                    return raise(EvalError::at(
                        ErrorKind::Type,
                        format!("expected a set but found {}", self.describe_value(&forced)),
                        def.pos,
                    ));
                };
                let fname = || match &*def.name.borrow() {
                    Some(n) => format!("function '{n}'"),
                    None => "function 'anonymous lambda'".to_string(),
                };
                if !*ellipsis {
                    for k in attrs.keys() {
                        if !formals.iter().any(|(n, _)| n == k) {
                            let mut msg =
                                format!("{} called with unexpected argument '{k}'", fname());
                            if let Some(s) =
                                error::did_you_mean(k, formals.iter().map(|(n, _)| n.as_str()))
                            {
                                msg.push_str(&format!("; did you mean '{s}'?"));
                            }
                            return raise(EvalError::at(ErrorKind::Type, msg, def.pos));
                        }
                    }
                }
                let env = self.formals_scope(&c.env, formals.len() + usize::from(at.is_some()));
                let mut defaults = Vec::new();
                for (i, (name, default)) in formals.iter().enumerate() {
                    match attrs.get(name) {
                        Some(v) => env.push(v.clone()),
                        None => match default {
                            Some(d) => {
                                env.push(Value::Null);
                                defaults.push((i, d));
                            }
                            None => {
                                return raise(EvalError::at(
                                    ErrorKind::Type,
                                    format!(
                                        "{} called without required argument '{name}'",
                                        fname()
                                    ),
                                    def.pos,
                                ))
                            }
                        },
                    }
                }
                for (i, d) in defaults {
                    let v = self.delay_in_new_scope(d, &env);
                    env.set(i as u32, v);
                }
                if at.is_some() {
                    env.push(forced.clone());
                }
                Ok(env)
            }
        }
    }
}
