//! Substitution for `rocmx build`: the configured binary caches as the realiser's
//! [`Substituter`].
//!
//! Owns: the policy. Caches are asked in the order of `substituters` (or
//! `--substituters`), the queries of one wave of the realiser concurrently (up to
//! [`par::DEFAULT_JOBS`] in flight), as are the narinfos of a fetch, level by level,
//! and the downloads (each after the paths it refers to); a floating output is found through its realisation
//! (`realisations/<resolved drv hash>!<output>.json`), a fixed one through its path's
//! narinfo; a cache must have every output of the derivation. A cache that cannot be
//! asked (unreachable, an error, a malformed or untrusted answer) is skipped with a
//! warning naming it, and not asked again in this run. When a cache had the outputs
//! but delivering a path failed (a NAR that does not match, a missing file), the next
//! cache that has the path is tried; when none is left, the realiser builds the
//! derivation with `--fallback` ([`Substituter::fall_back`]), and it is an error naming
//! the cache without it. `--offline` turns substitution off. HTTP
//! caches use the `connect-timeout` and `stalled-download-timeout` settings.
//!
//! With `require-sigs-count N` above 1, a floating output is taken only when at least
//! N distinct trusted keys signed realisations that agree on its path: every cache is
//! asked, and their answers are weighed together by [`crate::quorum`]; otherwise the
//! derivation is built, with a warning naming the claims (a disagreement between
//! caches shows there). With 1 (the default) the first cache that has a trusted
//! realisation is believed, as before.
//!
//! Must not: register anything `rocmx_cache` did not check, or print anything but
//! warnings.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Mutex;

use rocmx_builder::events::{Event, EventSink};
use rocmx_builder::realise::{Download, Found, Query, Substituter};
use rocmx_cache::keys::TrustedKeys;
use rocmx_cache::narinfo::NarInfo;
use rocmx_cache::transport::{self, Transport};
use rocmx_cache::{par, pull, CacheError};
use rocmx_store::{LocalStore, StorePath};

use crate::quorum::{self, Verdict};

/// The caches of one run.
pub struct Caches {
    caches: Vec<Box<dyn Transport>>,
    trusted: TrustedKeys,
    fallback: bool,
    /// `require-sigs-count`: distinct trusted signers a floating output's path needs.
    require_sigs: usize,
    /// Requests in flight at most.
    jobs: usize,
    /// Caches that failed a query: not asked again.
    disabled: Mutex<BTreeSet<usize>>,
    /// The realisations (`<drvhash>!<output>`) a `require-sigs-count` warning was given
    /// for: a derivation may be looked up again before it is built, warned about once.
    warned: Mutex<BTreeSet<String>>,
    /// The narinfos [`Substituter::plan`] found, by path, with the cache that has it.
    planned: Mutex<HashMap<StorePath, (usize, NarInfo)>>,
}

impl std::fmt::Debug for Caches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let urls: Vec<&str> = self.caches.iter().map(|c| c.url()).collect();
        write!(f, "Caches({urls:?})")
    }
}

