//! Ingesting a file or tree: hash it as a NAR, then copy it into a scratch directory.
//!
//! Owns: [`scan`], which walks a tree once in NAR order, emits its NAR through the NAR
//! module's token emitter into a [`HashPipe`] (BLAKE3 on another thread, file contents
//! read straight into its buffers; the archive is never built) and records every entry
//! with the metadata it had when read; [`list_until`], the same walk recording the same
//! entries without reading contents (so a copy can run while the scan hashes); and
//! [`materialise`], which recreates that recorded tree in normalised form (see
//! [`super::fsutil`]) on up to eight threads, copying file contents (files of 64 KiB and
//! more with O_DIRECT writes past the page cache, smaller ones with `copy_file_range`)
//! and checking each source file's size, inode and change time against the scan, so that
//! the copy is exactly what was hashed or the add fails with
//! [`StoreError::SourceChanged`]. One walk skeleton ([`drive`]) serves both walks; the
//! `…_until` forms stop early when a flag is raised (an add that lists and copies on
//! one thread while it scans on another stops both sides when either fails).
//!
//! Must not: follow symlinks, write anywhere but the destination, read a file twice
//! in one pass, recurse natively, or accept a tree deeper than
//! [`crate::tree::MAX_DEPTH`], or write NAR tokens itself. The NAR it hashes is
//! byte-identical to [`crate::nar::dump_path`]'s (the tests check this).

use std::ffi::{OsStr, OsString};
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use super::error::StoreError;
use super::fsutil::{self, special_kind};
use crate::direct::{DirectWriter, DIRECT_MIN};
use crate::hash::{Hash, HashAlgo, HashPipe};
use crate::nar::{entry_names, ContentsError, Emitter};

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
#[derive(Debug, Clone, PartialEq, Eq)]
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

impl Frame {
    /// The directory at `path` (`rel` below the walk's root), its entries listed in NAR
    /// order, none visited yet.
    fn of(path: &Path, rel: PathBuf) -> Result<Frame, StoreError> {
        let names = entry_names(path).map_err(StoreError::io("listing", path))?;
        Ok(Frame {
            rel,
            names,
            next: 0,
        })
    }
}

/// Walks `src` once in NAR order, hashing its NAR with BLAKE3 (on another thread) and
/// recording its entries. Sockets, FIFOs and devices are refused.
pub fn scan(src: &Path) -> Result<Scanned, StoreError> {
    scan_until(src, &AtomicBool::new(false)).map(|s| s.expect("never stopped"))
}

/// [`scan`], giving up (`None`) as soon as `stop` is raised: the other side of a
/// concurrent add failed.
pub fn scan_until(src: &Path, stop: &AtomicBool) -> Result<Option<Scanned>, StoreError> {
    let mut v = Scan {
        e: Emitter::new(HashPipe::new(HashAlgo::Blake3)),
        entries: Vec::new(),
    };
    // On an error or a stop the emitter is dropped, and its pipe stops the hashing thread.
    v.e.magic().map_err(hash_err(src))?;
    if !drive(src, &mut v, stop)? {
        return Ok(None);
    }
    let (pipe, nar_size) = v.e.finish();
    let (nar_hash, _) = pipe.finish().map_err(hash_err(src))?;
    Ok(Some(Scanned {
        entries: v.entries,
        nar_hash,
        nar_size,
    }))
}

/// Walks `src` in NAR order like [`scan`], recording its entries without reading any
/// file's contents, and gives up (`None`) as soon as `stop` is raised. For a tree that did
/// not change in between, the entries equal `scan(src)`'s, stamps included:
/// [`materialise`] from them while `scan` hashes, compare the two lists, and the copy is
/// what was hashed (each file was read by both with the same identity, size and times).
/// Sockets, FIFOs and devices are refused.
pub fn list_until(src: &Path, stop: &AtomicBool) -> Result<Option<Vec<Entry>>, StoreError> {
    let mut v = List {
        entries: Vec::new(),
    };
    Ok(drive(src, &mut v, stop)?.then_some(v.entries))
}

