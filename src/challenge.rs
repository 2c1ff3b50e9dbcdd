//! Challenging binary caches (`rocmx challenge`): do they serve, for the derivations
//! realised here, the same outputs as this store has?
//!
//! Owns: the walk and the comparison. The goals' derivation closure is read from the
//! `.drv` files (dependencies first; a fixed-output derivation's inputs are not
//! followed: its path is known, and its content is checked against its declared hash
//! wherever it is fetched, so it is not challenged). Each derivation is resolved as the
//! realiser resolves it (against the outputs realised here, [`rocmx_builder::resolve`]),
//! and each floating output with a local realisation under the resolved hash is put to
//! every cache: its realisation for the same `<drvhash>!<output>`
//! (`realisations/<drvhash>!<output>.json`) and the narinfo of the path it names. As
//! outputs are content-addressed, another path means other bytes; the same path with
//! another `NarHash` is a difference too. A derivation that cannot be resolved here (an
//! input not realised) or has no local realisation is *not built here*.
//!
//! A record no trusted key signed, or one that does not parse or names something else,
//! is a *problem* of that cache for that output (never compared, never a panic). A
//! cache that cannot be asked (an error, a timeout) is skipped for the rest of the run
//! with a warning, as substitution does. Requests run concurrently (up to
//! [`par::DEFAULT_JOBS`]).
//!
//! Must not: fetch NARs, register or change anything in the store, or print anything
//! but those warnings (rendering is `cmd/challenge.rs`'s).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Mutex;

use rocmx_builder::resolve::{self, ResolvedInput};
use rocmx_cache::keys::TrustedKeys;
use rocmx_cache::transport::Transport;
use rocmx_cache::{par, pull, CacheError};
use rocmx_store::{Derivation, Hash, LocalStore, StorePath};

/// What one cache says about one output realised here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// It realised it to the same path (with the same `NarHash`, when its narinfo says).
    Agree { nar_hash: Option<Hash> },
    /// It realised it to another path, or gives the same path another `NarHash`.
    Differ {
        path: StorePath,
        nar_hash: Option<Hash>,
    },
    /// It has no realisation of it.
    Absent,
    /// Its realisation cannot be used (see [`Answer::problem`]).
    Unusable,
    /// The cache failed earlier in the run, or now: not asked.
    Skipped,
}

/// One cache's answer for one output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The cache's index in [`Report::caches`].
    pub cache: usize,
    pub verdict: Verdict,
    /// What is wrong with what it serves (an untrusted or malformed realisation, a
    /// narinfo that is missing, untrusted or malformed), naming the cache.
    pub problem: Option<String>,
}

/// The overall state of one output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Some cache has it, and every cache that has it agrees.
    Agree,
    /// Some cache differs.
    Differ,
    /// No cache has a usable realisation of it.
    NotInCache,
}

/// One floating output realised here, and what the caches say.
#[derive(Debug, Clone)]
pub struct Output {
    pub name: String,
    /// The local path and its NAR hash.
    pub path: StorePath,
    pub nar_hash: Hash,
    /// One per cache, in the order of [`Report::caches`].
    pub answers: Vec<Answer>,
}

impl Output {
    /// The output's overall state (see [`Status`]).
    pub fn status(&self) -> Status {
        if self
            .answers
            .iter()
            .any(|a| matches!(a.verdict, Verdict::Differ { .. }))
        {
            Status::Differ
        } else if self
            .answers
            .iter()
            .any(|a| matches!(a.verdict, Verdict::Agree { .. }))
        {
            Status::Agree
        } else {
            Status::NotInCache
        }
    }
}

/// One derivation of the closure.
#[derive(Debug, Clone)]
pub enum Entry {
    /// Every output is fixed: not challenged.
    Fixed,
    /// It cannot be resolved here, or none of its floating outputs is realised here.
    NotBuilt { why: String },
    /// Its floating outputs realised here (`missing`: those that are not).
    Realised {
        key: String,
        outputs: Vec<Output>,
        missing: Vec<String>,
    },
}

/// The result of a challenge.
#[derive(Debug, Clone)]
pub struct Report {
    /// The caches' URLs, in the order given.
    pub caches: Vec<String>,
    /// The caches skipped because they failed, with the error.
    pub skipped: BTreeMap<usize, String>,
    /// Every derivation of the closure, dependencies first.
    pub derivations: Vec<(StorePath, Entry)>,
}

