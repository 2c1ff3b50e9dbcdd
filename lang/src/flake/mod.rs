//! Flakes: `flake.nix` files, their inputs, their lock file and their typed
//! parameters.
//!
//! Owns, as evaluation concerns: the flake reference grammar ([`refs`]), the
//! input sources rocmx can fetch ([`source`]), the lock file format
//! ([`lock`]), typed parameters ([`params`]), reading a flake's top level
//! ([`decl`]), locking and calling its `outputs` with its locked inputs
//! ([`load`]), and resolving
//! `FLAKEREF#ATTRPATH` ([`installable`]).
//!
//! Must not: fetch anything itself, run `git`, or write files. All I/O goes
//! through the narrow [`fetch::InputFetcher`] trait, which the binary
//! implements with the store and the builder's transport; the lock file is
//! returned as text for the caller to write.

pub mod decl;
pub mod fetch;
pub mod installable;
pub mod load;
pub mod lock;
pub mod params;
pub mod refs;
pub mod source;

pub use fetch::{FetchError, Fetched, GitInfo, InputFetcher, LocalTree, TrackedTree};
pub use lock::LockFile;
pub use params::{ParamDecl, ParamType, ParamValue};
pub use source::{FlakeRef, Source};
