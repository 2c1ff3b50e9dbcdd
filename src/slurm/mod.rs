//! Builds on a Slurm cluster, with a binary cache as the only transport.
//!
//! Owns: [`Slurm`], the [`Executor`] behind `--builders slurm…`: for each build the
//! realiser hands it, it writes the resolved derivation into the local store, pushes
//! it with its input closure (signed) to the builder cache, submits one job with
//! `sbatch` that runs `rocmx build-remote` on a node (which substitutes the inputs
//! from that cache, builds in its own sandbox and store, and pushes the signed outputs
//! and realisation back), follows the job through `squeue` while streaming its log
//! file, and finally fetches the realisation and outputs from the cache, checked like
//! any substitution. Ctrl-C cancels (`scancel`) every job this run has in flight; a job
//! lost with its node (`NODE_FAIL`, `BOOT_FAIL`, or gone from the queue) is submitted
//! once more, then reported.
//!
//! Nothing passes between the submitter and the jobs but the builder cache and the
//! job's two output files (its build log and rocmx's messages, in the `logs`
//! directory, which the nodes must share with the submitter).
//!
//! Must not: schedule (Slurm does; the realiser decides what is ready), or accept
//! anything from the cache that no trusted key signed.

pub mod batch;
pub mod spec;

use std::collections::{BTreeSet, HashMap};
use std::fs;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rocmx_builder::events::RemoteState;
use rocmx_builder::executor::{Executor, RemoteBuild, RemoteFailure, RemoteOutputs};
use rocmx_cache::keys::{SecretKey, TrustedKeys};
use rocmx_cache::transport::{self, Transport};
use rocmx_cache::{pull, push};
use rocmx_store::{Derivation, DerivationOutput, LocalStore, StorePath};

use batch::{Listed, Phase, Resources};
pub use spec::Spec;

/// The Slurm executor of one run. See the module documentation.
pub struct Slurm {
    spec: Spec,
    name: String,
    cache: Box<dyn Transport>,
    keys: Vec<SecretKey>,
    trusted: TrustedKeys,
    rocmx: PathBuf,
    logs: PathBuf,
    queue: Queue,
    /// Jobs of this run not finished yet: what Ctrl-C cancels.
    active: Arc<Mutex<BTreeSet<u64>>>,
    submitted: AtomicU64,
    _cancel: crate::interrupt::HookGuard,
}

impl std::fmt::Debug for Slurm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Slurm({}, cache {})", self.name, self.cache.url())
    }
}

