//! Code that runs in the sandbox's processes, after they are cloned from the caller.
//!
//! Process tree (host view):
//!
//! ```text
//! rocmx (parent) ── clone(CLONE_NEWUSER|CLONE_NEWNS|CLONE_NEWPID|CLONE_NEWUTS|
//!   or its zygote         CLONE_NEWIPC[|CLONE_NEWNET]) ─▶ init (pid 1 of the new pid ns)
//!     rocmx writes init's id maps and lets it go on; init makes the mounts,
//!     pivot_root, hostname, drops capabilities
//!        └── clone(CLONE_VM|CLONE_VFORK) ─▶ builder (pid 2): execve
//! ```
//!
//! The builder shares init's memory until its `execve`, like `posix_spawn` (init is
//! single-threaded and suspended meanwhile).
//!
//! Cloned by rocmx itself ([`spawn_init`]), init is a copy of a multi-threaded process,
//! made by a raw `clone`, which (unlike glibc's `fork`) runs no atfork handlers and
//! resets none of glibc's locks: everything here sticks to raw syscalls on data the
//! parent prepared ([`Prepared`]): no allocation, no locks, no `std::io`. The one
//! exception is the `caps` crate, whose *error* paths format a `String` (its success
//! paths are plain prctl/capget/capset calls). (An init made by the zygote, a fork of a
//! single-threaded process, decodes its `Prepared` before it calls [`init`]; from there
//! on it runs the same code.) Failures are reported to the parent as records on the
//! status pipe ([`super::protocol`]) and end the process with `_exit`.

use std::ffi::{CStr, CString};
use std::os::fd::{BorrowedFd, RawFd};

use nix::errno::Errno;
use nix::fcntl::{open, OFlag};
use nix::mount::{mount, umount2, MntFlags, MsFlags};
use nix::sched::CloneFlags;
use nix::sys::stat::Mode;
use nix::sys::wait::{waitpid, WaitStatus};
use nix::unistd::{chdir, pivot_root, setsid, Pid};

mod mounts;
mod reap;

use mounts::run_action;

use super::plan::{Action, PlannedAction};
use super::protocol::{RecordBuf, Step, TAG_ERROR, TAG_EXIT, TAG_SIGNAL};

/// Everything the sandbox processes need, prepared before `clone`.
pub(super) struct Prepared {
    pub flags: CloneFlags,
    /// Host root: drop supplementary groups in init (the parent then leaves `setgroups`
    /// allowed in the new user namespace; an unprivileged caller cannot drop them).
    pub clear_groups: bool,
    /// Host root with [`super::HostIds`]: init assembles the root as inside uid 0 (host
    /// root's files are its own), then becomes the build user 1000/100, an unprivileged
    /// host id, for good; the builder never has host uid 0.
    pub switch_ids: bool,
    /// `RLIMIT_NPROC` of the build user, and the process count at which init kills the
    /// build (0: no limit).
    pub max_processes: u32,
    /// Host path the new root is mounted on.
    pub root: CString,
    pub actions: Vec<PlannedAction>,
    /// Bring `lo` up (only in a new network namespace).
    pub loopback_up: bool,
    /// Capabilities known to the caps crate, and the kernel's last capability number.
    pub all_caps: Vec<caps::Capability>,
    pub last_cap: u32,
    pub builder: CString,
    /// NULL-terminated pointer arrays into `_argv` / `_envp`.
    pub argv: Vec<*const libc::c_char>,
    pub envp: Vec<*const libc::c_char>,
    pub _argv: Vec<CString>,
    pub _envp: Vec<CString>,
    /// The seccomp filter against setuid/setgid files.
    pub seccomp: Vec<super::seccomp::SockFilter>,
    /// The pipes' write ends (every other inherited descriptor is closed).
    pub log_write: RawFd,
    pub status_write: RawFd,
    pub devnull: RawFd,
    /// Read end of the go-ahead pipe: one byte once the parent has written the id maps,
    /// end of file if the parent died first.
    pub go_read: RawFd,
    /// The staging directory, which the actions reach through `/proc/self/fd/<staging>`
    /// once the root's tmpfs hides it: init opens it again under that number, in its own
    /// mount namespace (a bind's source must be a mount of the caller's namespace).
    pub staging_path: CString,
    pub staging: RawFd,
    /// The build user's inside ids (1000/100 by default; see [`super::Variant`]).
    pub build_uid: u32,
    pub build_gid: u32,
    pub hostname: CString,
    /// The NIS domain name, when it is to be set.
    pub domainname: Option<CString>,
    pub umask: u32,
    /// The build directory's inside path (the builder's working directory).
    pub build_top: CString,
    /// The CPUs the builder is bound to (`None`: those it inherits).
    pub cpus: Option<libc::cpu_set_t>,
    /// Start the builder with the `UNAME26` personality.
    pub uname26: bool,
}

