//! The rootless build sandbox (Linux): user, mount, pid, uts and ipc namespaces, plus a
//! network namespace unless the build is fixed-output; `pivot_root` into a fresh tmpfs.
//!
//! No daemon, no setuid helper: the caller's own privileges are enough, whether it is
//! root or an ordinary user.
//!
//! # The new root
//!
//! Only this is visible to the builder (see [`plan`] for the exact list):
//!
//! * the inputs, bound read-only (and nosuid, nodev) at their inside paths from an
//!   overlay of their host directory: a directory or file is bind-mounted, a symlink is
//!   recreated;
//! * `/build`: [`SandboxSpec::build_dir`] (as an overlay's upper layer), writable, the
//!   working directory;
//! * the directory that will hold the output (the parent of its inside path), writable;
//! * a minimal `/dev`: `null`, `zero`, `full`, `random`, `urandom` and `tty` bound from
//!   the host, a new `devpts` instance with `/dev/ptmx`, a `/dev/shm` tmpfs, and the
//!   `fd`, `stdin`, `stdout`, `stderr` symlinks;
//! * a fresh `/proc` for the new pid namespace;
//! * generated `/etc/passwd`, `/etc/group`, `/etc/hosts` (and, for network builds only,
//!   a copy of the host's `/etc/resolv.conf`, so that a fixed-output builder can resolve
//!   names);
//! * with [`SandboxSpec::rootfs`]: every top-level entry of the rootfs, bound read-only,
//!   except `dev`, `proc`, `etc`, `build` and the first component of every input and of
//!   the output (so `/rocmx` belongs to the store); its `/etc` entries are bound one by
//!   one, except the generated files. Inputs must therefore not live inside a directory
//!   that the rootfs provides.
//!
//! After `pivot_root` the root tmpfs is remounted read-only: the builder can write only
//! to `/build`, to the output's directory and to `/dev/shm`. Every mount is made in the
//! new mount namespace, which is private: nothing is ever mounted on the host, and
//! nothing is left behind when the sandbox dies.
//!
//! # The output
//!
//! The builder creates the output itself, as in Nix (`mkdir $out`, or a single file for
//! flat fixed-output derivations). [`SandboxSpec::outputs`]`[i].0` must not exist; its parent
//! must. The sandbox makes a private staging directory next to it (`.rocmx-sandbox-*`,
//! mode 0700 — or 0755 when that parent is the caller's and closed to others — so no
//! other host user can reach anything the builder writes during the build) and binds it
//! at the parent of the output's inside path (`/rocmx/store` typically). When the build
//! ends — whatever its status — the output, if the builder created it, is moved to
//! `output.0`, its setuid and setgid bits are stripped, and the staging directory (with
//! anything else the builder wrote next to the output) is deleted. Output normalisation
//! strips those bits again later. A caller may lend its own empty directory instead
//! ([`SandboxSpec::staging`]); the sandbox then only empties it, so that a realiser
//! running many builds does not create and delete one per build.
//!
//! The staging directory is the only directory the sandbox creates on the host: the new
//! root's tmpfs is mounted on it (in the sandbox's mount namespace, so the host never
//! sees that), and the directory itself is bound from a descriptor. With overlays, the
//! mount points of the inputs in it are made in a tmpfs that is the lower layer of its
//! overlay, so none is made on the host's disk (where creating and deleting inodes is
//! what costs); without, file inputs get hard links to one empty file rather than an
//! empty file each. Inputs that share a host directory (the store) are bound from one
//! read-only overlay of it, which saves each a remount.
//!
//! # Identity: how ids are mapped
//!
//! The build user is inside uid 1000 / gid 100, in one user namespace, and is never
//! host root:
//!
//! * **An unprivileged caller** maps a single id, the one mapping any user may write
//!   for itself: inside 1000 ↦ the caller's effective uid, 100 ↦ its effective gid
//!   (`setgroups` denied first, as the kernel requires). Host files of other users
//!   appear owned by `nobody` (65534); the caller's supplementary groups (which it
//!   cannot drop) appear as `nogroup`.
//! * **Host root** must pass [`SandboxSpec::host_ids`], an unprivileged host uid and gid
//!   (the realiser leases one per build: `crate::ids`). The maps are then `0 ↦ 0` and
//!   `1000 ↦ host_ids.uid` (gids alike). Init assembles the root as inside uid 0, so
//!   root-owned host paths (a store under `/root`, `0700` build directories) are its
//!   own; then it drops its supplementary groups and the bounding set and becomes
//!   1000/100 for good (`setresgid`/`setresuid`, which also empties its capability
//!   sets) before starting the builder. The parent hands `/build` and the output's
//!   directory to the build user before the build and the outputs back to itself after
//!   it (`rocmx_store::tree::chown_tree`). Because the builder's host uid is not 0, the kernel refuses it
//!   whatever is root-only on the host (sysctls, `RLIMIT_NPROC` applies, …).
//!
//! The process that creates a user namespace holds every capability *in it*, so the
//! setup (mounts, `pivot_root`, hostname) needs no privilege on the host; then every
//! capability is dropped (the caps crate: ambient, bounding, inheritable, permitted and
//! effective) and `PR_SET_NO_NEW_PRIVS` is set before the builder is started. Each
//! build also joins a fresh anonymous session keyring, and the seccomp filter denies
//! the keyring calls: keyrings are not namespaced.
//!
//! # Resource bounds ([`Limits`])
//!
//! * Processes: `RLIMIT_NPROC` of the build user. Each build has its own user
//!   namespace, and the kernel counts that limit per user *and* namespace, so it bounds
//!   this build alone. Init counts the processes of the pid namespace (every 200 ms,
//!   every 2 ms past half the limit, and when the builder fails) and kills the build
//!   at the limit: [`SandboxError::TooManyProcesses`]. A fork bomb that collapses by
//!   itself when forks fail (a shell exits when its fork fails) is merely contained.
//! * `/dev/shm`: a tmpfs of [`Limits::shm_size`]; writes past it fail with `ENOSPC`.
//! * Disk: `/build` and the outputs are on the host's disk; the parent adds up their
//!   blocks every few seconds (module `disk`) and kills the build past
//!   [`Limits::disk`]: [`SandboxError::DiskLimit`].
//!
//! # Processes
//!
//! The sandbox's pid 1 (an init that reaps orphans) starts straight in the new
//! namespaces: made ahead by the zygote (module `zygote`), a small process the binary
//! forks at startup, which sends init the prepared sandbox; or, without a zygote, cloned
//! by `run` itself, with a copy of the caller's page tables. `run` writes its id maps
//! from outside and lets it go on; init assembles the root and starts the builder (pid
//! 2) the way `posix_spawn` does, sharing its memory until `execve` (see `child.rs`).
//! When the builder exits, pid 1 kills and reaps everything left in the pid
//! namespace, reports the builder's status and exits. The parent moves the outputs as
//! soon as it has that status (init is alone then) and reaps init on a thread of its
//! own: the kernel tears down init's namespaces before the reap returns (5–10 ms,
//! measured), which is no longer on the build's critical path. In every other case
//! (a timeout, a limit, a setup failure) the parent reaps init before it returns. On a
//! timeout, the parent kills pid 1: the whole pid namespace dies with it. pid 1 is not
//! dumpable, so the builder cannot read the environment or memory it inherited from the
//! caller. Failures inside the sandbox's setup come back through a pipe as "what +
//! errno".
//!
//! # Setuid and setgid files
//!
//! Three layers: a seccomp filter (module `seccomp`) makes `chmod`-family calls and
//! file creation with `S_ISUID`/`S_ISGID` in the mode fail with `EPERM` (x86_64, i386,
//! aarch64, arm); `/build` and the output's directory are mounted `nosuid`; and after
//! the build the output's setuid/setgid bits are cleared (normalisation clears them
//! again).
//!
//! # Network
//!
//! Without [`SandboxSpec::network`] the builder gets a new network namespace holding
//! only `lo`, which is brought up (so builds may use servers on their own loopback).
//! With it (fixed-output derivations) the host's network namespace is kept.
//!
//! # What the builder can still see
//!
//! `/proc/1/cmdline` (the sandbox's init is a clone of the caller, or of the zygote,
//! which is a fork of it) shows the caller's
//! command line; its environment and memory are protected (init is not dumpable). The
//! kernel's own view (`uname`, `/proc/cpuinfo`, `/proc/meminfo`...) is the host's, read
//! only: `/proc/sys`, `/proc/sysrq-trigger`, `/proc/irq`, `/proc/bus` and `/proc/fs` are
//! bound read-only, `/proc/kcore`, `/proc/keys`, `/proc/timer_list` and the like are
//! hidden (see [`plan::PROC_READ_ONLY`]), and there is no `/sys`.
//!
//! `/proc/self/mountinfo` shows no host path: it would show, for a bind mount, the
//! source's path within its filesystem (with `--store DIR`, `DIR/store/<hash>-<name>`),
//! so the inputs are bound from a read-only overlay of their host directory, and
//! `/build` and the output's directory are writable overlays whose upper layers are the
//! host directories (work directories `.rocmx-work-*` next to them, removed after the
//! build, or the caller's), or are both bound from one writable overlay of their common
//! host directory ([`SandboxSpec::shared_work_dir`]); every layer is given as
//! `/proc/self/fd/N`, which is all the table shows. Where the kernel refuses overlays,
//! plain binds are used instead.
//!
//! # Environment
//!
//! Exactly [`SandboxSpec::env`] plus `HOME=/homeless-shelter`,
//! `TMPDIR=TMP=TEMP=TEMPDIR=NIX_BUILD_TOP=/build`, `ROCMX_BUILD_CORES`,
//! `SOURCE_DATE_EPOCH=1`, `TZ=UTC`, `LANG=C.UTF-8`, and `PATH=/path-not-set` unless
//! the spec sets `PATH`. These fixed variables win over the spec's (except `PATH`).
//! The builder's `argv[0]` is the builder's file name; stdin is `/dev/null`; stdout and
//! stderr both go to [`SandboxSpec::log`]; umask 022; hostname `localhost`; signal
//! dispositions reset to their defaults.
//!
//! Those are [`Variant::default`]'s values; [`SandboxSpec::variant`] changes them
//! (`rocmx verify`): the build user's ids and name, the hostname and domain name, the
//! umask, the build directory's path (and a tmpfs under it), the CPUs, the order of
//! the environment, the `UNAME26` personality, variables over the fixed ones, and a
//! preloaded library (bound read-only under [`variant::PRELOAD_DIR`]).

