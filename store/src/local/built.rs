//! Build results: placed at their final names first, registered afterwards, in batches.
//!
//! Owns: the two halves of registering a build's outputs. [`LocalStore::place_built`]
//! takes the GC lock (shared) and the outputs' path locks, and renames each output to
//! its final name (an output whose path is valid already is left alone, its scratch
//! copy removed); the [`Placed`] it gives holds those locks. [`LocalStore::commit_built`]
//! then makes a batch of placed builds durable — one `syncfs` for the whole batch, where
//! a build each took one — and registers each build's outputs, with their realisations
//! and derivation outputs ([`BuiltOutput`]), in one write transaction per build, in the
//! order given.
//!
//! Between the two halves the paths exist at their names but are not valid. A scheduler
//! may hand them to the builds that depend on them already, as long as it commits in
//! the order it placed: a dependent's commit then comes after its inputs', so a
//! registered path's references are always registered (a reference whose commit failed
//! makes the dependent's commit fail too: [`StoreError::InvalidReference`]). A crash in
//! between leaves unregistered entries at the final names, which the next registration
//! of each path replaces; a [`Placed`] dropped without a commit removes what it placed.
//!
//! Must not: register a path whose content is not durable, or whose references are not
//! valid; leave placed content behind when its registration fails.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::add::{ca_string, Durable};
use super::db::{self, NewPath};
use super::error::StoreError;
use super::lock::{self, FileLock};
use super::{fsutil, LocalStore};
use crate::hash::{Hash, HashAlgo};
use crate::path::{ContentAddress, StorePath};

/// A build's output, as [`LocalStore::register_built`] records it together with
/// the path: the derivation's output `output` is the path and, when `realise`, so is
/// the realisation of `output` under `drv_hash` (unless one points elsewhere already,
/// which is kept: a rebuild that gave other bytes does not replace the first result).
#[derive(Debug, Clone, Copy)]
pub struct BuiltOutput<'a> {
    /// The derivation (valid), also the path's deriver.
    pub drv: &'a StorePath,
    /// The key of its realisations (its resolved hash).
    pub drv_hash: &'a str,
    pub output: &'a str,
    /// False for a fixed output, which has no realisation.
    pub realise: bool,
}

/// [`BuiltOutput`], owned: kept by a [`Placed`] until its commit.
#[derive(Debug)]
struct BuiltRecord {
    drv: StorePath,
    drv_hash: String,
    output: String,
    realise: bool,
}

impl BuiltRecord {
    fn borrowed(&self) -> BuiltOutput<'_> {
        BuiltOutput {
            drv: &self.drv,
            drv_hash: &self.drv_hash,
            output: &self.output,
            realise: self.realise,
        }
    }
}

/// One output of a build, for [`LocalStore::place_built`].
#[derive(Debug, Clone, Copy)]
pub struct BuiltPath<'a> {
    /// The normalised tree the build left: renamed when it is on the store's filesystem,
    /// copied otherwise. `None`: the caller found the path valid already and kept
    /// nothing to place (a self-referencing output is then not rewritten, so its tree
    /// must not be registered): only its records are written, and if the path is no
    /// longer valid by then (collected meanwhile), placing fails.
    pub scratch: Option<&'a Path>,
    /// Where it goes.
    pub path: &'a StorePath,
    /// Its references: valid by the time it is committed, or `path` itself.
    pub refs: &'a BTreeSet<StorePath>,
    /// BLAKE3 of its NAR (trusted) and the NAR's size.
    pub nar_hash: Hash,
    pub nar_size: u64,
    pub deriver: Option<&'a StorePath>,
    pub ca: Option<&'a ContentAddress>,
    /// The records written with it, when it is a derivation's output (`drv` is then
    /// its deriver).
    pub built: Option<BuiltOutput<'a>>,
}

