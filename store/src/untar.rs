//! Extracting hostile tar streams: the safety rules every extractor of the
//! workspace shares (`builtin:fetchurl`'s tarballs in rocmx-builder, `.deb` data
//! members in rocmx-debian).
//!
//! Owns:
//! - the compressions around a tar stream ([`Compression`]: recognised by magic
//!   bytes, decoded as a stream);
//! - cleaning entry paths ([`safe_relative`]: `.` dropped, absolute paths and
//!   `..` components refused), reading link names ([`link_name`]) and the
//!   wording of a refusal ([`refuse`]);
//! - [`Root`], the directory an archive is extracted into, through which every
//!   write goes. Every parent directory is created by the root or found to be a
//!   real directory, never a symlink, so nothing is written through a link;
//!   files are created with `O_CREAT | O_EXCL | O_NOFOLLOW`, after the caller
//!   has removed ([`Root::make_room`]) what the extraction made at that path;
//!   symlinks are created as they are and never followed; hard links may only
//!   point at regular files the same archive extracted before
//!   ([`Root::link_source`]).
//!
//! A root is the only writer of its directory while it runs, so it remembers
//! what it made instead of asking the filesystem again: the directories it
//! created or checked (never removed) and the non-directories it created, each
//! with an owner tag (`.deb` extraction records the package). A path in neither
//! is absent; if something is there all the same, exclusive creation fails
//! rather than overwrite it. Directories are created iteratively, so a path of
//! any depth cannot exhaust the stack.
//!
//! Must not: decide policy, which stays with each extractor (which entry kinds
//! are allowed, what happens when two entries share a path, modes beyond those
//! the caller passes, what is reported); write outside its root; touch the
//! network.

use std::collections::{HashMap, HashSet};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use tar::EntryType;

/// Linux's limit on a path handed to a system call, its final NUL included.
const PATH_MAX: usize = 4096;

/// The compression around a tar stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// A plain tar stream.
    None,
    /// gzip (`.tar.gz`, `.tgz`); several members are read as one stream.
    Gzip,
    /// xz (`.tar.xz`); several streams are read as one.
    Xz,
    /// zstd (`.tar.zst`).
    Zstd,
}

impl Compression {
    /// Recognises the compression from the first bytes of a file, or says which
    /// unsupported format it looks like. `head` should hold at least 512 bytes
    /// when the file is that long.
    pub fn detect(head: &[u8]) -> Result<Compression, String> {
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

    /// The decompressed stream of `r`. Only zstd can fail before reading (its
    /// context is allocated here).
    pub fn reader<'a>(self, r: impl Read + 'a) -> io::Result<Box<dyn Read + 'a>> {
        Ok(match self {
            Compression::None => Box::new(r),
            Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(r)),
            Compression::Xz => Box::new(xz2::read::XzDecoder::new_multi_decoder(r)),
            Compression::Zstd => Box::new(zstd::stream::read::Decoder::new(r)?),
        })
    }
}

/// The message refusing entry `path`: `refusing hostile {entry} '{path}': {why}`,
/// where `entry` is how the extractor names its entries (`archive entry`,
/// `entry`).
pub fn refuse(entry: &str, path: &str, why: &str) -> String {
    format!("refusing hostile {entry} '{path}': {why}")
}

/// The entry path as a clean relative path: `.` components dropped; absolute
/// paths and `..` components refused. `Ok(None)` is the root itself (`.`,
/// `./`, or empty).
pub fn safe_relative(path: &Path) -> Result<Option<PathBuf>, String> {
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

/// The target of a symlink or hard link entry, as the archive spells it (not
/// cleaned: a symlink's target is kept as it is, a hard link's goes through
/// [`safe_relative`]). `shown` is the entry's path for messages. A symlink
/// must have a non-empty target.
pub fn link_name<R: Read>(entry: &tar::Entry<'_, R>, shown: &str) -> Result<PathBuf, String> {
    let symlink = entry.header().entry_type() != EntryType::Link;
    let what = if symlink { "symlink" } else { "hard link" };
    let link = entry
        .link_name()
        .map_err(|e| format!("{what} '{shown}': bad target: {e}"))?
        .ok_or_else(|| format!("{what} '{shown}' has no target"))?
        .into_owned();
    if symlink && link.as_os_str().is_empty() {
        return Err(format!("symlink '{shown}' has an empty target"));
    }
    Ok(link)
}

/// What [`Root::make_room`] found at a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Room<O> {
    /// Nothing: the path is free.
    Free,
    /// A non-directory made earlier, by the owner given; it has been removed.
    Replaced(O),
    /// A directory, which was left alone: the caller decides (an error, or the
    /// directory wins).
    Directory,
}

