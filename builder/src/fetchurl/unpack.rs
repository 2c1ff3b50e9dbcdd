//! Unpacking a downloaded tarball for `builtin:fetchurl` with `unpack = "1"`.
//!
//! This module owns the extraction policy for a tarball unpacked into a fresh
//! staging directory, treating the archive as hostile. The safety rules
//! (format detection by magic bytes: plain tar, gzip, xz, zstd; clean relative
//! paths, absolute paths and `..` refused; parents created as real directories,
//! never through a symlink; `O_NOFOLLOW | O_EXCL` files; hard links only to
//! regular files extracted before) are `rocmx_store::untar`'s. The policy here:
//! device nodes and FIFOs are refused; a later entry replaces an earlier file or
//! symlink of the same path, as tar does, but not a directory; symbolic links
//! are created as they are.
//!
//! It also reports what the archive says about itself ([`ArchiveInfo`]): the
//! `comment` of its first pax global header (`git archive` of a commit writes
//! the commit id there, which is how a GitHub archive is locked to its commit
//! without the GitHub API) and the newest entry modification time.
//!
//! It must not write anywhere but inside the staging directory it is given,
//! must not keep ownership, timestamps or special mode bits from the archive
//! (the realiser normalises outputs afterwards) and must not touch the network.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;

use rocmx_store::untar::{self, link_name, safe_relative, Compression, NotLinkable, Room};
use tar::EntryType;

/// How refusals name an entry (`refusing hostile archive entry '…': …`).
const ENTRY: &str = "archive entry";

/// What an archive says about itself, gathered while it is unpacked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct ArchiveInfo {
    /// The `comment` record of the first pax global header, when there is one
    /// (`git archive` writes the commit id there).
    pub comment: Option<String>,
    /// The newest modification time of the entries (seconds since the epoch).
    pub newest_mtime: Option<u64>,
}

/// Unpacks the archive file `archive` into the directory `stage`, which must
/// exist and be empty. Returns a description of what is wrong on failure;
/// the caller removes `stage`.
pub(super) fn unpack_file(archive: &Path, stage: &Path) -> Result<ArchiveInfo, String> {
    let file = File::open(archive).map_err(|e| format!("opening the download: {e}"))?;
    let mut reader = BufReader::with_capacity(1 << 16, file);
    // A short first read of a regular file is its whole length.
    let head = reader
        .fill_buf()
        .map_err(|e| format!("reading the download: {e}"))?;
    let stream = Compression::detect(head)?
        .reader(reader)
        .map_err(|e| format!("starting zstd decompression: {e}"))?;
    unpack_tar(stream, stage)
}

