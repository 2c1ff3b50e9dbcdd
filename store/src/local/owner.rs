//! Who owns the shared state of a store that several users use.
//!
//! Owns: the rule that every file and directory the store creates for everyone's use
//! (lock files, the state directories, the database) belongs to the owner of the
//! directory it is created in — which leads back to the owner of the store's root — and
//! is group-writable when that directory is. A process running as root on a store owned
//! by another user (or group-shared) would otherwise leave root-owned 0644 lock files
//! that the owner's next build cannot open ([`adopt`]); [`foreign_owner`] lets the
//! binary warn about it.
//!
//! Store contents keep their normalised modes; when root adds to someone else's store
//! they are given to the store's owner ([`crate::tree::chown_tree`]), so that the owner's `gc` can
//! delete them.
//!
//! Must not: change modes of store contents, or fail an operation on shared state
//! because ownership could not be fixed (errors are ignored there: the next open by the
//! owner reports what it cannot do).

use std::fs::{self, File};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

/// Whether this process runs as root (effective uid 0).
pub(crate) fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// The owner (uid, gid) of `root` when this process runs as root and `root` belongs to
/// another user: root is then operating on someone else's store.
pub(crate) fn foreign_owner(root: &Path) -> Option<(u32, u32)> {
    let m = fs::metadata(root).ok()?;
    (is_root() && m.uid() != 0).then_some((m.uid(), m.gid()))
}

/// Gives `entry` (just opened or created in the directory `parent`) the owner of
/// `parent` when we are root and it is someone else's, and group write permission when
/// `parent` has it. `file` is `entry` opened, when it is a file.
pub(crate) fn adopt(entry: &Path, file: Option<&File>, parent: &Path) {
    let Ok(pm) = fs::metadata(parent) else {
        return;
    };
    let meta = match file {
        Some(f) => f.metadata(),
        None => fs::symlink_metadata(entry),
    };
    let Ok(m) = meta else {
        return;
    };
    if is_root() && (m.uid() != pm.uid() || m.gid() != pm.gid()) && m.uid() == 0 {
        let _ = match file {
            Some(f) => std::os::unix::fs::fchown(f, Some(pm.uid()), Some(pm.gid())),
            None => std::os::unix::fs::lchown(entry, Some(pm.uid()), Some(pm.gid())),
        };
    }
    let group_shared = pm.mode() & 0o020 != 0;
    let ours = is_root() || rustix::process::geteuid().as_raw() == m.uid();
    if group_shared && ours && m.mode() & 0o020 == 0 && !m.file_type().is_symlink() {
        let mut mode = (m.mode() & 0o7777) | 0o020;
        if m.is_dir() {
            // New files in it take its group.
            mode |= 0o2000 | 0o010;
        }
        let perms = fs::Permissions::from_mode(mode);
        let _ = match file {
            Some(f) => f.set_permissions(perms),
            None => fs::set_permissions(entry, perms),
        };
    }
}

/// Creates the directory `dir` and any missing parents below `top` (which exists),
/// each adopted by its parent (see [`adopt`]).
pub(crate) fn create_dirs(top: &Path, dir: &Path) -> std::io::Result<()> {
    let Ok(rel) = dir.strip_prefix(top) else {
        return fs::create_dir_all(dir);
    };
    let mut cur = top.to_path_buf();
    for c in rel.components() {
        let parent = cur.clone();
        cur.push(c);
        match fs::create_dir(&cur) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && cur.is_dir() => {}
            Err(e) => return Err(e),
        }
        adopt(&cur, None, &parent);
    }
    Ok(())
}
