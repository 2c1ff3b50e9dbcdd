//! Primops: the filesystem and the store. Reading is here (`readFile`,
//! `readDir`, `readFileType`, `pathExists`, `hashFile`); adding to the store
//! (`path`, `filterSource`, `toFile`) and `toPath`, `storePath` are in
//! [`store`]; the fetchers, which are refused (fetching belongs to fixed-output
//! derivations in rocmx), are in [`fetch`].
//!
//! Owns how a path argument is realised (a path value, or a string holding an
//! absolute path, canonicalised lexically; then read through the store when it
//! names a store object), Nix's symlink-resolution rules for each primop, and the
//! wording of filesystem errors (always an [`EvalError`] naming the path, never a
//! panic). It writes to the store only through [`crate::store::EvalStore`].

mod fetch;
mod store;

use std::collections::VecDeque;
use std::path::{Path, PathBuf};

use rocmx_store::{Hash, HashAlgo, StorePath};

use self::fetch::{fetch_git, fetch_mercurial, fetch_tarball, fetch_tree, fetchurl};
use self::store::{filter_source, path, store_path, to_file, to_path};
use super::op;
use crate::eval::{
    compile::canon_path, raise, CoerceMode, EResult, ErrorExt, ErrorKind, EvalError, Evaluator,
    RResult,
};
use crate::value::{Args, Attrs, Context, ContextElem, NixString, PrimOp, Sym, Value};

pub(crate) static BUILTINS: &[PrimOp] = &[
    op("readFile", 1, read_file).doc("path", "Return the contents of the file path as a string."),
    op("readDir", 1, read_dir).doc(
        "path",
        "Return the contents of the directory path as a set mapping directory entries to their file type (regular, directory, symlink, unknown).",
    ),
    op("readFileType", 1, read_file_type).doc(
        "p",
        "Determine the directory entry type of a filesystem node: directory, regular, symlink or unknown.",
    ),
    op("pathExists", 1, path_exists).doc(
        "path",
        "Return true if the path path exists at evaluation time, and false otherwise.",
    ),
    op("hashFile", 2, hash_file).doc(
        "type p",
        "Return a base-16 representation of the cryptographic hash of the file at path p, with the algorithm type (md5, sha1, sha256 or sha512).",
    ),
    op("path", 1, path).doc(
        "args",
        "Copy args.path to the store, optionally named (name), filtered (filter), flat (recursive = false) or checked (sha256).",
    ),
    op("filterSource", 2, filter_source).doc(
        "e1 e2",
        "Copy the source tree e2 to the store, keeping only the files for which the predicate e1 (path, type) returns true.",
    ),
    op("toFile", 2, to_file).doc(
        "name s",
        "Store the string s in a file in the Nix store and return its path; the file has suffix name.",
    ),
    op("toPath", 1, to_path).doc(
        "s",
        "DEPRECATED. Use /. + \"/path\" to convert a string into an absolute path.",
    ),
    op("storePath", 1, store_path).doc(
        "path",
        "Define a dependency on an already existing store path: path, with the context of its store path.",
    ),
    op("fetchurl", 1, fetchurl).doc(
        "arg",
        "Download the specified URL and return the path of the downloaded file; rocmx refuses it during evaluation (use builtin:fetchurl).",
    ),
    op("fetchTarball", 1, fetch_tarball).doc(
        "args",
        "Download the specified URL, unpack it and return the path of the unpacked tree; rocmx refuses it during evaluation.",
    ),
    op("fetchGit", 1, fetch_git).doc(
        "args",
        "Fetch a path from git; rocmx refuses it during evaluation.",
    ),
    op("fetchMercurial", 1, fetch_mercurial).doc(
        "args",
        "Fetch a path from Mercurial; rocmx refuses it during evaluation.",
    ),
    op("fetchTree", 1, fetch_tree).doc(
        "input",
        "Fetch a file system tree or a plain file and return its store path and metadata; rocmx refuses it during evaluation.",
    ),
];

// ---- helpers --------------------------------------------------------------------

