//! Reading `.deb` archives: the outer `ar` archive, the `control` paragraph, and
//! the extraction of `data.tar.*` into a merged-`/usr` root.
//!
//! Owns: the binary package format (deb(5): `debian-binary` = `2.x`, then
//! `control.tar[.gz|.xz|.zst]`, then `data.tar[.gz|.xz|.zst]`; members whose name
//! starts with `_` are ignored as dpkg does), the mapping of `/bin`, `/sbin` and
//! `/lib*` onto `/usr/…` (Debian 13's merged `/usr`, see [`MERGED_DIRS`]), and
//! who shipped which path when several packages are unpacked into one root.
//!
//! The archives are treated as hostile. The checks are those of
//! `builder/src/fetchurl/unpack.rs` (the tarball unpacker of `builtin:fetchurl`),
//! kept parallel rather than shared because this crate may not depend on the
//! builder: absolute paths and `..` components are refused; every parent
//! directory is created by us and checked not to be a symlink, and files are
//! created with `O_NOFOLLOW` after removing what was there, so nothing is ever
//! written through a symlink; symlinks are created as they are (never followed);
//! hard links may only point at regular files this same `.deb` extracted before.
//! Unlike a tarball, a package may carry device nodes or FIFOs (old `makedev`):
//! they are skipped with a note in the log, as an unprivileged dpkg could not make
//! them either. Setuid, setgid and sticky bits are dropped; the owner always gets
//! read (and, on directories, write and search) so the store can ingest the tree;
//! other mode bits are kept; ownership and mtimes are not.
//!
//! Must not: run maintainer scripts, write outside the root it is given, or
//! touch the network.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufReader, Read, Write};
use std::os::unix::fs::{symlink, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use tar::EntryType;

/// Top-level directories that Debian 13 (amd64 and the others) keeps under
/// `/usr`: `/X` is a symlink to `usr/X`, and whatever a package ships below `/X`
/// lands in `/usr/X` (what dpkg does on a merged-`/usr` system by following
/// the symlink).
pub const MERGED_DIRS: [&str; 7] = ["bin", "sbin", "lib", "lib32", "lib64", "libx32", "libo32"];

/// The largest `control` file read (Debian's biggest are a few kilobytes).
const MAX_CONTROL: u64 = 1 << 20;

/// What a package's `control` file says about it (the fields rocmx uses).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Control {
    pub package: String,
    pub version: String,
    /// `amd64`, `all`, …; empty if the field is missing.
    pub architecture: String,
}

impl fmt::Display for Control {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.package, self.version)?;
        if !self.architecture.is_empty() {
            write!(f, " ({})", self.architecture)?;
        }
        Ok(())
    }
}

/// A defect of one `.deb`: the file, the member (`data.tar.xz`, …; empty for the
/// archive as a whole) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct DebError {
    pub deb: PathBuf,
    pub member: String,
    pub message: String,
}

impl fmt::Display for DebError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.member.is_empty() {
            write!(f, "{}: {}", self.deb.display(), self.message)
        } else {
            write!(
                f,
                "{}: member '{}': {}",
                self.deb.display(),
                self.member,
                self.message
            )
        }
    }
}

/// The compression of a `control.tar*` / `data.tar*` member, from its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Compression {
    None,
    Gzip,
    Xz,
    Zstd,
}

/// Splits `control.tar.xz` into (`control`, Xz); `Err` for a known but
/// unsupported compression, `Ok(None)` for a member that is no tar at all.
fn member_kind(name: &str) -> Result<Option<(&str, Compression)>, String> {
    let (stem, rest) = match name.split_once(".tar") {
        Some(x) => x,
        None => return Ok(None),
    };
    let c = match rest {
        "" => Compression::None,
        ".gz" => Compression::Gzip,
        ".xz" => Compression::Xz,
        ".zst" => Compression::Zstd,
        ".bz2" | ".lzma" => {
            return Err(format!(
                "{rest} compression is not supported (only none, gz, xz, zst)"
            ))
        }
        _ => return Ok(None),
    };
    Ok(Some((stem, c)))
}

