//! The user's configuration files, as far as the CLI needs them.
//!
//! Owns: finding and reading `rocmx.conf` and turning its settings into library values
//! (today: the mirror table of `builtin:fetchurl`).
//!
//! Must not: hold defaults that belong to a library (the mirror table's apt default is
//! [`Mirrors::from_apt`]'s) or write any file.
//!
//! # Files
//!
//! Read in this order, later ones overriding earlier ones:
//!
//! 1. `/etc/rocmx/rocmx.conf`;
//! 2. `$XDG_CONFIG_HOME/rocmx/rocmx.conf` (or `~/.config/rocmx/rocmx.conf`);
//! 3. the file named by `$ROCMX_CONFIG`, which must exist when set.
//!
//! ```text
//! # mirror://NAME/… expands to each URL in turn
//! mirror.debian = http://deb.example.invalid/debian
//! mirror.gnu = https://ftp.example.invalid/gnu https://other.example.invalid/gnu
//! ```
//!
//! Without a `mirror.debian` line, `mirror://debian` uses the Debian archive URIs of the
//! machine's apt sources.

use std::path::PathBuf;

use rocmx_builder::fetchurl::Mirrors;

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

/// The mirror table: the apt sources' Debian archive, then the configuration files.
pub fn mirrors() -> Result<Mirrors, String> {
    let mut m = Mirrors::from_apt();
    for f in files()? {
        let text = match std::fs::read_to_string(&f) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(format!("reading '{}': {e}", f.display())),
        };
        m.parse_config(&text)
            .map_err(|e| format!("in '{}': {e}", f.display()))?;
    }
    Ok(m)
}
