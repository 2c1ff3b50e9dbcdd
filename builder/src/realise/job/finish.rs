//! After the builder: a build's outputs checked, post-processed and placed at their
//! final names, or, for `--check`, compared with the registered ones.
//!
//! Owns: [`finish_fixed`] (the declared hash and no references; placing at the fixed
//! path), [`finish_floating`] (post-processing of every output, [`crate::output`]:
//! normalisation, references, the hash modulo self-references, the final path; placing
//! them in the order processed with the records their registration writes) and the
//! `--check` comparison (keeping the differing output with `--keep-failed`).
//!
//! Must not: run the builder or choose where the outputs are written (the job in
//! [`super`] does); register anything (the committer does, with what was placed).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::PathBuf;

use rocmx_store::derivation::output_path_name;
use rocmx_store::local::{BuiltOutput, BuiltPath};
use rocmx_store::tree::remove_tree;
use rocmx_store::{ContentAddress, DerivationOutput, StorePath};

use super::{Ctx, Finished, Job, Out};
use crate::output::{self, FloatingOutput, OutputError};
use crate::realise::{io_err, BuildError, CheckDifference};

fn out_err(drv: &StorePath, output: &str) -> impl FnOnce(OutputError) -> BuildError {
    let drv = drv.clone();
    let output = output.to_string();
    move |source| BuildError::Output {
        drv,
        output,
        source: Box::new(source),
    }
}

/// Checks and places the fixed output (or, for `--check`, only checks it).
pub(super) fn finish_fixed(ctx: &Ctx<'_>, job: &Job, out: &Out) -> Result<Finished, BuildError> {
    let drv = &job.drv;
    let Some(DerivationOutput::Fixed { method, hash, path }) = job.resolved.outputs.get(&out.name)
    else {
        unreachable!("finish_fixed is called for fixed outputs only");
    };
    let c = output::check_fixed(&out.host, *method, hash.algo(), &job.closure)
        .map_err(out_err(drv, &out.name))?;
    if c.actual != *hash {
        return Err(BuildError::HashMismatch {
            drv: drv.clone(),
            expected: hash.to_sri(),
            actual: c.actual.to_sri(),
        });
    }
    if !c.references.is_empty() {
        return Err(BuildError::IllegalReferences {
            drv: drv.clone(),
            refs: c.references.into_iter().collect(),
        });
    }
    let outputs: BTreeMap<String, StorePath> =
        [(out.name.clone(), path.clone())].into_iter().collect();
    if job.check.is_some() {
        return Ok(Finished::registered(outputs));
    }
    let none = BTreeSet::new();
    let placed = ctx.store.place_built(&[BuiltPath {
        scratch: Some(&out.host),
        path,
        refs: &none,
        nar_hash: c.nar_hash,
        nar_size: c.nar_size,
        deriver: Some(drv),
        ca: Some(&ContentAddress::Fixed {
            method: *method,
            hash: *hash,
        }),
        built: Some(BuiltOutput {
            drv,
            drv_hash: &job.key,
            output: &out.name,
            realise: false,
        }),
    }])?;
    Ok(Finished {
        outputs,
        placed: Some(placed),
    })
}

