//! The staging directory of one build, and the host-side file helpers around it.
//!
//! Owns: [`Staging`] (made next to the outputs, or lent by the caller; bound at the
//! outputs' inside directory), clearing setuid bits of outputs, and removing trees the
//! builder may have made read-only.
//!
//! Must not: mount anything or run code in the sandbox (that is `child.rs`).

use std::io;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use nix::unistd::geteuid;

use super::{errno_of, SandboxError};

/// Removes a directory tree even where the builder made directories read-only.
pub(super) fn remove_tree(path: &Path) {
    if std::fs::remove_dir_all(path).is_ok() || !path.exists() {
        return;
    }
    fn make_writable(p: &Path) {
        if let Ok(m) = std::fs::symlink_metadata(p) {
            if m.is_dir() {
                let _ = std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o700));
                if let Ok(rd) = std::fs::read_dir(p) {
                    for e in rd.flatten() {
                        make_writable(&e.path());
                    }
                }
            }
        }
    }
    make_writable(path);
    let _ = std::fs::remove_dir_all(path);
}

/// Clears setuid and setgid bits below `path` (symlinks are left alone).
pub(super) fn strip_setid(path: &Path) -> io::Result<()> {
    let m = std::fs::symlink_metadata(path)?;
    if m.file_type().is_symlink() {
        return Ok(());
    }
    let mode = m.permissions().mode();
    if mode & 0o6000 != 0 {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode & 0o1777))?;
    }
    if m.is_dir() {
        for e in std::fs::read_dir(path)? {
            strip_setid(&e?.path())?;
        }
    }
    Ok(())
}

/// The staging directory next to the output; removed on drop, or only emptied when it
/// is the caller's ([`SandboxSpec::staging`]).
pub(super) struct Staging {
    pub(super) dir: PathBuf,
    lent: bool,
}

impl Staging {
    /// Uses the caller's empty directory `dir`, which must be next to `next_to`.
    pub(super) fn lend(dir: &Path, next_to: &Path) -> Result<Staging, SandboxError> {
        let invalid = |why: &str| {
            SandboxError::InvalidSpec(format!("staging directory {}: {why}", dir.display()))
        };
        if dir.parent() != next_to.parent() {
            return Err(invalid("not in the same directory as the outputs"));
        }
        let mut entries = std::fs::read_dir(dir).map_err(|e| invalid(&errno_of(&e)))?;
        if entries.next().is_some() {
            return Err(invalid("not empty"));
        }
        Ok(Staging {
            dir: dir.to_path_buf(),
            lent: true,
        })
    }

    /// Creates the staging directory next to `next_to`. It is the output's directory in
    /// the sandbox, so it gets the usual 0755 when its parent keeps other users out
    /// anyway (ours, 0700: the realiser's build directories); else 0700.
    pub(super) fn create(next_to: &Path) -> Result<Staging, SandboxError> {
        let parent = next_to.parent().unwrap_or(Path::new("/"));
        let private_parent = std::fs::symlink_metadata(parent).is_ok_and(|m| {
            use std::os::unix::fs::MetadataExt;
            m.is_dir() && m.uid() == geteuid().as_raw() && m.mode() & 0o077 == 0
        });
        let mode = if private_parent { 0o755 } else { 0o700 };
        let name = next_to
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        for attempt in 0..100u32 {
            let dir = parent.join(format!(
                ".rocmx-sandbox-{}-{}-{:x}{}",
                std::process::id(),
                name.chars().take(40).collect::<String>(),
                nanos,
                attempt
            ));
            match std::fs::DirBuilder::new().mode(mode).create(&dir) {
                Ok(()) => return Ok(Staging { dir, lent: false }),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    return Err(SandboxError::Setup(
                        format!("creating the staging directory {}", dir.display()),
                        e,
                    ))
                }
            }
        }
        Err(SandboxError::Setup(
            format!("creating a staging directory in {}", parent.display()),
            io::Error::from(io::ErrorKind::AlreadyExists),
        ))
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if !self.lent {
            remove_tree(&self.dir);
            return;
        }
        if let Ok(entries) = std::fs::read_dir(&self.dir) {
            for e in entries.flatten() {
                // Mostly the inputs' mount points: files (hard links) and empty
                // directories. The entry's type comes with the listing.
                let removed = match e.file_type() {
                    Ok(t) if t.is_dir() => std::fs::remove_dir(e.path()).is_ok(),
                    Ok(_) => std::fs::remove_file(e.path()).is_ok(),
                    Err(_) => false,
                };
                if !removed {
                    remove_tree(&e.path());
                }
            }
        }
    }
}
