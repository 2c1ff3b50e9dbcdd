//! Realisation: from `.drv` files in the store to valid, registered outputs.
//!
//! Owns: [`Realiser`] — the scheduler. It reads the derivations the goals need into a
//! petgraph DAG (an edge from each input derivation to its dependent), then walks it
//! dependencies first: a derivation whose inputs are all realised is *prepared* on the
//! scheduler's thread (resolved against its inputs' outputs, see [`crate::resolve`],
//! and looked up in the realisations: early cutoff), and, when it must be built, handed
//! to a worker thread as a [`job::Job`]; at most [`BuildOptions::max_jobs`] run at once.
//! A failure stops new builds (the running ones finish) unless
//! [`BuildOptions::keep_going`], which builds everything that does not depend on it.
//! Everything that happens is reported as [`Event`]s.
//!
//! Must not: evaluate expressions or parse command lines; render progress.
//!
//! # One derivation
//!
//! 1. Read and parse the `.drv`. Fixed-output derivations whose paths are all valid are
//!    done (their inputs are not even read).
//! 2. Once every input derivation is realised, resolve; the key is
//!    `hex(BLAKE3(resolved ATerm))`.
//! 3. Unless [`BuildOptions::rebuild`], look up `(key, output)` in the realisations; if
//!    every output is there and valid, that is the result (`built = false`): early cutoff.
//! 4. Build ([`job`]): each floating output is written at its scratch path
//!    ([`crate::resolve::scratch_path`]), which replaces its hash placeholder (`/1rz4g…`)
//!    in the builder, arguments and environment; a fixed output is written at its fixed
//!    path. The sandbox gets the closure of the resolved input sources (read-only, at
//!    their logical paths), the outputs under `<state>/builds/<drv hash>-<pid>-<n>/`
//!    (host), `/build` (0700), the network only for fixed outputs, and the `rootfs`
//!    variable's store path (which must be in the input closure) as its base.
//!    `builtin:fetchurl` runs in-process instead ([`crate::fetchurl`]); only fixed
//!    outputs may use it.
//! 5. Post-process: normalise, scan references (input closure, scratch paths), hash
//!    modulo self-references, final path `StorePath::from_ca(name, Output{…})`, rewrite
//!    self-references, place at the final path (`LocalStore::place_built`). Outputs that
//!    refer to siblings are processed after them
//!    ([`crate::output::process_floating_set`]). Fixed outputs: check the declared hash
//!    (flat file or NAR) and that they have no references; place at the fixed path.
//! 6. Commit: the committer thread registers placed builds in the order they were
//!    placed, each build's outputs with their realisations and derivation outputs in
//!    one transaction, a batch of builds after one `syncfs` (`LocalStore::commit_built`);
//!    the build lock is held until then. The scheduler hears of a placed build before
//!    its commit starts ([`Msg::Placed`]) and starts its dependents at once: their own
//!    commits are queued after it, and their input closures take the references of
//!    outputs not committed yet from [`Realiser::pending_refs`]. The run returns once
//!    every commit has.
//!
//! # `--check`
//!
//! With [`BuildOptions::check`], the goals (not their inputs) must already be realised;
//! they are built again and each output is compared with the registered one
//! ([`crate::check`]). Nothing is registered. A difference is
//! [`BuildError::CheckMismatch`], which lists the differing files.
//!
//! The build log (stdout and stderr merged) is stored zstd-compressed at [`log_path`],
//! for failed builds too.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::path::PathBuf;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::visit::EdgeRef;
use petgraph::Direction;
use rocmx_store::local::GcShared;
use rocmx_store::{Derivation, LocalStore, StoreError, StorePath};

use crate::events::{Event, EventSink, NoEvents};
use crate::fetchurl::{Limits as FetchLimits, Mirrors};
use crate::resolve::{self, ResolvedInput};
use commit::{committer, Commit, Msg};

mod commit;
mod error;
mod job;
mod lock;
mod log;
mod plan;
mod remote;
mod substitute;

