//! Trees already fetched for sources that name fixed content: a commit (git,
//! GitHub) or a tarball URL together with its locked NAR hash. With a lock in
//! place, evaluating a flake again neither downloads nor re-exports such an
//! input (as Nix's fetcher cache does); a `path:` input, which the user may
//! edit at any time, is never cached.
//!
//! One small JSON file per (source, NAR hash) under `<state>/flake-fetch/`,
//! named by the BLAKE3 of that pair: `{"storePath", "locked": {attrs},
//! "lastModified"}`. An entry is used only while its store path is valid;
//! anything unreadable is ignored (the input is fetched again). Must not:
//! decide what to fetch, or trust an entry for a different NAR hash.

use std::path::PathBuf;

use rocmx_lang::flake::fetch::Fetched;
use rocmx_lang::flake::source::Source;
use rocmx_store::{Hash, HashAlgo, LocalStore, StorePath};
use serde_json::{json, Value};

/// Whether fetching `source` twice gives the same tree (given its NAR hash).
pub(super) fn cacheable(source: &Source) -> bool {
    source.is_pinned() || matches!(source, Source::Tarball { .. })
}

fn entry(store: &LocalStore, source: &Source, nar_hash: &Hash) -> PathBuf {
    let key = Hash::digest(
        HashAlgo::Blake3,
        format!("v1\n{source}\n{}", nar_hash.to_sri()).as_bytes(),
    );
    store.state_dir().join("flake-fetch").join(key.to_hex())
}

/// The tree recorded for `source` with NAR hash `nar_hash`, if it is still in
/// the store.
pub(super) fn lookup(store: &LocalStore, source: &Source, nar_hash: &Hash) -> Option<Fetched> {
    if !cacheable(source) {
        return None;
    }
    let text = std::fs::read_to_string(entry(store, source, nar_hash)).ok()?;
    let j: Value = serde_json::from_str(&text).ok()?;
    let sp = StorePath::from_absolute(j["storePath"].as_str()?).ok()?;
    if !store.is_valid(&sp).ok()? {
        return None;
    }
    let attrs: Vec<(String, String)> = j["locked"]
        .as_object()?
        .iter()
        .map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
        .collect::<Option<_>>()?;
    Some(Fetched {
        store_path: sp.to_absolute(),
        physical: store.real_path(&sp),
        locked: Source::from_attrs(&attrs).ok()?,
        nar_hash: *nar_hash,
        last_modified: j["lastModified"].as_u64(),
    })
}

/// Records a fetched tree under the source it was asked for and under its
/// locked form. Failing to record is not an error (the next evaluation
/// fetches again).
pub(super) fn record(store: &LocalStore, asked: &Source, f: &Fetched) {
    let locked: serde_json::Map<String, Value> = f
        .locked
        .to_attrs()
        .into_iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    let text = json!({
        "storePath": f.store_path,
        "locked": locked,
        "lastModified": f.last_modified,
    })
    .to_string();
    for source in [asked, &f.locked] {
        if !cacheable(source) {
            continue;
        }
        let p = entry(store, source, &f.nar_hash);
        let _ = std::fs::create_dir_all(p.parent().unwrap_or(&p));
        let tmp = p.with_extension(format!("tmp{}", std::process::id()));
        if std::fs::write(&tmp, &text).is_ok() {
            let _ = std::fs::rename(&tmp, &p);
        }
    }
}
