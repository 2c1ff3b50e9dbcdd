//! Loading a flake: locking the inputs its `flake.nix` declares (read by
//! [`super::decl`]) and calling `outputs`, a function of `{ self, config,
//! NAME… }`, with `self`, the parameters ([`super::params`]) and the inputs.
//!
//! A local root flake is evaluated in place: nothing is copied to the store
//! but what derivations reference (through path values), and in a git work
//! tree only tracked files can be seen ([`super::TrackedTree`], enforced by
//! the file builtins). Inputs are fetched into the store through the
//! [`InputFetcher`] with their locked NAR hash; an input flake's `outputs` is
//! called only when something uses it.
//!
//! Locking ([`LockMode`]): `Use` reuses `flake.lock` and refuses one that does
//! not match `inputs` (a missing lock file is created); `Relock` adds what is
//! missing and drops what is no longer declared (`rocmx flake lock`);
//! `Update` refetches the named inputs, or all (`rocmx flake update`). The new
//! lock is returned as text; writing it is the caller's business.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use rocmx_store::{Hash, HashAlgo};

use super::decl::err_at;
pub use super::decl::{read_flake, FlakeDecl, InputDecl};
use super::fetch::{Fetched, InputFetcher, LocalTree, Tracked};
use super::lock::{Edge, LockFile, Locked, Node};
use super::params::{self, GfxCheck, ParamValue};
use super::source;
use crate::eval::{ir::Pos, EResult, ErrorKind, EvalError, Evaluator};
use crate::value::{Attrs, Context, ContextElem, NixString, Sym, Value};

fn err(msg: impl Into<String>) -> Box<EvalError> {
    EvalError::new(ErrorKind::Eval, msg)
}

/// How the lock file is treated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LockMode {
    /// Use `flake.lock`; refuse one that does not match (create a missing one).
    Use,
    /// Lock what is missing, drop what is no longer declared.
    Relock,
    /// Fetch these inputs anew (input paths `a` or `a/b`; empty: all).
    Update(BTreeSet<String>),
}

/// What to load and how.
pub struct LoadOptions<'a> {
    pub fetcher: &'a dyn InputFetcher,
    pub mode: LockMode,
    /// Parameters from the command line, as text by name.
    pub set: BTreeMap<String, String>,
    pub gfx: GfxCheck<'a>,
}

/// Where the root flake lives.
#[derive(Clone, Debug)]
pub enum RootTree {
    /// A local directory, evaluated in place.
    Local(LocalTree),
    /// A fetched tree in the store.
    Fetched(Fetched),
}

/// A loaded flake.
pub struct LoadedFlake {
    /// The flake's value: its outputs plus `outPath`, `inputs`, `config`, …
    pub value: Value,
    pub decl: Rc<FlakeDecl>,
    pub root: RootTree,
    /// The parameters in force.
    pub params: BTreeMap<String, ParamValue>,
    pub lock: LockFile,
    /// The previous `flake.lock` text, if there was one.
    pub old_lock_text: Option<String>,
    /// The text of the lock as it should be (equal to the old one when nothing
    /// changed).
    pub lock_text: String,
    /// Where `flake.lock` lives (physical), for local roots.
    pub lock_path: Option<PathBuf>,
}

/// Everything fetched for a flake's inputs, kept for evaluation.
struct Graph {
    lock: LockFile,
    trees: HashMap<String, Fetched>,
    decls: HashMap<String, Rc<FlakeDecl>>,
    values: RefCell<HashMap<String, Value>>,
}

struct Locker<'a, 'b> {
    opts: &'a LoadOptions<'b>,
    old: Option<&'a LockFile>,
    new: LockFile,
    trees: HashMap<String, Fetched>,
    decls: HashMap<String, Rc<FlakeDecl>>,
}

fn sri(h: &Hash) -> String {
    h.to_sri()
}

impl Locker<'_, '_> {
    fn unique_name(&self, want: &str) -> String {
        if !self.new.nodes.contains_key(want) {
            return want.to_string();
        }
        (2..)
            .map(|i| format!("{want}_{i}"))
            .find(|n| !self.new.nodes.contains_key(n))
            .unwrap_or_default()
    }

    fn updating(&self, path: &str) -> bool {
        match &self.opts.mode {
            LockMode::Update(set) => {
                set.is_empty()
                    || set
                        .iter()
                        .any(|s| s == path || path.starts_with(&format!("{s}/")))
            }
            _ => false,
        }
    }

