//! Executors: where a build runs when not in this machine's sandbox.
//!
//! Owns: the [`Executor`] trait through which [`crate::realise::Realiser`] hands a
//! prepared build to somewhere else (a Slurm cluster today; remote execution later),
//! and what goes in and out of it ([`RemoteBuild`], [`RemoteOutputs`],
//! [`RemoteFailure`]).
//!
//! The local executor is the realiser itself: a build runs in this machine's sandbox
//! unless [`crate::BuildOptions::executor`] is set and [`Executor::takes`] the
//! derivation (built-in builders, `preferLocalBuild` and `--check` always run here).
//!
//! # The contract
//!
//! A remote build starts from the *resolved* derivation (its input derivations
//! replaced by their realised outputs): it is self-contained, its inputs are the
//! closure of its input sources, which are valid in the local store, and its
//! realisation key is [`RemoteBuild::key`] wherever it is built. The executor moves
//! the derivation and that closure to where it builds, has it built there, and brings
//! the outputs back into the local store, checked as any substituted path is
//! (signatures, hashes). It streams the remote log into the writer it is given and
//! reports where the build stands through [`RemoteState`]s. The realiser then records
//! the realisation and the derivation's outputs, as for a local build.
//!
//! Must not: record realisations (the realiser does, once it has checked that every
//! output is valid), or decide what to build.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;

use rocmx_store::{Derivation, LocalStore, StorePath};

use crate::events::RemoteState;

/// One build handed to an [`Executor`].
pub struct RemoteBuild<'a> {
    /// The derivation as written (for messages).
    pub drv: &'a StorePath,
    /// Its `name`.
    pub name: &'a str,
    /// The resolved derivation: what is built.
    pub resolved: &'a Derivation,
    /// The realisation key, `hex(BLAKE3(resolved ATerm))`.
    pub key: &'a str,
    /// The closure of the resolved input sources, valid (and temp-rooted) locally.
    pub closure: &'a BTreeSet<StorePath>,
    /// Cores the build may use (`--cores`).
    pub cores: u32,
    /// The build's time limit (`--timeout`), if any.
    pub timeout: Option<std::time::Duration>,
}

/// What a remote build gave, valid in the local store.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RemoteOutputs {
    /// Each output's path.
    pub outputs: BTreeMap<String, StorePath>,
    /// The signatures of each floating output's realisation (recorded with it).
    pub signatures: BTreeMap<String, Vec<String>>,
}

/// Why a remote build failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteFailure {
    /// The remote job's id, when it got one (a Slurm job id).
    pub job: Option<String>,
    /// What happened (`exit code 1`, `the job was cancelled`, `submitting: …`).
    pub status: String,
    /// Whether the builder ran and failed (a build failure, Nix's exit bit 4), as
    /// opposed to a failure to dispatch or to bring the outputs back.
    pub builder_failed: bool,
}

/// Somewhere builds run other than this machine's sandbox. See the module
/// documentation for the contract.
pub trait Executor: Send + Sync + std::fmt::Debug {
    /// Its name in messages and events, e.g. `slurm:debug`.
    fn name(&self) -> &str;
    /// How many builds may be in flight through it at once.
    fn slots(&self) -> usize;
    /// Whether the resolved derivation `d` goes to it; the others build here. By
    /// default everything but built-in builders (`builtin:fetchurl` needs this
    /// machine's network and mirrors) and derivations that ask for
    /// `preferLocalBuild`.
    fn takes(&self, d: &Derivation) -> bool {
        !d.builder.starts_with("builtin:")
            && d.env.get("preferLocalBuild").map(String::as_str) != Some("1")
    }
    /// What [`Executor::build`] would do with `d`, for `--dry-run` (e.g. `slurm job
    /// on debug, 4 cores, --gres=gpu:1`).
    fn describe(&self, d: &Derivation) -> String;
    /// Builds `b` remotely and makes its outputs valid in `store`; writes the remote
    /// log to `log` as it comes and reports each change of state to `state` (with the
    /// remote job's id).
    fn build(
        &self,
        store: &LocalStore,
        b: &RemoteBuild<'_>,
        log: &mut dyn Write,
        state: &dyn Fn(&str, RemoteState),
    ) -> Result<RemoteOutputs, RemoteFailure>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Nowhere;

    impl Executor for Nowhere {
        fn name(&self) -> &str {
            "nowhere"
        }
        fn slots(&self) -> usize {
            1
        }
        fn describe(&self, _: &Derivation) -> String {
            String::new()
        }
        fn build(
            &self,
            _: &LocalStore,
            _: &RemoteBuild<'_>,
            _: &mut dyn Write,
            _: &dyn Fn(&str, RemoteState),
        ) -> Result<RemoteOutputs, RemoteFailure> {
            unreachable!()
        }
    }

    #[test]
    fn builtins_and_prefer_local_build_stay_here() {
        let mut d = Derivation {
            builder: "/bin/sh".into(),
            ..Derivation::default()
        };
        assert!(Nowhere.takes(&d));
        d.env.insert("preferLocalBuild".into(), "1".into());
        assert!(!Nowhere.takes(&d));
        d.env.clear();
        d.builder = "builtin:fetchurl".into();
        assert!(!Nowhere.takes(&d));
    }
}
