//! `rocmx graph INSTALLABLE`: the build closure of an installable as a graph,
//! walked through the package values like `rocmx licenses` (`super::packages`;
//! nothing is built and no `.drv` is written).
//!
//! `--format dot` (the default) prints Graphviz text: one node per package
//! (labelled with its name and, on a second line, its GPU targets or
//! `binary`), an edge from each package to each of its direct inputs.
//! Gfx-dependent packages (`gfxDependent = true`, or a non-empty `gpuTargets`
//! list) are filled orange, gfx-independent ones light blue; packages taken
//! from a binary (`meta.fromBinary`) have a dashed border, broken ones
//! (`meta.broken`) a red one, the installable's own packages a double one. A
//! legend cluster explains the encodings. `--format svg` pipes that text
//! through Graphviz's `dot -Tsvg`. `--format json` prints
//! `{"nodes": [{"name", "gfxDependent", "gpuTargets", "fromBinary", "broken",
//! "licenses"}], "edges": [[from, to]]}`, where `gfxDependent` is the colour
//! rule above (a bool), `gpuTargets` a list or null, `fromBinary` a string or
//! null, `broken` false, true or the reason, and `licenses`
//! `[{"spdxId", "free"}]`. All output is sorted.
//!
//! Exit codes: 0 printed, 1 evaluation error or `dot` missing or failing.

use std::io::Write;
use std::process::{Command, Stdio};

use clap::{Args, ValueEnum};

use super::packages::{self, Closure, Package};
use super::StoreOpt;
use crate::flake::FlakeOpts;

/// Fill of gfx-dependent packages.
const GFX_FILL: &str = "#f4a261";
/// Fill of gfx-independent packages.
const PLAIN_FILL: &str = "#a8dadc";
/// Border of broken packages.
const BROKEN: &str = "red";

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Graphviz text.
    Dot,
    /// An SVG picture (needs Graphviz's `dot`).
    Svg,
    /// `{"nodes": [...], "edges": [[from, to], ...]}`.
    Json,
}

#[derive(Args, Debug)]
pub struct GraphArgs {
    /// FLAKEREF#ATTRPATH, or a file.
    #[arg(value_name = "INSTALLABLE", default_value = ".#default")]
    installable: String,
    /// With a file: the attribute path to draw.
    #[arg(short = 'A', long = "attr", value_name = "ATTRPATH")]
    attr: Option<String>,
    /// What to print.
    #[arg(long, value_enum, default_value = "dot")]
    format: Format,
    #[command(flatten)]
    flake: FlakeOpts,
}

pub fn run(args: GraphArgs, store_opt: &StoreOpt) -> i32 {
    let closure = match packages::load(
        store_opt,
        &args.installable,
        args.attr.as_deref(),
        &args.flake,
    ) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let text = match args.format {
        Format::Dot => dot(&closure).into_bytes(),
        Format::Json => json(&closure).into_bytes(),
        Format::Svg => match svg(&dot(&closure)) {
            Ok(b) => b,
            Err(msg) => {
                eprintln!("error: {msg}");
                return 1;
            }
        },
    };
    let _ = std::io::stdout().lock().write_all(&text);
    0
}

/// A string escaped for a quoted Graphviz string.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// A string as a quoted Graphviz ID.
fn quote(s: &str) -> String {
    format!("\"{}\"", escape(s))
}

/// The second line of a node's label, if any.
fn subtitle(p: &Package) -> Option<String> {
    match &p.gpu_targets {
        Some(t) if !t.is_empty() => Some(t.join(",")),
        _ if p.from_binary.is_some() => Some("binary".into()),
        _ => None,
    }
}

/// The attributes of a node, in `[...]` form.
fn node_attrs(p: &Package, root: bool) -> String {
    let label = match subtitle(p) {
        Some(s) => format!("\"{}\\n{}\"", escape(&p.name), escape(&s)),
        None => quote(&p.name),
    };
    let mut a = vec![
        format!("label={label}"),
        format!(
            "fillcolor=\"{}\"",
            if p.is_gfx_dependent() {
                GFX_FILL
            } else {
                PLAIN_FILL
            }
        ),
    ];
    if p.from_binary.is_some() {
        a.push("style=\"filled,dashed\"".into());
    }
    if p.broken.is_some() {
        a.push(format!("color=\"{BROKEN}\", penwidth=2"));
    }
    if root {
        a.push("peripheries=2".into());
    }
    format!("[{}]", a.join(", "))
}

