//! The local store's error type.
//!
//! Owns: [`StoreError`], whose messages name the path or row at fault and, where one exists,
//! the fix.
//!
//! Must not: carry policy (what to retry, how to exit); callers decide from the variant.

use std::io;
use std::path::PathBuf;

use thiserror::Error;

use crate::hash::HashAlgo;
use crate::nar::NarError;
use crate::path::{StorePath, StorePathError, STORE_DIR};

/// Everything that can go wrong in the local store.
#[derive(Debug, Error)]
pub enum StoreError {
    /// A filesystem operation failed.
    #[error("{action} {path:?}: {source}")]
    Io {
        /// What was being done (`creating`, `reading`, `renaming into place`, …).
        action: &'static str,
        /// The file at fault.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// The metadata database failed.
    #[error("store database {db:?}: {context}: {source}")]
    Db {
        /// The database file.
        db: PathBuf,
        /// What was being done.
        context: &'static str,
        /// The SQLite error.
        source: rusqlite::Error,
    },
    /// The database was written by a newer rocmx.
    #[error(
        "store database {db:?} has schema version {found}, newer than the {supported} this \
         rocmx supports; upgrade rocmx or use another --store"
    )]
    SchemaTooNew {
        /// The database file.
        db: PathBuf,
        /// Its version.
        found: u32,
        /// The newest version known here.
        supported: u32,
    },
    /// A database row holds a value that cannot be parsed.
    #[error(
        "store database row has invalid {what} {value:?}: {why}; \
         run `rocmx store verify --repair`"
    )]
    BadRow {
        /// Which column.
        what: &'static str,
        /// The value found.
        value: String,
        /// Why it is invalid.
        why: String,
    },
    /// Serialising or reading a NAR failed.
    #[error(transparent)]
    Nar(#[from] NarError),
    /// A store path or name is malformed.
    #[error(transparent)]
    Path(#[from] StorePathError),
    /// Walking or removing a tree failed, or it is nested too deeply.
    #[error(transparent)]
    Tree(#[from] crate::tree::TreeError),
    /// A file that the store cannot hold.
    #[error(
        "cannot add {path:?}: it is a {kind}; only regular files, directories and symlinks \
         can be stored (remove it or filter it out)"
    )]
    UnsupportedFileType {
        /// The file at fault.
        path: PathBuf,
        /// `socket`, `FIFO`, `character device`, `block device` or `unknown file type`.
        kind: &'static str,
    },
    /// A source file changed between hashing and copying.
    #[error(
        "{path:?} changed while it was being added to the store; add it again once nothing \
         writes to it"
    )]
    SourceChanged {
        /// The file at fault.
        path: PathBuf,
    },
    /// A filesystem path that is neither in the logical nor in the physical store.
    #[error("{path:?} is not in the store ({STORE_DIR}, physically {physical:?})")]
    NotInStore {
        /// The path given.
        path: PathBuf,
        /// The physical store directory.
        physical: PathBuf,
    },
    /// A store path that is not registered as valid.
    #[error("{path} is not a valid path in the store at {root:?}")]
    NotValid {
        /// The path.
        path: StorePath,
        /// The store's physical root.
        root: PathBuf,
    },
    /// Registering something whose reference is not valid.
    #[error("cannot register {path}: its reference {reference} is not valid; add it first")]
    InvalidReference {
        /// The path being registered.
        path: StorePath,
        /// The missing reference.
        reference: StorePath,
    },
    /// Content from outside (a binary cache) that does not match what was claimed for
    /// it: its NAR hash or size, its content address, or its path.
    #[error("refusing {path}: {problem}")]
    ImportRefused {
        /// The path claimed.
        path: StorePath,
        /// What does not match.
        problem: String,
    },
    /// A scratch directory handed to `register_built` does not exist.
    #[error("cannot register {path}: its build result {scratch:?} does not exist")]
    MissingScratch {
        /// The path being registered.
        path: StorePath,
        /// The scratch directory.
        scratch: PathBuf,
    },
    /// A NAR hash that is not BLAKE3 where one is required.
    #[error("{what} must be a blake3 hash, got {algo}")]
    NotBlake3 {
        /// Which hash.
        what: &'static str,
        /// The algorithm given.
        algo: HashAlgo,
    },
    /// Deleting a path that another valid path refers to.
    #[error(
        "cannot delete {path}: it is referenced by {referrer}; delete that one too \
         (or first), or let `rocmx store gc` decide"
    )]
    Referenced {
        /// The path to delete.
        path: StorePath,
        /// A valid path referring to it.
        referrer: StorePath,
    },
    /// Deleting a path that is a GC root.
    #[error("cannot delete {path}: it is a GC root through {root:?}; remove that link first")]
    Rooted {
        /// The path to delete.
        path: StorePath,
        /// The root link.
        root: PathBuf,
    },
    /// Deleting a path that a running rocmx process uses.
    #[error(
        "cannot delete {path}: a running rocmx process uses it (temporary root {file:?}); \
         try again when it has finished"
    )]
    InUse {
        /// The path to delete.
        path: StorePath,
        /// The temporary-roots file naming it.
        file: PathBuf,
    },
    /// Deleting a path that gc keeps because of a live path's keep edge.
    #[error(
        "cannot delete {path}: it is kept alive by the live path {by} ({setting} is on); \
         delete that one too, or pass --option {setting} false"
    )]
    Kept {
        /// The path to delete.
        path: StorePath,
        /// The live path whose deriver or output it is.
        by: StorePath,
        /// The setting that keeps it: `keep-derivations` or `keep-outputs`.
        setting: &'static str,
    },
    /// Creating a root where a non-symlink exists.
    #[error("cannot create GC root {link:?}: it exists and is not a symlink; move it away")]
    RootExists {
        /// The link.
        link: PathBuf,
    },
    /// A realisation that contradicts the one recorded.
    #[error(
        "realisation {realisation} is already {existing}, not {new}: the build is not \
         reproducible; delete the realisation's path to record another"
    )]
    RealisationConflict {
        /// `<resolved derivation hash>!<output name>`.
        realisation: String,
        /// The path recorded.
        existing: StorePath,
        /// The path offered.
        new: StorePath,
    },
    /// `add_nar` with a flat content address of an archive whose root is not a file.
    #[error("cannot add {name} as a flat file: the archive's root is not a regular file")]
    NotFlat {
        /// The name given.
        name: String,
    },
}

