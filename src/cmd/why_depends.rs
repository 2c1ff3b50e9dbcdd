//! `rocmx why-depends [--precise] PATH DEP`: why PATH's closure contains DEP, as
//! `nix why-depends` (Nix 2.8) shows it.
//!
//! The chain printed is a shortest one: distances to DEP come from a breadth-first search
//! over the reversed reference graph of PATH's closure, and each step takes the reference
//! nearest to DEP (ties: the first in path order). Output, one path per line:
//!
//! ```text
//! /rocmx/store/…-c
//! └───/rocmx/store/…-b
//!     └───/rocmx/store/…-a
//! ```
//!
//! With `--precise`, each step also names the file (or symlink) of the referrer where the
//! next path's hash part first occurs, with 32 bytes of context on each side (unprintable
//! bytes shown as `.`), files visited in name order:
//!
//! ```text
//! /rocmx/store/…-c
//! └───bin/c: …/rocmx/store/<hash>-b/lib…
//!     → /rocmx/store/…-b
//! ```

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use clap::Args;
use rocmx_store::{LocalStore, StorePath};

use super::common::{open_store, require_valid, store_msg, store_path_arg};
use super::fail::Fail;
use super::StoreOpt;

const TREE_LAST: &str = "└───";
const TREE_NULL: &str = "    ";
/// Bytes of context shown on each side of a hash occurrence.
const MARGIN: usize = 32;

#[derive(Args, Debug)]
pub struct WhyDependsArgs {
    /// For each step, show the file of the referrer that contains the reference.
    #[arg(long)]
    pub precise: bool,
    /// The path whose closure is examined.
    #[arg(value_name = "PATH")]
    pub path: PathBuf,
    /// The dependency to explain.
    #[arg(value_name = "DEP")]
    pub dependency: PathBuf,
}

pub fn run(a: WhyDependsArgs, s: &StoreOpt) -> i32 {
    Fail::exit_code(run_inner(&a, s))
}

fn run_inner(a: &WhyDependsArgs, s: &StoreOpt) -> Result<(), Fail> {
    let store = open_store(s)?;
    let top = store_path_arg(&store, &a.path)?;
    let dep = store_path_arg(&store, &a.dependency)?;
    require_valid(&store, &top)?;
    require_valid(&store, &dep)?;
    let chain = match shortest_chain(&store, &top, &dep)? {
        Some(c) => c,
        None => return Err(Fail::Msg(format!("'{top}' does not depend on '{dep}'"))),
    };
    let mut out = io::BufWriter::new(io::stdout().lock());
    let mut text = format!("{top}\n");
    for (i, pair) in chain.windows(2).enumerate() {
        let (from, to) = (&pair[0], &pair[1]);
        let pad = TREE_NULL.repeat(i);
        if a.precise {
            if let Some(hit) = find_reference(&store.real_path(from), &to.hash_part()) {
                text.push_str(&format!("{pad}{TREE_LAST}{hit}\n"));
            }
            text.push_str(&format!("{pad}{TREE_NULL}→ {to}\n"));
        } else {
            text.push_str(&format!("{pad}{TREE_LAST}{to}\n"));
        }
    }
    out.write_all(text.as_bytes())
        .map_err(|e| Fail::write(&e))?;
    out.flush().map_err(|e| Fail::write(&e))
}

/// A shortest chain of references from `top` to `dep` (both included), or `None` when
/// `dep` is not in `top`'s closure.
fn shortest_chain(
    store: &LocalStore,
    top: &StorePath,
    dep: &StorePath,
) -> Result<Option<Vec<StorePath>>, Fail> {
    // The closure of `top` and its reference graph.
    let mut refs: BTreeMap<StorePath, BTreeSet<StorePath>> = BTreeMap::new();
    let mut todo = vec![top.clone()];
    while let Some(p) = todo.pop() {
        if refs.contains_key(&p) {
            continue;
        }
        let rs = store.references(&p).map_err(|e| Fail::Msg(store_msg(&e)))?;
        todo.extend(rs.iter().filter(|r| !refs.contains_key(*r)).cloned());
        refs.insert(p, rs);
    }
    if !refs.contains_key(dep) {
        return Ok(None);
    }
    // Distances to `dep` over reversed edges.
    let mut referrers: BTreeMap<&StorePath, Vec<&StorePath>> = BTreeMap::new();
    for (a, bs) in &refs {
        for b in bs.iter().filter(|b| *b != a) {
            referrers.entry(b).or_default().push(a);
        }
    }
    let mut dist: BTreeMap<&StorePath, usize> = BTreeMap::new();
    dist.insert(dep, 0);
    let mut queue = VecDeque::from([dep]);
    while let Some(p) = queue.pop_front() {
        let d = dist[p];
        for r in referrers.get(p).into_iter().flatten() {
            if !dist.contains_key(*r) {
                dist.insert(*r, d + 1);
                queue.push_back(*r);
            }
        }
    }
    let mut chain = vec![top.clone()];
    let mut cur = top;
    while cur != dep {
        let next = refs[cur]
            .iter()
            .filter(|r| *r != cur)
            .filter_map(|r| dist.get(r).map(|d| (*d, r)))
            .min_by_key(|(d, _)| *d)
            .map(|(_, r)| r);
        match next {
            Some(n) => {
                chain.push(n.clone());
                cur = n;
            }
            // Unreachable: `cur` has a finite distance, so a reference one step closer.
            None => return Ok(None),
        }
    }
    Ok(Some(chain))
}

