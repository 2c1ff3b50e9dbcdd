//! The planner's steps: how one piece of the new root (a directory, a bind, an
//! overlay, a generated file, the protected `/proc`, a `rootfs` entry) becomes
//! actions, and the paths and flags they are written with.
//!
//! Owns: [`Planner`] (the action list being built and the inside directories made so
//! far: each directory is made once, parents first), the conversion of inside paths to
//! the paths init uses ([`in_root`]: relative to the new root) and to C strings, the
//! wording of the actions' error messages ([`what`]), and the mount flags of inputs and
//! writable directories ([`ro_flags`], [`rw_flags`]).
//!
//! Must not: decide what the root holds or in which order its parts are assembled
//! ([`super::build`] does); run anything (the plan is computed before forking, the
//! actions performed by `child.rs`).

use std::collections::HashSet;
use std::ffi::{CString, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use nix::mount::MsFlags;

use super::{
    Action, InputKind, PlannedAction, SharedRw, LOWER_DIR, PROC_MASKED_DIRS, PROC_MASKED_FILES,
    PROC_READ_ONLY, RW_DIR,
};
use crate::sandbox::SandboxError;

pub(super) fn cstr(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).expect("paths were checked for NUL bytes")
}

pub(super) fn cstr_bytes(b: &[u8]) -> CString {
    CString::new(b).expect("no NUL byte")
}

