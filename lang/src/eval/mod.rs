//! The lazy evaluator: call-by-need interpretation of the IR.
//!
//! Owns the [`Evaluator`] and its settings, forcing thunks (with blackholing, so
//! infinite recursion is an error that names the place), delaying expressions
//! (computing what is already known instead of making a thunk), the dispatch
//! over the IR and `with` lookup. Attribute sets, `let` scopes and selections are
//! in `attrs.rs`; compiling sources, imports and which paths may be read in
//! `import.rs`; function application and the call-depth limit in `call.rs`.
//! Deep recursion never overflows the native stack: evaluation grows its stack
//! on the heap (`stacker`) and stops cleanly past `--max-call-depth`. It must not
//! print (the CLI does) nor write to the store except through
//! [`crate::store::EvalStore`].

mod attrs;
mod call;
pub mod compile;
mod direct;
mod dispatch;
pub mod error;
mod import;
pub mod ir;
mod ops;
pub mod raised;
mod strict;

use std::collections::HashMap;
use std::path::PathBuf;
use std::rc::Rc;

pub(crate) use attrs::select_evaluated;
pub use error::{EResult, ErrorExt, ErrorKind, EvalError, Frame, SourceMap};
pub(crate) use ops::show_value;
pub use ops::CoerceMode;
pub use raised::{raise, RResult, Raised};

use crate::store::EvalStore;
use crate::value::{Closure, NixString, Sym, Thunk, ThunkState, Value};
use attrs::peek_select;
use compile::Lints;
use ir::*;

/// Stack headroom kept free before growing onto a new heap segment. It must
/// hold [`GROW_EVERY`] levels of calls and thunk forcings.
const RED_ZONE: usize = 1024 * 1024;
/// The stack is checked every this many nested calls/forcings, not at each one.
const GROW_EVERY: u32 = 16;
/// Size of each new stack segment.
const STACK_CHUNK: usize = 8 * 1024 * 1024;
/// How many emptied argument scopes are kept for reuse (see
/// [`Evaluator::recycle_scope`]).
const SCOPE_POOL: usize = 256;

/// Options that shape an evaluation; all explicit, none read behind the user's back.
#[derive(Clone, Debug)]
pub struct EvalSettings {
    /// `-I`, `ROCMX_PATH`, `NIX_PATH` entries: `(prefix, path)`; an empty prefix
    /// means "search inside this directory".
    pub search_path: Vec<(String, String)>,
    pub max_call_depth: usize,
    pub lints: Lints,
    /// `builtins.currentSystem`.
    pub system: String,
    /// Whether `builtins.getEnv`, `currentTime` etc. see the real world.
    pub impure: bool,
    /// `--extra-experimental-features` given on the command line (e.g.
    /// `parse-toml-timestamps`).
    pub experimental_features: Vec<String>,
    /// Nix's `abort-on-warn`: `builtins.warn` (and so `lib.warn`) and the lints'
    /// warnings are errors.
    pub abort_on_warn: bool,
    /// Nix's `restrict-eval`: only files below the search path's directories and
    /// the store may be read, imported or copied.
    pub restrict_eval: bool,
    /// Nix's `allow-import-from-derivation`: reading or importing a path that
    /// refers to a derivation's output. rocmx never builds during evaluation, so
    /// with it such a path must already be built; without it, it is refused.
    pub allow_import_from_derivation: bool,
}

impl Default for EvalSettings {
    fn default() -> Self {
        EvalSettings {
            search_path: Vec::new(),
            max_call_depth: 20_000,
            lints: Lints::default(),
            system: "x86_64-linux".into(),
            impure: true,
            experimental_features: Vec::new(),
            abort_on_warn: false,
            restrict_eval: false,
            allow_import_from_derivation: true,
        }
    }
}

