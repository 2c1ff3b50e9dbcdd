//! Trees of any depth: removal, and depth-bounded walks, through directory descriptors.
//!
//! Owns: [`remove_tree`], the one tree removal of the workspace (the store, the builder's
//! build directories and the sandbox's staging directories all call it directly), which
//! removes a file, symlink or directory tree of any depth whatever its directories' modes
//! (its [`TreeError`] converts to an [`io::Error`] of the same kind for `?`);
//! [`walk`], a depth-first visit of a tree bounded by a depth limit; [`clear_setid_bits`],
//! [`chown_tree`] and [`check_depth`] on top of it; and [`MAX_DEPTH`], the deepest nesting a store object
//! may have.
//!
//! Every operation reaches an entry through its parent directory's descriptor (`openat`,
//! `fstatat`, `unlinkat`, `fchmodat`), so paths longer than `PATH_MAX` do not matter;
//! keeps a constant number of descriptors open, whatever the depth, by climbing back up
//! through `..` and checking that it arrives at the device and inode it recorded on the
//! way down; and keeps its stack on the heap.
//!
//! Must not: follow symlinks, leave the tree it was given, recurse natively, hold one
//! descriptor per level, or panic on any tree.
//!
//! # The depth limit
//!
//! The root of a tree is level 1, the entries of a root directory level 2, and so on. A
//! store object may reach level [`MAX_DEPTH`] (2048), the deepest a NAR may hold (see
//! [`crate::nar::MAX_DEPTH`]), so that every store object can be archived and restored.
//! Removal has no limit: a leftover of any depth can always be deleted.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags, Stat, CWD};
use rustix::io::Errno;

/// The deepest level an entry of a store object may sit at (the root is level 1): the
/// NAR format's limit.
pub const MAX_DEPTH: usize = crate::nar::MAX_DEPTH;

/// Longest path, in bytes, that error messages show whole; longer ones are shortened to
/// their root, their depth and their last components.
const SHOWN_PATH_MAX: usize = 512;

/// Why a tree could not be walked or removed. Every variant names the path concerned
/// (shortened when it is very long).
#[derive(Debug, thiserror::Error)]
pub enum TreeError {
    /// A system call failed.
    #[error("{action} {path:?}: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// On what.
        path: PathBuf,
        /// Why it failed.
        #[source]
        source: io::Error,
    },
    /// The tree is nested deeper than the limit of the walk.
    #[error(
        "{path:?} is nested deeper than {max} levels, the most a store object may have \
         (its root is level 1)"
    )]
    TooDeep {
        /// The tree's root.
        path: PathBuf,
        /// The limit.
        max: usize,
    },
    /// Climbing back up through `..` did not arrive where the walk came from: something
    /// moved a directory of the tree while it was being walked.
    #[error("{path:?} was moved while rocmx walked it")]
    Moved {
        /// The directory whose parent was not the expected one.
        path: PathBuf,
    },
}

/// For callers that report [`io::Error`]s (the builder's build directories): the kind of
/// the failed call is kept, and the message still names the path.
impl From<TreeError> for io::Error {
    fn from(e: TreeError) -> io::Error {
        let kind = match &e {
            TreeError::Io { source, .. } => source.kind(),
            TreeError::TooDeep { .. } | TreeError::Moved { .. } => io::ErrorKind::Other,
        };
        io::Error::new(kind, e)
    }
}

/// Device and inode: what a directory is, whatever its name.
type Id = (u64, u64);

fn id_of(st: &Stat) -> Id {
    (st.st_dev, st.st_ino)
}

fn is_dir(st: &Stat) -> bool {
    FileType::from_raw_mode(st.st_mode) == FileType::Directory
}

/// `O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC`: opening a directory for listing,
/// never through a symlink.
fn dir_flags() -> OFlags {
    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC
}

/// One directory on the way down: its name in its parent, its identity, and the names
/// still to handle in it.
struct Frame {
    name: OsString,
    id: Id,
    todo: Vec<OsString>,
}

