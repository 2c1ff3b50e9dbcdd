//! Realisation: from a `.drv` in the store to valid, registered outputs.
//!
//! Owns: [`Realiser`] — reading derivations, realising their inputs first (depth-first,
//! memoised, each derivation at most once per `Realiser`), resolving them
//! ([`crate::resolve`]), the realisation lookup (early cutoff), running the builder in
//! the [`sandbox`](crate::sandbox), post-processing the outputs ([`crate::output`]),
//! registering them and recording realisations, and the compressed build logs.
//!
//! Must not: evaluate expressions or parse command lines; render progress (it reports
//! through [`Realiser::on_log`] and its return values).
//!
//! # One derivation
//!
//! 1. Read and parse the `.drv`. Fixed-output derivations whose paths are all valid are
//!    done (their inputs are not realised).
//! 2. Realise every input derivation, then resolve (see [`crate::resolve`]); the key is
//!    `hex(BLAKE3(resolved ATerm))`.
//! 3. Unless [`BuildOptions::rebuild`], look up `(key, output)` in the realisations; if
//!    every output is there and valid, that is the result (`built = false`): early cutoff.
//! 4. Build: each floating output is written at its scratch path
//!    ([`crate::resolve::scratch_path`]), which replaces its hash placeholder (`/1rz4g…`)
//!    in the builder, arguments and environment; a fixed output is written at its fixed
//!    path. The sandbox gets the closure of the resolved input sources (read-only, at
//!    their logical paths), the output at `<state>/builds/<drv hash>-<pid>-<n>/out` (host),
//!    `/build` at `…/build` (0700), the network only for fixed outputs, and the `rootfs`
//!    variable's store path (which must be in the input closure) as its base.
//! 5. Post-process: normalise, scan references (input closure and scratch path), hash
//!    modulo self-references, final path `StorePath::from_ca(name, Output{…})`, rewrite
//!    self-references, register (`register_built`), record the realisation and the
//!    derivation output. Fixed outputs: check the declared hash (flat file or NAR) and
//!    that they have no references; register at the fixed path.
//!
//! The build log (stdout and stderr merged) is stored zstd-compressed at
//! [`Realiser::log_path`], for failed builds too.
//!
//! # Limits
//!
//! The sandbox has a single output, so derivations with several outputs are refused;
//! `builtin:` builders are not implemented here.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rocmx_store::derivation::output_path_name;
use rocmx_store::{Derivation, DerivationOutput, LocalStore, StoreError, StorePath};

use crate::output::{self, OutputError};
use crate::resolve::{self, ResolvedInput};
use crate::sandbox::{self, SandboxError, SandboxSpec};

/// How builds run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildOptions {
    /// Exported to builders as `ROCMX_BUILD_CORES`.
    pub cores: u32,
    /// Kill a build after this long.
    pub timeout: Option<Duration>,
    /// Kill a build after this long without output.
    pub max_silent: Option<Duration>,
    /// Keep the build directory of a failed build (`<state>/builds/…`).
    pub keep_failed: bool,
    /// Ignore realisations (and valid fixed outputs) of the derivations asked for and
    /// their inputs: build them again.
    pub rebuild: bool,
}

impl Default for BuildOptions {
    fn default() -> Self {
        BuildOptions {
            cores: std::thread::available_parallelism()
                .map(|n| n.get() as u32)
                .unwrap_or(1),
            timeout: None,
            max_silent: None,
            keep_failed: false,
            rebuild: false,
        }
    }
}

/// A realised derivation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Realised {
    /// The `.drv` path.
    pub drv: StorePath,
    /// Each output's store path.
    pub outputs: BTreeMap<String, StorePath>,
    /// Whether it was built in this run (false: found in the realisations, or a valid
    /// fixed output).
    pub built: bool,
}

