//! Attribute sets: immutable maps from names to (possibly unevaluated) values,
//! always iterated in name order.
//!
//! Owns the representation and its cost model. Small sets (the vast majority) are
//! a sorted vector: compact and fast to build. Sets past [`SMALL_MAX`] entries
//! become a persistent B-tree (`imbl::OrdMap`), so `big // small` shares structure
//! with `big` instead of copying it — the difference between O(n) and O(log n) per
//! update in a `//` fold. It must not force values.

use std::rc::Rc;

use imbl::shared_ptr::RcK;

/// The persistent map, with non-atomic reference counts (values are not `Send`).
type OrdMap<K, V> = imbl::GenericOrdMap<K, V, RcK>;

use super::{Sym, Value};

/// Sets with at most this many entries use the sorted-vector form.
pub const SMALL_MAX: usize = 32;

#[derive(Clone)]
pub enum Attrs {
    /// Sorted by name, no duplicates.
    Small(Vec<(Sym, Value)>),
    /// Persistent map, used past [`SMALL_MAX`] entries.
    Large(OrdMap<Sym, Value>),
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
    pub fn from_unsorted(mut v: Vec<(Sym, Value)>) -> Attrs {
        // Stable sort keeps insertion order among equal keys; keep the last one.
        v.sort_by(|a, b| a.0.cmp(&b.0));
        let mut out: Vec<(Sym, Value)> = Vec::with_capacity(v.len());
        for (k, val) in v {
            match out.last_mut() {
                Some(last) if last.0 == k => last.1 = val,
                _ => out.push((k, val)),
            }
        }
        Attrs::from_sorted(out)
    }

    /// Builds a set from entries already sorted by name without duplicates.
    pub fn from_sorted(v: Vec<(Sym, Value)>) -> Attrs {
        debug_assert!(v.windows(2).all(|w| w[0].0 < w[1].0));
        if v.len() <= SMALL_MAX {
            Attrs::Small(v)
        } else {
            Attrs::Large(v.into_iter().collect())
        }
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

    pub fn get(&self, k: &str) -> Option<&Value> {
        match self {
            Attrs::Small(v) => {
                if v.len() <= 8 {
                    v.iter().find(|(n, _)| n.as_str() == k).map(|(_, x)| x)
                } else {
                    v.binary_search_by(|(n, _)| n.as_str().cmp(k))
                        .ok()
                        .map(|i| &v[i].1)
                }
            }
            Attrs::Large(m) => m.get(k),
        }
    }

    pub fn contains(&self, k: &str) -> bool {
        self.get(k).is_some()
    }

    /// Entries in name order.
    pub fn iter(&self) -> AttrsIter<'_> {
        match self {
            Attrs::Small(v) => AttrsIter::Small(v.iter()),
            Attrs::Large(m) => AttrsIter::Large(m.iter()),
        }
    }

    pub fn keys(&self) -> impl Iterator<Item = &Sym> {
        self.iter().map(|(k, _)| k)
    }

    pub fn values(&self) -> impl Iterator<Item = &Value> {
        self.iter().map(|(_, v)| v)
    }

    /// Inserts or replaces one entry.
    pub fn insert(&mut self, k: Sym, val: Value) {
        match self {
            Attrs::Small(v) => match v.binary_search_by(|(n, _)| n.cmp(&k)) {
                Ok(i) => v[i].1 = val,
                Err(i) => {
                    v.insert(i, (k, val));
                    if v.len() > SMALL_MAX {
                        let m: OrdMap<Sym, Value> = std::mem::take(v).into_iter().collect();
                        *self = Attrs::Large(m);
                    }
                }
            },
            Attrs::Large(m) => {
                m.insert(k, val);
            }
        }
    }

    pub fn remove(&mut self, k: &str) {
        match self {
            Attrs::Small(v) => {
                if let Ok(i) = v.binary_search_by(|(n, _)| n.as_str().cmp(k)) {
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
                let mut out = Vec::with_capacity(a.len() + b.len());
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
                Rc::new(Attrs::from_sorted(out))
            }
            (Attrs::Large(a), _) if other.len() <= a.len() => {
                let mut m = a.clone();
                for (k, v) in other.iter() {
                    m.insert(k.clone(), v.clone());
                }
                Rc::new(Attrs::Large(m))
            }
            (_, Attrs::Large(b)) => {
                let mut m = b.clone();
                for (k, v) in self.iter() {
                    if !m.contains_key(k) {
                        m.insert(k.clone(), v.clone());
                    }
                }
                Rc::new(Attrs::Large(m))
            }
            (Attrs::Large(a), _) => {
                let mut m = a.clone();
                for (k, v) in other.iter() {
                    m.insert(k.clone(), v.clone());
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

pub enum AttrsIter<'a> {
    Small(std::slice::Iter<'a, (Sym, Value)>),
    Large(imbl::ordmap::Iter<'a, Sym, Value, RcK>),
}

impl<'a> Iterator for AttrsIter<'a> {
    type Item = (&'a Sym, &'a Value);
    fn next(&mut self) -> Option<Self::Item> {
        match self {
            AttrsIter::Small(i) => i.next().map(|(k, v)| (k, v)),
            AttrsIter::Large(i) => i.next(),
        }
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

    #[test]
    fn sorted_and_last_wins() {
        let a = set(&[("b", 1), ("a", 2), ("b", 3)]);
        assert_eq!(ints(&a), vec![("a".into(), 2), ("b".into(), 3)]);
    }

    #[test]
    fn update_small_and_large_agree() {
        let big: Vec<(String, i64)> = (0..100).map(|i| (format!("k{i:03}"), i)).collect();
        let big = set(&big
            .iter()
            .map(|(k, v)| (k.as_str(), *v))
            .collect::<Vec<_>>());
        assert!(matches!(*big, Attrs::Large(_)));
        let small = set(&[("k005", -5), ("zz", 7)]);
        let u = big.update(&small);
        assert_eq!(u.len(), 101);
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
