//! Store paths: `/rocmx/store/<32 nix32 chars>-<name>`, and how their hash parts are derived.
//!
//! Owns: [`StorePath`] (parsing from a base name or an absolute path with optional subpath,
//! printing, ordering), the name rules, [`ContentAddress`] (the modes by which a hash part
//! is derived from content) and the exact, versioned *fingerprint* that is hashed into a
//! hash part (see [`ContentAddress::fingerprint`]), plus the floating-output placeholder
//! ([`StorePath::placeholder_for_output`]).
//!
//! Must not: touch the filesystem, compute NARs or serialise derivations; callers hand it
//! digests and reference sets. Never panics on any input.
//!
//! # Fingerprint, version 1
//!
//! The hash part of a content-addressed path is `nix32(BLAKE3(fingerprint)[0..20])`: the
//! first 160 bits of the BLAKE3 digest of the fingerprint, in Nix's base 32. The fingerprint
//! is a UTF-8 string of NUL-separated fields (no field can contain NUL):
//!
//! ```text
//! fingerprint = "rocmx-store-path-v1" NUL kind NUL body NUL name
//!
//! kind   body
//! text         content NUL refs                    flat bytes (.drv files, builtins.toFile)
//! source       content NUL refs                    NAR of a tree copied from the filesystem
//! fixed        method NUL content                  fixed-output: method is `flat` or `nar`
//! output       content NUL refs NUL "self:" 0|1    content-addressed build output
//! placeholder  drv-path NUL output-name            floating-output placeholder (never built)
//!
//! content = algo ":" lowercase-hex-digest          e.g. blake3:af1349b9…
//! refs    = count (NUL absolute-store-path)*       decimal count, paths sorted, no duplicates
//! ```
//!
//! For `text`, `source` and `output` the content hash must be BLAKE3 (so that one content
//! has one path); `fixed` takes any algorithm and no references, so a fixed-output path
//! depends only on name, method and declared hash. For `output`, `content` is the BLAKE3
//! *modulo self-references* (the NAR with every occurrence of the object's own hash part
//! masked, plus the masked positions), `refs` excludes the object itself, and `self:1` says
//! that it referred to itself. Example, a text file `hello` with no references:
//!
//! ```text
//! "rocmx-store-path-v1" NUL "text" NUL "blake3:<hex of BLAKE3(hello)>" NUL "0" NUL "hello"
//! ```

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

use thiserror::Error;

use crate::hash::{Hash, HashAlgo};
use crate::nixbase32;

/// The logical store directory, written into every store path.
pub const STORE_DIR: &str = "/rocmx/store";

/// Characters in a hash part.
pub const HASH_PART_LEN: usize = 32;

/// Bytes behind a hash part (160 bits).
pub const HASH_BYTES: usize = 20;

/// Longest allowed name, in characters (as in Nix).
pub const MAX_NAME_LEN: usize = 211;

/// The fingerprint's version tag; see the module documentation.
pub const FINGERPRINT_TAG: &str = "rocmx-store-path-v1";

/// Why a text is not a store path, or a store path cannot be made.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum StorePathError {
    /// An absolute path that is not inside [`STORE_DIR`].
    #[error("{path:?} is not in the store {STORE_DIR}")]
    NotInStore {
        /// The path given.
        path: String,
    },
    /// A store path where only the store object itself was expected.
    #[error("{path:?} is inside a store path, not a store path itself")]
    UnexpectedSubpath {
        /// The path given.
        path: String,
    },
    /// The base name is too short for a hash part, a dash and a name, or lacks the dash.
    #[error("store path base name {base:?} is not `<{HASH_PART_LEN} nix32 characters>-<name>`")]
    BadBaseName {
        /// The base name given.
        base: String,
    },
    /// A character of the hash part outside the nix32 alphabet.
    #[error("invalid character {ch:?} at position {position} of store path hash part")]
    InvalidHashChar {
        /// Position in the hash part.
        position: usize,
        /// The character.
        ch: char,
    },
    /// The name is empty.
    #[error("store path name is empty")]
    EmptyName,
    /// The name is longer than [`MAX_NAME_LEN`].
    #[error("store path name is {len} characters long, the maximum is {MAX_NAME_LEN}")]
    NameTooLong {
        /// Its length in characters.
        len: usize,
    },
    /// The name starts with `.`.
    #[error("store path name {name:?} starts with '.'")]
    NameStartsWithDot {
        /// The name.
        name: String,
    },
    /// The name has a character outside `[A-Za-z0-9+-._?=]`.
    #[error("invalid character {ch:?} at position {position} of store path name {name:?} (allowed: A-Z a-z 0-9 + - . _ ? =)")]
    InvalidNameChar {
        /// The name.
        name: String,
        /// Character position in the name.
        position: usize,
        /// The character.
        ch: char,
    },
    /// A `text`, `source` or `output` content address whose hash is not BLAKE3.
    #[error("{kind} content address needs a blake3 hash, got {algo}")]
    ContentHashNotBlake3 {
        /// The kind (`text`, `source`, `output`).
        kind: &'static str,
        /// The algorithm given.
        algo: HashAlgo,
    },
}

