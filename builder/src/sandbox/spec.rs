//! What a caller asks the sandbox for ([`SandboxSpec`], with its [`HostIds`] and
//! [`Limits`]), and checking it before anything is made ([`SandboxSpec::check`]).
//!
//! Must not: create, mount or spawn anything (`run` does, from what `check` gives), or
//! accept a spec `run` would have to refuse halfway.

use std::collections::BTreeMap;
use std::fmt;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::unistd::{getegid, geteuid, Uid};

use super::{absolute, cstring, errno_of, plan, setup_err, variant, SandboxError, Variant};

/// What to run in the sandbox and what it may see.
pub struct SandboxSpec {
    /// The builder's inside path (it must be inside an input or the rootfs).
    pub builder: PathBuf,
    /// Arguments after `argv[0]`.
    pub args: Vec<String>,
    /// The derivation's environment; the sandbox adds the fixed variables.
    pub env: BTreeMap<String, String>,
    /// `(host path, inside path)`: bound read-only. Inside paths are absolute and
    /// normalised, and may not be under `/dev`, `/proc`, `/etc` or `/build`.
    pub inputs: Vec<(PathBuf, PathBuf)>,
    /// `(host scratch path, inside path)` of each output (at least one; the inside paths
    /// share one parent directory). A host path must not exist (its parent must); the
    /// builder creates the inside path, and the sandbox moves it to the host path after
    /// the build. See the module documentation.
    pub outputs: Vec<(PathBuf, PathBuf)>,
    /// An empty directory of the caller's, in the same directory as the outputs' host
    /// paths, to use as the staging directory instead of making one; the sandbox leaves
    /// it empty (not deleted) after the build, so a caller running many builds can
    /// reuse it. `None`: the sandbox makes and deletes its own.
    pub staging: Option<PathBuf>,
    /// Host directory bound at `/build` (writable, the working directory). It should be
    /// private to the caller (mode 0700) and deleted after the build.
    pub build_dir: PathBuf,
    /// Two directories of the caller's for the overlays' work directories, the first on
    /// `build_dir`'s filesystem, the second on the outputs' (next to them), used by one
    /// build at a time and left in place for the next; `None`: the sandbox makes and
    /// removes its own (`.rocmx-work-*`).
    pub work_dirs: Option<(PathBuf, PathBuf)>,
    /// An empty directory of the caller's (kept across builds, like `work_dirs`) for the
    /// work directory of *one* writable overlay holding both `/build` and the output's
    /// directory, instead of one overlay each: used when `build_dir` and `staging` are
    /// in the same directory, which becomes the overlay's upper layer (mounted where the
    /// builder cannot see it; only those two are bound from it), and this directory is
    /// outside it on the same filesystem. Half the overlays' cost: each mount of a
    /// writable overlay probes its work directory with a few files made and deleted,
    /// and on ext4 without a journal every inode made later searches past the deleted
    /// ones. `None`, or the conditions unmet (or a `build_on_tmpfs` variant): one
    /// overlay each, with `work_dirs` (which may name this directory too).
    pub shared_work_dir: Option<PathBuf>,
    /// Optional read-only base of `/` (a Debian-style tree); else an empty tmpfs root.
    pub rootfs: Option<PathBuf>,
    /// Keep the host's network namespace (fixed-output derivations only).
    pub network: bool,
    /// Exported as `ROCMX_BUILD_CORES`.
    pub cores: u32,
    /// Kill the build after this long.
    pub timeout: Option<Duration>,
    /// Kill the build after this long without output.
    pub max_silent: Option<Duration>,
    /// Receives the builder's stdout and stderr, merged.
    pub log: Box<dyn Write + Send>,
    /// The host ids the build user maps to. Required when the caller is root (a builder
    /// must never be host root); refused otherwise (an unprivileged caller can only map
    /// itself). See "Identity" in the module documentation.
    pub host_ids: Option<HostIds>,
    /// Processes, `/dev/shm` and disk.
    pub limits: Limits,
    /// The environment's variable parts ([`Variant::default`]: the documented sandbox).
    pub variant: Variant,
    /// Kept until the sandbox's init has been reaped, then dropped: the lease of
    /// [`Self::host_ids`], whose ids must not go to another build while a process of this
    /// one exists. `run` may return before that (see "Processes").
    pub held_until_reaped: Option<Box<dyn Send>>,
}

