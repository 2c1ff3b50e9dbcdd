//! The error in flight on the evaluator's hot path.
//!
//! Owns [`Raised`], the zero-sized error of [`RResult`], and the one slot per
//! thread that holds the [`EvalError`] it stands for. It must not decide what
//! is an error nor render one (`error.rs` does).
//!
//! Why not `Result<Value, Box<EvalError>>` everywhere: a `Value` is a pair of
//! machine words, returned in two registers, but with a boxed error beside it
//! the result is three words' worth of layout and comes back through memory.
//! Every `eval`, `force` and `call` then stored its result to the stack and
//! the caller read it back, often as one 16-byte load of two 8-byte stores,
//! which stalls store forwarding. With a zero-sized error the result is the
//! value's own two words (the error is a tag the value never uses), in
//! registers again (checked in the disassembly).
//!
//! The error itself waits in a thread-local slot from the moment it is raised
//! (`?` converting a `Box<EvalError>` into a [`Raised`]) until someone takes it
//! back (`?` converting the other way, where a [`crate::EResult`] function
//! calls an [`RResult`] one, or [`Raised::take`]). Both conversions run only on
//! the error path. The rule that keeps the slot honest: nothing evaluates
//! between raising an error and passing it on; code that must evaluate while
//! holding an error (adding a frame whose text needs a value, `tryEval`) takes
//! it out of the slot first. A [`Raised`] is neither `Send` nor `Sync`, so it
//! never leaves the thread whose slot holds its error.

use std::cell::Cell;
use std::marker::PhantomData;

use super::error::{ErrorKind, EvalError, Frame};
use super::ir::Pos;

/// A result whose error is in flight (see the module documentation): the
/// evaluator's hot functions (`eval`, `force`, `call`, the operators) return
/// this, the builtins and the public entry points [`crate::EResult`].
pub type RResult<T> = Result<T, Raised>;

/// An evaluation error raised and not yet taken back: the error is in this
/// thread's slot. Zero-sized, so an [`RResult<Value>`] is returned in
/// registers.
#[must_use = "the error stays in flight until it is taken or passed on"]
pub struct Raised(PhantomData<*const ()>);

thread_local! {
    static IN_FLIGHT: Cell<Option<Box<EvalError>>> = const { Cell::new(None) };
}

impl Raised {
    /// Raises `e`: puts it in the slot (replacing an error raised earlier and
    /// dropped without being taken).
    #[cold]
    #[inline(never)]
    pub fn raise(e: Box<EvalError>) -> Raised {
        IN_FLIGHT.with(|slot| slot.set(Some(e)));
        Raised(PhantomData)
    }

    /// Takes the error back out of the slot. The slot is empty only if the
    /// rule in the module documentation was broken; that is reported as an
    /// error of its own rather than a panic.
    #[cold]
    #[inline(never)]
    pub fn take(self) -> Box<EvalError> {
        IN_FLIGHT.with(|slot| slot.take()).unwrap_or_else(|| {
            EvalError::new(
                ErrorKind::Eval,
                "internal error: an evaluation error was lost in flight; please report this",
            )
        })
    }

    /// Changes the error in flight in place.
    #[cold]
    #[inline(never)]
    fn modify(self, f: impl FnOnce(&mut EvalError)) -> Raised {
        let mut e = self.take();
        f(&mut e);
        Raised::raise(e)
    }

    /// Sets the error's position if it has none yet.
    pub fn at_pos(self, pos: Pos) -> Raised {
        self.modify(|e| {
            if e.pos.is_none() {
                e.pos = Some(pos);
            }
        })
    }

    /// Pushes a "while …" frame (at most 64 are kept). Cold and out of line,
    /// each closure's copy: the frame's formatting stays out of the hot
    /// functions that add frames (`enter`, selections, builtin calls).
    #[cold]
    #[inline(never)]
    pub fn frame(self, frame: impl FnOnce() -> Frame) -> Raised {
        // The frame's text may need evaluation-free formatting only, but the
        // error is taken out first all the same: see the module's rule.
        let mut e = self.take();
        if e.frames.len() < 64 {
            e.frames.push(frame());
        }
        Raised::raise(e)
    }
}

/// `Err` of `e` raised: where an [`RResult`] function fails with an error it
/// makes (`return raise(EvalError::new(…))`).
#[inline]
pub fn raise<T>(e: Box<EvalError>) -> RResult<T> {
    Err(Raised::raise(e))
}

/// Shows the error in flight (for `unwrap` in tests), leaving it there.
impl std::fmt::Debug for Raised {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let e = IN_FLIGHT.with(|slot| slot.take());
        let r = match &e {
            Some(e) => write!(f, "Raised({:?}: {})", e.kind, e.msg),
            None => f.write_str("Raised(<nothing in flight>)"),
        };
        IN_FLIGHT.with(|slot| slot.set(e));
        r
    }
}

impl From<Box<EvalError>> for Raised {
    #[inline]
    fn from(e: Box<EvalError>) -> Raised {
        Raised::raise(e)
    }
}

impl From<Raised> for Box<EvalError> {
    #[inline]
    fn from(r: Raised) -> Box<EvalError> {
        r.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::Value;

    #[test]
    fn a_value_result_with_a_raised_error_is_two_words() {
        assert_eq!(std::mem::size_of::<RResult<Value>>(), 16);
        assert_eq!(std::mem::size_of::<RResult<bool>>(), 1);
        assert_eq!(std::mem::size_of::<Raised>(), 0);
    }

    #[test]
    fn an_error_survives_the_round_trip_through_the_slot() {
        fn inner() -> RResult<i32> {
            Err(EvalError::new(ErrorKind::Throw, "boom"))?
        }
        fn outer() -> crate::EResult<i32> {
            Ok(inner()?)
        }
        let e = outer().unwrap_err();
        assert_eq!(e.msg, "boom");
        assert_eq!(e.kind, ErrorKind::Throw);
    }

    #[test]
    fn the_latest_raise_wins_and_a_lost_error_is_reported_not_a_panic() {
        let dropped = Raised::raise(EvalError::new(ErrorKind::Throw, "first"));
        drop(dropped);
        let second = Raised::raise(EvalError::new(ErrorKind::Throw, "second"));
        assert_eq!(second.take().msg, "second");
        // The slot is empty now: a token taken twice is a broken rule.
        let forged = Raised(PhantomData);
        let e = forged.take();
        assert!(e.msg.contains("lost in flight"), "{}", e.msg);
    }

    #[test]
    fn positions_and_frames_are_added_in_place() {
        let r = Raised::raise(EvalError::new(ErrorKind::Type, "bad"));
        let pos = Pos::default();
        let r = r.at_pos(pos).frame(|| Frame {
            pos: None,
            msg: "while testing".into(),
            builtin: None,
        });
        let e = r.take();
        assert_eq!(e.pos, Some(pos));
        assert_eq!(e.frames.len(), 1);
        assert_eq!(e.frames[0].msg, "while testing");
    }
}
