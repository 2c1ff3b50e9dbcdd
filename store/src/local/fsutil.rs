//! Filesystem helpers of the local store: normalisation, durability, removal, temp dirs.
//!
//! Owns: the canonical metadata of store files (mode 0444, or 0555 for executables and
//! directories; mtime 1; no setuid, setgid or sticky bit), fsync of files and directories
//! (`syncfs` for big trees), removal (re-exported from [`crate::tree`], which owns it), disk
//! usage, and [`TempDir`], the scratch directory inside the store that removes itself
//! unless its content was moved out.
//!
//! Must not: follow symlinks when changing or removing anything, hash, or touch the
//! database.

use std::fs::{self, File};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fs::{AtFlags, Timespec, Timestamps, CWD};

use super::error::StoreError;

/// Mode of a non-executable store file.
pub const FILE_MODE: u32 = 0o444;
/// Mode of an executable store file and of a store directory.
pub const EXEC_MODE: u32 = 0o555;
/// The mtime of every store object, in seconds since the epoch.
pub const MTIME: i64 = 1;
/// Trees with more entries than this are flushed with one `syncfs` rather than an
/// `fsync` per entry.
pub const SYNCFS_THRESHOLD: usize = 16;
/// Prefix of scratch directories in the store directory.
pub const TMP_PREFIX: &str = ".tmp-";

/// The canonical timestamps (atime and mtime 1).
pub fn canonical_times() -> Timestamps {
    let t = Timespec {
        tv_sec: MTIME,
        tv_nsec: 0,
    };
    Timestamps {
        last_access: t,
        last_modification: t,
    }
}

/// Sets the canonical times on `path` itself (a symlink is not followed).
pub fn set_canonical_times(path: &Path) -> Result<(), StoreError> {
    rustix::fs::utimensat(CWD, path, &canonical_times(), AtFlags::SYMLINK_NOFOLLOW)
        .map_err(|e| StoreError::io("setting the mtime of", path)(e.into()))
}

/// Sets the canonical times through an open file.
pub fn set_canonical_times_fd(file: &File, path: &Path) -> Result<(), StoreError> {
    rustix::fs::futimens(file, &canonical_times())
        .map_err(|e| StoreError::io("setting the mtime of", path)(e.into()))
}

/// Marks `dir` as holding unrelated trees (`FS_TOPDIR_FL`, `chattr +T`), once; says
/// whether the flag is set afterwards.
///
/// On ext2/3/4 the flag makes the Orlov allocator place each new subdirectory of `dir`
/// in a block group with few directories and more free inodes and blocks than average,
/// as it does for the filesystem root's subdirectories; the files of that subdirectory
/// then take inodes in its group. Without it a new store path lands beside its
/// siblings, in groups that earlier store paths (and their deletions) filled: on a
/// filesystem without a journal every inode allocation there first skips each free
/// inode deleted in the last minute or five (`recently_deleted` in the kernel's
/// `ialloc.c`): after a garbage collection or in a churned `/tmp`, adding a 2,078-file
/// tree took 1.06-1.99 s (median 1.26) without the flag and 0.71-1.28 s (median 0.74)
/// with it, here (bench/README.md, sixteenth session). Other filesystems refuse or ignore the flag: any error leaves
/// `dir` as it was and is not reported (only speed depends on it).
pub fn spread_subdirectories(dir: &Path) -> bool {
    use rustix::fs::IFlags;
    let Ok(f) = File::open(dir) else {
        return false;
    };
    match rustix::fs::ioctl_getflags(&f) {
        Ok(flags) if flags.contains(IFlags::TOPDIR) => true,
        Ok(flags) => rustix::fs::ioctl_setflags(&f, flags | IFlags::TOPDIR).is_ok(),
        Err(_) => false,
    }
}

/// Starts writing `file`'s dirty pages to disk without waiting for them, so that the
/// `fsync` or `syncfs` that makes a tree durable later finds most of it written.
///
/// `sync_file_range(SYNC_FILE_RANGE_WRITE)` is the call made for this, but no safe
/// wrapper offers it and the store has no `unsafe`. `posix_fadvise(POSIX_FADV_DONTNEED)`
/// does the same on Linux: it starts writeback of the range (`WB_SYNC_NONE`, not
/// waiting), then drops the pages that are already clean, which a copy into the store
/// does not need again. It is only advice: an error changes nothing and is ignored, and
/// durability still comes from the later sync.
pub fn start_writeback(file: &File) {
    let _ = rustix::fs::fadvise(file, 0, None, rustix::fs::Advice::DontNeed);
}

/// `0444` or `0555` depending on whether `mode` has the owner's execute bit.
pub fn canonical_file_mode(mode: u32) -> u32 {
    if mode & 0o100 != 0 {
        EXEC_MODE
    } else {
        FILE_MODE
    }
}

/// `chmod` without following symlinks (callers only pass files and directories).
pub fn chmod(path: &Path, mode: u32) -> Result<(), StoreError> {
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
        .map_err(StoreError::io("changing the mode of", path))
}

