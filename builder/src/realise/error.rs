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
