//! NAR, Nix's archive format, byte for byte as `nix-store --dump` writes it.
//!
//! Owns: the wire format and its limits, its one token emitter (`emit.rs`, also used by
//! the local store's ingestion, which walks on its own to record what it hashes), the
//! streaming writer from the filesystem ([`dump_path`], [`hash_path`], [`dump_regular`]),
//! the strict streaming parser ([`parse`] with a [`NarVisitor`], [`check`]) and
//! [`restore`], which never writes outside its target.
//!
//! Must not: know about store paths, the database or normalisation of modes and times (the
//! local store does that after restoring), or panic on any archive, however hostile.
//!
//! # Format
//!
//! Every token is a string: its length as a little-endian u64, its bytes, then zero bytes up
//! to a multiple of 8. An archive is `"nix-archive-1"` followed by one node:
//!
//! ```text
//! node  = "(" "type" ( regular | symlink | directory ) ")"
//! regular   = "regular" [ "executable" "" ] "contents" <bytes>
//! symlink   = "symlink" "target" <target>
//! directory = "directory" { "entry" "(" "name" <name> "node" node ")" }
//! ```
//!
//! Directory entries are sorted by the bytes of their names, and names are unique. The
//! parser accepts exactly this canonical form: one archive, one byte string.

use std::io;
use std::path::PathBuf;

use thiserror::Error;

mod emit;
mod reader;
mod restore;
mod writer;

#[cfg(test)]
mod tests;

pub use reader::{check, parse, Contents, NarVisitor};
pub use restore::{restore, restore_direct, DIRECT_MIN};
pub use writer::{dump_path, dump_path_filtered, dump_regular, hash_path};
// For the local store's ingestion.
#[cfg(feature = "local")]
pub(crate) use emit::{entry_names, ContentsError, Emitter};

/// The first token of every archive.
pub const MAGIC: &[u8] = b"nix-archive-1";

/// Longest entry name accepted, in bytes (Linux's `NAME_MAX`).
pub const MAX_NAME_LEN: u64 = 255;

/// Longest symlink target accepted, in bytes (Linux's `PATH_MAX`).
pub const MAX_TARGET_LEN: u64 = 4096;

/// Deepest directory nesting accepted.
pub const MAX_DEPTH: usize = 2048;

/// Everything that can go wrong writing, reading or restoring a NAR. Parse errors name the
/// byte offset, in the archive, of the token at fault.
#[derive(Debug, Error)]
pub enum NarError {
    /// Reading the archive failed for a reason other than its end.
    #[error("reading NAR at byte {offset}: {source}")]
    Read {
        /// Offset reached.
        offset: u64,
        /// The underlying error.
        source: io::Error,
    },
    /// The archive ends in the middle of a token.
    #[error("NAR truncated at byte {offset}")]
    Truncated {
        /// Offset where more bytes were needed.
        offset: u64,
    },
    /// The archive does not start with `nix-archive-1`.
    #[error("not a NAR: bad magic at byte {offset}")]
    BadMagic {
        /// Always 0, or where the magic's length or bytes went wrong.
        offset: u64,
    },
    /// A token other than the one the grammar requires.
    #[error("NAR byte {offset}: expected {expected}, found {found}")]
    UnexpectedToken {
        /// Offset of the token.
        offset: u64,
        /// What the grammar allows here.
        expected: &'static str,
        /// What was there (quoted, shortened).
        found: String,
    },
    /// A token longer than its cap.
    #[error("NAR byte {offset}: {what} of {len} bytes exceeds the limit of {max}")]
    TooLong {
        /// Offset of the token.
        offset: u64,
        /// Which token (`name`, `symlink target`, `keyword`).
        what: &'static str,
        /// The declared length.
        len: u64,
        /// The cap.
        max: u64,
    },
    /// Non-zero padding after a token.
    #[error("NAR byte {offset}: non-zero padding")]
    BadPadding {
        /// Offset of the padding.
        offset: u64,
    },
    /// An empty entry name.
    #[error("NAR byte {offset}: empty entry name")]
    EmptyName {
        /// Offset of the name token.
        offset: u64,
    },
    /// An entry name containing `/`.
    #[error("NAR byte {offset}: entry name {name:?} contains '/'")]
    NameContainsSlash {
        /// Offset of the name token.
        offset: u64,
        /// The name (lossy UTF-8).
        name: String,
    },
    /// An entry name containing NUL.
    #[error("NAR byte {offset}: entry name {name:?} contains NUL")]
    NameContainsNul {
        /// Offset of the name token.
        offset: u64,
        /// The name (lossy UTF-8).
        name: String,
    },
    /// An entry named `.` or `..`.
    #[error("NAR byte {offset}: entry name {name:?} is not allowed")]
    DotName {
        /// Offset of the name token.
        offset: u64,
        /// `.` or `..`.
        name: String,
    },
    /// An entry whose name sorts before the previous one.
    #[error("NAR byte {offset}: entry {name:?} is not sorted after {previous:?}")]
    Unsorted {
        /// Offset of the name token.
        offset: u64,
        /// The previous name.
        previous: String,
        /// This name.
        name: String,
    },
    /// An entry with the same name as the previous one.
    #[error("NAR byte {offset}: duplicate entry {name:?}")]
    Duplicate {
        /// Offset of the name token.
        offset: u64,
        /// The name.
        name: String,
    },
    /// A symlink target that is empty or contains NUL.
    #[error("NAR byte {offset}: symlink target is empty or contains NUL")]
    BadTarget {
        /// Offset of the target token.
        offset: u64,
    },
    /// Directories nested deeper than [`MAX_DEPTH`].
    #[error("NAR byte {offset}: directories nested deeper than {MAX_DEPTH}")]
    TooDeep {
        /// Offset of the entry that goes too deep.
        offset: u64,
    },
    /// A tree to archive is nested deeper than [`MAX_DEPTH`] levels (its root is level
    /// 1): no reader would accept its archive.
    #[error(
        "{path:?} is nested deeper than {MAX_DEPTH} levels, the most a NAR may hold \
         (its root is level 1)"
    )]
    TreeTooDeep {
        /// The tree's root.
        path: PathBuf,
    },
    /// Bytes after the root node.
    #[error("NAR has trailing bytes at byte {offset}")]
    TrailingBytes {
        /// Offset of the first extra byte.
        offset: u64,
    },
    /// Reading the filesystem while dumping failed.
    #[error("dumping {path:?}: {source}")]
    Dump {
        /// The file at fault.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// A file that NAR cannot represent (device, FIFO, socket).
    #[error(
        "dumping {path:?}: unsupported file type (only regular files, directories and symlinks)"
    )]
    UnsupportedFileType {
        /// The file at fault.
        path: PathBuf,
    },
    /// A file whose size changed while it was being dumped.
    #[error("dumping {path:?}: file changed size while being read")]
    FileChangedSize {
        /// The file at fault.
        path: PathBuf,
    },
    /// Writing the archive failed.
    #[error("writing NAR: {0}")]
    Write(#[source] io::Error),
    /// `restore` was given a destination that already exists.
    #[error("restore destination {path:?} already exists")]
    DestinationExists {
        /// The destination.
        path: PathBuf,
    },
    /// Creating something while restoring failed.
    #[error("restoring {path:?}: {source}")]
    Restore {
        /// What was being created.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// While restoring, the parent of an entry was not a directory created by the restore.
    #[error("restoring {path:?}: parent is not a directory created by this restore")]
    UnsafeParent {
        /// The entry being created.
        path: PathBuf,
    },
}