use error::io_err;
pub use error::{BuildError, CheckDifference, RemoteFailed};

pub use log::log_path;
pub use plan::valid_fixed_outputs;
pub use substitute::{Download, Found, Outlook, Query, Substituter};

/// How often builds waiting for their lock try it again.
const LOCK_POLL: Duration = Duration::from_millis(50);

/// How builds run.
#[derive(Debug, Clone)]
pub struct BuildOptions {
    /// Exported to builders as `ROCMX_BUILD_CORES`.
    pub cores: u32,
    /// How many builds may run at once (at least 1).
    pub max_jobs: usize,
    /// After a failure, go on with everything that does not depend on it.
    pub keep_going: bool,
    /// Kill a build after this long.
    pub timeout: Option<Duration>,
    /// Kill a build after this long without output.
    pub max_silent: Option<Duration>,
    /// Keep the build directory of a failed build (`<state>/builds/…`), and with
    /// `check`, the differing output at `<path>.check`.
    pub keep_failed: bool,
    /// Ignore realisations (and valid fixed outputs) of the derivations asked for and
    /// their inputs: build them again.
    pub rebuild: bool,
    /// Build the goals again and compare with their registered outputs (see the module
    /// documentation).
    pub check: bool,
    /// Where `mirror://NAME/…` URLs of `builtin:fetchurl` lead.
    pub mirrors: Mirrors,
    /// Time and size limits of `builtin:fetchurl` downloads; the build's `timeout` and
    /// `max_silent` tighten them further.
    pub fetch_limits: FetchLimits,
    /// Processes, `/dev/shm` and disk of each sandboxed build.
    pub limits: crate::sandbox::Limits,
    /// Where builds take their host uids and gids from when rocmx runs as root.
    pub build_ids: crate::ids::IdRange,
    /// Built-in builders registered by the binary (`builtin:unpack-debs`, …);
    /// `builtin:fetchurl` is always there.
    pub builtins: crate::builtins::Builtins,
    /// Where outputs can be fetched from instead of built (binary caches), asked after
    /// the local realisations and before building; none by default.
    pub substituter: Option<Arc<dyn Substituter>>,
    /// Where builds run when not here ([`crate::executor`]): a build the executor
    /// [`takes`](crate::executor::Executor::takes) is handed to it (not under `check`);
    /// up to its [`slots`](crate::executor::Executor::slots) run at once, beside
    /// `max_jobs` local ones. None: every build runs in this machine's sandbox.
    pub executor: Option<Arc<dyn crate::executor::Executor>>,
    /// The sandbox's variable parts ([`crate::sandbox::Variant::default`]: the
    /// documented environment); `rocmx verify` varies them (with `check`).
    pub variant: crate::sandbox::Variant,
}

/// The default [`BuildOptions::timeout`]: 48 hours (one derivation of the ROCm stack
/// can take a day on a small machine; Nix has no default).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(48 * 3600);
/// The default [`BuildOptions::max_silent`]: one hour without output (a long link step
/// is silent for minutes, a hung builder forever).
pub const DEFAULT_MAX_SILENT: Duration = Duration::from_secs(3600);
/// The default [`crate::sandbox::Limits`]: 8192 processes, 2 GiB of `/dev/shm`, 256 GiB
/// of disk for `/build` and the outputs.
pub const DEFAULT_LIMITS: crate::sandbox::Limits = crate::sandbox::Limits {
    max_processes: Some(8192),
    shm_size: Some(2 << 30),
    disk: Some(256 << 30),
};

impl Default for BuildOptions {
    fn default() -> Self {
        BuildOptions {
            cores: std::thread::available_parallelism()
                .map(|n| n.get() as u32)
                .unwrap_or(1),
            max_jobs: 1,
            keep_going: false,
            timeout: Some(DEFAULT_TIMEOUT),
            max_silent: Some(DEFAULT_MAX_SILENT),
            keep_failed: false,
            rebuild: false,
            check: false,
            mirrors: Mirrors::default(),
            fetch_limits: FetchLimits::default(),
            limits: DEFAULT_LIMITS,
            build_ids: crate::ids::IdRange::of_host(),
            builtins: crate::builtins::Builtins::default(),
            substituter: None,
            executor: None,
            variant: crate::sandbox::Variant::default(),
        }
    }
}

