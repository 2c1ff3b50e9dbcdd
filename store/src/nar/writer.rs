//! The streaming NAR writer: a filesystem path (or in-memory bytes) to an [`io::Write`].
//!
//! Owns: walking a tree without recursion (deep trees cannot exhaust the stack) and no
//! deeper than the reader accepts ([`MAX_DEPTH`]), the executable bit (owner `x`),
//! symlink targets, filtering, and [`hash_path`], which reads file contents straight into
//! a [`HashPipe`]'s buffers. The tokens are [`super::emit`]'s.
//!
//! Must not: follow symlinks, change the files it reads, or buffer whole files in memory.

use std::ffi::OsString;
use std::fs::{self, File};
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::emit::{entry_names, ContentSink, ContentsError, Emitter, WriteSink};
use super::{NarError, MAX_DEPTH};
use crate::hash::{Hash, HashAlgo, HashPipe};

/// One directory being written: its path, its sorted entry names, the next one to write.
struct Frame {
    dir: PathBuf,
    names: Vec<OsString>,
    next: usize,
}

/// Writes the NAR of `path` (a regular file, symlink or directory; never followed) to
/// `out`, byte-identical to `nix-store --dump`. Returns the archive size in bytes.
pub fn dump_path<W: Write>(path: &Path, out: W) -> Result<u64, NarError> {
    dump_path_filtered(path, out, &mut |_: &Path, _: &str| true)
}

/// Like [`dump_path`], but only entries below `path` for which `filter(entry,
/// kind)` returns true are included (a rejected directory is skipped whole).
/// `kind` is `regular`, `directory`, `symlink` or `unknown`, as Nix's
/// `builtins.filterSource` passes it. The root itself is always included.
pub fn dump_path_filtered<W: Write>(
    path: &Path,
    out: W,
    filter: &mut dyn FnMut(&Path, &str) -> bool,
) -> Result<u64, NarError> {
    let mut e = Emitter::new(WriteSink::new(out));
    dump(path, &mut e, filter)?;
    let (mut sink, size) = e.finish();
    sink.flush().map_err(NarError::Write)?;
    Ok(size)
}

/// The walk of [`dump_path_filtered`] and [`hash_path`]: the NAR of `path` to `e`.
fn dump<S: ContentSink>(
    path: &Path,
    e: &mut Emitter<S>,
    filter: &mut dyn FnMut(&Path, &str) -> bool,
) -> Result<(), NarError> {
    e.magic().map_err(NarError::Write)?;
    let mut stack: Vec<Frame> = Vec::new();
    if let Some(frame) = node(e, path)? {
        stack.push(frame);
    }
    loop {
        let depth = stack.len();
        let Some(top) = stack.last_mut() else {
            return Ok(());
        };
        let Some(name) = top.names.get(top.next) else {
            stack.pop();
            e.close().map_err(NarError::Write)?; // closes the directory node
            if !stack.is_empty() {
                e.close().map_err(NarError::Write)?; // closes the entry holding it
            }
            continue;
        };
        top.next += 1;
        let child = top.dir.join(name);
        let kind = match fs::symlink_metadata(&child) {
            Ok(m) if m.file_type().is_symlink() => "symlink",
            Ok(m) if m.file_type().is_file() => "regular",
            Ok(m) if m.file_type().is_dir() => "directory",
            _ => "unknown",
        };
        if !filter(&child, kind) {
            continue;
        }
        // The entry sits at level `stack.len() + 1` (the root is level 1); the reader
        // refuses the same entries.
        if depth >= MAX_DEPTH {
            return Err(NarError::TreeTooDeep {
                path: path.to_path_buf(),
            });
        }
        e.entry(name.as_bytes()).map_err(NarError::Write)?;
        match node(e, &child)? {
            Some(frame) => stack.push(frame),
            None => e.close().map_err(NarError::Write)?,
        }
    }
}

/// Writes one node. For a directory, writes its header and returns the frame to walk;
/// for anything else, writes the whole node.
fn node<S: ContentSink>(e: &mut Emitter<S>, path: &Path) -> Result<Option<Frame>, NarError> {
    let dump_err = |source| NarError::Dump {
        path: path.to_path_buf(),
        source,
    };
    let meta = fs::symlink_metadata(path).map_err(dump_err)?;
    let ft = meta.file_type();
    if ft.is_symlink() {
        let target = fs::read_link(path).map_err(dump_err)?;
        e.symlink(target.as_os_str().as_bytes())
            .map_err(NarError::Write)?;
        Ok(None)
    } else if ft.is_file() {
        let mut file = File::open(path).map_err(dump_err)?;
        let executable = meta.permissions().mode() & 0o100 != 0;
        e.regular_from(executable, &mut file, meta.len())
            .map_err(|err| match err {
                ContentsError::Read(source) => dump_err(source),
                ContentsError::Short => NarError::FileChangedSize {
                    path: path.to_path_buf(),
                },
                ContentsError::Write(source) => NarError::Write(source),
            })?;
        Ok(None)
    } else if ft.is_dir() {
        e.directory().map_err(NarError::Write)?;
        Ok(Some(Frame {
            dir: path.to_path_buf(),
            names: entry_names(path).map_err(dump_err)?,
            next: 0,
        }))
    } else {
        Err(NarError::UnsupportedFileType {
            path: path.to_path_buf(),
        })
    }
}

/// Writes the NAR of a single regular file whose contents are `data` (as a text object
/// would be stored). Returns the archive size.
pub fn dump_regular<W: Write>(data: &[u8], executable: bool, out: W) -> Result<u64, NarError> {
    let mut e = Emitter::new(WriteSink::new(out));
    e.magic()
        .and_then(|()| e.regular(executable, data))
        .map_err(NarError::Write)?;
    let (mut sink, size) = e.finish();
    sink.flush().map_err(NarError::Write)?;
    Ok(size)
}

/// The hash of the NAR of `path` and its size, like `nix-hash --type <algo> <path>`. File
/// contents are read straight into the buffers of a [`HashPipe`], hashed on another
/// thread while the next ones are read.
pub fn hash_path(path: &Path, algo: HashAlgo) -> Result<(Hash, u64), NarError> {
    let mut e = Emitter::new(HashPipe::new(algo));
    dump(path, &mut e, &mut |_: &Path, _: &str| true)?;
    let (pipe, size) = e.finish();
    let (hash, _) = pipe.finish().map_err(NarError::Write)?;
    Ok((hash, size))
}
