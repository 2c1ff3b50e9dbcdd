//! Unpacking a downloaded tarball for `builtin:fetchurl` with `unpack = "1"`.
//!
//! This module owns format detection (by magic bytes: plain tar, gzip, xz,
//! zstd) and the extraction of a tar stream into a fresh staging directory,
//! treating the archive as hostile: absolute paths, `..` components, device
//! nodes and FIFOs are refused; symbolic links are created as they are but
//! never followed, since every parent directory is created by us and checked
//! not to be a link; hard links may only point at regular files already
//! extracted.
//!
//! It also reports what the archive says about itself ([`ArchiveInfo`]): the
//! `comment` of its first pax global header (`git archive` of a commit writes
//! the commit id there, which is how a GitHub archive is locked to its commit
//! without the GitHub API) and the newest entry modification time.
//!
//! It must not write anywhere but inside the staging directory it is given,
//! must not keep ownership, timestamps or special mode bits from the archive
//! (the realiser normalises outputs afterwards) and must not touch the network.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, BufReader, Read};
use std::os::unix::fs::{symlink, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};

use tar::EntryType;

/// The compression around a tar stream, recognised by its first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Compression {
    /// A plain tar stream.
    None,
    /// gzip (`.tar.gz`, `.tgz`).
    Gzip,
    /// xz (`.tar.xz`).
    Xz,
    /// zstd (`.tar.zst`).
    Zstd,
}

/// Recognises the compression from the first bytes of a file, or says which
/// unsupported format it looks like.
pub(super) fn detect(head: &[u8]) -> Result<Compression, String> {
    if head.starts_with(&[0x1f, 0x8b]) {
        Ok(Compression::Gzip)
    } else if head.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0x00]) {
        Ok(Compression::Xz)
    } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        Ok(Compression::Zstd)
    } else if head.starts_with(b"BZh") {
        Err(
            "bzip2-compressed archives are not supported (only tar, tar.gz, tar.xz, tar.zst)"
                .into(),
        )
    } else if head.starts_with(b"PK\x03\x04") {
        Err("zip archives are not supported (only tar, tar.gz, tar.xz, tar.zst)".into())
    } else if head.len() >= 262 && &head[257..262] == b"ustar" {
        Ok(Compression::None)
    } else if head.len() >= 512 {
        // A pre-POSIX (v7) tar header has no magic; the tar reader checks
        // the header checksum and rejects anything else.
        Ok(Compression::None)
    } else {
        Err("not a tar archive (too short, and no known compression magic)".into())
    }
}

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
    let head = reader
        .fill_buf()
        .map_err(|e| format!("reading the download: {e}"))?
        .to_vec();
    // A short first read of a regular file is its whole length.
    let stream: Box<dyn Read> = match detect(&head)? {
        Compression::None => Box::new(reader),
        Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(reader)),
        Compression::Xz => Box::new(xz2::read::XzDecoder::new_multi_decoder(reader)),
        Compression::Zstd => Box::new(
            zstd::stream::read::Decoder::with_buffer(reader)
                .map_err(|e| format!("starting zstd decompression: {e}"))?,
        ),
    };
    unpack_tar(stream, stage)
}