    // The arguments are the position in two graphs at once (the new lock's
    // node and the old lock's), where the flake lives and which overrides
    // apply; bundling them would only rename them.
    #[allow(clippy::too_many_arguments)]
    /// Locks the inputs of `decl`, recorded under node `node`. `old_node` is the
    /// same node in the old lock; `base` is the physical directory of the flake.
    fn lock_node(
        &mut self,
        ev: &mut Evaluator,
        decl: &FlakeDecl,
        node: &str,
        old_node: Option<&str>,
        base: &Path,
        path: &[String],
        overrides: &BTreeMap<String, Vec<String>>,
    ) -> EResult<()> {
        if path.len() > MAX_INPUT_DEPTH {
            return Err(err(format!(
                "input '{}' is nested more than {MAX_INPUT_DEPTH} flakes deep; is there a cycle of inputs?",
                path.join("/")
            )));
        }
        let strict = self.opts.mode == LockMode::Use && self.old.is_some();
        if strict {
            if let Some(o) = old_node.and_then(|o| self.old.map(|l| &l.nodes[o])) {
                if let Some(stale) = o.inputs.keys().find(|k| !decl.inputs.contains_key(*k)) {
                    return Err(mismatch(
                        &format!(
                            "input '{}' is locked but no longer declared (in '{}')",
                            join(path, stale),
                            decl.dir.join("flake.nix").display()
                        ),
                        None,
                    ));
                }
            }
        }
        for (name, input) in &decl.inputs {
            let ipath = join(path, name);
            let follows = overrides.get(name).or(input.follows.as_ref());
            if let Some(f) = follows {
                if let Some(n) = self.new.nodes.get_mut(node) {
                    n.inputs.insert(name.clone(), Edge::Follows(f.clone()));
                }
                continue;
            }
            let reference = input.reference.clone().ok_or_else(|| {
                err_at(format!("input '{ipath}' has no reference"), Some(input.pos))
            })?;
            let old_child = old_node
                .and_then(|o| self.old.and_then(|l| l.nodes[o].inputs.get(name)))
                .and_then(|e| match e {
                    Edge::Node(n) => Some(n.clone()),
                    Edge::Follows(_) => None,
                });
            let reuse = old_child.clone().filter(|c| {
                let n = &self.old.map(|l| &l.nodes[c]);
                !self.updating(&ipath)
                    && n.is_some_and(|n| {
                        n.original.as_ref() == Some(&reference) && n.flake == input.flake
                    })
            });
            let old_node_name = old_child.clone();
            let (fetched, locked, name_in_lock) = match reuse {
                Some(c) => {
                    let Some(lk) = self.old.and_then(|l| l.nodes[&c].locked.clone()) else {
                        return Err(mismatch(
                            &format!("input '{ipath}' has no locked entry"),
                            None,
                        ));
                    };
                    let want = Hash::parse_sri(&lk.nar_hash).map_err(|e| {
                        err(format!(
                            "flake.lock: input '{ipath}': narHash '{}': {e}",
                            lk.nar_hash
                        ))
                    })?;
                    let f = self
                        .opts
                        .fetcher
                        .fetch(&lk.source, base, Some(&want))
                        .map_err(|e| {
                            let m = e.0.replace(
                                "run 'rocmx flake update'",
                                &format!("run 'rocmx flake update {ipath}'"),
                            );
                            err_at(format!("input '{ipath}': {m}"), Some(input.pos))
                        })?;
                    (f, lk, c)
                }
                None => {
                    if strict && !self.updating(&ipath) {
                        let why = if old_child.is_some() {
                            "is locked to a different reference than flake.nix declares"
                        } else {
                            "is declared in flake.nix but not locked"
                        };
                        return Err(mismatch(&format!("input '{ipath}' {why}"), Some(input.pos)));
                    }
                    let expected = match &reference.nar_hash {
                        Some(h) => Some(Hash::parse_sri(h).map_err(|e| {
                            err_at(
                                format!("input '{ipath}': narHash '{h}': {e}"),
                                Some(input.pos),
                            )
                        })?),
                        None => None,
                    };
                    let f = self
                        .opts
                        .fetcher
                        .fetch(&reference.source, base, expected.as_ref())
                        .map_err(|e| err_at(format!("input '{ipath}': {e}"), Some(input.pos)))?;
                    let lk = Locked {
                        source: f.locked.clone(),
                        dir: reference.dir.clone(),
                        nar_hash: sri(&f.nar_hash),
                        last_modified: f.last_modified,
                    };
                    let n = old_child.clone().unwrap_or_else(|| name.clone());
                    (f, lk, n)
                }
            };
            let child = if self.new.nodes.contains_key(&name_in_lock) {
                self.unique_name(name)
            } else {
                name_in_lock.clone()
            };
            self.new.nodes.insert(
                child.clone(),
                Node {
                    inputs: BTreeMap::new(),
                    original: Some(reference.clone()),
                    locked: Some(locked.clone()),
                    flake: input.flake,
                },
            );
            if let Some(n) = self.new.nodes.get_mut(node) {
                n.inputs.insert(name.clone(), Edge::Node(child.clone()));
            }
            if input.flake {
                let logical = sub_dir(Path::new(&fetched.store_path), &locked.dir);
                let physical = sub_dir(&fetched.physical, &locked.dir);
                let child_decl = Rc::new(read_flake(ev, &logical, self.opts.gfx)?);
                let mut child_path = path.to_vec();
                child_path.push(name.clone());
                let old_for_child =
                    old_node_name.filter(|n| self.old.is_some_and(|l| l.nodes.contains_key(n)));
                self.lock_node(
                    ev,
                    &child_decl,
                    &child,
                    old_for_child.as_deref(),
                    &physical,
                    &child_path,
                    &input.overrides,
                )?;
                self.decls.insert(child.clone(), child_decl);
            }
            self.trees.insert(child, fetched);
        }
        Ok(())
    }
}

