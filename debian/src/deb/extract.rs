//! Extracting `.deb` data members into one merged-`/usr` root, in order.
//!
//! Owns: who shipped which path when several packages are unpacked into one
//! root (a later package wins over an earlier one's file, and is reported; a
//! directory wins over a non-directory), and what differs from a tarball.
//!
//! The archives are treated as hostile, with the rules of
//! `rocmx_store::untar` (shared with `builtin:fetchurl`'s tarball unpacker):
//! absolute paths and `..` components are refused; every parent directory is
//! created by us and checked not to be a symlink, and files are created with
//! `O_NOFOLLOW | O_EXCL` after removing what was there, so nothing is ever
//! written through a symlink; symlinks are created as they are (never followed);
//! hard links may only point at regular files this same `.deb` extracted before
//! (each package is the untar root's next archive). Unlike a tarball, a package
//! may carry device nodes or FIFOs (old `makedev`): they are skipped with a note
//! in the log, as an unprivileged dpkg could not make them either. Setuid,
//! setgid and sticky bits are dropped; the owner always gets read (and, on
//! directories, write and search) so the store can ingest the tree; other mode
//! bits are kept; ownership and mtimes are not.
//!
//! The unpacker is the only writer of its root while it runs, so its untar root
//! remembers what it made instead of asking the filesystem again: the
//! directories it created or checked (never removed: a directory always wins)
//! and the non-directories it created, each with the package that shipped it.
//! A path in neither is absent; if something is there all the same, `O_EXCL`
//! creation fails rather than overwriting it.
//!
//! Must not: run maintainer scripts, write outside the root it is given, or
//! touch the network.

use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc::sync_channel;

use rocmx_store::untar::{self, link_name, safe_relative, Room};
use tar::EntryType;

use super::readahead::{self, Event, MemberReader};
use super::{merged_usr, walk, Control, DebError, MERGED_DIRS};

/// Bytes copied per `write` when extracting a file.
const COPY_BUF: usize = 1 << 17;

/// How refusals name an entry (`refusing hostile entry '…': …`).
const ENTRY: &str = "entry";

/// The untar root, each non-directory tagged with the package that shipped it.
type Root = untar::Root<String>;

/// Unpacks `.deb` files one after the other into one merged-`/usr` root (see
/// the module comment).
pub struct Unpacker {
    /// Relative paths are after the `/usr` mapping.
    root: Root,
    buf: Vec<u8>,
}

impl Unpacker {
    /// An unpacker into `root`, which must exist and be empty (or hold only what
    /// this unpacker made).
    pub fn new(root: &Path) -> Self {
        Unpacker {
            root: Root::new(root).with_dir_mode(0o755).with_slash_names(),
            buf: vec![0; COPY_BUF],
        }
    }

    /// Unpacks the data of `deb`; notes (replaced files, skipped special
    /// files) go to `log`.
    pub fn unpack(&mut self, deb: &Path, log: &mut dyn Write) -> Result<Control, DebError> {
        let Unpacker { root, buf } = self;
        let mut extract = |c: &Control, member: &str, stream: &mut dyn Read| {
            extract_data(root, buf, c, stream, log).map_err(|message| DebError {
                deb: deb.to_path_buf(),
                member: member.to_string(),
                message,
            })
        };
        walk(deb, Some(&mut extract))
    }

    /// Unpacks `debs` in order, reading and decompressing ahead on a second
    /// thread ([`readahead`]); the result is the same as [`Unpacker::unpack`]
    /// on each in turn. Writes `unpacked PACKAGE VERSION (ARCH)` to `log` after
    /// each. Stops at the first defect.
    pub fn unpack_all(
        &mut self,
        debs: &[PathBuf],
        log: &mut dyn Write,
    ) -> Result<Vec<Control>, DebError> {
        let Unpacker { root, buf } = self;
        std::thread::scope(|s| {
            let (tx, rx) = sync_channel(readahead::AHEAD);
            s.spawn(move || readahead::produce(debs, tx));
            let mut done = Vec::with_capacity(debs.len());
            for deb in debs {
                let (control, member) = match rx.recv() {
                    Ok(Event::Begin(c, m)) => (c, m),
                    Ok(Event::Failed(e)) => return Err(e),
                    Ok(_) | Err(_) => {
                        return Err(DebError {
                            deb: deb.clone(),
                            member: String::new(),
                            message: "internal: the reading thread stopped early".into(),
                        })
                    }
                };
                let mut reader = MemberReader::new(&rx);
                let r = extract_data(root, buf, &control, &mut reader, log);
                reader.drain();
                // A failure to read the member explains a tar error, not the reverse.
                if let Some(e) = reader.failed.take() {
                    return Err(e);
                }
                r.map_err(|message| DebError {
                    deb: deb.clone(),
                    member,
                    message,
                })?;
                writeln!(log, "unpacked {control}").ok();
                done.push(control);
            }
            Ok(done)
        })
    }
}

