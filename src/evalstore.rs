//! [`LocalEvalStore`]: the evaluator's store interface ([`EvalStore`]) backed by a
//! real [`LocalStore`], for commands that build (`rocmx build`).
//!
//! Owns: translating the evaluator's store writes into local-store additions —
//! sources (optionally filtered), fixed-output sources, texts (`toFile`, `.drv`
//! files, which the realiser then reads back) — and mapping logical paths
//! (`/rocmx/store/<hash>-<name>[/sub]`) to where they physically are.
//!
//! Must not: evaluate or build. `rocmx eval` keeps using `MemStore`, which writes
//! nothing; both compute the same paths.
//!
//! # Deferred texts
//!
//! A text's path is a pure function of its name, contents and references, so
//! [`EvalStore::add_text`] only computes it and queues the text; the queue is written
//! in one go by [`LocalEvalStore::flush`] (which `rocmx build` calls once evaluation is
//! over), or as soon as evaluation reads a queued path back. Writing 50 `.drv` files
//! one store transaction at a time cost more than evaluating them.

use std::cell::RefCell;
use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use rocmx_lang::eval::{EResult, ErrorKind, EvalError};
use rocmx_lang::store::{nar_of, verify_fixed, EvalStore, PathFilter};
use rocmx_store::{ContentAddress, Hash, IngestionMethod, LocalStore, NarCa, StorePath, STORE_DIR};

fn store_err(e: impl std::fmt::Display) -> Box<EvalError> {
    EvalError::new(ErrorKind::Io, e.to_string())
}

/// A text whose path is known but which is not written yet.
struct PendingText {
    name: String,
    text: String,
    refs: BTreeSet<StorePath>,
}

/// An [`EvalStore`] that adds everything to a [`LocalStore`].
pub struct LocalEvalStore {
    store: Rc<LocalStore>,
    /// Texts to write, in the order they were made (references first).
    pending: RefCell<Vec<PendingText>>,
    pending_paths: RefCell<HashSet<StorePath>>,
}

impl LocalEvalStore {
    pub fn new(store: Rc<LocalStore>) -> LocalEvalStore {
        LocalEvalStore {
            store,
            pending: RefCell::new(Vec::new()),
            pending_paths: RefCell::new(HashSet::new()),
        }
    }

    /// Writes every queued text to the store (see the module documentation).
    pub fn flush(&self) -> EResult<()> {
        let pending = std::mem::take(&mut *self.pending.borrow_mut());
        if pending.is_empty() {
            return Ok(());
        }
        let items: Vec<(&str, &[u8], &BTreeSet<StorePath>)> = pending
            .iter()
            .map(|t| (t.name.as_str(), t.text.as_bytes(), &t.refs))
            .collect();
        let r = self
            .store
            .add_texts(&items)
            .map_err(|e| store_err(format!("writing derivations to the store: {e}")));
        self.pending_paths.borrow_mut().clear();
        r.map(|_| ())
    }

    /// Flushes the queue when `p` is (inside) a queued text.
    fn flush_for(&self, p: &Path) -> EResult<()> {
        if let Some((sp, _)) = Self::split_logical(p) {
            if self.pending_paths.borrow().contains(&sp) {
                self.flush()?;
            }
        }
        Ok(())
    }

    /// Splits a logical path `/rocmx/store/<base>[/sub]` into its store path and
    /// subpath; `None` for anything else.
    fn split_logical(p: &Path) -> Option<(StorePath, Option<&str>)> {
        let s = p.to_str()?;
        let rest = s.strip_prefix(STORE_DIR)?.strip_prefix('/')?;
        let (base, sub) = match rest.split_once('/') {
            Some((b, s)) => (b, Some(s)),
            None => (rest, None),
        };
        let sp = StorePath::from_base_name(base).ok()?;
        Some((sp, sub.filter(|s| !s.is_empty())))
    }

    /// Where to read `src` from: its physical location when it is a logical store
    /// path, else `src` itself.
    fn physical(&self, src: &Path) -> PathBuf {
        self.realise_path(src).unwrap_or_else(|| src.to_path_buf())
    }
}

impl EvalStore for LocalEvalStore {
    fn add_path(
        &self,
        src: &Path,
        name: &str,
        filter: Option<&mut PathFilter<'_>>,
    ) -> EResult<StorePath> {
        self.flush_for(src)?;
        // A store path itself (not a subpath) is not copied again.
        if filter.is_none() {
            if let Some((sp, None)) = Self::split_logical(src) {
                if self.store.is_valid(&sp).map_err(store_err)? {
                    return Ok(sp);
                }
            }
        }
        let real = self.physical(src);
        let sp = match filter {
            None => self.store.add_path(&real, name),
            Some(f) => {
                // The local store copies whole trees; a filtered copy goes through
                // its NAR (same content address as `MemStore` computes).
                let nar = nar_of(&real, Some(f))?;
                self.store
                    .add_nar(name, NarCa::Source, &nar[..], &BTreeSet::new(), None)
            }
        }
        .map_err(|e| {
            store_err(format!(
                "while copying '{}' to the store: {e}",
                src.display()
            ))
        })?;
        Ok(sp)
    }

