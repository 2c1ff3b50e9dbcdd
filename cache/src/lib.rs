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

// No unsafe code here: what needs it (the sandbox) lives in rocmx-builder.
#![forbid(unsafe_code)]

pub mod frames;
pub mod info;
pub mod keys;
pub mod narinfo;
pub mod par;
pub mod pipe;
pub mod pull;
pub mod push;
pub mod realisation;
pub mod receive;
pub mod serve;
pub mod transport;

use rocmx_store::{StoreError, StorePath};

/// Why moving paths to or from a cache failed.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// The cache URL is not usable.
    #[error("cache '{url}': {why}")]
    Url { url: String, why: String },
    /// Reading or writing one of the cache's files failed.
    #[error("cache '{cache}': {what} '{file}': {source}")]
    Io {
        cache: String,
        what: &'static str,
        file: String,
        source: std::io::Error,
    },
    /// An HTTP cache failed a request (an error status, a timeout, no connection).
    #[error("cache '{cache}': '{file}': {why}")]
    Http {
        cache: String,
        file: String,
        why: String,
    },
    /// The cache served something malformed or inconsistent.
    #[error("{0}")]
    Protocol(String),
    /// A record no trusted key signed.
    #[error("cache '{cache}': {what} is not signed by a trusted key ({why}); add the cache's public key to trusted-public-keys, e.g. --option trusted-public-keys 'NAME:BASE64'")]
    Untrusted {
        cache: String,
        what: String,
        why: String,
    },
    /// The cache does not have a path.
    #[error("cache '{cache}' does not have {path}")]
    Missing { cache: String, path: StorePath },
    /// The local store failed, or refused what the cache served.
    #[error(transparent)]
    Store(#[from] StoreError),
}
