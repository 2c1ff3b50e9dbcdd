//! GC roots, garbage collection and explicit deletion.
//!
//! Owns: roots (symlinks under `<state>/gcroots/`, followed to a store path; indirect
//! roots `<state>/gcroots/auto/<hash of link>` → a user's `result` link → store path),
//! [`LocalStore::gc`] (delete what no root, direct or indirect, and no live temporary
//! root reaches through references; remove crash leftovers) and [`LocalStore::delete`]
//! (delete given paths, refusing referenced or rooted ones).
//!
//! Besides references, liveness follows two more edges, as Nix's settings of the same
//! names do ([`LocalStore::gc_keeping`]): with `keep-derivations` (the default) a live
//! path keeps its recorded deriver (the `.drv` that built it, if valid) and so the
//! deriver's closure, so that `rocmx derivation show result` still works after a
//! collection; with `keep-outputs` (off by default) a live derivation keeps its recorded
//! outputs.
//!
//! Must not: delete a path reachable from a root or from a live handle's temporary roots,
//! or delete content before its row (rows go first, in a transaction, so a crash leaves
//! at worst an unregistered entry, never a valid path without content). Both run under the
//! exclusive GC lock, so no add is in progress meanwhile.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::db;
use super::error::StoreError;
use super::fsutil::{self, TMP_PREFIX};
use super::{lock, LocalStore};
use crate::nixbase32;
use crate::path::StorePath;

/// Each valid path's references.
pub(crate) type RefGraph = BTreeMap<StorePath, BTreeSet<StorePath>>;

/// What [`LocalStore::gc`] may do.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GcOptions {
    /// Only report what would be deleted.
    pub dry_run: bool,
    /// Stop once at least this many bytes are freed.
    pub max_freed: Option<u64>,
}

/// What [`LocalStore::gc`] deleted (or would delete, in a dry run).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GcReport {
    /// Each deleted path with the bytes its content occupied, in deletion order.
    pub deleted: Vec<(StorePath, u64)>,
    /// Crash leftovers removed from the store directory (scratch directories,
    /// unregistered entries), with their bytes.
    pub leftovers: Vec<(PathBuf, u64)>,
    /// Total bytes freed, leftovers included.
    pub freed: u64,
}

/// The name of the indirect-root entry for `link`: nix32 of the first 160 bits of the
/// BLAKE3 of the link's absolute path.
fn auto_name(link: &Path) -> String {
    let d = blake3::hash(link.as_os_str().as_bytes());
    nixbase32::encode(&d.as_bytes()[..20])
}

/// Replaces (or creates) the symlink `link` → `target` atomically.
fn replace_symlink(target: &Path, link: &Path) -> Result<(), StoreError> {
    let tmp = link.with_file_name(format!(
        ".{}.rocmx-tmp-{}",
        link.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        std::process::id()
    ));
    let _ = fs::remove_file(&tmp);
    std::os::unix::fs::symlink(target, &tmp).map_err(StoreError::io("creating symlink", &tmp))?;
    fs::rename(&tmp, link).map_err(|e| {
        let _ = fs::remove_file(&tmp);
        StoreError::io("creating symlink", link)(e)
    })
}

impl LocalStore {
    fn gcroots(&self) -> PathBuf {
        self.state_dir.join("gcroots")
    }

    /// Makes `link` (typically `./result`) a symlink to `target`'s real path and registers
    /// it as an indirect root: `target` lives as long as `link` points to it. An existing
    /// symlink at `link` is replaced; anything else there is an error.
    pub fn add_root(&self, link: &Path, target: &StorePath) -> Result<(), StoreError> {
        let mut abs = std::path::absolute(link).map_err(StoreError::io("resolving", link))?;
        if let (Some(parent), Some(name)) = (abs.parent(), abs.file_name()) {
            if let Ok(p) = fs::canonicalize(parent) {
                abs = p.join(name);
            }
        }
        match fs::symlink_metadata(&abs) {
            Ok(m) if !m.file_type().is_symlink() => {
                return Err(StoreError::RootExists { link: abs })
            }
            _ => {}
        }
        let _gc = lock::gc_lock(&self.state_dir, false)?;
        if !self.is_valid(target)? {
            return Err(StoreError::NotValid {
                path: target.clone(),
                root: self.root.clone(),
            });
        }
        let auto = self.gcroots().join("auto").join(auto_name(&abs));
        replace_symlink(&abs, &auto)?;
        replace_symlink(&self.real_path(target), &abs)
    }

