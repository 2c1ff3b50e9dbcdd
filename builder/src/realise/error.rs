//! Why realising a derivation failed: [`BuildError`], and the `--check` differences.
//!
//! Owns: the error type of [`super::Realiser`] and the wording of its messages (each
//! names the derivation; a failed builder's ends with its log tail).
//!
//! Must not: decide anything; the scheduler and the jobs construct these.

use std::io;
use std::path::{Path, PathBuf};

use rocmx_store::{StoreError, StorePath};

use crate::output::OutputError;
use crate::sandbox::SandboxError;

/// Why a derivation could not be realised. Every message names the derivation.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The builder failed (non-zero exit, killed, timed out, or produced no output).
    #[error("builder for '{drv}' failed: {status}{}", tail_message(.log_tail))]
    Failed {
        /// The derivation.
        drv: StorePath,
        /// What happened (`exit code 1`, `build timed out after 10s`, …).
        status: String,
        /// The last lines of its log.
        log_tail: String,
    },
    /// A build handed to an executor ([`crate::executor`]) failed there, or could not
    /// be handed over or its outputs brought back.
    #[error("builder for '{drv}' failed on {}{}: {}{}", .remote.executor, job_part(&.remote.job), .remote.status, tail_message(&.remote.log_tail))]
    Remote {
        /// The derivation.
        drv: StorePath,
        /// What happened there (boxed: it is rare and large).
        remote: Box<RemoteFailed>,
    },
    /// An input derivation failed earlier in this run.
    #[error("cannot build '{drv}': its dependency '{dep}' failed")]
    DependencyFailed {
        /// The derivation asked for.
        drv: StorePath,
        /// The derivation that failed.
        dep: StorePath,
    },
    /// The derivation itself failed earlier in this run (each is tried once).
    #[error("'{drv}' already failed in this run")]
    AlreadyFailed {
        /// The derivation.
        drv: StorePath,
    },
    /// The run stopped at another derivation's failure before this one was built.
    #[error("'{drv}' was not built: the run stopped at the failure of '{failed}' (--keep-going builds everything that does not depend on a failure)")]
    Stopped {
        /// The derivation.
        drv: StorePath,
        /// The first failure.
        failed: StorePath,
    },
    /// `--check` of a derivation that is not realised yet.
    #[error(
        "'{drv}' cannot be checked: it has not been built yet (build it without --check first)"
    )]
    NotRealised {
        /// The derivation.
        drv: StorePath,
    },
    /// A binary cache claimed the outputs and failed to deliver them, and falling back
    /// to building is not allowed.
    #[error("substituting '{drv}': {reason}")]
    Substitution {
        /// The derivation.
        drv: StorePath,
        /// What went wrong, naming the cache.
        reason: String,
    },
    /// `--check`: the rebuild gave other bytes.
    #[error("{}", check_message(.drv, .outputs))]
    CheckMismatch {
        /// The derivation.
        drv: StorePath,
        /// Each output that differs.
        outputs: Vec<CheckDifference>,
    },
    /// The sandbox could not run (user namespaces refused, setup failure, …).
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    /// A store operation failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The derivation cannot be built as it is.
    #[error("derivation '{drv}': {reason}")]
    BadDerivation {
        /// The derivation.
        drv: StorePath,
        /// Why.
        reason: String,
    },
    /// A fixed output's hash is not the declared one; nothing was registered.
    #[error("hash mismatch in fixed-output derivation '{drv}':\n  specified: {expected}\n     got:    {actual}")]
    HashMismatch {
        /// The derivation.
        drv: StorePath,
        /// The declared hash (SRI).
        expected: String,
        /// The hash of what was built (SRI).
        actual: String,
    },
    /// A fixed output refers to store paths.
    #[error("fixed-output derivation '{drv}' refers to store paths: {}", refs.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(", "))]
    IllegalReferences {
        /// The derivation.
        drv: StorePath,
        /// What it refers to.
        refs: Vec<StorePath>,
    },
    /// Post-processing an output failed.
    #[error("output '{output}' of '{drv}': {source}")]
    Output {
        /// The derivation.
        drv: StorePath,
        /// The output name.
        output: String,
        /// Why.
        #[source]
        source: Box<OutputError>,
    },
    /// A file operation of the realiser itself (build directory, log) failed.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// On what.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
}

