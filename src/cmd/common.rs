//! Helpers shared by the commands, so that no command imports from another's file:
//!
//! - evaluating (`eval`, `build`, `repl`, the package walk): auto-calling with
//!   `--arg`/`--argstr`, `-A` attribute paths, paths relative to the working directory;
//! - the local store (`path-info`, `store …`, `log`, `derivation`, `why-depends`, `copy`,
//!   …): opening the store named by `--store`, turning arguments into store paths and
//!   derivations, reading `.drv` files, wording store errors (among them the one "not in
//!   the store" message, which names the other store a `result` link points into and the
//!   `--store` to use);
//! - paths that need not be in a store (`hash`, `store dump|ls|cat`): logical
//!   `/rocmx/store/…` paths mapped to the physical root ([`locate`]);
//! - raw standard streams, sizes as Nix prints them, tools on `PATH`, fixed-output hash
//!   algorithms.
//!
//! Failures are [`Fail`]s (`fail.rs`). Nothing here prints, but for [`open_store`]'s
//! warning about a store that belongs to another user.

use std::fmt;
use std::fs::File;
use std::io;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use rocmx_lang::eval::error::did_you_mean;
use rocmx_lang::eval::{EResult, ErrorKind, EvalError};
use rocmx_lang::value::{Attrs, Sym};
use rocmx_lang::{Evaluator, Value};
use rocmx_store::{Derivation, HashAlgo, LocalStore, StoreError, StorePath, STORE_DIR};

use super::fail::{io_msg, Fail};
use super::StoreOpt;

/// The working directory, or `/` when it cannot be read.
pub(crate) fn cwd() -> PathBuf {
    std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"))
}

/// `f` made absolute against `base`.
pub(crate) fn absolute(f: &Path, base: &Path) -> PathBuf {
    if f.is_absolute() {
        f.to_path_buf()
    } else {
        base.join(f)
    }
}

/// The `--arg NAME EXPR` / `--argstr NAME STR` values (flattened pairs) as a
/// set, each `--arg` expression evaluated lazily.
pub(crate) fn auto_args(
    ev: &mut Evaluator,
    arg: &[String],
    argstr: &[String],
    base: &Path,
) -> EResult<Rc<Attrs>> {
    let mut entries = Vec::new();
    for pair in arg.chunks(2) {
        if let [name, expr] = pair {
            let ir =
                ev.compile_source(format!("«--arg {name}»"), None, expr.as_str().into(), base)?;
            let env = ev.globals().clone();
            let v = ev.delay(&ir, &env);
            entries.push((Sym::new(name), v));
        }
    }
    for pair in argstr.chunks(2) {
        if let [name, s] = pair {
            entries.push((Sym::new(name), Value::str(s.clone())));
        }
    }
    Ok(Rc::new(Attrs::from_unsorted(entries)))
}

/// Calls a function with formals on the matching auto-arguments; other values
/// are returned unchanged.
pub(crate) fn auto_call(ev: &mut Evaluator, v: &Value, auto: &Rc<Attrs>) -> EResult<Value> {
    let f = ev.force(v)?;
    if let Value::Lambda(c) = &f {
        if let rocmx_lang::eval::ir::IrParam::Formals {
            formals, ellipsis, ..
        } = &c.def.param
        {
            let passed: Vec<(Sym, Value)> = if *ellipsis {
                auto.iter().map(|(k, v)| (*k, v.clone())).collect()
            } else {
                formals
                    .iter()
                    .filter_map(|(n, _)| auto.get(n).map(|v| (*n, v.clone())))
                    .collect()
            };
            return Ok(ev.call(&f, Value::attrs(Attrs::from_unsorted(passed)))?);
        }
    }
    Ok(f)
}

/// Splits an `-A` path at dots outside double quotes (the language's rule for
/// attribute paths, shared with flake installables).
pub(crate) fn split_attr_path(p: &str) -> EResult<Vec<String>> {
    rocmx_lang::flake::installable::split_attr_path(p)
        .map_err(|e| EvalError::new(ErrorKind::Eval, e))
}

/// One step of the `-A` path `path`: an attribute of a set or an index into a list
/// (errors name the whole path, as Nix's do).
pub(crate) fn select(ev: &mut Evaluator, v: &Value, name: &str, path: &str) -> EResult<Value> {
    let f = ev.force(v)?;
    match &f {
        Value::Attrs(a) => match a.get(name) {
            Some(x) => Ok(ev.force(&x.clone())?),
            None => {
                let hint = did_you_mean(name, a.keys().map(|k| k.as_str()))
                    .map(|s| format!("; did you mean '{s}'?"))
                    .unwrap_or_default();
                Err(EvalError::new(
                    ErrorKind::Eval,
                    format!("attribute '{name}' in selection path '{path}' not found{hint}"),
                ))
            }
        },
        Value::List(l) => {
            let i: usize = name.parse().map_err(|_| {
                EvalError::new(
                    ErrorKind::Eval,
                    format!("'{name}' is not a valid list index"),
                )
            })?;
            match l.get(i) {
                Some(x) => Ok(ev.force(&x.clone())?),
                None => Err(EvalError::new(
                    ErrorKind::Eval,
                    format!("list index {i} in selection path '{path}' is out of bounds"),
                )),
            }
        }
        other => Err(EvalError::new(
            ErrorKind::Type,
            format!(
                "the expression selected by the selection path '{path}' should be a set but is {}",
                other.type_().described()
            ),
        )),
    }
}

