//! The variations of `rocmx verify`: named changes to a build's environment, each
//! applied inside the sandbox, to find outputs that depend on it.
//!
//! This module owns the names, their meaning and the value each one gives
//! ([`Variations::variant`]); the sandbox applies the values
//! ([`crate::sandbox::Variant`]). The textual forms, as `--vary` takes them:
//!
//! | name | normal build | varied build |
//! |---|---|---|
//! | `time` | the real clock | the clock 397 days ahead, file timestamps unchanged (libfaketime with `NO_FAKE_STAT`, preloaded into dynamically linked programs; see [`FAKETIME_LIBS`]) |
//! | `timezone` | `TZ=UTC` | `TZ=VFY-14` (UTC+14, a POSIX rule every libc reads) |
//! | `locale` | `LANG=C.UTF-8` | `LANG=LC_ALL=fr_CH.UTF-8`, `LANGUAGE=fr_CH:fr` |
//! | `umask` | 022 | 002 |
//! | `cores` | every CPU, `ROCMX_BUILD_CORES` = `--cores` | bound to one CPU (`nproc` says 1), `ROCMX_BUILD_CORES=1`; on a one-CPU machine `ROCMX_BUILD_CORES` = cores + 1 |
//! | `env-order` | variables sorted by name | in reverse order |
//! | `dir-order` | `/build` on the host filesystem (hash order on ext4) | `/build` over a tmpfs (creation order) |
//! | `build-path` | `/build` | `/rocmx-verify-build` |
//! | `user` | `rocmxbld`, uid 1000, gid 100 | `rocmxvar`, uid 2000, gid 200 |
//! | `hostname` | `localhost`, no domain name | `rocmx-verify`, domain `verify.invalid` |
//! | `kernel` | the host's `uname -r` | the `UNAME26` personality (`uname -r` says 2.6.x) |
//!
//! `all` names every one. The sandbox removes by construction what reprotest
//! varies besides these: the home directory (`HOME=/homeless-shelter`), the
//! user's groups, the shell's environment (only the derivation's and the fixed
//! variables exist), the build path of the store, `SOURCE_DATE_EPOCH` (always 1),
//! the file system's mtimes of inputs (1) and the network (none).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use crate::sandbox::Variant;

/// Where Debian's `libfaketime` puts the library the `time` variation preloads.
pub const FAKETIME_LIBS: [&str; 2] = [
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/faketime/libfaketime.so.1",
];

/// One variation (see the module documentation for what each does).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Variation {
    Time,
    Timezone,
    Locale,
    Umask,
    Cores,
    EnvOrder,
    DirOrder,
    BuildPath,
    User,
    Hostname,
    Kernel,
}

impl Variation {
    /// Every variation, in the order reports list them.
    pub const ALL: [Variation; 11] = [
        Variation::Time,
        Variation::Timezone,
        Variation::Locale,
        Variation::Umask,
        Variation::Cores,
        Variation::EnvOrder,
        Variation::DirOrder,
        Variation::BuildPath,
        Variation::User,
        Variation::Hostname,
        Variation::Kernel,
    ];

    /// The name `--vary` takes and reports print.
    pub fn name(self) -> &'static str {
        match self {
            Variation::Time => "time",
            Variation::Timezone => "timezone",
            Variation::Locale => "locale",
            Variation::Umask => "umask",
            Variation::Cores => "cores",
            Variation::EnvOrder => "env-order",
            Variation::DirOrder => "dir-order",
            Variation::BuildPath => "build-path",
            Variation::User => "user",
            Variation::Hostname => "hostname",
            Variation::Kernel => "kernel",
        }
    }

    /// What the varied build sees, in a few words.
    pub fn describe(self) -> &'static str {
        match self {
            Variation::Time => "the clock 397 days ahead (libfaketime)",
            Variation::Timezone => "TZ=VFY-14",
            Variation::Locale => "LANG=LC_ALL=fr_CH.UTF-8",
            Variation::Umask => "umask 002",
            Variation::Cores => "one CPU",
            Variation::EnvOrder => "the environment in reverse order",
            Variation::DirOrder => "/build on a tmpfs (creation order)",
            Variation::BuildPath => "/rocmx-verify-build instead of /build",
            Variation::User => "user rocmxvar, uid 2000, gid 200",
            Variation::Hostname => "hostname rocmx-verify, domain verify.invalid",
            Variation::Kernel => "uname -r reporting 2.6.x (UNAME26)",
        }
    }
}

