//! `rocmx challenge INSTALLABLE --substituters 'URL…'`: whether binary caches serve
//! what this store built, derivation by derivation (as `guix challenge` does).
//!
//! ```text
//! rocmx challenge (FLAKEREF#ATTRPATH | FILE… | --file FILE [ATTRPATH…] | --expr EXPR …)
//!     [--substituters URLS] [--json] [--option NAME VALUE] [the evaluation options of
//!     rocmx build: --arg, --argstr, -A, -I, --set, --gfx, …]
//! ```
//!
//! Owns: the options (installables as `rocmx build` takes them; the caches from
//! `--substituters` or the `substituters` setting, trusting `trusted-public-keys`,
//! with the `connect-timeout` and `stalled-download-timeout` settings), rendering
//! [`crate::challenge::Report`] for people or as JSON, and the exit code
//! ([`EXIT_CODES`]). The walk and the comparison are `crate::challenge`'s.
//!
//! # Output
//!
//! One line per floating output realised here, `STATUS: <drv>!<output> -> <path>`, the
//! status `agree`, `differ` or `not in cache`; under a difference one line for the local
//! copy and one per cache (`agrees`, its path and `NarHash`, `not in cache`, …); under
//! any output, a line per cache problem (`problem: …`). Then `not built here: <drv>
//! (why)` lines, and the summary: `N of M outputs agree across K caches; X differ; Y
//! not in any cache`, followed by the derivations not built here, the fixed-output
//! ones (not challenged: their content is checked against their declared hash), the
//! cache problems and the caches skipped, when there are any.
//!
//! `--json`: `{"caches": [URL…], "skippedCaches": [{"url", "error"}], "derivations":
//! [{"drvPath", "status": "realised" | "not-built" | "fixed", "reason"?, "key"?,
//! "outputs"?: [{"output", "status": "agree" | "differ" | "not-in-cache", "path",
//! "narHash", "caches": [{"url", "status": "agree" | "differ" | "absent" | "unusable" |
//! "skipped", "path"?, "narHash"?, "problem"?}]}], "notBuiltOutputs"?: […]}],
//! "summary": {"outputs", "agree", "differ", "notInCache", "notBuilt", "fixed",
//! "problems", "caches"}}`.

use std::io::Write;

use clap::Args;
use rocmx_builder::realise::BuildOptions;
use rocmx_cache::transport::{self, Transport};
use rocmx_store::{Encoding, Hash, StorePath};
use serde_json::{json, Value};

use super::build::{check_installables, evaluate, InstallableArgs};
use super::common::open_store_or_exit;
use super::fail::Fail;
use super::StoreOpt;
use crate::challenge::{self, Answer, Entry, Report, Status, Verdict};

/// The exit code when a cache serves another output than the local one (as `rocmx
/// build --check`'s difference).
pub const DIFFERS: i32 = 104;

/// The exit codes, for `--help`.
const EXIT_CODES: &str = "\
Exit codes:
    0  no cache serves another output than this store's (outputs no cache has,
       derivations not built here and unusable cache records are listed, and do
       not fail)
    1  evaluation failed, a .drv or the store could not be read, no cache is
       configured, or a setting is wrong
    2  a bad command line
  104  a cache serves another output (path or NarHash) for a derivation realised here";

/// Compare what binary caches serve with what this store built.
#[derive(Args, Debug)]
#[command(after_help = EXIT_CODES)]
pub struct ChallengeArgs {
    #[command(flatten)]
    installable: InstallableArgs,
    /// The binary caches to challenge (white-space separated URLs; default: the
    /// `substituters` setting).
    #[arg(long, value_name = "URLS")]
    substituters: Option<String>,
    /// Print the report as one JSON object.
    #[arg(long)]
    json: bool,
}

pub fn run(mut a: ChallengeArgs, s: &StoreOpt) -> i32 {
    if let Err(code) = check_installables(&mut a.installable, "challenge") {
        return code;
    }
    let store = match open_store_or_exit(s) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let (targets, _) = match evaluate(&a.installable, &store) {
        Ok(x) => x,
        Err(code) => return code,
    };
    let goals: Vec<StorePath> = targets.iter().map(|t| t.drv.clone()).collect();
    match run_on(&a, &store, &goals) {
        Ok(code) => code,
        Err(Fail::Msg(m)) => {
            eprintln!("error: {m}");
            1
        }
        Err(_) => 1,
    }
}

