//! `rocmx log DRV|OUTPUT-PATH`: prints the stored build log of a derivation.
//!
//! Owns: finding the log and writing it, decompressed (logs are stored zstd-compressed by
//! the realiser, as `<state>/log/<drv hash part>.log.zst`), to standard output. A `.drv`
//! path names its log by its hash part alone, so the log is found after a `gc` deleted the
//! `.drv` (the logical path of a deleted derivation, as a failed build prints it, works);
//! an output path, or a `result` link, stands for the derivation recorded as its deriver
//! (`common::drv_of` with `DrvFor::Log`).
//! When no log is stored the error says so and why that may be.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;
use rocmx_store::{LocalStore, StorePath};

use super::common::{drv_of, open_store, DrvFor};
use super::fail::Fail;
use super::StoreOpt;

#[derive(Args, Debug)]
pub struct LogArgs {
    /// A `.drv` store path (it need not be in the store any more), an output path, or a
    /// `result` link.
    #[arg(value_name = "DRV|OUTPUT-PATH")]
    path: PathBuf,
}

pub fn run(a: LogArgs, s: &StoreOpt) -> i32 {
    Fail::exit_code(run_inner(&a, s))
}

fn run_inner(a: &LogArgs, s: &StoreOpt) -> Result<(), Fail> {
    let store = open_store(s)?;
    let drv = drv_of(&store, &a.path, DrvFor::Log)?;
    let log = rocmx_builder::log_path(&store, &drv);
    let file = match std::fs::File::open(&log) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Fail::Msg(no_log_msg(&store, &drv)))
        }
        Err(e) => return Err(Fail::Msg(format!("reading '{}': {e}", log.display()))),
    };
    let mut out = std::io::stdout().lock();
    zstd::stream::copy_decode(file, &mut out).map_err(|e| {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            Fail::BrokenPipe
        } else {
            Fail::Msg(format!("reading the log '{}': {e}", log.display()))
        }
    })?;
    out.flush().map_err(|e| Fail::write(&e))
}

/// Why there is no log of `drv`.
fn no_log_msg(store: &LocalStore, drv: &StorePath) -> String {
    let why = match store.is_valid(drv) {
        Ok(true) => {
            "it was not built in this store (its outputs were already valid or came \
             from a binary cache), or its log was removed"
        }
        _ => {
            "the derivation is not in this store either: it was never built here (check \
             the path and --store), or its log was removed"
        }
    };
    format!(
        "no build log of '{drv}' is stored in the store at '{}'; {why}",
        store.root().display()
    )
}
