//! Checking that the database and the store directory agree, and repairing what can be.
//!
//! Owns: [`LocalStore::verify`], [`Problem`] (each kind of inconsistency, named by its
//! `Display`) and [`VerifyReport`].
//!
//! # What is checked
//!
//! - every valid path has content at its real path ([`Problem::MissingContent`]);
//! - every reference names a valid path ([`Problem::DanglingReference`]; only possible if
//!   the database was edited by hand, since foreign keys forbid it);
//! - every entry of the store directory is a valid path or a scratch directory in use
//!   ([`Problem::Unregistered`], [`Problem::LeftoverTemp`]: what a crash leaves; not
//!   damage, see [`Problem::is_damage`]);
//! - with `check_contents`: every valid path's NAR hash and size match the database
//!   ([`Problem::HashMismatch`], [`Problem::Unreadable`]) and every file has the canonical
//!   mode and mtime ([`Problem::BadMetadata`]).
//!
//! # What `repair` does
//!
//! - leftovers are removed;
//! - a path whose content is missing, or that has a dangling reference, is invalidated,
//!   together with every valid path that refers to it directly or not (their closures are
//!   no longer complete: [`Problem::BrokenClosure`]); the content of those referrers is
//!   removed too, so that the database and the directory agree again;
//! - modes and mtimes are reset to the canonical ones;
//! - hash mismatches are only reported: there is no other copy to restore the content
//!   from, and invalidating the path would silently invalidate its referrers too. Delete
//!   it and its referrers (`rocmx store delete`), then add or build them again.
//!
//! Must not: delete or change anything without `repair`, or touch a valid path whose
//! content is intact.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::fs;
use std::path::PathBuf;

use super::db;
use super::error::StoreError;
use super::fsutil::{self, EXEC_MODE, MTIME};
use super::ingest::{self, Kind};
use super::{lock, LocalStore};
use crate::hash::Hash;
use crate::path::StorePath;

/// One inconsistency found by [`LocalStore::verify`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// A valid path without content.
    MissingContent {
        /// The path.
        path: StorePath,
        /// Where its content should be.
        real: PathBuf,
    },
    /// A valid path referring to a path that is not valid.
    DanglingReference {
        /// The referrer.
        path: StorePath,
        /// What it refers to (a path or a row id).
        reference: String,
    },
    /// A valid path whose closure includes a path that has a problem making it invalid.
    BrokenClosure {
        /// The referrer.
        path: StorePath,
        /// The path it depends on.
        missing: StorePath,
    },
    /// A `<hash>-<name>` entry of the store directory that is not registered.
    Unregistered {
        /// The entry.
        entry: PathBuf,
    },
    /// A scratch directory that no running add holds.
    LeftoverTemp {
        /// The directory.
        dir: PathBuf,
    },
    /// Content whose NAR differs from the recorded one.
    HashMismatch {
        /// The path.
        path: StorePath,
        /// The recorded NAR hash.
        expected: Hash,
        /// The NAR hash of the content.
        actual: Hash,
        /// The recorded NAR size.
        expected_size: u64,
        /// The NAR size of the content.
        actual_size: u64,
    },
    /// Content that cannot be read as a NAR (a special file, a permission error…).
    Unreadable {
        /// The path.
        path: StorePath,
        /// Why.
        error: String,
    },
    /// A file with a non-canonical mode or mtime.
    BadMetadata {
        /// The path it belongs to.
        path: StorePath,
        /// The file.
        file: PathBuf,
        /// What is wrong, e.g. `mode 0644, expected 0444`.
        what: String,
    },
}

impl Problem {
    /// Whether this is damage (a valid path that is not intact, or a database
    /// inconsistency), as opposed to leftovers of an interrupted add, which are harmless
    /// and expected after a crash.
    pub fn is_damage(&self) -> bool {
        !matches!(
            self,
            Problem::Unregistered { .. } | Problem::LeftoverTemp { .. }
        )
    }