/// Why a challenge could not be made at all.
#[derive(Debug, thiserror::Error)]
pub enum ChallengeError {
    /// A `.drv` of the closure cannot be read.
    #[error("reading the derivation '{drv}': {why}")]
    Derivation { drv: StorePath, why: String },
    /// The local store failed.
    #[error(transparent)]
    Store(#[from] rocmx_store::StoreError),
}

/// The derivation's `name`, or its file name without `.drv` (as the realiser names it
/// when resolving its dependents).
fn drv_name(d: &Derivation, p: &StorePath) -> String {
    d.name()
        .map(str::to_string)
        .unwrap_or_else(|| p.name().trim_end_matches(".drv").to_string())
}

fn read_drv(store: &LocalStore, p: &StorePath) -> Result<Derivation, ChallengeError> {
    let bad = |why: String| ChallengeError::Derivation {
        drv: p.clone(),
        why,
    };
    let text = std::fs::read_to_string(store.real_path(p)).map_err(|e| bad(e.to_string()))?;
    Derivation::parse(&text).map_err(|e| bad(e.to_string()))
}

fn all_fixed(d: &Derivation) -> bool {
    !d.outputs.is_empty() && d.outputs.values().all(|o| o.path().is_some())
}

/// The derivation closure of `goals`, dependencies first (inputs in path order); the
/// inputs of fixed-output derivations are not followed.
pub fn closure(
    store: &LocalStore,
    goals: &[StorePath],
) -> Result<Vec<(StorePath, Derivation)>, ChallengeError> {
    let mut out = Vec::new();
    let mut seen: BTreeSet<StorePath> = BTreeSet::new();
    for g in goals {
        if !seen.insert(g.clone()) {
            continue;
        }
        let d = read_drv(store, g)?;
        // (derivation, its inputs still to visit, in reverse)
        let mut stack = vec![(g.clone(), inputs_of(&d), d)];
        while let Some((_, todo, _)) = stack.last_mut() {
            match todo.pop() {
                Some(i) => {
                    if seen.insert(i.clone()) {
                        let d = read_drv(store, &i)?;
                        stack.push((i, inputs_of(&d), d));
                    }
                }
                None => {
                    if let Some((p, _, d)) = stack.pop() {
                        out.push((p, d));
                    }
                }
            }
        }
    }
    Ok(out)
}

fn inputs_of(d: &Derivation) -> Vec<StorePath> {
    if all_fixed(d) {
        return Vec::new();
    }
    d.input_drvs.keys().rev().cloned().collect()
}

/// A local output to put to the caches.
struct Job {
    /// Index into the derivations, and into their outputs.
    drv: usize,
    output: usize,
    key: String,
    name: String,
    path: StorePath,
    nar_hash: Hash,
}

/// Challenges `caches` (opened, in order) with the closure of `goals`, trusting
/// `trusted` (see the module documentation).
pub fn challenge(
    store: &LocalStore,
    goals: &[StorePath],
    caches: &[Box<dyn Transport>],
    trusted: &TrustedKeys,
) -> Result<Report, ChallengeError> {
    let drvs = closure(store, goals)?;
    let names: HashMap<&StorePath, String> =
        drvs.iter().map(|(p, d)| (p, drv_name(d, p))).collect();
    // What each derivation's outputs are here, for resolving its dependents.
    let mut known: HashMap<StorePath, BTreeMap<String, StorePath>> = HashMap::new();
    let mut entries: Vec<(StorePath, Entry)> = Vec::new();
    let mut jobs: Vec<Job> = Vec::new();
    for (p, d) in &drvs {
        if all_fixed(d) {
            let outs = d
                .outputs
                .iter()
                .filter_map(|(o, spec)| spec.path().map(|x| (o.clone(), x.clone())))
                .collect();
            known.insert(p.clone(), outs);
            entries.push((p.clone(), Entry::Fixed));
            continue;
        }
        let mut inputs = BTreeMap::new();
        let mut unresolved = None;
        for input in d.input_drvs.keys() {
            match known.get(input) {
                Some(outs) => {
                    inputs.insert(
                        input.clone(),
                        ResolvedInput {
                            name: names.get(input).cloned().unwrap_or_default(),
                            outputs: outs.clone(),
                        },
                    );
                }
                None => {
                    unresolved = Some(input.clone());
                    break;
                }
            }
        }
        if let Some(i) = unresolved {
            entries.push((
                p.clone(),
                Entry::NotBuilt {
                    why: format!("its input {i} is not built here"),
                },
            ));
            continue;
        }
        let resolved = match resolve::resolve(d, &inputs) {
            Ok(r) => r,
            Err(e) => {
                let why = match e {
                    // Only some of its outputs were realised here.
                    resolve::ResolveError::MissingOutput { drv, output } => {
                        format!("the output '{output}' of its input {drv} is not built here")
                    }
                    e => e.to_string(),
                };
                entries.push((p.clone(), Entry::NotBuilt { why }));
                continue;
            }
        };
        let key = resolve::resolved_hash(&resolved);
        let mut outs = BTreeMap::new();
        let mut outputs = Vec::new();
        let mut missing = Vec::new();
        for (o, spec) in &d.outputs {
            if let Some(fixed) = spec.path() {
                outs.insert(o.clone(), fixed.clone());
                continue;
            }
            match store.query_realisation(&key, o)? {
                Some(path) => {
                    let Some(info) = store.path_info(&path)? else {
                        missing.push(o.clone());
                        continue;
                    };
                    outs.insert(o.clone(), path.clone());
                    jobs.push(Job {
                        drv: entries.len(),
                        output: outputs.len(),
                        key: key.clone(),
                        name: o.clone(),
                        path: path.clone(),
                        nar_hash: info.nar_hash,
                    });
                    outputs.push(Output {
                        name: o.clone(),
                        path,
                        nar_hash: info.nar_hash,
                        answers: Vec::new(),
                    });
                }
                None => missing.push(o.clone()),
            }
        }
        if outputs.is_empty() {
            entries.push((
                p.clone(),
                Entry::NotBuilt {
                    why: format!("no realisation of {key} is recorded here"),
                },
            ));
        } else {
            known.insert(p.clone(), outs);
            entries.push((
                p.clone(),
                Entry::Realised {
                    key,
                    outputs,
                    missing,
                },
            ));
        }
    }

    let asker = Asker {
        caches,
        trusted,
        skipped: Mutex::new(BTreeMap::new()),
    };
    let pairs: Vec<(usize, usize)> = (0..jobs.len())
        .flat_map(|j| (0..caches.len()).map(move |c| (j, c)))
        .collect();
    let answers = par::map(&pairs, par::DEFAULT_JOBS, |&(j, c)| asker.ask(&jobs[j], c));
    for (&(j, _), a) in pairs.iter().zip(answers) {
        let job = &jobs[j];
        if let Entry::Realised { outputs, .. } = &mut entries[job.drv].1 {
            outputs[job.output].answers.push(a);
        }
    }
    let skipped = asker
        .skipped
        .into_inner()
        .unwrap_or_else(|e| e.into_inner());
    Ok(Report {
        caches: caches.iter().map(|c| c.url().to_string()).collect(),
        skipped,
        derivations: entries,
    })
}

/// Asks the caches, remembering those that fail.
struct Asker<'a> {
    caches: &'a [Box<dyn Transport>],
    trusted: &'a TrustedKeys,
    skipped: Mutex<BTreeMap<usize, String>>,
}