/// How deep input flakes may nest (a flake that has itself as an input
/// would otherwise be fetched forever).
const MAX_INPUT_DEPTH: usize = 32;

fn join(path: &[String], name: &str) -> String {
    let mut p = path.to_vec();
    p.push(name.to_string());
    p.join("/")
}

fn sub_dir(p: &Path, dir: &str) -> PathBuf {
    if dir.is_empty() {
        p.to_path_buf()
    } else {
        p.join(dir)
    }
}

fn mismatch(what: &str, pos: Option<Pos>) -> Box<EvalError> {
    err_at(
        format!(
            "flake.lock does not match flake.nix: {what}; run 'rocmx flake lock' to lock the inputs as declared"
        ),
        pos,
    )
}

/// Loads the flake `root` (a local directory or a fetched tree).
pub fn load(
    ev: &mut Evaluator,
    root: RootTree,
    dir: &str,
    opts: &LoadOptions<'_>,
) -> EResult<LoadedFlake> {
    let (logical, physical) = match &root {
        RootTree::Local(t) => {
            if let Some(g) = &t.git {
                let flake_nix = t.dir.join(dir).join("flake.nix");
                if g.tracked.check(&flake_nix) == Tracked::No {
                    return Err(err(format!(
                        "'{}' is not tracked by git: a flake in a git repository sees only tracked files; run 'git add {}'",
                        flake_nix.display(),
                        flake_nix.strip_prefix(&g.top).unwrap_or(&flake_nix).display()
                    )));
                }
                ev.tracked.push(Rc::new(g.tracked.clone()));
            }
            (sub_dir(&t.dir, dir), sub_dir(&t.dir, dir))
        }
        RootTree::Fetched(f) => (
            sub_dir(Path::new(&f.store_path), dir),
            sub_dir(&f.physical, dir),
        ),
    };
    if !physical.join("flake.nix").is_file() {
        return Err(err(format!(
            "there is no flake.nix in '{}'",
            logical.display()
        )));
    }
    let decl = Rc::new(read_flake(ev, &logical, opts.gfx)?);
    let lock_file = physical.join("flake.lock");
    let old_lock_text = match std::fs::read_to_string(&lock_file) {
        Ok(t) => Some(t),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(err(format!("reading '{}': {e}", lock_file.display()))),
    };
    let old = match &old_lock_text {
        Some(t) => Some(LockFile::parse(t).map_err(|e| {
            err(format!(
                "{e} (in '{}')",
                logical.join("flake.lock").display()
            ))
        })?),
        None => None,
    };
    let mut locker = Locker {
        opts,
        old: old.as_ref(),
        new: LockFile::empty(),
        trees: HashMap::new(),
        decls: HashMap::new(),
    };
    let old_root = old.as_ref().map(|l| l.root.clone());
    locker.lock_node(
        ev,
        &decl,
        "root",
        old_root.as_deref(),
        &physical,
        &[],
        &BTreeMap::new(),
    )?;
    let new = locker.new;
    for n in new.nodes.values() {
        for e in n.inputs.values() {
            new.resolve(e)
                .map_err(|e| err(format!("in flake.nix's inputs: {}", e.0)))?;
        }
    }
    let params = params::resolve(&decl.params, &opts.set, opts.gfx).map_err(|e| match &e {
        params::ParamError::Unknown { name, .. } => EvalError::new(
            ErrorKind::UnknownParameter { name: name.clone() },
            e.to_string(),
        ),
        _ => err(e.to_string()),
    })?;
    let graph = Rc::new(Graph {
        lock: new.clone(),
        trees: locker.trees,
        decls: locker.decls,
        values: RefCell::new(HashMap::new()),
    });
    let source_info = root_source_info(&root, &logical);
    let value = call_flake(ev, &graph, &decl, "root", source_info, &params)?;
    let lock_text = new.render();
    Ok(LoadedFlake {
        value,
        decl,
        lock_path: match &root {
            RootTree::Local(_) => Some(lock_file),
            RootTree::Fetched(_) => None,
        },
        root,
        params,
        lock: new,
        old_lock_text,
        lock_text,
    })
}

