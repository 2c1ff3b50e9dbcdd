//! Operators, equality, ordering and coercions.
//!
//! Owns the semantics of `+ - * / ++ // == != < <= > >= && || ->`, string
//! interpolation, the coercions that `toString` and `"${…}"` perform, and the typed
//! `force_*` accessors that builtins use. The numeric arithmetic
//! ([`Evaluator::arith`]) and the ordering ([`Evaluator::less_than`]) are the
//! only ones: `builtins.add`/`sub`/`mul`/`div`/`lessThan`, `sort` and
//! `genericClosure` call them, as Nix's operators are those builtins. It must
//! not parse or compile.

use std::path::PathBuf;
use std::rc::Rc;

use super::compile::canon_path;
use super::error::{EResult, ErrorExt, ErrorKind, EvalError};
use super::ir::{Env, Ir, Pos};
use super::raised::{raise, RResult, Raised};
use super::Evaluator;
use crate::syntax::ast::BinaryOp;
use crate::value::{print, Attrs, Context, ContextElem, NixString, Type, Value};

/// How far a coercion to string may go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CoerceMode {
    /// `"${x}"`: strings, paths (copied to the store) and sets with
    /// `__toString`/`outPath`.
    Interpolation,
    /// `toString x`: also integers, floats, Booleans, null and lists; paths stay
    /// paths (not copied).
    ToString,
    /// Like interpolation, but paths are not copied (`baseNameOf`, path arithmetic).
    NoCopy,
    /// `toString`'s reach, with paths copied to the store (derivation attributes).
    ToStringCopy,
}

impl CoerceMode {
    /// Whether integers, floats, Booleans, null and lists are accepted.
    fn coerce_more(self) -> bool {
        matches!(self, CoerceMode::ToString | CoerceMode::ToStringCopy)
    }
    /// Whether paths are copied to the store.
    fn copies(self) -> bool {
        matches!(self, CoerceMode::Interpolation | CoerceMode::ToStringCopy)
    }
}

impl Evaluator {
    pub(super) fn eval_binary(
        &mut self,
        op: BinaryOp,
        lhs: &Rc<Ir>,
        rhs: &Rc<Ir>,
        env: &Env,
        pos: Pos,
    ) -> RResult<Value> {
        use BinaryOp::*;
        match op {
            And => Ok(Value::bool(
                self.eval_bool(lhs, env, pos)? && self.eval_bool(rhs, env, pos)?,
            )),
            Or => Ok(Value::bool(
                self.eval_bool(lhs, env, pos)? || self.eval_bool(rhs, env, pos)?,
            )),
            Impl => Ok(Value::bool(
                !self.eval_bool(lhs, env, pos)? || self.eval_bool(rhs, env, pos)?,
            )),
            _ => {
                // Both operands already known integers (`n < 2`, `a - b`): no
                // forcing, cloning or dropping of values needed.
                if let Some(a) = super::peek_int(lhs, env) {
                    if let Some(b) = super::peek_int(rhs, env) {
                        if let Some(v) = int_fast_path(op, a, b) {
                            return Ok(v);
                        }
                    }
                }
                let l = self.eval(lhs, env)?;
                // `t == "merge"`: a string compared with a string constant
                // (a type tag, a name), compared in place, without a clone of
                // the constant or a pass through the generic operators
                // (2 % of `modules`' instructions over `equal` alone).
                if let (Eq | NotEq, Value::String(a), Ir::Const(Value::String(b))) =
                    (op, &l, &**rhs)
                {
                    let same = a.as_str() == b.as_str();
                    return Ok(Value::bool(same == (op == Eq)));
                }
                let r = self.eval(rhs, env)?;
                // Two integers once evaluated (`a.k < b.k`): answered here,
                // without the call to `binary_values` (36 instructions a
                // comparison in a sort by an attribute) or drops.
                if let (&Value::Int(a), &Value::Int(b)) = (&l, &r) {
                    if let Some(v) = int_fast_path(op, a, b) {
                        // Integers own nothing: no drops.
                        std::mem::forget(l);
                        std::mem::forget(r);
                        return Ok(v);
                    }
                }
                let v = self.binary_values(op, &l, &r);
                l.discard();
                r.discard();
                v.at_pos(pos)
            }
        }
    }