/// The path of `name` in the directory of the top frame, for messages: whole when short,
/// else the root, the number of levels left out and the last components.
fn shown(root: &Path, frames: &[Frame], name: Option<&OsStr>) -> PathBuf {
    // frames[0] is the root itself.
    let below: Vec<&OsStr> = frames
        .iter()
        .skip(1)
        .map(|f| f.name.as_os_str())
        .chain(name)
        .collect();
    let len: usize = below.iter().map(|n| n.len() + 1).sum();
    let mut p = root.to_path_buf();
    if len + root.as_os_str().len() <= SHOWN_PATH_MAX {
        p.extend(below);
        return p;
    }
    let keep = 3.min(below.len());
    p.push(format!("…{} levels…", below.len() - keep));
    p.extend(&below[below.len() - keep..]);
    p
}

fn io_err(action: &'static str, path: PathBuf) -> impl FnOnce(Errno) -> TreeError {
    move |e| TreeError::Io {
        action,
        path,
        source: e.into(),
    }
}

/// Opens the directory holding `path` and gives its last component. `path` must name
/// something (not `/`, not end in `..`).
fn open_parent(path: &Path) -> Result<(OwnedFd, OsString), TreeError> {
    let name = path.file_name().ok_or_else(|| TreeError::Io {
        action: "walking",
        path: path.to_path_buf(),
        source: io::Error::new(io::ErrorKind::InvalidInput, "the path names no entry"),
    })?;
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let fd = rustix::fs::openat(
        CWD,
        parent,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(io_err("opening", parent.to_path_buf()))?;
    Ok((fd, name.to_os_string()))
}

/// The names in the directory open at `fd`, without `.` and `..`.
fn list(fd: BorrowedFd<'_>) -> Result<Vec<(OsString, FileType)>, Errno> {
    let mut names = Vec::new();
    for e in Dir::read_from(fd)? {
        let e = e?;
        let n = e.file_name().to_bytes();
        if n != b"." && n != b".." {
            names.push((OsStr::from_bytes(n).to_os_string(), e.file_type()));
        }
    }
    Ok(names)
}

/// Opens the directory `name` in `parent` to change it: made readable, writable and
/// searchable by its owner first if it is not (as root the owner does not matter).
fn enter(parent: BorrowedFd<'_>, name: &OsStr) -> Result<OwnedFd, Errno> {
    let fd = match rustix::fs::openat(parent, name, dir_flags(), Mode::empty()) {
        Err(Errno::ACCESS) => {
            // Unreadable for us: make it ours to read, if it still is a directory.
            let st = rustix::fs::statat(parent, name, AtFlags::SYMLINK_NOFOLLOW)?;
            if !is_dir(&st) {
                return Err(Errno::NOTDIR);
            }
            rustix::fs::chmodat(parent, name, Mode::RWXU, AtFlags::empty())?;
            rustix::fs::openat(parent, name, dir_flags(), Mode::empty())?
        }
        r => r?,
    };
    let st = rustix::fs::fstat(&fd)?;
    if st.st_mode & 0o700 != 0o700 {
        rustix::fs::fchmod(&fd, Mode::from_raw_mode(st.st_mode | 0o700))?;
    }
    Ok(fd)
}

/// Opens the parent of the directory open at `cur` and checks that it is `expected`.
fn climb(cur: BorrowedFd<'_>, expected: Id) -> Result<Option<OwnedFd>, Errno> {
    let up = rustix::fs::openat(cur, "..", dir_flags(), Mode::empty())?;
    if id_of(&rustix::fs::fstat(&up)?) == expected {
        Ok(Some(up))
    } else {
        Ok(None)
    }
}

/// Removes `path` — a file, a symlink (not followed) or a directory tree of any depth —
/// making directories writable as it goes down (as root, whoever owns them). A missing
/// path is not an error. Uses a handful of descriptors and no native recursion.
pub fn remove_tree(path: &Path) -> Result<(), TreeError> {
    let (parent, name) = match open_parent(path) {
        Ok(x) => x,
        Err(TreeError::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
            return Ok(())
        }
        Err(e) => return Err(e),
    };
    let st = match rustix::fs::statat(&parent, &name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => st,
        Err(Errno::NOENT) => return Ok(()),
        Err(e) => return Err(io_err("reading", path.to_path_buf())(e)),
    };
    if !is_dir(&st) {
        return match rustix::fs::unlinkat(&parent, &name, AtFlags::empty()) {
            Ok(()) | Err(Errno::NOENT) => Ok(()),
            Err(e) => Err(io_err("removing", path.to_path_buf())(e)),
        };
    }
    let mut cur = enter(parent.as_fd(), &name).map_err(io_err("opening", path.to_path_buf()))?;
    let mut frames = vec![Frame {
        name,
        id: (0, 0),
        todo: Vec::new(),
    }];
    let first = clear_files(cur.as_fd(), path, &frames)?;
    frames[0].todo = first;
    frames[0].id = id_of(&rustix::fs::fstat(&cur).map_err(io_err("reading", path.to_path_buf()))?);
    loop {
        let Some(top) = frames.last_mut() else {
            return Ok(());
        };
        if let Some(sub) = top.todo.pop() {
            match enter(cur.as_fd(), &sub) {
                Ok(fd) => {
                    let st = rustix::fs::fstat(&fd)
                        .map_err(|e| io_err("reading", shown(path, &frames, Some(&sub)))(e))?;
                    frames.push(Frame {
                        name: sub,
                        id: id_of(&st),
                        todo: Vec::new(),
                    });
                    cur = fd;
                    let todo = clear_files(cur.as_fd(), path, &frames)?;
                    if let Some(f) = frames.last_mut() {
                        f.todo = todo;
                    }
                }
                Err(Errno::NOENT) => {}
                // No longer a directory: remove whatever it became.
                Err(Errno::NOTDIR | Errno::LOOP) => {
                    match rustix::fs::unlinkat(&cur, &sub, AtFlags::empty()) {
                        Ok(()) | Err(Errno::NOENT) => {}
                        Err(e) => {
                            return Err(io_err("removing", shown(path, &frames, Some(&sub)))(e))
                        }
                    }
                }
                Err(e) => return Err(io_err("opening", shown(path, &frames, Some(&sub)))(e)),
            }
            continue;
        }
        // Everything below the top directory is gone: remove it from its parent.
        let done_path = shown(path, &frames, None);
        let Some(done) = frames.pop() else {
            return Ok(());
        };
        let Some(above) = frames.last() else {
            drop(cur);
            return match rustix::fs::unlinkat(&parent, &done.name, AtFlags::REMOVEDIR) {
                Ok(()) | Err(Errno::NOENT) => Ok(()),
                Err(e) => Err(io_err("removing", path.to_path_buf())(e)),
            };
        };
        let up = climb(cur.as_fd(), above.id)
            .map_err(|e| io_err("opening the parent of", done_path.clone())(e))?
            .ok_or_else(|| TreeError::Moved {
                path: done_path.clone(),
            })?;
        cur = up;
        match rustix::fs::unlinkat(&cur, &done.name, AtFlags::REMOVEDIR) {
            Ok(()) | Err(Errno::NOENT) => {}
            Err(e) => return Err(io_err("removing", done_path)(e)),
        }
    }
}

/// Unlinks every non-directory in the directory open at `fd` (the top of `frames`) and
/// gives the names of its subdirectories.
fn clear_files(
    fd: BorrowedFd<'_>,
    root: &Path,
    frames: &[Frame],
) -> Result<Vec<OsString>, TreeError> {
    let entries = list(fd).map_err(|e| io_err("listing", shown(root, frames, None))(e))?;
    let mut dirs = Vec::new();
    for (name, ft) in entries {
        let ft = if ft == FileType::Unknown {
            match rustix::fs::statat(fd, &name, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) => FileType::from_raw_mode(st.st_mode),
                Err(Errno::NOENT) => continue,
                Err(e) => return Err(io_err("reading", shown(root, frames, Some(&name)))(e)),
            }
        } else {
            ft
        };
        if ft == FileType::Directory {
            dirs.push(name);
            continue;
        }
        match rustix::fs::unlinkat(fd, &name, AtFlags::empty()) {
            Ok(()) | Err(Errno::NOENT) => {}
            Err(e) => return Err(io_err("removing", shown(root, frames, Some(&name)))(e)),
        }
    }
    Ok(dirs)
}

