//! A build's private directory: `<state>/builds/<pid>-<n>/`, and the pool that keeps
//! them for the realiser's next builds.
//!
//! Owns: the layout of a build directory (`rw/` holding `build/`, the sandbox's
//! `stage/` and the outputs' scratch paths, the overlays' work directories beside it),
//! [`DirPool`] (making build directories, emptying finished ones for reuse instead of
//! deleting them, deleting them all at the end), [`BuildDir`] (one build's directory,
//! given back to the pool when dropped unless kept), and deleting the directories that
//! processes which are gone left behind.
//!
//! Must not: run builders or look at what a build produced (the job does); delete
//! anything under `<state>/builds` but the directories it made and those of processes
//! that are gone (never a kept `kept-…` one, nor one whose pid is alive).

use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

use rocmx_store::tree::remove_tree;

use crate::realise::{io_err, BuildError};

/// The directory holding `build/` (bound at `/build`) and `stage/` (the sandbox's
/// staging directory, bound at the store directory): the upper layer of the one
/// writable overlay the sandbox mounts for both ([`SandboxSpec::shared_work_dir`]).
///
/// [`SandboxSpec::shared_work_dir`]: crate::sandbox::SandboxSpec::shared_work_dir
pub(super) const RW: &str = "rw";
/// The sandbox's overlay work directory: of the shared overlay, or of `/build`'s when
/// the two are mounted apart.
pub(super) const WORK_BUILD: &str = "work";
/// The sandbox's overlay work directory for the output's directory mounted apart.
pub(super) const WORK_STAGE: &str = "work-stage";
/// What a build directory keeps between builds.
const KEPT: [&str; 3] = [RW, WORK_BUILD, WORK_STAGE];

/// Build directories (`<state>/builds/<pid>-<n>/`, holding an empty `build/`) that
/// finished builds of one realiser left for the next ones: emptied, not deleted, because
/// creating directories is a large part of a small build's cost on some filesystems.
/// [`DirPool::clear`] deletes them.
#[derive(Default)]
pub(in crate::realise) struct DirPool {
    free: Mutex<Vec<PathBuf>>,
    next: AtomicU32,
}

impl DirPool {
    /// A private build directory with an empty `build/` in it.
    pub(super) fn take(&self, builds: &Path) -> Result<PathBuf, BuildError> {
        let reused = self.free.lock().unwrap_or_else(|e| e.into_inner()).pop();
        if let Some(dir) = reused {
            return Ok(dir);
        }
        fs::create_dir_all(builds).map_err(io_err("creating", builds))?;
        if self.next.load(Ordering::Relaxed) == 0 {
            remove_stale(builds);
        }
        loop {
            let n = self.next.fetch_add(1, Ordering::Relaxed);
            let base = builds.join(format!("{}-{n}", std::process::id()));
            if fs::symlink_metadata(&base).is_ok() {
                // Left by a process that had our pid before: not ours to reuse.
                continue;
            }
            fs::DirBuilder::new()
                .mode(0o700)
                .create(&base)
                .map_err(io_err("creating", &base))?;
            let rw = base.join(RW);
            fs::DirBuilder::new()
                .mode(0o700)
                .create(&rw)
                .map_err(io_err("creating", &rw))?;
            let build_dir = rw.join("build");
            fs::DirBuilder::new()
                .mode(0o700)
                .create(&build_dir)
                .map_err(io_err("creating", &build_dir))?;
            // The sandbox's staging directory (bound at /rocmx/store inside): 0755 in
            // a private (0700) parent.
            let stage = rw.join("stage");
            fs::DirBuilder::new()
                .mode(0o755)
                .create(&stage)
                .map_err(io_err("creating", &stage))?;
            // The sandbox's overlay work directories, kept across builds.
            for w in [WORK_BUILD, WORK_STAGE] {
                let w = base.join(w);
                fs::DirBuilder::new()
                    .mode(0o700)
                    .create(&w)
                    .map_err(io_err("creating", &w))?;
            }
            return Ok(base);
        }
    }

    /// Empties `base` (all but an empty `rw/build/` and `rw/stage/`, and the overlay
    /// work directories, which the kernel cleans at each mount) and keeps it for the
    /// next build; a directory that cannot be emptied is deleted instead.
    fn give_back(&self, base: &Path) {
        let emptied = (|| -> io::Result<()> {
            let keep_only = |dir: &Path, kept: &[&str]| -> io::Result<()> {
                for e in fs::read_dir(dir)? {
                    let e = e?;
                    if !kept.iter().any(|k| e.file_name() == *k) {
                        remove_tree(&e.path())?;
                    }
                }
                if fs::read_dir(dir)?.count() != kept.len() {
                    return Err(io::Error::other("not empty"));
                }
                Ok(())
            };
            keep_only(base, &KEPT)?;
            let rw = base.join(RW);
            keep_only(&rw, &["build", "stage"])?;
            for (sub, mode) in [("build", 0o700), ("stage", 0o755)] {
                let d = rw.join(sub);
                fs::set_permissions(&d, fs::Permissions::from_mode(mode))?;
                for e in fs::read_dir(&d)? {
                    remove_tree(&e?.path())?;
                }
                if fs::read_dir(&d)?.next().is_some() {
                    return Err(io::Error::other("not empty"));
                }
            }
            Ok(())
        })();
        match emptied {
            Ok(()) => self
                .free
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(base.to_path_buf()),
            Err(_) => remove_or_warn(base),
        }
    }

    /// Deletes every directory kept for reuse.
    pub(in crate::realise) fn clear(&self) {
        let free = std::mem::take(&mut *self.free.lock().unwrap_or_else(|e| e.into_inner()));
        for d in free {
            remove_or_warn(&d);
        }
    }
}

/// Removes a build directory that is not needed any more; a failure is a warning (on
/// standard error), never an error: a leftover must not stop this or later builds.
fn remove_or_warn(path: &Path) {
    if let Err(e) = remove_tree(path) {
        eprintln!(
            "warning: could not remove the build directory {}: {e}; remove it by hand",
            path.display()
        );
    }
}

/// Deletes the build directories (`<pid>-<n>`) of processes that are gone: builds
/// interrupted by a signal or a crash leave them, possibly large. Directories kept by
/// `--keep-failed` are named `kept-…` and stay; a directory whose pid is alive (or
/// reused by another process) is left alone.
fn remove_stale(builds: &Path) {
    let Ok(entries) = fs::read_dir(builds) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.split_once('-'))
            .filter(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|(p, _)| p.parse::<i32>().ok())
        else {
            continue;
        };
        if pid <= 0 || pid as u32 == std::process::id() {
            continue;
        }
        let gone = matches!(
            nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None),
            Err(nix::errno::Errno::ESRCH)
        );
        if gone {
            remove_or_warn(&e.path());
        }
    }
}

/// A build's private directory under `<state>/builds`, given back to the pool on drop
/// unless kept.
pub(super) struct BuildDir<'p> {
    pub(super) path: PathBuf,
    pub(super) keep: bool,
    pub(super) pool: &'p DirPool,
}

impl Drop for BuildDir<'_> {
    fn drop(&mut self) {
        if !self.keep {
            self.pool.give_back(&self.path);
        }
    }
}