    /// Applies a strict binary operator to two forced values.
    pub fn binary_values(&mut self, op: BinaryOp, l: &Value, r: &Value) -> RResult<Value> {
        use BinaryOp::*;
        if let (Value::Int(a), Value::Int(b)) = (l, r) {
            if let Some(v) = int_fast_path(op, *a, *b) {
                return Ok(v);
            }
        }
        match op {
            Add => self.add(l, r),
            Sub | Mul | Div => self.arith(op, l, r),
            Concat => {
                let a = self.expect_list(l)?;
                let b = self.expect_list(r)?;
                if a.is_empty() {
                    return Ok(Value::List(b));
                }
                if b.is_empty() {
                    return Ok(Value::List(a));
                }
                let mut v = Vec::with_capacity(a.len() + b.len());
                v.extend(a.iter().cloned());
                v.extend(b.iter().cloned());
                Ok(Value::List(Rc::new(v)))
            }
            Update => {
                let a = self.expect_attrs(l)?;
                let b = self.expect_attrs(r)?;
                Ok(Value::Attrs(a.update(&b)))
            }
            Eq => Ok(Value::bool(self.equal(l, r)?)),
            NotEq => Ok(Value::bool(!self.equal(l, r)?)),
            // Nix's desugaring: `a > b` is `b < a`, `a <= b` is `!(b < a)`.
            Lt => Ok(Value::bool(self.less_than(l, r)?)),
            Le => Ok(Value::bool(!self.less_than(r, l)?)),
            Gt => Ok(Value::bool(self.less_than(r, l)?)),
            Ge => Ok(Value::bool(!self.less_than(l, r)?)),
            And | Or | Impl | PipeLeft | PipeRight => {
                unreachable!("lazy operators are handled in eval_binary")
            }
        }
    }

    /// `+ - * /` on numbers: Nix's `__add`, `__sub`, `__mul` and `__div`, which
    /// are also its operators `-`, `*`, `/` and unary minus (and `+` on two
    /// numbers). Operands are forced; mixed int/float promotes to float; integer
    /// overflow and division by zero are errors with Nix's wording, never a wrap
    /// or a panic. Other operators are refused.
    pub fn arith(&mut self, op: BinaryOp, l: &Value, r: &Value) -> RResult<Value> {
        let l = self.force(l)?;
        let r = self.force(r)?;
        let (noun, verb, sym) = match op {
            BinaryOp::Add => ("addition", "adding", "+"),
            BinaryOp::Sub => ("subtraction", "subtracting", "-"),
            BinaryOp::Mul => ("multiplication", "multiplying", "*"),
            BinaryOp::Div => return self.divide(&l, &r),
            _ => return raise(EvalError::new(ErrorKind::Eval, "not a numeric operator")),
        };
        if matches!(l, Value::Float(_)) || matches!(r, Value::Float(_)) {
            // Nix's own wording for the first operand of a float multiplication.
            let first = if op == BinaryOp::Mul {
                "while evaluating the first of the multiplication".to_string()
            } else {
                format!("while evaluating the first argument of the {noun}")
            };
            let x = self.expect_number(&l).frame(None, || first)?;
            let y = self.expect_number(&r).frame(None, || {
                format!("while evaluating the second argument of the {noun}")
            })?;
            return Ok(Value::float(match op {
                BinaryOp::Add => x + y,
                BinaryOp::Sub => x - y,
                _ => x * y,
            }));
        }
        let x = self.expect_int(&l).frame(None, || {
            format!("while evaluating the first argument of the {noun}")
        })?;
        let y = self.expect_int(&r).frame(None, || {
            format!("while evaluating the second argument of the {noun}")
        })?;
        let res = match op {
            BinaryOp::Add => x.checked_add(y),
            BinaryOp::Sub => x.checked_sub(y),
            _ => x.checked_mul(y),
        };
        res.map(Value::Int).ok_or_else(|| {
            Raised::raise(EvalError::new(
                ErrorKind::Eval,
                format!("integer overflow in {verb} {x} {sym} {y}"),
            ))
        })
    }

