//! File locks and temporary roots.
//!
//! Owns: the global GC lock (`<state>/gc.lock`: adding and registering take it shared,
//! `gc`, `delete` and `verify --repair` exclusive), per-path locks (exclusive, held while
//! a path is installed or removed), and temporary roots (`<state>/temproots/<pid>-<n>`, one file per open
//! [`LocalStore`](super::LocalStore), listing one store path per line, flocked by its owner
//! for its lifetime; a file whose lock can be taken belongs to a dead owner and is stale).
//!
//! Lock files are shared by every user of a store: [`open_lock_file`] gives a new one
//! the owner of its directory (see `owner`), and the shared GC lock falls back to a
//! read-only descriptor when the file is not writable, so that a user allowed to read a
//! store but not to write it can still verify it.
//!
//! Must not: touch the database or store contents. Every lock is `flock(2)` on a file
//! opened for that one acquisition, so two locks in one process conflict exactly as they
//! would in two processes.
//!
//! # Per-path locks
//!
//! The lock of a path is the file `<state>/locks/<c>.lock`, where `c` is the first
//! character of its hash part: 32 files (one per Nix base-32 character) shared by all
//! paths, created on first use and never removed. Two operations on one path always
//! exclude each other; two on different paths sharing a file do too, which is harmless
//! and rare, and cannot deadlock: code that holds a path lock never waits for another,
//! except [`path_locks`], which takes several files in name order.
//! One file per path would cost an inode for every path ever added: on some filesystems
//! (ext4 without a journal) creating one costs as much as the rest of adding a small
//! path. (Earlier versions used `<state>/locks/<hash part>.lock`; `gc` removes those files
//! when it deletes their path. Processes of such a version and of this one must not use
//! one store at the same time: their path locks would not exclude each other.)

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::{BufRead, BufReader, ErrorKind, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use super::error::StoreError;
use super::owner;
use crate::path::StorePath;

/// A held `flock`, released when dropped.
#[derive(Debug)]
pub struct FileLock {
    file: File,
    path: PathBuf,
}

/// Opens (creating it if needed) the lock file `path`, shared by every user of the store:
/// a new file belongs to the owner of its directory and is group-writable when the
/// directory is (see `owner`), so that root, using a store that belongs to someone
/// else, leaves nothing its owner cannot open.
pub fn open_lock_file(path: &Path) -> Result<File, StoreError> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o644)
        .open(path)
        .map_err(StoreError::io("opening lock file", path))?;
    if let Some(dir) = path.parent() {
        owner::adopt(path, Some(&file), dir);
    }
    Ok(file)
}

/// Opens an existing lock file for a lock only: read-only when it cannot be opened for
/// writing (`flock` works on read-only descriptors), so that a user who may read a store
/// but not write it can still take shared locks, e.g. to verify it.
fn open_lock_file_for_reading(path: &Path) -> Result<File, StoreError> {
    match open_lock_file(path) {
        Err(StoreError::Io { source, .. })
            if (source.kind() == ErrorKind::PermissionDenied
                || source.kind() == ErrorKind::ReadOnlyFilesystem)
                && path.exists() =>
        {
            File::open(path).map_err(StoreError::io("opening lock file", path))
        }
        r => r,
    }
}

impl FileLock {
    /// Takes a lock on `path` (created if needed), waiting for it.
    pub fn acquire(path: &Path, exclusive: bool) -> Result<FileLock, StoreError> {
        let file = if exclusive {
            open_lock_file(path)?
        } else {
            open_lock_file_for_reading(path)?
        };
        let r = if exclusive {
            file.lock()
        } else {
            file.lock_shared()
        };
        r.map_err(StoreError::io("locking", path))?;
        Ok(FileLock {
            file,
            path: path.to_path_buf(),
        })
    }

    /// Takes an exclusive lock on `path` if nobody holds one; `None` if someone does.
    pub fn try_acquire(path: &Path) -> Result<Option<FileLock>, StoreError> {
        let file = open_lock_file(path)?;
        match file.try_lock() {
            Ok(()) => Ok(Some(FileLock {
                file,
                path: path.to_path_buf(),
            })),
            Err(TryLockError::WouldBlock) => Ok(None),
            Err(TryLockError::Error(e)) => Err(StoreError::io("locking", path)(e)),
        }
    }

