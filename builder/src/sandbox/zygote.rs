//! The zygote: a small process, forked from rocmx at startup while it is still small and
//! single-threaded, that creates the sandboxes' inits for [`run`](super::run), and
//! keeps the next one ready.
//!
//! Owns: starting the zygote ([`start`]), its loop, the spare init's wait for its
//! sandbox, the messages between them and rocmx, and [`Init`] (how `run` signals and
//! waits for an init it may not be the parent of).
//!
//! Must not: decide or check anything about a sandbox (it forwards the bytes `run`
//! prepared, [`super::wire`], without reading them), or be needed: without a zygote
//! (a library caller, a kernel without pidfds, a zygote that died) `run` clones init
//! itself, as [`super::child::spawn_init`] describes.
//!
//! # Why
//!
//! Cloned from rocmx, init copies rocmx's page tables (tens of MB of evaluation
//! results), and until init exits every page any thread of rocmx writes is copied
//! first; creating the network namespace takes as long again (about 0.5 ms, measured).
//! Both were on each build's critical path. A zygote forked before the evaluation has
//! a few MB to copy, and it makes the next init (new user, mount, pid, uts, ipc and
//! network namespaces, waiting for its sandbox) while the current build runs.
//!
//! # Protocol
//!
//! One `SOCK_STREAM` Unix socket pair between rocmx and the zygote, used by one build
//! at a time (a mutex). A header alone, without bytes or descriptors, asks for a spare
//! ([`prepare`], no reply). Otherwise rocmx sends a *request* — `[len u32 LE][clone flags u64 LE]`
//! then `len` bytes of [`super::wire`], with the sandbox's five descriptors attached
//! (`SCM_RIGHTS`) — and reads a *reply*, `[i32 LE]`: init's pid (host view), with a
//! pidfd for it attached, or `-errno` of the `clone` that failed. The zygote forwards
//! the request unchanged to a spare init (made with the same flags, or made then) over
//! that init's own socket pair, replies, closes its copies of the descriptors and
//! makes the next spare (one for each set of flags seen: with and without a network
//! namespace). The zygote reaps inits automatically (`SIGCHLD` ignored): rocmx
//! signals init through the pidfd and learns of its exit by polling it.
//!
//! # Lifetime
//!
//! The zygote dies with the thread that started it (`PR_SET_PDEATHSIG`; rocmx starts it
//! from its main thread, which lives as long as the process), and a spare or init with
//! the zygote. It leaves rocmx's session (a Ctrl-C reaches rocmx, which then exits),
//! holds `/dev/null` as its standard descriptors and nothing else but its socket. An
//! error on the socket kills it; later builds clone init themselves.

use std::io::{IoSlice, IoSliceMut};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Mutex;

use nix::errno::Errno;
use nix::sys::socket::{
    recvmsg, sendmsg, socketpair, AddressFamily, ControlMessage, ControlMessageOwned, MsgFlags,
    SockFlag, SockType,
};
use nix::unistd::Pid;

use super::child::{self, Prepared};
use super::wire;

/// rocmx's end of the socket to the zygote, and the zygote's pid; `None` before
/// [`start`] or once the zygote is gone.
static LINK: Mutex<Option<Link>> = Mutex::new(None);

struct Link {
    sock: OwnedFd,
    pid: Pid,
}

/// The largest request accepted (a plan with tens of thousands of inputs is far below).
const MAX_REQUEST: usize = 256 << 20;