fn str_attr(s: &str) -> Value {
    Value::str(s.to_string())
}

fn root_source_info(root: &RootTree, logical: &Path) -> Vec<(Sym, Value)> {
    match root {
        RootTree::Local(t) => {
            let mut v = vec![(
                Sym::new("outPath"),
                Value::Path(Rc::new(logical.to_path_buf())),
            )];
            if let Some(g) = &t.git {
                if let Some(r) = &g.rev {
                    v.push((Sym::new("rev"), str_attr(r)));
                    v.push((Sym::new("shortRev"), str_attr(&r[..7.min(r.len())])));
                }
                if let Some(r) = &g.dirty_rev {
                    v.push((Sym::new("dirtyRev"), str_attr(&format!("{r}-dirty"))));
                    v.push((
                        Sym::new("dirtyShortRev"),
                        str_attr(&format!("{}-dirty", &r[..7.min(r.len())])),
                    ));
                }
            }
            v
        }
        RootTree::Fetched(f) => fetched_source_info(f, logical),
    }
}

fn fetched_source_info(f: &Fetched, out: &Path) -> Vec<(Sym, Value)> {
    let out = out.to_string_lossy().into_owned();
    let ctx = Context::single(ContextElem::Opaque(f.store_path.as_str().into()));
    let mut v = vec![
        (
            Sym::new("outPath"),
            Value::String(NixString::with_context(out, ctx)),
        ),
        (Sym::new("narHash"), str_attr(&f.nar_hash.to_sri())),
    ];
    if let Some(r) = f.locked.rev() {
        v.push((Sym::new("rev"), str_attr(r)));
        v.push((Sym::new("shortRev"), str_attr(&r[..7])));
    }
    if let Some(t) = f.last_modified {
        v.push((Sym::new("lastModified"), Value::Int(t as i64)));
    }
    v
}

/// The glue that ties a flake's knot: `self` is the result of `outputs`
/// called with `self`, so it is written in the language, where laziness makes
/// that well-founded (as Nix's `call-flake.nix` does).
const CALL_FLAKE: &str = r#"
outputsFn: sourceInfo: inputs: config:
let
  outputs = outputsFn (inputs // { self = result; inherit config; });
  result = outputs // sourceInfo // {
    inherit inputs outputs sourceInfo config;
    _type = "flake";
  };
in result
"#;

pub(crate) fn param_to_value(p: &ParamValue) -> Value {
    match p {
        ParamValue::String(s) => Value::str(s.clone()),
        ParamValue::Bool(b) => Value::bool(*b),
        ParamValue::Int(i) => Value::Int(*i),
        ParamValue::List(l) => Value::list(l.iter().map(|s| Value::str(s.clone())).collect()),
    }
}

