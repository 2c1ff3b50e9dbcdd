//! Pushing store paths, with their closures and realisations, to a cache.
//!
//! Owns: the order of writes, which makes a push safe to interrupt and to run twice:
//! the paths of the closure references first, and for each one the cache lacks, the
//! NAR first (compressed with zstd once, here, on several threads), then its narinfo;
//! realisations last, so that a reader that finds a record finds everything it names
//! (and `rocmx serve --writable`, which imports each narinfo as it arrives, has its
//! references already). A path whose narinfo is there already is skipped. A cache
//! that cannot be written (HTTP without a token) is refused before any work.
//!
//! Must not: change the local store, or sign with keys the caller did not give.

use std::collections::{BTreeMap, BTreeSet};
use std::io;

use rocmx_store::direct::DirectWriter;
use rocmx_store::{nar, Encoding, Hash, HashAlgo, HashingWriter, LocalStore, PathInfo, StorePath};

use crate::frames;
use crate::info::CacheInfo;
use crate::keys::SecretKey;
use crate::narinfo::{Compression, NarInfo};
use crate::realisation::Realisation;
use crate::transport::Transport;
use crate::CacheError;

/// How to push.
#[derive(Debug, Clone)]
pub struct PushOptions {
    /// Keys that sign every narinfo and realisation written (`secret-key-files`).
    pub keys: Vec<SecretKey>,
    /// zstd worker threads (0: one per core).
    pub threads: u32,
    /// zstd level.
    pub level: i32,
}

impl Default for PushOptions {
    fn default() -> Self {
        PushOptions {
            keys: Vec::new(),
            threads: 0,
            level: 3,
        }
    }
}

/// What a push did.
#[derive(Debug, Clone, Default)]
pub struct PushReport {
    /// Paths written, in the order written.
    pub pushed: Vec<StorePath>,
    /// Paths of the closure the cache had already.
    pub present: usize,
    /// Realisation records written.
    pub realisations: usize,
    /// Bytes of NAR pushed, and of compressed files written.
    pub nar_bytes: u64,
    pub file_bytes: u64,
}

fn threads(n: u32) -> u32 {
    if n > 0 {
        return n;
    }
    std::thread::available_parallelism()
        .map(|n| n.get() as u32)
        .unwrap_or(1)
}

/// Compresses the NAR of `p` into a temporary file; gives (file, file hash, file size,
/// NAR size).
fn compress(
    store: &LocalStore,
    cache: &dyn Transport,
    p: &StorePath,
    opts: &PushOptions,
) -> Result<(tempfile::NamedTempFile, Hash, u64, u64), CacheError> {
    let io_err = |what: &'static str| {
        let cache = cache.url().to_string();
        let file = p.base_name();
        move |e: io::Error| CacheError::Io {
            cache,
            what,
            file,
            source: e,
        }
    };
    let tmp = match cache.scratch_dir() {
        Some(d) => tempfile::Builder::new().prefix(".tmp-").tempfile_in(d),
        None => tempfile::NamedTempFile::new(),
    }
    .map_err(io_err("creating a temporary file for the NAR of"))?;
    // Straight to the disk: the file is synced before it is renamed into the cache.
    // Hashed on the writing thread: the compressing threads have the cores.
    let out = HashingWriter::serial(
        DirectWriter::new(
            tmp.as_file()
                .try_clone()
                .map_err(io_err("writing the NAR of"))?,
        ),
        HashAlgo::Blake3,
    );
    // Independent frames, made on every core (see `frames`): fetching decodes them on
    // every core too.
    let mut dump_error = None;
    let compressed = frames::compress_framed(
        opts.level,
        threads(opts.threads) as usize,
        |w| {
            nar::dump_path(&store.real_path(p), w)
                .map(|_| ())
                .map_err(|e| {
                    let msg = e.to_string();
                    dump_error = Some(e);
                    io::Error::other(msg)
                })
        },
        out,
    );
    if let Some(e) = dump_error {
        return Err(CacheError::Io {
            cache: cache.url().to_string(),
            what: "reading the local",
            file: p.to_absolute(),
            source: io::Error::other(e.to_string()),
        });
    }
    let (out, nar_size) = compressed.map_err(io_err("compressing the NAR of"))?;
    let (w, file_hash, file_size) = out.finish();
    w.finish().map_err(io_err("writing the NAR of"))?;
    Ok((tmp, file_hash, file_size, nar_size))
}

