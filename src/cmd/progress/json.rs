//! `--log-format json`: the objects written for the realiser's events, one per line,
//! serialised with serde.
//!
//! Owns: the field names and their order (`action` first, then the fields in the order
//! declared here; [`super::LogFormat::Json`] documents them). Store paths are written
//! absolute. Must not: decide which events are written (that is `progress.rs`'s).

use std::borrow::Cow;
use std::collections::BTreeMap;

use rocmx_store::StorePath;
use serde::ser::{Serialize, Serializer};

/// One line of `--log-format json`; the variant's name, in lowercase, is `action`.
#[derive(serde::Serialize)]
#[serde(tag = "action", rename_all = "lowercase")]
pub(super) enum JsonEvent<'a> {
    Planned {
        drvs: Vec<Abs<'a>>,
    },
    Cached {
        drv: Abs<'a>,
        outputs: Outputs<'a>,
    },
    Waiting {
        drv: Abs<'a>,
        name: &'a str,
    },
    Start {
        drv: Abs<'a>,
        name: &'a str,
    },
    Phase {
        drv: Abs<'a>,
        phase: &'a str,
    },
    /// One complete log line, lossy UTF-8.
    Log {
        drv: Abs<'a>,
        line: Cow<'a, str>,
    },
    Built {
        drv: Abs<'a>,
        outputs: Outputs<'a>,
        duration_ms: u128,
    },
    Failed {
        drv: Abs<'a>,
        message: &'a str,
    },
    Fetching {
        paths: usize,
        download: u64,
        unpacked: u64,
    },
    Fetched {
        path: Abs<'a>,
        source: &'a str,
        bytes: u64,
    },
    Skipped {
        drv: Abs<'a>,
        because: Abs<'a>,
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

/// A store path, written absolute (`/rocmx/store/…`).
pub(super) struct Abs<'a>(pub(super) &'a StorePath);

impl Serialize for Abs<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0.to_absolute())
    }
}

/// Outputs as an object of absolute store paths, in name order.
pub(super) struct Outputs<'a>(pub(super) &'a BTreeMap<String, StorePath>);

impl Serialize for Outputs<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter().map(|(name, path)| (name, Abs(path))))
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
                path: Abs(&p),
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
                drv: Abs(&p),
                outputs: Outputs(&outs),
                duration_ms: 5,
            }),
            format!(
                "{{\"action\":\"built\",\"drv\":\"{abs}\",\"outputs\":{{\"dev\":\"{abs}\",\"out\":\"{abs}\"}},\"duration_ms\":5}}\n"
            )
        );
        assert_eq!(
            line(&JsonEvent::Failed {
                drv: Abs(&p),
                message: "a \"b\"\n\u{1b}[0m",
            }),
            format!(
                "{{\"action\":\"failed\",\"drv\":\"{abs}\",\"message\":\"a \\\"b\\\"\\n\\u001b[0m\"}}\n"
            )
        );
    }
}
