//! Reading `.deb` archives: the outer `ar` archive and the `control`
//! paragraph; the extraction of `data.tar.*` into a merged-`/usr` root is
//! [`extract`]'s, and reading ahead of it on a second thread [`readahead`]'s.
//!
//! Owns: the binary package format (deb(5): `debian-binary` = `2.x`, then
//! `control.tar[.gz|.xz|.zst]`, then `data.tar[.gz|.xz|.zst]`; members whose name
//! starts with `_` are ignored as dpkg does), the mapping of `/bin`, `/sbin` and
//! `/lib*` onto `/usr/…` (Debian 13's merged `/usr`, see [`MERGED_DIRS`]). The
//! compressions and the cleaning of entry paths are `rocmx_store::untar`'s.
//!
//! Must not: write anything, or touch the network.

mod extract;
mod readahead;
#[cfg(test)]
mod testutil;

pub use extract::Unpacker;

use std::fmt;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Component, Path, PathBuf};

use rocmx_store::untar::{safe_relative, Compression};

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
                let stream = comp
                    .reader(&mut entry)
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
                    let mut stream = comp
                        .reader(&mut entry)
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

#[cfg(test)]
mod tests {
    use super::testutil::*;
    use super::*;
    use std::fs;
    use std::io::{self, Write};

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