    /// `__div` on forced operands: the divisor is checked for zero first.
    fn divide(&mut self, l: &Value, r: &Value) -> RResult<Value> {
        let divisor = self.expect_number(r).frame(None, || {
            "while evaluating the second operand of the division".into()
        })?;
        if divisor == 0.0 {
            return raise(EvalError::new(ErrorKind::Eval, "division by zero"));
        }
        if matches!(l, Value::Float(_)) || matches!(r, Value::Float(_)) {
            let x = self.expect_number(l).frame(None, || {
                "while evaluating the first operand of the division".into()
            })?;
            return Ok(Value::float(x / divisor));
        }
        let x = self.expect_int(l).frame(None, || {
            "while evaluating the first operand of the division".into()
        })?;
        let y = self.expect_int(r).frame(None, || {
            "while evaluating the second operand of the division".into()
        })?;
        x.checked_div(y).map(Value::Int).ok_or_else(|| {
            Raised::raise(EvalError::new(
                ErrorKind::Eval,
                format!("integer overflow in dividing {x} / {y}"),
            ))
        })
    }

    fn add(&mut self, l: &Value, r: &Value) -> RResult<Value> {
        match (l, r) {
            (Value::Int(_) | Value::Float(_), Value::Int(_) | Value::Float(_)) => {
                self.arith(BinaryOp::Add, l, r)
            }
            (Value::Int(_) | Value::Float(_), _) => raise(EvalError::new(
                ErrorKind::Type,
                format!(
                    "cannot add {} to {}",
                    r.type_().described(),
                    l.type_().described()
                ),
            )),
            (Value::Path(p), _) => {
                let s = self.coerce_to_string(r, CoerceMode::NoCopy)?;
                if s.has_context() {
                    return raise(EvalError::new(
                        ErrorKind::Eval,
                        format!(
                            "a string that refers to a store path cannot be appended to a path: '{}'",
                            s.as_str()
                        ),
                    ));
                }
                let mut joined = p.to_string_lossy().into_owned();
                joined.push_str(s.as_str());
                Ok(Value::Path(Rc::new(canon_path(&joined))))
            }
            (Value::String(_), _) | (Value::Attrs(_), _) => {
                let a = self.coerce_to_string(l, CoerceMode::Interpolation)?;
                let b = self.coerce_to_string(r, CoerceMode::Interpolation)?;
                let mut ctx = a.context().clone();
                ctx.extend(b.context());
                let mut s = String::with_capacity(a.as_str().len() + b.as_str().len());
                s.push_str(a.as_str());
                s.push_str(b.as_str());
                Ok(Value::String(NixString::with_context(s, ctx)))
            }
            _ => raise(EvalError::new(
                ErrorKind::Type,
                format!(
                    "cannot add {} to {}",
                    r.type_().described(),
                    l.type_().described()
                ),
            )),
        }
    }

    /// Deep equality as `==` defines it.
    pub fn equal(&mut self, l: &Value, r: &Value) -> RResult<bool> {
        if matches!(l, Value::Thunk(_)) || matches!(r, Value::Thunk(_)) {
            let l = self.force(l)?;
            let r = self.force(r)?;
            return self.equal_evaluated(&l, &r);
        }
        // Both evaluated (nearly always): compared where they are, not
        // through clones forced again.
        self.equal_evaluated(l, r)
    }

    /// [`Self::equal`] of two values in weak head normal form.
    fn equal_evaluated(&mut self, l: &Value, r: &Value) -> RResult<bool> {
        if let Some(same) = equal_scalars(l, r) {
            return Ok(same);
        }
        Ok(match (l, r) {
            (Value::List(a), Value::List(b)) => {
                if Rc::ptr_eq(a, b) {
                    return Ok(true);
                }
                if a.len() != b.len() {
                    return Ok(false);
                }
                for (x, y) in a.iter().zip(b.iter()) {
                    if !self.equal_elem(x, y)? {
                        return Ok(false);
                    }
                }
                true
            }
            (Value::Attrs(a), Value::Attrs(b)) => {
                if Rc::ptr_eq(a, b) {
                    return Ok(true);
                }
                // Derivations compare by output path.
                if self.is_derivation(a)? && self.is_derivation(b)? {
                    let out = crate::sym::known().out_path;
                    if let (Some(x), Some(y)) = (a.get(out), b.get(out)) {
                        let (x, y) = (x.clone(), y.clone());
                        return self.equal(&x, &y);
                    }
                }
                if a.len() != b.len() {
                    return Ok(false);
                }
                for ((ka, va), (kb, vb)) in a.iter().zip(b.iter()) {
                    if ka != kb || !self.equal_elem(va, vb)? {
                        return Ok(false);
                    }
                }
                true
            }
            _ => false,
        })
    }

