//! Adding content to the local store: source trees, texts, NARs and build results.
//!
//! Owns: the install protocol every addition follows — hash first; if the path is valid,
//! take a temporary root and return at once; otherwise take the GC lock (shared) and the
//! path's lock, re-check, replace any unregistered leftover at the final name, build the
//! content in a scratch directory inside the store (a text: a scratch file; a build
//! result: where the builder left it, when that is on the store's filesystem), make it
//! durable, rename it into place, sync the store directory, and register it (with its
//! references) in one transaction.
//!
//! Must not: register anything whose content is not durable in place, register a path
//! whose references are not valid, or leave a scratch directory behind on error.

use std::collections::BTreeSet;
use std::fs;
use std::io::{self, Read};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use super::db::{self, NewPath};
use super::error::StoreError;
use super::fsutil::{self, TempDir, TempFile};
use super::{ingest, lock, LocalStore};
use crate::derivation::{Derivation, DerivationOutput};
use crate::hash::{Encoding, Hash, HashAlgo, Hasher, HashingWriter};
use crate::nar;
use crate::path::{ContentAddress, IngestionMethod, StorePath};

/// How [`LocalStore::add_nar`] derives the path of an archive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NarCa {
    /// Kind `source`: BLAKE3 of the NAR and the references.
    Source,
    /// Kind `fixed`: the hash `algo` of the NAR (`Nar`) or of the single file (`Flat`).
    Fixed(IngestionMethod, HashAlgo),
}

/// The text form of a content address, as `PathInfo::ca` holds it: `text:blake3:<nix32>`,
/// `source:blake3:<nix32>`, `fixed:r:sha256:<nix32>` (NAR) or `fixed:sha256:<nix32>`
/// (flat), `output:blake3:<nix32>`.
pub fn ca_string(ca: &ContentAddress) -> String {
    match ca {
        ContentAddress::Text { hash, .. } => format!("text:{}", hash.to_typed(Encoding::Nix32)),
        ContentAddress::Source { nar_hash, .. } => {
            format!("source:{}", nar_hash.to_typed(Encoding::Nix32))
        }
        ContentAddress::Fixed { method, hash } => {
            format!(
                "fixed:{}{}",
                method.nix_prefix(),
                hash.to_typed(Encoding::Nix32)
            )
        }
        ContentAddress::Output { nar_hash, .. } => {
            format!("output:{}", nar_hash.to_typed(Encoding::Nix32))
        }
    }
}

/// What to register once the content is in place.
pub(super) struct Install<'a> {
    pub(super) path: &'a StorePath,
    pub(super) nar_hash: Hash,
    pub(super) nar_size: u64,
    pub(super) refs: &'a BTreeSet<StorePath>,
    pub(super) deriver: Option<&'a StorePath>,
    pub(super) ca: Option<String>,
    /// Outputs to record when `path` is a derivation.
    pub(super) drv_outputs: Vec<(String, StorePath)>,
}

/// What [`LocalStore::install`] still syncs once the content is at its final name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Durable {
    /// The content was made durable before it was renamed: the store directory's entry
    /// and, when `dir`, the placed directory itself (what [`place`] changed).
    DirEntry { dir: bool },
    /// Nothing was synced yet: the whole filesystem (`syncfs`), contents and name.
    Filesystem,
}

/// A text to add: its path and what registering it records.
struct NewText<'a> {
    path: StorePath,
    nar_hash: Hash,
    nar_size: u64,
    refs: &'a BTreeSet<StorePath>,
    ca: String,
    /// A `.drv`'s fixed outputs.
    drv_outputs: Vec<(String, StorePath)>,
}

impl<'a> NewText<'a> {
    fn new(name: &str, text: &[u8], refs: &'a BTreeSet<StorePath>) -> Result<Self, StoreError> {
        let ca = ContentAddress::text(text, refs.clone());
        let path = StorePath::from_ca(name, &ca)?;
        let mut sink = HashingWriter::new(io::sink(), HashAlgo::Blake3);
        nar::dump_regular(text, false, &mut sink)?;
        let (_, nar_hash, nar_size) = sink.finish();
        let mut drv_outputs = Vec::new();
        if path.is_derivation() {
            if let Ok(drv) = std::str::from_utf8(text)
                .map_err(|_| ())
                .and_then(|t| Derivation::parse(t).map_err(|_| ()))
            {
                for (out, o) in &drv.outputs {
                    if let DerivationOutput::Fixed { path, .. } = o {
                        drv_outputs.push((out.clone(), path.clone()));
                    }
                }
            }
        }
        Ok(NewText {
            path,
            nar_hash,
            nar_size,
            refs,
            ca: ca_string(&ca),
            drv_outputs,
        })
    }

