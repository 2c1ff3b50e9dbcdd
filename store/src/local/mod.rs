//! The local store: content on disk under a physical root, metadata in SQLite.
//!
//! Owns: [`LocalStore`] — opening a store (creating its layout and migrating its
//! database), mapping store paths to and from their physical location, adding content
//! ([`add`]), queries (validity, path info, references, referrers, closures),
//! realisations, GC roots and garbage collection ([`gc`]) and consistency checks
//! ([`verify`]).
//!
//! Must not: evaluate or build anything, or write outside its root (except the `result`
//! links that [`LocalStore::add_root`] is asked to create). The formats it stores (NAR,
//! paths, fingerprints) belong to the other modules of this crate.
//!
//! # On-disk layout
//!
//! ```text
//! <root>/store/<hash>-<name>          content, read-only: files 0444 / 0555, dirs 0555, mtime 1
//! <root>/store/.tmp-<pid>-<n>-<rand>  scratch directories (or, for texts, files) of adds
//!                                     in progress (flocked)
//! <root>/var/rocmx/db.sqlite          metadata (WAL; see `db` for the schema)
//! <root>/var/rocmx/gc.lock            global GC lock: add shared, gc/delete/repair exclusive
//! <root>/var/rocmx/locks/<c>.lock     per-path locks, shared by the paths whose hash
//!                                     part starts with `c` (see `lock`)
//! <root>/var/rocmx/locks/drv.lock     build locks (byte-range locks, see rocmx-builder)
//! <root>/var/rocmx/log/, builds/      build logs and build directories (rocmx-builder)
//! <root>/var/rocmx/gcroots/           roots: symlinks to store paths, anywhere below
//! <root>/var/rocmx/gcroots/auto/<h>   indirect roots: symlink to a user's `result` link
//! <root>/var/rocmx/temproots/<pid>-<n> temporary roots of a live store handle
//! ```
//!
//! # Several users
//!
//! The state directories, lock files and the database belong to the owner of `<root>`
//! (and are group-writable, new files taking the directory's group, when `<root>` is):
//! root, using a store that belongs to someone else, creates them with that owner
//! (see `owner`), and [`LocalStore::foreign_owner`] tells the binary to warn about it.
//!
//! # Crash safety
//!
//! Content is created in a scratch directory (a scratch file for a text) inside
//! `<root>/store`, made durable (`fsync` per file, or `syncfs` for big trees), renamed
//! to its final name, the store directory is synced, and only then is the path
//! registered, in one transaction. A build result is already on disk, in the state
//! directory: it is renamed to its final name first, then one `syncfs` makes its
//! contents and its name durable before it is registered (`built`: the realiser
//! places a build's outputs and commits placed builds in batches, one `syncfs` each). A
//! crash leaves at worst a scratch entry or an unregistered entry: neither is ever
//! reported valid, the next add of that path replaces it, and `gc` or `verify --repair`
//! removes it. Deleting goes the other way: rows first, then content.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Component, Path, PathBuf};
use std::sync::Mutex;

use rusqlite::{Connection, TransactionBehavior};

use crate::hash::Hash;
use crate::path::{StorePath, STORE_DIR};

mod add;
mod built;
mod db;
mod error;
mod fsutil;
mod gc;
mod import;
mod ingest;
mod lock;
mod owner;
mod verify;

#[cfg(test)]
mod tests;

pub use add::{ca_string, NarCa};
pub use built::{BuiltOutput, BuiltPath, Placed};
pub use db::SCHEMA_VERSION;
pub use error::StoreError;
pub use fsutil::normalise_tree;
pub use gc::{GcOptions, GcReport};
pub use import::ImportClaim;
pub use lock::{open_lock_file, GcShared};
pub use verify::{Problem, VerifyReport};

/// What the store records about a valid path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathInfo {
    /// The path.
    pub path: StorePath,
    /// BLAKE3 of its NAR.
    pub nar_hash: Hash,
    /// Size of its NAR in bytes.
    pub nar_size: u64,
    /// When it was registered, in seconds since the epoch.
    pub registration_time: i64,
    /// The derivation that built it, if any.
    pub deriver: Option<StorePath>,
    /// Signatures over it (`keyname:base64`).
    pub signatures: Vec<String>,
    /// The paths it refers to (itself included if it refers to itself).
    pub references: BTreeSet<StorePath>,
    /// Its content address, e.g. `source:blake3:<nix32>` or `text:blake3:<nix32>`.
    pub ca: Option<String>,
}

