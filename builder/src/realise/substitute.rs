//! Substitution: realising derivations from a [`Substituter`] (binary caches) instead
//! of building them, decided before the first build.
//!
//! Owns: the [`Substituter`] interface, the decision of a run ([`Outlook`]: which
//! derivations are valid, fetched or built, and what fetching downloads), fetching
//! ahead of the builds, and fetching one derivation whose inputs were just built.
//!
//! Must not: know any cache format or URL, print anything (the substituter warns), or
//! record a realisation for outputs that are not valid.
//!
//! # Deciding ahead
//!
//! The DAG is walked in waves, dependencies first. A derivation whose inputs all have
//! known outputs (realised here, or found by the substituter in an earlier wave) is
//! resolved and looked up, in the local realisations and then in the substituter; the
//! lookups of one wave are handed to the substituter together, which asks its caches
//! concurrently. A derivation whose outputs are all fixed needs no inputs to be looked
//! up (its paths are known). A derivation with an input that must be built cannot be
//! looked up before that input exists; the scheduler asks again once it does (early
//! cutoff across machines).
//!
//! Then, from the goals down, only what is needed is kept: a derivation whose outputs
//! are valid or can be fetched needs none of its inputs (the closures of its outputs
//! come with them); one to be built needs all of them. The outputs of the needed
//! derivations that can be fetched are fetched together (with their closures, in
//! parallel, references first), before any build starts. When fetching fails for some,
//! the substituter decides ([`Substituter::fall_back`]): they are built (and the
//! decision is made again, since their inputs are now needed), or they fail with
//! [`BuildError::Substitution`].

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::Direction;
use rocmx_store::{LocalStore, StorePath};

use super::{drv_name, BuildError, Node, Realiser};
use crate::events::{Event, EventSink};
use crate::resolve::{self, ResolvedInput};

/// What to look up: the outputs of one derivation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    /// The resolved derivation's hash (the realisations' key); `None` when every
    /// output is fixed (then the paths are the question).
    pub key: Option<String>,
    /// Each output, with its path when it is fixed.
    pub outputs: Vec<(String, Option<StorePath>)>,
}

/// Where a source has every output of a [`Query`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// Each output's path.
    pub outputs: BTreeMap<String, StorePath>,
    /// The signatures of each floating output's realisation (recorded with it).
    pub signatures: BTreeMap<String, Vec<String>>,
    /// The source (a cache URL), for messages.
    pub source: String,
}

/// One store path to download.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Download {
    /// The path.
    pub path: StorePath,
    /// The bytes to download, when the source says.
    pub download_size: Option<u64>,
    /// The bytes once unpacked (its NAR size).
    pub nar_size: u64,
    /// The source (a cache URL).
    pub source: String,
}

impl Download {
    /// The bytes it downloads: its download size, else (a source that does not say)
    /// its NAR size.
    pub fn bytes(&self) -> u64 {
        self.download_size.unwrap_or(self.nar_size)
    }
}

/// A source of realised outputs other than building: binary caches, implemented by the
/// binary (this crate knows no cache format). See the module documentation.
pub trait Substituter: Send + Sync + std::fmt::Debug {
    /// For each query, the outputs a source has (all of them, or `None`), asked
    /// concurrently. A source that cannot be asked is skipped (the substituter warns).
    fn query(&self, queries: &[Query]) -> Vec<Option<Found>>;
    /// Every path of the closures of `paths` that `store` lacks, with its sizes and
    /// source: what [`Substituter::fetch`] will download. `Err` names the path no
    /// source can deliver.
    fn plan(&self, store: &LocalStore, paths: &[StorePath]) -> Result<Vec<Download>, String>;
    /// Downloads, checks and registers `downloads` (as [`Substituter::plan`] gave
    /// them) in parallel, references first, reporting [`Event::Downloaded`] and
    /// [`Event::Fetched`] to `events`. `Err` says what failed (the others are
    /// registered); the substituter has warned about each failure.
    fn fetch(
        &self,
        store: &LocalStore,
        downloads: &[Download],
        events: &dyn EventSink,
    ) -> Result<(), String>;
    /// Whether derivations whose fetch failed may be built instead (`--fallback`; the
    /// substituter says so to the user).
    fn fall_back(&self) -> bool;
}

