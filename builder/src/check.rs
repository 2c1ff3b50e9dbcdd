//! Comparing two output trees, for `rocmx build --check`.
//!
//! `--check` rebuilds a derivation whose output is already valid and compares the new
//! output with the registered one. This module owns that comparison: [`diff_trees`] walks
//! both trees side by side and returns every entry that differs, as [`Difference`]s whose
//! [`Display`](fmt::Display) is one human-readable line.
//!
//! What counts: an entry's kind (file, symlink, directory), a file's size, executable bit
//! and contents (BLAKE3), and a symlink's target. What does not: permission bits other
//! than "executable by anyone", owners and times, since both trees are normalised (mtime
//! 1, 0444/0555) before they are compared.
//!
//! Must not: modify either tree, follow symlinks (a symlink is compared by its target
//! text, and a top-level path may itself be a symlink), open anything that is not a
//! regular file (a fifo would block), recurse natively (deep trees must not exhaust the
//! stack), or decide what a difference means for the build (that is the caller's job).

use std::cmp::Ordering;
use std::ffi::OsString;
use std::fmt;
use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use rocmx_store::{Encoding, Hash, HashAlgo, Hasher};

/// How many characters of a hash's Nix base32 form a [`Difference`] line shows (80 bits).
pub const SHORT_HASH_CHARS: usize = 16;

/// What one side of a comparison holds at a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryInfo {
    /// A regular file.
    File {
        /// Its size in bytes.
        size: u64,
        /// Whether any execute bit is set.
        executable: bool,
        /// BLAKE3 of its contents.
        hash: Hash,
    },
    /// A symbolic link (never followed).
    Symlink {
        /// The link's target, as written.
        target: PathBuf,
    },
    /// A directory. Two directories are equal; their children are compared one by one.
    Directory,
}

/// One entry that differs between the old and the new tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    /// The entry's path relative to the tree roots; empty for the roots themselves.
    pub path: PathBuf,
    /// What the old tree holds there (`None`: only in the new one).
    pub old: Option<EntryInfo>,
    /// What the new tree holds there (`None`: only in the old one).
    pub new: Option<EntryInfo>,
}

/// Why two trees could not be compared. Every variant names the host path concerned.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// Reading an entry failed (a missing root, a permission problem, an I/O error).
    #[error("{action} {}: {source}", path.display())]
    Io {
        /// What was being done.
        action: &'static str,
        /// On what.
        path: PathBuf,
        /// Why it failed.
        #[source]
        source: io::Error,
    },
    /// A device, fifo or socket: normalised outputs hold none.
    #[error(
        "{}: not a regular file, directory or symlink (outputs hold no devices, fifos or sockets)",
        path.display()
    )]
    Unsupported {
        /// The entry.
        path: PathBuf,
    },
}

fn io_err(action: &'static str, path: &Path) -> impl FnOnce(io::Error) -> CheckError {
    let path = path.to_path_buf();
    move |source| CheckError::Io {
        action,
        path,
        source,
    }
}

/// `root` joined with `rel`, without the trailing slash `Path::join("")` would add (which
/// would make the kernel follow a symlink at the root).
fn host(root: &Path, rel: &Path) -> PathBuf {
    if rel.as_os_str().is_empty() {
        root.to_path_buf()
    } else {
        root.join(rel)
    }
}

/// The kind of an entry, from its own (not followed) metadata.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    File { executable: bool },
    Symlink,
    Directory,
}

fn kind_of(path: &Path) -> Result<Kind, CheckError> {
    let m = fs::symlink_metadata(path).map_err(io_err("reading", path))?;
    let ft = m.file_type();
    if ft.is_dir() {
        Ok(Kind::Directory)
    } else if ft.is_symlink() {
        Ok(Kind::Symlink)
    } else if ft.is_file() {
        Ok(Kind::File {
            executable: m.permissions().mode() & 0o111 != 0,
        })
    } else {
        Err(CheckError::Unsupported {
            path: path.to_path_buf(),
        })
    }
}