impl Caches {
    /// The caches named in `urls` (white-space separated), trusting `trusted`
    /// (white-space separated public keys), taking a floating output only when
    /// `require_sigs` of them signed its path (see the module documentation).
    pub fn new(
        urls: &str,
        trusted: &str,
        fallback: bool,
        require_sigs: usize,
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
            require_sigs: require_sigs.max(1),
            jobs: par::DEFAULT_JOBS,
            disabled: Mutex::new(BTreeSet::new()),
            warned: Mutex::new(BTreeSet::new()),
            planned: Mutex::new(HashMap::new()),
        })
    }

    /// Whether there is no cache.
    pub fn is_empty(&self) -> bool {
        self.caches.is_empty()
    }

    fn disable(&self, i: usize, e: &CacheError) {
        let mut d = self.disabled.lock().unwrap_or_else(|e| e.into_inner());
        // Concurrent queries may fail together: one warning per cache.
        if d.insert(i) {
            eprintln!(
                "warning: {e}; not asking '{}' again in this run",
                self.caches[i].url()
            );
        }
    }

    /// The caches not disabled, in order.
    fn enabled(&self) -> Vec<(usize, &dyn Transport)> {
        let d = self.disabled.lock().unwrap_or_else(|e| e.into_inner());
        self.caches
            .iter()
            .enumerate()
            .filter(|(i, _)| !d.contains(i))
            .map(|(i, c)| (i, c.as_ref()))
            .collect()
    }

    /// Where `cache` has every output of `q`; `None` if it lacks one.
    fn query_cache(&self, cache: &dyn Transport, q: &Query) -> Result<Option<Found>, CacheError> {
        let mut found = Found {
            outputs: BTreeMap::new(),
            signatures: BTreeMap::new(),
            source: cache.url().to_string(),
        };
        for (o, fixed) in &q.outputs {
            match (fixed, &q.key) {
                (Some(p), _) => {
                    if pull::narinfo(cache, p, &self.trusted)?.is_none() {
                        return Ok(None);
                    }
                    found.outputs.insert(o.clone(), p.clone());
                }
                (None, Some(key)) => match pull::realisation(cache, key, o, &self.trusted)? {
                    Some(r) => {
                        found.outputs.insert(o.clone(), r.out_path);
                        found.signatures.insert(o.clone(), r.signatures);
                    }
                    None => return Ok(None),
                },
                (None, None) => return Ok(None),
            }
        }
        Ok(Some(found))
    }

    /// The first cache, in order, with every output of `q`; with `require-sigs-count`
    /// above 1 and a floating output, what the caches vouch for together.
    fn query_one(&self, q: &Query) -> Option<Found> {
        if self.require_sigs > 1 && q.key.is_some() && q.outputs.iter().any(|(_, f)| f.is_none()) {
            return self.query_quorum(q);
        }
        for (i, cache) in self.enabled() {
            match self.query_cache(cache, q) {
                Ok(Some(f)) => return Some(f),
                Ok(None) => {}
                Err(e) => self.disable(i, &e),
            }
        }
        None
    }

    /// Every output of `q` from all the caches together: a fixed one from the first
    /// cache with its narinfo, a floating one when [`quorum::decide`] accepts a path;
    /// `None` (with a warning when caches disagree or signers are too few) otherwise.
    fn query_quorum(&self, q: &Query) -> Option<Found> {
        let enabled = self.enabled();
        let mut found = Found {
            outputs: BTreeMap::new(),
            signatures: BTreeMap::new(),
            source: String::new(),
        };
        for (o, fixed) in &q.outputs {
            if let Some(p) = fixed {
                let (i, _) = self.narinfo_any(p, None).ok()?;
                if found.source.is_empty() {
                    found.source = self.caches[i].url().to_string();
                }
                found.outputs.insert(o.clone(), p.clone());
                continue;
            }
            let key = q.key.as_deref()?;
            let mut answers = Vec::new();
            for (i, cache) in &enabled {
                match pull::realisation(*cache, key, o, &self.trusted) {
                    Ok(Some(r)) => answers.push((cache.url().to_string(), r)),
                    Ok(None) => {}
                    Err(e) => self.disable(*i, &e),
                }
            }
            let verdict = quorum::decide(&answers, &self.trusted, self.require_sigs);
            let what = format!("{key}!{o}");
            if let Some(w) = verdict.describe(&what, self.require_sigs) {
                let mut warned = self.warned.lock().unwrap_or_else(|e| e.into_inner());
                if warned.insert(what) {
                    eprintln!("warning: {w}");
                }
            }
            match verdict {
                Verdict::Accepted { accepted, .. } => {
                    if found.source.is_empty() {
                        found.source = accepted.caches.first().cloned().unwrap_or_default();
                    }
                    found.outputs.insert(o.clone(), accepted.out_path);
                    found.signatures.insert(o.clone(), accepted.signatures);
                }
                Verdict::Absent | Verdict::Refused { .. } => return None,
            }
        }
        Some(found)
    }

    /// The first cache, in order, with a trusted narinfo of `p`, skipping `except`.
    fn narinfo_any(
        &self,
        p: &StorePath,
        except: Option<usize>,
    ) -> Result<(usize, NarInfo), CacheError> {
        for (i, cache) in self.enabled() {
            if Some(i) == except {
                continue;
            }
            match pull::narinfo(cache, p, &self.trusted) {
                Ok(Some(ni)) => return Ok((i, ni)),
                Ok(None) => {}
                Err(e) => self.disable(i, &e),
            }
        }
        let urls: Vec<&str> = self.caches.iter().map(|c| c.url()).collect();
        Err(CacheError::Missing {
            cache: urls.join("', '"),
            path: p.clone(),
        })
    }

    /// Fetches one planned path: from its cache, else from the next that has it.
    fn fetch_path(
        &self,
        store: &LocalStore,
        first: usize,
        ni: &NarInfo,
        events: &dyn EventSink,
    ) -> Result<(), CacheError> {
        let p = &ni.store_path;
        let mut source = (first, ni.clone());
        let mut tried = BTreeSet::new();
        loop {
            let (i, ni) = &source;
            tried.insert(*i);
            let cache = self.caches[*i].as_ref();
            let downloaded = std::cell::Cell::new(0u64);
            let r = pull::fetch_one(store, cache, ni, &|n| {
                downloaded.set(downloaded.get() + n);
                events.event(&Event::Downloaded {
                    path: p.clone(),
                    bytes: n,
                });
            });
            match r {
                Ok(_) => {
                    events.event(&Event::Fetched {
                        path: p.clone(),
                        source: cache.url().to_string(),
                        bytes: downloaded.get(),
                    });
                    return Ok(());
                }
                Err(e) => {
                    eprintln!("warning: {e}");
                    // Another cache that has it, if any.
                    let next = self
                        .enabled()
                        .into_iter()
                        .filter(|(j, _)| !tried.contains(j))
                        .find_map(|(j, c)| match pull::narinfo(c, p, &self.trusted) {
                            Ok(Some(ni)) => Some((j, ni)),
                            Ok(None) => None,
                            Err(e) => {
                                self.disable(j, &e);
                                None
                            }
                        });
                    match next {
                        Some(n) => source = n,
                        None => return Err(e),
                    }
                }
            }
        }
    }
}