/// Why a derivation could not be realised. Every message names the derivation.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The builder failed (non-zero exit, killed, timed out, or produced no output).
    #[error("builder for '{drv}' failed: {status}\nlast lines of the build log:\n{log_tail}")]
    Failed {
        /// The derivation.
        drv: StorePath,
        /// What happened (`exit code 1`, `build timed out after 10s`, …).
        status: String,
        /// The last lines of its log.
        log_tail: String,
    },
    /// An input derivation failed earlier in this run.
    #[error("cannot build '{drv}': its dependency '{dep}' failed")]
    DependencyFailed {
        /// The derivation asked for.
        drv: StorePath,
        /// The derivation that failed.
        dep: StorePath,
    },
    /// The derivation itself failed earlier in this run (each is tried once).
    #[error("'{drv}' already failed in this run")]
    AlreadyFailed {
        /// The derivation.
        drv: StorePath,
    },
    /// The sandbox could not run (user namespaces refused, setup failure, …).
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    /// A store operation failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The derivation cannot be built as it is.
    #[error("derivation '{drv}': {reason}")]
    BadDerivation {
        /// The derivation.
        drv: StorePath,
        /// Why.
        reason: String,
    },
    /// A fixed output's hash is not the declared one; nothing was registered.
    #[error("hash mismatch in fixed-output derivation '{drv}':\n  specified: {expected}\n     got:    {actual}")]
    HashMismatch {
        /// The derivation.
        drv: StorePath,
        /// The declared hash (SRI).
        expected: String,
        /// The hash of what was built (SRI).
        actual: String,
    },
    /// A fixed output refers to store paths.
    #[error("fixed-output derivation '{drv}' refers to store paths: {}", refs.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(", "))]
    IllegalReferences {
        /// The derivation.
        drv: StorePath,
        /// What it refers to.
        refs: Vec<StorePath>,
    },
    /// Post-processing an output failed.
    #[error("output '{output}' of '{drv}': {source}")]
    Output {
        /// The derivation.
        drv: StorePath,
        /// The output name.
        output: String,
        /// Why.
        #[source]
        source: Box<OutputError>,
    },
    /// A file operation of the realiser itself (build directory, log) failed.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// On what.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
}

fn io_err(action: &'static str, path: &Path) -> impl FnOnce(io::Error) -> BuildError {
    let path = path.to_path_buf();
    move |source| BuildError::Io {
        action,
        path,
        source,
    }
}

/// Called with each chunk of a build's log as it arrives.
pub type LogObserver = Arc<dyn Fn(&StorePath, &[u8]) + Send + Sync>;

/// How many bytes of the log are kept in memory for the failure message.
const TAIL_BYTES: usize = 64 * 1024;
/// Lines of log in [`BuildError::Failed`].
const TAIL_LINES: usize = 25;

struct LogInner {
    drv: StorePath,
    enc: Option<zstd::stream::write::Encoder<'static, fs::File>>,
    tail: Vec<u8>,
    observer: Option<LogObserver>,
}

/// The sandbox's log writer: compresses to a file, keeps a tail, tells the observer.
#[derive(Clone)]
struct LogSink(Arc<Mutex<LogInner>>);

impl LogSink {
    fn create(
        drv: &StorePath,
        tmp: &Path,
        observer: Option<LogObserver>,
    ) -> Result<LogSink, BuildError> {
        let f = fs::File::create(tmp).map_err(io_err("creating the build log", tmp))?;
        let enc = zstd::stream::write::Encoder::new(f, 3)
            .map_err(io_err("creating the build log", tmp))?;
        Ok(LogSink(Arc::new(Mutex::new(LogInner {
            drv: drv.clone(),
            enc: Some(enc),
            tail: Vec::new(),
            observer,
        }))))
    }

    /// Finishes the compressed stream; gives the last lines.
    fn finish(&self, tmp: &Path, dest: &Path) -> Result<String, BuildError> {
        let mut inner = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(enc) = inner.enc.take() {
            enc.finish().map_err(io_err("writing the build log", tmp))?;
            fs::rename(tmp, dest).map_err(io_err("storing the build log", dest))?;
        }
        let text = String::from_utf8_lossy(&inner.tail);
        let lines: Vec<&str> = text.lines().collect();
        let start = lines.len().saturating_sub(TAIL_LINES);
        Ok(lines[start..].join("\n"))
    }
}

