//! `rocmx verify`: rebuild an installable's closure under variations of the build
//! environment and compare every output with the registered one.
//!
//! ```text
//! rocmx verify INSTALLABLE… [--vary LIST] [--rounds N] [--no-deps] [--json]
//!     [--diffoscope DIR] [--cores N] [--option NAME VALUE]
//! ```
//!
//! Owns the procedure and the report; the variations are `rocmx_builder::vary`'s, the
//! rebuild and the file-by-file comparison the realiser's `--check`
//! (`BuildOptions::check` with a `BuildOptions::variant`), so nothing rebuilt is ever
//! registered.
//!
//! For each derivation of the closure (dependencies first; only the installables' with
//! `--no-deps`), once everything is built:
//! 1. `--rounds` rebuilds with every selected variation at once;
//! 2. when one differs (or fails), bisection: a rebuild without variations (if that
//!    differs too, the build is not deterministic at all) and one per variation alone;
//!    the variations whose rebuild differs are the causes, each with its files.
//!
//! Fixed-output derivations are not rebuilt (their declared hash is their check), nor
//! derivations of rocmx's built-in builders varied (they run in rocmx, not in the
//! sandbox: they are rebuilt once without variations).
//!
//! Exit codes: 0 every derivation reproducible; 104 some output differs (as `rocmx
//! build --check`); 100 a rebuild failed under a variation (and nothing differed);
//! 1 evaluation and other errors; 2 a bad command line.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use clap::Args;
use rocmx_builder::realise::{BuildError, BuildOptions, CheckDifference, Realiser};
use rocmx_builder::vary::{Host, NotApplied, Variation, Variations};
use rocmx_store::{Derivation, DerivationOutput, LocalStore, StorePath};

use super::build::{check_installables, evaluate, InstallableArgs};
use super::common::read_drv;
use super::fail::Fail;
use super::StoreOpt;

/// Exit code: an output differs (Nix's `--check` bit, as `rocmx build --check`).
const DIFFERS: i32 = 104;
/// Exit code: a rebuild failed (and nothing differed).
const FAILED: i32 = 100;

const EXIT_CODES: &str = "\
Exit codes:
    0  every derivation verified is reproducible
    1  an evaluation error, or a failure that is not a rebuild's
    2  a bad command line
  100  a rebuild failed under a variation (and no output differed)
  104  some output differs from the registered one";

/// `rocmx verify`'s arguments.
#[derive(Args, Debug)]
#[command(after_help = EXIT_CODES)]
pub struct VerifyArgs {
    #[command(flatten)]
    installable: InstallableArgs,
    /// The variations to apply, comma-separated: time, timezone, locale, umask, cores,
    /// env-order, dir-order, build-path, user, hostname, kernel; or all.
    #[arg(long, value_name = "LIST", default_value = "all")]
    vary: String,
    /// Rebuild each derivation this many times with the variations.
    #[arg(long, value_name = "N", default_value_t = 1)]
    rounds: u32,
    /// Verify only the installables' derivations, not their dependencies.
    #[arg(long)]
    no_deps: bool,
    /// Print the report as one JSON object on standard output.
    #[arg(long)]
    json: bool,
    /// Write diffoscope's HTML and text report of each differing output into DIR
    /// (needs Debian's `diffoscope`).
    #[arg(long, value_name = "DIR")]
    diffoscope: Option<PathBuf>,
    /// Cores each build may use, exported as ROCMX_BUILD_CORES (default: all).
    #[arg(long, value_name = "N")]
    cores: Option<u32>,
}

/// How one derivation fared.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Verdict {
    Reproducible,
    /// Some output differs; `causes` are the variations whose rebuild alone differs,
    /// `nondeterministic` when a rebuild without variations differs too.
    Differs {
        outputs: Vec<CheckDifference>,
        causes: BTreeMap<Variation, Vec<CheckDifference>>,
        nondeterministic: bool,
        diffoscope: Vec<PathBuf>,
    },
    /// A rebuild failed (with all variations; `causes` as above).
    Failed {
        message: String,
        causes: BTreeSet<Variation>,
    },
    /// Fixed-output: checked by its declared hash, not rebuilt.
    Fixed,
}

struct Row {
    drv: StorePath,
    name: String,
    builtin: bool,
    verdict: Verdict,
}

pub fn run(mut args: VerifyArgs, store_opt: &StoreOpt) -> i32 {
    if args.rounds == 0 {
        eprintln!("error: --rounds 0 would verify nothing; give at least 1");
        return 2;
    }
    let vary: Variations = match args.vary.parse() {
        Ok(v) => v,
        Err(e) => {
            eprintln!("error: --vary: {e}");
            return 2;
        }
    };
    if let Err(code) = check_installables(&mut args.installable, "verify") {
        return code;
    }
    let store = match super::common::open_store_or_exit(store_opt) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let (targets, _) = match evaluate(&args.installable, &store) {
        Ok(x) => x,
        Err(code) => return code,
    };
    match verify(
        &store,
        &targets.iter().map(|t| t.drv.clone()).collect::<Vec<_>>(),
        &args,
        &vary,
    ) {
        Ok(code) => code,
        Err(Fail::Msg(m)) => {
            eprintln!("error: {m}");
            1
        }
        Err(_) => 1,
    }
}

