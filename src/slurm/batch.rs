//! What rocmx says to Slurm and reads back: `sbatch` arguments for one build, and
//! the job states of `squeue` and `scontrol`.
//!
//! Owns: [`Resources`] (what a derivation asks of a node), [`sbatch_args`], and the
//! parsers [`parse_squeue`] and [`parse_scontrol`] with the classification of Slurm's
//! job states ([`Phase`]). Pure functions: running the commands is `mod.rs`'s.
//!
//! # Resources of a derivation
//!
//! | derivation attribute        | sbatch                         |
//! |-----------------------------|--------------------------------|
//! | `requiredCores = "8"`       | `--cpus-per-task=8` (else the `cpus` parameter, else 1) |
//! | `requiredMemory = "16G"`    | `--mem=16384M` (else the `mem` parameter; else none) |
//! | the build's `--timeout`     | `--time=MINUTES` (the `time` parameter caps it) |
//! | `requiredSystemFeatures = "gpu gfx1100"` | `--gres=gpu:1 --constraint=gfx1100`: `gpu` asks for one GPU, every other feature is a node feature (Slurm's `Features=`), all required |
//!
//! # States
//!
//! `squeue -h -t all --me -o '%i|%T|%N|%r'` prints `ID|STATE|NODES|REASON` per job;
//! `scontrol show job -o ID` prints one line of `Key=Value` pairs (`JobState=FAILED
//! Reason=NonZeroExitCode … ExitCode=1:0`).

use std::path::Path;

use rocmx_store::Derivation;

use super::spec::Spec;

/// What one build asks of a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resources {
    pub cpus: u32,
    pub mem_mib: Option<u64>,
    pub time_min: Option<u64>,
    pub gpus: u32,
    pub features: Vec<String>,
}

impl Resources {
    /// What `d` asks for under `spec`, with the build's `timeout` (seconds).
    pub fn of(d: &Derivation, spec: &Spec, timeout: Option<u64>) -> Result<Resources, String> {
        let cpus = match d.env.get("requiredCores") {
            Some(v) => v
                .trim()
                .parse::<u32>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| {
                    format!("requiredCores = \"{v}\": expected a positive whole number")
                })?,
            None => spec.cpus.unwrap_or(1),
        };
        let mem_mib = match d.env.get("requiredMemory") {
            Some(v) => Some(
                crate::config::parse_size(v)
                    .map_err(|e| format!("requiredMemory: {e}"))?
                    .div_ceil(1 << 20)
                    .max(1),
            ),
            None => spec.mem_mib,
        };
        let from_timeout = timeout.map(|s| s.div_ceil(60).max(1));
        let time_min = match (from_timeout, spec.time_min) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let mut gpus = 0;
        let mut features = Vec::new();
        for f in d
            .env
            .get("requiredSystemFeatures")
            .map(String::as_str)
            .unwrap_or("")
            .split_whitespace()
        {
            if f == "gpu" {
                gpus = 1;
            } else if f
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            {
                features.push(f.to_string());
            } else {
                return Err(format!(
                    "requiredSystemFeatures: '{f}' cannot be a Slurm node feature"
                ));
            }
        }
        Ok(Resources {
            cpus,
            mem_mib,
            time_min,
            gpus,
            features,
        })
    }

    /// For `--dry-run`: `2 cores, 4096M, 60 min, --gres=gpu:1, --constraint=gfx1100`.
    pub fn describe(&self) -> String {
        let mut parts = vec![format!(
            "{} core{}",
            self.cpus,
            if self.cpus == 1 { "" } else { "s" }
        )];
        if let Some(m) = self.mem_mib {
            parts.push(format!("{m}M"));
        }
        if let Some(t) = self.time_min {
            parts.push(format!("{t} min"));
        }
        if self.gpus > 0 {
            parts.push(format!("--gres=gpu:{}", self.gpus));
        }
        if !self.features.is_empty() {
            parts.push(format!("--constraint={}", self.features.join("&")));
        }
        parts.join(", ")
    }
}