/// Normalises the tree at `root` in place: modes, times; directories last so that their
/// times stick. Refuses special files and trees nested deeper than
/// [`crate::tree::MAX_DEPTH`] (before changing anything at a deeper level).
pub fn normalise_tree(root: &Path) -> Result<(), StoreError> {
    let mut dirs = Vec::new();
    // Paths with their levels (the root is level 1).
    let mut stack = vec![(root.to_path_buf(), 1usize)];
    while let Some((p, level)) = stack.pop() {
        if level > crate::tree::MAX_DEPTH {
            return Err(crate::tree::TreeError::TooDeep {
                path: root.to_path_buf(),
                max: crate::tree::MAX_DEPTH,
            }
            .into());
        }
        let m = fs::symlink_metadata(&p).map_err(StoreError::io("reading", &p))?;
        let ft = m.file_type();
        if ft.is_dir() {
            chmod(&p, 0o755)?;
            for e in fs::read_dir(&p).map_err(StoreError::io("listing", &p))? {
                stack.push((e.map_err(StoreError::io("listing", &p))?.path(), level + 1));
            }
            dirs.push(p);
        } else if ft.is_file() {
            chmod(&p, canonical_file_mode(m.mode()))?;
            set_canonical_times(&p)?;
        } else if ft.is_symlink() {
            set_canonical_times(&p)?;
        } else {
            return Err(StoreError::UnsupportedFileType {
                path: p,
                kind: special_kind(&m),
            });
        }
    }
    for d in dirs.iter().rev() {
        chmod(d, EXEC_MODE)?;
        set_canonical_times(d)?;
    }
    Ok(())
}

/// A name for a file type the store cannot hold.
pub fn special_kind(m: &fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let ft = m.file_type();
    if ft.is_socket() {
        "socket"
    } else if ft.is_fifo() {
        "FIFO"
    } else if ft.is_char_device() {
        "character device"
    } else if ft.is_block_device() {
        "block device"
    } else {
        "unknown file type"
    }
}

/// `fsync` of a directory.
pub fn fsync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir)
        .and_then(|f| f.sync_all())
        .map_err(StoreError::io("syncing directory", dir))
}

/// Makes everything under `root` (which lives in the store) durable: an `fsync` per file
/// and directory for small trees, one `syncfs` for big ones.
pub fn sync_tree(root: &Path) -> Result<(), StoreError> {
    let mut todo = vec![root.to_path_buf()];
    let mut seen = Vec::new();
    while let Some(p) = todo.pop() {
        let m = fs::symlink_metadata(&p).map_err(StoreError::io("reading", &p))?;
        if m.is_dir() {
            for e in fs::read_dir(&p).map_err(StoreError::io("listing", &p))? {
                todo.push(e.map_err(StoreError::io("listing", &p))?.path());
                if seen.len() + todo.len() > SYNCFS_THRESHOLD {
                    return syncfs(root);
                }
            }
        }
        if !m.file_type().is_symlink() {
            seen.push(p);
        }
    }
    for p in seen {
        File::open(&p)
            .and_then(|f| f.sync_all())
            .map_err(StoreError::io("syncing", &p))?;
    }
    Ok(())
}

/// `syncfs` of the filesystem holding `path`.
pub fn syncfs(path: &Path) -> Result<(), StoreError> {
    let f = File::open(path).map_err(StoreError::io("opening", path))?;
    rustix::fs::syncfs(&f).map_err(|e| StoreError::io("syncing the filesystem of", path)(e.into()))
}

/// Disk usage of `path` (a file, symlink or tree), in bytes of allocated blocks, without
/// following symlinks. Missing paths count 0.
pub fn disk_usage(path: &Path) -> u64 {
    let mut total = 0u64;
    let mut stack = vec![path.to_path_buf()];
    while let Some(p) = stack.pop() {
        let Ok(m) = fs::symlink_metadata(&p) else {
            continue;
        };
        total = total.saturating_add(m.blocks().saturating_mul(512));
        if m.is_dir() {
            if let Ok(rd) = fs::read_dir(&p) {
                stack.extend(rd.flatten().map(|e| e.path()));
            }
        }
    }
    total
}

/// Removes `path` (a file, symlink or read-only tree of any depth); a missing path is not
/// an error. The one removal of the workspace, see [`crate::tree::remove_tree`].
pub use crate::tree::remove_tree;

static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A fresh scratch name `<store>/.tmp-<pid>-<n>-<random>`.
fn scratch_name(store: &Path) -> PathBuf {
    let n = TMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let seed = format!("{}-{n}-{nanos}", std::process::id());
    let rand = &blake3::hash(seed.as_bytes()).to_hex()[..12];
    store.join(format!("{TMP_PREFIX}{}-{n}-{rand}", std::process::id()))
}

