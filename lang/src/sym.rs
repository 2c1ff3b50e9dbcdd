//! Interned names: identifiers and attribute names.
//!
//! Owns the process-wide symbol table. Every distinct name is stored once, for
//! the life of the process (as Nix's `SymbolTable` does), and a [`Sym`] is a
//! pointer to it: one word, copied without reference counting, compared for
//! equality by address. Order is still the names' byte order (attribute sets
//! iterate in it), decided on an 8-byte prefix held beside the name, so that
//! most comparisons are one integer comparison instead of a call to `memcmp`.
//!
//! Must not know about values or evaluation: the parser, the IR and the
//! attribute sets all use it.
//!
//! The table is never emptied. Its size is the number of distinct names a
//! process has seen, which for evaluation is bounded by the source text plus
//! the names computed at run time (`listToAttrs`, `fromJSON`, dynamic
//! attributes).

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::collections::HashMap;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::sync::{Mutex, OnceLock};

/// One interned name. Lives forever (leaked on interning).
struct SymData {
    /// Dense number in interning order, for tables indexed by symbol.
    id: u32,
    /// The first 8 bytes, big-endian, zero-padded: comparing two prefixes as
    /// integers orders them as their bytes would be ordered.
    prefix: u64,
    name: Box<str>,
}

/// An interned identifier or attribute name (see the module docs).
#[derive(Clone, Copy)]
pub struct Sym(&'static SymData);

/// The table hashes names with foldhash, not the standard library's SipHash:
/// interning is on the path of every computed attribute name (`a.${n}`,
/// `listToAttrs`), and names are short, where SipHash's setup dominates.
/// foldhash's per-process random seed keeps hostile names (from `fromJSON`)
/// from being chosen to collide.
type Table = HashMap<&'static str, Sym, foldhash::fast::RandomState>;

fn table() -> &'static Mutex<Table> {
    static TABLE: OnceLock<Mutex<Table>> = OnceLock::new();
    TABLE.get_or_init(|| Mutex::new(Table::default()))
}

fn prefix_of(s: &str) -> u64 {
    let mut b = [0u8; 8];
    let n = s.len().min(8);
    b[..n].copy_from_slice(&s.as_bytes()[..n]);
    u64::from_be_bytes(b)
}

impl Sym {
    /// The symbol for `s`, interning it the first time it is seen.
    pub fn new(s: impl AsRef<str>) -> Sym {
        let s = s.as_ref();
        // A poisoned lock only means another thread panicked while holding
        // it; the table itself is always consistent (one insert per call).
        let mut t = table().lock().unwrap_or_else(|e| e.into_inner());
        if let Some(sym) = t.get(s) {
            return *sym;
        }
        let data: &'static SymData = Box::leak(Box::new(SymData {
            // More than 2^32 distinct names cannot fit in memory as leaked
            // boxes of at least 32 bytes each on the machines rocmx targets.
            id: u32::try_from(t.len()).expect("fewer than 2^32 distinct names"),
            prefix: prefix_of(s),
            name: s.into(),
        }));
        let sym = Sym(data);
        t.insert(&data.name, sym);
        sym
    }

    /// The name.
    #[inline]
    pub fn as_str(&self) -> &'static str {
        &self.0.name
    }

    /// A dense index (0, 1, 2, … in interning order), for per-symbol tables.
    #[inline]
    pub fn id(self) -> usize {
        self.0.id as usize
    }

    /// The same symbol: identity of the interned entry.
    #[inline]
    pub fn ptr_eq(a: Sym, b: Sym) -> bool {
        std::ptr::eq(a.0, b.0)
    }
}

/// Names the evaluator's own code looks up in sets on hot paths: coercing a set to a
/// string (`__toString`, `outPath`), comparing derivations (`type`, `outPath`),
/// calling a set (`__functor`). Interned once per process: a lookup by [`Sym`]
/// compares addresses and integer prefixes, one by `&str` compares bytes.
pub struct Known {
    pub out_path: Sym,
    pub to_string: Sym,
    pub functor: Sym,
    pub type_: Sym,
}

