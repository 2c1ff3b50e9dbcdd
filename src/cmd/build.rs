//! `rocmx build`: evaluate, realise the derivations found, link the results.
//!
//! ```text
//! rocmx build (--file FILE [ATTRPATH…] | --expr EXPR [ATTRPATH…] | FILE…)
//!     [--arg NAME EXPR] [--argstr NAME STR] [-A ATTRPATH] [-I PATH]
//!     [--dry-run] [--json] [--rebuild] [--keep-failed]
//!     [--no-link] [-o|--out-link NAME] [--print-out-paths]
//!     [-j|--max-jobs N] [--cores N] [-k|--keep-going] [--check]
//!     [--timeout SECS] [--max-silent-time SECS] [--option NAME VALUE]
//!     [-L] [--log-format bar|plain|json]
//! ```
//!
//! Owns: option handling (as `rocmx eval` does it: search path, auto-calling with
//! `--arg`/`--argstr`, attribute paths), finding the derivations in the value, calling
//! the realiser (`rocmx_builder::realise`), `result` links (indirect GC roots) and the
//! output forms (plain, `--print-out-paths`, `--json`, the `--dry-run` plan).
//!
//! Derivations in the value: a derivation (`type = "derivation"`) gives its `drvPath`
//! and all its outputs (`pkg.dev`, whose `outputName` is not the first output, gives
//! that output only); a list gives each of its
//! elements' derivations; a set that is not a derivation gives its attributes that are
//! derivations, in name order, as `nix-build` does.
//!
//! Exit codes, as Nix's ([`EXIT_CODES`], shown by `--help`; computed by [`exit_code`]).

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use super::common::{auto_args, auto_call, cwd, select, split_attr_path};
use super::evalopts::file_arg;
use super::progress::{LogFormat, Progress};
use rocmx_builder::realise::{BuildError, BuildOptions, Realised, Realiser};
use rocmx_lang::eval::{EResult, ErrorKind, EvalError};
use rocmx_lang::value::Attrs;
use rocmx_lang::{Evaluator, Value};
use rocmx_store::{LocalStore, StorePath};

use super::common::store_msg;
use super::fail::Fail;
use super::StoreOpt;
use crate::evalstore::LocalEvalStore;
use crate::flake::{parse_installable, FlakeOpts, Installable};
use rocmx_lang::flake::installable;
use rocmx_lang::flake::load::LockMode;
use rocmx_lang::flake::ParamValue;

mod dry_run;

/// The exit codes of `rocmx build`, Nix's (`nix-build`, `nix build`), for `--help`.
const EXIT_CODES: &str = "\
Exit codes (as Nix's):
    0  built, or nothing to do
    1  an evaluation error, or a failure that is not a build's: a derivation
       refused before it ran (malformed, for another system), a store or file
       error, a cache that failed to deliver, --check of something not built yet
    2  a bad command line
  100  a build failed
  101  a build timed out (--timeout, --max-silent-time)
  102  a fixed-output derivation gave another hash than the declared one
  104  --check found a difference (and no build failed)
Several kinds of failure add up as bits, as in Nix: 96 + 4 (a failure) + 1 (a
timeout) + 2 (a hash mismatch) + 8 (a --check difference); 103 is a timeout and a
hash mismatch, 108 a --check difference and a failed build.";

