//! `rocmx flake lock | update | show | metadata`.
//!
//! ```text
//! rocmx flake lock     [FLAKEREF]              lock what flake.nix declares (add, drop)
//! rocmx flake update   [INPUT…] [--flake REF]  fetch the named inputs (or all) anew
//! rocmx flake show     [FLAKEREF] [--json]     the outputs and the declared parameters
//! rocmx flake metadata [FLAKEREF] [--json]     description, location, revision, inputs
//! ```
//!
//! FLAKEREF defaults to `.`. Owns the rendering of the output tree and the
//! metadata; loading and locking are `crate::flake`'s and the language's.
//! Exit codes: 0 success, 1 an error (nothing written).

use std::collections::BTreeSet;
use std::io::Write;
use std::rc::Rc;

use clap::{Args, Subcommand};
use rocmx_lang::eval::{EResult, ErrorKind, EvalError};
use rocmx_lang::flake::load::{LoadedFlake, LockMode, RootTree};
use rocmx_lang::flake::lock::Edge;
use rocmx_lang::flake::LockFile;
use rocmx_lang::value::Attrs;
use rocmx_lang::{EvalSettings, Evaluator, Value};
use serde_json::{json, Map, Value as Json};

use super::common::cwd;
use super::StoreOpt;
use crate::evalstore::LocalEvalStore;
use crate::flake::{load_root, parse_installable, FlakeOpts, Installable};

#[derive(Args, Debug)]
pub struct FlakeArgs {
    #[command(subcommand)]
    command: FlakeCommand,
}

#[derive(Subcommand, Debug)]
enum FlakeCommand {
    /// Lock the inputs flake.nix declares: add missing ones, drop stale ones, keep the rest.
    Lock {
        /// The flake (default `.`).
        #[arg(value_name = "FLAKEREF", default_value = ".")]
        flake: String,
        #[command(flatten)]
        opts: FlakeOpts,
    },
    /// Fetch the named inputs (default: all) anew and record them in flake.lock.
    Update {
        /// Inputs to update (`name`, or `name/sub` for an input's input).
        #[arg(value_name = "INPUT")]
        inputs: Vec<String>,
        /// The flake (default `.`).
        #[arg(long = "flake", value_name = "FLAKEREF", default_value = ".")]
        flake: String,
        #[command(flatten)]
        opts: FlakeOpts,
    },
    /// Show the flake's outputs as a tree, and its parameters (type, default, value).
    Show {
        #[arg(value_name = "FLAKEREF", default_value = ".")]
        flake: String,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        opts: FlakeOpts,
    },
    /// Show the flake's description, location, revision and locked inputs.
    Metadata {
        #[arg(value_name = "FLAKEREF", default_value = ".")]
        flake: String,
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        opts: FlakeOpts,
    },
}

fn err(msg: impl Into<String>) -> Box<EvalError> {
    EvalError::new(ErrorKind::Eval, msg)
}

pub fn run(args: FlakeArgs, store_opt: &StoreOpt) -> i32 {
    let store = match super::common::open_store_or_exit(store_opt) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let eval_store = Rc::new(LocalEvalStore::new(store.clone()));
    let mut ev = Evaluator::new(EvalSettings::default(), eval_store.clone());
    let r = run_in(&mut ev, &store, args.command).and_then(|out| {
        eval_store.flush()?;
        Ok(out)
    });
    let code = match r {
        Ok(out) => {
            let _ = std::io::stdout().lock().write_all(out.as_bytes());
            0
        }
        Err(e) => {
            eprint!("{}", ev.sources.render(&e, false));
            1
        }
    };
    std::mem::forget(ev);
    code
}

fn load(
    ev: &mut Evaluator,
    store: &Rc<rocmx_store::LocalStore>,
    flake: &str,
    mode: LockMode,
    opts: &FlakeOpts,
) -> EResult<LoadedFlake> {
    let reference = match parse_installable(flake, &cwd())? {
        Installable::Flake {
            reference,
            fragment,
        } => {
            if !fragment.is_empty() {
                return Err(err(format!(
                    "'{flake}': these commands take a flake, not an attribute ('#{fragment}')"
                )));
            }
            reference
        }
        Installable::File(p) => {
            return Err(err(format!(
                "'{}' is not a flake: it has no flake.nix",
                p.display()
            )))
        }
    };
    let fetcher = crate::flake::fetcher(store)?;
    load_root(ev, &fetcher, &reference, mode, opts)
}

