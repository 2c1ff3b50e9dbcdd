//! Restoring a NAR into a new directory, file or symlink.
//!
//! Owns: creating the archive's nodes under the destination, refusing a destination that
//! exists, and removing what it created when the archive turns out to be bad.
//!
//! Must not: write outside the destination. The parser already rejects `..`, `/`, NUL,
//! duplicates and unsorted entries, so no entry can sit beneath a symlink; on top of that,
//! every node is created with `O_EXCL`/`mkdir`/`symlink` (none follows a symlink in its last
//! component) and only under a parent that this restore created as a real directory.
//! Modes are 0644/0755 for files (subject to the umask) and times are left alone: the
//! local store normalises them afterwards.
//!
//! # Direct writes
//!
//! [`restore_direct`] writes large files (at least [`DIRECT_MIN`] bytes) through a
//! [`DirectWriter`] (`O_DIRECT`, see [`crate::direct`]). It is for callers that make
//! the tree durable before using it (importing into the store): the data has to reach
//! the disk anyway.

use std::collections::HashSet;
use std::ffi::OsStr;
use std::fs::{self, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use super::reader::{parse, Contents, NarVisitor};
use super::NarError;
use crate::direct::DirectWriter;

/// Files at least this large are written directly by [`restore_direct`].
pub use crate::direct::DIRECT_MIN;

/// Creates the archive's nodes under `dest`.
struct Restorer<'a> {
    dest: &'a Path,
    /// Relative paths of the directories this restore created.
    dirs: HashSet<PathBuf>,
    created_root: bool,
    buf: Vec<u8>,
    /// Write large files with `O_DIRECT` (turned off when the filesystem refuses it).
    direct: bool,
}

impl Restorer<'_> {
    /// The absolute path of `rel`, after checking that its parent is a directory that this
    /// restore created and that it still is a real directory.
    fn target(&self, rel: &Path) -> Result<PathBuf, NarError> {
        if rel.as_os_str().is_empty() {
            return Ok(self.dest.to_path_buf());
        }
        let unsafe_parent = || NarError::UnsafeParent {
            path: self.dest.join(rel),
        };
        let parent = rel.parent().ok_or_else(unsafe_parent)?;
        if !self.dirs.contains(parent) {
            return Err(unsafe_parent());
        }
        let parent_abs = self.dest.join(parent);
        match fs::symlink_metadata(&parent_abs) {
            Ok(m) if m.file_type().is_dir() => Ok(self.dest.join(rel)),
            _ => Err(unsafe_parent()),
        }
    }

    fn fail(path: &Path) -> impl FnOnce(io::Error) -> NarError + '_ {
        move |source| NarError::Restore {
            path: path.to_path_buf(),
            source,
        }
    }

    fn mark_root(&mut self, rel: &Path) {
        if rel.as_os_str().is_empty() {
            self.created_root = true;
        }
    }
}

impl NarVisitor for Restorer<'_> {
    fn directory(&mut self, rel: &Path) -> Result<(), NarError> {
        let abs = self.target(rel)?;
        fs::create_dir(&abs).map_err(Self::fail(&abs))?;
        self.mark_root(rel);
        self.dirs.insert(rel.to_path_buf());
        Ok(())
    }

    fn regular(
        &mut self,
        rel: &Path,
        executable: bool,
        size: u64,
        contents: &mut Contents<'_>,
    ) -> Result<(), NarError> {
        let abs = self.target(rel)?;
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(if executable { 0o755 } else { 0o644 })
            .open(&abs)
            .map_err(Self::fail(&abs))?;
        self.mark_root(rel);
        if self.direct && size >= DIRECT_MIN {
            let mut w = DirectWriter::with_size_hint(file, size);
            // The filesystem does not do direct writes: do not ask again.
            self.direct = w.is_direct();
            // Read straight into the writer's aligned buffer.
            w.copy_from(contents).map_err(Self::fail(&abs))?;
            w.finish().map_err(Self::fail(&abs))?;
            return Ok(());
        }
        if self.buf.is_empty() {
            self.buf.resize(256 * 1024, 0);
        }
        loop {
            let n = match contents.read(&mut self.buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(Self::fail(&abs)(e)),
            };
            file.write_all(&self.buf[..n]).map_err(Self::fail(&abs))?;
        }
        Ok(())
    }

    fn symlink(&mut self, rel: &Path, target: &OsStr) -> Result<(), NarError> {
        let abs = self.target(rel)?;
        std::os::unix::fs::symlink(target, &abs).map_err(Self::fail(&abs))?;
        self.mark_root(rel);
        Ok(())
    }
}

/// Restores the archive read from `reader` at `dest`, which must not exist (its parent
/// must). The root node becomes `dest` itself: a directory, a file or a symlink. On any
/// error, whatever was created is removed and nothing outside `dest` was touched.
/// Returns the archive size in bytes.
pub fn restore<R: Read>(reader: R, dest: &Path) -> Result<u64, NarError> {
    restore_with(reader, dest, false)
}

/// [`restore`], writing large files directly to the disk (see the module
/// documentation): for a caller that makes the tree durable before using it.
pub fn restore_direct<R: Read>(reader: R, dest: &Path) -> Result<u64, NarError> {
    restore_with(reader, dest, true)
}

fn restore_with<R: Read>(reader: R, dest: &Path, direct: bool) -> Result<u64, NarError> {
    if fs::symlink_metadata(dest).is_ok() {
        return Err(NarError::DestinationExists {
            path: dest.to_path_buf(),
        });
    }
    let mut r = Restorer {
        dest,
        dirs: HashSet::new(),
        created_root: false,
        buf: Vec::new(),
        direct,
    };
    let result = parse(reader, &mut r);
    if result.is_err() && r.created_root {
        let _ = crate::tree::remove_tree(dest);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The belt-and-braces check: even if a visitor were driven with an entry beneath a
    /// symlink (which the parser never does), the restorer refuses it.
    #[test]
    fn refuses_entries_beneath_a_symlink_or_unknown_parent() {
        let tmp = tempfile::tempdir().expect("tmp");
        let outside = tmp.path().join("outside");
        fs::create_dir(&outside).expect("mkdir");
        let dest = tmp.path().join("dest");
        let mut r = Restorer {
            dest: &dest,
            dirs: HashSet::new(),
            created_root: false,
            buf: Vec::new(),
            direct: false,
        };
        r.directory(Path::new("")).expect("root");
        r.symlink(Path::new("a"), outside.as_os_str())
            .expect("symlink");
        let err = r.directory(Path::new("a/b")).expect_err("beneath symlink");
        assert!(matches!(err, NarError::UnsafeParent { .. }));
        // Even a symlink swapped in for a directory this restore created is refused.
        r.directory(Path::new("c")).expect("dir");
        fs::remove_dir(dest.join("c")).expect("rmdir");
        std::os::unix::fs::symlink(&outside, dest.join("c")).expect("symlink");
        let err = r
            .symlink(Path::new("c/x"), OsStr::new("y"))
            .expect_err("swapped parent");
        assert!(matches!(err, NarError::UnsafeParent { .. }));
        assert_eq!(fs::read_dir(&outside).expect("ls").count(), 0);
    }
}