/// What realising the goals will do, decided without building or fetching
/// (`rocmx build --dry-run`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outlook {
    /// Derivations whose outputs are valid already, dependencies first.
    pub valid: Vec<StorePath>,
    /// Derivations whose outputs will be fetched.
    pub fetch: Vec<StorePath>,
    /// Derivations that will be built, dependencies first.
    pub build: Vec<StorePath>,
    /// Those of `build` that wait for an input to be built: they may yet be found
    /// (realised or in a cache) once it is.
    pub waiting: BTreeSet<StorePath>,
    /// The paths fetching downloads (the outputs of `fetch` and their closures).
    pub downloads: Vec<Download>,
}

/// What will happen to one derivation.
#[derive(Debug, Clone)]
enum Decision {
    /// Its outputs are valid.
    Valid(BTreeMap<String, StorePath>),
    /// Its outputs can be fetched.
    Fetch(Option<String>, Found),
    /// It must be built; `true` when it waits for an input to be built.
    Build(bool),
}

/// One derivation to fetch: the derivation, its key, what was found.
type Item = (StorePath, Option<String>, Found);

/// Per item fetched, its outputs when they are all valid now; and what went wrong.
type Fetched = (Vec<Option<BTreeMap<String, StorePath>>>, Option<String>);

impl Realiser<'_> {
    /// What realising `goals` will do (see [`Outlook`]).
    pub fn outlook(&mut self, goals: &[StorePath]) -> Result<Outlook, BuildError> {
        let mut graph: DiGraph<Node, ()> = DiGraph::new();
        let mut index: HashMap<StorePath, NodeIndex> = HashMap::new();
        self.plan(goals, &mut graph, &mut index);
        if let Some(first) = self.failed_list.first().cloned() {
            if let Some(e) = self.errors.remove(&first) {
                return Err(e);
            }
        }
        let order =
            petgraph::algo::toposort(&graph, None).map_err(|c| BuildError::BadDerivation {
                drv: graph[c.node_id()].drv.clone(),
                reason: "it depends on itself".into(),
            })?;
        let goal_nodes: Vec<NodeIndex> =
            goals.iter().filter_map(|g| index.get(g)).copied().collect();
        let decided = self.decide(&graph, &order, &index, &HashSet::new(), &mut HashMap::new());
        let needed = needed(&graph, &goal_nodes, &decided);
        let mut o = Outlook::default();
        let mut fetch_paths = Vec::new();
        for n in order.iter().filter(|n| needed.contains(n)) {
            let drv = graph[*n].drv.clone();
            match &decided[n] {
                Decision::Valid(_) => o.valid.push(drv),
                Decision::Fetch(_, f) => {
                    fetch_paths.extend(f.outputs.values().cloned());
                    o.fetch.push(drv);
                }
                Decision::Build(waiting) => {
                    if *waiting {
                        o.waiting.insert(drv.clone());
                    }
                    o.build.push(drv);
                }
            }
        }
        // Goals realised in an earlier run are not in the graph.
        for g in goals {
            if !index.contains_key(g) && self.done.contains_key(g) && !o.valid.contains(g) {
                o.valid.push(g.clone());
            }
        }
        if let Some(sub) = self.opts.substituter.clone() {
            if !fetch_paths.is_empty() {
                o.downloads = sub.plan(self.store, &fetch_paths).map_err(|reason| {
                    BuildError::Substitution {
                        drv: o.fetch[0].clone(),
                        reason,
                    }
                })?;
            }
        }
        Ok(o)
    }

    /// Before the first build: decides, fetches what can be fetched, and gives the
    /// graph of what is left to do (the needed derivations). Emits
    /// [`Event::Planned`].
    pub(super) fn substitute_ahead(
        &mut self,
        graph: DiGraph<Node, ()>,
        index: &HashMap<StorePath, NodeIndex>,
        order: &[NodeIndex],
        goals: &[StorePath],
    ) -> DiGraph<Node, ()> {
        let goal_nodes: Vec<NodeIndex> =
            goals.iter().filter_map(|g| index.get(g)).copied().collect();
        let mut excluded: HashSet<NodeIndex> = HashSet::new();
        let mut memo: HashMap<String, Option<Found>> = HashMap::new();
        let needed = loop {
            let decided = self.decide(&graph, order, index, &excluded, &mut memo);
            let needed = needed(&graph, &goal_nodes, &decided);
            let planned: Vec<StorePath> = order
                .iter()
                .filter(|n| needed.contains(n))
                .map(|n| graph[*n].drv.clone())
                .collect();
            self.events.event(&Event::Planned { drvs: planned });
            for n in order.iter().filter(|n| needed.contains(n)) {
                if let Decision::Valid(outputs) = &decided[n] {
                    let drv = graph[*n].drv.clone();
                    if !self.done.contains_key(&drv) {
                        self.realised_without_building(&drv, outputs.clone());
                    }
                }
            }
            let items: Vec<(NodeIndex, Item)> = order
                .iter()
                .filter(|n| needed.contains(n) && !self.done.contains_key(&graph[**n].drv))
                .filter_map(|n| match &decided[n] {
                    Decision::Fetch(key, f) => {
                        Some((*n, (graph[*n].drv.clone(), key.clone(), f.clone())))
                    }
                    _ => None,
                })
                .collect();
            if items.is_empty() {
                break needed;
            }
            let (nodes, items): (Vec<NodeIndex>, Vec<Item>) = items.into_iter().unzip();
            let (results, error) = self.fetch_items(&items);
            let mut failed = Vec::new();
            for (n, r) in nodes.into_iter().zip(results) {
                match r {
                    Some(outputs) => self.realised_without_building(&graph[n].drv, outputs),
                    None => failed.push(n),
                }
            }
            if failed.is_empty() {
                break needed;
            }
            let fall_back = self
                .opts
                .substituter
                .as_ref()
                .is_some_and(|s| s.fall_back());
            if fall_back {
                excluded.extend(failed);
                continue;
            }
            let reason = format!(
                "{}; pass --fallback to build it instead",
                error.unwrap_or_else(|| "its outputs could not be fetched".into())
            );
            for n in failed {
                let e = BuildError::Substitution {
                    drv: graph[n].drv.clone(),
                    reason: reason.clone(),
                };
                self.fail(&graph, n, e);
            }
            break needed;
        };
        graph.filter_map(
            |n, node| needed.contains(&n).then(|| node.clone()),
            |_, _| Some(()),
        )
    }

    /// Records `drv` as realised by outputs that are valid now: its derivation outputs,
    /// [`Event::Cached`], done.
    fn realised_without_building(&mut self, drv: &StorePath, outputs: BTreeMap<String, StorePath>) {
        for (o, p) in &outputs {
            // Only a cache of the mapping (`rocmx derivation show`): a run goes on
            // without it.
            let _ = self.store.add_derivation_output(drv, o, p);
        }
        self.events.event(&Event::Cached {
            drv: drv.clone(),
            outputs: outputs.clone(),
        });
        self.complete(drv, outputs, false);
    }

    /// The substituter's outputs for the resolved derivation `key` of `drv` (whose
    /// inputs were just realised), fetched; `None` to build it.
    pub(super) fn substitute_one(
        &mut self,
        drv: &StorePath,
        key: &str,
        d: &rocmx_store::Derivation,
    ) -> Result<Option<BTreeMap<String, StorePath>>, BuildError> {
        let Some(sub) = self.opts.substituter.clone() else {
            return Ok(None);
        };
        let q = Query {
            key: Some(key.to_string()),
            outputs: outputs_of(d),
        };
        let Some(found) = sub.query(std::slice::from_ref(&q)).pop().flatten() else {
            return Ok(None);
        };
        let (mut results, error) = self.fetch_items(&[(drv.clone(), Some(key.to_string()), found)]);
        match results.pop().flatten() {
            Some(outputs) => Ok(Some(outputs)),
            None if sub.fall_back() => Ok(None),
            None => Err(BuildError::Substitution {
                drv: drv.clone(),
                reason: format!(
                    "{}; pass --fallback to build it instead",
                    error.unwrap_or_else(|| "its outputs could not be fetched".into())
                ),
            }),
        }
    }

    /// Fetches the outputs of `items` (one plan, one [`Event::Fetching`]) and records
    /// the realisations of those whose outputs are all valid afterwards: their outputs,
    /// or `None`, in order; and what went wrong, if anything did.
    fn fetch_items(&mut self, items: &[Item]) -> Fetched {
        let Some(sub) = self.opts.substituter.clone() else {
            return (vec![None; items.len()], None);
        };
        let mut paths: Vec<StorePath> = Vec::new();
        for (_, _, f) in items {
            paths.extend(f.outputs.values().cloned());
        }
        paths.sort();
        paths.dedup();
        let mut errors: Vec<String> = Vec::new();
        for p in &paths {
            if let Err(e) = self.temp_root(p) {
                errors.push(e.to_string());
            }
        }
        // One plan for everything; when it fails, one per derivation, so that only
        // those that cannot be delivered are left out.
        let mut downloads: Vec<Download> = match sub.plan(self.store, &paths) {
            Ok(d) => d,
            Err(e) => {
                errors.push(e);
                let mut all = Vec::new();
                for (_, _, f) in items {
                    let own: Vec<StorePath> = f.outputs.values().cloned().collect();
                    if let Ok(d) = sub.plan(self.store, &own) {
                        all.extend(d);
                    }
                }
                all
            }
        };
        let mut seen = HashSet::new();
        downloads.retain(|d| seen.insert(d.path.clone()));
        if !downloads.is_empty() {
            self.events.event(&Event::Fetching {
                paths: downloads.iter().map(|d| d.path.clone()).collect(),
                download: downloads.iter().map(Download::bytes).sum(),
                unpacked: downloads.iter().map(|d| d.nar_size).sum(),
            });
            if let Err(e) = sub.fetch(self.store, &downloads, self.events.as_ref()) {
                errors.push(e);
            }
        }
        let mut results = Vec::new();
        for (drv, key, f) in items {
            let valid = f
                .outputs
                .values()
                .all(|p| self.store.is_valid(p).unwrap_or(false));
            if !valid {
                results.push(None);
                continue;
            }
            if let Some(key) = key {
                let mut recorded = true;
                for (o, p) in &f.outputs {
                    let sigs = f.signatures.get(o).cloned().unwrap_or_default();
                    if let Err(e) = self.store.add_realisation(key, o, p, &sigs) {
                        errors.push(format!("recording the realisation of {drv}: {e}"));
                        recorded = false;
                    }
                }
                if !recorded {
                    results.push(None);
                    continue;
                }
            }
            self.substituted.push(drv.clone());
            results.push(Some(f.outputs.clone()));
        }
        let error = (!errors.is_empty()).then(|| errors.join("; "));
        (results, error)
    }

    /// Decides every node of `order` (see the module documentation); `excluded` nodes
    /// are built. `memo` keeps the substituter's answers between calls of one run.
    fn decide(
        &mut self,
        graph: &DiGraph<Node, ()>,
        order: &[NodeIndex],
        index: &HashMap<StorePath, NodeIndex>,
        excluded: &HashSet<NodeIndex>,
        memo: &mut HashMap<String, Option<Found>>,
    ) -> HashMap<NodeIndex, Decision> {
        let mut decided: HashMap<NodeIndex, Decision> = HashMap::new();
        let sub = self.opts.substituter.clone();
        loop {
            let mut wave: Vec<(NodeIndex, Query, String)> = Vec::new();
            let mut progressed = false;
            for &n in order {
                if decided.contains_key(&n) {
                    continue;
                }
                let node = &graph[n];
                if let Some(r) = self.done.get(&node.drv).filter(|_| !node.check) {
                    decided.insert(n, Decision::Valid(r.outputs.clone()));
                    progressed = true;
                    continue;
                }
                if node.check
                    || self.opts.rebuild
                    || excluded.contains(&n)
                    || self.failed.contains_key(&node.drv)
                {
                    decided.insert(n, Decision::Build(false));
                    progressed = true;
                    continue;
                }
                let d = &node.d;
                let all_fixed = d.outputs.values().all(|o| o.path().is_some());
                let key = if all_fixed {
                    None
                } else {
                    match self.key_from_decisions(node, index, &decided) {
                        Inputs::NotYet => continue,
                        Inputs::Waiting => {
                            decided.insert(n, Decision::Build(true));
                            progressed = true;
                            continue;
                        }
                        Inputs::Key(None) => {
                            // Resolving fails: the scheduler reports why.
                            decided.insert(n, Decision::Build(false));
                            progressed = true;
                            continue;
                        }
                        Inputs::Key(Some(key)) => {
                            if let Ok(Some(outputs)) = self.lookup(&key, d) {
                                decided.insert(n, Decision::Valid(outputs));
                                progressed = true;
                                continue;
                            }
                            Some(key)
                        }
                    }
                };
                let memo_key = key.clone().unwrap_or_else(|| node.drv.to_string());
                if let Some(answer) = memo.get(&memo_key) {
                    decided.insert(n, decision(key, answer.clone()));
                    progressed = true;
                    continue;
                }
                if sub.is_none() {
                    decided.insert(n, Decision::Build(false));
                    progressed = true;
                    continue;
                }
                let q = Query {
                    key,
                    outputs: outputs_of(d),
                };
                wave.push((n, q, memo_key));
            }
            if wave.is_empty() {
                if progressed {
                    continue;
                }
                break;
            }
            let queries: Vec<Query> = wave.iter().map(|(_, q, _)| q.clone()).collect();
            let answers = match &sub {
                Some(s) => s.query(&queries),
                None => vec![None; queries.len()],
            };
            for ((n, q, memo_key), a) in wave.into_iter().zip(answers) {
                memo.insert(memo_key, a.clone());
                decided.insert(n, decision(q.key, a));
            }
        }
        // Anything left depends on something outside the graph that is not realised.
        for &n in order {
            decided.entry(n).or_insert(Decision::Build(true));
        }
        decided
    }

    /// The resolved key of `node` from its inputs' decisions.
    fn key_from_decisions(
        &self,
        node: &Node,
        index: &HashMap<StorePath, NodeIndex>,
        decided: &HashMap<NodeIndex, Decision>,
    ) -> Inputs {
        let mut inputs = BTreeMap::new();
        for input in node.d.input_drvs.keys() {
            let outputs = if let Some(r) = self.done.get(input) {
                r.outputs.clone()
            } else if let Some(m) = index.get(input) {
                match decided.get(m) {
                    None => return Inputs::NotYet,
                    Some(Decision::Valid(o)) => o.clone(),
                    Some(Decision::Fetch(_, f)) => f.outputs.clone(),
                    Some(Decision::Build(_)) => return Inputs::Waiting,
                }
            } else {
                return Inputs::Waiting;
            };
            let name = self
                .drvs
                .get(input)
                .map(|d| drv_name(d, input))
                .unwrap_or_default();
            inputs.insert(input.clone(), ResolvedInput { name, outputs });
        }
        Inputs::Key(
            resolve::resolve(&node.d, &inputs)
                .ok()
                .map(|r| resolve::resolved_hash(&r)),
        )
    }
}

