//! `rocmx licenses INSTALLABLE`: the licence of every package in the build
//! closure of an installable, the non-free ones marked.
//!
//! The closure is walked through the package values (`super::packages`), not
//! the `.drv` files (which carry no `meta`): a derivation value's
//! `nativeBuildInputs`, `buildInputs`, `propagatedBuildInputs` and `src` are
//! followed. `meta.license` is a licence set (`exprs/lib/licenses.nix`), a list
//! of them, or an SPDX string. Packages without `meta.license` are listed as
//! `unknown`.
//!
//! Exit codes: 0 listed (whatever the licences), 1 evaluation error.

use std::collections::BTreeMap;
use std::io::Write;

use clap::Args;

use super::packages::{self, Package};
use super::StoreOpt;
use crate::flake::FlakeOpts;

#[derive(Args, Debug)]
pub struct LicensesArgs {
    /// FLAKEREF#ATTRPATH, or a file.
    #[arg(value_name = "INSTALLABLE", default_value = ".#default")]
    installable: String,
    /// With a file: the attribute path to list.
    #[arg(short = 'A', long = "attr", value_name = "ATTRPATH")]
    attr: Option<String>,
    /// Print JSON: `[{"name", "licenses": [{"spdxId", "free"}], "free"}]`.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    flake: FlakeOpts,
}

pub fn run(args: LicensesArgs, store_opt: &StoreOpt) -> i32 {
    match packages::load(
        store_opt,
        &args.installable,
        args.attr.as_deref(),
        &args.flake,
    ) {
        Ok(c) => {
            let text = render(&c.packages, args.json);
            let _ = std::io::stdout().lock().write_all(text.as_bytes());
            0
        }
        Err(code) => code,
    }
}

fn render(seen: &BTreeMap<String, Package>, json: bool) -> String {
    if json {
        let v: Vec<serde_json::Value> = seen
            .iter()
            .map(|(label, e)| {
                let name = label.split('\t').next().unwrap_or("");
                serde_json::json!({
                    "name": name,
                    "licenses": e.licenses.iter().map(|(id, free)| serde_json::json!({"spdxId": id, "free": free})).collect::<Vec<_>>(),
                    "free": e.licenses.iter().all(|(_, f)| *f),
                })
            })
            .collect();
        return format!("{}\n", serde_json::Value::from(v));
    }
    let mut out = String::new();
    let mut nonfree = 0;
    for (label, e) in seen {
        let name = label.split('\t').next().unwrap_or("");
        let text = if e.licenses.is_empty() {
            "unknown".to_string()
        } else {
            e.licenses
                .iter()
                .map(|(id, _)| id.as_str())
                .collect::<Vec<_>>()
                .join(" AND ")
        };
        let free = e.licenses.iter().all(|(_, f)| *f);
        if !free {
            nonfree += 1;
        }
        out.push_str(&format!(
            "{name:<40} {text}{}\n",
            if free { "" } else { "  NON-FREE" }
        ));
    }
    out.push_str(&format!("{} packages, {nonfree} non-free\n", seen.len()));
    out
}