impl Write for LogSink {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let mut inner = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(enc) = inner.enc.as_mut() {
            enc.write_all(data)?;
        }
        inner.tail.extend_from_slice(data);
        if inner.tail.len() > 2 * TAIL_BYTES {
            let cut = inner.tail.len() - TAIL_BYTES;
            inner.tail.drain(..cut);
        }
        if let Some(obs) = inner.observer.clone() {
            let drv = inner.drv.clone();
            drop(inner);
            obs(&drv, data);
        }
        Ok(data.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A build's private directory under `<state>/builds`, removed on drop unless kept.
struct BuildDir {
    path: PathBuf,
    keep: bool,
}

impl Drop for BuildDir {
    fn drop(&mut self) {
        if !self.keep {
            output::remove_tree(&self.path);
        }
    }
}

/// Realises derivations into a local store. See the module documentation.
pub struct Realiser<'a> {
    store: &'a LocalStore,
    opts: BuildOptions,
    /// Realised derivations.
    done: HashMap<StorePath, Realised>,
    /// Failed derivations → the derivation whose failure caused it.
    failed: HashMap<StorePath, StorePath>,
    /// `name` of each derivation read.
    names: HashMap<StorePath, String>,
    /// On the current depth-first path (cycle guard).
    active: HashSet<StorePath>,
    built: Vec<StorePath>,
    failed_list: Vec<StorePath>,
    rooted: HashSet<StorePath>,
    observer: Option<LogObserver>,
    counter: u32,
}

impl<'a> Realiser<'a> {
    /// A realiser over `store`.
    pub fn new(store: &'a LocalStore, opts: BuildOptions) -> Self {
        Realiser {
            store,
            opts,
            done: HashMap::new(),
            failed: HashMap::new(),
            names: HashMap::new(),
            active: HashSet::new(),
            built: Vec::new(),
            failed_list: Vec::new(),
            rooted: HashSet::new(),
            observer: None,
            counter: 0,
        }
    }

    /// Streams every build's log, chunk by chunk, to `f` (for `-L`).
    pub fn on_log(&mut self, f: impl Fn(&StorePath, &[u8]) + Send + Sync + 'static) {
        self.observer = Some(Arc::new(f));
    }

    /// The derivations actually built in this run, in order.
    pub fn built(&self) -> &[StorePath] {
        &self.built
    }

    /// The derivations whose own build failed in this run, in order.
    pub fn failed(&self) -> &[StorePath] {
        &self.failed_list
    }

    /// Where the build log of `drv` is stored: `<state>/log/<drv hash part>.log.zst`.
    pub fn log_path(&self, drv: &StorePath) -> PathBuf {
        log_path(self.store, drv)
    }

    /// Realises `drv` and, first, every input derivation it needs. See the module
    /// documentation.
    pub fn realise(&mut self, drv: &StorePath) -> Result<Realised, BuildError> {
        if let Some(r) = self.done.get(drv) {
            return Ok(r.clone());
        }
        if let Some(root) = self.failed.get(drv) {
            return Err(if root == drv {
                BuildError::AlreadyFailed { drv: drv.clone() }
            } else {
                BuildError::DependencyFailed {
                    drv: drv.clone(),
                    dep: root.clone(),
                }
            });
        }
        if !self.active.insert(drv.clone()) {
            return Err(BuildError::BadDerivation {
                drv: drv.clone(),
                reason: "it depends on itself".into(),
            });
        }
        let r = self.realise_inner(drv);
        self.active.remove(drv);
        match r {
            Ok(r) => {
                self.done.insert(drv.clone(), r.clone());
                Ok(r)
            }
            Err((e, root)) => {
                if &root == drv {
                    self.failed_list.push(drv.clone());
                }
                self.failed.insert(drv.clone(), root);
                Err(e)
            }
        }
    }

    fn temp_root(&mut self, p: &StorePath) -> Result<(), StoreError> {
        if !self.rooted.contains(p) {
            self.store.add_temp_root(p)?;
            self.rooted.insert(p.clone());
        }
        Ok(())
    }