    /// Every root: the symlinks under `gcroots/` that lead to a store path (keyed by the
    /// symlink), and the live indirect roots (keyed by the user's link). Dangling ones are
    /// left out.
    pub fn roots(&self) -> Result<BTreeMap<PathBuf, StorePath>, StoreError> {
        self.find_roots(false)
    }

    /// [`LocalStore::roots`], removing dangling indirect-root entries when `clean`.
    fn find_roots(&self, clean: bool) -> Result<BTreeMap<PathBuf, StorePath>, StoreError> {
        let mut out = BTreeMap::new();
        let base = self.gcroots();
        let auto = base.join("auto");
        let mut stack = vec![base];
        while let Some(dir) = stack.pop() {
            let rd = match fs::read_dir(&dir) {
                Ok(rd) => rd,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(StoreError::io("listing", &dir)(e)),
            };
            for entry in rd {
                let entry = entry.map_err(StoreError::io("listing", &dir))?;
                let path = entry.path();
                let ft = entry
                    .file_type()
                    .map_err(StoreError::io("reading", &path))?;
                if ft.is_dir() {
                    stack.push(path);
                } else if ft.is_symlink() && dir == auto {
                    let user_link =
                        fs::read_link(&path).map_err(StoreError::io("reading", &path))?;
                    let live = fs::symlink_metadata(&user_link)
                        .map(|m| m.file_type().is_symlink())
                        .unwrap_or(false);
                    match self.to_store_path(&user_link) {
                        Ok((sp, _)) if live => {
                            out.insert(user_link, sp);
                        }
                        _ if clean => {
                            let _ = fs::remove_file(&path);
                        }
                        _ => {}
                    }
                } else if ft.is_symlink() {
                    if let Ok((sp, _)) = self.to_store_path(&path) {
                        out.insert(path, sp);
                    }
                }
            }
        }
        Ok(out)
    }

    /// The paths that must survive: closure of the roots and of the live temporary roots
    /// of other handles, through references and the `keep` edges. The caller holds the
    /// GC lock exclusively.
    fn live_set(
        &self,
        clean: bool,
        valid: &BTreeSet<StorePath>,
        refs: &RefGraph,
        keep: &RefGraph,
    ) -> Result<BTreeSet<StorePath>, StoreError> {
        let mut todo: Vec<StorePath> = self.find_roots(clean)?.into_values().collect();
        todo.extend(self.temp_roots.others()?.into_iter().map(|(p, _)| p));
        Ok(reachable(todo, valid, refs, keep))
    }

    /// The edges besides references that keep paths alive: path → its deriver when
    /// `keep_derivations`, derivation → its recorded outputs when `keep_outputs`. Targets
    /// that are not valid are harmless (the walk skips them).
    fn keep_edges(
        &self,
        keep_derivations: bool,
        keep_outputs: bool,
    ) -> Result<RefGraph, StoreError> {
        let mut edges = RefGraph::new();
        if !keep_derivations && !keep_outputs {
            return Ok(edges);
        }
        self.with_read(|c, d| {
            if keep_derivations {
                for (p, drv) in db::all_derivers(c, d)? {
                    edges.entry(p).or_default().insert(drv);
                }
            }
            if keep_outputs {
                for (drv, out) in db::all_derivation_outputs(c, d)? {
                    edges.entry(drv).or_default().insert(out);
                }
            }
            Ok(())
        })?;
        Ok(edges)
    }

    /// The valid paths and their references, from the database.
    pub(crate) fn graph(&self) -> Result<(BTreeSet<StorePath>, RefGraph), StoreError> {
        self.with_db(|c, d| {
            let valid = db::all_valid(c, d)?
                .into_iter()
                .map(|(p, _, _)| p)
                .collect();
            let mut refs: BTreeMap<StorePath, BTreeSet<StorePath>> = BTreeMap::new();
            for (a, b) in db::all_refs(c, d)? {
                refs.entry(a).or_default().insert(b);
            }
            Ok((valid, refs))
        })
    }

    /// Deletes every valid path that no root reaches (nor a live handle's temporary root),
    /// referrers before their references, stopping once `max_freed` bytes are freed; also
    /// removes crash leftovers from the store directory. A dry run only reports. Derivers
    /// of live paths are kept (Nix's defaults: `keep-derivations = true`, `keep-outputs =
    /// false`); see [`LocalStore::gc_keeping`].
    pub fn gc(&self, opts: &GcOptions) -> Result<GcReport, StoreError> {
        self.gc_keeping(opts, true, false)
    }

