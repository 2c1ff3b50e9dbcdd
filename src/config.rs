//! The user's configuration files and `--option NAME VALUE`, as far as the CLI needs
//! them.
//!
//! Owns: finding and reading `rocmx.conf`, parsing its settings, and turning them into
//! library values ([`Mirrors`] for `builtin:fetchurl`, [`BuildOptions`]' limits).
//!
//! Must not: hold defaults that belong to a library (the mirror table's apt default is
//! [`Mirrors::from_apt`]'s, the build limits' are [`BuildOptions::default`]'s) or write
//! any file.
//!
//! # Files
//!
//! Read in this order, later ones overriding earlier ones (and `--option NAME VALUE`
//! and the dedicated flags such as `--timeout` overriding them all):
//!
//! 1. `/etc/rocmx/rocmx.conf`;
//! 2. `$XDG_CONFIG_HOME/rocmx/rocmx.conf` (or `~/.config/rocmx/rocmx.conf`);
//! 3. the file named by `$ROCMX_CONFIG`, which must exist when set.
//!
//! ```text
//! # mirror://NAME/… expands to each URL in turn
//! mirror.debian = http://deb.example.invalid/debian
//! mirror.gnu = https://ftp.example.invalid/gnu https://other.example.invalid/gnu
//!
//! timeout = 172800            # seconds a build may run (0: no limit; default 48 h)
//! max-silent-time = 3600      # seconds without output (0: no limit; default 1 h)
//! max-build-processes = 8192  # processes and threads per build (0: no limit)
//! build-dir-size = 256G       # disk for /build plus the outputs (0: no limit)
//! shm-size = 2G               # size of each build's /dev/shm
//! download-size-limit = 64G   # largest builtin:fetchurl download
//! connect-timeout = 30        # seconds to connect, per URL
//! stalled-download-timeout = 300  # seconds a download may make no progress
//!
//! substituters = file:///srv/cache   # binary caches, in the order asked
//! trusted-public-keys = cache-1:BASE64 other-1:BASE64
//! secret-key-files = /etc/rocmx/cache-1.secret   # sign what is pushed
//! access-tokens = cache.example.org:8080=TOKEN    # push to rocmx serve --writable
//! require-sigs-count = 2      # trusted keys that must agree on a floating output (default 1)
//!
//! builders = slurm://debug?cpus=4&mem=8G   # hand builds to Slurm (see `slurm::spec`)
//! builder-cache = file:///shared/rocmx-cache # what the submitter and the jobs exchange through
//!
//! keep-derivations = true     # gc keeps the .drv of every live path (default true)
//! keep-outputs = false        # gc keeps the outputs of every live .drv (default false)
//!
//! abort-on-warn = false       # builtins.warn / lib.warn and lint warnings are errors
//! restrict-eval = false       # only the search path's directories and the store are readable
//! allow-import-from-derivation = true  # reading a derivation's (built) output while evaluating
//! max-call-depth = 20000      # nested calls before evaluation stops (--max-call-depth wins)
//! ```
//!
//! `--option NAME VALUE` is accepted by every command (it is a global flag, read by
//! [`read`] after the files); a command uses the settings that concern it.
//!
//! Sizes are bytes, or a number with `K`, `M`, `G` or `T` (powers of 1024). Without a
//! `mirror.debian` line, `mirror://debian` uses the Debian archive URIs of the
//! machine's apt sources. An unknown setting is an error naming the file, the line and
//! the closest known setting.

use std::path::PathBuf;
use std::time::Duration;

use rocmx_builder::fetchurl::{strip_comment, Mirrors};
use rocmx_builder::realise::BuildOptions;

