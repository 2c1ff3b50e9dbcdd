//! `rocmx gfx list|detect|resolve`: the known gfx targets, the machine's GPUs,
//! and what a `--gfx` value stands for.
//!
//! Owns: rendering `crate::gfx` results (tables, one line per GPU node, JSON).
//! The data and the checks are `crate::gfx`'s; nothing is decided here.

use std::io::{self, Write};

use clap::{Args, Subcommand};

use super::fail::Fail;
use crate::gfx::{self, Detection, GfxTable, TargetInfo};

#[derive(Args, Debug)]
pub struct GfxArgs {
    #[command(subcommand)]
    mode: Mode,
}

#[derive(Subcommand, Debug)]
enum Mode {
    /// Print the table of known gfx targets (from exprs/lib/gfx-targets.json).
    List {
        /// Print the table's entries as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Find the machine's AMD GPUs in the KFD topology, as rocm_agent_enumerator does.
    ///
    /// Reads $ROCMX_SYSFS_ROOT/class/kfd/kfd/topology/nodes/*/properties (root /sys
    /// by default); HSA_OVERRIDE_GFX_VERSION=MAJOR.MINOR.STEPPING replaces every GPU's
    /// version, as in the ROCm runtime. Prints one line per GPU node, then the
    /// `--gfx` option naming them. Exits 1 when no GPU is found.
    Detect {
        /// Print the nodes as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Check a `--gfx` value (LIST, `native` or `all`) and print its targets in
    /// canonical form, comma-separated.
    Resolve {
        /// Comma-separated targets (gfx90a,gfx1100:xnack-), `native` or `all`.
        #[arg(value_name = "LIST|native|all")]
        spec: String,
        /// Print the targets as a JSON list of strings.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(a: GfxArgs) -> i32 {
    Fail::exit_code(match a.mode {
        Mode::List { json } => list(json),
        Mode::Detect { json } => detect(json),
        Mode::Resolve { spec, json } => resolve(&spec, json),
    })
}

fn write_out(text: &str) -> Result<(), Fail> {
    let mut out = io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| Fail::write(&e))
}

fn to_json<T: serde::Serialize>(v: &T) -> Result<String, Fail> {
    serde_json::to_string_pretty(v)
        .map(|s| s + "\n")
        .map_err(|e| Fail::Msg(format!("rendering JSON: {e}")))
}

fn list(json: bool) -> Result<(), Fail> {
    let table = GfxTable::builtin();
    if json {
        return write_out(&to_json(&table.targets)?);
    }
    let header = [
        "NAME", "FAMILY", "GENERIC", "XNACK", "SRAMECC", "VERSION", "DEBIAN", "ROCM", "PRODUCTS",
    ];
    let rows: Vec<[String; 9]> = table.targets.iter().map(row).collect();
    let mut widths = header.map(str::len);
    for r in &rows {
        for (w, cell) in widths.iter_mut().zip(r) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut text = String::new();
    let mut line = |cells: &[&str]| {
        let mut l = String::new();
        for (i, (cell, w)) in cells.iter().zip(widths).enumerate() {
            if i + 1 == cells.len() {
                l.push_str(cell);
            } else {
                l.push_str(&format!("{cell:<w$}  "));
            }
        }
        text.push_str(l.trim_end());
        text.push('\n');
    };
    line(&header);
    for r in &rows {
        let cells: Vec<&str> = r.iter().map(String::as_str).collect();
        line(&cells);
    }
    write_out(&text)
}

fn row(t: &TargetInfo) -> [String; 9] {
    [
        t.name.clone(),
        t.family.clone(),
        t.generic.clone().unwrap_or_else(|| "-".into()),
        t.features.xnack.as_str().into(),
        t.features.sramecc.as_str().into(),
        t.gfx_target_version.to_string(),
        if t.debian { "yes" } else { "no" }.into(),
        series_span(&t.rocm),
        t.products.join(", "),
    ]
}

/// `["6.0","6.1","6.2"]` → `6.0-6.2`; one series as is; none as `-`.
fn series_span(rocm: &[String]) -> String {
    match rocm {
        [] => "-".into(),
        [one] => one.clone(),
        [first, .., last] => format!("{first}-{last}"),
    }
}

fn detect(json: bool) -> Result<(), Fail> {
    let d = gfx::detect().map_err(|e| Fail::Msg(e.to_string()))?;
    for w in &d.warnings {
        eprintln!("warning: {w}");
    }
    if json {
        #[derive(serde::Serialize)]
        struct Out<'a> {
            #[serde(flatten)]
            detection: &'a Detection,
            targets: Vec<String>,
        }
        let out = Out {
            detection: &d,
            targets: d.targets(),
        };
        return write_out(&to_json(&out)?);
    }
    let mut text = String::new();
    for n in &d.nodes {
        let mut version = format!("gfx_target_version {}", n.gfx_target_version);
        if let Some(r) = n.reported_version {
            version.push_str(&format!(
                ", set by HSA_OVERRIDE_GFX_VERSION; the device reports {r}"
            ));
        }
        let what = if n.known {
            n.products.join("/")
        } else {
            "not in rocmx's gfx table: its features and support cannot be checked".into()
        };
        text.push_str(&format!(
            "node {}: {} ({version}) {what}\n",
            n.node, n.target
        ));
    }
    text.push_str(&format!("--gfx {}\n", d.targets().join(",")));
    write_out(&text)
}

fn resolve(spec: &str, json: bool) -> Result<(), Fail> {
    let targets = gfx::resolve(spec).map_err(|e| Fail::Msg(e.to_string()))?;
    let names: Vec<String> = targets.iter().map(ToString::to_string).collect();
    if json {
        write_out(&to_json(&names)?)
    } else {
        write_out(&format!("{}\n", names.join(",")))
    }
}