/// The NULL-terminated array of pointers to `strings` that `execve` takes (`argv`,
/// `envp`); it points into `strings`, which must outlive it.
pub(super) fn pointers(strings: &[CString]) -> Vec<*const libc::c_char> {
    let mut p: Vec<*const libc::c_char> = strings.iter().map(|c| c.as_ptr()).collect();
    p.push(std::ptr::null());
    p
}

/// The set of the first `n` CPUs this process may run on (all of them when it may
/// run on fewer).
pub(super) fn first_cpus(n: u32) -> libc::cpu_set_t {
    // SAFETY: cpu_set_t is a plain bit array, valid when zeroed.
    let mut have: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: sched_getaffinity writes at most the size it is given into `have`.
    let got =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut have) };
    // SAFETY: as for `have`.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let mut left = n;
    for cpu in 0..libc::CPU_SETSIZE as usize {
        if left == 0 {
            break;
        }
        // SAFETY: CPU_ISSET reads a set we own at an index below CPU_SETSIZE.
        let usable = got != 0 || unsafe { libc::CPU_ISSET(cpu, &have) };
        if usable {
            // SAFETY: CPU_SET writes a set we own at an index below CPU_SETSIZE.
            unsafe { libc::CPU_SET(cpu, &mut set) };
            left -= 1;
        }
    }
    set
}

/// Writes one record to the status pipe (errors ignored: nobody left to tell).
fn send(fd: RawFd, rec: &mut RecordBuf) {
    // SAFETY: `fd` is the status pipe's write end, open for the life of this process.
    let fd = unsafe { BorrowedFd::borrow_raw(fd) };
    let _ = nix::unistd::write(fd, rec.bytes());
}

/// Reports a failed step and exits.
pub(super) fn fail(fd: RawFd, step: Step, err: Errno, what: &[&[u8]]) -> ! {
    let mut rec = RecordBuf::new(TAG_ERROR, step as u8, err as i32);
    for part in what {
        rec.push(part);
    }
    send(fd, &mut rec);
    exit(1)
}

pub(super) fn exit(code: i32) -> ! {
    // SAFETY: `_exit` is async-signal-safe and skips atexit handlers and stdio flushing,
    // which belong to the parent's copy of the process.
    unsafe { libc::_exit(code) }
}

pub(super) fn close(fd: RawFd) {
    // SAFETY: closing a descriptor this process owns (a copy inherited through clone).
    unsafe { libc::close(fd) };
}

/// Closes every descriptor from 3 up, except those in `keep` (sorted ascending).
///
/// Init never calls `execve`, so `O_CLOEXEC` does not protect it: without this it would
/// hold, for the whole build, every descriptor the (multi-threaded) parent had open at
/// `clone` time — among them files other threads were writing, which then could not be
/// executed (`ETXTBSY`). At most 7 descriptors are kept.
pub(super) fn close_all_but(keep: &[RawFd]) {
    let mut from: u32 = 3;
    let mut ranges = [(0u32, 0u32); 8];
    let mut n = 0;
    for &k in keep {
        let k = k as u32;
        if k >= from {
            if k > from {
                ranges[n] = (from, k - 1);
                n += 1;
            }
            from = k + 1;
        }
    }
    ranges[n] = (from, u32::MAX);
    n += 1;
    for &(lo, hi) in &ranges[..n] {
        // SAFETY: close_range(2) on descriptor numbers only.
        let r = unsafe { libc::syscall(libc::SYS_close_range, lo, hi, 0u32) };
        if r != 0 {
            for fd in lo..=hi.min(4096) {
                close(fd as RawFd);
            }
        }
    }
}