/// Why a path cannot be the target of a hard link ([`Root::link_source`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotLinkable {
    /// The current archive made something there, but not a regular file (a
    /// symlink or a directory).
    NotRegular,
    /// The current archive made nothing there (yet).
    NotBefore,
}

/// A regular file the current archive extracted, which a hard link may point at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkSource(PathBuf);

impl LinkSource {
    /// The file's path relative to the root.
    pub fn rel(&self) -> &Path {
        &self.0
    }
}

/// A non-directory a root made.
struct Made<O> {
    owner: O,
    /// The [`Root::next_archive`] count when it was made.
    archive: u32,
    /// A regular file (made by [`Root::create_file`] or [`Root::hard_link`]).
    regular: bool,
}

/// The directory an archive (or several, one after the other) is extracted
/// into, and what the extraction made there (see the module comment). Paths
/// are relative to the root and already cleaned by [`safe_relative`]. `O` tags
/// every non-directory made with its owner.
pub struct Root<O = ()> {
    path: PathBuf,
    /// The mode given to the directories created (exactly, not through the
    /// umask); `None` leaves `mkdir`'s (0777 less the umask).
    dir_mode: Option<u32>,
    /// Paths in messages start with `/` (the root is a filesystem root).
    slash: bool,
    /// Relative paths known to be real directories (`""` is the root).
    dirs: HashSet<PathBuf>,
    /// Relative paths of the non-directories made.
    made: HashMap<PathBuf, Made<O>>,
    archive: u32,
}

impl<O> Root<O> {
    /// A root at `path`, which must be a directory holding nothing that this
    /// root did not make (normally: empty).
    pub fn new(path: &Path) -> Self {
        Root {
            path: path.to_path_buf(),
            dir_mode: None,
            slash: false,
            dirs: [PathBuf::new()].into_iter().collect(),
            made: HashMap::new(),
            archive: 0,
        }
    }

    /// Directories created get exactly `mode`.
    pub fn with_dir_mode(mut self, mode: u32) -> Self {
        self.dir_mode = Some(mode);
        self
    }

    /// Messages name paths from `/` (for a root that is a filesystem's root).
    pub fn with_slash_names(mut self) -> Self {
        self.slash = true;
        self
    }

    /// The root directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether `rel` is known to be a real directory.
    pub fn is_dir(&self, rel: &Path) -> bool {
        self.dirs.contains(rel)
    }

    /// Starts the next archive: hard links may no longer point at the files
    /// made before.
    pub fn next_archive(&mut self) {
        self.archive += 1;
    }

    fn shown(&self, rel: &Path) -> String {
        if self.slash {
            format!("/{}", rel.display())
        } else {
            rel.display().to_string()
        }
    }

