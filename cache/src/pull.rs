//! Fetching store paths, with their closures, from a cache into the local store.
//!
//! Owns: the order of a fetch (every narinfo of the missing closure first, level by
//! level with dozens of requests in flight, each checked for a trusted signature and
//! for naming the path asked for, before any NAR is downloaded; then the NARs, in
//! parallel, each after the paths it refers to), and turning what a cache
//! serves into checked imports ([`LocalStore::import_nar`] checks the NAR against the
//! narinfo and the tree against its path).
//!
//! Must not: register anything unchecked, or trust a record because of where it came
//! from.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rocmx_store::local::ImportClaim;
use rocmx_store::{LocalStore, StorePath};

use crate::keys::TrustedKeys;
use crate::narinfo::{Compression, NarInfo};
use crate::par;
use crate::realisation::Realisation;
use crate::transport::Transport;
use crate::CacheError;

/// The largest narinfo or realisation read.
pub const MAX_RECORD: u64 = 1 << 20;

/// What a fetch did.
#[derive(Debug, Clone, Default)]
pub struct PullReport {
    /// Paths imported, in order.
    pub fetched: Vec<StorePath>,
    /// NAR bytes imported.
    pub nar_bytes: u64,
}

/// Why a record is not trusted, for the message.
fn untrusted_why(sigs: &[String]) -> String {
    if sigs.is_empty() {
        return "it has no signature".into();
    }
    let names: BTreeSet<&str> = sigs.iter().filter_map(|s| s.split(':').next()).collect();
    format!(
        "its signatures are by {}, none of them trusted or valid",
        names.into_iter().collect::<Vec<_>>().join(", ")
    )
}

/// Fetches and checks the narinfo of `p`; `None` if the cache does not have it.
pub fn narinfo(
    cache: &dyn Transport,
    p: &StorePath,
    trusted: &TrustedKeys,
) -> Result<Option<NarInfo>, CacheError> {
    let rel = format!("{}.narinfo", p.hash_part());
    let Some(bytes) = cache.get(&rel, MAX_RECORD)? else {
        return Ok(None);
    };
    let text = String::from_utf8(bytes).map_err(|_| {
        CacheError::Protocol(format!("cache '{}': {rel} is not UTF-8 text", cache.url()))
    })?;
    let ni = NarInfo::parse(&text)
        .map_err(|e| CacheError::Protocol(format!("cache '{}': {rel}: {e}", cache.url())))?;
    if ni.store_path != *p {
        return Err(CacheError::Protocol(format!(
            "cache '{}': {rel} describes {}, not {p}",
            cache.url(),
            ni.store_path
        )));
    }
    if ni.trusted_by(trusted).is_none() {
        return Err(CacheError::Untrusted {
            cache: cache.url().to_string(),
            what: format!("the narinfo of {p}"),
            why: untrusted_why(&ni.signatures),
        });
    }
    Ok(Some(ni))
}

/// Fetches and checks the realisation `drv_hash!output`; `None` if the cache lacks it.
pub fn realisation(
    cache: &dyn Transport,
    drv_hash: &str,
    output: &str,
    trusted: &TrustedKeys,
) -> Result<Option<Realisation>, CacheError> {
    let rel = format!("realisations/{}", Realisation::file_name(drv_hash, output));
    let Some(bytes) = cache.get(&rel, MAX_RECORD)? else {
        return Ok(None);
    };
    let text = String::from_utf8_lossy(&bytes);
    let r = Realisation::parse(&text)
        .map_err(|e| CacheError::Protocol(format!("cache '{}': {rel}: {e}", cache.url())))?;
    if r.drv_hash != drv_hash || r.output != output {
        return Err(CacheError::Protocol(format!(
            "cache '{}': {rel} describes {}!{}",
            cache.url(),
            r.drv_hash,
            r.output
        )));
    }
    if r.trusted_by(trusted).is_none() {
        return Err(CacheError::Untrusted {
            cache: cache.url().to_string(),
            what: format!("the realisation {drv_hash}!{output}"),
            why: untrusted_why(&r.signatures),
        });
    }
    Ok(Some(r))
}

/// The narinfos of every path of the closures of `paths` that `store` lacks, checked.
pub fn plan(
    store: &LocalStore,
    cache: &dyn Transport,
    paths: &[StorePath],
    trusted: &TrustedKeys,
) -> Result<BTreeMap<StorePath, NarInfo>, CacheError> {
    plan_with(store, paths, par::DEFAULT_JOBS, |p| {
        narinfo(cache, p, trusted)?.ok_or_else(|| CacheError::Missing {
            cache: cache.url().to_string(),
            path: p.clone(),
        })
    })
}

/// The narinfos `lookup` gives for every path of the closures of `paths` that `store`
/// lacks, level by level (the references of one level are the next), each level's
/// lookups `jobs` at a time.
pub fn plan_with(
    store: &LocalStore,
    paths: &[StorePath],
    jobs: usize,
    lookup: impl Fn(&StorePath) -> Result<NarInfo, CacheError> + Sync,
) -> Result<BTreeMap<StorePath, NarInfo>, CacheError> {
    let mut found: BTreeMap<StorePath, NarInfo> = BTreeMap::new();
    let mut seen: BTreeSet<StorePath> = BTreeSet::new();
    let mut level: Vec<StorePath> = Vec::new();
    for p in paths {
        if seen.insert(p.clone()) && !store.is_valid(p)? {
            level.push(p.clone());
        }
    }
    while !level.is_empty() {
        let answers = par::map(&level, jobs, &lookup);
        let mut next = Vec::new();
        for (p, ni) in level.into_iter().zip(answers) {
            let ni = ni?;
            for r in ni.references.iter().filter(|r| **r != p) {
                if seen.insert(r.clone()) && !store.is_valid(r)? {
                    next.push(r.clone());
                }
            }
            found.insert(p, ni);
        }
        level = next;
    }
    Ok(found)
}