    /// Element equality: the same shared thunk is equal to itself without forcing.
    fn equal_elem(&mut self, x: &Value, y: &Value) -> RResult<bool> {
        // Nix's value identity optimisation: the very same value inside a list or
        // set is equal to itself, even a function.
        match (x, y) {
            (Value::Thunk(a), Value::Thunk(b)) if a.ptr() == b.ptr() => return Ok(true),
            (Value::Lambda(a), Value::Lambda(b)) if Rc::ptr_eq(a, b) => return Ok(true),
            (Value::PrimOp(a), Value::PrimOp(b)) if Rc::ptr_eq(a, b) => return Ok(true),
            _ => {}
        }
        self.equal(x, y)
    }

    /// Whether a set has `type = "derivation"`.
    pub fn is_derivation(&mut self, a: &Attrs) -> EResult<bool> {
        match a.get(crate::sym::known().type_) {
            Some(t) => {
                let t = t.clone();
                match self.force(&t)? {
                    Value::String(s) => Ok(s.as_str() == "derivation"),
                    _ => Ok(false),
                }
            }
            None => Ok(false),
        }
    }

    /// `a < b` as Nix's `__lessThan` (the operators `<`, `<=`, `>`, `>=`)
    /// defines it: numbers (ints and floats mixed), strings, paths, and lists
    /// lexicographically (elements compared with `<` only where they differ by
    /// `==`). Anything else is an error.
    pub fn less_than(&mut self, a: &Value, b: &Value) -> RResult<bool> {
        let a = self.force(a)?;
        let b = self.force(b)?;
        if let Some(less) = less_scalars(&a, &b) {
            return Ok(less);
        }
        match (&a, &b) {
            (Value::List(x), Value::List(y)) => {
                let mut i = 0;
                loop {
                    if i == y.len() {
                        return Ok(false);
                    }
                    if i == x.len() {
                        return Ok(true);
                    }
                    let (p, q) = (&x[i], &y[i]);
                    let same = match (p, q) {
                        (Value::Thunk(s), Value::Thunk(t)) if s.ptr() == t.ptr() => true,
                        _ => self.equal(p, q)?,
                    };
                    if !same {
                        return self
                            .less_than(p, q)
                            .frame(None, || "while comparing two list elements".into());
                    }
                    i += 1;
                }
            }
            _ if std::mem::discriminant(&a) != std::mem::discriminant(&b) => raise(EvalError::new(
                ErrorKind::Eval,
                format!(
                    "cannot compare {} with {}; values are {} and {}",
                    show_type(&a),
                    show_type(&b),
                    show_value(&a),
                    show_value(&b)
                ),
            )),
            _ => raise(EvalError::new(
                ErrorKind::Eval,
                format!(
                    "cannot compare {} with {}; values of that type are incomparable (values are {} and {})",
                    show_type(&a),
                    show_type(&b),
                    show_value(&a),
                    show_value(&b)
                ),
            )),
        }
    }

    // ---- strings -------------------------------------------------------------

    pub(super) fn eval_interp(&mut self, parts: &[Rc<Ir>], env: &Env, pos: Pos) -> RResult<Value> {
        // The parts first, then one allocation of the exact length.
        let mut strs: smallvec::SmallVec<[NixString; 8]> = smallvec::SmallVec::new();
        let mut len = 0;
        for p in parts {
            let v = self.eval(p, env)?;
            let part = self
                .coerce_to_string(&v, CoerceMode::Interpolation)
                .at_pos(pos)
                .frame(Some(pos), || "while evaluating a path segment".into())?;
            len += part.as_str().len();
            strs.push(part);
        }
        let mut s = String::with_capacity(len);
        let mut ctx = Context::default();
        for part in &strs {
            s.push_str(part.as_str());
            ctx.extend(part.context());
        }
        Ok(Value::String(NixString::with_context(s, ctx)))
    }

