//! The layered form of an attribute set, `base // top` kept unmerged (see
//! [`Attrs::Layered`] for when `//` makes one): its parts, its lookups and
//! its size, and the iterator that merges a top with its base in name order.
//! It must not decide when to layer or merge; `Attrs::update` does.

use std::cell::{Cell, OnceCell};
use std::rc::Rc;

use super::{find_sym, AttrPos, Attrs, AttrsIter, Entry};
use crate::value::{Sym, Value};

/// The parts of [`Attrs::Layered`], boxed so that a plain set stays small.
#[derive(Clone)]
pub struct Layer {
    pub(super) base: Rc<Attrs>,
    pub(super) top: Box<[Entry]>,
    pub(super) len: Cell<usize>,
    pub(super) merged: OnceCell<Rc<Attrs>>,
}

impl Layer {
    /// The number of distinct names, counted once and kept.
    #[inline(never)]
    pub(super) fn count(&self) -> usize {
        let fresh = self
            .top
            .iter()
            .filter(|e| self.base.get_sym(e.0).is_none())
            .count();
        self.len.set(self.base.len() + fresh);
        self.len.get()
    }

    /// A lookup through the tops, then in the bottom set.
    #[inline(never)]
    pub(super) fn get_sym(&self, k: Sym) -> Option<&Value> {
        let mut l = self;
        loop {
            if let Some((_, x, _)) = find_sym(&l.top, k) {
                return Some(x);
            }
            match &*l.base {
                Attrs::Layered(below) => l = below,
                base => return base.get_sym(k),
            }
        }
    }

    #[inline(never)]
    pub(super) fn iter(&self) -> AttrsIter<'_> {
        AttrsIter::Layered(Box::new(Merge {
            top: self.top.iter(),
            base: self.base.iter(),
            next_top: None,
            next_base: None,
        }))
    }
}

/// The entries of a layered set in name order: its top's and its base's,
/// the top's winning on equal names.
pub struct Merge<'a> {
    top: std::slice::Iter<'a, Entry>,
    base: AttrsIter<'a>,
    /// Read ahead from each side and not yet given out.
    next_top: Option<&'a Entry>,
    next_base: Option<(&'a Sym, &'a Value, AttrPos)>,
}

impl<'a> Merge<'a> {
    pub(super) fn next_pos(&mut self) -> Option<(&'a Sym, &'a Value, AttrPos)> {
        let t = self.next_top.take().or_else(|| self.top.next());
        let b = self.next_base.take().or_else(|| self.base.next_pos());
        match (t, b) {
            (Some((k, x, p)), Some(b)) => match k.cmp(b.0) {
                std::cmp::Ordering::Less => {
                    self.next_base = Some(b);
                    Some((k, x, *p))
                }
                std::cmp::Ordering::Equal => Some((k, x, *p)),
                std::cmp::Ordering::Greater => {
                    self.next_top = t;
                    Some(b)
                }
            },
            (Some((k, x, p)), None) => Some((k, x, *p)),
            (None, b) => b,
        }
    }
}
