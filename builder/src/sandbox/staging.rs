//! The staging directory of one build, and the host-side file helpers around it.
//!
//! Owns: [`Staging`] (made next to the outputs, or lent by the caller; bound at the
//! outputs' inside directory), the overlay work directories ([`WorkDirs`]), clearing
//! setuid bits of outputs, and removing trees the builder may have made read-only (both
//! through `rocmx_store::tree`, at any depth).
//!
//! Must not: mount anything or run code in the sandbox (that is `child.rs`).

use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use nix::unistd::geteuid;
// Trees the builder may have left: any depth, any modes. Failures below are left for
// the caller's next cleanup.
use rocmx_store::tree::remove_tree;

use super::{errno_of, SandboxError};

/// Clears setuid and setgid bits below the output `path` (symlinks are left alone),
/// refusing an output nested deeper than a store object may be
/// ([`rocmx_store::tree::MAX_DEPTH`]). Works through directory descriptors, so neither
/// depth nor path length can crash it.
pub(super) fn strip_setid(path: &Path) -> Result<(), SandboxError> {
    rocmx_store::tree::clear_setid_bits(path).map_err(|source| SandboxError::Output {
        path: path.to_path_buf(),
        source,
    })
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
            let _ = remove_tree(&self.dir);
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
                    let _ = remove_tree(&e.path());
                }
            }
        }
    }
}

/// The two empty work directories of the writable overlays at `/build` and at the
/// output's directory: `.rocmx-work-<pid>-<n>` next to the build directory and next to
/// the staging directory (an overlay's work directory must be on its upper layer's
/// filesystem). Removed, whatever the kernel left in them, on drop.
pub(super) struct WorkDirs {
    pub(super) build: PathBuf,
    pub(super) output: PathBuf,
    /// The caller's ([`super::SandboxSpec::work_dirs`]): left in place.
    lent: bool,
}

impl WorkDirs {
    /// Uses the caller's directories (what a previous overlay left in them is the
    /// kernel's to clean at the next mount).
    pub(super) fn lend(build: &Path, output: &Path) -> WorkDirs {
        WorkDirs {
            build: build.to_path_buf(),
            output: output.to_path_buf(),
            lent: true,
        }
    }

    pub(super) fn create(build_dir: &Path, staging: &Path) -> Result<WorkDirs, SandboxError> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let make = |next_to: &Path| -> Result<PathBuf, SandboxError> {
            let parent = next_to.parent().unwrap_or(Path::new("/"));
            loop {
                let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let dir = parent.join(format!(".rocmx-work-{}-{n}", std::process::id()));
                match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
                    Ok(()) => return Ok(dir),
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                    Err(e) => {
                        return Err(SandboxError::Setup(
                            format!("creating the overlay work directory {}", dir.display()),
                            e,
                        ))
                    }
                }
            }
        };
        let build = make(build_dir)?;
        let output = match make(staging) {
            Ok(d) => d,
            Err(e) => {
                let _ = remove_tree(&build);
                return Err(e);
            }
        };
        Ok(WorkDirs {
            build,
            output,
            lent: false,
        })
    }
}

impl Drop for WorkDirs {
    fn drop(&mut self) {
        if self.lent {
            return;
        }
        let _ = remove_tree(&self.build);
        let _ = remove_tree(&self.output);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::fcntl::{openat, OFlag};
    use nix::sys::stat::{fchmod, mkdirat, Mode};

    /// Makes `root` with a chain of `a` directories below it, `levels` deep in all,
    /// through descriptors (the paths exceed `PATH_MAX`); some levels are left 0500 or
    /// 0000, as a hostile builder might.
    fn chain(root: &Path, levels: usize) {
        std::fs::create_dir(root).expect("mkdir");
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW;
        let mut cur = openat(nix::fcntl::AT_FDCWD, root, flags, Mode::empty()).expect("open");
        for i in 1..levels {
            mkdirat(&cur, "a", Mode::from_bits_truncate(0o755)).expect("mkdirat");
            let next = openat(&cur, "a", flags, Mode::empty()).expect("openat");
            if i % 5000 == 0 {
                let mode = if i % 10000 == 0 { 0o000 } else { 0o500 };
                fchmod(&cur, Mode::from_bits_truncate(mode)).expect("fchmod");
            }
            cur = next;
        }
    }

    #[test]
    fn deep_outputs_are_refused_with_the_cause_and_removed_on_a_small_stack() {
        let tmp = tempfile::tempdir().expect("tmp");
        let staging = Staging::create(&tmp.path().join("out")).expect("staging");
        let out = staging.dir.join("out");
        chain(&out, 20_000);
        let o = out.clone();
        let e = std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(move || strip_setid(&o))
            .expect("spawn")
            .join()
            .expect("no panic")
            .expect_err("too deep");
        assert!(
            matches!(e, SandboxError::Output { ref path, .. } if *path == out),
            "{e}"
        );
        let msg = e.to_string();
        assert!(msg.contains("is nested deeper than 2048 levels"), "{msg}");
        assert!(!msg.contains("sandbox setup failed"), "{msg}");
        let dir = staging.dir.clone();
        std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(move || drop(staging))
            .expect("spawn")
            .join()
            .expect("no panic");
        assert!(std::fs::symlink_metadata(dir).is_err(), "removed on drop");
    }
}