/// Checks a store path name: 1–211 characters of `[A-Za-z0-9+-._?=]`, not starting with `.`.
pub fn validate_name(name: &str) -> Result<(), StorePathError> {
    if name.is_empty() {
        return Err(StorePathError::EmptyName);
    }
    for (position, ch) in name.chars().enumerate() {
        let ok = ch.is_ascii_alphanumeric() || matches!(ch, '+' | '-' | '.' | '_' | '?' | '=');
        if !ok {
            return Err(StorePathError::InvalidNameChar {
                name: name.to_string(),
                position,
                ch,
            });
        }
    }
    // All characters are ASCII from here on, so bytes are characters.
    if name.len() > MAX_NAME_LEN {
        return Err(StorePathError::NameTooLong { len: name.len() });
    }
    if name.starts_with('.') {
        return Err(StorePathError::NameStartsWithDot {
            name: name.to_string(),
        });
    }
    Ok(())
}

/// A store path: a 160-bit hash part and a name. Printed (and ordered, like Nix, as
/// text) as `/rocmx/store/<hash part>-<name>`.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct StorePath {
    hash: [u8; HASH_BYTES],
    name: String,
}

impl StorePath {
    /// A store path from raw hash bytes and a name, which is validated.
    pub fn new(hash: [u8; HASH_BYTES], name: &str) -> Result<StorePath, StorePathError> {
        validate_name(name)?;
        Ok(StorePath {
            hash,
            name: name.to_string(),
        })
    }

    /// Parses a base name `<hash part>-<name>`.
    pub fn from_base_name(base: &str) -> Result<StorePath, StorePathError> {
        let bytes = base.as_bytes();
        if bytes.len() <= HASH_PART_LEN || bytes.get(HASH_PART_LEN) != Some(&b'-') {
            return Err(StorePathError::BadBaseName {
                base: base.to_string(),
            });
        }
        // Byte HASH_PART_LEN is the ASCII `-`, so this is a character boundary.
        let (hash_part, rest) = base.split_at(HASH_PART_LEN);
        let text: &[u8; HASH_PART_LEN] =
            hash_part
                .as_bytes()
                .try_into()
                .map_err(|_| StorePathError::BadBaseName {
                    base: base.to_string(),
                })?;
        match nixbase32::decode20(text) {
            Some(hash) => StorePath::new(hash, &rest[1..]),
            None => {
                let (position, ch) = hash_part
                    .chars()
                    .enumerate()
                    .find(|&(_, ch)| !nixbase32::is_nix32_char(ch))
                    .unwrap_or((0, char::REPLACEMENT_CHARACTER));
                Err(StorePathError::InvalidHashChar { position, ch })
            }
        }
    }

    /// Parses an absolute store path `/rocmx/store/<hash part>-<name>` (a trailing `/` is
    /// allowed); anything beneath it is an error.
    pub fn from_absolute(path: &str) -> Result<StorePath, StorePathError> {
        match Self::from_absolute_with_subpath(path)? {
            (p, None) => Ok(p),
            (_, Some(_)) => Err(StorePathError::UnexpectedSubpath {
                path: path.to_string(),
            }),
        }
    }

