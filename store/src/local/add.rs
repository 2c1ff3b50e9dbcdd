//! Adding content to the local store: source trees, texts, NARs and build results.
//!
//! Owns: the install protocol every addition follows — hash first; if the path is valid,
//! take a temporary root and return at once; otherwise take the GC lock (shared) and the
//! path's lock, re-check, replace any unregistered leftover at the final name, build the
//! content in a scratch directory inside the store, make it durable, rename it into place,
//! sync the store directory, and register it (with its references) in one transaction.
//!
//! Must not: register anything whose content is not durable in place, register a path
//! whose references are not valid, or leave a scratch directory behind on error.

use std::collections::BTreeSet;
use std::fs::{self, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use super::db::{self, NewPath};
use super::error::StoreError;
use super::fsutil::{self, TempDir};
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
struct Install<'a> {
    path: &'a StorePath,
    nar_hash: Hash,
    nar_size: u64,
    refs: &'a BTreeSet<StorePath>,
    deriver: Option<&'a StorePath>,
    ca: Option<String>,
    /// Outputs to record when `path` is a derivation.
    drv_outputs: Vec<(String, StorePath)>,
}

impl LocalStore {
    /// Whether `p` is valid; if so, also protects it with a temporary root. The caller
    /// holds the GC lock.
    fn valid_and_rooted(&self, p: &StorePath) -> Result<bool, StoreError> {
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

    /// Installs content at `inst.path` unless it is valid. `produce` creates the
    /// normalised content at the path it is given (inside a scratch directory) unless
    /// the content was made beforehand and `premade` holds it. The caller holds the GC
    /// lock (shared).
    fn install(
        &self,
        inst: Install<'_>,
        premade: Option<&Path>,
        produce: impl FnOnce(&Path) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let p = inst.path;
        if self.valid_and_rooted(p)? {
            return Ok(());
        }
        self.check_refs(p, inst.refs)?;
        let _path_lock = lock::path_lock(&self.state_dir.join("locks"), p)?;
        if self.valid_and_rooted(p)? {
            return Ok(());
        }
        let real = self.real_path(p);
        // Not valid, and we hold its lock: whatever is there is a crash leftover.
        fsutil::remove_tree(&real)?;
        let tmp;
        let content = match premade {
            Some(c) => c.to_path_buf(),
            None => {
                tmp = TempDir::new(&self.store_dir)?;
                let c = tmp.path().join("content");
                produce(&c)?;
                c
            }
        };
        fsutil::sync_tree(&content)?;
        let is_dir = fs::symlink_metadata(&content)
            .map_err(StoreError::io("reading", &content))?
            .is_dir();
        if is_dir {
            // Moving a directory to another parent needs write access to it (for `..`).
            fsutil::chmod(&content, 0o755)?;
        }
        fs::rename(&content, &real).map_err(StoreError::io("renaming into place", &real))?;
        if is_dir {
            fsutil::chmod(&real, fsutil::EXEC_MODE)?;
            fsutil::set_canonical_times(&real)?;
            fsutil::fsync_dir(&real)?;
        }
        fsutil::fsync_dir(&self.store_dir)?;
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
        self.temp_roots.add(p)
    }

    /// Copies the file or tree `src` into the store as `name` (kind `source`, no
    /// references) and returns its path. Symlinks are kept as they are; contents are
    /// normalised (modes 0444/0555, mtime 1). If the content is already there, returns at
    /// once after hashing it. Sockets, FIFOs and devices are refused.
    pub fn add_path(&self, src: &Path, name: &str) -> Result<StorePath, StoreError> {
        crate::path::validate_name(name)?;
        let scanned = ingest::scan(src)?;
        let refs = BTreeSet::new();
        let ca = ContentAddress::Source {
            nar_hash: scanned.nar_hash,
            references: BTreeSet::new(),
        };
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
        self.install(inst, None, |dest| ingest::materialise(src, &scanned, dest))?;
        Ok(path)
    }

    /// Stores `text` as a file named `name` (kind `text`) referring to `refs`, which must
    /// be valid. A `.drv` that parses as a derivation also gets its fixed outputs recorded.
    pub fn add_text(
        &self,
        name: &str,
        text: &[u8],
        refs: &BTreeSet<StorePath>,
    ) -> Result<StorePath, StoreError> {
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
        let _gc = lock::gc_lock(&self.state_dir, false)?;
        let inst = Install {
            path: &path,
            nar_hash,
            nar_size,
            refs,
            deriver: None,
            ca: Some(ca_string(&ca)),
            drv_outputs,
        };
        self.install(inst, None, |dest| {
            let mut f = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(dest)
                .map_err(StoreError::io("creating", dest))?;
            f.write_all(text).map_err(StoreError::io("writing", dest))?;
            fsutil::set_canonical_times_fd(&f, dest)?;
            fsutil::chmod(dest, fsutil::FILE_MODE)
        })?;
        Ok(path)
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
        self.install(inst, Some(&content), |_| Ok(()))?;
        Ok(path)
    }

    /// Moves the already normalised tree `scratch_dir` (a build result) to `final_path`
    /// and registers it with `refs` (valid, or `final_path` itself), `nar_hash` (BLAKE3 of
    /// its NAR, trusted) and `nar_size`. `scratch_dir` is renamed when it is on the store's
    /// filesystem, copied otherwise. If `final_path` is already valid, the scratch copy is
    /// removed and nothing else happens.
    pub fn register_built(
        &self,
        scratch_dir: &Path,
        final_path: &StorePath,
        refs: &BTreeSet<StorePath>,
        nar_hash: Hash,
        nar_size: u64,
        deriver: Option<&StorePath>,
    ) -> Result<(), StoreError> {
        if nar_hash.algo() != HashAlgo::Blake3 {
            return Err(StoreError::NotBlake3 {
                what: "the NAR hash of a build result",
                algo: nar_hash.algo(),
            });
        }
        if fs::symlink_metadata(scratch_dir).is_err() {
            return Err(StoreError::MissingScratch {
                path: final_path.clone(),
                scratch: scratch_dir.to_path_buf(),
            });
        }
        let _gc = lock::gc_lock(&self.state_dir, false)?;
        let inst = Install {
            path: final_path,
            nar_hash,
            nar_size,
            refs,
            deriver,
            ca: None,
            drv_outputs: Vec::new(),
        };
        // Same filesystem: move the scratch tree into a scratch directory of the store, so
        // that the rest is the common protocol. Another filesystem: copy it there.
        let tmp = TempDir::new(&self.store_dir)?;
        let content = tmp.path().join("content");
        if self.valid_and_rooted(final_path)? {
            return fsutil::remove_tree(scratch_dir);
        }
        let is_dir = fs::symlink_metadata(scratch_dir)
            .map(|m| m.is_dir())
            .unwrap_or(false);
        if is_dir {
            fsutil::chmod(scratch_dir, 0o755)?;
        }
        match fs::rename(scratch_dir, &content) {
            Ok(()) => {
                if is_dir {
                    fsutil::chmod(&content, fsutil::EXEC_MODE)?;
                }
            }
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::XDEV.raw_os_error()) => {
                if is_dir {
                    fsutil::chmod(scratch_dir, fsutil::EXEC_MODE)?;
                }
                let scanned = ingest::scan(scratch_dir)?;
                ingest::materialise(scratch_dir, &scanned, &content)?;
                fsutil::remove_tree(scratch_dir)?;
            }
            Err(e) => return Err(StoreError::io("moving build result", scratch_dir)(e)),
        }
        self.install(inst, Some(&content), |_| Ok(()))
    }
}

/// A reader that hashes (BLAKE3, and optionally a second algorithm) and counts what it
/// passes on.
struct TeeHash<R> {
    inner: R,
    blake3: Hasher,
    extra: Option<Hasher>,
    count: u64,
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
