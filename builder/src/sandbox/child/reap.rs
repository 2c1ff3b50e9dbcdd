//! Init's reaping loop under a process limit (see "Resource bounds" in the sandbox's
//! module documentation): reaps, counts the processes of the pid namespace now and
//! then, and ends the build at the limit.
//!
//! Owns: counting processes through `/proc` and the [`TAG_NPROC`] record.
//!
//! Must not: allocate or take locks (it runs in init, a raw clone of a multi-threaded
//! process: see the notes of `child.rs`).

use std::os::fd::RawFd;

use nix::errno::Errno;
use nix::sys::wait::{waitpid, WaitStatus};
use nix::unistd::Pid;

use super::super::protocol::{RecordBuf, TAG_EXIT, TAG_NPROC, TAG_SIGNAL};
use super::{exit, send, Prepared};

/// How often init counts processes while the build runs (under a process limit)...
const COUNT_INTERVAL_NS: i64 = 200_000_000;
/// ... and how often once half the limit is reached: a fork bomb that the limit stops
/// collapses within milliseconds (a shell exits when its fork fails), so near the limit
/// init looks often enough to see it.
const COUNT_INTERVAL_NEAR_NS: i64 = 2_000_000;

/// Init's reaping loop under a process limit: reaps until the builder is gone (then
/// kills and reaps the rest, reports its status and exits), and every
/// [`COUNT_INTERVAL_NS`] counts the processes in `/proc` (this pid namespace's); at the
/// limit it reports [`TAG_NPROC`] and exits, which kills the whole build.
pub(super) fn reap_counting(p: &Prepared, child: Pid, proc_fd: std::os::fd::OwnedFd) -> ! {
    use std::os::fd::AsRawFd;
    let st = p.status_write;
    // SAFETY: plain sigset operations on a set we own.
    let mut chld: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    unsafe {
        libc::sigemptyset(&mut chld);
        libc::sigaddset(&mut chld, libc::SIGCHLD);
    }
    let mut last_count: i64 = i64::MIN;
    let mut interval = COUNT_INTERVAL_NS;
    loop {
        match waitpid(None, Some(nix::sys::wait::WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(pid, code)) if pid == child => {
                // A builder that failed while what it left running (plus itself) filled
                // the limit most likely failed for that: say so.
                let n = count_processes(proc_fd.as_raw_fd()) + 1;
                if code != 0 && n >= p.max_processes {
                    send(st, &mut RecordBuf::new(TAG_NPROC, 0, n as i32));
                    exit(0)
                }
                super::kill_the_rest();
                send(st, &mut RecordBuf::new(TAG_EXIT, 0, code));
                exit(0)
            }
            Ok(WaitStatus::Signaled(pid, sig, _)) if pid == child => {
                super::kill_the_rest();
                send(st, &mut RecordBuf::new(TAG_SIGNAL, 0, sig as i32));
                exit(0)
            }
            Ok(WaitStatus::StillAlive) => {}
            Err(Errno::EINTR) | Ok(_) => continue,
            Err(_) => exit(0),
        }
        let now = monotonic_ns();
        if now.saturating_sub(last_count) >= interval {
            last_count = now;
            let n = count_processes(proc_fd.as_raw_fd());
            if n >= p.max_processes {
                send(st, &mut RecordBuf::new(TAG_NPROC, 0, n as i32));
                exit(0)
            }
            interval = if n.saturating_mul(2) >= p.max_processes {
                COUNT_INTERVAL_NEAR_NS
            } else {
                COUNT_INTERVAL_NS
            };
        }
        let wait = libc::timespec {
            tv_sec: 0,
            tv_nsec: interval as libc::c_long,
        };
        // SAFETY: waits for SIGCHLD (blocked) with a valid set and timeout; no info out.
        unsafe { libc::sigtimedwait(&chld, std::ptr::null_mut(), &wait) };
    }
}

fn monotonic_ns() -> i64 {
    // SAFETY: `timespec` is plain old data, valid when zeroed; clock_gettime fills it.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: a valid clock id and out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as i64).saturating_mul(1_000_000_000) + ts.tv_nsec as i64
}

/// The number of processes in this pid namespace: the numeric entries of `/proc`
/// (`proc_fd`), read with `getdents64` into a stack buffer.
fn count_processes(proc_fd: RawFd) -> u32 {
    // SAFETY: lseek on a directory descriptor we own rewinds it.
    unsafe { libc::lseek(proc_fd, 0, libc::SEEK_SET) };
    let mut buf = [0u8; 8192];
    let mut n = 0u32;
    loop {
        // SAFETY: getdents64 writes at most `buf.len()` bytes into `buf`.
        let got =
            unsafe { libc::syscall(libc::SYS_getdents64, proc_fd, buf.as_mut_ptr(), buf.len()) };
        if got <= 0 {
            return n;
        }
        let got = got as usize;
        let mut off = 0;
        // struct linux_dirent64 { u64 d_ino; i64 d_off; u16 d_reclen; u8 d_type; char d_name[]; }
        while off + 19 < got {
            let reclen = u16::from_ne_bytes([buf[off + 16], buf[off + 17]]) as usize;
            if reclen == 0 {
                break;
            }
            if buf[off + 19].is_ascii_digit() {
                n += 1;
            }
            off += reclen;
        }
    }
}
