//! The mounts init makes while it assembles the new root: each planned [`Action`]
//! carried out with raw syscalls (binds, read-only remounts that keep the flags the
//! kernel locks, overlays with their fallbacks, recursive mount attributes, generated
//! files); `pivot_root` and what follows it stay in init.
//!
//! Runs in init, between `clone` and `exec`, like the rest of [`super`]: raw syscalls on
//! data the parent prepared, no allocation, no locks, no `std::io`. Must not: decide
//! what is mounted where (the plan, `super::super::plan`, did), or report errors itself
//! (they go back to init, which sends them on the status pipe).

use std::ffi::CStr;

use nix::errno::Errno;
use nix::fcntl::{open, OFlag};
use nix::mount::{mount, umount2, MntFlags, MsFlags};
use nix::sys::stat::Mode;
use nix::unistd::{chdir, mkdir};

use crate::sandbox::plan::Action;

/// Reads the flags the kernel locks on the mount at `path` (a user namespace may not
/// clear them when remounting a bind mount).
fn locked_flags(path: &CStr) -> Result<MsFlags, Errno> {
    // SAFETY: `statvfs` is plain old data, valid when zeroed.
    let mut sfs: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `path` is NUL-terminated and `sfs` a valid out-pointer. glibc fills
    // `f_flag` from statfs(2)'s `f_flags` (kernels since 2.6.36), without reading files.
    let r = unsafe { libc::statvfs(path.as_ptr(), &mut sfs) };
    Errno::result(r)?;
    let f = sfs.f_flag;
    let mut out = MsFlags::empty();
    for (st, ms) in [
        (libc::ST_NOSUID, MsFlags::MS_NOSUID),
        (libc::ST_NODEV, MsFlags::MS_NODEV),
        (libc::ST_NOEXEC, MsFlags::MS_NOEXEC),
        (libc::ST_NOATIME, MsFlags::MS_NOATIME),
        (libc::ST_NODIRATIME, MsFlags::MS_NODIRATIME),
        (libc::ST_RELATIME, MsFlags::MS_RELATIME),
        (libc::ST_RDONLY, MsFlags::MS_RDONLY),
    ] {
        if f & st != 0 {
            out |= ms;
        }
    }
    Ok(out)
}

/// Creates an empty file (an existing one is fine).
fn touch(path: &CStr) -> Result<(), Errno> {
    let fd = open(
        path,
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_CLOEXEC,
        Mode::from_bits_truncate(0o644),
    )?;
    drop(fd);
    Ok(())
}

