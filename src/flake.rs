//! The binary's side of flakes: the options every flake-using command shares
//! (`--set`, `--gfx`, `--no-write-lock-file`), telling installables
//! (`FLAKEREF#ATTRPATH`) from files, loading a root flake with the store's
//! [`Fetcher`], and writing `flake.lock`.
//!
//! Owns: the choice between evaluating a local flake in place and fetching a
//! remote one; the gfx check handed to the language's typed parameters (the
//! table is [`crate::gfx`]'s); writing the lock file atomically and saying
//! what changed. Must not: evaluate flake structure itself (that is
//! `rocmx_lang::flake`), or write a lock file that does not match.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use clap::Args;
use rocmx_lang::eval::{EResult, ErrorKind, EvalError};
use rocmx_lang::flake::load::{self, LoadOptions, LoadedFlake, LockMode, RootTree};
use rocmx_lang::flake::source::{self, FlakeRef, Source};
use rocmx_lang::flake::{InputFetcher, LockFile, ParamValue};
use rocmx_lang::Evaluator;
use rocmx_store::LocalStore;

use crate::fetcher::Fetcher;
use crate::gfx::GfxTable;

/// Options of the commands that evaluate flakes.
#[derive(Args, Debug, Clone, Default)]
pub struct FlakeOpts {
    /// Set a flake parameter (declared in the flake's `config`): NAME=VALUE, parsed by
    /// its type (bool: true/false; int; lists: comma-separated). May be repeated.
    #[arg(long = "set", value_name = "NAME=VALUE")]
    pub set: Vec<String>,
    /// The GPU targets to build for: a comma-separated list (gfx90a,gfx1100), `native`
    /// (the GPUs of this machine) or `all`. Sets the parameter `gfxTargets`.
    #[arg(long = "gfx", value_name = "LIST|native|all")]
    pub gfx: Option<String>,
    /// Never write flake.lock (a missing one is computed in memory only).
    #[arg(long = "no-write-lock-file")]
    pub no_write_lock_file: bool,
    /// Accept packages whose licence is not free (sets the parameter `allowNonfree`).
    #[arg(long = "allow-nonfree")]
    pub allow_nonfree: bool,
}

fn err(msg: impl Into<String>) -> Box<EvalError> {
    EvalError::new(ErrorKind::Eval, msg)
}

/// The check of `gfx targets` parameter values: known targets, features that
/// exist; canonical spelling.
pub fn gfx_check(l: &[String]) -> Result<Vec<String>, String> {
    GfxTable::builtin()
        .parse_list(&l.join(","))
        .map(|v| v.iter().map(|t| t.to_string()).collect())
        .map_err(|e| e.to_string())
}

impl FlakeOpts {
    /// The parameters set on the command line, as text by name.
    pub fn settings(&self) -> EResult<BTreeMap<String, String>> {
        let mut out = BTreeMap::new();
        for s in &self.set {
            let Some((name, value)) = s.split_once('=') else {
                return Err(err(format!(
                    "--set '{s}' is not NAME=VALUE (e.g. --set debug=true)"
                )));
            };
            if name.is_empty() {
                return Err(err(format!("--set '{s}' has no parameter name")));
            }
            out.insert(name.trim().to_string(), value.to_string());
        }
        if self.allow_nonfree && out.insert("allowNonfree".into(), "true".into()).is_some() {
            return Err(err(
                "--allow-nonfree and --set allowNonfree=… both set allowNonfree; give one",
            ));
        }
        if let Some(g) = &self.gfx {
            let targets = crate::gfx::resolve(g).map_err(|e| err(format!("--gfx {g}: {e}")))?;
            let text: Vec<String> = targets.iter().map(|t| t.to_string()).collect();
            if out.insert("gfxTargets".into(), text.join(",")).is_some() {
                return Err(err(
                    "--gfx and --set gfxTargets=… both set gfxTargets; give one",
                ));
            }
        }
        Ok(out)
    }
}