impl fmt::Display for Variation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A `--vary` value that names no variation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown variation '{name}'{hint}; the variations are: all {}",
    names()
)]
pub struct UnknownVariation {
    pub name: String,
    hint: String,
}

fn names() -> String {
    Variation::ALL.map(Variation::name).join(" ")
}

impl FromStr for Variation {
    type Err = UnknownVariation;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if let Some(v) = Variation::ALL.iter().find(|v| v.name() == s) {
            return Ok(*v);
        }
        let near = Variation::ALL
            .iter()
            .map(|v| (strsim_distance(s, v.name()), v.name()))
            .min()
            .filter(|(d, _)| *d <= 2);
        Err(UnknownVariation {
            name: s.to_string(),
            hint: near
                .map(|(_, n)| format!(" (did you mean '{n}'?)"))
                .unwrap_or_default(),
        })
    }
}

/// Levenshtein distance, for "did you mean" among a dozen short names.
fn strsim_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = if ca == *cb {
                prev
            } else {
                1 + prev.min(row[j]).min(row[j + 1])
            };
            prev = cur;
        }
    }
    row[b.len()]
}

/// A set of variations (`--vary time,umask`, or `all`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Variations(pub BTreeSet<Variation>);

impl FromStr for Variations {
    type Err = UnknownVariation;

    /// Comma- or space-separated names; `all` is every variation.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut set = BTreeSet::new();
        for name in s.split([',', ' ']).filter(|n| !n.is_empty()) {
            if name == "all" {
                set.extend(Variation::ALL);
            } else {
                set.insert(name.parse()?);
            }
        }
        Ok(Variations(set))
    }
}

impl fmt::Display for Variations {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v: Vec<&str> = self.0.iter().map(|v| v.name()).collect();
        f.write_str(&v.join(","))
    }
}

/// What a variation could not do on this machine (it is then left out).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotApplied {
    pub variation: Variation,
    pub why: String,
}

/// The host facts the variations depend on.
#[derive(Debug, Clone)]
pub struct Host {
    /// CPUs this process may run on.
    pub cpus: u32,
    /// The libfaketime library, if installed.
    pub faketime: Option<PathBuf>,
}

impl Host {
    /// Reads them from this machine.
    pub fn probe() -> Host {
        Host {
            cpus: std::thread::available_parallelism()
                .map(|n| n.get() as u32)
                .unwrap_or(1),
            faketime: FAKETIME_LIBS
                .iter()
                .map(Path::new)
                .find(|p| p.is_file())
                .map(Path::to_path_buf),
        }
    }
}

impl Variations {
    /// Every variation.
    pub fn all() -> Variations {
        Variations(Variation::ALL.into_iter().collect())
    }

    /// One variation alone.
    pub fn one(v: Variation) -> Variations {
        Variations([v].into_iter().collect())
    }

