//! Attribute sets: immutable maps from names to (possibly unevaluated) values,
//! always iterated in name order.
//!
//! Owns the representation and its cost model. Small sets (the vast majority), and
//! sets built whole up to [`BUILT_MAX`] entries, are a sorted vector: compact and
//! fast to build. The result of `//` past [`SMALL_MAX`] entries (and bigger sets
//! built whole) is a persistent B-tree (`imbl::OrdMap`), so `big // small` shares
//! structure with `big` instead of copying it — the difference between O(n) and
//! O(log n) per update in a `//` fold. Its nodes hold 4 entries (imbl's `small-chunks`): an
//! update copies the nodes on the path to each key it sets, and small nodes make
//! that copy small (see `lang/Cargo.toml`). An update much smaller than the set
//! it updates is not merged at all but kept as a layer over it
//! ([`Attrs::Layered`], `layer.rs`): `drv // { override = …; }` and `pkgs //
//! scope` cost one allocation instead of a copy of every entry or an insert
//! of each new one. A merge or a persistent map's inserts happen only
//! when layers would grow past [`LAYER_DEPTH_MAX`] or an update is
//! too big for one. It must not force values.

use std::cell::{Cell, OnceCell};
use std::rc::Rc;

use imbl::shared_ptr::RcK;

/// The persistent map, with non-atomic reference counts (values are not `Send`).
type OrdMap<K, V> = imbl::GenericOrdMap<K, V, RcK>;

mod layer;

pub use layer::{Layer, Merge};

use super::{Sym, Value};
use crate::eval::ir::Pos;

/// One entry: name, value, and where the attribute was defined
/// ([`AttrPos::NONE`] when made by a builtin), for `unsafeGetAttrPos` and
/// error frames. 32 bytes.
pub type Entry = (Sym, Value, AttrPos);

/// Where an attribute was defined, in 8 bytes instead of [`Pos`]'s 12: an
/// entry is then 32 bytes, not 40 (a package set holds millions of them, most
/// copied by `//`). Encoding: the span's start offset, and one word holding
/// the file index in its low 24 bits and the span's length, capped at 255, in
/// its high 8 bits. Only the start and a caret's width (at most 80 columns)
/// are ever shown of an attribute's position, so the cap loses nothing shown;
/// a position in a file numbered 2^24 or above is not kept (an evaluation
/// reading over 16 million files). `Pos::default()` and `NONE` correspond.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct AttrPos {
    start: u32,
    file_len: u32,
}

impl AttrPos {
    /// No known position.
    pub const NONE: AttrPos = AttrPos {
        start: 0,
        file_len: 0,
    };
    const FILE_BITS: u32 = 24;

    /// The position as a [`Pos`]; its span is the kept (capped) length.
    #[inline]
    pub fn to_pos(self) -> Pos {
        let file = self.file_len & ((1 << Self::FILE_BITS) - 1);
        let len = self.file_len >> Self::FILE_BITS;
        Pos {
            file,
            span: crate::syntax::ast::Span {
                start: self.start,
                end: self.start.saturating_add(len),
            },
        }
    }
}

impl From<Pos> for AttrPos {
    #[inline]
    fn from(p: Pos) -> AttrPos {
        if p.file >= 1 << AttrPos::FILE_BITS {
            return AttrPos::NONE;
        }
        let len = p.span.end.saturating_sub(p.span.start).min(255);
        AttrPos {
            start: p.span.start,
            file_len: p.file | (len << AttrPos::FILE_BITS),
        }
    }
}

/// `a == b` for attribute names, deciding most mismatches by length and first byte
/// before comparing the bytes: names are short, and a call to `memcmp` for each
/// probe of a lookup cost more than the comparison itself.
#[inline]
fn same_name(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.as_bytes().first() == b.as_bytes().first() && a == b
}

/// `a.cmp(b)` for attribute names, deciding on the first byte when it differs.
#[inline]
fn name_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    match (a.as_bytes().first(), b.as_bytes().first()) {
        (Some(x), Some(y)) if x != y => x.cmp(y),
        _ => a.cmp(b),
    }
}

/// The name looked up: an interned [`Sym`] (what the evaluator has: compared
/// by address, ordered by an integer prefix) or a plain string (what builtins
/// written in Rust have: `"outPath"`), compared by bytes.
#[derive(Clone, Copy)]
pub enum Key<'k> {
    Sym(Sym),
    Str(&'k str),
}