/// `1.23 MiB`, as Nix prints download sizes (KiB below a mebibyte).
pub(crate) fn human_size(bytes: u64) -> String {
    if bytes < 1 << 20 {
        format!("{:.2} KiB", bytes as f64 / 1024.0)
    } else if bytes < 1 << 30 {
        format!("{:.2} MiB", bytes as f64 / (1u64 << 20) as f64)
    } else {
        format!("{:.2} GiB", bytes as f64 / (1u64 << 30) as f64)
    }
}

/// Where `cmd` is found on `PATH`, if anywhere (for optional tools: diffoscope, dot).
pub(crate) fn on_path(cmd: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(cmd))
        .find(|p| p.is_file())
}

/// `n` bytes as Nix prints freed space: `12.34 MiB`.
pub(crate) fn mib(n: u64) -> String {
    format!("{:.2} MiB", n as f64 / (1024.0 * 1024.0))
}

/// The algorithms a fixed output may be declared with here (`store add-fixed`,
/// `store prefetch`).
const FIXED_ALGOS: [HashAlgo; 4] = [
    HashAlgo::Sha256,
    HashAlgo::Sha512,
    HashAlgo::Sha1,
    HashAlgo::Blake3,
];

/// Parses a fixed-output hash algorithm: `sha256`, `sha512`, `sha1` or `blake3`.
pub(crate) fn parse_fixed_algo(s: &str) -> Result<HashAlgo, String> {
    FIXED_ALGOS
        .into_iter()
        .find(|a| a.name() == s)
        .ok_or_else(|| format!("unknown hash algorithm '{s}' (use sha256, sha512, sha1 or blake3)"))
}

// ---------------------------------------------------------------------------------------
// The local store.

/// [`open_store`] for commands that stop when it fails: the error is printed
/// and the exit code given.
pub(crate) fn open_store_or_exit(s: &StoreOpt) -> Result<Rc<LocalStore>, i32> {
    let store = open_store(s)
        .map(Rc::new)
        .map_err(|e| Fail::exit_code(Err(e)))?;
    OPEN_STORES.with(|o| o.borrow_mut().push(Rc::downgrade(&store)));
    Ok(store)
}

thread_local! {
    /// The stores [`open_store_or_exit`] opened on this thread, for [`checkpoint_stores`].
    static OPEN_STORES: std::cell::RefCell<Vec<std::rc::Weak<LocalStore>>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// Before the process exits: checkpoints the database of every store opened on this
/// thread that is still open. Commands end by forgetting the evaluator (freeing its heap
/// value by value would only cost time), and with it their store: its connection is
/// never closed, so SQLite never folds its write-ahead log back into the database as
/// closing does, and the next process to open the store reads the whole log back first
/// (the dry run of `.#pytorch-rocm` spent a tenth of its time so).
pub(crate) fn checkpoint_stores() {
    OPEN_STORES.with(|o| {
        for store in o.borrow_mut().drain(..).filter_map(|w| w.upgrade()) {
            store.checkpoint();
        }
    });
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
            STORE_DIR,
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

/// What a derivation argument ([`drv_of`]) is wanted for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DrvFor {
    /// Reading the `.drv` (`derivation show`): a `.drv` path must be valid.
    Reading,
    /// Its build log (`log`): a `.drv` path need not be valid any more (the log is
    /// named by its hash part and outlives a `gc` of the `.drv`).
    Log,
}

/// The derivation an argument designates: itself when it is a `.drv` path, else the
/// recorded deriver of the valid path it names (an output path, a `result` link).
pub(crate) fn drv_of(store: &LocalStore, p: &Path, wanted: DrvFor) -> Result<StorePath, Fail> {
    let sp = store_path_arg(store, p)?;
    if sp.is_derivation() {
        if wanted == DrvFor::Reading {
            require_valid(store, &sp)?;
        }
        return Ok(sp);
    }
    let info = store
        .path_info(&sp)
        .map_err(|e| Fail::Msg(store_msg(&e)))?
        .ok_or_else(|| Fail::Msg(not_valid_msg(store, &sp)))?;
    let drv = info.deriver.ok_or_else(|| {
        Fail::Msg(match wanted {
            DrvFor::Reading => format!("path '{sp}' was not built by a known derivation"),
            DrvFor::Log => format!(
                "path '{sp}' was not built by a known derivation (it was added or \
                 copied into the store), so it has no build log"
            ),
        })
    })?;
    // The deriver is recorded, but its `.drv` may have been collected since (a gc with
    // keep-derivations off, or `store delete` of the `.drv`): say so instead of failing
    // to open a file the user never named.
    if wanted == DrvFor::Reading && !store.is_valid(&drv).map_err(|e| Fail::Msg(store_msg(&e)))? {
        return Err(Fail::Msg(format!(
            "path '{sp}' was built by '{drv}', which is no longer in the store (deleted by \
             garbage collection with keep-derivations off, or by 'rocmx store delete'); \
             evaluate the expression again to recreate it"
        )));
    }
    Ok(drv)
}

/// Reads and parses the `.drv` file `p` from the store.
pub(crate) fn read_drv(store: &LocalStore, p: &StorePath) -> Result<Derivation, Fail> {
    let real = store.real_path(p);
    let text = std::fs::read_to_string(&real)
        .map_err(|e| Fail::Msg(format!("reading derivation '{p}': {e}")))?;
    Derivation::parse(&text).map_err(|e| Fail::Msg(format!("parsing derivation '{p}': {e}")))
}

// ---------------------------------------------------------------------------------------
// Logical → physical paths, for paths that need not be in a store.

/// A path as the user named it and where it is on disk.
pub(crate) struct Located {
    pub(crate) given: PathBuf,
    pub(crate) physical: PathBuf,
}

impl fmt::Display for Located {
    /// `'/given'`, plus `(at '/physical')` when the two differ.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "'{}'", self.given.display())?;
        if self.physical != self.given {
            write!(f, " (at '{}')", self.physical.display())?;
        }
        Ok(())
    }
}