use std::collections::BTreeMap;
use std::ffi::CString;
use std::fmt;
use std::io::{self, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::poll::{PollFd, PollFlags, PollTimeout};
use nix::sched::CloneFlags;
use nix::sys::signal::Signal;

mod child;
mod disk;
mod identity;
pub mod plan;
mod protocol;
mod seccomp;
mod spec;
mod staging;
mod userns;
pub mod variant;
mod wire;
pub mod zygote;

use disk::DiskWatch;
use protocol::Step;
pub use spec::{HostIds, Limits, SandboxSpec};
use staging::{strip_setid, Staging, WorkDirs};
pub use userns::check_user_namespaces;
use userns::HostFacts;
pub use variant::Variant;

/// How the builder ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitStatus {
    /// It exited with this code.
    Code(i32),
    /// A signal killed it.
    Signal(i32),
}

impl ExitStatus {
    /// Exit code 0.
    pub fn success(&self) -> bool {
        *self == ExitStatus::Code(0)
    }
}

impl fmt::Display for ExitStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExitStatus::Code(c) => write!(f, "exit code {c}"),
            ExitStatus::Signal(s) => match Signal::try_from(*s) {
                Ok(sig) => write!(f, "killed by {sig}"),
                Err(_) => write!(f, "killed by signal {s}"),
            },
        }
    }
}

