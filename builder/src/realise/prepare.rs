//! Preparing a ready derivation: what the scheduler does on its own thread before a
//! build.
//!
//! Owns: [`Realiser::prepare`] — checking that the derivation can be built on this
//! machine, resolving it against its inputs' outputs ([`crate::resolve`]: the key),
//! early cutoff (the realisations recorded under the key, [`Realiser::lookup`], then
//! the substituter), and, when it must be built, its input closure (rooted) and the
//! [`job::Job`]; the same lookup again once its build lock is taken
//! ([`Realiser::recheck`]).
//!
//! Must not: take build locks or start builds (the scheduler, [`super::execute`],
//! does); build anything.

use std::collections::BTreeMap;

use petgraph::graph::{DiGraph, NodeIndex};
use rocmx_store::{Derivation, StorePath};

use super::{drv_name, job, BuildError, Node, Realiser};
use crate::resolve::{self, ResolvedInput};

/// What preparing a ready derivation gave.
pub(super) enum Prepared {
    /// Realised without building.
    Cached(BTreeMap<String, StorePath>),
    /// It must be built.
    Build(Box<job::Job>),
    /// Not yet: it needs its inputs registered (see [`Realiser::prepare`]) and some
    /// placed outputs are not committed yet; prepared again after a commit.
    Later,
}

impl Realiser<'_> {
    /// Resolves a ready derivation and looks it up (see the module documentation).
    pub(super) fn prepare(
        &mut self,
        graph: &DiGraph<Node, ()>,
        n: NodeIndex,
    ) -> Result<Prepared, BuildError> {
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
    pub(super) fn recheck(
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

    /// The recorded realisations of every output under `key`, if all are there and valid
    /// (then rooted: each is rooted before its validity is checked, so that a collector
    /// running meanwhile cannot delete it after the check).
    pub(super) fn lookup(
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