fn run_in(
    ev: &mut Evaluator,
    store: &Rc<rocmx_store::LocalStore>,
    cmd: FlakeCommand,
) -> EResult<String> {
    match cmd {
        FlakeCommand::Lock { flake, opts } => {
            load(ev, store, &flake, LockMode::Relock, &opts)?;
            Ok(String::new())
        }
        FlakeCommand::Update {
            inputs,
            flake,
            opts,
        } => {
            let names: BTreeSet<String> = inputs.into_iter().collect();
            let l = load(ev, store, &flake, LockMode::Update(names.clone()), &opts)?;
            // Every name must be an input somewhere in the graph.
            for n in &names {
                if !input_exists(&l.lock, n) {
                    let declared: Vec<String> = l.lock.root_node().inputs.keys().cloned().collect();
                    return Err(err(format!(
                        "the flake has no input '{n}'; its inputs: {}",
                        if declared.is_empty() {
                            "none".to_string()
                        } else {
                            declared.join(", ")
                        }
                    )));
                }
            }
            Ok(String::new())
        }
        FlakeCommand::Show { flake, json, opts } => {
            let l = load(ev, store, &flake, LockMode::Use, &opts)?;
            show(ev, &l, json)
        }
        FlakeCommand::Metadata { flake, json, opts } => {
            let l = load(ev, store, &flake, LockMode::Use, &opts)?;
            metadata(&l, json)
        }
    }
}

fn input_exists(lock: &LockFile, path: &str) -> bool {
    let mut node = lock.root.clone();
    for name in path.split('/') {
        let Some(e) = lock.nodes[&node].inputs.get(name) else {
            return false;
        };
        match lock.resolve(e) {
            Ok(n) => node = n,
            Err(_) => return false,
        }
    }
    true
}

/// The outputs as a JSON-able tree: derivations as `{type, name, description}`,
/// sets recursed, other values by type. `legacyPackages` is not descended into.
fn output_tree(ev: &mut Evaluator, v: &Value, depth: usize) -> EResult<Json> {
    let v = ev.force(v)?;
    match &v {
        Value::Attrs(a) => {
            if let Some(d) = derivation_info(ev, a)? {
                return Ok(d);
            }
            if depth > 8 {
                return Ok(json!({ "type": "set" }));
            }
            let mut m = Map::new();
            for (k, x) in a.iter() {
                m.insert(k.to_string(), output_tree(ev, x, depth + 1)?);
            }
            Ok(Json::Object(m))
        }
        Value::Lambda(_) | Value::PrimOp(_) => Ok(json!({ "type": "function" })),
        other => Ok(json!({ "type": other.type_().type_of() })),
    }
}

fn derivation_info(ev: &mut Evaluator, a: &Attrs) -> EResult<Option<Json>> {
    let is_drv = match a.get("type") {
        Some(t) => matches!(ev.force(&t.clone())?, Value::String(s) if s.as_str() == "derivation"),
        None => false,
    };
    if !is_drv {
        return Ok(None);
    }
    let mut m = Map::new();
    m.insert("type".into(), json!("derivation"));
    if let Some(n) = a.get("name") {
        if let Value::String(s) = ev.force(&n.clone())? {
            m.insert("name".into(), json!(s.as_str()));
        }
    }
    if let Some(meta) = a.get("meta") {
        if let Value::Attrs(meta) = ev.force(&meta.clone())? {
            if let Some(d) = meta.get("description") {
                if let Value::String(s) = ev.force(&d.clone())? {
                    m.insert("description".into(), json!(s.as_str()));
                }
            }
        }
    }
    Ok(Some(Json::Object(m)))
}

