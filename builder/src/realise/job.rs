//! One build: run the builder of a resolved derivation, post-process its outputs and
//! place them at their final names (or, for `--check`, compare them with the registered
//! ones); the scheduler registers what was placed ([`Finished::placed`]).
//!
//! Owns: [`Job`] (everything a build needs, owned, so that it can run on a worker
//! thread) and [`run`]: the private build directory (its layout and reuse are
//! [`builddir`]'s), the log, the sandbox or built-in builder, the QA checks, and what
//! follows in [`finish`]: post-processing of every output ([`crate::output`]), placing
//! the outputs with the records their registration writes (realisation, derivation
//! output), and the `--check` comparison.
//!
//! Must not: look at other derivations or decide what to build (the scheduler in
//! [`super`] does); touch anything but its own build directory, its log and, through
//! the store's API, its outputs.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rocmx_store::derivation::output_path_name;
use rocmx_store::local::Placed;
use rocmx_store::{Derivation, DerivationOutput, LocalStore, StorePath};

use super::log::{log_path, LogSink};
use super::{io_err, BuildError, BuildOptions};
use crate::events::EventSink;
use crate::output::OutputError;
use crate::resolve;
use crate::sandbox::{self, SandboxError, SandboxSpec};
pub(super) use builddir::DirPool;
use builddir::{BuildDir, RW, WORK_BUILD, WORK_STAGE};
use finish::{finish_fixed, finish_floating};

mod builddir;
mod finish;

/// Everything one build needs. Built by the scheduler on its own thread; run anywhere.
pub(super) struct Job {
    /// The derivation as written.
    pub drv: StorePath,
    /// Its `name`.
    pub name: String,
    /// The resolved derivation (inputs replaced by realised paths).
    pub resolved: Derivation,
    /// `hex(BLAKE3(resolved ATerm))`: the realisation key.
    pub key: String,
    /// The closure of the resolved input sources (already temp-rooted).
    pub closure: BTreeSet<StorePath>,
    /// `--check`: the registered outputs to compare the new build with.
    pub check: Option<BTreeMap<String, StorePath>>,
}

/// What a finished build gives.
pub(super) struct Finished {
    /// Each output's store path.
    pub outputs: BTreeMap<String, StorePath>,
    /// The outputs at their final names, registered only once
    /// [`LocalStore::commit_built`] is given this (`None`: nothing to register, or
    /// registered already).
    pub placed: Option<Placed>,
}

impl Finished {
    /// A result with nothing left to register.
    pub(super) fn registered(outputs: BTreeMap<String, StorePath>) -> Finished {
        Finished {
            outputs,
            placed: None,
        }
    }
}

/// What a job shares with the scheduler.
#[derive(Clone)]
pub(super) struct Ctx<'a> {
    pub store: &'a LocalStore,
    pub opts: &'a BuildOptions,
    pub events: Arc<dyn EventSink>,
    pub pool: &'a DirPool,
}

/// One output during the build.
struct Out {
    name: String,
    /// Its path inside the sandbox (scratch for floating, final for fixed).
    inside: StorePath,
    /// Where the sandbox leaves it on the host.
    host: PathBuf,
}