fn decompress<'a>(r: impl Read + 'a, c: Compression) -> io::Result<Box<dyn Read + 'a>> {
    Ok(match c {
        Compression::None => Box::new(r),
        Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(r)),
        Compression::Xz => Box::new(xz2::read::XzDecoder::new_multi_decoder(r)),
        Compression::Zstd => Box::new(zstd::stream::read::Decoder::new(r)?),
    })
}

/// Parses the text of a `control` file.
pub fn parse_control(text: &str) -> Result<Control, String> {
    let p: deb822_fast::Paragraph = text
        .parse()
        .map_err(|e| format!("unreadable control paragraph: {e:?}"))?;
    let field = |name: &str| p.get(name).map(|v| v.trim().to_string());
    let package = field("Package").ok_or("the control file has no Package field")?;
    let version = field("Version").ok_or("the control file has no Version field")?;
    if package.is_empty() || version.is_empty() {
        return Err("the control file has an empty Package or Version".into());
    }
    Ok(Control {
        package,
        version,
        architecture: field("Architecture").unwrap_or_default(),
    })
}

/// What [`walk`] hands the data member's tar stream to: the package's control
/// paragraph, the member's name, the decompressed stream.
type DataSink<'a> = &'a mut dyn FnMut(&Control, &str, &mut dyn Read) -> Result<(), DebError>;

/// Walks the members of a `.deb`: checks `debian-binary`, reads the control
/// paragraph, and hands the data member's tar stream to `data` (if given).
fn walk(deb: &Path, mut data: Option<DataSink<'_>>) -> Result<Control, DebError> {
    let fail = |member: &str, message: String| DebError {
        deb: deb.to_path_buf(),
        member: member.to_string(),
        message,
    };
    let file = File::open(deb).map_err(|e| fail("", format!("opening: {e}")))?;
    let mut ar = ar::Archive::new(BufReader::with_capacity(1 << 16, file));
    let mut control: Option<Control> = None;
    let mut index = 0usize;
    while let Some(entry) = ar.next_entry() {
        let mut entry = entry.map_err(|e| {
            fail(
                "",
                format!("not a Debian binary package (reading the ar archive: {e})"),
            )
        })?;
        let raw = entry.header().identifier().to_vec();
        let name = String::from_utf8_lossy(&raw)
            .trim_end()
            .trim_end_matches('/')
            .to_string();
        index += 1;
        if index == 1 {
            if name != "debian-binary" {
                return Err(fail(
                    &name,
                    "not a Debian binary package (the first member must be 'debian-binary')".into(),
                ));
            }
            let mut text = String::new();
            entry
                .by_ref()
                .take(64)
                .read_to_string(&mut text)
                .map_err(|e| fail(&name, format!("reading: {e}")))?;
            let major = text.trim().split('.').next().unwrap_or("");
            if major != "2" || !text.trim().starts_with("2.") {
                return Err(fail(
                    &name,
                    format!(
                        "format version '{}' is not supported (only 2.x)",
                        text.trim()
                    ),
                ));
            }
            continue;
        }
        if name.starts_with('_') {
            continue; // reserved for local additions; dpkg ignores them
        }
        let (stem, comp) = match member_kind(&name).map_err(|m| fail(&name, m))? {
            Some(k) => k,
            None => return Err(fail(&name, "unexpected member".into())),
        };
        match stem {
            "control" => {
                if control.is_some() {
                    return Err(fail(&name, "a second control member".into()));
                }
                let stream = decompress(&mut entry, comp)
                    .map_err(|e| fail(&name, format!("decompressing: {e}")))?;
                let text = control_text(stream).map_err(|m| fail(&name, m))?;
                control = Some(parse_control(&text).map_err(|m| fail(&name, m))?);
            }
            "data" => {
                let Some(c) = &control else {
                    return Err(fail(
                        &name,
                        "the data member comes before the control member".into(),
                    ));
                };
                if let Some(f) = data.as_mut() {
                    let mut stream = decompress(&mut entry, comp)
                        .map_err(|e| fail(&name, format!("decompressing: {e}")))?;
                    f(c, &name, &mut stream)?;
                }
                return Ok(control.expect("checked above"));
            }
            _ => return Err(fail(&name, "unexpected member".into())),
        }
    }
    if index == 0 {
        return Err(fail(
            "",
            "not a Debian binary package (an empty archive)".into(),
        ));
    }
    Err(fail(
        "",
        match control {
            None => "no control.tar member".into(),
            Some(_) => "no data.tar member".into(),
        },
    ))
}

