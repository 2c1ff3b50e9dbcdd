//! The actions of the mount plan: what the sandbox's pid 1 can be asked to do while it
//! assembles the new root, as data.
//!
//! Owns: [`Action`] (each step, its paths and mount data as ready C strings, with what
//! to do when overlays cannot be mounted) and [`PlannedAction`] (an action and what to
//! call it in an error message).
//!
//! Must not: decide what the root holds (the plan in [`super`] does) or perform an
//! action (`child.rs` does, after `clone`: so nothing here may need allocating or
//! reading anything to be carried out).

use std::ffi::CString;

use nix::mount::MsFlags;

/// One thing pid 1 does while assembling the new root (before `pivot_root`). A path
/// below the new root is relative to it (init's working directory after
/// [`Action::EnterRoot`]); a host path elsewhere is absolute.
#[derive(Debug)]
pub(in crate::sandbox) enum Action {
    /// `mkdir`; an existing directory is fine.
    Mkdir { path: CString, mode: u32 },
    /// Creates an empty file to bind a file onto (an existing one is fine).
    Touch { path: CString },
    /// A mount point for a file as a hard link to `target` (an empty file made by a
    /// `Touch`): no new inode, which on some filesystems (ext4 without a journal) costs
    /// more than the mount. Falls back to a `Touch` of `path` if linking fails.
    Link { target: CString, path: CString },
    /// `unlink`s a file (a missing one is fine).
    Unlink { path: CString },
    /// `symlink(target, path)`.
    Symlink { target: CString, path: CString },
    /// Writes a generated file (mode 0644).
    WriteFile { path: CString, data: Vec<u8> },
    /// `mount(source, target, fstype, flags, data)`.
    Mount {
        source: CString,
        target: CString,
        fstype: CString,
        flags: MsFlags,
        data: Option<CString>,
        proc: bool,
    },
    /// A non-recursive bind mount, then a remount adding `flags` (plus the flags the
    /// kernel locks on the source mount, which a user namespace may not clear).
    Bind {
        source: CString,
        target: CString,
        flags: MsFlags,
    },
    /// A bind mount of `source`, which lies in a mount that already has the wanted flags
    /// (it keeps them: one mount instead of a bind, a remount and a statfs); if that
    /// fails, a [`Action::Bind`] of `fallback` with `flags`.
    BindFrom {
        source: CString,
        target: CString,
        fallback: CString,
        flags: MsFlags,
    },
    /// Mounts a read-only overlay of the host directory `lower` (over the empty
    /// directory `empty`) at `target`, naming both layers by descriptor
    /// (`lowerdir=/proc/self/fd/N:/proc/self/fd/M`), so that no host path shows in
    /// `/proc/self/mountinfo`; if overlays cannot be mounted, a read-only bind of
    /// `lower` instead.
    Overlay {
        lower: CString,
        empty: CString,
        target: CString,
    },
    /// Mounts a writable overlay at `target` whose upper layer is the host directory
    /// `upper` (work directory `work`, lower layer `empty`: an empty directory, or the
    /// [`LOWER_DIR`] tmpfs holding mount points), all named by descriptor; if overlays
    /// cannot be mounted, a plain bind of `upper` with `flags`, then the `fallback`
    /// actions (the mount points the lower layer would have shown, made in `target`).
    ///
    /// [`LOWER_DIR`]: super::LOWER_DIR
    OverlayRw {
        upper: CString,
        work: CString,
        empty: CString,
        target: CString,
        flags: MsFlags,
        fallback: Vec<Action>,
    },
    /// Mounts a writable overlay at `target` (upper layer `upper`, work directory `work`,
    /// lower layer `lower`, named by descriptor) and binds each `(source below target,
    /// destination)` of `binds` from it (the binds keep its flags); it goes when the
    /// scratch tmpfs it is mounted in ([`RW_DIR`]) is detached. If
    /// overlays cannot be mounted: a [`Action::Bind`] of each fallback source (the
    /// third element) with `flags` instead, then the `fallback` actions.
    ///
    /// [`RW_DIR`]: super::RW_DIR
    SharedOverlay {
        upper: CString,
        work: CString,
        lower: CString,
        target: CString,
        flags: MsFlags,
        binds: Vec<(CString, CString, CString)>,
        fallback: Vec<Action>,
    },
    /// `chown(path, uid, gid)` with inside ids (a directory init made for the build user).
    Chown { path: CString, uid: u32, gid: u32 },
    /// Detaches the mount at `path`.
    Umount { path: CString },
    /// Removes the empty directory `path`.
    Rmdir { path: CString },
    /// Makes `path` (the new root's mount point, whose tmpfs is now mounted) the
    /// working directory: every later path of the plan is relative to it.
    EnterRoot { path: CString },
}

/// An action and what to call it in an error message ("mounting /proc").
#[derive(Debug)]
pub(in crate::sandbox) struct PlannedAction {
    pub action: Action,
    pub what: Vec<u8>,
}
