//! `rocmx log DRV|OUTPUT-PATH`: prints the stored build log of a derivation.
//!
//! Owns: finding the log (a `.drv` path names it directly; an output path, or a
//! `result` link, stands for the derivation recorded as its deriver) and writing it,
//! decompressed (logs are stored zstd-compressed by the realiser), to standard output.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use super::derivation::drv_of;
use super::path_info::{exit_code, open_store, Fail};
use super::StoreOpt;

#[derive(Args, Debug)]
pub struct LogArgs {
    /// A `.drv` store path, an output path, or a `result` link.
    #[arg(value_name = "DRV|OUTPUT-PATH")]
    path: PathBuf,
}

pub fn run(a: LogArgs, s: &StoreOpt) -> i32 {
    exit_code(run_inner(&a, s))
}

fn run_inner(a: &LogArgs, s: &StoreOpt) -> Result<(), Fail> {
    let store = open_store(s)?;
    let drv = drv_of(&store, &a.path)?;
    let log = rocmx_builder::log_path(&store, &drv);
    let file = match std::fs::File::open(&log) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Fail::Msg(format!("no build log of '{drv}' is stored")))
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