/// The `control` file of a `control.tar` stream.
fn control_text(stream: impl Read) -> Result<String, String> {
    let mut tar = tar::Archive::new(stream);
    let entries = tar
        .entries()
        .map_err(|e| format!("reading the tar stream: {e}"))?;
    for entry in entries {
        let entry = entry.map_err(|e| format!("reading the tar stream: {e}"))?;
        let path = entry.path().map_err(|e| format!("bad entry path: {e}"))?;
        let is_control = matches!(safe_relative(&path), Ok(Some(p)) if p == Path::new("control"));
        if !is_control || !entry.header().entry_type().is_file() {
            continue;
        }
        let mut text = String::new();
        entry
            .take(MAX_CONTROL)
            .read_to_string(&mut text)
            .map_err(|e| format!("reading 'control': {e}"))?;
        return Ok(text);
    }
    Err("no 'control' file in it".into())
}

/// Reads only the control paragraph of a `.deb` (and checks its layout up to
/// the data member, which is not read).
pub fn read_control(deb: &Path) -> Result<Control, DebError> {
    walk(deb, None)
}

/// Unpacks `.deb` files one after the other into one merged-`/usr` root,
/// remembering which package shipped each non-directory path, so that a later
/// package replacing an earlier one's file is reported.
pub struct Unpacker {
    root: PathBuf,
    /// Relative path (after the `/usr` mapping) → the package that shipped it.
    owners: HashMap<PathBuf, String>,
}

impl Unpacker {
    /// An unpacker into `root`, which must exist.
    pub fn new(root: &Path) -> Self {
        Unpacker {
            root: root.to_path_buf(),
            owners: HashMap::new(),
        }
    }

    /// Unpacks the data of `deb` (see the module comment for the rules); notes
    /// (replaced files, skipped special files) go to `log`.
    pub fn unpack(&mut self, deb: &Path, log: &mut dyn Write) -> Result<Control, DebError> {
        let root = self.root.clone();
        let owners = &mut self.owners;
        let mut extract = |c: &Control, member: &str, stream: &mut dyn Read| {
            extract_data(&root, owners, c, stream, log).map_err(|message| DebError {
                deb: deb.to_path_buf(),
                member: member.to_string(),
                message,
            })
        };
        walk(deb, Some(&mut extract))
    }
}

/// `rel` with a leading merged directory (`bin/x`) moved under `usr/`.
pub fn merged_usr(rel: &Path) -> PathBuf {
    let mut parts = rel.components();
    match parts.next() {
        Some(Component::Normal(first))
            if MERGED_DIRS.iter().any(|d| first == std::ffi::OsStr::new(d)) =>
        {
            Path::new("usr").join(rel)
        }
        _ => rel.to_path_buf(),
    }
}

fn refuse(path: &str, why: &str) -> String {
    format!("refusing hostile entry '{path}': {why}")
}

