//! Probing for user namespaces, and explaining why the kernel refused them.

use std::ffi::{CStr, CString};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::mount::{mount, MsFlags};
use nix::sched::{unshare, CloneFlags};
use nix::sys::stat::Mode;
use nix::sys::wait::{waitpid, WaitStatus};
use nix::unistd::{fork, getegid, geteuid, mkdir, ForkResult};

use super::protocol::{self, RecordBuf, Step, TAG_ERROR, TAG_EXIT};
use super::SandboxError;

/// What the message builder needs to know about the host. Read by
/// [`HostFacts::read`]; built by hand in tests.
#[derive(Debug, Clone, Default)]
pub(crate) struct HostFacts {
    /// The caller's effective uid.
    pub euid: u32,
    /// `/proc/sys/kernel/unprivileged_userns_clone` (Debian/Ubuntu kernels), trimmed.
    pub unprivileged_userns_clone: Option<String>,
    /// `/proc/sys/user/max_user_namespaces`, trimmed.
    pub max_user_namespaces: Option<String>,
    /// `/proc/sys/kernel/apparmor_restrict_unprivileged_userns` (Ubuntu ≥ 23.10), trimmed.
    pub apparmor_restrict_unprivileged_userns: Option<String>,
    /// Whether we seem to run in a container (Docker, Podman, systemd-nspawn, LXC...).
    pub in_container: bool,
    /// The running executable (for the AppArmor profile the fix suggests).
    pub exe: PathBuf,
}

fn read_trimmed(p: &str) -> Option<String> {
    std::fs::read_to_string(p)
        .ok()
        .map(|s| s.trim().to_string())
}

impl HostFacts {
    /// Reads the facts from `/proc` and the environment.
    pub(crate) fn read() -> HostFacts {
        let in_container = Path::new("/.dockerenv").exists()
            || Path::new("/run/.containerenv").exists()
            || std::env::var_os("container").is_some()
            || std::fs::read_to_string("/proc/1/cgroup")
                .map(|s| {
                    ["docker", "kubepods", "lxc", "containerd", "libpod"]
                        .iter()
                        .any(|k| s.contains(k))
                })
                .unwrap_or(false);
        HostFacts {
            euid: geteuid().as_raw(),
            unprivileged_userns_clone: read_trimmed("/proc/sys/kernel/unprivileged_userns_clone"),
            max_user_namespaces: read_trimmed("/proc/sys/user/max_user_namespaces"),
            apparmor_restrict_unprivileged_userns: read_trimmed(
                "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
            ),
            in_container,
            exe: std::env::current_exe().unwrap_or_else(|_| PathBuf::from("/usr/bin/rocmx")),
        }
    }
}

fn persist(setting: &str) -> String {
    format!(
        "allow them as root with `sysctl -w {setting}`, and keep that across reboots with \
         `echo {setting} > /etc/sysctl.d/90-rocmx-userns.conf`"
    )
}