/// The closure as Graphviz text.
fn dot(c: &Closure) -> String {
    let mut out = String::from("digraph closure {\n");
    out.push_str("  rankdir=LR;\n");
    out.push_str("  node [shape=box, style=filled, fontname=\"Helvetica\"];\n");
    out.push_str("  edge [color=\"#555555\"];\n");
    for p in c.packages.values() {
        let root = c.roots.binary_search(&p.name).is_ok();
        out.push_str(&format!("  {} {};\n", quote(&p.name), node_attrs(p, root)));
    }
    for p in c.packages.values() {
        for d in &p.deps {
            out.push_str(&format!("  {} -> {};\n", quote(&p.name), quote(d)));
        }
    }
    // Legend IDs hold spaces, which package names cannot.
    out.push_str("  subgraph cluster_legend {\n");
    out.push_str("    label=\"legend\";\n");
    out.push_str("    color=\"#999999\";\n");
    out.push_str("    fontname=\"Helvetica\";\n");
    for (id, attrs) in [
        (
            "legend gfx",
            format!("label=\"gfx-dependent\", fillcolor=\"{GFX_FILL}\""),
        ),
        (
            "legend plain",
            format!("label=\"gfx-independent\", fillcolor=\"{PLAIN_FILL}\""),
        ),
        (
            "legend binary",
            "label=\"from a binary\\n(dashed)\", fillcolor=\"white\", style=\"filled,dashed\""
                .to_string(),
        ),
        (
            "legend broken",
            format!(
                "label=\"broken\\n(red border)\", fillcolor=\"white\", color=\"{BROKEN}\", penwidth=2"
            ),
        ),
        (
            "legend root",
            "label=\"the installable\\n(double border)\", fillcolor=\"white\", peripheries=2"
                .to_string(),
        ),
    ] {
        out.push_str(&format!("    {} [{attrs}];\n", quote(id)));
    }
    out.push_str("  }\n}\n");
    out
}

/// The closure as JSON (see the module documentation).
fn json(c: &Closure) -> String {
    let nodes: Vec<serde_json::Value> = c
        .packages
        .values()
        .map(|p| {
            serde_json::json!({
                "name": p.name,
                "gfxDependent": p.is_gfx_dependent(),
                "gpuTargets": p.gpu_targets,
                "fromBinary": p.from_binary,
                "broken": match &p.broken {
                    None => serde_json::Value::Bool(false),
                    Some(r) if r.is_empty() => serde_json::Value::Bool(true),
                    Some(r) => serde_json::Value::String(r.clone()),
                },
                "licenses": p.licenses.iter().map(|(id, free)| serde_json::json!({"spdxId": id, "free": free})).collect::<Vec<_>>(),
            })
        })
        .collect();
    let edges: Vec<serde_json::Value> = c
        .packages
        .values()
        .flat_map(|p| p.deps.iter().map(move |d| serde_json::json!([p.name, d])))
        .collect();
    format!("{}\n", serde_json::json!({"nodes": nodes, "edges": edges}))
}

/// `dot -Tsvg` of `text`.
fn svg(text: &str) -> Result<Vec<u8>, String> {
    let child = Command::new("dot")
        .arg("-Tsvg")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err("--format svg needs Graphviz's 'dot' (Debian package graphviz); --format dot prints the graph without it".into());
        }
        Err(e) => return Err(format!("running Graphviz's 'dot': {e}")),
    };
    // Written from a thread: dot may fill its output pipe before reading all
    // of its input.
    let mut stdin = child.stdin.take().expect("piped stdin");
    let input = text.to_string();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(input.as_bytes());
    });
    let o = child
        .wait_with_output()
        .map_err(|e| format!("running Graphviz's 'dot': {e}"))?;
    let _ = writer.join();
    if !o.status.success() {
        return Err(format!(
            "Graphviz's 'dot -Tsvg' failed ({}): {}",
            o.status,
            String::from_utf8_lossy(&o.stderr).trim()
        ));
    }
    Ok(o.stdout)
}