/// Extracts one package's data tar stream into `root`.
fn extract_data(
    root: &Path,
    owners: &mut HashMap<PathBuf, String>,
    control: &Control,
    stream: &mut dyn Read,
    log: &mut dyn Write,
) -> Result<(), String> {
    let pkg = &control.package;
    let mut tar = tar::Archive::new(stream);
    let entries = tar
        .entries()
        .map_err(|e| format!("reading the tar stream: {e}"))?;
    // Regular files this package extracted: the only hard link targets allowed.
    let mut mine: HashSet<PathBuf> = HashSet::new();
    for (index, entry) in entries.enumerate() {
        let mut entry = entry.map_err(|e| format!("reading tar entry #{}: {e}", index + 1))?;
        let raw = entry
            .path()
            .map_err(|e| format!("tar entry #{}: bad path: {e}", index + 1))?
            .into_owned();
        let shown = raw.display().to_string();
        let kind = entry.header().entry_type();
        if kind == EntryType::XGlobalHeader || kind.as_byte() == b'V' {
            continue;
        }
        let Some(orig) = safe_relative(&raw).map_err(|why| refuse(&shown, &why))? else {
            if kind.is_dir() {
                continue; // `./`
            }
            return Err(refuse(&shown, "a non-directory entry for the root"));
        };
        // `./bin` itself as a symlink (a package shipping the merged-/usr
        // aliases): the root has them already.
        let top_alias =
            orig.components().count() == 1 && MERGED_DIRS.iter().any(|d| orig == Path::new(d));
        if top_alias && kind == EntryType::Symlink {
            continue;
        }
        let rel = merged_usr(&orig);
        let target = root.join(&rel);
        let mode = entry.header().mode().unwrap_or(0o644) & 0o777;
        match kind {
            EntryType::Directory => {
                match fs::symlink_metadata(&target) {
                    Ok(m) if !m.is_dir() => {
                        let before = owners.remove(&rel).unwrap_or_default();
                        writeln!(
                            log,
                            "note: {pkg} ships the directory /{} where {before} shipped a non-directory; the directory wins",
                            rel.display()
                        )
                        .ok();
                        fs::remove_file(&target)
                            .map_err(|e| format!("replacing '/{}': {e}", rel.display()))?;
                    }
                    _ => {}
                }
                make_dirs(root, &rel).map_err(|e| format!("creating directory '{shown}': {e}"))?;
                fs::set_permissions(&target, fs::Permissions::from_mode(mode | 0o700))
                    .map_err(|e| format!("setting the mode of '{shown}': {e}"))?;
            }
            EntryType::Regular | EntryType::Continuous | EntryType::GNUSparse => {
                if !make_room(root, &rel, pkg, owners, log)
                    .map_err(|e| format!("'{shown}': {e}"))?
                {
                    continue;
                }
                let mut out = OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .custom_flags(libc::O_NOFOLLOW)
                    .open(&target)
                    .map_err(|e| format!("creating '{shown}': {e}"))?;
                io::copy(&mut entry, &mut out).map_err(|e| format!("extracting '{shown}': {e}"))?;
                out.set_permissions(fs::Permissions::from_mode(mode | 0o400))
                    .map_err(|e| format!("setting the mode of '{shown}': {e}"))?;
                mine.insert(rel.clone());
                owners.insert(rel, pkg.clone());
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
                if !make_room(root, &rel, pkg, owners, log)
                    .map_err(|e| format!("'{shown}': {e}"))?
                {
                    continue;
                }
                symlink(&link, &target).map_err(|e| format!("creating symlink '{shown}': {e}"))?;
                mine.remove(&rel);
                owners.insert(rel, pkg.clone());
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
                    .ok_or_else(|| refuse(&shown, "a hard link to the root"))?;
                let link_rel = merged_usr(&link_rel);
                let source = root.join(&link_rel);
                let ok = mine.contains(&link_rel)
                    && check_no_links_in_parents(root, &link_rel)
                    && fs::symlink_metadata(&source).is_ok_and(|m| m.file_type().is_file());
                if !ok {
                    return Err(refuse(
                        &shown,
                        &format!(
                            "hard link target '{link_shown}' is not a regular file extracted before it from this package"
                        ),
                    ));
                }
                if source == target {
                    continue;
                }
                if !make_room(root, &rel, pkg, owners, log)
                    .map_err(|e| format!("'{shown}': {e}"))?
                {
                    continue;
                }
                fs::hard_link(&source, &target)
                    .map_err(|e| format!("creating hard link '{shown}': {e}"))?;
                mine.insert(rel.clone());
                owners.insert(rel, pkg.clone());
            }
            EntryType::Char | EntryType::Block | EntryType::Fifo => {
                let what = if kind == EntryType::Fifo {
                    "FIFO"
                } else {
                    "device node"
                };
                writeln!(log, "note: {pkg}: skipped the {what} '{shown}'").ok();
            }
            other => {
                return Err(refuse(&shown, &format!("unsupported entry type {other:?}")));
            }
        }
    }
    Ok(())
}