    /// Creates `rel` and its parents as real directories, refusing to go
    /// through anything that is not one (a symlink in particular). Directories
    /// already known are not looked at again.
    pub fn make_dirs(&mut self, rel: &Path) -> io::Result<()> {
        if self.dirs.contains(rel) {
            return Ok(());
        }
        // The kernel would refuse the path anyway; refusing it here bounds the
        // walk below (and leaves no ancestors behind).
        if self.path.as_os_str().len() + 1 + rel.as_os_str().len() >= PATH_MAX {
            return Err(rustix::io::Errno::NAMETOOLONG.into());
        }
        // The missing ancestors, deepest first (the root is always known).
        let missing: Vec<&Path> = rel
            .ancestors()
            .take_while(|a| !self.dirs.contains(*a))
            .collect();
        for &dir in missing.iter().rev() {
            let cur = self.path.join(dir);
            match fs::create_dir(&cur) {
                Ok(()) => {
                    if let Some(mode) = self.dir_mode {
                        fs::set_permissions(&cur, fs::Permissions::from_mode(mode))?;
                    }
                }
                // `mkdir` never follows a symlink in the last component: look
                // at what is there.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    let m = fs::symlink_metadata(&cur)?;
                    if !m.file_type().is_dir() {
                        let what = if m.file_type().is_symlink() {
                            "a symlink"
                        } else {
                            "not a directory"
                        };
                        return Err(io::Error::other(format!(
                            "'{}' is {what}; refusing to extract through it",
                            self.shown(dir)
                        )));
                    }
                }
                Err(e) => return Err(e),
            }
            self.dirs.insert(dir.to_path_buf());
        }
        Ok(())
    }

    /// Creates the parent directories of `rel` ([`Root::make_dirs`]).
    pub fn make_parents(&mut self, rel: &Path) -> io::Result<()> {
        match rel.parent() {
            Some(parent) => self.make_dirs(parent),
            None => Ok(()),
        }
    }

    /// Gets `rel` ready for a new non-directory: a non-directory made there
    /// before is removed ([`Room::Replaced`] with its owner); a directory is left
    /// alone ([`Room::Directory`]). Parents are not created
    /// ([`Root::make_parents`]).
    pub fn make_room(&mut self, rel: &Path) -> io::Result<Room<O>> {
        if self.dirs.contains(rel) {
            return Ok(Room::Directory);
        }
        match self.remove(rel)? {
            Some(owner) => Ok(Room::Replaced(owner)),
            None => Ok(Room::Free),
        }
    }

    /// Removes the non-directory made at `rel`, returning its owner; `None`
    /// when nothing was made there (nothing is removed then).
    pub fn remove(&mut self, rel: &Path) -> io::Result<Option<O>> {
        let Some(made) = self.made.remove(rel) else {
            return Ok(None);
        };
        fs::remove_file(self.path.join(rel))?;
        Ok(Some(made.owner))
    }

    /// Creates the regular file `rel` (`O_CREAT | O_EXCL | O_NOFOLLOW`, `mode`
    /// less the umask) for writing, its parents if need be.
    pub fn create_file(&mut self, rel: &Path, mode: u32, owner: O) -> io::Result<File> {
        self.make_parents(rel)?;
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(self.path.join(rel))?;
        self.record(rel, owner, true);
        Ok(file)
    }

    /// Creates the symlink `rel` pointing at `target` (as given, never
    /// followed), its parents if need be.
    pub fn symlink(&mut self, target: &Path, rel: &Path, owner: O) -> io::Result<()> {
        self.make_parents(rel)?;
        std::os::unix::fs::symlink(target, self.path.join(rel))?;
        self.record(rel, owner, false);
        Ok(())
    }

    /// The regular file `rel` as a hard link target: made by the current
    /// archive as a regular file, and still one.
    pub fn link_source(&self, rel: &Path) -> Result<LinkSource, NotLinkable> {
        match self.made.get(rel) {
            Some(m) if m.archive == self.archive => {
                if !m.regular {
                    return Err(NotLinkable::NotRegular);
                }
                match fs::symlink_metadata(self.path.join(rel)) {
                    Ok(m) if m.file_type().is_file() => Ok(LinkSource(rel.to_path_buf())),
                    Ok(_) => Err(NotLinkable::NotRegular),
                    Err(_) => Err(NotLinkable::NotBefore),
                }
            }
            _ if self.dirs.contains(rel) => Err(NotLinkable::NotRegular),
            _ => Err(NotLinkable::NotBefore),
        }
    }

    /// Creates `rel` as a hard link to `source`, its parents if need be.
    pub fn hard_link(&mut self, source: &LinkSource, rel: &Path, owner: O) -> io::Result<()> {
        self.make_parents(rel)?;
        fs::hard_link(self.path.join(&source.0), self.path.join(rel))?;
        self.record(rel, owner, true);
        Ok(())
    }

    fn record(&mut self, rel: &Path, owner: O, regular: bool) {
        let made = Made {
            owner,
            archive: self.archive,
            regular,
        };
        self.made.insert(rel.to_path_buf(), made);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn p(s: &str) -> &Path {
        Path::new(s)
    }

    #[test]
    fn detects_formats() {
        assert_eq!(
            Compression::detect(&[0x1f, 0x8b, 8]).unwrap(),
            Compression::Gzip
        );
        assert_eq!(
            Compression::detect(b"\xfd7zXZ\x00rest").unwrap(),
            Compression::Xz
        );
        assert_eq!(
            Compression::detect(&[0x28, 0xb5, 0x2f, 0xfd, 0]).unwrap(),
            Compression::Zstd
        );
        assert!(Compression::detect(b"BZh91AY")
            .unwrap_err()
            .contains("bzip2"));
        assert!(Compression::detect(b"PK\x03\x04")
            .unwrap_err()
            .contains("zip"));
        assert!(Compression::detect(b"<html>")
            .unwrap_err()
            .contains("not a tar"));
        let mut tar = vec![0u8; 512];
        tar[257..262].copy_from_slice(b"ustar");
        assert_eq!(Compression::detect(&tar).unwrap(), Compression::None);
    }

    #[test]
    fn decompresses_concatenated_streams() {
        let mut gz = Vec::new();
        for part in [&b"he"[..], b"llo"] {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(part).unwrap();
            gz.extend(e.finish().unwrap());
        }
        let mut xz = Vec::new();
        for part in [&b"he"[..], b"llo"] {
            let mut e = xz2::write::XzEncoder::new(Vec::new(), 1);
            e.write_all(part).unwrap();
            xz.extend(e.finish().unwrap());
        }
        let zst = zstd::encode_all(&b"hello"[..], 1).unwrap();
        for (c, bytes) in [
            (Compression::None, b"hello".to_vec()),
            (Compression::Gzip, gz),
            (Compression::Xz, xz),
            (Compression::Zstd, zst),
        ] {
            assert_eq!(Compression::detect(&bytes).is_ok(), c != Compression::None);
            let mut out = Vec::new();
            c.reader(&bytes[..]).unwrap().read_to_end(&mut out).unwrap();
            assert_eq!(out, b"hello", "{c:?}");
        }
    }

    #[test]
    fn safe_relative_paths() {
        assert_eq!(
            safe_relative(p("./a/./b")).unwrap(),
            Some(PathBuf::from("a/b"))
        );
        assert_eq!(safe_relative(p("./")).unwrap(), None);
        assert_eq!(safe_relative(p("")).unwrap(), None);
        for evil in ["../x", "a/../../x", "./a/.."] {
            let e = safe_relative(p(evil)).unwrap_err();
            assert!(e.contains("'..'"), "{evil}: {e}");
        }
        for evil in ["/abs", "/etc/passwd", "//x"] {
            let e = safe_relative(p(evil)).unwrap_err();
            assert!(e.contains("absolute"), "{evil}: {e}");
        }
        assert_eq!(
            refuse("entry", "../x", "the path contains '..'"),
            "refusing hostile entry '../x': the path contains '..'"
        );
    }

    #[test]
    fn reads_link_names() {
        let mut t = tar::Builder::new(Vec::new());
        for (kind, path, link) in [
            (EntryType::Symlink, "s", "../anywhere"),
            (EntryType::Symlink, "empty", ""),
            (EntryType::Link, "h", "a/b"),
        ] {
            let mut h = tar::Header::new_ustar();
            h.set_entry_type(kind);
            h.set_size(0);
            h.as_old_mut().linkname[..link.len()].copy_from_slice(link.as_bytes());
            h.set_path(path).unwrap();
            h.set_cksum();
            t.append(&h, &[][..]).unwrap();
        }
        let bytes = t.into_inner().unwrap();
        let mut a = tar::Archive::new(&bytes[..]);
        let got: Vec<Result<PathBuf, String>> = a
            .entries()
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                let shown = e.path().unwrap().display().to_string();
                link_name(&e, &shown)
            })
            .collect();
        assert_eq!(got[0], Ok(PathBuf::from("../anywhere")));
        assert_eq!(got[1], Err("symlink 'empty' has no target".to_string()));
        assert_eq!(got[2], Ok(PathBuf::from("a/b")));
    }

    #[test]
    fn makes_directories_never_through_a_symlink() {
        let outside = tempfile::tempdir().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let mut root: Root = Root::new(dir.path());
        root.make_dirs(p("a/b/c")).unwrap();
        assert!(dir.path().join("a/b/c").is_dir());
        assert!(root.is_dir(p("a/b")));

        // A symlink parent, made by the archive or found there.
        root.symlink(outside.path(), p("a/link"), ()).unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("planted")).unwrap();
        for rel in ["a/link/x", "planted/x"] {
            let e = root.make_parents(p(rel)).unwrap_err().to_string();
            assert!(e.contains("is a symlink; refusing"), "{rel}: {e}");
            assert!(root.create_file(p(rel), 0o644, ()).is_err());
            let e = root.make_dirs(p(rel)).unwrap_err().to_string();
            assert!(e.contains("symlink"), "{rel}: {e}");
        }
        assert_eq!(fs::read_dir(outside.path()).unwrap().count(), 0);

        // A file parent; names from `/` when asked.
        let mut root: Root = Root::new(dir.path()).with_slash_names();
        root.create_file(p("f"), 0o644, ()).unwrap();
        let e = root.make_dirs(p("f/g")).unwrap_err().to_string();
        assert_eq!(e, "'/f' is not a directory; refusing to extract through it");
    }

    #[test]
    fn directory_mode_is_exact() {
        let dir = tempfile::tempdir().unwrap();
        let mut root: Root = Root::new(dir.path()).with_dir_mode(0o750);
        root.make_dirs(p("x/y")).unwrap();
        for d in ["x", "x/y"] {
            let mode = fs::metadata(dir.path().join(d))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o7777, 0o750, "{d}");
        }
    }

    #[test]
    fn deep_paths() {
        let dir = tempfile::tempdir().unwrap();
        let mut root: Root = Root::new(dir.path());
        // Created iteratively, however deep.
        let deep = PathBuf::from("d/".repeat(1500));
        root.make_dirs(&deep).unwrap();
        assert!(dir.path().join(&deep).is_dir());
        // Longer than the kernel takes: refused before anything is made.
        let e = root
            .make_dirs(&PathBuf::from("e/".repeat(200_000)))
            .unwrap_err();
        assert_eq!(
            e.raw_os_error(),
            Some(rustix::io::Errno::NAMETOOLONG.raw_os_error())
        );
        assert!(!dir.path().join("e").exists());
    }

    #[test]
    fn files_are_never_written_through_or_over() {
        let outside = tempfile::tempdir().unwrap();
        let victim = outside.path().join("victim");
        let dir = tempfile::tempdir().unwrap();
        let mut root: Root<&str> = Root::new(dir.path());
        // Something the root did not make is not overwritten, nor followed.
        std::os::unix::fs::symlink(&victim, dir.path().join("planted")).unwrap();
        let e = root.create_file(p("planted"), 0o644, "a").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        assert!(!victim.exists());

        // What it made is replaced once the room is made, and the owner told.
        root.symlink(&victim, p("f"), "a").unwrap();
        assert!(root.create_file(p("f"), 0o644, "b").is_err());
        assert_eq!(root.make_room(p("f")).unwrap(), Room::Replaced("a"));
        root.create_file(p("f"), 0o644, "b")
            .unwrap()
            .write_all(b"mine")
            .unwrap();
        assert_eq!(fs::read(dir.path().join("f")).unwrap(), b"mine");
        assert!(!victim.exists());
        assert_eq!(root.make_room(p("g")).unwrap(), Room::Free);
        root.make_dirs(p("d")).unwrap();
        assert_eq!(root.make_room(p("d")).unwrap(), Room::Directory);
        assert!(dir.path().join("d").is_dir());
        assert_eq!(root.remove(p("f")).unwrap(), Some("b"));
        assert!(!dir.path().join("f").exists());
        assert_eq!(root.remove(p("f")).unwrap(), None);
    }

    #[test]
    fn hard_links_only_to_regular_files_extracted_before() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("planted"), b"not ours").unwrap();
        let mut root: Root = Root::new(dir.path());
        root.create_file(p("a/file"), 0o644, ()).unwrap();
        root.symlink(p("file"), p("a/sym"), ()).unwrap();
        root.make_dirs(p("a/dir")).unwrap();
        for (rel, why) in [
            ("nothere", NotLinkable::NotBefore),
            ("planted", NotLinkable::NotBefore),
            ("a/sym", NotLinkable::NotRegular),
            ("a/dir", NotLinkable::NotRegular),
        ] {
            assert_eq!(root.link_source(p(rel)), Err(why), "{rel}");
        }
        let src = root.link_source(p("a/file")).unwrap();
        assert_eq!(src.rel(), p("a/file"));
        root.hard_link(&src, p("b/h"), ()).unwrap();
        // A link to a link is a link to a regular file.
        let src = root.link_source(p("b/h")).unwrap();
        root.hard_link(&src, p("b/h2"), ()).unwrap();
        let ino = |r: &str| {
            std::os::unix::fs::MetadataExt::ino(&fs::metadata(dir.path().join(r)).unwrap())
        };
        assert_eq!(ino("a/file"), ino("b/h2"));

        // The next archive may not link to what this one made.
        root.next_archive();
        assert_eq!(root.link_source(p("a/file")), Err(NotLinkable::NotBefore));
        root.make_room(p("a/file")).unwrap();
        root.create_file(p("a/file"), 0o644, ()).unwrap();
        assert!(root.link_source(p("a/file")).is_ok());
    }
}