/// Runs the job; gives each output's store path and, unless `--check`, the placed outputs
/// for the scheduler to commit. See the module documentation.
pub(super) fn run(ctx: &Ctx<'_>, job: Job) -> Result<Finished, BuildError> {
    let drv = &job.drv;
    let bad = |reason: String| BuildError::BadDerivation {
        drv: drv.clone(),
        reason,
    };
    let resolved = &job.resolved;
    if !resolved.builder.starts_with("builtin:") {
        // A sandboxed build: the zygote (if the binary started one) makes an init in
        // fresh namespaces while this thread lays out the build directory and the plan
        // (for the next builds it has one ready already).
        crate::sandbox::zygote::prepare();
    }
    let fixed = resolved
        .outputs
        .values()
        .any(|o| matches!(o, DerivationOutput::Fixed { .. }));
    if fixed && resolved.outputs.len() != 1 {
        return Err(bad(
            "a fixed-output derivation must have exactly one output".into(),
        ));
    }

    // Where each output is written inside the sandbox.
    let mut outs = Vec::new();
    let mut scratch = BTreeMap::new();
    for (o, spec) in &resolved.outputs {
        let out_name = output_path_name(&job.name, o);
        let p = match spec {
            DerivationOutput::Floating { .. } => resolve::scratch_path(&job.key, o, &out_name)
                .map_err(|e| bad(format!("output '{o}': {e}")))?,
            DerivationOutput::Fixed { path, .. } => path.clone(),
        };
        scratch.insert(o.clone(), p.clone());
        outs.push((o.clone(), p));
    }
    let mut run_drv = resolved.clone();
    resolve::substitute(&mut run_drv, &resolve::output_pairs(&scratch));

    // The private build directory.
    let store = ctx.store;
    let base = ctx.pool.take(&store.state_dir().join("builds"))?;
    let mut dir = BuildDir {
        path: base.clone(),
        keep: false,
        pool: ctx.pool,
    };
    let build_dir = base.join(RW).join("build");
    let outs: Vec<Out> = outs
        .into_iter()
        .enumerate()
        .map(|(i, (name, inside))| Out {
            name,
            inside,
            // Next to the staging directory, as the sandbox asks.
            host: base.join(RW).join(format!("out{i}")),
        })
        .collect();

    // The log.
    let log_dest = log_path(store, drv);
    let log_dir = log_dest.parent().unwrap_or(Path::new("/")).to_path_buf();
    fs::create_dir_all(&log_dir).map_err(io_err("creating", &log_dir))?;
    let log_tmp = base.join("log.zst");
    let sink = LogSink::create(drv, &log_tmp, ctx.events.clone())?;

    // Run the builder.
    let status = if let Some(kind) = resolved.builder.strip_prefix("builtin:") {
        run_builtin(ctx, &job, kind, &run_drv, &outs, sink.clone())?
    } else {
        run_sandboxed(ctx, &job, &run_drv, &outs, &build_dir, fixed, sink.clone())?
    };
    let log_tail = sink.finish(&log_tmp, &log_dest)?;
    let status = status
        .or_else(|| {
            outs.iter()
                .find(|o| fs::symlink_metadata(&o.host).is_err())
                .map(|o| format!("builder did not produce output '{}'", o.name))
        })
        .or_else(|| qa_status(&run_drv, &outs));
    if let Some(mut status) = status {
        if ctx.opts.keep_failed {
            dir.keep = true;
            // Renamed out of the `<pid>-<n>` pattern, which stale-directory cleanup
            // deletes; kept directories stay until the user removes them.
            let kept = base.with_file_name(format!(
                "kept-{}-{}",
                drv.hash_part(),
                base.file_name()
                    .map(|n| n.to_string_lossy())
                    .unwrap_or_default()
            ));
            let shown = match fs::rename(&base, &kept) {
                Ok(()) => kept,
                Err(_) => base.clone(),
            };
            // What the builder saw as /build.
            let build = shown.join(RW).join("build");
            status.push_str(&format!(" (build directory kept at {})", build.display()));
        }
        return Err(BuildError::Failed {
            drv: drv.clone(),
            status,
            log_tail,
        });
    }

    if fixed {
        return finish_fixed(ctx, &job, &outs[0]);
    }
    finish_floating(ctx, &job, &outs)
}