/// Gets `root/rel` ready for a new non-directory: parents created (never
/// through a symlink), an earlier file or symlink removed (reported when
/// another package shipped it). `Ok(false)`: a directory is there, which wins,
/// and the entry is skipped (reported).
fn make_room(
    root: &Path,
    rel: &Path,
    pkg: &str,
    owners: &mut HashMap<PathBuf, String>,
    log: &mut dyn Write,
) -> io::Result<bool> {
    if let Some(parent) = rel.parent().filter(|p| !p.as_os_str().is_empty()) {
        make_dirs(root, parent)?;
    }
    let target = root.join(rel);
    match fs::symlink_metadata(&target) {
        Ok(m) if m.is_dir() => {
            writeln!(
                log,
                "note: {pkg} ships a non-directory at /{} where a directory is; the directory wins",
                rel.display()
            )
            .ok();
            Ok(false)
        }
        Ok(_) => {
            if let Some(before) = owners.get(rel).filter(|b| b.as_str() != pkg) {
                writeln!(log, "note: {pkg} replaces /{} from {before}", rel.display()).ok();
            }
            fs::remove_file(&target)?;
            Ok(true)
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(true),
        Err(e) => Err(e),
    }
}

/// The entry path as a clean relative path: `.` components dropped; absolute
/// paths and `..` refused. `Ok(None)` is the root itself.
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
    Ok((!out.as_os_str().is_empty()).then_some(out))
}

/// Creates `root/rel` and its parents as real directories, refusing to go
/// through anything that is not one (a symlink in particular).
fn make_dirs(root: &Path, rel: &Path) -> io::Result<()> {
    let mut cur = root.to_path_buf();
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
                    "'/{}' is {what}; refusing to extract through it",
                    cur.strip_prefix(root).unwrap_or(&cur).display()
                )));
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                fs::create_dir(&cur)?;
                fs::set_permissions(&cur, fs::Permissions::from_mode(0o755))?;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Whether every parent of `root/rel` is a real directory.