/// A finished build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    pub status: ExitStatus,
    /// From the fork of the sandbox to the builder's end.
    pub duration: Duration,
}

fn errno_of(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(n) => format!("{:?} ({})", Errno::from_raw(n), Errno::from_raw(n).desc()),
        None => e.to_string(),
    }
}

/// Why a sandboxed build could not run to its end.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The kernel refuses user namespaces: why, and how to allow them. rocmx then stops;
    /// it never builds unsandboxed unless told to.
    #[error("user namespaces are refused, so rocmx cannot sandbox the build: {reason}\nhow to allow them: {fix}")]
    UserNamespacesRefused { reason: String, fix: String },
    /// The spec is unusable (bad inside path, missing input...).
    #[error("invalid sandbox specification: {0}")]
    InvalidSpec(String),
    /// A setup step failed, on the host or inside the sandbox.
    #[error("sandbox setup failed: {0}: {errno}", errno = errno_of(.1))]
    Setup(String, #[source] io::Error),
    /// An output the builder left cannot be accepted: it is nested deeper than a store
    /// object may be ([`rocmx_store::tree::MAX_DEPTH`]), or it could not be walked to
    /// clear its setuid bits. The message is the real cause; `path` is the output's host
    /// path, for the caller to name the output.
    #[error("{source}")]
    Output {
        /// The output's host path.
        path: PathBuf,
        /// Why it cannot be accepted.
        #[source]
        source: rocmx_store::tree::TreeError,
    },
    /// The builder could not be executed.
    #[error("{0}: {errno}", errno = errno_of(.1))]
    Exec(String, #[source] io::Error),
    /// Writing the log failed; the build was killed.
    #[error("writing the build log: {0}")]
    Log(#[source] io::Error),
    /// Killed after [`SandboxSpec::timeout`].
    #[error("build timed out after {0:?}")]
    Timeout(Duration),
    /// Killed after [`SandboxSpec::max_silent`] without output.
    #[error("build killed after {0:?} without output")]
    Silent(Duration),
    /// Killed on reaching [`Limits::max_processes`].
    #[error("build exceeded {0} processes (the max-build-processes setting)")]
    TooManyProcesses(u32),
    /// Killed after using more than [`Limits::disk`] bytes.
    #[error("build used more than {limit} bytes of disk in /build and its outputs ({used} bytes; the build-dir-size setting)")]
    DiskLimit { limit: u64, used: u64 },
    /// The sandbox's processes died without saying why (killed from outside?).
    #[error("the sandbox died unexpectedly ({0})")]
    Died(String),
}

/// The environment the builder sees (sorted `KEY=VALUE`) in the default sandbox.
pub fn builder_env(env: &BTreeMap<String, String>, cores: u32) -> BTreeMap<String, String> {
    Variant::default()
        .environment(env, cores)
        .into_iter()
        .collect()
}

fn setup_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> SandboxError {
    let what = what.into();
    move |e| SandboxError::Setup(what, e)
}

fn cstring(what: &str, bytes: &[u8]) -> Result<CString, SandboxError> {
    CString::new(bytes)
        .map_err(|_| SandboxError::InvalidSpec(format!("{what} contains a NUL byte")))
}

/// `p`, relative to the working directory if it is relative: init works from inside
/// the new root while it assembles it, so every host path it is given is absolute.
fn absolute(p: &Path) -> Result<PathBuf, SandboxError> {
    if p.is_absolute() {
        return Ok(p.to_path_buf());
    }
    Ok(std::env::current_dir()
        .map_err(setup_err("getcwd"))?
        .join(p))
}

/// The namespaces a sandbox's init is cloned into: new user, mount, pid, uts and ipc
/// namespaces, and a network namespace unless the build has the host's `network`.
fn clone_flags(network: bool) -> CloneFlags {
    let flags = CloneFlags::CLONE_NEWUSER
        | CloneFlags::CLONE_NEWNS
        | CloneFlags::CLONE_NEWPID
        | CloneFlags::CLONE_NEWUTS
        | CloneFlags::CLONE_NEWIPC;
    if network {
        flags
    } else {
        flags | CloneFlags::CLONE_NEWNET
    }
}

/// What init was given, kept until init has been reaped (see [`run`]).
struct AfterReap {
    _prepared: child::Prepared,
}

// SAFETY: `Prepared`'s raw pointers (`argv`, `envp`) point into the `CString`s of its
// own `_argv` and `_envp`, which move with it; nothing else refers to them in this
// process (init's copies live in init's own address space), and the thread that
// receives it only drops it.
unsafe impl Send for AfterReap {}

/// Runs the builder in a fresh sandbox and waits for it. See the module documentation.
pub fn run(mut spec: SandboxSpec) -> Result<Outcome, SandboxError> {
    let spec::Checked {
        outputs,
        out_inside,
        inputs,
        variant,
        build_dir,
        rootfs,
        euid,
        own_ids,
    } = spec.check()?;

    // --- prepare everything the child needs -------------------------------------------
    // One private directory: init mounts the new root's tmpfs on it, and binds the
    // directory itself (reached through a descriptor opened now) at the output's parent.
    let staging = match &spec.staging {
        Some(dir) => Staging::lend(dir, &outputs[0].0)?,
        None => Staging::create(&outputs[0].0)?,
    };
    // Reserves a descriptor number for init's own descriptor of the staging directory.
    let staging_fd: OwnedFd = std::fs::File::open("/dev/null")
        .map_err(setup_err("opening /dev/null"))?
        .into();
    let root = staging.dir.clone();
    let out_dir = staging.dir.clone();
    let out_dir_source = PathBuf::from(format!("/proc/self/fd/{}", staging_fd.as_raw_fd()));
    let resolv_conf = if spec.network {
        std::fs::read("/etc/resolv.conf").ok()
    } else {
        None
    };
    // One overlay for /build and the output's directory when the caller laid them out
    // for it (see `SandboxSpec::shared_work_dir`).
    // (The plan decides whether the variant and the inputs allow it.)
    let shared = spec.shared_work_dir.as_ref().and_then(|w| {
        let stage = std::fs::canonicalize(&staging.dir).ok()?;
        let upper = build_dir.parent()?;
        let work = std::fs::canonicalize(w).ok()?;
        let apart = !work.starts_with(upper) && !upper.starts_with(&work);
        if stage.parent() != Some(upper) || !apart {
            return None;
        }
        Some(plan::SharedRw {
            upper: upper.to_path_buf(),
            work,
            build_sub: build_dir.file_name()?.into(),
            stage_sub: stage.file_name()?.into(),
        })
    });
    let work = match &spec.work_dirs {
        // Absolute: init runs most of the plan from inside the new root.
        Some((b, o)) => WorkDirs::lend(&absolute(b)?, &absolute(o)?),
        None => WorkDirs::create(&build_dir, &staging.dir)?,
    };
    let actions = plan::build(&plan::PlanInput {
        root: &root,
        inputs,
        output_parent_host: &out_dir_source,
        output_inside: &out_inside,
        build_dir: &build_dir,
        rootfs: rootfs.as_deref(),
        resolv_conf,
        shm_size: spec.limits.shm_size,
        work_dirs: Some((&work.build, &work.output)),
        shared: shared.as_ref(),
        variant: &variant,
    })?;

    let builder = cstring("builder", spec.builder.as_os_str().as_bytes())?;
    let arg0 = spec
        .builder
        .file_name()
        .map(|n| n.as_bytes().to_vec())
        .unwrap_or_default();
    let mut argv_c = vec![cstring("builder", &arg0)?];
    for a in &spec.args {
        argv_c.push(cstring("argument", a.as_bytes())?);
    }
    let mut envp_c = Vec::new();
    for (k, v) in variant.environment(&spec.env, spec.cores) {
        if k.is_empty() || k.contains('=') {
            return Err(SandboxError::InvalidSpec(format!(
                "environment variable name {k:?}"
            )));
        }
        envp_c.push(cstring("environment", format!("{k}={v}").as_bytes())?);
    }

    let flags = clone_flags(spec.network);
    // Read once per process: the kernel's last capability and the seccomp filter.
    static CAPS: std::sync::OnceLock<(u32, Vec<caps::Capability>)> = std::sync::OnceLock::new();
    static SECCOMP: std::sync::OnceLock<Vec<seccomp::SockFilter>> = std::sync::OnceLock::new();
    let (last_cap, all_caps) = CAPS
        .get_or_init(|| {
            let last_cap: u32 = std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
                .ok()
                .and_then(|s| s.trim().parse().ok())
                .unwrap_or(40);
            let all_caps = caps::all()
                .into_iter()
                .filter(|c| u32::from(c.index()) <= last_cap)
                .collect();
            (last_cap, all_caps)
        })
        .clone();

    let (log_r, log_w) = nix::unistd::pipe2(OFlag::O_CLOEXEC)
        .map_err(|e| SandboxError::Setup("creating a pipe".into(), e.into()))?;
    let (st_r, st_w) = nix::unistd::pipe2(OFlag::O_CLOEXEC)
        .map_err(|e| SandboxError::Setup("creating a pipe".into(), e.into()))?;
    let (go_r, go_w) = nix::unistd::pipe2(OFlag::O_CLOEXEC)
        .map_err(|e| SandboxError::Setup("creating a pipe".into(), e.into()))?;
    let devnull: OwnedFd = std::fs::File::open("/dev/null")
        .map_err(setup_err("opening /dev/null"))?
        .into();

    let clear_groups = euid.is_root();
    let prepared = child::Prepared {
        flags,
        clear_groups,
        switch_ids: spec.host_ids.is_some(),
        max_processes: spec.limits.max_processes.unwrap_or(0),
        root: cstring("root", root.as_os_str().as_bytes())?,
        actions,
        loopback_up: !spec.network,
        all_caps,
        last_cap,
        builder,
        argv: child::pointers(&argv_c),
        envp: child::pointers(&envp_c),
        _argv: argv_c,
        _envp: envp_c,
        seccomp: SECCOMP.get_or_init(seccomp::program).clone(),
        log_write: log_w.as_raw_fd(),
        status_write: st_w.as_raw_fd(),
        devnull: devnull.as_raw_fd(),
        go_read: go_r.as_raw_fd(),
        staging_path: cstring("staging directory", staging.dir.as_os_str().as_bytes())?,
        staging: staging_fd.as_raw_fd(),
        build_uid: variant.uid,
        build_gid: variant.gid,
        hostname: cstring("hostname", variant.hostname.as_bytes())?,
        domainname: match &variant.domainname {
            Some(d) => Some(cstring("domain name", d.as_bytes())?),
            None => None,
        },
        umask: variant.umask,
        build_top: cstring("build directory", variant.build_top.as_os_str().as_bytes())?,
        cpus: variant.cpus.map(child::first_cpus),
        uname26: variant.uname26,
    };

    // --- clone ---------------------------------------------------------------------------
    let start = Instant::now();
    let spawned = match zygote::spawn(&prepared) {
        Some(Ok(init)) => Ok(init),
        Some(Err(zygote::Failed::Clone(e))) => Err(e),
        Some(Err(zygote::Failed::Link(e))) => {
            return Err(SandboxError::Setup(
                "handing the sandbox to rocmx's zygote process".into(),
                e,
            ))
        }
        None => child::spawn_init(&prepared).map(zygote::Init::child),
    };
    let init = match spawned {
        Ok(init) => init,
        Err(e) => {
            let what = "clone(CLONE_NEWUSER|CLONE_NEWNS|CLONE_NEWPID|...)";
            if let Some(refused) = userns::refusal(Step::Unshare, e, what, &HostFacts::read()) {
                return Err(refused);
            }
            return Err(SandboxError::Setup(what.into(), e.into()));
        }
    };
    drop(log_w);
    drop(st_w);
    drop(go_r);
    drop(devnull);
    drop(staging_fd);
    // init waits for its id maps: inside uid 1000 / gid 100 are the caller's.
    let (uid_map, gid_map) = identity::id_maps(own_ids, spec.host_ids, (variant.uid, variant.gid));
    if let Err((what, e)) = identity::write_id_maps(init.pid, clear_groups, &uid_map, &gid_map) {
        init.kill();
        init.reap();
        let errno = Errno::from_raw(e.raw_os_error().unwrap_or(0));
        if let Some(refused) = userns::refusal(Step::IdMaps, errno, &what, &HostFacts::read()) {
            return Err(refused);
        }
        return Err(SandboxError::Setup(what, e));
    }
    if let Some(h) = spec.host_ids {
        if let Err(e) = identity::hand_over(&[&build_dir, &staging.dir], h) {
            init.kill();
            init.reap();
            return Err(e);
        }
    }
    // Go ahead. (If this fails, init has died: the status pipe tells the rest.)
    let _ = nix::unistd::write(&go_w, b"g");
    drop(go_w);

    // --- supervise ----------------------------------------------------------------------
    let mut status_data = Vec::new();
    let mut killed: Option<SandboxError> = None;
    let mut log_error: Option<io::Error> = None;
    let mut last_output = Instant::now();
    let mut log_open = true;
    let mut st_open = true;
    let mut buf = [0u8; 16 * 1024];
    let mut disk = spec
        .limits
        .disk
        .map(|limit| DiskWatch::new(limit, vec![build_dir.clone(), out_dir.clone()]));
    // pid 1 dies, and with it the whole pid namespace; the pipes then close.
    let kill_all = || init.kill();
    while log_open || st_open {
        let mut wait: Option<Duration> = None;
        if killed.is_none() {
            let now = Instant::now();
            if let Some(t) = spec.timeout {
                match (start + t).checked_duration_since(now) {
                    Some(left) if !left.is_zero() => wait = Some(left),
                    _ => killed = Some(SandboxError::Timeout(t)),
                }
            }
            if let (Some(d), None) = (&mut disk, &killed) {
                match d.check(now) {
                    Ok(left) => wait = Some(wait.map_or(left, |w| w.min(left))),
                    Err(e) => killed = Some(e),
                }
            }
            if let (Some(s), None) = (spec.max_silent, &killed) {
                match (last_output + s).checked_duration_since(now) {
                    Some(left) if !left.is_zero() => {
                        wait = Some(wait.map_or(left, |w| w.min(left)))
                    }
                    _ => killed = Some(SandboxError::Silent(s)),
                }
            }
            if killed.is_some() {
                kill_all();
                continue;
            }
        }
        let timeout = match wait {
            None => PollTimeout::NONE,
            Some(d) => PollTimeout::try_from(d.as_millis().saturating_add(1).min(60_000) as i32)
                .unwrap_or(PollTimeout::MAX),
        };
        let (log_ready, st_ready) = {
            let mut fds = Vec::with_capacity(2);
            if log_open {
                fds.push(PollFd::new(log_r.as_fd(), PollFlags::POLLIN));
            }
            if st_open {
                fds.push(PollFd::new(st_r.as_fd(), PollFlags::POLLIN));
            }
            match nix::poll::poll(&mut fds, timeout) {
                Ok(0) | Err(Errno::EINTR) => continue,
                Ok(_) => {}
                Err(e) => {
                    kill_all();
                    init.reap();
                    return Err(SandboxError::Setup("poll".into(), e.into()));
                }
            }
            let ready: Vec<bool> = fds
                .iter()
                .map(|f| f.revents().is_some_and(|r| !r.is_empty()))
                .collect();
            (
                log_open && ready[0],
                st_open && ready[usize::from(log_open)],
            )
        };
        if log_ready {
            match nix::unistd::read(&log_r, &mut buf) {
                Ok(0) => log_open = false,
                Ok(n) => {
                    last_output = Instant::now();
                    if log_error.is_none() {
                        if let Err(e) = spec.log.write_all(&buf[..n]) {
                            log_error = Some(e);
                            if killed.is_none() {
                                kill_all();
                                killed = Some(SandboxError::Died("log".into()));
                            }
                        }
                    }
                }
                Err(Errno::EINTR) | Err(Errno::EAGAIN) => {}
                Err(_) => log_open = false,
            }
        }
        if st_ready {
            match nix::unistd::read(&st_r, &mut buf) {
                Ok(0) => st_open = false,
                Ok(n) => {
                    status_data.extend_from_slice(&buf[..n]);
                    // Init sends the builder's status after it has killed and reaped
                    // every other process and then only exits: no need to wait for
                    // the pipe's end, which comes after the kernel has torn down
                    // init's address space (a copy of ours) and its descriptors.
                    if protocol::builder_ended(&status_data) {
                        st_open = false;
                    }
                }
                Err(Errno::EINTR) | Err(Errno::EAGAIN) => {}
                Err(_) => st_open = false,
            }
        }
    }
    let duration = start.elapsed();
    let records = protocol::parse(&status_data);
    let builder_ended = records.iter().any(protocol::Record::is_end);
    // Shared with the reaping thread (one that cannot be started gives its share back).
    let init = Arc::new(init);
    // Shared with the reaping thread, so that the lease outlives init whichever side
    // reaps it (a thread that cannot be started drops its share unused).
    let held = Arc::new(Mutex::new(spec.held_until_reaped.take()));
    if builder_ended && killed.is_none() && log_error.is_none() {
        // Init has killed and reaped every other process before it reported (see
        // `child::kill_the_rest`): nothing can change the outputs any more.
        let held = held.clone();
        // Freed once init is gone: until then its address space shares our pages
        // copy-on-write, and freeing the plan here (writing allocator metadata into
        // them) copied a page at each write, 50 µs per build.
        let plan = AfterReap {
            _prepared: prepared,
        };
        let reaped = init.clone();
        let spawned = std::thread::Builder::new()
            .name("sandbox-reap".into())
            .spawn(move || {
                reaped.reap();
                drop(held);
                drop(plan);
            });
        if spawned.is_err() {
            init.reap();
        }
    } else {
        init.reap();
    }
    drop(held);
    let _ = spec.log.flush();

    // --- results ------------------------------------------------------------------------
    let finish_output = || -> Result<(), SandboxError> {
        for (out_host, out_inside) in &outputs {
            let made = out_dir.join(out_inside.file_name().expect("checked: below a directory"));
            if made.symlink_metadata().is_ok() {
                std::fs::rename(&made, out_host).map_err(setup_err(format!(
                    "moving the output to {}",
                    out_host.display()
                )))?;
                strip_setid(out_host)?;
                if spec.host_ids.is_some() {
                    rocmx_store::tree::chown_tree(
                        out_host,
                        own_ids,
                        "handing back from the build user",
                    )
                    .map_err(|source| SandboxError::Output {
                        path: out_host.clone(),
                        source,
                    })?;
                }
            }
        }
        Ok(())
    };
    if let Some(e) = log_error {
        return Err(SandboxError::Log(e));
    }
    if let Some(e) = killed {
        return Err(e);
    }
    for r in &records {
        match r.tag {
            protocol::TAG_EXIT => {
                finish_output()?;
                return Ok(Outcome {
                    status: ExitStatus::Code(r.value),
                    duration,
                });
            }
            protocol::TAG_SIGNAL => {
                finish_output()?;
                return Ok(Outcome {
                    status: ExitStatus::Signal(r.value),
                    duration,
                });
            }
            protocol::TAG_NPROC => {
                return Err(SandboxError::TooManyProcesses(
                    spec.limits.max_processes.unwrap_or(r.value as u32),
                ));
            }
            protocol::TAG_ERROR => {
                let errno = Errno::from_raw(r.value);
                let step = r.step.unwrap_or(Step::Mount);
                if step == Step::Exec {
                    return Err(SandboxError::Exec(
                        r.message.clone(),
                        io::Error::from_raw_os_error(r.value),
                    ));
                }
                if let Some(e) = userns::refusal(step, errno, &r.message, &HostFacts::read()) {
                    return Err(e);
                }
                return Err(SandboxError::Setup(
                    r.message.clone(),
                    io::Error::from_raw_os_error(r.value),
                ));
            }
            _ => {}
        }
    }
    Err(SandboxError::Died(
        "no status from the sandbox's init".into(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_environment() {
        let mut env = BTreeMap::new();
        env.insert("out".to_string(), "/rocmx/store/x".to_string());
        env.insert("HOME".to_string(), "/somewhere".to_string());
        let got = builder_env(&env, 3);
        let expected: BTreeMap<String, String> = [
            ("HOME", "/homeless-shelter"),
            ("LANG", "C.UTF-8"),
            ("NIX_BUILD_TOP", "/build"),
            ("PATH", "/path-not-set"),
            ("ROCMX_BUILD_CORES", "3"),
            ("SOURCE_DATE_EPOCH", "1"),
            ("TEMP", "/build"),
            ("TEMPDIR", "/build"),
            ("TMP", "/build"),
            ("TMPDIR", "/build"),
            ("TZ", "UTC"),
            ("out", "/rocmx/store/x"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(got, expected);
        env.insert("PATH".into(), "/rocmx/store/y/bin".into());
        assert_eq!(builder_env(&env, 1)["PATH"], "/rocmx/store/y/bin");
    }

    #[test]
    fn exit_status_display() {
        assert_eq!(ExitStatus::Code(3).to_string(), "exit code 3");
        assert_eq!(ExitStatus::Signal(9).to_string(), "killed by SIGKILL");
        assert!(ExitStatus::Code(0).success());
        assert!(!ExitStatus::Signal(9).success());
    }

    #[test]
    fn setup_error_display() {
        let e = SandboxError::Setup(
            "mounting /proc (proc)".into(),
            io::Error::from_raw_os_error(1),
        );
        assert_eq!(
            e.to_string(),
            "sandbox setup failed: mounting /proc (proc): EPERM (Operation not permitted)"
        );
    }

    /// Host paths handed to init are absolute (it assembles the root from inside it).
    #[test]
    fn host_paths_are_made_absolute() {
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(absolute(Path::new("w/b")).unwrap(), cwd.join("w/b"));
        assert_eq!(absolute(Path::new("/x/y")).unwrap(), PathBuf::from("/x/y"));
    }
}
