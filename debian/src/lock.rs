//! The Debian lock file (`debian.lock.json`): the exact `.deb`s of a
//! resolved package set, enough to fetch each as a fixed output.
//!
//! ```json
//! {
//!   "suite": "sid",
//!   "architecture": "amd64",
//!   "date": "Fri, 30 Oct 2026 08:08:01 UTC",
//!   "requested": [
//!     "build-essential",
//!     "cmake"
//!   ],
//!   "packages": [
//!     {
//!       "package": "librocsparse1",
//!       "version": "6.4.3-3",
//!       "architecture": "amd64",
//!       "filename": "pool/main/r/rocsparse/librocsparse1_6.4.3-3_amd64.deb",
//!       "size": 362092640,
//!       "sha256": "eab66063fc7d128cc7386243f91a79078f5cedefd235e826d21c2e324f75b695",
//!       "gfxArchitectures": ["gfx803", "gfx900"]
//!     }
//!   ]
//! }
//! ```
//!
//! `date` is the Release file's `Date` (what snapshot was locked);
//! `requested` is sorted and without duplicates; `packages` is sorted by
//! name, one entry per name; `gfxArchitectures` (from
//! `X-ROCm-GPU-Architecture`) appears only for packages that have it. The
//! text is `serde_json`'s pretty form with a final newline, so locking the
//! same input twice gives the same bytes. No mirror host appears: `filename`
//! is relative to the archive root (`mirror://debian/<filename>`).
//!
//! Owns: the format, writing it, reading it back with errors that say
//! where and what. Must not: resolve or fetch.

use serde::{Deserialize, Serialize};

use crate::index::Index;
use crate::resolve::Resolution;

/// A lock file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lock {
    /// The suite as asked for (`sid`).
    pub suite: String,
    /// The host architecture.
    pub architecture: String,
    /// The Release file's `Date`.
    pub date: String,
    /// The requested packages, sorted, without duplicates.
    pub requested: Vec<String>,
    /// The packages, sorted by name.
    pub packages: Vec<LockedPackage>,
}

/// One pinned `.deb`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockedPackage {
    /// `Package`.
    pub package: String,
    /// `Version`.
    pub version: String,
    /// `Architecture` (the host's or `all`).
    pub architecture: String,
    /// The pool path (`pool/main/…/x.deb`), relative to the archive root.
    pub filename: String,
    /// Size in bytes.
    pub size: u64,
    /// SHA-256, lower-case hex.
    pub sha256: String,
    /// `X-ROCm-GPU-Architecture`, when the index has it.
    #[serde(
        rename = "gfxArchitectures",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub gfx_architectures: Option<Vec<String>>,
}

/// A lock file that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct LockError(pub String);

/// `requested` in lock order: sorted, duplicates dropped, blanks ignored.
pub fn normalise_requested(requested: &[String]) -> Vec<String> {
    let mut r: Vec<String> = requested
        .iter()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    r.sort();
    r.dedup();
    r
}

impl Lock {
    /// The lock of a resolution.
    pub fn new(
        suite: &str,
        architecture: &str,
        date: &str,
        requested: &[String],
        index: &Index,
        resolution: &Resolution,
    ) -> Lock {
        let mut packages: Vec<LockedPackage> = resolution
            .chosen
            .iter()
            .map(|&i| {
                let p = index.get(i);
                LockedPackage {
                    package: p.name.clone(),
                    version: p.version.to_string(),
                    architecture: p.architecture.clone(),
                    filename: p.filename.clone(),
                    size: p.size,
                    sha256: p.sha256.clone(),
                    gfx_architectures: p.gfx_architectures.clone(),
                }
            })
            .collect();
        packages.sort_by(|a, b| a.package.cmp(&b.package));
        Lock {
            suite: suite.to_string(),
            architecture: architecture.to_string(),
            date: date.to_string(),
            requested: normalise_requested(requested),
            packages,
        }
    }

