//! The `builders` setting (`--builders`): which Slurm partition builds go to, and how.
//!
//! Owns: [`Spec`], parsed from its textual forms, and nothing else.
//!
//! # Forms
//!
//! ```text
//! slurm                                   the cluster's default partition
//! slurm:gpu                               partition `gpu`
//! slurm://gpu?cpus=8&mem=16G&time=240     partition `gpu`, with defaults per job
//! slurm://?slots=200&poll-ms=500          the default partition
//! ```
//!
//! Parameters of the URL form (all optional):
//!
//! | name      | meaning                                                            |
//! |-----------|--------------------------------------------------------------------|
//! | `cpus`    | `--cpus-per-task` of a job (default 1; a derivation's `requiredCores` wins) |
//! | `mem`     | `--mem` of a job, a size (`512M`, `16G`; a derivation's `requiredMemory` wins) |
//! | `time`    | `--time` of a job in minutes (default: the build's `--timeout`)     |
//! | `slots`   | jobs in flight at once (default 64)                               |
//! | `logs`    | directory for the jobs' output files, on a filesystem the nodes share (default `<state>/slurm`) |
//! | `store`   | the store the jobs build in (`--store` on the node; default the node's own default store) |
//! | `rocmx`   | the `rocmx` the jobs run (default this executable, which must be where the nodes see it) |
//! | `poll-ms` | how often the queue is looked at (default 250)                    |
//!
//! The empty string means no executor: everything builds here.

use std::path::PathBuf;
use std::time::Duration;

/// Parsed `builders` setting. See the module documentation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    pub partition: Option<String>,
    pub cpus: Option<u32>,
    /// Mebibytes.
    pub mem_mib: Option<u64>,
    /// Minutes.
    pub time_min: Option<u64>,
    pub slots: usize,
    pub logs: Option<PathBuf>,
    pub store: Option<PathBuf>,
    pub rocmx: Option<PathBuf>,
    pub poll: Duration,
}

impl Default for Spec {
    fn default() -> Self {
        Spec {
            partition: None,
            cpus: None,
            mem_mib: None,
            time_min: None,
            slots: 64,
            logs: None,
            store: None,
            rocmx: None,
            poll: Duration::from_millis(250),
        }
    }
}

const PARAMS: [&str; 8] = [
    "cpus", "mem", "time", "slots", "logs", "store", "rocmx", "poll-ms",
];

impl Spec {
    /// Parses the setting; `Ok(None)` for the empty string.
    pub fn parse(text: &str) -> Result<Option<Spec>, String> {
        let text = text.trim();
        if text.is_empty() {
            return Ok(None);
        }
        let mut spec = Spec::default();
        if text == "slurm" {
            return Ok(Some(spec));
        }
        if let Some(rest) = text.strip_prefix("slurm://") {
            let (part, query) = rest.split_once('?').unwrap_or((rest, ""));
            spec.partition = partition(part)?;
            for pair in query.split('&').filter(|p| !p.is_empty()) {
                let (k, v) = pair
                    .split_once('=')
                    .ok_or_else(|| format!("builders: '{pair}' is not NAME=VALUE"))?;
                spec.set(k, v)?;
            }
            return Ok(Some(spec));
        }
        if let Some(part) = text.strip_prefix("slurm:") {
            spec.partition = partition(part)?;
            if spec.partition.is_none() {
                return Err(
                    "builders: 'slurm:' names no partition; write 'slurm' for the default one"
                        .into(),
                );
            }
            return Ok(Some(spec));
        }
        Err(format!(
            "builders: '{text}' is not a builder this rocmx knows; write 'slurm', \
             'slurm:PARTITION' or 'slurm://PARTITION?cpus=N&mem=SIZE&time=MINUTES' \
             (SSH builders and remote execution (REAPI) are not implemented)"
        ))
    }