/// Creates the sandbox's init, straight in the new namespaces (`p.flags`): a fork-like
/// `clone` (the child gets its own copy of this process's memory and continues on its
/// copy of the stack). The child runs [`init`] and never returns here.
pub(super) fn spawn_init(p: &Prepared) -> Result<Pid, Errno> {
    let flags = p.flags.bits() as libc::c_ulong | libc::SIGCHLD as libc::c_ulong;
    // SAFETY: clone(2) without CLONE_VM and without a new stack is fork(2) plus namespace
    // flags; every pointer argument (stack, parent/child tid, tls) is null, so their order,
    // which differs between architectures, does not matter. The child only runs `init`,
    // which keeps to raw syscalls on the prepared data (see the module notes).
    let r = unsafe { libc::syscall(libc::SYS_clone, flags, 0usize, 0usize, 0usize, 0usize) };
    match r {
        -1 => Err(Errno::last()),
        0 => init(p),
        pid => Ok(Pid::from_raw(pid as libc::pid_t)),
    }
}

/// Brings the loopback interface of the new network namespace up.
fn loopback_up() -> Result<(), Errno> {
    // SAFETY: plain socket(2) call; the descriptor is closed below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    Errno::result(fd)?;
    // SAFETY: `ifreq` is plain old data, valid when zeroed.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (i, b) in b"lo".iter().enumerate() {
        ifr.ifr_name[i] = *b as libc::c_char;
    }
    // SAFETY: SIOCGIFFLAGS/SIOCSIFFLAGS read and write the `ifreq` we own.
    let r = unsafe { libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut ifr) };
    let r = if r == 0 {
        // SAFETY: after SIOCGIFFLAGS the flags member of the union is the active one.
        unsafe { ifr.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short };
        // SAFETY: as above.
        unsafe { libc::ioctl(fd, libc::SIOCSIFFLAGS, &ifr) }
    } else {
        r
    };
    let res = Errno::result(r).map(drop);
    close(fd);
    res
}