/// What a walk does at each of its steps; [`drive`] takes it through a tree in NAR order.
trait Visit {
    /// Records the entry `rel` of `src` (the root: empty); gives the directory to
    /// descend into when it is one.
    fn node(&mut self, src: &Path, rel: PathBuf) -> Result<Option<Frame>, StoreError>;
    /// Before the node of a directory's entry `name`.
    fn entry(&mut self, _src: &Path, _name: &OsStr) -> Result<(), StoreError> {
        Ok(())
    }
    /// After the node of an entry that is not a directory.
    fn leaf_done(&mut self, _src: &Path) -> Result<(), StoreError> {
        Ok(())
    }
    /// After a directory's last entry; `nested` unless it is the root.
    fn dir_done(&mut self, _src: &Path, _nested: bool) -> Result<(), StoreError> {
        Ok(())
    }
}

/// Takes `v` through `src` in NAR order (parents first, entries by name), with a stack
/// instead of native recursion, refusing entries past [`crate::tree::MAX_DEPTH`].
/// Gives `false` when `stop` was raised before the end.
fn drive(src: &Path, v: &mut impl Visit, stop: &AtomicBool) -> Result<bool, StoreError> {
    let mut stack: Vec<Frame> = Vec::new();
    if let Some(f) = v.node(src, PathBuf::new())? {
        stack.push(f);
    }
    loop {
        let depth = stack.len();
        let Some(top) = stack.last_mut() else {
            return Ok(true);
        };
        if stop.load(Ordering::Relaxed) {
            return Ok(false);
        }
        let Some(name) = top.names.get(top.next) else {
            stack.pop();
            v.dir_done(src, !stack.is_empty())?;
            continue;
        };
        top.next += 1;
        let rel = top.rel.join(name);
        check_depth(src, depth)?;
        v.entry(src, name)?;
        match v.node(src, rel)? {
            Some(f) => stack.push(f),
            None => v.leaf_done(src)?,
        }
    }
}

/// The walk of [`list_until`]: entries from `lstat`, as [`Scan`] records them.
struct List {
    entries: Vec<Entry>,
}

impl Visit for List {
    fn node(&mut self, src: &Path, rel: PathBuf) -> Result<Option<Frame>, StoreError> {
        let path = join(src, &rel);
        let m = fs::symlink_metadata(&path).map_err(StoreError::io("reading", &path))?;
        let ft = m.file_type();
        let kind = if ft.is_symlink() {
            Kind::Symlink(fs::read_link(&path).map_err(StoreError::io("reading symlink", &path))?)
        } else if ft.is_file() {
            Kind::Regular {
                executable: m.mode() & 0o100 != 0,
            }
        } else if ft.is_dir() {
            Kind::Directory
        } else {
            return Err(StoreError::UnsupportedFileType {
                path,
                kind: special_kind(&m),
            });
        };
        let frame = if kind == Kind::Directory {
            Some(Frame::of(&path, rel.clone())?)
        } else {
            None
        };
        self.entries.push(Entry {
            rel,
            kind,
            mode: m.mode(),
            mtime: m.mtime(),
            stamp: Stamp::of(&m),
        });
        Ok(frame)
    }
}

/// The walk of [`scan`]: emits the NAR of the tree through `e` and records the entries.
struct Scan {
    e: Emitter<HashPipe>,
    entries: Vec<Entry>,
}

impl Visit for Scan {
    fn node(&mut self, src: &Path, rel: PathBuf) -> Result<Option<Frame>, StoreError> {
        node(src, rel, &mut self.e, &mut self.entries)
    }
    fn entry(&mut self, src: &Path, name: &OsStr) -> Result<(), StoreError> {
        self.e.entry(name.as_bytes()).map_err(hash_err(src))
    }
    fn leaf_done(&mut self, src: &Path) -> Result<(), StoreError> {
        self.e.close().map_err(hash_err(src)) // closes the entry
    }
    fn dir_done(&mut self, src: &Path, nested: bool) -> Result<(), StoreError> {
        self.e.close().map_err(hash_err(src))?; // closes the directory node
        if nested {
            self.e.close().map_err(hash_err(src))?; // closes the entry holding it
        }
        Ok(())
    }
}