/// The first file or symlink under `root` (visited in name order) that contains `hash`,
/// rendered as `nix why-depends --precise` does: `rel/path: …context…` for a file,
/// `rel/path -> target` for a symlink; `/` names `root` itself.
fn find_reference(root: &Path, hash: &str) -> Option<String> {
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let p = if rel.as_os_str().is_empty() {
            root.to_path_buf()
        } else {
            root.join(&rel)
        };
        let shown = if rel.as_os_str().is_empty() {
            "/".to_string()
        } else {
            rel.display().to_string()
        };
        let Ok(m) = fs::symlink_metadata(&p) else {
            continue;
        };
        if m.file_type().is_symlink() {
            let Ok(t) = fs::read_link(&p) else { continue };
            if find(t.as_os_str().as_bytes(), hash.as_bytes()).is_some() {
                return Some(format!("{shown} -> {}", t.display()));
            }
        } else if m.is_dir() {
            let Ok(rd) = fs::read_dir(&p) else { continue };
            let mut names: Vec<_> = rd.flatten().map(|e| e.file_name()).collect();
            names.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
            for n in names.into_iter().rev() {
                stack.push(rel.join(n));
            }
        } else if m.is_file() {
            if let Ok(Some(ctx)) = file_context(&p, hash.as_bytes()) {
                return Some(format!("{shown}: …{ctx}…"));
            }
        }
    }
    None
}

/// The first occurrence of `needle` in the file at `p`, with up to `MARGIN` bytes on each
/// side, unprintable bytes as `.`. Reads the file in chunks.
fn file_context(p: &Path, needle: &[u8]) -> io::Result<Option<String>> {
    const CHUNK: usize = 1 << 20;
    let mut f = File::open(p)?;
    let mut buf: Vec<u8> = Vec::with_capacity(CHUNK + needle.len() + 2 * MARGIN);
    let mut chunk = vec![0u8; CHUNK];
    let mut eof = false;
    let read_more = |f: &mut File, buf: &mut Vec<u8>, chunk: &mut [u8]| -> io::Result<bool> {
        let n = loop {
            match f.read(chunk) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        };
        buf.extend_from_slice(&chunk[..n]);
        Ok(n == 0)
    };
    loop {
        if !eof {
            eof = read_more(&mut f, &mut buf, &mut chunk)?;
        }
        if let Some(pos) = find(&buf, needle) {
            while !eof && buf.len() < pos + needle.len() + MARGIN {
                eof = read_more(&mut f, &mut buf, &mut chunk)?;
            }
            let start = pos.saturating_sub(MARGIN);
            let end = (pos + needle.len() + MARGIN).min(buf.len());
            let shown: String = buf[start..end]
                .iter()
                .map(|&b| {
                    if (0x20..0x7f).contains(&b) {
                        b as char
                    } else {
                        '.'
                    }
                })
                .collect();
            return Ok(Some(shown));
        }
        if eof {
            return Ok(None);
        }
        // Keep what a match straddling the chunk boundary (and its left context) needs.
        let keep = (needle.len() - 1 + MARGIN).min(buf.len());
        buf.drain(..buf.len() - keep);
    }
}

/// The position of the first `needle` in `hay`.
fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    let (&first, rest) = needle.split_first()?;
    let mut i = 0;
    while i + needle.len() <= hay.len() {
        match hay[i..hay.len() - rest.len()]
            .iter()
            .position(|&b| b == first)
        {
            Some(k) => {
                let at = i + k;
                if &hay[at + 1..at + needle.len()] == rest {
                    return Some(at);
                }
                i = at + 1;
            }
            None => return None,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_needles_and_context_across_chunks() {
        assert_eq!(find(b"abcabd", b"abd"), Some(3));
        assert_eq!(find(b"ab", b"abd"), None);
        assert_eq!(find(b"xabd", b"abd"), Some(1));
        let dir = tempfile::tempdir().expect("tmp");
        let f = dir.path().join("f");
        let mut data = vec![b'x'; (1 << 20) - 10];
        data.extend_from_slice(b"NEEDLE-0123456789abcdefghijklmno\n");
        data.extend(std::iter::repeat_n(b'y', 100));
        fs::write(&f, &data).expect("write");
        let ctx = file_context(&f, b"NEEDLE-0123456789abcdefghijklmno")
            .expect("read")
            .expect("found");
        assert_eq!(
            ctx,
            format!(
                "{}NEEDLE-0123456789abcdefghijklmno.{}",
                "x".repeat(32),
                "y".repeat(31)
            )
        );
    }
}