/// One evaluation session: sources, global scope, caches and the store handle.
pub struct Evaluator {
    pub sources: SourceMap,
    pub settings: EvalSettings,
    pub store: Rc<dyn EvalStore>,
    globals: Env,
    global_names: HashMap<Sym, u32>,
    import_cache: HashMap<PathBuf, Value>,
    /// Paths already copied to the store in this evaluation.
    pub(crate) copied: HashMap<PathBuf, String>,
    call_depth: usize,
    /// Nesting of calls and thunk forcings, to pace stack checks.
    nest: u32,
    /// Argument scopes no longer referenced by anyone, emptied (no slots, no
    /// parent), kept so the next call reuses the allocation.
    scope_pool: Vec<Rc<EnvInner>>,
    /// Attribute names as string values, by symbol number, made once each
    /// (`attrNames`, `mapAttrs`' and `zipAttrsWith`'s name argument).
    name_values: Vec<Option<Value>>,
    /// Messages from `trace`/`warn` and lint warnings, already formatted; the CLI
    /// prints them as they arrive.
    pub on_trace: Box<dyn FnMut(&str)>,
    /// How flakes' inputs are fetched (`builtins.getFlake`, the CLI's flake
    /// loading); `None` where nothing may be fetched.
    pub fetcher: Option<Rc<dyn crate::flake::InputFetcher>>,
    /// Git work trees of local flakes being evaluated: below their tops, only
    /// tracked files can be read, listed, imported or copied.
    pub tracked: Vec<Rc<crate::flake::TrackedTree>>,
    /// Raised (by a signal handler, another thread) to stop the evaluation: it is
    /// checked every [`INTERRUPT_EVERY`] function calls, and the evaluation then fails
    /// with [`ErrorKind::Interrupted`]. Whoever raises it lowers it again.
    pub interrupt: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    /// Function calls so far, wrapping: paces the interrupt check.
    calls: u32,
}

/// How many function calls pass between two looks at [`Evaluator::interrupt`].
const INTERRUPT_EVERY: u32 = 1 << 12;

impl Evaluator {
    pub fn new(settings: EvalSettings, store: Rc<dyn EvalStore>) -> Evaluator {
        let mut ev = Evaluator {
            sources: SourceMap::default(),
            settings,
            store,
            globals: Env::new(None, Slots::new()),
            global_names: HashMap::new(),
            import_cache: HashMap::new(),
            copied: HashMap::new(),
            call_depth: 0,
            nest: 0,
            scope_pool: Vec::with_capacity(SCOPE_POOL),
            name_values: Vec::new(),
            on_trace: Box::new(|m| eprintln!("{m}")),
            fetcher: None,
            tracked: Vec::new(),
            interrupt: None,
            calls: 0,
        };
        let (names, values) = crate::builtins::globals(&mut ev);
        ev.global_names = names;
        *ev.globals.0.slots.borrow_mut() = Slots::from_vec(values);
        ev
    }

    pub fn globals(&self) -> &Env {
        &self.globals
    }

    // ---- forcing ---------------------------------------------------------

    /// Evaluates `v` to weak head normal form.
    #[inline]
    pub fn force(&mut self, v: &Value) -> RResult<Value> {
        match v {
            Value::Thunk(t) => self.force_thunk(t),
            v => Ok(v.clone()),
        }
    }

    /// Like [`Self::force`], consuming the value (no clone when it is forced).
    /// Always inlined: left to the compiler it was a call of its own, 18
    /// instructions for the common answer, the value itself (1.85 million
    /// calls in a sort by an attribute).
    #[inline(always)]
    pub fn force_owned(&mut self, v: Value) -> RResult<Value> {
        match v {
            Value::Thunk(t) => self.force_thunk(&t),
            v => Ok(v),
        }
    }

    /// Forces the thunk `t` read from slot `idx` of `scope`, and puts its value in
    /// the slot in its place: the thunk is done with, so every later read of the
    /// variable (and every copy of it into an argument or a list) gets the value
    /// itself instead of going through the thunk again, as Nix's values are
    /// overwritten in place when forced. Unobservable: a forced thunk stands for
    /// its value for good.
    #[inline]
    fn force_var(&mut self, scope: &Env, idx: u32, t: &Thunk) -> RResult<Value> {
        let v = self.force_thunk(t)?;
        scope.set(idx, v.clone());
        Ok(v)
    }

    /// Runs `f` one level deeper, growing the native stack onto the heap when
    /// little is left (checked every [`GROW_EVERY`] levels: the check costs more
    /// than the level).
    #[inline(always)]
    fn nested<T>(&mut self, f: impl FnOnce(&mut Self) -> T) -> T {
        self.nest += 1;
        let r = if self.nest.is_multiple_of(GROW_EVERY) {
            self.nested_grow(f)
        } else {
            f(self)
        };
        self.nest -= 1;
        r
    }

