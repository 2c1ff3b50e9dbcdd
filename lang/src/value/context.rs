//! String context: which store objects a string was built from.
//!
//! Owns the set of [`ContextElem`]s carried by a string. The `derivation` builtin
//! reads it to find a derivation's inputs. It must not touch the store.
//!
//! Textual forms (as Nix encodes them, and as `builtins.getContext` exposes them):
//!
//! | form                           | variant                  | meaning                                  |
//! |--------------------------------|--------------------------|------------------------------------------|
//! | `/rocmx/store/…-src`           | [`ContextElem::Opaque`]  | a plain store path (a copied source)     |
//! | `=/rocmx/store/…-x.drv`        | [`ContextElem::DrvDeep`] | a `.drv` and all its outputs, deeply     |
//! | `!out!/rocmx/store/…-x.drv`    | [`ContextElem::Built`]   | output `out` of the derivation           |

use std::collections::BTreeSet;
use std::rc::Rc;

/// One element. Its paths are shared strings: a derivation's `drvPath` and
/// outputs put the same path into every string built from them, and a
/// context of thousands of such strings (`concatStringsSep` over a package
/// set) copies each element once per string it reaches.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ContextElem {
    Opaque(Rc<str>),
    DrvDeep(Rc<str>),
    Built { drv: Rc<str>, output: Rc<str> },
}

impl ContextElem {
    /// Nix's encoded form (see the module table).
    pub fn encode(&self) -> String {
        match self {
            ContextElem::Opaque(p) => p.to_string(),
            ContextElem::DrvDeep(p) => format!("={p}"),
            ContextElem::Built { drv, output } => format!("!{output}!{drv}"),
        }
    }

    /// Parses the encoded form; `None` when malformed.
    pub fn decode(s: &str) -> Option<ContextElem> {
        if let Some(rest) = s.strip_prefix('=') {
            Some(ContextElem::DrvDeep(rest.into()))
        } else if let Some(rest) = s.strip_prefix('!') {
            let (output, drv) = rest.split_once('!')?;
            Some(ContextElem::Built {
                drv: drv.into(),
                output: output.into(),
            })
        } else {
            Some(ContextElem::Opaque(s.into()))
        }
    }
}

/// A set of context elements; empty for most strings.
///
/// Representation (its cost model): `None` when empty (almost every string), so
/// a string without context carries one null pointer; otherwise a shared,
/// immutable-until-unique set. Sharing makes copying a context into an
/// interpolated string or a derivation's attribute a reference count, and
/// clone-on-write ([`Rc::make_mut`]) makes the accumulation in
/// `concatStringsSep` or interpolation mutate in place once it owns its set.
/// Small sets (nearly all: one to a few store paths) are a sorted vector of
/// exactly their elements; a `BTreeSet` leaf node would hold room for eleven.
/// Past [`SMALL_MAX`] elements they become a `BTreeSet`, so building a context
/// of thousands of paths one at a time stays O(n log n).
#[derive(Clone, Debug, Default)]
pub struct Context(Option<Rc<Elems>>);

/// Sets with at most this many elements are a sorted vector.
const SMALL_MAX: usize = 16;

#[derive(Clone, Debug)]
enum Elems {
    /// Sorted, no duplicates, never empty.
    Small(Vec<ContextElem>),
    /// More than [`SMALL_MAX`] elements.
    Large(BTreeSet<ContextElem>),
}

impl Elems {
    fn insert(&mut self, e: &ContextElem) {
        match self {
            Elems::Small(v) => match v.binary_search(e) {
                Ok(_) => {}
                Err(i) if v.len() < SMALL_MAX => v.insert(i, e.clone()),
                Err(_) => {
                    let mut set: BTreeSet<ContextElem> = std::mem::take(v).into_iter().collect();
                    set.insert(e.clone());
                    *self = Elems::Large(set);
                }
            },
            Elems::Large(set) => {
                if !set.contains(e) {
                    set.insert(e.clone());
                }
            }
        }
    }
}

impl PartialEq for Context {
    fn eq(&self, other: &Context) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}
impl Eq for Context {}

