//! The narrow interface through which evaluation writes to a store.
//!
//! Owns [`EvalStore`], the only way the evaluator creates store objects: copying a
//! source path in (path interpolation, `builtins.path`, `filterSource`), adding a
//! text (`toFile`, `.drv` files). It takes and returns [`StorePath`]s; callers
//! turn them into strings only where they build a Nix string. [`MemStore`]
//! implements it without touching disk state: it computes the same
//! content-addressed paths a real store would, and remembers where the content
//! lives so `readFile`/`import` of a store path work during the same evaluation.
//! The binary implements it over the real local store (crate `rocmx-store`).
//! This module must not evaluate.

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use rocmx_store::{ContentAddress, Hash, HashAlgo, IngestionMethod, StorePath, STORE_DIR};

use crate::eval::{EResult, ErrorKind, EvalError};

/// Decides, for each entry below a copied path, whether it is included.
/// Arguments: the entry's absolute path and its type (`regular`, `directory`,
/// `symlink`, `unknown`).
pub type PathFilter<'a> = dyn FnMut(&Path, &str) -> EResult<bool> + 'a;

/// Store writes needed by evaluation.
pub trait EvalStore {
    /// The logical store directory, `/rocmx/store`.
    fn store_dir(&self) -> &str {
        STORE_DIR
    }

    /// Copies `src` (file, directory or symlink) into the store as a `source`
    /// object named `name`, keeping only entries `filter` accepts. Returns its
    /// store path.
    fn add_path(
        &self,
        src: &Path,
        name: &str,
        filter: Option<&mut PathFilter<'_>>,
    ) -> EResult<StorePath>;

    /// Adds `src` as a fixed-output object with the given ingestion method and
    /// expected hash (`builtins.path { sha256 = …; }`); errors on mismatch.
    fn add_fixed(
        &self,
        src: &Path,
        name: &str,
        method: IngestionMethod,
        expected: &Hash,
    ) -> EResult<StorePath>;

    /// Adds a text object (`toFile`, `.drv`) that refers to `refs`.
    fn add_text(&self, name: &str, text: &str, refs: &BTreeSet<StorePath>) -> EResult<StorePath>;

    /// Where the content of a logical path (possibly inside a store object) can be
    /// read right now; `None` when `p` is not a known store path.
    fn realise_path(&self, p: &Path) -> Option<PathBuf>;
}

fn store_err(e: impl std::fmt::Display) -> Box<EvalError> {
    EvalError::new(ErrorKind::Io, e.to_string())
}

/// Store path → value, hashed with foldhash rather than SipHash: every `.drv`
/// an evaluation writes is one insertion (keys are hashes, not chosen freely, and
/// the seed is random per process).
type PathMap<V> = HashMap<String, V, foldhash::fast::RandomState>;

/// An [`EvalStore`] that computes paths and keeps contents where they already are
/// (sources) or in a private temporary directory (texts).
pub struct MemStore {
    /// Store path (absolute) → where its content is readable.
    objects: RefCell<PathMap<PathBuf>>,
    /// Texts not yet needed on disk (most `.drv` files never are): written to
    /// the temporary directory the first time something reads them.
    pending: RefCell<PathMap<Rc<str>>>,
    texts: RefCell<Option<tempfile::TempDir>>,
}

impl Default for MemStore {
    fn default() -> Self {
        Self::new()
    }
}

impl MemStore {
    pub fn new() -> MemStore {
        MemStore {
            objects: RefCell::new(PathMap::default()),
            pending: RefCell::new(PathMap::default()),
            texts: RefCell::new(None),
        }
    }

    /// Removes the temporary directory holding texts written out for reading.
    /// Call it when evaluation is over (the evaluator itself may be leaked).
    pub fn close(&self) {
        self.texts.borrow_mut().take();
    }

    fn text_dir(&self) -> EResult<PathBuf> {
        let mut t = self.texts.borrow_mut();
        if t.is_none() {
            *t = Some(
                tempfile::Builder::new()
                    .prefix("rocmx-eval-")
                    .tempdir()
                    .map_err(store_err)?,
            );
        }
        Ok(t.as_ref()
            .map(|d| d.path().to_path_buf())
            .unwrap_or_default())
    }
}