/// One entry met by [`walk`].
pub struct Entry<'a> {
    /// The directory holding it (for the root: the root's parent).
    pub dir: BorrowedFd<'a>,
    /// Its name in `dir`.
    pub name: &'a OsStr,
    /// Its own metadata (a symlink is not followed).
    pub stat: &'a Stat,
    /// Its level: 1 for the root, 2 for the root's entries, …
    pub level: usize,
}

impl Entry<'_> {
    /// Whether it is a directory.
    pub fn is_dir(&self) -> bool {
        is_dir(self.stat)
    }
}

/// Visits every entry of the tree at `root` (the root first, each directory before its
/// entries; in no particular order otherwise), refusing with [`TreeError::TooDeep`]
/// before visiting anything at a level beyond `max_depth`. Symlinks are visited, not
/// followed. `visit` may change an entry's mode but not add or remove entries.
pub fn walk(
    root: &Path,
    max_depth: usize,
    visit: &mut dyn FnMut(&Entry<'_>) -> Result<(), TreeError>,
) -> Result<(), TreeError> {
    let (parent, name) = open_parent(root)?;
    let st = rustix::fs::statat(&parent, &name, AtFlags::SYMLINK_NOFOLLOW)
        .map_err(io_err("reading", root.to_path_buf()))?;
    visit(&Entry {
        dir: parent.as_fd(),
        name: &name,
        stat: &st,
        level: 1,
    })?;
    if !is_dir(&st) {
        return Ok(());
    }
    let mut cur = rustix::fs::openat(&parent, &name, dir_flags(), Mode::empty())
        .map_err(io_err("opening", root.to_path_buf()))?;
    let todo = names(cur.as_fd(), root, &[])?;
    let mut frames = vec![Frame {
        name,
        id: id_of(&rustix::fs::fstat(&cur).map_err(io_err("reading", root.to_path_buf()))?),
        todo,
    }];
    loop {
        let level = frames.len() + 1;
        let Some(top) = frames.last_mut() else {
            return Ok(());
        };
        if let Some(n) = top.todo.pop() {
            if level > max_depth {
                return Err(TreeError::TooDeep {
                    path: root.to_path_buf(),
                    max: max_depth,
                });
            }
            let st = match rustix::fs::statat(&cur, &n, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) => st,
                Err(e) => return Err(io_err("reading", shown(root, &frames, Some(&n)))(e)),
            };
            visit(&Entry {
                dir: cur.as_fd(),
                name: &n,
                stat: &st,
                level,
            })?;
            if is_dir(&st) {
                let fd = rustix::fs::openat(&cur, &n, dir_flags(), Mode::empty())
                    .map_err(|e| io_err("opening", shown(root, &frames, Some(&n)))(e))?;
                frames.push(Frame {
                    name: n,
                    id: id_of(&st),
                    todo: Vec::new(),
                });
                let todo = names(fd.as_fd(), root, &frames)?;
                if let Some(f) = frames.last_mut() {
                    f.todo = todo;
                }
                cur = fd;
            }
            continue;
        }
        let done_path = shown(root, &frames, None);
        frames.pop();
        let Some(above) = frames.last() else {
            return Ok(());
        };
        cur = climb(cur.as_fd(), above.id)
            .map_err(|e| io_err("opening the parent of", done_path.clone())(e))?
            .ok_or(TreeError::Moved { path: done_path })?;
    }
}