    /// The rare branch of [`Self::nested`], kept out of line so `f` is
    /// inlined into the common one.
    #[cold]
    #[inline(never)]
    fn nested_grow<T>(&mut self, f: impl FnOnce(&mut Self) -> T) -> T {
        stacker::maybe_grow(RED_ZONE, STACK_CHUNK, || f(self))
    }

    pub fn force_thunk(&mut self, t: &Thunk) -> RResult<Value> {
        if let Some(v) = t.value() {
            return Ok(v);
        }
        let state = t.take();
        let result = self.nested(|ev| match &state {
            ThunkState::Suspended(ir, env) => ev.eval(ir, env),
            ThunkState::Apply(f, a) => ev.call(f, a.clone()),
            ThunkState::Native(f) => f(ev).and_then(|v| ev.force_owned(v)),
            ThunkState::Blackhole => raise(EvalError::new(
                ErrorKind::InfiniteRecursion,
                "infinite recursion encountered",
            )),
        });
        match result {
            Ok(v) => {
                t.fill(v.clone());
                Ok(v)
            }
            Err(e) => {
                if !matches!(state, ThunkState::Blackhole) {
                    t.restore(state);
                }
                Err(e)
            }
        }
    }

    /// Makes a value for `ir` in `env` without evaluating it, avoiding a thunk
    /// allocation where the result is already known (constants, variables,
    /// lambdas, integer arithmetic on known integers, selections from sets
    /// already evaluated) or costs no evaluation to build (set literals without
    /// `rec`, `inherit (e)` or dynamic names, and list literals: their values
    /// are delayed in turn). Callgrind, `modules`/`pkgset`: the literals
    /// saved 0.6 %/1.5 % of the instructions; a list of three 240, a set of
    /// three 430 instructions each (of 1,330 and 2,200).
    ///
    /// Constants and variables are read inline at the caller; the rest is
    /// [`Self::delay_compound`], out of line: its frame (the registers saved
    /// for the allocating cases) cost the reads about 30 instructions each.
    #[inline(always)]
    pub fn delay(&mut self, ir: &Rc<Ir>, env: &Env) -> Value {
        match &**ir {
            Ir::Const(v) => v.clone(),
            Ir::Var { up, idx, .. } => env.ancestor(*up).get(*idx),
            _ => self.delay_compound(ir, env),
        }
    }

    /// [`Self::delay`] of everything but constants and variables.
    #[inline(never)]
    fn delay_compound(&mut self, ir: &Rc<Ir>, env: &Env) -> Value {
        match self.known_now(ir, env) {
            Some(v) => v,
            None => Value::Thunk(Thunk::new(ThunkState::Suspended(ir.clone(), env.clone()))),
        }
    }

    /// An argument its callee forces before anything else
    /// (`Evaluator::apply_args`): what [`Self::delay`] knows without a
    /// thunk, else its value, evaluated now instead of in a thunk forced at
    /// once.
    #[inline(never)]
    pub(super) fn eval_forced_first(&mut self, ir: &Rc<Ir>, env: &Env) -> RResult<Value> {
        match &**ir {
            // A variable is read as it is: forcing it here saves nothing.
            Ir::Const(_) | Ir::Var { .. } => Ok(self.delay(ir, env)),
            _ => match self.known_now(ir, env) {
                Some(v) => Ok(v),
                None => self.nested(|ev| ev.eval(ir, env)),
            },
        }
    }

    /// The value of a compound `ir` when it is known, or built, without
    /// evaluating anything (see [`Self::delay`]); `None` when that takes a
    /// thunk.
    #[inline(always)]
    fn known_now(&mut self, ir: &Rc<Ir>, env: &Env) -> Option<Value> {
        match &**ir {
            Ir::Lambda(def) => Some(Value::Lambda(Rc::new(Closure {
                def: def.clone(),
                env: env.clone(),
            }))),
            Ir::Binary { op, lhs, rhs, .. } => {
                // Integer arithmetic on values already known cannot diverge or
                // have effects, so computing it now is indistinguishable from
                // computing it later, and saves a thunk (`f (n - 1)`).
                let a = peek_int(lhs, env)?;
                let b = peek_int(rhs, env)?;
                ops::int_fast_path(*op, a, b)
            }
            Ir::SelectVar { up, idx, name, .. } => {
                attrs::select_var_evaluated(env, *up, *idx, *name)
            }
            Ir::Select {
                expr,
                path,
                default: None,
                ..
            } => peek_select(expr, path, env),
            // Literals whose building evaluates nothing: built now, their
            // values delayed, which costs what the thunk's forcing would.
            Ir::Attrs(def) if def.is_plain() => {
                Some(Value::Attrs(self.plain_attrs(def, env, false)))
            }
            Ir::List(items) => Some(self.plain_list(items, env, false)),
            _ => None,
        }
    }