impl BuildError {
    /// What this failure adds to the exit status of a build command, as the bits
    /// of Nix's `Worker::exitStatus`: 4 the build failed, 1 it timed out (a
    /// timeout is also a failure: 5), 2 a fixed output's hash is not the declared
    /// one (6), 8 `--check` found a difference. The command ORs the bits of all
    /// its failures and exits `0x60 | bits` (100 failed, 101 timed out, 102 hash
    /// mismatch, 104 check difference alone, 103, 108, … combined), or 1 when no
    /// failure has bits.
    ///
    /// No bits: a failure that only refers to another one (`DependencyFailed`,
    /// `AlreadyFailed`, `Stopped`, which carries its own bits), a cache that failed
    /// to deliver (`Substitution`, Nix's transient failure) or an executor that could
    /// not dispatch a build or bring it back (`Remote` without `builder_failed`; a
    /// remote builder that failed has the bits of a local one), `--check` of
    /// something never built (`NotRealised`, a usage error), a derivation
    /// refused before anything ran (`BadDerivation`: malformed, for another
    /// system, a cycle) and a store or file operation of the realiser's own
    /// (`Store`, `Io`: reading a `.drv`, writing the log): Nix's errors, not
    /// build results.
    pub fn nix_exit_bits(&self) -> u8 {
        const FAILED: u8 = 4;
        const TIMED_OUT: u8 = 1;
        const HASH_MISMATCH: u8 = 2;
        const CHECK_MISMATCH: u8 = 8;
        match self {
            BuildError::Failed { status, .. } if timed_out(status) => FAILED | TIMED_OUT,
            BuildError::HashMismatch { .. } => FAILED | HASH_MISMATCH,
            BuildError::CheckMismatch { .. } => CHECK_MISMATCH,
            BuildError::Remote { remote, .. }
                if remote.builder_failed && timed_out(&remote.status) =>
            {
                FAILED | TIMED_OUT
            }
            BuildError::Remote { remote, .. } if remote.builder_failed => FAILED,
            BuildError::Failed { .. }
            | BuildError::IllegalReferences { .. }
            | BuildError::Output { .. }
            | BuildError::Sandbox(_) => FAILED,
            BuildError::DependencyFailed { .. }
            | BuildError::AlreadyFailed { .. }
            | BuildError::Stopped { .. }
            | BuildError::Substitution { .. }
            | BuildError::Remote { .. }
            | BuildError::NotRealised { .. }
            | BuildError::BadDerivation { .. }
            | BuildError::Store(_)
            | BuildError::Io { .. } => 0,
        }
    }
}

/// Whether the status of a [`BuildError::Failed`] is a kill by `--timeout` or
/// `--max-silent-time` (the messages of [`SandboxError::Timeout`] and
/// [`SandboxError::Silent`], which the job turns into the status; Nix counts both as
/// timeouts).
fn timed_out(status: &str) -> bool {
    status.starts_with("build timed out after ")
        || (status.starts_with("build killed after ") && status.contains(" without output"))
}

pub(super) fn io_err(action: &'static str, path: &Path) -> impl FnOnce(io::Error) -> BuildError {
    let path = path.to_path_buf();
    move |source| BuildError::Io {
        action,
        path,
        source,
    }
}

/// One output that `--check` found different.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckDifference {
    /// The output's name.
    pub output: String,
    /// The registered path.
    pub path: StorePath,
    /// One line per differing file (see [`crate::check::Difference`]).
    pub differences: Vec<String>,
    /// Where the rebuilt output was kept (`--keep-failed`).
    pub kept: Option<PathBuf>,
}

/// How a build handed to an executor failed ([`BuildError::Remote`]).
#[derive(Debug)]
pub struct RemoteFailed {
    /// The executor, e.g. `slurm:debug`.
    pub executor: String,
    /// The remote job's id, when it got one.
    pub job: Option<String>,
    /// What happened.
    pub status: String,
    /// The last lines of its log.
    pub log_tail: String,
    /// Whether the builder ran and failed (a build failure), as opposed to a failure
    /// to dispatch the build or to bring its outputs back.
    pub builder_failed: bool,
}

fn job_part(job: &Option<String>) -> String {
    match job {
        Some(id) => format!(" (job {id})"),
        None => String::new(),
    }
}

fn tail_message(tail: &str) -> String {
    if tail.trim().is_empty() {
        String::new()
    } else {
        format!("\nlast lines of the build log:\n{tail}")
    }
}

fn check_message(drv: &StorePath, outputs: &[CheckDifference]) -> String {
    let mut m = format!("derivation '{drv}' is not deterministic: rebuilding it gave other bytes");
    for o in outputs {
        m.push_str(&format!("\noutput '{}' ({}) differs:", o.output, o.path));
        for d in &o.differences {
            m.push_str(&format!("\n  {d}"));
        }
        if let Some(k) = &o.kept {
            m.push_str(&format!(
                "\n  the rebuilt output is kept at {}",
                k.display()
            ));
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn drv() -> StorePath {
        StorePath::from_base_name("00000000000000000000000000000000-x.drv").unwrap()
    }

    fn failed(status: String) -> BuildError {
        BuildError::Failed {
            drv: drv(),
            status,
            log_tail: String::new(),
        }
    }

    #[test]
    fn exit_bits_follow_nix() {
        assert_eq!(failed("exit code 1".into()).nix_exit_bits(), 4);
        // The statuses a killed build gets, with and without --keep-failed.
        let timeout = SandboxError::Timeout(Duration::from_secs(1)).to_string();
        assert_eq!(failed(timeout.clone()).nix_exit_bits(), 5);
        assert_eq!(
            failed(format!("{timeout} (build directory kept at /tmp/k)")).nix_exit_bits(),
            5
        );
        let silent = SandboxError::Silent(Duration::from_secs(3)).to_string();
        assert_eq!(failed(silent).nix_exit_bits(), 5);
        let hash = BuildError::HashMismatch {
            drv: drv(),
            expected: "sha256-a".into(),
            actual: "sha256-b".into(),
        };
        assert_eq!(hash.nix_exit_bits(), 6);
        let check = BuildError::CheckMismatch {
            drv: drv(),
            outputs: Vec::new(),
        };
        assert_eq!(check.nix_exit_bits(), 8);
        let stopped = BuildError::Stopped {
            drv: drv(),
            failed: drv(),
        };
        assert_eq!(stopped.nix_exit_bits(), 0);
        let bad = BuildError::BadDerivation {
            drv: drv(),
            reason: "it has no outputs".into(),
        };
        assert_eq!(bad.nix_exit_bits(), 0);
    }
}
