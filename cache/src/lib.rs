//! Binary caches: the flat, static layout that any file server can serve, the signed
//! records in it, and moving store paths to and from it.
//!
//! Owns: the formats of a cache ([`info`], [`narinfo`], [`realisation`]), the signing
//! keys and the exact strings they sign ([`keys`]).
//!
//! Must not: decide policy (which caches, which keys are trusted: the caller passes
//! them), or build anything.
//!
//! # Layout
//!
//! ```text
//! rocmx-cache-info                         StoreDir, WantMassQuery, Priority
//! <hashpart>.narinfo                       one per store path, signed
//! nar/<filehash>.nar.zst                   the NAR, zstd-compressed once, at push time
//! realisations/<drvhash>!<output>.json     one per realised output, signed
//! ```
//!
//! A reader trusts nothing it downloads: signatures are checked against the trusted
//! keys, the NAR against the narinfo's `FileHash` and `NarHash`, and the restored tree
//! against its content-addressed store path, before anything is registered.

pub mod info;
pub mod keys;
pub mod narinfo;
pub mod realisation;
