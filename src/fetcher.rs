//! [`Fetcher`]: the binary's [`InputFetcher`], which brings flake inputs into
//! the local store and describes local flakes.
//!
//! Owns: dispatching on the [`Source`] (`path` here, `git` in [`git`],
//! `tarball` and `github` in [`tarball`]), computing the tree's NAR hash
//! (SHA-256, what `nix hash path` prints) and checking it against the locked
//! one *before* anything reaches the store, adding the tree as a `source`
//! object named `source` (as Nix names fetched trees), and private scratch
//! directories for trees being assembled.
//!
//! Must not: evaluate anything, write lock files (the flake module decides what
//! to lock), run anything from a fetched repository (see [`git`]), read files a
//! local flake's git does not track when describing it, or reach the network
//! other than through the builder's bounded download transport.
//!
//! Every error is one line naming the source and the cause.

mod cache;
pub(crate) mod git;
mod tarball;

use std::fmt::Display;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};

use rocmx_builder::fetchurl::{Limits, Mirrors};
use rocmx_lang::flake::fetch::{FetchError, Fetched, InputFetcher, LocalTree};
use rocmx_lang::flake::source::Source;
use rocmx_store::{Hash, HashAlgo, LocalStore, StorePath};

/// The name of every fetched tree in the store (as in Nix).
pub const SOURCE_NAME: &str = "source";

/// Fetches flake inputs into a [`LocalStore`]: local directories, local git
/// repositories (with the `git` CLI), tarballs and GitHub archives (with the
/// builder's download transport, under [`Limits`], `mirror://` through
/// [`Mirrors`]).
pub struct Fetcher {
    store: Rc<LocalStore>,
    mirrors: Mirrors,
    limits: Limits,
    /// Where GitHub archives are downloaded from (see [`tarball`]).
    github_base: String,
}

impl Fetcher {
    /// A fetcher adding to `store`, downloading under `limits` (typically
    /// `BuildOptions::fetch_limits` after the configuration was applied) with
    /// the mirror table `mirrors`. GitHub archives come from
    /// `$ROCMX_GITHUB_URL`, default `https://github.com`.
    pub fn new(store: Rc<LocalStore>, mirrors: Mirrors, limits: Limits) -> Fetcher {
        Fetcher {
            store,
            mirrors,
            limits,
            github_base: tarball::github_base(std::env::var(tarball::GITHUB_URL_VAR).ok()),
        }
    }

    /// The same fetcher downloading GitHub archives from `base` (`https://HOST`,
    /// no trailing `/`) instead.
    #[cfg(test)]
    pub fn with_github_base(mut self, base: &str) -> Fetcher {
        self.github_base = tarball::github_base(Some(base.to_string()));
        self
    }

    /// The store trees are added to.
    #[cfg(test)]
    pub fn store(&self) -> &Rc<LocalStore> {
        &self.store
    }

    /// Hashes `tree`, checks it against `expected`, adds it to the store.
    ///
    /// `private` trees (scratch directories of this process) are hashed once,
    /// before being added; a directory of the user's (`path:` inputs) may
    /// change at any time, so its store copy is what is hashed, and when it
    /// must match `expected` it is hashed before too and both must agree.
    fn ingest(
        &self,
        source: &Source,
        tree: &Path,
        private: bool,
        expected: Option<&Hash>,
    ) -> Result<(StorePath, PathBuf, Hash), FetchError> {
        if let Some(e) = expected {
            if e.algo() != HashAlgo::Sha256 {
                return Err(fail(
                    source,
                    format!("the locked narHash '{}' is not a SHA-256 hash", e.to_sri()),
                ));
            }
        }
        let before = if private || expected.is_some() {
            let h = nar_sha256(tree).map_err(|e| fail(source, e))?;
            if let Some(e) = expected {
                check_expected(source, e, &h)?;
            }
            Some(h)
        } else {
            None
        };
        let sp = self
            .store
            .add_path(tree, SOURCE_NAME)
            .map_err(|e| fail(source, format!("adding it to the store: {e}")))?;
        let physical = self.store.real_path(&sp);
        let nar_hash = match before {
            Some(h) if private => h,
            _ => {
                let after = nar_sha256(&physical).map_err(|e| fail(source, e))?;
                if let Some(b) = before {
                    if b != after {
                        return Err(fail(
                            source,
                            "the directory changed while it was copied to the store; try again",
                        ));
                    }
                }
                after
            }
        };
        Ok((sp, physical, nar_hash))
    }