    /// [`LocalStore::gc`] with Nix's two settings: `keep_derivations` keeps the recorded
    /// deriver of every live path (and, through its references, the deriver's closure:
    /// input derivations and sources); `keep_outputs` keeps the recorded outputs of every
    /// live derivation (and their closures). Both apply transitively.
    pub fn gc_keeping(
        &self,
        opts: &GcOptions,
        keep_derivations: bool,
        keep_outputs: bool,
    ) -> Result<GcReport, StoreError> {
        let _gc = lock::gc_lock(&self.state_dir, true)?;
        let mut report = GcReport::default();
        let enough = |r: &GcReport| opts.max_freed.is_some_and(|m| r.freed >= m);
        let (valid, refs) = self.graph()?;
        // Leftovers first: they are garbage whatever the roots say.
        for (entry, _) in self.unregistered_entries(&valid)? {
            if enough(&report) {
                return Ok(report);
            }
            let bytes = fsutil::disk_usage(&entry);
            if !opts.dry_run {
                fsutil::remove_tree(&entry)?;
            }
            report.freed += bytes;
            report.leftovers.push((entry, bytes));
        }
        let keep = self.keep_edges(keep_derivations, keep_outputs)?;
        let live = self.live_set(!opts.dry_run, &valid, &refs, &keep)?;
        let dead: BTreeSet<StorePath> = valid.difference(&live).cloned().collect();
        for batch in deletion_order(&dead, &refs) {
            if enough(&report) {
                break;
            }
            let sizes: Vec<u64> = batch
                .iter()
                .map(|p| fsutil::disk_usage(&self.real_path(p)))
                .collect();
            if !opts.dry_run {
                self.remove_paths(&batch)?;
            }
            for (p, bytes) in batch.into_iter().zip(sizes) {
                report.freed += bytes;
                report.deleted.push((p, bytes));
            }
        }
        Ok(report)
    }

    /// Invalidates `batch` in one transaction, then removes its content (and the lock
    /// file an earlier version may have made for it; today's lock files are shared).
    fn remove_paths(&self, batch: &[StorePath]) -> Result<(), StoreError> {
        self.with_tx(|c, d| db::invalidate_all(c, d, batch))?;
        let locks = self.state_dir.join("locks");
        for p in batch {
            fsutil::remove_tree(&self.real_path(p))?;
            let _ = fs::remove_file(lock::legacy_path_lock_file(&locks, p));
        }
        Ok(())
    }

    /// Entries of the store directory that are not valid paths: scratch directories no
    /// live add holds, and unregistered `<hash>-<name>` entries whose lock is free. Each
    /// comes with the store path it would be, if it has that shape. Other names are left
    /// alone.
    pub(crate) fn unregistered_entries(
        &self,
        valid: &BTreeSet<StorePath>,
    ) -> Result<Vec<(PathBuf, Option<StorePath>)>, StoreError> {
        let mut out = Vec::new();
        let locks = self.state_dir.join("locks");
        let rd =
            fs::read_dir(&self.store_dir).map_err(StoreError::io("listing", &self.store_dir))?;
        for entry in rd {
            let entry = entry.map_err(StoreError::io("listing", &self.store_dir))?;
            let path = entry.path();
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if name.starts_with(TMP_PREFIX) {
                if !fsutil::temp_dir_in_use(&path) {
                    out.push((path, None));
                }
            } else if let Ok(sp) = StorePath::from_base_name(name) {
                if valid.contains(&sp) {
                    continue;
                }
                // An add in progress holds the path's lock between rename and commit.
                if lock::try_path_lock(&locks, &sp)?.is_some() && !self.is_valid(&sp)? {
                    out.push((path, Some(sp)));
                }
            }
        }
        out.sort();
        Ok(out)
    }

    /// [`LocalStore::delete_keeping`] with the default settings: keep-derivations on,
    /// keep-outputs off.
    pub fn delete(&self, paths: &[StorePath]) -> Result<u64, StoreError> {
        self.delete_keeping(paths, true, false)
    }