/// The paths of `infos`, each after its references (a depth-first post-order over
/// the paths in order, following references inside `infos` only).
fn references_first(infos: &BTreeMap<StorePath, PathInfo>) -> Vec<StorePath> {
    let children = |p: &StorePath| -> Vec<&StorePath> {
        infos[p]
            .references
            .iter()
            .rev()
            .filter(|r| *r != p)
            .filter_map(|r| infos.get_key_value(r).map(|(k, _)| k))
            .collect()
    };
    let mut out = Vec::with_capacity(infos.len());
    let mut done: BTreeSet<&StorePath> = BTreeSet::new();
    for start in infos.keys() {
        if !done.insert(start) {
            continue;
        }
        let mut stack = vec![(start, children(start))];
        while let Some((_, todo)) = stack.last_mut() {
            match todo.pop() {
                Some(c) => {
                    if done.insert(c) {
                        stack.push((c, children(c)));
                    }
                }
                None => {
                    if let Some((n, _)) = stack.pop() {
                        out.push(n.clone());
                    }
                }
            }
        }
    }
    out
}

/// Pushes the closures of `paths` and their realisations to `cache`.
pub fn push(
    store: &LocalStore,
    cache: &dyn Transport,
    paths: &[StorePath],
    opts: &PushOptions,
    mut progress: impl FnMut(&StorePath, u64),
) -> Result<PushReport, CacheError> {
    let mut report = PushReport::default();
    cache.writable()?;
    if !cache.exists("rocmx-cache-info")? {
        cache.put(
            "rocmx-cache-info",
            CacheInfo::default().to_text().as_bytes(),
        )?;
    }
    let mut infos = BTreeMap::new();
    for p in store.closure(paths)? {
        let info = store
            .path_info(&p)?
            .ok_or_else(|| CacheError::Protocol(format!("{p} is not valid in the local store")))?;
        infos.insert(p, info);
    }
    let closure = references_first(&infos);
    for p in &closure {
        let info = infos
            .remove(p)
            .expect("every path of the order has its info");
        let narinfo_name = format!("{}.narinfo", p.hash_part());
        if cache.exists(&narinfo_name)? {
            report.present += 1;
            continue;
        }
        let (tmp, file_hash, file_size, nar_size) = compress(store, cache, p, opts)?;
        if nar_size != info.nar_size {
            return Err(CacheError::Protocol(format!(
                "{p} changed in the local store: its NAR has {nar_size} bytes, {} are registered; run `rocmx store verify`",
                info.nar_size
            )));
        }
        let url = format!(
            "nar/{}{}",
            file_hash.encode(Encoding::Nix32),
            Compression::Zstd.extension()
        );
        let (_, tmp_path) = tmp.keep().map_err(|e| CacheError::Io {
            cache: cache.url().to_string(),
            what: "keeping the compressed NAR of",
            file: p.base_name(),
            source: e.error,
        })?;
        let moved = cache.put_file(&url, &tmp_path);
        let _ = std::fs::remove_file(&tmp_path);
        moved?;
        let mut ni = NarInfo::of_path(info, url, Compression::Zstd);
        ni.file_hash = Some(file_hash);
        ni.file_size = Some(file_size);
        for k in &opts.keys {
            ni.sign(k);
        }
        cache.put(&narinfo_name, ni.to_text().as_bytes())?;
        report.nar_bytes += nar_size;
        report.file_bytes += file_size;
        progress(p, nar_size);
        report.pushed.push(p.clone());
    }
    for p in &closure {
        for (drv_hash, output, sigs) in store.realisations_of(p)? {
            let mut r = Realisation {
                drv_hash,
                output,
                out_path: p.clone(),
                signatures: sigs,
            };
            for k in &opts.keys {
                r.sign(k);
            }
            let rel = format!(
                "realisations/{}",
                Realisation::file_name(&r.drv_hash, &r.output)
            );
            cache.put(&rel, r.to_text().as_bytes())?;
            report.realisations += 1;
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_come_first() {
        let t = tempfile::tempdir().unwrap();
        let s = LocalStore::open(t.path()).unwrap();
        let mut prev = s.add_text("p0", b"0", &BTreeSet::new()).unwrap();
        let mut all = vec![prev.clone()];
        for i in 1..6 {
            let refs: BTreeSet<StorePath> = [prev.clone()].into_iter().collect();
            let text = format!("{i} {}", prev.to_absolute());
            prev = s
                .add_text(&format!("p{i}"), text.as_bytes(), &refs)
                .unwrap();
            all.push(prev.clone());
        }
        let infos: BTreeMap<StorePath, PathInfo> = s
            .closure(std::slice::from_ref(&prev))
            .unwrap()
            .into_iter()
            .map(|p| {
                let i = s.path_info(&p).unwrap().unwrap();
                (p, i)
            })
            .collect();
        assert_eq!(references_first(&infos), all);
    }
}
