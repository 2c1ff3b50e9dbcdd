//! Placed builds and their commits: what lets a dependent build start while its
//! inputs are still being registered.
//!
//! Owns: the messages the build threads and the committer send the scheduler
//! ([`Msg`]), the committer thread ([`committer`]: registers placed builds in the
//! order they come, each batch that queued up meanwhile with one `syncfs`), and the
//! input closure of a build whose inputs may be placed but not committed
//! ([`Realiser::closure`]).
//!
//! Must not: decide what to build or start builds (the scheduler in [`super`] does);
//! register anything out of the order it was placed in.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::Instant;

use petgraph::graph::NodeIndex;
use rocmx_store::local::Placed;
use rocmx_store::{LocalStore, StoreError, StorePath};

use super::{lock, BuildError, Realiser};

/// What the build threads and the committer tell the scheduler.
pub(super) enum Msg {
    /// A build ended: its outputs are registered (or it failed, or `--check` compared).
    Done {
        n: NodeIndex,
        start: Instant,
        remote: bool,
        result: Result<BTreeMap<String, StorePath>, BuildError>,
    },
    /// A build's outputs are at their final names (with these references); their
    /// commit is next in the committer's queue. Dependent builds may start: their own
    /// commits come after it.
    Placed {
        n: NodeIndex,
        start: Instant,
        remote: bool,
        outputs: BTreeMap<String, StorePath>,
        refs: Vec<(StorePath, BTreeSet<StorePath>)>,
    },
    /// The commit of a placed build (`outputs`: its paths).
    Committed {
        n: NodeIndex,
        outputs: Vec<StorePath>,
        result: Result<(), BuildError>,
    },
}

/// A placed build for the committer.
pub(super) struct Commit {
    pub n: NodeIndex,
    pub placed: Placed,
    /// The build's lock, released once its records are written.
    pub lock: lock::DrvLock,
    /// Sent to the scheduler before the commit.
    pub placed_msg: Msg,
}

/// Commits placed builds in the order they come, each batch that has queued up
/// meanwhile with one `syncfs` ([`LocalStore::commit_built`]); tells the scheduler of
/// each build first ([`Msg::Placed`]), so that no dependent's commit can be queued
/// before its inputs', then of its commit. Ends when every sender is gone.
pub(super) fn committer(store: &LocalStore, queue: mpsc::Receiver<Commit>, to: mpsc::Sender<Msg>) {
    while let Ok(first) = queue.recv() {
        let mut batch = vec![first];
        batch.extend(queue.try_iter());
        let mut placed = Vec::with_capacity(batch.len());
        let mut rest = Vec::with_capacity(batch.len());
        for c in batch {
            let _ = to.send(c.placed_msg);
            rest.push((c.n, c.placed.paths().cloned().collect::<Vec<_>>(), c.lock));
            placed.push(c.placed);
        }
        // A panic here would leave the scheduler waiting for these commits for ever:
        // they fail instead (what they placed is removed as the batch unwinds), and
        // the builds after them go on.
        let results: Vec<Result<(), BuildError>> =
            match std::panic::catch_unwind(AssertUnwindSafe(|| store.commit_built(placed))) {
                Ok(r) => r.into_iter().map(|r| r.map_err(BuildError::from)).collect(),
                Err(_) => rest
                    .iter()
                    .map(|(_, outputs, _)| {
                        Err(BuildError::Io {
                            action: "registering",
                            path: outputs
                                .first()
                                .map(|p| PathBuf::from(p.to_absolute()))
                                .unwrap_or_default(),
                            source: io::Error::other(
                                "the commit thread panicked (a bug in rocmx: please report it)",
                            ),
                        })
                    })
                    .collect(),
            };
        for ((n, outputs, lock), result) in rest.into_iter().zip(results) {
            drop(lock);
            let _ = to.send(Msg::Committed { n, outputs, result });
        }
    }
}

impl Realiser<'_> {
    /// The closure of `paths`, which may include outputs placed but not committed yet
    /// (their references are in [`Realiser::pending_refs`]); the rest from the store.
    pub(super) fn closure(&self, paths: &[StorePath]) -> Result<BTreeSet<StorePath>, StoreError> {
        if self.pending_refs.is_empty() {
            return self.store.closure(paths);
        }
        let mut out = BTreeSet::new();
        let mut registered = Vec::new();
        let mut todo = paths.to_vec();
        while let Some(p) = todo.pop() {
            match self.pending_refs.get(&p) {
                Some(refs) => {
                    if !out.contains(&p) {
                        todo.extend(refs.iter().filter(|r| **r != p).cloned());
                        out.insert(p);
                    }
                }
                None => registered.push(p),
            }
        }
        registered.sort();
        registered.dedup();
        out.extend(self.store.closure(&registered)?);
        Ok(out)
    }
}