impl Slurm {
    /// The executor for `spec`, moving data through the cache at `cache_url`;
    /// `state_dir` is the local store's (the default place of the jobs' log files).
    pub fn new(
        spec: Spec,
        cache_url: &str,
        cfg: &crate::config::Config,
        state_dir: &Path,
    ) -> Result<Slurm, String> {
        let tokens = cfg.access_tokens()?;
        let cache = transport::open_with_tokens(cache_url, transport::Timeouts::default(), &tokens)
            .map_err(|e| format!("--builder-cache: {e}"))?;
        cache.writable().map_err(|e| {
            format!("--builder-cache {cache_url}: the jobs push their outputs there, so it must be writable: {e}")
        })?;
        let keys = cfg.secret_keys()?;
        if keys.is_empty() {
            return Err(
                "--builders slurm signs what it hands to the jobs and checks what they \
                 give back: set secret-key-files (make a key with `rocmx key generate NAME \
                 --secret-key-file PATH`) and put its public key in trusted-public-keys, here \
                 and on the nodes"
                    .into(),
            );
        }
        let trusted = cfg.trusted_keys()?;
        let rocmx = match &spec.rocmx {
            Some(p) => p.clone(),
            None => std::env::current_exe()
                .map_err(|e| format!("finding this rocmx for the jobs: {e}; set rocmx=PATH"))?,
        };
        let logs = spec.logs.clone().unwrap_or_else(|| state_dir.join("slurm"));
        fs::create_dir_all(&logs)
            .map_err(|e| format!("creating the jobs' log directory '{}': {e}", logs.display()))?;
        match Command::new("sbatch").arg("--version").output() {
            Ok(o) if o.status.success() => {}
            Ok(o) => {
                return Err(format!(
                    "--builders {}: `sbatch --version` failed: {}",
                    spec.name(),
                    String::from_utf8_lossy(&o.stderr).trim()
                ))
            }
            Err(e) => {
                return Err(format!(
                    "--builders {}: cannot run sbatch ({e}); install Slurm's client commands \
                     (Debian: slurm-client) and point SLURM_CONF at the cluster's slurm.conf",
                    spec.name()
                ))
            }
        }
        let active: Arc<Mutex<BTreeSet<u64>>> = Arc::default();
        let cancel = {
            let active = active.clone();
            crate::interrupt::on_interrupt(move || {
                let ids: Vec<String> = match active.try_lock() {
                    Ok(a) => a.iter().map(u64::to_string).collect(),
                    Err(_) => return,
                };
                if !ids.is_empty() {
                    eprintln!("cancelling Slurm jobs {}", ids.join(" "));
                    let _ = Command::new("scancel").args(&ids).status();
                }
            })
        };
        Ok(Slurm {
            name: spec.name(),
            queue: Queue::new(spec.poll),
            spec,
            cache,
            keys,
            trusted,
            rocmx,
            logs,
            active,
            submitted: AtomicU64::new(0),
            _cancel: cancel,
        })
    }

    /// The builder cache's URL.
    pub fn cache_url(&self) -> &str {
        self.cache.url()
    }