/// The build options of every rebuild: the configuration, `--option`, `--cores`.
fn options(args: &VerifyArgs) -> Result<BuildOptions, Fail> {
    let (mut opts, _) = super::build::configured_options()?;
    if let Some(c) = args.cores {
        opts.cores = c;
    }
    Ok(opts)
}

/// The derivations to verify, dependencies first.
fn closure(
    store: &LocalStore,
    goals: &[StorePath],
    no_deps: bool,
) -> Result<Vec<(StorePath, Derivation)>, Fail> {
    let mut order = Vec::new();
    let mut seen = BTreeSet::new();
    // Iterative post-order over input derivations; each .drv is read once, and kept
    // on the stack until its inputs are done.
    for g in goals {
        let mut stack: Vec<(StorePath, Option<Derivation>)> = vec![(g.clone(), None)];
        while let Some((p, read)) = stack.pop() {
            if let Some(d) = read {
                order.push((p, d));
                continue;
            }
            if !seen.insert(p.clone()) {
                continue;
            }
            let d = read_drv(store, &p)?;
            let inputs: Vec<StorePath> = if no_deps {
                Vec::new()
            } else {
                d.input_drvs.keys().rev().cloned().collect()
            };
            stack.push((p, Some(d)));
            for i in inputs {
                if !seen.contains(&i) {
                    stack.push((i, None));
                }
            }
        }
    }
    Ok(order)
}

/// One rebuild of `drv` with `vary` (nothing registered): `Ok(None)` identical,
/// `Ok(Some(diffs))` different, `Err` the rebuild failed.
fn rebuild(
    store: &LocalStore,
    drv: &StorePath,
    opts: &BuildOptions,
    vary: &Variations,
    host: &Host,
    keep: bool,
) -> Result<Option<Vec<CheckDifference>>, BuildError> {
    let mut o = opts.clone();
    o.check = true;
    o.keep_failed = keep;
    o.variant = vary.variant(host, opts.cores).0;
    let mut r = Realiser::new(store, o);
    match r.realise_all(std::slice::from_ref(drv)).pop() {
        Some(Ok(_)) => Ok(None),
        Some(Err(BuildError::CheckMismatch { outputs, .. })) => Ok(Some(outputs)),
        Some(Err(e)) => Err(e),
        None => Ok(None),
    }
}

fn verify(
    store: &LocalStore,
    goals: &[StorePath],
    args: &VerifyArgs,
    vary: &Variations,
) -> Result<i32, Fail> {
    let opts = options(args)?;
    let host = Host::probe();
    let (_, not_applied) = vary.variant(&host, opts.cores);
    for n in &not_applied {
        eprintln!(
            "warning: variation '{}' is not applied: {}",
            n.variation, n.why
        );
    }
    let skip: BTreeSet<Variation> = not_applied.iter().map(|n| n.variation).collect();
    let vary = Variations(vary.0.difference(&skip).copied().collect());

    // Everything must be built (and registered) first: that is what is compared with.
    {
        let progress = std::sync::Arc::new(super::progress::Progress::stderr(
            super::progress::LogFormat::Bar,
            false,
        ));
        let mut r = Realiser::new(store, opts.clone()).with_events(progress.clone());
        let results = r.realise_all(goals);
        progress.finish();
        for res in results {
            if let Err(e) = res {
                return Err(Fail::Msg(format!("building before verifying: {e}")));
            }
        }
    }
    let drvs = closure(store, goals, args.no_deps)?;
    if let Some(dir) = &args.diffoscope {
        std::fs::create_dir_all(dir)
            .map_err(|e| Fail::Msg(format!("creating '{}': {e}", dir.display())))?;
        if super::common::on_path("diffoscope").is_none() {
            return Err(Fail::Msg(
                "--diffoscope needs diffoscope on PATH (Debian: apt-get install diffoscope)".into(),
            ));
        }
    }

    let mut rows = Vec::new();
    for (drv, d) in &drvs {
        let name = drv.name().trim_end_matches(".drv").to_string();
        if d.outputs
            .values()
            .any(|o| matches!(o, DerivationOutput::Fixed { .. }))
        {
            rows.push(Row {
                drv: drv.clone(),
                name,
                builtin: false,
                verdict: Verdict::Fixed,
            });
            continue;
        }
        let builtin = d.builder.starts_with("builtin:");
        let all = if builtin {
            Variations::default()
        } else {
            vary.clone()
        };
        eprintln!(
            "verifying {name} ({})",
            if all.0.is_empty() {
                "no variations".to_string()
            } else {
                all.to_string()
            }
        );
        let mut first: Option<Result<Vec<CheckDifference>, BuildError>> = None;
        for _ in 0..args.rounds {
            match rebuild(store, drv, &opts, &all, &host, false) {
                Ok(None) => {}
                Ok(Some(diffs)) => {
                    first = Some(Ok(diffs));
                    break;
                }
                Err(e) => {
                    first = Some(Err(e));
                    break;
                }
            }
        }
        let verdict = match first {
            None => Verdict::Reproducible,
            Some(res) => bisect(
                store,
                drv,
                &name,
                &opts,
                &all,
                &host,
                res,
                args.diffoscope.as_deref(),
            )?,
        };
        eprintln!("  {name}: {}", short(&verdict));
        rows.push(Row {
            drv: drv.clone(),
            name,
            builtin,
            verdict,
        });
    }
    report(&rows, &vary, &not_applied, args.json);
    let differs = rows
        .iter()
        .any(|r| matches!(r.verdict, Verdict::Differs { .. }));
    let failed = rows
        .iter()
        .any(|r| matches!(r.verdict, Verdict::Failed { .. }));
    Ok(if differs {
        DIFFERS
    } else if failed {
        FAILED
    } else {
        0
    })
}