/// An I/O error's text without Rust's ` (os error N)` suffix, like `strerror`.
fn io_msg(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.rfind(" (os error ") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

fn io_error(msg: String) -> Box<EvalError> {
    EvalError::new(ErrorKind::Io, msg)
}

fn not_exist(p: &Path) -> Box<EvalError> {
    io_error(format!("path '{}' does not exist", p.display()))
}

/// Nix's `coerceToPath`: a path value, or a string (or a set that coerces to one)
/// holding an absolute path; lexically canonicalised. Returns the string's context.
pub(crate) fn coerce_to_path_ctx(ev: &mut Evaluator, v: &Value) -> EResult<(PathBuf, Context)> {
    let v = ev.force(v)?;
    if let Value::Path(p) = &v {
        return Ok(((**p).clone(), Context::default()));
    }
    let s = ev.coerce_to_string(&v, CoerceMode::NoCopy)?;
    if !s.as_str().starts_with('/') {
        return Err(EvalError::new(
            ErrorKind::Eval,
            format!("string '{}' doesn't represent an absolute path", s.as_str()),
        ));
    }
    Ok((canon_path(s.as_str()), s.context().clone()))
}

/// The argument of a primop that reads a path (`realisePath` in Nix).
fn realise_arg(ev: &mut Evaluator, v: &Value) -> EResult<(PathBuf, Context)> {
    let (p, ctx) =
        coerce_to_path_ctx(ev, v).frame(None, || "while realising the context of a path".into())?;
    check_import_from_derivation(ev, &ctx)?;
    Ok((p, ctx))
}

/// Refuses a path whose context names a derivation's output when
/// `allow-import-from-derivation` is off, with Nix's message.
pub(crate) fn check_import_from_derivation(ev: &Evaluator, ctx: &Context) -> EResult<()> {
    if ev.settings.allow_import_from_derivation {
        return Ok(());
    }
    let built = ctx.iter().find_map(|c| match c {
        ContextElem::Built { drv, output } => Some(format!("{drv}^{output}")),
        ContextElem::DrvDeep(drv) => Some(drv.to_string()),
        ContextElem::Opaque(_) => None,
    });
    match built {
        None => Ok(()),
        Some(what) => Err(EvalError::new(
            ErrorKind::Eval,
            format!(
                "cannot build '{what}' during evaluation because the option 'allow-import-from-derivation' is disabled"
            ),
        )),
    }
}

/// Where the content of a logical path is readable right now.
///
/// A path a git flake does not track (see [`Evaluator::is_visible`]) maps to a
/// path that does not exist, so every builtin sees it as missing.
fn real(ev: &Evaluator, p: &Path) -> PathBuf {
    if !ev.is_visible(p) {
        return PathBuf::from("/proc/self/rocmx-untracked/missing");
    }
    ev.store.realise_path(p).unwrap_or_else(|| p.to_path_buf())
}

/// The file type names Nix uses.
fn type_name(ft: &std::fs::FileType) -> &'static str {
    if ft.is_symlink() {
        "symlink"
    } else if ft.is_file() {
        "regular"
    } else if ft.is_dir() {
        "directory"
    } else {
        "unknown"
    }
}