/// Refuses an entry below `depth` open directories when that passes
/// [`crate::tree::MAX_DEPTH`] (the entry sits at level `depth + 1`; the root is level 1).
fn check_depth(src: &Path, depth: usize) -> Result<(), StoreError> {
    if depth >= crate::tree::MAX_DEPTH {
        return Err(crate::tree::TreeError::TooDeep {
            path: src.to_path_buf(),
            max: crate::tree::MAX_DEPTH,
        }
        .into());
    }
    Ok(())
}

/// A [`StoreError::Io`] maker for a failed hand-over to the hashing thread.
fn hash_err(path: &Path) -> impl FnOnce(io::Error) -> StoreError + '_ {
    move |e| StoreError::io("hashing", path)(e)
}

/// One entry of [`scan`]: its NAR tokens emitted through `e` (a file's contents read
/// once, into the hashing pipe), recorded with the metadata it had when read.
fn node(
    src: &Path,
    rel: PathBuf,
    e: &mut Emitter<HashPipe>,
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
        e.symlink(target.as_os_str().as_bytes())
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
        match e.regular_from(executable, &mut file, m.size()) {
            Ok(()) => {}
            Err(ContentsError::Read(err)) => return Err(StoreError::io("reading", &path)(err)),
            Err(ContentsError::Short) => return Err(StoreError::SourceChanged { path }),
            Err(ContentsError::Write(err)) => return Err(hash_err(&path)(err)),
        }
        entry.kind = Kind::Regular { executable };
        entry.mode = m.mode();
        entry.mtime = m.mtime();
        entry.stamp = Stamp::of(&m);
        entries.push(entry);
        Ok(None)
    } else if ft.is_dir() {
        e.directory().map_err(hash_err(&path))?;
        let frame = Frame::of(&path, entry.rel.clone())?;
        entries.push(entry);
        Ok(Some(frame))
    } else {
        Err(StoreError::UnsupportedFileType {
            path,
            kind: special_kind(&m),
        })
    }
}

/// Recreates the scanned tree of `src` at `dest` (which must not exist; its parent must),
/// normalised. Directories are created first, then files and symlinks on up to [`COPY_THREADS`] threads
/// (creating inodes dominates the cost on ext4), then directories get their final mode and
/// times, deepest first. File contents are copied in the kernel; every source file is
/// checked to be the one that was hashed. Leaves `dest` un-synced.
pub fn materialise(src: &Path, entries: &[Entry], dest: &Path) -> Result<(), StoreError> {
    let done = materialise_until(src, entries, dest, &AtomicBool::new(false))?;
    debug_assert!(done, "never stopped");
    Ok(())
}

/// [`materialise`], giving up (`false`; what was made of `dest` is left for the caller
/// to remove) as soon as `stop` is raised: the other side of a concurrent add failed.
pub fn materialise_until(
    src: &Path,
    entries: &[Entry],
    dest: &Path,
    stop: &AtomicBool,
) -> Result<bool, StoreError> {
    let stopped = || stop.load(Ordering::Relaxed);
    let mut leaves = Vec::new();
    for e in entries {
        if e.kind == Kind::Directory {
            if stopped() {
                return Ok(false);
            }
            let to = join(dest, &e.rel);
            fs::DirBuilder::new()
                .mode(0o700)
                .create(&to)
                .map_err(StoreError::io("creating", &to))?;
        } else {
            leaves.push(e);
        }
    }
    let workers = COPY_THREADS.min(leaves.len().div_ceil(PER_THREAD_MIN).max(1));
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let work = || -> Result<(), StoreError> {
        while !failed.load(Ordering::Relaxed) && !stopped() {
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
                // A worker's panic is a bug of ours: passed on as the panic it is.
                let r = h.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
                result = result.and(r);
            }
            result
        })?;
    }
    if stopped() {
        return Ok(false);
    }
    for e in entries.iter().rev() {
        if e.kind == Kind::Directory {
            let to = join(dest, &e.rel);
            fsutil::chmod(&to, fsutil::EXEC_MODE)?;
            fsutil::set_canonical_times(&to)?;
        }
    }
    Ok(true)
}

