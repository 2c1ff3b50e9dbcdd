//! Who the build user is on the host: the id maps of the sandbox's user namespace, and
//! handing host paths to the build user (see "Identity" in the sandbox's module
//! documentation; the outputs come back through `rocmx_store::tree::chown_tree`).
//!
//! Owns: the text of `uid_map`/`gid_map`, writing them from outside, handing `/build`
//! and the output's directory to the build user when the caller is root.
//!
//! Must not: choose the host ids (the caller leases them: `crate::ids`).

use std::io::{self, Write};
use std::path::Path;

use nix::unistd::Pid;

use super::{HostIds, SandboxError};

/// The id maps of the sandbox's user namespace, as written to `/proc/<pid>/uid_map` and
/// `gid_map`. The caller's own ids (an unprivileged caller): one line each, inside
/// 1000 ↦ `uid`, 100 ↦ `gid`. Host root with [`HostIds`]: also inside 0 ↦ host 0, which
/// only init uses while it assembles the root (it then becomes 1000/100 for good).
///
/// `inside` is the build user's inside uid and gid (1000/100 unless a
/// [`super::Variant`] says otherwise).
pub(super) fn id_maps(
    own: (u32, u32),
    host_ids: Option<HostIds>,
    inside: (u32, u32),
) -> (String, String) {
    let (u, g) = inside;
    match host_ids {
        None => (format!("{u} {} 1\n", own.0), format!("{g} {} 1\n", own.1)),
        Some(h) => (
            format!("0 {} 1\n{u} {} 1\n", own.0, h.uid),
            format!("0 {} 1\n{g} {} 1\n", own.1, h.gid),
        ),
    }
}

/// Writes init's id maps from outside, as `newuidmap` would: `setgroups` denied first
/// (unless `keep_setgroups`: for host root, whose init then drops its supplementary
/// groups itself), then the maps of [`id_maps`], each in one write.
pub(super) fn write_id_maps(
    pid: Pid,
    keep_setgroups: bool,
    uid_map: &str,
    gid_map: &str,
) -> Result<(), (String, io::Error)> {
    let write = |name: &str, data: &[u8], missing_ok: bool| {
        let path = format!("/proc/{pid}/{name}");
        match std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .and_then(|mut f| f.write(data))
        {
            Ok(n) if n == data.len() => Ok(()),
            Ok(_) => Err((
                format!("writing {path}"),
                io::Error::from_raw_os_error(libc::EIO),
            )),
            Err(e) if missing_ok && e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err((format!("writing {path}"), e)),
        }
    };
    if !keep_setgroups {
        write("setgroups", b"deny", true)?;
    }
    write("uid_map", uid_map.as_bytes(), false)?;
    write("gid_map", gid_map.as_bytes(), false)
}

/// Gives the directories the builder writes to (`/build`, the output's directory) to
/// the build user, before the build.
pub(super) fn hand_over(dirs: &[&Path], h: HostIds) -> Result<(), SandboxError> {
    for d in dirs {
        if let Err(e) = std::os::unix::fs::lchown(d, Some(h.uid), Some(h.gid)) {
            let what = if e.raw_os_error() == Some(libc::EINVAL) {
                format!(
                    "handing {} to the build user {}:{}, an id this user namespace does not map (in a container, give the user 'rocmx' a mapped range in /etc/subuid and /etc/subgid)",
                    d.display(),
                    h.uid,
                    h.gid
                )
            } else {
                format!("handing {} to the build user", d.display())
            };
            return Err(SandboxError::Setup(what, e));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_map_texts() {
        assert_eq!(
            id_maps((1234, 100), None, (1000, 100)),
            ("1000 1234 1\n".to_string(), "100 100 1\n".to_string())
        );
        let h = HostIds {
            uid: 872415232,
            gid: 872415233,
        };
        assert_eq!(
            id_maps((0, 0), Some(h), (1000, 100)),
            (
                "0 0 1\n1000 872415232 1\n".to_string(),
                "0 0 1\n100 872415233 1\n".to_string()
            )
        );
    }
}
