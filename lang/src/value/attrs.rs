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
//! that copy small (see `lang/Cargo.toml`). It must not force values.

use std::rc::Rc;

use imbl::shared_ptr::RcK;

/// The persistent map, with non-atomic reference counts (values are not `Send`).
type OrdMap<K, V> = imbl::GenericOrdMap<K, V, RcK>;

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

#[derive(Clone)]
pub enum Attrs {
    /// Sorted by name, no duplicates: at most [`BUILT_MAX`] entries, and at most
    /// [`SMALL_MAX`] for the result of `//` or of inserts.
    Small(Vec<Entry>),
    /// Persistent map: past [`SMALL_MAX`] entries after `//` or inserts, past
    /// [`BUILT_MAX`] when built whole.
    Large(OrdMap<Sym, (Value, AttrPos)>),
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
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn get<'k>(&self, k: impl Into<Key<'k>>) -> Option<&Value> {
        match k.into() {
            Key::Sym(k) => self.get_sym(k),
            Key::Str(k) => self.get_str(k),
        }
    }

    /// Lookup by symbol: address comparisons in small sets, integer-prefix
    /// comparisons in the binary searches.
    #[inline]
    fn get_sym(&self, k: Sym) -> Option<&Value> {
        match self {
            Attrs::Small(v) => {
                if v.len() <= 8 {
                    v.iter().find(|(n, _, _)| *n == k).map(|(_, x, _)| x)
                } else {
                    v.binary_search_by(|(n, _, _)| n.cmp(&k))
                        .ok()
                        .map(|i| &v[i].1)
                }
            }
            Attrs::Large(m) => m.get(&k).map(|(x, _)| x),
        }
    }

    fn get_str(&self, k: &str) -> Option<&Value> {
        match self {
            Attrs::Small(v) => {
                if v.len() <= 8 {
                    v.iter()
                        .find(|(n, _, _)| same_name(n.as_str(), k))
                        .map(|(_, x, _)| x)
                } else {
                    v.binary_search_by(|(n, _, _)| name_cmp(n.as_str(), k))
                        .ok()
                        .map(|i| &v[i].1)
                }
            }
            Attrs::Large(m) => m.get(k).map(|(x, _)| x),
        }
    }

    /// Where attribute `k` was defined, if known.
    pub fn get_pos(&self, k: &str) -> Option<Pos> {
        let p = match self {
            Attrs::Small(v) => v
                .iter()
                .find(|(n, _, _)| n.as_str() == k)
                .map(|(_, _, p)| *p),
            Attrs::Large(m) => m.get(k).map(|(_, p)| *p),
        }?;
        (p != AttrPos::NONE).then(|| p.to_pos())
    }

    pub fn contains<'k>(&self, k: impl Into<Key<'k>>) -> bool {
        self.get(k).is_some()
    }

    /// Entries in name order.
    pub fn iter(&self) -> AttrsIter<'_> {
        match self {
            Attrs::Small(v) => AttrsIter::Small(v.iter()),
            Attrs::Large(m) => AttrsIter::Large(m.iter()),
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
        }
    }

    pub fn remove(&mut self, k: &str) {
        match self {
            Attrs::Small(v) => {
                if let Ok(i) = v.binary_search_by(|(n, _, _)| n.as_str().cmp(k)) {
                    v.remove(i);
                }
            }
            Attrs::Large(m) => {
                m.remove(k);
            }
        }
    }

    /// `self // other`: the entries of both, `other` winning on conflicts.
    pub fn update(self: &Rc<Self>, other: &Rc<Self>) -> Rc<Attrs> {
        if other.is_empty() {
            return self.clone();
        }
        if self.is_empty() {
            return other.clone();
        }
        match (&**self, &**other) {
            (Attrs::Small(a), Attrs::Small(b)) => {
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
                if out.len() <= SMALL_MAX {
                    Rc::new(Attrs::Small(out))
                } else {
                    Rc::new(Attrs::persistent(out))
                }
            }
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
        }
    }

    /// A stable identity for «repeated» detection while printing.
    pub fn ptr(self: &Rc<Self>) -> usize {
        Rc::as_ptr(self) as *const u8 as usize
    }
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
mod tests {
    use super::*;

    fn set(keys: &[(&str, i64)]) -> Rc<Attrs> {
        Rc::new(Attrs::from_unsorted(
            keys.iter()
                .map(|(k, v)| (Sym::new(k), Value::Int(*v)))
                .collect(),
        ))
    }

    fn ints(a: &Attrs) -> Vec<(String, i64)> {
        a.iter()
            .map(|(k, v)| match v {
                Value::Int(i) => (k.to_string(), *i),
                _ => unreachable!(),
            })
            .collect()
    }

    /// A set built whole stays a vector up to BUILT_MAX entries; `//` makes a
    /// persistent map of anything past SMALL_MAX, and the entries are the same
    /// either way.
    #[test]
    fn built_sets_are_vectors_and_updates_past_small_max_are_maps() {
        let keys: Vec<String> = (0..100).map(|i| format!("k{i:03}")).collect();
        let pairs: Vec<(&str, i64)> = keys.iter().map(|k| (k.as_str(), 1)).collect();
        let built = set(&pairs);
        assert!(matches!(*built, Attrs::Small(_)));
        let big = set(&(0..BUILT_MAX + 1)
            .map(|i| (Box::leak(format!("b{i:04}").into_boxed_str()) as &str, 1))
            .collect::<Vec<_>>());
        assert!(matches!(*big, Attrs::Large(_)));
        let updated = built.update(&set(&[("k000", 2), ("new", 3)]));
        assert!(matches!(*updated, Attrs::Large(_)));
        let mut want = ints(&built);
        want[0].1 = 2;
        want.push(("new".to_string(), 3));
        want.sort();
        assert_eq!(ints(&updated), want);
        let small = set(&[("a", 1)]).update(&set(&[("b", 2)]));
        assert!(matches!(*small, Attrs::Small(_)));
    }

