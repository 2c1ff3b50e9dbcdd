//! Planning a run: reading the goals' closure of derivations into the scheduler's DAG.
//!
//! Owns: [`Realiser::plan`] (the DAG, edges input → dependent), reading and parsing
//! `.drv` files, and the cutoff of fixed-output derivations whose outputs are all
//! valid ([`valid_fixed_outputs`]): they are done without reading their inputs.
//!
//! Must not: build or resolve anything (the scheduler in [`super`] does). Every path it
//! relies on is temp-rooted before its validity is checked, so that a collector running
//! meanwhile cannot delete it after the check.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs;
use std::sync::Arc;

use petgraph::graph::{DiGraph, NodeIndex};
use rocmx_store::{Derivation, LocalStore, StoreError, StorePath};

use super::{io_err, BuildError, Node, Realiser};

impl Realiser<'_> {
    /// Reads the closure of `goals` into `graph` (edges input → dependent). Valid fixed
    /// outputs are realised at once, without reading their inputs; derivations that
    /// cannot be read fail at once.
    pub(super) fn plan(
        &mut self,
        goals: &[StorePath],
        graph: &mut DiGraph<Node, ()>,
        index: &mut HashMap<StorePath, NodeIndex>,
    ) {
        self.holding_gc_lock(|r| r.read_graph(goals, graph, index));
    }

    /// [`Self::plan`], under the GC lock.
    fn read_graph(
        &mut self,
        goals: &[StorePath],
        graph: &mut DiGraph<Node, ()>,
        index: &mut HashMap<StorePath, NodeIndex>,
    ) {
        let goal_set: HashSet<&StorePath> = goals.iter().collect();
        // (derivation, the dependent that needs it)
        let mut stack: Vec<(StorePath, Option<NodeIndex>)> =
            goals.iter().rev().map(|g| (g.clone(), None)).collect();
        while let Some((p, dependent)) = stack.pop() {
            if let Some(&n) = index.get(&p) {
                if let Some(dep) = dependent {
                    graph.update_edge(n, dep, ());
                }
                continue;
            }
            let check = self.opts.check && goal_set.contains(&p);
            if !check && (self.done.contains_key(&p) || self.failed.contains_key(&p)) {
                // From an earlier run of this realiser: an input that is a known node
                // of nothing; dependents look it up in `done`/`failed` directly.
                if let Some(root) = self.failed.get(&p).cloned() {
                    if let Some(dep) = dependent {
                        // The dependent is skipped once it is in the graph.
                        let dd = graph[dep].drv.clone();
                        self.failed.entry(dd).or_insert(root);
                    }
                }
                continue;
            }
            let d = match self.read_drv(&p) {
                Ok(d) => d,
                Err(e) => {
                    let n = graph.add_node(Node {
                        drv: p.clone(),
                        d: Arc::new(Derivation::default()),
                        check,
                    });
                    index.insert(p.clone(), n);
                    if let Some(dep) = dependent {
                        graph.add_edge(n, dep, ());
                    }
                    self.fail(graph, n, e);
                    continue;
                }
            };
            let n = graph.add_node(Node {
                drv: p.clone(),
                d: d.clone(),
                check,
            });
            index.insert(p.clone(), n);
            if let Some(dep) = dependent {
                graph.add_edge(n, dep, ());
            }
            if !self.opts.rebuild && !check {
                match self.valid_fixed(&d) {
                    Ok(Some(outputs)) => {
                        self.complete(&p, outputs, false);
                        continue;
                    }
                    Ok(None) => {}
                    Err(e) => {
                        self.fail(graph, n, e);
                        continue;
                    }
                }
            }
            for input in d.input_drvs.keys().rev() {
                stack.push((input.clone(), Some(n)));
            }
        }
    }

    pub(super) fn read_drv(&mut self, drv: &StorePath) -> Result<Arc<Derivation>, BuildError> {
        if let Some(d) = self.drvs.get(drv) {
            return Ok(d.clone());
        }
        let bad = |reason: String| BuildError::BadDerivation {
            drv: drv.clone(),
            reason,
        };
        if !drv.is_derivation() {
            return Err(bad(
                "not a derivation (its name does not end in .drv)".into()
            ));
        }
        // Rooted first: a collector cannot delete it between the check and the read.
        self.temp_root(drv)?;
        if !self.store.is_valid(drv)? {
            return Err(bad("not valid in the store".into()));
        }
        let real = self.store.real_path(drv);
        let text = fs::read_to_string(&real).map_err(io_err("reading", &real))?;
        let d = Arc::new(Derivation::parse(&text).map_err(|e| bad(e.to_string()))?);
        self.drvs.insert(drv.clone(), d.clone());
        Ok(d)
    }

    /// The outputs, when every output is fixed and valid (then rooted: each is rooted
    /// before it is checked, so that a collector cannot delete it after the check).
    fn valid_fixed(
        &mut self,
        d: &Derivation,
    ) -> Result<Option<BTreeMap<String, StorePath>>, BuildError> {
        if d.outputs.is_empty() || d.outputs.values().any(|o| o.path().is_none()) {
            return Ok(None);
        }
        for p in d.outputs.values().filter_map(|o| o.path()) {
            self.temp_root(p)?;
        }
        Ok(valid_fixed_outputs(self.store, d)?)
    }
}

/// The outputs of `d` when it has some and they are all fixed and valid: such a
/// derivation needs nothing built, not even its inputs.
pub fn valid_fixed_outputs(
    store: &LocalStore,
    d: &Derivation,
) -> Result<Option<BTreeMap<String, StorePath>>, StoreError> {
    let mut out = BTreeMap::new();
    for (o, spec) in &d.outputs {
        match spec.path() {
            Some(p) if store.is_valid(p)? => {
                out.insert(o.clone(), p.clone());
            }
            _ => return Ok(None),
        }
    }
    Ok((!out.is_empty()).then_some(out))
}