/// Post-processes, then places (or compares, for `--check`) the floating outputs.
pub(super) fn finish_floating(
    ctx: &Ctx<'_>,
    job: &Job,
    outs: &[Out],
) -> Result<Finished, BuildError> {
    let drv = &job.drv;
    let store = ctx.store;
    let check = job.check.as_ref();
    let floating: Vec<FloatingOutput> = outs
        .iter()
        .map(|o| FloatingOutput {
            output: o.name.clone(),
            dir: o.host.clone(),
            scratch: o.inside.clone(),
            name: output_path_name(&job.name, &o.name),
        })
        .collect();
    let processed = output::process_floating_set(&floating, &job.closure, |p| {
        // --check never reuses: it must look at what this build made.
        if check.is_some() {
            Ok(false)
        } else {
            store.is_valid(p)
        }
    })
    .map_err(|(o, e)| out_err(drv, &o)(e))?;

    if let Some(existing) = check {
        return compare(ctx, job, outs, &processed, existing).map(Finished::registered);
    }
    // In the order processed (an output after the siblings it refers to): one
    // transaction registers them in that order. An output valid already (`already`:
    // not rewritten, so not to be registered) keeps the registered content; its records
    // are written all the same (a rebuild that gave other bytes keeps the first
    // realisation).
    let host_of = |o: &str| {
        &outs
            .iter()
            .find(|x| x.name == o)
            .expect("processed outputs are the job's")
            .host
    };
    for (o, _, already) in &processed {
        if *already {
            // Left for the build directory's cleanup if it fails.
            let _ = remove_tree(host_of(o));
        }
    }
    let built: Vec<BuiltPath<'_>> = processed
        .iter()
        .map(|(o, p, already)| BuiltPath {
            scratch: (!already).then(|| host_of(o).as_path()),
            path: &p.path,
            refs: &p.references,
            nar_hash: p.nar_hash,
            nar_size: p.nar_size,
            deriver: Some(drv),
            ca: Some(&p.ca),
            built: Some(BuiltOutput {
                drv,
                drv_hash: &job.key,
                output: o,
                realise: true,
            }),
        })
        .collect();
    let placed = store.place_built(&built)?;
    Ok(Finished {
        outputs: processed.into_iter().map(|(o, p, _)| (o, p.path)).collect(),
        placed: Some(placed),
    })
}

/// `--check`: compares each rebuilt output with the registered one.
fn compare(
    ctx: &Ctx<'_>,
    job: &Job,
    outs: &[Out],
    processed: &[(String, output::Processed, bool)],
    existing: &BTreeMap<String, StorePath>,
) -> Result<BTreeMap<String, StorePath>, BuildError> {
    let drv = &job.drv;
    let store = ctx.store;
    let mut differing = Vec::new();
    for (o, p, _) in processed {
        let Some(old) = existing.get(o) else {
            continue;
        };
        if *old == p.path {
            continue;
        }
        let host = &outs
            .iter()
            .find(|x| &x.name == o)
            .expect("processed outputs are the job's")
            .host;
        // Self-references would differ only because the paths differ: write the old
        // path's hash into the new tree so that only real differences show.
        if p.self_reference {
            output::rewrite_tree(
                host,
                p.path.hash_part().as_bytes(),
                old.hash_part().as_bytes(),
            )
            .map_err(out_err(drv, o))?;
            rocmx_store::local::normalise_tree(host)
                .map_err(|e| out_err(drv, o)(OutputError::Store(e)))?;
        }
        let old_real = store.real_path(old);
        let diffs = crate::check::diff_trees(&old_real, host).map_err(|e| BuildError::Io {
            action: "comparing the outputs in",
            path: old_real.clone(),
            source: std::io::Error::other(e.to_string()),
        })?;
        let mut kept = None;
        if ctx.opts.keep_failed {
            let mut dest = old_real.clone().into_os_string();
            dest.push(".check");
            let dest = PathBuf::from(dest);
            if fs::symlink_metadata(&dest).is_ok() {
                remove_tree(&dest).map_err(|e| BuildError::Io {
                    action: "removing the previous checked output",
                    path: dest.clone(),
                    source: e.into(),
                })?;
            }
            fs::rename(host, &dest).map_err(io_err("keeping the checked output at", &dest))?;
            kept = Some(dest);
        }
        differing.push(CheckDifference {
            output: o.clone(),
            path: old.clone(),
            differences: diffs.iter().map(|d| d.to_string()).collect(),
            kept,
        });
    }
    if differing.is_empty() {
        Ok(existing.clone())
    } else {
        Err(BuildError::CheckMismatch {
            drv: drv.clone(),
            outputs: differing,
        })
    }
}