impl Substituter for Caches {
    fn query(&self, queries: &[Query]) -> Vec<Option<Found>> {
        par::map(queries, self.jobs, |q| self.query_one(q))
    }

    fn plan(&self, store: &LocalStore, paths: &[StorePath]) -> Result<Vec<Download>, String> {
        let planned = pull::plan_with(store, paths, self.jobs, |p| {
            let (i, ni) = self.narinfo_any(p, None)?;
            self.planned
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(p.clone(), (i, ni.clone()));
            Ok(ni)
        })
        .map_err(|e| e.to_string())?;
        let sources = self.planned.lock().unwrap_or_else(|e| e.into_inner());
        Ok(planned
            .into_values()
            .map(|ni| {
                let source = sources
                    .get(&ni.store_path)
                    .map(|(i, _)| self.caches[*i].url().to_string())
                    .unwrap_or_default();
                Download {
                    path: ni.store_path.clone(),
                    download_size: ni.file_size,
                    nar_size: ni.nar_size,
                    source,
                }
            })
            .collect())
    }

    fn fetch(
        &self,
        store: &LocalStore,
        downloads: &[Download],
        events: &dyn EventSink,
    ) -> Result<(), String> {
        let mut planned: BTreeMap<StorePath, NarInfo> = BTreeMap::new();
        let mut first: HashMap<StorePath, usize> = HashMap::new();
        {
            let known = self.planned.lock().unwrap_or_else(|e| e.into_inner());
            for d in downloads {
                let (i, ni) = match known.get(&d.path) {
                    Some(x) => x.clone(),
                    None => self.narinfo_any(&d.path, None).map_err(|e| e.to_string())?,
                };
                first.insert(d.path.clone(), i);
                planned.insert(d.path.clone(), ni);
            }
        }
        let failures = pull::fetch_planned(&planned, self.jobs, |ni| {
            self.fetch_path(store, first[&ni.store_path], ni, events)
        });
        if failures.is_empty() {
            return Ok(());
        }
        let mut msgs: Vec<String> = Vec::new();
        for (p, e) in &failures {
            let m = e.to_string();
            if m.starts_with("not fetched") {
                msgs.push(format!("{p}: {m}"));
            } else {
                msgs.push(m);
            }
        }
        Err(msgs.join("; "))
    }

    fn fall_back(&self) -> bool {
        if self.fallback {
            eprintln!("warning: building instead (--fallback)");
        }
        self.fallback
    }
}
