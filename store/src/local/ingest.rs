//! Ingesting a file or tree: hash it as a NAR, then copy it into a scratch directory.
//!
//! Owns: [`scan`], which walks a tree once in NAR order, streams its NAR into a BLAKE3
//! hasher (never building the archive) and records every entry with the metadata it had
//! when read; and [`materialise`], which recreates that recorded tree in normalised form
//! (see [`super::fsutil`]), copying file contents with `copy_file_range` and checking each
//! source file's size, inode and change time against the scan, so that the copy is
//! exactly what was hashed or the add fails with [`StoreError::SourceChanged`].
//!
//! Must not: follow symlinks, write anywhere but the destination, read a file twice
//! in one pass, recurse natively, or accept a tree deeper than
//! [`crate::tree::MAX_DEPTH`]. The NAR it hashes is byte-identical to [`crate::nar::dump_path`]'s (the
//! tests check this).

use std::ffi::OsString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender};

use super::error::StoreError;
use super::fsutil::{self, special_kind};
use crate::hash::{Hash, HashAlgo, Hasher};
use crate::nar::MAGIC;

/// Size of the chunks in which file contents are read for hashing.
const CHUNK: usize = 1024 * 1024;

/// What an entry is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// A directory; its entries follow it.
    Directory,
    /// A regular file.
    Regular {
        /// Owner-executable.
        executable: bool,
    },
    /// A symlink and its target.
    Symlink(PathBuf),
}

/// Identity of a file as read: if any of these differ at copy time, it changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    fn of(m: &fs::Metadata) -> Stamp {
        Stamp {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        }
    }
}

/// One entry of a scanned tree, in NAR order (parents before children).
#[derive(Debug, Clone)]
pub struct Entry {
    /// Path relative to the root (empty for the root).
    pub rel: PathBuf,
    /// What it is.
    pub kind: Kind,
    /// Full mode bits as read.
    pub mode: u32,
    /// Modification time as read (seconds).
    pub mtime: i64,
    /// Identity as read (files only matter).
    pub stamp: Stamp,
}

/// A scanned tree: its entries and its NAR's BLAKE3 hash and size.
#[derive(Debug)]
pub struct Scanned {
    /// Entries in NAR order.
    pub entries: Vec<Entry>,
    /// BLAKE3 of the NAR.
    pub nar_hash: Hash,
    /// Size of the NAR in bytes.
    pub nar_size: u64,
}

/// Full buffers that may wait for the hashing thread.
const PIPE_DEPTH: usize = 4;

/// Hashes NAR tokens without building the archive. Bytes go into a staging buffer of
/// [`CHUNK`] bytes (file contents are read straight into it: no extra copy); each full
/// buffer is handed to a hashing thread, so that reading the next one overlaps hashing
/// this one (on BLAKE3's worker threads), and every multithreaded BLAKE3 update starts
/// at a multiple of [`CHUNK`], where BLAKE3 parallelises best.
struct NarHasher {
    stage: Vec<u8>,
    fill: usize,
    count: u64,
    full: Option<SyncSender<Vec<u8>>>,
    empty: Receiver<Vec<u8>>,
    allocated: usize,
}

/// The error when the hashing thread is gone (it only stops early by panicking).
fn hasher_gone() -> io::Error {
    io::Error::other("the hashing thread stopped")
}