/// Whether an error is the cache's failure to answer (rather than what it answered).
fn is_transport(e: &CacheError) -> bool {
    matches!(
        e,
        CacheError::Url { .. } | CacheError::Io { .. } | CacheError::Http { .. }
    )
}

impl Asker<'_> {
    fn is_skipped(&self, c: usize) -> bool {
        self.skipped
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains_key(&c)
    }

    /// Skips cache `c` from now on, warning once.
    fn skip(&self, c: usize, e: &CacheError) {
        let mut s = self.skipped.lock().unwrap_or_else(|e| e.into_inner());
        if let std::collections::btree_map::Entry::Vacant(v) = s.entry(c) {
            eprintln!(
                "warning: {e}; not asking '{}' again in this run",
                self.caches[c].url()
            );
            v.insert(e.to_string());
        }
    }

    fn answer(&self, c: usize, verdict: Verdict, problem: Option<String>) -> Answer {
        Answer {
            cache: c,
            verdict,
            problem,
        }
    }

    /// What cache `c` says about `job`.
    fn ask(&self, job: &Job, c: usize) -> Answer {
        if self.is_skipped(c) {
            return self.answer(c, Verdict::Skipped, None);
        }
        let cache = self.caches[c].as_ref();
        let r = match pull::realisation(cache, &job.key, &job.name, self.trusted) {
            Ok(Some(r)) => r,
            Ok(None) => return self.answer(c, Verdict::Absent, None),
            Err(e) if is_transport(&e) => {
                self.skip(c, &e);
                return self.answer(c, Verdict::Skipped, None);
            }
            Err(e) => return self.answer(c, Verdict::Unusable, Some(e.to_string())),
        };
        let (nar_hash, problem) = match pull::narinfo(cache, &r.out_path, self.trusted) {
            Ok(Some(ni)) => (Some(ni.nar_hash), None),
            Ok(None) => (
                None,
                Some(format!(
                    "cache '{}' has the realisation {}!{} but no narinfo of {}",
                    cache.url(),
                    job.key,
                    job.name,
                    r.out_path
                )),
            ),
            Err(e) if is_transport(&e) => {
                self.skip(c, &e);
                (None, None)
            }
            Err(e) => (None, Some(e.to_string())),
        };
        let verdict = if r.out_path != job.path || nar_hash.is_some_and(|h| h != job.nar_hash) {
            Verdict::Differ {
                path: r.out_path,
                nar_hash,
            }
        } else {
            Verdict::Agree { nar_hash }
        };
        self.answer(c, verdict, problem)
    }
}