fn refuse(path: &str, why: &str) -> String {
    untar::refuse(ENTRY, path, why)
}

/// Extracts one package's data tar stream into the root.
fn extract_data(
    root: &mut Root,
    buf: &mut [u8],
    control: &Control,
    stream: &mut dyn Read,
    log: &mut dyn Write,
) -> Result<(), String> {
    let pkg = &control.package;
    // Hard links may point only at regular files this package extracted.
    root.next_archive();
    let mut tar = tar::Archive::new(stream);
    let entries = tar
        .entries()
        .map_err(|e| format!("reading the tar stream: {e}"))?;
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
        let mode = entry.header().mode().unwrap_or(0o644) & 0o777;
        match kind {
            EntryType::Directory => {
                if !root.is_dir(&rel) {
                    let before = root
                        .remove(&rel)
                        .map_err(|e| format!("replacing '/{}': {e}", rel.display()))?;
                    if let Some(before) = before {
                        writeln!(
                            log,
                            "note: {pkg} ships the directory /{} where {before} shipped a non-directory; the directory wins",
                            rel.display()
                        )
                        .ok();
                    }
                    root.make_dirs(&rel)
                        .map_err(|e| format!("creating directory '{shown}': {e}"))?;
                }
                fs::set_permissions(
                    root.path().join(&rel),
                    fs::Permissions::from_mode(mode | 0o700),
                )
                .map_err(|e| format!("setting the mode of '{shown}': {e}"))?;
            }
            EntryType::Regular | EntryType::Continuous | EntryType::GNUSparse => {
                if !make_room(root, &rel, pkg, log).map_err(|e| format!("'{shown}': {e}"))? {
                    continue;
                }
                let mut out = root
                    .create_file(&rel, 0o600, pkg.clone())
                    .map_err(|e| format!("creating '{shown}': {e}"))?;
                copy(&mut entry, &mut out, buf)
                    .map_err(|e| format!("extracting '{shown}': {e}"))?;
                out.set_permissions(fs::Permissions::from_mode(mode | 0o400))
                    .map_err(|e| format!("setting the mode of '{shown}': {e}"))?;
            }
            EntryType::Symlink => {
                let link = link_name(&entry, &shown)?;
                if !make_room(root, &rel, pkg, log).map_err(|e| format!("'{shown}': {e}"))? {
                    continue;
                }
                root.symlink(&link, &rel, pkg.clone())
                    .map_err(|e| format!("creating symlink '{shown}': {e}"))?;
            }
            EntryType::Link => {
                let link = link_name(&entry, &shown)?;
                let link_shown = link.display().to_string();
                let link_rel = safe_relative(&link)
                    .map_err(|why| {
                        refuse(&shown, &format!("hard link target '{link_shown}': {why}"))
                    })?
                    .ok_or_else(|| refuse(&shown, "a hard link to the root"))?;
                let link_rel = merged_usr(&link_rel);
                let source = root.link_source(&link_rel).map_err(|_| {
                    refuse(
                        &shown,
                        &format!(
                            "hard link target '{link_shown}' is not a regular file extracted before it from this package"
                        ),
                    )
                })?;
                if link_rel == rel {
                    continue;
                }
                if !make_room(root, &rel, pkg, log).map_err(|e| format!("'{shown}': {e}"))? {
                    continue;
                }
                root.hard_link(&source, &rel, pkg.clone())
                    .map_err(|e| format!("creating hard link '{shown}': {e}"))?;
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
fn make_room(root: &mut Root, rel: &Path, pkg: &str, log: &mut dyn Write) -> io::Result<bool> {
    root.make_parents(rel)?;
    match root.make_room(rel)? {
        Room::Free => {}
        Room::Replaced(before) => {
            if before != pkg {
                writeln!(log, "note: {pkg} replaces /{} from {before}", rel.display()).ok();
            }
        }
        Room::Directory => {
            writeln!(
                log,
                "note: {pkg} ships a non-directory at /{} where a directory is; the directory wins",
                rel.display()
            )
            .ok();
            return Ok(false);
        }
    }
    Ok(true)
}

/// Copies a file's bytes through `buf` (larger writes than `io::copy`'s).
fn copy(r: &mut impl Read, w: &mut impl Write, buf: &mut [u8]) -> io::Result<()> {
    loop {
        let n = match r.read(buf) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        w.write_all(&buf[..n])?;
    }
}

#[cfg(test)]
mod tests {
    use super::super::read_control;
    use super::super::testutil::*;
    use super::*;

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

    /// Every file under `root`, with its kind and bytes, for comparing trees.
    fn listing(root: &Path) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let mut stack = vec![root.to_path_buf()];
        while let Some(p) = stack.pop() {
            let m = fs::symlink_metadata(&p).unwrap();
            let rel = p.strip_prefix(root).unwrap().display().to_string();
            let what = if m.is_dir() {
                for e in fs::read_dir(&p).unwrap() {
                    stack.push(e.unwrap().path());
                }
                "dir".to_string()
            } else if m.file_type().is_symlink() {
                format!("-> {}", fs::read_link(&p).unwrap().display())
            } else {
                format!(
                    "{:o} {}",
                    m.permissions().mode() & 0o7777,
                    String::from_utf8_lossy(&fs::read(&p).unwrap())
                )
            };
            out.push((rel, what));
        }
        out.sort();
        out
    }

    #[test]
    fn reading_ahead_gives_the_same_root_and_notes() {
        let dir = tempfile::tempdir().unwrap();
        // A file larger than several hand-over chunks, and one package
        // replacing another's file.
        let big: Vec<u8> = (0..3 * readahead::CHUNK + 12345)
            .map(|i| (i * 7 % 251) as u8)
            .collect();
        let mut t = Vec::new();
        raw_entry(&mut t, "./usr/lib/big", EntryType::Regular, "", 0o644, &big);
        raw_entry(
            &mut t,
            "./usr/bin/tool",
            EntryType::Regular,
            "",
            0o755,
            b"A",
        );
        let a = deb(
            dir.path(),
            "a.deb",
            b"2.0\n",
            &[
                ("control.tar.xz", xz(&control_tar("a"))),
                ("data.tar.xz", xz(&finish(t))),
            ],
        );
        let b = deb(
            dir.path(),
            "b.deb",
            b"2.0\n",
            &[
                ("control.tar", control_tar("b")),
                ("data.tar.xz", xz(&simple_data())),
            ],
        );
        let mut t = Vec::new();
        raw_entry(
            &mut t,
            "./usr/bin/tool",
            EntryType::Regular,
            "",
            0o755,
            b"C",
        );
        let c = deb(
            dir.path(),
            "c.deb",
            b"2.0\n",
            &[("control.tar", control_tar("c")), ("data.tar", finish(t))],
        );
        let debs = vec![a, b, c];

        let one = dir.path().join("one");
        fs::create_dir(&one).unwrap();
        let mut log1 = Vec::new();
        let mut u = Unpacker::new(&one);
        for d in &debs {
            let c = u.unpack(d, &mut log1).unwrap();
            writeln!(log1, "unpacked {c}").unwrap();
        }
        let all = dir.path().join("all");
        fs::create_dir(&all).unwrap();
        let mut log2 = Vec::new();
        let got = Unpacker::new(&all).unpack_all(&debs, &mut log2).unwrap();
        assert_eq!(
            got.iter().map(|c| c.package.as_str()).collect::<Vec<_>>(),
            ["a", "b", "c"]
        );
        assert_eq!(listing(&one), listing(&all));
        assert_eq!(fs::read(all.join("usr/lib/big")).unwrap(), big);
        assert_eq!(fs::read(all.join("usr/bin/tool")).unwrap(), b"C");
        assert_eq!(
            String::from_utf8(log1).unwrap(),
            String::from_utf8(log2).unwrap()
        );
    }

    #[test]
    fn reading_ahead_stops_at_the_first_bad_package() {
        let dir = tempfile::tempdir().unwrap();
        let mut t = Vec::new();
        raw_entry(&mut t, "./first", EntryType::Regular, "", 0o644, b"1");
        let good = deb(
            dir.path(),
            "good.deb",
            b"2.0\n",
            &[
                ("control.tar", control_tar("good")),
                ("data.tar", finish(t)),
            ],
        );
        // A data member whose xz stream is cut in the middle.
        let mut data = xz(&simple_data());
        data.truncate(data.len() / 2);
        let cut = deb(
            dir.path(),
            "cut.deb",
            b"2.0\n",
            &[("control.tar", control_tar("cut")), ("data.tar.xz", data)],
        );
        let mut t = Vec::new();
        raw_entry(&mut t, "./never", EntryType::Regular, "", 0o644, b"x");
        let after = deb(
            dir.path(),
            "after.deb",
            b"2.0\n",
            &[
                ("control.tar", control_tar("after")),
                ("data.tar", finish(t)),
            ],
        );
        let notdeb = dir.path().join("not.deb");
        fs::write(&notdeb, b"hello").unwrap();
        for (debs, needle) in [
            (
                vec![good.clone(), cut.clone(), after.clone()],
                "cut.deb: member 'data.tar.xz': decompressing",
            ),
            (
                vec![good.clone(), notdeb.clone(), after.clone()],
                "not.deb: not a Debian binary package",
            ),
        ] {
            let root = tempfile::tempdir().unwrap();
            let err = Unpacker::new(root.path())
                .unpack_all(&debs, &mut io::sink())
                .unwrap_err()
                .to_string();
            assert!(err.contains(needle), "{err}");
            assert!(root.path().join("first").is_file());
            assert!(!root.path().join("never").exists());
        }
    }
}