/// A realised derivation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Realised {
    /// The `.drv` path.
    pub drv: StorePath,
    /// Each output's store path.
    pub outputs: BTreeMap<String, StorePath>,
    /// Whether it was built in this run (false: found in the realisations, or a valid
    /// fixed output).
    pub built: bool,
}

/// What preparing a ready derivation gave.
enum Prepared {
    /// Realised without building.
    Cached(BTreeMap<String, StorePath>),
    /// It must be built.
    Build(Box<job::Job>),
    /// Not yet: it needs its inputs registered (see [`Realiser::prepare`]) and some
    /// placed outputs are not committed yet; prepared again after a commit.
    Later,
}

/// A derivation in the run's DAG.
#[derive(Clone)]
struct Node {
    drv: StorePath,
    d: Arc<Derivation>,
    /// A goal under `--check`.
    check: bool,
}

/// Realises derivations into a local store. See the module documentation.
pub struct Realiser<'a> {
    store: &'a LocalStore,
    opts: BuildOptions,
    events: Arc<dyn EventSink>,
    /// Realised derivations.
    done: HashMap<StorePath, Realised>,
    /// Failed (or skipped) derivations → the derivation whose own failure caused it.
    failed: HashMap<StorePath, StorePath>,
    /// The errors of derivations that failed themselves, until given to the caller.
    errors: HashMap<StorePath, BuildError>,
    /// Parsed derivations.
    drvs: HashMap<StorePath, Arc<Derivation>>,
    built: Vec<StorePath>,
    /// Derivations whose outputs the substituter gave, in order.
    substituted: Vec<StorePath>,
    failed_list: Vec<StorePath>,
    skipped_list: Vec<(StorePath, StorePath)>,
    rooted: HashSet<StorePath>,
    /// The GC lock, held shared while a plan or an outlook reads the graph (see
    /// [`Realiser::holding_gc_lock`]), so that each root it adds does not take it again.
    gc_held: Option<GcShared>,
    /// Build directories kept for reuse (deleted when the realiser is dropped).
    pool: job::DirPool,
    /// The references of outputs placed but not committed yet (see [`Msg::Placed`]).
    pending_refs: HashMap<StorePath, BTreeSet<StorePath>>,
}

impl Drop for Realiser<'_> {
    fn drop(&mut self) {
        self.pool.clear();
    }
}

impl<'a> Realiser<'a> {
    /// A realiser over `store`.
    pub fn new(store: &'a LocalStore, opts: BuildOptions) -> Self {
        Realiser {
            store,
            opts,
            events: Arc::new(NoEvents),
            done: HashMap::new(),
            failed: HashMap::new(),
            errors: HashMap::new(),
            drvs: HashMap::new(),
            built: Vec::new(),
            substituted: Vec::new(),
            failed_list: Vec::new(),
            skipped_list: Vec::new(),
            rooted: HashSet::new(),
            gc_held: None,
            pool: job::DirPool::default(),
            pending_refs: HashMap::new(),
        }
    }

    /// Reports every event of the following runs to `sink`.
    pub fn with_events(mut self, sink: Arc<dyn EventSink>) -> Self {
        self.events = sink;
        self
    }

    /// The derivations actually built in this run, in order of completion.
    pub fn built(&self) -> &[StorePath] {
        &self.built
    }

    /// The derivations whose outputs were fetched from a substituter in this run.
    pub fn substituted(&self) -> &[StorePath] {
        &self.substituted
    }

    /// The derivations whose own build failed in this run, in order.
    pub fn failed(&self) -> &[StorePath] {
        &self.failed_list
    }

    /// Derivations not attempted because an input failed, with that input, in order.
    pub fn skipped(&self) -> &[(StorePath, StorePath)] {
        &self.skipped_list
    }