    /// The file's text (pretty JSON, final newline).
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).expect("a lock serialises");
        s.push('\n');
        s
    }

    /// Reads a lock file's text and checks it: known fields only, every
    /// field present, packages sorted by name and unique, sizes, SHA-256s,
    /// versions and pool paths well formed. Errors name the line and column
    /// (syntax) or the package (content).
    pub fn parse(text: &str) -> Result<Lock, LockError> {
        let lock: Lock = serde_json::from_str(text)
            .map_err(|e| LockError(format!("line {} column {}: {e}", e.line(), e.column())))?;
        for (what, v) in [
            ("suite", &lock.suite),
            ("architecture", &lock.architecture),
            ("date", &lock.date),
        ] {
            if v.trim().is_empty() {
                return Err(LockError(format!("'{what}' is empty")));
            }
        }
        if lock.requested != normalise_requested(&lock.requested) {
            return Err(LockError(
                "'requested' must be sorted, without duplicates or blanks".into(),
            ));
        }
        for (n, p) in lock.packages.iter().enumerate() {
            let at = |m: String| LockError(format!("package '{}': {m}", p.package));
            if p.package.is_empty() {
                return Err(LockError(format!(
                    "package number {} has an empty name",
                    n + 1
                )));
            }
            if n > 0 && lock.packages[n - 1].package >= p.package {
                return Err(at(format!(
                    "packages must be sorted by name, each once (it follows '{}')",
                    lock.packages[n - 1].package
                )));
            }
            crate::version::parse(&p.package, &p.version).map_err(LockError)?;
            if p.sha256.len() != 64
                || !p
                    .sha256
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
            {
                return Err(at(format!(
                    "'sha256' must be 64 lower-case hex digits, not '{}'",
                    p.sha256
                )));
            }
            let f = &p.filename;
            if f.is_empty()
                || f.starts_with('/')
                || f.contains("://")
                || f.split('/').any(|c| c.is_empty() || c == "." || c == "..")
                || !f.ends_with(".deb")
            {
                return Err(at(format!(
                    "'filename' must be a relative pool path ending in .deb, not '{f}'"
                )));
            }
        }
        Ok(lock)
    }

    /// Whether this lock answers the same request (suite, architecture and
    /// the requested set).
    pub fn same_request(&self, suite: &str, architecture: &str, requested: &[String]) -> bool {
        self.suite == suite
            && self.architecture == architecture
            && self.requested == normalise_requested(requested)
    }

    /// The total download size in bytes.
    pub fn total_size(&self) -> u64 {
        self.packages.iter().map(|p| p.size).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Lock {
        Lock {
            suite: "sid".into(),
            architecture: "amd64".into(),
            date: "Fri, 30 Oct 2026 08:08:01 UTC".into(),
            requested: vec!["a".into(), "b".into()],
            packages: vec![
                LockedPackage {
                    package: "a".into(),
                    version: "1.0-1".into(),
                    architecture: "amd64".into(),
                    filename: "pool/main/a/a/a_1.0-1_amd64.deb".into(),
                    size: 10,
                    sha256: "0".repeat(64),
                    gfx_architectures: Some(vec!["gfx90a".into()]),
                },
                LockedPackage {
                    package: "b".into(),
                    version: "2".into(),
                    architecture: "all".into(),
                    filename: "pool/main/b/b_2_all.deb".into(),
                    size: 20,
                    sha256: "f".repeat(64),
                    gfx_architectures: None,
                },
            ],
        }
    }

    #[test]
    fn round_trip_is_stable() {
        let l = sample();
        let text = l.to_json();
        assert!(text.ends_with("}\n"));
        assert!(text.contains("\"gfxArchitectures\""));
        assert_eq!(text.matches("gfxArchitectures").count(), 1);
        let back = Lock::parse(&text).unwrap();
        assert_eq!(back, l);
        assert_eq!(back.to_json(), text);
        assert_eq!(l.total_size(), 30);
        assert!(l.same_request("sid", "amd64", &["b".into(), "a".into(), "a".into()]));
        assert!(!l.same_request("trixie", "amd64", &["a".into(), "b".into()]));
    }

    #[test]
    fn bad_locks_say_what() {
        let e = Lock::parse("{\"suite\": 1}").unwrap_err().0;
        assert!(e.starts_with("line 1 column"), "{e}");
        let mut l = sample();
        l.packages.swap(0, 1);
        assert!(Lock::parse(&l.to_json()).unwrap_err().0.contains("sorted"));
        let mut l = sample();
        l.packages[1].sha256 = "F".repeat(64);
        assert!(Lock::parse(&l.to_json())
            .unwrap_err()
            .0
            .contains("package 'b'"));
        let mut l = sample();
        l.packages[0].filename = "../etc/passwd.deb".into();
        assert!(Lock::parse(&l.to_json())
            .unwrap_err()
            .0
            .contains("'filename'"));
        let text = sample()
            .to_json()
            .replace("\"size\": 10,", "\"size\": 10, \"extra\": 1,");
        assert!(Lock::parse(&text).unwrap_err().0.contains("unknown field"));
    }
}