impl NarHasher {
    fn new(full: SyncSender<Vec<u8>>, empty: Receiver<Vec<u8>>) -> NarHasher {
        NarHasher {
            stage: vec![0u8; CHUNK],
            fill: 0,
            count: 0,
            full: Some(full),
            empty,
            allocated: 1,
        }
    }
    /// Sends the first `fill` bytes of the stage and takes a fresh buffer.
    fn send(&mut self) -> io::Result<()> {
        let next = match self.empty.try_recv() {
            Ok(buf) => buf,
            Err(_) if self.allocated < PIPE_DEPTH + 2 => {
                self.allocated += 1;
                vec![0u8; CHUNK]
            }
            Err(_) => self.empty.recv().map_err(|_| hasher_gone())?,
        };
        let mut full = std::mem::replace(&mut self.stage, next);
        full.truncate(self.fill);
        self.fill = 0;
        self.full
            .as_ref()
            .ok_or_else(hasher_gone)?
            .send(full)
            .map_err(|_| hasher_gone())
    }
    fn flush_if_full(&mut self) -> io::Result<()> {
        if self.fill == CHUNK {
            self.send()?;
        }
        Ok(())
    }
    fn raw(&mut self, mut b: &[u8]) -> io::Result<()> {
        self.count += b.len() as u64;
        while !b.is_empty() {
            // Returned buffers were truncated by the hashing side; restore their length.
            self.stage.resize(CHUNK, 0);
            let n = b.len().min(CHUNK - self.fill);
            self.stage[self.fill..self.fill + n].copy_from_slice(&b[..n]);
            self.fill += n;
            b = &b[n..];
            self.flush_if_full()?;
        }
        Ok(())
    }
    fn pad(&mut self, len: u64) -> io::Result<()> {
        let pad = ((8 - len % 8) % 8) as usize;
        self.raw(&[0u8; 8][..pad])
    }
    fn str(&mut self, b: &[u8]) -> io::Result<()> {
        self.raw(&(b.len() as u64).to_le_bytes())?;
        self.raw(b)?;
        self.pad(b.len() as u64)
    }
    fn strs(&mut self, toks: &[&[u8]]) -> io::Result<()> {
        toks.iter().try_for_each(|t| self.str(t))
    }
    /// Hashes exactly `size` bytes read from `file`; `Ok(false)` if it ends early.
    fn contents(&mut self, file: &mut File, size: u64) -> io::Result<bool> {
        let mut left = size;
        while left > 0 {
            self.stage.resize(CHUNK, 0);
            let room = CHUNK - self.fill;
            let want = usize::try_from(left).unwrap_or(room).min(room);
            match file.read(&mut self.stage[self.fill..self.fill + want]) {
                Ok(0) => return Ok(false),
                Ok(n) => {
                    self.fill += n;
                    self.count += n as u64;
                    left -= n as u64;
                    self.flush_if_full()?;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }
    /// Sends the rest and closes the pipe; returns the NAR size.
    fn close(&mut self) -> io::Result<u64> {
        if self.fill > 0 {
            self.send()?;
        }
        self.full = None;
        Ok(self.count)
    }
}

/// `base` joined with `rel`, or `base` itself for the root (no trailing slash).
pub fn join(base: &Path, rel: &Path) -> PathBuf {
    if rel.as_os_str().is_empty() {
        base.to_path_buf()
    } else {
        base.join(rel)
    }
}

fn open_nofollow(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags((rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK).bits() as i32)
        .open(path)
}

/// A directory being walked.
struct Frame {
    rel: PathBuf,
    names: Vec<OsString>,
    next: usize,
}

/// Walks `src` once in NAR order, hashing its NAR with BLAKE3 (on another thread) and
/// recording its entries. Sockets, FIFOs and devices are refused.
pub fn scan(src: &Path) -> Result<Scanned, StoreError> {
    let (full_tx, full_rx) = mpsc::sync_channel::<Vec<u8>>(PIPE_DEPTH);
    let (empty_tx, empty_rx) = mpsc::channel::<Vec<u8>>();
    std::thread::scope(|scope| {
        let hasher = scope.spawn(move || {
            let mut h = Hasher::new(HashAlgo::Blake3);
            for buf in full_rx {
                h.update(&buf);
                // The walker may be gone already (after an error); nothing to do then.
                let _ = empty_tx.send(buf);
            }
            h.finish()
        });
        let mut h = NarHasher::new(full_tx, empty_rx);
        let walked = walk(src, &mut h).and_then(|entries| {
            let size = h.close().map_err(StoreError::io("hashing", src))?;
            Ok((entries, size))
        });
        drop(h); // closes the pipe if walking failed
        let nar_hash = hasher
            .join()
            .map_err(|_| StoreError::io("hashing", src)(hasher_gone()))?;
        let (entries, nar_size) = walked?;
        Ok(Scanned {
            entries,
            nar_hash,
            nar_size,
        })
    })
}

/// The walk of [`scan`]: feeds the NAR of `src` to `h`, returns the entries.
fn walk(src: &Path, h: &mut NarHasher) -> Result<Vec<Entry>, StoreError> {
    let mut entries = Vec::new();
    let mut stack: Vec<Frame> = Vec::new();
    let e = |r: io::Result<()>| r.map_err(StoreError::io("hashing", src));
    e(h.str(MAGIC))?;
    if let Some(f) = node(src, PathBuf::new(), h, &mut entries)? {
        stack.push(f);
    }
    loop {
        let depth = stack.len();
        let Some(top) = stack.last_mut() else {
            break;
        };
        let Some(name) = top.names.get(top.next) else {
            stack.pop();
            e(h.str(b")"))?;
            if !stack.is_empty() {
                e(h.str(b")"))?;
            }
            continue;
        };
        top.next += 1;
        let rel = top.rel.join(name);
        // The entry sits at level `stack.len() + 1` (the root is level 1).
        if depth >= crate::tree::MAX_DEPTH {
            return Err(crate::tree::TreeError::TooDeep {
                path: src.to_path_buf(),
                max: crate::tree::MAX_DEPTH,
            }
            .into());
        }
        e(h.strs(&[b"entry", b"(", b"name", name.as_bytes(), b"node"]))?;
        match node(src, rel, h, &mut entries)? {
            Some(f) => stack.push(f),
            None => e(h.str(b")"))?,
        }
    }
    Ok(entries)
}

/// A [`StoreError::Io`] maker for a failed hand-over to the hashing thread.
fn hash_err(path: &Path) -> impl FnOnce(io::Error) -> StoreError + '_ {
    move |e| StoreError::io("hashing", path)(e)
}

fn node(
    src: &Path,
    rel: PathBuf,
    h: &mut NarHasher,
    entries: &mut Vec<Entry>,
) -> Result<Option<Frame>, StoreError> {
    let path = join(src, &rel);
    let m = fs::symlink_metadata(&path).map_err(StoreError::io("reading", &path))?;
    let ft = m.file_type();
    let mut entry = Entry {
        rel,
        kind: Kind::Directory,
        mode: m.mode(),
        mtime: m.mtime(),
        stamp: Stamp::of(&m),
    };
    if ft.is_symlink() {
        let target = fs::read_link(&path).map_err(StoreError::io("reading symlink", &path))?;
        h.strs(&[
            b"(",
            b"type",
            b"symlink",
            b"target",
            target.as_os_str().as_bytes(),
            b")",
        ])
        .map_err(hash_err(&path))?;
        entry.kind = Kind::Symlink(target);
        entries.push(entry);
        Ok(None)
    } else if ft.is_file() {
        let mut file = open_nofollow(&path).map_err(StoreError::io("opening", &path))?;
        let m = file.metadata().map_err(StoreError::io("reading", &path))?;
        if !m.is_file() {
            return Err(StoreError::SourceChanged { path });
        }
        let executable = m.mode() & 0o100 != 0;
        h.strs(&[b"(", b"type", b"regular"])
            .map_err(hash_err(&path))?;
        if executable {
            h.strs(&[b"executable", b""]).map_err(hash_err(&path))?;
        }
        h.str(b"contents").map_err(hash_err(&path))?;
        let size = m.size();
        h.raw(&size.to_le_bytes()).map_err(hash_err(&path))?;
        if !h
            .contents(&mut file, size)
            .map_err(StoreError::io("reading", &path))?
        {
            return Err(StoreError::SourceChanged { path });
        }
        h.pad(size).map_err(hash_err(&path))?;
        h.str(b")").map_err(hash_err(&path))?;
        entry.kind = Kind::Regular { executable };
        entry.mode = m.mode();
        entry.mtime = m.mtime();
        entry.stamp = Stamp::of(&m);
        entries.push(entry);
        Ok(None)
    } else if ft.is_dir() {
        h.strs(&[b"(", b"type", b"directory"])
            .map_err(hash_err(&path))?;
        let mut names = Vec::new();
        for e in fs::read_dir(&path).map_err(StoreError::io("listing", &path))? {
            names.push(e.map_err(StoreError::io("listing", &path))?.file_name());
        }
        names.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
        let rel = entry.rel.clone();
        entries.push(entry);
        Ok(Some(Frame {
            rel,
            names,
            next: 0,
        }))
    } else {
        Err(StoreError::UnsupportedFileType {
            path,
            kind: special_kind(&m),
        })
    }
}

/// Recreates the scanned tree of `src` at `dest` (which must not exist; its parent must),
/// normalised. Directories are created first, then files and symlinks on a few threads
/// (creating inodes dominates the cost on ext4), then directories get their final mode and
/// times, deepest first. File contents are copied in the kernel; every source file is
/// checked to be the one that was hashed. Leaves `dest` un-synced.
pub fn materialise(src: &Path, scanned: &Scanned, dest: &Path) -> Result<(), StoreError> {
    let mut leaves = Vec::new();
    for e in &scanned.entries {
        if e.kind == Kind::Directory {
            let to = join(dest, &e.rel);
            fs::DirBuilder::new()
                .mode(0o700)
                .create(&to)
                .map_err(StoreError::io("creating", &to))?;
        } else {
            leaves.push(e);
        }
    }
    let workers = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .clamp(1, MAX_COPY_THREADS)
        .min(leaves.len().div_ceil(PER_THREAD_MIN).max(1));
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let work = || -> Result<(), StoreError> {
        while !failed.load(Ordering::Relaxed) {
            let Some(e) = leaves.get(next.fetch_add(1, Ordering::Relaxed)) else {
                return Ok(());
            };
            if let Err(err) = leaf(src, dest, e) {
                failed.store(true, Ordering::Relaxed);
                return Err(err);
            }
        }
        Ok(())
    };
    if workers <= 1 {
        work()?;
    } else {
        std::thread::scope(|sc| {
            let handles: Vec<_> = (1..workers).map(|_| sc.spawn(work)).collect();
            let mut result = work();
            for h in handles {
                let r = h.join().unwrap_or_else(|_| {
                    Err(StoreError::SourceChanged {
                        path: src.to_path_buf(),
                    })
                });
                result = result.and(r);
            }
            result
        })?;
    }
    for e in scanned.entries.iter().rev() {
        if e.kind == Kind::Directory {
            let to = join(dest, &e.rel);
            fsutil::chmod(&to, fsutil::EXEC_MODE)?;
            fsutil::set_canonical_times(&to)?;
        }
    }
    Ok(())
}

/// Most threads [`materialise`] uses.
const MAX_COPY_THREADS: usize = 4;
/// Fewest files per extra thread.
const PER_THREAD_MIN: usize = 16;

/// Creates one file or symlink of the tree.
fn leaf(src: &Path, dest: &Path, e: &Entry) -> Result<(), StoreError> {
    let to = join(dest, &e.rel);
    match &e.kind {
        Kind::Directory => Ok(()),
        Kind::Symlink(target) => {
            std::os::unix::fs::symlink(target, &to).map_err(StoreError::io("creating", &to))?;
            fsutil::set_canonical_times(&to)
        }
        Kind::Regular { executable } => {
            let from = join(src, &e.rel);
            copy_checked(&from, &to, e.stamp)?;
            let mode = if *executable {
                fsutil::EXEC_MODE
            } else {
                fsutil::FILE_MODE
            };
            fsutil::chmod(&to, mode)
        }
    }
}

/// Copies `from` to a new file `to`, failing if `from` is not the file stamped `stamp` or
/// changed during the copy.
fn copy_checked(from: &Path, to: &Path, stamp: Stamp) -> Result<(), StoreError> {
    let changed = || StoreError::SourceChanged {
        path: from.to_path_buf(),
    };
    let mut src = open_nofollow(from).map_err(StoreError::io("opening", from))?;
    let before = src.metadata().map_err(StoreError::io("reading", from))?;
    if Stamp::of(&before) != stamp {
        return Err(changed());
    }
    let mut dst = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(to)
        .map_err(StoreError::io("creating", to))?;
    let copied = io::copy(&mut src, &mut dst).map_err(StoreError::io("copying into", to))?;
    let after = src.metadata().map_err(StoreError::io("reading", from))?;
    if copied != stamp.size || Stamp::of(&after) != stamp {
        return Err(changed());
    }
    fsutil::set_canonical_times_fd(&dst, to)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nar;
    use std::os::unix::fs::{symlink, PermissionsExt};

    fn sample(root: &Path) {
        fs::create_dir_all(root.join("sub/empty")).expect("mkdir");
        fs::create_dir_all(root.join("-dash dir")).expect("mkdir");
        fs::write(root.join("a"), "hello").expect("write");
        fs::write(root.join("sub/é ü"), "").expect("write");
        fs::write(root.join("-dash dir/big"), vec![7u8; 3 * CHUNK + 5]).expect("write");
        fs::write(root.join("run"), "#!/bin/sh\n").expect("write");
        fs::set_permissions(root.join("run"), fs::Permissions::from_mode(0o750)).expect("chmod");
        symlink("a", root.join("link")).expect("symlink");
        symlink("/does/not/exist", root.join("sub/dangling")).expect("symlink");
    }

    #[test]
    fn scan_hashes_exactly_the_nar() {
        let tmp = tempfile::tempdir().expect("tmp");
        let root = tmp.path().join("t");
        sample(&root);
        let s = scan(&root).expect("scan");
        let (hash, size) = nar::hash_path(&root, HashAlgo::Blake3).expect("hash");
        assert_eq!((s.nar_hash, s.nar_size), (hash, size));
        let rels: Vec<String> = s
            .entries
            .iter()
            .map(|e| e.rel.display().to_string())
            .collect();
        assert_eq!(
            rels,
            [
                "",
                "-dash dir",
                "-dash dir/big",
                "a",
                "link",
                "run",
                "sub",
                "sub/dangling",
                "sub/empty",
                "sub/é ü"
            ]
        );
        // A single file and a lone symlink too.
        for p in [root.join("a"), root.join("link")] {
            let s = scan(&p).expect("scan");
            assert_eq!(
                (s.nar_hash, s.nar_size),
                nar::hash_path(&p, HashAlgo::Blake3).expect("hash")
            );
        }
    }

    #[test]
    fn materialise_copies_normalised_with_the_same_nar() {
        let tmp = tempfile::tempdir().expect("tmp");
        let root = tmp.path().join("t");
        sample(&root);
        let s = scan(&root).expect("scan");
        let dest = tmp.path().join("copy");
        materialise(&root, &s, &dest).expect("copy");
        assert_eq!(scan(&dest).expect("rescan").nar_hash, s.nar_hash);
        let m = |p: &str| fs::symlink_metadata(dest.join(p)).expect("stat");
        assert_eq!(m("run").mode() & 0o7777, 0o555);
        assert_eq!(m("a").mode() & 0o7777, 0o444);
        assert_eq!(m("sub").mode() & 0o7777, 0o555);
        assert_eq!(
            [m("").mtime(), m("a").mtime(), m("link").mtime()],
            [1, 1, 1]
        );
        assert_eq!(
            fs::read_link(dest.join("sub/dangling")).expect("link"),
            Path::new("/does/not/exist")
        );
        fsutil::remove_tree(&dest).expect("cleanup");
    }

    #[test]
    fn detects_a_source_changed_after_hashing() {
        let tmp = tempfile::tempdir().expect("tmp");
        let root = tmp.path().join("t");
        sample(&root);
        let s = scan(&root).expect("scan");
        fs::write(root.join("a"), "HELLO").expect("rewrite");
        let e = materialise(&root, &s, &tmp.path().join("copy")).expect_err("changed");
        assert!(
            matches!(e, StoreError::SourceChanged { ref path } if path.ends_with("a")),
            "{e}"
        );
    }

    #[test]
    fn refuses_special_files() {
        let tmp = tempfile::tempdir().expect("tmp");
        let root = tmp.path().join("t");
        fs::create_dir(&root).expect("mkdir");
        let sock = root.join("sock");
        let _listener = std::os::unix::net::UnixListener::bind(&sock).expect("bind");
        let e = scan(&root).expect_err("socket");
        assert_eq!(
            e.to_string(),
            format!(
                "cannot add {sock:?}: it is a socket; only regular files, directories and \
                 symlinks can be stored (remove it or filter it out)"
            )
        );
    }
}