/// Whether a derivation's key can be computed yet.
enum Inputs {
    /// An input is not decided yet.
    NotYet,
    /// An input must be built first.
    Waiting,
    /// The key (`None`: resolving failed).
    Key(Option<String>),
}

fn decision(key: Option<String>, answer: Option<Found>) -> Decision {
    match answer {
        Some(f) => Decision::Fetch(key, f),
        None => Decision::Build(false),
    }
}

/// Each output of `d`, with its path when it is fixed.
fn outputs_of(d: &rocmx_store::Derivation) -> Vec<(String, Option<StorePath>)> {
    d.outputs
        .iter()
        .map(|(o, spec)| (o.clone(), spec.path().cloned()))
        .collect()
}

/// The nodes the goals need: a goal, and every input of a needed node to be built.
fn needed(
    graph: &DiGraph<Node, ()>,
    goals: &[NodeIndex],
    decided: &HashMap<NodeIndex, Decision>,
) -> HashSet<NodeIndex> {
    let mut needed = HashSet::new();
    let mut stack: Vec<NodeIndex> = goals.to_vec();
    while let Some(n) = stack.pop() {
        if !needed.insert(n) {
            continue;
        }
        if matches!(decided.get(&n), Some(Decision::Build(_)) | None) {
            stack.extend(graph.neighbors_directed(n, Direction::Incoming));
        }
    }
    needed
}