    fn read_drv(&mut self, drv: &StorePath) -> Result<Derivation, BuildError> {
        let bad = |reason: String| BuildError::BadDerivation {
            drv: drv.clone(),
            reason,
        };
        if !drv.is_derivation() {
            return Err(bad(
                "not a derivation (its name does not end in .drv)".into()
            ));
        }
        if !self.store.is_valid(drv)? {
            return Err(bad("not valid in the store".into()));
        }
        self.temp_root(drv)?;
        let real = self.store.real_path(drv);
        let text = fs::read_to_string(&real).map_err(io_err("reading", &real))?;
        let d = Derivation::parse(&text).map_err(|e| bad(e.to_string()))?;
        let name = d
            .name()
            .map(str::to_string)
            .unwrap_or_else(|| drv.name().trim_end_matches(".drv").to_string());
        self.names.insert(drv.clone(), name);
        Ok(d)
    }

    /// Like [`Realiser::realise`]; an error comes with the derivation whose own failure
    /// caused it.
    #[allow(clippy::result_large_err)]
    fn realise_inner(&mut self, drv: &StorePath) -> Result<Realised, (BuildError, StorePath)> {
        let own = |e: BuildError| (e, drv.clone());
        let d = self.read_drv(drv).map_err(own)?;
        let name = self.names[drv].clone();
        // Fixed outputs already valid: nothing to do, not even the inputs
        // (whatever the system).
        if !self.opts.rebuild {
            if let Some(outputs) = self.valid_fixed(&d).map_err(own)? {
                return Ok(Realised {
                    drv: drv.clone(),
                    outputs,
                    built: false,
                });
            }
        }

        let host = format!("{}-linux", std::env::consts::ARCH);
        if d.system != host {
            return Err(own(BuildError::BadDerivation {
                drv: drv.clone(),
                reason: format!("it is for system '{}', this machine is '{host}'", d.system),
            }));
        }
        if d.outputs.is_empty() {
            return Err(own(BuildError::BadDerivation {
                drv: drv.clone(),
                reason: "it has no outputs".into(),
            }));
        }

        // Inputs first.
        let mut inputs = BTreeMap::new();
        for input in d.input_drvs.keys() {
            let r = match self.realise(input) {
                Ok(r) => r,
                Err(e) => {
                    let root = self
                        .failed
                        .get(input)
                        .cloned()
                        .unwrap_or_else(|| input.clone());
                    return Err((e, root));
                }
            };
            let name = self.names.get(input).cloned().unwrap_or_default();
            inputs.insert(
                input.clone(),
                ResolvedInput {
                    name,
                    outputs: r.outputs,
                },
            );
        }
        let resolved = resolve::resolve(&d, &inputs).map_err(|e| {
            own(BuildError::BadDerivation {
                drv: drv.clone(),
                reason: e.to_string(),
            })
        })?;
        let key = resolve::resolved_hash(&resolved);

        // Early cutoff.
        if !self.opts.rebuild {
            if let Some(outputs) = self.lookup(&key, &d).map_err(own)? {
                for (o, p) in &outputs {
                    self.temp_root(p).map_err(|e| own(e.into()))?;
                    self.store
                        .add_derivation_output(drv, o, p)
                        .map_err(|e| own(e.into()))?;
                }
                return Ok(Realised {
                    drv: drv.clone(),
                    outputs,
                    built: false,
                });
            }
        }

        let outputs = self.build(drv, &name, &resolved, &key).map_err(own)?;
        self.built.push(drv.clone());
        Ok(Realised {
            drv: drv.clone(),
            outputs,
            built: true,
        })
    }

    /// The outputs, when every output is fixed and valid.
    fn valid_fixed(
        &mut self,
        d: &Derivation,
    ) -> Result<Option<BTreeMap<String, StorePath>>, BuildError> {
        if d.outputs.is_empty() {
            return Ok(None);
        }
        let mut out = BTreeMap::new();
        for (o, spec) in &d.outputs {
            match spec.path() {
                Some(p) if self.store.is_valid(p)? => {
                    out.insert(o.clone(), p.clone());
                }
                _ => return Ok(None),
            }
        }
        for p in out.values() {
            self.temp_root(p)?;
        }
        Ok(Some(out))
    }

