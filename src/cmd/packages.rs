//! The package walk shared by `rocmx licenses` and `rocmx graph`: an
//! installable resolved to a value, then the package values reachable from it.
//!
//! The closure is walked through the package values, not the `.drv` files
//! (which carry no `meta`): a derivation value's (an attribute set with
//! `type = "derivation"`) `nativeBuildInputs`, `buildInputs`,
//! `propagatedBuildInputs` and `rootfs` are followed, through lists; at the
//! top, a list or a plain set is searched for derivations. Fixed-output
//! derivations (with `outputHash`: fetched sources and `.deb`s) are not
//! packages and are skipped. Packages are keyed by `name` (two derivations
//! of one name are one package).
//!
//! Read from each package: `meta.license` (a licence set from
//! `exprs/lib/licenses.nix`, a list of them, or an SPDX string; an error there
//! stops the walk), and, leniently (an error or an unexpected type reads as
//! absent), `gfxDependent`, `gpuTargets`, `meta.fromBinary` and `meta.broken`.
//! `drvPath` and `outPath` are never forced: they throw on purpose for
//! non-free or broken packages.

use std::collections::BTreeMap;
use std::rc::Rc;

use rocmx_lang::eval::{EResult, ErrorKind, EvalError};
use rocmx_lang::flake::load::LockMode;
use rocmx_lang::value::Attrs;
use rocmx_lang::{EvalSettings, Evaluator, Value};

use super::common::{auto_call, cwd, select, split_attr_path};
use super::StoreOpt;
use crate::evalstore::LocalEvalStore;
use crate::flake::{parse_installable, FlakeOpts, Installable};

/// The inputs followed from a package, in this order. `rootfs` is the build
/// root of a stdenv package (a Debian root, itself a package); `src` is not
/// followed: a source carries its package's licence, and the fetches
/// (fixed outputs) behind sources and roots are not packages.
const INPUTS: [&str; 4] = [
    "nativeBuildInputs",
    "buildInputs",
    "propagatedBuildInputs",
    "rootfs",
];

/// Walks nested deeper than this are cut off.
const MAX_DEPTH: usize = 200;

/// One package of the closure.
#[derive(Debug, Clone, Default)]
pub struct Package {
    pub name: String,
    /// `meta.license`: (SPDX id or name, free), in order; empty when absent.
    pub licenses: Vec<(String, bool)>,
    /// The top-level `gfxDependent` attribute, when a bool.
    pub gfx_dependent: Option<bool>,
    /// The top-level `gpuTargets` attribute, when a list of strings (`None`
    /// when absent, null or anything else).
    pub gpu_targets: Option<Vec<String>>,
    /// `meta.fromBinary` (why the package is taken from a binary), when a string.
    pub from_binary: Option<String>,
    /// `meta.broken`: `Some("")` for `true`, `Some(reason)` for a string,
    /// `None` when absent or false.
    pub broken: Option<String>,
    /// The names of the direct inputs (sorted, without duplicates or itself).
    pub deps: Vec<String>,
}

impl Package {
    /// Built for particular GPU targets: `gfxDependent = true`, or a non-empty
    /// `gpuTargets` list.
    pub fn is_gfx_dependent(&self) -> bool {
        self.gfx_dependent == Some(true) || self.gpu_targets.as_ref().is_some_and(|t| !t.is_empty())
    }
}

/// The packages reachable from an installable.
#[derive(Debug, Clone, Default)]
pub struct Closure {
    /// By name.
    pub packages: BTreeMap<String, Package>,
    /// The names of the packages the installable itself names (sorted).
    pub roots: Vec<String>,
}

/// Resolves `installable` (`FLAKEREF#ATTRPATH`, or a file with `attr`), walks
/// its packages and returns them. On an evaluation error, prints it (rendered)
/// and returns the exit code (1); so does a store that cannot be opened.
pub fn load(
    store_opt: &StoreOpt,
    installable: &str,
    attr: Option<&str>,
    flake: &FlakeOpts,
) -> Result<Closure, i32> {
    let store = super::common::open_store_or_exit(store_opt)?;
    let eval_store = Rc::new(LocalEvalStore::new(store.clone()));
    let mut ev = Evaluator::new(EvalSettings::default(), eval_store);
    let r = (|| -> EResult<Closure> {
        let root = resolve(&mut ev, &store, installable, attr, flake)?;
        walk_closure(&mut ev, &root)
    })();
    let r = match r {
        Ok(c) => Ok(c),
        Err(e) => {
            eprint!("{}", ev.sources.render(&e, false));
            Err(1)
        }
    };
    // Freeing the evaluator's values costs time and serves nothing here.
    std::mem::forget(ev);
    r
}

