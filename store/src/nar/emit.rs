//! The NAR token emitter: the one place that writes the wire format.
//!
//! Owns: [`Emitter`], which writes an archive's tokens (the magic, node and entry
//! brackets, types, the executable mark, symlink targets, file contents with their length
//! and padding) and counts them; [`ContentSink`], what file contents are read into:
//! [`WriteSink`] over any writer, and [`HashPipe`], whose hashing buffers take them
//! without a copy; and [`entry_names`], a directory's entries in archive order.
//!
//! Must not: decide what goes into an archive (the callers walk: [`super::writer`] and the
//! local store's ingestion, which checks depth and records entries), follow symlinks, or
//! buffer whole files.

use std::ffi::OsString;
use std::fs;
use std::io::{self, BufWriter, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use super::MAGIC;
use crate::hash::HashPipe;

/// Largest read of file contents into a [`WriteSink`].
const CHUNK: usize = 1024 * 1024;

/// Where an [`Emitter`] writes: a writer that also lends room to read file contents into.
pub(crate) trait ContentSink: Write {
    /// Room for at most `want` bytes of file contents; not empty when `want` is not.
    fn spare(&mut self, want: usize) -> &mut [u8];
    /// Writes the first `n` bytes of the last [`spare`](Self::spare).
    fn commit(&mut self, n: usize) -> io::Result<()>;
}

/// A [`ContentSink`] over any writer: tokens go through a 64 KiB buffer, file contents
/// through a read buffer of up to [`CHUNK`] bytes, written past it.
pub(crate) struct WriteSink<W: Write> {
    out: BufWriter<W>,
    buf: Vec<u8>,
}

impl<W: Write> WriteSink<W> {
    pub(crate) fn new(out: W) -> Self {
        WriteSink {
            out: BufWriter::with_capacity(64 * 1024, out),
            buf: Vec::new(),
        }
    }
}

impl<W: Write> Write for WriteSink<W> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.out.write(data)
    }
    fn write_all(&mut self, data: &[u8]) -> io::Result<()> {
        self.out.write_all(data)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

impl<W: Write> ContentSink for WriteSink<W> {
    fn spare(&mut self, want: usize) -> &mut [u8] {
        // The buffer grows to the largest file seen, up to CHUNK: zeroing a whole CHUNK
        // for a small file (a typical build output) costs more than dumping it.
        let want = want.min(CHUNK);
        if self.buf.len() < want {
            self.buf.resize(want, 0);
        }
        &mut self.buf[..want]
    }
    fn commit(&mut self, n: usize) -> io::Result<()> {
        self.out.write_all(&self.buf[..n])
    }
}

impl ContentSink for HashPipe {
    fn spare(&mut self, want: usize) -> &mut [u8] {
        let room = HashPipe::spare(self);
        let n = room.len().min(want);
        &mut room[..n]
    }
    fn commit(&mut self, n: usize) -> io::Result<()> {
        HashPipe::commit(self, n)
    }
}

/// Why a regular file's node could not be written.
#[derive(Debug)]
pub(crate) enum ContentsError {
    /// Reading the file failed.
    Read(io::Error),
    /// The file ended before the size its node declares.
    Short,
    /// Writing the archive failed.
    Write(io::Error),
}

/// Writes NAR tokens to a sink and counts them. Callers give the nodes in archive order:
/// [`magic`](Self::magic), then one node; a directory's entries sorted by name bytes
/// ([`entry_names`]), each [`entry`](Self::entry), its node, [`close`](Self::close).
pub(crate) struct Emitter<S> {
    out: S,
    count: u64,
}

impl<S: Write> Emitter<S> {
    pub(crate) fn new(out: S) -> Self {
        Emitter { out, count: 0 }
    }

    fn raw(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.out.write_all(bytes)?;
        self.count += bytes.len() as u64;
        Ok(())
    }

    /// Zero bytes up to the next multiple of 8 after `len` bytes.
    fn pad(&mut self, len: u64) -> io::Result<()> {
        let pad = ((8 - len % 8) % 8) as usize;
        self.raw(&[0u8; 8][..pad])
    }

    /// One string token: length, bytes, padding.
    fn str(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.raw(&(bytes.len() as u64).to_le_bytes())?;
        self.raw(bytes)?;
        self.pad(bytes.len() as u64)
    }

    fn strs(&mut self, tokens: &[&[u8]]) -> io::Result<()> {
        tokens.iter().try_for_each(|t| self.str(t))
    }

    /// The archive's first token.
    pub(crate) fn magic(&mut self) -> io::Result<()> {
        self.str(MAGIC)
    }

    /// A whole symlink node.
    pub(crate) fn symlink(&mut self, target: &[u8]) -> io::Result<()> {
        self.strs(&[b"(", b"type", b"symlink", b"target", target, b")"])
    }

    /// A regular node up to its contents' length (the owner `x` bit is `executable`).
    fn regular_head(&mut self, executable: bool) -> io::Result<()> {
        self.strs(&[b"(", b"type", b"regular"])?;
        if executable {
            self.strs(&[b"executable", b""])?;
        }
        self.str(b"contents")
    }

    /// A whole regular node whose contents are `data`.
    pub(crate) fn regular(&mut self, executable: bool, data: &[u8]) -> io::Result<()> {
        self.regular_head(executable)?;
        self.strs(&[data, b")"])
    }

    /// Opens a directory node; its entries follow, then [`close`](Self::close).
    pub(crate) fn directory(&mut self) -> io::Result<()> {
        self.strs(&[b"(", b"type", b"directory"])
    }

    /// Opens the entry `name` of a directory; its node follows, then
    /// [`close`](Self::close).
    pub(crate) fn entry(&mut self, name: &[u8]) -> io::Result<()> {
        self.strs(&[b"entry", b"(", b"name", name, b"node"])
    }

    /// Closes a directory node or an entry.
    pub(crate) fn close(&mut self) -> io::Result<()> {
        self.str(b")")
    }

    /// The sink (not flushed) and the archive's size.
    pub(crate) fn finish(self) -> (S, u64) {
        (self.out, self.count)
    }
}

impl<S: ContentSink> Emitter<S> {
    /// A whole regular node whose contents are exactly `len` bytes read from `file`, read
    /// into the sink's own room.
    pub(crate) fn regular_from(
        &mut self,
        executable: bool,
        file: &mut impl Read,
        len: u64,
    ) -> Result<(), ContentsError> {
        self.regular_head(executable)
            .and_then(|()| self.raw(&len.to_le_bytes()))
            .map_err(ContentsError::Write)?;
        let mut left = len;
        while left > 0 {
            let want = usize::try_from(left).unwrap_or(usize::MAX);
            match file.read(self.out.spare(want)) {
                Ok(0) => return Err(ContentsError::Short),
                Ok(n) => {
                    self.out.commit(n).map_err(ContentsError::Write)?;
                    self.count += n as u64;
                    left -= n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(ContentsError::Read(e)),
            }
        }
        self.pad(len)
            .and_then(|()| self.close())
            .map_err(ContentsError::Write)
    }
}

/// The names in the directory `dir`, in archive order (by their bytes).
pub(crate) fn entry_names(dir: &Path) -> io::Result<Vec<OsString>> {
    let mut names = Vec::new();
    for entry in fs::read_dir(dir)? {
        names.push(entry?.file_name());
    }
    names.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    Ok(names)
}