fn run_on(
    a: &ChallengeArgs,
    store: &rocmx_store::LocalStore,
    goals: &[StorePath],
) -> Result<i32, Fail> {
    let cfg = crate::config::read().map_err(Fail::Msg)?;
    let mut opts = BuildOptions::default();
    cfg.apply(&mut opts).map_err(Fail::Msg)?;
    let urls = a
        .substituters
        .as_deref()
        .or(cfg.value("substituters"))
        .unwrap_or("");
    let trusted = cfg.trusted_keys().map_err(Fail::Msg)?;
    let timeouts = transport::Timeouts {
        connect: opts.fetch_limits.connect_timeout,
        read: opts.fetch_limits.stall_timeout,
    };
    let mut caches: Vec<Box<dyn Transport>> = Vec::new();
    for u in urls.split_whitespace() {
        caches.push(
            transport::open_with(u, timeouts)
                .map_err(|e| Fail::Msg(format!("substituters: {e}")))?,
        );
    }
    if caches.is_empty() {
        return Err(Fail::Msg(
            "no cache to challenge: give --substituters 'URL…' or set substituters".into(),
        ));
    }
    if trusted.is_empty() {
        eprintln!(
            "warning: trusted-public-keys is empty: every record the caches serve will be reported as untrusted"
        );
    }
    let report = challenge::challenge(store, goals, &caches, &trusted)
        .map_err(|e| Fail::Msg(e.to_string()))?;
    let text = if a.json {
        let mut t = json_report(&report).to_string();
        t.push('\n');
        t
    } else {
        text_report(&report)
    };
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| Fail::write(&e))?;
    Ok(if report.summary().differ > 0 {
        DIFFERS
    } else {
        0
    })
}

fn hash_text(h: &Hash) -> String {
    h.to_typed(Encoding::Nix32)
}

fn status_word(s: Status) -> &'static str {
    match s {
        Status::Agree => "agree",
        Status::Differ => "differ",
        Status::NotInCache => "not in cache",
    }
}

/// The report for people (see the module documentation).
fn text_report(r: &Report) -> String {
    let mut s = String::new();
    let mut not_built = Vec::new();
    for (drv, e) in &r.derivations {
        match e {
            Entry::Fixed => {}
            Entry::NotBuilt { why } => not_built.push(format!("not built here: {drv} ({why})\n")),
            Entry::Realised { outputs, .. } => {
                for o in outputs {
                    let status = o.status();
                    let agreeing: Vec<&str> = o
                        .answers
                        .iter()
                        .filter(|a| matches!(a.verdict, Verdict::Agree { .. }))
                        .map(|a| r.caches[a.cache].as_str())
                        .collect();
                    s.push_str(&format!(
                        "{}: {drv}!{} -> {}",
                        status_word(status),
                        o.name,
                        o.path
                    ));
                    if status == Status::Agree {
                        s.push_str(&format!(" ({})", agreeing.join(", ")));
                    }
                    s.push('\n');
                    if status == Status::Differ {
                        s.push_str(&format!("  local: {} {}\n", o.path, hash_text(&o.nar_hash)));
                    }
                    for a in &o.answers {
                        let url = &r.caches[a.cache];
                        if status == Status::Differ {
                            s.push_str(&format!("  {url}: {}\n", answer_text(a)));
                        }
                        if let Some(p) = &a.problem {
                            s.push_str(&format!("  {url}: problem: {p}\n"));
                        }
                    }
                }
            }
        }
    }
    for l in not_built {
        s.push_str(&l);
    }
    let sum = r.summary();
    let plural =
        |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    s.push_str(&format!(
        "{} of {} agree across {}; {} differ; {} not in any cache",
        sum.agree,
        plural(sum.outputs, "output", "outputs"),
        plural(r.caches.len(), "cache", "caches"),
        sum.differ,
        sum.not_in_cache
    ));
    if sum.not_built > 0 {
        s.push_str(&format!(
            "; {} not built here",
            plural(sum.not_built, "derivation", "derivations")
        ));
    }
    if sum.fixed > 0 {
        s.push_str(&format!(
            "; {} not challenged",
            plural(
                sum.fixed,
                "fixed-output derivation",
                "fixed-output derivations"
            )
        ));
    }
    if sum.problems > 0 {
        s.push_str(&format!(
            "; {}",
            plural(sum.problems, "cache problem", "cache problems")
        ));
    }
    if !r.skipped.is_empty() {
        let names: Vec<&str> = r.skipped.keys().map(|i| r.caches[*i].as_str()).collect();
        s.push_str(&format!("; skipped (failing): {}", names.join(", ")));
    }
    s.push('\n');
    s
}