/// The settings of the `NAME = VALUE` form (all but `mirror.NAME`).
pub const SETTINGS: [&str; 21] = [
    "substituters",
    "trusted-public-keys",
    "secret-key-files",
    "access-tokens",
    "require-sigs-count",
    "timeout",
    "max-silent-time",
    "max-build-processes",
    "build-dir-size",
    "shm-size",
    "download-size-limit",
    "connect-timeout",
    "stalled-download-timeout",
    "keep-derivations",
    "keep-outputs",
    "abort-on-warn",
    "restrict-eval",
    "allow-import-from-derivation",
    "max-call-depth",
    "builders",
    "builder-cache",
];

/// The configuration files that apply, in the order they are read.
fn files() -> Result<Vec<PathBuf>, String> {
    let mut out = vec![PathBuf::from("/etc/rocmx/rocmx.conf")];
    let user = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")));
    if let Some(dir) = user {
        out.push(dir.join("rocmx/rocmx.conf"));
    }
    if let Some(f) = std::env::var_os("ROCMX_CONFIG").filter(|v| !v.is_empty()) {
        let f = PathBuf::from(f);
        if !f.exists() {
            return Err(format!(
                "ROCMX_CONFIG names '{}', which does not exist",
                f.display()
            ));
        }
        out.push(f);
    }
    Ok(out)
}

/// Everything the configuration files say.
pub struct Config {
    pub mirrors: Mirrors,
    /// `(name, value, where)` of each setting line, in reading order.
    settings: Vec<(String, String, String)>,
}

/// The `--option NAME VALUE` pairs of the command line, set once by `main`.
static COMMAND_LINE: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();

/// Checks the command line's `--option` pairs (flattened: name, value, …) and
/// records them for every later [`read`].
pub fn set_command_line(pairs: Vec<String>) -> Result<(), String> {
    // Checked now, so that a misspelt setting is an error on every command, also on
    // those that read no setting.
    let mut scratch = Config {
        mirrors: Mirrors::default(),
        settings: Vec::new(),
    };
    scratch.add_options(&pairs)?;
    let _ = COMMAND_LINE.set(pairs);
    Ok(())
}

/// Reads every configuration file that applies, then the command line's `--option`s.
pub fn read() -> Result<Config, String> {
    let mut cfg = Config {
        mirrors: Mirrors::from_apt(),
        settings: Vec::new(),
    };
    for f in files()? {
        let text = match std::fs::read_to_string(&f) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(format!("reading '{}': {e}", f.display())),
        };
        cfg.add_text(&text, &f.display().to_string())?;
    }
    if let Some(pairs) = COMMAND_LINE.get() {
        cfg.add_options(pairs)?;
    }
    Ok(cfg)
}

impl Config {
    /// Adds one file's text: `mirror.NAME` lines go to the mirror table (blank lines
    /// keep its line numbers right), the others are checked and kept.
    fn add_text(&mut self, text: &str, file: &str) -> Result<(), String> {
        let mut mirror_lines = String::new();
        for (i, raw) in text.lines().enumerate() {
            let content = strip_comment(raw).trim();
            let key = content.split_once('=').map(|(k, _)| k.trim());
            match key {
                Some(k) if !k.starts_with("mirror.") => {
                    let value = content.split_once('=').map(|(_, v)| v.trim()).unwrap_or("");
                    let at = format!("'{file}' line {}", i + 1);
                    check_setting(k, value).map_err(|e| format!("in {at}: {e}"))?;
                    self.settings.push((k.to_string(), value.to_string(), at));
                    mirror_lines.push('\n');
                }
                _ => {
                    mirror_lines.push_str(raw);
                    mirror_lines.push('\n');
                }
            }
        }
        self.mirrors
            .parse_config(&mirror_lines)
            .map_err(|e| format!("in '{file}': {e}"))
    }

    /// Adds `--option NAME VALUE` pairs (after the files, so they win).
    pub fn add_options(&mut self, pairs: &[String]) -> Result<(), String> {
        for pair in pairs.chunks(2) {
            let [name, value] = pair else {
                return Err("--option takes a NAME and a VALUE".into());
            };
            if let Some(m) = name.strip_prefix("mirror.") {
                self.mirrors
                    .parse_config(&format!("mirror.{m} = {value}"))
                    .map_err(|e| format!("in --option {name}: {e}"))?;
                continue;
            }
            check_setting(name, value).map_err(|e| format!("in --option {name}: {e}"))?;
            self.settings
                .push((name.clone(), value.clone(), format!("--option {name}")));
        }
        Ok(())
    }