/// The QA checks ([`crate::qa`]) of a derivation that asks for them
/// (`rocmxQa = "1"`): the failure status naming every finding, if any.
fn qa_status(drv: &Derivation, outs: &[Out]) -> Option<String> {
    if drv.env.get("rocmxQa").map(String::as_str) != Some("1") {
        return None;
    }
    let waived = match drv.env.get("rocmxQaExceptions").filter(|s| !s.is_empty()) {
        Some(j) => match crate::qa::parse_exceptions(j) {
            Ok(w) => w,
            Err(e) => return Some(e),
        },
        None => BTreeMap::new(),
    };
    let mut findings = Vec::new();
    for o in outs {
        for f in crate::qa::check_output(
            &o.host,
            &o.inside.to_absolute(),
            rocmx_store::STORE_DIR,
            &waived,
        ) {
            let prefix = if outs.len() > 1 {
                format!("output '{}': ", o.name)
            } else {
                String::new()
            };
            findings.push(format!("{prefix}{f}"));
        }
    }
    if findings.is_empty() {
        None
    } else {
        Some(findings.join("; "))
    }
}

/// Runs a `builtin:` builder in this process, outside the sandbox: `fetchurl`
/// only for fixed-output derivations (whose result is checked against the
/// declared hash), and the builders the binary registered
/// ([`crate::builtins`]), which run rocmx's own code on store inputs. Gives
/// the failure status, if any.
fn run_builtin(
    ctx: &Ctx<'_>,
    job: &Job,
    kind: &str,
    run_drv: &Derivation,
    outs: &[Out],
    mut log: LogSink,
) -> Result<Option<String>, BuildError> {
    let bad = |reason: String| BuildError::BadDerivation {
        drv: job.drv.clone(),
        reason,
    };
    match kind {
        "fetchurl" => {
            let [out] = outs else {
                return Err(bad("builtin:fetchurl has exactly one output".into()));
            };
            if !matches!(
                job.resolved.outputs.get(&out.name),
                Some(DerivationOutput::Fixed { .. })
            ) {
                return Err(bad(
                    "builtin:fetchurl may only build a fixed-output derivation (declare outputHash)"
                        .into(),
                ));
            }
            let req = crate::fetchurl::FetchRequest::from_env(&run_drv.env)
                .map_err(|e| bad(e.to_string()))?;
            let limits = ctx
                .opts
                .fetch_limits
                .within_build(ctx.opts.timeout, ctx.opts.max_silent);
            match crate::fetchurl::fetch(&req, &ctx.opts.mirrors, &limits, &out.host, &mut log) {
                Ok(_) => Ok(None),
                // `failureHint`: what the derivation's author says to do
                // when the source is gone (a pinned .deb, say).
                Err(e) => Ok(Some(match run_drv.env.get("failureHint") {
                    Some(h) if !h.is_empty() => format!("{e}; {h}"),
                    _ => e.to_string(),
                })),
            }
        }
        other => {
            let Some(b) = ctx.opts.builtins.get(other) else {
                let mut known = vec!["fetchurl"];
                known.extend(ctx.opts.builtins.names());
                return Err(bad(format!(
                    "builder 'builtin:{other}' is not implemented (rocmx knows builtin:{})",
                    known.join(", builtin:")
                )));
            };
            let outputs: BTreeMap<String, PathBuf> = outs
                .iter()
                .map(|o| (o.name.clone(), o.host.clone()))
                .collect();
            let physical_store = ctx.store.store_dir().to_path_buf();
            let bctx = crate::builtins::BuiltinContext {
                env: &run_drv.env,
                outputs: &outputs,
                store_dir: rocmx_store::STORE_DIR,
                physical_store: &physical_store,
                cores: ctx.opts.cores,
            };
            match b.build(&bctx, &mut log) {
                Ok(()) => Ok(None),
                Err(e) => Ok(Some(e)),
            }
        }
    }
}