/// One cache's line under a difference.
fn answer_text(a: &Answer) -> String {
    match &a.verdict {
        Verdict::Agree { .. } => "agrees".into(),
        Verdict::Differ { path, nar_hash } => format!(
            "{path} {}",
            nar_hash
                .as_ref()
                .map_or("(NarHash unknown)".to_string(), hash_text)
        ),
        Verdict::Absent => "not in cache".into(),
        Verdict::Unusable => "unusable record".into(),
        Verdict::Skipped => "skipped (the cache failed)".into(),
    }
}

fn answer_json(r: &Report, a: &Answer) -> Value {
    let mut o = json!({ "url": r.caches[a.cache] });
    let (status, path, hash) = match &a.verdict {
        Verdict::Agree { nar_hash } => ("agree", None, nar_hash.as_ref()),
        Verdict::Differ { path, nar_hash } => ("differ", Some(path), nar_hash.as_ref()),
        Verdict::Absent => ("absent", None, None),
        Verdict::Unusable => ("unusable", None, None),
        Verdict::Skipped => ("skipped", None, None),
    };
    o["status"] = status.into();
    if let Some(p) = path {
        o["path"] = p.to_absolute().into();
    }
    if let Some(h) = hash {
        o["narHash"] = hash_text(h).into();
    }
    if let Some(p) = &a.problem {
        o["problem"] = p.clone().into();
    }
    o
}

/// The report as JSON (see the module documentation).
fn json_report(r: &Report) -> Value {
    let derivations: Vec<Value> = r
        .derivations
        .iter()
        .map(|(drv, e)| match e {
            Entry::Fixed => json!({ "drvPath": drv.to_absolute(), "status": "fixed" }),
            Entry::NotBuilt { why } => {
                json!({ "drvPath": drv.to_absolute(), "status": "not-built", "reason": why })
            }
            Entry::Realised {
                key,
                outputs,
                missing,
            } => {
                let outs: Vec<Value> = outputs
                    .iter()
                    .map(|o| {
                        json!({
                            "output": o.name,
                            "status": match o.status() {
                                Status::Agree => "agree",
                                Status::Differ => "differ",
                                Status::NotInCache => "not-in-cache",
                            },
                            "path": o.path.to_absolute(),
                            "narHash": hash_text(&o.nar_hash),
                            "caches": o.answers.iter().map(|a| answer_json(r, a)).collect::<Vec<_>>(),
                        })
                    })
                    .collect();
                json!({
                    "drvPath": drv.to_absolute(),
                    "status": "realised",
                    "key": key,
                    "outputs": outs,
                    "notBuiltOutputs": missing,
                })
            }
        })
        .collect();
    let sum = r.summary();
    json!({
        "caches": r.caches,
        "skippedCaches": r.skipped.iter().map(|(i, e)| json!({ "url": r.caches[*i], "error": e })).collect::<Vec<_>>(),
        "derivations": derivations,
        "summary": {
            "outputs": sum.outputs,
            "agree": sum.agree,
            "differ": sum.differ,
            "notInCache": sum.not_in_cache,
            "notBuilt": sum.not_built,
            "fixed": sum.fixed,
            "problems": sum.problems,
            "caches": r.caches.len(),
        },
    })
}
