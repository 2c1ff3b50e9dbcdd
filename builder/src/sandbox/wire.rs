//! The prepared sandbox as bytes: how [`run`](super::run) hands an init started by the
//! zygote (module `zygote`) everything it needs.
//!
//! Owns: the encoding of [`Prepared`] (without its descriptors, which travel beside the
//! bytes as `SCM_RIGHTS`) and its decoding in the init that receives it.
//!
//! Must not: decide anything about the sandbox (the plan is made by `run`, carried out by
//! `child.rs`), or be used across binaries: both ends are the same rocmx, so the format
//! has no versions, only a magic number that catches a stray or cut message.
//!
//! # Format
//!
//! Little-endian throughout. `u8`, `u32`, `u64` are fixed-width integers; `bytes` is a
//! `u32` length and that many bytes (a C string without its NUL); `opt<T>` is a `u8`
//! 0 (none) or 1 followed by `T`; `vec<T>` is a `u32` count and that many `T`.
//!
//! ```text
//! prepared := "RXSB" flags:u64 fds:u32×5 clear_groups:u8 switch_ids:u8 max_processes:u32
//!             root:bytes actions:vec<planned> loopback_up:u8 last_cap:u32
//!             caps:bytes (one capability number per byte) builder:bytes
//!             argv:vec<bytes> envp:vec<bytes> staging_path:bytes
//!             build_uid:u32 build_gid:u32 hostname:bytes domainname:opt<bytes>
//!             umask:u32 build_top:bytes cpus:opt<bytes> (the cpu_set_t) uname26:u8
//! planned  := action what:bytes
//! action   := 1 Mkdir path mode:u32 | 2 Touch path | 3 Link target path | 4 Unlink path
//!           | 5 Symlink target path | 6 WriteFile path data:bytes
//!           | 7 Mount source target fstype flags:u64 data:opt<bytes> proc:u8
//!           | 8 Bind source target flags:u64 | 9 BindFrom source target fallback flags:u64
//!           | 10 Overlay lower empty target
//!           | 11 OverlayRw upper work empty target flags:u64 fallback:vec<action>
//!           | 12 SharedOverlay upper work lower target flags:u64
//!                binds:vec<(bytes bytes bytes)> fallback:vec<action>
//!           | 13 Chown path uid:u32 gid:u32 | 14 Umount path | 15 Rmdir path
//!           | 16 EnterRoot path
//! ```
//! (every path, target, source and the like is `bytes`). The seccomp program is not
//! sent: it is the same constant program on both sides ([`super::seccomp::program`]).
//! `fds` are the numbers of the five descriptors in the sender, in this order: the log
//! pipe's and the status pipe's write ends, `/dev/null`, the go-ahead pipe's read end,
//! the staging directory. They travel beside the bytes, and the receiver moves them to
//! these numbers before it uses the plan, whose paths name one of them
//! (`/proc/self/fd/<staging>/…`).

use std::ffi::CString;
use std::os::fd::RawFd;

use nix::mount::MsFlags;
use nix::sched::CloneFlags;

use super::child::Prepared;
use super::plan::{Action, PlannedAction};

const MAGIC: &[u8; 4] = b"RXSB";

/// How many descriptors travel with a prepared sandbox.
pub(super) const FDS: usize = 5;

/// Why received bytes are not a prepared sandbox.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Malformed(pub &'static str);

/// The descriptors of `p`, in the order [`decode`] expects them.
pub(super) fn fds(p: &Prepared) -> [RawFd; FDS] {
    [p.log_write, p.status_write, p.devnull, p.go_read, p.staging]
}