/// The arguments of `sbatch` for one build: the job runs `script` (a shell command
/// line) with its standard output (the build log) in `out` and its standard error
/// (rocmx's own messages) in `err`.
pub fn sbatch_args(
    spec: &Spec,
    name: &str,
    r: &Resources,
    out: &Path,
    err: &Path,
    script: &str,
) -> Vec<String> {
    let mut a = vec![
        "--parsable".to_string(),
        format!("--job-name=rocmx:{name}"),
        format!("--output={}", out.display()),
        format!("--error={}", err.display()),
        "--nodes=1".to_string(),
        "--ntasks=1".to_string(),
        // rocmx resubmits a lost job itself, once; Slurm's requeue could loop on a
        // bad node.
        "--no-requeue".to_string(),
        format!("--cpus-per-task={}", r.cpus),
    ];
    if let Some(p) = &spec.partition {
        a.push(format!("--partition={p}"));
    }
    if let Some(m) = r.mem_mib {
        a.push(format!("--mem={m}M"));
    }
    if let Some(t) = r.time_min {
        a.push(format!("--time={t}"));
    }
    if r.gpus > 0 {
        a.push(format!("--gres=gpu:{}", r.gpus));
    }
    if !r.features.is_empty() {
        a.push(format!("--constraint={}", r.features.join("&")));
    }
    a.push(format!("--wrap={script}"));
    a
}

/// Quotes `s` for a POSIX shell.
pub fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// The job id `sbatch --parsable` printed (`ID` or `ID;CLUSTER`).
pub fn parse_job_id(stdout: &str) -> Option<u64> {
    let line = stdout.lines().find(|l| !l.trim().is_empty())?;
    line.trim().split(';').next()?.parse().ok()
}

/// Where a job stands, from its Slurm state name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Waiting for a node (`PENDING`, `CONFIGURING`, `REQUEUED`, `SUSPENDED`, …).
    Queued,
    /// Running (`RUNNING`, `COMPLETING`).
    Running,
    /// Ended well (`COMPLETED`).
    Completed,
    /// Lost with its node (`NODE_FAIL`, `BOOT_FAIL`): worth one more try.
    Lost,
    /// Ended otherwise (`FAILED`, `CANCELLED`, `TIMEOUT`, `OUT_OF_MEMORY`, …).
    Failed,
}

impl Phase {
    /// The phase of a Slurm state name (`CANCELLED by 0` counts as `CANCELLED`).
    pub fn of(state: &str) -> Phase {
        let state = state.split_whitespace().next().unwrap_or("");
        match state.trim_end_matches('+') {
            "RUNNING" | "COMPLETING" | "STAGE_OUT" | "SIGNALING" => Phase::Running,
            "COMPLETED" => Phase::Completed,
            "NODE_FAIL" | "BOOT_FAIL" => Phase::Lost,
            "FAILED" | "CANCELLED" | "TIMEOUT" | "OUT_OF_MEMORY" | "DEADLINE" | "PREEMPTED"
            | "SPECIAL_EXIT" | "REVOKED" => Phase::Failed,
            _ => Phase::Queued,
        }
    }
}

/// One job of `squeue -o '%i|%T|%N|%r'`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub id: u64,
    pub state: String,
    pub nodes: String,
    pub reason: String,
}

/// The jobs `squeue -h -t all -o '%i|%T|%N|%r'` listed (lines that do not parse are
/// skipped: job arrays and heterogeneous jobs are not rocmx's).
pub fn parse_squeue(text: &str) -> Vec<Listed> {
    text.lines()
        .filter_map(|l| {
            let mut f = l.trim().splitn(4, '|');
            let id = f.next()?.trim().parse().ok()?;
            let state = f.next()?.trim().to_string();
            let nodes = f.next().unwrap_or("").trim().to_string();
            let reason = f.next().unwrap_or("").trim().to_string();
            Some(Listed {
                id,
                state,
                nodes,
                reason,
            })
        })
        .collect()
}

/// What `scontrol show job -o ID` says of a job.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Shown {
    pub state: String,
    pub reason: String,
    /// The batch script's exit status and the signal that ended it.
    pub exit: Option<(i32, i32)>,
}