    fn install(&self) -> Install<'_> {
        Install {
            path: &self.path,
            nar_hash: self.nar_hash,
            nar_size: self.nar_size,
            refs: self.refs,
            deriver: None,
            ca: Some(self.ca.clone()),
            drv_outputs: self.drv_outputs.clone(),
        }
    }

    fn new_path(&self) -> NewPath<'_> {
        NewPath {
            path: &self.path,
            nar_hash: &self.nar_hash,
            nar_size: self.nar_size,
            deriver: None,
            ca: Some(&self.ca),
            refs: self.refs,
        }
    }
}

/// Makes normalised content at the path it is given.
type Produce<'a> = Box<dyn FnOnce(&Path) -> Result<(), StoreError> + 'a>;

/// Where the content of an [`Install`] comes from.
pub(super) enum Content<'a> {
    /// A regular, non-executable file with these bytes (a text).
    Text(&'a [u8]),
    /// Made by the closure, normalised, at the path it is given (inside a scratch
    /// directory of the store).
    Produce(Produce<'a>),
    /// Already made and normalised, here: renamed into place (copied if it is on another
    /// filesystem), or left alone if the path is valid already.
    Premade(&'a Path),
}

/// Renames the normalised content `c` to `real`; gives whether it is a directory, whose
/// own mode, times and `..` the rename changed: the caller makes those durable too
/// (see [`Durable`]).
fn place(c: &Path, real: &Path) -> Result<bool, StoreError> {
    let is_dir = fs::symlink_metadata(c)
        .map_err(StoreError::io("reading", c))?
        .is_dir();
    if is_dir {
        // Moving a directory to another parent needs write access to it (for `..`).
        fsutil::chmod(c, 0o755)?;
    }
    if let Err(e) = fs::rename(c, real) {
        if is_dir {
            let _ = fsutil::chmod(c, fsutil::EXEC_MODE);
        }
        return Err(StoreError::io("renaming into place", real)(e));
    }
    if is_dir {
        fsutil::chmod(real, fsutil::EXEC_MODE)?;
        fsutil::set_canonical_times(real)?;
    }
    Ok(is_dir)
}

impl LocalStore {
    /// Renames premade content `c` (a build's result, an imported NAR) to `real`: on the
    /// store's filesystem it is renamed first and made durable afterwards, with its name,
    /// by one `syncfs` ([`Durable::Filesystem`]: one flush of the disk's cache where an
    /// `fsync` of its files and then one of the store directory took two or more; the
    /// chain of trivial builds spent half its time in syncs). A crash in between leaves
    /// an unregistered entry at the final name, which the next add replaces. From
    /// another filesystem it is copied into a scratch directory of the store and synced
    /// there first, then renamed.
    pub(super) fn place_premade(&self, c: &Path, real: &Path) -> Result<Durable, StoreError> {
        match place(c, real) {
            Err(StoreError::Io { source, .. })
                if source.raw_os_error() == Some(rustix::io::Errno::XDEV.raw_os_error()) =>
            {
                let tmp = TempDir::new(&self.store_dir)?;
                let copy = tmp.path().join("content");
                let scanned = ingest::scan(c)?;
                ingest::materialise(c, &scanned.entries, &copy)?;
                fsutil::sync_tree(&copy)?;
                let dir = place(&copy, real)?;
                fsutil::remove_tree(c)?;
                Ok(Durable::DirEntry { dir })
            }
            // `syncfs` covers the directory's own changes too.
            other => other.map(|_| Durable::Filesystem),
        }
    }

    /// Root adding to another user's store: the owner must be able to delete `real`.
    pub(super) fn give_to_owner(&self, real: &Path) -> Result<(), StoreError> {
        if let Some(owner) = super::owner::foreign_owner(&self.root) {
            crate::tree::chown_tree(real, owner, "giving to the store's owner")?;
        }
        Ok(())
    }

    /// Makes `real`, at its final name, durable as `durable` says.
    pub(super) fn make_durable(&self, real: &Path, durable: Durable) -> Result<(), StoreError> {
        match durable {
            Durable::DirEntry { dir } => {
                if dir {
                    fsutil::fsync_dir(real)?;
                }
                fsutil::fsync_dir(&self.store_dir)
            }
            Durable::Filesystem => fsutil::syncfs(&self.store_dir),
        }
    }

    /// Whether `p` is valid; if so, also protects it with a temporary root. The caller
    /// holds the GC lock.
    pub(super) fn valid_and_rooted(&self, p: &StorePath) -> Result<bool, StoreError> {
        if self.is_valid(p)? {
            self.temp_roots.add(p)?;
            return Ok(true);
        }
        Ok(false)
    }

    fn check_refs(&self, p: &StorePath, refs: &BTreeSet<StorePath>) -> Result<(), StoreError> {
        for r in refs.iter().filter(|r| *r != p) {
            if !self.is_valid(r)? {
                return Err(StoreError::InvalidReference {
                    path: p.clone(),
                    reference: r.clone(),
                });
            }
        }
        Ok(())
    }

    /// Installs content at `inst.path` unless it is valid (see [`Content`] for where the
    /// content comes from). The caller holds the GC lock (shared). Gives whether this call
    /// installed it (`false`: it was valid already, and premade content was left alone).
    pub(super) fn install(
        &self,
        inst: Install<'_>,
        content: Content<'_>,
    ) -> Result<bool, StoreError> {
        let p = inst.path;
        if self.valid_and_rooted(p)? {
            return Ok(false);
        }
        self.check_refs(p, inst.refs)?;
        let _path_lock = lock::path_lock(&self.state_dir.join("locks"), p)?;
        if self.valid_and_rooted(p)? {
            return Ok(false);
        }
        let real = self.real_path(p);
        // Not valid, and we hold its lock: whatever is there is a crash leftover.
        fsutil::remove_tree(&real)?;
        // What is left to make durable once the content is at its final name.
        let durable = match content {
            Content::Text(text) => {
                // One scratch file, written, made durable and renamed: no directory.
                let tmp = TempFile::new(&self.store_dir)?;
                tmp.write_text(text)?;
                tmp.sync()?;
                fs::rename(tmp.path(), &real)
                    .map_err(StoreError::io("renaming into place", &real))?;
                Durable::DirEntry { dir: false }
            }
            Content::Produce(produce) => {
                let tmp = TempDir::new(&self.store_dir)?;
                let c = tmp.path().join("content");
                produce(&c)?;
                fsutil::sync_tree(&c)?;
                Durable::DirEntry {
                    dir: place(&c, &real)?,
                }
            }
            Content::Premade(c) => self.place_premade(c, &real)?,
        };
        self.give_to_owner(&real)?;
        self.make_durable(&real, durable)?;
        let registered = self.with_tx(|c, d| {
            let id = db::register(
                c,
                d,
                &NewPath {
                    path: p,
                    nar_hash: &inst.nar_hash,
                    nar_size: inst.nar_size,
                    deriver: inst.deriver,
                    ca: inst.ca.as_deref(),
                    refs: inst.refs,
                },
            )?;
            for (out, path) in &inst.drv_outputs {
                db::add_derivation_output(c, d, id, out, path)?;
            }
            Ok(())
        });
        if let Err(e) = registered {
            let _ = fsutil::remove_tree(&real);
            return Err(e);
        }
        self.temp_roots.add(p)?;
        Ok(true)
    }

    /// Copies the file or tree `src` into the store as `name` (kind `source`, no
    /// references) and returns its path. Symlinks are kept as they are; contents are
    /// normalised (modes 0444/0555, mtime 1). If the content is already there, returns at
    /// once after hashing it. Sockets, FIFOs and devices are refused.
    pub fn add_path(&self, src: &Path, name: &str) -> Result<StorePath, StoreError> {
        crate::path::validate_name(name)?;
        let scanned = ingest::scan(src)?;
        let _gc = lock::gc_lock(&self.state_dir, false)?;
        self.install_source(
            name,
            &scanned,
            Content::Produce(Box::new(|dest: &Path| {
                ingest::materialise(src, &scanned.entries, dest)
            })),
        )
    }

    /// Installs the scanned tree as the `source` path `name` (no references) from
    /// `content`, and gives the path. The caller holds the GC lock (shared).
    fn install_source(
        &self,
        name: &str,
        scanned: &ingest::Scanned,
        content: Content<'_>,
    ) -> Result<StorePath, StoreError> {
        let refs = BTreeSet::new();
        let ca = ContentAddress::Source {
            nar_hash: scanned.nar_hash,
            references: BTreeSet::new(),
        };
        let path = StorePath::from_ca(name, &ca)?;
        let inst = Install {
            path: &path,
            nar_hash: scanned.nar_hash,
            nar_size: scanned.nar_size,
            refs: &refs,
            deriver: None,
            ca: Some(ca_string(&ca)),
            drv_outputs: Vec::new(),
        };
        self.install(inst, content)?;
        Ok(path)
    }

    /// [`Self::add_path`] for content that is probably new, as what `rocmx store add` is
    /// given usually is: the tree is copied into a scratch directory of the store *while*
    /// it is hashed, not after, so the copy's inode and disk work overlaps the hashing
    /// (`add_path` hashes first, so that repeated imports during evaluation copy
    /// nothing). One thread lists the tree ([`ingest::list_until`], metadata only)
    /// and materialises it from that listing; the caller's thread scans (reads and
    /// hashes) it; when either side fails the other stops early; the two listings must
    /// be equal, stamps included, or the add fails with
    /// [`StoreError::SourceChanged`], so the copy is what was hashed by the same
    /// criterion `add_path` uses. If the path turns out valid already, the copy is
    /// discarded (the one cost of guessing wrong). The same path, content and
    /// registration as `add_path`.
    pub fn add_new_path(&self, src: &Path, name: &str) -> Result<StorePath, StoreError> {
        crate::path::validate_name(name)?;
        let _gc = lock::gc_lock(&self.state_dir, false)?;
        let tmp = TempDir::new(&self.store_dir)?;
        let copy = tmp.path().join("content");
        // Raised by whichever side fails first, so that the other stops instead of
        // hashing or copying the rest of the tree for nothing.
        let stop = AtomicBool::new(false);
        let fail = || stop.store(true, Ordering::Relaxed);
        let (scanned, listed) = std::thread::scope(|sc| {
            let copier = sc.spawn(|| {
                let r = ingest::list_until(src, &stop).and_then(|listed| match listed {
                    Some(l) if ingest::materialise_until(src, &l, &copy, &stop)? => Ok(Some(l)),
                    _ => Ok(None),
                });
                if r.is_err() {
                    fail();
                }
                r
            });
            let scanned = ingest::scan_until(src, &stop);
            if scanned.is_err() {
                fail();
            }
            // A panic there is a bug of ours: passed on as the panic it is.
            let listed = copier
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p));
            (scanned, listed)
        });
        // The scan's error first: it names the file it could not read or hash. A side
        // gives up (`None`) only when the other failed.
        let (scanned, listed) = match (scanned?, listed?) {
            (Some(s), Some(l)) => (s, l),
            _ => unreachable!("a side of the add stopped while the other succeeded"),
        };
        if listed != scanned.entries {
            // The first entry the two walks saw differently (or the root, when one of
            // them saw more entries than the other).
            let at = listed
                .iter()
                .zip(&scanned.entries)
                .find(|(a, b)| a != b)
                .map_or(Path::new(""), |(a, _)| a.rel.as_path());
            return Err(StoreError::SourceChanged {
                path: ingest::join(src, at),
            });
        }
        // Moved to where `install` wants it and made durable as `add_path`'s copy is
        // (an `fsync` per entry for a small tree, not a `syncfs` of the filesystem).
        self.install_source(
            name,
            &scanned,
            Content::Produce(Box::new(|dest: &Path| {
                fs::rename(&copy, dest).map_err(StoreError::io("renaming into place", dest))
            })),
        )
    }

    /// Copies `src` into the store as the fixed-output object `name`: the path a
    /// fixed-output derivation named `name` with this `method` and the hash `algo` of the
    /// content gets, so that such a derivation finds its output valid and is not built.
    /// `Flat`: `src` must be a regular file (a symlink is followed); it is stored
    /// non-executable, as a flat fixed output is. `Nar`: the file or tree as it is
    /// (symlinks kept), hashed as a NAR. Returns the path and the hash. No references.
    pub fn add_fixed(
        &self,
        src: &Path,
        name: &str,
        method: IngestionMethod,
        algo: HashAlgo,
    ) -> Result<(StorePath, Hash), StoreError> {
        crate::path::validate_name(name)?;
        let refs = BTreeSet::new();
        match method {
            IngestionMethod::Nar => {
                let scanned = ingest::scan(src)?;
                // A second read; `materialise` checks every file against the scan, so a
                // change after it cannot be stored under this hash.
                let hash = if algo == HashAlgo::Blake3 {
                    scanned.nar_hash
                } else {
                    nar::hash_path(src, algo)?.0
                };
                let ca = ContentAddress::Fixed { method, hash };
                let path = StorePath::from_ca(name, &ca)?;
                let _gc = lock::gc_lock(&self.state_dir, false)?;
                let inst = Install {
                    path: &path,
                    nar_hash: scanned.nar_hash,
                    nar_size: scanned.nar_size,
                    refs: &refs,
                    deriver: None,
                    ca: Some(ca_string(&ca)),
                    drv_outputs: Vec::new(),
                };
                self.install(
                    inst,
                    Content::Produce(Box::new(|dest: &Path| {
                        ingest::materialise(src, &scanned.entries, dest)
                    })),
                )?;
                Ok((path, hash))
            }
            IngestionMethod::Flat => {
                let open = || fs::File::open(src).map_err(StoreError::io("reading", src));
                let mut f = open()?;
                if !f
                    .metadata()
                    .map_err(StoreError::io("reading", src))?
                    .is_file()
                {
                    return Err(StoreError::NotFlat {
                        name: name.to_string(),
                    });
                }
                let mut h = Hasher::new(algo);
                io::copy(&mut f, &mut h).map_err(StoreError::io("reading", src))?;
                let hash = h.finish();
                let ca = ContentAddress::Fixed { method, hash };
                let path = StorePath::from_ca(name, &ca)?;
                let _gc = lock::gc_lock(&self.state_dir, false)?;
                if self.valid_and_rooted(&path)? {
                    return Ok((path, hash));
                }
                // Copied while hashed again: what is stored is what was hashed.
                let tmp = TempDir::new(&self.store_dir)?;
                let content = tmp.path().join("content");
                let mut out =
                    fs::File::create(&content).map_err(StoreError::io("writing", &content))?;
                let mut w = HashingWriter::new(&mut out, algo);
                io::copy(&mut open()?, &mut w).map_err(StoreError::io("copying", &content))?;
                let (_, again, _) = w.finish();
                drop(out);
                if again != hash {
                    return Err(StoreError::SourceChanged {
                        path: src.to_path_buf(),
                    });
                }
                fsutil::normalise_tree(&content)?;
                let (nar_hash, nar_size) = nar::hash_path(&content, HashAlgo::Blake3)?;
                let inst = Install {
                    path: &path,
                    nar_hash,
                    nar_size,
                    refs: &refs,
                    deriver: None,
                    ca: Some(ca_string(&ca)),
                    drv_outputs: Vec::new(),
                };
                self.install(inst, Content::Premade(&content))?;
                Ok((path, hash))
            }
        }
    }

    /// Stores `text` as a file named `name` (kind `text`) referring to `refs`, which must
    /// be valid. A `.drv` that parses as a derivation also gets its fixed outputs recorded.
    pub fn add_text(
        &self,
        name: &str,
        text: &[u8],
        refs: &BTreeSet<StorePath>,
    ) -> Result<StorePath, StoreError> {
        let t = NewText::new(name, text, refs)?;
        let _gc = lock::gc_lock(&self.state_dir, false)?;
        self.install(t.install(), Content::Text(text))?;
        Ok(t.path)
    }

    /// Stores several texts, each as [`LocalStore::add_text`] would, and gives their paths
    /// in order. A text may refer to the texts before it in `items` (evaluation makes
    /// `.drv` files in that order); every other reference must be valid. The new ones are
    /// made durable together — one `syncfs` instead of an `fsync` each when there are
    /// many, and one sync of the store directory — and registered in one transaction, so
    /// writing the derivations of an evaluation costs about as much as writing one.
    pub fn add_texts(
        &self,
        items: &[(&str, &[u8], &BTreeSet<StorePath>)],
    ) -> Result<Vec<StorePath>, StoreError> {
        let texts = items
            .iter()
            .map(|(name, text, refs)| NewText::new(name, text, refs))
            .collect::<Result<Vec<_>, _>>()?;
        let paths: Vec<StorePath> = texts.iter().map(|t| t.path.clone()).collect();
        let _gc = lock::gc_lock(&self.state_dir, false)?;
        // What is not valid yet (each path once); references resolve to valid paths or to
        // earlier texts of the batch.
        let todo = |store: &LocalStore| -> Result<Vec<usize>, StoreError> {
            let mut out: Vec<usize> = Vec::new();
            let mut seen: BTreeSet<&StorePath> = BTreeSet::new();
            for (i, t) in texts.iter().enumerate() {
                if !seen.insert(&t.path) || store.valid_and_rooted(&t.path)? {
                    continue;
                }
                for r in t.refs.iter().filter(|r| **r != t.path) {
                    let earlier = out.iter().any(|&j| texts[j].path == *r);
                    if !earlier && !store.is_valid(r)? {
                        return Err(StoreError::InvalidReference {
                            path: t.path.clone(),
                            reference: r.clone(),
                        });
                    }
                }
                out.push(i);
            }
            Ok(out)
        };
        if todo(self)?.is_empty() {
            return Ok(paths);
        }
        let locks = self.state_dir.join("locks");
        let all: Vec<&StorePath> = texts.iter().map(|t| &t.path).collect();
        let _path_locks = lock::path_locks(&locks, &all)?;
        let todo = todo(self)?;
        // Written, made durable, renamed into place; the store directory synced once.
        let mut scratch = Vec::with_capacity(todo.len());
        for &i in &todo {
            fsutil::remove_tree(&self.real_path(&texts[i].path))?;
            let tmp = TempFile::new(&self.store_dir)?;
            tmp.write_text(items[i].1)?;
            scratch.push(tmp);
        }
        if scratch.len() > fsutil::SYNCFS_THRESHOLD {
            fsutil::syncfs(&self.store_dir)?;
        } else {
            for tmp in &scratch {
                tmp.sync()?;
            }
        }
        let mut placed = Vec::with_capacity(todo.len());
        let renamed = todo.iter().zip(&scratch).try_for_each(|(&i, tmp)| {
            let real = self.real_path(&texts[i].path);
            fs::rename(tmp.path(), &real).map_err(StoreError::io("renaming into place", &real))?;
            placed.push(real);
            Ok(())
        });
        let registered = renamed
            .and_then(|()| fsutil::fsync_dir(&self.store_dir))
            .and_then(|()| {
                self.with_tx(|c, d| {
                    for &i in &todo {
                        let t = &texts[i];
                        let id = db::register(c, d, &t.new_path())?;
                        for (out, path) in &t.drv_outputs {
                            db::add_derivation_output(c, d, id, out, path)?;
                        }
                    }
                    Ok(())
                })
            });
        if let Err(e) = registered {
            for real in &placed {
                let _ = fsutil::remove_tree(real);
            }
            return Err(e);
        }
        for &i in &todo {
            self.temp_roots.add(&texts[i].path)?;
        }
        Ok(paths)
    }

    /// Restores the archive `nar` into the store as `name`, with the content address
    /// `ca` and `refs` (which must be valid), normalising it; returns its path. The
    /// archive is checked strictly while it is restored.
    pub fn add_nar(
        &self,
        name: &str,
        ca: NarCa,
        nar: impl Read,
        refs: &BTreeSet<StorePath>,
        deriver: Option<&StorePath>,
    ) -> Result<StorePath, StoreError> {
        crate::path::validate_name(name)?;
        let _gc = lock::gc_lock(&self.state_dir, false)?;
        let tmp = TempDir::new(&self.store_dir)?;
        let content = tmp.path().join("content");
        let extra = match ca {
            NarCa::Fixed(IngestionMethod::Nar, algo) => Some(Hasher::new(algo)),
            _ => None,
        };
        let mut reader = TeeHash {
            inner: nar,
            blake3: Hasher::new(HashAlgo::Blake3),
            extra,
            count: 0,
        };
        nar::restore(&mut reader, &content)?;
        // `restore` stops at the end of the archive; it checked there is nothing after it.
        let nar_size = reader.count;
        let nar_hash = reader.blake3.finish();
        let ca = match ca {
            NarCa::Source => ContentAddress::Source {
                nar_hash,
                references: refs.clone(),
            },
            NarCa::Fixed(IngestionMethod::Nar, _) => ContentAddress::Fixed {
                method: IngestionMethod::Nar,
                hash: reader.extra.take().map(Hasher::finish).unwrap_or(nar_hash),
            },
            NarCa::Fixed(IngestionMethod::Flat, algo) => {
                if !fs::symlink_metadata(&content)
                    .map(|m| m.is_file())
                    .unwrap_or(false)
                {
                    return Err(StoreError::NotFlat {
                        name: name.to_string(),
                    });
                }
                let mut h = Hasher::new(algo);
                let mut f =
                    fs::File::open(&content).map_err(StoreError::io("reading", &content))?;
                io::copy(&mut f, &mut h).map_err(StoreError::io("reading", &content))?;
                ContentAddress::Fixed {
                    method: IngestionMethod::Flat,
                    hash: h.finish(),
                }
            }
        };
        let path = StorePath::from_ca(name, &ca)?;
        fsutil::normalise_tree(&content)?;
        let inst = Install {
            path: &path,
            nar_hash,
            nar_size,
            refs,
            deriver,
            ca: Some(ca_string(&ca)),
            drv_outputs: Vec::new(),
        };
        self.install(inst, Content::Premade(&content))?;
        Ok(path)
    }
}