/// Carries out one step of the plan.
pub(super) fn run_action(a: &Action) -> Result<(), Errno> {
    match a {
        Action::Mkdir { path, mode } => {
            match mkdir(path.as_c_str(), Mode::from_bits_truncate(*mode)) {
                Ok(()) | Err(Errno::EEXIST) => Ok(()),
                Err(e) => Err(e),
            }
        }
        Action::Touch { path } => touch(path),
        Action::Link { target, path } => {
            match nix::unistd::linkat(
                nix::fcntl::AT_FDCWD,
                target.as_c_str(),
                nix::fcntl::AT_FDCWD,
                path.as_c_str(),
                nix::fcntl::AtFlags::empty(),
            ) {
                Ok(()) | Err(Errno::EEXIST) => Ok(()),
                // No hard links here (another mount, a filesystem without them...).
                Err(_) => touch(path),
            }
        }
        Action::Unlink { path } => match nix::unistd::unlink(path.as_c_str()) {
            Ok(()) | Err(Errno::ENOENT) => Ok(()),
            Err(e) => Err(e),
        },
        Action::Symlink { target, path } => {
            nix::unistd::symlinkat(target.as_c_str(), nix::fcntl::AT_FDCWD, path.as_c_str())
        }
        Action::WriteFile { path, data } => {
            let fd = open(
                path.as_c_str(),
                OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_TRUNC | OFlag::O_CLOEXEC,
                Mode::from_bits_truncate(0o644),
            )?;
            let mut rest: &[u8] = data;
            while !rest.is_empty() {
                match nix::unistd::write(&fd, rest) {
                    Ok(n) => rest = &rest[n..],
                    Err(Errno::EINTR) => {}
                    Err(e) => return Err(e),
                }
            }
            Ok(())
        }
        Action::Mount {
            source,
            target,
            fstype,
            flags,
            data,
            ..
        } => mount(
            Some(source.as_c_str()),
            target.as_c_str(),
            Some(fstype.as_c_str()),
            *flags,
            data.as_deref(),
        ),
        Action::Bind {
            source,
            target,
            flags,
        } => bind(source, target, *flags),
        Action::BindFrom {
            source,
            target,
            fallback,
            flags,
        } => {
            // One mount: the copy keeps the read-only, nosuid, nodev flags of the mount it
            // is taken from. If that fails (mounts below the input), the usual way.
            match mount(
                Some(source.as_c_str()),
                target.as_c_str(),
                None::<&CStr>,
                MsFlags::MS_BIND,
                None::<&CStr>,
            ) {
                Ok(()) => Ok(()),
                Err(_) => bind(fallback, target, *flags),
            }
        }
        Action::Overlay {
            lower,
            empty,
            target,
        } => {
            let ro = MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV;
            let layers: [(&[u8], &CStr); 2] = [(b"lowerdir", lower), (b"lowerdir", empty)];
            match overlay(&layers, b"", target, ro) {
                Ok(()) => Ok(()),
                // No overlays here (an old kernel, a policy): the plain bind.
                Err(_) => bind(lower, target, ro),
            }
        }
        Action::OverlayRw {
            upper,
            work,
            empty,
            target,
            flags,
            fallback,
        } => {
            match overlay_rw(empty, upper, work, target, *flags) {
                Ok(()) => Ok(()),
                Err(_) => {
                    bind(upper, target, *flags)?;
                    // The mount points the lower layer would have shown.
                    fallback.iter().try_for_each(run_action)
                }
            }
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
            match overlay_rw(lower, upper, work, target, *flags) {
                Ok(()) => {
                    // Plain binds: each keeps the overlay's flags. The overlay itself
                    // goes with the scratch tmpfs it is mounted in.
                    for (source, to, _) in binds {
                        mount(
                            Some(source.as_c_str()),
                            to.as_c_str(),
                            None::<&CStr>,
                            MsFlags::MS_BIND,
                            None::<&CStr>,
                        )?;
                    }
                    Ok(())
                }
                Err(_) => {
                    for (_, to, source) in binds {
                        bind(source, to, *flags)?;
                    }
                    // The mount points the lower layer would have shown.
                    fallback.iter().try_for_each(run_action)
                }
            }
        }
        Action::Chown { path, uid, gid } => nix::unistd::chown(
            path.as_c_str(),
            Some(nix::unistd::Uid::from_raw(*uid)),
            Some(nix::unistd::Gid::from_raw(*gid)),
        ),
        Action::Umount { path } => umount2(path.as_c_str(), MntFlags::MNT_DETACH),
        Action::EnterRoot { path } => chdir(path.as_c_str()),
        Action::Rmdir { path } => nix::unistd::unlinkat(
            nix::fcntl::AT_FDCWD,
            path.as_c_str(),
            nix::unistd::UnlinkatFlags::RemoveDir,
        ),
    }
}