fn check_no_links_in_parents(root: &Path, rel: &Path) -> bool {
    let mut cur = root.to_path_buf();
    if let Some(parent) = rel.parent() {
        for part in parent.components() {
            cur.push(part);
            if !fs::symlink_metadata(&cur).is_ok_and(|m| m.file_type().is_dir()) {
                return false;
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tar header for `path` written byte-for-byte, so that paths the tar
    /// crate's builder would refuse (`..`, absolute) can be tested.
    fn raw_entry(
        out: &mut Vec<u8>,
        path: &str,
        kind: EntryType,
        link: &str,
        mode: u32,
        data: &[u8],
    ) {
        let mut h = tar::Header::new_ustar();
        h.as_old_mut().name[..path.len()].copy_from_slice(path.as_bytes());
        h.as_old_mut().linkname[..link.len()].copy_from_slice(link.as_bytes());
        h.set_entry_type(kind);
        h.set_mode(mode);
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

    fn control_tar(pkg: &str) -> Vec<u8> {
        let text =
            format!("Package: {pkg}\nVersion: 1.0-1\nArchitecture: amd64\nDescription: test\n");
        let mut t = Vec::new();
        raw_entry(&mut t, "./", EntryType::Directory, "", 0o755, b"");
        raw_entry(
            &mut t,
            "./control",
            EntryType::Regular,
            "",
            0o644,
            text.as_bytes(),
        );
        finish(t)
    }

    /// A `.deb` with the given members (name, bytes) after `debian-binary`.
    fn deb(dir: &Path, file: &str, version: &[u8], members: &[(&str, Vec<u8>)]) -> PathBuf {
        let path = dir.join(file);
        let mut b = ar::Builder::new(File::create(&path).unwrap());
        let mut add = |name: &str, data: &[u8]| {
            let h = ar::Header::new(name.as_bytes().to_vec(), data.len() as u64);
            b.append(&h, data).unwrap();
        };
        add("debian-binary", version);
        for (name, data) in members {
            add(name, data);
        }
        path
    }

    fn xz(data: &[u8]) -> Vec<u8> {
        let mut e = xz2::write::XzEncoder::new(Vec::new(), 1);
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn simple_data() -> Vec<u8> {
        let mut t = Vec::new();
        raw_entry(&mut t, "./", EntryType::Directory, "", 0o755, b"");
        raw_entry(&mut t, "./bin/", EntryType::Directory, "", 0o755, b"");
        raw_entry(
            &mut t,
            "./bin/foo",
            EntryType::Regular,
            "",
            0o4755,
            b"#!/bin/sh\n",
        );
        raw_entry(
            &mut t,
            "./bin/foo-link",
            EntryType::Symlink,
            "foo",
            0o777,
            b"",
        );
        raw_entry(
            &mut t,
            "./usr/share/doc/x/",
            EntryType::Directory,
            "",
            0o755,
            b"",
        );
        raw_entry(
            &mut t,
            "./usr/share/doc/x/a",
            EntryType::Regular,
            "",
            0o644,
            b"a",
        );
        raw_entry(
            &mut t,
            "./usr/share/doc/x/b",
            EntryType::Link,
            "./usr/share/doc/x/a",
            0o644,
            b"",
        );
        raw_entry(&mut t, "./dev/null", EntryType::Char, "", 0o666, b"");
        finish(t)
    }

    #[test]
    fn unpacks_with_merged_usr_and_drops_setuid() {
        let dir = tempfile::tempdir().unwrap();
        let d = deb(
            dir.path(),
            "x.deb",
            b"2.0\n",
            &[
                ("control.tar.xz", xz(&control_tar("x"))),
                ("data.tar.xz", xz(&simple_data())),
            ],
        );
        assert_eq!(
            read_control(&d).unwrap(),
            Control {
                package: "x".into(),
                version: "1.0-1".into(),
                architecture: "amd64".into()
            }
        );
        let root = dir.path().join("root");
        fs::create_dir(&root).unwrap();
        let mut log = Vec::new();
        let c = Unpacker::new(&root).unpack(&d, &mut log).unwrap();
        assert_eq!(c.package, "x");
        let foo = root.join("usr/bin/foo");
        assert_eq!(fs::read(&foo).unwrap(), b"#!/bin/sh\n");
        assert_eq!(
            fs::metadata(&foo).unwrap().permissions().mode() & 0o7777,
            0o755
        );
        assert_eq!(
            fs::read_link(root.join("usr/bin/foo-link")).unwrap(),
            Path::new("foo")
        );
        assert!(!root.join("bin").exists());
        assert_eq!(fs::read(root.join("usr/share/doc/x/b")).unwrap(), b"a");
        assert!(!root.join("dev/null").exists());
        let log = String::from_utf8(log).unwrap();
        assert!(
            log.contains("skipped the device node './dev/null'"),
            "{log}"
        );
    }

    #[test]
    fn later_package_wins_and_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let mk = |pkg: &str, body: &[u8]| {
            let mut t = Vec::new();
            raw_entry(
                &mut t,
                "./usr/bin/tool",
                EntryType::Regular,
                "",
                0o755,
                body,
            );
            raw_entry(&mut t, "./etc/", EntryType::Directory, "", 0o755, b"");
            deb(
                dir.path(),
                &format!("{pkg}.deb"),
                b"2.0\n",
                &[("control.tar", control_tar(pkg)), ("data.tar", finish(t))],
            )
        };
        let (a, b) = (mk("a", b"A"), mk("b", b"B"));
        // c ships a file where a directory is: the directory stays.
        let mut t = Vec::new();
        raw_entry(&mut t, "./etc", EntryType::Regular, "", 0o644, b"x");
        let c = deb(
            dir.path(),
            "c.deb",
            b"2.0\n",
            &[("control.tar", control_tar("c")), ("data.tar", finish(t))],
        );
        let root = dir.path().join("root");
        fs::create_dir(&root).unwrap();
        let mut u = Unpacker::new(&root);
        let mut log = Vec::new();
        for d in [&a, &b, &c] {
            u.unpack(d, &mut log).unwrap();
        }
        assert_eq!(fs::read(root.join("usr/bin/tool")).unwrap(), b"B");
        assert!(root.join("etc").is_dir());
        let log = String::from_utf8(log).unwrap();
        assert!(log.contains("b replaces /usr/bin/tool from a"), "{log}");
        assert!(log.contains("the directory wins"), "{log}");
    }

    #[test]
    fn refuses_hostile_entries_naming_deb_and_member() {
        let cases: [(&str, EntryType, &str, &str); 5] = [
            ("../escape", EntryType::Regular, "", "'..'"),
            ("./usr/../../escape", EntryType::Regular, "", "'..'"),
            ("/abs/escape", EntryType::Regular, "", "absolute"),
            ("./h", EntryType::Link, "../outside", "'..'"),
            (
                "./h",
                EntryType::Link,
                "./etc/passwd",
                "not a regular file extracted before",
            ),
        ];
        for (path, kind, link, needle) in cases {
            let dir = tempfile::tempdir().unwrap();
            let mut t = Vec::new();
            raw_entry(&mut t, path, kind, link, 0o644, b"x");
            let d = deb(
                dir.path(),
                "evil.deb",
                b"2.0\n",
                &[
                    ("control.tar.xz", xz(&control_tar("evil"))),
                    ("data.tar.xz", xz(&finish(t))),
                ],
            );
            let root = dir.path().join("root");
            fs::create_dir(&root).unwrap();
            let err = Unpacker::new(&root)
                .unpack(&d, &mut io::sink())
                .unwrap_err();
            let msg = err.to_string();
            assert!(
                msg.contains("evil.deb") && msg.contains("member 'data.tar.xz'"),
                "{msg}"
            );
            assert!(msg.contains(needle), "{path}: {msg}");
            assert!(!dir.path().join("escape").exists());
        }
    }

    #[test]
    fn never_writes_through_a_symlink() {
        let outside = tempfile::tempdir().unwrap();
        let target = outside.path().to_str().unwrap().to_string();
        let dir = tempfile::tempdir().unwrap();
        let mut t = Vec::new();
        raw_entry(&mut t, "./link", EntryType::Symlink, &target, 0o777, b"");
        raw_entry(
            &mut t,
            "./link/escaped",
            EntryType::Regular,
            "",
            0o644,
            b"x",
        );
        let d = deb(
            dir.path(),
            "evil.deb",
            b"2.0\n",
            &[
                ("control.tar", control_tar("evil")),
                ("data.tar", finish(t)),
            ],
        );
        let root = dir.path().join("root");
        fs::create_dir(&root).unwrap();
        let err = Unpacker::new(&root)
            .unpack(&d, &mut io::sink())
            .unwrap_err();
        assert!(err.to_string().contains("symlink"), "{err}");
        assert!(!outside.path().join("escaped").exists());

        // A later file replaces the link instead of writing through it.
        let mut t = Vec::new();
        raw_entry(
            &mut t,
            "./f",
            EntryType::Symlink,
            &format!("{target}/victim"),
            0o777,
            b"",
        );
        raw_entry(&mut t, "./f", EntryType::Regular, "", 0o644, b"mine");
        let d = deb(
            dir.path(),
            "evil2.deb",
            b"2.0\n",
            &[
                ("control.tar", control_tar("evil")),
                ("data.tar", finish(t)),
            ],
        );
        let root = dir.path().join("root2");
        fs::create_dir(&root).unwrap();
        Unpacker::new(&root).unpack(&d, &mut io::sink()).unwrap();
        assert_eq!(fs::read(root.join("f")).unwrap(), b"mine");
        assert!(!outside.path().join("victim").exists());
    }

    #[test]
    fn checks_the_layout() {
        let dir = tempfile::tempdir().unwrap();
        let data = ("data.tar", simple_data());
        let ctl = ("control.tar", control_tar("x"));
        type Case<'a> = (Vec<(&'a str, Vec<u8>)>, &'a [u8], &'a str);
        let bad: Vec<Case> = vec![
            (
                vec![ctl.clone(), data.clone()],
                b"3.0\n",
                "format version '3.0'",
            ),
            (
                vec![data.clone(), ctl.clone()],
                b"2.0\n",
                "before the control member",
            ),
            (vec![ctl.clone()], b"2.0\n", "no data.tar member"),
            (
                vec![ctl.clone(), ("data.tar.bz2", vec![])],
                b"2.0\n",
                "not supported",
            ),
            (
                vec![ctl.clone(), ("junk", vec![])],
                b"2.0\n",
                "member 'junk': unexpected member",
            ),
            (
                vec![("control.tar", finish(Vec::new())), data.clone()],
                b"2.0\n",
                "no 'control' file",
            ),
        ];
        for (i, (members, version, needle)) in bad.into_iter().enumerate() {
            let d = deb(dir.path(), &format!("{i}.deb"), version, &members);
            let err = read_control(&d).unwrap_err().to_string();
            assert!(
                err.contains(needle) && err.contains(&format!("{i}.deb")),
                "{i}: {err}"
            );
        }
        // Members starting with '_' are skipped; gz and zst work.
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&control_tar("z")).unwrap();
        let zst = zstd::encode_all(&simple_data()[..], 1).unwrap();
        let d = deb(
            dir.path(),
            "ok.deb",
            b"2.0\n",
            &[
                ("_extra", vec![1]),
                ("control.tar.gz", gz.finish().unwrap()),
                ("data.tar.zst", zst),
            ],
        );
        let root = dir.path().join("root");
        fs::create_dir(&root).unwrap();
        assert_eq!(
            Unpacker::new(&root)
                .unpack(&d, &mut io::sink())
                .unwrap()
                .package,
            "z"
        );
        assert!(root.join("usr/bin/foo").is_file());
        let notdeb = dir.path().join("not.deb");
        fs::write(&notdeb, b"hello").unwrap();
        assert!(read_control(&notdeb)
            .unwrap_err()
            .to_string()
            .contains("not a Debian binary package"));
    }

    #[test]
    fn maps_merged_dirs() {
        assert_eq!(merged_usr(Path::new("bin/sh")), Path::new("usr/bin/sh"));
        assert_eq!(
            merged_usr(Path::new("lib64/ld.so")),
            Path::new("usr/lib64/ld.so")
        );
        assert_eq!(merged_usr(Path::new("library/x")), Path::new("library/x"));
        assert_eq!(merged_usr(Path::new("usr/bin/x")), Path::new("usr/bin/x"));
    }
}