/// `p` as bytes (its descriptors apart: see [`fds`]).
pub(super) fn encode(p: &Prepared) -> Vec<u8> {
    let mut w = Writer(Vec::with_capacity(4096));
    w.0.extend_from_slice(MAGIC);
    w.u64(p.flags.bits() as u64);
    for fd in fds(p) {
        w.u32(fd as u32);
    }
    w.u8(p.clear_groups.into());
    w.u8(p.switch_ids.into());
    w.u32(p.max_processes);
    w.cstr(&p.root);
    w.u32(p.actions.len() as u32);
    for pa in &p.actions {
        w.action(&pa.action);
        w.bytes(&pa.what);
    }
    w.u8(p.loopback_up.into());
    w.u32(p.last_cap);
    let caps: Vec<u8> = p.all_caps.iter().map(|c| c.index()).collect();
    w.bytes(&caps);
    w.cstr(&p.builder);
    for list in [&p._argv, &p._envp] {
        w.u32(list.len() as u32);
        for s in list {
            w.cstr(s);
        }
    }
    w.cstr(&p.staging_path);
    w.u32(p.build_uid);
    w.u32(p.build_gid);
    w.cstr(&p.hostname);
    w.opt(p.domainname.as_ref(), |w, d| w.cstr(d));
    w.u32(p.umask);
    w.cstr(&p.build_top);
    w.opt(p.cpus.as_ref(), |w, set| {
        // SAFETY: cpu_set_t is a plain bit array; we read exactly its size.
        let raw = unsafe {
            std::slice::from_raw_parts(
                (set as *const libc::cpu_set_t).cast::<u8>(),
                std::mem::size_of::<libc::cpu_set_t>(),
            )
        };
        w.bytes(raw)
    });
    w.u8(p.uname26.into());
    w.0
}

/// The prepared sandbox in `bytes`; its descriptors are the sender's numbers (see
/// [`fds`]), where the receiver must put the descriptors it received.
pub(super) fn decode(bytes: &[u8]) -> Result<Prepared, Malformed> {
    let mut r = Reader(bytes);
    if r.take(4)? != MAGIC {
        return Err(Malformed("not a prepared sandbox"));
    }
    let flags = CloneFlags::from_bits_retain(r.u64()? as libc::c_int);
    let mut fds = [0 as RawFd; FDS];
    for fd in &mut fds {
        *fd =
            RawFd::try_from(r.u32()?).map_err(|_| Malformed("a descriptor number out of range"))?;
    }
    let clear_groups = r.bool()?;
    let switch_ids = r.bool()?;
    let max_processes = r.u32()?;
    let root = r.cstr()?;
    let n = r.count()?;
    let mut actions = Vec::with_capacity(n);
    for _ in 0..n {
        let action = r.action(0)?;
        let what = r.bytes()?.to_vec();
        actions.push(PlannedAction { action, what });
    }
    let loopback_up = r.bool()?;
    let last_cap = r.u32()?;
    let known = caps::all();
    let mut all_caps = Vec::new();
    for &i in r.bytes()? {
        let cap = known
            .iter()
            .find(|c| c.index() == i)
            .ok_or(Malformed("an unknown capability"))?;
        all_caps.push(*cap);
    }
    let builder = r.cstr()?;
    let mut lists = [Vec::new(), Vec::new()];
    for list in &mut lists {
        let n = r.count()?;
        for _ in 0..n {
            list.push(r.cstr()?);
        }
    }
    let [argv_c, envp_c] = lists;
    let staging_path = r.cstr()?;
    let build_uid = r.u32()?;
    let build_gid = r.u32()?;
    let hostname = r.cstr()?;
    let domainname = if r.bool()? { Some(r.cstr()?) } else { None };
    let umask = r.u32()?;
    let build_top = r.cstr()?;
    let cpus = if r.bool()? {
        let raw = r.bytes()?;
        if raw.len() != std::mem::size_of::<libc::cpu_set_t>() {
            return Err(Malformed("a CPU set of the wrong size"));
        }
        // SAFETY: cpu_set_t is a plain bit array, valid when zeroed; we write exactly its
        // size.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: as above; `raw` has that many bytes and does not overlap `set`.
        unsafe {
            std::ptr::copy_nonoverlapping(
                raw.as_ptr(),
                (&mut set as *mut libc::cpu_set_t).cast::<u8>(),
                raw.len(),
            )
        };
        Some(set)
    } else {
        None
    };
    let uname26 = r.bool()?;
    if !r.0.is_empty() {
        return Err(Malformed("bytes after the end"));
    }
    let [log_write, status_write, devnull, go_read, staging] = fds;
    Ok(Prepared {
        flags,
        clear_groups,
        switch_ids,
        max_processes,
        root,
        actions,
        loopback_up,
        all_caps,
        last_cap,
        builder,
        argv: super::child::pointers(&argv_c),
        envp: super::child::pointers(&envp_c),
        _argv: argv_c,
        _envp: envp_c,
        seccomp: super::seccomp::program(),
        log_write,
        status_write,
        devnull,
        go_read,
        staging_path,
        staging,
        build_uid,
        build_gid,
        hostname,
        domainname,
        umask,
        build_top,
        cpus,
        uname26,
    })
}