/// What a command-line argument names.
#[derive(Debug, Clone)]
pub enum Installable {
    /// A flake and an attribute path in it (`FLAKEREF#ATTRPATH`).
    Flake {
        reference: FlakeRef,
        fragment: String,
    },
    /// A Nix file (or a directory's `default.nix`).
    File(PathBuf),
}

/// Tells a flake reference from a file: a `#`, a URL scheme of the flake
/// grammar, or a directory holding `flake.nix` make it a flake.
pub fn parse_installable(arg: &str, cwd: &Path) -> EResult<Installable> {
    let schemes = [
        "path:", "git+", "github:", "tarball+", "http://", "https://", "flake:",
    ];
    let is_flake = arg.contains('#') || schemes.iter().any(|s| arg.starts_with(s)) || {
        let p = cwd.join(arg);
        p.is_dir() && p.join("flake.nix").is_file()
    };
    if !is_flake {
        return Ok(Installable::File(cwd.join(arg)));
    }
    let text = if arg.starts_with('#') {
        format!(".{arg}")
    } else {
        arg.to_string()
    };
    let (reference, fragment) =
        source::parse(&text, cwd, false).map_err(|e| err(format!("'{arg}': {e}")))?;
    Ok(Installable::Flake {
        reference,
        fragment,
    })
}

/// A fetcher for `store`, with the configuration's mirrors and limits.
pub fn fetcher(store: &Rc<LocalStore>) -> EResult<Rc<Fetcher>> {
    let cfg = crate::config::read().map_err(err)?;
    let mut opts = rocmx_builder::BuildOptions::default();
    cfg.apply(&mut opts).map_err(err)?;
    Ok(Rc::new(Fetcher::new(
        store.clone(),
        cfg.mirrors.clone(),
        opts.fetch_limits.clone(),
    )))
}

/// A fetcher made on first use: evaluations that may call `builtins.getFlake`
/// (any `rocmx build FILE`) but rarely do then read no configuration for it.
pub struct LazyFetcher {
    store: Rc<LocalStore>,
    made: std::cell::OnceCell<Result<Rc<Fetcher>, String>>,
}

impl LazyFetcher {
    pub fn new(store: Rc<LocalStore>) -> LazyFetcher {
        LazyFetcher {
            store,
            made: std::cell::OnceCell::new(),
        }
    }

    fn get(&self) -> Result<&Rc<Fetcher>, rocmx_lang::flake::FetchError> {
        self.made
            .get_or_init(|| fetcher(&self.store).map_err(|e| e.msg.clone()))
            .as_ref()
            .map_err(|e| rocmx_lang::flake::FetchError(e.clone()))
    }
}

impl InputFetcher for LazyFetcher {
    fn fetch(
        &self,
        source: &Source,
        base: &Path,
        expected: Option<&rocmx_store::Hash>,
    ) -> Result<rocmx_lang::flake::Fetched, rocmx_lang::flake::FetchError> {
        self.get()?.fetch(source, base, expected)
    }

    fn local_tree(
        &self,
        dir: &Path,
    ) -> Result<rocmx_lang::flake::LocalTree, rocmx_lang::flake::FetchError> {
        self.get()?.local_tree(dir)
    }
}