/// `rocmx build`'s arguments; [`EXIT_CODES`] follows the options in `--help`.
#[derive(Args, Debug)]
#[command(after_help = EXIT_CODES)]
pub struct BuildArgs {
    #[command(flatten)]
    pub(crate) installable: InstallableArgs,
    /// Print what would be built and what is already valid; build nothing.
    #[arg(long)]
    dry_run: bool,
    /// Print the result (or with --dry-run, the plan) as one JSON object.
    #[arg(long)]
    json: bool,
    /// Build the derivations again even when a realisation of them is recorded.
    #[arg(long)]
    rebuild: bool,
    /// Keep the build directory of a failed build.
    #[arg(long)]
    keep_failed: bool,
    /// Do not create `result` links.
    #[arg(long)]
    no_link: bool,
    /// Base name of the result links (default `result`): NAME, NAME-2, …, and
    /// NAME[-N]-OUTPUT for outputs other than `out`.
    #[arg(short = 'o', long = "out-link", value_name = "NAME")]
    out_link: Option<PathBuf>,
    /// Print the output paths (logical, /rocmx/store/…), one per line.
    #[arg(long)]
    print_out_paths: bool,
    /// Cores each build may use, exported as ROCMX_BUILD_CORES (default: all).
    #[arg(long, value_name = "N")]
    cores: Option<u32>,
    /// Kill a build that runs longer than SECS seconds (0: no limit; default 48 hours,
    /// or the `timeout` setting).
    #[arg(long, value_name = "SECS")]
    timeout: Option<u64>,
    /// Kill a build that prints nothing for SECS seconds (0: no limit; default 3600, or
    /// the `max-silent-time` setting).
    #[arg(long = "max-silent-time", value_name = "SECS")]
    max_silent_time: Option<u64>,
    /// Binary caches to substitute from, in order (white-space separated URLs; replaces
    /// the `substituters` setting).
    #[arg(long, value_name = "URLS")]
    substituters: Option<String>,
    /// Use no binary cache.
    #[arg(long)]
    offline: bool,
    /// When a cache that has an output fails to deliver it, build it instead of failing.
    #[arg(long)]
    fallback: bool,
    /// Print the build logs on standard error as they come, each line prefixed `name> `.
    #[arg(short = 'L', long = "print-build-logs")]
    print_build_logs: bool,
    /// Run at most N builds at once.
    #[arg(short = 'j', long = "max-jobs", value_name = "N", default_value_t = 1)]
    max_jobs: usize,
    /// After a failure, build everything that does not depend on it.
    #[arg(short = 'k', long = "keep-going")]
    keep_going: bool,
    /// Build the (already built) derivations again and compare the results: exit 104 and
    /// list the differing files when they differ.
    #[arg(long)]
    check: bool,
    /// Hand builds to a Slurm cluster: `slurm`, `slurm:PARTITION` or
    /// `slurm://PARTITION?cpus=N&mem=SIZE&time=MINUTES&slots=N&logs=DIR&store=DIR`
    /// (replaces the `builders` setting; '' builds here). Needs --builder-cache.
    #[arg(long, value_name = "SPEC")]
    builders: Option<String>,
    /// The binary cache the submitter and the Slurm jobs exchange derivations and
    /// outputs through (file:///SHARED/DIR, or `rocmx serve --writable`; replaces the
    /// `builder-cache` setting). It is also asked as a substituter.
    #[arg(long = "builder-cache", value_name = "URL")]
    builder_cache: Option<String>,
    /// How progress is shown on standard error: a live display on a terminal (`bar`,
    /// the default; plain lines without a terminal), `plain` lines, or `json` events.
    #[arg(long = "log-format", value_name = "FORMAT", default_value = "bar")]
    log_format: LogFormat,
}

/// What to evaluate: the installables and the evaluation options that `rocmx build`
/// shares with the commands that look at what a build would realise (`rocmx
/// challenge`). [`evaluate`] turns them into [`Target`]s.
#[derive(Args, Debug)]
pub(crate) struct InstallableArgs {
    /// Without --file/--expr: the files to build (a directory means its default.nix).
    /// With --file or --expr: attribute paths to select from it.
    #[arg(value_name = "FILE|ATTRPATH")]
    pub(crate) positional: Vec<String>,
    /// Build from this file; the positional arguments are attribute paths in it.
    #[arg(
        short = 'f',
        long = "file",
        value_name = "FILE",
        conflicts_with = "expr"
    )]
    pub(crate) file: Option<PathBuf>,
    /// Build from this expression; the positional arguments are attribute paths in it.
    #[arg(short = 'E', long = "expr", value_name = "EXPR")]
    pub(crate) expr: Option<String>,
    /// Select this attribute path (may be repeated; adds to the positional ones).
    #[arg(short = 'A', long = "attr", value_name = "ATTRPATH")]
    pub(crate) attr: Vec<String>,
    #[command(flatten)]
    pub(crate) eval: super::evalopts::EvalOpts,
    #[command(flatten)]
    pub(crate) flake: FlakeOpts,
}