    pub(super) fn eval_path_interp(
        &mut self,
        parts: &[Rc<Ir>],
        env: &Env,
        pos: Pos,
    ) -> RResult<Value> {
        let mut s = String::new();
        for p in parts {
            let v = self.eval(p, env)?;
            let part = self.coerce_to_string(&v, CoerceMode::NoCopy).at_pos(pos)?;
            if part.has_context() {
                return raise(EvalError::at(
                    ErrorKind::Eval,
                    format!(
                        "a string that refers to a store path cannot be appended to a path: '{}'",
                        part.as_str()
                    ),
                    pos,
                ));
            }
            s.push_str(part.as_str());
        }
        Ok(Value::Path(Rc::new(canon_path(&s))))
    }

    /// Converts a value to a string as interpolation or `toString` would.
    pub fn coerce_to_string(&mut self, v: &Value, mode: CoerceMode) -> EResult<NixString> {
        let v = self.force(v)?;
        match &v {
            Value::String(s) => Ok(s.clone()),
            Value::Path(p) => {
                if mode.copies() {
                    let sp = self.copy_path_to_store(p)?;
                    Ok(NixString::with_context(
                        sp.clone(),
                        Context::single(ContextElem::Opaque(sp.into())),
                    ))
                } else {
                    Ok(NixString::new(p.to_string_lossy().into_owned()))
                }
            }
            Value::Attrs(a) => {
                let known = crate::sym::known();
                if let Some(f) = a.get(known.to_string).cloned() {
                    let r = self.call(&f, v.clone())?;
                    return self.coerce_to_string(&r, mode);
                }
                if let Some(o) = a.get(known.out_path).cloned() {
                    return self.coerce_to_string(&o, mode);
                }
                Err(EvalError::new(
                    ErrorKind::Type,
                    format!(
                        "cannot coerce {} to a string: {}",
                        v.type_().described(),
                        self.print_short(&v)
                    ),
                ))
            }
            Value::Int(i) if mode.coerce_more() => {
                Ok(NixString::new(itoa::Buffer::new().format(*i).to_owned()))
            }
            // Nix uses C++ `std::to_string` here: six decimals (`toString 1.5` is "1.500000").
            Value::Float(f) if mode.coerce_more() => Ok(NixString::new(format!("{:.6}", f.get()))),
            Value::Bool(b) if mode.coerce_more() => {
                Ok(NixString::new(if b.get() { "1" } else { "" }.into()))
            }
            Value::Null if mode.coerce_more() => Ok(NixString::new(String::new())),
            Value::List(l) if mode.coerce_more() => {
                let mut s = String::new();
                let mut ctx = Context::default();
                for (i, x) in l.iter().enumerate() {
                    let part = self.coerce_to_string(x, mode)?;
                    s.push_str(part.as_str());
                    ctx.extend(part.context());
                    // Nix separates elements by a space, except after an empty list.
                    if i + 1 < l.len() && !is_empty_list(&self.force(x)?) {
                        s.push(' ');
                    }
                }
                Ok(NixString::with_context(s, ctx))
            }
            other => Err(EvalError::new(
                ErrorKind::Type,
                format!(
                    "cannot coerce {} to a string: {}",
                    other.type_().described(),
                    self.print_short(other)
                ),
            )),
        }
    }

    /// A one-line rendering for error messages, truncated.
    pub fn print_short(&mut self, v: &Value) -> String {
        let s = crate::value::print::print_value_shallow(v);
        if s.chars().count() > 200 {
            let t: String = s.chars().take(200).collect();
            format!("{t}…")
        } else {
            s
        }
    }