    /// Like [`Self::delay`], for a value stored into a scope that is still being
    /// filled (`rec`, `let`, formal defaults): a variable of that same scope may
    /// not be set yet, so it is read when forced, not now.
    #[inline]
    fn delay_in_new_scope(&mut self, ir: &Rc<Ir>, env: &Env) -> Value {
        match &**ir {
            Ir::Var { up: 0, .. } => {
                Value::Thunk(Thunk::new(ThunkState::Suspended(ir.clone(), env.clone())))
            }
            // Built now, as `delay` does, but with their values delayed the
            // same careful way.
            Ir::Attrs(def) if def.is_plain() => Value::Attrs(self.plain_attrs(def, env, true)),
            Ir::List(items) => self.plain_list(items, env, true),
            _ => self.delay(ir, env),
        }
    }

    // ---- evaluation --------------------------------------------------------

    /// Evaluates `ir` in `env` to weak head normal form. Native recursion is
    /// bounded here by the expression's nesting (the parser caps it); the
    /// unbounded kinds, calls and thunks, grow the stack in [`Self::enter`] and
    /// [`Self::force_thunk`].
    ///
    /// Constants and variables, the most common nodes by far, are handled
    /// inline here; any other node is evaluated by its handler, called
    /// through the table in `dispatch.rs` from here, that is from each place
    /// `eval` is inlined (see that module for why).
    #[inline(always)]
    pub fn eval(&mut self, ir: &Ir, env: &Env) -> RResult<Value> {
        match ir {
            Ir::Const(v) => Ok(v.clone()),
            Ir::Var { up, idx, pos } => {
                let scope = env.ancestor(*up);
                match scope.get(*idx) {
                    Value::Thunk(t) => self.force_var(scope, *idx, &t).at_pos(*pos),
                    v => Ok(v),
                }
            }
            _ => (dispatch::HANDLERS[dispatch::tag(ir)])(self, ir, env),
        }
    }

    /// Evaluates `ir` to a Boolean (a condition, an operand of `&&`, `||`,
    /// `->`, `!`), the type error at `pos`. The value is consumed where it is
    /// matched: a Boolean owns nothing, and a value kept to the end of the
    /// scope was dropped through an out-of-line call that tests its variant
    /// again (callgrind: 3.5 M such calls in `modules`, from the operators).
    #[inline(always)]
    pub(super) fn eval_bool(&mut self, ir: &Ir, env: &Env, pos: Pos) -> RResult<bool> {
        match self.eval(ir, env)?.into_bool() {
            Ok(b) => Ok(b),
            Err(other) => self.expect_bool(&other).at_pos(pos),
        }
    }

    fn source_text(&self, pos: Pos) -> String {
        self.sources
            .file(pos.file)
            .and_then(|f| f.text.get(pos.span.start as usize..pos.span.end as usize))
            .unwrap_or("")
            .to_string()
    }

    fn lookup_with(&mut self, name: &Sym, withs: &[u32], env: &Env, pos: Pos) -> RResult<Value> {
        for &up in withs {
            let attrs = self.force_owned(env.ancestor(up).get(0))?;
            match &attrs {
                Value::Attrs(a) => {
                    if let Some(v) = a.get(name) {
                        return Ok(v.clone());
                    }
                }
                other => {
                    return raise(EvalError::at(
                        ErrorKind::Type,
                        format!("expected a set but found {}", self.describe_value(other)),
                        pos,
                    ))
                }
            }
        }
        raise(EvalError::undefined_variable(name, None)).at_pos(pos)
    }