/// One derivation to realise, as found in the value.
pub(crate) struct Target {
    pub(crate) drv: StorePath,
    /// The output selected (`outputName` of the value), or all of them.
    pub(crate) output: Option<String>,
}

pub fn run(mut args: BuildArgs, store_opt: &StoreOpt) -> i32 {
    if let Err(code) = check_installables(&mut args.installable, "build") {
        return code;
    }
    let store = match super::common::open_store_or_exit(store_opt) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let (targets, params) = match evaluate(&args.installable, &store) {
        Ok(x) => x,
        Err(code) => return code,
    };
    let r = if args.dry_run {
        dry_run::dry_run(&store, &targets, &args, params.as_ref()).map(|()| 0)
    } else {
        build(&store, &targets, &args, params.as_ref())
    };
    match r {
        Ok(code) => code,
        Err(Fail::Msg(m)) => {
            eprintln!("error: {m}");
            1
        }
        Err(_) => 1,
    }
}

/// Without an installable, names the flake here (`.#default`), else `./default.nix`, as
/// `nix build` and `nix-build` do; refuses flake parameters with `--file`/`--expr`.
/// `Err` is the exit code (2), the error printed; `verb` is the command's, for it.
pub(crate) fn check_installables(inst: &mut InstallableArgs, verb: &str) -> Result<(), i32> {
    if inst.file.is_none() && inst.expr.is_none() && inst.positional.is_empty() {
        let here = cwd();
        if here.join("flake.nix").is_file() {
            inst.positional.push(".#default".into());
        } else if here.join("default.nix").is_file() {
            inst.positional.push("./default.nix".into());
        } else {
            eprintln!(
                "error: nothing to {verb}: there is no flake.nix or default.nix in '{}'; give \
                 FLAKEREF#ATTRPATH, a FILE, --file FILE or --expr EXPR",
                here.display()
            );
            return Err(2);
        }
    }
    if (inst.flake.gfx.is_some() || !inst.flake.set.is_empty())
        && (inst.file.is_some() || inst.expr.is_some())
    {
        eprintln!(
            "error: --gfx and --set set flake parameters; with --file or --expr use --arg/--argstr"
        );
        return Err(2);
    }
    Ok(())
}

/// Evaluates the installables (writing `.drv` files and sources to `store`) and finds
/// the derivations in the values (see the module documentation), with the flake
/// parameters in force as JSON. `Err` is the exit code (1), the error rendered.
pub(crate) fn evaluate(
    inst: &InstallableArgs,
    store: &Rc<LocalStore>,
) -> Result<(Vec<Target>, Option<serde_json::Value>), i32> {
    let settings = match inst.eval.settings() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return Err(1);
        }
    };
    let eval_store = Rc::new(LocalEvalStore::new(store.clone()));
    let mut ev = Evaluator::new(settings, eval_store.clone());
    // For `builtins.getFlake` (made when first used); a flake installable
    // sets its own.
    ev.fetcher = Some(Rc::new(crate::flake::LazyFetcher::new(store.clone())));
    let mut params = None;
    let targets = match find_targets(&mut ev, inst, store, &mut params)
        .and_then(|t| eval_store.flush().map(|()| t))
    {
        Ok(t) => t,
        Err(e) => {
            eprint!("{}", ev.sources.render(&e, inst.eval.show_trace));
            std::mem::forget(ev);
            return Err(1);
        }
    };
    // Evaluation is over; what follows only reads the store.
    std::mem::forget(ev);
    Ok((targets, params.map(|p| crate::flake::params_json(&p))))
}

fn eval_err(msg: String) -> Box<EvalError> {
    EvalError::new(ErrorKind::Eval, msg)
}