    /// The lock file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the file at our path is still the one we locked (someone may have
    /// removed it by hand, or an older rocmx may have).
    fn still_linked(&self) -> bool {
        match (fs::metadata(&self.path), self.file.metadata()) {
            (Ok(a), Ok(b)) => a.ino() == b.ino() && a.dev() == b.dev(),
            _ => false,
        }
    }
}

/// The GC lock's file name in the state directory.
pub const GC_LOCK: &str = "gc.lock";

/// The global GC lock: shared for adding, exclusive for collecting.
pub fn gc_lock(state: &Path, exclusive: bool) -> Result<FileLock, StoreError> {
    FileLock::acquire(&state.join(GC_LOCK), exclusive)
}

/// The GC lock held shared for a while (see `LocalStore::hold_gc_shared`).
#[derive(Debug)]
pub struct GcShared(pub(super) FileLock);

/// The lock file of `p` under `locks` (see the module documentation).
pub fn path_lock_file(locks: &Path, p: &StorePath) -> PathBuf {
    let hash = p.hash_part();
    let first = hash.get(..1).unwrap_or("_");
    locks.join(format!("{first}.lock"))
}

/// The per-path lock file earlier versions used for `p`, if it is there.
pub fn legacy_path_lock_file(locks: &Path, p: &StorePath) -> PathBuf {
    locks.join(format!("{}.lock", p.hash_part()))
}

/// Waits for the exclusive lock of `p`. Retries if the lock file was unlinked between our
/// open and our lock.
pub fn path_lock(locks: &Path, p: &StorePath) -> Result<FileLock, StoreError> {
    let path = path_lock_file(locks, p);
    loop {
        let lock = FileLock::acquire(&path, true)?;
        if lock.still_linked() {
            return Ok(lock);
        }
    }
}

/// Waits for the locks of all of `paths` (their files in name order, each once: two callers
/// cannot deadlock, and nothing else waits for a second path lock while holding one).
pub fn path_locks(locks: &Path, paths: &[&StorePath]) -> Result<Vec<FileLock>, StoreError> {
    let mut firsts: BTreeMap<PathBuf, &StorePath> = BTreeMap::new();
    for p in paths {
        firsts.entry(path_lock_file(locks, p)).or_insert(p);
    }
    firsts.values().map(|p| path_lock(locks, p)).collect()
}

/// Takes the lock of `p` if free; `None` if another operation on `p` is in progress.
pub fn try_path_lock(locks: &Path, p: &StorePath) -> Result<Option<FileLock>, StoreError> {
    let path = path_lock_file(locks, p);
    match FileLock::try_acquire(&path)? {
        Some(l) if l.still_linked() => Ok(Some(l)),
        Some(_) => FileLock::try_acquire(&path),
        None => Ok(None),
    }
}

static INSTANCE: AtomicU64 = AtomicU64::new(0);

/// This store handle's temporary roots file, created on first use.
#[derive(Debug)]
pub struct TempRoots {
    dir: PathBuf,
    name: String,
    file: Mutex<Option<File>>,
}

impl TempRoots {
    /// Temporary roots of a new handle, in `dir`.
    pub fn new(dir: &Path) -> TempRoots {
        let n = INSTANCE.fetch_add(1, Ordering::Relaxed);
        TempRoots {
            dir: dir.to_path_buf(),
            name: format!("{}-{n}", std::process::id()),
            file: Mutex::new(None),
        }
    }

    /// The file's path.
    pub fn path(&self) -> PathBuf {
        self.dir.join(&self.name)
    }

    /// Appends `p`. The caller holds the GC lock (shared), so no collector reads the file
    /// meanwhile and no collector can run between the caller's validity check and this.
    pub fn add(&self, p: &StorePath) -> Result<(), StoreError> {
        let path = self.path();
        let mut guard = self.file.lock().unwrap_or_else(|e| e.into_inner());
        if guard.is_none() {
            let f = OpenOptions::new()
                .append(true)
                .create(true)
                .open(&path)
                .map_err(StoreError::io("creating temporary roots file", &path))?;
            f.lock().map_err(StoreError::io("locking", &path))?;
            *guard = Some(f);
        }
        if let Some(f) = guard.as_mut() {
            f.write_all(format!("{p}\n").as_bytes())
                .map_err(StoreError::io("writing temporary root to", &path))?;
        }
        Ok(())
    }