/// The path by which init reaches the inside path `inside` while it assembles the new
/// root: relative, since its working directory is then the new root's tmpfs
/// ([`Action::EnterRoot`]). An absolute path below the root's mount point would do as
/// well, but the kernel walks every component of a path for each call, and the
/// mount point's are many (`<store>/var/rocmx/builds/<pid>-<n>/rw/stage/...`): those
/// walks were 5 % of the CPU time of a chain of trivial builds.
pub(super) fn in_root(inside: &Path) -> PathBuf {
    match inside.strip_prefix("/") {
        Ok(rest) if !rest.as_os_str().is_empty() => rest.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

pub(super) fn what(verb: &str, inside: &Path, rest: &str) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(verb.as_bytes());
    v.push(b' ');
    v.extend_from_slice(inside.as_os_str().as_bytes());
    v.extend_from_slice(rest.as_bytes());
    v
}

pub(super) struct Planner {
    pub(super) actions: Vec<PlannedAction>,
    /// The inside directories made so far. Inside paths are normalised
    /// ([`check_inside_path`]), so their bytes compare as the paths do, and
    /// cheaper: `Path`'s own comparison walks components.
    ///
    /// [`check_inside_path`]: super::check_inside_path
    pub(super) dirs: HashSet<OsString>,
}

impl Planner {
    pub(super) fn push(&mut self, action: Action, what: Vec<u8>) {
        self.actions.push(PlannedAction { action, what });
    }

    /// `mkdir -p` of the inside directory `inside` (each missing component once).
    pub(super) fn mkdir_p(&mut self, inside: &Path, mode: u32) {
        let mut acc = PathBuf::from("/");
        for c in inside.components() {
            if let Component::Normal(s) = c {
                acc.push(s);
                if self.dirs.insert(acc.as_os_str().to_owned()) {
                    let path = cstr(&in_root(&acc));
                    self.push(Action::Mkdir { path, mode }, what("creating", &acc, ""));
                }
            }
        }
    }

    fn mkdir_parent(&mut self, inside: &Path) {
        if let Some(parent) = inside.parent() {
            self.mkdir_p(parent, 0o755);
        }
    }

    /// Binds `source` at `inside` (creating the mount point for a directory or a file;
    /// for a file, as a hard link to `link_to` if given).
    pub(super) fn bind(
        &mut self,
        source: &Path,
        inside: &Path,
        is_dir: bool,
        flags: MsFlags,
        desc: &str,
        link_to: Option<&CString>,
    ) {
        self.bind_via(source, None, inside, is_dir, flags, desc, link_to)
    }

    /// Like [`Planner::bind`], from `via` (a host path in a mount that has `flags`
    /// already) if given.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn bind_via(
        &mut self,
        source: &Path,
        via: Option<&Path>,
        inside: &Path,
        is_dir: bool,
        flags: MsFlags,
        desc: &str,
        link_to: Option<&CString>,
    ) {
        self.mkdir_parent(inside);
        let target = cstr(&in_root(inside));
        if is_dir {
            self.mkdir_p(inside, 0o755);
        } else if let Some(t) = link_to {
            self.push(
                Action::Link {
                    target: t.clone(),
                    path: target.clone(),
                },
                what("creating mount point", inside, ""),
            );
        } else {
            self.push(
                Action::Touch {
                    path: target.clone(),
                },
                what("creating mount point", inside, ""),
            );
        }
        self.bind_onto(source, via, inside, flags, desc);
    }

    /// The bind of [`Planner::bind_via`] alone, onto a mount point that exists.
    pub(super) fn bind_onto(
        &mut self,
        source: &Path,
        via: Option<&Path>,
        inside: &Path,
        flags: MsFlags,
        desc: &str,
    ) {
        let target = cstr(&in_root(inside));
        let action = match via {
            Some(v) => Action::BindFrom {
                source: cstr(v),
                target,
                fallback: cstr(source),
                flags,
            },
            None => Action::Bind {
                source: cstr(source),
                target,
                flags,
            },
        };
        self.push(action, what("binding", inside, desc));
    }

    /// A writable overlay at `inside` with the host directory `upper` as its upper
    /// layer (see [`Action::OverlayRw`]).
    pub(super) fn overlay_rw(
        &mut self,
        upper: &Path,
        work: &Path,
        empty: &Path,
        inside: &Path,
        desc: &str,
    ) {
        self.mkdir_p(inside, 0o755);
        self.push(
            Action::OverlayRw {
                upper: cstr(upper),
                work: cstr(work),
                empty: cstr(&in_root(empty)),
                target: cstr(&in_root(inside)),
                flags: rw_flags(),
                fallback: Vec::new(),
            },
            what("mounting", inside, desc),
        );
    }

    /// Makes in [`LOWER_DIR`], below `under` (an inside path in it), the mount points
    /// of `entries` (symlinks for symlink inputs). Returns the actions that make the
    /// same entries at their own inside paths, for when the overlay over it cannot be
    /// mounted.
    fn lower_mount_points(&mut self, under: &Path, entries: &[(&Path, &InputKind)]) -> Vec<Action> {
        self.mkdir_p(under, 0o755);
        let mut fallback = Vec::new();
        for (input, kind) in entries {
            let Some(name) = input.file_name() else {
                continue;
            };
            let in_lower = cstr(&in_root(&under.join(name)));
            let at_target = cstr(&in_root(input));
            let (action, instead, verb) = match kind {
                InputKind::Dir => (
                    Action::Mkdir {
                        path: in_lower,
                        mode: 0o755,
                    },
                    Action::Mkdir {
                        path: at_target,
                        mode: 0o755,
                    },
                    "creating mount point",
                ),
                InputKind::File => (
                    Action::Touch { path: in_lower },
                    Action::Touch { path: at_target },
                    "creating mount point",
                ),
                InputKind::Symlink(t) => {
                    let t = cstr(t);
                    (
                        Action::Symlink {
                            target: t.clone(),
                            path: in_lower,
                        },
                        Action::Symlink {
                            target: t,
                            path: at_target,
                        },
                        "creating symlink",
                    )
                }
            };
            self.push(action, what(verb, input, " (in the overlay's lower layer)"));
            fallback.push(instead);
        }
        fallback
    }

    /// The output directory's writable overlay (see [`Planner::overlay_rw`]) over
    /// [`LOWER_DIR`], which holds `entries`' mount points (symlinks for symlink inputs).
    pub(super) fn overlay_rw_over_mount_points(
        &mut self,
        upper: &Path,
        work: &Path,
        inside: &Path,
        entries: &[(&Path, &InputKind)],
    ) {
        let lower = Path::new("/").join(LOWER_DIR);
        let fallback = self.lower_mount_points(&lower, entries);
        self.mkdir_p(inside, 0o755);
        self.push(
            Action::OverlayRw {
                upper: cstr(upper),
                work: cstr(work),
                empty: cstr(&in_root(&lower)),
                target: cstr(&in_root(inside)),
                flags: rw_flags(),
                fallback,
            },
            what("mounting", inside, " (the output's directory)"),
        );
    }

    /// `/build` (at `top`) and the output's directory (at `output_parent`) bound from
    /// one writable overlay of their common host directory ([`SharedRw`]), whose lower
    /// layer holds the mount points of `entries` (the inputs beside the output) or is
    /// `empty`. Without overlays: binds of `build_dir` and `output_parent_host`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn shared_overlay(
        &mut self,
        sh: &SharedRw,
        top: &Path,
        output_parent: &Path,
        entries: &[(&Path, &InputKind)],
        empty: &Path,
        build_dir: &Path,
        output_parent_host: &Path,
    ) {
        let (lower, fallback) = if entries.is_empty() {
            (empty.to_path_buf(), Vec::new())
        } else {
            let lower = Path::new("/").join(LOWER_DIR);
            let fallback = self.lower_mount_points(&lower.join(&sh.stage_sub), entries);
            (lower, fallback)
        };
        let rw = Path::new("/").join(RW_DIR);
        self.mkdir_p(&rw, 0o755);
        self.mkdir_p(top, 0o755);
        self.mkdir_p(output_parent, 0o755);
        let below = |sub: &Path| cstr(&in_root(&rw.join(sub)));
        let binds = vec![
            (below(&sh.build_sub), cstr(&in_root(top)), cstr(build_dir)),
            (
                below(&sh.stage_sub),
                cstr(&in_root(output_parent)),
                cstr(output_parent_host),
            ),
        ];
        self.push(
            Action::SharedOverlay {
                upper: cstr(&sh.upper),
                work: cstr(&sh.work),
                lower: cstr(&in_root(&lower)),
                target: cstr(&in_root(&rw)),
                flags: rw_flags(),
                binds,
                fallback,
            },
            what(
                "mounting",
                top,
                &format!(
                    " and {} (the build and output directories, one overlay)",
                    output_parent.display()
                ),
            ),
        );
    }

    pub(super) fn symlink(&mut self, target: &[u8], inside: &Path) {
        self.mkdir_parent(inside);
        self.push(
            Action::Symlink {
                target: cstr_bytes(target),
                path: cstr(&in_root(inside)),
            },
            what("creating symlink", inside, ""),
        );
    }

    pub(super) fn write_file(&mut self, inside: &Path, data: &[u8]) {
        self.mkdir_parent(inside);
        self.push(
            Action::WriteFile {
                path: cstr(&in_root(inside)),
                data: data.to_vec(),
            },
            what("writing", inside, ""),
        );
    }

    pub(super) fn mount(
        &mut self,
        fstype: &str,
        inside: &Path,
        flags: MsFlags,
        data: Option<&str>,
    ) {
        self.mkdir_p(inside, 0o755);
        self.push(
            Action::Mount {
                source: cstr_bytes(fstype.as_bytes()),
                target: cstr(&in_root(inside)),
                fstype: cstr_bytes(fstype.as_bytes()),
                flags,
                data: data.map(|d| cstr_bytes(d.as_bytes())),
                proc: fstype == "proc",
            },
            what("mounting", inside, &format!(" ({fstype})")),
        );
    }

    /// Makes the kernel's writable interfaces under the fresh `/proc` read-only and hides
    /// the files that show kernel memory or every key and timer of the host, as container
    /// runtimes do ([`PROC_READ_ONLY`], [`PROC_MASKED_FILES`], [`PROC_MASKED_DIRS`]).
    /// Only entries that exist in the host's `/proc` (the same kernel) are planned.
    /// `host_proc` is where to look (a test may pass another directory).
    pub(super) fn protect_proc(&mut self, host_proc: &Path) {
        let ro = MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
        for name in PROC_READ_ONLY {
            if host_proc.join(name).symlink_metadata().is_err() {
                continue;
            }
            let target = cstr(&in_root(&Path::new("/proc").join(name)));
            self.push(
                Action::Bind {
                    source: target.clone(),
                    target,
                    flags: ro,
                },
                what("making read-only", &Path::new("/proc").join(name), ""),
            );
        }
        for name in PROC_MASKED_FILES {
            if !host_proc.join(name).is_file() {
                continue;
            }
            self.push(
                Action::Bind {
                    source: cstr_bytes(b"/dev/null"),
                    target: cstr(&in_root(&Path::new("/proc").join(name))),
                    // Not nodev: /dev/null must stay openable.
                    flags: MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
                },
                what("hiding", &Path::new("/proc").join(name), ""),
            );
        }
        for name in PROC_MASKED_DIRS {
            if !host_proc.join(name).is_dir() {
                continue;
            }
            self.push(
                Action::Mount {
                    source: cstr_bytes(b"tmpfs"),
                    target: cstr(&in_root(&Path::new("/proc").join(name))),
                    fstype: cstr_bytes(b"tmpfs"),
                    flags: ro,
                    data: Some(cstr_bytes(b"size=0,mode=0555")),
                    proc: false,
                },
                what("hiding", &Path::new("/proc").join(name), ""),
            );
        }
    }

    /// Binds one entry of a `rootfs` directory (read-only), or recreates its symlink.
    pub(super) fn rootfs_entry(
        &mut self,
        source: &Path,
        via: Option<&Path>,
        inside: &Path,
    ) -> Result<(), SandboxError> {
        let meta = std::fs::symlink_metadata(source)
            .map_err(|e| SandboxError::Setup(format!("reading {}", source.display()), e))?;
        let ft = meta.file_type();
        if ft.is_symlink() {
            let target = std::fs::read_link(source)
                .map_err(|e| SandboxError::Setup(format!("reading {}", source.display()), e))?;
            self.symlink(target.as_os_str().as_bytes(), inside);
        } else if ft.is_dir() || ft.is_file() {
            self.bind_via(
                source,
                via,
                inside,
                ft.is_dir(),
                ro_flags(),
                " from the rootfs read-only",
                None,
            );
        }
        // Sockets, fifos and device nodes of a rootfs are not carried over.
        Ok(())
    }
}

