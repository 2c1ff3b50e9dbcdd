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
//! Status: the workspace exists; realisation lands with the issue "Derivations, the
//! rootless sandbox, and `rocmx build`".