/// The names in the directory open at `fd`, the top of `frames`.
fn names(fd: BorrowedFd<'_>, root: &Path, frames: &[Frame]) -> Result<Vec<OsString>, TreeError> {
    Ok(list(fd)
        .map_err(|e| io_err("listing", shown(root, frames, None))(e))?
        .into_iter()
        .map(|(n, _)| n)
        .collect())
}

/// Checks that the tree at `root` reaches no deeper than [`MAX_DEPTH`].
pub fn check_depth(root: &Path) -> Result<(), TreeError> {
    walk(root, MAX_DEPTH, &mut |_| Ok(()))
}

/// Gives every entry of the tree at `root` (symlinks themselves, not followed) to the
/// uid and gid `owner`, refusing a tree deeper than [`MAX_DEPTH`]: outputs of a build
/// user handed back, and objects root adds to another user's store. `action` names the
/// purpose in errors.
pub fn chown_tree(root: &Path, owner: (u32, u32), action: &'static str) -> Result<(), TreeError> {
    use rustix::fs::{Gid, Uid};
    walk(root, MAX_DEPTH, &mut |e| {
        if e.stat.st_uid == owner.0 && e.stat.st_gid == owner.1 {
            return Ok(());
        }
        rustix::fs::chownat(
            e.dir,
            e.name,
            Some(Uid::from_raw(owner.0)),
            Some(Gid::from_raw(owner.1)),
            AtFlags::SYMLINK_NOFOLLOW,
        )
        .map_err(|err| TreeError::Io {
            action,
            path: root
                .join(format!("…{} levels…", e.level.saturating_sub(2)))
                .join(e.name),
            source: err.into(),
        })
    })
}