impl From<Sym> for Key<'_> {
    fn from(s: Sym) -> Self {
        Key::Sym(s)
    }
}
impl From<&Sym> for Key<'_> {
    fn from(s: &Sym) -> Self {
        Key::Sym(*s)
    }
}
impl From<&&Sym> for Key<'_> {
    fn from(s: &&Sym) -> Self {
        Key::Sym(**s)
    }
}
impl<'k> From<&'k str> for Key<'k> {
    fn from(s: &'k str) -> Self {
        Key::Str(s)
    }
}
impl<'k> From<&'k String> for Key<'k> {
    fn from(s: &'k String) -> Self {
        Key::Str(s)
    }
}

/// A set made by `//` or grown one insert at a time is a sorted vector up to this many
/// entries, a persistent map past it: a fold of `//` over a big set then copies a few
/// nodes per step, not the whole set.
pub const SMALL_MAX: usize = 32;

/// A set built whole (a literal, `mapAttrs`, `listToAttrs`, `intersectAttrs`, …) is a
/// sorted vector up to this many entries. Building a persistent map inserts entry by
/// entry, splitting nodes as it goes: `mapAttrs` over 100 entries cost 4.6 times the
/// instructions of filling a vector (callgrind), and twice Nix 2.8's time. The first
/// `//` on such a set makes it a persistent map (see [`Attrs::update`]), so a fold
/// still pays that once.
pub const BUILT_MAX: usize = 256;

/// A small update (at most this many entries) over a layered set joins its
/// top while the top stays within this size.
pub const LAYER_TOP_MAX: usize = 8;

/// `base // top` is layered only over a base of at least this many entries;
/// smaller sets are merged, which costs little more and keeps their lookups
/// one scan.
pub const LAYER_BASE_MIN: usize = 8;

/// An update of more than [`LAYER_TOP_MAX`] entries is layered over a set at
/// least this many times its size (`pkgs // scope`, an overlay over a
/// package set); closer sizes are merged.
pub const LAYER_RATIO: usize = 4;

/// Layers over layers at most this deep; past it the set is merged first,
/// so a lookup scans at most this many tops before the bottom set.
pub const LAYER_DEPTH_MAX: usize = 3;

#[derive(Clone)]
pub enum Attrs {
    /// Sorted by name, no duplicates: at most [`BUILT_MAX`] entries, and at most
    /// [`SMALL_MAX`] for the result of a merging `//` or of inserts.
    Small(Vec<Entry>),
    /// Persistent map: past [`SMALL_MAX`] entries after `//` or inserts, past
    /// [`BUILT_MAX`] when built whole.
    Large(OrdMap<Sym, (Value, AttrPos)>),
    /// `base // top`, not merged: `top` (sorted, never empty) wins over
    /// `base`. Made by [`Attrs::update`] for an update much smaller than the
    /// set it updates — `drv // { override = …; }`, `attrs // { pname = …;
    /// }`, `pkgs // scope`, an overlay over a package set — which otherwise
    /// copied every entry of the base and touched each value's reference
    /// count (a merge), or inserted the update entry by entry into a
    /// persistent map (about 2,000 instructions an entry in a 5,000-entry
    /// set). A lookup tries each top from the newest, then the bottom set;
    /// layers are at most [`LAYER_DEPTH_MAX`] deep. `len` (distinct names) is
    /// counted on first use, `usize::MAX` until then: many layered sets are
    /// only looked into. `merged` is the set merged into one, made the first
    /// time it is needed (an update of the set that cannot be layered, or a
    /// layer over a set already at the deepest) and kept: a shared set (`pkgs`)
    /// is merged once, not at each use.
    Layered(Box<Layer>),
}

impl Default for Attrs {
    fn default() -> Self {
        Attrs::Small(Vec::new())
    }
}

impl Attrs {
    pub fn new() -> Attrs {
        Attrs::default()
    }

    /// Builds a set from entries in any order; a later duplicate replaces an earlier one.
    pub fn from_unsorted(v: Vec<(Sym, Value)>) -> Attrs {
        Attrs::from_unsorted_pos(v.into_iter().map(|(k, x)| (k, x, AttrPos::NONE)).collect())
    }