/// Most threads [`materialise`] uses, whatever the number of cores: they mostly wait,
/// on `O_DIRECT` writes and on inode creation, so more of them keep more requests in
/// flight. Adding 605 MiB (2,078 files) on this 2-core machine, 7 alternating runs
/// each: 2 threads (the core count, the former bound) 0.50–0.61 s (median 0.555), 8
/// threads 0.43–0.88 s (median 0.49), 16 threads 0.45–0.82 s (median 0.54).
const COPY_THREADS: usize = 8;
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
    let dst = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(to)
        .map_err(StoreError::io("creating", to))?;
    // At most one byte more than was hashed: enough to notice growth, and a file that
    // keeps growing cannot keep the copy going.
    let mut limited = io::Read::take(&mut src, stamp.size + 1);
    let (dst, copied) = if stamp.size >= DIRECT_MIN {
        // Past the page cache: see `crate::direct` (this copy is synced before it is
        // registered, so its data has to reach the disk anyway).
        let mut w = DirectWriter::with_size_hint(dst, stamp.size);
        let n = w
            .copy_from(&mut limited)
            .map_err(StoreError::io("copying into", to))?;
        (w.finish().map_err(StoreError::io("copying into", to))?, n)
    } else {
        let mut dst = dst;
        let n = io::copy(&mut limited, &mut dst).map_err(StoreError::io("copying into", to))?;
        (dst, n)
    };
    // Whatever went through the page cache (small files, a filesystem without O_DIRECT).
    fsutil::start_writeback(&dst);
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

    fn list(src: &Path) -> Result<Vec<Entry>, StoreError> {
        list_until(src, &AtomicBool::new(false)).map(|l| l.expect("never stopped"))
    }

    fn sample(root: &Path) {
        fs::create_dir_all(root.join("sub/empty")).expect("mkdir");
        fs::create_dir_all(root.join("-dash dir")).expect("mkdir");
        fs::write(root.join("a"), "hello").expect("write");
        fs::write(root.join("sub/é ü"), "").expect("write");
        fs::write(
            root.join("-dash dir/big"),
            vec![7u8; 3 * crate::hash::PIPE_BUFFER + 5],
        )
        .expect("write");
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
        // The bytes themselves: as dump_path writes them, and as Nix does when installed.
        let mut bytes = Vec::new();
        nar::dump_path(&root, &mut bytes).expect("dump");
        assert_eq!(
            (s.nar_hash, s.nar_size),
            (Hash::digest(HashAlgo::Blake3, &bytes), bytes.len() as u64)
        );
        match std::process::Command::new("nix-store")
            .arg("--dump")
            .arg(&root)
            .output()
        {
            Ok(out) if out.status.success() => assert!(out.stdout == bytes, "nix-store --dump"),
            _ => println!("nix-store not usable: skipping the nix-store --dump comparison"),
        }
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
    fn list_records_what_scan_records_and_sees_a_rewrite() {
        let tmp = tempfile::tempdir().expect("tmp");
        let root = tmp.path().join("t");
        sample(&root);
        let listed = list(&root).expect("list");
        assert_eq!(listed, scan(&root).expect("scan").entries);
        // A file rewritten between the listing and the scan: the lists differ.
        std::thread::sleep(std::time::Duration::from_millis(20));
        fs::write(root.join("a"), "HELLO").expect("rewrite");
        assert_ne!(listed, scan(&root).expect("scan").entries);
        // A single file, a symlink as the root, and a refused FIFO.
        assert_eq!(
            list(&root.join("a")).expect("file"),
            scan(&root.join("a")).expect("scan").entries
        );
        assert_eq!(
            list(&root.join("link")).expect("link"),
            scan(&root.join("link")).expect("scan").entries
        );
        let fifo = tmp.path().join("fifo");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .expect("mkfifo");
        assert!(matches!(
            list(&fifo),
            Err(StoreError::UnsupportedFileType { .. })
        ));
    }

    #[test]
    fn a_raised_stop_ends_the_walks_and_the_copy() {
        let tmp = tempfile::tempdir().expect("tmp");
        let root = tmp.path().join("t");
        sample(&root);
        let stop = AtomicBool::new(true);
        assert!(scan_until(&root, &stop).expect("scan").is_none());
        assert!(list_until(&root, &stop).expect("list").is_none());
        // A lone file is walked whole in its first step: done, not stopped.
        assert!(list_until(&root.join("a"), &stop).expect("file").is_some());
        let entries = scan(&root).expect("scan").entries;
        let dest = tmp.path().join("copy");
        assert!(!materialise_until(&root, &entries, &dest, &stop).expect("copy"));
        assert!(!dest.exists(), "nothing made once stopped");
        // Not raised: the same walks as without a flag.
        let go = AtomicBool::new(false);
        assert_eq!(list_until(&root, &go).expect("list"), Some(entries.clone()));
        assert!(materialise_until(&root, &entries, &dest, &go).expect("copy"));
        assert_eq!(
            scan_until(&dest, &go).expect("rescan").map(|s| s.nar_hash),
            Some(scan(&root).expect("scan").nar_hash)
        );
        fsutil::remove_tree(&dest).expect("cleanup");
    }

    #[test]
    fn materialise_copies_normalised_with_the_same_nar() {
        let tmp = tempfile::tempdir().expect("tmp");
        let root = tmp.path().join("t");
        sample(&root);
        let s = scan(&root).expect("scan");
        let dest = tmp.path().join("copy");
        materialise(&root, &s.entries, &dest).expect("copy");
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
    fn direct_copies_are_exact_at_every_boundary() {
        let tmp = tempfile::tempdir().expect("tmp");
        let root = tmp.path().join("t");
        fs::create_dir(&root).expect("mkdir");
        let min = DIRECT_MIN as usize;
        let sizes = [
            min - 1,
            min,
            min + 1,
            min + 4095,
            crate::direct::CHUNK - 1,
            crate::direct::CHUNK,
            crate::direct::CHUNK + 1,
            2 * crate::direct::CHUNK + 4097,
        ];
        for (i, n) in sizes.iter().enumerate() {
            // Bytes that differ from every neighbour and from the zero padding.
            let data: Vec<u8> = (0..*n).map(|k| (k % 251) as u8 + 1).collect();
            fs::write(root.join(format!("f{i}")), data).expect("write");
        }
        let s = scan(&root).expect("scan");
        let dest = tmp.path().join("copy");
        materialise(&root, &s.entries, &dest).expect("copy");
        for (i, n) in sizes.iter().enumerate() {
            let got = fs::read(dest.join(format!("f{i}"))).expect("read");
            assert_eq!(got.len(), *n, "size of f{i}");
            assert!(
                got == fs::read(root.join(format!("f{i}"))).expect("read"),
                "contents of f{i}"
            );
        }
        assert_eq!(scan(&dest).expect("rescan").nar_hash, s.nar_hash);
        fsutil::remove_tree(&dest).expect("cleanup");
    }

    #[test]
    fn a_large_file_grown_after_hashing_is_refused() {
        let tmp = tempfile::tempdir().expect("tmp");
        let root = tmp.path().join("t");
        fs::create_dir(&root).expect("mkdir");
        let big = root.join("big");
        fs::write(&big, vec![1u8; crate::direct::CHUNK + 10]).expect("write");
        let s = scan(&root).expect("scan");
        // Same inode, more bytes: the size in the stamp no longer matches.
        let mut f = OpenOptions::new().append(true).open(&big).expect("open");
        std::io::Write::write_all(&mut f, &[2u8; 5000]).expect("append");
        drop(f);
        let e = materialise(&root, &s.entries, &tmp.path().join("copy")).expect_err("grown");
        assert!(
            matches!(e, StoreError::SourceChanged { ref path } if path.ends_with("big")),
            "{e}"
        );
    }

    #[test]
    fn detects_a_source_changed_after_hashing() {
        let tmp = tempfile::tempdir().expect("tmp");
        let root = tmp.path().join("t");
        sample(&root);
        let s = scan(&root).expect("scan");
        fs::write(root.join("a"), "HELLO").expect("rewrite");
        let e = materialise(&root, &s.entries, &tmp.path().join("copy")).expect_err("changed");
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