/// Extracts a tar stream into `stage` (see the module comment for the rules).
pub(super) fn unpack_tar(stream: impl Read, stage: &Path) -> Result<ArchiveInfo, String> {
    let mut root: untar::Root = untar::Root::new(stage);
    let refuse = |path: &str, why: &str| untar::refuse(ENTRY, path, why);
    let mut archive = tar::Archive::new(stream);
    let entries = archive
        .entries()
        .map_err(|e| format!("reading the tar stream: {e}"))?;
    let mut count = 0usize;
    let mut info = ArchiveInfo::default();
    let mut seen_global = false;
    for (index, entry) in entries.enumerate() {
        let mut entry = entry.map_err(|e| format!("reading tar entry #{}: {e}", index + 1))?;
        let raw_path = entry
            .path()
            .map_err(|e| format!("tar entry #{}: bad path: {e}", index + 1))?
            .into_owned();
        let shown = raw_path.display().to_string();
        let kind = entry.header().entry_type();
        // Global PAX headers and GNU volume labels ('V') carry no file; the
        // first global header's comment is kept.
        if kind == EntryType::XGlobalHeader {
            if !seen_global {
                seen_global = true;
                info.comment = global_comment(&mut entry);
            }
            continue;
        }
        if kind.as_byte() == b'V' {
            continue;
        }
        if let Ok(mtime) = entry.header().mtime() {
            info.newest_mtime = Some(info.newest_mtime.map_or(mtime, |m| m.max(mtime)));
        }
        let Some(rel) = safe_relative(&raw_path).map_err(|why| refuse(&shown, &why))? else {
            // `.` or `./`: the root itself.
            if kind.is_dir() {
                continue;
            }
            return Err(refuse(&shown, "a non-directory entry for the archive root"));
        };
        match kind {
            EntryType::Directory => {
                root.make_dirs(&rel)
                    .map_err(|e| format!("creating directory '{shown}': {e}"))?;
            }
            EntryType::Regular | EntryType::Continuous | EntryType::GNUSparse => {
                make_room(&mut root, &rel, &shown)?;
                let mode = entry.header().mode().unwrap_or(0o644);
                let perm = if mode & 0o111 != 0 { 0o755 } else { 0o644 };
                let mut out = root
                    .create_file(&rel, perm, ())
                    .map_err(|e| format!("creating '{shown}': {e}"))?;
                io::copy(&mut entry, &mut out).map_err(|e| format!("extracting '{shown}': {e}"))?;
            }
            EntryType::Symlink => {
                let link = link_name(&entry, &shown)?;
                make_room(&mut root, &rel, &shown)?;
                root.symlink(&link, &rel, ())
                    .map_err(|e| format!("creating symlink '{shown}': {e}"))?;
            }
            EntryType::Link => {
                let link = link_name(&entry, &shown)?;
                let link_shown = link.display().to_string();
                let link_rel = safe_relative(&link)
                    .map_err(|why| {
                        refuse(&shown, &format!("hard link target '{link_shown}': {why}"))
                    })?
                    .ok_or_else(|| refuse(&shown, "a hard link to the archive root"))?;
                let source = root.link_source(&link_rel).map_err(|why| {
                    let why = match why {
                        NotLinkable::NotRegular => "is not a regular file",
                        NotLinkable::NotBefore => "does not precede it in the archive",
                    };
                    refuse(&shown, &format!("hard link target '{link_shown}' {why}"))
                })?;
                if link_rel == rel {
                    root.make_parents(&rel)
                        .map_err(|e| format!("creating parent of '{shown}': {e}"))?;
                } else {
                    make_room(&mut root, &rel, &shown)?;
                    root.hard_link(&source, &rel, ())
                        .map_err(|e| format!("creating hard link '{shown}': {e}"))?;
                }
            }
            EntryType::Char | EntryType::Block => {
                return Err(refuse(&shown, "device files are not allowed"));
            }
            EntryType::Fifo => {
                return Err(refuse(&shown, "FIFOs are not allowed"));
            }
            other => {
                return Err(refuse(&shown, &format!("unsupported entry type {other:?}")));
            }
        }
        count += 1;
    }
    if count == 0 {
        return Err("the archive is empty".to_string());
    }
    Ok(info)
}

/// The `comment` record of a pax global header, when it is valid UTF-8
/// (surrounding white space removed; an unreadable header gives `None`).
fn global_comment<R: Read>(entry: &mut tar::Entry<'_, R>) -> Option<String> {
    let exts = entry.pax_extensions().ok()??;
    for ext in exts {
        let ext = ext.ok()?;
        if ext.key() == Ok("comment") {
            return ext.value().ok().map(|v| v.trim().to_string());
        }
    }
    None
}