/// Drops every capability from every set, sets `NO_NEW_PRIVS` and installs the seccomp
/// filter.
fn drop_privileges(p: &Prepared) -> Result<(), (&'static [u8], Errno)> {
    use caps::CapSet;
    let errno = || Errno::last();
    caps::clear(None, CapSet::Ambient)
        .map_err(|_| (&b"clearing the ambient capabilities"[..], errno()))?;
    // The bounding set needs CAP_SETPCAP, which we hold in the new user namespace.
    for cap in &p.all_caps {
        caps::drop(None, CapSet::Bounding, *cap)
            .map_err(|_| (&b"dropping the bounding capabilities"[..], errno()))?;
    }
    // Capabilities newer than the caps crate, up to the kernel's last one.
    for n in 41..=p.last_cap {
        // SAFETY: prctl(PR_CAPBSET_DROP, n) takes an integer only.
        let r = unsafe { libc::prctl(libc::PR_CAPBSET_DROP, n as libc::c_ulong, 0, 0, 0) };
        if r != 0 && Errno::last() != Errno::EINVAL {
            return Err((b"dropping the bounding capabilities", Errno::last()));
        }
    }
    caps::clear(None, CapSet::Inheritable)
        .map_err(|_| (&b"clearing the inheritable capabilities"[..], errno()))?;
    if p.switch_ids {
        // From inside uid 0 (host root) to the build user. The raw syscalls: glibc's
        // wrappers would try to broadcast to threads that do not exist here. Leaving uid
        // 0 clears the permitted and effective sets (the bounding set is gone already).
        // SAFETY: integer-only syscalls.
        let (u, g) = (p.build_uid, p.build_gid);
        let r = unsafe { libc::syscall(libc::SYS_setresgid, g, g, g) };
        Errno::result(r).map_err(|e| (&b"becoming the build group"[..], e))?;
        // SAFETY: as above.
        let r = unsafe { libc::syscall(libc::SYS_setresuid, u, u, u) };
        Errno::result(r).map_err(|e| (&b"becoming the build user"[..], e))?;
        // Changing uids resets dumpability to fs.suid_dumpable; keep init undumpable.
        // SAFETY: integer-only prctl.
        unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
        // It also clears the parent-death signal: without it again, a build would go
        // on running when rocmx is killed (init is in its own session, so a Ctrl-C
        // does not reach it either).
        // SAFETY: integer-only prctl.
        unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) };
        // The parent may have died before that: then its end of the log pipe is
        // closed, which poll reports on our end as POLLERR.
        let mut pfd = libc::pollfd {
            fd: p.log_write,
            events: 0,
            revents: 0,
        };
        // SAFETY: poll on one pollfd we own, without waiting.
        unsafe { libc::poll(&mut pfd, 1, 0) };
        if pfd.revents & libc::POLLERR != 0 {
            exit(1);
        }
    }
    if p.max_processes > 0 {
        let lim = libc::rlimit {
            rlim_cur: libc::rlim_t::from(p.max_processes),
            rlim_max: libc::rlim_t::from(p.max_processes),
        };
        // SAFETY: setrlimit with a valid, initialised struct.
        let r = unsafe { libc::setrlimit(libc::RLIMIT_NPROC, &lim) };
        Errno::result(r).map_err(|e| (&b"setting RLIMIT_NPROC"[..], e))?;
    }
    caps::clear(None, CapSet::Permitted).map_err(|_| {
        (
            &b"clearing the permitted and effective capabilities"[..],
            errno(),
        )
    })?;
    // SAFETY: prctl(PR_SET_NO_NEW_PRIVS, 1) takes integers only.
    let r = unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) };
    Errno::result(r).map_err(|e| (&b"setting PR_SET_NO_NEW_PRIVS"[..], e))?;
    super::seccomp::install(&p.seccomp).map_err(|e| (&b"installing the seccomp filter"[..], e))?;
    Ok(())
}