    /// The sandbox values that apply this set on `host` for a build with `cores`, and
    /// the variations that cannot be applied here (with the reason).
    pub fn variant(&self, host: &Host, cores: u32) -> (Variant, Vec<NotApplied>) {
        let mut v = Variant::default();
        let mut missing = Vec::new();
        let mut env = BTreeMap::new();
        for var in &self.0 {
            match var {
                Variation::Time => match &host.faketime {
                    Some(lib) => {
                        v.preload = Some(lib.clone());
                        env.insert("FAKETIME".to_string(), "+397d".to_string());
                        env.insert("FAKETIME_DONT_FAKE_MONOTONIC".to_string(), "1".to_string());
                        // The clock only: files keep their timestamps, as they would for a
                        // build a year later (libfaketime shifts stat() results too by
                        // default, which made clang's PCH record other input mtimes).
                        env.insert("NO_FAKE_STAT".to_string(), "1".to_string());
                    }
                    None => missing.push(NotApplied {
                        variation: *var,
                        why: "libfaketime is not installed (Debian: apt-get install libfaketime)"
                            .into(),
                    }),
                },
                Variation::Timezone => {
                    env.insert("TZ".to_string(), "VFY-14".to_string());
                }
                Variation::Locale => {
                    for k in ["LANG", "LC_ALL"] {
                        env.insert(k.to_string(), "fr_CH.UTF-8".to_string());
                    }
                    env.insert("LANGUAGE".to_string(), "fr_CH:fr".to_string());
                }
                Variation::Umask => v.umask = 0o002,
                Variation::Cores => {
                    if host.cpus > 1 {
                        v.cpus = Some(1);
                    } else {
                        v.cores_env = Some(cores + 1);
                    }
                }
                Variation::EnvOrder => v.reverse_env = true,
                Variation::DirOrder => v.build_on_tmpfs = true,
                Variation::BuildPath => v.build_top = PathBuf::from("/rocmx-verify-build"),
                Variation::User => {
                    v.uid = 2000;
                    v.gid = 200;
                    v.user = "rocmxvar".into();
                }
                Variation::Hostname => {
                    v.hostname = "rocmx-verify".into();
                    v.domainname = Some("verify.invalid".into());
                }
                Variation::Kernel => v.uname26 = true,
            }
        }
        v.env = env;
        (v, missing)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_and_print() {
        for v in Variation::ALL {
            assert_eq!(v.name().parse::<Variation>(), Ok(v));
        }
        let set: Variations = "umask,env-order time".parse().unwrap();
        assert_eq!(set.to_string(), "time,umask,env-order");
        assert_eq!("all".parse::<Variations>().unwrap(), Variations::all());
        assert_eq!("".parse::<Variations>().unwrap(), Variations::default());
        let e = "umsk".parse::<Variation>().unwrap_err().to_string();
        assert!(e.starts_with("unknown variation 'umsk' (did you mean 'umask'?); the variations are: all time timezone"), "{e}");
        let e = "nonsense".parse::<Variations>().unwrap_err().to_string();
        assert!(!e.contains("did you mean"), "{e}");
    }

    #[test]
    fn each_variation_changes_its_value_only() {
        let host = Host {
            cpus: 2,
            faketime: Some(PathBuf::from(FAKETIME_LIBS[0])),
        };
        let base = Variant::default();
        let (none, missing) = Variations::default().variant(&host, 2);
        assert_eq!(none, base);
        assert!(missing.is_empty());
        for var in Variation::ALL {
            let (v, missing) = Variations::one(var).variant(&host, 2);
            assert!(missing.is_empty());
            assert_ne!(v, base, "{var} changes nothing");
        }
        let (v, _) = Variations::one(Variation::Cores).variant(&host, 2);
        assert_eq!(v.cpus, Some(1));
        let one_cpu = Host {
            cpus: 1,
            faketime: None,
        };
        let (v, _) = Variations::one(Variation::Cores).variant(&one_cpu, 1);
        assert_eq!((v.cpus, v.cores_env), (None, Some(2)));
        let (v, missing) = Variations::all().variant(&one_cpu, 1);
        assert_eq!(v.preload, None);
        assert_eq!(missing.len(), 1);
        assert_eq!(missing[0].variation, Variation::Time);
        assert!(missing[0].why.contains("apt-get install libfaketime"));
    }
}