/// Runs the builder in the sandbox. Gives the failure status, if any.
fn run_sandboxed(
    ctx: &Ctx<'_>,
    job: &Job,
    run_drv: &Derivation,
    outs: &[Out],
    build_dir: &Path,
    network: bool,
    log: LogSink,
) -> Result<Option<String>, BuildError> {
    let bad = |reason: String| BuildError::BadDerivation {
        drv: job.drv.clone(),
        reason,
    };
    let builder = PathBuf::from(&run_drv.builder);
    if !builder.is_absolute() {
        return Err(bad(format!(
            "builder '{}' is not an absolute path",
            run_drv.builder
        )));
    }
    let store = ctx.store;
    let rootfs = match crate::structured::string_attr(run_drv, "rootfs") {
        None => None,
        Some(r) => {
            let p = StorePath::from_absolute(&r).map_err(|e| bad(format!("rootfs '{r}': {e}")))?;
            if !job.closure.contains(&p) {
                return Err(bad(format!("rootfs '{r}' is not among its inputs")));
            }
            Some(store.real_path(&p))
        }
    };
    // Structured attributes and `exportReferencesGraph`: files in the build directory.
    let outputs = outs
        .iter()
        .map(|o| (o.name.clone(), o.inside.clone()))
        .collect();
    let env = crate::structured::prepare(run_drv, &outputs, &job.closure, store)
        .and_then(|p| p.write(build_dir).map(|()| p.env))
        .map_err(|e| match e {
            crate::structured::StructuredError::Io { path, source } => BuildError::Io {
                action: "writing",
                path,
                source,
            },
            e => bad(e.to_string()),
        })?;
    // Host root never builds as itself: each build leases an unprivileged id.
    let lease = if nix::unistd::geteuid().is_root() {
        Some(
            crate::ids::lease(store.state_dir(), &ctx.opts.build_ids).map_err(io_err(
                "leasing a build user id in",
                &store.state_dir().join("build-ids.lock"),
            ))?,
        )
    } else {
        None
    };
    // `<base>/rw/build` → `<base>`, which holds the overlays' work directories.
    let base = build_dir.parent().and_then(Path::parent);
    let spec = SandboxSpec {
        builder,
        args: run_drv.args.clone(),
        env,
        inputs: job
            .closure
            .iter()
            .map(|p| (store.real_path(p), PathBuf::from(p.to_absolute())))
            .collect(),
        outputs: outs
            .iter()
            .map(|o| (o.host.clone(), PathBuf::from(o.inside.to_absolute())))
            .collect(),
        build_dir: build_dir.to_path_buf(),
        staging: build_dir.parent().map(|rw| rw.join("stage")),
        work_dirs: base.map(|b| (b.join(WORK_BUILD), b.join(WORK_STAGE))),
        shared_work_dir: base.map(|b| b.join(WORK_BUILD)),
        rootfs,
        network,
        cores: ctx.opts.cores,
        timeout: ctx.opts.timeout,
        max_silent: ctx.opts.max_silent,
        log: Box::new(log),
        host_ids: lease.as_ref().map(|l| l.ids),
        limits: ctx.opts.limits,
        variant: ctx.opts.variant.clone(),
        held_until_reaped: lease.map(|l| Box::new(l) as Box<dyn Send>),
    };
    match sandbox::run(spec) {
        Ok(outcome) if outcome.status.success() => Ok(None),
        Ok(outcome) => Ok(Some(outcome.status.to_string())),
        Err(
            e @ (SandboxError::Timeout(_)
            | SandboxError::Silent(_)
            | SandboxError::TooManyProcesses(_)
            | SandboxError::DiskLimit { .. }),
        ) => Ok(Some(e.to_string())),
        // The output cannot be accepted (nested too deeply…): name the output.
        Err(SandboxError::Output { path, source }) => Err(BuildError::Output {
            drv: job.drv.clone(),
            output: outs
                .iter()
                .find(|o| o.host == path)
                .map(|o| o.name.clone())
                .unwrap_or_default(),
            source: Box::new(OutputError::Store(source.into())),
        }),
        Err(e) => Err(e.into()),
    }
}