    /// Deletes `paths` (and returns the bytes freed), refusing — before deleting anything
    /// — if one is not valid, is referred to by a valid path outside `paths`, is a root,
    /// is a temporary root of a running process, or is kept alive as `gc` would keep it
    /// (the deriver of a live path with `keep_derivations`, an output of a live
    /// derivation with `keep_outputs`): `delete` never removes what `gc` would keep.
    pub fn delete_keeping(
        &self,
        paths: &[StorePath],
        keep_derivations: bool,
        keep_outputs: bool,
    ) -> Result<u64, StoreError> {
        let _gc = lock::gc_lock(&self.state_dir, true)?;
        let set: BTreeSet<StorePath> = paths.iter().cloned().collect();
        let roots = self.find_roots(false)?;
        let temp = self.temp_roots.others()?;
        let (valid, refs) = self.graph()?;
        for p in &set {
            if !self.is_valid(p)? {
                return Err(StoreError::NotValid {
                    path: p.clone(),
                    root: self.root.clone(),
                });
            }
            if let Some(r) = self.referrers(p)?.into_iter().find(|r| !set.contains(r)) {
                return Err(StoreError::Referenced {
                    path: p.clone(),
                    referrer: r,
                });
            }
            if let Some((link, _)) = roots.iter().find(|(_, t)| *t == p) {
                return Err(StoreError::Rooted {
                    path: p.clone(),
                    root: link.clone(),
                });
            }
            if let Some((_, file)) = temp.iter().find(|(t, _)| t == p) {
                return Err(StoreError::InUse {
                    path: p.clone(),
                    file: file.clone(),
                });
            }
        }
        // What no direct check caught but gc would still keep: a path reached from a live
        // path outside `paths` through a keep edge (path → deriver, derivation → output).
        let keep = self.keep_edges(keep_derivations, keep_outputs)?;
        if !keep.is_empty() {
            // From the roots and temporary roots read above, not read again.
            let todo = roots.values().chain(temp.iter().map(|(p, _)| p));
            let live = reachable(todo.cloned().collect(), &valid, &refs, &keep);
            for p in &set {
                if !live.contains(p) {
                    continue;
                }
                let by = keep
                    .iter()
                    .find(|(from, to)| {
                        to.contains(p) && live.contains(*from) && !set.contains(*from)
                    })
                    .map(|(from, _)| from.clone());
                if let Some(by) = by {
                    let setting = if p.is_derivation() {
                        "keep-derivations"
                    } else {
                        "keep-outputs"
                    };
                    return Err(StoreError::Kept {
                        path: p.clone(),
                        by,
                        setting,
                    });
                }
            }
        }
        let mut freed = 0;
        for batch in deletion_order(&set, &refs) {
            freed += batch
                .iter()
                .map(|p| fsutil::disk_usage(&self.real_path(p)))
                .sum::<u64>();
            self.remove_paths(&batch)?;
        }
        Ok(freed)
    }
}

/// The valid paths reachable from `todo` through references and keep edges.
fn reachable(
    mut todo: Vec<StorePath>,
    valid: &BTreeSet<StorePath>,
    refs: &RefGraph,
    keep: &RefGraph,
) -> BTreeSet<StorePath> {
    let mut live = BTreeSet::new();
    while let Some(p) = todo.pop() {
        if !valid.contains(&p) || !live.insert(p.clone()) {
            continue;
        }
        for edges in [refs, keep] {
            if let Some(rs) = edges.get(&p) {
                todo.extend(rs.iter().filter(|r| !live.contains(*r)).cloned());
            }
        }
    }
    live
}

