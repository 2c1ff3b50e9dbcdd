//! QA checks on a build's outputs: rocmx's lintian, or Gentoo's QA notices.
//!
//! Run after a successful build, before outputs are normalised (which would
//! hide setuid bits and modes), for derivations that ask for them
//! (`rocmxQa = "1"`, which the stdenv sets). Each check names the offending
//! file relative to the output; a derivation waives a check with
//! `rocmxQaExceptions`, a JSON object `{ "CHECK": "reason" }` (the stdenv
//! passes `meta.qaExceptions`).
//!
//! | check                   | finds                                                     |
//! |-------------------------|-----------------------------------------------------------|
//! | `build-dir-reference`   | the bytes `/build/` in a file: the build directory leaked |
//! | `world-writable`        | a file or directory writable by others                    |
//! | `broken-symlink`        | a relative symlink (or one into the output) that dangles  |
//! | `runpath-outside-store` | an ELF `RUNPATH`/`RPATH` entry not in the store or `$ORIGIN` |
//! | `setuid`                | a setuid or setgid bit                                    |
//! | `archive-mtime`         | an `ar` archive (`.a`) member with a non-zero mtime       |
//!
//! Must not: change the outputs, or read anything outside them.

use std::collections::BTreeMap;
use std::fmt;
use std::fs;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};

/// One QA check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Check {
    BuildDirReference,
    WorldWritable,
    BrokenSymlink,
    RunpathOutsideStore,
    Setuid,
    ArchiveMtime,
}

impl Check {
    pub const ALL: [Check; 6] = [
        Check::BuildDirReference,
        Check::WorldWritable,
        Check::BrokenSymlink,
        Check::RunpathOutsideStore,
        Check::Setuid,
        Check::ArchiveMtime,
    ];

    /// The name used in messages and in `qaExceptions`.
    pub fn name(self) -> &'static str {
        match self {
            Check::BuildDirReference => "build-dir-reference",
            Check::WorldWritable => "world-writable",
            Check::BrokenSymlink => "broken-symlink",
            Check::RunpathOutsideStore => "runpath-outside-store",
            Check::Setuid => "setuid",
            Check::ArchiveMtime => "archive-mtime",
        }
    }

    pub fn from_name(s: &str) -> Option<Check> {
        Check::ALL.into_iter().find(|c| c.name() == s)
    }
}

/// A finding: the check, the file (relative to the output) and what was seen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub check: Check,
    pub file: PathBuf,
    pub detail: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "QA check '{}' failed: {}: {} (waive it with meta.qaExceptions.\"{}\" = \"reason\")",
            self.check.name(),
            self.file.display(),
            self.detail,
            self.check.name()
        )
    }
}

/// Parses `rocmxQaExceptions`; an unknown check name is an error.
pub fn parse_exceptions(json: &str) -> Result<BTreeMap<Check, String>, String> {
    let v: serde_json::Value = serde_json::from_str(json)
        .map_err(|e| format!("qaExceptions is not a JSON object: {e}"))?;
    let obj = v.as_object().ok_or("qaExceptions is not an object")?;
    let mut out = BTreeMap::new();
    for (k, reason) in obj {
        let c = Check::from_name(k).ok_or_else(|| {
            let names: Vec<&str> = Check::ALL.iter().map(|c| c.name()).collect();
            format!(
                "qaExceptions names an unknown check '{k}' (checks: {})",
                names.join(", ")
            )
        })?;
        let reason = reason.as_str().unwrap_or("").trim().to_string();
        if reason.is_empty() {
            return Err(format!(
                "qaExceptions.{k} needs a reason (a non-empty string)"
            ));
        }
        out.insert(c, reason);
    }
    Ok(out)
}