    /// Copies a filesystem path into the store and returns its store path.
    /// Each path is copied (and hashed) once per evaluation, as in Nix: sources
    /// are assumed not to change while an evaluation runs.
    pub fn copy_path_to_store(&mut self, p: &std::path::Path) -> EResult<String> {
        if let Some(sp) = self.copied.get(p) {
            return Ok(sp.clone());
        }
        let name = p
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "source".into());
        self.check_tracked(p)?;
        let sp = if self.tracked.is_empty() {
            self.store.add_path(p, &name, None)?
        } else {
            // A git flake's untracked files are never read, hence never copied.
            let tracked = self.tracked.clone();
            let mut visible = |q: &std::path::Path, _: &str| {
                Ok(tracked
                    .iter()
                    .all(|t| t.check(q) != crate::flake::fetch::Tracked::No))
            };
            let cb: &mut crate::store::PathFilter<'_> = &mut visible;
            self.store.add_path(p, &name, Some(cb))?
        }
        .to_absolute();
        self.copied.insert(p.to_path_buf(), sp.clone());
        Ok(sp)
    }

    /// A path from a path value or a string holding an absolute path.
    pub fn coerce_to_path(&mut self, v: &Value) -> EResult<PathBuf> {
        let v = self.force(v)?;
        if let Value::Path(p) = &v {
            return Ok((**p).clone());
        }
        let s = self.coerce_to_string(&v, CoerceMode::NoCopy)?;
        if !s.as_str().starts_with('/') {
            return Err(EvalError::new(
                ErrorKind::Eval,
                format!("string '{}' doesn't represent an absolute path", s.as_str()),
            ));
        }
        Ok(canon_path(s.as_str()))
    }

    // ---- typed accessors for builtins ---------------------------------------

    #[inline]
    pub fn expect_bool(&mut self, v: &Value) -> RResult<bool> {
        if let Value::Bool(b) = v {
            return Ok(b.get());
        }
        match self.force(v)? {
            Value::Bool(b) => Ok(b.get()),
            o => raise(self.type_error("a Boolean", &o)),
        }
    }
    pub fn expect_int(&mut self, v: &Value) -> RResult<i64> {
        match self.force(v)? {
            Value::Int(i) => Ok(i),
            o => raise(self.type_error("an integer", &o)),
        }
    }
    /// An int or float, as a float.
    pub fn expect_number(&mut self, v: &Value) -> EResult<f64> {
        match self.force(v)? {
            Value::Int(i) => Ok(i as f64),
            Value::Float(f) => Ok(f.get()),
            o => Err(self.type_error("a float", &o)),
        }
    }
    /// A string value (no coercion), with its context.
    pub fn expect_string(&mut self, v: &Value) -> RResult<NixString> {
        match self.force(v)? {
            Value::String(s) => Ok(s),
            o => raise(self.type_error("a string", &o)),
        }
    }
    /// The type of `v`, forced: `typeOf` and the type predicates. An
    /// evaluated value's type is read where it is, not from a clone.
    pub fn forced_type(&mut self, v: &Value) -> RResult<Type> {
        match v {
            Value::Thunk(_) => Ok(self.force(v)?.type_()),
            v => Ok(v.type_()),
        }
    }
    pub fn expect_attrs(&mut self, v: &Value) -> RResult<Rc<Attrs>> {
        match self.force(v)? {
            Value::Attrs(a) => Ok(a),
            o => raise(self.type_error("a set", &o)),
        }
    }
    pub fn expect_list(&mut self, v: &Value) -> RResult<Rc<Vec<Value>>> {
        match self.force(v)? {
            Value::List(l) => Ok(l),
            o => raise(self.type_error("a list", &o)),
        }
    }
    pub fn expect_function(&mut self, v: &Value) -> RResult<Value> {
        let f = self.force(v)?;
        match &f {
            Value::Lambda(_) | Value::PrimOp(_) => Ok(f),
            Value::Attrs(a) if a.contains(crate::sym::known().functor) => Ok(f),
            o => raise(self.type_error("a function", o)),
        }
    }

    pub fn type_error(&self, expected: &str, found: &Value) -> Box<EvalError> {
        EvalError::new(
            ErrorKind::Type,
            format!(
                "expected {expected} but found {}",
                self.describe_value(found)
            ),
        )
    }

    /// Forces a value completely (`deepSeq`, `--strict`).
    pub fn force_deep(&mut self, v: &Value) -> EResult<Value> {
        let mut seen = std::collections::HashSet::new();
        let r = self.force(v)?;
        self.force_deep_inner(&r, &mut seen, 0)?;
        Ok(r)
    }

    /// Forces `v` and everything inside it; nesting deeper than
    /// `--max-call-depth` is an error, as in Nix.
    fn force_deep_inner(
        &mut self,
        v: &Value,
        seen: &mut std::collections::HashSet<usize>,
        depth: usize,
    ) -> EResult<()> {
        if depth > self.settings.max_call_depth {
            return Err(EvalError::new(
                ErrorKind::CallDepth {
                    limit: self.settings.max_call_depth,
                },
                format!(
                    "stack overflow; max-call-depth exceeded ({}) while forcing a deeply nested value",
                    self.settings.max_call_depth
                ),
            ));
        }
        stacker::maybe_grow(256 * 1024, 8 * 1024 * 1024, || {
            match v {
                Value::Attrs(a) => {
                    if !seen.insert(a.ptr()) {
                        return Ok(());
                    }
                    for (k, x) in a.iter() {
                        let f = self
                            .force(x)
                            .frame(None, || format!("while evaluating the attribute '{k}'"))?;
                        self.force_deep_inner(&f, seen, depth + 1)?;
                    }
                }
                Value::List(l) => {
                    if !seen.insert(Rc::as_ptr(l) as *const u8 as usize) {
                        return Ok(());
                    }
                    for (i, x) in l.iter().enumerate() {
                        let f = self
                            .force(x)
                            .frame(None, || format!("while evaluating list element {i}"))?;
                        self.force_deep_inner(&f, seen, depth + 1)?;
                    }
                }
                _ => {}
            }
            Ok(())
        })
    }
}