/// Attributes a difference (or failure) found with `all` to the variations.
#[allow(clippy::too_many_arguments)]
fn bisect(
    store: &LocalStore,
    drv: &StorePath,
    name: &str,
    opts: &BuildOptions,
    all: &Variations,
    host: &Host,
    found: Result<Vec<CheckDifference>, BuildError>,
    diffoscope: Option<&Path>,
) -> Result<Verdict, Fail> {
    let control = rebuild(store, drv, opts, &Variations::default(), host, false);
    let nondeterministic = matches!(control, Ok(Some(_)));
    let mut causes: BTreeMap<Variation, Vec<CheckDifference>> = BTreeMap::new();
    let mut failing = BTreeSet::new();
    // A build that differs without any variation is not deterministic: one variation at
    // a time would only show that again.
    if !nondeterministic {
        if all.0.len() > 1 {
            for v in &all.0 {
                eprintln!("  bisecting {name}: {v} alone");
                match rebuild(store, drv, opts, &Variations::one(*v), host, false) {
                    Ok(Some(d)) => {
                        causes.insert(*v, d);
                    }
                    Ok(None) => {}
                    Err(_) => {
                        failing.insert(*v);
                    }
                }
            }
        } else if let Some(v) = all.0.iter().next() {
            match &found {
                Ok(d) => {
                    causes.insert(*v, d.clone());
                }
                Err(_) => {
                    failing.insert(*v);
                }
            }
        }
    }
    match found {
        Ok(outputs) => {
            let mut reports = Vec::new();
            if let Some(dir) = diffoscope {
                reports = run_diffoscope(store, drv, opts, all, host, dir, name)?;
            }
            Ok(Verdict::Differs {
                outputs,
                causes,
                nondeterministic,
                diffoscope: reports,
            })
        }
        Err(e) => Ok(Verdict::Failed {
            message: e.to_string(),
            causes: failing,
        }),
    }
}

/// Rebuilds once more keeping the differing outputs, runs diffoscope on each against
/// the registered one, and removes the kept copies.
fn run_diffoscope(
    store: &LocalStore,
    drv: &StorePath,
    opts: &BuildOptions,
    all: &Variations,
    host: &Host,
    dir: &Path,
    name: &str,
) -> Result<Vec<PathBuf>, Fail> {
    let Ok(Some(diffs)) = rebuild(store, drv, opts, all, host, true) else {
        return Ok(Vec::new());
    };
    let mut reports = Vec::new();
    for d in diffs {
        let Some(kept) = &d.kept else { continue };
        let base = dir.join(format!("{name}-{}", d.output));
        let html = base.with_extension("html");
        let text = base.with_extension("txt");
        let st = Command::new("diffoscope")
            .arg("--html")
            .arg(&html)
            .arg("--text")
            .arg(&text)
            .arg(store.real_path(&d.path))
            .arg(kept)
            .status();
        let _ = rocmx_store::tree::remove_tree(kept);
        match st {
            // diffoscope exits 1 when the inputs differ.
            Ok(s) if s.code() == Some(0) || s.code() == Some(1) => {
                reports.push(html);
                reports.push(text);
            }
            Ok(s) => eprintln!("warning: diffoscope on {}: {s}", d.path),
            Err(e) => eprintln!("warning: running diffoscope: {e}"),
        }
    }
    Ok(reports)
}

