//! `rocmx path-info [--json] [-r|--recursive] [-s|--size] [-S|--closure-size] [--sigs] PATH…`:
//! what the local store records about paths, in the format of `nix path-info` (Nix 2.8).
//!
//! `--sigs` adds, as Nix does, a tab and the path's content address (`ca:…`) and
//! narinfo-style signatures (`NAME:BASE64`, space separated) to each line; then, for a
//! build output, one line per realisation that points at it (several builders may have
//! signed the same one): `  realisation <drvhash>!<output>`, a tab, its signatures. With
//! `--json` each object gains `realisations`: `[{"id": "<drvhash>!<output>",
//! "signatures": […]}]` (the path's own are in `signatures` either way).
//!
//! Also owns the helpers that the other local-store commands (`store add|gc|delete|verify`,
//! `why-depends`) share: opening the store named by `--store`, turning arguments into store
//! paths, wording store errors, writing to standard output.
//!
//! Output order is Nix's: the paths (with `-r`, their closure) topologically sorted,
//! dependencies first, ties in path order. Sizes are NAR sizes; the closure size is the sum
//! over the closure.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use clap::Args;
use rocmx_store::{LocalStore, PathInfo, StoreError, StorePath};

use super::StoreOpt;

#[derive(Args, Debug)]
pub struct PathInfoArgs {
    /// Print a JSON array of objects: path, narHash (SRI), narSize, references, ca,
    /// closureSize (with -S), deriver, registrationTime, signatures.
    #[arg(long)]
    pub json: bool,
    /// Apply to the closure of the paths (the paths and everything they refer to).
    #[arg(short = 'r', long)]
    pub recursive: bool,
    /// Print the NAR size of each path.
    #[arg(short = 's', long = "size")]
    pub size: bool,
    /// Print the closure size of each path (the sum of the NAR sizes of its closure).
    #[arg(short = 'S', long = "closure-size")]
    pub closure_size: bool,
    /// Print sizes as 12.3M rather than in bytes (`-h` in Nix; here `-h` is help).
    #[arg(long = "human-readable")]
    pub human_readable: bool,
    /// Print the signatures of each path (and its content address), and of every
    /// realisation that points at it, a line each (`--json`: a `realisations` field).
    #[arg(long)]
    pub sigs: bool,
    /// Store paths: /rocmx/store/<hash>-<name>, their physical location under the store
    /// root, or a symlink (such as `result`) to either.
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
}

pub fn run(a: PathInfoArgs, s: &StoreOpt) -> i32 {
    exit_code(run_inner(&a, s))
}

fn run_inner(a: &PathInfoArgs, s: &StoreOpt) -> Result<(), Fail> {
    let store = open_store(s)?;
    let mut given = BTreeSet::new();
    for p in &a.paths {
        let sp = store_path_arg(&store, p)?;
        require_valid(&store, &sp)?;
        given.insert(sp);
    }
    let set: BTreeSet<StorePath> = if a.recursive {
        let v: Vec<StorePath> = given.iter().cloned().collect();
        store.closure(&v).map_err(|e| Fail::Msg(store_msg(&e)))?
    } else {
        given
    };
    let mut infos: BTreeMap<StorePath, PathInfo> = BTreeMap::new();
    for p in &set {
        infos.insert(p.clone(), info_of(&store, p)?);
    }
    let order = topo_sort(&set, |p| {
        infos
            .get(p)
            .map(|i| i.references.clone())
            .unwrap_or_default()
    });
    let closure_sizes: BTreeMap<StorePath, u64> = if a.closure_size {
        let mut m = BTreeMap::new();
        for p in &order {
            m.insert(p.clone(), closure_size(&store, p, &mut infos)?);
        }
        m
    } else {
        BTreeMap::new()
    };

    let mut realisations: BTreeMap<StorePath, Vec<(String, String, Vec<String>)>> = BTreeMap::new();
    if a.sigs {
        for p in &order {
            let r = store
                .realisations_of(p)
                .map_err(|e| Fail::Msg(store_msg(&e)))?;
            realisations.insert(p.clone(), r);
        }
    }

    let mut out = io::BufWriter::new(io::stdout().lock());
    if a.json {
        let mut text = String::from("[");
        for (i, p) in order.iter().enumerate() {
            if i > 0 {
                text.push(',');
            }
            let info = &infos[p];
            text.push_str(&json_object(
                info,
                closure_sizes.get(p).copied(),
                realisations.get(p).map(Vec::as_slice),
            ));
        }
        text.push_str("]\n");
        out.write_all(text.as_bytes())
            .map_err(|e| Fail::write(&e))?;
    } else {
        let width = order.iter().map(|p| p.to_string().len()).max().unwrap_or(0);
        for p in &order {
            let info = &infos[p];
            let mut line = p.to_string();
            if a.size || a.closure_size || a.sigs {
                line.push_str(&" ".repeat(width - line.len()));
            }
            if a.size {
                line.push_str(&size_column(info.nar_size, a.human_readable));
            }
            if a.closure_size {
                line.push_str(&size_column(closure_sizes[p], a.human_readable));
            }
            if a.sigs {
                let mut words: Vec<String> = Vec::new();
                if let Some(ca) = &info.ca {
                    words.push(format!("ca:{ca}"));
                }
                words.extend(info.signatures.iter().cloned());
                line.push('\t');
                line.push_str(&words.join(" "));
                for (h, o, sigs) in realisations.get(p).into_iter().flatten() {
                    line.push_str(&format!("\n  realisation {h}!{o}\t{}", sigs.join(" ")));
                }
            }
            line.push('\n');
            out.write_all(line.as_bytes())
                .map_err(|e| Fail::write(&e))?;
        }
    }
    out.flush().map_err(|e| Fail::write(&e))
}