/// Starts the zygote, if the process is single-threaded (checked) and the kernel has
/// pidfds (5.3 and later); otherwise does nothing, and builds clone init themselves.
/// Call it first thing in `main`, before any thread starts: the zygote is a plain
/// `fork`, and allocates after it.
pub fn start() {
    if threads() != Some(1) {
        return;
    }
    let me = nix::unistd::getpid();
    // SAFETY: pidfd_open(2) with our own pid and no flags; the descriptor is closed below.
    let probe = unsafe { libc::syscall(libc::SYS_pidfd_open, me.as_raw(), 0u32) };
    if probe < 0 {
        return;
    }
    // SAFETY: a descriptor pidfd_open just returned to us.
    drop(unsafe { OwnedFd::from_raw_fd(probe as RawFd) });
    let Ok((ours, theirs)) = socketpair(
        AddressFamily::Unix,
        SockType::Stream,
        None,
        SockFlag::SOCK_CLOEXEC,
    ) else {
        return;
    };
    // SAFETY: the process is single-threaded (checked above), so the child may allocate
    // and take locks: nothing can be held by a thread that does not exist in it.
    match unsafe { nix::unistd::fork() } {
        Ok(nix::unistd::ForkResult::Child) => {
            drop(ours);
            serve(theirs, me)
        }
        Ok(nix::unistd::ForkResult::Parent { child }) => {
            drop(theirs);
            let mut link = LINK.lock().unwrap_or_else(|e| e.into_inner());
            *link = Some(Link {
                sock: ours,
                pid: child,
            });
        }
        Err(_) => {}
    }
}

/// The number of threads of this process (`/proc/self/status`).
fn threads() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("Threads:"))?;
    line["Threads:".len()..].trim().parse().ok()
}

/// The zygote's pid, while it serves (for tests that kill it).
pub fn pid() -> Option<i32> {
    let link = LINK.lock().unwrap_or_else(|e| e.into_inner());
    link.as_ref().map(|l| l.pid.as_raw())
}

/// Tells the zygote that a build is coming: unless it has one already, it makes an
/// init ready for an ordinary build (one without the host's network) while the caller
/// lays out the build, so that not even the first build waits for the namespaces.
/// Commands with nothing to build (a no-op rebuild) never ask, and pay only for the
/// zygote's fork.
pub fn prepare() {
    let mut link = LINK.lock().unwrap_or_else(|e| e.into_inner());
    let Some(l) = link.as_ref() else {
        return;
    };
    let flags = super::clone_flags(false).bits() as u64;
    if send_request(l.sock.as_fd(), flags, &[], &[]).is_err() {
        forget(&mut link);
    }
}

/// The sandbox's init, as `run` controls it: its own child (cloned by
/// [`child::spawn_init`]), or the zygote's, reached through a pidfd.
pub(super) struct Init {
    pub pid: Pid,
    pidfd: Option<OwnedFd>,
}

impl Init {
    pub fn child(pid: Pid) -> Init {
        Init { pid, pidfd: None }
    }

    /// Kills init, and with it the sandbox's pid namespace.
    pub fn kill(&self) {
        match &self.pidfd {
            Some(fd) => kill_through(fd.as_fd()),
            None => {
                let _ = nix::sys::signal::kill(self.pid, nix::sys::signal::Signal::SIGKILL);
            }
        }
    }

    /// Waits until init has exited (and, for our own child, reaps it).
    pub fn reap(&self) {
        match &self.pidfd {
            Some(fd) => loop {
                let mut pfd = [nix::poll::PollFd::new(
                    fd.as_fd(),
                    nix::poll::PollFlags::POLLIN,
                )];
                match nix::poll::poll(&mut pfd, nix::poll::PollTimeout::NONE) {
                    Err(Errno::EINTR) | Ok(0) => continue,
                    _ => break,
                }
            },
            None => while let Err(Errno::EINTR) = nix::sys::wait::waitpid(self.pid, None) {},
        }
    }
}

/// Sends SIGKILL to the process of the pidfd `fd` (gone already: nothing happens).
fn kill_through(fd: BorrowedFd<'_>) {
    // SAFETY: pidfd_send_signal(2) on a pidfd we own, no siginfo, no flags.
    unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            fd.as_raw_fd(),
            libc::SIGKILL,
            std::ptr::null::<libc::siginfo_t>(),
            0u32,
        )
    };
}

/// Why the zygote could not start an init.
pub(super) enum Failed {
    /// Its `clone` failed (the same errors as [`child::spawn_init`]'s).
    Clone(Errno),
    /// The exchange with it failed; the zygote is killed, and later builds clone init
    /// themselves.
    Link(std::io::Error),
}