fn short(v: &Verdict) -> String {
    match v {
        Verdict::Reproducible => "reproducible".into(),
        Verdict::Fixed => "fixed-output (checked by its hash)".into(),
        Verdict::Differs {
            causes,
            nondeterministic,
            ..
        } => {
            let mut s = "NOT reproducible".to_string();
            if *nondeterministic {
                s.push_str(": differs even without variations");
            }
            if !causes.is_empty() {
                let c: Vec<&str> = causes.keys().map(|v| v.name()).collect();
                s.push_str(&format!(
                    "{} caused by {}",
                    if *nondeterministic { ";" } else { ":" },
                    c.join(", ")
                ));
            }
            s
        }
        Verdict::Failed { causes, .. } => {
            if causes.is_empty() {
                "FAILED under the variations".into()
            } else {
                let c: Vec<&str> = causes.iter().map(|v| v.name()).collect();
                format!("FAILED under {}", c.join(", "))
            }
        }
    }
}

fn diff_json(d: &CheckDifference) -> serde_json::Value {
    serde_json::json!({
        "output": d.output,
        "path": d.path.to_absolute(),
        "differences": d.differences,
    })
}

fn report(rows: &[Row], vary: &Variations, not_applied: &[NotApplied], json: bool) {
    let verified: Vec<&Row> = rows
        .iter()
        .filter(|r| r.verdict != Verdict::Fixed)
        .collect();
    let good = verified
        .iter()
        .filter(|r| r.verdict == Verdict::Reproducible)
        .count();
    let fixed = rows.len() - verified.len();
    let mut out = std::io::stdout().lock();
    if json {
        let drvs: Vec<serde_json::Value> = rows
            .iter()
            .map(|r| {
                let mut o = serde_json::json!({
                    "drvPath": r.drv.to_absolute(),
                    "name": r.name,
                    "builtin": r.builtin,
                });
                let m = o.as_object_mut().expect("an object");
                match &r.verdict {
                    Verdict::Reproducible => {
                        m.insert("status".into(), "reproducible".into());
                    }
                    Verdict::Fixed => {
                        m.insert("status".into(), "fixed-output".into());
                    }
                    Verdict::Differs {
                        outputs,
                        causes,
                        nondeterministic,
                        diffoscope,
                    } => {
                        m.insert("status".into(), "differs".into());
                        m.insert("outputs".into(), outputs.iter().map(diff_json).collect());
                        m.insert("nondeterministic".into(), (*nondeterministic).into());
                        let c: serde_json::Map<String, serde_json::Value> = causes
                            .iter()
                            .map(|(v, d)| (v.name().to_string(), d.iter().map(diff_json).collect()))
                            .collect();
                        m.insert("causes".into(), c.into());
                        m.insert(
                            "diffoscope".into(),
                            diffoscope.iter().map(|p| p.display().to_string()).collect(),
                        );
                    }
                    Verdict::Failed { message, causes } => {
                        m.insert("status".into(), "failed".into());
                        m.insert("message".into(), message.clone().into());
                        m.insert("causes".into(), causes.iter().map(|v| v.name()).collect());
                    }
                }
                o
            })
            .collect();
        let na: Vec<serde_json::Value> = not_applied
            .iter()
            .map(|n| serde_json::json!({ "variation": n.variation.name(), "why": n.why }))
            .collect();
        let _ = writeln!(
            out,
            "{}",
            serde_json::json!({
                "variations": vary.0.iter().map(|v| v.name()).collect::<Vec<_>>(),
                "notApplied": na,
                "derivations": drvs,
                "reproducible": good,
                "verified": verified.len(),
                "fixedOutput": fixed,
            })
        );
        return;
    }
    for r in rows {
        let _ = writeln!(out, "{}: {}", r.name, short(&r.verdict));
        if let Verdict::Differs {
            outputs,
            causes,
            diffoscope,
            ..
        } = &r.verdict
        {
            for o in outputs {
                let _ = writeln!(out, "  output '{}' ({}) differs:", o.output, o.path);
                for d in &o.differences {
                    let _ = writeln!(out, "    {d}");
                }
            }
            for (v, diffs) in causes {
                let _ = writeln!(out, "  with {v} alone ({}):", v.describe());
                for o in diffs {
                    for d in &o.differences {
                        let _ = writeln!(out, "    {}: {d}", o.output);
                    }
                }
            }
            for p in diffoscope {
                let _ = writeln!(out, "  diffoscope: {}", p.display());
            }
        }
        if let Verdict::Failed { message, .. } = &r.verdict {
            for l in message.lines().take(12) {
                let _ = writeln!(out, "  {l}");
            }
        }
    }
    let _ = writeln!(
        out,
        "{good} of {} derivations reproducible{}",
        verified.len(),
        if fixed > 0 {
            format!(" ({fixed} fixed-output, checked by their hash)")
        } else {
            String::new()
        }
    );
}
