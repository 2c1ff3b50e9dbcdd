//! `--log-format json`: the objects written for the realiser's events, one per line,
//! serialised with serde.
//!
//! Owns: the field names and their order (`action` first, then the fields in the order
//! declared here; [`super::LogFormat::Json`] documents them). Store paths are written
//! absolute (`StorePath`'s own serialisation). Must not: decide which events are written
//! (that is `progress.rs`'s).

use std::borrow::Cow;
use std::collections::BTreeMap;

use rocmx_store::StorePath;

/// One line of `--log-format json`; the variant's name, in lowercase, is `action`.
#[derive(serde::Serialize)]
#[serde(tag = "action", rename_all = "lowercase")]
pub(super) enum JsonEvent<'a> {
    Planned {
        drvs: Vec<&'a StorePath>,
    },
    Cached {
        drv: &'a StorePath,
        outputs: &'a BTreeMap<String, StorePath>,
    },
    Waiting {
        drv: &'a StorePath,
        name: &'a str,
    },
    Start {
        drv: &'a StorePath,
        name: &'a str,
    },
    Phase {
        drv: &'a StorePath,
        phase: &'a str,
    },
    /// A build handed to an executor changed state (`queued`, `running`,
    /// `resubmitted`, `fetching`), with the remote job's id.
    Remote {
        drv: &'a StorePath,
        executor: &'a str,
        job: &'a str,
        state: &'a str,
    },
    /// One complete log line, lossy UTF-8.
    Log {
        drv: &'a StorePath,
        line: Cow<'a, str>,
    },
    Built {
        drv: &'a StorePath,
        outputs: &'a BTreeMap<String, StorePath>,
        duration_ms: u128,
    },
    Failed {
        drv: &'a StorePath,
        message: &'a str,
    },
    Fetching {
        paths: usize,
        download: u64,
        unpacked: u64,
    },
    Fetched {
        path: &'a StorePath,
        source: &'a str,
        bytes: u64,
    },
    Skipped {
        drv: &'a StorePath,
        because: &'a StorePath,
    },
}

impl JsonEvent<'_> {
    /// Appends the object and a newline to `out`.
    pub(super) fn write_to(&self, out: &mut Vec<u8>) {
        // Writing into a Vec fails only if serialising does, which these types cannot.
        let _ = serde_json::to_writer(&mut *out, self);
        out.push(b'\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(e: &JsonEvent<'_>) -> String {
        let mut out = Vec::new();
        e.write_to(&mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn objects_start_with_the_action_and_keep_their_field_order() {
        let p =
            StorePath::from_absolute("/rocmx/store/00000000000000000000000000000000-x").unwrap();
        let abs = p.to_absolute();
        assert_eq!(
            line(&JsonEvent::Fetching {
                paths: 2,
                download: 10,
                unpacked: 20,
            }),
            "{\"action\":\"fetching\",\"paths\":2,\"download\":10,\"unpacked\":20}\n"
        );
        assert_eq!(
            line(&JsonEvent::Fetched {
                path: &p,
                source: "file:///c",
                bytes: 3,
            }),
            format!("{{\"action\":\"fetched\",\"path\":\"{abs}\",\"source\":\"file:///c\",\"bytes\":3}}\n")
        );
        let outs = BTreeMap::from([
            ("out".to_string(), p.clone()),
            ("dev".to_string(), p.clone()),
        ]);
        assert_eq!(
            line(&JsonEvent::Built {
                drv: &p,
                outputs: &outs,
                duration_ms: 5,
            }),
            format!(
                "{{\"action\":\"built\",\"drv\":\"{abs}\",\"outputs\":{{\"dev\":\"{abs}\",\"out\":\"{abs}\"}},\"duration_ms\":5}}\n"
            )
        );
        assert_eq!(
            line(&JsonEvent::Failed {
                drv: &p,
                message: "a \"b\"\n\u{1b}[0m",
            }),
            format!(
                "{{\"action\":\"failed\",\"drv\":\"{abs}\",\"message\":\"a \\\"b\\\"\\n\\u001b[0m\"}}\n"
            )
        );
    }
}