/// Imports every planned path with `fetch` (see [`fetch_one`]), `jobs` at a time, each
/// after the planned paths it refers to. Gives the paths that could not be imported
/// and why (a path whose reference failed is not attempted).
pub fn fetch_planned(
    planned: &BTreeMap<StorePath, NarInfo>,
    jobs: usize,
    fetch: impl Fn(&NarInfo) -> Result<(), CacheError> + Sync,
) -> Vec<(StorePath, CacheError)> {
    let items: Vec<&NarInfo> = planned.values().collect();
    let outcomes = par::dag(
        &items,
        jobs,
        |ni| ni.store_path.clone(),
        |ni| ni.references.iter().cloned().collect(),
        |ni| fetch(ni),
    );
    items
        .into_iter()
        .zip(outcomes)
        .filter_map(|(ni, o)| {
            let p = ni.store_path.clone();
            match o {
                par::Outcome::Done => None,
                par::Outcome::Failed(e) => Some((p, e)),
                par::Outcome::Blocked(r) => Some((
                    p,
                    CacheError::Protocol(format!("not fetched: its reference {r} could not be")),
                )),
            }
        })
        .collect()
}

/// Counts the bytes read through it into a counter another thread reads.
struct Counting<R> {
    inner: R,
    count: Arc<AtomicU64>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// Tells `on_bytes` how far a download running on another thread got, from the
/// thread reading its output: about every [`REPORT_EVERY`] bytes, and the rest at the
/// end.
struct Reporting<'a, R> {
    inner: R,
    count: Arc<AtomicU64>,
    reported: u64,
    on_bytes: &'a dyn Fn(u64),
}

/// Download progress is reported in steps of this many bytes.
pub const REPORT_EVERY: u64 = 1 << 20;

impl<R> Reporting<'_, R> {
    fn report(&mut self, at_least: u64) {
        let now = self.count.load(Ordering::Relaxed);
        if now >= self.reported + at_least && now > self.reported {
            (self.on_bytes)(now - self.reported);
            self.reported = now;
        }
    }
}

impl<R: Read> Read for Reporting<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.report(if n == 0 { 0 } else { REPORT_EVERY });
        Ok(n)
    }
}

/// Downloads, checks and imports one path described by `ni`.
/// `on_bytes` is told how many bytes arrived, in steps (see [`REPORT_EVERY`]); the
/// steps add up to the bytes downloaded.
pub fn fetch_one(
    store: &LocalStore,
    cache: &dyn Transport,
    ni: &NarInfo,
    on_bytes: &dyn Fn(u64),
) -> Result<bool, CacheError> {
    let p = &ni.store_path;
    let ca = ni.ca.as_deref().ok_or_else(|| {
        CacheError::Protocol(format!(
            "cache '{}': the narinfo of {p} has no CA line; rocmx imports only content-addressed paths",
            cache.url()
        ))
    })?;
    let stream = cache.open(&ni.url)?.ok_or_else(|| {
        CacheError::Protocol(format!(
            "cache '{}': the narinfo of {p} names {}, which the cache does not have",
            cache.url(),
            ni.url
        ))
    })?;
    let count = Arc::new(AtomicU64::new(0));
    let stream: Box<dyn Read + Send> = Box::new(Counting {
        inner: stream,
        count: count.clone(),
    });
    // Downloading and decompressing run on their own threads (every core for framed
    // zstd, see `frames`), ahead of the restore.
    let decoded: Box<dyn Read + Send> = match ni.compression {
        Compression::None => Box::new(crate::pipe::read_ahead(stream)),
        Compression::Zstd => Box::new(crate::frames::decoder(stream, 0)),
    };
    let mut reader = Reporting {
        inner: decoded,
        count,
        reported: 0,
        on_bytes,
    };
    let claim = ImportClaim {
        path: p,
        nar_hash: &ni.nar_hash,
        nar_size: ni.nar_size,
        references: &ni.references,
        deriver: ni.deriver.as_ref(),
        ca,
        signatures: &ni.signatures,
    };
    let imported = store
        .import_nar(&claim, &mut reader)
        .map_err(|e| CacheError::Protocol(format!("cache '{}': {e}", cache.url())))?;
    reader.report(0);
    Ok(imported)
}

/// Fetches the closures of `paths` from `cache` into `store`, [`par::DEFAULT_JOBS`]
/// paths at a time; `progress` is told of each path imported. The first failure is the
/// error (the other paths are still imported).
pub fn pull(
    store: &LocalStore,
    cache: &dyn Transport,
    paths: &[StorePath],
    trusted: &TrustedKeys,
    progress: impl Fn(&StorePath, u64) + Sync,
) -> Result<PullReport, CacheError> {
    let planned = plan(store, cache, paths, trusted)?;
    let report = Mutex::new(PullReport::default());
    let failures = fetch_planned(&planned, par::DEFAULT_JOBS, |ni| {
        if fetch_one(store, cache, ni, &|_| {})? {
            let mut r = report.lock().unwrap_or_else(|e| e.into_inner());
            r.nar_bytes += ni.nar_size;
            r.fetched.push(ni.store_path.clone());
            drop(r);
            progress(&ni.store_path, ni.nar_size);
        }
        Ok(())
    });
    if let Some((_, e)) = failures.into_iter().next() {
        return Err(e);
    }
    Ok(report.into_inner().unwrap_or_else(|e| e.into_inner()))
}