/// Extracts a tar stream into `stage` (see the module comment for the rules).
pub(super) fn unpack_tar(stream: impl Read, stage: &Path) -> Result<ArchiveInfo, String> {
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
        let target = stage.join(&rel);
        match kind {
            EntryType::Directory => {
                make_dirs(stage, &rel).map_err(|e| format!("creating directory '{shown}': {e}"))?;
            }
            EntryType::Regular | EntryType::Continuous | EntryType::GNUSparse => {
                prepare_parent(stage, &rel)
                    .map_err(|e| format!("creating parent of '{shown}': {e}"))?;
                remove_existing(&target).map_err(|e| format!("'{shown}': {e}"))?;
                let mode = entry.header().mode().unwrap_or(0o644);
                let perm = if mode & 0o111 != 0 { 0o755 } else { 0o644 };
                let mut out = OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(perm)
                    .custom_flags(libc::O_NOFOLLOW)
                    .open(&target)
                    .map_err(|e| format!("creating '{shown}': {e}"))?;
                io::copy(&mut entry, &mut out).map_err(|e| format!("extracting '{shown}': {e}"))?;
            }
            EntryType::Symlink => {
                let link = entry
                    .link_name()
                    .map_err(|e| format!("symlink '{shown}': bad target: {e}"))?
                    .ok_or_else(|| format!("symlink '{shown}' has no target"))?
                    .into_owned();
                if link.as_os_str().is_empty() {
                    return Err(format!("symlink '{shown}' has an empty target"));
                }
                prepare_parent(stage, &rel)
                    .map_err(|e| format!("creating parent of '{shown}': {e}"))?;
                remove_existing(&target).map_err(|e| format!("'{shown}': {e}"))?;
                symlink(&link, &target).map_err(|e| format!("creating symlink '{shown}': {e}"))?;
            }
            EntryType::Link => {
                let link = entry
                    .link_name()
                    .map_err(|e| format!("hard link '{shown}': bad target: {e}"))?
                    .ok_or_else(|| format!("hard link '{shown}' has no target"))?
                    .into_owned();
                let link_shown = link.display().to_string();
                let link_rel = safe_relative(&link)
                    .map_err(|why| {
                        refuse(&shown, &format!("hard link target '{link_shown}': {why}"))
                    })?
                    .ok_or_else(|| refuse(&shown, "a hard link to the archive root"))?;
                check_no_links_in_parents(stage, &link_rel).map_err(|why| {
                    refuse(&shown, &format!("hard link target '{link_shown}': {why}"))
                })?;
                let source = stage.join(&link_rel);
                match fs::symlink_metadata(&source) {
                    Ok(m) if m.file_type().is_file() => {}
                    Ok(_) => {
                        return Err(refuse(
                            &shown,
                            &format!("hard link target '{link_shown}' is not a regular file"),
                        ))
                    }
                    Err(_) => {
                        return Err(refuse(
                            &shown,
                            &format!(
                            "hard link target '{link_shown}' does not precede it in the archive"
                        ),
                        ))
                    }
                }
                prepare_parent(stage, &rel)
                    .map_err(|e| format!("creating parent of '{shown}': {e}"))?;
                if source != target {
                    remove_existing(&target).map_err(|e| format!("'{shown}': {e}"))?;
                    fs::hard_link(&source, &target)
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

fn refuse(path: &str, why: &str) -> String {
    format!("refusing hostile archive entry '{path}': {why}")
}

/// The entry path as a clean relative path: `.` components dropped; absolute
/// paths and `..` refused. `Ok(None)` is the archive root itself.
fn safe_relative(path: &Path) -> Result<Option<PathBuf>, String> {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::Normal(part) => out.push(part),
            Component::CurDir => {}
            Component::ParentDir => return Err("the path contains '..'".to_string()),
            Component::RootDir | Component::Prefix(_) => {
                return Err("the path is absolute".to_string())
            }
        }
    }
    Ok(if out.as_os_str().is_empty() {
        None
    } else {
        Some(out)
    })
}

/// Creates `stage/rel` and its parents as real directories, refusing to go
/// through anything that is not one (a symlink in particular).
fn make_dirs(stage: &Path, rel: &Path) -> io::Result<()> {
    let mut cur = stage.to_path_buf();
    for part in rel.components() {
        cur.push(part);
        match fs::symlink_metadata(&cur) {
            Ok(m) if m.file_type().is_dir() => {}
            Ok(m) => {
                let what = if m.file_type().is_symlink() {
                    "a symlink"
                } else {
                    "not a directory"
                };
                return Err(io::Error::other(format!(
                    "'{}' is {what}; refusing to extract through it",
                    cur.strip_prefix(stage).unwrap_or(&cur).display()
                )));
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                fs::create_dir(&cur)?;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Creates the parent directories of `stage/rel`.
fn prepare_parent(stage: &Path, rel: &Path) -> io::Result<()> {
    match rel.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => make_dirs(stage, parent),
        _ => Ok(()),
    }
}

/// Checks that every parent of `stage/rel` exists as a real directory.
fn check_no_links_in_parents(stage: &Path, rel: &Path) -> Result<(), String> {
    let mut cur = stage.to_path_buf();
    if let Some(parent) = rel.parent() {
        for part in parent.components() {
            cur.push(part);
            match fs::symlink_metadata(&cur) {
                Ok(m) if m.file_type().is_dir() => {}
                _ => return Err("a parent directory is missing or is not a directory".to_string()),
            }
        }
    }
    Ok(())
}

/// Removes a file or symlink at `path` (a later archive entry replaces an
/// earlier one, as tar does); an existing directory is an error.
fn remove_existing(path: &Path) -> io::Result<()> {
    match fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_dir() => Err(io::Error::other(
            "a directory of the same name was extracted before",
        )),
        Ok(_) => fs::remove_file(path),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn detects_formats() {
        assert_eq!(detect(&[0x1f, 0x8b, 8]).unwrap(), Compression::Gzip);
        assert_eq!(detect(b"\xfd7zXZ\x00rest").unwrap(), Compression::Xz);
        assert_eq!(
            detect(&[0x28, 0xb5, 0x2f, 0xfd, 0]).unwrap(),
            Compression::Zstd
        );
        assert!(detect(b"BZh91AY").unwrap_err().contains("bzip2"));
        assert!(detect(b"PK\x03\x04").unwrap_err().contains("zip"));
        assert!(detect(b"<html>").unwrap_err().contains("not a tar"));
        let mut tar = vec![0u8; 512];
        tar[257..262].copy_from_slice(b"ustar");
        assert_eq!(detect(&tar).unwrap(), Compression::None);
    }

    #[test]
    fn safe_relative_paths() {
        assert_eq!(
            safe_relative(Path::new("./a/./b")).unwrap(),
            Some(PathBuf::from("a/b"))
        );
        assert_eq!(safe_relative(Path::new("./")).unwrap(), None);
        assert!(safe_relative(Path::new("a/../../b")).is_err());
        assert!(safe_relative(Path::new("/etc/passwd")).is_err());
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