    fn fetch_path(
        &self,
        source: &Source,
        path: &str,
        base: &Path,
        expected: Option<&Hash>,
    ) -> Result<Fetched, FetchError> {
        let dir = base.join(path);
        let meta = std::fs::metadata(&dir).map_err(|e| {
            let why = if e.kind() == std::io::ErrorKind::NotFound {
                "does not exist".to_string()
            } else {
                e.to_string()
            };
            fail(source, format!("'{}' {why}", dir.display()))
        })?;
        if !meta.is_dir() {
            return Err(fail(
                source,
                format!("'{}' is not a directory", dir.display()),
            ));
        }
        // The top is followed when it is a symlink; everything below is
        // copied as it is (symlinks stay symlinks, as in a NAR).
        let dir = std::fs::canonicalize(&dir)
            .map_err(|e| fail(source, format!("resolving '{}': {e}", dir.display())))?;
        let (sp, physical, nar_hash) = self.ingest(source, &dir, false, expected)?;
        Ok(Fetched {
            store_path: sp.to_absolute(),
            physical,
            locked: source.clone(),
            nar_hash,
            last_modified: None,
        })
    }
}

impl InputFetcher for Fetcher {
    fn fetch(
        &self,
        source: &Source,
        base: &Path,
        expected: Option<&Hash>,
    ) -> Result<Fetched, FetchError> {
        if let Some(h) = expected {
            if let Some(f) = cache::lookup(&self.store, source, h) {
                return Ok(f);
            }
        }
        let f = self.fetch_uncached(source, base, expected)?;
        cache::record(&self.store, source, &f);
        Ok(f)
    }

    fn local_tree(&self, dir: &Path) -> Result<LocalTree, FetchError> {
        let canon = std::fs::canonicalize(dir)
            .map_err(|e| FetchError(format!("local flake '{}': {e}", dir.display())))?;
        let git = git::work_tree(&canon)?;
        Ok(LocalTree { dir: canon, git })
    }
}