/// `\t%11d`, or with `human` `\t%6.1f<unit>` (K, M, G, …), as `nix path-info` prints sizes.
fn size_column(n: u64, human: bool) -> String {
    if !human {
        return format!("\t{n:>11}");
    }
    let mut v = n as f64;
    let mut unit = ' ';
    for u in ['K', 'M', 'G', 'T', 'P', 'E', 'Z', 'Y'] {
        if v <= 1024.0 {
            break;
        }
        v /= 1024.0;
        unit = u;
    }
    format!("\t{v:>6.1}{unit}")
}

/// One object of `--json`, keys in Nix's order (then, with `--sigs`, `realisations`).
fn json_object(
    info: &PathInfo,
    closure_size: Option<u64>,
    realisations: Option<&[(String, String, Vec<String>)]>,
) -> String {
    let s = |x: &str| serde_json::Value::String(x.to_string()).to_string();
    let refs: Vec<String> = info.references.iter().map(|r| s(&r.to_string())).collect();
    let sigs: Vec<String> = info.signatures.iter().map(|x| s(x)).collect();
    let mut o = format!(
        "{{\"path\":{},\"narHash\":{},\"narSize\":{},\"references\":[{}],\"ca\":{}",
        s(&info.path.to_string()),
        s(&info.nar_hash.to_sri()),
        info.nar_size,
        refs.join(","),
        info.ca.as_deref().map_or("null".to_string(), s),
    );
    if let Some(c) = closure_size {
        o.push_str(&format!(",\"closureSize\":{c}"));
    }
    o.push_str(&format!(
        ",\"deriver\":{},\"registrationTime\":{},\"signatures\":[{}]}}",
        info.deriver
            .as_ref()
            .map_or("null".to_string(), |d| s(&d.to_string())),
        info.registration_time,
        sigs.join(","),
    ));
    if let Some(rs) = realisations {
        let rs: Vec<serde_json::Value> = rs
            .iter()
            .map(|(h, out, sigs)| serde_json::json!({ "id": format!("{h}!{out}"), "signatures": sigs }))
            .collect();
        o.pop();
        o.push_str(&format!(
            ",\"realisations\":{}}}",
            serde_json::Value::from(rs)
        ));
    }
    o
}

/// The sum of the NAR sizes of `p`'s closure; `infos` caches what was read.
fn closure_size(
    store: &LocalStore,
    p: &StorePath,
    infos: &mut BTreeMap<StorePath, PathInfo>,
) -> Result<u64, Fail> {
    let closure = store
        .closure(std::slice::from_ref(p))
        .map_err(|e| Fail::Msg(store_msg(&e)))?;
    let mut total = 0u64;
    for q in closure {
        if !infos.contains_key(&q) {
            let i = info_of(store, &q)?;
            infos.insert(q.clone(), i);
        }
        total = total.saturating_add(infos[&q].nar_size);
    }
    Ok(total)
}

fn info_of(store: &LocalStore, p: &StorePath) -> Result<PathInfo, Fail> {
    match store.path_info(p) {
        Ok(Some(i)) => Ok(i),
        Ok(None) => Err(Fail::Msg(not_valid_msg(store, p))),
        Err(e) => Err(Fail::Msg(store_msg(&e))),
    }
}

/// `set` in Nix's order: a depth-first post-order (references before referrers) over the
/// paths in path order, following only references inside `set`. References on a cycle
/// (impossible for content-addressed paths) are cut where the walk meets them.
pub(crate) fn topo_sort(
    set: &BTreeSet<StorePath>,
    refs: impl Fn(&StorePath) -> BTreeSet<StorePath>,
) -> Vec<StorePath> {
    let mut out = Vec::with_capacity(set.len());
    let mut visited: BTreeSet<StorePath> = BTreeSet::new();
    for start in set {
        if visited.contains(start) {
            continue;
        }
        visited.insert(start.clone());
        // (node, its references still to visit)
        let mut stack: Vec<(StorePath, Vec<StorePath>)> =
            vec![(start.clone(), children(start, set, &refs))];
        while let Some((_, todo)) = stack.last_mut() {
            match todo.pop() {
                Some(c) => {
                    if visited.insert(c.clone()) {
                        let cs = children(&c, set, &refs);
                        stack.push((c, cs));
                    }
                }
                None => {
                    if let Some((n, _)) = stack.pop() {
                        out.push(n);
                    }
                }
            }
        }
    }
    out
}

