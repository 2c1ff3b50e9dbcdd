//! Fetching store paths, with their closures, from a cache into the local store.
//!
//! Owns: the order of a fetch (every narinfo of the missing closure first, each checked
//! for a trusted signature and for naming the path asked for, before any NAR is
//! downloaded; then the NARs, references before referrers), and turning what a cache
//! serves into checked imports ([`LocalStore::import_nar`] checks the NAR against the
//! narinfo and the tree against its path).
//!
//! Must not: register anything unchecked, or trust a record because of where it came
//! from.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;

use rocmx_store::local::ImportClaim;
use rocmx_store::{LocalStore, StorePath};

use crate::keys::TrustedKeys;
use crate::narinfo::{Compression, NarInfo};
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
    let mut todo: Vec<StorePath> = paths.to_vec();
    let mut found: BTreeMap<StorePath, NarInfo> = BTreeMap::new();
    while let Some(p) = todo.pop() {
        if found.contains_key(&p) || store.is_valid(&p)? {
            continue;
        }
        let ni = narinfo(cache, &p, trusted)?.ok_or_else(|| CacheError::Missing {
            cache: cache.url().to_string(),
            path: p.clone(),
        })?;
        todo.extend(ni.references.iter().filter(|r| **r != p).cloned());
        found.insert(p, ni);
    }
    Ok(found)
}

/// `planned` in an order where every path comes after its references.
fn order(planned: &BTreeMap<StorePath, NarInfo>) -> Vec<&StorePath> {
    fn visit<'a>(
        p: &'a StorePath,
        planned: &'a BTreeMap<StorePath, NarInfo>,
        done: &mut BTreeSet<&'a StorePath>,
        out: &mut Vec<&'a StorePath>,
    ) {
        if !done.insert(p) {
            return;
        }
        if let Some((key, ni)) = planned.get_key_value(p) {
            for r in ni.references.iter().filter(|r| *r != p) {
                if let Some((rk, _)) = planned.get_key_value(r) {
                    visit(rk, planned, done, out);
                }
            }
            out.push(key);
        }
    }
    let mut done = BTreeSet::new();
    let mut out = Vec::new();
    for p in planned.keys() {
        visit(p, planned, &mut done, &mut out);
    }
    out
}

/// Downloads, checks and imports one path described by `ni`.
pub fn fetch_one(
    store: &LocalStore,
    cache: &dyn Transport,
    ni: &NarInfo,
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
    let decoded: Box<dyn Read + Send> = match ni.compression {
        Compression::None => stream,
        Compression::Zstd => Box::new(zstd::stream::read::Decoder::new(stream).map_err(|e| {
            CacheError::Protocol(format!("cache '{}': {}: {e}", cache.url(), ni.url))
        })?),
    };
    // Downloading and decompressing run on their own thread, ahead of the restore.
    let reader = crate::pipe::read_ahead(decoded);
    let claim = ImportClaim {
        path: p,
        nar_hash: &ni.nar_hash,
        nar_size: ni.nar_size,
        references: &ni.references,
        deriver: ni.deriver.as_ref(),
        ca,
        signatures: &ni.signatures,
    };
    store
        .import_nar(&claim, reader)
        .map_err(|e| CacheError::Protocol(format!("cache '{}': {e}", cache.url())))
}

/// Fetches the closures of `paths` from `cache` into `store`.
pub fn pull(
    store: &LocalStore,
    cache: &dyn Transport,
    paths: &[StorePath],
    trusted: &TrustedKeys,
    mut progress: impl FnMut(&StorePath, u64),
) -> Result<PullReport, CacheError> {
    let planned = plan(store, cache, paths, trusted)?;
    let mut report = PullReport::default();
    for p in order(&planned) {
        let ni = &planned[p];
        if fetch_one(store, cache, ni)? {
            report.nar_bytes += ni.nar_size;
            report.fetched.push(p.clone());
            progress(p, ni.nar_size);
        }
    }
    Ok(report)
}