/// An unprivileged host uid and gid for the build user (when the caller is root).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostIds {
    pub uid: u32,
    pub gid: u32,
}

/// Resource bounds of one build. `None` is "no bound".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Limits {
    /// At most this many processes (and threads) of the build user at once
    /// (`RLIMIT_NPROC`, counted per build since each build has its own user namespace);
    /// a build that reaches it is killed.
    pub max_processes: Option<u32>,
    /// Size of the `/dev/shm` tmpfs in bytes.
    pub shm_size: Option<u64>,
    /// Disk space the build may use in `/build` plus its outputs, in bytes; checked
    /// every few seconds while the build runs.
    pub disk: Option<u64>,
}

impl fmt::Debug for SandboxSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SandboxSpec")
            .field("builder", &self.builder)
            .field("args", &self.args)
            .field("env", &self.env)
            .field("inputs", &self.inputs)
            .field("outputs", &self.outputs)
            .field("staging", &self.staging)
            .field("build_dir", &self.build_dir)
            .field("work_dirs", &self.work_dirs)
            .field("shared_work_dir", &self.shared_work_dir)
            .field("rootfs", &self.rootfs)
            .field("network", &self.network)
            .field("cores", &self.cores)
            .field("timeout", &self.timeout)
            .field("max_silent", &self.max_silent)
            .field("host_ids", &self.host_ids)
            .field("limits", &self.limits)
            .field("variant", &self.variant)
            .finish_non_exhaustive()
    }
}

/// What [`SandboxSpec::check`] found the spec to ask for, checked.
pub(super) struct Checked {
    /// `(absolute host scratch path, inside path)` of each output, in the spec's order.
    pub outputs: Vec<(PathBuf, PathBuf)>,
    /// The first output's inside path.
    pub out_inside: PathBuf,
    /// Inputs with absolute host paths and their kinds, the preloaded library last.
    pub inputs: Vec<(PathBuf, PathBuf, plan::InputKind)>,
    pub variant: Variant,
    /// `build_dir`, canonical.
    pub build_dir: PathBuf,
    /// `rootfs`, canonical.
    pub rootfs: Option<PathBuf>,
    /// The caller's effective uid, and its effective uid and gid.
    pub euid: Uid,
    pub own_ids: (u32, u32),
}