struct Writer(Vec<u8>);

impl Writer {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn bytes(&mut self, b: &[u8]) {
        self.u32(b.len() as u32);
        self.0.extend_from_slice(b);
    }
    fn cstr(&mut self, s: &CString) {
        self.bytes(s.as_bytes());
    }
    // `c_ulong` is `u64` here, `u32` on 32-bit targets.
    #[allow(clippy::useless_conversion)]
    fn flags(&mut self, f: MsFlags) {
        self.u64(u64::from(f.bits()));
    }
    fn opt<T>(&mut self, v: Option<&T>, f: impl FnOnce(&mut Self, &T)) {
        match v {
            None => self.u8(0),
            Some(v) => {
                self.u8(1);
                f(self, v)
            }
        }
    }
    fn actions(&mut self, list: &[Action]) {
        self.u32(list.len() as u32);
        for a in list {
            self.action(a);
        }
    }
    fn action(&mut self, a: &Action) {
        match a {
            Action::Mkdir { path, mode } => {
                self.u8(1);
                self.cstr(path);
                self.u32(*mode);
            }
            Action::Touch { path } => {
                self.u8(2);
                self.cstr(path);
            }
            Action::Link { target, path } => {
                self.u8(3);
                self.cstr(target);
                self.cstr(path);
            }
            Action::Unlink { path } => {
                self.u8(4);
                self.cstr(path);
            }
            Action::Symlink { target, path } => {
                self.u8(5);
                self.cstr(target);
                self.cstr(path);
            }
            Action::WriteFile { path, data } => {
                self.u8(6);
                self.cstr(path);
                self.bytes(data);
            }
            Action::Mount {
                source,
                target,
                fstype,
                flags,
                data,
                proc,
            } => {
                self.u8(7);
                self.cstr(source);
                self.cstr(target);
                self.cstr(fstype);
                self.flags(*flags);
                self.opt(data.as_ref(), |w, d| w.cstr(d));
                self.u8((*proc).into());
            }
            Action::Bind {
                source,
                target,
                flags,
            } => {
                self.u8(8);
                self.cstr(source);
                self.cstr(target);
                self.flags(*flags);
            }
            Action::BindFrom {
                source,
                target,
                fallback,
                flags,
            } => {
                self.u8(9);
                self.cstr(source);
                self.cstr(target);
                self.cstr(fallback);
                self.flags(*flags);
            }
            Action::Overlay {
                lower,
                empty,
                target,
            } => {
                self.u8(10);
                self.cstr(lower);
                self.cstr(empty);
                self.cstr(target);
            }
            Action::OverlayRw {
                upper,
                work,
                empty,
                target,
                flags,
                fallback,
            } => {
                self.u8(11);
                self.cstr(upper);
                self.cstr(work);
                self.cstr(empty);
                self.cstr(target);
                self.flags(*flags);
                self.actions(fallback);
            }
            Action::SharedOverlay {
                upper,
                work,
                lower,
                target,
                flags,
                binds,
                fallback,
            } => {
                self.u8(12);
                self.cstr(upper);
                self.cstr(work);
                self.cstr(lower);
                self.cstr(target);
                self.flags(*flags);
                self.u32(binds.len() as u32);
                for (a, b, c) in binds {
                    self.cstr(a);
                    self.cstr(b);
                    self.cstr(c);
                }
                self.actions(fallback);
            }
            Action::Chown { path, uid, gid } => {
                self.u8(13);
                self.cstr(path);
                self.u32(*uid);
                self.u32(*gid);
            }
            Action::Umount { path } => {
                self.u8(14);
                self.cstr(path);
            }
            Action::Rmdir { path } => {
                self.u8(15);
                self.cstr(path);
            }
            Action::EnterRoot { path } => {
                self.u8(16);
                self.cstr(path);
            }
        }
    }
}

struct Reader<'a>(&'a [u8]);