    /// A lookup by symbol (the evaluator's) and by string (builtins') find
    /// the same entries in each representation: the linear scan of a small
    /// set, its binary search, and the B-tree.
    #[test]
    fn lookups_by_symbol_and_by_string_agree() {
        for n in [3usize, 20, 100, 300] {
            let names: Vec<String> = (0..n).map(|i| format!("attr-{}", i * 7 % n)).collect();
            let a = set(&names
                .iter()
                .enumerate()
                .map(|(i, k)| (k.as_str(), i as i64))
                .collect::<Vec<_>>());
            assert_eq!(matches!(*a, Attrs::Large(_)), n > BUILT_MAX, "{n}");
            for (i, k) in names.iter().enumerate() {
                let by_sym = a.get(Sym::new(k));
                let by_str = a.get(k.as_str());
                assert!(
                    matches!(by_sym, Some(Value::Int(x)) if *x == i as i64),
                    "{k}"
                );
                assert!(
                    matches!(by_str, Some(Value::Int(x)) if *x == i as i64),
                    "{k}"
                );
            }
            for missing in ["attr-", "attr-1000", "", "zzz"] {
                assert!(a.get(Sym::new(missing)).is_none(), "{missing}");
                assert!(a.get(missing).is_none(), "{missing}");
            }
        }
    }

    /// The 8-byte form keeps file and start, and the length up to 255; a
    /// file index past 24 bits is not kept; the default is "no position".
    #[test]
    fn attr_positions_round_trip_within_their_bounds() {
        use crate::syntax::ast::Span;
        let pos = |file, start, end| Pos {
            file,
            span: Span { start, end },
        };
        for p in [
            pos(0, 0, 0),
            pos(1, 0, 1),
            pos(7, 1234, 1250),
            pos((1 << 24) - 1, u32::MAX - 255, u32::MAX),
            pos(3, 10, 265),
        ] {
            assert_eq!(AttrPos::from(p).to_pos(), p);
        }
        assert_eq!(AttrPos::from(pos(3, 10, 266)).to_pos(), pos(3, 10, 265));
        assert_eq!(AttrPos::from(pos(1 << 24, 5, 9)), AttrPos::NONE);
        assert_eq!(AttrPos::from(Pos::default()), AttrPos::NONE);
        assert_eq!(AttrPos::NONE.to_pos(), Pos::default());
        assert_eq!(std::mem::size_of::<Entry>(), 32);

        let mut a = Attrs::new();
        a.insert_pos(Sym::new("x"), Value::Int(1), pos(2, 40, 45));
        a.insert(Sym::new("y"), Value::Int(2));
        assert_eq!(a.get_pos("x"), Some(pos(2, 40, 45)));
        assert_eq!(a.get_pos("y"), None);
        let kept: Vec<_> = a.iter_pos().map(|(k, _, p)| (k.to_string(), p)).collect();
        assert_eq!(
            kept,
            [
                ("x".to_string(), pos(2, 40, 45)),
                ("y".into(), Pos::default())
            ]
        );
    }

    #[test]
    fn merged_len_counts_each_name_once() {
        let entries = |names: &[&str]| match Attrs::from_unsorted(
            names.iter().map(|n| (Sym::new(n), Value::Null)).collect(),
        ) {
            Attrs::Small(v) => v,
            Attrs::Large(_) => unreachable!(),
        };
        let cases: [(&[&str], &[&str], usize); 5] = [
            (&[], &[], 0),
            (&["a"], &[], 1),
            (&["a", "b", "c"], &["b", "d"], 4),
            (&["a", "b"], &["a", "b"], 2),
            (&["x1", "x2", "x3"], &["a", "x2", "z"], 5),
        ];
        for (a, b, n) in cases {
            assert_eq!(merged_len(&entries(a), &entries(b)), n, "{a:?} {b:?}");
            assert_eq!(merged_len(&entries(b), &entries(a)), n, "{b:?} {a:?}");
            let u = Rc::new(Attrs::Small(entries(a))).update(&Rc::new(Attrs::Small(entries(b))));
            assert_eq!(u.len(), n);
        }
    }

    #[test]
    fn sorted_and_last_wins() {
        let a = set(&[("b", 1), ("a", 2), ("b", 3)]);
        assert_eq!(ints(&a), vec![("a".into(), 2), ("b".into(), 3)]);
    }

    #[test]
    fn update_small_and_large_agree() {
        let big: Vec<(String, i64)> = (0..300).map(|i| (format!("k{i:03}"), i)).collect();
        let big = set(&big
            .iter()
            .map(|(k, v)| (k.as_str(), *v))
            .collect::<Vec<_>>());
        assert!(matches!(*big, Attrs::Large(_)));
        let small = set(&[("k005", -5), ("zz", 7)]);
        let u = big.update(&small);
        assert_eq!(u.len(), 301);
        assert!(matches!(u.get("k005"), Some(Value::Int(-5))));
        let u2 = small.update(&big);
        assert!(matches!(u2.get("k005"), Some(Value::Int(5))));
        assert!(matches!(u2.get("zz"), Some(Value::Int(7))));
        let keys: Vec<_> = u2.keys().cloned().collect();
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(keys, sorted);
    }
}