impl SandboxSpec {
    /// Checks the spec before anything is made: outputs (absolute, not existing, in one
    /// directory below `/`, none twice), inputs (valid inside paths, none twice, none
    /// overlapping an output, each existing on the host), the variant, the build
    /// directory, the rootfs, the builder's path, and the identity rules (a root caller
    /// needs `host_ids`, an unprivileged one may not give any). Every refusal is
    /// [`SandboxError::InvalidSpec`] naming what is wrong.
    pub(super) fn check(&self) -> Result<Checked, SandboxError> {
        let spec = self;
        if spec.outputs.is_empty() {
            return Err(SandboxError::InvalidSpec("no outputs".into()));
        }
        let mut outputs: Vec<(PathBuf, PathBuf)> = Vec::new();
        for (out_host, out_inside) in &spec.outputs {
            let out_host = absolute(out_host)?;
            plan::check_inside_path(out_inside, "output")?;
            if out_host.symlink_metadata().is_ok() {
                return Err(SandboxError::InvalidSpec(format!(
                    "output {} already exists on the host (the builder creates it)",
                    out_host.display()
                )));
            }
            if outputs
                .iter()
                .any(|(h, i)| *h == out_host || i == out_inside)
            {
                return Err(SandboxError::InvalidSpec(format!(
                    "output {} given twice",
                    out_inside.display()
                )));
            }
            outputs.push((out_host, out_inside.clone()));
        }
        let out_inside = outputs[0].1.clone();
        let out_parent_inside = out_inside.parent().unwrap_or(Path::new("/"));
        if out_parent_inside == Path::new("/") {
            return Err(SandboxError::InvalidSpec(format!(
                "output {}: must be below a directory such as /rocmx/store",
                out_inside.display()
            )));
        }
        if let Some((_, other)) = outputs
            .iter()
            .find(|(_, i)| i.parent() != Some(out_parent_inside))
        {
            return Err(SandboxError::InvalidSpec(format!(
                "outputs {} and {} are not in the same directory",
                out_inside.display(),
                other.display()
            )));
        }
        let mut inputs = Vec::new();
        // Inside paths already given, by bytes (they are normalised once checked, so equal
        // bytes are equal paths): comparing each with every earlier one as paths was
        // quadratic, and component-wise.
        let mut seen: std::collections::HashSet<&std::ffi::OsStr> = Default::default();
        for (src, inside) in &spec.inputs {
            plan::check_inside_path(inside, "input")?;
            if let Some((_, o)) = outputs
                .iter()
                .find(|(_, o)| inside.starts_with(o) || out_parent_inside.starts_with(inside))
            {
                return Err(SandboxError::InvalidSpec(format!(
                    "input {} overlaps the output {}",
                    inside.display(),
                    o.display()
                )));
            }
            if !seen.insert(inside.as_os_str()) {
                return Err(SandboxError::InvalidSpec(format!(
                    "input {} given twice",
                    inside.display()
                )));
            }
            let meta = std::fs::symlink_metadata(src).map_err(|e| {
                SandboxError::InvalidSpec(format!("input {}: {}", src.display(), errno_of(&e)))
            })?;
            let kind = if meta.file_type().is_symlink() {
                plan::InputKind::Symlink(
                    std::fs::read_link(src)
                        .map_err(setup_err(format!("reading {}", src.display())))?,
                )
            } else if meta.is_dir() {
                plan::InputKind::Dir
            } else {
                plan::InputKind::File
            };
            let src = absolute(src)?;
            cstring("input path", src.as_os_str().as_bytes())?;
            inputs.push((src, inside.clone(), kind));
        }
        let variant = spec.variant.clone();
        variant::check(
            &variant,
            &inputs.iter().map(|(_, i, _)| i.clone()).collect::<Vec<_>>(),
            &out_inside,
        )?;
        if let (Some(host), Some(inside)) = (&variant.preload, variant.preload_inside()) {
            if !host.is_file() {
                return Err(SandboxError::InvalidSpec(format!(
                    "preloaded library {}: not a file",
                    host.display()
                )));
            }
            inputs.push((absolute(host)?, inside, plan::InputKind::File));
        }
        let build_dir = std::fs::canonicalize(&spec.build_dir).map_err(|e| {
            SandboxError::InvalidSpec(format!(
                "build directory {}: {}",
                spec.build_dir.display(),
                errno_of(&e)
            ))
        })?;
        let rootfs = match &spec.rootfs {
            Some(r) => Some(std::fs::canonicalize(r).map_err(|e| {
                SandboxError::InvalidSpec(format!("rootfs {}: {}", r.display(), errno_of(&e)))
            })?),
            None => None,
        };
        if !spec.builder.is_absolute() {
            return Err(SandboxError::InvalidSpec(format!(
                "builder {}: not an absolute path",
                spec.builder.display()
            )));
        }

        let euid = geteuid();
        let own_ids = (euid.as_raw(), getegid().as_raw());
        match spec.host_ids {
            None if euid.is_root() => return Err(SandboxError::InvalidSpec(
                "rocmx runs as root: the build needs an unprivileged host uid and gid (host_ids)"
                    .into(),
            )),
            Some(h) if !euid.is_root() => {
                return Err(SandboxError::InvalidSpec(format!(
                    "host ids {}:{} need root (an unprivileged caller builds as itself)",
                    h.uid, h.gid
                )))
            }
            Some(h) if h.uid == 0 || h.gid == 0 => {
                return Err(SandboxError::InvalidSpec(
                    "the build user must not be host root (host_ids 0)".into(),
                ))
            }
            _ => {}
        }
        Ok(Checked {
            outputs,
            out_inside,
            inputs,
            variant,
            build_dir,
            rootfs,
            euid,
            own_ids,
        })
    }
}