    fn add_fixed(
        &self,
        src: &Path,
        name: &str,
        method: IngestionMethod,
        expected: &Hash,
    ) -> EResult<StorePath> {
        self.flush_for(src)?;
        let real = self.physical(src);
        let nar = verify_fixed(src, &real, method, expected)?;
        let want = StorePath::from_ca(
            name,
            &ContentAddress::Fixed {
                method,
                hash: *expected,
            },
        )
        .map_err(store_err)?;
        if self.store.is_valid(&want).map_err(store_err)? {
            return Ok(want);
        }
        let sp = self
            .store
            .add_nar(
                name,
                NarCa::Fixed(method, expected.algo()),
                &nar[..],
                &BTreeSet::new(),
                None,
            )
            .map_err(|e| {
                store_err(format!(
                    "while copying '{}' to the store: {e}",
                    src.display()
                ))
            })?;
        Ok(sp)
    }

    fn add_text(&self, name: &str, text: &str, refs: &BTreeSet<StorePath>) -> EResult<StorePath> {
        let sp = StorePath::from_ca(name, &ContentAddress::text(text.as_bytes(), refs.clone()))
            .map_err(|e| store_err(format!("adding '{name}' to the store: {e}")))?;
        if self.pending_paths.borrow().contains(&sp)
            || self.store.is_valid(&sp).map_err(store_err)?
        {
            return Ok(sp);
        }
        self.pending_paths.borrow_mut().insert(sp.clone());
        self.pending.borrow_mut().push(PendingText {
            name: name.to_string(),
            text: text.to_string(),
            refs: refs.clone(),
        });
        Ok(sp)
    }

    fn realise_path(&self, p: &Path) -> Option<PathBuf> {
        self.flush_for(p).ok()?;
        let (sp, sub) = Self::split_logical(p)?;
        if !self.store.is_valid(&sp).ok()? {
            return None;
        }
        let root = self.store.real_path(&sp);
        Some(match sub {
            Some(sub) => root.join(sub),
            None => root,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rocmx_lang::store::MemStore;

    /// The local store and the in-memory one agree on every kind of path.
    #[test]
    fn same_paths_as_memstore() {
        let root = tempfile::tempdir().unwrap();
        let src = tempfile::tempdir().unwrap();
        std::fs::write(src.path().join("a"), b"hello").unwrap();
        std::fs::write(src.path().join("b"), b"world").unwrap();
        let store = Rc::new(LocalStore::open(root.path()).unwrap());
        let local = LocalEvalStore::new(store.clone());
        let mem = MemStore::new();

        let p1 = local.add_path(src.path(), "src", None).unwrap();
        assert_eq!(p1, mem.add_path(src.path(), "src", None).unwrap());
        assert!(store.is_valid(&p1).unwrap());

        let mut keep_a = |p: &Path, _: &str| Ok(!p.ends_with("b"));
        let p2 = local
            .add_path(src.path(), "src", Some(&mut keep_a))
            .unwrap();
        let mut keep_a2 = |p: &Path, _: &str| Ok(!p.ends_with("b"));
        assert_eq!(
            p2,
            mem.add_path(src.path(), "src", Some(&mut keep_a2)).unwrap()
        );
        assert_ne!(p1, p2);
        let real = local.realise_path(Path::new(&format!("{p2}/a"))).unwrap();
        assert_eq!(std::fs::read(real).unwrap(), b"hello");
        assert!(local
            .realise_path(Path::new(&format!("{p2}/b")))
            .unwrap()
            .symlink_metadata()
            .is_err());

        let refs: BTreeSet<StorePath> = [p1.clone()].into_iter().collect();
        let t = local.add_text("x.drv", "text", &refs).unwrap();
        assert_eq!(t, mem.add_text("x.drv", "text", &refs).unwrap());
        // Queued, not written, until flushed or read back.
        assert!(!store.is_valid(&t).unwrap());
        let t2 = local.add_text("y", "other", &BTreeSet::new()).unwrap();
        local.flush().unwrap();
        assert!(store.is_valid(&t).unwrap());
        assert!(store.is_valid(&t2).unwrap());
        let t3 = local.add_text("z", "third", &BTreeSet::new()).unwrap();
        let real = local.realise_path(Path::new(&t.to_absolute())).unwrap();
        assert_eq!(std::fs::read_to_string(real).unwrap(), "text");
        // Reading a queued text back writes the queue first.
        let real = local.realise_path(Path::new(&t3.to_absolute())).unwrap();
        assert_eq!(std::fs::read_to_string(real).unwrap(), "third");
        assert_eq!(store.references(&t).unwrap().len(), 1);

        let file = src.path().join("a");
        let h = Hash::digest(rocmx_store::HashAlgo::Sha256, b"hello");
        let f = local
            .add_fixed(&file, "a", IngestionMethod::Flat, &h)
            .unwrap();
        assert_eq!(
            f,
            mem.add_fixed(&file, "a", IngestionMethod::Flat, &h)
                .unwrap()
        );
        let bad = Hash::digest(rocmx_store::HashAlgo::Sha256, b"other");
        assert!(local
            .add_fixed(&file, "a", IngestionMethod::Flat, &bad)
            .is_err());

        // Re-adding a store path returns it unchanged.
        let again = local
            .add_path(Path::new(&p1.to_absolute()), "src", None)
            .unwrap();
        assert_eq!(again, p1);
        assert!(local.realise_path(Path::new("/elsewhere")).is_none());
    }
}