/// How deep fallback actions may nest (the planner makes one level).
const MAX_NESTING: u32 = 4;

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], Malformed> {
        if self.0.len() < n {
            return Err(Malformed("cut short"));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    fn u8(&mut self) -> Result<u8, Malformed> {
        Ok(self.take(1)?[0])
    }
    fn bool(&mut self) -> Result<bool, Malformed> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(Malformed("a flag that is neither 0 nor 1")),
        }
    }
    fn u32(&mut self) -> Result<u32, Malformed> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self) -> Result<u64, Malformed> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
    /// A count of items each at least one byte long: never more than the bytes left, so
    /// a bad count cannot make the reader reserve more than the message's size.
    fn count(&mut self) -> Result<usize, Malformed> {
        let n = self.u32()? as usize;
        if n > self.0.len() {
            return Err(Malformed("a count past the end"));
        }
        Ok(n)
    }
    fn bytes(&mut self) -> Result<&'a [u8], Malformed> {
        let n = self.u32()? as usize;
        self.take(n)
    }
    fn cstr(&mut self) -> Result<CString, Malformed> {
        CString::new(self.bytes()?).map_err(|_| Malformed("a NUL inside a C string"))
    }
    // `c_ulong` is `u64` here, `u32` on 32-bit targets.
    #[allow(clippy::useless_conversion, clippy::unnecessary_fallible_conversions)]
    fn flags(&mut self) -> Result<MsFlags, Malformed> {
        let bits = libc::c_ulong::try_from(self.u64()?)
            .map_err(|_| Malformed("mount flags out of range"))?;
        Ok(MsFlags::from_bits_retain(bits))
    }
    fn actions(&mut self, depth: u32) -> Result<Vec<Action>, Malformed> {
        if depth >= MAX_NESTING {
            return Err(Malformed("fallback actions nested too deep"));
        }
        let n = self.count()?;
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            v.push(self.action(depth + 1)?);
        }
        Ok(v)
    }
    fn action(&mut self, depth: u32) -> Result<Action, Malformed> {
        Ok(match self.u8()? {
            1 => Action::Mkdir {
                path: self.cstr()?,
                mode: self.u32()?,
            },
            2 => Action::Touch { path: self.cstr()? },
            3 => Action::Link {
                target: self.cstr()?,
                path: self.cstr()?,
            },
            4 => Action::Unlink { path: self.cstr()? },
            5 => Action::Symlink {
                target: self.cstr()?,
                path: self.cstr()?,
            },
            6 => Action::WriteFile {
                path: self.cstr()?,
                data: self.bytes()?.to_vec(),
            },
            7 => Action::Mount {
                source: self.cstr()?,
                target: self.cstr()?,
                fstype: self.cstr()?,
                flags: self.flags()?,
                data: if self.bool()? {
                    Some(self.cstr()?)
                } else {
                    None
                },
                proc: self.bool()?,
            },
            8 => Action::Bind {
                source: self.cstr()?,
                target: self.cstr()?,
                flags: self.flags()?,
            },
            9 => Action::BindFrom {
                source: self.cstr()?,
                target: self.cstr()?,
                fallback: self.cstr()?,
                flags: self.flags()?,
            },
            10 => Action::Overlay {
                lower: self.cstr()?,
                empty: self.cstr()?,
                target: self.cstr()?,
            },
            11 => Action::OverlayRw {
                upper: self.cstr()?,
                work: self.cstr()?,
                empty: self.cstr()?,
                target: self.cstr()?,
                flags: self.flags()?,
                fallback: self.actions(depth)?,
            },
            12 => {
                let upper = self.cstr()?;
                let work = self.cstr()?;
                let lower = self.cstr()?;
                let target = self.cstr()?;
                let flags = self.flags()?;
                let n = self.count()?;
                let mut binds = Vec::with_capacity(n);
                for _ in 0..n {
                    binds.push((self.cstr()?, self.cstr()?, self.cstr()?));
                }
                Action::SharedOverlay {
                    upper,
                    work,
                    lower,
                    target,
                    flags,
                    binds,
                    fallback: self.actions(depth)?,
                }
            }
            13 => Action::Chown {
                path: self.cstr()?,
                uid: self.u32()?,
                gid: self.u32()?,
            },
            14 => Action::Umount { path: self.cstr()? },
            15 => Action::Rmdir { path: self.cstr()? },
            16 => Action::EnterRoot { path: self.cstr()? },
            _ => return Err(Malformed("an unknown action")),
        })
    }
}

#[cfg(test)]
mod tests;