/// Evaluates what the arguments name and collects the derivations in it.
/// `params` receives the parameters in force when a flake was evaluated.
fn find_targets(
    ev: &mut Evaluator,
    args: &InstallableArgs,
    store: &Rc<LocalStore>,
    params: &mut Option<BTreeMap<String, ParamValue>>,
) -> EResult<Vec<Target>> {
    let base = cwd();
    let mut flake_targets = Vec::new();
    // (root value, attribute paths to select from it)
    let mut roots: Vec<(Value, Vec<String>)> = Vec::new();
    let mut attrs: Vec<String> = Vec::new();
    match (&args.file, &args.expr) {
        (Some(f), _) => {
            attrs.extend(args.positional.iter().cloned());
            attrs.extend(args.attr.iter().cloned());
            let path = file_arg(ev, &f.to_string_lossy(), &base)?;
            roots.push((ev.eval_file(&path)?, attrs));
        }
        (None, Some(e)) => {
            attrs.extend(args.positional.iter().cloned());
            attrs.extend(args.attr.iter().cloned());
            roots.push((ev.eval_string(e, &base)?, attrs));
        }
        (None, None) => {
            let mut fetcher = None;
            let mut loaded: BTreeMap<String, Value> = BTreeMap::new();
            for f in &args.positional {
                // `<NAME>` is a file found in the search path, as for nix-build.
                let installable = if f.starts_with('<') && f.ends_with('>') {
                    Installable::File(file_arg(ev, f, &base)?)
                } else {
                    parse_installable(f, &base)?
                };
                match installable {
                    Installable::File(p) => {
                        let v = ev.eval_file(&p)?;
                        roots.push((v, args.attr.clone()));
                    }
                    Installable::Flake {
                        reference,
                        fragment,
                    } => {
                        if !args.attr.is_empty() {
                            return Err(eval_err(format!(
                                "-A does not apply to the flake '{f}'; write {reference}#ATTRPATH"
                            )));
                        }
                        if !args.eval.arg.is_empty() || !args.eval.argstr.is_empty() {
                            return Err(eval_err(format!(
                                "--arg and --argstr do not apply to the flake '{f}'; its parameters are set with --set NAME=VALUE"
                            )));
                        }
                        let key = reference.to_string();
                        let flake = match loaded.get(&key) {
                            Some(v) => v.clone(),
                            None => {
                                if fetcher.is_none() {
                                    fetcher = Some(crate::flake::fetcher(store)?);
                                }
                                let l = crate::flake::load_root(
                                    ev,
                                    fetcher.as_ref().expect("set above"),
                                    &reference,
                                    LockMode::Use,
                                    &args.flake,
                                )?;
                                params.get_or_insert_with(BTreeMap::new).extend(l.params);
                                loaded.insert(key.clone(), l.value.clone());
                                l.value
                            }
                        };
                        let system = ev.settings.system.clone();
                        let (v, _) = installable::resolve(ev, &flake, &fragment, &system, &key)?;
                        collect(ev, &v, &mut flake_targets, true)?;
                    }
                }
            }
        }
    }
    let auto = auto_args(ev, &args.eval.arg, &args.eval.argstr, &base)?;
    let mut targets = flake_targets;
    for (root, paths) in roots {
        if paths.is_empty() {
            let v = auto_call(ev, &root, &auto)?;
            collect(ev, &v, &mut targets, true)?;
        }
        for path in &paths {
            let mut v = root.clone();
            for name in split_attr_path(path)? {
                v = auto_call(ev, &v, &auto)?;
                v = select(ev, &v, &name, path)?;
            }
            v = auto_call(ev, &v, &auto)?;
            collect(ev, &v, &mut targets, true)?;
        }
    }
    // The same derivation output named twice is built and linked once.
    let mut seen = BTreeSet::new();
    targets.retain(|t| seen.insert((t.drv.clone(), t.output.clone())));
    Ok(targets)
}