/// pid 1 of the new pid namespace: assembles the root, becomes the build user's init.
pub(super) fn init(p: &Prepared) -> ! {
    let mut keep = [p.log_write, p.status_write, p.devnull, p.go_read, p.staging];
    keep.sort_unstable();
    close_all_but(&keep);
    let st = p.status_write;
    // SAFETY: integer-only prctl. Dying with the parent (thread) takes the pid ns down.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) };
    let _ = setsid();
    // Wait for the parent to write our id maps. End of file instead of the byte: the
    // parent died, perhaps before the death signal was armed.
    let mut go = [0u8; 1];
    loop {
        // SAFETY: `go_read` is the go-ahead pipe's read end, open in this process.
        match nix::unistd::read(unsafe { BorrowedFd::borrow_raw(p.go_read) }, &mut go) {
            Ok(1) => break,
            Err(Errno::EINTR) => continue,
            _ => exit(1),
        }
    }
    close(p.go_read);
    if p.clear_groups {
        // Host root: no supplementary groups in the sandbox (they would show as nogroup).
        // The parent left `setgroups` allowed for this; failure (a container that denies
        // it) leaves them, as an unprivileged caller's. The raw syscall: glibc's wrapper
        // would try to broadcast to threads that do not exist here.
        // SAFETY: setgroups(0, NULL) passes no memory.
        unsafe { libc::syscall(libc::SYS_setgroups, 0usize, std::ptr::null::<libc::gid_t>()) };
    }
    // A fresh anonymous session keyring: the caller's keys are not the build's. (keyctl
    // is denied to the builder by the seccomp filter as well; a kernel without keys
    // support or a container that denies keyctl leaves nothing to reach anyway.)
    // SAFETY: keyctl(KEYCTL_JOIN_SESSION_KEYRING, NULL) passes no memory.
    unsafe {
        libc::syscall(
            libc::SYS_keyctl,
            1, /* KEYCTL_JOIN_SESSION_KEYRING */
            0usize,
        )
    };
    // SAFETY: integer-only prctl. Not being dumpable keeps the builder (same uid) out of
    // our memory and environment. (Only now: until the parent had written our id maps,
    // it needed our /proc files, which a non-dumpable process's owner cannot open.)
    unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
    if let Err(e) = mount(
        None::<&CStr>,
        c"/",
        None::<&CStr>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&CStr>,
    ) {
        fail(
            st,
            Step::MountPrivate,
            e,
            &[b"making / private in the new mount namespace"],
        );
    }
    let reopened = open(
        p.staging_path.as_c_str(),
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .and_then(|fd| {
        use std::os::fd::AsRawFd;
        // SAFETY: dup3 onto the number reserved for it (our copy of the parent's
        // descriptor, closed atomically by the dup); `fd` is closed when dropped.
        Errno::result(unsafe { libc::dup3(fd.as_raw_fd(), p.staging, libc::O_CLOEXEC) })
    });
    if let Err(e) = reopened {
        fail(
            st,
            Step::Mount,
            e,
            &[b"opening ", p.staging_path.as_bytes()],
        );
    }
    for pa in &p.actions {
        if let Err(e) = run_action(&pa.action) {
            let step = match pa.action {
                Action::Mount { proc: true, .. } => Step::MountProc,
                _ => Step::Mount,
            };
            fail(st, step, e, &[&pa.what]);
        }
    }
    // pivot_root(".", "."): the old root ends up stacked on the new one and is detached.
    if let Err(e) = chdir(p.root.as_c_str()) {
        fail(st, Step::PivotRoot, e, &[b"entering the new root"]);
    }
    if let Err(e) = pivot_root(c".", c".") {
        fail(st, Step::PivotRoot, e, &[b"pivot_root into the new root"]);
    }
    if let Err(e) = umount2(c".", MntFlags::MNT_DETACH) {
        fail(st, Step::PivotRoot, e, &[b"detaching the old root"]);
    }
    if let Err(e) = chdir(c"/") {
        fail(st, Step::PivotRoot, e, &[b"entering /"]);
    }
    if let Err(e) = mount(
        None::<&CStr>,
        c"/",
        None::<&CStr>,
        MsFlags::MS_REMOUNT
            | MsFlags::MS_BIND
            | MsFlags::MS_RDONLY
            | MsFlags::MS_NOSUID
            | MsFlags::MS_NODEV,
        None::<&CStr>,
    ) {
        fail(st, Step::Mount, e, &[b"remounting / read-only"]);
    }
    if let Err(e) = chdir(p.build_top.as_c_str()) {
        fail(st, Step::Mount, e, &[b"entering ", p.build_top.as_bytes()]);
    }
    // SAFETY: sethostname/setdomainname with a pointer and length of C strings we own.
    let r = unsafe { libc::sethostname(p.hostname.as_ptr(), p.hostname.as_bytes().len()) };
    if let Err(e) = Errno::result(r) {
        fail(st, Step::Identity, e, &[b"setting the hostname"]);
    }
    if let Some(d) = &p.domainname {
        // SAFETY: as above.
        let r = unsafe { libc::setdomainname(d.as_ptr(), d.as_bytes().len()) };
        if let Err(e) = Errno::result(r) {
            fail(st, Step::Identity, e, &[b"setting the domain name"]);
        }
    }
    if p.loopback_up {
        if let Err(e) = loopback_up() {
            fail(
                st,
                Step::Identity,
                e,
                &[b"bringing up the loopback interface"],
            );
        }
    }
    if let Err((what, e)) = drop_privileges(p) {
        fail(st, Step::Identity, e, &[what]);
    }
    // With a process limit: count the processes of the pid namespace in /proc now and
    // then while reaping (SIGCHLD blocked, so it can be waited for with a timeout).
    let proc_fd = if p.max_processes > 0 {
        match open(
            c"/proc",
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        ) {
            Ok(fd) => {
                // SAFETY: sigset operations on a set we own; blocking SIGCHLD in init only
                // (the builder resets its mask).
                unsafe {
                    let mut set: libc::sigset_t = std::mem::zeroed();
                    libc::sigemptyset(&mut set);
                    libc::sigaddset(&mut set, libc::SIGCHLD);
                    libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
                }
                Some(fd)
            }
            Err(e) => fail(st, Step::Mount, e, &[b"opening /proc"]),
        }
    } else {
        None
    };
    let child = match spawn_builder(p) {
        Ok(pid) => pid,
        Err(e) => fail(st, Step::Fork, e, &[b"starting the builder"]),
    };
    close(p.log_write);
    close(p.devnull);
    if let Some(fd) = proc_fd {
        reap::reap_counting(p, child, fd);
    }
    // Reap everything (we are init) until the builder itself is gone.
    loop {
        match waitpid(None, None) {
            Ok(WaitStatus::Exited(pid, code)) if pid == child => {
                kill_the_rest();
                send(st, &mut RecordBuf::new(TAG_EXIT, 0, code));
                break;
            }
            Ok(WaitStatus::Signaled(pid, sig, _)) if pid == child => {
                kill_the_rest();
                send(st, &mut RecordBuf::new(TAG_SIGNAL, 0, sig as i32));
                break;
            }
            Err(Errno::EINTR) | Ok(_) => continue,
            Err(_) => break,
        }
    }
    // Exiting as pid 1 kills whatever is left (after `kill_the_rest`, nothing).
    exit(0)
}

/// Kills every other process of the pid namespace and reaps them all (orphans are init's
/// children), before init reports the builder's status: when the parent reads
/// [`TAG_EXIT`] or [`TAG_SIGNAL`], init is alone, so nothing can still write to the
/// outputs or the build directory, and the parent may post-process them while the
/// kernel tears down the namespaces (which it does when init exits, and which takes
/// milliseconds) and reap init later.
pub(super) fn kill_the_rest() {
    // From pid 1 of a pid namespace, -1 means every process of it but init.
    let _ = nix::sys::signal::kill(Pid::from_raw(-1), nix::sys::signal::Signal::SIGKILL);
    // Stops at ECHILD: no child left, and only init's children can be in its namespace.
    while let Ok(_) | Err(Errno::EINTR) = waitpid(None, None) {}
}

/// Size of the builder's stack until its `execve` (it needs a few KiB).
const BUILDER_STACK: usize = 64 * 1024;

/// Starts the builder the way `posix_spawn` does: `clone(CLONE_VM | CLONE_VFORK)` on a
/// stack of its own, so that init's page tables are not copied; init is suspended until
/// the builder has called `execve` (or exited).
fn spawn_builder(p: &Prepared) -> Result<Pid, Errno> {
    // SAFETY: sysconf reads a value the kernel passed at exec; no locks.
    let page = match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
        n if n > 0 => n as usize,
        _ => 4096,
    };
    let len = BUILDER_STACK + page;
    // SAFETY: a fresh anonymous private mapping (no address hint, no file). It is never
    // unmapped: init exits soon after the builder.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
            -1,
            0,
        )
    };
    if base == libc::MAP_FAILED {
        return Err(Errno::last());
    }
    // SAFETY: the lowest page of the mapping just made becomes a guard page, so that an
    // overflow faults instead of writing into init's memory.
    Errno::result(unsafe { libc::mprotect(base, page, libc::PROT_NONE) })?;
    // SAFETY: one past the end of the mapping: the initial stack pointer (stacks grow
    // down on every architecture Linux runs this on); page-aligned, so 16-byte aligned.
    let top = unsafe { base.cast::<u8>().add(len) };
    // Block every signal around the clone, as posix_spawn does: a handler of init's (they
    // are Rust's, running on shared memory) must not run in the builder before it has
    // reset the dispositions; the builder unblocks them after.
    // SAFETY: plain sigset_t values, valid when zeroed and filled by sigfillset.
    let mut all: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: sigfillset/sigprocmask on the sets we own.
    unsafe {
        libc::sigfillset(&mut all);
        libc::sigprocmask(libc::SIG_SETMASK, &all, &mut old);
    }
    // SAFETY: CLONE_VM | CLONE_VFORK: the child runs `builder_entry` on its own stack
    // `top` in init's memory while init (single-threaded) is suspended until the child's
    // execve or exit. `builder_entry` never returns (it execs or `_exit`s) and only makes
    // raw syscalls on `p`, which stays alive in init meanwhile; it writes nothing but its
    // own stack, errno and the status pipe.
    let r = unsafe {
        libc::clone(
            builder_entry,
            top.cast(),
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            p as *const Prepared as *mut libc::c_void,
        )
    };
    let err = Errno::last();
    // SAFETY: restoring our own signal mask.
    unsafe { libc::sigprocmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) };
    if r == -1 {
        return Err(err);
    }
    Ok(Pid::from_raw(r))
}