    /// Submits the job that builds `rdrv`; gives its id and its two output files.
    fn submit(
        &self,
        b: &RemoteBuild<'_>,
        rdrv: &StorePath,
        r: &Resources,
    ) -> Result<(u64, PathBuf, PathBuf), String> {
        let n = self.submitted.fetch_add(1, Ordering::Relaxed);
        let base = format!("{}-{}-{n}", b.drv.hash_part(), std::process::id());
        let out = self.logs.join(format!("{base}.log"));
        let err = self.logs.join(format!("{base}.err"));
        let q = |p: &Path| batch::shell_quote(&p.to_string_lossy());
        let url = batch::shell_quote(self.cache.url());
        // The node's own store: the submitter's ROCMX_STORE must not follow the job
        // (Slurm passes the environment on).
        let mut script = format!("exec env -u ROCMX_STORE {}", q(&self.rocmx));
        if let Some(s) = &self.spec.store {
            script.push_str(&format!(" --store {}", q(s)));
        }
        script.push_str(&format!(
            " build-remote {} --substituters {url} --push-to {url} --cores {}",
            batch::shell_quote(&rdrv.to_absolute()),
            r.cpus
        ));
        if let Some(t) = b.timeout {
            script.push_str(&format!(" --timeout {}", t.as_secs()));
        }
        let args = batch::sbatch_args(&self.spec, b.name, r, &out, &err, &script);
        let o = Command::new("sbatch")
            .args(&args)
            .output()
            .map_err(|e| format!("running sbatch: {e}"))?;
        let stdout = String::from_utf8_lossy(&o.stdout);
        match batch::parse_job_id(&stdout).filter(|_| o.status.success()) {
            Some(id) => {
                self.lock_active().insert(id);
                Ok((id, out, err))
            }
            None => Err(format!(
                "sbatch refused the job: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            )),
        }
    }

    fn lock_active(&self) -> std::sync::MutexGuard<'_, BTreeSet<u64>> {
        self.active.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Follows job `id` until it ends, copying its log file to `log`; gives how it
    /// ended.
    fn follow(
        &self,
        id: u64,
        out: &Path,
        log: &mut dyn Write,
        state: &dyn Fn(&str, RemoteState),
    ) -> Ending {
        let mut tail = Tail::new(out);
        let mut running = false;
        let mut unseen = 0;
        loop {
            tail.copy_to(log);
            let listed = self.queue.observe(id);
            let ending = match listed {
                Some(l) => match Phase::of(&l.state) {
                    Phase::Queued => None,
                    Phase::Running => {
                        if !running {
                            running = true;
                            state(&id.to_string(), RemoteState::Running);
                        }
                        None
                    }
                    phase => Some(Ending {
                        phase,
                        shown: show(id).unwrap_or(batch::Shown {
                            state: l.state,
                            reason: l.reason,
                            exit: None,
                        }),
                    }),
                },
                // Not in the queue: ask for it by id; unknown to Slurm twice means
                // lost (a controller that cannot be asked says nothing).
                None => match ask(id) {
                    Ok(Some(s))
                        if Phase::of(&s.state) != Phase::Queued
                            && Phase::of(&s.state) != Phase::Running =>
                    {
                        Some(Ending {
                            phase: Phase::of(&s.state),
                            shown: s,
                        })
                    }
                    Ok(Some(_)) | Err(()) => None,
                    Ok(None) => {
                        unseen += 1;
                        (unseen >= 2).then(|| Ending {
                            phase: Phase::Lost,
                            shown: batch::Shown {
                                state: "gone from the queue".into(),
                                ..batch::Shown::default()
                            },
                        })
                    }
                },
            };
            if let Some(e) = ending {
                // The node has closed the file: the rest of the log is there.
                tail.copy_to(log);
                self.lock_active().remove(&id);
                return e;
            }
            std::thread::sleep(self.spec.poll);
        }
    }

    /// The outputs of the build `b`, from the builder cache into `store`.
    fn fetch(&self, store: &LocalStore, b: &RemoteBuild<'_>) -> Result<RemoteOutputs, String> {
        let mut got = RemoteOutputs::default();
        for (name, out) in &b.resolved.outputs {
            match out {
                DerivationOutput::Fixed { path, .. } => {
                    got.outputs.insert(name.clone(), path.clone());
                }
                DerivationOutput::Floating { .. } => {
                    let r = pull::realisation(self.cache.as_ref(), b.key, name, &self.trusted)
                        .map_err(|e| e.to_string())?
                        .ok_or_else(|| {
                            format!(
                                "the job ended well, but the builder cache {} has no realisation {}!{name}",
                                self.cache.url(),
                                b.key
                            )
                        })?;
                    got.outputs.insert(name.clone(), r.out_path);
                    got.signatures.insert(name.clone(), r.signatures);
                }
            }
        }
        let paths: Vec<StorePath> = got.outputs.values().cloned().collect();
        pull::pull(store, self.cache.as_ref(), &paths, &self.trusted, |_, _| {})
            .map_err(|e| e.to_string())?;
        Ok(got)
    }
}

/// How a job ended.
struct Ending {
    phase: Phase,
    shown: batch::Shown,
}

impl Executor for Slurm {
    fn name(&self) -> &str {
        &self.name
    }

    fn slots(&self) -> usize {
        self.spec.slots
    }

    fn describe(&self, d: &Derivation) -> String {
        match Resources::of(d, &self.spec, None) {
            Ok(r) => format!("on {}: {}", self.name, r.describe()),
            Err(e) => format!("on {}: {e}", self.name),
        }
    }

    fn build(
        &self,
        store: &LocalStore,
        b: &RemoteBuild<'_>,
        log: &mut dyn Write,
        state: &dyn Fn(&str, RemoteState),
    ) -> Result<RemoteOutputs, RemoteFailure> {
        let fail = |job: Option<u64>, status: String, builder_failed: bool| RemoteFailure {
            job: job.map(|j| j.to_string()),
            status,
            builder_failed,
        };
        let resources = Resources::of(b.resolved, &self.spec, b.timeout.map(|t| t.as_secs()))
            .map_err(|e| fail(None, e, false))?;
        // The resolved derivation, self-contained, and its inputs, to the cache.
        let rdrv = store
            .add_text(
                b.drv.name(),
                b.resolved.to_aterm().as_bytes(),
                &b.resolved.input_srcs,
            )
            .and_then(|p| store.add_temp_root(&p).map(|()| p))
            .map_err(|e| fail(None, format!("writing the resolved derivation: {e}"), false))?;
        let opts = push::PushOptions {
            keys: self.keys.clone(),
            ..push::PushOptions::default()
        };
        push::push(
            store,
            self.cache.as_ref(),
            std::slice::from_ref(&rdrv),
            &opts,
            |_, _| {},
        )
        .map_err(|e| {
            fail(
                None,
                format!(
                    "pushing it and its inputs to the builder cache {}: {e}",
                    self.cache.url()
                ),
                false,
            )
        })?;
        // A job lost with its node is submitted once more.
        let mut resubmitted = false;
        loop {
            let (id, out, err) = self
                .submit(b, &rdrv, &resources)
                .map_err(|e| fail(None, e, false))?;
            let first = if resubmitted {
                RemoteState::Resubmitted
            } else {
                RemoteState::Queued
            };
            state(&id.to_string(), first);
            let end = self.follow(id, &out, log, state);
            match end.phase {
                Phase::Completed => {
                    state(&id.to_string(), RemoteState::Fetching);
                    return self
                        .fetch(store, b)
                        .map_err(|e| fail(Some(id), format!("fetching its outputs: {e}"), false));
                }
                Phase::Lost if !resubmitted => {
                    resubmitted = true;
                    let _ = writeln!(
                        log,
                        "rocmx: Slurm job {id} was lost ({}); submitting it again",
                        end.shown.state
                    );
                    continue;
                }
                _ => {
                    let (status, builder_failed) = failure_status(&end, &err, &resources);
                    return Err(fail(Some(id), status, builder_failed));
                }
            }
        }
    }
}

/// What to say of a job that did not complete, and whether its builder failed (as
/// opposed to the job's setup: fetching inputs, a refused derivation).
fn failure_status(end: &Ending, err: &Path, r: &Resources) -> (String, bool) {
    let s = &end.shown;
    let messages = fs::read_to_string(err).unwrap_or_default();
    // The job's first error, without the log tail it repeats (the build log itself
    // is the failure's tail).
    let said: Vec<&str> = messages
        .lines()
        .skip_while(|l| !l.starts_with("error: "))
        .take_while(|l| !l.starts_with("last lines of the build log:"))
        .take(6)
        .collect();
    let said = said.join("\n");
    let said = said.strip_prefix("error: ").unwrap_or(&said);
    let kind = s.state.split_whitespace().next().unwrap_or("");
    match kind {
        "TIMEOUT" => (
            format!(
                "build timed out after {} min (the job's Slurm time limit)",
                r.time_min.unwrap_or(0)
            ),
            true,
        ),
        "CANCELLED" => (format!("the job was cancelled ({})", s.state), false),
        "OUT_OF_MEMORY" => (
            "the job ran out of memory (raise requiredMemory or the mem parameter)".into(),
            true,
        ),
        _ => {
            let exit = s.exit.map(|(c, _)| c).unwrap_or(0);
            // `rocmx build-remote` exits 100–111 when the build itself failed.
            let builder_failed = (100..=111).contains(&exit);
            let mut m = format!("the job ended {}", s.state);
            if let Some((code, sig)) = s.exit {
                m.push_str(&format!(" (exit code {code}"));
                if sig != 0 {
                    m.push_str(&format!(", signal {sig}"));
                }
                m.push(')');
            }
            if !s.reason.is_empty() && s.reason != "None" {
                m.push_str(&format!(", reason {}", s.reason));
            }
            if !said.is_empty() {
                m.push_str(&format!(": {said}"));
            } else if end.phase == Phase::Lost {
                m.push_str("; it was lost twice");
            }
            (m, builder_failed)
        }
    }
}

/// `scontrol show job -o ID`, parsed; `None` when Slurm does not know the job (any
/// more) or could not be asked (see [`ask`]).
fn show(id: u64) -> Option<batch::Shown> {
    ask(id).ok().flatten()
}

/// `scontrol show job -o ID`: `Ok(None)` only when Slurm says it knows no such job;
/// `Err(())` when it could not be asked (the controller busy or unreachable), which
/// says nothing about the job.
fn ask(id: u64) -> Result<Option<batch::Shown>, ()> {
    let o = Command::new("scontrol")
        .args(["show", "job", "-o", &id.to_string()])
        .output()
        .map_err(|_| ())?;
    if let Some(s) = batch::parse_scontrol(&String::from_utf8_lossy(&o.stdout)) {
        return Ok(Some(s));
    }
    if String::from_utf8_lossy(&o.stderr).contains("Invalid job id") {
        Ok(None)
    } else {
        Err(())
    }
}

/// This user's jobs as `squeue` lists them, looked at once per poll interval however
/// many builds ask (one `squeue` for the whole run, not one per job).
struct Queue {
    poll: Duration,
    snapshot: Mutex<(Option<Instant>, HashMap<u64, Listed>)>,
}

impl Queue {
    fn new(poll: Duration) -> Queue {
        Queue {
            poll,
            snapshot: Mutex::new((None, HashMap::new())),
        }
    }

    /// Job `id` as last listed (refreshed when older than the poll interval).
    fn observe(&self, id: u64) -> Option<Listed> {
        let mut snap = self.snapshot.lock().unwrap_or_else(|e| e.into_inner());
        if snap.0.is_none_or(|t| t.elapsed() >= self.poll) {
            let listed = Command::new("squeue")
                .args(["-h", "-t", "all", "--me", "-o", "%i|%T|%N|%r"])
                .output();
            // A failed squeue (the controller busy) keeps the last snapshot.
            if let Some(o) = listed.ok().filter(|o| o.status.success()) {
                snap.1 = batch::parse_squeue(&String::from_utf8_lossy(&o.stdout))
                    .into_iter()
                    .map(|l| (l.id, l))
                    .collect();
            }
            snap.0 = Some(Instant::now());
        }
        snap.1.get(&id).cloned()
    }
}

/// The unread end of a job's log file.
struct Tail {
    path: PathBuf,
    offset: u64,
}

impl Tail {
    fn new(path: &Path) -> Tail {
        Tail {
            path: path.to_path_buf(),
            offset: 0,
        }
    }

    /// Copies what was appended since the last call (nothing if the file does not
    /// exist yet).
    fn copy_to(&mut self, out: &mut dyn Write) {
        let Ok(mut f) = fs::File::open(&self.path) else {
            return;
        };
        if f.seek(SeekFrom::Start(self.offset)).is_err() {
            return;
        }
        let mut buf = Vec::new();
        if let Ok(n) = f.read_to_end(&mut buf) {
            self.offset += n as u64;
            let _ = out.write_all(&buf);
        }
    }
}

/// The outputs `--builders` and `--builder-cache` ask for, as the realiser's executor;
/// `None` when no builders are set.
pub fn executor(
    builders: Option<&str>,
    builder_cache: Option<&str>,
    cfg: &crate::config::Config,
    state_dir: &Path,
) -> Result<Option<Arc<Slurm>>, String> {
    let Some(spec) = Spec::parse(builders.unwrap_or(""))? else {
        return Ok(None);
    };
    let url = builder_cache.ok_or_else(|| {
        format!(
            "--builders {} needs a builder cache that the submitter and the nodes both reach: \
             --builder-cache file:///SHARED/DIR (or `builder-cache = URL` in rocmx.conf; \
             `rocmx serve --writable` serves one over HTTP)",
            spec.name()
        )
    })?;
    Slurm::new(spec, url, cfg, state_dir).map(|s| Some(Arc::new(s)))
}