/// Gets `stage/rel` ready for a new non-directory: parents created, an earlier
/// file or symlink removed (a later entry replaces it, as tar does); an
/// earlier directory is an error.
fn make_room(root: &mut untar::Root, rel: &Path, shown: &str) -> Result<(), String> {
    root.make_parents(rel)
        .map_err(|e| format!("creating parent of '{shown}': {e}"))?;
    match root.make_room(rel).map_err(|e| format!("'{shown}': {e}"))? {
        Room::Free | Room::Replaced(()) => Ok(()),
        Room::Directory => Err(format!(
            "'{shown}': a directory of the same name was extracted before"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::path::Path;

    /// A tar header for `path` written byte-for-byte, so that paths the tar
    /// crate's builder would refuse (`..`, absolute) can be tested.
    fn raw_entry(out: &mut Vec<u8>, path: &str, kind: EntryType, link: &str, data: &[u8]) {
        let mut h = tar::Header::new_ustar();
        h.as_old_mut().name[..path.len()].copy_from_slice(path.as_bytes());
        h.as_old_mut().linkname[..link.len()].copy_from_slice(link.as_bytes());
        h.set_entry_type(kind);
        h.set_mode(0o644);
        h.set_size(data.len() as u64);
        h.set_cksum();
        out.extend_from_slice(h.as_bytes());
        out.extend_from_slice(data);
        out.resize(out.len().div_ceil(512) * 512, 0);
    }

    fn finish(mut v: Vec<u8>) -> Vec<u8> {
        v.extend_from_slice(&[0u8; 1024]);
        v
    }

    #[test]
    fn extracts_files_dirs_links() {
        let mut t = Vec::new();
        raw_entry(&mut t, "top/", EntryType::Directory, "", b"");
        raw_entry(&mut t, "top/a.txt", EntryType::Regular, "", b"alpha");
        raw_entry(&mut t, "top/sub/b.txt", EntryType::Regular, "", b"beta");
        raw_entry(
            &mut t,
            "top/l",
            EntryType::Symlink,
            "/nonexistent/target",
            b"",
        );
        raw_entry(&mut t, "top/h", EntryType::Link, "top/a.txt", b"");
        let dir = tempfile::tempdir().unwrap();
        unpack_tar(&finish(t)[..], dir.path()).unwrap();
        let top = dir.path().join("top");
        assert_eq!(fs::read(top.join("a.txt")).unwrap(), b"alpha");
        assert_eq!(fs::read(top.join("sub/b.txt")).unwrap(), b"beta");
        assert_eq!(fs::read(top.join("h")).unwrap(), b"alpha");
        assert_eq!(
            fs::read_link(top.join("l")).unwrap(),
            Path::new("/nonexistent/target")
        );
    }

    #[test]
    fn refuses_hostile_entries() {
        let cases: [(&str, EntryType, &str, &str); 6] = [
            ("../evil", EntryType::Regular, "", "'..'"),
            ("a/../../evil", EntryType::Regular, "", "'..'"),
            ("/abs/evil", EntryType::Regular, "", "absolute"),
            ("dev", EntryType::Char, "", "device"),
            ("fifo", EntryType::Fifo, "", "FIFO"),
            ("h", EntryType::Link, "../outside", "'..'"),
        ];
        for (path, kind, link, needle) in cases {
            let mut t = Vec::new();
            raw_entry(&mut t, path, kind, link, b"x");
            let dir = tempfile::tempdir().unwrap();
            let stage = dir.path().join("stage");
            fs::create_dir(&stage).unwrap();
            let err = unpack_tar(&finish(t)[..], &stage).unwrap_err();
            assert!(
                err.contains("refusing") && err.contains(needle),
                "{path}: {err}"
            );
            assert!(!dir.path().join("evil").exists());
        }
    }

    #[test]
    fn never_writes_through_a_symlink() {
        let outside = tempfile::tempdir().unwrap();
        let mut t = Vec::new();
        let target = outside.path().to_str().unwrap().to_string();
        raw_entry(&mut t, "link", EntryType::Symlink, &target, b"");
        raw_entry(&mut t, "link/escaped", EntryType::Regular, "", b"x");
        let dir = tempfile::tempdir().unwrap();
        let err = unpack_tar(&finish(t)[..], dir.path()).unwrap_err();
        assert!(err.contains("symlink"), "{err}");
        assert!(!outside.path().join("escaped").exists());

        // A later regular file replaces the link instead of writing through it.
        let mut t = Vec::new();
        raw_entry(
            &mut t,
            "f",
            EntryType::Symlink,
            &format!("{target}/victim"),
            b"",
        );
        raw_entry(&mut t, "f", EntryType::Regular, "", b"mine");
        let dir = tempfile::tempdir().unwrap();
        unpack_tar(&finish(t)[..], dir.path()).unwrap();
        assert_eq!(fs::read(dir.path().join("f")).unwrap(), b"mine");
        assert!(!outside.path().join("victim").exists());
    }

    #[test]
    fn reports_the_global_comment_and_newest_mtime() {
        let mut b = tar::Builder::new(Vec::new());
        let rev = "0123456789abcdef0123456789abcdef01234567";
        let record = format!("comment={rev}\n");
        let record = format!("{} {record}", record.len() + 3);
        let mut h = tar::Header::new_ustar();
        h.set_entry_type(EntryType::XGlobalHeader);
        h.set_size(record.len() as u64);
        b.append_data(&mut h, "pax_global_header", record.as_bytes())
            .unwrap();
        for (name, mtime) in [("top/a", 1_000u64), ("top/b", 2_000)] {
            let mut h = tar::Header::new_ustar();
            h.set_entry_type(EntryType::Regular);
            h.set_size(1);
            h.set_mode(0o644);
            h.set_mtime(mtime);
            b.append_data(&mut h, name, &b"x"[..]).unwrap();
        }
        let dir = tempfile::tempdir().unwrap();
        let info = unpack_tar(&b.into_inner().unwrap()[..], dir.path()).unwrap();
        assert_eq!(info.comment.as_deref(), Some(rev));
        assert_eq!(info.newest_mtime, Some(2_000));
        assert!(!dir.path().join("pax_global_header").exists());
    }

    #[test]
    fn empty_archive_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let err = unpack_tar(&finish(Vec::new())[..], dir.path()).unwrap_err();
        assert!(err.contains("empty"), "{err}");
    }
}