    /// Parses `/rocmx/store/<hash part>-<name>[/<subpath>]`, giving the store path and the
    /// subpath (without its leading `/`, `None` if absent or empty).
    pub fn from_absolute_with_subpath(
        path: &str,
    ) -> Result<(StorePath, Option<String>), StorePathError> {
        let rest = path
            .strip_prefix(STORE_DIR)
            .and_then(|r| r.strip_prefix('/'))
            .ok_or_else(|| StorePathError::NotInStore {
                path: path.to_string(),
            })?;
        let (base, sub) = match rest.split_once('/') {
            Some((base, sub)) => (base, Some(sub)),
            None => (rest, None),
        };
        let store_path = Self::from_base_name(base)?;
        let sub = sub.filter(|s| !s.is_empty()).map(str::to_string);
        Ok((store_path, sub))
    }

    /// The content-addressed path of an object named `name` with content address `ca`.
    pub fn from_ca(name: &str, ca: &ContentAddress) -> Result<StorePath, StorePathError> {
        validate_name(name)?;
        let fp = ca.fingerprint(name)?;
        Ok(Self::from_fingerprint(&fp, name))
    }

    /// The placeholder that stands for output `output` of the derivation at `drv_path`
    /// before that derivation is built (kind `placeholder`; see the module documentation).
    /// It has the shape of a store path named `name` but never exists in the store;
    /// resolution replaces it by the path the output was realised to.
    pub fn placeholder_for_output(
        drv_path: &StorePath,
        output: &str,
        name: &str,
    ) -> Result<StorePath, StorePathError> {
        validate_name(name)?;
        let mut fp =
            String::with_capacity(FINGERPRINT_TAG.len() + 80 + output.len() + 2 * name.len());
        fp.push_str(FINGERPRINT_TAG);
        fp.push_str("\0placeholder\0");
        drv_path.push_absolute(&mut fp);
        fp.push('\0');
        fp.push_str(output);
        fp.push('\0');
        fp.push_str(name);
        Ok(Self::from_fingerprint(&fp, name))
    }

    fn from_fingerprint(fp: &str, name: &str) -> StorePath {
        let digest = blake3::hash(fp.as_bytes());
        let mut hash = [0u8; HASH_BYTES];
        hash.copy_from_slice(&digest.as_bytes()[..HASH_BYTES]);
        StorePath {
            hash,
            name: name.to_string(),
        }
    }

    /// The 20 hash bytes.
    pub fn hash_bytes(&self) -> &[u8; HASH_BYTES] {
        &self.hash
    }

    /// The hash part: 32 nix32 characters.
    pub fn hash_part(&self) -> String {
        // Hash parts are ASCII.
        String::from_utf8(nixbase32::encode20(&self.hash).to_vec()).expect("nix32 is ASCII")
    }

    /// Appends the absolute path (`/rocmx/store/HASH-NAME`) to `out`: what
    /// [`StorePath::to_absolute`] gives, without a temporary string (this runs for
    /// every path of every `.drv` written and hashed).
    pub fn push_absolute(&self, out: &mut String) {
        out.reserve(STORE_DIR.len() + 34 + self.name.len());
        out.push_str(STORE_DIR);
        out.push('/');
        out.push_str(
            std::str::from_utf8(&nixbase32::encode20(&self.hash)).expect("nix32 is ASCII"),
        );
        out.push('-');
        out.push_str(&self.name);
    }

    /// The name after the dash.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `<hash part>-<name>`.
    pub fn base_name(&self) -> String {
        format!("{}-{}", self.hash_part(), self.name)
    }

    /// `/rocmx/store/<hash part>-<name>` (same as `to_string()`).
    pub fn to_absolute(&self) -> String {
        let mut out = String::new();
        self.push_absolute(&mut out);
        out
    }

    /// Whether the name ends in `.drv`.
    pub fn is_derivation(&self) -> bool {
        self.name.ends_with(".drv")
    }
}

impl Ord for StorePath {
    /// Orders as the printed paths do. Nix32 text order is the numeric order of the digest
    /// read as a little-endian number, so hash bytes compare from the last one down.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.hash
            .iter()
            .rev()
            .cmp(other.hash.iter().rev())
            .then_with(|| self.name.as_bytes().cmp(other.name.as_bytes()))
    }
}