/// A scratch directory `<store>/.tmp-<pid>-<n>-<random>`, flocked while it lives (so a
/// checker can tell a live one from a leftover) and removed when dropped.
#[derive(Debug)]
pub struct TempDir {
    path: PathBuf,
    _lock: File,
}

impl TempDir {
    /// Creates a scratch directory in `store`.
    pub fn new(store: &Path) -> Result<TempDir, StoreError> {
        loop {
            let path = scratch_name(store);
            match fs::DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => {
                    let lock = File::open(&path).map_err(StoreError::io("opening", &path))?;
                    lock.lock().map_err(StoreError::io("locking", &path))?;
                    return Ok(TempDir { path, _lock: lock });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(StoreError::io("creating scratch directory", &path)(e)),
            }
        }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = remove_tree(&self.path);
    }
}

/// A scratch file `<store>/.tmp-<pid>-<n>-<random>` (for a single-file object: one inode
/// instead of a directory and a file), flocked through its own descriptor while it lives
/// and removed when dropped unless it was renamed away.
#[derive(Debug)]
pub struct TempFile {
    path: PathBuf,
    file: File,
}

impl TempFile {
    /// Creates an empty scratch file (mode 0600) in `store`.
    pub fn new(store: &Path) -> Result<TempFile, StoreError> {
        loop {
            let path = scratch_name(store);
            match fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path)
            {
                Ok(file) => {
                    let t = TempFile { path, file };
                    t.file.lock().map_err(StoreError::io("locking", &t.path))?;
                    return Ok(t);
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(StoreError::io("creating scratch file", &path)(e)),
            }
        }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `text` as a normalised, non-executable store file (see [`TempFile::sync`]).
    pub fn write_text(&self, text: &[u8]) -> Result<(), StoreError> {
        let p = &self.path;
        (&self.file)
            .write_all(text)
            .map_err(StoreError::io("writing", p))?;
        self.file
            .set_permissions(fs::Permissions::from_mode(FILE_MODE))
            .map_err(StoreError::io("changing the mode of", p))?;
        set_canonical_times_fd(&self.file, p)
    }

    /// Makes the file durable (`fsync`).
    pub fn sync(&self) -> Result<(), StoreError> {
        self.file
            .sync_all()
            .map_err(StoreError::io("syncing", &self.path))
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        // Gone when it was renamed into place; anything else there is still ours.
        let _ = fs::remove_file(&self.path);
    }
}

/// Whether the scratch directory (or file) `dir` is in use (its creator still holds its
/// lock).
pub fn temp_dir_in_use(dir: &Path) -> bool {
    match File::open(dir) {
        Ok(f) => matches!(f.try_lock_shared(), Err(fs::TryLockError::WouldBlock)),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn normalises_and_removes_read_only_trees() {
        let tmp = tempfile::tempdir().expect("tmp");
        let root = tmp.path().join("t");
        fs::create_dir_all(root.join("d/e")).expect("mkdir");
        fs::write(root.join("f"), "x").expect("write");
        fs::write(root.join("d/x"), "#!").expect("write");
        fs::set_permissions(root.join("d/x"), fs::Permissions::from_mode(0o4775)).expect("chmod");
        symlink("/nowhere", root.join("l")).expect("symlink");
        normalise_tree(&root).expect("normalise");
        let mode = |p: &str| fs::symlink_metadata(root.join(p)).expect("stat").mode() & 0o7777;
        let mtime = |p: &str| fs::symlink_metadata(root.join(p)).expect("stat").mtime();
        assert_eq!(
            [mode(""), mode("d"), mode("d/e"), mode("f"), mode("d/x")],
            [0o555, 0o555, 0o555, 0o444, 0o555]
        );
        assert_eq!(
            [mtime(""), mtime("d"), mtime("f"), mtime("l")],
            [1, 1, 1, 1]
        );
        assert!(disk_usage(&root) > 0);
        remove_tree(&root).expect("remove");
        assert!(!root.exists());
        remove_tree(&root).expect("missing is fine");
    }

    #[test]
    fn removes_20000_level_trees_on_a_small_stack() {
        let tmp = tempfile::tempdir().expect("tmp");
        let root = tmp.path().join("deep");
        drop(crate::tree::make_chain(&root, 20_000, "a"));
        let r = root.clone();
        std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(move || remove_tree(&r))
            .expect("spawn")
            .join()
            .expect("no panic")
            .expect("removed");
        assert!(fs::symlink_metadata(&root).is_err());
    }

    #[test]
    fn temp_dirs_lock_and_clean_up() {
        let tmp = tempfile::tempdir().expect("tmp");
        let t = TempDir::new(tmp.path()).expect("tmp dir");
        let p = t.path().to_path_buf();
        assert!(p
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with(".tmp-")));
        fs::create_dir(p.join("x")).expect("mkdir");
        chmod(&p.join("x"), 0o555).expect("chmod");
        assert!(temp_dir_in_use(&p));
        drop(t);
        assert!(!p.exists());
        fs::create_dir(&p).expect("leftover");
        assert!(!temp_dir_in_use(&p));
    }
}