    /// The recorded realisations of every output under `key`, if all are there and valid.
    fn lookup(
        &self,
        key: &str,
        d: &Derivation,
    ) -> Result<Option<BTreeMap<String, StorePath>>, BuildError> {
        let mut out = BTreeMap::new();
        for (o, spec) in &d.outputs {
            let found = match self.store.query_realisation(key, o)? {
                Some(p) => Some(p),
                // A fixed output is known by its path.
                None => spec.path().cloned(),
            };
            match found {
                Some(p) if self.store.is_valid(&p)? => {
                    out.insert(o.clone(), p);
                }
                _ => return Ok(None),
            }
        }
        Ok(Some(out))
    }

    fn build(
        &mut self,
        drv: &StorePath,
        name: &str,
        resolved: &Derivation,
        key: &str,
    ) -> Result<BTreeMap<String, StorePath>, BuildError> {
        let bad = |reason: String| BuildError::BadDerivation {
            drv: drv.clone(),
            reason,
        };
        if resolved.outputs.len() != 1 {
            return Err(bad(format!(
                "it has {} outputs; the sandbox builds one output per derivation for now",
                resolved.outputs.len()
            )));
        }
        if resolved.builder.starts_with("builtin:") {
            return Err(bad(format!(
                "builder '{}' is not implemented",
                resolved.builder
            )));
        }
        let builder = PathBuf::from(&resolved.builder);
        if !builder.is_absolute() {
            return Err(bad(format!(
                "builder '{}' is not an absolute path",
                resolved.builder
            )));
        }

        // Inputs: the closure of the resolved input sources, rooted while we build.
        let srcs: Vec<StorePath> = resolved.input_srcs.iter().cloned().collect();
        let closure = self.store.closure(&srcs)?;
        for p in &closure {
            self.temp_root(p)?;
        }

        // Where each output is written inside the sandbox.
        let mut scratch = BTreeMap::new();
        let mut network = false;
        for (o, spec) in &resolved.outputs {
            let out_name = output_path_name(name, o);
            let p = match spec {
                DerivationOutput::Floating { .. } => {
                    resolve::scratch_path(key, o, &out_name).map_err(|e| bad(e.to_string()))?
                }
                DerivationOutput::Fixed { path, .. } => {
                    network = true;
                    path.clone()
                }
            };
            scratch.insert(o.clone(), p);
        }
        let mut run_drv = resolved.clone();
        resolve::substitute(&mut run_drv, &resolve::output_pairs(&scratch));

        let rootfs = match run_drv.env.get("rootfs") {
            None => None,
            Some(r) => {
                let p =
                    StorePath::from_absolute(r).map_err(|e| bad(format!("rootfs '{r}': {e}")))?;
                if !closure.contains(&p) {
                    return Err(bad(format!("rootfs '{r}' is not among its inputs")));
                }
                Some(self.store.real_path(&p))
            }
        };

        // The private build directory.
        let builds = self.store.state_dir().join("builds");
        fs::create_dir_all(&builds).map_err(io_err("creating", &builds))?;
        self.counter += 1;
        let base = builds.join(format!(
            "{}-{}-{}",
            drv.hash_part(),
            std::process::id(),
            self.counter
        ));
        if fs::symlink_metadata(&base).is_ok() {
            output::remove_tree(&base);
        }
        fs::DirBuilder::new()
            .mode(0o700)
            .create(&base)
            .map_err(io_err("creating", &base))?;
        let mut dir = BuildDir {
            path: base.clone(),
            keep: false,
        };
        let build_dir = base.join("build");
        fs::DirBuilder::new()
            .mode(0o700)
            .create(&build_dir)
            .map_err(io_err("creating", &build_dir))?;
        // One output (checked above).
        let (out_name, out_scratch) = scratch
            .iter()
            .next()
            .map(|(o, p)| (o.clone(), p.clone()))
            .ok_or_else(|| bad("no outputs".into()))?;
        let out_host = base.join("out");

        // The log.
        let log_dest = self.log_path(drv);
        let log_dir = log_dest.parent().unwrap_or(Path::new("/")).to_path_buf();
        fs::create_dir_all(&log_dir).map_err(io_err("creating", &log_dir))?;
        let log_tmp = base.join("log.zst");
        let sink = LogSink::create(drv, &log_tmp, self.observer.clone())?;

        let spec = SandboxSpec {
            builder,
            args: run_drv.args.clone(),
            env: run_drv.env.clone(),
            inputs: closure
                .iter()
                .map(|p| (self.store.real_path(p), PathBuf::from(p.to_absolute())))
                .collect(),
            output: (out_host.clone(), PathBuf::from(out_scratch.to_absolute())),
            build_dir,
            rootfs,
            network,
            cores: self.opts.cores,
            timeout: self.opts.timeout,
            max_silent: self.opts.max_silent,
            log: Box::new(sink.clone()),
        };
        let result = sandbox::run(spec);
        let log_tail = sink.finish(&log_tmp, &log_dest)?;
        let status = match result {
            Ok(outcome) if outcome.status.success() => None,
            Ok(outcome) => Some(outcome.status.to_string()),
            Err(e @ (SandboxError::Timeout(_) | SandboxError::Silent(_))) => Some(e.to_string()),
            Err(e) => return Err(e.into()),
        };
        let status = status.or_else(|| {
            fs::symlink_metadata(&out_host)
                .is_err()
                .then(|| format!("builder did not produce output '{out_name}'"))
        });
        if let Some(mut status) = status {
            if self.opts.keep_failed {
                dir.keep = true;
                status.push_str(&format!(" (build directory kept at {})", base.display()));
            }
            return Err(BuildError::Failed {
                drv: drv.clone(),
                status,
                log_tail,
            });
        }

        // Post-process and register.
        let out_err = |source: OutputError| BuildError::Output {
            drv: drv.clone(),
            output: out_name.clone(),
            source: Box::new(source),
        };
        let final_path = match &resolved.outputs[&out_name] {
            DerivationOutput::Floating { .. } => {
                let store = self.store;
                let (p, already) = output::process_floating(
                    &out_host,
                    &out_scratch,
                    &output_path_name(name, &out_name),
                    &closure,
                    |p| store.is_valid(p),
                )
                .map_err(out_err)?;
                if already {
                    output::remove_tree(&out_host);
                    self.temp_root(&p.path)?;
                } else {
                    self.store.register_built(
                        &out_host,
                        &p.path,
                        &p.references,
                        p.nar_hash,
                        p.nar_size,
                        Some(drv),
                    )?;
                }
                p.path
            }
            DerivationOutput::Fixed { method, hash, path } => {
                let c = output::check_fixed(&out_host, *method, hash.algo(), &closure)
                    .map_err(out_err)?;
                if c.actual != *hash {
                    return Err(BuildError::HashMismatch {
                        drv: drv.clone(),
                        expected: hash.to_sri(),
                        actual: c.actual.to_sri(),
                    });
                }
                if !c.references.is_empty() {
                    return Err(BuildError::IllegalReferences {
                        drv: drv.clone(),
                        refs: c.references.into_iter().collect(),
                    });
                }
                self.store.register_built(
                    &out_host,
                    path,
                    &BTreeSet::new(),
                    c.nar_hash,
                    c.nar_size,
                    Some(drv),
                )?;
                path.clone()
            }
        };
        // A rebuild that gave other bytes keeps the first realisation (`--check` compares).
        match self.store.query_realisation(key, &out_name)? {
            Some(existing) if existing != final_path => {}
            _ => self
                .store
                .add_realisation(key, &out_name, &final_path, &[])?,
        }
        self.store
            .add_derivation_output(drv, &out_name, &final_path)?;
        Ok([(out_name, final_path)].into_iter().collect())
    }
}

/// Where the build log of `drv` is stored in `store`: `<state>/log/<drv hash part>.log.zst`.
pub fn log_path(store: &LocalStore, drv: &StorePath) -> PathBuf {
    store
        .state_dir()
        .join("log")
        .join(format!("{}.log.zst", drv.hash_part()))
}
