//! rocmx-store: rocmx's formats and its local store.
//!
//! Owns: hashes and their encodings ([`hash`], [`nixbase32`]), store paths and the
//! fingerprint that derives their hash parts ([`path`]), the NAR archive format ([`nar`]),
//! hashing build outputs modulo self-references ([`modulo`]), the derivation model with
//! its ATerm and JSON forms ([`derivation`]), and the local store with its SQLite
//! metadata, locks, GC and verification (`local`). Formats never depend on `local`.
//! Also the safety rules for extracting hostile tar streams ([`untar`]), shared by
//! the builder's and the Debian crate's extractors.
//!
//! # Features
//!
//! `local` (on by default) is the local store: the `local` module and its re-exports
//! (`LocalStore`, `StoreError`, `PathInfo`, …), with rusqlite (bundled SQLite).
//! Everything else (the formats, NAR, `tree`, `direct`, `untar`, [`HashPipe`]) is
//! outside it: `rocmx-lang` depends on this crate with `default-features = false` and
//! compiles no database.
//!
//! Must not: depend on any other rocmx crate, evaluate expressions or run builds.
//!
//! # Recipes
//!
//! ```no_run
//! use std::collections::BTreeSet;
//! use rocmx_store::{nar, ContentAddress, Derivation, Hash, HashAlgo, StorePath};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // A file or tree copied into the store (`./src`, `builtins.path`): kind `source`.
//! let (nar_hash, _nar_size) = nar::hash_path("./src".as_ref(), HashAlgo::Blake3)?;
//! let src = StorePath::from_ca("src", &ContentAddress::Source { nar_hash, references: BTreeSet::new() })?;
//!
//! // `builtins.toFile "name" text`: kind `text`, references from the string context.
//! let text = StorePath::from_ca("name", &ContentAddress::text(b"hello", BTreeSet::new()))?;
//!
//! // A derivation: its `.drv` path, then its outputs' paths (fixed, or placeholders).
//! let drv: Derivation = Derivation::default();
//! let drv_path = drv.store_path("hello")?;
//! let outs = drv.output_paths(&drv_path, "hello")?;
//! # let _ = (src, text, outs); Ok(()) }
//! ```

// No unsafe code here: what needs it (the sandbox) lives in rocmx-builder.
#![forbid(unsafe_code)]

pub mod derivation;
pub mod direct;
pub mod hash;
#[cfg(feature = "local")]
pub mod local;
pub mod modulo;
pub mod nar;
pub mod nixbase32;
pub mod path;
pub mod tree;
pub mod untar;

pub use derivation::{Derivation, DerivationError, DerivationOutput};
pub use hash::{Encoding, Hash, HashAlgo, HashError, HashPipe, Hasher, HashingWriter};
#[cfg(feature = "local")]
pub use local::{
    GcOptions, GcReport, LocalStore, NarCa, PathInfo, Problem, StoreError, VerifyReport,
};
pub use modulo::ModuloHasher;
pub use nar::NarError;
pub use path::{ContentAddress, IngestionMethod, StorePath, StorePathError, STORE_DIR};