/// Mounts an overlay at `target` from layers named `/proc/self/fd/N` (see
/// [`Action::Overlay`] and [`Action::OverlayRw`]): `key=dir` pairs of `layers` become
/// `key=/proc/self/fd/N` options; a second `lowerdir` is appended to the first with `:`;
/// `extra` (`,option`…) follows them.
/// No allocation: descriptors live on the stack, the options in a stack buffer.
fn overlay(
    layers: &[(&[u8], &CStr)],
    extra: &[u8],
    target: &CStr,
    flags: MsFlags,
) -> Result<(), Errno> {
    use std::os::fd::{AsRawFd, OwnedFd};
    let dir = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    let mut fds: [Option<OwnedFd>; 4] = [None, None, None, None];
    let mut buf = [0u8; 160];
    let mut len = 0;
    let mut put = |bytes: &[u8], len: &mut usize| {
        let end = (*len + bytes.len()).min(buf.len() - 1);
        buf[*len..end].copy_from_slice(&bytes[..end - *len]);
        *len = end;
    };
    let mut last_key: &[u8] = b"";
    for (i, (key, path)) in layers.iter().enumerate().take(fds.len()) {
        let fd = open(*path, dir, Mode::empty())?;
        let n = fd.as_raw_fd().max(0) as u32;
        fds[i] = Some(fd);
        if *key == last_key {
            put(b":", &mut len);
        } else {
            if len > 0 {
                put(b",", &mut len);
            }
            put(key, &mut len);
            put(b"=", &mut len);
        }
        last_key = key;
        put(b"/proc/self/fd/", &mut len);
        let mut digits = [0u8; 10];
        let mut i = digits.len();
        let mut n = n;
        loop {
            i -= 1;
            digits[i] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        put(&digits[i..], &mut len);
    }
    put(extra, &mut len);
    let data = CStr::from_bytes_until_nul(&buf).map_err(|_| Errno::EINVAL)?;
    let r = mount(Some(c"rocmx"), target, Some(c"overlay"), flags, Some(data));
    drop(fds);
    r
}

/// A writable overlay at `target`: one lower layer, an upper layer and its work
/// directory (see [`overlay`]). With `userxattr` (Linux 5.11 and later): in a user
/// namespace the kernel cannot write the `trusted.overlay.*` attributes it would keep
/// in the upper layer, so without it every mount fails to, falls back (no redirects,
/// no uuid) and logs four warnings to the kernel log — four lines per build. Where the
/// option is unknown (`EINVAL`), mounted again without it.
fn overlay_rw(
    lower: &CStr,
    upper: &CStr,
    work: &CStr,
    target: &CStr,
    flags: MsFlags,
) -> Result<(), Errno> {
    let layers: [(&[u8], &CStr); 3] = [
        (b"lowerdir", lower),
        (b"upperdir", upper),
        (b"workdir", work),
    ];
    match overlay(&layers, b",userxattr", target, flags) {
        Err(Errno::EINVAL) => overlay(&layers, b"", target, flags),
        r => r,
    }
}

/// A bind mount of `source` at `target`, then a remount adding `flags` (and keeping the
/// flags the kernel locks on the source).
fn bind(source: &CStr, target: &CStr, flags: MsFlags) -> Result<(), Errno> {
    let bind = |extra: MsFlags| {
        mount(
            Some(source),
            target,
            None::<&CStr>,
            MsFlags::MS_BIND | extra,
            None::<&CStr>,
        )
    };
    // A user namespace may not bind a mount without the mounts below it that it
    // inherited (they are locked: EINVAL); then bind the whole tree.
    let recursive = match bind(MsFlags::empty()) {
        Ok(()) => false,
        Err(Errno::EINVAL) => {
            bind(MsFlags::MS_REC)?;
            true
        }
        Err(e) => return Err(e),
    };
    let keep = locked_flags(target)?;
    mount(
        None::<&CStr>,
        target,
        None::<&CStr>,
        MsFlags::MS_REMOUNT | MsFlags::MS_BIND | flags | keep,
        None::<&CStr>,
    )?;
    if recursive {
        set_attr_recursive(target, flags)?;
    }
    Ok(())
}

/// `struct mount_attr` of mount_setattr(2).
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// Applies read-only / nosuid / nodev to every mount below `target` (Linux ≥ 5.12; on
/// older kernels only the top mount gets them).
fn set_attr_recursive(target: &CStr, flags: MsFlags) -> Result<(), Errno> {
    let mut set = 0u64;
    if flags.contains(MsFlags::MS_RDONLY) {
        set |= 0x1; // MOUNT_ATTR_RDONLY
    }
    if flags.contains(MsFlags::MS_NOSUID) {
        set |= 0x2; // MOUNT_ATTR_NOSUID
    }
    if flags.contains(MsFlags::MS_NODEV) {
        set |= 0x4; // MOUNT_ATTR_NODEV
    }
    let attr = MountAttr {
        attr_set: set,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: mount_setattr(AT_FDCWD, path, AT_RECURSIVE, &attr, sizeof attr) with a
    // NUL-terminated path and a properly sized, initialised struct.
    let r = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            target.as_ptr(),
            libc::AT_RECURSIVE as libc::c_uint,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    match Errno::result(r) {
        Ok(_) | Err(Errno::ENOSYS) => Ok(()),
        Err(e) => Err(e),
    }
}