/// If `v` is a derivation, its `drvPath` and selected output.
fn as_derivation(ev: &mut Evaluator, a: &Attrs) -> EResult<Option<Target>> {
    let Some(ty) = a.get("type") else {
        return Ok(None);
    };
    match ev.force(&ty.clone())? {
        Value::String(s) if s.as_str() == "derivation" => {}
        _ => return Ok(None),
    }
    let drv_path = match a.get("drvPath") {
        Some(d) => match ev.force(&d.clone())? {
            Value::String(s) => s.as_str().to_string(),
            other => {
                return Err(eval_err(format!(
                    "the derivation's 'drvPath' is {} instead of a string",
                    other.type_().described()
                )))
            }
        },
        None => return Err(eval_err("a derivation has no 'drvPath' attribute".into())),
    };
    let drv = StorePath::from_absolute(&drv_path).map_err(|e| {
        eval_err(format!(
            "the derivation's 'drvPath' '{drv_path}' is not a store path: {e}"
        ))
    })?;
    // `pkg` builds every output (as nix-build does); `pkg.dev` only `dev`. Both carry an
    // `outputName`; only a non-default one (not the first of `outputs`) selects.
    let output = match a.get("outputName") {
        Some(o) => match ev.force(&o.clone())? {
            Value::String(s) => Some(s.as_str().to_string()),
            _ => None,
        },
        None => None,
    };
    let first = match a.get("outputs") {
        Some(o) => match ev.force(&o.clone())? {
            Value::List(l) => match l.iter().next() {
                Some(x) => match ev.force(&x.clone())? {
                    Value::String(s) => Some(s.as_str().to_string()),
                    _ => None,
                },
                None => None,
            },
            _ => None,
        },
        None => Some("out".to_string()),
    };
    let output = output.filter(|o| Some(o) != first.as_ref());
    Ok(Some(Target { drv, output }))
}

/// Collects the derivations of `v` (see the module documentation). `top` is false
/// inside a plain set, whose non-derivation attributes are skipped.
fn collect(ev: &mut Evaluator, v: &Value, out: &mut Vec<Target>, top: bool) -> EResult<()> {
    let v = ev.force(v)?;
    match &v {
        Value::Attrs(a) => {
            if let Some(t) = as_derivation(ev, a)? {
                out.push(t);
            } else if top {
                let entries: Vec<Value> = a.iter().map(|(_, x)| x.clone()).collect();
                for x in entries {
                    if let Value::Attrs(b) = ev.force(&x)? {
                        if let Some(t) = as_derivation(ev, &b)? {
                            out.push(t);
                        }
                    }
                }
            }
            Ok(())
        }
        Value::List(l) if top => {
            for x in l.iter() {
                collect(ev, x, out, true)?;
            }
            Ok(())
        }
        other if top => Err(eval_err(format!(
            "the value to build is {}, not a derivation or a set or list of derivations",
            other.type_().described()
        ))),
        _ => Ok(()),
    }
}

/// The build options: the library's defaults, then the configuration files, then
/// `--option NAME VALUE`, then the dedicated flags.
/// The build options every command that builds starts from: the defaults, the
/// built-in builders the binary registers, the configuration files and `--option`
/// pairs applied over them; with the configuration, for the settings read later.
pub(crate) fn configured_options() -> Result<(BuildOptions, crate::config::Config), Fail> {
    let mut opts = BuildOptions::default();
    crate::unpack_debs::register(&mut opts.builtins);
    let cfg = crate::config::read().map_err(Fail::Msg)?;
    cfg.apply(&mut opts).map_err(Fail::Msg)?;
    Ok((opts, cfg))
}

fn options(args: &BuildArgs, store: &LocalStore) -> Result<BuildOptions, Fail> {
    if args.max_jobs == 0 {
        return Err(Fail::Msg(
            "--max-jobs 0 would build nothing; give at least 1".into(),
        ));
    }
    let (mut opts, cfg) = configured_options()?;
    let secs = |s: u64| (s > 0).then(|| Duration::from_secs(s));
    if let Some(c) = args.cores {
        opts.cores = c;
    }
    if let Some(t) = args.timeout {
        opts.timeout = secs(t);
    }
    if let Some(t) = args.max_silent_time {
        opts.max_silent = secs(t);
    }
    opts.max_jobs = args.max_jobs;
    opts.keep_going = args.keep_going;
    opts.keep_failed = args.keep_failed;
    opts.rebuild = args.rebuild;
    opts.check = args.check;
    let builder_cache = args.builder_cache.as_deref().or(cfg.value("builder-cache"));
    let executor = crate::slurm::executor(
        args.builders.as_deref().or(cfg.value("builders")),
        builder_cache,
        &cfg,
        store.state_dir(),
    )
    .map_err(Fail::Msg)?;
    if !args.offline {
        let mut urls = args
            .substituters
            .as_deref()
            .or(cfg.value("substituters"))
            .unwrap_or("")
            .to_string();
        // What the jobs pushed is found there before anything is submitted (Nix's
        // builders-use-substitutes).
        if let Some(e) = &executor {
            if !urls.split_whitespace().any(|u| u == e.cache_url()) {
                urls = format!("{urls} {}", e.cache_url());
            }
        }
        let urls = urls.as_str();
        let caches = crate::substitute::Caches::new(
            urls,
            cfg.value("trusted-public-keys").unwrap_or(""),
            args.fallback,
            cfg.require_sigs_count().map_err(Fail::Msg)?,
            rocmx_cache::transport::Timeouts {
                connect: opts.fetch_limits.connect_timeout,
                read: opts.fetch_limits.stall_timeout,
            },
        )
        .map_err(Fail::Msg)?;
        if !caches.is_empty() {
            opts.substituter = Some(std::sync::Arc::new(caches));
        }
    }
    if let Some(e) = executor {
        opts.executor = Some(e);
    }
    Ok(opts)
}