/// Maps a logical store path `/rocmx/store/<base>[/sub]` to `<root>/store/<base>[/sub]`; any
/// other path maps to itself. When the physical path does not exist but the logical one
/// does, the logical one is used.
pub(crate) fn locate(path: &Path, store: &StoreOpt) -> Located {
    let given = path.to_path_buf();
    let Ok(rest) = path.strip_prefix(STORE_DIR) else {
        return Located {
            physical: given.clone(),
            given,
        };
    };
    let root = store.root.clone().unwrap_or_else(LocalStore::default_root);
    let mut physical = root.join("store");
    if !rest.as_os_str().is_empty() {
        physical.push(rest);
    }
    if physical != given
        && std::fs::symlink_metadata(&physical).is_err()
        && std::fs::symlink_metadata(&given).is_ok()
    {
        physical = given.clone();
    }
    Located { given, physical }
}

// ---------------------------------------------------------------------------------------
// Raw standard streams.

/// Standard output as an unbuffered `File` (callers add a `BufWriter`), bypassing the
/// line-buffered `Stdout`, which would scan binary output for newlines.
pub(crate) fn raw_stdout() -> Result<File, Fail> {
    io::stdout()
        .as_fd()
        .try_clone_to_owned()
        .map(File::from)
        .map_err(|e| Fail::msg(format!("standard output: {}", io_msg(&e))))
}

/// Standard input as an unbuffered `File` (the NAR parser buffers).
pub(crate) fn raw_stdin() -> Result<File, Fail> {
    io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .map(File::from)
        .map_err(|e| Fail::msg(format!("standard input: {}", io_msg(&e))))
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(mib(3 * 1024 * 1024 / 2), "1.50 MiB");
        assert_eq!(human_size(1536), "1.50 KiB");
    }

    #[test]
    fn fixed_output_algorithms() {
        assert_eq!(parse_fixed_algo("sha256"), Ok(HashAlgo::Sha256));
        assert_eq!(parse_fixed_algo("blake3"), Ok(HashAlgo::Blake3));
        let e = parse_fixed_algo("md4").expect_err("md4");
        assert!(e.contains("'md4'") && e.contains("sha256"), "{e}");
        assert!(parse_fixed_algo("md5").is_err());
    }

    #[test]
    fn logical_store_paths_are_found_under_the_root() {
        let s = StoreOpt {
            root: Some(PathBuf::from("/nonexistent-root")),
        };
        let l = locate(Path::new("/rocmx/store/x-y/bin"), &s);
        assert_eq!(l.physical, PathBuf::from("/nonexistent-root/store/x-y/bin"));
        assert_eq!(
            l.to_string(),
            "'/rocmx/store/x-y/bin' (at '/nonexistent-root/store/x-y/bin')"
        );
        let o = locate(Path::new("/tmp/a"), &s);
        assert_eq!(o.physical, PathBuf::from("/tmp/a"));
        assert_eq!(o.to_string(), "'/tmp/a'");
    }
}