/// The full description of the entry at `path`, whose kind is `kind` (files are hashed).
fn info_of(path: &Path, kind: Kind) -> Result<EntryInfo, CheckError> {
    Ok(match kind {
        Kind::Directory => EntryInfo::Directory,
        Kind::Symlink => EntryInfo::Symlink {
            target: fs::read_link(path).map_err(io_err("reading the link", path))?,
        },
        Kind::File { executable } => {
            let mut f = fs::File::open(path).map_err(io_err("opening", path))?;
            let mut hasher = Hasher::new(HashAlgo::Blake3);
            let size = io::copy(&mut f, &mut hasher).map_err(io_err("reading", path))?;
            EntryInfo::File {
                size,
                executable,
                hash: hasher.finish(),
            }
        }
    })
}

/// The names in directory `path`, sorted bytewise (the order of NAR serialisation).
fn list(path: &Path) -> Result<Vec<OsString>, CheckError> {
    let mut names = Vec::new();
    for e in fs::read_dir(path).map_err(io_err("listing", path))? {
        names.push(e.map_err(io_err("listing", path))?.file_name());
    }
    names.sort();
    Ok(names)
}

/// Compares the trees at `old` and `new` (host paths of two outputs, each a directory, a
/// file or a symlink) and returns every entry that differs, sorted by relative path.
///
/// An entry present on one side only is reported once: a directory missing on the other
/// side is one [`Difference`], not one per descendant; so is a directory that became a
/// file or a symlink. Equal trees give an empty vector.
pub fn diff_trees(old: &Path, new: &Path) -> Result<Vec<Difference>, CheckError> {
    let mut diffs = Vec::new();
    // Relative paths that are directories on both sides, still to be listed.
    let mut pending = Vec::new();
    compare(old, new, PathBuf::new(), &mut pending, &mut diffs)?;
    while let Some(rel) = pending.pop() {
        let (o, n) = (host(old, &rel), host(new, &rel));
        let (old_names, new_names) = (list(&o)?, list(&n)?);
        let (mut i, mut j) = (0, 0);
        while i < old_names.len() || j < new_names.len() {
            let order = match (old_names.get(i), new_names.get(j)) {
                (Some(a), Some(b)) => a.cmp(b),
                (Some(_), None) => Ordering::Less,
                _ => Ordering::Greater,
            };
            match order {
                Ordering::Equal => {
                    compare(old, new, rel.join(&old_names[i]), &mut pending, &mut diffs)?;
                    i += 1;
                    j += 1;
                }
                Ordering::Less => {
                    let p = o.join(&old_names[i]);
                    diffs.push(Difference {
                        path: rel.join(&old_names[i]),
                        old: Some(info_of(&p, kind_of(&p)?)?),
                        new: None,
                    });
                    i += 1;
                }
                Ordering::Greater => {
                    let p = n.join(&new_names[j]);
                    diffs.push(Difference {
                        path: rel.join(&new_names[j]),
                        old: None,
                        new: Some(info_of(&p, kind_of(&p)?)?),
                    });
                    j += 1;
                }
            }
        }
    }
    diffs.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(diffs)
}

/// Compares the entry `rel`, present in both trees: directories on both sides are queued
/// for listing, anything else is described and reported when the descriptions differ.
fn compare(
    old: &Path,
    new: &Path,
    rel: PathBuf,
    pending: &mut Vec<PathBuf>,
    diffs: &mut Vec<Difference>,
) -> Result<(), CheckError> {
    let (o, n) = (host(old, &rel), host(new, &rel));
    let (ko, kn) = (kind_of(&o)?, kind_of(&n)?);
    if ko == Kind::Directory && kn == Kind::Directory {
        pending.push(rel);
        return Ok(());
    }
    let (io, in_) = (info_of(&o, ko)?, info_of(&n, kn)?);
    if io != in_ {
        diffs.push(Difference {
            path: rel,
            old: Some(io),
            new: Some(in_),
        });
    }
    Ok(())
}

/// `blake3:<first SHORT_HASH_CHARS of nix32>…`, or with `full` the whole SRI form.
fn hash_text(hash: &Hash, full: bool) -> String {
    if full {
        hash.encode(Encoding::Sri)
    } else {
        let n32 = hash.encode(Encoding::Nix32);
        let short: String = n32.chars().take(SHORT_HASH_CHARS).collect();
        format!("{}:{short}…", hash.algo())
    }
}