/// The outputs of `r` that `t` selects.
fn selected<'a>(t: &Target, r: &'a Realised) -> Result<Vec<(&'a String, &'a StorePath)>, Fail> {
    match &t.output {
        None => Ok(r.outputs.iter().collect()),
        Some(o) => match r.outputs.get_key_value(o) {
            Some(kv) => Ok(vec![kv]),
            None => Err(Fail::Msg(format!(
                "derivation '{}' has no output '{o}'",
                t.drv
            ))),
        },
    }
}

fn build(
    store: &LocalStore,
    targets: &[Target],
    args: &BuildArgs,
    params: Option<&serde_json::Value>,
) -> Result<i32, Fail> {
    let progress = Arc::new(Progress::stderr(args.log_format, args.print_build_logs));
    let mut realiser = Realiser::new(store, options(args, store)?).with_events(progress.clone());
    let goals: Vec<StorePath> = targets.iter().map(|t| t.drv.clone()).collect();
    let results = realiser.realise_all(&goals);
    progress.finish();

    // The progress display printed each failure as it happened (the message names the
    // derivation and ends with its log tail). Sum up: what failed, what it took with it.
    let errors: Vec<&BuildError> = results
        .iter()
        .filter_map(|r| r.as_ref().err())
        .chain(realiser.failed().iter().filter_map(|f| realiser.failure(f)))
        .collect();
    let code = exit_code(&errors, !realiser.failed().is_empty());
    for f in realiser.failed() {
        let log = realiser.log_path(f);
        if log.exists() {
            eprintln!("error: '{f}' failed; its full log: rocmx log {f}");
        } else {
            eprintln!("error: '{f}' failed");
        }
    }
    let skipped = realiser.skipped();
    if !skipped.is_empty() {
        eprintln!(
            "{} derivation(s) were not built because an input failed:",
            skipped.len()
        );
        for (d, because) in skipped {
            eprintln!("  {d} (needs {because})");
        }
    }
    for r in &results {
        if let Err(e @ BuildError::Stopped { .. }) = r {
            eprintln!("error: {e}");
        }
    }

    // Result links: NAME, NAME-2, … per derivation; NAME[-N]-OUTPUT for other outputs.
    if !args.no_link && !args.check {
        let base = args
            .out_link
            .clone()
            .unwrap_or_else(|| PathBuf::from("result"));
        for (i, (t, r)) in targets.iter().zip(&results).enumerate() {
            let Ok(r) = r else { continue };
            for (name, path) in selected(t, r)? {
                let mut link = base.as_os_str().to_owned();
                if i > 0 {
                    link.push(format!("-{}", i + 1));
                }
                if name != "out" {
                    link.push(format!("-{name}"));
                }
                let link = PathBuf::from(link);
                store.add_root(&link, path).map_err(|e| {
                    Fail::Msg(format!(
                        "creating the result link '{}': {}",
                        link.display(),
                        store_msg(&e)
                    ))
                })?;
            }
        }
    }
    let mut out = std::io::stdout().lock();
    if args.json {
        let outputs: Vec<serde_json::Value> = targets
            .iter()
            .zip(&results)
            .filter_map(|(t, r)| r.as_ref().ok().map(|r| (t, r)))
            .map(|(t, r)| {
                let outs: serde_json::Map<String, serde_json::Value> = selected(t, r)
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(n, p)| (n.clone(), p.to_absolute().into()))
                    .collect();
                serde_json::json!({ "drvPath": r.drv.to_absolute(), "outputs": outs })
            })
            .collect();
        let built: Vec<String> = realiser.built().iter().map(|p| p.to_absolute()).collect();
        let substituted: Vec<String> = realiser
            .substituted()
            .iter()
            .map(|p| p.to_absolute())
            .collect();
        let _ = writeln!(
            out,
            "{{\"outputs\":{},\"built\":{},\"substituted\":{}{}}}",
            serde_json::Value::from(outputs),
            serde_json::Value::from(built),
            serde_json::Value::from(substituted),
            params_field(params)
        );
    }
    if args.print_out_paths {
        for (t, r) in targets.iter().zip(&results) {
            let Ok(r) = r else { continue };
            for (_, p) in selected(t, r)? {
                let _ = writeln!(out, "{p}");
            }
        }
    }
    Ok(code)
}