/// References of `p` inside `set`, itself excluded, in reverse order (popped from the end).
fn children(
    p: &StorePath,
    set: &BTreeSet<StorePath>,
    refs: &impl Fn(&StorePath) -> BTreeSet<StorePath>,
) -> Vec<StorePath> {
    let mut v: Vec<StorePath> = refs(p)
        .into_iter()
        .filter(|r| r != p && set.contains(r))
        .collect();
    v.reverse();
    v
}

// ---------------------------------------------------------------------------------------
// Shared with `store/local.rs` and `why_depends.rs`.

/// Why a command failed.
#[derive(Debug)]
pub(crate) enum Fail {
    /// Print `error: <message>`, exit 1.
    Msg(String),
    /// Already reported; exit 1.
    Reported,
    /// Standard output went away: exit 1 quietly.
    BrokenPipe,
}

impl Fail {
    /// A failure to write standard output.
    pub(crate) fn write(e: &io::Error) -> Fail {
        if e.kind() == io::ErrorKind::BrokenPipe {
            Fail::BrokenPipe
        } else {
            Fail::Msg(format!("writing to standard output: {e}"))
        }
    }
}

/// Reports a failure (if any) and gives the exit code.
pub(crate) fn exit_code(r: Result<(), Fail>) -> i32 {
    match r {
        Ok(()) => 0,
        Err(Fail::Msg(m)) => {
            eprintln!("error: {m}");
            1
        }
        Err(Fail::Reported | Fail::BrokenPipe) => 1,
    }
}

/// [`open_store`] for commands that stop when it fails: the error is printed
/// and the exit code given.
pub(crate) fn open_store_or_exit(s: &StoreOpt) -> Result<std::rc::Rc<LocalStore>, i32> {
    open_store(s)
        .map(std::rc::Rc::new)
        .map_err(|e| exit_code(Err(e)))
}

/// The store at `--store DIR` / `ROCMX_STORE`, or at the default root.
pub(crate) fn open_store(s: &StoreOpt) -> Result<LocalStore, Fail> {
    let root = s.root.clone().unwrap_or_else(LocalStore::default_root);
    let store = LocalStore::open(&root).map_err(|e| {
        Fail::Msg(format!(
            "opening the store at '{}': {}",
            root.display(),
            store_msg(&e)
        ))
    })?;
    if let Some(uid) = store.foreign_owner() {
        eprintln!(
            "warning: running as root on the store at '{}', which belongs to uid {uid}; \
             the files rocmx shares there are given to that user",
            root.display()
        );
    }
    Ok(store)
}

/// The store path an argument designates: `/rocmx/store/<hash>-<name>[/sub]`, the same under
/// the physical root, or a symlink to either. A subpath is ignored.
pub(crate) fn store_path_arg(store: &LocalStore, p: &Path) -> Result<StorePath, Fail> {
    match store.to_store_path(p) {
        Ok((sp, _sub)) => Ok(sp),
        Err(StoreError::NotInStore { .. }) => Err(Fail::Msg(not_in_store_msg(store, p))),
        Err(e) => Err(Fail::Msg(format!("'{}': {}", p.display(), store_msg(&e)))),
    }
}

/// Why `p` designates no path of `store`: Nix's "path '…' is not in the store", or, when
/// `p` (or a symlink on its way) leads to `<root>/store/<hash>-<name>` under another
/// root — a `result` link made with another `--store` — that root and how to use it.
pub(crate) fn not_in_store_msg(store: &LocalStore, p: &Path) -> String {
    match other_store_root(store, p) {
        Some(other) => {
            let phys = other.join("store");
            let phys = std::fs::canonicalize(&phys).unwrap_or(phys);
            format!(
                "'{}' points into the store at {} (physically {}), not into this one (at \
                 {}, physically {}); use --store {} or ROCMX_STORE={}",
                p.display(),
                other.display(),
                phys.display(),
                store.root().display(),
                store.store_dir().display(),
                other.display(),
                other.display()
            )
        }
        None => format!(
            "path '{}' is not in the store ({}, physically '{}')",
            p.display(),
            rocmx_store::STORE_DIR,
            store.store_dir().display()
        ),
    }
}