    /// The error of a derivation that failed itself in this run, unless it was a goal
    /// whose error [`Realiser::realise_all`] already returned.
    pub fn failure(&self, drv: &StorePath) -> Option<&BuildError> {
        self.errors.get(drv)
    }

    /// The derivation `drv`, as this run read it (each `.drv` is read and parsed once
    /// per run; a plan or an outlook has read every one it names), or read now.
    pub fn derivation(&mut self, drv: &StorePath) -> Result<Arc<Derivation>, BuildError> {
        self.read_drv(drv)
    }

    /// Where the build log of `drv` is stored: `<state>/log/<drv hash part>.log.zst`.
    pub fn log_path(&self, drv: &StorePath) -> PathBuf {
        log_path(self.store, drv)
    }

    /// Realises `drv` and, first, every input derivation it needs. When an input fails,
    /// the error is that input's own (the first time; [`BuildError::DependencyFailed`]
    /// after that).
    pub fn realise(&mut self, drv: &StorePath) -> Result<Realised, BuildError> {
        let r = self
            .realise_all(std::slice::from_ref(drv))
            .pop()
            .expect("one result per goal");
        match r {
            Err(BuildError::DependencyFailed { dep, drv }) => Err(self
                .errors
                .remove(&dep)
                .unwrap_or(BuildError::DependencyFailed { drv, dep })),
            other => other,
        }
    }

    /// Realises every goal and the derivations they need, concurrently as
    /// [`BuildOptions::max_jobs`] allows; one result per goal, in order. See the module
    /// documentation.
    pub fn realise_all(&mut self, goals: &[StorePath]) -> Vec<Result<Realised, BuildError>> {
        let failed_before = self.failed_list.len();
        let mut graph: DiGraph<Node, ()> = DiGraph::new();
        let mut index: HashMap<StorePath, NodeIndex> = HashMap::new();
        self.plan(goals, &mut graph, &mut index);
        match petgraph::algo::toposort(&graph, None) {
            Ok(order) if self.opts.substituter.is_some() && !self.opts.rebuild => {
                // Emits `Planned` for what is left to do.
                graph = self.substitute_ahead(graph, &index, &order, goals);
            }
            Ok(order) => {
                let drvs = order.into_iter().map(|n| graph[n].drv.clone()).collect();
                self.events.event(&Event::Planned { drvs });
            }
            Err(cycle) => {
                let drv = graph[cycle.node_id()].drv.clone();
                self.fail(
                    &graph,
                    cycle.node_id(),
                    BuildError::BadDerivation {
                        drv,
                        reason: "it depends on itself".into(),
                    },
                );
                let drvs = graph.node_indices().map(|n| graph[n].drv.clone()).collect();
                self.events.event(&Event::Planned { drvs });
            }
        }
        let first_failure = self.execute(&graph, failed_before);

        goals
            .iter()
            .map(|g| {
                if let Some(r) = self.done.get(g) {
                    return Ok(r.clone());
                }
                match self.failed.get(g) {
                    Some(root) if root == g => Err(self
                        .errors
                        .remove(g)
                        .unwrap_or(BuildError::AlreadyFailed { drv: g.clone() })),
                    Some(root) => Err(BuildError::DependencyFailed {
                        drv: g.clone(),
                        dep: root.clone(),
                    }),
                    None => Err(match &first_failure {
                        Some(f) => BuildError::Stopped {
                            drv: g.clone(),
                            failed: f.clone(),
                        },
                        None => BuildError::BadDerivation {
                            drv: g.clone(),
                            reason: "it depends on itself".into(),
                        },
                    }),
                }
            })
            .collect()
    }