fn params_json(l: &LoadedFlake) -> Json {
    let mut m = Map::new();
    for d in &l.decl.params {
        let mut p = Map::new();
        p.insert("type".into(), json!(d.ty.name()));
        if let Some(v) = &d.default {
            p.insert("default".into(), v.to_json());
        }
        if let Some(v) = l.params.get(&d.name) {
            p.insert("value".into(), v.to_json());
        }
        if let Some(s) = &d.description {
            p.insert("description".into(), json!(s));
        }
        m.insert(d.name.clone(), Json::Object(p));
    }
    Json::Object(m)
}

fn show(ev: &mut Evaluator, l: &LoadedFlake, as_json: bool) -> EResult<String> {
    let outputs = match ev.force(&l.value)? {
        Value::Attrs(a) => a.get("outputs").cloned(),
        _ => None,
    }
    .ok_or_else(|| err("the flake has no outputs"))?;
    let mut tree = Map::new();
    if let Value::Attrs(a) = ev.force(&outputs)? {
        for (k, x) in a.iter() {
            let t = if k.as_str() == "legacyPackages" {
                json!({ "type": "omitted" })
            } else {
                output_tree(ev, x, 0)?
            };
            tree.insert(k.to_string(), t);
        }
    }
    if as_json {
        let j = json!({
            "description": l.decl.description,
            "outputs": Json::Object(tree),
            "parameters": params_json(l),
        });
        return Ok(format!("{j}\n"));
    }
    let mut out = String::new();
    out.push_str(&flake_url(l));
    if let Some(d) = &l.decl.description {
        out.push_str(&format!(": {d}"));
    }
    out.push('\n');
    let mut top: Vec<(String, Json)> = tree.into_iter().collect();
    let params = params_json(l);
    let has_params = params.as_object().is_some_and(|m| !m.is_empty());
    if has_params {
        top.push(("«parameters»".into(), Json::Null));
    }
    let n = top.len();
    for (i, (k, v)) in top.into_iter().enumerate() {
        let last = i + 1 == n;
        if k == "«parameters»" {
            out.push_str(&format!(
                "{}parameters\n",
                if last { "└───" } else { "├───" }
            ));
            let pm = params.as_object().cloned().unwrap_or_default();
            let pn = pm.len();
            for (j, (name, p)) in pm.into_iter().enumerate() {
                let plast = j + 1 == pn;
                let pre = if last { "    " } else { "│   " };
                let branch = if plast {
                    "└───"
                } else {
                    "├───"
                };
                let text = |x: Option<&Json>| x.map(show_json).unwrap_or_else(|| "—".into());
                let mut line = format!(
                    "{pre}{branch}{name} ({}) = {} [default: {}]",
                    p["type"].as_str().unwrap_or(""),
                    text(p.get("value")),
                    text(p.get("default"))
                );
                if let Some(d) = p.get("description").and_then(Json::as_str) {
                    line.push_str(&format!(": {d}"));
                }
                out.push_str(&line);
                out.push('\n');
            }
        } else {
            render_tree(&mut out, "", &k, &v, last);
        }
    }
    Ok(out)
}

fn show_json(v: &Json) -> String {
    match v {
        Json::String(s) => s.clone(),
        Json::Array(a) => a.iter().map(show_json).collect::<Vec<_>>().join(","),
        other => other.to_string(),
    }
}

fn render_tree(out: &mut String, prefix: &str, name: &str, v: &Json, last: bool) {
    let branch = if last { "└───" } else { "├───" };
    let leaf = v
        .as_object()
        .and_then(|m| m.get("type"))
        .and_then(Json::as_str)
        .map(str::to_string);
    match leaf.as_deref() {
        Some("derivation") => {
            let m = v.as_object().cloned().unwrap_or_default();
            let mut line = format!(
                "{prefix}{branch}{name}: package '{}'",
                m.get("name").and_then(Json::as_str).unwrap_or("?")
            );
            if let Some(d) = m.get("description").and_then(Json::as_str) {
                line.push_str(&format!(" — {d}"));
            }
            out.push_str(&line);
            out.push('\n');
        }
        Some(t) if v.as_object().is_some_and(|m| m.len() == 1) => {
            out.push_str(&format!("{prefix}{branch}{name}: {t}\n"));
        }
        _ => {
            out.push_str(&format!("{prefix}{branch}{name}\n"));
            let m = v.as_object().cloned().unwrap_or_default();
            let n = m.len();
            let child_prefix = format!("{prefix}{}", if last { "    " } else { "│   " });
            for (i, (k, x)) in m.into_iter().enumerate() {
                render_tree(out, &child_prefix, &k, &x, i + 1 == n);
            }
        }
    }
}