/// `lstat` of a logical path, as a type name. The store directory itself always
/// exists for the evaluator, even when no store lives on this machine.
fn lstat_type(ev: &Evaluator, p: &Path) -> std::io::Result<&'static str> {
    match std::fs::symlink_metadata(real(ev, p)) {
        Ok(m) => Ok(type_name(&m.file_type())),
        Err(e) => {
            if p == Path::new(ev.store.store_dir()) {
                Ok("directory")
            } else {
                Err(e)
            }
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Resolve {
    /// Resolve symlinks in every component, the last one included.
    Full,
    /// Resolve symlinks in the parent directories only.
    Ancestors,
}

/// Nix's `SourcePath::resolveSymlinks`: follows symlinks component by component,
/// lexically (a `..` in a link target removes the previous component). Missing
/// components are kept as they are; the caller reports them.
fn resolve_symlinks(ev: &Evaluator, p: &Path, mode: Resolve) -> EResult<PathBuf> {
    let mut todo: VecDeque<String> = p
        .to_string_lossy()
        .split('/')
        .filter(|c| !c.is_empty())
        .map(str::to_string)
        .collect();
    let mut res: Vec<String> = Vec::new();
    let mut links = 0usize;
    let as_path = |res: &[String]| -> PathBuf {
        let mut s = String::new();
        for c in res {
            s.push('/');
            s.push_str(c);
        }
        if s.is_empty() {
            s.push('/');
        }
        PathBuf::from(s)
    };
    while let Some(c) = todo.pop_front() {
        match c.as_str() {
            "" | "." => continue,
            ".." => {
                res.pop();
                continue;
            }
            _ => {}
        }
        res.push(c);
        if mode == Resolve::Full || !todo.is_empty() {
            let cur = as_path(&res);
            let r = real(ev, &cur);
            let is_link = std::fs::symlink_metadata(&r)
                .map(|m| m.file_type().is_symlink())
                .unwrap_or(false);
            if is_link {
                links += 1;
                if links > 1024 {
                    return Err(io_error(format!(
                        "infinite symlink recursion in path '{}'",
                        p.display()
                    )));
                }
                let target = std::fs::read_link(&r).map_err(|e| {
                    io_error(format!(
                        "reading symbolic link '{}': {}",
                        cur.display(),
                        io_msg(&e)
                    ))
                })?;
                let t = target.to_string_lossy().into_owned();
                res.pop();
                if t.starts_with('/') {
                    res.clear();
                }
                for comp in t.split('/').rev() {
                    if !comp.is_empty() {
                        todo.push_front(comp.to_string());
                    }
                }
            }
        }
    }
    Ok(as_path(&res))
}

/// Reads a whole file (following symlinks), with Nix's messages.
fn read_bytes(ev: &Evaluator, p: &Path) -> EResult<Vec<u8>> {
    ev.check_tracked(p)?;
    let resolved = resolve_symlinks(ev, p, Resolve::Full)?;
    ev.check_tracked(&resolved)?;
    let r = real(ev, &resolved);
    match std::fs::metadata(&r) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(not_exist(p)),
        Err(e) => {
            return Err(io_error(format!(
                "getting status of '{}': {}",
                p.display(),
                io_msg(&e)
            )))
        }
        Ok(m) if m.is_dir() => {
            return Err(io_error(format!(
                "reading file '{}': Is a directory",
                p.display()
            )));
        }
        Ok(_) => {}
    }
    std::fs::read(&r)
        .map_err(|e| io_error(format!("reading file '{}': {}", p.display(), io_msg(&e))))
}

/// Bytes as a Nix string: invalid UTF-8 sequences become U+FFFD (our strings are UTF-8).
fn bytes_to_string(b: Vec<u8>) -> String {
    match String::from_utf8(b) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    }
}

/// A string without context (`forceStringNoCtx`).
fn expect_plain_string(ev: &mut Evaluator, v: &Value) -> EResult<String> {
    let s = ev.expect_string(v)?;
    super::context::reject_context(&s)?;
    Ok(s.as_str().to_string())
}

fn base_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// A store path as a string with itself as context.
fn store_path_value(p: StorePath) -> Value {
    let p = p.to_absolute();
    let ctx = Context::single(ContextElem::Opaque(p.as_str().into()));
    Value::String(NixString::with_context(p, ctx))
}

// ---- reading --------------------------------------------------------------------

/// Return the contents of the file path as a string.
fn read_file(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let (p, ctx) = realise_arg(ev, &a[0])?;
    let bytes = read_bytes(ev, &p)?;
    if bytes.contains(&0) {
        return raise(EvalError::new(
            ErrorKind::Eval,
            format!(
                "the contents of the file '{}' cannot be represented as a Nix string",
                p.display()
            ),
        ));
    }
    Ok(Value::String(NixString::with_context(
        bytes_to_string(bytes),
        ctx,
    )))
}

/// Return the contents of the directory path as a set mapping directory entries to their file type (regular, directory, symlink, unknown).
fn read_dir(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let (p, _) = realise_arg(ev, &a[0])?;
    let resolved = resolve_symlinks(ev, &p, Resolve::Full)?;
    let r = real(ev, &resolved);
    match std::fs::metadata(&r) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return raise(not_exist(&resolved)),
        Err(e) => {
            return raise(io_error(format!(
                "getting status of '{}': {}",
                resolved.display(),
                io_msg(&e)
            )))
        }
        Ok(m) if !m.is_dir() => {
            return raise(io_error(format!(
                "'{}' is not a directory",
                resolved.display()
            )));
        }
        Ok(_) => {}
    }
    let rd = std::fs::read_dir(&r).map_err(|e| {
        io_error(format!(
            "reading directory '{}': {}",
            resolved.display(),
            io_msg(&e)
        ))
    })?;
    let mut entries: Vec<(Sym, Value)> = Vec::new();
    for ent in rd {
        let ent = ent.map_err(|e| {
            io_error(format!(
                "reading directory '{}': {}",
                resolved.display(),
                io_msg(&e)
            ))
        })?;
        let name = ent.file_name().to_string_lossy().into_owned();
        if !ev.is_visible(&resolved.join(&name)) {
            continue;
        }
        let t = match ent.file_type() {
            Ok(ft) => type_name(&ft),
            Err(_) => "unknown",
        };
        entries.push((Sym::new(&name), Value::str(t)));
    }
    Ok(Value::attrs(Attrs::from_unsorted(entries)))
}