/// Orders `dead` so that every path comes after all its referrers in `dead`: batches of
/// one path, except that paths on a reference cycle (impossible for content-addressed
/// paths, but the database does not forbid it) form one final batch.
fn deletion_order(
    dead: &BTreeSet<StorePath>,
    refs: &BTreeMap<StorePath, BTreeSet<StorePath>>,
) -> Vec<Vec<StorePath>> {
    // Number of referrers (other than itself) each dead path has among the dead.
    let mut pending: BTreeMap<&StorePath, usize> = dead.iter().map(|p| (p, 0)).collect();
    for p in dead {
        for r in refs.get(p).into_iter().flatten() {
            if r != p {
                if let Some(n) = pending.get_mut(r) {
                    *n += 1;
                }
            }
        }
    }
    let mut ready: Vec<&StorePath> = pending
        .iter()
        .filter(|(_, n)| **n == 0)
        .map(|(p, _)| *p)
        .collect();
    ready.reverse();
    let mut out = Vec::new();
    let mut done = BTreeSet::new();
    while let Some(p) = ready.pop() {
        done.insert(p);
        out.push(vec![p.clone()]);
        for r in refs.get(p).into_iter().flatten() {
            if r == p {
                continue;
            }
            if let Some(n) = pending.get_mut(r) {
                *n -= 1;
                if *n == 0 {
                    ready.push(r);
                }
            }
        }
    }
    let cyclic: Vec<StorePath> = dead.iter().filter(|p| !done.contains(p)).cloned().collect();
    if !cyclic.is_empty() {
        out.push(cyclic);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sp(c: char, name: &str) -> StorePath {
        format!("/rocmx/store/{}-{name}", c.to_string().repeat(32))
            .parse()
            .expect("path")
    }

    #[test]
    fn deletion_order_puts_referrers_first_and_cycles_last() {
        let (a, b, c, x, y) = (
            sp('a', "a"),
            sp('b', "b"),
            sp('c', "c"),
            sp('x', "x"),
            sp('y', "y"),
        );
        let mut refs: BTreeMap<StorePath, BTreeSet<StorePath>> = BTreeMap::new();
        refs.insert(c.clone(), [b.clone(), c.clone()].into()); // c → b, c → c
        refs.insert(b.clone(), [a.clone()].into()); // b → a
        refs.insert(x.clone(), [y.clone()].into()); // x ↔ y
        refs.insert(y.clone(), [x.clone()].into());
        let dead: BTreeSet<StorePath> =
            [a.clone(), b.clone(), c.clone(), x.clone(), y.clone()].into();
        let order = deletion_order(&dead, &refs);
        assert_eq!(order, vec![vec![c], vec![b], vec![a], vec![x, y]]);
    }

    /// A built output registered at `path` with `deriver`, recorded as its output `out`.
    fn built(s: &LocalStore, dir: &Path, path: &StorePath, deriver: &StorePath) {
        let scratch = dir.join(path.hash_part());
        fs::write(&scratch, path.name()).expect("write");
        fsutil::normalise_tree(&scratch).expect("normalise");
        let (h, n) = crate::nar::hash_path(&scratch, crate::hash::HashAlgo::Blake3).expect("h");
        s.register_built(crate::local::BuiltPath {
            scratch: Some(&scratch),
            path,
            refs: &BTreeSet::new(),
            nar_hash: h,
            nar_size: n,
            deriver: Some(deriver),
            ca: None,
            built: None,
        })
        .expect("register");
        s.add_derivation_output(deriver, "out", path)
            .expect("output");
    }

    #[test]
    fn derivers_of_live_paths_are_kept_and_outputs_of_live_derivations_on_request() {
        let tmp = tempfile::tempdir().expect("tmp");
        let s = LocalStore::open(&tmp.path().join("root")).expect("open");
        let none = BTreeSet::new();
        let src = s.add_text("src", b"source", &none).expect("src");
        let dep_drv = s
            .add_text("dep.drv", b"dep", &[src.clone()].into())
            .expect("dep.drv");
        let drv = s
            .add_text("top.drv", b"top", &[dep_drv.clone()].into())
            .expect("top.drv");
        let dep_out = sp('d', "dep");
        let out = sp('a', "top");
        built(&s, tmp.path(), &dep_out, &dep_drv);
        built(&s, tmp.path(), &out, &drv);
        s.add_root(&tmp.path().join("result"), &out).expect("root");
        let gc = |kd: bool, ko: bool| -> BTreeSet<StorePath> {
            let opts = GcOptions {
                dry_run: true,
                max_freed: None,
            };
            let r = s.gc_keeping(&opts, kd, ko).expect("gc");
            r.deleted.into_iter().map(|(p, _)| p).collect()
        };
        // keep-derivations: the output keeps top.drv, whose closure is dep.drv and src;
        // dep's output is garbage.
        assert_eq!(gc(true, false), [dep_out.clone()].into());
        // Both: dep.drv, live, keeps its output too.
        assert_eq!(gc(true, true), BTreeSet::new());
        // Neither: only the rooted output survives.
        assert_eq!(
            gc(false, false),
            [src.clone(), dep_drv.clone(), drv.clone(), dep_out.clone()].into()
        );
        // keep-outputs alone: nothing roots a derivation, so nothing more is kept.
        assert_eq!(gc(false, true), gc(false, false));
        // The default is keep-derivations.
        let r = s.gc(&GcOptions::default()).expect("gc");
        assert_eq!(r.deleted.len(), 1);
        assert_eq!(r.deleted[0].0, dep_out);
        for p in [&src, &dep_drv, &drv, &out] {
            assert!(s.is_valid(p).expect("valid"), "{p}");
        }
    }

    #[test]
    fn auto_names_are_32_nix32_characters() {
        let n = auto_name(Path::new("/home/u/result"));
        assert_eq!(n.len(), 32);
        assert_ne!(n, auto_name(Path::new("/home/u/result-2")));
    }
}