/// Parses `scontrol show job -o` (one line of space-separated `Key=Value` pairs).
pub fn parse_scontrol(text: &str) -> Option<Shown> {
    let mut shown = Shown::default();
    let mut any = false;
    for field in text.split_whitespace() {
        let Some((k, v)) = field.split_once('=') else {
            continue;
        };
        match k {
            "JobState" => {
                shown.state = v.to_string();
                any = true;
            }
            "Reason" => shown.reason = v.to_string(),
            "ExitCode" => {
                let (code, sig) = v.split_once(':')?;
                shown.exit = Some((code.parse().ok()?, sig.parse().ok()?));
            }
            _ => {}
        }
    }
    any.then_some(shown)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn drv(env: &[(&str, &str)]) -> Derivation {
        Derivation {
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Derivation::default()
        }
    }

    #[test]
    fn resources_from_the_derivation_and_the_spec() {
        let spec = Spec {
            cpus: Some(2),
            mem_mib: Some(1024),
            time_min: Some(30),
            ..Spec::default()
        };
        let r = Resources::of(&drv(&[]), &spec, Some(7200)).unwrap();
        assert_eq!(
            r,
            Resources {
                cpus: 2,
                mem_mib: Some(1024),
                time_min: Some(30),
                gpus: 0,
                features: vec![]
            }
        );
        let d = drv(&[
            ("requiredCores", "8"),
            ("requiredMemory", "16G"),
            ("requiredSystemFeatures", "gpu gfx1100 big-parallel"),
        ]);
        let r = Resources::of(&d, &Spec::default(), Some(61)).unwrap();
        assert_eq!(r.cpus, 8);
        assert_eq!(r.mem_mib, Some(16384));
        assert_eq!(r.time_min, Some(2));
        assert_eq!(r.gpus, 1);
        assert_eq!(r.features, ["gfx1100", "big-parallel"]);
        assert_eq!(
            r.describe(),
            "8 cores, 16384M, 2 min, --gres=gpu:1, --constraint=gfx1100&big-parallel"
        );
        assert!(Resources::of(&drv(&[("requiredCores", "x")]), &spec, None).is_err());
        assert!(Resources::of(&drv(&[("requiredSystemFeatures", "a|b")]), &spec, None).is_err());
    }

    #[test]
    fn sbatch_arguments() {
        let spec = Spec {
            partition: Some("debug".into()),
            ..Spec::default()
        };
        let r = Resources {
            cpus: 4,
            mem_mib: Some(512),
            time_min: Some(10),
            gpus: 1,
            features: vec!["gfx90a".into()],
        };
        let a = sbatch_args(
            &spec,
            "hello",
            &r,
            &PathBuf::from("/l/h.out"),
            &PathBuf::from("/l/h.err"),
            "exec rocmx build-remote x",
        );
        assert_eq!(
            a,
            [
                "--parsable",
                "--job-name=rocmx:hello",
                "--output=/l/h.out",
                "--error=/l/h.err",
                "--nodes=1",
                "--ntasks=1",
                "--no-requeue",
                "--cpus-per-task=4",
                "--partition=debug",
                "--mem=512M",
                "--time=10",
                "--gres=gpu:1",
                "--constraint=gfx90a",
                "--wrap=exec rocmx build-remote x",
            ]
        );
    }

    #[test]
    fn quoting_and_job_ids() {
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
        assert_eq!(parse_job_id("42\n"), Some(42));
        assert_eq!(parse_job_id("42;cluster\n"), Some(42));
        assert_eq!(parse_job_id("sbatch: error\n"), None);
    }

    #[test]
    fn states() {
        assert_eq!(Phase::of("PENDING"), Phase::Queued);
        assert_eq!(Phase::of("CONFIGURING"), Phase::Queued);
        assert_eq!(Phase::of("RUNNING"), Phase::Running);
        assert_eq!(Phase::of("COMPLETING"), Phase::Running);
        assert_eq!(Phase::of("COMPLETED"), Phase::Completed);
        assert_eq!(Phase::of("NODE_FAIL"), Phase::Lost);
        assert_eq!(Phase::of("CANCELLED by 0"), Phase::Failed);
        assert_eq!(Phase::of("CANCELLED+"), Phase::Failed);
        assert_eq!(Phase::of("TIMEOUT"), Phase::Failed);
        let l = parse_squeue("12|RUNNING|localhost|None\n13|PENDING||Dependency\njunk\n");
        assert_eq!(l.len(), 2);
        assert_eq!(l[0].id, 12);
        assert_eq!(l[0].nodes, "localhost");
        assert_eq!(l[1].state, "PENDING");
        assert_eq!(l[1].reason, "Dependency");
        let s = parse_scontrol(
            "JobId=7 JobName=rocmx:x UserId=root(0) JobState=FAILED Reason=NonZeroExitCode \
             Dependency=(null) ExitCode=1:0 RunTime=00:00:01",
        )
        .unwrap();
        assert_eq!(s.state, "FAILED");
        assert_eq!(s.reason, "NonZeroExitCode");
        assert_eq!(s.exit, Some((1, 0)));
        assert_eq!(
            parse_scontrol("slurm_load_jobs error: Invalid job id specified"),
            None
        );
    }
}