/// Loads the flake `reference` (in place when it is a local directory) and
/// writes its lock file when that is called for: always in `Relock` and
/// `Update` modes, in `Use` mode only to create a missing one for a flake with
/// inputs. Prints what changed in the lock on standard error.
pub fn load_root(
    ev: &mut Evaluator,
    fetcher: &Rc<Fetcher>,
    reference: &FlakeRef,
    mode: LockMode,
    opts: &FlakeOpts,
) -> EResult<LoadedFlake> {
    let dyn_fetcher: Rc<dyn InputFetcher> = fetcher.clone();
    ev.fetcher = Some(dyn_fetcher);
    let cwd = crate::cmd::common::cwd();
    let root = match &reference.source {
        Source::Path { path } if Path::new(path).is_dir() => {
            RootTree::Local(fetcher.local_tree(Path::new(path)).map_err(|e| err(e.0))?)
        }
        Source::Path { path } => {
            return Err(err(format!(
                "flake '{reference}': '{path}' is not a directory"
            )))
        }
        src => {
            let expected = match &reference.nar_hash {
                Some(h) => Some(
                    rocmx_store::Hash::parse_sri(h)
                        .map_err(|e| err(format!("flake '{reference}': narHash '{h}': {e}")))?,
                ),
                None => None,
            };
            RootTree::Fetched(
                fetcher
                    .fetch(src, &cwd, expected.as_ref())
                    .map_err(|e| err(format!("flake '{reference}': {e}")))?,
            )
        }
    };
    let set = opts.settings()?;
    let load_opts = LoadOptions {
        fetcher: &**fetcher,
        mode: mode.clone(),
        set,
        gfx: &gfx_check,
    };
    let loaded = load::load(ev, root, &reference.dir, &load_opts).map_err(|mut e| {
        let unknown = match &e.kind {
            ErrorKind::UnknownParameter { name } => name.as_str(),
            _ => "",
        };
        if opts.gfx.is_some() && unknown == "gfxTargets" {
            e.msg = format!("--gfx sets the parameter 'gfxTargets': {}", e.msg);
        } else if opts.allow_nonfree && unknown == "allowNonfree" {
            e.msg = format!(
                "--allow-nonfree sets the parameter 'allowNonfree': {}",
                e.msg
            );
        }
        e
    })?;
    let has_inputs = !loaded.lock.root_node().inputs.is_empty();
    let write = match mode {
        LockMode::Use => loaded.old_lock_text.is_none() && has_inputs,
        LockMode::Relock | LockMode::Update(_) => true,
    };
    if let (true, false, Some(path)) = (write, opts.no_write_lock_file, &loaded.lock_path) {
        if loaded.old_lock_text.as_deref() != Some(loaded.lock_text.as_str()) {
            report_changes(
                loaded
                    .old_lock_text
                    .as_deref()
                    .and_then(|t| LockFile::parse(t).ok())
                    .as_ref(),
                &loaded.lock,
                path,
            );
            write_atomically(path, &loaded.lock_text)
                .map_err(|e| err(format!("writing '{}': {e}", path.display())))?;
        }
    } else if write && loaded.lock_path.is_none() && mode != LockMode::Use {
        eprintln!("warning: not writing the lock file of flake '{reference}', which is not a local directory");
    }
    Ok(loaded)
}

fn write_atomically(path: &Path, text: &str) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::Builder::new()
        .prefix(".flake.lock.")
        .tempfile_in(dir)?;
    std::io::Write::write_all(&mut tmp, text.as_bytes())?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// "• Added input 'lib': path:./lib" lines for the top-level inputs.
fn report_changes(old: Option<&LockFile>, new: &LockFile, path: &Path) {
    if old.is_none() {
        eprintln!("warning: creating lock file '{}'", path.display());
    } else {
        eprintln!("warning: updating lock file '{}'", path.display());
    }
    let describe = |l: &LockFile, name: &str| -> Option<String> {
        let edge = l.root_node().inputs.get(name)?;
        let node = l.nodes.get(&l.resolve(edge).ok()?)?;
        let lk = node.locked.as_ref()?;
        Some(format!("'{}' ({})", lk.source, lk.nar_hash))
    };
    let mut names: Vec<&String> = new.root_node().inputs.keys().collect();
    if let Some(o) = old {
        names.extend(o.root_node().inputs.keys());
    }
    names.sort();
    names.dedup();
    for name in names {
        let before = old.and_then(|o| describe(o, name));
        let after = describe(new, name);
        match (before, after) {
            (None, Some(a)) => eprintln!("• Added input '{name}': {a}"),
            (Some(_), None) => eprintln!("• Removed input '{name}'"),
            (Some(b), Some(a)) if a != b => eprintln!("• Updated input '{name}': {b} → {a}"),
            _ => {}
        }
    }
}

/// The parameters in force, as JSON.
pub fn params_json(params: &BTreeMap<String, ParamValue>) -> serde_json::Value {
    serde_json::Value::Object(
        params
            .iter()
            .map(|(k, v)| (k.clone(), v.to_json()))
            .collect(),
    )
}
