//! The mount plan: everything the sandbox's pid 1 does to build the new root, computed
//! by the parent *before* forking so that the child only walks a ready list of
//! C strings and issues syscalls (no allocation, no directory reading after `fork`).
//!
//! Owns: what the new root holds and in which order it is assembled (`build`, from a
//! `PlanInput`): the generated `/etc` files, the devices, what `/proc` hides, the
//! scratch tmpfs of the set-up, the layout of inputs, `/build` and the output's
//! directory; and the check of inside paths. The actions are `plan/action.rs`'s; the
//! steps that write them (binds, overlays, `/proc` protection, `rootfs` entries) are
//! `plan/planner.rs`'s.
//!
//! Must not: carry out any of it (pid 1 does, in `child.rs`).

use std::collections::{BTreeSet, HashSet};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use nix::mount::MsFlags;

use super::SandboxError;
pub(super) use action::{Action, PlannedAction};
use planner::{cstr, cstr_bytes, in_root, ro_flags, rw_flags, what, Planner};

mod action;
mod planner;

/// The generated `/etc/passwd`: root, the build user and nobody.
pub const PASSWD: &str = "root:x:0:0:rocmx build root:/build:/noshell\n\
rocmxbld:x:1000:100:rocmx build user:/homeless-shelter:/noshell\n\
nobody:x:65534:65534:nobody:/:/noshell\n";

/// The generated `/etc/group`.
pub const GROUP: &str = "root:x:0:\nrocmxbld:!:100:\nnogroup:x:65534:\n";

/// The generated `/etc/hosts`.
pub const HOSTS: &str = "127.0.0.1 localhost\n::1 localhost\n";

/// Host device nodes bind-mounted into the sandbox's `/dev`.
pub const DEVICES: [&str; 6] = ["null", "zero", "full", "random", "urandom", "tty"];

/// Entries of `/proc` that are bound read-only onto themselves: the sysctls, the
/// magic SysRq trigger, interrupt affinities, bus and filesystem settings. (Host root is
/// never the build user, so the kernel refuses writes there anyway; this is the second
/// layer.)
pub const PROC_READ_ONLY: [&str; 5] = ["sys", "sysrq-trigger", "irq", "bus", "fs"];

/// Files of `/proc` replaced by `/dev/null`: kernel memory, every key of the host, timer
/// and scheduler internals.
pub const PROC_MASKED_FILES: [&str; 6] = [
    "kcore",
    "keys",
    "key-users",
    "timer_list",
    "sched_debug",
    "latency_stats",
];

/// Directories of `/proc` covered by an empty read-only tmpfs.
pub const PROC_MASKED_DIRS: [&str; 2] = ["acpi", "scsi"];

/// Top-level names of the new root that the sandbox provides itself (never taken from
/// a `rootfs`).
const FIXED_TOP: [&str; 4] = ["dev", "proc", "etc", "build"];

/// Entries of `/etc` that the sandbox generates (never taken from a `rootfs`).
const GENERATED_ETC: [&str; 3] = ["passwd", "group", "hosts"];

/// What the parent knows about one input before planning.
#[derive(Debug, Clone)]
pub(super) enum InputKind {
    Dir,
    File,
    Symlink(PathBuf),
}

/// Name of the empty file that file inputs' mount points in the output's directory are
/// hard links to; removed before the builder starts.
pub const MOUNT_POINT_FILE: &str = ".rocmx-mount-point";

/// A tmpfs in the new root, `/.rocmx-tmp`, holding what only the set-up uses: the
/// empty layer of the inputs' overlays ([`EMPTY_DIR`]), those overlays
/// ([`INPUTS_DIR`]), the mount points under the output directory's overlay
/// ([`LOWER_DIR`]) and the shared writable overlay ([`RW_DIR`]). Detached with
/// everything mounted in it by one `umount` before the builder starts, then removed:
/// each detach waits for an RCU grace period (0.1–0.25 ms measured here), and
/// detaching the three mounts one by one took three of them.
const SCRATCH: &str = ".rocmx-tmp";

/// Where, in the new root, a directory holding many inputs (the store directory) is bound
/// read-only while the inputs are bound from it: `/.rocmx-tmp/inputs-<n>`.
const INPUTS_DIR: &str = ".rocmx-tmp/inputs-";

/// An empty directory, the second (empty) layer of the inputs' overlays (an overlay
/// without an upper layer needs two).
const EMPTY_DIR: &str = ".rocmx-tmp/empty";

