//! Build locks: one derivation is built by one process (or realiser) at a time.
//!
//! Owns: [`DrvLock`] — the lock of one resolved derivation, keyed on its resolved hash
//! (the realisation key), taken before a build starts and held until its realisation
//! is recorded, so that several `rocmx build` processes on one store build each
//! derivation once: the others wait, then find the realisation (see `super`).
//!
//! Must not: block. [`DrvLock::try_lock`] never waits; the scheduler retries a held
//! lock between other work, so a derivation waiting for its lock does not stop other
//! ready derivations from starting.
//!
//! # Representation
//!
//! Every build lock of a store is a one-byte open-file-description lock (`fcntl`
//! `F_OFD_SETLK`, Linux) in the single file `<state>/locks/drv.lock`, at an offset taken
//! from the key (60 bits of it: distinct derivations share a byte with negligible
//! probability, and sharing would only make one wait for the other). Byte-range locks on
//! one file do not make unrelated derivations wait for each other, as `flock` on a few
//! shared files would, and cost no inode per derivation. The file is created on first
//! use (owned like the other lock files, see `rocmx_store::local::open_lock_file`) and
//! never removed; it stays empty (locks beyond the end of a file are allowed).
//!
//! Each lock opens the file anew: its open file description is its own, so two locks in
//! one process conflict exactly as in two processes, and closing it (dropping the
//! [`DrvLock`], or the death of the process) releases it. Sandboxes never inherit it: the
//! file is opened close-on-exec and the sandbox's init closes every inherited descriptor.

use std::collections::VecDeque;
use std::fs::File;
use std::path::{Path, PathBuf};

use super::BuildError;

/// The file holding every build lock of a store.
pub(super) fn lock_file(state: &Path) -> PathBuf {
    state.join("locks").join("drv.lock")
}

/// The byte of the lock file that stands for `key` (hex of the resolved hash; any other
/// text is hashed first).
fn offset_of(key: &str) -> i64 {
    let from_hex = key
        .get(..15)
        .filter(|h| h.bytes().all(|b| b.is_ascii_hexdigit()))
        .and_then(|h| u64::from_str_radix(h, 16).ok());
    let v = from_hex.unwrap_or_else(|| {
        let h = blake3::hash(key.as_bytes());
        let mut b = [0u8; 8];
        b.copy_from_slice(&h.as_bytes()[..8]);
        u64::from_le_bytes(b) >> 4
    });
    // 60 bits: always a valid, non-negative `off_t`.
    (v & ((1 << 60) - 1)) as i64
}

/// A held build lock (or, before [`DrvLock::try_lock`] succeeds, the open file it is
/// tried on). Released when dropped.
#[derive(Debug)]
pub(super) struct DrvLock {
    file: File,
    offset: i64,
    path: PathBuf,
    held: bool,
}

impl DrvLock {
    /// Opens the lock file of the store whose state directory is `state` for the lock
    /// of `key`, without taking it.
    pub(super) fn open(state: &Path, key: &str) -> Result<DrvLock, BuildError> {
        let path = lock_file(state);
        let file = rocmx_store::local::open_lock_file(&path)?;
        Ok(DrvLock {
            file,
            offset: offset_of(key),
            path,
            held: false,
        })
    }

    /// Takes the lock if nobody holds it; whether it is held now.
    pub(super) fn try_lock(&mut self) -> Result<bool, BuildError> {
        if self.held {
            return Ok(true);
        }
        match crate::ofd::try_lock_byte(&self.file, self.offset) {
            Ok(true) => {
                self.held = true;
                Ok(true)
            }
            Ok(false) => Ok(false),
            Err(e) => Err(BuildError::Io {
                action: "taking a build lock in",
                path: self.path.clone(),
                source: std::io::Error::from(e),
            }),
        }
    }
}

/// Builds whose lock another process (or realiser) holds, set aside until it is free.
/// `T` is the scheduler's queued build.
pub(super) struct Contended<T> {
    waiting: VecDeque<(T, DrvLock)>,
}

impl<T> Default for Contended<T> {
    fn default() -> Self {
        Contended {
            waiting: VecDeque::new(),
        }
    }
}

impl<T> Contended<T> {
    /// Whether no build waits for its lock.
    pub(super) fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }

    /// Forgets the waiting builds (the run stops): their locks were never taken.
    pub(super) fn clear(&mut self) {
        self.waiting.clear();
    }

    /// The next build to start, its lock taken: one that waited and whose lock is free
    /// now, else the first of `queue` whose lock can be taken. Those of `queue` whose
    /// lock is held are set aside (and `on_wait` is told). `key` gives a build's
    /// realisation key. A lock file that cannot be used fails that build only: `Err`.
    pub(super) fn next(
        &mut self,
        state: &Path,
        queue: &mut VecDeque<T>,
        key: impl Fn(&T) -> &str,
        mut on_wait: impl FnMut(&T),
    ) -> Option<Result<(T, DrvLock), (T, BuildError)>> {
        for i in 0..self.waiting.len() {
            let free = match self.waiting.get_mut(i).map(|(_, l)| l.try_lock()) {
                Some(Ok(free)) => free,
                Some(Err(e)) => {
                    return self.waiting.remove(i).map(|(t, _)| Err((t, e)));
                }
                None => false,
            };
            if free {
                return self.waiting.remove(i).map(Ok);
            }
        }
        while let Some(t) = queue.pop_front() {
            let mut lock = match DrvLock::open(state, key(&t)) {
                Ok(l) => l,
                Err(e) => return Some(Err((t, e))),
            };
            match lock.try_lock() {
                Ok(true) => return Some(Ok((t, lock))),
                Ok(false) => {
                    on_wait(&t);
                    self.waiting.push_back((t, lock));
                }
                Err(e) => return Some(Err((t, e))),
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const K1: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    const K2: &str = "f123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn locks_exclude_each_other_per_key_within_one_process() {
        let tmp = tempfile::tempdir().expect("tmp");
        std::fs::create_dir(tmp.path().join("locks")).expect("locks");
        let mut a = DrvLock::open(tmp.path(), K1).expect("open");
        assert!(a.try_lock().expect("lock"));
        assert!(a.try_lock().expect("again: still ours"));
        let mut b = DrvLock::open(tmp.path(), K1).expect("open");
        assert!(!b.try_lock().expect("held elsewhere"));
        // Another key: another byte, not blocked.
        let mut c = DrvLock::open(tmp.path(), K2).expect("open");
        assert!(c.try_lock().expect("another key"));
        drop(a);
        assert!(b.try_lock().expect("released on drop"));
        assert_ne!(offset_of(K1), offset_of(K2));
        assert!(offset_of("not hex at all") >= 0);
        assert_eq!(offset_of(K1), 0x0123456789abcde);
    }
}
