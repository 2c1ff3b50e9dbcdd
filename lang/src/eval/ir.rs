//! The evaluator's intermediate representation and runtime environments.
//!
//! Owns the lowered form of an expression: variables resolved to (depth, slot)
//! pairs where the scope is static, nested attribute paths merged, constants
//! prebuilt. `compile` produces it from the AST; `eval` interprets it. It must not
//! evaluate anything itself.

use std::cell::RefCell;
use std::rc::Rc;

use crate::syntax::ast::{BinaryOp, Span};
use crate::value::{Sym, Value};

/// A source position: file (index into the evaluator's source map) and byte span.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Pos {
    pub file: u32,
    pub span: Span,
}

/// The slots of one scope; most scopes (lambda arguments) have one or two, kept
/// inline so a function call allocates once.
pub type Slots = smallvec::SmallVec<[Value; SLOTS_INLINE]>;

/// How many slots a scope keeps inline, without an allocation of their own.
pub const SLOTS_INLINE: usize = 2;

/// A runtime scope: slots for the variables a `let`, `rec`, lambda or the global
/// scope binds, or, in its one slot, the (unforced) attribute set a `with`
/// brings into scope. Which scopes are `with` scopes is known at compile time
/// ([`Ir::WithVar`] carries their depths), so a scope carries no mark of it.
#[derive(Clone)]
pub struct Env(pub Rc<EnvInner>);

pub struct EnvInner {
    pub slots: RefCell<Slots>,
    pub parent: Option<Env>,
}

impl Env {
    pub fn new(parent: Option<&Env>, slots: Slots) -> Env {
        Env(Rc::new(EnvInner {
            slots: RefCell::new(slots),
            parent: parent.cloned(),
        }))
    }
    /// The scope of `with attrs; …`: the set in slot 0.
    pub fn new_with(parent: &Env, attrs: Value) -> Env {
        Env::new(Some(parent), smallvec::smallvec![attrs])
    }
    /// The environment `up` levels above this one.
    ///
    /// This and the slot accessors below are always inlined: as calls (which
    /// `#[inline]` left them), the value read came back through memory and was
    /// reloaded at once, a store-forwarding stall on every variable read.
    #[inline(always)]
    pub fn ancestor(&self, up: u32) -> &Env {
        let mut e = self;
        for _ in 0..up {
            // The compiler only emits depths that exist.
            e =
                e.0.parent
                    .as_ref()
                    .expect("scope depth resolved at compile time");
        }
        e
    }
    #[inline(always)]
    pub fn get(&self, idx: u32) -> Value {
        // Through the slice: `SmallVec`'s own `Index` was left out of line in
        // the evaluator's dispatch (2.2 M calls in `modules`).
        self.0.slots.borrow().as_slice()[idx as usize].clone()
    }
    #[inline(always)]
    pub fn set(&self, idx: u32, v: Value) {
        self.0.slots.borrow_mut()[idx as usize] = v;
    }
    #[inline(always)]
    pub fn push(&self, v: Value) {
        self.0.slots.borrow_mut().push(v);
    }
}

#[derive(Clone)]
pub enum IrAttrName {
    Static(Sym),
    Dynamic(Rc<Ir>),
}

/// How a static attribute's value is produced.
#[derive(Clone)]
pub struct AttrDef {
    pub name: Sym,
    pub value: Rc<Ir>,
    pub pos: Pos,
}

/// A (possibly recursive) attribute set, `let` bindings, or the body of `let { }`.
pub struct AttrsDef {
    /// When true, a new environment holds one slot per static attribute, in
    /// `statics` order, followed by the `inherit (e)` sources; values are evaluated
    /// in it. When false, a new environment is created only if there are
    /// `inherit (e)` sources (`hidden`), and it holds just those.
    pub rec: bool,
    pub statics: Vec<AttrDef>,
    pub dynamics: Vec<(Rc<Ir>, Rc<Ir>, Pos)>,
    /// The `inherit (e)` source expressions, evaluated once each.
    pub hidden: Vec<Rc<Ir>>,
    pub pos: Pos,
}

impl AttrsDef {
    pub fn needs_env(&self) -> bool {
        self.rec || !self.hidden.is_empty()
    }
    /// A set literal built without evaluating anything: not `rec`, no
    /// `inherit (e)`, no dynamic names. Building it cannot fail or diverge,
    /// so `delay` builds it at once instead of making a thunk for it.
    pub fn is_plain(&self) -> bool {
        !self.rec && self.hidden.is_empty() && self.dynamics.is_empty()
    }
}

pub enum IrParam {
    /// `x: …`: slot 0 is the argument.
    Ident(Sym),
    /// `{ a, b ? d, … }@x: …`: slots are the formals in order, then `x` if present.
    Formals {
        formals: Vec<(Sym, Option<Rc<Ir>>)>,
        ellipsis: bool,
        at: Option<Sym>,
        /// Where each formal is written, parallel to `formals`.
        positions: Vec<Pos>,
    },
}