/// Determine the directory entry type of a filesystem node: directory, regular, symlink or unknown.
fn read_file_type(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let (p, _) = realise_arg(ev, &a[0])?;
    let t = lstat_type(ev, &p).map_err(|e| {
        io_error(format!(
            "getting status of '{}': {}",
            p.display(),
            io_msg(&e)
        ))
    })?;
    Ok(Value::str(t))
}

/// Return true if the path path exists at evaluation time, and false otherwise.
fn path_exists(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let v = ev.force(&a[0])?;
    // A string ending in `/` or `/.` must name a directory.
    let must_be_dir =
        matches!(&v, Value::String(s) if s.as_str().ends_with('/') || s.as_str().ends_with("/."));
    let (p, _) = realise_arg(ev, &v)?;
    let mode = if must_be_dir {
        Resolve::Full
    } else {
        Resolve::Ancestors
    };
    let resolved = resolve_symlinks(ev, &p, mode)?;
    let exists = match lstat_type(ev, &resolved) {
        Ok(t) => !must_be_dir || t == "directory",
        Err(_) => false,
    };
    Ok(Value::bool(exists))
}

fn hash_algo(name: &str) -> EResult<HashAlgo> {
    match name {
        "md5" => Ok(HashAlgo::Md5),
        "sha1" => Ok(HashAlgo::Sha1),
        "sha256" => Ok(HashAlgo::Sha256),
        "sha512" => Ok(HashAlgo::Sha512),
        "blake3" => Ok(HashAlgo::Blake3),
        _ => Err(EvalError::new(
            ErrorKind::Eval,
            format!("unknown hash algorithm '{name}'"),
        )),
    }
}

/// Return a base-16 representation of the cryptographic hash of the file at path p, with the algorithm type (md5, sha1, sha256 or sha512).
fn hash_file(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let algo = expect_plain_string(ev, &a[0]).frame(None, || {
        "while evaluating the first argument passed to builtins.hashFile".into()
    })?;
    let algo = hash_algo(&algo)?;
    let (p, _) = realise_arg(ev, &a[1])?;
    let bytes = read_bytes(ev, &p)?;
    Ok(Value::str(Hash::digest(algo, &bytes).to_hex()))
}

#[cfg(test)]
mod tests {
    use crate::eval::testing::{err, ok};
    use std::fs;

    /// A directory of files and symlinks; the tests of [`super::store`] use it too.
    pub(super) struct Fixture {
        dir: tempfile::TempDir,
    }

    impl Fixture {
        pub(super) fn new() -> Fixture {
            let dir = tempfile::Builder::new()
                .prefix("rocmxfs")
                .tempdir()
                .unwrap();
            let d = dir.path();
            fs::write(d.join("a.txt"), "hello\n").unwrap();
            fs::create_dir(d.join("sub")).unwrap();
            fs::write(d.join("sub/b"), "bee").unwrap();
            fs::write(d.join("sub/.hidden"), "h").unwrap();
            std::os::unix::fs::symlink("sub", d.join("lsub")).unwrap();
            std::os::unix::fs::symlink("a.txt", d.join("la")).unwrap();
            std::os::unix::fs::symlink("nowhere", d.join("broken")).unwrap();
            fs::write(d.join("nul"), b"a\0b").unwrap();
            Fixture { dir }
        }
        pub(super) fn p(&self) -> String {
            self.dir.path().to_string_lossy().into_owned()
        }
    }