/// What became of one output at [`LocalStore::place_built`].
#[derive(Debug)]
enum State {
    /// Valid already: only the records of `built` are written at the commit.
    Valid,
    /// Renamed to `real`, which the commit makes durable as `durable` says, then
    /// registers.
    Placed { real: PathBuf, durable: Durable },
}

#[derive(Debug)]
struct PlacedPath {
    path: StorePath,
    refs: BTreeSet<StorePath>,
    nar_hash: Hash,
    nar_size: u64,
    deriver: Option<StorePath>,
    ca: Option<String>,
    built: Option<BuiltRecord>,
    state: State,
}

/// A build's outputs at their final names, not registered yet (see the module
/// documentation): hand it to [`LocalStore::commit_built`]. It holds the GC lock
/// (shared) and the outputs' path locks until then; dropped without a commit, it
/// removes what it placed.
#[derive(Debug)]
#[must_use = "placed outputs are registered only by `LocalStore::commit_built`"]
pub struct Placed {
    items: Vec<PlacedPath>,
    committed: bool,
    // Dropped after `Drop::drop` has removed uncommitted content.
    _locks: Vec<FileLock>,
    _gc: FileLock,
}

impl Placed {
    /// The outputs' paths, in the order they were given.
    pub fn paths(&self) -> impl Iterator<Item = &StorePath> {
        self.items.iter().map(|i| &i.path)
    }

    /// Each output's path with its references: what a dependent's closure is made of
    /// until the commit.
    pub fn references(&self) -> impl Iterator<Item = (&StorePath, &BTreeSet<StorePath>)> {
        self.items.iter().map(|i| (&i.path, &i.refs))
    }
}

impl Drop for Placed {
    fn drop(&mut self) {
        if self.committed {
            return;
        }
        for i in &self.items {
            if let State::Placed { real, .. } = &i.state {
                let _ = fsutil::remove_tree(real);
            }
        }
    }
}