/// A directory holding the mount points (and symlinks) of the inputs that sit directly
/// in the output's directory (the store directory): the lower layer of that directory's
/// writable overlay. Mount points made through the overlay would be made on the host's
/// disk (a link or `mkdir` in the upper layer, each a create-and-rename in the
/// overlay's work directory, and an unlink after the build: 25 per build on average in a
/// chain of 50 builds whose outputs refer to each other); here, in the scratch tmpfs,
/// they cost a tmpfs inode each and leave nothing behind.
const LOWER_DIR: &str = ".rocmx-tmp/lower";

/// Where the shared writable overlay ([`SharedRw`]) is mounted while `/build` and the
/// output's directory are bound from it.
const RW_DIR: &str = ".rocmx-tmp/rw";

/// The tmpfs under a build directory that lists entries in creation order
/// ([`super::Variant::build_on_tmpfs`]).
const BUILD_TMPFS: &str = ".rocmx-build-tmpfs";

/// The parent's inputs to [`build`].
pub(super) struct PlanInput<'a> {
    /// Host directory the new root's tmpfs is mounted on.
    pub root: &'a Path,
    /// `(host path, inside path, kind)`, validated.
    pub inputs: Vec<(PathBuf, PathBuf, InputKind)>,
    /// Host directory bound read-write at the parent of the output's inside path (it may
    /// be hidden under `root` by then: `/proc/self/fd/N` then names it).
    pub output_parent_host: &'a Path,
    /// Inside path of the output.
    pub output_inside: &'a Path,
    pub build_dir: &'a Path,
    pub rootfs: Option<&'a Path>,
    /// Content for `/etc/resolv.conf` (network builds only).
    pub resolv_conf: Option<Vec<u8>>,
    /// Overlay work directories (empty, on the same filesystems as `build_dir` and the
    /// output's directory) for mounting those two as writable overlays, so that
    /// `/proc/self/mountinfo` does not show their host paths; `None`: plain binds.
    pub work_dirs: Option<(&'a Path, &'a Path)>,
    /// One writable overlay for both `/build` and the output's directory (see
    /// [`SharedRw`]); takes the place of `work_dirs` for those two.
    pub shared: Option<&'a SharedRw>,
    /// Size limit of the `/dev/shm` tmpfs in bytes (`None`: the kernel's default, half
    /// of the memory).
    pub shm_size: Option<u64>,
    /// The variable parts: the build directory's inside path, `/etc/passwd` and
    /// `/etc/group`.
    pub variant: &'a super::Variant,
}

/// The layout of one writable overlay for `/build` and the output's directory: its
/// upper layer is the host directory holding both (`build_sub` and `stage_sub` in it),
/// mounted at [`RW_DIR`] while the two are bound from it, then detached.
#[derive(Debug, Clone)]
pub(super) struct SharedRw {
    pub upper: PathBuf,
    pub work: PathBuf,
    pub build_sub: PathBuf,
    pub stage_sub: PathBuf,
}

/// Checks that an inside path is absolute, normal (no `.`, `..`, `//`) and not the root.
pub(super) fn check_inside_path(p: &Path, what: &str) -> Result<(), SandboxError> {
    let bad = |why: &str| {
        Err(SandboxError::InvalidSpec(format!(
            "{what} {}: {why}",
            p.display()
        )))
    };
    if !p.is_absolute() {
        return bad("not an absolute path");
    }
    let raw = p.as_os_str().as_bytes();
    if raw.contains(&0) {
        return bad("contains a NUL byte");
    }
    let mut n = 0;
    for c in p.components() {
        match c {
            Component::RootDir => {}
            Component::Normal(_) => n += 1,
            _ => return bad("not a normalised path"),
        }
    }
    if n == 0 || raw.ends_with(b"/") || raw.windows(2).any(|w| w == b"//") {
        return bad("not a normalised path below /");
    }
    let first = first_component(p);
    if FIXED_TOP.contains(&first.as_str()) {
        return bad("the sandbox provides /dev, /proc, /etc and /build itself");
    }
    Ok(())
}

fn first_component(p: &Path) -> String {
    p.components()
        .find_map(|c| match c {
            Component::Normal(s) => Some(s.to_string_lossy().into_owned()),
            _ => None,
        })
        .unwrap_or_default()
}

fn sorted_entries(dir: &Path) -> Result<Vec<(String, PathBuf)>, SandboxError> {
    let rd = std::fs::read_dir(dir).map_err(|e| {
        SandboxError::Setup(format!("reading rootfs directory {}", dir.display()), e)
    })?;
    let mut v = Vec::new();
    for e in rd {
        let e = e.map_err(|e| SandboxError::Setup(format!("reading {}", dir.display()), e))?;
        let name = e.file_name();
        if name.as_bytes().contains(&0) {
            continue;
        }
        v.push((name.to_string_lossy().into_owned(), e.path()));
    }
    v.sort();
    Ok(v)
}

