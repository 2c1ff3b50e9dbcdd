//! One build through an executor ([`crate::executor`]): the realiser's side.
//!
//! Owns: handing a prepared [`Job`] to an [`Executor`], keeping its log as a local
//! build's is kept ([`log_path`], so `rocmx log` finds it), reporting its remote states
//! as [`Event::Remote`], and, once the executor brought the outputs back, checking them
//! (every output of the derivation, valid here, fixed ones at their fixed path) and
//! recording the realisation and the derivation's outputs.
//!
//! Must not: know how or where the executor builds.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use rocmx_store::{DerivationOutput, StorePath};

use super::error::RemoteFailed;
use super::job::{Ctx, Job};
use super::log::{log_path, LogSink};
use super::{io_err, BuildError};
use crate::events::Event;
use crate::executor::{Executor, RemoteBuild};

/// Builds `job` through `exec`; gives its outputs, recorded.
pub(super) fn run(
    ctx: &Ctx<'_>,
    exec: &dyn Executor,
    job: Job,
) -> Result<BTreeMap<String, StorePath>, BuildError> {
    let store = ctx.store;
    let drv = &job.drv;
    let log_dest = log_path(store, drv);
    let log_dir = log_dest.parent().unwrap_or(Path::new("/")).to_path_buf();
    fs::create_dir_all(&log_dir).map_err(io_err("creating", &log_dir))?;
    // Next to the stored logs: a remote build has no local build directory.
    let log_tmp = log_dir.join(format!(
        ".{}-{}.remote",
        drv.hash_part(),
        std::process::id()
    ));
    let mut sink = LogSink::create(drv, &log_tmp, ctx.events.clone())?;
    let b = RemoteBuild {
        drv,
        name: &job.name,
        resolved: &job.resolved,
        key: &job.key,
        closure: &job.closure,
        cores: ctx.opts.cores,
        timeout: ctx.opts.timeout,
    };
    let events = ctx.events.clone();
    let report = |id: &str, state| {
        events.event(&Event::Remote {
            drv: drv.clone(),
            executor: exec.name().to_string(),
            job: id.to_string(),
            state,
        })
    };
    let result = exec.build(store, &b, &mut sink, &report);
    let log_tail = sink.finish(&log_tmp, &log_dest)?;
    let fail = |job_id: Option<String>, status: String, builder_failed: bool| BuildError::Remote {
        drv: drv.clone(),
        remote: Box::new(RemoteFailed {
            executor: exec.name().to_string(),
            job: job_id,
            status,
            log_tail: log_tail.clone(),
            builder_failed,
        }),
    };
    let got = result.map_err(|f| fail(f.job, f.status, f.builder_failed))?;

    // Every output, valid here; a fixed one where the derivation says.
    let mut result = BTreeMap::new();
    for (name, out) in &job.resolved.outputs {
        let Some(path) = got.outputs.get(name) else {
            return Err(fail(
                None,
                format!("the executor brought back no output '{name}'"),
                false,
            ));
        };
        if let DerivationOutput::Fixed { path: fixed, .. } = out {
            if fixed != path {
                return Err(fail(
                    None,
                    format!("output '{name}' came back as {path}, but it is fixed at {fixed}"),
                    false,
                ));
            }
        }
        if !store.is_valid(path)? {
            return Err(fail(
                None,
                format!("output '{name}' ({path}) is not valid here after the build"),
                false,
            ));
        }
        store.add_temp_root(path)?;
        result.insert(name.clone(), path.clone());
    }
    for (name, path) in &result {
        let floating = !matches!(job.resolved.outputs[name], DerivationOutput::Fixed { .. });
        let sigs = got.signatures.get(name).cloned().unwrap_or_default();
        store.record_built_output(drv, &job.key, name, path, &sigs, floating)?;
    }
    Ok(result)
}
