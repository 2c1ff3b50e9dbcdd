//! Runtime values of the language.
//!
//! Owns the representation of every value the evaluator can produce: the scalar
//! types, strings with context, paths, lists, attribute sets, closures, primops
//! and suspended computations ([`Thunk`]). It must not evaluate: forcing a thunk
//! needs the evaluator (`crate::eval`), which is the only module that changes a
//! thunk's state.
//!
//! A `Value` is 16 bytes; everything larger is behind an `Rc`, so cloning a value
//! is always cheap and never copies a list or a set.

pub mod attrs;
pub mod context;
pub mod print;

use std::cell::Cell;
use std::fmt;
use std::path::PathBuf;
use std::rc::Rc;

pub use crate::sym::Sym;
pub use attrs::Attrs;
pub use context::{Context, ContextElem};

use crate::eval::ir::{Env, Ir, LambdaDef};
use crate::eval::{EResult, Evaluator};

/// A value, forced or not. Only [`Value::Thunk`] is unevaluated; every other
/// variant is in weak head normal form.
#[derive(Clone)]
pub enum Value {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    String(NixString),
    /// An absolute, lexically normalised path.
    Path(Rc<PathBuf>),
    Attrs(Rc<Attrs>),
    List(Rc<Vec<Value>>),
    Lambda(Rc<Closure>),
    PrimOp(Rc<PrimOpApp>),
    Thunk(Thunk),
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

    pub fn str(s: impl Into<String>) -> Value {
        Value::String(NixString::new(s.into()))
    }

    pub fn attrs(a: Attrs) -> Value {
        Value::Attrs(Rc::new(a))
    }

    pub fn list(l: Vec<Value>) -> Value {
        Value::List(Rc::new(l))
    }

    pub fn is_function(&self) -> bool {
        matches!(self, Value::Lambda(_) | Value::PrimOp(_))
    }

    /// A thunk that calls `f` when forced; used by builtins to stay lazy
    /// (`map`, `mapAttrs`, `genList`, …).
    pub fn lazy(f: impl Fn(&mut Evaluator) -> EResult<Value> + 'static) -> Value {
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
            Value::Bool(b) => write!(f, "{b}"),
            Value::Int(i) => write!(f, "{i}"),
            Value::Float(x) => write!(f, "{x}"),
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
pub type PrimOpFn = fn(&mut Evaluator, Args) -> EResult<Value>;

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
}

/// A builtin applied to fewer arguments than its arity (or to none yet).
pub struct PrimOpApp {
    pub op: &'static PrimOp,
    pub args: Args,
}

/// A suspended computation, shared by everyone who holds a clone, evaluated at
/// most once (call-by-need).
///
/// The state is in a [`Cell`], not a `RefCell`: it is only ever moved out and
/// back ([`Thunk::take`], [`Thunk::set`]), never borrowed across a call, so a
/// borrow flag would buy nothing and cost 8 bytes of every thunk (48 bytes with
/// its counts instead of 56: a smaller allocator size class).
#[derive(Clone)]
pub struct Thunk(Rc<Cell<ThunkState>>);

/// Native code a thunk runs when forced (a builtin's lazy result).
pub type NativeThunk = Rc<dyn Fn(&mut Evaluator) -> EResult<Value>>;

/// What a thunk holds. Only the evaluator moves a thunk between states.
pub enum ThunkState {
    /// Evaluate `Ir` in `Env`.
    Suspended(Rc<Ir>, Env),
    /// Apply a function value to an argument.
    Apply(Value, Value),
    /// Run native code (from a builtin).
    Native(NativeThunk),
    /// Being evaluated right now; forcing it again is infinite recursion.
    Blackhole,
    /// Already evaluated, never a thunk.
    Done(Value),
}

impl Thunk {
    pub fn new(state: ThunkState) -> Thunk {
        Thunk(Rc::new(Cell::new(state)))
    }
    /// The value, if the thunk was already forced.
    #[inline]
    pub fn value(&self) -> Option<Value> {
        self.peek(|s| match s {
            ThunkState::Done(v) => Some(v.clone()),
            _ => None,
        })
    }
    /// Runs `f` on the state in place. `f` must not touch this thunk (it sees
    /// a blackhole there); it is for reading, not evaluating.
    #[inline]
    pub fn peek<R>(&self, f: impl FnOnce(&ThunkState) -> R) -> R {
        let s = self.0.replace(ThunkState::Blackhole);
        let r = f(&s);
        self.set(s);
        r
    }
    /// Moves the state out, leaving a blackhole (what forcing does first).
    #[inline]
    pub fn take(&self) -> ThunkState {
        self.0.replace(ThunkState::Blackhole)
    }
    /// Replaces the state.
    #[inline]
    pub fn set(&self, state: ThunkState) {
        match self.0.replace(state) {
            // Nearly always: the state was taken. Nothing to drop, and saying so
            // here spares an out-of-line drop call on the hottest path.
            ThunkState::Blackhole => {}
            old => drop(old),
        }
    }
    /// A stable identity for «repeated» detection while printing.
    pub fn ptr(&self) -> usize {
        Rc::as_ptr(&self.0) as *const u8 as usize
    }
}