impl LocalStore {
    /// Moves each output of one build to its final name (see the module documentation);
    /// nothing is registered until [`Self::commit_built`]. Outputs whose paths are valid
    /// already keep their content: their scratch copies are removed.
    pub fn place_built(&self, outputs: &[BuiltPath<'_>]) -> Result<Placed, StoreError> {
        for o in outputs {
            if o.nar_hash.algo() != HashAlgo::Blake3 {
                return Err(StoreError::NotBlake3 {
                    what: "the NAR hash of a build result",
                    algo: o.nar_hash.algo(),
                });
            }
            if let Some(scratch) = o.scratch {
                if std::fs::symlink_metadata(scratch).is_err() {
                    return Err(StoreError::MissingScratch {
                        path: o.path.clone(),
                        scratch: scratch.to_path_buf(),
                    });
                }
            }
        }
        let gc = lock::gc_lock(&self.state_dir, false)?;
        // All at once (each lock file once, in order): two outputs in one lock file
        // would otherwise wait for each other.
        let paths: Vec<&StorePath> = outputs.iter().map(|o| o.path).collect();
        let locks = lock::path_locks(&self.state_dir.join("locks"), &paths)?;
        let mut placed = Placed {
            items: Vec::with_capacity(outputs.len()),
            committed: false,
            _locks: locks,
            _gc: gc,
        };
        for o in outputs {
            let state = if self.valid_and_rooted(o.path)? {
                if let Some(scratch) = o.scratch {
                    fsutil::remove_tree(scratch)?;
                }
                State::Valid
            } else {
                let Some(scratch) = o.scratch else {
                    return Err(self.not_valid(o.path));
                };
                let real = self.real_path(o.path);
                // Not valid, and we hold its lock: whatever is there is a crash leftover.
                fsutil::remove_tree(&real)?;
                let durable = self.place_premade(scratch, &real)?;
                State::Placed { real, durable }
            };
            placed.items.push(PlacedPath {
                path: o.path.clone(),
                refs: o.refs.clone(),
                nar_hash: o.nar_hash,
                nar_size: o.nar_size,
                deriver: o.deriver.cloned(),
                ca: o.ca.map(ca_string),
                built: o.built.map(|b| BuiltRecord {
                    drv: b.drv.clone(),
                    drv_hash: b.drv_hash.to_string(),
                    output: b.output.to_string(),
                    realise: b.realise,
                }),
                state,
            });
            // Pushed first: if this fails, dropping `placed` removes it.
            if let Some(PlacedPath {
                state: State::Placed { real, .. },
                ..
            }) = placed.items.last()
            {
                self.give_to_owner(real)?;
            }
        }
        Ok(placed)
    }

    /// Makes a batch of placed builds durable (one `syncfs` covers every output that
    /// needs one) and registers each build's outputs with their records, one write
    /// transaction per build, in the order given. One result per build: a build whose
    /// registration fails has its placed outputs removed, and the others go on (a later
    /// build that refers to them then fails too: its reference is not valid).
    pub fn commit_built(&self, batch: Vec<Placed>) -> Vec<Result<(), StoreError>> {
        let needs_syncfs = batch.iter().flat_map(|p| &p.items).any(|i| {
            matches!(
                i.state,
                State::Placed {
                    durable: Durable::Filesystem,
                    ..
                }
            )
        });
        let synced = if needs_syncfs {
            self.make_durable(&self.store_dir, Durable::Filesystem)
        } else {
            Ok(())
        };
        batch
            .into_iter()
            .map(|p| match &synced {
                Ok(()) => self.commit_one(p),
                // `p` is dropped: what it placed is removed. Every build of the batch
                // gets the sync's error (its errno; the message is the same).
                Err(e) => Err(match e {
                    StoreError::Io {
                        action,
                        path,
                        source,
                    } => StoreError::Io {
                        action,
                        path: path.clone(),
                        source: match source.raw_os_error() {
                            Some(code) => std::io::Error::from_raw_os_error(code),
                            None => std::io::Error::new(source.kind(), source.to_string()),
                        },
                    },
                    other => StoreError::io("syncing the filesystem of", &self.store_dir)(
                        std::io::Error::other(other.to_string()),
                    ),
                }),
            })
            .collect()
    }

    fn commit_one(&self, mut p: Placed) -> Result<(), StoreError> {
        for i in &p.items {
            if let State::Placed {
                real,
                durable: durable @ Durable::DirEntry { .. },
            } = &i.state
            {
                self.make_durable(real, *durable)?;
            }
        }
        self.with_tx(|c, d| {
            for i in &p.items {
                if let State::Placed { .. } = i.state {
                    db::register(
                        c,
                        d,
                        &NewPath {
                            path: &i.path,
                            nar_hash: &i.nar_hash,
                            nar_size: i.nar_size,
                            deriver: i.deriver.as_ref(),
                            ca: i.ca.as_deref(),
                            refs: &i.refs,
                        },
                    )?;
                }
                if let Some(b) = &i.built {
                    self.record_output_in(c, d, &b.borrowed(), &i.path, &[])?;
                }
            }
            Ok(())
        })?;
        p.committed = true;
        for i in &p.items {
            self.temp_roots.add(&i.path)?;
        }
        Ok(())
    }

    /// Places and commits one output at once (see [`Self::place_built`] and
    /// [`Self::commit_built`]): moved to its final name (renamed when on the store's
    /// filesystem, copied otherwise) and registered with its references (valid, or the
    /// path itself), its NAR hash and size (trusted), and its records when it is a
    /// derivation's output, in one transaction. A path valid already keeps its content:
    /// the scratch copy is removed and only the records are written.
    pub fn register_built(&self, out: BuiltPath<'_>) -> Result<(), StoreError> {
        let placed = self.place_built(&[out])?;
        self.commit_built(vec![placed])
            .pop()
            .expect("one result per build")
    }
}