/// A value printed for an error message, bounded in length.
pub(crate) fn show_value(v: &Value) -> String {
    let s = print::print_value_shallow(v);
    if s.len() > 200 {
        let t: String = s.chars().take(200).collect();
        format!("{t}…")
    } else {
        s
    }
}

/// Nix's `showType` for a forced value ("an integer", "a string with context",
/// "the built-in function 'map'", …).
fn show_type(v: &Value) -> String {
    match v {
        Value::String(s) if s.has_context() => "a string with context".into(),
        Value::PrimOp(app) if app.args.is_empty() => {
            format!("the built-in function '{}'", app.op.name)
        }
        Value::PrimOp(app) => format!("the partially applied built-in function '{}'", app.op.name),
        other => other.type_().described().into(),
    }
}

/// `l == r` for two evaluated values, where no element needs comparing:
/// every pair but two lists or two sets (and `None` for a thunk). Numbers
/// compare across int and float; values of different types are unequal.
/// Shared by `==` and direct evaluation (`direct.rs`).
#[inline]
pub(crate) fn equal_scalars(l: &Value, r: &Value) -> Option<bool> {
    Some(match (l, r) {
        (Value::Thunk(_), _) | (_, Value::Thunk(_)) => return None,
        (Value::List(_), Value::List(_)) | (Value::Attrs(_), Value::Attrs(_)) => return None,
        (Value::Null, Value::Null) => true,
        (Value::Bool(a), Value::Bool(b)) => a == b,
        (Value::Int(a), Value::Int(b)) => a == b,
        (Value::Int(_) | Value::Float(_), Value::Int(_) | Value::Float(_)) => {
            as_f64(l) == as_f64(r)
        }
        (Value::String(a), Value::String(b)) => a.as_str() == b.as_str(),
        (Value::Path(a), Value::Path(b)) => a == b,
        _ => false,
    })
}

/// `a < b` for numbers (ints and floats mixed), strings and paths; `None`
/// for anything else (lists, compared element by element, and the pairs
/// that are type errors). Shared by `<` and direct evaluation.
#[inline]
pub(crate) fn less_scalars(a: &Value, b: &Value) -> Option<bool> {
    Some(match (a, b) {
        (Value::Int(x), Value::Int(y)) => x < y,
        (Value::Float(x), Value::Float(y)) => x.get() < y.get(),
        (Value::Int(x), Value::Float(y)) => (*x as f64) < y.get(),
        (Value::Float(x), Value::Int(y)) => x.get() < (*y as f64),
        (Value::String(x), Value::String(y)) => x.as_str().as_bytes() < y.as_str().as_bytes(),
        (Value::Path(x), Value::Path(y)) => x.as_os_str() < y.as_os_str(),
        _ => return None,
    })
}

fn as_f64(v: &Value) -> f64 {
    match v {
        Value::Int(i) => *i as f64,
        Value::Float(f) => f.get(),
        _ => 0.0,
    }
}

fn is_empty_list(v: &Value) -> bool {
    matches!(v, Value::List(l) if l.is_empty())
}

