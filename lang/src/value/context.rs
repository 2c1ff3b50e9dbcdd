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

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ContextElem {
    Opaque(String),
    DrvDeep(String),
    Built { drv: String, output: String },
}

impl ContextElem {
    /// Nix's encoded form (see the module table).
    pub fn encode(&self) -> String {
        match self {
            ContextElem::Opaque(p) => p.clone(),
            ContextElem::DrvDeep(p) => format!("={p}"),
            ContextElem::Built { drv, output } => format!("!{output}!{drv}"),
        }
    }

    /// Parses the encoded form; `None` when malformed.
    pub fn decode(s: &str) -> Option<ContextElem> {
        if let Some(rest) = s.strip_prefix('=') {
            Some(ContextElem::DrvDeep(rest.to_string()))
        } else if let Some(rest) = s.strip_prefix('!') {
            let (output, drv) = rest.split_once('!')?;
            Some(ContextElem::Built {
                drv: drv.to_string(),
                output: output.to_string(),
            })
        } else {
            Some(ContextElem::Opaque(s.to_string()))
        }
    }
}

/// A set of context elements; empty for most strings.
///
/// Boxed so that a string without context (almost all of them) carries one null
/// pointer instead of a whole `BTreeSet` header.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[allow(clippy::box_collection)]
pub struct Context(Option<Box<BTreeSet<ContextElem>>>);

impl Context {
    pub fn is_empty(&self) -> bool {
        self.0.as_ref().is_none_or(|s| s.is_empty())
    }
    pub fn single(e: ContextElem) -> Context {
        let mut c = Context::default();
        c.insert(e);
        c
    }
    pub fn insert(&mut self, e: ContextElem) {
        self.0.get_or_insert_with(Default::default).insert(e);
    }
    /// Adds `other`'s elements. Inlined for the common case, an empty `other`.
    #[inline]
    pub fn extend(&mut self, other: &Context) {
        if let Some(o) = &other.0 {
            if !o.is_empty() {
                self.extend_from(o);
            }
        }
    }
    fn extend_from(&mut self, o: &BTreeSet<ContextElem>) {
        let s = self.0.get_or_insert_with(Default::default);
        for e in o.iter() {
            s.insert(e.clone());
        }
    }
    pub fn iter(&self) -> impl Iterator<Item = &ContextElem> {
        self.0.iter().flat_map(|s| s.iter())
    }
    pub fn len(&self) -> usize {
        self.0.as_ref().map_or(0, |s| s.len())
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
}
