//! `rocmx store add-fixed [--recursive] HASH-ALGO FILE…`, as `nix-store --add-fixed`.
//!
//! Each FILE is added as a fixed-output object named after its file name: the path a
//! fixed-output derivation of that name with `outputHashAlgo = HASH-ALGO`,
//! `outputHashMode = "flat"` (or `"recursive"` with `--recursive`) and the file's hash
//! gets. A later `builtin:fetchurl` of the same content (same name, same hash) therefore
//! finds its output valid and downloads nothing: this is how a source no mirror serves is
//! supplied by hand.
//!
//! Output: one logical store path (`/rocmx/store/<hash>-<name>`) per FILE on standard
//! output, in order. Errors (`error: …`, exit 1): a missing file, a directory without
//! `--recursive`, a name that cannot name a store path. An unknown HASH-ALGO is a usage
//! error (exit 2).

use std::io::{self, Write};
use std::path::{Component, Path, PathBuf};

use clap::Args;
use rocmx_store::{HashAlgo, IngestionMethod};

use crate::cmd::common::{open_store, parse_fixed_algo, store_msg};
use crate::cmd::fail::Fail;
use crate::cmd::StoreOpt;

#[derive(Args, Debug)]
pub struct AddFixedArgs {
    /// Hash the NAR serialisation (outputHashMode = "recursive"): files and trees.
    /// Without it the file's bytes are hashed (flat), and only regular files are accepted.
    #[arg(long, short = 'r')]
    pub recursive: bool,
    /// sha256, sha512, sha1 or blake3.
    #[arg(value_name = "HASH-ALGO", value_parser = parse_fixed_algo)]
    pub algo: HashAlgo,
    /// Files (or, with --recursive, trees) to add; each is named after its file name.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
}

pub fn add_fixed(a: AddFixedArgs, s: &StoreOpt) -> i32 {
    Fail::exit_code(add_fixed_inner(&a, s))
}

fn add_fixed_inner(a: &AddFixedArgs, s: &StoreOpt) -> Result<(), Fail> {
    // Every argument is checked before anything is added.
    let mut todo = Vec::with_capacity(a.files.len());
    for p in &a.files {
        let name = file_name(p)?;
        check_kind(p, a.recursive)?;
        todo.push((p, name));
    }
    let store = open_store(s)?;
    let method = if a.recursive {
        IngestionMethod::Nar
    } else {
        IngestionMethod::Flat
    };
    let mut out = io::stdout().lock();
    for (p, name) in todo {
        let (sp, _) = store.add_fixed(p, &name, method, a.algo).map_err(|e| {
            Fail::Msg(format!(
                "adding '{}' to the store: {}",
                p.display(),
                store_msg(&e)
            ))
        })?;
        writeln!(out, "{sp}")
            .and_then(|()| out.flush())
            .map_err(|e| Fail::write(&e))?;
    }
    Ok(())
}

/// Refuses what the chosen method cannot store: a missing path, and without `recursive`
/// anything but a regular file (symlinks to one are followed).
fn check_kind(p: &Path, recursive: bool) -> Result<(), Fail> {
    let shown = p.display();
    let m = if recursive {
        std::fs::symlink_metadata(p)
    } else {
        std::fs::metadata(p)
    };
    let m = m.map_err(|e| Fail::Msg(format!("cannot add '{shown}': {e}")))?;
    if !recursive && !m.is_file() {
        let what = if m.is_dir() {
            "a directory"
        } else {
            "not a regular file"
        };
        return Err(Fail::Msg(format!(
            "cannot add '{shown}' flat: it is {what}; pass --recursive to add it as a tree \
             (hashed as a NAR, outputHashMode = \"recursive\")"
        )));
    }
    Ok(())
}

/// The name a path is stored under: its file name after resolving `.` and `..` (the final
/// symlink is not followed), checked as a store path name.
pub(super) fn file_name(p: &Path) -> Result<String, Fail> {
    let abs = std::path::absolute(p).map_err(|e| Fail::Msg(format!("'{}': {e}", p.display())))?;
    let mut clean = PathBuf::new();
    for c in abs.components() {
        match c {
            Component::ParentDir => {
                clean.pop();
            }
            Component::CurDir => {}
            other => clean.push(other),
        }
    }
    let name = clean.file_name().and_then(|n| n.to_str()).ok_or_else(|| {
        Fail::Msg(format!(
            "cannot add '{}': it has no UTF-8 file name to name the store path after",
            p.display()
        ))
    })?;
    rocmx_store::path::validate_name(name).map_err(|e| {
        Fail::Msg(format!(
            "cannot add '{}': {e}; rename it (the store path is named after the file)",
            p.display()
        ))
    })?;
    Ok(name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(
            file_name(Path::new("/a/b/c.tar.gz")).ok(),
            Some("c.tar.gz".into())
        );
        assert_eq!(file_name(Path::new("/a/b/../c")).ok(), Some("c".into()));
        assert!(file_name(Path::new("/a/b c")).is_err());
        assert!(file_name(Path::new("/")).is_err());
    }
}
