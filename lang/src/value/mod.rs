//! Runtime values of the language.
//!
//! Owns the representation of every value the evaluator can produce: the scalar
//! types, strings with context, paths, lists, attribute sets, closures, primops
//! and suspended computations ([`Thunk`]). It must not evaluate: forcing a thunk
//! needs the evaluator (`crate::eval`), which is the only module that changes a
//! thunk's state.
//!
//! A `Value` is 16 bytes; everything larger is behind an `Rc`, so cloning a value
//! is always cheap and never copies a list or a set. Every payload is one 8-byte
//! integer or pointer (a Boolean is a [`Flag`], a float its bits, [`Float64`]):
//! the compiler then treats a `Value` as a pair of scalars, passed and returned
//! in two registers. With a `bool` or an `f64` payload it was returned through
//! memory, a tag byte and a payload stored apart and reloaded at once as 16
//! bytes, which stalls store forwarding; callgrind counted 6 % fewer
//! instructions on `bench/eval/modules.nix` with the pair, and the user time of
//! fib, `modules` and `pkgset` fell by about a tenth.

pub mod attrs;
pub mod context;
pub mod print;

use std::cell::{Cell, OnceCell};
use std::fmt;
use std::path::PathBuf;
use std::rc::Rc;

pub use crate::sym::Sym;
pub use attrs::Attrs;
pub use context::{Context, ContextElem};

use crate::eval::ir::{Env, Ir, LambdaDef};
use crate::eval::{Evaluator, RResult};

/// A value, forced or not. Only [`Value::Thunk`] is unevaluated; every other
/// variant is in weak head normal form.
#[derive(Clone)]
pub enum Value {
    Null,
    Bool(Flag),
    Int(i64),
    Float(Float64),
    String(NixString),
    /// An absolute, lexically normalised path.
    Path(Rc<PathBuf>),
    Attrs(Rc<Attrs>),
    List(Rc<Vec<Value>>),
    Lambda(Rc<Closure>),
    PrimOp(Rc<PrimOpApp>),
    Thunk(Thunk),
}

/// A Boolean as a machine word, the payload of [`Value::Bool`] (see the module
/// documentation for why it is not a `bool`). Build one with [`Value::bool`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u64)]
pub enum Flag {
    False = 0,
    True = 1,
}

impl Flag {
    #[inline]
    pub fn get(self) -> bool {
        matches!(self, Flag::True)
    }
}

impl From<bool> for Flag {
    #[inline]
    fn from(b: bool) -> Flag {
        if b {
            Flag::True
        } else {
            Flag::False
        }
    }
}

/// A float as its bits, the payload of [`Value::Float`] (see the module
/// documentation); [`Float64::get`] gives the `f64` back exactly, NaN payloads
/// included. Build one with [`Value::float`].
#[derive(Clone, Copy, Debug)]
pub struct Float64(u64);

impl Float64 {
    #[inline]
    pub fn get(self) -> f64 {
        f64::from_bits(self.0)
    }
}

impl From<f64> for Float64 {
    #[inline]
    fn from(f: f64) -> Float64 {
        Float64(f.to_bits())
    }
}

/// The type names Nix uses in `builtins.typeOf` and in error messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Type {
    Null,
    Bool,
    Int,
    Float,
    String,
    Path,
    Set,
    List,
    Lambda,
    Thunk,
}

impl Type {
    /// The name `builtins.typeOf` returns.
    pub fn type_of(self) -> &'static str {
        match self {
            Type::Null => "null",
            Type::Bool => "bool",
            Type::Int => "int",
            Type::Float => "float",
            Type::String => "string",
            Type::Path => "path",
            Type::Set => "set",
            Type::List => "list",
            Type::Lambda => "lambda",
            Type::Thunk => "thunk",
        }
    }
    /// The phrase used in "expected X but found Y" messages.
    pub fn described(self) -> &'static str {
        match self {
            Type::Null => "null",
            Type::Bool => "a Boolean",
            Type::Int => "an integer",
            Type::Float => "a float",
            Type::String => "a string",
            Type::Path => "a path",
            Type::Set => "a set",
            Type::List => "a list",
            Type::Lambda => "a function",
            Type::Thunk => "a thunk",
        }
    }
}

