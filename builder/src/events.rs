//! What the scheduler tells the outside world while it realises a closure.
//!
//! Owns: the [`Event`] type and the [`EventSink`] trait through which
//! [`crate::realise::Realiser`] reports progress, logs and results, and the recognition
//! of phase markers in build logs ([`phase_of_line`]).
//!
//! Must not: render anything (the progress display, `-L` prefixes and
//! `--log-format json` belong to the binary).
//!
//! # Order
//!
//! For one run: one [`Event::Planned`], then per derivation either [`Event::Cached`]
//! (realised without building), or [`Event::Started`], any number of [`Event::Log`]
//! and [`Event::Phase`], then [`Event::Built`] or [`Event::Failed`]; or
//! [`Event::Skipped`] when an input failed. A build handed to an executor
//! ([`crate::executor`]) has [`Event::Remote`]s between its [`Event::Started`] and its
//! end, one per change of its remote state. Fetching from a substituter is one
//! [`Event::Fetching`], then [`Event::Downloaded`] and one [`Event::Fetched`] per path
//! (concurrent paths interleave), then [`Event::Cached`] for each derivation they
//! realise; it happens after [`Event::Planned`] and before the first
//! [`Event::Started`], and again for a derivation found in a cache once its inputs were
//! built. [`Event::WaitingForLock`] may come before
//! [`Event::Cached`], [`Event::Started`] or [`Event::Failed`] when another process was
//! building the derivation (a derivation whose wait is cut short by the run stopping
//! gets no further event). Events of concurrent builds interleave.
//! Events come from several threads; a sink must be `Send + Sync`.
//!
//! # Phase markers
//!
//! A builder announces its phase with a log line, as Nix's stdenv does:
//!
//! ```text
//! @nix {"action":"setPhase","phase":"buildPhase"}
//! @rocmx {"action":"setPhase","phase":"buildPhase"}
//! ```

use std::collections::BTreeMap;
use std::time::Duration;

use rocmx_store::StorePath;

/// One thing that happened during a run. See the module documentation for the order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The closure to consider: every derivation the goals need (dependencies first),
    /// and how many of them may be built (those not known to be valid already).
    Planned {
        /// Every derivation in the run's DAG.
        drvs: Vec<StorePath>,
    },
    /// A derivation was realised without building: a recorded realisation (early
    /// cutoff) or a valid fixed output.
    Cached {
        /// The derivation.
        drv: StorePath,
        /// Its outputs.
        outputs: BTreeMap<String, StorePath>,
    },
    /// Another process (or realiser) holds the derivation's build lock: it is building
    /// it. This run waits, then uses its result (or builds, if it failed).
    WaitingForLock {
        /// The derivation.
        drv: StorePath,
        /// Its `name`.
        name: String,
    },
    /// A build started.
    Started {
        /// The derivation.
        drv: StorePath,
        /// Its `name`.
        name: String,
    },
    /// A build handed to an executor ([`crate::executor`]) changed state.
    Remote {
        /// The derivation.
        drv: StorePath,
        /// The executor, e.g. `slurm:debug`.
        executor: String,
        /// The remote job's id (a Slurm job id).
        job: String,
        /// Where it stands.
        state: RemoteState,
    },
    /// A chunk of a build's log (stdout and stderr merged), as it came.
    Log {
        /// The derivation.
        drv: StorePath,
        /// The bytes.
        data: Vec<u8>,
    },
    /// A build announced a new phase (see [`phase_of_line`]).
    Phase {
        /// The derivation.
        drv: StorePath,
        /// The phase, e.g. `buildPhase`.
        phase: String,
    },
    /// A build succeeded and its outputs are registered.
    Built {
        /// The derivation.
        drv: StorePath,
        /// Its outputs.
        outputs: BTreeMap<String, StorePath>,
        /// Wall time of the whole build, post-processing included.
        duration: Duration,
    },
    /// A derivation could not be realised (its own failure, not an input's).
    Failed {
        /// The derivation.
        drv: StorePath,
        /// The full error message (it names the derivation and ends with the log tail
        /// when the builder failed).
        message: String,
    },
    /// Outputs are about to be fetched from the substituter (before any build starts,
    /// or for one derivation whose inputs were just built).
    Fetching {
        /// The store paths to download (the outputs and what they refer to).
        paths: Vec<StorePath>,
        /// The bytes to download (compressed NARs; NAR size where the cache does not
        /// say).
        download: u64,
        /// The bytes once unpacked (NAR sizes).
        unpacked: u64,
    },
    /// Bytes of a [`Event::Fetching`] download arrived (sent in chunks of about a
    /// mebibyte per path, and at its end).
    Downloaded {
        /// The path being downloaded.
        path: StorePath,
        /// Bytes since the last event for it.
        bytes: u64,
    },
    /// A path of a [`Event::Fetching`] was downloaded, checked and registered.
    Fetched {
        /// The path.
        path: StorePath,
        /// Where it came from (a cache URL).
        source: String,
        /// The bytes downloaded.
        bytes: u64,
    },
    /// A derivation was not attempted because an input failed.
    Skipped {
        /// The derivation.
        drv: StorePath,
        /// The failed derivation it depends on.
        because: StorePath,
    },
}