impl StoreError {
    /// An [`StoreError::Io`] maker for `map_err`.
    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(io::Error) -> StoreError {
        let path = path.into();
        move |source| StoreError::Io {
            action,
            path,
            source,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_problem_and_the_fix() {
        let e = StoreError::UnsupportedFileType {
            path: "/src/sock".into(),
            kind: "socket",
        };
        assert_eq!(
            e.to_string(),
            "cannot add \"/src/sock\": it is a socket; only regular files, directories and \
             symlinks can be stored (remove it or filter it out)"
        );
        let p: StorePath = "/rocmx/store/00bgd045z0d4icpbc2yyz4gx48ak44la-a"
            .parse()
            .expect("path");
        let q: StorePath = "/rocmx/store/zzbgd045z0d4icpbc2yyz4gx48ak44la-b"
            .parse()
            .expect("path");
        let e = StoreError::Referenced {
            path: p,
            referrer: q,
        };
        assert_eq!(
            e.to_string(),
            "cannot delete /rocmx/store/00bgd045z0d4icpbc2yyz4gx48ak44la-a: it is referenced \
             by /rocmx/store/zzbgd045z0d4icpbc2yyz4gx48ak44la-b; delete that one too (or \
             first), or let `rocmx store gc` decide"
        );
    }
}