/// The counts of the summary line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Summary {
    /// Floating outputs realised here.
    pub outputs: usize,
    pub agree: usize,
    pub differ: usize,
    pub not_in_cache: usize,
    /// Derivations not built here, and fixed-output ones (not challenged).
    pub not_built: usize,
    pub fixed: usize,
    /// Answers with a problem.
    pub problems: usize,
}

impl Report {
    /// Counts outputs by [`Status`], and the rest.
    pub fn summary(&self) -> Summary {
        let mut s = Summary::default();
        for (_, e) in &self.derivations {
            match e {
                Entry::Fixed => s.fixed += 1,
                Entry::NotBuilt { .. } => s.not_built += 1,
                Entry::Realised { outputs, .. } => {
                    for o in outputs {
                        s.outputs += 1;
                        match o.status() {
                            Status::Agree => s.agree += 1,
                            Status::Differ => s.differ += 1,
                            Status::NotInCache => s.not_in_cache += 1,
                        }
                        s.problems += o.answers.iter().filter(|a| a.problem.is_some()).count();
                    }
                }
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out(verdicts: &[Verdict]) -> Output {
        Output {
            name: "out".into(),
            path: format!("/rocmx/store/{}-x", "v".repeat(32))
                .parse()
                .unwrap(),
            nar_hash: Hash::parse(&format!("blake3:{}", "1".repeat(52))).unwrap(),
            answers: verdicts
                .iter()
                .enumerate()
                .map(|(i, v)| Answer {
                    cache: i,
                    verdict: v.clone(),
                    problem: None,
                })
                .collect(),
        }
    }

    #[test]
    fn one_differing_cache_makes_a_difference() {
        let other: StorePath = format!("/rocmx/store/{}-x", "s".repeat(32))
            .parse()
            .unwrap();
        let agree = Verdict::Agree { nar_hash: None };
        let differ = Verdict::Differ {
            path: other,
            nar_hash: None,
        };
        assert_eq!(
            out(&[agree.clone(), Verdict::Absent]).status(),
            Status::Agree
        );
        assert_eq!(out(&[agree, differ.clone()]).status(), Status::Differ);
        assert_eq!(out(&[Verdict::Absent, differ]).status(), Status::Differ);
        assert_eq!(
            out(&[Verdict::Absent, Verdict::Unusable, Verdict::Skipped]).status(),
            Status::NotInCache
        );
        assert_eq!(out(&[]).status(), Status::NotInCache);
    }
}