/// Where a build handed to an executor stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemoteState {
    /// Submitted, waiting for a node.
    Queued,
    /// Running on a node.
    Running,
    /// The job was lost (a node failed) and has been submitted again.
    Resubmitted,
    /// The build finished; its outputs are being fetched.
    Fetching,
}

impl RemoteState {
    /// The state's name in messages and JSON: `queued`, `running`, `resubmitted`,
    /// `fetching`.
    pub fn as_str(self) -> &'static str {
        match self {
            RemoteState::Queued => "queued",
            RemoteState::Running => "running",
            RemoteState::Resubmitted => "resubmitted",
            RemoteState::Fetching => "fetching",
        }
    }
}

impl Event {
    /// The derivation the event is about (none for [`Event::Planned`] and fetches).
    pub fn drv(&self) -> Option<&StorePath> {
        match self {
            Event::Planned { .. }
            | Event::Fetching { .. }
            | Event::Downloaded { .. }
            | Event::Fetched { .. } => None,
            Event::Cached { drv, .. }
            | Event::WaitingForLock { drv, .. }
            | Event::Started { drv, .. }
            | Event::Remote { drv, .. }
            | Event::Log { drv, .. }
            | Event::Phase { drv, .. }
            | Event::Built { drv, .. }
            | Event::Failed { drv, .. }
            | Event::Skipped { drv, .. } => Some(drv),
        }
    }
}

/// Receives the events of a run, from several threads.
pub trait EventSink: Send + Sync {
    /// One event.
    fn event(&self, e: &Event);
}

/// A sink that drops everything.
pub struct NoEvents;

impl EventSink for NoEvents {
    fn event(&self, _: &Event) {}
}

impl<F: Fn(&Event) + Send + Sync> EventSink for F {
    fn event(&self, e: &Event) {
        self(e)
    }
}

/// The phase a log line announces, if it is a phase marker (see the module
/// documentation). The line may end with `\n` or `\r\n`.
pub fn phase_of_line(line: &[u8]) -> Option<String> {
    let line = std::str::from_utf8(line).ok()?.trim_end();
    let json = line
        .strip_prefix("@nix ")
        .or_else(|| line.strip_prefix("@rocmx "))?;
    let v: serde_json::Value = serde_json::from_str(json).ok()?;
    if v.get("action")?.as_str()? != "setPhase" {
        return None;
    }
    let phase = v.get("phase")?.as_str()?;
    (!phase.is_empty() && phase.len() <= 200).then(|| phase.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phase_markers() {
        assert_eq!(
            phase_of_line(b"@nix {\"action\":\"setPhase\",\"phase\":\"buildPhase\"}\n"),
            Some("buildPhase".into())
        );
        assert_eq!(
            phase_of_line(b"@rocmx {\"action\": \"setPhase\", \"phase\": \"unpack\"}\r\n"),
            Some("unpack".into())
        );
        assert_eq!(phase_of_line(b"@nix {\"action\":\"start\",\"id\":1}"), None);
        assert_eq!(phase_of_line(b"building phase buildPhase"), None);
        assert_eq!(phase_of_line(b"@nix not json"), None);
        assert_eq!(
            phase_of_line(b"@nix {\"action\":\"setPhase\",\"phase\":\"\"}"),
            None
        );
        assert_eq!(phase_of_line(b"\xff@nix"), None);
    }
}