    /// Like [`Self::from_unsorted`], with a definition position per entry.
    pub fn from_unsorted_pos(mut v: Vec<Entry>) -> Attrs {
        // Stable sort keeps insertion order among equal keys; keep the last one.
        v.sort_by_key(|a| a.0);
        let mut out: Vec<Entry> = Vec::with_capacity(v.len());
        for e in v {
            match out.last_mut() {
                Some(last) if last.0 == e.0 => *last = e,
                _ => out.push(e),
            }
        }
        Attrs::from_sorted_pos(out)
    }

    /// Builds a set from entries already sorted by name without duplicates.
    pub fn from_sorted(v: Vec<(Sym, Value)>) -> Attrs {
        Attrs::from_sorted_pos(v.into_iter().map(|(k, x)| (k, x, AttrPos::NONE)).collect())
    }

    /// Like [`Self::from_sorted`], with a definition position per entry.
    pub fn from_sorted_pos(v: Vec<Entry>) -> Attrs {
        debug_assert!(v.windows(2).all(|w| w[0].0 < w[1].0));
        if v.len() <= BUILT_MAX {
            Attrs::Small(v)
        } else {
            Attrs::persistent(v)
        }
    }

    /// The persistent map of sorted entries.
    fn persistent(v: Vec<Entry>) -> Attrs {
        Attrs::Large(v.into_iter().map(|(k, x, p)| (k, (x, p))).collect())
    }

    pub fn len(&self) -> usize {
        match self {
            Attrs::Small(v) => v.len(),
            Attrs::Large(m) => m.len(),
            Attrs::Layered(l) if l.len.get() != usize::MAX => l.len.get(),
            Attrs::Layered(l) => l.count(),
        }
    }

    /// A lower bound of [`Self::len`] that counts nothing: exact unless the
    /// set is layered and its size not yet counted.
    pub fn len_at_least(&self) -> usize {
        match self {
            Attrs::Layered(l) if l.len.get() == usize::MAX => {
                l.base.len_at_least().max(l.top.len())
            }
            _ => self.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        match self {
            Attrs::Layered(_) => false,
            _ => self.len() == 0,
        }
    }

    /// Whether the set is, or is layered over, a persistent map: a change
    /// made in place ([`Self::insert`], [`Self::remove`]) then shares its
    /// structure instead of copying every entry.
    pub fn is_map(&self) -> bool {
        match self {
            Attrs::Small(_) => false,
            Attrs::Large(_) => true,
            Attrs::Layered(l) => l.base.is_map(),
        }
    }

    /// How many layers are over the bottom set.
    fn depth(&self) -> usize {
        let (mut d, mut a) = (0, self);
        while let Attrs::Layered(l) = a {
            d += 1;
            a = &l.base;
        }
        d
    }

    #[inline(always)]
    pub fn get<'k>(&self, k: impl Into<Key<'k>>) -> Option<&Value> {
        match k.into() {
            Key::Sym(k) => self.get_sym(k),
            Key::Str(k) => self.get_str(k),
        }
    }

    /// Lookup by symbol: address comparisons in small sets, integer-prefix
    /// comparisons in the binary searches.
    ///
    /// A small set is searched where the lookup is made; the other forms
    /// out of line.
    #[inline(always)]
    fn get_sym(&self, k: Sym) -> Option<&Value> {
        match self {
            Attrs::Small(v) => find_sym(v, k).map(|(_, x, _)| x),
            _ => self.get_sym_big(k),
        }
    }

    #[inline(never)]
    fn get_sym_big(&self, k: Sym) -> Option<&Value> {
        match self {
            Attrs::Small(v) => find_sym(v, k).map(|(_, x, _)| x),
            Attrs::Large(m) => m.get(&k).map(|(x, _)| x),
            Attrs::Layered(l) => l.get_sym(k),
        }
    }

    fn get_str(&self, k: &str) -> Option<&Value> {
        self.get_str_pos(k).map(|(x, _)| x)
    }

    /// The value and stored position of attribute `k`, looked up by bytes.
    fn get_str_pos(&self, k: &str) -> Option<(&Value, AttrPos)> {
        let mut a = self;
        loop {
            match a {
                Attrs::Small(v) => return find_str(v, k).map(|(_, x, p)| (x, *p)),
                Attrs::Large(m) => return m.get(k).map(|(x, p)| (x, *p)),
                Attrs::Layered(l) => match find_str(&l.top, k) {
                    Some((_, x, p)) => return Some((x, *p)),
                    None => a = &l.base,
                },
            }
        }
    }

