//! `rocmx licenses INSTALLABLE`: the licence of every package in the build
//! closure of an installable, the non-free ones marked.
//!
//! The closure is walked through the package values, not the `.drv` files
//! (which carry no `meta`): a derivation value's `nativeBuildInputs`,
//! `buildInputs`, `propagatedBuildInputs` and `src` are followed. `meta.license`
//! is a licence set (`exprs/lib/licenses.nix`), a list of them, or an SPDX
//! string. Packages without `meta.license` are listed as `unknown`.
//!
//! Exit codes: 0 listed (whatever the licences), 1 evaluation error.

use std::collections::BTreeMap;
use std::io::Write;
use std::rc::Rc;

use clap::Args;
use rocmx_lang::eval::{EResult, ErrorKind, EvalError};
use rocmx_lang::flake::load::LockMode;
use rocmx_lang::value::Attrs;
use rocmx_lang::{EvalSettings, Evaluator, Value};

use super::common::{auto_call, cwd, select, split_attr_path};
use super::StoreOpt;
use crate::evalstore::LocalEvalStore;
use crate::flake::{parse_installable, FlakeOpts, Installable};

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

/// One package's entry.
struct Entry {
    licenses: Vec<(String, bool)>,
}

pub fn run(args: LicensesArgs, store_opt: &StoreOpt) -> i32 {
    let store = match super::path_info::open_store_or_exit(store_opt) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let eval_store = Rc::new(LocalEvalStore::new(store.clone()));
    let mut ev = Evaluator::new(EvalSettings::default(), eval_store);
    let r = (|| -> EResult<String> {
        let root = match parse_installable(&args.installable, &cwd())? {
            Installable::Flake {
                reference,
                fragment,
            } => {
                let fetcher = crate::flake::fetcher(&store)?;
                let l = crate::flake::load_root(
                    &mut ev,
                    &fetcher,
                    &reference,
                    LockMode::Use,
                    &args.flake,
                )?;
                let system = ev.settings.system.clone();
                rocmx_lang::flake::installable::resolve(
                    &mut ev,
                    &l.value,
                    &fragment,
                    &system,
                    &reference.to_string(),
                )?
                .0
            }
            Installable::File(p) => {
                let none = Rc::new(Attrs::new());
                let mut v = ev.eval_file(&p)?;
                for name in split_attr_path(args.attr.as_deref().unwrap_or(""))? {
                    v = auto_call(&mut ev, &v, &none)?;
                    v = select(&mut ev, &v, &name)?;
                }
                auto_call(&mut ev, &v, &none)?
            }
        };
        let mut seen: BTreeMap<String, Entry> = BTreeMap::new();
        walk(&mut ev, &root, &mut seen, 0)?;
        Ok(render(&seen, args.json))
    })();
    let code = match r {
        Ok(text) => {
            let _ = std::io::stdout().lock().write_all(text.as_bytes());
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

fn str_of(ev: &mut Evaluator, a: &Attrs, k: &str) -> EResult<Option<String>> {
    match a.get(k) {
        Some(v) => match ev.force(&v.clone())? {
            Value::String(s) => Ok(Some(s.as_str().to_string())),
            _ => Ok(None),
        },
        None => Ok(None),
    }
}

fn licence_of(ev: &mut Evaluator, v: &Value) -> EResult<(String, bool)> {
    match ev.force(v)? {
        Value::String(s) => Ok((s.as_str().to_string(), true)),
        Value::Attrs(a) => {
            let id = match str_of(ev, &a, "spdxId")? {
                Some(s) => s,
                None => str_of(ev, &a, "fullName")?.unwrap_or_else(|| "unnamed".into()),
            };
            let free = match a.get("free") {
                Some(f) => ev.expect_bool(&f.clone())?,
                None => true,
            };
            Ok((id, free))
        }
        other => Err(EvalError::new(
            ErrorKind::Type,
            format!(
                "meta.license is {}, not a licence",
                other.type_().described()
            ),
        )),
    }
}

/// Visits a value: a derivation is listed and its inputs followed; lists and
/// plain sets at the top are searched for derivations.
fn walk(
    ev: &mut Evaluator,
    v: &Value,
    seen: &mut BTreeMap<String, Entry>,
    depth: usize,
) -> EResult<()> {
    if depth > 200 {
        return Ok(());
    }
    match ev.force(v)? {
        Value::List(l) => {
            for x in l.iter() {
                walk(ev, x, seen, depth + 1)?;
            }
        }
        Value::Attrs(a) => {
            let is_drv = str_of(ev, &a, "type")?.as_deref() == Some("derivation");
            if !is_drv {
                if depth == 0 {
                    for x in a.values().cloned().collect::<Vec<_>>() {
                        walk(ev, &x, seen, depth + 1)?;
                    }
                }
                return Ok(());
            }
            // By name: the drvPath of a non-free package is guarded (reading
            // it would stop the listing at the first one).
            let name = str_of(ev, &a, "name")?.unwrap_or_else(|| "?".into());
            let label = name.clone();
            if seen.contains_key(&label) {
                return Ok(());
            }
            let mut licenses = Vec::new();
            if let Some(meta) = a.get("meta") {
                if let Value::Attrs(m) = ev.force(&meta.clone())? {
                    if let Some(l) = m.get("license") {
                        match ev.force(&l.clone())? {
                            Value::List(items) => {
                                for x in items.iter() {
                                    licenses.push(licence_of(ev, x)?);
                                }
                            }
                            other => licenses.push(licence_of(ev, &other)?),
                        }
                    }
                }
            }
            seen.insert(label, Entry { licenses });
            for k in [
                "nativeBuildInputs",
                "buildInputs",
                "propagatedBuildInputs",
                "src",
            ] {
                if let Some(x) = a.get(k) {
                    walk(ev, &x.clone(), seen, depth + 1)?;
                }
            }
        }
        _ => {}
    }
    Ok(())
}

fn render(seen: &BTreeMap<String, Entry>, json: bool) -> String {
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