pub struct LambdaDef {
    pub param: IrParam,
    pub body: Rc<Ir>,
    /// A curried chain `a: b: c: …` shares one scope: the lambdas after the
    /// first (`b:`, `c:`, each an `x:` lambda that is directly the body of
    /// another) are compiled with `extends` set, their argument in the next
    /// slot of the chain's scope (`a` is slot 0, `b` 1, `c` 2). Calling one
    /// pushes the argument onto the scope when the caller owns it (a call that
    /// supplies several arguments of the chain at once), and otherwise onto a
    /// copy of its closure's scope, over the same parent: a partially applied
    /// chain is never changed by a later call.
    pub extends: bool,
    /// How many lambdas of the chain, this one included, a call must supply
    /// arguments for to reach the chain's last body: 1 where the body is not
    /// itself a continuation.
    pub rest: u32,
    /// The argument the chain's last body forces before it does anything
    /// else, as its slot in the chain's scope: a call supplying the whole
    /// chain evaluates that argument at once instead of delaying it
    /// (`Evaluator::apply_args`). `None` for formals, whose argument every
    /// call forces first anyway.
    pub forces: Option<u32>,
    /// [`Self::forces`] counted from this lambda's own argument (0: its
    /// own), `u32::MAX` when there is none or it is an earlier lambda's of
    /// the chain: what a call reads, one addition from the argument's index.
    pub first: u32,
    /// Whether the chain's last body can be evaluated without its scope
    /// (`direct::is_direct`): a call supplying the whole chain, when it is
    /// one or two lambdas long, then tries `direct::eval` on its arguments
    /// first (`Evaluator::call_chain`).
    pub direct: bool,
    /// The attribute or `let` name the lambda was bound to, for messages.
    pub name: RefCell<Option<Sym>>,
    pub pos: Pos,
}

/// A variable an expression forces before anything else it does: slot
/// `slot` of the scope `up` levels out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Forced {
    pub up: u32,
    pub slot: u32,
}

/// One node of the lowered expression.
///
/// `repr(u8)`: the tag is a byte of its own. Left to the compiler, it was
/// folded into a `Vec`'s capacity (a niche), and every dispatch on a node
/// (`eval`, `delay`) decoded it with a xor, a test and a conditional move before
/// the jump; callgrind counted fib 513 M → 462 M instructions and `modules`
/// 3.03 G → 2.88 G with the byte.
#[repr(u8)]
pub enum Ir {
    Const(Value),
    /// A statically resolved variable: `up` scopes out, slot `idx`.
    Var {
        up: u32,
        idx: u32,
        pos: Pos,
    },
    /// A variable found only in an enclosing `with`, looked up at run time in
    /// the sets of the enclosing `with` scopes: `withs` are their depths (as
    /// `up` in [`Ir::Var`]), innermost first; each holds its set in slot 0.
    WithVar {
        name: Sym,
        withs: Box<[u32]>,
        pos: Pos,
    },
    /// String interpolation: parts are concatenated after coercion.
    Str {
        parts: Vec<Rc<Ir>>,
        pos: Pos,
    },
    /// An interpolated path: the first part is the already-anchored literal prefix.
    Path {
        parts: Vec<Rc<Ir>>,
        pos: Pos,
    },
    List(Vec<Rc<Ir>>),
    Attrs(Rc<AttrsDef>),
    Let {
        def: Rc<AttrsDef>,
        body: Rc<Ir>,
        /// A binding the body forces before anything else and that no
        /// binding reads (`let t = typeOf v; in if t == …`): evaluated when
        /// the scope is made, instead of delayed in a thunk forced at once
        /// ([`Ir::strict_binding`]).
        now: Option<Forced>,
    },
    Lambda(Rc<LambdaDef>),
    Apply {
        func: Rc<Ir>,
        arg: Rc<Ir>,
        pos: Pos,
    },
    /// `f a b c`: an application spine, flattened so curried functions and
    /// builtins are entered without intermediate closures.
    Call {
        func: Rc<Ir>,
        args: Vec<Rc<Ir>>,
        pos: Pos,
    },
    Select {
        expr: Rc<Ir>,
        path: Vec<IrAttrName>,
        default: Option<Rc<Ir>>,
        pos: Pos,
    },
    /// `x.a`, the commonest selection: a statically resolved variable (as
    /// [`Ir::Var`]), one static name, no `or`. `eval` answers it inline when
    /// the variable holds an evaluated set whose attribute is evaluated;
    /// anything else (a thunk to force, a missing name, not a set) evaluates
    /// `general`, the same selection as an [`Ir::Select`].
    SelectVar {
        up: u32,
        idx: u32,
        name: Sym,
        pos: Pos,
        general: Rc<Ir>,
    },
    HasAttr {
        expr: Rc<Ir>,
        path: Vec<IrAttrName>,
        pos: Pos,
    },
    With {
        env: Rc<Ir>,
        body: Rc<Ir>,
    },
    Assert {
        cond: Rc<Ir>,
        body: Rc<Ir>,
        pos: Pos,
    },
    If {
        cond: Rc<Ir>,
        then: Rc<Ir>,
        else_: Rc<Ir>,
        pos: Pos,
    },
    Not(Rc<Ir>, Pos),
    Neg(Rc<Ir>, Pos),
    Binary {
        op: BinaryOp,
        lhs: Rc<Ir>,
        rhs: Rc<Ir>,
        pos: Pos,
    },
}