impl PartialOrd for StorePath {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for StorePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(STORE_DIR)?;
        f.write_str("/")?;
        f.write_str(
            std::str::from_utf8(&nixbase32::encode20(&self.hash)).map_err(|_| fmt::Error)?,
        )?;
        f.write_str("-")?;
        f.write_str(&self.name)
    }
}

impl fmt::Debug for StorePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "StorePath({self})")
    }
}

impl FromStr for StorePath {
    type Err = StorePathError;
    /// Parses an absolute store path ([`StorePath::from_absolute`]).
    fn from_str(s: &str) -> Result<Self, StorePathError> {
        StorePath::from_absolute(s)
    }
}

impl serde::Serialize for StorePath {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for StorePath {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        StorePath::from_absolute(&s).map_err(serde::de::Error::custom)
    }
}

/// How a file system object is turned into the bytes that are hashed. Textual forms:
///
/// | variant | fingerprint | derivation `hashAlgo` prefix | meaning                       |
/// |---------|-------------|------------------------------|-------------------------------|
/// | `Flat`  | `flat`      | (none), e.g. `sha256`        | the bytes of a single file    |
/// | `Nar`   | `nar`       | `r:`, e.g. `r:sha256`        | the NAR serialisation of a tree |
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum IngestionMethod {
    /// Hash of a regular file's contents.
    Flat,
    /// Hash of the NAR serialisation ("recursive").
    Nar,
}

impl IngestionMethod {
    /// `flat` or `nar`, as in the fingerprint.
    pub fn name(self) -> &'static str {
        match self {
            IngestionMethod::Flat => "flat",
            IngestionMethod::Nar => "nar",
        }
    }

    /// The prefix of a derivation's `hashAlgo` field: `""` or `"r:"`.
    pub fn nix_prefix(self) -> &'static str {
        match self {
            IngestionMethod::Flat => "",
            IngestionMethod::Nar => "r:",
        }
    }
}

/// How a store object's hash part is derived from what it contains. Each variant is one
/// fingerprint kind, named in its documentation; see the module documentation for the
/// exact fingerprint.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ContentAddress {
    /// Kind `text`: flat bytes that may refer to other store paths (`.drv` files,
    /// `builtins.toFile`). `hash` is BLAKE3 of the bytes.
    Text {
        /// BLAKE3 of the file's bytes.
        hash: Hash,
        /// Store paths the text refers to.
        references: BTreeSet<StorePath>,
    },
    /// Kind `source`: a file or tree copied from the filesystem. `nar_hash` is BLAKE3 of
    /// its NAR.
    Source {
        /// BLAKE3 of the NAR.
        nar_hash: Hash,
        /// Store paths it refers to.
        references: BTreeSet<StorePath>,
    },
    /// Kind `fixed`: a fixed-output derivation's output, known by a declared hash of any
    /// algorithm over the flat file or the NAR. It has no references.
    Fixed {
        /// Flat file or NAR.
        method: IngestionMethod,
        /// The declared hash.
        hash: Hash,
    },
    /// Kind `output`: a floating (content-addressed) build output.
    Output {
        /// BLAKE3 of the NAR modulo self-references (occurrences of the object's own hash
        /// part masked, their positions hashed too).
        nar_hash: Hash,
        /// Other store paths it refers to (not itself).
        references: BTreeSet<StorePath>,
        /// Whether it refers to itself.
        self_reference: bool,
    },
}

impl ContentAddress {
    /// The `text` address of `contents` (BLAKE3 of the bytes) with `references`.
    pub fn text(contents: &[u8], references: BTreeSet<StorePath>) -> ContentAddress {
        ContentAddress::Text {
            hash: Hash::digest(HashAlgo::Blake3, contents),
            references,
        }
    }