/// Runs every check not waived on the output at `root` (host path);
/// `inside` is the output's path as the build saw it (for symlinks into the
/// output), `store_dir` the logical store directory.
pub fn check_output(
    root: &Path,
    inside: &str,
    store_dir: &str,
    waived: &BTreeMap<Check, String>,
) -> Vec<Finding> {
    let mut found = Vec::new();
    let mut todo = vec![PathBuf::new()];
    while let Some(rel) = todo.pop() {
        let p = if rel.as_os_str().is_empty() {
            root.to_path_buf()
        } else {
            root.join(&rel)
        };
        let Ok(meta) = fs::symlink_metadata(&p) else {
            continue;
        };
        let shown = if rel.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            rel.clone()
        };
        let mut add = |check: Check, detail: String| {
            if !waived.contains_key(&check) {
                found.push(Finding {
                    check,
                    file: shown.clone(),
                    detail,
                });
            }
        };
        let mode = meta.permissions().mode();
        if meta.file_type().is_symlink() {
            if let Ok(target) = fs::read_link(&p) {
                if let Some(why) = dangling(root, &rel, &target, inside) {
                    add(Check::BrokenSymlink, why);
                }
            }
            continue;
        }
        if mode & 0o002 != 0 {
            add(Check::WorldWritable, format!("mode {:o}", mode & 0o7777));
        }
        if mode & 0o6000 != 0 {
            add(Check::Setuid, format!("mode {:o}", mode & 0o7777));
        }
        if meta.is_dir() {
            if let Ok(rd) = fs::read_dir(&p) {
                for e in rd.flatten() {
                    todo.push(rel.join(e.file_name()));
                }
            }
            continue;
        }
        if !meta.is_file() {
            continue;
        }
        let Ok(bytes) = read_all(&p) else {
            continue;
        };
        if let Some(at) = find_build_dir(&bytes) {
            add(
                Check::BuildDirReference,
                format!(
                    "refers to the build directory at byte {at} ('{}')",
                    context(&bytes, at)
                ),
            );
        }
        if bytes.starts_with(b"\x7fELF") {
            for entry in runpath_entries(&bytes) {
                if !(entry.starts_with(&format!("{store_dir}/"))
                    || entry.starts_with("$ORIGIN")
                    || entry.starts_with("${ORIGIN}"))
                {
                    add(
                        Check::RunpathOutsideStore,
                        format!("RUNPATH entry '{entry}' is outside {store_dir}"),
                    );
                }
            }
        }
        if bytes.starts_with(b"!<arch>\n") {
            if let Some((member, mtime)) = nonzero_ar_mtime(&bytes) {
                add(
                    Check::ArchiveMtime,
                    format!("member '{member}' has mtime {mtime} (use 'ar D' or ZERO_AR_DATE)"),
                );
            }
        }
    }
    found.sort_by(|a, b| (a.check, &a.file).cmp(&(b.check, &b.file)));
    found
}

fn read_all(p: &Path) -> std::io::Result<Vec<u8>> {
    let mut v = Vec::new();
    fs::File::open(p)?.read_to_end(&mut v)?;
    Ok(v)
}

/// Why a symlink dangles, for targets that can be checked here: relative ones
/// and those into the output itself.
fn dangling(root: &Path, rel: &Path, target: &Path, inside: &str) -> Option<String> {
    let within: PathBuf = if let Ok(sub) = target.strip_prefix(inside) {
        sub.to_path_buf()
    } else if target.is_relative() {
        let mut p = rel.parent().map(Path::to_path_buf).unwrap_or_default();
        for c in target.components() {
            match c {
                // A target that leaves the output is not checked here.
                Component::ParentDir if !p.pop() => return None,
                Component::ParentDir => {}
                Component::Normal(n) => p.push(n),
                _ => {}
            }
        }
        p
    } else {
        return None;
    };
    let full = root.join(&within);
    // Follow the chain (a link to a link) but never outside the output.
    match fs::metadata(&full) {
        Ok(_) => None,
        Err(_) if fs::symlink_metadata(&full).is_ok() => None,
        Err(_) => Some(format!(
            "points to '{}', which does not exist",
            target.display()
        )),
    }
}

/// The offset of `/build/` (or `/build` at the end of a string) preceded by
/// a byte that cannot be part of a longer path component.
fn find_build_dir(b: &[u8]) -> Option<usize> {
    let pat = b"/build";
    let mut i = 0;
    while i + pat.len() <= b.len() {
        if &b[i..i + pat.len()] == pat {
            let before_ok =
                i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b"._-+".contains(&b[i - 1]));
            let after = b.get(i + pat.len()).copied();
            let after_ok = matches!(
                after,
                None | Some(b'/')
                    | Some(0)
                    | Some(b'"')
                    | Some(b'\'')
                    | Some(b'\n')
                    | Some(b' ')
                    | Some(b':')
            );
            if before_ok && after_ok {
                return Some(i);
            }
        }
        i += 1;
    }
    None
}

fn context(b: &[u8], at: usize) -> String {
    let end = (at + 40).min(b.len());
    String::from_utf8_lossy(&b[at..end])
        .chars()
        .take_while(|c| !c.is_control())
        .collect()
}

/// The `RUNPATH` and `RPATH` entries of an ELF file.
fn runpath_entries(bytes: &[u8]) -> Vec<String> {
    let Ok(elf) = goblin::elf::Elf::parse(bytes) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for s in elf.runpaths.iter().chain(elf.rpaths.iter()) {
        out.extend(s.split(':').filter(|e| !e.is_empty()).map(str::to_string));
    }
    out
}