/// Read-only, no setuid, no devices: inputs and the rootfs.
pub(super) fn ro_flags() -> MsFlags {
    MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV
}

/// Writable, but no setuid and no devices: `/build` and the output's directory.
pub(super) fn rw_flags() -> MsFlags {
    MsFlags::MS_NOSUID | MsFlags::MS_NODEV
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_is_protected() {
        let fake = tempfile::tempdir().unwrap();
        for d in ["sys", "irq", "acpi"] {
            std::fs::create_dir(fake.path().join(d)).unwrap();
        }
        for f in ["sysrq-trigger", "keys", "kcore"] {
            std::fs::write(fake.path().join(f), "").unwrap();
        }
        let mut p = Planner {
            actions: Vec::new(),
            dirs: Default::default(),
        };
        p.protect_proc(fake.path());
        let got: Vec<String> = p
            .actions
            .iter()
            .map(|a| String::from_utf8_lossy(&a.what).into_owned())
            .collect();
        assert_eq!(
            got,
            [
                "making read-only /proc/sys",
                "making read-only /proc/sysrq-trigger",
                "making read-only /proc/irq",
                "hiding /proc/kcore",
                "hiding /proc/keys",
                "hiding /proc/acpi",
            ]
        );
        let ro = MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
        match &p.actions[0].action {
            Action::Bind {
                source,
                target,
                flags,
            } => {
                assert_eq!(source.to_str().unwrap(), "proc/sys");
                assert_eq!(target, source);
                assert_eq!(*flags, ro);
            }
            other => panic!("unexpected {other:?}"),
        }
        match &p.actions[4].action {
            Action::Bind { source, flags, .. } => {
                assert_eq!(source.to_str().unwrap(), "/dev/null");
                assert!(
                    !flags.contains(MsFlags::MS_NODEV),
                    "/dev/null must stay openable"
                );
                assert!(flags.contains(MsFlags::MS_RDONLY));
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(
            matches!(&p.actions[5].action, Action::Mount { flags, .. } if flags.contains(MsFlags::MS_RDONLY))
        );
    }
}
