//! Running a planned DAG: the scheduler's loop.
//!
//! Owns: [`Realiser::execute`] — preparing every ready derivation on the scheduler's
//! thread ([`super::prepare`]), taking each build's lock ([`super::lock`]: builds whose
//! lock another process holds are set aside and tried again) and looking again under
//! it, starting builds on scoped worker threads (here at most
//! [`BuildOptions::max_jobs`](super::BuildOptions::max_jobs), through the executor at
//! most its slots), running the committer thread ([`super::commit`]), and what the
//! messages of both mean: dependents start once their inputs are placed, a failed
//! commit fails its derivation, a failure stops new builds unless `keep_going`.
//!
//! Must not: read the DAG ([`super::plan`] does) or decide how one derivation is
//! realised ([`super::prepare`] does); build, place or register outputs itself (the
//! job, the executor and the committer do).

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::visit::EdgeRef;
use petgraph::Direction;
use rocmx_store::StorePath;

use super::commit::{committer, Commit, Msg};
use super::prepare::Prepared;
use super::{job, lock, remote, BuildError, Node, Realiser};
use crate::events::Event;

/// How often builds waiting for their lock try it again.
const LOCK_POLL: Duration = Duration::from_millis(50);

impl Realiser<'_> {
    /// Runs the DAG: prepares ready derivations, runs builds on worker threads. Gives
    /// the first failure, if any.
    pub(super) fn execute(
        &mut self,
        graph: &DiGraph<Node, ()>,
        failed_before: usize,
    ) -> Option<StorePath> {
        // Failures of an earlier run reach their dependents in this one.
        for n in graph.node_indices() {
            if let Some(root) = self.failed.get(&graph[n].drv).cloned() {
                self.skip_dependents(graph, n, &root);
            }
        }
        // Inputs not yet realised, per node.
        let mut pending: HashMap<NodeIndex, usize> = HashMap::new();
        let mut ready: VecDeque<NodeIndex> = VecDeque::new();
        for n in graph.node_indices() {
            let drv = &graph[n].drv;
            if self.failed.contains_key(drv) || (self.done.contains_key(drv) && !graph[n].check) {
                continue;
            }
            let waiting = graph
                .edges_directed(n, Direction::Incoming)
                .filter(|e| !self.done.contains_key(&graph[e.source()].drv))
                .count();
            if waiting == 0 {
                ready.push_back(n);
            } else {
                pending.insert(n, waiting);
            }
        }
        let mut first_failure: Option<StorePath> = self.failed_list.get(failed_before).cloned();
        let mut queue: VecDeque<(NodeIndex, Box<job::Job>)> = VecDeque::new();
        // Queued builds whose lock another process holds.
        let mut contended: lock::Contended<(NodeIndex, Box<job::Job>)> = Default::default();
        // Builds in flight here and through the executor.
        let mut running = 0usize;
        let mut running_remote = 0usize;
        let max_jobs = self.opts.max_jobs.max(1);
        let executor = self.opts.executor.clone();
        let slots = executor.as_ref().map_or(0, |e| e.slots().max(1));
        let store = self.store;
        let opts = self.opts.clone();
        let events = self.events.clone();
        let pool = std::mem::take(&mut self.pool);
        let (tx, rx) = mpsc::channel::<Msg>();
        // Placed builds waiting for their commit, and their build locks.
        let (commit_tx, commit_rx) = mpsc::channel::<Commit>();
        // Committed here, not on the build threads: in the order placed, so that a
        // build's outputs are registered after those of the builds it used.
        let mut committing = 0usize;

        std::thread::scope(|scope| {
            let to_scheduler = tx.clone();
            scope.spawn(move || committer(store, commit_rx, to_scheduler));
            loop {
                let stopping = first_failure.is_some() && !opts.keep_going;
                // Prepare everything ready: cached ones complete at once.
                while let Some(n) = (!stopping).then(|| ready.pop_front()).flatten() {
                    match self.prepare(graph, n) {
                        Ok(Prepared::Cached(outputs)) => {
                            let drv = graph[n].drv.clone();
                            self.events.event(&Event::Cached {
                                drv: drv.clone(),
                                outputs: outputs.clone(),
                            });
                            self.complete(&drv, outputs, false);
                            release(graph, n, &mut pending, &mut ready);
                        }
                        Ok(Prepared::Build(job)) => queue.push_back((n, job)),
                        Ok(Prepared::Later) => {
                            ready.push_front(n);
                            break;
                        }
                        Err(e) => {
                            first_failure.get_or_insert(graph[n].drv.clone());
                            self.fail(graph, n, e);
                        }
                    }
                }
                let stopping = first_failure.is_some() && !opts.keep_going;
                // Start builds while there is room, each holding its build lock; those
                // whose lock was held first, once it is free.
                while !stopping && (running < max_jobs || running_remote < slots) {
                    let next = contended.next(
                        store.state_dir(),
                        &mut queue,
                        |(_, job)| job.key.as_str(),
                        |(_, job)| {
                            events.event(&Event::WaitingForLock {
                                drv: job.drv.clone(),
                                name: job.name.clone(),
                            })
                        },
                    );
                    let ((n, job), lock) = match next {
                        None => break,
                        Some(Ok(x)) => x,
                        Some(Err(((n, _), e))) => {
                            first_failure.get_or_insert(graph[n].drv.clone());
                            self.fail(graph, n, e);
                            continue;
                        }
                    };
                    // Another process may have built it while we prepared or waited.
                    match self.recheck(graph, n, &job.key) {
                        Ok(None) => {}
                        Ok(Some(outputs)) => {
                            drop(lock);
                            let drv = graph[n].drv.clone();
                            self.events.event(&Event::Cached {
                                drv: drv.clone(),
                                outputs: outputs.clone(),
                            });
                            self.complete(&drv, outputs, false);
                            release(graph, n, &mut pending, &mut ready);
                            continue;
                        }
                        Err(e) => {
                            first_failure.get_or_insert(graph[n].drv.clone());
                            self.fail(graph, n, e);
                            continue;
                        }
                    }
                    // Here or through the executor; in order: a build whose side is
                    // full waits at the head of the queue for a slot there.
                    let remote = executor
                        .clone()
                        .filter(|e| job.check.is_none() && e.takes(&job.resolved));
                    let full = match remote {
                        // The executor is handed an input closure valid here: not
                        // before its placed outputs are committed.
                        Some(_) => {
                            running_remote >= slots
                                || job
                                    .closure
                                    .iter()
                                    .any(|p| self.pending_refs.contains_key(p))
                        }
                        None => running >= max_jobs,
                    };
                    if full {
                        drop(lock);
                        queue.push_front((n, job));
                        break;
                    }
                    self.events.event(&Event::Started {
                        drv: job.drv.clone(),
                        name: job.name.clone(),
                    });
                    let tx = tx.clone();
                    let commit_tx = commit_tx.clone();
                    let ctx = job::Ctx {
                        store,
                        opts: &opts,
                        events: events.clone(),
                        pool: &pool,
                    };
                    let is_remote = remote.is_some();
                    if is_remote {
                        running_remote += 1;
                    } else {
                        running += 1;
                    }
                    let spawned = std::thread::Builder::new()
                        .name(format!("build {}", job.name))
                        .spawn_scoped(scope, move || {
                            let start = Instant::now();
                            let r = match remote {
                                Some(exec) => remote::run(&ctx, exec.as_ref(), *job)
                                    .map(job::Finished::registered),
                                None => job::run(&ctx, *job),
                            };
                            match r {
                                Ok(job::Finished {
                                    outputs,
                                    placed: Some(placed),
                                }) => {
                                    // The committer tells the scheduler, then commits;
                                    // the lock is held until the realisation is recorded.
                                    let placed_msg = Msg::Placed {
                                        n,
                                        start,
                                        remote: is_remote,
                                        outputs,
                                        refs: placed
                                            .references()
                                            .map(|(p, r)| (p.clone(), r.clone()))
                                            .collect(),
                                    };
                                    let _ = commit_tx.send(Commit {
                                        n,
                                        placed,
                                        lock,
                                        placed_msg,
                                    });
                                }
                                r => {
                                    // Held until the realisation is recorded (or the
                                    // build failed).
                                    drop(lock);
                                    let r = r.map(|f| f.outputs);
                                    let _ = tx.send(Msg::Done {
                                        n,
                                        start,
                                        remote: is_remote,
                                        result: r,
                                    });
                                }
                            }
                        });
                    if let Err(e) = spawned {
                        if is_remote {
                            running_remote -= 1;
                        } else {
                            running -= 1;
                        }
                        first_failure.get_or_insert(graph[n].drv.clone());
                        self.fail(
                            graph,
                            n,
                            BuildError::Io {
                                action: "starting a build thread for",
                                path: PathBuf::from(graph[n].drv.to_absolute()),
                                source: e,
                            },
                        );
                    }
                }
                if running + running_remote + committing == 0 {
                    let stopping = first_failure.is_some() && !opts.keep_going;
                    if stopping {
                        contended.clear();
                    }
                    if stopping || (ready.is_empty() && queue.is_empty() && contended.is_empty()) {
                        break;
                    }
                    if ready.is_empty() && queue.is_empty() {
                        // Only builds waiting for their lock: look again soon.
                        std::thread::sleep(LOCK_POLL);
                    }
                    continue;
                }
                let received = if contended.is_empty() {
                    rx.recv().map_err(|_| mpsc::RecvTimeoutError::Disconnected)
                } else {
                    rx.recv_timeout(LOCK_POLL)
                };
                let msg = match received {
                    Ok(x) => x,
                    Err(mpsc::RecvTimeoutError::Timeout) => continue,
                    Err(mpsc::RecvTimeoutError::Disconnected) => break,
                };
                let (n, start, was_remote, r) = match msg {
                    Msg::Done {
                        n,
                        start,
                        remote,
                        result,
                    } => (n, start, remote, result),
                    Msg::Placed {
                        n,
                        start,
                        remote,
                        outputs,
                        refs,
                    } => {
                        committing += 1;
                        self.pending_refs.extend(refs);
                        (n, start, remote, Ok(outputs))
                    }
                    Msg::Committed { n, outputs, result } => {
                        committing -= 1;
                        for p in &outputs {
                            self.pending_refs.remove(p);
                        }
                        let drv = graph[n].drv.clone();
                        if let Err(e) = result {
                            if self.done.remove(&drv).is_some() {
                                self.built.retain(|d| *d != drv);
                                first_failure.get_or_insert(drv.clone());
                                self.fail(graph, n, e);
                            }
                        }
                        continue;
                    }
                };
                if was_remote {
                    running_remote -= 1;
                } else {
                    running -= 1;
                }
                let drv = graph[n].drv.clone();
                if self.failed.contains_key(&drv) {
                    // Skipped while it ran: the commit of one of its inputs failed (and
                    // removed what that input had placed).
                    continue;
                }
                match r {
                    Ok(outputs) => {
                        // One failure at most, whichever output could not be rooted.
                        if let Err(e) = outputs.values().try_for_each(|p| self.temp_root(p)) {
                            first_failure.get_or_insert(drv.clone());
                            self.fail(graph, n, e.into());
                            continue;
                        }
                        self.events.event(&Event::Built {
                            drv: drv.clone(),
                            outputs: outputs.clone(),
                            duration: start.elapsed(),
                        });
                        self.built.push(drv.clone());
                        self.complete(&drv, outputs, true);
                        release(graph, n, &mut pending, &mut ready);
                    }
                    Err(e) => {
                        first_failure.get_or_insert(drv.clone());
                        self.fail(graph, n, e);
                    }
                }
            }
            // The committer ends once every build thread is done with its sender.
            drop(commit_tx);
        });
        self.pool = pool;
        first_failure
    }
}

/// Node `n` is realised: its dependents have one input less to wait for.
fn release(
    graph: &DiGraph<Node, ()>,
    n: NodeIndex,
    pending: &mut HashMap<NodeIndex, usize>,
    ready: &mut VecDeque<NodeIndex>,
) {
    for m in graph.neighbors_directed(n, Direction::Outgoing) {
        if let Some(c) = pending.get_mut(&m) {
            *c -= 1;
            if *c == 0 {
                pending.remove(&m);
                ready.push_back(m);
            }
        }
    }
}