    #[test]
    fn read_file_and_types() {
        let f = Fixture::new();
        let d = f.p();
        assert_eq!(
            ok(&format!(r#"builtins.readFile "{d}/a.txt""#)),
            r#""hello\n""#
        );
        assert_eq!(ok(&format!(r#"builtins.readFile {d}/la"#)), r#""hello\n""#);
        assert_eq!(
            ok(&format!(r#"builtins.readDir {d}"#)),
            r#"{ "a.txt" = "regular"; broken = "symlink"; la = "symlink"; lsub = "symlink"; nul = "regular"; sub = "directory"; }"#
        );
        assert_eq!(
            ok(&format!(r#"builtins.readDir {d}/lsub"#)),
            r#"{ ".hidden" = "regular"; b = "regular"; }"#
        );
        assert_eq!(
            ok(&format!(
                r#"map builtins.readFileType [ {d}/a.txt {d}/sub {d}/lsub {d}/broken ]"#
            )),
            r#"[ "regular" "directory" "symlink" "symlink" ]"#
        );
    }

    #[test]
    fn read_errors() {
        let f = Fixture::new();
        let d = f.p();
        assert!(err(&format!(r#"builtins.readFile {d}/missing"#))
            .contains(&format!("path '{d}/missing' does not exist")));
        assert!(
            err(&format!(r#"builtins.readFile {d}/nul"#)).contains(&format!(
                "the contents of the file '{d}/nul' cannot be represented as a Nix string"
            ))
        );
        assert!(err(&format!(r#"builtins.readDir {d}/missing"#))
            .contains(&format!("path '{d}/missing' does not exist")));
        assert!(err(&format!(r#"builtins.readDir {d}/la"#))
            .contains(&format!("'{d}/a.txt' is not a directory")));
        assert!(
            err(&format!(r#"builtins.readFileType {d}/missing"#)).contains(&format!(
                "getting status of '{d}/missing': No such file or directory"
            ))
        );
        assert!(err(r#"builtins.readFile "rel/path""#)
            .contains("string 'rel/path' doesn't represent an absolute path"));
        assert!(err("builtins.readFile [ ]").contains("cannot coerce a list to a string: [ ]"));
        assert!(err(&format!(r#"builtins.readFile {d}/sub"#)).contains("Is a directory"));
    }

    #[test]
    fn path_exists_semantics() {
        let f = Fixture::new();
        let d = f.p();
        let cases = [
            (format!(r#"{d}/a.txt"#), "true"),
            (format!(r#""{d}/a.txt""#), "true"),
            (format!(r#""{d}/a.txt/""#), "false"),
            (format!(r#""{d}/a.txt/.""#), "false"),
            (format!(r#""{d}/sub/""#), "true"),
            (format!(r#""{d}/lsub/""#), "true"),
            (format!(r#""{d}/lsub/.""#), "true"),
            (format!(r#""{d}/sub/../a.txt""#), "true"),
            (format!(r#"{d}/missing"#), "false"),
            (format!(r#"{d}/broken"#), "true"),
            (format!(r#""{d}/broken/""#), "false"),
            (format!(r#"{{ outPath = "{d}/a.txt"; }}"#), "true"),
            (r#""${builtins.storeDir}""#.to_string(), "true"),
            (r#""${builtins.storeDir}/foo""#.to_string(), "false"),
        ];
        for (arg, want) in cases {
            assert_eq!(ok(&format!("builtins.pathExists ({arg})")), want, "{arg}");
        }
        assert!(err(r#"builtins.pathExists "zorglub""#)
            .contains("string 'zorglub' doesn't represent an absolute path"));
        assert!(err("builtins.pathExists [ ]").contains("cannot coerce a list to a string"));
    }

    #[test]
    fn hash_file_vectors() {
        let f = Fixture::new();
        let d = f.p();
        assert_eq!(
            ok(&format!(
                r#"map (h: builtins.hashFile h {d}/a.txt) [ "md5" "sha1" "sha256" ]"#
            )),
            r#"[ "b1946ac92492d2347c6235b4d2611184" "f572d396fae9206628714fb2ce00f72e94f2258f" "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03" ]"#
        );
        assert!(err(&format!(r#"builtins.hashFile "sha3" {d}/a.txt"#))
            .contains("unknown hash algorithm 'sha3'"));
        assert!(err(&format!(r#"builtins.hashFile "md5" {d}/nope"#))
            .contains(&format!("path '{d}/nope' does not exist")));
    }
}
