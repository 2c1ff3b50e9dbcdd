//! Host ids for builds when rocmx runs as root: a build must never run as host root,
//! so each one gets an unprivileged uid and gid of its own, leased for its duration.
//!
//! Owns: the id range ([`IdRange`]: `/etc/subuid` / `/etc/subgid` entries of a user
//! named `rocmx`, else the automatic range) and leasing one id per concurrent build
//! across every rocmx process on the store ([`IdLease`]).
//!
//! Must not: create users, write `/etc/subuid`, or hand out id 0.
//!
//! # The range
//!
//! As Nix's `auto-allocate-uids` does, no user accounts are needed: the ids only have
//! to be unused on the host. With lines such as
//!
//! ```text
//! rocmx:200000:65536        (in /etc/subuid)
//! rocmx:200000:65536        (in /etc/subgid)
//! ```
//!
//! builds take uids and gids from 200000 on; without them, from 872415232
//! (`0x34000000`, Nix's default start) for 65536 ids. Build slot `n` is uid
//! `first_uid + n`, gid `first_gid + n`.
//!
//! # Leases
//!
//! One lock file per store, `<state>/build-ids.lock`: a lease holds an open file
//! description's write lock (`F_OFD_SETLK`) on byte `n` of it. Locks of open file
//! descriptions conflict between processes and between threads of one process alike,
//! and the kernel drops them when the process dies, so a crash never leaks an id.

use std::fs::File;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::sandbox::HostIds;

/// Nix's default first automatically allocated id.
pub const AUTO_FIRST: u32 = 872_415_232;
/// How many ids the automatic range has.
pub const AUTO_COUNT: u32 = 65_536;
/// The user whose subordinate ids builds use, when it has some.
pub const SUBID_USER: &str = "rocmx";

/// The ids builds may use (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdRange {
    pub first_uid: u32,
    pub first_gid: u32,
    pub count: u32,
}

impl Default for IdRange {
    /// The automatic range.
    fn default() -> IdRange {
        IdRange {
            first_uid: AUTO_FIRST,
            first_gid: AUTO_FIRST,
            count: AUTO_COUNT,
        }
    }
}

impl IdRange {
    /// The range of this machine: `rocmx`'s entries in `/etc/subuid` and `/etc/subgid`
    /// when both exist, else the automatic range.
    pub fn of_host() -> IdRange {
        let read = |f: &str| std::fs::read_to_string(f).ok();
        IdRange::from_subid_files(
            read("/etc/subuid").as_deref(),
            read("/etc/subgid").as_deref(),
        )
    }

    /// The range given the texts of `/etc/subuid` and `/etc/subgid`.
    pub fn from_subid_files(subuid: Option<&str>, subgid: Option<&str>) -> IdRange {
        match (
            subuid.and_then(|t| subid_entry(t, SUBID_USER)),
            subgid.and_then(|t| subid_entry(t, SUBID_USER)),
        ) {
            (Some((u, un)), Some((g, gn))) => IdRange {
                first_uid: u,
                first_gid: g,
                count: un.min(gn),
            },
            _ => IdRange::default(),
        }
    }
}

/// The first usable `(start, count)` line for `user` in a subuid/subgid text
/// (`name:start:count`), skipping lines that would include id 0 or overflow.
pub fn subid_entry(text: &str, user: &str) -> Option<(u32, u32)> {
    text.lines().find_map(|line| {
        let mut parts = line.trim().split(':');
        let (name, start, count) = (parts.next()?, parts.next()?, parts.next()?);
        if name != user || parts.next().is_some() {
            return None;
        }
        let start: u32 = start.parse().ok()?;
        let count: u32 = count.parse().ok()?;
        (start > 0 && count > 0 && start.checked_add(count).is_some()).then_some((start, count))
    })
}

/// One build's ids; the slot is free again when this is dropped.
#[derive(Debug)]
pub struct IdLease {
    pub ids: HostIds,
    _lock: File,
}

/// Where the next lease starts looking (spreads concurrent builds of one process).
static NEXT: AtomicU32 = AtomicU32::new(0);

/// Leases a free slot of `range`, using `<state_dir>/build-ids.lock`.
pub fn lease(state_dir: &Path, range: &IdRange) -> io::Result<IdLease> {
    let path = state_dir.join("build-ids.lock");
    // Shared with every user of the store (it belongs to the store's owner). One
    // descriptor tries the slots: a failed try takes nothing.
    let file =
        rocmx_store::local::open_lock_file(&path).map_err(|e| io::Error::other(e.to_string()))?;
    let start = std::process::id()
        .wrapping_mul(31)
        .wrapping_add(NEXT.fetch_add(1, Ordering::Relaxed));
    for i in 0..range.count {
        let slot = start.wrapping_add(i) % range.count;
        match crate::ofd::try_lock_byte(&file, i64::from(slot)) {
            Ok(true) => {
                return Ok(IdLease {
                    ids: HostIds {
                        uid: range.first_uid + slot,
                        gid: range.first_gid + slot,
                    },
                    _lock: file,
                })
            }
            Ok(false) => continue,
            Err(e) => {
                return Err(io::Error::new(
                    io::Error::from(e).kind(),
                    format!("locking a build id in {}: {e}", path.display()),
                ))
            }
        }
    }
    Err(io::Error::other(format!(
        "all {} build ids are in use (more concurrent builds than ids; add a longer 'rocmx' range to /etc/subuid and /etc/subgid)",
        range.count
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subid_lines() {
        let text = "alice:100000:65536\nrocmx:0:10\nrocmx:200000:4096\nrocmx:300000:10\n";
        assert_eq!(subid_entry(text, "rocmx"), Some((200000, 4096)));
        assert_eq!(subid_entry(text, "alice"), Some((100000, 65536)));
        assert_eq!(subid_entry(text, "bob"), None);
        assert_eq!(subid_entry("rocmx:4294967295:2\n", "rocmx"), None);
        assert_eq!(subid_entry("rocmx:x:2\nrocmx:5:2:9\n", "rocmx"), None);
    }

    #[test]
    fn range_from_files_or_automatic() {
        let r = IdRange::from_subid_files(Some("rocmx:200000:100\n"), Some("rocmx:300000:50\n"));
        assert_eq!(
            r,
            IdRange {
                first_uid: 200000,
                first_gid: 300000,
                count: 50
            }
        );
        let auto = IdRange::from_subid_files(Some("rocmx:200000:100\n"), None);
        assert_eq!(auto, IdRange::default());
        assert_eq!(auto.first_uid, 872_415_232);
    }

    #[test]
    fn concurrent_leases_get_distinct_ids_and_slots_come_back() {
        let dir = tempfile::tempdir().unwrap();
        let range = IdRange {
            first_uid: 5000,
            first_gid: 6000,
            count: 3,
        };
        let a = lease(dir.path(), &range).unwrap();
        let b = lease(dir.path(), &range).unwrap();
        let c = lease(dir.path(), &range).unwrap();
        let mut uids = vec![a.ids.uid, b.ids.uid, c.ids.uid];
        uids.sort();
        assert_eq!(uids, vec![5000, 5001, 5002]);
        assert_eq!(a.ids.gid - 6000, a.ids.uid - 5000);
        let e = lease(dir.path(), &range).unwrap_err();
        assert!(e.to_string().contains("all 3 build ids are in use"), "{e}");
        let freed = b.ids;
        drop(b);
        assert_eq!(lease(dir.path(), &range).unwrap().ids, freed);
    }
}
