//! rocmx-builder: realisation of derivations.
//!
//! This crate owns the scheduler (a petgraph DAG of the closure, [`realise`]), the
//! rootless sandbox (user/mount/pid/uts/ipc/net namespaces, `pivot_root`, [`sandbox`]),
//! the built-in builders (`builtin:fetchurl`, [`fetchurl`]), output normalisation and
//! reference scanning ([`output`]), `--check` comparison ([`check`]), the events a run
//! reports ([`events`]), build logs, and the interfaces through which the binary plugs in
//! binary caches ([`realise::Substituter`]) and remote executors ([`executor::Executor`]).
//!
//! It depends only on `rocmx-store`. It must not evaluate expressions (that is
//! `rocmx-lang`'s job) nor parse command lines (that is the binary's job).
//!
//! `unsafe` is allowed only in [`sandbox`], for the raw syscalls around `fork`.

#![deny(unsafe_code)]

#[allow(unsafe_code)]
pub mod sandbox;

pub mod builtins;
pub mod check;
pub mod events;
pub mod executor;
pub mod fetchurl;
pub mod ids;
mod ofd;
pub mod output;
pub mod qa;
pub mod realise;
pub mod resolve;
pub mod structured;
pub mod vary;

pub use realise::{log_path, BuildError, BuildOptions, Realised, Realiser};
