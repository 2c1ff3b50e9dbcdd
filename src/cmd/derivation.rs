//! `rocmx derivation show DRV|OUTPUT-PATH…`: prints derivations as JSON.
//!
//! Owns: printing one object `{ "<drv path>": <derivation as JSON>, … }` (the form of
//! `nix derivation show`; the per-derivation JSON is `rocmx_store::Derivation::to_json`).
//! An output path stands for the derivation that built it (its recorded deriver); the
//! arguments are resolved and the `.drv` files read by `common.rs` (`drv_of`, `read_drv`).

use std::io::Write;
use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::common::{drv_of, open_store, read_drv, DrvFor};
use super::fail::Fail;
use super::StoreOpt;

#[derive(Args, Debug)]
pub struct DerivationArgs {
    #[command(subcommand)]
    command: DerivationCommand,
}

#[derive(Subcommand, Debug)]
enum DerivationCommand {
    /// Print derivations (`.drv` paths, or output paths for their deriver) as JSON.
    Show {
        /// `.drv` store paths, output paths, or `result` links.
        #[arg(required = true, value_name = "DRV")]
        paths: Vec<PathBuf>,
    },
}

pub fn run(a: DerivationArgs, s: &StoreOpt) -> i32 {
    Fail::exit_code(match a.command {
        DerivationCommand::Show { paths } => show(&paths, s),
    })
}

fn show(paths: &[PathBuf], s: &StoreOpt) -> Result<(), Fail> {
    let store = open_store(s)?;
    let mut out = serde_json::Map::new();
    for p in paths {
        let drv = drv_of(&store, p, DrvFor::Reading)?;
        let d = read_drv(&store, &drv)?;
        out.insert(drv.to_absolute(), d.to_json());
    }
    let text = serde_json::to_string_pretty(&serde_json::Value::Object(out))
        .map_err(|e| Fail::Msg(e.to_string()))?;
    let mut o = std::io::stdout().lock();
    writeln!(o, "{text}").map_err(|e| Fail::write(&e))
}
