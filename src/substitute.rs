//! Substitution for `rocmx build`: the configured binary caches as the realiser's
//! [`Substituter`].
//!
//! Owns: the policy. Caches are asked in the order of `substituters` (or
//! `--substituters`); a floating output is found through its realisation
//! (`realisations/<resolved drv hash>!<output>.json`), a fixed one through its path's
//! narinfo; a cache must have every output of the derivation. A cache that cannot be
//! asked (unreachable, an error, a malformed or untrusted answer) is skipped with a
//! warning naming it, and not asked again in this run. When a cache had the outputs
//! but delivering them failed (a NAR that does not match, a missing file), the next
//! cache is tried; when none is left, the derivation is built with `--fallback`, and
//! is an error naming the cache without it. `--offline` turns substitution off. HTTP
//! caches use the `connect-timeout` and `stalled-download-timeout` settings.
//!
//! Must not: register anything `rocmx_cache` did not check, or print anything but
//! warnings.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use rocmx_builder::realise::Substituter;
use rocmx_cache::keys::TrustedKeys;
use rocmx_cache::transport::{self, Transport};
use rocmx_cache::{pull, CacheError};
use rocmx_store::{LocalStore, StorePath};

/// The caches of one run.
pub struct Caches {
    caches: Vec<Box<dyn Transport>>,
    trusted: TrustedKeys,
    fallback: bool,
    /// Caches that failed a query: not asked again.
    disabled: Mutex<BTreeSet<usize>>,
}

impl std::fmt::Debug for Caches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let urls: Vec<&str> = self.caches.iter().map(|c| c.url()).collect();
        write!(f, "Caches({urls:?})")
    }
}

impl Caches {
    /// The caches named in `urls` (white-space separated), trusting `trusted`
    /// (white-space separated public keys).
    pub fn new(
        urls: &str,
        trusted: &str,
        fallback: bool,
        timeouts: transport::Timeouts,
    ) -> Result<Caches, String> {
        let trusted =
            TrustedKeys::parse(trusted).map_err(|e| format!("trusted-public-keys: {e}"))?;
        let mut caches = Vec::new();
        for u in urls.split_whitespace() {
            caches
                .push(transport::open_with(u, timeouts).map_err(|e| format!("substituters: {e}"))?);
        }
        if !caches.is_empty() && trusted.is_empty() {
            eprintln!(
                "warning: substituters are set but trusted-public-keys is empty: nothing they serve will be accepted"
            );
        }
        Ok(Caches {
            caches,
            trusted,
            fallback,
            disabled: Mutex::new(BTreeSet::new()),
        })
    }

    /// Whether there is no cache.
    pub fn is_empty(&self) -> bool {
        self.caches.is_empty()
    }

    fn disable(&self, i: usize, e: &CacheError) {
        eprintln!(
            "warning: {e}; not asking '{}' again in this run",
            self.caches[i].url()
        );
        if let Ok(mut d) = self.disabled.lock() {
            d.insert(i);
        }
    }

    /// The paths cache `i` has for `outputs`, with realisation signatures; `None` if it
    /// lacks one.
    #[allow(clippy::type_complexity)]
    fn query(
        &self,
        cache: &dyn Transport,
        key: &str,
        outputs: &[(String, Option<StorePath>)],
    ) -> Result<Option<BTreeMap<String, (StorePath, Vec<String>)>>, CacheError> {
        let mut found = BTreeMap::new();
        for (o, fixed) in outputs {
            match fixed {
                Some(p) => {
                    if pull::narinfo(cache, p, &self.trusted)?.is_none() {
                        return Ok(None);
                    }
                    found.insert(o.clone(), (p.clone(), Vec::new()));
                }
                None => match pull::realisation(cache, key, o, &self.trusted)? {
                    Some(r) => {
                        found.insert(o.clone(), (r.out_path, r.signatures));
                    }
                    None => return Ok(None),
                },
            }
        }
        Ok(Some(found))
    }
}

impl Substituter for Caches {
    fn substitute(
        &self,
        store: &LocalStore,
        _drv: &StorePath,
        key: &str,
        outputs: &[(String, Option<StorePath>)],
    ) -> Result<Option<BTreeMap<String, StorePath>>, String> {
        let mut failed: Vec<String> = Vec::new();
        for (i, cache) in self.caches.iter().enumerate() {
            if self
                .disabled
                .lock()
                .map(|d| d.contains(&i))
                .unwrap_or(false)
            {
                continue;
            }
            let found = match self.query(cache.as_ref(), key, outputs) {
                Ok(Some(f)) => f,
                Ok(None) => continue,
                Err(e) => {
                    self.disable(i, &e);
                    continue;
                }
            };
            let paths: Vec<StorePath> = found.values().map(|(p, _)| p.clone()).collect();
            match pull::pull(store, cache.as_ref(), &paths, &self.trusted, |_, _| {}) {
                Ok(_) => {
                    let mut out = BTreeMap::new();
                    for (o, (p, sigs)) in found {
                        if outputs.iter().any(|(n, f)| *n == o && f.is_none()) {
                            store
                                .add_realisation(key, &o, &p, &sigs)
                                .map_err(|e| e.to_string())?;
                        }
                        out.insert(o, p);
                    }
                    return Ok(Some(out));
                }
                Err(e) => {
                    eprintln!("warning: {e}");
                    failed.push(format!("{e}"));
                }
            }
        }
        if failed.is_empty() || self.fallback {
            if !failed.is_empty() {
                eprintln!("warning: building instead (--fallback)");
            }
            return Ok(None);
        }
        Err(format!(
            "{}; pass --fallback to build it instead",
            failed.join("; ")
        ))
    }
}
