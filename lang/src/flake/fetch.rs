//! The narrow interface through which flake evaluation gets trees:
//! [`InputFetcher`], implemented by the binary on top of the local store, `git`
//! and the builder's download transport.
//!
//! Also owns [`TrackedTree`], the set of files git tracks in a local flake,
//! which the evaluator consults so that a git flake sees only tracked files
//! (Nix copies a git flake's tracked files into the store before evaluating
//! it; rocmx evaluates in place and never reads or copies what git does not
//! track, nor anything a derivation does not reference).
//!
//! Must not: do I/O itself.

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};

use rocmx_store::Hash;

use super::source::Source;

/// Why a tree could not be had. The message is one line naming the source and
/// the cause, ready to print.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchError(pub String);

impl fmt::Display for FetchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for FetchError {}

/// A tree in the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    /// The store path of the tree (`/rocmx/store/…-source`), logical.
    pub store_path: String,
    /// Where its files can be read now (the physical store location).
    pub physical: PathBuf,
    /// The source as locked: git and GitHub sources carry the `rev` fetched;
    /// the others are unchanged.
    pub locked: Source,
    /// SHA-256 of the tree's NAR serialisation (`nix hash path` of it).
    pub nar_hash: Hash,
    /// The commit's time (seconds since the epoch) when there is a commit.
    pub last_modified: Option<u64>,
}

/// A local directory evaluated in place as the root flake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalTree {
    /// The directory given (absolute, symlinks resolved).
    pub dir: PathBuf,
    /// Set when the directory is inside a git work tree.
    pub git: Option<GitInfo>,
}

/// A git work tree holding a local flake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitInfo {
    /// The top of the work tree.
    pub top: PathBuf,
    /// `HEAD`'s commit when the tracked files have no changes.
    pub rev: Option<String>,
    /// `HEAD`'s commit when they do (shown as `<rev>-dirty`), `None` without a
    /// commit.
    pub dirty_rev: Option<String>,
    /// The files git tracks (committed or staged).
    pub tracked: TrackedTree,
}

/// Fetching trees for flakes.
pub trait InputFetcher {
    /// Fetches `source` into the store and returns where it is.
    ///
    /// A relative `Source::Path` is resolved against `base`, the directory of
    /// the flake that declares it. With `expected`, the tree's NAR hash is
    /// checked *before* anything is added to the store: a mismatch is an error
    /// and the store is left as it was.
    fn fetch(
        &self,
        source: &Source,
        base: &Path,
        expected: Option<&Hash>,
    ) -> Result<Fetched, FetchError>;

    /// Describes a local directory to evaluate in place: whether it is in a git
    /// work tree and, if so, which files git tracks. Reads git's index, never
    /// the files themselves.
    fn local_tree(&self, dir: &Path) -> Result<LocalTree, FetchError>;
}

/// What git tracks below a work tree's top: regular files, symlinks and the
/// directories leading to them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TrackedTree {
    top: PathBuf,
    /// Tracked entries, relative to `top`.
    files: BTreeSet<PathBuf>,
    /// Every directory that contains a tracked entry, relative to `top`
    /// (the top itself is "").
    dirs: BTreeSet<PathBuf>,
}

/// Whether a path is visible in a [`TrackedTree`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tracked {
    /// The path is not below the work tree: the tree has no say.
    Outside,
    /// A tracked file or symlink, or a directory holding one.
    Yes,
    /// Below the work tree but not tracked (and `.git` itself).
    No,
}

impl TrackedTree {
    /// `files` are paths relative to `top`, as `git ls-files -z` prints them.
    pub fn new(top: PathBuf, files: impl IntoIterator<Item = PathBuf>) -> TrackedTree {
        let files: BTreeSet<PathBuf> = files.into_iter().collect();
        let mut dirs = BTreeSet::new();
        dirs.insert(PathBuf::new());
        for f in &files {
            let mut p = f.as_path();
            while let Some(parent) = p.parent() {
                if !dirs.insert(parent.to_path_buf()) {
                    break;
                }
                p = parent;
            }
        }
        TrackedTree { top, files, dirs }
    }

    /// The top of the work tree.
    pub fn top(&self) -> &Path {
        &self.top
    }

    /// The number of tracked entries.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// Whether nothing is tracked.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// Whether `p` (absolute, lexically normal) may be seen.
    pub fn check(&self, p: &Path) -> Tracked {
        let Ok(rel) = p.strip_prefix(&self.top) else {
            return Tracked::Outside;
        };
        // Anything below a tracked file (a tracked symlink to a directory, say)
        // is reached through it.
        let mut q = rel;
        loop {
            if self.files.contains(q) {
                return Tracked::Yes;
            }
            match q.parent() {
                Some(parent) => q = parent,
                None => break,
            }
        }
        if self.dirs.contains(rel) {
            Tracked::Yes
        } else {
            Tracked::No
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracked_tree() {
        let t = TrackedTree::new(
            "/r".into(),
            ["flake.nix", "src/a.c", "src/deep/b.c", "link"]
                .into_iter()
                .map(PathBuf::from),
        );
        assert_eq!(t.check(Path::new("/elsewhere/x")), Tracked::Outside);
        assert_eq!(t.check(Path::new("/r")), Tracked::Yes);
        assert_eq!(t.check(Path::new("/r/flake.nix")), Tracked::Yes);
        assert_eq!(t.check(Path::new("/r/src")), Tracked::Yes);
        assert_eq!(t.check(Path::new("/r/src/deep")), Tracked::Yes);
        assert_eq!(t.check(Path::new("/r/src/deep/b.c")), Tracked::Yes);
        assert_eq!(t.check(Path::new("/r/link/inside")), Tracked::Yes);
        assert_eq!(t.check(Path::new("/r/big.iso")), Tracked::No);
        assert_eq!(t.check(Path::new("/r/.git")), Tracked::No);
        assert_eq!(t.check(Path::new("/r/src/new.c")), Tracked::No);
        assert_eq!(t.len(), 4);
    }
}