    fn set(&mut self, k: &str, v: &str) -> Result<(), String> {
        let number = |v: &str| -> Result<u64, String> {
            v.parse::<u64>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| format!("builders: {k}={v}: expected a positive whole number"))
        };
        match k {
            "cpus" => self.cpus = Some(number(v)?.min(u32::MAX as u64) as u32),
            "mem" => {
                let bytes =
                    crate::config::parse_size(v).map_err(|e| format!("builders: mem: {e}"))?;
                self.mem_mib = Some(bytes.div_ceil(1 << 20).max(1));
            }
            "time" => self.time_min = Some(number(v)?),
            "slots" => self.slots = number(v)? as usize,
            "logs" => self.logs = Some(absolute(k, v)?),
            "store" => self.store = Some(absolute(k, v)?),
            "rocmx" => self.rocmx = Some(absolute(k, v)?),
            "poll-ms" => self.poll = Duration::from_millis(number(v)?),
            _ => {
                let hint = rocmx_lang::eval::error::did_you_mean(k, PARAMS.iter().copied())
                    .map(|s| format!(" (did you mean '{s}'?)"))
                    .unwrap_or_default();
                return Err(format!(
                    "builders: unknown parameter '{k}'{hint}; known: {}",
                    PARAMS.join(", ")
                ));
            }
        }
        Ok(())
    }

    /// `slurm:PARTITION` or `slurm` for messages and events.
    pub fn name(&self) -> String {
        match &self.partition {
            Some(p) => format!("slurm:{p}"),
            None => "slurm".into(),
        }
    }
}

fn partition(p: &str) -> Result<Option<String>, String> {
    if p.is_empty() {
        return Ok(None);
    }
    if p.chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ','))
    {
        Ok(Some(p.to_string()))
    } else {
        Err(format!("builders: '{p}' is not a Slurm partition name"))
    }
}

fn absolute(k: &str, v: &str) -> Result<PathBuf, String> {
    let p = PathBuf::from(v);
    if p.is_absolute() {
        Ok(p)
    } else {
        Err(format!("builders: {k}={v}: give an absolute path"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms() {
        assert_eq!(Spec::parse("").unwrap(), None);
        assert_eq!(Spec::parse("slurm").unwrap(), Some(Spec::default()));
        let s = Spec::parse("slurm:gpu").unwrap().unwrap();
        assert_eq!(s.partition.as_deref(), Some("gpu"));
        assert_eq!(s.name(), "slurm:gpu");
        let s =
            Spec::parse("slurm://debug?cpus=4&mem=1536M&time=90&slots=8&logs=/shared/l&poll-ms=50")
                .unwrap()
                .unwrap();
        assert_eq!(s.partition.as_deref(), Some("debug"));
        assert_eq!(s.cpus, Some(4));
        assert_eq!(s.mem_mib, Some(1536));
        assert_eq!(s.time_min, Some(90));
        assert_eq!(s.slots, 8);
        assert_eq!(s.logs, Some(PathBuf::from("/shared/l")));
        assert_eq!(s.poll, Duration::from_millis(50));
        let s = Spec::parse("slurm://?store=/scratch/s").unwrap().unwrap();
        assert_eq!(s.partition, None);
        assert_eq!(s.store, Some(PathBuf::from("/scratch/s")));
    }

    #[test]
    fn bad_forms_say_what_is_wrong() {
        let e = Spec::parse("ssh://host").unwrap_err();
        assert!(e.contains("REAPI"), "{e}");
        let e = Spec::parse("slurm://debug?cpu=2").unwrap_err();
        assert!(e.contains("did you mean 'cpus'"), "{e}");
        let e = Spec::parse("slurm://debug?cpus=0").unwrap_err();
        assert!(e.contains("positive"), "{e}");
        let e = Spec::parse("slurm://debug?logs=rel").unwrap_err();
        assert!(e.contains("absolute"), "{e}");
        assert!(Spec::parse("slurm:a b").is_err());
        assert!(Spec::parse("slurm:").is_err());
    }
}
