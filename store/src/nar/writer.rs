//! The streaming NAR writer: a filesystem path (or in-memory bytes) to an [`io::Write`].
//!
//! Owns: walking a tree without recursion (deep trees cannot exhaust the stack) and no
//! deeper than the reader accepts ([`MAX_DEPTH`]), sorting
//! entries by name bytes, the executable bit (owner `x`), symlink targets, file contents
//! streamed in large chunks so that a BLAKE3 sink can hash them on several threads.
//!
//! Must not: follow symlinks, change the files it reads, or buffer whole files in memory.

use std::ffi::OsString;
use std::fs::{self, File};
use std::io::{self, BufWriter, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::{NarError, MAGIC, MAX_DEPTH};
use crate::hash::{Hash, HashAlgo, HashingWriter};

/// Size of the chunks in which file contents are read and written.
const CHUNK: usize = 1024 * 1024;

/// Token-level writer that counts bytes.
struct Tokens<W: Write> {
    out: BufWriter<W>,
    count: u64,
}

impl<W: Write> Tokens<W> {
    fn new(out: W) -> Self {
        Tokens {
            out: BufWriter::with_capacity(64 * 1024, out),
            count: 0,
        }
    }

    fn raw(&mut self, bytes: &[u8]) -> Result<(), NarError> {
        self.out.write_all(bytes).map_err(NarError::Write)?;
        self.count += bytes.len() as u64;
        Ok(())
    }

    fn pad(&mut self, len: u64) -> Result<(), NarError> {
        let pad = ((8 - len % 8) % 8) as usize;
        self.raw(&[0u8; 8][..pad])
    }

    fn str(&mut self, bytes: &[u8]) -> Result<(), NarError> {
        self.raw(&(bytes.len() as u64).to_le_bytes())?;
        self.raw(bytes)?;
        self.pad(bytes.len() as u64)
    }

    fn strs(&mut self, tokens: &[&[u8]]) -> Result<(), NarError> {
        tokens.iter().try_for_each(|t| self.str(t))
    }

    fn finish(mut self) -> Result<u64, NarError> {
        self.out.flush().map_err(NarError::Write)?;
        Ok(self.count)
    }
}

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
    let mut t = Tokens::new(out);
    let mut buf = Vec::new();
    t.str(MAGIC)?;
    let mut stack: Vec<Frame> = Vec::new();
    if let Some(frame) = node(&mut t, path, &mut buf)? {
        stack.push(frame);
    }
    loop {
        let depth = stack.len();
        let Some(top) = stack.last_mut() else {
            break;
        };
        let Some(name) = top.names.get(top.next) else {
            stack.pop();
            t.str(b")")?; // closes the directory node
            if !stack.is_empty() {
                t.str(b")")?; // closes the entry holding it
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
        t.strs(&[b"entry", b"(", b"name", name.as_bytes(), b"node"])?;
        match node(&mut t, &child, &mut buf)? {
            Some(frame) => stack.push(frame),
            None => t.str(b")")?,
        }
    }
    t.finish()
}

/// Writes one node. For a directory, writes its header and returns the frame to walk;
/// for anything else, writes the whole node.
fn node<W: Write>(
    t: &mut Tokens<W>,
    path: &Path,
    buf: &mut Vec<u8>,
) -> Result<Option<Frame>, NarError> {
    let dump_err = |source| NarError::Dump {
        path: path.to_path_buf(),
        source,
    };
    let meta = fs::symlink_metadata(path).map_err(dump_err)?;
    let ft = meta.file_type();
    if ft.is_symlink() {
        let target = fs::read_link(path).map_err(dump_err)?;
        t.strs(&[
            b"(",
            b"type",
            b"symlink",
            b"target",
            target.as_os_str().as_bytes(),
            b")",
        ])?;
        Ok(None)
    } else if ft.is_file() {
        t.strs(&[b"(", b"type", b"regular"])?;
        if meta.permissions().mode() & 0o100 != 0 {
            t.strs(&[b"executable", b""])?;
        }
        t.str(b"contents")?;
        let file = File::open(path).map_err(dump_err)?;
        contents(t, file, meta.len(), path, buf)?;
        t.str(b")")?;
        Ok(None)
    } else if ft.is_dir() {
        t.strs(&[b"(", b"type", b"directory"])?;
        let mut names = Vec::new();
        for entry in fs::read_dir(path).map_err(dump_err)? {
            names.push(entry.map_err(dump_err)?.file_name());
        }
        names.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
        Ok(Some(Frame {
            dir: path.to_path_buf(),
            names,
            next: 0,
        }))
    } else {
        Err(NarError::UnsupportedFileType {
            path: path.to_path_buf(),
        })
    }
}

/// Writes a contents token of exactly `len` bytes read from `file`.
fn contents<W: Write>(
    t: &mut Tokens<W>,
    mut file: impl Read,
    len: u64,
    path: &Path,
    buf: &mut Vec<u8>,
) -> Result<(), NarError> {
    t.raw(&len.to_le_bytes())?;
    // The buffer grows to the largest file seen, up to CHUNK: zeroing a whole CHUNK for a
    // small file (a typical build output) costs more than dumping it.
    let need = usize::try_from(len).unwrap_or(CHUNK).min(CHUNK);
    if buf.len() < need {
        buf.resize(need, 0);
    }
    let mut left = len;
    while left > 0 {
        let want = usize::try_from(left).unwrap_or(CHUNK).min(CHUNK);
        let got = match file.read(&mut buf[..want]) {
            Ok(0) => {
                return Err(NarError::FileChangedSize {
                    path: path.to_path_buf(),
                })
            }
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(source) => {
                return Err(NarError::Dump {
                    path: path.to_path_buf(),
                    source,
                })
            }
        };
        t.raw(&buf[..got])?;
        left -= got as u64;
    }
    t.pad(len)
}

/// Writes the NAR of a single regular file whose contents are `data` (as a text object
/// would be stored). Returns the archive size.
pub fn dump_regular<W: Write>(data: &[u8], executable: bool, out: W) -> Result<u64, NarError> {
    let mut t = Tokens::new(out);
    t.strs(&[MAGIC, b"(", b"type", b"regular"])?;
    if executable {
        t.strs(&[b"executable", b""])?;
    }
    t.strs(&[b"contents", data, b")"])?;
    t.finish()
}

/// The hash of the NAR of `path` and its size, like `nix-hash --type <algo> <path>`.
pub fn hash_path(path: &Path, algo: HashAlgo) -> Result<(Hash, u64), NarError> {
    let mut sink = HashingWriter::new(io::sink(), algo);
    dump_path(path, &mut sink)?;
    let (_, hash, size) = sink.finish();
    Ok((hash, size))
}