    /// Where attribute `k` was defined, if known.
    pub fn get_pos(&self, k: &str) -> Option<Pos> {
        let (_, p) = self.get_str_pos(k)?;
        (p != AttrPos::NONE).then(|| p.to_pos())
    }

    pub fn contains<'k>(&self, k: impl Into<Key<'k>>) -> bool {
        self.get(k).is_some()
    }

    /// Entries in name order.
    #[inline]
    pub fn iter(&self) -> AttrsIter<'_> {
        match self {
            Attrs::Small(v) => AttrsIter::Small(v.iter()),
            Attrs::Large(m) => AttrsIter::Large(m.iter()),
            Attrs::Layered(l) => l.iter(),
        }
    }

    /// Entries with their positions in stored form, in name order: for
    /// building another set from this one's entries.
    pub fn entries(&self) -> impl Iterator<Item = (&Sym, &Value, AttrPos)> {
        self.iter().entries()
    }

    /// Entries with their definition positions, in name order.
    pub fn iter_pos(&self) -> AttrsPosIter<'_> {
        AttrsPosIter(self.iter())
    }

    pub fn keys(&self) -> impl Iterator<Item = &Sym> {
        self.iter().map(|(k, _)| k)
    }

    pub fn values(&self) -> impl Iterator<Item = &Value> {
        self.iter().map(|(_, v)| v)
    }

    /// Inserts or replaces one entry.
    pub fn insert(&mut self, k: Sym, val: Value) {
        self.insert_entry(k, val, AttrPos::NONE)
    }

    /// Inserts or replaces one entry, recording where it was defined.
    pub fn insert_pos(&mut self, k: Sym, val: Value, pos: Pos) {
        self.insert_entry(k, val, pos.into())
    }

    fn insert_entry(&mut self, k: Sym, val: Value, pos: AttrPos) {
        self.unlayer();
        match self {
            Attrs::Small(v) => match v.binary_search_by(|(n, _, _)| n.cmp(&k)) {
                Ok(i) => v[i] = (k, val, pos),
                Err(i) => {
                    v.insert(i, (k, val, pos));
                    if v.len() > SMALL_MAX {
                        let m: OrdMap<Sym, (Value, AttrPos)> = std::mem::take(v)
                            .into_iter()
                            .map(|(k, x, p)| (k, (x, p)))
                            .collect();
                        *self = Attrs::Large(m);
                    }
                }
            },
            Attrs::Large(m) => {
                m.insert(k, (val, pos));
            }
            Attrs::Layered(_) => unreachable!("unlayered above"),
        }
    }

    pub fn remove(&mut self, k: &str) {
        self.unlayer();
        match self {
            Attrs::Small(v) => {
                if let Ok(i) = v.binary_search_by(|(n, _, _)| n.as_str().cmp(k)) {
                    v.remove(i);
                }
            }
            Attrs::Large(m) => {
                m.remove(k);
            }
            Attrs::Layered(_) => unreachable!("unlayered above"),
        }
    }

    /// Replaces a layered set by its merged form, for a change in place.
    fn unlayer(&mut self) {
        if let Attrs::Layered(_) = self {
            let merged = Rc::new(std::mem::take(self)).merged();
            *self = Rc::try_unwrap(merged).unwrap_or_else(|rc| (*rc).clone());
        }
    }

    /// A layer of `top` (sorted, not empty) over `base`.
    fn layered(base: Rc<Attrs>, top: Vec<Entry>) -> Attrs {
        debug_assert!(!top.is_empty() && top.windows(2).all(|w| w[0].0 < w[1].0));
        Attrs::Layered(Box::new(Layer {
            base,
            top: top.into_boxed_slice(),
            len: Cell::new(usize::MAX),
            merged: OnceCell::new(),
        }))
    }

    /// The set itself, or a layered set merged into one: a persistent map
    /// when its bottom set is one (shared, the tops inserted), otherwise a
    /// vector up to [`SMALL_MAX`] entries and a map past it.
    fn merged(self: &Rc<Self>) -> Rc<Attrs> {
        let Attrs::Layered(l) = &**self else {
            return self.clone();
        };
        l.merged
            .get_or_init(|| {
                if self.is_map() {
                    return Rc::new(Attrs::Large(self.to_map()));
                }
                let v: Vec<Entry> = self
                    .iter()
                    .entries()
                    .map(|(k, x, p)| (*k, x.clone(), p))
                    .collect();
                Rc::new(Attrs::merged_from(v))
            })
            .clone()
    }

    /// The entries as a persistent map: shared when the set is one, the tops
    /// of a layered set inserted over its bottom set's map.
    fn to_map(&self) -> OrdMap<Sym, (Value, AttrPos)> {
        match self {
            Attrs::Small(v) => v.iter().map(|(k, x, p)| (*k, (x.clone(), *p))).collect(),
            Attrs::Large(m) => m.clone(),
            Attrs::Layered(l) => match l.merged.get() {
                Some(merged) => merged.to_map(),
                None => {
                    let mut m = l.base.to_map();
                    for (k, x, p) in l.top.iter() {
                        m.insert(*k, (x.clone(), *p));
                    }
                    m
                }
            },
        }
    }

    /// `self // other`: the entries of both, `other` winning on conflicts.
    ///
    /// An update much smaller than `self` is layered over it ([`Attrs::Layered`]):
    /// one of at most [`LAYER_TOP_MAX`] entries joins the top of `self`'s
    /// layer when it fits, or makes a layer over a set of at least
    /// [`LAYER_BASE_MIN`]; a bigger one makes a layer over a set
    /// [`LAYER_RATIO`] times its size. Everything else is merged: two small
    /// vectors into one, otherwise the smaller side inserted into the bigger
    /// side's persistent map (a layered operand merged first).
    pub fn update(self: &Rc<Self>, other: &Rc<Self>) -> Rc<Attrs> {
        if other.is_empty() {
            return self.clone();
        }
        if self.is_empty() {
            return other.clone();
        }
        if let Some(layered) = self.layer_over(other) {
            return Rc::new(layered);
        }
        self.merged().merge(&other.merged())
    }

    /// The sorted entries a merging `//` made: a vector up to [`SMALL_MAX`]
    /// entries, a persistent map past it.
    fn merged_from(v: Vec<Entry>) -> Attrs {
        if v.len() <= SMALL_MAX {
            Attrs::Small(v)
        } else {
            Attrs::persistent(v)
        }
    }

    /// `self // other` as a layer, when `other` is small enough for one.
    fn layer_over(self: &Rc<Self>, other: &Rc<Self>) -> Option<Attrs> {
        let k = other.len_at_least();
        let top: Vec<Entry> = match &**other {
            Attrs::Small(t) if k <= LAYER_TOP_MAX => {
                if let Attrs::Layered(l) = &**self {
                    if l.top.len() <= LAYER_TOP_MAX && merged_len(&l.top, t) <= LAYER_TOP_MAX {
                        return Some(Attrs::layered(l.base.clone(), merge_sorted(&l.top, t)));
                    }
                }
                if self.len_at_least() < LAYER_BASE_MIN {
                    return None;
                }
                t.clone()
            }
            _ if k > LAYER_TOP_MAX && self.len_at_least() >= k.saturating_mul(LAYER_RATIO) => other
                .iter()
                .entries()
                .map(|(n, x, p)| (*n, x.clone(), p))
                .collect(),
            _ => return None,
        };
        // At the deepest, the layer goes over the set merged (kept in it).
        let base = if self.depth() < LAYER_DEPTH_MAX {
            self.clone()
        } else {
            self.merged()
        };
        Some(Attrs::layered(base, top))
    }

    /// `self // other` merged into one set; neither is layered or empty
    /// ([`Self::update`] has seen to both).
    fn merge(self: &Rc<Self>, other: &Rc<Self>) -> Rc<Attrs> {
        match (&**self, &**other) {
            (Attrs::Small(a), Attrs::Small(b)) => Rc::new(Attrs::merged_from(merge_sorted(a, b))),
            (Attrs::Large(a), _) if other.len() <= a.len() => {
                let mut m = a.clone();
                for (k, v, p) in other.iter().entries() {
                    m.insert(*k, (v.clone(), p));
                }
                Rc::new(Attrs::Large(m))
            }
            (_, Attrs::Large(b)) => {
                let mut m = b.clone();
                for (k, v, p) in self.iter().entries() {
                    if !m.contains_key(k) {
                        m.insert(*k, (v.clone(), p));
                    }
                }
                Rc::new(Attrs::Large(m))
            }
            (Attrs::Large(a), _) => {
                let mut m = a.clone();
                for (k, v, p) in other.iter().entries() {
                    m.insert(*k, (v.clone(), p));
                }
                Rc::new(Attrs::Large(m))
            }
            (Attrs::Layered(_), _) | (_, Attrs::Layered(_)) => {
                unreachable!("layered sets are merged before")
            }
        }
    }

    /// A stable identity for «repeated» detection while printing.
    pub fn ptr(self: &Rc<Self>) -> usize {
        Rc::as_ptr(self) as *const u8 as usize
    }
}

