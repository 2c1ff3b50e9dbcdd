//! The limits on one `builtin:fetchurl` fetch ([`Limits`]).
//!
//! This module owns the settings that bound a fetch in time and size, their
//! defaults, and how a build's own timeouts tighten them. It must not enforce
//! them (`guard` and `transport` do) or read configuration (the caller fills
//! the struct from its settings).

use std::time::Duration;

/// How long and how large a `builtin:fetchurl` download may get. The
/// defaults follow Nix: 30 s to connect, a download failing when it makes
/// less than 1 byte/s over 300 s, no limit on the whole fetch; and at most
/// 64 GiB.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Time allowed to establish one connection (TCP and TLS).
    pub connect_timeout: Duration,
    /// A download that receives no byte for this long fails ("no data
    /// received for N s"); so does one that receives fewer than
    /// `min_speed` bytes per second on average over this long.
    pub stall_timeout: Duration,
    /// The slowest acceptable average speed over `stall_timeout`, in bytes
    /// per second (0: only a complete stall fails).
    pub min_speed: u64,
    /// The largest download accepted, in bytes.
    pub max_size: u64,
    /// The time allowed for the whole fetch, every URL included (`None`: no
    /// limit).
    pub timeout: Option<Duration>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            connect_timeout: Duration::from_secs(30),
            stall_timeout: Duration::from_secs(300),
            min_speed: 1,
            max_size: 64 << 30,
            timeout: None,
        }
    }
}

impl Limits {
    /// These limits tightened by a build's own: the whole fetch must end
    /// within `timeout` (the build's `--timeout`), and a download silent for
    /// `max_silent` (`--max-silent-time`) counts as stalled.
    pub fn within_build(&self, timeout: Option<Duration>, max_silent: Option<Duration>) -> Limits {
        let shorter = |a: Option<Duration>, b: Option<Duration>| match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        Limits {
            timeout: shorter(self.timeout, timeout),
            stall_timeout: shorter(Some(self.stall_timeout), max_silent)
                .unwrap_or(self.stall_timeout),
            ..self.clone()
        }
    }
}

/// A duration in seconds for messages: whole seconds as `N`, else with
/// millisecond precision (`0.5`, `0.05`).
pub(super) fn secs(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        d.as_secs().to_string()
    } else {
        let s = format!("{:.3}", d.as_secs_f64());
        s.trim_end_matches('0').to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_build_tightens_the_limits() {
        let base = Limits::default();
        assert_eq!(base.within_build(None, None), base);
        let l = base.within_build(Some(Duration::from_secs(5)), Some(Duration::from_secs(7)));
        assert_eq!(l.timeout, Some(Duration::from_secs(5)));
        assert_eq!(l.stall_timeout, Duration::from_secs(7));
        assert_eq!(l.max_size, base.max_size);
        let own = Limits {
            timeout: Some(Duration::from_secs(2)),
            ..Limits::default()
        };
        let l = own.within_build(Some(Duration::from_secs(9)), Some(Duration::from_secs(900)));
        assert_eq!(l.timeout, Some(Duration::from_secs(2)), "the shorter wins");
        assert_eq!(l.stall_timeout, Duration::from_secs(300));
    }

    #[test]
    fn seconds_in_messages() {
        assert_eq!(secs(Duration::from_secs(300)), "300");
        assert_eq!(secs(Duration::from_millis(1500)), "1.5");
        assert_eq!(secs(Duration::from_millis(50)), "0.05");
    }
}