/// A local store at a physical root. Safe to share between threads; several handles, in
/// one process or many, may use one root at once.
#[derive(Debug)]
pub struct LocalStore {
    root: PathBuf,
    store_dir: PathBuf,
    /// `store_dir` with symlinks resolved, to recognise physical paths spelt either way.
    canon_store_dir: PathBuf,
    state_dir: PathBuf,
    db_path: PathBuf,
    conn: Mutex<Connection>,
    temp_roots: lock::TempRoots,
}

/// Creates `dir` (below `root`, which exists) as the store's shared state: see `owner`.
fn mkdirs(root: &Path, dir: &Path) -> Result<(), StoreError> {
    owner::create_dirs(root, dir).map_err(StoreError::io("creating", dir))
}

impl LocalStore {
    /// The default physical root: `/rocmx` when it is writable (or does not exist and `/`
    /// is writable), else `$XDG_DATA_HOME/rocmx`, else `~/.local/share/rocmx`.
    pub fn default_root() -> PathBuf {
        let writable = |p: &str| rustix::fs::access(p, rustix::fs::Access::WRITE_OK).is_ok();
        let sys = Path::new("/rocmx");
        if (sys.exists() && writable("/rocmx")) || (!sys.exists() && writable("/")) {
            return sys.to_path_buf();
        }
        match std::env::var_os("XDG_DATA_HOME") {
            Some(x) if Path::new(&x).is_absolute() => Path::new(&x).join("rocmx"),
            _ => {
                let home = std::env::var_os("HOME").unwrap_or_else(|| "/".into());
                Path::new(&home).join(".local/share/rocmx")
            }
        }
    }

    /// Opens the store at `root`, creating `<root>/store`, `<root>/var/rocmx/{db.sqlite,
    /// gcroots/, temproots/, locks/, log/, builds/}` as needed (owned as the module
    /// documentation says) and migrating the database.
    pub fn open(root: &Path) -> Result<LocalStore, StoreError> {
        let root = std::path::absolute(root).map_err(StoreError::io("resolving", root))?;
        let store_dir = root.join("store");
        let state_dir = root.join("var/rocmx");
        fs::create_dir_all(&root).map_err(StoreError::io("creating", &root))?;
        for d in [
            store_dir.clone(),
            state_dir.join("gcroots/auto"),
            state_dir.join("temproots"),
            state_dir.join("locks"),
            state_dir.join("log"),
            state_dir.join("builds"),
        ] {
            mkdirs(&root, &d)?;
        }
        // Each store path, and each build's directory, is an unrelated tree.
        fsutil::spread_subdirectories(&store_dir);
        fsutil::spread_subdirectories(&state_dir.join("builds"));
        let canon_store_dir =
            fs::canonicalize(&store_dir).map_err(StoreError::io("resolving", &store_dir))?;
        let db_path = state_dir.join("db.sqlite");
        let conn = db::open(&db_path)?;
        // SQLite gives the journal files it creates the database's owner; older ones too.
        for f in ["db.sqlite", "db.sqlite-wal", "db.sqlite-shm"] {
            owner::adopt(&state_dir.join(f), None, &state_dir);
        }
        Ok(LocalStore {
            temp_roots: lock::TempRoots::new(&state_dir.join("temproots")),
            root,
            store_dir,
            canon_store_dir,
            state_dir,
            db_path,
            conn: Mutex::new(conn),
        })
    }

    /// The owner of the store's root when this process runs as root and the store
    /// belongs to another user (the binary warns: see the module documentation).
    pub fn foreign_owner(&self) -> Option<u32> {
        owner::foreign_owner(&self.root).map(|(uid, _)| uid)
    }

    /// The physical root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The physical store directory, `<root>/store`.
    pub fn store_dir(&self) -> &Path {
        &self.store_dir
    }

    /// The state directory, `<root>/var/rocmx`.
    pub fn state_dir(&self) -> &Path {
        &self.state_dir
    }

    /// Where `p`'s content lives: `<root>/store/<hash>-<name>`.
    pub fn real_path(&self, p: &StorePath) -> PathBuf {
        self.store_dir.join(p.base_name())
    }