/// A reader that hashes (BLAKE3, and optionally a second algorithm) and counts what it
/// passes on.
pub(super) struct TeeHash<R> {
    pub(super) inner: R,
    pub(super) blake3: Hasher,
    pub(super) extra: Option<Hasher>,
    pub(super) count: u64,
}

impl<R: Read> Read for TeeHash<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        let got = buf.get(..n).unwrap_or(buf);
        self.blake3.update(got);
        if let Some(h) = self.extra.as_mut() {
            h.update(got);
        }
        self.count += got.len() as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;
    use crate::derivation::fixed_output_path;

    #[test]
    fn add_fixed_gives_the_fixed_output_path() {
        let tmp = tempfile::tempdir().expect("tmp");
        let s = LocalStore::open(&tmp.path().join("root")).expect("open");
        let f = tmp.path().join("hello.tar.gz");
        fs::write(&f, "hello").expect("write");
        fs::set_permissions(&f, fs::Permissions::from_mode(0o755)).expect("chmod");

        let (p, h) = s
            .add_fixed(&f, "hello.tar.gz", IngestionMethod::Flat, HashAlgo::Sha256)
            .expect("flat");
        assert_eq!(h, Hash::digest(HashAlgo::Sha256, b"hello"));
        let want = fixed_output_path("hello.tar.gz", IngestionMethod::Flat, h).expect("path");
        assert_eq!(p, want);
        assert!(s.is_valid(&p).expect("valid"));
        let real = s.real_path(&p);
        assert_eq!(fs::read(&real).expect("read"), b"hello");
        // A flat fixed output is never executable.
        let mode = fs::metadata(&real).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o444);
        let info = s.path_info(&p).expect("info").expect("some");
        assert_eq!(
            info.ca.as_deref(),
            Some(
                ca_string(&ContentAddress::Fixed {
                    method: IngestionMethod::Flat,
                    hash: h
                })
                .as_str()
            )
        );
        // Again: same path, nothing new.
        let again = s
            .add_fixed(&f, "hello.tar.gz", IngestionMethod::Flat, HashAlgo::Sha256)
            .expect("again");
        assert_eq!(again.0, p);

        // Recursive: the NAR hash; a directory is refused flat.
        let d = tmp.path().join("src");
        fs::create_dir(&d).expect("mkdir");
        fs::write(d.join("a"), "x").expect("write");
        let (p, h) = s
            .add_fixed(&d, "src", IngestionMethod::Nar, HashAlgo::Sha512)
            .expect("nar");
        assert_eq!(h, nar::hash_path(&d, HashAlgo::Sha512).expect("hash").0);
        assert_eq!(
            p,
            fixed_output_path("src", IngestionMethod::Nar, h).expect("path")
        );
        assert_eq!(fs::read(s.real_path(&p).join("a")).expect("read"), b"x");
        assert!(matches!(
            s.add_fixed(&d, "src", IngestionMethod::Flat, HashAlgo::Sha256),
            Err(StoreError::NotFlat { .. })
        ));
    }
}