/// Explains a failed step of entering the sandbox's namespaces, if it looks like the
/// kernel refusing user namespaces. `what` names the failed operation. `None` means an
/// ordinary setup failure.
pub(crate) fn refusal(
    step: Step,
    errno: Errno,
    what: &str,
    facts: &HostFacts,
) -> Option<SandboxError> {
    let diagnosable = matches!(
        step,
        Step::Unshare | Step::IdMaps | Step::MountPrivate | Step::MountProc
    );
    if !diagnosable {
        return None;
    }
    let failed = format!("{what} failed with {errno:?}");
    let is = |v: &Option<String>, x: &str| v.as_deref() == Some(x);
    let denied = matches!(errno, Errno::EPERM | Errno::EACCES);
    let (reason, fix) = if is(&facts.max_user_namespaces, "0") {
        (
            format!(
                "{failed}: user namespaces are disabled by the sysctl user.max_user_namespaces = 0"
            ),
            persist("user.max_user_namespaces=65536"),
        )
    } else if denied && facts.euid != 0 && is(&facts.unprivileged_userns_clone, "0") {
        (
            format!(
                "{failed}: unprivileged user namespaces are disabled by the sysctl \
                 kernel.unprivileged_userns_clone = 0"
            ),
            persist("kernel.unprivileged_userns_clone=1"),
        )
    } else if denied && is(&facts.apparmor_restrict_unprivileged_userns, "1") {
        (
            format!(
                "{failed}: AppArmor restricts unprivileged user namespaces (the sysctl \
                 kernel.apparmor_restrict_unprivileged_userns = 1)"
            ),
            format!(
                "give rocmx an AppArmor profile that allows them: as root, write \
                 /etc/apparmor.d/rocmx containing\n\
                 \x20   abi <abi/4.0>,\n\
                 \x20   include <tunables/global>\n\
                 \x20   profile rocmx {} flags=(unconfined) {{\n\
                 \x20     userns,\n\
                 \x20   }}\n\
                 then run `apparmor_parser -r /etc/apparmor.d/rocmx`; or allow them for every \
                 program with `sysctl -w kernel.apparmor_restrict_unprivileged_userns=0`",
                facts.exe.display()
            ),
        )
    } else if denied && step == Step::MountProc {
        (
            format!(
                "{failed}: the kernel refuses a new /proc because the visible /proc is partly \
                 masked or over-mounted, as container runtimes do"
            ),
            "run rocmx outside the container, or start the container with an unmasked /proc \
             (Docker and Podman: `--security-opt systempaths=unconfined`)"
                .to_string(),
        )
    } else if denied && facts.in_container {
        (
            format!(
                "{failed}: this is a container whose runtime forbids creating user namespaces \
                 (typically its seccomp profile)"
            ),
            "start the container with user namespaces allowed (Docker and Podman: \
             `--security-opt seccomp=unconfined`, or a seccomp profile that allows unshare and \
             clone with CLONE_NEWUSER), or run rocmx on the host"
                .to_string(),
        )
    } else if denied {
        (
            format!(
                "{failed}: a security policy (seccomp, SELinux, AppArmor or another security \
                 module) forbids user namespaces for this process"
            ),
            "allow user namespaces for rocmx in that policy (look for the denial in \
             `journalctl -k` or `dmesg`)"
                .to_string(),
        )
    } else if matches!(errno, Errno::ENOSPC | Errno::EUSERS) {
        (
            format!(
                "{failed}: the limit on user namespaces is reached (user.max_user_namespaces = {})",
                facts.max_user_namespaces.as_deref().unwrap_or("unknown")
            ),
            persist("user.max_user_namespaces=65536"),
        )
    } else if step == Step::Unshare && matches!(errno, Errno::EINVAL | Errno::ENOSYS) {
        (
            format!("{failed}: this kernel was built without user namespaces (CONFIG_USER_NS)"),
            "boot a kernel built with CONFIG_USER_NS=y".to_string(),
        )
    } else {
        return None;
    };
    Some(SandboxError::UserNamespacesRefused { reason, fix })
}

/// The probe's child side: the same namespace entry as the sandbox, then a tmpfs and a
/// fresh `/proc` in a private mount namespace.
fn probe_child(st: RawFd, uid_map: &[u8], gid_map: &[u8], dir: &CStr, proc_dir: &CStr) -> ! {
    let fail = |step: Step, e: Errno, what: &[u8]| -> ! {
        let mut rec = RecordBuf::new(TAG_ERROR, step as u8, e as i32);
        rec.push(what);
        // SAFETY: `st` is the status pipe's write end, owned by this process.
        let _ = nix::unistd::write(
            unsafe { std::os::fd::BorrowedFd::borrow_raw(st) },
            rec.bytes(),
        );
        // SAFETY: `_exit` after fork: no atexit handlers, no stdio flushing.
        unsafe { libc::_exit(1) }
    };
    let flags = CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNS | CloneFlags::CLONE_NEWPID;
    if let Err(e) = unshare(flags) {
        fail(
            Step::Unshare,
            e,
            b"unshare(CLONE_NEWUSER|CLONE_NEWNS|CLONE_NEWPID)",
        );
    }
    for (path, data, missing_ok) in [
        (c"/proc/self/setgroups", &b"deny"[..], true),
        (c"/proc/self/uid_map", uid_map, false),
        (c"/proc/self/gid_map", gid_map, false),
    ] {
        let r = nix::fcntl::open(path, OFlag::O_WRONLY | OFlag::O_CLOEXEC, Mode::empty())
            .and_then(|fd| nix::unistd::write(&fd, data));
        match r {
            Ok(_) => {}
            Err(Errno::ENOENT) if missing_ok => {}
            Err(e) => fail(Step::IdMaps, e, path.to_bytes()),
        }
    }
    // SAFETY: single-threaded fresh fork; the grandchild keeps to raw syscalls.
    match unsafe { fork() } {
        Err(e) => fail(Step::Fork, e, b"fork"),
        Ok(ForkResult::Parent { child }) => {
            let code = match waitpid(child, None) {
                Ok(WaitStatus::Exited(_, c)) => c,
                _ => 1,
            };
            // SAFETY: as above.
            unsafe { libc::_exit(code) }
        }
        Ok(ForkResult::Child) => {}
    }
    let none = None::<&CStr>;
    if let Err(e) = mount(
        none,
        c"/",
        none,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        none,
    ) {
        fail(
            Step::MountPrivate,
            e,
            b"making / private in a new mount namespace",
        );
    }
    if let Err(e) = mount(Some(c"tmpfs"), dir, Some(c"tmpfs"), MsFlags::empty(), none) {
        fail(
            Step::MountPrivate,
            e,
            b"mounting a tmpfs in a new user namespace",
        );
    }
    if let Err(e) = mkdir(proc_dir, Mode::from_bits_truncate(0o755)) {
        fail(Step::Mount, e, b"creating a directory on the tmpfs");
    }
    let flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
    if let Err(e) = mount(Some(c"proc"), proc_dir, Some(c"proc"), flags, none) {
        fail(Step::MountProc, e, b"mounting /proc in a new pid namespace");
    }
    let mut rec = RecordBuf::new(TAG_EXIT, 0, 0);
    // SAFETY: as above.
    let _ = nix::unistd::write(
        unsafe { std::os::fd::BorrowedFd::borrow_raw(st) },
        rec.bytes(),
    );
    // SAFETY: as above.
    unsafe { libc::_exit(0) }
}