impl Fetcher {
    fn fetch_uncached(
        &self,
        source: &Source,
        base: &Path,
        expected: Option<&Hash>,
    ) -> Result<Fetched, FetchError> {
        match source {
            Source::Path { path } => self.fetch_path(source, path, base, expected),
            Source::Git { url, r#ref, rev } => {
                let exported = git::export(source, url, r#ref.as_deref(), rev.as_deref())?;
                let (sp, physical, nar_hash) =
                    self.ingest(source, exported.tree.path(), true, expected)?;
                Ok(Fetched {
                    store_path: sp.to_absolute(),
                    physical,
                    locked: source.with_rev(&exported.rev),
                    nar_hash,
                    last_modified: Some(exported.commit_time),
                })
            }
            Source::Tarball { url } => self.fetch_archive(source, url, expected),
            Source::GitHub { .. } => self.fetch_github(source, expected),
        }
    }
}

/// The one-line error for `source`.
fn fail(source: &Source, cause: impl Display) -> FetchError {
    let cause = cause.to_string();
    let cause: Vec<&str> = cause
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    FetchError(format!("fetching input '{source}': {}", cause.join("; ")))
}

/// The mismatch error, or nothing.
fn check_expected(source: &Source, expected: &Hash, got: &Hash) -> Result<(), FetchError> {
    if expected == got {
        return Ok(());
    }
    Err(FetchError(format!(
        "input '{source}' has changed: locked narHash {}, now {}; run 'rocmx flake update' \
         to accept the new content",
        expected.to_sri(),
        got.to_sri()
    )))
}

/// SHA-256 of the NAR serialisation of `path`.
fn nar_sha256(path: &Path) -> Result<Hash, String> {
    rocmx_store::nar::hash_path(path, HashAlgo::Sha256)
        .map(|(h, _)| h)
        .map_err(|e| format!("hashing '{}': {e}", path.display()))
}

/// A private scratch directory (under `$TMPDIR`), removed with everything in
/// it when dropped.
pub(crate) struct Scratch {
    path: PathBuf,
}

impl Scratch {
    /// Creates a new, empty directory `rocmx-fetch-<pid>-<n>` (mode 0700).
    pub(crate) fn new() -> std::io::Result<Scratch> {
        use std::os::unix::fs::DirBuilderExt;
        static SERIAL: AtomicU64 = AtomicU64::new(0);
        let tmp = std::env::temp_dir();
        loop {
            let n = SERIAL.fetch_add(1, Ordering::Relaxed);
            let path = tmp.join(format!("rocmx-fetch-{}-{n}", std::process::id()));
            match std::fs::DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => return Ok(Scratch { path }),
                // A leftover of a dead process with the same pid.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = rocmx_store::tree::remove_tree(&self.path);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::{symlink, PermissionsExt};

    /// A fetcher on a fresh store in a temporary directory.
    pub(crate) fn fetcher() -> (tempfile::TempDir, Fetcher) {
        let root = tempfile::tempdir().unwrap();
        let store = Rc::new(LocalStore::open(root.path()).unwrap());
        let f = Fetcher::new(store, Mirrors::new(), Limits::default());
        (root, f)
    }

    /// `nix-hash --type sha256 --base32 DIR`, when Nix is installed.
    pub(crate) fn nix_hash(dir: &Path) -> Option<String> {
        let out = std::process::Command::new("nix-hash")
            .args(["--type", "sha256", "--base32"])
            .arg(dir)
            .output()
            .ok()?;
        assert!(out.status.success(), "nix-hash failed: {out:?}");
        Some(String::from_utf8(out.stdout).unwrap().trim().to_string())
    }

    fn sample_tree() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        fs::create_dir_all(d.path().join("src/deep")).unwrap();
        fs::write(d.path().join("flake.nix"), "{ outputs = _: { }; }\n").unwrap();
        fs::write(d.path().join("src/deep/a.c"), "int a;\n").unwrap();
        fs::write(d.path().join("run.sh"), "#!/bin/sh\n").unwrap();
        fs::set_permissions(d.path().join("run.sh"), fs::Permissions::from_mode(0o755)).unwrap();
        symlink("src/deep/a.c", d.path().join("link")).unwrap();
        symlink("/nonexistent/dangling", d.path().join("dangling")).unwrap();
        d
    }

    #[test]
    fn path_fetch_matches_nix_hash() {
        let (_root, f) = fetcher();
        let tree = sample_tree();
        let src = Source::Path {
            path: "./tree".into(),
        };
        // Relative to `base`.
        let base = tempfile::tempdir().unwrap();
        symlink(tree.path(), base.path().join("tree")).unwrap();
        let got = f.fetch(&src, base.path(), None).unwrap();
        assert!(got.store_path.starts_with("/rocmx/store/"), "{got:?}");
        assert!(got.store_path.ends_with("-source"));
        assert_eq!(got.locked, src);
        assert_eq!(got.last_modified, None);
        assert_eq!(
            fs::read_link(got.physical.join("link")).unwrap(),
            Path::new("src/deep/a.c")
        );
        assert_eq!(
            fs::read_link(got.physical.join("dangling")).unwrap(),
            Path::new("/nonexistent/dangling")
        );
        assert_eq!(got.nar_hash, nar_sha256(tree.path()).unwrap());
        if let Some(n) = nix_hash(tree.path()) {
            assert_eq!(got.nar_hash.to_nix32(), n);
        }
        // Again, with the right hash expected: the same object.
        let again = f.fetch(&src, base.path(), Some(&got.nar_hash)).unwrap();
        assert_eq!(again, got);
    }

    #[test]
    fn mismatch_leaves_the_store_unchanged() {
        let (_root, f) = fetcher();
        let tree = sample_tree();
        let src = Source::Path {
            path: tree.path().to_str().unwrap().into(),
        };
        let wrong = Hash::digest(HashAlgo::Sha256, b"something else");
        let before = f.store.all_valid().unwrap();
        let e = f.fetch(&src, Path::new("/"), Some(&wrong)).unwrap_err();
        assert!(e.0.contains("has changed"), "{e}");
        assert!(e.0.contains(&wrong.to_sri()), "{e}");
        assert!(e.0.contains("rocmx flake update"), "{e}");
        assert!(!e.0.contains('\n'));
        assert_eq!(f.store.all_valid().unwrap(), before);
        assert!(fs::read_dir(f.store.store_dir()).unwrap().all(|e| !e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .ends_with("-source")));
    }

    #[test]
    fn missing_and_non_directories() {
        let (_root, f) = fetcher();
        let d = tempfile::tempdir().unwrap();
        let missing = Source::Path {
            path: "./nope".into(),
        };
        let e = f.fetch(&missing, d.path(), None).unwrap_err();
        assert!(
            e.0.contains("does not exist") && e.0.contains("path:./nope"),
            "{e}"
        );
        fs::write(d.path().join("file"), "x").unwrap();
        let file = Source::Path {
            path: "./file".into(),
        };
        let e = f.fetch(&file, d.path(), None).unwrap_err();
        assert!(e.0.contains("not a directory"), "{e}");
    }

    #[test]
    fn scratch_is_removed() {
        let s = Scratch::new().unwrap();
        let p = s.path().to_path_buf();
        fs::create_dir(p.join("ro")).unwrap();
        fs::write(p.join("ro/f"), "x").unwrap();
        fs::set_permissions(p.join("ro"), fs::Permissions::from_mode(0o555)).unwrap();
        drop(s);
        assert!(!p.exists());
    }
}
