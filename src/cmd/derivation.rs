//! `rocmx derivation show DRV|OUTPUT-PATH…`: prints derivations as JSON.
//!
//! Owns: reading `.drv` files from the store and printing one object
//! `{ "<drv path>": <derivation as JSON>, … }` (the form of `nix derivation show`;
//! the per-derivation JSON is `rocmx_store::Derivation::to_json`). An output path
//! stands for the derivation that built it (its recorded deriver).

use std::io::Write;
use std::path::PathBuf;

use clap::{Args, Subcommand};
use rocmx_store::{LocalStore, StorePath};

use super::build::read_drv;
use super::path_info::{exit_code, open_store, store_msg, store_path_arg, Fail};
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
    exit_code(match a.command {
        DerivationCommand::Show { paths } => show(&paths, s),
    })
}

/// The derivation `p` designates: itself when it is a `.drv`, else its deriver.
pub(crate) fn drv_of(store: &LocalStore, p: &std::path::Path) -> Result<StorePath, Fail> {
    let sp = store_path_arg(store, p)?;
    if sp.is_derivation() {
        super::path_info::require_valid(store, &sp)?;
        return Ok(sp);
    }
    match store.path_info(&sp).map_err(|e| Fail::Msg(store_msg(&e)))? {
        Some(info) => info
            .deriver
            .ok_or_else(|| Fail::Msg(format!("path '{sp}' was not built by a known derivation"))),
        None => Err(Fail::Msg(super::path_info::not_valid_msg(store, &sp))),
    }
}

fn show(paths: &[PathBuf], s: &StoreOpt) -> Result<(), Fail> {
    let store = open_store(s)?;
    let mut out = serde_json::Map::new();
    for p in paths {
        let drv = drv_of(&store, p)?;
        let d = read_drv(&store, &drv)?;
        out.insert(drv.to_absolute(), d.to_json());
    }
    let text = serde_json::to_string_pretty(&serde_json::Value::Object(out))
        .map_err(|e| Fail::Msg(e.to_string()))?;
    let mut o = std::io::stdout().lock();
    writeln!(o, "{text}").map_err(|e| Fail::write(&e))
}