/// Integer operations that cannot fail, computed without the general machinery;
/// `None` means "take the general path" (overflow, division, other operators).
#[inline(always)]
pub(crate) fn int_fast_path(op: BinaryOp, a: i64, b: i64) -> Option<Value> {
    use BinaryOp::*;
    Some(match op {
        Add => Value::Int(a.checked_add(b)?),
        Sub => Value::Int(a.checked_sub(b)?),
        Mul => Value::Int(a.checked_mul(b)?),
        // `None` for division by zero and overflow: the slow path reports them.
        Div => Value::Int(a.checked_div(b)?),
        Lt => Value::bool(a < b),
        Le => Value::bool(a <= b),
        Gt => Value::bool(a > b),
        Ge => Value::bool(a >= b),
        Eq => Value::bool(a == b),
        NotEq => Value::bool(a != b),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use crate::eval::testing::{fails, ok};

    #[test]
    fn integer_arithmetic_overflow_and_division() {
        // Nix's wording (its operators are the `__add`… builtins).
        fails(
            "9223372036854775807 + 1",
            "integer overflow in adding 9223372036854775807 + 1",
        );
        fails(
            "(-9223372036854775807 - 1) / (0 - 1)",
            "integer overflow in dividing -9223372036854775808 / -1",
        );
        fails("let x = 7; in x / 0", "division by zero");
        assert_eq!(ok("let a = -7; b = 2; in a / b"), "-3");
        assert_eq!(ok("let a = 6; in a * 7 - 2"), "40");
    }

    /// The operators and the builtins are one implementation: same results,
    /// same errors.
    #[test]
    fn operators_are_the_builtins() {
        for (op, builtin) in [
            ("a + b", "builtins.add a b"),
            ("a - b", "builtins.sub a b"),
            ("a * b", "builtins.mul a b"),
            ("a / b", "builtins.div a b"),
            ("a < b", "builtins.lessThan a b"),
        ] {
            for (a, b) in [
                ("7", "2"),
                ("7.0", "2"),
                ("(-7)", "2.5"),
                ("9223372036854775807", "2"),
                ("(-9223372036854775807 - 1)", "(-1)"),
                ("1", "0"),
                ("\"a\"", "1"),
                ("1.0", "\"a\""),
                ("[ { } 1 ]", "[ { } 2 ]"),
            ] {
                let with = |e: &str| format!("let a = {a}; b = {b}; in {e}");
                let first = |e: &str| match crate::eval::test_eval(&with(e)) {
                    Ok(v) => v,
                    Err(m) => m.lines().next().unwrap_or_default().to_string(),
                };
                let number = |s: &str| !s.starts_with(['"', '[']);
                if op == "a + b" && !(number(a) && number(b)) {
                    continue; // `+` also concatenates and has its own type errors.
                }
                assert_eq!(first(op), first(builtin), "{}", with(op));
            }
        }
    }

    #[test]
    fn arith_helper() {
        use crate::syntax::ast::BinaryOp;
        use crate::value::Value;
        let store = std::rc::Rc::new(crate::store::MemStore::new());
        let mut ev = crate::eval::Evaluator::new(crate::eval::EvalSettings::default(), store);
        let r = ev.arith(BinaryOp::Sub, &Value::Int(10), &Value::Int(7));
        assert!(matches!(r, Ok(Value::Int(3))));
        let r = ev.arith(BinaryOp::Div, &Value::Int(7), &Value::float(2.0));
        assert!(matches!(r, Ok(Value::Float(f)) if f.get() == 3.5));
        let e = ev
            .arith(
                BinaryOp::Mul,
                &Value::Int(4294967297),
                &Value::Int(4294967297),
            )
            .err()
            .map(|e| e.take().msg);
        assert_eq!(
            e.as_deref(),
            Some("integer overflow in multiplying 4294967297 * 4294967297")
        );
        let e = ev
            .arith(BinaryOp::Div, &Value::Int(1), &Value::Int(0))
            .err()
            .map(|e| e.take().msg);
        assert_eq!(e.as_deref(), Some("division by zero"));
        let e = ev
            .arith(BinaryOp::Concat, &Value::Int(1), &Value::Int(0))
            .err()
            .map(|e| e.take().msg);
        assert_eq!(e.as_deref(), Some("not a numeric operator"));
    }
}