/// Clears the setuid and setgid bits of every file and directory of the tree at `root`
/// (symlinks have none to clear), refusing a tree deeper than [`MAX_DEPTH`] (checked
/// before anything at a deeper level is reached, so no such tree is ever accepted).
pub fn clear_setid_bits(root: &Path) -> Result<(), TreeError> {
    walk(root, MAX_DEPTH, &mut |e| {
        let mode = e.stat.st_mode;
        let ft = FileType::from_raw_mode(mode);
        if mode & 0o6000 == 0 || ft == FileType::Symlink {
            return Ok(());
        }
        rustix::fs::chmodat(
            e.dir,
            e.name,
            Mode::from_raw_mode(mode & 0o1777),
            AtFlags::empty(),
        )
        .map_err(|err| TreeError::Io {
            action: "clearing the setuid and setgid bits of",
            path: root
                .join(format!("…{} levels…", e.level.saturating_sub(2)))
                .join(e.name),
            source: err.into(),
        })
    })
}

/// Test helper: makes `root` and a chain of directories `name` below it, so that the
/// deepest one is at level `levels`, through descriptors (the paths exceed `PATH_MAX`);
/// every 1000th directory on the way gets mode 0000 or 0500 once its child exists.
/// Gives the deepest directory, open.
#[cfg(test)]
pub(crate) fn make_chain(root: &Path, levels: usize, name: &str) -> OwnedFd {
    std::fs::create_dir(root).expect("mkdir root");
    let mut cur = rustix::fs::openat(CWD, root, dir_flags(), Mode::empty()).expect("open root");
    for i in 1..levels {
        rustix::fs::mkdirat(&cur, name, Mode::from_raw_mode(0o755)).expect("mkdirat");
        let next = rustix::fs::openat(&cur, name, dir_flags(), Mode::empty()).expect("openat");
        if i % 1000 == 0 {
            let mode = if i % 2000 == 0 { 0o000 } else { 0o500 };
            rustix::fs::fchmod(&cur, Mode::from_raw_mode(mode)).expect("fchmod");
        }
        cur = next;
    }
    cur
}

#[cfg(test)]
#[path = "tree/tests.rs"]
mod tests;