fn call_flake(
    ev: &mut Evaluator,
    g: &Rc<Graph>,
    decl: &FlakeDecl,
    node: &str,
    source_info: Vec<(Sym, Value)>,
    params: &BTreeMap<String, ParamValue>,
) -> EResult<Value> {
    let mut inputs = Vec::new();
    let lock_node = &g.lock.nodes[node];
    for name in decl.inputs.keys() {
        let Some(edge) = lock_node.inputs.get(name) else {
            continue;
        };
        let target = g.lock.resolve(edge).map_err(|e| err(e.0))?;
        let g2 = g.clone();
        let v = Value::lazy(move |ev| Ok(input_value(ev, &g2, &target)?));
        inputs.push((Sym::new(name), v));
    }
    let config: Vec<(Sym, Value)> = params
        .iter()
        .map(|(k, v)| (Sym::new(k), param_to_value(v)))
        .collect();
    let glue = ev.eval_string(CALL_FLAKE, &decl.dir)?;
    let mut f = ev.call(&glue, decl.outputs.clone())?;
    f = ev.call(&f, Value::attrs(Attrs::from_unsorted(source_info)))?;
    f = ev.call(&f, Value::attrs(Attrs::from_unsorted(inputs)))?;
    Ok(ev.call(&f, Value::attrs(Attrs::from_unsorted(config)))?)
}

/// The value of input node `node`: its flake (outputs called with the
/// parameters' defaults), or for `flake = false` its source info.
fn input_value(ev: &mut Evaluator, g: &Rc<Graph>, node: &str) -> EResult<Value> {
    if let Some(v) = g.values.borrow().get(node) {
        return Ok(v.clone());
    }
    if node == g.lock.root {
        return Err(err(
            "an input follows the root flake itself, which is not supported",
        ));
    }
    let tree = &g.trees[node];
    let locked = g.lock.nodes[node].locked.clone();
    let dir = locked.map(|l| l.dir).unwrap_or_default();
    let logical = sub_dir(Path::new(&tree.store_path), &dir);
    let info = fetched_source_info(tree, Path::new(&tree.store_path));
    let v = match g.decls.get(node).cloned() {
        Some(decl) => {
            let params: BTreeMap<String, ParamValue> = decl
                .params
                .iter()
                .filter_map(|d| d.default.clone().map(|v| (d.name.clone(), v)))
                .collect();
            if let Some(d) = decl.params.iter().find(|d| d.default.is_none()) {
                return Err(err(format!(
                    "input flake '{}' needs parameter '{}' ({}), which has no default",
                    logical.display(),
                    d.name,
                    d.ty
                )));
            }
            call_flake(ev, g, &decl, node, info, &params)?
        }
        None => Value::attrs(Attrs::from_unsorted(info)),
    };
    g.values.borrow_mut().insert(node.to_string(), v.clone());
    Ok(v)
}

/// `builtins.getFlake REF`: REF must be locked (a `narHash`, or a commit).
pub(crate) fn get_flake(ev: &mut Evaluator, reference: &str) -> EResult<Value> {
    let base = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let (r, fragment) = source::parse(reference, &base, false)
        .map_err(|e| err(format!("builtins.getFlake: {e}")))?;
    if !fragment.is_empty() {
        return Err(err(format!(
            "builtins.getFlake: unexpected fragment '#{fragment}' in '{reference}'"
        )));
    }
    if r.nar_hash.is_none() && !r.source.is_pinned() {
        return Err(err(format!(
            "builtins.getFlake: '{reference}' is not locked: evaluation is pure, so the reference needs a 'narHash' or a 'rev'"
        )));
    }
    let Some(fetcher) = ev.fetcher.clone() else {
        return Err(err("builtins.getFlake: this command cannot fetch flakes"));
    };
    let expected = match &r.nar_hash {
        Some(h) => Some(
            Hash::parse_sri(h)
                .map_err(|e| err(format!("builtins.getFlake: narHash '{h}': {e}")))?,
        ),
        None => None,
    };
    if let Some(h) = &expected {
        if h.algo() != HashAlgo::Sha256 {
            return Err(err("builtins.getFlake: narHash must be SHA-256"));
        }
    }
    let fetched = fetcher
        .fetch(&r.source, &base, expected.as_ref())
        .map_err(|e| err(format!("builtins.getFlake: {e}")))?;
    let gfx = |l: &[String]| Ok(l.to_vec());
    let opts = LoadOptions {
        fetcher: &*fetcher,
        mode: LockMode::Use,
        set: BTreeMap::new(),
        gfx: &gfx,
    };
    Ok(load(ev, RootTree::Fetched(fetched), &r.dir, &opts)?.value)
}
