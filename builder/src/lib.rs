//! rocmx-builder: realisation of derivations.
//!
//! This crate will own the scheduler (a petgraph DAG of the closure), the rootless
//! sandbox (user/mount/pid/uts/ipc/net namespaces, `pivot_root`), the built-in
//! builders (`builtin:fetchurl`, unpacking), output normalisation and reference
//! scanning, substitution from binary caches, and build logs.
//!
//! It depends only on `rocmx-store`. It must not evaluate expressions (that is
//! `rocmx-lang`'s job) nor parse command lines (that is the binary's job).
//!
//! Status: the rootless sandbox ([`sandbox`]) is here, as a library that runs one
//! builder with explicit inputs; derivations, scheduling and the rest land with the
//! issue "Derivations, the rootless sandbox, and `rocmx build`".
//!
//! `unsafe` is allowed only in [`sandbox`], for the raw syscalls around `fork`.

#![deny(unsafe_code)]

#[allow(unsafe_code)]
pub mod sandbox;

pub mod output;
pub mod realise;
pub mod resolve;

pub use realise::{log_path, BuildError, BuildOptions, LogObserver, Realised, Realiser};