/// The [`Known`] names.
#[inline]
pub fn known() -> &'static Known {
    static KNOWN: OnceLock<Known> = OnceLock::new();
    KNOWN.get_or_init(|| Known {
        out_path: Sym::new("outPath"),
        to_string: Sym::new("__toString"),
        functor: Sym::new("__functor"),
        type_: Sym::new("type"),
    })
}

impl PartialEq for Sym {
    #[inline]
    fn eq(&self, other: &Sym) -> bool {
        Sym::ptr_eq(*self, *other)
    }
}
impl Eq for Sym {}

impl PartialEq<str> for Sym {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}
impl PartialEq<&str> for Sym {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}
impl PartialEq<Sym> for str {
    fn eq(&self, other: &Sym) -> bool {
        self == other.as_str()
    }
}
impl PartialEq<Sym> for &str {
    fn eq(&self, other: &Sym) -> bool {
        *self == other.as_str()
    }
}
impl PartialEq<String> for Sym {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other
    }
}

impl Ord for Sym {
    #[inline]
    fn cmp(&self, other: &Sym) -> Ordering {
        if Sym::ptr_eq(*self, *other) {
            return Ordering::Equal;
        }
        match self.0.prefix.cmp(&other.0.prefix) {
            Ordering::Equal => self.0.name.cmp(&other.0.name),
            o => o,
        }
    }
}
impl PartialOrd for Sym {
    #[inline]
    fn partial_cmp(&self, other: &Sym) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Hashes as the name does, so maps keyed by `Sym` can be probed with `&str`.
impl Hash for Sym {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state)
    }
}

impl Borrow<str> for Sym {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}
impl AsRef<str> for Sym {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}
impl Deref for Sym {
    type Target = str;
    #[inline]
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl fmt::Display for Sym {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
impl fmt::Debug for Sym {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl From<&str> for Sym {
    fn from(s: &str) -> Sym {
        Sym::new(s)
    }
}
impl From<String> for Sym {
    fn from(s: String) -> Sym {
        Sym::new(s)
    }
}
impl From<&String> for Sym {
    fn from(s: &String) -> Sym {
        Sym::new(s)
    }
}
impl From<Sym> for String {
    fn from(s: Sym) -> String {
        s.as_str().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_entry_per_name() {
        let a = Sym::new("alpha");
        let b = Sym::new(String::from("alpha"));
        assert!(Sym::ptr_eq(a, b));
        assert_ne!(a, Sym::new("alphb"));
        assert_eq!(a, "alpha");
        assert_eq!(a.as_str(), "alpha");
    }

    /// Order must be byte order, whatever the prefixes say: shared 8-byte
    /// prefixes, a prefix of another name, NUL bytes, non-ASCII bytes.
    #[test]
    fn order_is_byte_order() {
        let names = [
            "",
            "a",
            "ab",
            "ab\0",
            "ab\0\0",
            "abcdefgh",
            "abcdefghi",
            "abcdefgha",
            "abcdefgh\u{e9}",
            "b",
            "package1234",
            "package12345",
            "package2",
            "\u{e9}t\u{e9}",
            "Z",
            "_",
            "z-long-name-beyond-eight",
        ];
        for x in names {
            for y in names {
                assert_eq!(
                    Sym::new(x).cmp(&Sym::new(y)),
                    x.as_bytes().cmp(y.as_bytes()),
                    "{x:?} vs {y:?}"
                );
            }
        }
    }

    #[test]
    fn hashes_like_its_name() {
        let mut m: HashMap<Sym, i32> = HashMap::new();
        m.insert(Sym::new("key"), 1);
        assert_eq!(m.get("key"), Some(&1));
    }

    #[test]
    fn interning_from_threads_agrees() {
        let hs: Vec<_> = (0..4)
            .map(|_| {
                std::thread::spawn(|| {
                    Sym::new("shared-name-across-threads").as_str().as_ptr() as usize
                })
            })
            .collect();
        let ptrs: Vec<usize> = hs.into_iter().map(|h| h.join().unwrap()).collect();
        assert!(ptrs.windows(2).all(|w| w[0] == w[1]));
    }
}