    /// A short description of a value for error messages (`a set`, `an integer 1`).
    pub fn describe_value(&self, v: &Value) -> String {
        match v {
            Value::Int(i) => format!("an integer: {i}"),
            Value::Bool(b) => format!("a Boolean: {}", b.get()),
            Value::String(s) => format!(
                "a string: \"{}\"",
                s.as_str().chars().take(60).collect::<String>()
            ),
            Value::Path(p) => format!("a path: {}", p.display()),
            Value::Null => "null".into(),
            Value::Float(f) => format!("a float: {}", crate::value::print::format_float(f.get())),
            Value::Attrs(_) | Value::List(_) => {
                let mut s = crate::value::print::print_value(v);
                if s.chars().count() > 120 {
                    s = s.chars().take(120).collect::<String>() + " …";
                }
                format!("{}: {s}", v.type_().described())
            }
            other => other.type_().described().to_string(),
        }
    }

    /// The string value of an attribute name, shared by every use of it.
    pub fn name_value(&mut self, k: Sym) -> Value {
        let i = k.id();
        if i >= self.name_values.len() {
            self.name_values.resize(i + 1, None);
        }
        self.name_values[i]
            .get_or_insert_with(|| Value::str(k.as_str()))
            .clone()
    }

    pub fn new_string(&self, s: String) -> Value {
        Value::String(NixString::new(s))
    }
}

fn ast_sub() -> crate::syntax::ast::BinaryOp {
    crate::syntax::ast::BinaryOp::Sub
}

/// Evaluates `expr` strictly with a fresh evaluator and an in-memory store and
/// prints the result as `nix-instantiate --eval --strict` would; errors are
/// rendered. For tests.
pub fn test_eval(expr: &str) -> Result<String, String> {
    let store = Rc::new(crate::store::MemStore::new());
    let mut ev = Evaluator::new(EvalSettings::default(), store);
    ev.on_trace = Box::new(|_| {});
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let r = ev.eval_string(expr, &cwd).and_then(|v| ev.force_deep(&v));
    match r {
        Ok(v) => Ok(crate::value::print::print_value(&v)),
        Err(e) => Err(ev.sources.render(&e, false)),
    }
}

/// A thunk that raises `e` again when forced: a value evaluated at once
/// (`eval/strict.rs`) failed, and the thunk takes its place for the code
/// that forces it first, so the error reaches it, and gets the frames, as a
/// thunk of the expression would have.
#[cold]
#[inline(never)]
pub(crate) fn replay(e: raised::Raised) -> Value {
    let e = e.take();
    Value::lazy(move |_| raised::raise(e.clone()))
}

/// The integer a constant or a variable holds, if it is one and already
/// evaluated, without forcing, cloning or allocating anything.
#[inline(always)]
pub(crate) fn peek_int(ir: &Ir, env: &Env) -> Option<i64> {
    match ir {
        Ir::Const(Value::Int(i)) => Some(*i),
        // `get`: a scope still being filled may not have the slot yet (`@args`
        // is pushed after the formals' defaults are made).
        Ir::Var { up, idx, .. } => match env.ancestor(*up).0.slots.borrow().get(*idx as usize)? {
            Value::Int(i) => Some(*i),
            Value::Thunk(t) => match t.value_ref() {
                Some(Value::Int(i)) => Some(*i),
                _ => None,
            },
            _ => None,
        },
        _ => None,
    }
}

/// `v` when it is evaluated (itself, or the value of a forced thunk).
#[inline(always)]
pub(crate) fn forced(v: &Value) -> Option<Value> {
    match v {
        Value::Thunk(t) => t.value(),
        v => Some(v.clone()),
    }
}

/// Assertion helpers shared by the unit tests of every module.
#[cfg(test)]
pub(crate) mod testing {
    use super::test_eval;

    /// The printed strict value of `e`; panics with the rendered error otherwise.
    pub fn ok(e: &str) -> String {
        match test_eval(e) {
            Ok(s) => s,
            Err(err) => panic!("{e}: unexpected error:\n{err}"),
        }
    }

    /// The rendered error of `e`; panics if it evaluates.
    pub fn err(e: &str) -> String {
        match test_eval(e) {
            Ok(s) => panic!("{e}: expected an error, got {s}"),
            Err(err) => err,
        }
    }

    /// Asserts that each expression prints as its expected value.
    pub fn ok_all(cases: &[(&str, &str)]) {
        for (e, want) in cases {
            assert_eq!(ok(e), *want, "{e}");
        }
    }

    /// Asserts that `e` fails with a message containing `msg`.
    pub fn fails(e: &str, msg: &str) {
        let m = err(e);
        assert!(m.contains(msg), "{e}: expected «{msg}» in:\n{m}");
    }
}

#[cfg(test)]
mod tests;
