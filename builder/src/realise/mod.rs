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
//! This module keeps the realiser's state, its options and entry points, and the record
//! of what was realised, failed or skipped; reading the DAG is `plan.rs`'s, preparing
//! one derivation `prepare.rs`'s, the scheduler's loop `execute.rs`'s.
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
//!
//! [`Msg::Placed`]: commit::Msg::Placed

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::Direction;
use rocmx_store::local::GcShared;
use rocmx_store::{Derivation, LocalStore, StoreError, StorePath};

use crate::events::{Event, EventSink, NoEvents};
use crate::fetchurl::{Limits as FetchLimits, Mirrors};

mod commit;
mod error;
mod execute;
mod job;
mod lock;
mod log;
mod plan;
mod prepare;
mod remote;
mod substitute;

use error::io_err;
pub use error::{BuildError, CheckDifference, RemoteFailed};

pub use log::log_path;
pub use plan::valid_fixed_outputs;
pub use substitute::{Download, Found, Outlook, Query, Substituter};

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
    ///
    /// [`Msg::Placed`]: commit::Msg::Placed
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
}

/// The derivation's `name`, or its file name without `.drv`.
fn drv_name(d: &Derivation, p: &StorePath) -> String {
    d.name()
        .map(str::to_string)
        .unwrap_or_else(|| p.name().trim_end_matches(".drv").to_string())
}