fn bytes(size: u64) -> String {
    if size == 1 {
        "1 byte".to_string()
    } else {
        format!("{size} bytes")
    }
}

impl EntryInfo {
    /// The entry with its kind named: `file, 12 bytes, blake3:…`, `executable file, …`,
    /// `symlink to ../x`, `directory`.
    /// What the entry is, in a few words (`full`: whole hashes).
    pub fn describe(&self, full: bool) -> String {
        match self {
            EntryInfo::File {
                size,
                executable,
                hash,
            } => format!(
                "{}, {}, {}",
                if *executable {
                    "executable file"
                } else {
                    "file"
                },
                bytes(*size),
                hash_text(hash, full)
            ),
            EntryInfo::Symlink { target } => format!("symlink to {}", target.display()),
            EntryInfo::Directory => "directory".to_string(),
        }
    }
}

/// `file, 12 bytes, blake3:<16 nix32 chars>…`, `executable file, …`, `symlink to TARGET`
/// or `directory`. The alternate form (`{:#}`) shows the whole hash in SRI form.
impl fmt::Display for EntryInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe(f.alternate()))
    }
}

/// One line, the path first (`.` for the roots):
///
/// ```text
/// bin/hello: 1208 bytes, blake3:0f3k… → 1210 bytes, blake3:1m9x…
/// bin/tool: 12 bytes, blake3:… → executable, 12 bytes, blake3:…
/// share/x: only in the new output (file, 12 bytes, blake3:…)
/// lib: directory → symlink to ../x
/// ```
///
/// Hashes are abbreviated to [`SHORT_HASH_CHARS`] Nix base32 characters; the alternate
/// form (`{:#}`) shows them whole, in SRI form (`blake3-<base64>`).
impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let full = f.alternate();
        let path = if self.path.as_os_str().is_empty() {
            ".".to_string()
        } else {
            self.path.display().to_string()
        };
        match (&self.old, &self.new) {
            (Some(o), Some(n)) => {
                // File to file: the kind is implied, only "executable" is worth saying.
                let side = |e: &EntryInfo| match e {
                    EntryInfo::File {
                        size,
                        executable,
                        hash,
                    } if matches!((o, n), (EntryInfo::File { .. }, EntryInfo::File { .. })) => {
                        format!(
                            "{}{}, {}",
                            if *executable { "executable, " } else { "" },
                            bytes(*size),
                            hash_text(hash, full)
                        )
                    }
                    other => other.describe(full),
                };
                write!(f, "{path}: {} → {}", side(o), side(n))
            }
            (Some(o), None) => write!(f, "{path}: only in the old output ({})", o.describe(full)),
            (None, Some(n)) => write!(f, "{path}: only in the new output ({})", n.describe(full)),
            (None, None) => write!(f, "{path}: absent from both outputs"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// Writes `contents` at `dir/rel` with `mode`, creating parents.
    fn file(dir: &Path, rel: &str, contents: &str, mode: u32) {
        let p = dir.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, contents).unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(mode)).unwrap();
    }

    fn link(dir: &Path, rel: &str, target: &str) {
        let p = dir.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        symlink(target, p).unwrap();
    }

    /// Two empty trees `old/` and `new/` in a fresh temporary directory.
    fn trees() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let t = tempfile::tempdir().unwrap();
        let (old, new) = (t.path().join("old"), t.path().join("new"));
        fs::create_dir(&old).unwrap();
        fs::create_dir(&new).unwrap();
        (t, old, new)
    }

    fn lines(diffs: &[Difference]) -> Vec<String> {
        diffs.iter().map(|d| d.to_string()).collect()
    }

    /// A tree of every kind, written identically into `dir`.
    fn populate(dir: &Path) {
        file(dir, "bin/hello", "#!/bin/sh\necho hello\n", 0o555);
        file(dir, "share/doc/README", "read me\n", 0o444);
        file(dir, "share/empty", "", 0o444);
        link(dir, "lib/libx.so", "libx.so.1");
        fs::create_dir_all(dir.join("include/nothing")).unwrap();
    }

    #[test]
    fn equal_trees_have_no_differences() {
        let (_t, old, new) = trees();
        populate(&old);
        populate(&new);
        assert_eq!(diff_trees(&old, &new).unwrap(), vec![]);
    }

    #[test]
    fn modes_other_than_exec_and_times_are_ignored() {
        let (_t, old, new) = trees();
        populate(&old);
        populate(&new);
        fs::set_permissions(
            new.join("share/doc/README"),
            fs::Permissions::from_mode(0o644),
        )
        .unwrap();
        fs::set_permissions(new.join("bin/hello"), fs::Permissions::from_mode(0o700)).unwrap();
        let f = fs::File::options()
            .write(true)
            .open(old.join("share/empty"))
            .unwrap();
        f.set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(1))
            .unwrap();
        assert_eq!(diff_trees(&old, &new).unwrap(), vec![]);
    }

    #[test]
    fn every_kind_of_difference_in_path_order() {
        let (_t, old, new) = trees();
        populate(&old);
        populate(&new);
        // Contents and size.
        file(&new, "bin/hello", "#!/bin/sh\necho hello!!\n", 0o555);
        // Same contents, the executable bit gained.
        file(&old, "bin/tool", "tool\n", 0o444);
        file(&new, "bin/tool", "tool\n", 0o555);
        // Same size, different contents.
        file(&old, "share/doc/README", "read me\n", 0o444);
        file(&new, "share/doc/README", "READ ME\n", 0o444);
        // A symlink's target.
        fs::remove_file(new.join("lib/libx.so")).unwrap();
        link(&new, "lib/libx.so", "libx.so.2");
        // A directory (with children) only in the old tree: reported once.
        file(&old, "share/man/man1/hello.1", "manual\n", 0o444);
        file(&old, "share/man/man1/tool.1", "manual\n", 0o444);
        // A file only in the new tree.
        file(&new, "share/x", "twelve bytes", 0o444);
        // A directory became a symlink.
        file(&old, "etc/conf/a", "a\n", 0o444);
        link(&new, "etc/conf", "../x");
        // A file became a directory.
        file(&old, "var", "v", 0o444);
        fs::create_dir(new.join("var")).unwrap();
        // Sorting is by component: `a/b` before `a-c`.
        file(&old, "z/b", "1", 0o444);
        file(&new, "z/b", "2", 0o444);
        file(&new, "z-c", "3", 0o444);

        let diffs = diff_trees(&old, &new).unwrap();
        let paths: Vec<&Path> = diffs.iter().map(|d| d.path.as_path()).collect();
        assert_eq!(
            paths,
            [
                "bin/hello",
                "bin/tool",
                "etc/conf",
                "lib/libx.so",
                "share/doc/README",
                "share/man",
                "share/x",
                "var",
                "z/b",
                "z-c"
            ]
            .map(Path::new)
        );
        assert_eq!(
            lines(&diffs),
            [
                "bin/hello: executable, 21 bytes, blake3:09l3m2kv4x4y1fl5… → executable, 23 bytes, blake3:0948ckicrc3pmnfn…",
                "bin/tool: 5 bytes, blake3:0yx57fnmhwbk1917… → executable, 5 bytes, blake3:0yx57fnmhwbk1917…",
                "etc/conf: directory → symlink to ../x",
                "lib/libx.so: symlink to libx.so.1 → symlink to libx.so.2",
                "share/doc/README: 8 bytes, blake3:1sanhrnpy1xfv6by… → 8 bytes, blake3:1ik3vyjqwlqvxqx2…",
                "share/man: only in the old output (directory)",
                "share/x: only in the new output (file, 12 bytes, blake3:0jwh31nyqcvisc2v…)",
                "var: file, 1 byte, blake3:0wh11lmbbrf1n711… → directory",
                "z/b: 1 byte, blake3:11x4nc2nc4q1k72m… → 1 byte, blake3:0ggyyb45nmkaavps…",
                "z-c: only in the new output (file, 1 byte, blake3:0dv65ha3nmzjwda7…)",
            ]
        );

        // The structured form carries whole hashes of the contents.
        let x = diffs
            .iter()
            .find(|d| d.path == Path::new("share/x"))
            .unwrap();
        assert_eq!(
            x.new,
            Some(EntryInfo::File {
                size: 12,
                executable: false,
                hash: Hash::digest(HashAlgo::Blake3, b"twelve bytes"),
            })
        );
        assert_eq!(x.old, None);
        // The alternate form shows the whole hash in SRI form.
        assert_eq!(
            format!("{x:#}"),
            format!(
                "share/x: only in the new output (file, 12 bytes, {})",
                Hash::digest(HashAlgo::Blake3, b"twelve bytes").to_sri()
            )
        );
    }

    #[test]
    fn roots_that_are_files_or_symlinks() {
        let t = tempfile::tempdir().unwrap();
        let p = |n: &str| t.path().join(n);
        fs::write(p("f1"), "same").unwrap();
        fs::write(p("f2"), "same").unwrap();
        fs::write(p("f3"), "other").unwrap();
        fs::create_dir(p("d")).unwrap();
        symlink("f1", p("l1")).unwrap();
        symlink("f1", p("l2")).unwrap();
        // A dangling symlink is compared by its target too.
        symlink("nowhere", p("l3")).unwrap();

        assert_eq!(diff_trees(&p("f1"), &p("f2")).unwrap(), vec![]);
        assert_eq!(diff_trees(&p("l1"), &p("l2")).unwrap(), vec![]);
        assert_eq!(
            lines(&diff_trees(&p("f1"), &p("f3")).unwrap()),
            [".: 4 bytes, blake3:07q2x3015frqyhvr… → 5 bytes, blake3:0jijibcbq5fw5gm7…"]
        );
        // Not followed: a link to an equal file is still a link.
        let d = diff_trees(&p("f1"), &p("l1")).unwrap();
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].path, PathBuf::new());
        assert_eq!(
            d[0].to_string(),
            ".: file, 4 bytes, blake3:07q2x3015frqyhvr… → symlink to f1"
        );
        assert_eq!(
            lines(&diff_trees(&p("l1"), &p("l3")).unwrap()),
            [".: symlink to f1 → symlink to nowhere"]
        );
        assert_eq!(
            lines(&diff_trees(&p("d"), &p("l3")).unwrap()),
            [".: directory → symlink to nowhere"]
        );
    }

    #[test]
    fn errors_name_the_path() {
        let (t, old, new) = trees();
        let missing = t.path().join("missing");
        let e = diff_trees(&old, &missing).unwrap_err();
        assert!(matches!(&e, CheckError::Io { path, .. } if *path == missing));
        assert_eq!(
            e.to_string(),
            format!(
                "reading {}: No such file or directory (os error 2)",
                missing.display()
            )
        );

        nix::unistd::mkfifo(
            &old.join("pipe"),
            nix::sys::stat::Mode::from_bits_truncate(0o644),
        )
        .unwrap();
        nix::unistd::mkfifo(
            &new.join("pipe"),
            nix::sys::stat::Mode::from_bits_truncate(0o644),
        )
        .unwrap();
        let e = diff_trees(&old, &new).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "{}: not a regular file, directory or symlink (outputs hold no devices, fifos \
                 or sockets)",
                old.join("pipe").display()
            )
        );
        // A fifo on one side only is refused too, never opened.
        fs::remove_file(new.join("pipe")).unwrap();
        assert!(matches!(
            diff_trees(&old, &new),
            Err(CheckError::Unsupported { path }) if path == old.join("pipe")
        ));
    }

    #[test]
    fn deep_trees_do_not_recurse_natively() {
        let (_t, old, new) = trees();
        let mut rel = PathBuf::new();
        for _ in 0..300 {
            rel.push("d");
        }
        fs::create_dir_all(old.join(&rel)).unwrap();
        fs::create_dir_all(new.join(&rel)).unwrap();
        file(&old, &rel.join("leaf").to_string_lossy(), "x", 0o444);
        let d = diff_trees(&old, &new).unwrap();
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].path, rel.join("leaf"));
    }
}