    /// The valid path concerned, if any.
    pub fn store_path(&self) -> Option<&StorePath> {
        match self {
            Problem::MissingContent { path, .. }
            | Problem::DanglingReference { path, .. }
            | Problem::BrokenClosure { path, .. }
            | Problem::HashMismatch { path, .. }
            | Problem::Unreadable { path, .. }
            | Problem::BadMetadata { path, .. } => Some(path),
            Problem::Unregistered { .. } | Problem::LeftoverTemp { .. } => None,
        }
    }

    /// Whether `repair` fixes this kind of problem.
    pub fn is_repairable(&self) -> bool {
        !matches!(
            self,
            Problem::HashMismatch { .. } | Problem::Unreadable { .. }
        )
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::MissingContent { path, real } => {
                write!(
                    f,
                    "missing content: {path} is valid but {real:?} does not exist"
                )
            }
            Problem::DanglingReference { path, reference } => {
                write!(
                    f,
                    "dangling reference: {path} refers to {reference}, which is not valid"
                )
            }
            Problem::BrokenClosure { path, missing } => {
                write!(
                    f,
                    "broken closure: {path} depends on {missing}, which is damaged"
                )
            }
            Problem::Unregistered { entry } => {
                write!(
                    f,
                    "unregistered entry in store: {entry:?} (left by an interrupted add)"
                )
            }
            Problem::LeftoverTemp { dir } => {
                write!(f, "leftover scratch directory in store: {dir:?}")
            }
            Problem::HashMismatch {
                path,
                expected,
                actual,
                expected_size,
                actual_size,
            } => write!(
                f,
                "hash mismatch: {path} has NAR hash {} ({actual_size} bytes), recorded {} \
                 ({expected_size} bytes)",
                actual.to_sri(),
                expected.to_sri()
            ),
            Problem::Unreadable { path, error } => {
                write!(f, "unreadable content: {path}: {error}")
            }
            Problem::BadMetadata { path, file, what } => {
                write!(f, "bad permissions or times: {file:?} in {path}: {what}")
            }
        }
    }
}

/// What [`LocalStore::verify`] found and did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VerifyReport {
    /// Every problem found, before repair.
    pub problems: Vec<Problem>,
    /// Valid paths that repair changed: invalidated (missing content, broken closure) or
    /// whose metadata was reset.
    pub repaired: Vec<StorePath>,
    /// Leftover entries that repair removed from the store directory.
    pub removed: Vec<PathBuf>,
}

impl VerifyReport {
    /// Problems that are damage and were not repaired: what should make `verify` fail.
    pub fn remaining_damage(&self) -> Vec<&Problem> {
        self.problems
            .iter()
            .filter(|p| p.is_damage())
            .filter(|p| match p.store_path() {
                Some(sp) if p.is_repairable() => !self.repaired.contains(sp),
                _ => true,
            })
            .collect()
    }
}

