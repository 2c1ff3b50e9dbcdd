//! One-byte open-file-description locks (`fcntl` `F_OFD_SETLK`, Linux): the shared
//! mechanism of the build locks (`realise/lock.rs`, a byte per resolved derivation) and
//! the build-id leases (`ids.rs`, a byte per id slot).
//!
//! Owns: trying one byte's write lock. Must not: wait, or open files (the callers
//! choose which file and keep the descriptor: its open file description owns the lock,
//! so two descriptors conflict even in one process, and closing it releases the lock).

use std::fs::File;

use nix::errno::Errno;
use nix::fcntl::{fcntl, FcntlArg};

/// Takes the write lock on byte `offset` of `file` if no other open file description
/// holds it: `Ok(true)` taken (or already held through this descriptor), `Ok(false)`
/// held elsewhere.
pub(crate) fn try_lock_byte(file: &File, offset: i64) -> Result<bool, Errno> {
    let fl = libc::flock {
        l_type: libc::F_WRLCK as libc::c_short,
        l_whence: libc::SEEK_SET as libc::c_short,
        l_start: offset,
        l_len: 1,
        // Must be 0 for open-file-description locks.
        l_pid: 0,
    };
    match fcntl(file, FcntlArg::F_OFD_SETLK(&fl)) {
        Ok(_) => Ok(true),
        Err(Errno::EAGAIN | Errno::EACCES | Errno::EINTR) => Ok(false),
        Err(e) => Err(e),
    }
}