/// The root of another store that `p` points into: the first path on the chain of
/// symlinks from `p` (then `p` with every symlink resolved) of the shape
/// `<root>/store/<hash>-<name>[/…]`, when `<root>/store` is not `store`'s directory.
fn other_store_root(store: &LocalStore, p: &Path) -> Option<PathBuf> {
    let canon = |d: &Path| std::fs::canonicalize(d).unwrap_or_else(|_| d.to_path_buf());
    let ours = canon(store.store_dir());
    let other = |path: &Path| {
        store_root_of(path)
            .map(|r| canon(&r))
            .filter(|r| canon(&r.join("store")) != ours)
    };
    let mut cur = std::path::absolute(p).ok()?;
    for _ in 0..40 {
        if let Some(r) = other(&cur) {
            return Some(r);
        }
        match std::fs::symlink_metadata(&cur) {
            Ok(m) if m.file_type().is_symlink() => {
                let target = std::fs::read_link(&cur).ok()?;
                cur = match cur.parent() {
                    Some(parent) => parent.join(target),
                    None => target,
                };
            }
            _ => break,
        }
    }
    std::fs::canonicalize(p).ok().and_then(|c| other(&c))
}

/// `<root>` when `path` is `<root>/store/<hash>-<name>[/…]` (the first such split).
fn store_root_of(path: &Path) -> Option<PathBuf> {
    use std::path::Component;
    let comps: Vec<Component<'_>> = path.components().collect();
    comps.windows(2).enumerate().find_map(|(i, w)| match w {
        [Component::Normal(dir), Component::Normal(base)]
            if *dir == "store"
                && base
                    .to_str()
                    .is_some_and(|b| StorePath::from_base_name(b).is_ok()) =>
        {
            Some(comps[..i].iter().collect())
        }
        _ => None,
    })
}

/// Fails with Nix's "path '…' is not valid" unless `p` is valid.
pub(crate) fn require_valid(store: &LocalStore, p: &StorePath) -> Result<(), Fail> {
    match store.is_valid(p) {
        Ok(true) => Ok(()),
        Ok(false) => Err(Fail::Msg(not_valid_msg(store, p))),
        Err(e) => Err(Fail::Msg(store_msg(&e))),
    }
}

pub(crate) fn not_valid_msg(store: &LocalStore, p: &StorePath) -> String {
    format!(
        "path '{p}' is not valid (store at '{}')",
        store.root().display()
    )
}

/// A store error's message, with Nix's wording for an invalid path.
pub(crate) fn store_msg(e: &StoreError) -> String {
    match e {
        StoreError::NotValid { path, root } => {
            format!("path '{path}' is not valid (store at '{}')", root.display())
        }
        other => other.to_string(),
    }
}

/// `n` bytes as Nix prints freed space: `12.34 MiB`.
pub(crate) fn mib(n: u64) -> String {
    format!("{:.2} MiB", n as f64 / (1024.0 * 1024.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sp(c: char, name: &str) -> StorePath {
        format!("/rocmx/store/{}-{name}", c.to_string().repeat(32))
            .parse()
            .expect("path")
    }

    #[test]
    fn topo_sort_puts_references_first_as_nix_does() {
        let (a, b, c) = (sp('v', "a"), sp('s', "b"), sp('p', "c"));
        let mut refs: BTreeMap<StorePath, BTreeSet<StorePath>> = BTreeMap::new();
        refs.insert(c.clone(), [b.clone()].into());
        refs.insert(b.clone(), [a.clone(), b.clone()].into());
        let get = |p: &StorePath| refs.get(p).cloned().unwrap_or_default();
        let all: BTreeSet<StorePath> = [a.clone(), b.clone(), c.clone()].into();
        assert_eq!(topo_sort(&all, get), vec![a.clone(), b.clone(), c.clone()]);
        let some: BTreeSet<StorePath> = [a.clone(), c.clone()].into();
        assert_eq!(topo_sort(&some, get), vec![c, a]);
    }

    #[test]
    fn store_roots_are_found_before_store_and_a_path_name() {
        let h = "v".repeat(32);
        assert_eq!(
            store_root_of(Path::new(&format!("/tmp/s/store/{h}-a/bin/x"))),
            Some(PathBuf::from("/tmp/s"))
        );
        assert_eq!(
            store_root_of(Path::new(&format!("/store/{h}-a"))),
            Some(PathBuf::from("/"))
        );
        assert_eq!(store_root_of(Path::new("/tmp/s/store/not-a-path")), None);
        assert_eq!(store_root_of(Path::new("/tmp/store")), None);
    }

    #[test]
    fn sizes_as_nix_prints_them() {
        assert_eq!(size_column(120, false), "\t        120");
        assert_eq!(size_column(1536, true), "\t   1.5K");
        assert_eq!(mib(3 * 1024 * 1024 / 2), "1.50 MiB");
    }
}