    /// The fingerprint kind: `text`, `source`, `fixed` or `output`.
    pub fn kind(&self) -> &'static str {
        match self {
            ContentAddress::Text { .. } => "text",
            ContentAddress::Source { .. } => "source",
            ContentAddress::Fixed { .. } => "fixed",
            ContentAddress::Output { .. } => "output",
        }
    }

    /// The references recorded in the address (empty for `Fixed`; excludes self).
    pub fn references(&self) -> Option<&BTreeSet<StorePath>> {
        match self {
            ContentAddress::Text { references, .. }
            | ContentAddress::Source { references, .. }
            | ContentAddress::Output { references, .. } => Some(references),
            ContentAddress::Fixed { .. } => None,
        }
    }

    /// The fingerprint whose BLAKE3 gives the hash part of an object named `name`, exactly
    /// as the module documentation defines it. The name is not validated here.
    pub fn fingerprint(&self, name: &str) -> Result<String, StorePathError> {
        let kind = self.kind();
        let blake3_only = |h: &Hash| {
            if h.algo() == HashAlgo::Blake3 {
                Ok(())
            } else {
                Err(StorePathError::ContentHashNotBlake3 {
                    kind,
                    algo: h.algo(),
                })
            }
        };
        // Built in one string: this runs for every `.drv` an evaluation writes.
        let mut fp = String::with_capacity(256);
        fp.push_str(FINGERPRINT_TAG);
        fp.push('\0');
        fp.push_str(kind);
        fp.push('\0');
        let content = |fp: &mut String, h: &Hash| {
            fp.push_str(h.algo().name());
            fp.push(':');
            fp.push_str(&h.to_hex());
        };
        let refs = |fp: &mut String, r: &BTreeSet<StorePath>| {
            fp.push_str(&r.len().to_string());
            for p in r {
                fp.push('\0');
                p.push_absolute(fp);
            }
        };
        match self {
            ContentAddress::Text { hash, references } => {
                blake3_only(hash)?;
                content(&mut fp, hash);
                fp.push('\0');
                refs(&mut fp, references);
            }
            ContentAddress::Source {
                nar_hash,
                references,
            } => {
                blake3_only(nar_hash)?;
                content(&mut fp, nar_hash);
                fp.push('\0');
                refs(&mut fp, references);
            }
            ContentAddress::Fixed { method, hash } => {
                fp.push_str(method.name());
                fp.push('\0');
                content(&mut fp, hash);
            }
            ContentAddress::Output {
                nar_hash,
                references,
                self_reference,
            } => {
                blake3_only(nar_hash)?;
                content(&mut fp, nar_hash);
                fp.push('\0');
                refs(&mut fp, references);
                fp.push_str(if *self_reference {
                    "\0self:1"
                } else {
                    "\0self:0"
                });
            }
        }
        fp.push('\0');
        fp.push_str(name);
        Ok(fp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sp(s: &str) -> StorePath {
        StorePath::from_absolute(s).expect("test store path")
    }

    const P1: &str = "/rocmx/store/00bgd045z0d4icpbc2yyz4gx48ak44la-net-tools-1.60_p20170221182432";
    const P2: &str = "/rocmx/store/zzbgd045z0d4icpbc2yyz4gx48ak44la-a";

    #[test]
    fn parses_and_prints() {
        let p = sp(P1);
        assert_eq!(p.to_string(), P1);
        assert_eq!(p.hash_part(), "00bgd045z0d4icpbc2yyz4gx48ak44la");
        assert_eq!(p.name(), "net-tools-1.60_p20170221182432");
        assert_eq!(StorePath::from_base_name(&p.base_name()), Ok(p.clone()));
        assert_eq!(format!("{p:?}"), format!("StorePath({P1})"));
        assert_eq!(P1.parse::<StorePath>(), Ok(p.clone()));
        assert_eq!(StorePath::from_absolute(&format!("{P1}/")), Ok(p.clone()));
        assert_eq!(
            StorePath::from_absolute_with_subpath(&format!("{P1}/bin/ifconfig")),
            Ok((p.clone(), Some("bin/ifconfig".to_string())))
        );
        assert_eq!(
            StorePath::from_absolute_with_subpath(P1),
            Ok((p.clone(), None))
        );
        assert_eq!(
            StorePath::from_absolute(&format!("{P1}/bin")),
            Err(StorePathError::UnexpectedSubpath {
                path: format!("{P1}/bin")
            })
        );
        let json = serde_json::to_string(&p).expect("json");
        assert_eq!(json, format!("\"{P1}\""));
        assert_eq!(
            serde_json::from_str::<StorePath>(&json).expect("json back"),
            p
        );
    }

    #[test]
    fn precise_errors() {
        use StorePathError::*;
        let h = "00bgd045z0d4icpbc2yyz4gx48ak44la";
        let cases: Vec<(String, StorePathError)> = vec![
            (
                "/nix/store/x".into(),
                NotInStore {
                    path: "/nix/store/x".into(),
                },
            ),
            (
                "/rocmx/storex/a".into(),
                NotInStore {
                    path: "/rocmx/storex/a".into(),
                },
            ),
            (
                "/rocmx/store/short-x".into(),
                BadBaseName {
                    base: "short-x".into(),
                },
            ),
            (
                format!("/rocmx/store/{h}x"),
                BadBaseName {
                    base: format!("{h}x"),
                },
            ),
            (format!("/rocmx/store/{h}"), BadBaseName { base: h.into() }),
            (format!("/rocmx/store/{h}-"), EmptyName),
            (
                "/rocmx/store/00bgd045z0d4icpbc2yyz4gx48ak44le-a".into(),
                InvalidHashChar {
                    position: 31,
                    ch: 'e',
                },
            ),
            (
                format!("/rocmx/store/{h}-.hidden"),
                NameStartsWithDot {
                    name: ".hidden".into(),
                },
            ),
            (
                format!("/rocmx/store/{h}-a b"),
                InvalidNameChar {
                    name: "a b".into(),
                    position: 1,
                    ch: ' ',
                },
            ),
            (
                format!("/rocmx/store/{h}-é"),
                InvalidNameChar {
                    name: "é".into(),
                    position: 0,
                    ch: 'é',
                },
            ),
            (
                format!("/rocmx/store/{h}-{}", "a".repeat(212)),
                NameTooLong { len: 212 },
            ),
        ];
        for (input, err) in cases {
            assert_eq!(StorePath::from_absolute(&input), Err(err), "{input}");
        }
        assert!(StorePath::from_absolute(&format!("/rocmx/store/{h}-{}", "a".repeat(211))).is_ok());
        assert!(StorePath::from_base_name("ééééééééééééééééé-x").is_err());
        assert!(StorePath::from_base_name("").is_err());
        assert!(validate_name("A-Za-z0-9+-._?=").is_ok());
        assert!(validate_name("a.").is_ok());
    }

    #[test]
    fn orders_as_text() {
        let mut paths = [
            sp(P2),
            sp(P1),
            sp("/rocmx/store/00bgd045z0d4icpbc2yyz4gx48ak44la-a"),
        ];
        paths.sort();
        let texts: Vec<String> = paths.iter().map(|p| p.to_string()).collect();
        let mut sorted = texts.clone();
        sorted.sort();
        assert_eq!(texts, sorted);
        // Many pseudo-random hashes: byte-reversed order must equal text order.
        let mut ps: Vec<StorePath> = (0u32..200)
            .map(|i| {
                let d = blake3::hash(&i.to_le_bytes());
                let mut h = [0u8; HASH_BYTES];
                h.copy_from_slice(&d.as_bytes()[..HASH_BYTES]);
                StorePath::new(h, if i % 2 == 0 { "x" } else { "x-y" }).expect("name")
            })
            .collect();
        ps.sort();
        let texts: Vec<String> = ps.iter().map(|p| p.to_string()).collect();
        let mut sorted = texts.clone();
        sorted.sort();
        assert_eq!(texts, sorted);
    }

    #[test]
    fn fingerprint_is_exactly_as_documented() {
        let hash = Hash::digest(HashAlgo::Blake3, b"hello");
        let ca = ContentAddress::Text {
            hash,
            references: BTreeSet::new(),
        };
        let fp = ca.fingerprint("hello").expect("fp");
        assert_eq!(
            fp,
            "rocmx-store-path-v1\0text\0blake3:\
             ea8f163db38682925e4491c5e58d4bb3506ef8c14eb78a86e908c5624a67200f\x00\x30\x00hello"
        );
        let p = StorePath::from_ca("hello", &ca).expect("path");
        let digest = blake3::hash(fp.as_bytes());
        assert_eq!(p.hash_bytes()[..], digest.as_bytes()[..20]);
        assert_eq!(
            p.to_string(),
            "/rocmx/store/15np7hb75iry47p0l754xr6di8canh93-hello"
        );

        let refs: BTreeSet<StorePath> = [sp(P2), sp(P1)].into_iter().collect();
        let src = ContentAddress::Source {
            nar_hash: hash,
            references: refs.clone(),
        };
        assert_eq!(
            src.fingerprint("src").expect("fp"),
            format!(
                "rocmx-store-path-v1\0source\0blake3:{}\x00\x32\x00{P1}\0{P2}\0src",
                hash.to_hex()
            )
        );
        let out = ContentAddress::Output {
            nar_hash: hash,
            references: refs,
            self_reference: true,
        };
        assert_eq!(
            out.fingerprint("o").expect("fp"),
            format!(
                "rocmx-store-path-v1\0output\0blake3:{}\x00\x32\x00{P1}\0{P2}\0self:1\0o",
                hash.to_hex()
            )
        );
        let sha = Hash::digest(HashAlgo::Sha256, b"");
        let fixed = ContentAddress::Fixed {
            method: IngestionMethod::Nar,
            hash: sha,
        };
        assert_eq!(
            fixed.fingerprint("f").expect("fp"),
            "rocmx-store-path-v1\0fixed\0nar\0sha256:\
             e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\0f"
        );
    }

    #[test]
    fn from_ca_separates_kinds_and_checks_inputs() {
        let b = Hash::digest(HashAlgo::Blake3, b"x");
        let none = BTreeSet::new();
        let text = StorePath::from_ca(
            "x",
            &ContentAddress::Text {
                hash: b,
                references: none.clone(),
            },
        );
        let src = StorePath::from_ca(
            "x",
            &ContentAddress::Source {
                nar_hash: b,
                references: none,
            },
        );
        let flat = StorePath::from_ca(
            "x",
            &ContentAddress::Fixed {
                method: IngestionMethod::Flat,
                hash: b,
            },
        );
        let nar = StorePath::from_ca(
            "x",
            &ContentAddress::Fixed {
                method: IngestionMethod::Nar,
                hash: b,
            },
        );
        let all: BTreeSet<StorePath> = [text, src, flat, nar]
            .into_iter()
            .map(|p| p.expect("path"))
            .collect();
        assert_eq!(all.len(), 4);
        let sha = Hash::digest(HashAlgo::Sha256, b"x");
        assert_eq!(
            StorePath::from_ca(
                "x",
                &ContentAddress::Text {
                    hash: sha,
                    references: BTreeSet::new()
                }
            ),
            Err(StorePathError::ContentHashNotBlake3 {
                kind: "text",
                algo: HashAlgo::Sha256
            })
        );
        assert_eq!(
            StorePath::from_ca(
                ".x",
                &ContentAddress::Fixed {
                    method: IngestionMethod::Flat,
                    hash: sha
                }
            ),
            Err(StorePathError::NameStartsWithDot { name: ".x".into() })
        );
    }

    #[test]
    fn placeholders_are_deterministic_and_distinct() {
        let drv = sp("/rocmx/store/00bgd045z0d4icpbc2yyz4gx48ak44la-hello.drv");
        let out = StorePath::placeholder_for_output(&drv, "out", "hello").expect("ph");
        let dev = StorePath::placeholder_for_output(&drv, "dev", "hello-dev").expect("ph");
        assert_eq!(
            out,
            StorePath::placeholder_for_output(&drv, "out", "hello").expect("ph")
        );
        assert_ne!(out.hash_part(), dev.hash_part());
        let fp = format!("rocmx-store-path-v1\0placeholder\0{drv}\0out\0hello");
        assert_eq!(
            out.hash_bytes()[..],
            blake3::hash(fp.as_bytes()).as_bytes()[..20]
        );
        assert!(drv.is_derivation());
        assert!(StorePath::placeholder_for_output(&drv, "out", "").is_err());
    }
}