/// Checks that this process can create the sandbox's namespaces: a user namespace
/// mapping the build user to the caller, a mount namespace with a tmpfs, and a pid
/// namespace with a fresh `/proc`. On refusal the error says why and how to allow them.
pub fn check_user_namespaces() -> Result<(), SandboxError> {
    let uid_map = format!("1000 {} 1\n", geteuid()).into_bytes();
    let gid_map = format!("100 {} 1\n", getegid()).into_bytes();
    let tmp = std::env::temp_dir();
    let dir = if tmp.is_dir() {
        tmp
    } else {
        PathBuf::from("/")
    };
    let dir_c = CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| SandboxError::InvalidSpec("temporary directory has a NUL byte".into()))?;
    let proc_c = CString::new(dir.join("proc").as_os_str().as_bytes()).expect("no NUL");
    let (rd, wr) = nix::unistd::pipe2(OFlag::O_CLOEXEC)
        .map_err(|e| SandboxError::Setup("creating a pipe".into(), e.into()))?;
    // SAFETY: the child only makes raw syscalls on data prepared above, then `_exit`s.
    let child = match unsafe { fork() } {
        Err(e) => return Err(SandboxError::Setup("fork".into(), e.into())),
        Ok(ForkResult::Child) => {
            drop(rd);
            probe_child(wr.as_raw_fd(), &uid_map, &gid_map, &dir_c, &proc_c)
        }
        Ok(ForkResult::Parent { child }) => child,
    };
    drop(wr);
    let mut data = Vec::new();
    let mut file = std::fs::File::from(rd);
    let _ = std::io::Read::read_to_end(&mut file, &mut data);
    let _ = waitpid(child, None);
    let records = protocol::parse(&data);
    if records.iter().any(|r| r.tag == TAG_EXIT && r.value == 0) {
        return Ok(());
    }
    let facts = HostFacts::read();
    match records.iter().find(|r| r.tag == TAG_ERROR) {
        Some(r) => {
            let errno = Errno::from_raw(r.value);
            let step = r.step.unwrap_or(Step::Unshare);
            Err(refusal(step, errno, &r.message, &facts).unwrap_or_else(|| {
                SandboxError::UserNamespacesRefused {
                    reason: format!("{} failed with {errno:?}", r.message),
                    fix: "allow unprivileged user namespaces on this machine".into(),
                }
            }))
        }
        None => Err(SandboxError::UserNamespacesRefused {
            reason: "the user-namespace probe died without reporting".into(),
            fix: "allow unprivileged user namespaces on this machine".into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts() -> HostFacts {
        HostFacts {
            euid: 1000,
            unprivileged_userns_clone: None,
            max_user_namespaces: Some("63502".into()),
            apparmor_restrict_unprivileged_userns: None,
            in_container: false,
            exe: PathBuf::from("/usr/bin/rocmx"),
        }
    }

    fn explain(step: Step, errno: Errno, f: &HostFacts) -> (String, String) {
        match refusal(step, errno, "unshare(CLONE_NEWUSER)", f) {
            Some(SandboxError::UserNamespacesRefused { reason, fix }) => (reason, fix),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn debian_sysctl() {
        let f = HostFacts {
            unprivileged_userns_clone: Some("0".into()),
            ..facts()
        };
        let (reason, fix) = explain(Step::Unshare, Errno::EPERM, &f);
        assert_eq!(
            reason,
            "unshare(CLONE_NEWUSER) failed with EPERM: unprivileged user namespaces are disabled \
             by the sysctl kernel.unprivileged_userns_clone = 0"
        );
        assert_eq!(
            fix,
            "allow them as root with `sysctl -w kernel.unprivileged_userns_clone=1`, and keep \
             that across reboots with `echo kernel.unprivileged_userns_clone=1 > \
             /etc/sysctl.d/90-rocmx-userns.conf`"
        );
        // root is not subject to that sysctl
        let root = HostFacts { euid: 0, ..f };
        let (reason, _) = explain(Step::Unshare, Errno::EPERM, &root);
        assert!(reason.contains("a security policy"), "{reason}");
    }

    #[test]
    fn max_user_namespaces_zero() {
        let f = HostFacts {
            max_user_namespaces: Some("0".into()),
            ..facts()
        };
        let (reason, fix) = explain(Step::Unshare, Errno::ENOSPC, &f);
        assert_eq!(
            reason,
            "unshare(CLONE_NEWUSER) failed with ENOSPC: user namespaces are disabled by the \
             sysctl user.max_user_namespaces = 0"
        );
        assert_eq!(
            fix,
            "allow them as root with `sysctl -w user.max_user_namespaces=65536`, and keep that \
             across reboots with `echo user.max_user_namespaces=65536 > \
             /etc/sysctl.d/90-rocmx-userns.conf`"
        );
    }

    #[test]
    fn apparmor_restriction() {
        let f = HostFacts {
            apparmor_restrict_unprivileged_userns: Some("1".into()),
            ..facts()
        };
        // AppArmor lets unshare succeed and denies the capabilities afterwards.
        let err = refusal(Step::IdMaps, Errno::EPERM, "writing /proc/self/uid_map", &f).unwrap();
        assert_eq!(
            err.to_string(),
            "user namespaces are refused, so rocmx cannot sandbox the build: writing \
             /proc/self/uid_map failed with EPERM: AppArmor restricts unprivileged user \
             namespaces (the sysctl kernel.apparmor_restrict_unprivileged_userns = 1)\n\
             how to allow them: give rocmx an AppArmor profile that allows them: as root, \
             write /etc/apparmor.d/rocmx containing\n\
             \x20   abi <abi/4.0>,\n\
             \x20   include <tunables/global>\n\
             \x20   profile rocmx /usr/bin/rocmx flags=(unconfined) {\n\
             \x20     userns,\n\
             \x20   }\n\
             then run `apparmor_parser -r /etc/apparmor.d/rocmx`; or allow them for every \
             program with `sysctl -w kernel.apparmor_restrict_unprivileged_userns=0`"
        );
    }

    #[test]
    fn container_seccomp_and_masked_proc() {
        let f = HostFacts {
            in_container: true,
            ..facts()
        };
        let (reason, fix) = explain(Step::Unshare, Errno::EPERM, &f);
        assert_eq!(
            reason,
            "unshare(CLONE_NEWUSER) failed with EPERM: this is a container whose runtime \
             forbids creating user namespaces (typically its seccomp profile)"
        );
        assert_eq!(
            fix,
            "start the container with user namespaces allowed (Docker and Podman: \
             `--security-opt seccomp=unconfined`, or a seccomp profile that allows unshare and \
             clone with CLONE_NEWUSER), or run rocmx on the host"
        );
        let err = refusal(Step::MountProc, Errno::EPERM, "mounting /proc (proc)", &f).unwrap();
        match err {
            SandboxError::UserNamespacesRefused { reason, fix } => {
                assert_eq!(
                    reason,
                    "mounting /proc (proc) failed with EPERM: the kernel refuses a new /proc \
                     because the visible /proc is partly masked or over-mounted, as container \
                     runtimes do"
                );
                assert_eq!(
                    fix,
                    "run rocmx outside the container, or start the container with an unmasked \
                     /proc (Docker and Podman: `--security-opt systempaths=unconfined`)"
                );
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn other_causes() {
        let (reason, fix) = explain(Step::Unshare, Errno::EPERM, &facts());
        assert_eq!(
            reason,
            "unshare(CLONE_NEWUSER) failed with EPERM: a security policy (seccomp, SELinux, \
             AppArmor or another security module) forbids user namespaces for this process"
        );
        assert_eq!(
            fix,
            "allow user namespaces for rocmx in that policy (look for the denial in \
             `journalctl -k` or `dmesg`)"
        );
        let (reason, _) = explain(Step::Unshare, Errno::ENOSPC, &facts());
        assert_eq!(
            reason,
            "unshare(CLONE_NEWUSER) failed with ENOSPC: the limit on user namespaces is reached \
             (user.max_user_namespaces = 63502)"
        );
        let (reason, fix) = explain(Step::Unshare, Errno::EINVAL, &facts());
        assert_eq!(
            reason,
            "unshare(CLONE_NEWUSER) failed with EINVAL: this kernel was built without user \
             namespaces (CONFIG_USER_NS)"
        );
        assert_eq!(fix, "boot a kernel built with CONFIG_USER_NS=y");
        // An ordinary mount failure is not a user-namespace refusal.
        assert!(refusal(Step::Mount, Errno::EPERM, "binding /build", &facts()).is_none());
        assert!(refusal(Step::IdMaps, Errno::EIO, "writing", &facts()).is_none());
    }
}