/// The entry named `k` in sorted entries: a scan of a few by address, a
/// binary search of more.
#[inline]
fn find_sym(v: &[Entry], k: Sym) -> Option<&Entry> {
    if v.len() <= 8 {
        v.iter().find(|(n, _, _)| *n == k)
    } else {
        v.binary_search_by(|(n, _, _)| n.cmp(&k))
            .ok()
            .map(|i| &v[i])
    }
}

/// The entry named `k` in sorted entries, compared by bytes.
fn find_str<'v>(v: &'v [Entry], k: &str) -> Option<&'v Entry> {
    if v.len() <= 8 {
        v.iter().find(|(n, _, _)| same_name(n.as_str(), k))
    } else {
        v.binary_search_by(|(n, _, _)| name_cmp(n.as_str(), k))
            .ok()
            .map(|i| &v[i])
    }
}

/// The union of two sorted entry lists, `b` winning on equal names.
fn merge_sorted(a: &[Entry], b: &[Entry]) -> Vec<Entry> {
    let mut out = Vec::with_capacity(merged_len(a, b));
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        match a[i].0.cmp(&b[j].0) {
            std::cmp::Ordering::Less => {
                out.push(a[i].clone());
                i += 1;
            }
            std::cmp::Ordering::Greater => {
                out.push(b[j].clone());
                j += 1;
            }
            std::cmp::Ordering::Equal => {
                out.push(b[j].clone());
                i += 1;
                j += 1;
            }
        }
    }
    out.extend_from_slice(&a[i..]);
    out.extend_from_slice(&b[j..]);
    out
}