impl Value {
    pub fn type_(&self) -> Type {
        match self {
            Value::Null => Type::Null,
            Value::Bool(_) => Type::Bool,
            Value::Int(_) => Type::Int,
            Value::Float(_) => Type::Float,
            Value::String(_) => Type::String,
            Value::Path(_) => Type::Path,
            Value::Attrs(_) => Type::Set,
            Value::List(_) => Type::List,
            Value::Lambda(_) | Value::PrimOp(_) => Type::Lambda,
            Value::Thunk(_) => Type::Thunk,
        }
    }

    /// A Boolean value.
    #[inline]
    pub fn bool(b: bool) -> Value {
        Value::Bool(Flag::from(b))
    }

    /// A float value.
    #[inline]
    pub fn float(f: f64) -> Value {
        Value::Float(Float64::from(f))
    }

    pub fn str(s: impl Into<String>) -> Value {
        Value::String(NixString::new(s.into()))
    }

    pub fn attrs(a: Attrs) -> Value {
        Value::Attrs(Rc::new(a))
    }

    pub fn list(l: Vec<Value>) -> Value {
        Value::List(Rc::new(l))
    }

    /// Drops the value, deciding inline that a scalar owns nothing: a plain
    /// drop is an out-of-line call that matches on the variant, and the
    /// operators drop two operands each, mostly integers and Booleans.
    #[inline(always)]
    pub fn discard(self) {
        match self {
            Value::Null | Value::Bool(_) | Value::Int(_) | Value::Float(_) => {
                std::mem::forget(self)
            }
            other => drop(other),
        }
    }

    /// Drops the value with the drop of its variant inlined: a scalar owns
    /// nothing, and the values scopes mostly hold (sets, thunks, lists,
    /// functions, strings) lose a reference in place, freed through a call
    /// only when it was the last. A plain drop is an out-of-line call that
    /// dispatches on the variant through one indirect jump shared by every
    /// drop in the program, which the processor mispredicts as the variants
    /// alternate (a call's scope emptied for reuse: 6.6 M such drops in
    /// `records`). For the few places dropping values in bulk: elsewhere
    /// [`Self::discard`], which inlines only the scalars' case, is smaller
    /// (this one at every drop measured +1.7 % instructions in `modules`).
    #[inline(always)]
    pub fn release(self) {
        match self {
            Value::Null | Value::Bool(_) | Value::Int(_) | Value::Float(_) => {
                std::mem::forget(self)
            }
            Value::Attrs(a) => drop(a),
            Value::Thunk(t) => drop(t),
            Value::List(l) => drop(l),
            Value::Lambda(c) => drop(c),
            Value::String(s) => drop(s),
            other => drop(other),
        }
    }

    /// The Boolean, or the value back when it is not one. A `match` on a
    /// value with a `Value::Bool(b)` arm leaves the value to be dropped after
    /// the arm, an out-of-line call even though a Boolean owns nothing; this
    /// forgets it instead (conditions, `&&`, `sort`'s and `filter`'s results).
    #[inline(always)]
    pub fn into_bool(self) -> Result<bool, Value> {
        match self {
            Value::Bool(b) => {
                let b = b.get();
                std::mem::forget(self);
                Ok(b)
            }
            other => Err(other),
        }
    }

    pub fn is_function(&self) -> bool {
        matches!(self, Value::Lambda(_) | Value::PrimOp(_))
    }

    /// A thunk that calls `f` when forced; used by builtins to stay lazy
    /// (`map`, `mapAttrs`, `genList`, …).
    pub fn lazy(f: impl Fn(&mut Evaluator) -> RResult<Value> + 'static) -> Value {
        Value::Thunk(Thunk::new(ThunkState::Native(Rc::new(f))))
    }

    /// A thunk for `f arg`, applied when forced.
    pub fn lazy_apply(f: Value, arg: Value) -> Value {
        Value::Thunk(Thunk::new(ThunkState::Apply(f, arg)))
    }
}

