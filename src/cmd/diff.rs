//! `rocmx diff PATH1 PATH2`: what differs between two store paths (or any two trees),
//! file by file, then diffoscope's report when it is installed.
//!
//! ```text
//! rocmx diff PATH1 PATH2 [--json] [--no-diffoscope]
//! ```
//!
//! Owns the command only: the comparison is `rocmx_builder::check::diff_trees` (kind,
//! size, executable bit, BLAKE3 of the contents, symlink targets), the same as
//! `rocmx build --check` and `rocmx verify` use. A path is a store path (logical,
//! physical or a `result` link) or, failing that, any file or directory.
//!
//! Exit codes: 0 identical, 104 different (as `--check`), 1 a path cannot be read,
//! 2 a bad command line.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use clap::Args;
use rocmx_builder::check::diff_trees;
use rocmx_store::LocalStore;

use super::common::{on_path, open_store};
use super::fail::Fail;
use super::StoreOpt;

const EXIT_CODES: &str = "\
Exit codes:
    0  the two are identical
    1  a path cannot be read (not in the store and not on disk)
    2  a bad command line
  104  they differ";

/// `rocmx diff`'s arguments.
#[derive(Args, Debug)]
#[command(after_help = EXIT_CODES)]
pub struct DiffArgs {
    /// The first (old) path.
    old: PathBuf,
    /// The second (new) path.
    new: PathBuf,
    /// Print the differences as JSON (`{"identical":…,"differences":[{"path","old","new"}]}`).
    #[arg(long)]
    json: bool,
    /// Do not run diffoscope even when it is installed.
    #[arg(long)]
    no_diffoscope: bool,
}

/// Where `p` is on disk: a store path's physical location, else `p` itself.
fn on_disk(store: Option<&LocalStore>, p: &Path) -> Result<PathBuf, Fail> {
    if let Some(store) = store {
        if let Ok((sp, sub)) = store.to_store_path(p) {
            let real = store.real_path(&sp);
            return Ok(match sub {
                Some(s) => real.join(s),
                None => real,
            });
        }
    }
    if p.symlink_metadata().is_ok() {
        return Ok(p.to_path_buf());
    }
    Err(Fail::Msg(format!(
        "'{}' is neither in the store nor a file or directory",
        p.display()
    )))
}

pub fn run(args: DiffArgs, store_opt: &StoreOpt) -> i32 {
    let store = open_store(store_opt).ok();
    let paths = on_disk(store.as_ref(), &args.old)
        .and_then(|a| on_disk(store.as_ref(), &args.new).map(|b| (a, b)));
    let (a, b) = match paths {
        Ok(x) => x,
        Err(Fail::Msg(m)) => {
            eprintln!("error: {m}");
            return 1;
        }
        Err(_) => return 1,
    };
    let diffs = match diff_trees(&a, &b) {
        Ok(d) => d,
        Err(e) => {
            eprintln!(
                "error: comparing '{}' with '{}': {e}",
                a.display(),
                b.display()
            );
            return 1;
        }
    };
    let mut out = std::io::stdout().lock();
    if args.json {
        let list: Vec<serde_json::Value> = diffs
            .iter()
            .map(|d| {
                serde_json::json!({
                    "path": d.path.display().to_string(),
                    "old": d.old.as_ref().map(|e| e.describe(true)),
                    "new": d.new.as_ref().map(|e| e.describe(true)),
                })
            })
            .collect();
        let _ = writeln!(
            out,
            "{}",
            serde_json::json!({ "identical": diffs.is_empty(), "differences": list })
        );
    } else if diffs.is_empty() {
        let _ = writeln!(out, "identical");
    } else {
        for d in &diffs {
            let _ = writeln!(out, "{d}");
        }
        if !args.no_diffoscope && on_path("diffoscope").is_some() {
            let _ = out.flush();
            drop(out);
            // diffoscope exits 1 when its inputs differ: that is the expected case.
            match Command::new("diffoscope")
                .arg("--text")
                .arg("-")
                .arg(&a)
                .arg(&b)
                .status()
            {
                Ok(s) if s.code() == Some(0) || s.code() == Some(1) => {}
                Ok(s) => eprintln!("warning: diffoscope: {s}"),
                Err(e) => eprintln!("warning: running diffoscope: {e}"),
            }
        }
    }
    if diffs.is_empty() {
        0
    } else {
        104
    }
}