impl Context {
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }
    pub fn single(e: ContextElem) -> Context {
        Context(Some(Rc::new(Elems::Small(vec![e]))))
    }
    pub fn insert(&mut self, e: ContextElem) {
        match &mut self.0 {
            None => *self = Context::single(e),
            Some(rc) => Rc::make_mut(rc).insert(&e),
        }
    }
    /// Adds `other`'s elements. Inlined for the common case, an empty `other`.
    #[inline]
    pub fn extend(&mut self, other: &Context) {
        if let Some(o) = &other.0 {
            self.extend_from(o);
        }
    }
    fn extend_from(&mut self, o: &Rc<Elems>) {
        match &mut self.0 {
            // Nothing yet: share the other's set.
            None => self.0 = Some(o.clone()),
            Some(rc) if Rc::ptr_eq(rc, o) => {}
            Some(rc) => {
                let mine = Rc::make_mut(rc);
                match &**o {
                    Elems::Small(v) => v.iter().for_each(|e| mine.insert(e)),
                    Elems::Large(set) => set.iter().for_each(|e| mine.insert(e)),
                }
            }
        }
    }
    /// The union of `parts`: what `concatStringsSep` builds from the strings it
    /// joins. Past [`SMALL_MAX`] elements, sorting them all once costs a fraction
    /// of inserting them one at a time into a growing set (a search and a B-tree
    /// walk with string comparisons per element); a lone non-empty part is shared.
    pub fn union_of(parts: &[Context]) -> Context {
        let mut nonempty = parts.iter().filter(|c| !c.is_empty());
        let Some(first) = nonempty.next() else {
            return Context::default();
        };
        let total: usize = parts.iter().map(Context::len).sum();
        if total == first.len() || total <= SMALL_MAX {
            let mut out = first.clone();
            nonempty.for_each(|c| out.extend(c));
            return out;
        }
        let mut all: Vec<&ContextElem> = Vec::with_capacity(total);
        parts.iter().for_each(|c| all.extend(c.iter()));
        all.sort_unstable();
        all.dedup();
        let elems = if all.len() <= SMALL_MAX {
            Elems::Small(all.into_iter().cloned().collect())
        } else {
            Elems::Large(all.into_iter().cloned().collect())
        };
        Context(Some(Rc::new(elems)))
    }
    /// The elements in order.
    pub fn iter(&self) -> impl Iterator<Item = &ContextElem> {
        let (small, large) = match self.0.as_deref() {
            None => (None, None),
            Some(Elems::Small(v)) => (Some(v.iter()), None),
            Some(Elems::Large(s)) => (None, Some(s.iter())),
        };
        small
            .into_iter()
            .flatten()
            .chain(large.into_iter().flatten())
    }
    pub fn len(&self) -> usize {
        match self.0.as_deref() {
            None => 0,
            Some(Elems::Small(v)) => v.len(),
            Some(Elems::Large(s)) => s.len(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_decode_vectors() {
        let cases = [
            (
                "/rocmx/store/abc-x",
                ContextElem::Opaque("/rocmx/store/abc-x".into()),
            ),
            (
                "=/rocmx/store/abc-x.drv",
                ContextElem::DrvDeep("/rocmx/store/abc-x.drv".into()),
            ),
            (
                "!dev!/rocmx/store/abc-x.drv",
                ContextElem::Built {
                    drv: "/rocmx/store/abc-x.drv".into(),
                    output: "dev".into(),
                },
            ),
        ];
        for (text, elem) in cases {
            assert_eq!(ContextElem::decode(text).as_ref(), Some(&elem));
            assert_eq!(elem.encode(), text);
        }
        assert_eq!(ContextElem::decode("!bad"), None);
    }

    fn opaque(i: usize) -> ContextElem {
        ContextElem::Opaque(format!("/rocmx/store/{i:03}-x").into())
    }

    /// Whatever the representation (shared, small vector, B-tree past
    /// SMALL_MAX), a context is the sorted set of what was put in, and adding
    /// to a shared one never changes the other holders' copy.
    #[test]
    fn sets_stay_sorted_deduplicated_and_unshared_on_write() {
        let mut a = Context::default();
        assert!(a.is_empty());
        for i in (0..40).rev().chain(0..40) {
            a.insert(opaque(i));
        }
        assert_eq!(a.len(), 40);
        assert!(a.iter().zip(a.iter().skip(1)).all(|(x, y)| x < y));

        let shared = Context::single(opaque(5));
        let mut b = Context::default();
        b.extend(&shared);
        b.extend(&shared);
        assert_eq!(b, shared);
        b.insert(opaque(1));
        assert_eq!(shared.len(), 1, "the shared set is not changed");
        assert_eq!(
            b.iter().cloned().collect::<Vec<_>>(),
            [opaque(1), opaque(5)]
        );

        let mut c = Context::single(opaque(7));
        c.extend(&a);
        assert_eq!(c.len(), 40);
        let mut d = a.clone();
        d.extend(&Context::single(opaque(99)));
        assert_eq!((a.len(), d.len()), (40, 41));
        assert_eq!(Context::default(), Context::default());
        assert_ne!(a, d);
    }

    /// `union_of` is the sequential union, whatever the sizes and overlaps.
    #[test]
    fn union_of_is_the_union_of_its_parts() {
        let set = |r: std::ops::Range<usize>| {
            let mut c = Context::default();
            r.for_each(|i| c.insert(opaque(i)));
            c
        };
        let deep = Context::single(ContextElem::DrvDeep("/rocmx/store/005-x.drv".into()));
        let cases: Vec<Vec<Context>> = vec![
            vec![],
            vec![Context::default(), Context::default()],
            vec![set(0..3)],
            vec![Context::default(), set(0..40), Context::default()],
            vec![set(0..10), set(5..12)],
            vec![set(0..10), set(5..30), deep.clone()],
            (0..100).map(|i| set(i % 37..i % 37 + 1)).collect(),
            vec![set(0..20), set(0..20)],
            vec![deep.clone(), set(0..17), deep],
        ];
        for parts in cases {
            let mut seq = Context::default();
            parts.iter().for_each(|c| seq.extend(c));
            let u = Context::union_of(&parts);
            assert_eq!(u, seq);
            assert_eq!(u.len(), seq.len());
            assert!(u.iter().zip(u.iter().skip(1)).all(|(x, y)| x < y));
        }
    }
}