fn flake_url(l: &LoadedFlake) -> String {
    match &l.root {
        RootTree::Local(t) => format!("path:{}", t.dir.display()),
        RootTree::Fetched(f) => f.locked.to_string(),
    }
}

fn metadata(l: &LoadedFlake, as_json: bool) -> EResult<String> {
    let (path, rev, dirty) = match &l.root {
        RootTree::Local(t) => (
            t.dir.display().to_string(),
            t.git.as_ref().and_then(|g| g.rev.clone()),
            t.git.as_ref().and_then(|g| g.dirty_rev.clone()),
        ),
        RootTree::Fetched(f) => (
            f.store_path.clone(),
            f.locked.rev().map(str::to_string),
            None,
        ),
    };
    let lock_json: Json = serde_json::from_str(&l.lock_text).unwrap_or(Json::Null);
    if as_json {
        let mut m = Map::new();
        m.insert("url".into(), json!(flake_url(l)));
        m.insert("path".into(), json!(path));
        m.insert("description".into(), json!(l.decl.description));
        if let Some(r) = &rev {
            m.insert("revision".into(), json!(r));
        }
        if let Some(r) = &dirty {
            m.insert("dirtyRevision".into(), json!(format!("{r}-dirty")));
        }
        if let RootTree::Fetched(f) = &l.root {
            m.insert("narHash".into(), json!(f.nar_hash.to_sri()));
        }
        m.insert("locks".into(), lock_json);
        m.insert("parameters".into(), params_json(l));
        return Ok(format!("{}\n", Json::Object(m)));
    }
    let mut out = String::new();
    out.push_str(&format!("URL:           {}\n", flake_url(l)));
    if let Some(d) = &l.decl.description {
        out.push_str(&format!("Description:   {d}\n"));
    }
    out.push_str(&format!("Path:          {path}\n"));
    if let Some(r) = &rev {
        out.push_str(&format!("Revision:      {r}\n"));
    }
    if let Some(r) = &dirty {
        out.push_str(&format!("Revision:      {r}-dirty\n"));
    }
    if let RootTree::Fetched(f) = &l.root {
        out.push_str(&format!("NAR hash:      {}\n", f.nar_hash.to_sri()));
    }
    if !l.lock.root_node().inputs.is_empty() {
        out.push_str("Inputs:\n");
        render_inputs(&mut out, &l.lock, &l.lock.root, "", 0);
    }
    Ok(out)
}

fn render_inputs(out: &mut String, lock: &LockFile, node: &str, prefix: &str, depth: usize) {
    let inputs = &lock.nodes[node].inputs;
    let n = inputs.len();
    for (i, (name, e)) in inputs.iter().enumerate() {
        let last = i + 1 == n;
        let branch = if last { "└───" } else { "├───" };
        match e {
            Edge::Follows(p) => out.push_str(&format!(
                "{prefix}{branch}{name} follows input '{}'\n",
                p.join("/")
            )),
            Edge::Node(t) => {
                let desc = lock.nodes[t]
                    .locked
                    .as_ref()
                    .map(|l| format!("{} ({})", l.source, l.nar_hash))
                    .unwrap_or_default();
                out.push_str(&format!("{prefix}{branch}{name}: {desc}\n"));
                if depth < 16 {
                    let p = format!("{prefix}{}", if last { "    " } else { "│   " });
                    render_inputs(out, lock, t, &p, depth + 1);
                }
            }
        }
    }
}