/// The first member of an `ar` archive whose mtime is not 0.
fn nonzero_ar_mtime(b: &[u8]) -> Option<(String, u64)> {
    let mut off = 8;
    while off + 60 <= b.len() {
        let h = &b[off..off + 60];
        let name = String::from_utf8_lossy(&h[0..16]).trim_end().to_string();
        let mtime: u64 = String::from_utf8_lossy(&h[16..28])
            .trim()
            .parse()
            .unwrap_or(0);
        let size: usize = String::from_utf8_lossy(&h[48..58]).trim().parse().ok()?;
        // The symbol table and the long-name table carry no timestamps that matter.
        if mtime != 0 && name != "/" && name != "//" && name != "/SYM64/" {
            return Some((name.trim_end_matches('/').to_string(), mtime));
        }
        off += 60 + size + (size & 1);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn names(f: &[Finding]) -> Vec<(&'static str, String)> {
        f.iter()
            .map(|x| (x.check.name(), x.file.display().to_string()))
            .collect()
    }

    #[test]
    fn each_check_fires_and_can_be_waived() {
        let t = tempfile::tempdir().unwrap();
        let o = t.path().join("out");
        fs::create_dir_all(o.join("bin")).unwrap();
        fs::write(o.join("bin/ok"), "fine").unwrap();
        fs::write(o.join("leak.pc"), "prefix=/build/source/install\n").unwrap();
        fs::write(o.join("wide"), "x").unwrap();
        fs::set_permissions(o.join("wide"), fs::Permissions::from_mode(0o666)).unwrap();
        fs::write(o.join("suid"), "x").unwrap();
        fs::set_permissions(o.join("suid"), fs::Permissions::from_mode(0o4755)).unwrap();
        symlink("bin/nothere", o.join("dangling")).unwrap();
        symlink("bin/ok", o.join("fine-link")).unwrap();
        symlink("/rocmx/store/xyz-out/bin/ok", o.join("self-link")).unwrap();
        symlink("/rocmx/store/xyz-out/bin/gone", o.join("self-dangling")).unwrap();
        symlink("/usr/bin/elsewhere", o.join("rootfs-link")).unwrap();
        // An ar archive with a non-zero member mtime.
        let mut ar = b"!<arch>\n".to_vec();
        ar.extend(
            format!(
                "{:<16}{:<12}{:<6}{:<6}{:<8}{:<10}`\n",
                "a.o/", 1700000000, 0, 0, 644, 2
            )
            .as_bytes(),
        );
        ar.extend(b"xx");
        fs::write(o.join("libx.a"), &ar).unwrap();
        let none = BTreeMap::new();
        let f = check_output(&o, "/rocmx/store/xyz-out", "/rocmx/store", &none);
        assert_eq!(
            names(&f),
            vec![
                ("build-dir-reference", "leak.pc".to_string()),
                ("world-writable", "wide".to_string()),
                ("broken-symlink", "dangling".to_string()),
                ("broken-symlink", "self-dangling".to_string()),
                ("setuid", "suid".to_string()),
                ("archive-mtime", "libx.a".to_string()),
            ]
        );
        assert!(f[0]
            .to_string()
            .contains("QA check 'build-dir-reference' failed: leak.pc"));
        let waived =
            parse_exceptions(r#"{"world-writable": "a shared spool", "setuid": "ping"}"#).unwrap();
        let f = check_output(&o, "/rocmx/store/xyz-out", "/rocmx/store", &waived);
        assert!(!f
            .iter()
            .any(|x| matches!(x.check, Check::WorldWritable | Check::Setuid)));
        assert!(parse_exceptions(r#"{"nope": "x"}"#)
            .unwrap_err()
            .contains("unknown check 'nope'"));
        assert!(parse_exceptions(r#"{"setuid": ""}"#)
            .unwrap_err()
            .contains("needs a reason"));
    }

    #[test]
    fn build_dir_pattern() {
        assert_eq!(find_build_dir(b"x /build/src y"), Some(2));
        assert_eq!(find_build_dir(b"\"/build\""), Some(1));
        assert_eq!(find_build_dir(b"/rocmx/store/abc-build/x"), None);
        assert_eq!(find_build_dir(b"cmake/build/x"), None);
        assert_eq!(find_build_dir(b"/buildroot/x"), None);
    }

    #[test]
    fn runpaths_of_a_real_elf() {
        // The test binary itself: its RUNPATH (if any) is listed without panicking.
        let me = std::env::current_exe().unwrap();
        let bytes = fs::read(me).unwrap();
        let _ = runpath_entries(&bytes);
        assert!(runpath_entries(b"\x7fELF garbage").is_empty());
    }
}