/// Has the zygote start init for `p`; `None` if there is no zygote.
pub(super) fn spawn(p: &Prepared) -> Option<Result<Init, Failed>> {
    if LINK.lock().unwrap_or_else(|e| e.into_inner()).is_none() {
        return None;
    }
    let body = wire::encode(p);
    let fds = wire::fds(p);
    let mut link = LINK.lock().unwrap_or_else(|e| e.into_inner());
    let l = link.as_ref()?;
    let result = match send_request(l.sock.as_fd(), p.flags.bits() as u64, &body, &fds) {
        // Nothing reached the zygote (it has died): clone init ourselves, now and later.
        Err(Unsent::Nothing(_)) => {
            forget(&mut link);
            return None;
        }
        Err(Unsent::Part(e)) => Err(e),
        Ok(()) => recv_reply(l.sock.as_fd()),
    };
    let result = match result {
        Ok((v, Some(pidfd))) if v > 0 => Ok(Init {
            pid: Pid::from_raw(v),
            pidfd: Some(pidfd),
        }),
        Ok((v, _)) if v < 0 => Err(Failed::Clone(Errno::from_raw(-v))),
        Ok(_) => Err(Failed::Link(std::io::Error::other(
            "the zygote's reply has no pidfd",
        ))),
        Err(e) => Err(Failed::Link(e.into())),
    };
    if let Err(Failed::Link(_)) = &result {
        // Whatever it started dies with it (its inits' parent-death signal), and such an
        // init waits for a go-ahead that never comes.
        forget(&mut link);
    }
    Some(result)
}

/// Kills the zygote (if it still lives), reaps it and forgets it.
fn forget(link: &mut Option<Link>) {
    if let Some(l) = link.take() {
        let _ = nix::sys::signal::kill(l.pid, nix::sys::signal::Signal::SIGKILL);
        while let Err(Errno::EINTR) = nix::sys::wait::waitpid(l.pid, None) {}
    }
}

/// How much of a request was sent when sending failed.
enum Unsent {
    /// Nothing: the other end never saw it.
    Nothing(Errno),
    /// Part of it.
    Part(Errno),
}

/// A request as received: the clone flags, the bytes, the descriptors.
struct Request {
    flags: u64,
    body: Vec<u8>,
    fds: Vec<OwnedFd>,
}