/// Builds the list of actions that assemble the new root under `pi.root`.
pub(super) fn build(pi: &PlanInput<'_>) -> Result<Vec<PlannedAction>, SandboxError> {
    let mut p = Planner {
        actions: Vec::new(),
        dirs: HashSet::new(),
    };
    // The root itself: a fresh tmpfs (remounted read-only after pivot_root).
    p.push(
        Action::Mount {
            source: cstr_bytes(b"tmpfs"),
            target: cstr(pi.root),
            fstype: cstr_bytes(b"tmpfs"),
            flags: MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
            data: Some(cstr_bytes(b"mode=0755")),
            proc: false,
        },
        b"mounting the root tmpfs".to_vec(),
    );
    p.push(
        Action::EnterRoot {
            path: cstr(pi.root),
        },
        b"entering the root tmpfs".to_vec(),
    );

    let output_parent = pi.output_inside.parent().unwrap_or(Path::new("/"));

    // Host directories holding inputs (the store directory): each is mounted once,
    // read-only, as an overlay whose layers are named by descriptor, and the inputs
    // (and a rootfs among them) are bound from there. So /proc/self/mountinfo shows
    // `/<hash>-<name>` within an overlay for each input, never the host's path of the
    // store. Where overlays cannot be mounted (old kernels), a read-only bind instead.
    let rootfs_names: BTreeSet<String> = match pi.rootfs {
        Some(r) => sorted_entries(r)?.into_iter().map(|(n, _)| n).collect(),
        None => BTreeSet::new(),
    };
    let groups: BTreeSet<&Path> = pi
        .inputs
        .iter()
        .filter(|(_, _, k)| matches!(k, InputKind::Dir | InputKind::File))
        .filter_map(|(src, _, _)| src.parent())
        .collect();
    // Top-level names of the inputs and the output, gathered once: `taken` is asked a
    // few times per build, and a chain's later builds have ~50 inputs.
    let firsts: HashSet<String> = pi
        .inputs
        .iter()
        .map(|(_, i, _)| i.as_path())
        .chain([pi.output_inside])
        .map(first_component)
        .collect();
    let taken = |name: &str| firsts.contains(name) || rootfs_names.contains(name);
    let mut hidden: Vec<(PathBuf, PathBuf)> = Vec::new(); // (host dir, inside mount point)
    let empty = Path::new("/").join(EMPTY_DIR);
    let scratch = Path::new("/").join(SCRATCH);
    // Overlays need the scratch tmpfs; an input or rootfs entry of that name (absurd,
    // but possible) gets plain binds.
    let use_empty = (!groups.is_empty() || pi.work_dirs.is_some()) && !taken(SCRATCH);
    if use_empty {
        p.mount(
            "tmpfs",
            &scratch,
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
            Some("mode=0755"),
        );
        p.mkdir_p(&empty, 0o555);
    }
    let work_dirs = pi.work_dirs.filter(|_| use_empty);
    if use_empty {
        for dir in groups {
            let name = format!("{INPUTS_DIR}{}", hidden.len());
            let inside = Path::new("/").join(&name);
            p.mkdir_p(&inside, 0o755);
            p.push(
                Action::Overlay {
                    lower: cstr(dir),
                    empty: cstr(&in_root(&empty)),
                    target: cstr(&in_root(&inside)),
                },
                what("mounting", &inside, " (inputs, read-only)"),
            );
            hidden.push((dir.to_path_buf(), inside));
        }
    }
    // Where, in the new root, a host path below a grouped directory can be bound from.
    let via_group = |src: &Path| -> Option<PathBuf> {
        hidden.iter().find_map(|(d, i)| {
            let rest = src.strip_prefix(d).ok()?;
            (!rest.as_os_str().is_empty()).then(|| in_root(&i.join(rest)))
        })
    };

    // The rootfs: every top-level entry but those the sandbox provides, and every entry
    // of its /etc but the generated files.
    if let Some(rootfs) = pi.rootfs {
        let mut reserved: BTreeSet<String> = FIXED_TOP.iter().map(|s| s.to_string()).collect();
        reserved.insert(first_component(pi.output_inside));
        reserved.insert(first_component(&pi.variant.build_top));
        for (_, inside, _) in &pi.inputs {
            reserved.insert(first_component(inside));
        }
        for (name, source) in sorted_entries(rootfs)? {
            if reserved.contains(&name) {
                continue;
            }
            p.rootfs_entry(
                &source,
                via_group(&source).as_deref(),
                &Path::new("/").join(&name),
            )?;
        }
        let etc = rootfs.join("etc");
        if etc.is_dir() {
            for (name, source) in sorted_entries(&etc)? {
                if GENERATED_ETC.contains(&name.as_str())
                    || (pi.resolv_conf.is_some() && name == "resolv.conf")
                {
                    continue;
                }
                p.rootfs_entry(
                    &source,
                    via_group(&source).as_deref(),
                    &Path::new("/etc").join(&name),
                )?;
            }
        }
    }

    // /etc
    p.write_file(Path::new("/etc/passwd"), pi.variant.passwd().as_bytes());
    p.write_file(Path::new("/etc/group"), pi.variant.group().as_bytes());
    p.write_file(Path::new("/etc/hosts"), HOSTS.as_bytes());
    if let Some(resolv) = &pi.resolv_conf {
        p.write_file(Path::new("/etc/resolv.conf"), resolv);
    }

    // /dev
    p.mkdir_p(Path::new("/dev"), 0o755);
    for dev in DEVICES {
        if !Path::new("/dev").join(dev).exists() {
            continue; // e.g. no /dev/tty in some containers
        }
        let inside = Path::new("/dev").join(dev);
        p.bind(
            &Path::new("/dev").join(dev),
            &inside,
            false,
            MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
            " from the host",
            None,
        );
    }
    p.mount(
        "devpts",
        Path::new("/dev/pts"),
        MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
        Some("newinstance,ptmxmode=0666,mode=0620"),
    );
    p.symlink(b"pts/ptmx", Path::new("/dev/ptmx"));
    let shm_data = match pi.shm_size {
        Some(n) => format!("mode=1777,size={}", n.max(4096)),
        None => "mode=1777".to_string(),
    };
    p.mount(
        "tmpfs",
        Path::new("/dev/shm"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some(&shm_data),
    );
    p.symlink(b"/proc/self/fd", Path::new("/dev/fd"));
    p.symlink(b"/proc/self/fd/0", Path::new("/dev/stdin"));
    p.symlink(b"/proc/self/fd/1", Path::new("/dev/stdout"));
    p.symlink(b"/proc/self/fd/2", Path::new("/dev/stderr"));

    // /proc: mounted while the host's /proc is still visible (the kernel requires a
    // fully visible procfs in the mount namespace to allow a new one).
    p.mount(
        "proc",
        Path::new("/proc"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        None,
    );
    p.protect_proc(Path::new("/proc"));

    // The inputs directly in the output's directory: with overlays, their mount points
    // are made in a tmpfs under that directory's overlay ([`LOWER_DIR`]).
    let shared = pi.shared.filter(|_| {
        use_empty
            && !pi.variant.build_on_tmpfs
            && !pi
                .inputs
                .iter()
                .any(|(_, i, _)| output_parent.starts_with(i))
    });
    let in_lower: Vec<(&Path, &InputKind)> = match (work_dirs, shared) {
        (None, None) => Vec::new(),
        _ => pi
            .inputs
            .iter()
            .filter(|(_, i, _)| i.parent() == Some(output_parent) && i.file_name().is_some())
            .map(|(_, i, k)| (i.as_path(), k))
            .collect(),
    };
    // Asked once per input: a set, compared by bytes (inside paths are normalised),
    // not a scan of `in_lower` comparing paths component by component, which made
    // planning quadratic in the inputs (a chain's last builds have 50).
    let lowered_set: HashSet<&OsStr> = in_lower.iter().map(|(i, _)| i.as_os_str()).collect();
    let lowered = |inside: &Path| lowered_set.contains(inside.as_os_str());

    // /build
    let top = pi.variant.build_top.as_path();
    if let Some(sh) = shared {
        p.shared_overlay(
            sh,
            top,
            output_parent,
            &in_lower,
            &empty,
            pi.build_dir,
            pi.output_parent_host,
        );
    } else if pi.variant.build_on_tmpfs && use_empty {
        // A writable overlay whose upper layer is a fresh tmpfs (its entries listed in
        // creation order, not in the host filesystem's hash order), over the host build
        // directory (what the realiser put there before the build).
        let t = Path::new("/").join(BUILD_TMPFS);
        p.mount("tmpfs", &t, rw_flags(), Some("mode=0755,size=50%"));
        for sub in ["upper", "work"] {
            p.mkdir_p(&t.join(sub), 0o755);
        }
        p.push(
            Action::Chown {
                path: cstr(&in_root(&t.join("upper"))),
                uid: pi.variant.uid,
                gid: pi.variant.gid,
            },
            what("handing", &t.join("upper"), " to the build user"),
        );
        p.mkdir_p(top, 0o755);
        p.push(
            Action::OverlayRw {
                upper: cstr(&in_root(&t.join("upper"))),
                work: cstr(&in_root(&t.join("work"))),
                empty: cstr(pi.build_dir),
                target: cstr(&in_root(top)),
                flags: rw_flags(),
                fallback: Vec::new(),
            },
            what("mounting", top, " (the build directory, on a tmpfs)"),
        );
    } else {
        match work_dirs {
            Some((work, _)) => {
                p.overlay_rw(pi.build_dir, work, &empty, top, " (the build directory)")
            }
            None => p.bind(
                pi.build_dir,
                top,
                true,
                rw_flags(),
                " (the build directory)",
                None,
            ),
        }
    }

    // The output's directory and the inputs, parents before children.
    let mut targets: Vec<(PathBuf, PathBuf, Option<InputKind>)> = vec![(
        pi.output_parent_host.to_path_buf(),
        output_parent.to_path_buf(),
        None,
    )];
    for (src, inside, kind) in &pi.inputs {
        targets.push((src.clone(), inside.clone(), Some(kind.clone())));
    }
    // By depth, then path: each path's components counted once, not per comparison.
    targets.sort_by_cached_key(|t| (t.1.components().count(), t.1.clone()));
    // File inputs directly in the output's directory (store paths, typically) get hard
    // links to one empty file as mount points: that directory is on the host's disk.
    let linked = pi
        .inputs
        .iter()
        .filter(|(_, i, k)| matches!(k, InputKind::File) && i.parent() == Some(output_parent))
        .count();
    let clash = pi
        .inputs
        .iter()
        .map(|(_, i, _)| i.as_path())
        .chain([pi.output_inside])
        .any(|i| i == output_parent.join(MOUNT_POINT_FILE));
    let mount_point_file = (linked >= 2 && !clash && in_lower.is_empty())
        .then(|| cstr(&in_root(&output_parent.join(MOUNT_POINT_FILE))));
    for (src, inside, kind) in targets {
        let link_to = mount_point_file
            .as_ref()
            .filter(|_| inside.parent() == Some(output_parent));
        let via = match &kind {
            Some(InputKind::Dir | InputKind::File) => via_group(&src),
            _ => None,
        };
        let via = via.as_deref();
        match kind {
            // Bound from the shared overlay with /build.
            None if shared.is_some() => {}
            None => {
                match work_dirs {
                    Some((_, work)) if !in_lower.is_empty() => {
                        p.overlay_rw_over_mount_points(&src, work, &inside, &in_lower)
                    }
                    Some((_, work)) => {
                        p.overlay_rw(&src, work, &empty, &inside, " (the output's directory)")
                    }
                    None => p.bind(
                        &src,
                        &inside,
                        true,
                        rw_flags(),
                        " (the output's directory)",
                        None,
                    ),
                }
                if let Some(path) = &mount_point_file {
                    p.push(
                        Action::Touch { path: path.clone() },
                        what(
                            "creating",
                            &output_parent.join(MOUNT_POINT_FILE),
                            " (for mount points)",
                        ),
                    );
                }
            }
            Some(InputKind::Dir | InputKind::File) if lowered(&inside) => {
                p.bind_onto(&src, via, &inside, ro_flags(), " (input) read-only")
            }
            Some(InputKind::Dir) => p.bind_via(
                &src,
                via,
                &inside,
                true,
                ro_flags(),
                " (input) read-only",
                None,
            ),
            Some(InputKind::File) => p.bind_via(
                &src,
                via,
                &inside,
                false,
                ro_flags(),
                " (input) read-only",
                link_to,
            ),
            Some(InputKind::Symlink(_)) if lowered(&inside) => {}
            Some(InputKind::Symlink(target)) => p.symlink(target.as_os_str().as_bytes(), &inside),
        }
    }
    if use_empty {
        // Everything mounted in it goes with it: one grace period.
        let path = cstr(&in_root(&scratch));
        p.push(
            Action::Umount { path: path.clone() },
            what(
                "detaching",
                &scratch,
                " (and what the set-up mounted in it)",
            ),
        );
        p.push(Action::Rmdir { path }, what("removing", &scratch, ""));
    }
    if let Some(path) = mount_point_file {
        p.push(
            Action::Unlink { path },
            what(
                "removing",
                &output_parent.join(MOUNT_POINT_FILE),
                " (for mount points)",
            ),
        );
    }
    Ok(p.actions)
}

#[cfg(test)]
mod tests;