    /// The temporary roots of every *other* live handle, each with the file naming it.
    /// Files of dead owners are removed. The caller holds the GC lock exclusively.
    pub fn others(&self) -> Result<Vec<(StorePath, PathBuf)>, StoreError> {
        let mut out = Vec::new();
        let entries = match fs::read_dir(&self.dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
            Err(e) => return Err(StoreError::io("listing", &self.dir)(e)),
        };
        for entry in entries {
            let entry = entry.map_err(StoreError::io("listing", &self.dir))?;
            if entry.file_name().to_str() == Some(self.name.as_str()) {
                continue;
            }
            let path = entry.path();
            let Ok(file) = File::open(&path) else {
                continue;
            };
            match file.try_lock_shared() {
                Ok(()) => {
                    // Its owner is gone.
                    let _ = fs::remove_file(&path);
                    continue;
                }
                Err(TryLockError::WouldBlock) => {}
                Err(TryLockError::Error(e)) => return Err(StoreError::io("locking", &path)(e)),
            }
            for line in BufReader::new(file).lines() {
                let line = line.map_err(StoreError::io("reading", &path))?;
                if let Ok(p) = StorePath::from_absolute(line.trim()) {
                    out.push((p, path.clone()));
                }
            }
        }
        Ok(out)
    }
}

impl Drop for TempRoots {
    fn drop(&mut self) {
        let guard = self.file.get_mut().unwrap_or_else(|e| e.into_inner());
        if guard.take().is_some() {
            let _ = fs::remove_file(self.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locks_conflict_within_one_process() {
        let tmp = tempfile::tempdir().expect("tmp");
        let p: StorePath = "/rocmx/store/00bgd045z0d4icpbc2yyz4gx48ak44la-a"
            .parse()
            .expect("p");
        // Same first character of the hash part: the same lock file.
        let q: StorePath = "/rocmx/store/0zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz-b"
            .parse()
            .expect("q");
        let r: StorePath = "/rocmx/store/1zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz-c"
            .parse()
            .expect("r");
        let held = path_lock(tmp.path(), &p).expect("lock");
        assert!(try_path_lock(tmp.path(), &p).expect("try").is_none());
        assert!(try_path_lock(tmp.path(), &q).expect("try").is_none());
        let other = try_path_lock(tmp.path(), &r).expect("try");
        assert!(other.is_some(), "another lock file");
        drop((held, other));
        // A lock file removed by hand while held is noticed by the next locker.
        let held = path_lock(tmp.path(), &p).expect("lock");
        fs::remove_file(path_lock_file(tmp.path(), &p)).expect("rm");
        let again = try_path_lock(tmp.path(), &p)
            .expect("try")
            .expect("a new file");
        drop((held, again));
        let files = fs::read_dir(tmp.path()).expect("ls").count();
        assert_eq!(files, 2, "one file per first character");
        let shared = gc_lock(tmp.path(), false).expect("shared");
        let shared2 = gc_lock(tmp.path(), false).expect("shared twice");
        assert!(FileLock::try_acquire(&tmp.path().join("gc.lock"))
            .expect("try")
            .is_none());
        drop((shared, shared2));
        assert!(FileLock::try_acquire(&tmp.path().join("gc.lock"))
            .expect("try")
            .is_some());
    }

    #[test]
    fn temp_roots_of_live_handles_count_and_stale_ones_go() {
        let tmp = tempfile::tempdir().expect("tmp");
        let p: StorePath = "/rocmx/store/00bgd045z0d4icpbc2yyz4gx48ak44la-a"
            .parse()
            .expect("p");
        let a = TempRoots::new(tmp.path());
        let b = TempRoots::new(tmp.path());
        a.add(&p).expect("add");
        assert_eq!(a.others().expect("others"), vec![]);
        assert_eq!(b.others().expect("others"), vec![(p.clone(), a.path())]);
        // A file nobody holds is stale and removed.
        fs::write(tmp.path().join("999999-0"), format!("{p}\n")).expect("stale");
        assert_eq!(b.others().expect("others").len(), 1);
        assert!(!tmp.path().join("999999-0").exists());
        let a_path = a.path();
        drop(a);
        assert!(!a_path.exists());
        assert_eq!(b.others().expect("others"), vec![]);
    }
}