/// The exit code of a build, as Nix computes it (`Worker::exitStatus`): `0x60` with
/// the bits of every failure ([`BuildError::nix_exit_bits`]; see [`EXIT_CODES`]), 1
/// for failures without bits, 0 when nothing failed.
pub(crate) fn exit_code(errors: &[&BuildError], any_failed: bool) -> i32 {
    let bits = errors.iter().fold(0u8, |b, e| b | e.nix_exit_bits());
    if bits != 0 {
        i32::from(0x60 | bits)
    } else if errors.is_empty() && !any_failed {
        0
    } else {
        1
    }
}

/// For `rocmx repl`'s `:b`: realises the derivations found in `v` (as `rocmx build`
/// finds them) with the default options and the configuration, progress on
/// standard error, no result links. Gives the outputs built (`out`, path); the
/// inner `Err` is a build failure (the progress display has shown its log tail).
pub(crate) fn build_value(
    ev: &mut Evaluator,
    eval_store: &LocalEvalStore,
    store: &LocalStore,
    v: &Value,
) -> EResult<Result<Vec<(String, StorePath)>, String>> {
    let mut targets = Vec::new();
    collect(ev, v, &mut targets, true)?;
    eval_store.flush()?;
    let args = <BuildArgs as clap::Args>::augment_args(clap::Command::new("build"))
        .try_get_matches_from(["build"])
        .and_then(|m| <BuildArgs as clap::FromArgMatches>::from_arg_matches(&m))
        .map_err(|e| eval_err(e.to_string()))?;
    let opts = match options(&args, store) {
        Ok(o) => o,
        Err(Fail::Msg(m)) => return Ok(Err(m)),
        Err(_) => return Ok(Err("the build options are invalid".into())),
    };
    let progress = Arc::new(Progress::stderr(args.log_format, false));
    let mut realiser = Realiser::new(store, opts).with_events(progress.clone());
    let goals: Vec<StorePath> = targets.iter().map(|t| t.drv.clone()).collect();
    let results = realiser.realise_all(&goals);
    progress.finish();
    let mut built = Vec::new();
    for (t, r) in targets.iter().zip(&results) {
        let r = match r {
            Ok(r) => r,
            Err(e) => {
                let logs: Vec<String> = realiser
                    .failed()
                    .iter()
                    .map(|f| format!("'{f}' failed; its full log: rocmx log {f}"))
                    .collect();
                return Ok(Err(if logs.is_empty() {
                    e.to_string()
                } else {
                    logs.join("\n")
                }));
            }
        };
        match selected(t, r) {
            Ok(outs) => built.extend(outs.into_iter().map(|(n, p)| (n.clone(), p.clone()))),
            Err(Fail::Msg(m)) => return Ok(Err(m)),
            Err(_) => return Ok(Err(format!("building '{}' failed", t.drv))),
        }
    }
    Ok(Ok(built))
}

/// `,"parameters":{…}` when a flake was evaluated, else nothing.
fn params_field(params: Option<&serde_json::Value>) -> String {
    params
        .map(|p| format!(",\"parameters\":{p}"))
        .unwrap_or_default()
}