impl fmt::Debug for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Null => write!(f, "null"),
            Value::Bool(b) => write!(f, "{}", b.get()),
            Value::Int(i) => write!(f, "{i}"),
            Value::Float(x) => write!(f, "{}", x.get()),
            Value::String(s) => write!(f, "{:?}", s.as_str()),
            Value::Path(p) => write!(f, "{}", p.display()),
            Value::Attrs(a) => write!(f, "{{ {} attrs }}", a.len()),
            Value::List(l) => write!(f, "[ {} items ]", l.len()),
            Value::Lambda(_) => write!(f, "<LAMBDA>"),
            Value::PrimOp(_) => write!(f, "<PRIMOP>"),
            Value::Thunk(_) => write!(f, "<thunk>"),
        }
    }
}

/// A string and the store paths it was built from.
#[derive(Clone)]
pub struct NixString(Rc<NixStringInner>);

struct NixStringInner {
    s: String,
    ctx: Context,
}

impl NixString {
    pub fn new(s: String) -> NixString {
        NixString(Rc::new(NixStringInner {
            s,
            ctx: Context::default(),
        }))
    }
    pub fn with_context(s: String, ctx: Context) -> NixString {
        NixString(Rc::new(NixStringInner { s, ctx }))
    }
    pub fn as_str(&self) -> &str {
        &self.0.s
    }
    pub fn context(&self) -> &Context {
        &self.0.ctx
    }
    pub fn has_context(&self) -> bool {
        !self.0.ctx.is_empty()
    }
    /// The same characters without context (`unsafeDiscardStringContext`).
    pub fn without_context(&self) -> NixString {
        if self.has_context() {
            NixString::new(self.0.s.clone())
        } else {
            self.clone()
        }
    }
}

impl From<&str> for NixString {
    fn from(s: &str) -> Self {
        NixString::new(s.to_string())
    }
}
impl From<String> for NixString {
    fn from(s: String) -> Self {
        NixString::new(s)
    }
}

/// A lambda closed over its environment.
pub struct Closure {
    pub def: Rc<LambdaDef>,
    pub env: Env,
}

/// A builtin's arguments: inline up to three (every builtin's arity), so a
/// call allocates nothing for them.
pub type Args = smallvec::SmallVec<[Value; 3]>;

/// The signature of a builtin: it receives exactly `arity` arguments, unforced.
pub type PrimOpFn = fn(&mut Evaluator, Args) -> RResult<Value>;

/// A builtin function, with its documentation (what `rocmx repl`'s `:doc`
/// shows). Primops live in static tables and values only point to them, so
/// the documentation costs nothing at run time.
pub struct PrimOp {
    pub name: &'static str,
    pub arity: usize,
    pub f: PrimOpFn,
    /// The arguments' names as Nix's manual gives them, space-separated
    /// (`"f list"`): one per unit of `arity`.
    pub args: &'static str,
    /// One line in Nix's words: what the builtin does.
    pub doc: &'static str,
    /// For the type predicates (`isInt`, `isAttrs`, …): the type they test.
    /// A call with the argument at hand is then answered where it is made
    /// (`Evaluator::apply_args`), without the argument vector and the call
    /// through `f`; `f` gives the same answer.
    pub tests: Option<Type>,
}

/// A builtin applied to fewer arguments than its arity (or to none yet).
pub struct PrimOpApp {
    pub op: &'static PrimOp,
    pub args: Args,
}

/// A suspended computation, shared by everyone who holds a clone, evaluated at
/// most once (call-by-need).
///
/// The value, once known, is in a [`OnceCell`] of its own: reading a forced
/// thunk (most reads) is a test of that cell's tag and a clone, where a
/// single `Cell<ThunkState>` holding the value too had to be moved out, matched
/// and moved back (callgrind: `modules` 2,613 → 2,524 M instructions). What is
/// left to run is in a [`Cell`], only ever moved out and back
/// ([`Thunk::take`], [`Thunk::restore`]), never borrowed across a call. 64
/// bytes with the counts, 16 more than the single state.
#[derive(Clone)]
pub struct Thunk(Rc<ThunkCell>);

/// A thunk's shared cell: the value once forced, else what computes it.
pub struct ThunkCell {
    value: OnceCell<Value>,
    state: Cell<ThunkState>,
}