impl LocalStore {
    /// Checks the store (see the module documentation of `verify` for what is checked and
    /// what `repair` does). Holds the GC lock shared, or exclusively when repairing.
    pub fn verify(&self, check_contents: bool, repair: bool) -> Result<VerifyReport, StoreError> {
        let _gc = lock::gc_lock(&self.state_dir, repair)?;
        let mut report = VerifyReport::default();
        let valid = self.with_db(|c, d| db::all_valid(c, d))?;
        let valid_set: BTreeSet<StorePath> = valid.iter().map(|(p, _, _)| p.clone()).collect();
        let mut broken: Vec<StorePath> = Vec::new();
        let mut bad_meta: BTreeMap<StorePath, Vec<(PathBuf, Kind, u32)>> = BTreeMap::new();

        for (p, hash, size) in &valid {
            let real = self.real_path(p);
            if fs::symlink_metadata(&real).is_err() {
                report.problems.push(Problem::MissingContent {
                    path: p.clone(),
                    real,
                });
                broken.push(p.clone());
                continue;
            }
            if !check_contents {
                continue;
            }
            let scanned = match ingest::scan(&real) {
                Ok(s) => s,
                Err(e) => {
                    report.problems.push(Problem::Unreadable {
                        path: p.clone(),
                        error: e.to_string(),
                    });
                    continue;
                }
            };
            if scanned.nar_hash != *hash || scanned.nar_size != *size {
                report.problems.push(Problem::HashMismatch {
                    path: p.clone(),
                    expected: *hash,
                    actual: scanned.nar_hash,
                    expected_size: *size,
                    actual_size: scanned.nar_size,
                });
            }
            for e in &scanned.entries {
                let mode = e.mode & 0o7777;
                let want = match e.kind {
                    Kind::Directory => Some(EXEC_MODE),
                    Kind::Regular { .. } => Some(fsutil::canonical_file_mode(e.mode)),
                    Kind::Symlink(_) => None,
                };
                let mut what = Vec::new();
                if let Some(w) = want.filter(|w| *w != mode) {
                    what.push(format!("mode {mode:04o}, expected {w:04o}"));
                }
                if e.mtime != MTIME {
                    what.push(format!("mtime {}, expected {MTIME}", e.mtime));
                }
                if !what.is_empty() {
                    let file = ingest::join(&real, &e.rel);
                    report.problems.push(Problem::BadMetadata {
                        path: p.clone(),
                        file: file.clone(),
                        what: what.join(", "),
                    });
                    bad_meta.entry(p.clone()).or_default().push((
                        file,
                        e.kind.clone(),
                        want.unwrap_or(0),
                    ));
                }
            }
        }
        for (p, reference) in self.with_db(|c, d| db::dangling_refs(c, d))? {
            report.problems.push(Problem::DanglingReference {
                path: p.clone(),
                reference,
            });
            broken.push(p);
        }
        // Everything that depends on a broken path is broken too.
        let (_, refs) = self.graph()?;
        let mut referrers: BTreeMap<&StorePath, Vec<&StorePath>> = BTreeMap::new();
        for (a, bs) in &refs {
            for b in bs.iter().filter(|b| *b != a) {
                referrers.entry(b).or_default().push(a);
            }
        }
        let mut invalidate: BTreeSet<StorePath> = broken.iter().cloned().collect();
        let mut todo: Vec<(StorePath, StorePath)> =
            broken.iter().map(|b| (b.clone(), b.clone())).collect();
        while let Some((p, cause)) = todo.pop() {
            for r in referrers.get(&p).into_iter().flatten() {
                if invalidate.insert((*r).clone()) {
                    report.problems.push(Problem::BrokenClosure {
                        path: (*r).clone(),
                        missing: cause.clone(),
                    });
                    todo.push(((*r).clone(), cause.clone()));
                }
            }
        }
        let leftovers = self.unregistered_entries(&valid_set)?;
        for (entry, sp) in &leftovers {
            report.problems.push(match sp {
                Some(_) => Problem::Unregistered {
                    entry: entry.clone(),
                },
                None => Problem::LeftoverTemp { dir: entry.clone() },
            });
        }
        if !repair {
            return Ok(report);
        }

        for (entry, _) in leftovers {
            fsutil::remove_tree(&entry)?;
            report.removed.push(entry);
        }
        if !invalidate.is_empty() {
            let batch: Vec<StorePath> = invalidate.iter().cloned().collect();
            self.with_tx(|c, d| db::invalidate_all(c, d, &batch))?;
            for p in &batch {
                fsutil::remove_tree(&self.real_path(p))?;
            }
            report.repaired.extend(batch);
        }
        for (p, files) in bad_meta {
            if invalidate.contains(&p) {
                continue;
            }
            // Files first, directories (deepest first) last, so their mtimes stick.
            for (file, kind, mode) in files.iter().rev() {
                if *kind != Kind::Directory {
                    if !matches!(kind, Kind::Symlink(_)) {
                        fsutil::chmod(file, *mode)?;
                    }
                    fsutil::set_canonical_times(file)?;
                }
            }
            for (file, kind, mode) in files.iter().rev() {
                if *kind == Kind::Directory {
                    fsutil::chmod(file, *mode)?;
                    fsutil::set_canonical_times(file)?;
                }
            }
            report.repaired.push(p);
        }
        report.repaired.sort();
        report.repaired.dedup();
        Ok(report)
    }
}