/// The number of distinct names in two sorted entry lists: the exact size of
/// their union, so `//` of overlapping sets (`args // newArgs`, `old // f old`)
/// allocates no unused room (set copies are most of a package set's memory).
fn merged_len(a: &[Entry], b: &[Entry]) -> usize {
    let (mut i, mut j, mut n) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        match a[i].0.cmp(&b[j].0) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                i += 1;
                j += 1;
            }
        }
        n += 1;
    }
    n + (a.len() - i) + (b.len() - j)
}

pub enum AttrsIter<'a> {
    Small(std::slice::Iter<'a, Entry>),
    Large(imbl::ordmap::Iter<'a, Sym, (Value, AttrPos), RcK>),
    Layered(Box<Merge<'a>>),
}

impl<'a> AttrsIter<'a> {
    /// The entries themselves, positions in their stored form.
    fn entries(self) -> impl Iterator<Item = (&'a Sym, &'a Value, AttrPos)> {
        let mut it = self;
        std::iter::from_fn(move || it.next_pos())
    }

    fn next_pos(&mut self) -> Option<(&'a Sym, &'a Value, AttrPos)> {
        match self {
            AttrsIter::Small(i) => i.next().map(|(k, v, p)| (k, v, *p)),
            AttrsIter::Large(i) => i.next().map(|(k, (v, p))| (k, v, *p)),
            AttrsIter::Layered(m) => m.next_pos(),
        }
    }
}

impl<'a> Iterator for AttrsIter<'a> {
    type Item = (&'a Sym, &'a Value);
    fn next(&mut self) -> Option<Self::Item> {
        self.next_pos().map(|(k, v, _)| (k, v))
    }
}

/// Entries with their definition positions, in name order.
pub struct AttrsPosIter<'a>(AttrsIter<'a>);

impl<'a> Iterator for AttrsPosIter<'a> {
    type Item = (&'a Sym, &'a Value, Pos);
    fn next(&mut self) -> Option<Self::Item> {
        self.0.next_pos().map(|(k, v, p)| (k, v, p.to_pos()))
    }
}

#[cfg(test)]
mod tests;