/// Native code a thunk runs when forced (a builtin's lazy result).
pub type NativeThunk = Rc<dyn Fn(&mut Evaluator) -> RResult<Value>>;

/// What computes a thunk's value. Only the evaluator moves a thunk between
/// states; once its value is known the state is [`ThunkState::Blackhole`] for
/// good and never looked at again.
pub enum ThunkState {
    /// Evaluate `Ir` in `Env`.
    Suspended(Rc<Ir>, Env),
    /// Apply a function value to an argument.
    Apply(Value, Value),
    /// Run native code (from a builtin).
    Native(NativeThunk),
    /// Being evaluated right now (forcing it again is infinite recursion),
    /// or done.
    Blackhole,
}

impl Thunk {
    pub fn new(state: ThunkState) -> Thunk {
        Thunk(Rc::new(ThunkCell {
            value: OnceCell::new(),
            state: Cell::new(state),
        }))
    }
    /// A thunk whose value is given later, by [`Thunk::fill`] (a self-reference
    /// tied after the set holding it is built); forcing it before that is an
    /// infinite recursion.
    pub fn unfilled() -> Thunk {
        Thunk::new(ThunkState::Blackhole)
    }
    /// The value, if the thunk was already forced.
    #[inline(always)]
    pub fn value(&self) -> Option<Value> {
        self.0.value.get().cloned()
    }
    /// The value, borrowed, if the thunk was already forced.
    #[inline(always)]
    pub fn value_ref(&self) -> Option<&Value> {
        self.0.value.get()
    }
    /// Moves the state out, leaving a blackhole (what forcing does first).
    #[inline]
    pub fn take(&self) -> ThunkState {
        self.0.state.replace(ThunkState::Blackhole)
    }
    /// Puts back a state taken by [`Thunk::take`] (forcing failed; a later
    /// force tries again).
    #[inline]
    pub fn restore(&self, state: ThunkState) {
        match self.0.state.replace(state) {
            // Always: the state was taken. Nothing to drop, and saying so
            // here spares an out-of-line drop call.
            ThunkState::Blackhole => {}
            old => drop(old),
        }
    }
    /// Records the value: the thunk is done. A thunk is filled once; a second
    /// value is ignored.
    #[inline]
    pub fn fill(&self, v: Value) {
        let _ = self.0.value.set(v);
    }
    /// A stable identity for «repeated» detection while printing.
    pub fn ptr(&self) -> usize {
        Rc::as_ptr(&self.0) as *const u8 as usize
    }
}

#[cfg(test)]
mod tests {
    use super::{Flag, Float64, Value};

    #[test]
    fn into_bool_and_release_keep_what_others_share() {
        assert_eq!(Value::bool(true).into_bool().ok(), Some(true));
        assert_eq!(Value::bool(false).into_bool().ok(), Some(false));
        assert!(matches!(Value::Int(3).into_bool(), Err(Value::Int(3))));
        // Releasing one reference of a shared value leaves the others intact.
        let list = Value::list(vec![Value::Int(1), Value::str("x")]);
        let copy = list.clone();
        list.release();
        match &copy {
            Value::List(l) => {
                assert_eq!(std::rc::Rc::strong_count(l), 1);
                assert!(matches!(l[0], Value::Int(1)));
            }
            _ => unreachable!(),
        }
        for v in [Value::Null, Value::Int(1), Value::str("s"), copy] {
            v.release();
        }
    }

    #[test]
    fn scalar_payloads_round_trip_through_their_words() {
        assert_eq!(std::mem::size_of::<Value>(), 16);
        assert!(Flag::from(true).get());
        assert!(!Flag::from(false).get());
        for f in [0.0, -0.0, 1.5, f64::INFINITY, f64::MIN_POSITIVE, f64::MAX] {
            assert_eq!(Float64::from(f).get().to_bits(), f.to_bits());
        }
        assert!(Float64::from(f64::NAN).get().is_nan());
        assert!(matches!(Value::bool(true), Value::Bool(Flag::True)));
        assert!(matches!(Value::float(2.5), Value::Float(f) if f.get() == 2.5));
    }
}