    /// The store path (and the subpath within it, if any) that `p` designates: a logical
    /// `/rocmx/store/<hash>-<name>[/sub]`, a physical `<root>/store/<hash>-<name>[/sub]`,
    /// or a symlink (such as `result`) leading to either. Relative paths are taken from the
    /// current directory.
    pub fn to_store_path(&self, p: &Path) -> Result<(StorePath, Option<PathBuf>), StoreError> {
        let not_in_store = || StoreError::NotInStore {
            path: p.to_path_buf(),
            physical: self.store_dir.clone(),
        };
        let mut cur = std::path::absolute(p).map_err(|_| not_in_store())?;
        let mut canonicalised = false;
        for _ in 0..40 {
            for base in [Path::new(STORE_DIR), &self.store_dir, &self.canon_store_dir] {
                if let Ok(rest) = cur.strip_prefix(base) {
                    return split_store_rest(rest).ok_or_else(not_in_store)?;
                }
            }
            match fs::symlink_metadata(&cur) {
                Ok(m) if m.file_type().is_symlink() => {
                    let target = fs::read_link(&cur).map_err(|_| not_in_store())?;
                    cur = match cur.parent() {
                        Some(parent) => parent.join(target),
                        None => target,
                    };
                }
                _ if !canonicalised => {
                    canonicalised = true;
                    cur = fs::canonicalize(&cur).map_err(|_| not_in_store())?;
                }
                _ => break,
            }
        }
        Err(not_in_store())
    }