    /// Runs the DAG: prepares ready derivations, runs builds on worker threads. Gives
    /// the first failure, if any.
    fn execute(&mut self, graph: &DiGraph<Node, ()>, failed_before: usize) -> Option<StorePath> {
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

    /// Resolves a ready derivation and looks it up (see the module documentation).
    fn prepare(&mut self, graph: &DiGraph<Node, ()>, n: NodeIndex) -> Result<Prepared, BuildError> {
        let node = &graph[n];
        let drv = &node.drv;
        let d = node.d.clone();
        let bad = |reason: String| BuildError::BadDerivation {
            drv: drv.clone(),
            reason,
        };
        let host = format!("{}-linux", std::env::consts::ARCH);
        // Built-in builders run anywhere; Nix gives them the system `builtin`.
        let builtin = d.builder.starts_with("builtin:") && d.system == "builtin";
        if d.system != host && !builtin {
            return Err(bad(format!(
                "it is for system '{}', this machine is '{host}'",
                d.system
            )));
        }
        if d.outputs.is_empty() {
            return Err(bad("it has no outputs".into()));
        }
        let mut inputs = BTreeMap::new();
        for input in d.input_drvs.keys() {
            let r = self
                .done
                .get(input)
                .ok_or_else(|| bad(format!("its input '{input}' is not realised")))?;
            let name = self
                .drvs
                .get(input)
                .map(|d| drv_name(d, input))
                .unwrap_or_default();
            inputs.insert(
                input.clone(),
                ResolvedInput {
                    name,
                    outputs: r.outputs.clone(),
                },
            );
        }
        // What cannot use inputs that are placed but not yet committed: outputs from a
        // substituter (registered at once, so their references must be valid), a
        // build that exports its inputs' registrations.
        if !self.pending_refs.is_empty()
            && ((self.opts.substituter.is_some() && !self.opts.rebuild && !node.check)
                || crate::structured::exports_references(&d))
        {
            return Ok(Prepared::Later);
        }
        let resolved = resolve::resolve(&d, &inputs).map_err(|e| bad(e.to_string()))?;
        let key = resolve::resolved_hash(&resolved);

        let mut check = None;
        if node.check {
            match self.lookup(&key, &d)? {
                Some(outputs) => check = Some(outputs),
                None => return Err(BuildError::NotRealised { drv: drv.clone() }),
            }
        } else if !self.opts.rebuild {
            if let Some(outputs) = self.cached(drv, &key, &d, true)? {
                return Ok(Prepared::Cached(outputs));
            }
        }

        // Inputs: the closure of the resolved input sources, rooted while we build.
        let srcs: Vec<StorePath> = resolved.input_srcs.iter().cloned().collect();
        let closure = self.closure(&srcs)?;
        for p in &closure {
            self.temp_root(p)?;
        }
        Ok(Prepared::Build(Box::new(job::Job {
            drv: drv.clone(),
            name: drv_name(&d, drv),
            resolved,
            key,
            closure,
            check,
        })))
    }

    /// After node `n`'s build lock is taken: its outputs, if another process realised it
    /// meanwhile (not for `--check` or `--rebuild`, which build anyway).
    fn recheck(
        &mut self,
        graph: &DiGraph<Node, ()>,
        n: NodeIndex,
        key: &str,
    ) -> Result<Option<BTreeMap<String, StorePath>>, BuildError> {
        let node = &graph[n];
        if node.check || self.opts.rebuild {
            return Ok(None);
        }
        self.cached(&node.drv, key, &node.d, false)
    }

    /// The recorded outputs of `key` (see [`Realiser::lookup`]), else (when `substitute`)
    /// the substituter's, also recorded as the outputs of `drv`; `None` when it must be
    /// built.
    fn cached(
        &mut self,
        drv: &StorePath,
        key: &str,
        d: &Derivation,
        substitute: bool,
    ) -> Result<Option<BTreeMap<String, StorePath>>, BuildError> {
        let outputs = match self.lookup(key, d)? {
            Some(o) => o,
            None if !substitute => return Ok(None),
            None => match self.substitute_one(drv, key, d)? {
                Some(o) => o,
                None => return Ok(None),
            },
        };
        for (o, p) in &outputs {
            self.store.add_derivation_output(drv, o, p)?;
        }
        Ok(Some(outputs))
    }

    /// Records a realised derivation.
    fn complete(&mut self, drv: &StorePath, outputs: BTreeMap<String, StorePath>, built: bool) {
        self.done.insert(
            drv.clone(),
            Realised {
                drv: drv.clone(),
                outputs,
                built,
            },
        );
    }

    /// Records the failure of node `n` and skips everything that depends on it.
    fn fail(&mut self, graph: &DiGraph<Node, ()>, n: NodeIndex, e: BuildError) {
        let drv = graph[n].drv.clone();
        // Every message names the derivation.
        let message = match &e {
            BuildError::Sandbox(_) | BuildError::Store(_) | BuildError::Io { .. } => {
                format!("building '{drv}': {e}")
            }
            _ => e.to_string(),
        };
        self.events.event(&Event::Failed {
            drv: drv.clone(),
            message,
        });
        self.failed_list.push(drv.clone());
        self.failed.insert(drv.clone(), drv.clone());
        self.errors.insert(drv.clone(), e);
        self.skip_dependents(graph, n, &drv);
    }

    /// Marks everything that depends on node `n` as failed because of `root`.
    fn skip_dependents(&mut self, graph: &DiGraph<Node, ()>, n: NodeIndex, root: &StorePath) {
        let drv = root.clone();
        let mut stack: Vec<NodeIndex> = graph.neighbors_directed(n, Direction::Outgoing).collect();
        while let Some(m) = stack.pop() {
            let dep = &graph[m].drv;
            if self.failed.contains_key(dep) || self.done.contains_key(dep) {
                continue;
            }
            self.failed.insert(dep.clone(), drv.clone());
            self.skipped_list.push((dep.clone(), drv.clone()));
            self.events.event(&Event::Skipped {
                drv: dep.clone(),
                because: drv.clone(),
            });
            stack.extend(graph.neighbors_directed(m, Direction::Outgoing));
        }
    }

    fn temp_root(&mut self, p: &StorePath) -> Result<(), StoreError> {
        if !self.rooted.contains(p) {
            match &self.gc_held {
                Some(held) => self.store.add_temp_root_held(p, held)?,
                None => self.store.add_temp_root(p)?,
            }
            self.rooted.insert(p.clone());
        }
        Ok(())
    }

    /// Runs `f` with the GC lock held shared (unless it already is): local work only,
    /// reading `.drv` files and the database and rooting what it finds, never a build or
    /// a download, which would keep a collection waiting. When the lock cannot be taken,
    /// `f` runs anyway and each root takes it (and reports the error) as usual.
    pub(super) fn holding_gc_lock<T>(&mut self, f: impl FnOnce(&mut Self) -> T) -> T {
        if self.gc_held.is_some() {
            return f(self);
        }
        self.gc_held = self.store.hold_gc_shared().ok();
        let r = f(self);
        self.gc_held = None;
        r
    }

    /// The recorded realisations of every output under `key`, if all are there and valid
    /// (then rooted: each is rooted before its validity is checked, so that a collector
    /// running meanwhile cannot delete it after the check).
    fn lookup(
        &mut self,
        key: &str,
        d: &Derivation,
    ) -> Result<Option<BTreeMap<String, StorePath>>, BuildError> {
        let mut out = BTreeMap::new();
        for (o, spec) in &d.outputs {
            let found = match self.store.query_realisation(key, o)? {
                Some(p) => Some(p),
                // A fixed output is known by its path.
                None => spec.path().cloned(),
            };
            let Some(p) = found else {
                return Ok(None);
            };
            self.temp_root(&p)?;
            if !self.store.is_valid(&p)? {
                return Ok(None);
            }
            out.insert(o.clone(), p);
        }
        Ok(Some(out))
    }
}

/// The derivation's `name`, or its file name without `.drv`.
fn drv_name(d: &Derivation, p: &StorePath) -> String {
    d.name()
        .map(str::to_string)
        .unwrap_or_else(|| p.name().trim_end_matches(".drv").to_string())
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