    /// The value of `name` that applies (the last one read), if any.
    pub fn value(&self, name: &str) -> Option<&str> {
        self.settings
            .iter()
            .rev()
            .find(|(n, _, _)| n == name)
            .map(|(_, v, _)| v.as_str())
    }

    /// The boolean setting `name` (`true` or `false`), or `default` when it is not set.
    pub fn flag(&self, name: &str, default: bool) -> Result<bool, String> {
        self.value(name)
            .map_or(Ok(default), parse_bool)
            .map_err(|e| format!("{name}: {e}"))
    }

    /// `trusted-public-keys`: the keys whose signatures are accepted; a malformed key
    /// is an error naming the setting.
    pub fn trusted_keys(&self) -> Result<rocmx_cache::keys::TrustedKeys, String> {
        rocmx_cache::keys::TrustedKeys::parse(self.value("trusted-public-keys").unwrap_or(""))
            .map_err(|e| format!("trusted-public-keys: {e}"))
    }

    /// The keys of the files `secret-key-files` names (white-space separated); an
    /// unreadable or malformed file is an error naming it.
    pub fn secret_keys(&self) -> Result<Vec<rocmx_cache::keys::SecretKey>, String> {
        let mut out = Vec::new();
        for f in self
            .value("secret-key-files")
            .unwrap_or("")
            .split_whitespace()
        {
            let text = std::fs::read_to_string(f)
                .map_err(|e| format!("reading the secret key file '{f}': {e}"))?;
            out.push(
                rocmx_cache::keys::SecretKey::parse(&text)
                    .map_err(|e| format!("the secret key file '{f}': {e}"))?,
            );
        }
        Ok(out)
    }

    /// `require-sigs-count`: how many distinct trusted keys must have signed
    /// realisations that agree on a floating output's path before it is substituted
    /// (default 1).
    pub fn require_sigs_count(&self) -> Result<usize, String> {
        self.value("require-sigs-count")
            .map_or(Ok(1), parse_sigs_count)
            .map_err(|e| format!("require-sigs-count: {e}"))
    }

    /// The `access-tokens` that apply (white-space separated `HOST[:PORT]=TOKEN`).
    pub fn access_tokens(&self) -> Result<rocmx_cache::transport::AccessTokens, String> {
        rocmx_cache::transport::AccessTokens::parse(self.value("access-tokens").unwrap_or(""))
            .map_err(|e| format!("access-tokens: {e}"))
    }

    /// Applies the settings, in order, to `opts`.
    pub fn apply(&self, opts: &mut BuildOptions) -> Result<(), String> {
        opts.mirrors = self.mirrors.clone();
        for (name, value, at) in &self.settings {
            apply_setting(opts, name, value).map_err(|e| format!("in {at}: {e}"))?;
        }
        Ok(())
    }
}

/// Checks a setting's name and value without applying it.
fn check_setting(name: &str, value: &str) -> Result<(), String> {
    apply_setting(&mut BuildOptions::default(), name, value)
}

/// Seconds; 0 is "no limit".
fn parse_secs(value: &str) -> Result<Option<Duration>, String> {
    let n: u64 = value
        .parse()
        .map_err(|_| format!("expected a number of seconds, found '{value}'"))?;
    Ok((n > 0).then(|| Duration::from_secs(n)))
}

/// A number of signatures, at least 1.
fn parse_sigs_count(value: &str) -> Result<usize, String> {
    match value.parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!(
            "expected a number of trusted signatures (1 or more), found '{value}'"
        )),
    }
}

/// `true` or `false`, as Nix writes booleans.
fn parse_bool(value: &str) -> Result<bool, String> {
    match value {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(format!("expected true or false, found '{value}'")),
    }
}