/// Serialises `src` as a NAR, keeping entries the filter accepts.
pub fn nar_of(src: &Path, filter: Option<&mut PathFilter<'_>>) -> EResult<Vec<u8>> {
    let mut out = Vec::new();
    let res = match filter {
        None => rocmx_store::nar::dump_path(src, &mut out).map_err(store_err),
        Some(f) => {
            let mut err = None;
            let r =
                rocmx_store::nar::dump_path_filtered(src, &mut out, &mut |p: &Path, kind: &str| {
                    if err.is_some() {
                        return false;
                    }
                    match f(p, kind) {
                        Ok(b) => b,
                        Err(e) => {
                            err = Some(e);
                            false
                        }
                    }
                });
            if let Some(e) = err {
                return Err(e);
            }
            r.map_err(store_err)
        }
    };
    res.map_err(|e| {
        let mut e = e;
        e.msg = format!("while copying '{}' to the store: {}", src.display(), e.msg);
        e
    })?;
    Ok(out)
}

/// Checks `src` (readable at `real`) against a fixed-output hash: the flat
/// file's bytes or its NAR, hashed with `expected`'s algorithm. On a mismatch
/// the error names both hashes. Returns the NAR of `real`, which every store
/// needs next to ingest it.
pub fn verify_fixed(
    src: &Path,
    real: &Path,
    method: IngestionMethod,
    expected: &Hash,
) -> EResult<Vec<u8>> {
    let nar = nar_of(real, None)?;
    let actual = match method {
        IngestionMethod::Flat => {
            let data = std::fs::read(real)
                .map_err(|e| store_err(format!("reading '{}': {e}", src.display())))?;
            Hash::digest(expected.algo(), &data)
        }
        IngestionMethod::Nar => Hash::digest(expected.algo(), &nar),
    };
    if &actual != expected {
        return Err(EvalError::new(
            ErrorKind::Eval,
            format!(
                "hash mismatch in fixed-output path '{}':\n  specified: {}\n  got:       {}",
                src.display(),
                expected.to_sri(),
                actual.to_sri()
            ),
        ));
    }
    Ok(nar)
}

impl EvalStore for MemStore {
    fn add_path(
        &self,
        src: &Path,
        name: &str,
        filter: Option<&mut PathFilter<'_>>,
    ) -> EResult<StorePath> {
        // A path already inside the store is not copied again.
        if filter.is_none() && self.realise_path(src).is_some() {
            if let Some(sp) = src.to_str().and_then(|s| StorePath::from_absolute(s).ok()) {
                return Ok(sp);
            }
        }
        let real = self.realise_path(src).unwrap_or_else(|| src.to_path_buf());
        let nar = nar_of(&real, filter)?;
        let ca = ContentAddress::Source {
            nar_hash: Hash::digest(HashAlgo::Blake3, &nar),
            references: BTreeSet::new(),
        };
        let sp = StorePath::from_ca(name, &ca).map_err(store_err)?;
        self.objects.borrow_mut().insert(sp.to_absolute(), real);
        Ok(sp)
    }

    fn add_fixed(
        &self,
        src: &Path,
        name: &str,
        method: IngestionMethod,
        expected: &Hash,
    ) -> EResult<StorePath> {
        let real = self.realise_path(src).unwrap_or_else(|| src.to_path_buf());
        verify_fixed(src, &real, method, expected)?;
        let ca = ContentAddress::Fixed {
            method,
            hash: *expected,
        };
        let sp = StorePath::from_ca(name, &ca).map_err(store_err)?;
        self.objects.borrow_mut().insert(sp.to_absolute(), real);
        Ok(sp)
    }

    fn add_text(&self, name: &str, text: &str, refs: &BTreeSet<StorePath>) -> EResult<StorePath> {
        let ca = ContentAddress::Text {
            hash: Hash::digest(HashAlgo::Blake3, text.as_bytes()),
            references: refs.clone(),
        };
        let sp = StorePath::from_ca(name, &ca).map_err(store_err)?;
        let abs = sp.to_absolute();
        if !self.objects.borrow().contains_key(&abs) {
            self.pending
                .borrow_mut()
                .entry(abs)
                .or_insert_with(|| text.into());
        }
        Ok(sp)
    }

    fn realise_path(&self, p: &Path) -> Option<PathBuf> {
        let s = p.to_str()?;
        let rest = s.strip_prefix(STORE_DIR)?.strip_prefix('/')?;
        let (base, sub) = match rest.split_once('/') {
            Some((b, s)) => (b, Some(s)),
            None => (rest, None),
        };
        let key = format!("{STORE_DIR}/{base}");
        let pending = self.pending.borrow_mut().remove(&key);
        if let Some(text) = pending {
            let file = self.text_dir().ok()?.join(base);
            std::fs::write(&file, text.as_bytes()).ok()?;
            self.objects.borrow_mut().insert(key.clone(), file);
        }
        let objects = self.objects.borrow();
        let root = objects.get(&key)?;
        Some(match sub {
            Some(sub) => root.join(sub),
            None => root.clone(),
        })
    }
}
