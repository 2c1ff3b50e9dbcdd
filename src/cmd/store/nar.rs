//! `rocmx store dump|restore|ls|cat`: the commands that work on any path or archive.
//!
//! A path under the logical store directory (`/rocmx/store/<base>[/sub]`) is looked up under
//! the physical store root (`--store DIR` / `ROCMX_STORE`, or the default root); any other
//! path is used as given (`common::locate`, shared with `hash`). Output goes to the raw
//! standard output through a `BufWriter`; a reader that goes away (broken pipe) ends the
//! command quietly with exit 1.

use std::fs::{self, File, Metadata};
use std::io::{self, BufWriter, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use clap::Args;
use rocmx_store::{nar, LocalStore, NarError, STORE_DIR};

use crate::cmd::common::{locate, raw_stdin, raw_stdout, Located};
use crate::cmd::fail::{io_msg, nar_msg, Fail};
use crate::cmd::StoreOpt;

#[derive(Args, Debug)]
pub struct DumpArgs {
    /// The file, directory or symlink to serialise (never followed). A path under
    /// /rocmx/store is read from the physical store root.
    pub path: PathBuf,
}

#[derive(Args, Debug)]
pub struct RestoreArgs {
    /// Where to create the archive's root (a directory, file or symlink). Must not exist;
    /// its parent must.
    pub dest: PathBuf,
}

#[derive(Args, Debug)]
pub struct LsArgs {
    /// List directories recursively.
    #[arg(short = 'R', long)]
    pub recursive: bool,
    /// Show the type and permissions, the size and symlink targets (like `nix store ls -l`).
    #[arg(short = 'l', long)]
    pub long: bool,
    /// Show a directory itself rather than its entries.
    #[arg(short = 'd', long)]
    pub directory: bool,
    /// The path to list. A symlink given here that leads into the store (such as
    /// `result`) is followed there, targets under /rocmx/store looked up in the
    /// physical store root; other symlinks, and those inside the tree, are listed as
    /// links.
    pub path: PathBuf,
}

#[derive(Args, Debug)]
pub struct CatArgs {
    /// The file to print. Symlinks are followed; absolute targets under /rocmx/store are
    /// looked up in the physical store root.
    pub path: PathBuf,
}

// ---------------------------------------------------------------------------------------
// Located paths.

/// `lstat` of a located path, with Nix's wording on failure.
fn status(loc: &Located) -> Result<Metadata, Fail> {
    fs::symlink_metadata(&loc.physical)
        .map_err(|e| Fail::msg(format!("getting status of {loc}: {}", io_msg(&e))))
}

// ---------------------------------------------------------------------------------------
// dump / restore

pub fn dump(a: DumpArgs, s: &StoreOpt) -> i32 {
    Fail::exit_code(dump_inner(&a, s))
}

fn dump_inner(a: &DumpArgs, s: &StoreOpt) -> Result<(), Fail> {
    let loc = locate(&a.path, s);
    status(&loc)?;
    let mut out = BufWriter::with_capacity(256 * 1024, raw_stdout()?);
    nar::dump_path(&loc.physical, &mut out).map_err(|e| Fail::from_nar(&e))?;
    out.flush().map_err(|e| Fail::write(&e))
}

pub fn restore(a: RestoreArgs) -> i32 {
    let result = raw_stdin().and_then(|input| {
        nar::restore(input, &a.dest)
            .map(|_| ())
            .map_err(|e| match e {
                // Errors that name a path stand alone; archive errors (which name the byte
                // offset) get the destination as context.
                NarError::Restore { .. }
                | NarError::DestinationExists { .. }
                | NarError::UnsafeParent { .. } => Fail::msg(nar_msg(&e)),
                _ => Fail::msg(format!("restoring '{}': {}", a.dest.display(), nar_msg(&e))),
            })
    });
    Fail::exit_code(result)
}

// ---------------------------------------------------------------------------------------
// ls

/// What the listing still has to do.
enum Item {
    /// Print one line for this node (and expand it afterwards when recursive).
    Show(Node),
    /// Print the entries of this directory.
    Expand(Node),
}

struct Node {
    physical: PathBuf,
    /// The name printed: `.`-relative for entries, the base name for a non-directory root.
    rel: Vec<u8>,
    meta: Metadata,
}

pub fn ls(a: LsArgs, s: &StoreOpt) -> i32 {
    Fail::exit_code(ls_inner(&a, s))
}

fn ls_inner(a: &LsArgs, s: &StoreOpt) -> Result<(), Fail> {
    let (loc, meta) = to_store(locate(&a.path, s), &a.path, s)?;
    let is_dir = meta.is_dir();
    let rel = if is_dir && !a.directory {
        b".".to_vec()
    } else {
        match a.path.file_name() {
            Some(name) => name.as_bytes().to_vec(),
            None if is_dir => b".".to_vec(),
            None => a.path.as_os_str().as_bytes().to_vec(),
        }
    };
    let root = Node {
        physical: loc.physical.clone(),
        rel,
        meta,
    };
    let mut stack = vec![if is_dir && !a.directory {
        Item::Expand(root)
    } else {
        Item::Show(root)
    }];
    let mut out = BufWriter::with_capacity(64 * 1024, raw_stdout()?);
    let mut failed = None;
    while let Some(item) = stack.pop() {
        match item {
            Item::Show(node) => {
                show(&mut out, &node, a.long).map_err(|e| Fail::write(&e))?;
                if a.recursive && node.meta.is_dir() {
                    stack.push(Item::Expand(node));
                }
            }
            Item::Expand(dir) => {
                let entries = match read_sorted(&dir.physical) {
                    Ok(e) => e,
                    Err(e) => {
                        out.flush().map_err(|e| Fail::write(&e))?;
                        let msg = format!(
                            "reading directory '{}': {}",
                            dir.physical.display(),
                            io_msg(&e)
                        );
                        eprintln!("error: {msg}");
                        failed = Some(Fail::Reported);
                        continue;
                    }
                };
                for name in entries.into_iter().rev() {
                    let physical = dir.physical.join(&name);
                    let meta = match fs::symlink_metadata(&physical) {
                        Ok(m) => m,
                        Err(e) => {
                            out.flush().map_err(|e| Fail::write(&e))?;
                            let msg = format!(
                                "getting status of '{}': {}",
                                physical.display(),
                                io_msg(&e)
                            );
                            eprintln!("error: {msg}");
                            failed = Some(Fail::Reported);
                            continue;
                        }
                    };
                    let mut rel = dir.rel.clone();
                    rel.push(b'/');
                    rel.extend_from_slice(name.as_bytes());
                    stack.push(Item::Show(Node {
                        physical,
                        rel,
                        meta,
                    }));
                }
            }
        }
    }
    out.flush().map_err(|e| Fail::write(&e))?;
    failed.map_or(Ok(()), Err)
}

/// A directory's entry names, sorted by their bytes (NAR order).
fn read_sorted(dir: &Path) -> io::Result<Vec<std::ffi::OsString>> {
    let mut names = fs::read_dir(dir)?
        .map(|e| e.map(|e| e.file_name()))
        .collect::<io::Result<Vec<_>>>()?;
    names.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    Ok(names)
}

/// One line of the listing; with `long`, in `nix store ls -l`'s format
/// (`<type and mode> <size, 20 wide> <name>[ -> <target>]`).
fn show(out: &mut impl Write, node: &Node, long: bool) -> io::Result<()> {
    if long {
        let ft = node.meta.file_type();
        let (kind, size) = if ft.is_symlink() {
            ("lrwxrwxrwx", 0)
        } else if ft.is_dir() {
            ("dr-xr-xr-x", 0)
        } else if ft.is_file() && node.meta.permissions().mode() & 0o100 != 0 {
            ("-r-xr-xr-x", node.meta.len())
        } else if ft.is_file() {
            ("-r--r--r--", node.meta.len())
        } else {
            ("?---------", 0) // FIFO, socket, device: not representable in a NAR
        };
        write!(out, "{kind} {size:>20} ")?;
        out.write_all(&node.rel)?;
        if ft.is_symlink() {
            let target = fs::read_link(&node.physical).unwrap_or_default();
            out.write_all(b" -> ")?;
            out.write_all(target.as_os_str().as_bytes())?;
        }
    } else {
        out.write_all(&node.rel)?;
    }
    out.write_all(b"\n")
}

// ---------------------------------------------------------------------------------------
// cat

/// Symlinks followed by `cat` before giving up (as the kernel's `MAXSYMLINKS`).
const MAX_SYMLINKS: usize = 40;

pub fn cat(a: CatArgs, s: &StoreOpt) -> i32 {
    Fail::exit_code(cat_inner(&a, s))
}

/// Follows `loc` (the argument `given`) while it is a symlink, ourselves, so that
/// targets under /rocmx/store are mapped to the physical root too; gives where it ends
/// and its `lstat`.
fn follow(mut loc: Located, given: &Path, s: &StoreOpt) -> Result<(Located, Metadata), Fail> {
    let mut meta = status(&loc)?;
    let mut hops = 0;
    while meta.file_type().is_symlink() {
        hops += 1;
        if hops > MAX_SYMLINKS {
            return Err(Fail::msg(format!(
                "'{}': too many levels of symbolic links",
                given.display()
            )));
        }
        let target = fs::read_link(&loc.physical)
            .map_err(|e| Fail::msg(format!("reading symlink {loc}: {}", io_msg(&e))))?;
        let next = if target.is_absolute() {
            target
        } else {
            loc.given.parent().unwrap_or(Path::new("")).join(target)
        };
        loc = locate(&next, s);
        meta = status(&loc)?;
    }
    Ok((loc, meta))
}

/// Whether `loc` is in the store (logically or physically).
fn in_store(loc: &Located, s: &StoreOpt) -> bool {
    let root = s.root.clone().unwrap_or_else(LocalStore::default_root);
    loc.given.starts_with(STORE_DIR) || loc.physical.starts_with(root.join("store"))
}

/// What `ls` lists for the argument `given`: a symlink outside the store that leads
/// into it (such as `result`) is followed there, as Nix follows links to the store;
/// any other symlink (one inside a store path, or one that leads elsewhere) is listed
/// as the link it is, as `nix-store --ls` does.
fn to_store(loc: Located, given: &Path, s: &StoreOpt) -> Result<(Located, Metadata), Fail> {
    let meta = status(&loc)?;
    if !meta.file_type().is_symlink() || in_store(&loc, s) {
        return Ok((loc, meta));
    }
    match follow(locate(&loc.given, s), given, s) {
        Ok((end, end_meta)) if in_store(&end, s) => Ok((end, end_meta)),
        _ => Ok((loc, meta)),
    }
}

fn cat_inner(a: &CatArgs, s: &StoreOpt) -> Result<(), Fail> {
    let (loc, meta) = follow(locate(&a.path, s), &a.path, s)?;
    if meta.is_dir() {
        return Err(Fail::msg(format!("'{}' is a directory", a.path.display())));
    }
    if !meta.is_file() {
        return Err(Fail::msg(format!(
            "'{}' is not a regular file",
            a.path.display()
        )));
    }
    let mut file = File::open(&loc.physical)
        .map_err(|e| Fail::msg(format!("opening file {loc}: {}", io_msg(&e))))?;
    let mut out = BufWriter::with_capacity(256 * 1024, raw_stdout()?);
    copy(&mut file, &mut out, &loc)?;
    out.flush().map_err(|e| Fail::write(&e))
}

/// Copies `file` to `out`, telling read errors (named after the file) from write errors.
fn copy(file: &mut File, out: &mut impl Write, loc: &Located) -> Result<(), Fail> {
    use std::io::Read;
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        let n = match file.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                return Err(Fail::msg(format!("reading file {loc}: {}", io_msg(&e))));
            }
        };
        out.write_all(&buf[..n]).map_err(|e| Fail::write(&e))?;
    }
}