/// Bytes, or a number with a K, M, G or T suffix (powers of 1024).
pub fn parse_size(value: &str) -> Result<u64, String> {
    let bad = || format!("expected a size such as 4096, 512M or 2G, found '{value}'");
    let v = value.trim();
    let (digits, shift) = match v.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let shift = match c.to_ascii_uppercase() {
                'K' => 10,
                'M' => 20,
                'G' => 30,
                'T' => 40,
                _ => return Err(bad()),
            };
            (&v[..i], shift)
        }
        _ => (v, 0),
    };
    let n: u64 = digits.trim().parse().map_err(|_| bad())?;
    n.checked_mul(1u64 << shift).ok_or_else(bad)
}

fn apply_setting(opts: &mut BuildOptions, name: &str, value: &str) -> Result<(), String> {
    let size_or_none = |v: &str| parse_size(v).map(|n| (n > 0).then_some(n));
    match name {
        // Cache settings: read by the commands that use them ([`Config::value`]).
        "substituters" | "trusted-public-keys" | "secret-key-files" | "builder-cache" => {}
        // Read by `rocmx build` (`crate::slurm::executor`).
        "builders" => {
            crate::slurm::Spec::parse(value)?;
        }
        "access-tokens" => {
            rocmx_cache::transport::AccessTokens::parse(value)?;
        }
        // Substitution: read by the commands that substitute ([`Config::require_sigs_count`]).
        "require-sigs-count" => {
            parse_sigs_count(value)?;
        }
        // Garbage collection: read by `rocmx store gc` ([`Config::flag`]).
        "keep-derivations" | "keep-outputs" => {
            parse_bool(value)?;
        }
        // Evaluation: read by the evaluating commands (`cmd::evalopts`).
        "abort-on-warn" | "restrict-eval" | "allow-import-from-derivation" => {
            parse_bool(value)?;
        }
        "max-call-depth" => {
            value
                .parse::<usize>()
                .map_err(|_| format!("expected a number of calls, found '{value}'"))?;
        }
        "timeout" => opts.timeout = parse_secs(value)?,
        "max-silent-time" => opts.max_silent = parse_secs(value)?,
        "max-build-processes" => {
            let n: u32 = value
                .parse()
                .map_err(|_| format!("expected a number of processes, found '{value}'"))?;
            opts.limits.max_processes = (n > 0).then_some(n);
        }
        "build-dir-size" => opts.limits.disk = size_or_none(value)?,
        "shm-size" => opts.limits.shm_size = size_or_none(value)?,
        "download-size-limit" => {
            opts.fetch_limits.max_size = size_or_none(value)?.unwrap_or(u64::MAX)
        }
        "connect-timeout" => {
            opts.fetch_limits.connect_timeout =
                parse_secs(value)?.ok_or("connect-timeout must be at least 1 second")?
        }
        "stalled-download-timeout" => {
            opts.fetch_limits.stall_timeout =
                parse_secs(value)?.ok_or("stalled-download-timeout must be at least 1 second")?
        }
        _ => {
            let hint = rocmx_lang::eval::error::did_you_mean(name, SETTINGS.iter().copied())
                .map(|s| format!("; did you mean '{s}'?"))
                .unwrap_or_default();
            return Err(format!(
                "unknown setting '{name}'{hint} (known: mirror.NAME, {})",
                SETTINGS.join(", ")
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> Result<Config, String> {
        let mut c = Config {
            mirrors: Mirrors::default(),
            settings: Vec::new(),
        };
        c.add_text(text, "test.conf")?;
        Ok(c)
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("512M"), Ok(512 << 20));
        assert_eq!(parse_size("2g"), Ok(2 << 30));
        assert_eq!(parse_size("1T"), Ok(1 << 40));
        assert!(parse_size("2X").is_err());
        assert!(parse_size("G").is_err());
        assert!(parse_size("99999999999T").is_err());
    }

    #[test]
    fn settings_apply_in_order_and_zero_means_no_limit() {
        let c = config(
            "mirror.gnu = http://a.invalid/gnu\ntimeout = 10 # short\nmax-silent-time = 0\n\
             max-build-processes = 100\nbuild-dir-size = 1G\nshm-size = 64M\n\
             download-size-limit = 1M\ntimeout = 20\n",
        )
        .unwrap();
        let mut o = BuildOptions::default();
        c.apply(&mut o).unwrap();
        assert_eq!(o.timeout, Some(Duration::from_secs(20)));
        assert_eq!(o.max_silent, None);
        assert_eq!(o.limits.max_processes, Some(100));
        assert_eq!(o.limits.disk, Some(1 << 30));
        assert_eq!(o.limits.shm_size, Some(64 << 20));
        assert_eq!(o.fetch_limits.max_size, 1 << 20);
    }

    #[test]
    fn defaults_bound_every_build() {
        let o = BuildOptions::default();
        assert_eq!(o.timeout, Some(Duration::from_secs(48 * 3600)));
        assert_eq!(o.max_silent, Some(Duration::from_secs(3600)));
        assert_eq!(o.limits.max_processes, Some(8192));
        assert_eq!(o.limits.shm_size, Some(2 << 30));
        assert_eq!(o.limits.disk, Some(256 << 30));
    }

    #[test]
    fn bad_settings_are_named_with_their_line() {
        let e = config("\n\nmax-silent-tme = 5\n").err().unwrap();
        assert!(e.contains("'test.conf' line 3"), "{e}");
        assert!(e.contains("did you mean 'max-silent-time'?"), "{e}");
        let e = config("shm-size = lots\n").err().unwrap();
        assert!(e.contains("expected a size such as"), "{e}");
        let e = config("mirror.x =\n").err().unwrap();
        assert!(e.contains("line 1"), "{e}");
    }

    #[test]
    fn gc_flags_default_and_are_checked() {
        let mut c = config("keep-outputs = true\n").unwrap();
        assert_eq!(c.flag("keep-derivations", true), Ok(true));
        assert_eq!(c.flag("keep-outputs", false), Ok(true));
        c.add_options(&["keep-derivations".into(), "false".into()])
            .unwrap();
        assert_eq!(c.flag("keep-derivations", true), Ok(false));
        let e = config("keep-outputs = yes\n").err().unwrap();
        assert!(e.contains("expected true or false"), "{e}");
    }

    #[test]
    fn require_sigs_count_defaults_to_one_and_is_checked() {
        let mut c = config("").unwrap();
        assert_eq!(c.require_sigs_count(), Ok(1));
        c.add_options(&["require-sigs-count".into(), "2".into()])
            .unwrap();
        assert_eq!(c.require_sigs_count(), Ok(2));
        for bad in ["0", "-1", "two"] {
            let e = config(&format!("require-sigs-count = {bad}\n"))
                .err()
                .unwrap();
            assert!(e.contains("1 or more") && e.contains("line 1"), "{e}");
        }
    }

    #[test]
    fn options_override_files() {
        let mut c = config("timeout = 10\n").unwrap();
        c.add_options(&["timeout".into(), "0".into()]).unwrap();
        let mut o = BuildOptions::default();
        c.apply(&mut o).unwrap();
        assert_eq!(o.timeout, None);
        let e = c.add_options(&["nope".into(), "1".into()]).unwrap_err();
        assert!(e.contains("unknown setting 'nope'"), "{e}");
        c.add_options(&["access-tokens".into(), "h:1=t0 h=t1".into()])
            .unwrap();
        assert_eq!(c.access_tokens().unwrap().for_authority("h:1"), Some("t0"));
        let e = c
            .add_options(&["access-tokens".into(), "oops".into()])
            .unwrap_err();
        assert!(e.contains("HOST[:PORT]=TOKEN"), "{e}");
    }
}