fn send_request(
    sock: BorrowedFd<'_>,
    flags: u64,
    body: &[u8],
    fds: &[RawFd],
) -> Result<(), Unsent> {
    let mut header = [0u8; 12];
    header[..4].copy_from_slice(&(body.len() as u32).to_le_bytes());
    header[4..].copy_from_slice(&flags.to_le_bytes());
    let iov = [IoSlice::new(&header), IoSlice::new(body)];
    let rights = [ControlMessage::ScmRights(fds)];
    let cmsg: &[ControlMessage<'_>] = if fds.is_empty() { &[] } else { &rights };
    let sent = loop {
        match sendmsg::<()>(sock.as_raw_fd(), &iov, cmsg, MsgFlags::MSG_NOSIGNAL, None) {
            Err(Errno::EINTR) => continue,
            Err(e) => return Err(Unsent::Nothing(e)),
            Ok(n) => break n,
        }
    };
    // A stream socket may take part of a large message; the rest goes without the
    // descriptors, which travelled with the first byte.
    let mut rest = sent;
    for part in [&header[..], body] {
        if rest >= part.len() {
            rest -= part.len();
            continue;
        }
        write_all(sock, &part[rest..]).map_err(Unsent::Part)?;
        rest = 0;
    }
    Ok(())
}

fn write_all(sock: BorrowedFd<'_>, mut data: &[u8]) -> Result<(), Errno> {
    while !data.is_empty() {
        match nix::sys::socket::send(sock.as_raw_fd(), data, MsgFlags::MSG_NOSIGNAL) {
            Ok(n) => data = &data[n..],
            Err(Errno::EINTR) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn read_exact(sock: BorrowedFd<'_>, mut buf: &mut [u8]) -> Result<(), Errno> {
    while !buf.is_empty() {
        match nix::unistd::read(sock, buf) {
            Ok(0) => return Err(Errno::EPIPE),
            Ok(n) => buf = &mut buf[n..],
            Err(Errno::EINTR) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Reads `head` from the socket, with the descriptors that came with its first byte.
/// `Ok(None)`: the other end closed before sending anything.
fn recv_head(sock: BorrowedFd<'_>, head: &mut [u8]) -> Result<Option<Vec<OwnedFd>>, Errno> {
    let mut space = nix::cmsg_space!([RawFd; wire::FDS]);
    let (n, fds) = loop {
        let mut iov = [IoSliceMut::new(head)];
        match recvmsg::<()>(
            sock.as_raw_fd(),
            &mut iov,
            Some(&mut space),
            MsgFlags::MSG_CMSG_CLOEXEC,
        ) {
            Err(Errno::EINTR) => continue,
            Err(e) => return Err(e),
            Ok(msg) => {
                let mut fds = Vec::new();
                for c in msg.cmsgs()? {
                    if let ControlMessageOwned::ScmRights(list) = c {
                        // SAFETY: descriptors the kernel just installed for us.
                        fds.extend(
                            list.into_iter()
                                .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }),
                        );
                    }
                }
                if msg.flags.contains(MsgFlags::MSG_CTRUNC) {
                    return Err(Errno::EMSGSIZE);
                }
                break (msg.bytes, fds);
            }
        }
    };
    if n == 0 {
        return Ok(None);
    }
    read_exact(sock, &mut head[n..])?;
    Ok(Some(fds))
}

fn recv_request(sock: BorrowedFd<'_>) -> Result<Option<Request>, Errno> {
    let mut header = [0u8; 12];
    let Some(fds) = recv_head(sock, &mut header)? else {
        return Ok(None);
    };
    let len = u32::from_le_bytes([header[0], header[1], header[2], header[3]]) as usize;
    let mut flags = [0u8; 8];
    flags.copy_from_slice(&header[4..]);
    // A sandbox comes with its descriptors; a request without any (and without bytes)
    // asks for a spare.
    let prepare = len == 0 && fds.is_empty();
    if len > MAX_REQUEST || !(prepare || fds.len() == wire::FDS) {
        return Err(Errno::EBADMSG);
    }
    let mut body = vec![0u8; len];
    read_exact(sock, &mut body)?;
    Ok(Some(Request {
        flags: u64::from_le_bytes(flags),
        body,
        fds,
    }))
}

fn send_reply(
    sock: BorrowedFd<'_>,
    value: i32,
    pidfd: Option<BorrowedFd<'_>>,
) -> Result<(), Errno> {
    let bytes = value.to_le_bytes();
    let iov = [IoSlice::new(&bytes)];
    let raw = pidfd.map(|f| [f.as_raw_fd()]);
    let cmsg: Vec<ControlMessage<'_>> = raw
        .as_ref()
        .map(|r| ControlMessage::ScmRights(r))
        .into_iter()
        .collect();
    let sent = loop {
        match sendmsg::<()>(sock.as_raw_fd(), &iov, &cmsg, MsgFlags::MSG_NOSIGNAL, None) {
            Err(Errno::EINTR) => continue,
            r => break r?,
        }
    };
    write_all(sock, &bytes[sent..])
}

fn recv_reply(sock: BorrowedFd<'_>) -> Result<(i32, Option<OwnedFd>), Errno> {
    let mut bytes = [0u8; 4];
    let Some(mut fds) = recv_head(sock, &mut bytes)? else {
        return Err(Errno::EPIPE);
    };
    if fds.len() > 1 {
        return Err(Errno::EBADMSG);
    }
    Ok((i32::from_le_bytes(bytes), fds.pop()))
}

// --- the zygote ------------------------------------------------------------------------

/// An init made ahead of its sandbox, waiting on its socket for the request.
struct Spare {
    flags: u64,
    pid: Pid,
    pidfd: OwnedFd,
    sock: OwnedFd,
    /// Given a sandbox (rocmx has its pidfd now): not to be killed when dropped.
    handed_over: bool,
}

impl Drop for Spare {
    fn drop(&mut self) {
        // An unused spare: its sandbox never came. (A used one has its request, and
        // closing our end of its socket changes nothing for it.)
        if !self.handed_over {
            kill_through(self.pidfd.as_fd());
        }
    }
}

/// The zygote's loop; never returns.
fn serve(sock: OwnedFd, parent: Pid) -> ! {
    // SAFETY: integer-only prctl: die with the thread that forked us.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) };
    if nix::unistd::getppid() != parent {
        child::exit(0);
    }
    let _ = nix::unistd::setsid();
    // SAFETY: setting dispositions with integer arguments: inits are reaped as they
    // exit (rocmx waits on their pidfds), and nothing else is caught here.
    unsafe {
        libc::signal(libc::SIGCHLD, libc::SIG_IGN);
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT] {
            libc::signal(sig, libc::SIG_DFL);
        }
    }
    quiet_standard_descriptors();
    child::close_all_but(&[sock.as_raw_fd()]);
    // One spare per set of clone flags used so far (with and without a network
    // namespace: at most two); the first for an ordinary build, made while rocmx
    // evaluates.
    let mut spares: Vec<Spare> = Vec::new();
    loop {
        let req = match recv_request(sock.as_fd()) {
            Ok(Some(r)) => r,
            _ => child::exit(0),
        };
        if req.fds.is_empty() {
            // [`prepare`]: builds are coming; no reply.
            if !spares.iter().any(|s| s.flags == req.flags) {
                if let Ok(s) = make_spare(req.flags) {
                    spares.push(s);
                }
            }
            continue;
        }
        let (value, used) = match hand_over(&mut spares, &req) {
            Ok(s) => (s.pid.as_raw(), Some(s)),
            Err(e) => (-(e as i32), None),
        };
        let pidfd = used.as_ref().map(|s| s.pidfd.as_fd());
        if send_reply(sock.as_fd(), value, pidfd).is_err() {
            child::exit(0);
        }
        if let Some(mut s) = used {
            s.handed_over = true;
        }
        let flags = req.flags;
        drop(req);
        if !spares.iter().any(|s| s.flags == flags) {
            if let Ok(s) = make_spare(flags) {
                spares.push(s);
            }
        }
    }
}

/// Gives the request to the spare made with the same flags (or to a new init), and
/// returns that init.
fn hand_over(spares: &mut Vec<Spare>, req: &Request) -> Result<Spare, Errno> {
    let raw: Vec<RawFd> = req.fds.iter().map(|f| f.as_raw_fd()).collect();
    let fresh = || make_spare(req.flags);
    let first = match spares.iter().position(|s| s.flags == req.flags) {
        Some(i) => spares.swap_remove(i),
        None => fresh()?,
    };
    // A spare that died meanwhile (killed from outside) refuses the request: once more
    // with a new one.
    match send_request(first.sock.as_fd(), req.flags, &req.body, &raw) {
        Ok(()) => Ok(first),
        Err(_) => {
            let again = fresh()?;
            match send_request(again.sock.as_fd(), req.flags, &req.body, &raw) {
                Ok(()) => Ok(again),
                Err(Unsent::Nothing(e) | Unsent::Part(e)) => Err(e),
            }
        }
    }
}

/// Clones an init into new namespaces (`flags`) that waits for its request.
fn make_spare(flags: u64) -> Result<Spare, Errno> {
    let (ours, theirs) = socketpair(
        AddressFamily::Unix,
        SockType::Stream,
        None,
        SockFlag::SOCK_CLOEXEC,
    )?;
    let mut pidfd: libc::c_int = -1;
    let clone_flags = flags as libc::c_ulong
        | libc::CLONE_PIDFD as libc::c_ulong
        | libc::SIGCHLD as libc::c_ulong;
    // SAFETY: clone(2) without CLONE_VM and without a new stack is fork(2) plus namespace
    // flags; CLONE_PIDFD stores the pidfd at the third argument (`parent_tid` on every
    // architecture), a c_int we own; the other pointers are null. The zygote is
    // single-threaded, so the child may allocate.
    let r = unsafe {
        libc::syscall(
            libc::SYS_clone,
            clone_flags,
            0usize,
            &mut pidfd as *mut libc::c_int,
            0usize,
            0usize,
        )
    };
    match r {
        -1 => Err(Errno::last()),
        0 => {
            drop(ours);
            spare_main(theirs)
        }
        pid => Ok(Spare {
            flags,
            pid: Pid::from_raw(pid as libc::pid_t),
            // SAFETY: the pidfd clone(2) just stored for us.
            pidfd: unsafe { OwnedFd::from_raw_fd(pidfd) },
            sock: ours,
            handed_over: false,
        }),
    }
}

/// A spare init: waits for its sandbox, then is its init ([`child::init`]).
fn spare_main(sock: OwnedFd) -> ! {
    // SAFETY: integer-only calls. Init reaps its own children (the zygote ignores
    // SIGCHLD, which a child inherits).
    unsafe {
        libc::signal(libc::SIGCHLD, libc::SIG_DFL);
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
    }
    child::close_all_but(&[sock.as_raw_fd()]);
    // The zygote gone: end of file.
    let req = match recv_request(sock.as_fd()) {
        Ok(Some(r)) => r,
        _ => child::exit(1),
    };
    let mut got = [0 as RawFd; wire::FDS];
    for (slot, fd) in got.iter_mut().zip(req.fds) {
        *slot = std::os::fd::IntoRawFd::into_raw_fd(fd);
    }
    let p = match wire::decode(&req.body) {
        Ok(p) => p,
        Err(wire::Malformed(why)) => child::fail(
            got[1],
            super::protocol::Step::Unshare,
            Errno::EBADMSG,
            &[b"reading the sandbox from the zygote: ", why.as_bytes()],
        ),
    };
    drop(req.body);
    drop(sock);
    if let Err(e) = place(got, wire::fds(&p)) {
        child::fail(
            got[1],
            super::protocol::Step::Unshare,
            e,
            &[b"numbering the sandbox's descriptors"],
        );
    }
    child::init(&p)
}

/// Moves the descriptors `got` to the numbers `want` (those of the sender, which the
/// plan names), closing the old numbers. Nothing else is open but 0, 1 and 2.
fn place(got: [RawFd; wire::FDS], want: [RawFd; wire::FDS]) -> Result<(), Errno> {
    // First above every wanted number, so that no move below replaces a descriptor not
    // yet moved.
    let floor = want.iter().copied().max().unwrap_or(0).max(2) + 1;
    let mut high = [0 as RawFd; wire::FDS];
    for (h, &g) in high.iter_mut().zip(&got) {
        // SAFETY: fcntl(F_DUPFD_CLOEXEC) on a descriptor we own.
        *h = Errno::result(unsafe { libc::fcntl(g, libc::F_DUPFD_CLOEXEC, floor) })?;
        child::close(g);
    }
    for (&h, &w) in high.iter().zip(&want) {
        // SAFETY: dup3 of a descriptor we own onto a number we may replace.
        Errno::result(unsafe { libc::dup3(h, w, libc::O_CLOEXEC) })?;
        child::close(h);
    }
    Ok(())
}

/// Points descriptors 0, 1 and 2 at `/dev/null`: the zygote must not hold rocmx's
/// terminal or pipes open.
fn quiet_standard_descriptors() {
    if let Ok(null) = nix::fcntl::open(
        c"/dev/null",
        nix::fcntl::OFlag::O_RDWR,
        nix::sys::stat::Mode::empty(),
    ) {
        for fd in 0..3 {
            // SAFETY: dup2 of a descriptor we own onto a standard descriptor number.
            unsafe { libc::dup2(null.as_raw_fd(), fd) };
        }
        if null.as_raw_fd() > 2 {
            drop(null);
        } else {
            std::mem::forget(null);
        }
    }
}