/// The value an installable names: a flake output (with the flake's
/// parameters from `flake`), or a file's value, auto-called and selected along
/// `attr`.
pub fn resolve(
    ev: &mut Evaluator,
    store: &Rc<rocmx_store::LocalStore>,
    installable: &str,
    attr: Option<&str>,
    flake: &FlakeOpts,
) -> EResult<Value> {
    match parse_installable(installable, &cwd())? {
        Installable::Flake {
            reference,
            fragment,
        } => {
            let fetcher = crate::flake::fetcher(store)?;
            let l = crate::flake::load_root(ev, &fetcher, &reference, LockMode::Use, flake)?;
            let system = ev.settings.system.clone();
            Ok(rocmx_lang::flake::installable::resolve(
                ev,
                &l.value,
                &fragment,
                &system,
                &reference.to_string(),
            )?
            .0)
        }
        Installable::File(p) => {
            let none = Rc::new(Attrs::new());
            let mut v = ev.eval_file(&p)?;
            for name in split_attr_path(attr.unwrap_or(""))? {
                v = auto_call(ev, &v, &none)?;
                v = select(ev, &v, &name, attr.unwrap_or(""))?;
            }
            auto_call(ev, &v, &none)
        }
    }
}

/// The packages reachable from `root`.
pub fn walk_closure(ev: &mut Evaluator, root: &Value) -> EResult<Closure> {
    let mut packages = BTreeMap::new();
    let mut roots = Vec::new();
    walk(ev, root, &mut packages, 0, &mut roots)?;
    roots.sort();
    roots.dedup();
    Ok(Closure { packages, roots })
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

/// An attribute forced, `None` when absent or when it fails to evaluate.
fn lenient(ev: &mut Evaluator, a: &Attrs, k: &str) -> Option<Value> {
    let v = a.get(k)?.clone();
    ev.force(&v).ok()
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

/// `gpuTargets`: a list of strings, else `None`.
fn gpu_targets_of(ev: &mut Evaluator, a: &Attrs) -> Option<Vec<String>> {
    let Value::List(l) = lenient(ev, a, "gpuTargets")? else {
        return None;
    };
    let mut out = Vec::new();
    for x in l.iter() {
        match ev.force(x).ok()? {
            Value::String(s) => out.push(s.as_str().to_string()),
            _ => return None,
        }
    }
    Some(out)
}

/// Visits a value: a derivation is recorded (its name pushed onto `found`) and
/// its inputs followed; lists, and plain sets at the top, are searched for
/// derivations.
fn walk(
    ev: &mut Evaluator,
    v: &Value,
    seen: &mut BTreeMap<String, Package>,
    depth: usize,
    found: &mut Vec<String>,
) -> EResult<()> {
    if depth > MAX_DEPTH {
        return Ok(());
    }
    match ev.force(v)? {
        Value::List(l) => {
            for x in l.iter() {
                walk(ev, x, seen, depth + 1, found)?;
            }
        }
        Value::Attrs(a) => {
            let is_drv = str_of(ev, &a, "type")?.as_deref() == Some("derivation");
            if !is_drv {
                if depth == 0 {
                    for x in a.values().cloned().collect::<Vec<_>>() {
                        walk(ev, &x, seen, depth + 1, found)?;
                    }
                }
                return Ok(());
            }
            if a.get("outputHash").is_some() {
                return Ok(());
            }
            // By name: the drvPath of a non-free package is guarded (reading
            // it would stop the listing at the first one).
            let name = str_of(ev, &a, "name")?.unwrap_or_else(|| "?".into());
            found.push(name.clone());
            if seen.contains_key(&name) {
                return Ok(());
            }
            let mut p = Package {
                name: name.clone(),
                ..Package::default()
            };
            let meta = match a.get("meta") {
                Some(meta) => match ev.force(&meta.clone())? {
                    Value::Attrs(m) => Some(m),
                    _ => None,
                },
                None => None,
            };
            if let Some(m) = &meta {
                if let Some(l) = m.get("license") {
                    match ev.force(&l.clone())? {
                        Value::List(items) => {
                            for x in items.iter() {
                                p.licenses.push(licence_of(ev, x)?);
                            }
                        }
                        other => p.licenses.push(licence_of(ev, &other)?),
                    }
                }
                p.from_binary = match lenient(ev, m, "fromBinary") {
                    Some(Value::String(s)) => Some(s.as_str().to_string()),
                    _ => None,
                };
                p.broken = match lenient(ev, m, "broken") {
                    Some(Value::Bool(rocmx_lang::value::Flag::True)) => Some(String::new()),
                    Some(Value::String(s)) => Some(s.as_str().to_string()),
                    _ => None,
                };
            }
            p.gfx_dependent = match lenient(ev, &a, "gfxDependent") {
                Some(Value::Bool(b)) => Some(b.get()),
                _ => None,
            };
            p.gpu_targets = gpu_targets_of(ev, &a);
            seen.insert(name.clone(), p);
            let mut deps = Vec::new();
            for k in INPUTS {
                if let Some(x) = a.get(k) {
                    walk(ev, &x.clone(), seen, depth + 1, &mut deps)?;
                }
            }
            deps.sort();
            deps.dedup();
            deps.retain(|d| *d != name);
            if let Some(p) = seen.get_mut(&name) {
                p.deps = deps;
            }
        }
        _ => {}
    }
    Ok(())
}
