//! Writing one commit's tree out of git's object database: the `git ls-tree
//! -r -z` listing, blobs read through one `git cat-file --batch` (raw: no
//! filters, no attributes).
//!
//! Must not: write outside the directory given. Paths from the repository are
//! treated like a hostile archive's: no empty, `.`, `..` or `.git` components,
//! parents created as real directories and never followed through a symlink,
//! files created exclusively (`O_EXCL` does not follow a symlink either).

use std::ffi::OsStr;
use std::fs::{self, OpenOptions};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{symlink, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::Stdio;

use super::Git;

/// One entry of `git ls-tree -r -z`.
struct Entry<'a> {
    mode: u32,
    kind: &'a str,
    oid: &'a str,
    path: &'a [u8],
}

fn parse_listing(listing: &[u8]) -> Result<Vec<Entry<'_>>, String> {
    let mut out = Vec::new();
    for item in listing.split(|&b| b == 0).filter(|i| !i.is_empty()) {
        let bad = || {
            format!(
                "unexpected 'git ls-tree' line '{}'",
                String::from_utf8_lossy(item)
            )
        };
        let tab = item.iter().position(|&b| b == b'\t').ok_or_else(bad)?;
        let meta = std::str::from_utf8(&item[..tab]).map_err(|_| bad())?;
        let mut words = meta.split(' ');
        let (Some(mode), Some(kind), Some(oid), None) =
            (words.next(), words.next(), words.next(), words.next())
        else {
            return Err(bad());
        };
        let mode = u32::from_str_radix(mode, 8).map_err(|_| bad())?;
        out.push(Entry {
            mode,
            kind,
            oid,
            path: &item[tab + 1..],
        });
    }
    Ok(out)
}

/// Checks a path from the repository: relative, no empty, `.`, `..` or `.git`
/// components.
pub(super) fn safe_path(raw: &[u8]) -> Result<PathBuf, String> {
    let shown = String::from_utf8_lossy(raw);
    if raw.is_empty() {
        return Err("refusing an empty path in the commit's tree".into());
    }
    for part in raw.split(|&b| b == b'/') {
        if part.is_empty() || part == b"." || part == b".." || part.eq_ignore_ascii_case(b".git") {
            return Err(format!("refusing the path '{shown}' in the commit's tree"));
        }
    }
    Ok(PathBuf::from(OsStr::from_bytes(raw)))
}

/// Creates `root/rel` and its parents as real directories (never through a
/// symlink or a file).
fn make_dirs(root: &Path, rel: &Path) -> Result<(), String> {
    let mut cur = root.to_path_buf();
    for part in rel.components() {
        cur.push(part);
        match fs::symlink_metadata(&cur) {
            Ok(m) if m.file_type().is_dir() => {}
            Ok(_) => {
                return Err(format!(
                    "'{}' in the commit's tree is both a file and a directory",
                    rel.display()
                ))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                fs::create_dir(&cur).map_err(|e| format!("creating '{}': {e}", cur.display()))?
            }
            Err(e) => return Err(format!("'{}': {e}", cur.display())),
        }
    }
    Ok(())
}

/// Writes the listed entries under `root`, blobs read with one `git cat-file
/// --batch`.
pub(super) fn write_tree(git: &Git, listing: &[u8], root: &Path) -> Result<(), String> {
    let entries = parse_listing(listing)?;
    let mut blobs: Vec<(PathBuf, &Entry<'_>)> = Vec::new();
    for e in &entries {
        let rel = safe_path(e.path)?;
        match (e.kind, e.mode & 0o170000) {
            // A submodule: an empty directory, as `git archive` gives.
            ("commit", 0o160000) => make_dirs(root, &rel)?,
            ("blob", 0o100000) | ("blob", 0o120000) => {
                if let Some(parent) = rel.parent() {
                    make_dirs(root, parent)?;
                }
                blobs.push((rel, e));
            }
            _ => {
                return Err(format!(
                    "unsupported entry '{}' ({:o} {}) in the commit's tree",
                    rel.display(),
                    e.mode,
                    e.kind
                ))
            }
        }
    }
    if blobs.is_empty() {
        return Ok(());
    }
    let mut child = git
        .command(&["cat-file", "--batch"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot run 'git cat-file': {e}"))?;
    let mut stdin = child.stdin.take().expect("piped");
    let ids: Vec<u8> = blobs
        .iter()
        .flat_map(|(_, e)| format!("{}\n", e.oid).into_bytes())
        .collect();
    let feeder = std::thread::spawn(move || stdin.write_all(&ids));
    let mut out = BufReader::with_capacity(1 << 16, child.stdout.take().expect("piped"));
    let result = read_blobs(&mut out, &blobs, root);
    drop(out);
    let _ = feeder.join();
    let status = child
        .wait()
        .map_err(|e| format!("waiting for 'git cat-file': {e}"))?;
    result?;
    if !status.success() {
        return Err(format!("'git cat-file --batch' failed ({status})"));
    }
    Ok(())
}

fn read_blobs(
    out: &mut impl BufRead,
    blobs: &[(PathBuf, &Entry<'_>)],
    root: &Path,
) -> Result<(), String> {
    let mut line = String::new();
    for (rel, e) in blobs {
        line.clear();
        out.read_line(&mut line)
            .map_err(|err| format!("reading from 'git cat-file': {err}"))?;
        let mut words = line.trim_end().split(' ');
        let (Some(oid), Some("blob"), Some(size)) = (words.next(), words.next(), words.next())
        else {
            return Err(format!(
                "object {} of '{}' is missing from the repository",
                e.oid,
                rel.display()
            ));
        };
        let size: u64 = size
            .parse()
            .map_err(|_| format!("unexpected 'git cat-file' header '{}'", line.trim_end()))?;
        if oid != e.oid {
            return Err(format!("'git cat-file' answered {oid} for {}", e.oid));
        }
        let target = root.join(rel);
        let mut body = out.take(size);
        if e.mode & 0o170000 == 0o120000 {
            let mut link = Vec::new();
            body.read_to_end(&mut link)
                .map_err(|err| format!("reading symlink '{}': {err}", rel.display()))?;
            if link.is_empty() || link.contains(&0) {
                return Err(format!("symlink '{}' has an invalid target", rel.display()));
            }
            symlink(OsStr::from_bytes(&link), &target)
                .map_err(|err| format!("creating symlink '{}': {err}", rel.display()))?;
        } else {
            let perm = if e.mode & 0o111 != 0 { 0o755 } else { 0o644 };
            let mut f = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(perm)
                .open(&target)
                .map_err(|err| format!("creating '{}': {err}", rel.display()))?;
            let n = io::copy(&mut body, &mut f)
                .map_err(|err| format!("writing '{}': {err}", rel.display()))?;
            if n != size {
                return Err(format!("'git cat-file' ended early in '{}'", rel.display()));
            }
        }
        let mut nl = [0u8; 1];
        out.read_exact(&mut nl)
            .map_err(|err| format!("reading from 'git cat-file': {err}"))?;
    }
    Ok(())
}
