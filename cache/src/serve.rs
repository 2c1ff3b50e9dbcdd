//! Serving a local store in the cache layout (what `rocmx serve` answers).
//!
//! Owns: mapping a request path to what a cache directory would hold, made from the
//! store's database on the fly:
//!
//! ```text
//! /rocmx-cache-info                      StoreDir, WantMassQuery: 1, Priority: 30
//! /<hashpart>.narinfo                    Compression: none, URL: nar/<hashpart>.nar,
//!                                        the path's NarHash, references, deriver, CA,
//!                                        its signatures plus the server's keys'
//! /nar/<hashpart>.nar                    the NAR, streamed from the tree
//! /realisations/<drvhash>!<output>.json  the recorded realisation, signed likewise
//! ```
//!
//! Nothing is compressed at serve time (compressing on the fly costs more than the
//! bandwidth it saves on the networks caches run on); a NAR is as large as its
//! `NarSize`. Readers check everything as for any cache.
//!
//! Must not: serve anything outside the store's valid paths, or write anything (what
//! a push to a writable server does is [`crate::receive`]'s).

use rocmx_store::{LocalStore, StorePath};

use crate::info::CacheInfo;
use crate::keys::SecretKey;
use crate::narinfo::{Compression, NarInfo};
use crate::realisation::{is_drv_hash, Realisation};

/// What to answer.
#[derive(Debug)]
pub enum Answer {
    /// These bytes, with this content type.
    Bytes(Vec<u8>, &'static str),
    /// The NAR of this valid path (its size is known from the database).
    Nar(StorePath, u64),
    /// 404.
    NotFound,
}

/// The answer to `GET path` (the URL path, with its leading `/`).
pub fn answer(store: &LocalStore, keys: &[SecretKey], path: &str) -> Result<Answer, String> {
    let rel = path.trim_start_matches('/');
    if rel == "rocmx-cache-info" {
        let info = CacheInfo {
            priority: 30,
            ..CacheInfo::default()
        };
        return Ok(Answer::Bytes(info.to_text().into_bytes(), "text/plain"));
    }
    if let Some(hash) = rel.strip_suffix(".narinfo") {
        let Some(p) = store.path_from_hash_part(hash).map_err(|e| e.to_string())? else {
            return Ok(Answer::NotFound);
        };
        let Some(info) = store.path_info(&p).map_err(|e| e.to_string())? else {
            return Ok(Answer::NotFound);
        };
        let mut ni = NarInfo::of_path(info, format!("nar/{hash}.nar"), Compression::None);
        for k in keys {
            ni.sign(k);
        }
        return Ok(Answer::Bytes(
            ni.to_text().into_bytes(),
            "text/x-nix-narinfo",
        ));
    }
    if let Some(hash) = rel
        .strip_prefix("nar/")
        .and_then(|r| r.strip_suffix(".nar"))
    {
        let Some(p) = store.path_from_hash_part(hash).map_err(|e| e.to_string())? else {
            return Ok(Answer::NotFound);
        };
        let Some(info) = store.path_info(&p).map_err(|e| e.to_string())? else {
            return Ok(Answer::NotFound);
        };
        return Ok(Answer::Nar(p, info.nar_size));
    }
    if let Some(name) = rel
        .strip_prefix("realisations/")
        .and_then(|r| r.strip_suffix(".json"))
    {
        let Some((drv_hash, output)) = name.split_once('!') else {
            return Ok(Answer::NotFound);
        };
        if !is_drv_hash(drv_hash) || output.is_empty() || output.contains('/') {
            return Ok(Answer::NotFound);
        }
        let Some((p, sigs)) = store
            .query_realisation_signed(drv_hash, output)
            .map_err(|e| e.to_string())?
        else {
            return Ok(Answer::NotFound);
        };
        let mut r = Realisation {
            drv_hash: drv_hash.to_string(),
            output: output.to_string(),
            out_path: p,
            signatures: sigs,
        };
        for k in keys {
            r.sign(k);
        }
        return Ok(Answer::Bytes(r.to_text().into_bytes(), "application/json"));
    }
    Ok(Answer::NotFound)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_from_the_store() {
        let t = tempfile::tempdir().unwrap();
        let store = LocalStore::open(&t.path().join("s")).unwrap();
        let src = t.path().join("src");
        std::fs::write(&src, "hello").unwrap();
        let p = store.add_path(&src, "src").unwrap();
        let key = SecretKey::generate("srv-1").unwrap();
        let trusted = crate::keys::TrustedKeys::parse(&key.public().to_string()).unwrap();
        match answer(
            &store,
            std::slice::from_ref(&key),
            &format!("/{}.narinfo", p.hash_part()),
        )
        .unwrap()
        {
            Answer::Bytes(b, _) => {
                let ni = NarInfo::parse(&String::from_utf8(b).unwrap()).unwrap();
                assert_eq!(ni.store_path, p);
                assert_eq!(ni.compression, Compression::None);
                assert_eq!(ni.trusted_by(&trusted), Some("srv-1"));
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            answer(&store, &[], &format!("/nar/{}.nar", p.hash_part())).unwrap(),
            Answer::Nar(q, _) if q == p
        ));
        for missing in [
            "/00000000000000000000000000000000.narinfo",
            "/../etc/passwd",
            "/nar/x.nar",
            "/realisations/x!out.json",
            "/",
        ] {
            assert!(
                matches!(answer(&store, &[], missing).unwrap(), Answer::NotFound),
                "{missing}"
            );
        }
        assert!(matches!(
            answer(&store, &[], "/rocmx-cache-info").unwrap(),
            Answer::Bytes(..)
        ));
    }
}