/// The builder's entry point (see [`spawn_builder`]).
extern "C" fn builder_entry(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the `&Prepared` that `spawn_builder` passed; init keeps it alive
    // (it is suspended until our execve or exit).
    let p = unsafe { &*(arg as *const Prepared) };
    builder(p)
}

/// The builder process (pid 2): standard descriptors, clean signal state, `execve`. It
/// shares init's memory until then (see [`spawn_builder`]); every signal is blocked on
/// entry.
fn builder(p: &Prepared) -> ! {
    let st = p.status_write;
    // SAFETY: resetting dispositions and the mask with integer/zeroed arguments. Ignored
    // signals (Rust ignores SIGPIPE) would otherwise survive execve, and init's handlers
    // must not run here.
    unsafe {
        for sig in 1..libc::SIGRTMIN() {
            if sig != libc::SIGKILL && sig != libc::SIGSTOP {
                libc::signal(sig, libc::SIG_DFL);
            }
        }
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
    }
    // SAFETY: dup2 onto 0, 1, 2 of descriptors we own; close_range only sets CLOEXEC;
    // umask, sched_setaffinity (a set in `p`, alive here) and personality take values.
    unsafe {
        if libc::dup2(p.devnull, 0) < 0
            || libc::dup2(p.log_write, 1) < 0
            || libc::dup2(p.log_write, 2) < 0
        {
            fail(
                st,
                Step::Exec,
                Errno::last(),
                &[b"redirecting the builder's output"],
            );
        }
        // Any descriptor the parent leaked without O_CLOEXEC must not reach the builder.
        if libc::syscall(
            libc::SYS_close_range,
            3u32,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        ) != 0
        {
            for fd in 3..1024 {
                if fd != st {
                    libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
                }
            }
        }
        libc::umask(p.umask as libc::mode_t);
        if let Some(set) = &p.cpus {
            // The CPUs `nproc` reports; failure (a set the kernel refuses) is the
            // builder's loss of the variation only.
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set);
        }
        if p.uname26 {
            // PER_LINUX | UNAME26: `uname -r` reports 2.6.x. Kept across execve.
            libc::personality(0x0020000);
        }
    }
    // ETXTBSY: another thread of the parent may just have finished writing the builder,
    // and a process forked meanwhile may not have closed its copy of that descriptor yet.
    let mut e = Errno::UnknownErrno;
    for _ in 0..50 {
        // SAFETY: `builder`, `argv` and `envp` are NUL-terminated C strings and
        // NULL-terminated pointer arrays prepared by the parent and alive in this copy of
        // its memory.
        unsafe { libc::execve(p.builder.as_ptr(), p.argv.as_ptr(), p.envp.as_ptr()) };
        e = Errno::last();
        if e != Errno::ETXTBSY {
            break;
        }
        let pause = libc::timespec {
            tv_sec: 0,
            tv_nsec: 20_000_000,
        };
        // SAFETY: nanosleep with a valid timespec and no remainder pointer.
        unsafe { libc::nanosleep(&pause, std::ptr::null_mut()) };
    }
    fail(
        st,
        Step::Exec,
        e,
        &[b"executing the builder ", p.builder.as_bytes()],
    )
}
