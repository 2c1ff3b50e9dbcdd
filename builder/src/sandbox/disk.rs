//! The disk bound of a running build: how much `/build` and the outputs take.
//!
//! Owns: [`DiskWatch`], which the sandbox's supervising loop asks every few seconds
//! whether the build has gone past [`super::Limits::disk`].
//!
//! Must not: change or delete anything the builder wrote (it only reads metadata), or
//! recurse natively (a builder may nest directories thousands of levels deep).
//!
//! Usage is the sum of allocated blocks (`st_blocks × 512`) of every file and
//! directory below the watched roots, hard links counted once. The walk is iterative
//! and by path; entries it cannot read (a path too long, a directory the builder made
//! unreadable) are skipped, so the bound is a guard against runaway builds, not an
//! exact quota. A walk costs about a microsecond per entry; the interval grows with
//! the tree so that watching never takes more than a tenth of the build's time.

use std::collections::HashSet;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::SandboxError;

/// Shortest time between two walks.
const MIN_INTERVAL: Duration = Duration::from_secs(2);

/// See the module documentation.
pub(super) struct DiskWatch {
    limit: u64,
    roots: Vec<PathBuf>,
    next: Instant,
}

impl DiskWatch {
    pub(super) fn new(limit: u64, roots: Vec<PathBuf>) -> DiskWatch {
        DiskWatch {
            limit,
            roots,
            next: Instant::now() + MIN_INTERVAL,
        }
    }

    /// At or after the time for a walk: walks and compares. Gives how long until the
    /// next walk, or the error that ends the build.
    pub(super) fn check(&mut self, now: Instant) -> Result<Duration, SandboxError> {
        if now < self.next {
            return Ok(self.next - now);
        }
        let start = Instant::now();
        let used = usage(&self.roots);
        if used > self.limit {
            return Err(SandboxError::DiskLimit {
                limit: self.limit,
                used,
            });
        }
        let interval = MIN_INTERVAL.max(start.elapsed() * 10);
        self.next = Instant::now() + interval;
        Ok(interval)
    }
}

/// Bytes allocated below `roots` (see the module documentation).
pub(super) fn usage(roots: &[PathBuf]) -> u64 {
    let mut total = 0u64;
    let mut seen: HashSet<(u64, u64)> = HashSet::new();
    let mut stack: Vec<PathBuf> = roots.to_vec();
    while let Some(p) = stack.pop() {
        let Ok(m) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        if m.nlink() > 1 && !m.is_dir() && !seen.insert((m.dev(), m.ino())) {
            continue;
        }
        total = total.saturating_add(m.blocks().saturating_mul(512));
        if m.is_dir() {
            if let Ok(entries) = std::fs::read_dir(&p) {
                stack.extend(entries.flatten().map(|e| e.path()));
            }
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_blocks_once_per_inode() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        std::fs::create_dir(&a).unwrap();
        std::fs::write(a.join("f"), vec![1u8; 1 << 20]).unwrap();
        std::fs::hard_link(a.join("f"), a.join("g")).unwrap();
        let used = usage(&[dir.path().to_path_buf()]);
        assert!(used >= 1 << 20, "{used}");
        assert!(used < 2 << 20, "a hard link is counted once: {used}");
    }

    #[test]
    fn over_the_limit_is_an_error_naming_both_numbers() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f"), vec![1u8; 256 << 10]).unwrap();
        let mut w = DiskWatch::new(64 << 10, vec![dir.path().to_path_buf()]);
        assert!(w.check(Instant::now()).is_ok(), "not yet time for a walk");
        let e = w.check(Instant::now() + MIN_INTERVAL).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("more than 65536 bytes"), "{msg}");
        assert!(msg.contains("build-dir-size"), "{msg}");
        let mut w = DiskWatch::new(1 << 30, vec![dir.path().to_path_buf()]);
        assert!(w.check(Instant::now() + MIN_INTERVAL).is_ok());
    }
}