    /// Runs `f` on the database connection.
    fn with_db<T>(
        &self,
        f: impl FnOnce(&mut Connection, &Path) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut conn = self.conn.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut conn, &self.db_path)
    }

    /// Runs `f` (many queries) in one read transaction: one consistent snapshot, and the
    /// database's read lock is taken once rather than for every statement.
    fn with_read<T>(
        &self,
        f: impl FnOnce(&Connection, &Path) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.with_db(|conn, dbp| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Deferred)
                .map_err(db::err(dbp, "starting a transaction"))?;
            let out = f(&tx, dbp)?;
            tx.commit().map_err(db::err(dbp, "committing"))?;
            Ok(out)
        })
    }

    /// Runs `f` in one immediate (write-locking) transaction, committed if `f` succeeds.
    fn with_tx<T>(
        &self,
        f: impl FnOnce(&Connection, &Path) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.with_db(|conn, dbp| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(db::err(dbp, "starting a transaction"))?;
            let out = f(&tx, dbp)?;
            tx.commit().map_err(db::err(dbp, "committing"))?;
            Ok(out)
        })
    }

    fn not_valid(&self, p: &StorePath) -> StoreError {
        StoreError::NotValid {
            path: p.clone(),
            root: self.root.clone(),
        }
    }

    /// Whether `p` is registered (its content is then complete on disk).
    pub fn is_valid(&self, p: &StorePath) -> Result<bool, StoreError> {
        self.with_db(|c, d| Ok(db::path_id(c, d, p)?.is_some()))
    }

    /// What is recorded about `p`; `None` if it is not valid.
    pub fn path_info(&self, p: &StorePath) -> Result<Option<PathInfo>, StoreError> {
        self.with_db(|c, d| db::path_info(c, d, p))
    }

    /// The paths `p` refers to. Fails if `p` is not valid.
    pub fn references(&self, p: &StorePath) -> Result<BTreeSet<StorePath>, StoreError> {
        self.with_db(|c, d| match db::path_id(c, d, p)? {
            Some(id) => db::references_of(c, d, id),
            None => Err(self.not_valid(p)),
        })
    }

    /// The valid paths that refer to `p`. Fails if `p` is not valid.
    pub fn referrers(&self, p: &StorePath) -> Result<BTreeSet<StorePath>, StoreError> {
        self.with_db(|c, d| match db::path_id(c, d, p)? {
            Some(id) => db::referrers_of(c, d, id),
            None => Err(self.not_valid(p)),
        })
    }

    /// `paths` and everything they refer to, directly or not. Fails if one is not valid.
    pub fn closure(&self, paths: &[StorePath]) -> Result<BTreeSet<StorePath>, StoreError> {
        self.with_read(|c, d| {
            let ids = paths
                .iter()
                .map(|p| db::path_id(c, d, p)?.ok_or_else(|| self.not_valid(p)))
                .collect::<Result<Vec<i64>, _>>()?;
            db::closure_of(c, d, &ids)
        })
    }

    /// The valid path with hash part `hash` (the 32 characters after the store
    /// directory), if any; `None` too for text that is no hash part.
    pub fn path_from_hash_part(&self, hash: &str) -> Result<Option<StorePath>, StoreError> {
        if hash.len() != crate::path::HASH_PART_LEN
            || !hash
                .bytes()
                .all(|b| crate::nixbase32::ALPHABET.contains(&b))
        {
            return Ok(None);
        }
        self.with_db(|c, d| db::path_from_hash_part(c, d, hash))
    }

    /// Every valid path, in order.
    pub fn all_valid(&self) -> Result<Vec<StorePath>, StoreError> {
        self.with_db(|c, d| {
            Ok(db::all_valid(c, d)?
                .into_iter()
                .map(|(p, _, _)| p)
                .collect())
        })
    }

    /// Copies the write-ahead log into the database and empties it, as closing the last
    /// connection would, unless another connection is reading it (then nothing is done,
    /// at once: this never waits). For a process about to exit with the store still
    /// open: the next one to open the store then has no log to read back. Best effort:
    /// the log's content is as safe in the log.
    pub fn checkpoint(&self) {
        let conn = self.conn.lock().unwrap_or_else(|e| e.into_inner());
        if conn.busy_timeout(std::time::Duration::ZERO).is_ok() {
            let _ = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
            let _ = conn.busy_timeout(db::BUSY_TIMEOUT);
        }
    }

    /// Protects `p` from garbage collection for as long as this handle lives (a builder
    /// calls this for the inputs of a running build).
    pub fn add_temp_root(&self, p: &StorePath) -> Result<(), StoreError> {
        let _gc = lock::gc_lock(&self.state_dir, false)?;
        self.temp_roots.add(p)
    }

    /// Takes the GC lock shared and keeps it until the value is dropped: no collection
    /// starts meanwhile, and [`Self::add_temp_root_held`] adds roots without taking the
    /// lock once more each (a plan roots hundreds of paths, one at a time, each before
    /// checking it: an open, a lock and a close saved per root). Hold it for a bounded
    /// phase of local work, never across a build or a download: a collection waits.
    pub fn hold_gc_shared(&self) -> Result<GcShared, StoreError> {
        Ok(GcShared(lock::gc_lock(&self.state_dir, false)?))
    }

    /// [`Self::add_temp_root`] under a GC lock the caller holds (see
    /// [`Self::hold_gc_shared`]). A lock of another store's is not this one's: then the
    /// lock is taken as `add_temp_root` takes it.
    pub fn add_temp_root_held(&self, p: &StorePath, held: &GcShared) -> Result<(), StoreError> {
        let ours = held.0.path().parent() == Some(self.state_dir.as_path())
            && held.0.path().file_name() == Some(std::ffi::OsStr::new(lock::GC_LOCK));
        if !ours {
            return self.add_temp_root(p);
        }
        self.temp_roots.add(p)
    }

    /// Records that building output `output` of the resolved derivation whose hash is
    /// `drv_hash` gave `path` (which must be valid), with `signatures`. Recording the same
    /// path again merges signatures; a different path is a
    /// [`StoreError::RealisationConflict`]. The record goes when `path` is deleted.
    pub fn add_realisation(
        &self,
        drv_hash: &str,
        output: &str,
        path: &StorePath,
        signatures: &[String],
    ) -> Result<(), StoreError> {
        self.with_tx(|c, d| {
            db::add_realisation(c, d, drv_hash, output, path, &self.root, signatures)
        })
    }

    /// The path output `output` of the resolved derivation `drv_hash` was realised to.
    pub fn query_realisation(
        &self,
        drv_hash: &str,
        output: &str,
    ) -> Result<Option<StorePath>, StoreError> {
        Ok(self
            .query_realisation_signed(drv_hash, output)?
            .map(|(p, _)| p))
    }

    /// Like [`LocalStore::query_realisation`], with the realisation's signatures.
    pub fn query_realisation_signed(
        &self,
        drv_hash: &str,
        output: &str,
    ) -> Result<Option<(StorePath, Vec<String>)>, StoreError> {
        self.with_db(|c, d| db::query_realisation(c, d, drv_hash, output))
    }

    /// Records that output `output` of the valid derivation `drv` is `path`. (Adding a
    /// `.drv` text records its fixed outputs by itself.)
    pub fn add_derivation_output(
        &self,
        drv: &StorePath,
        output: &str,
        path: &StorePath,
    ) -> Result<(), StoreError> {
        // Already recorded (every lookup of a realised derivation records its outputs
        // again, 50 times in a no-op rebuild of 50): a read, no write transaction.
        let recorded = self.with_db(|c, d| match db::path_id(c, d, drv)? {
            Some(id) => Ok(db::derivation_outputs(c, d, id)?
                .iter()
                .any(|(o, p)| o == output && p == path)),
            None => Ok(false),
        })?;
        if recorded {
            return Ok(());
        }
        self.with_tx(|c, d| {
            let id = db::path_id(c, d, drv)?.ok_or_else(|| self.not_valid(drv))?;
            db::add_derivation_output(c, d, id, output, path)
        })
    }

    /// Records what a build of the valid derivation `drv` (resolved to the derivation
    /// whose hash is `drv_hash`) made for its output `output`: the realisation
    /// `drv_hash!output` ↦ `path` with `signatures` (see [`Self::add_realisation`]) —
    /// unless one points elsewhere already, which is kept: a rebuild that gave other
    /// bytes does not replace the first result — and `drv`'s output `output` ↦ `path`
    /// (see [`Self::add_derivation_output`]). One write transaction for both, where
    /// the two calls took three. `realise` false records only the derivation output
    /// (a fixed output has no realisation).
    pub fn record_built_output(
        &self,
        drv: &StorePath,
        drv_hash: &str,
        output: &str,
        path: &StorePath,
        signatures: &[String],
        realise: bool,
    ) -> Result<(), StoreError> {
        let b = BuiltOutput {
            drv,
            drv_hash,
            output,
            realise,
        };
        self.with_tx(|c, d| self.record_output_in(c, d, &b, path, signatures))
    }

    /// The records of [`Self::record_built_output`], in the caller's write transaction.
    pub(crate) fn record_output_in(
        &self,
        c: &Connection,
        d: &Path,
        b: &BuiltOutput<'_>,
        path: &StorePath,
        signatures: &[String],
    ) -> Result<(), StoreError> {
        let BuiltOutput {
            drv,
            drv_hash,
            output,
            realise,
        } = *b;
        if realise {
            // `add_realisation` reads the existing record itself, and refuses another
            // path before writing anything: that one is kept.
            match db::add_realisation(c, d, drv_hash, output, path, &self.root, signatures) {
                Ok(()) | Err(StoreError::RealisationConflict { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        // Already in a write transaction: recording the same output again is a harmless
        // replace, so no read first (unlike `add_derivation_output`).
        let id = db::path_id(c, d, drv)?.ok_or_else(|| self.not_valid(drv))?;
        db::add_derivation_output(c, d, id, output, path)
    }

    /// The recorded outputs of the valid derivation `drv`.
    pub fn derivation_outputs(
        &self,
        drv: &StorePath,
    ) -> Result<BTreeMap<String, StorePath>, StoreError> {
        self.with_db(|c, d| {
            let id = db::path_id(c, d, drv)?.ok_or_else(|| self.not_valid(drv))?;
            Ok(db::derivation_outputs(c, d, id)?.into_iter().collect())
        })
    }
}

/// Splits `<hash>-<name>[/sub…]` (what follows a store directory) into a store path and
/// its subpath. `None` for anything else (empty, `..`, a bad base name).
fn split_store_rest(rest: &Path) -> Option<Result<(StorePath, Option<PathBuf>), StoreError>> {
    let mut comps = rest.components();
    let base = match comps.next()? {
        Component::Normal(b) => b.to_str()?,
        _ => return None,
    };
    let sub: PathBuf = comps
        .map(|c| match c {
            Component::Normal(n) => Some(n),
            _ => None,
        })
        .collect::<Option<PathBuf>>()?;
    let sp = match StorePath::from_base_name(base) {
        Ok(sp) => sp,
        Err(e) => return Some(Err(e.into())),
    };
    Some(Ok((sp, (!sub.as_os_str().is_empty()).then_some(sub))))
}
