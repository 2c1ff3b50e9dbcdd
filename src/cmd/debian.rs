//! `rocmx debian lock`: pin a Debian package set for a build root.
//!
//! ```text
//! rocmx debian lock --suite sid --packages build-essential,cmake \
//!     [--arch amd64] [--output debian.lock.json] [--update] [--allow-expired] [--mirror URL]
//!     [--keyring FILE]… [--allow-unsigned]
//! ```
//!
//! Reads `dists/SUITE/InRelease` (else `Release` + `Release.gpg`) and
//! `main/binary-ARCH/Packages.xz` from the mirror (default
//! `mirror://debian`: the machine's apt sources, or `mirror.debian` in
//! rocmx.conf), resolves with `rocmx_debian::resolve` and writes the lock
//! (`rocmx_debian::lock`) atomically. Without `--update`, an existing lock
//! for the same suite, architecture and requested set is left alone ("up to
//! date") and nothing is downloaded.
//!
//! The Release file's OpenPGP signature is verified with gpgv, as apt does
//! (`rocmx_debian::signature`), against, in this order: the `--keyring`
//! files; else the `Signed-By` of the apt source whose URI is the mirror's
//! first base URL (`etc/apt/sources.list` and `etc/apt/sources.list.d/*.list`,
//! `*.sources` under `$ROCMX_APT_ROOT`, default `/`); else the default
//! keyrings under that root (`usr/share/keyrings/debian-archive-keyring.gpg`,
//! `etc/apt/trusted.gpg`, `etc/apt/trusted.gpg.d/*.gpg` and `*.asc`, the
//! armoured ones dearmoured into the scratch directory because gpgv 2.2
//! cannot read them). A run says which keys signed it. `--allow-unsigned`
//! skips verification with a warning. An expired Release (`Valid-Until`)
//! is refused unless `--allow-expired` is given or apt is configured with
//! `Acquire::Check-Valid-Until "false"` (read from `etc/apt/apt.conf` and
//! `etc/apt/apt.conf.d/*` under the same root); then a warning says since
//! when.
//!
//! Owns: the arguments, the [`ArchiveSource`] over the builder's bounded
//! downloader, reading apt's files (settings, sources, keyrings), and the
//! messages. Must not: parse Debian formats, judge signatures or decide
//! anything about packages.

use std::cell::Cell;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use rocmx_builder::fetchurl::{self, FetchRequest, Limits, Mirrors};
use rocmx_debian::index::{self, ArchiveSource, LoadOptions};
use rocmx_debian::lock::Lock;
use rocmx_debian::release::{apt_disables_valid_until, format_date, from_unix};
use rocmx_debian::resolve;
use rocmx_debian::signature::{
    self, AptSource, Keyring, Keyrings, SignedBy, Trust, DEFAULT_KEYRING,
};

use super::fail::Fail;

#[derive(Args, Debug)]
pub struct DebianArgs {
    #[command(subcommand)]
    mode: Mode,
}

#[derive(Subcommand, Debug)]
enum Mode {
    /// Resolve packages of a Debian suite (with their dependencies, the
    /// Essential set and Priority: required) into a lock file.
    Lock(LockArgs),
}

#[derive(Args, Debug)]
struct LockArgs {
    /// The suite or codename (sid, unstable, trixie, …).
    #[arg(long)]
    suite: String,
    /// Comma-separated packages to install (a name, or a relation such as
    /// 'gcc (>= 4:14)').
    #[arg(long, value_delimiter = ',', required = true, value_name = "P1,P2,…")]
    packages: Vec<String>,
    /// The host architecture.
    #[arg(long, default_value = "amd64")]
    arch: String,
    /// The lock file to write.
    #[arg(long, short = 'o', default_value = "debian.lock.json")]
    output: PathBuf,
    /// Re-resolve even when the lock answers the same request.
    #[arg(long)]
    update: bool,
    /// Accept a Release file past its Valid-Until date (an old snapshot).
    #[arg(long)]
    allow_expired: bool,
    /// The archive's base URL (default: mirror://debian).
    #[arg(long, value_name = "URL")]
    mirror: Option<String>,
    /// Verify the Release file's signature against this OpenPGP keyring
    /// (binary or ASCII-armoured; repeatable) instead of the apt source's
    /// Signed-By or the default keyrings.
    #[arg(long, value_name = "FILE")]
    keyring: Vec<PathBuf>,
    /// Use the Release file without verifying its OpenPGP signature (an
    /// unsigned or unverifiable archive; warned about).
    #[arg(long, conflicts_with = "keyring")]
    allow_unsigned: bool,
}

pub fn run(a: DebianArgs) -> i32 {
    Fail::exit_code(match a.mode {
        Mode::Lock(l) => lock(l),
    })
}

/// The variable naming the root under which apt's configuration is read.
const APT_ROOT_VAR: &str = "ROCMX_APT_ROOT";

fn lock(a: LockArgs) -> Result<(), Fail> {
    let requested: Vec<String> = a
        .packages
        .iter()
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty())
        .collect();
    if requested.is_empty() {
        return Err(Fail::Msg("--packages names no package".into()));
    }
    let out = &a.output;
    match fs::read_to_string(out) {
        Ok(text) => match Lock::parse(&text) {
            Ok(old) if !a.update && old.same_request(&a.suite, &a.arch, &requested) => {
                println!(
                    "{} is up to date ({} packages, {}, Release of {}); --update re-resolves",
                    out.display(),
                    old.packages.len(),
                    human(old.total_size()),
                    old.date
                );
                return Ok(());
            }
            Ok(_) => {}
            Err(e) if !a.update => {
                return Err(Fail::Msg(format!(
                    "'{}' is not a valid lock file: {e} (--update replaces it)",
                    out.display()
                )))
            }
            Err(_) => {}
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Fail::Msg(format!("reading '{}': {e}", out.display()))),
    }

    let cfg = crate::config::read().map_err(Fail::Msg)?;
    let mut opts = rocmx_builder::BuildOptions::default();
    cfg.apply(&mut opts).map_err(Fail::Msg)?;
    let mirror = a.mirror.clone().unwrap_or_else(|| "mirror://debian".into());
    let source = MirrorSource::new(
        mirror.clone(),
        cfg.mirrors.clone(),
        opts.fetch_limits.clone(),
    )?;
    let apt_root = std::env::var_os(APT_ROOT_VAR)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/"));
    let apt_allows = apt_allows_expired(&apt_root);
    let allow_expired = a.allow_expired || apt_allows.is_some();
    let trust = if a.allow_unsigned {
        eprintln!(
            "warning: --allow-unsigned: the Release file of suite '{}' is used WITHOUT verifying its OpenPGP signature; \
             the lock is only as trustworthy as the mirror and the network path to it",
            a.suite
        );
        Trust::Unsigned
    } else {
        let bases = base_urls(&mirror, &cfg.mirrors);
        Trust::Keyrings(keyrings(
            &a.keyring,
            &apt_root,
            &bases,
            source.scratch.path(),
        )?)
    };
    let started = std::time::Instant::now();
    let loaded = index::load(
        &source,
        &LoadOptions {
            suite: a.suite.clone(),
            arch: a.arch.clone(),
            component: "main".into(),
            now: from_unix(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_secs() as i64)
                    .unwrap_or(0),
            ),
            allow_expired,
            trust: trust.clone(),
        },
    )
    .map_err(|e| Fail::Msg(e.to_string()))?;
    if let Trust::Keyrings(k) = &trust {
        eprintln!(
            "verified dists/{}/{}: good signature by {} ({})",
            a.suite,
            loaded.release_file,
            loaded
                .signers
                .iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>()
                .join(", "),
            k.origin
        );
    }
    if let Some(until) = loaded.expired {
        let why = if a.allow_expired {
            "--allow-expired".to_string()
        } else {
            format!(
                "apt's Acquire::Check-Valid-Until \"false\" in '{}'",
                apt_allows.as_deref().unwrap_or(Path::new("?")).display()
            )
        };
        eprintln!(
            "warning: the Release file of suite '{}' is expired: valid until {} (dated {}); this is an old snapshot, used because of {why}",
            a.suite,
            format_date(&until),
            loaded.release.date
        );
    }
    let resolution = resolve::resolve(&loaded.index, &requested, &a.arch)
        .map_err(|e| Fail::Msg(e.to_string()))?;
    let lock = Lock::new(
        &a.suite,
        &a.arch,
        &loaded.release.date,
        &requested,
        &loaded.index,
        &resolution,
    );
    write_atomically(out, lock.to_json().as_bytes())
        .map_err(|e| Fail::Msg(format!("writing '{}': {e}", out.display())))?;
    println!(
        "locked {} packages ({} to download) from suite '{}' (Release of {}; {} packages of {} and all in a {} index) into {} in {:.1} s",
        lock.packages.len(),
        human(lock.total_size()),
        a.suite,
        loaded.release.date,
        loaded.index.packages().len(),
        a.arch,
        human(loaded.packages_size),
        out.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The base URLs `mirror` stands for: those of `mirror://NAME` in the
/// mirror table, or the URL itself.
fn base_urls(mirror: &str, mirrors: &Mirrors) -> Vec<String> {
    let lower = mirror.to_ascii_lowercase();
    if let Some(rest) = lower.strip_prefix("mirror://") {
        let name_len = rest.find('/').unwrap_or(rest.len());
        let name = &mirror["mirror://".len().."mirror://".len() + name_len];
        let tail = mirror["mirror://".len() + name_len..].trim_matches('/');
        return mirrors
            .get(name)
            .unwrap_or(&[])
            .iter()
            .map(|b| {
                let b = b.trim_end_matches('/');
                if tail.is_empty() {
                    b.to_string()
                } else {
                    format!("{b}/{tail}")
                }
            })
            .collect();
    }
    vec![mirror.trim_end_matches('/').to_string()]
}

/// The apt sources under `root`, each with the file it is in:
/// `etc/apt/sources.list`, then `etc/apt/sources.list.d/*.list` and
/// `*.sources` in name order (as apt reads them). Unreadable files are
/// skipped.
fn apt_sources(root: &Path) -> Vec<(PathBuf, AptSource)> {
    let apt = root.join("etc/apt");
    let mut out = Vec::new();
    let main = apt.join("sources.list");
    if let Ok(text) = fs::read_to_string(&main) {
        out.extend(
            signature::one_line_sources(&text)
                .into_iter()
                .map(|s| (main.clone(), s)),
        );
    }
    if let Ok(dir) = fs::read_dir(apt.join("sources.list.d")) {
        let mut names: Vec<PathBuf> = dir.filter_map(|e| e.ok()).map(|e| e.path()).collect();
        names.sort();
        for path in names {
            let parse: fn(&str) -> Vec<AptSource> = match path.extension().and_then(|e| e.to_str())
            {
                Some("list") => signature::one_line_sources,
                Some("sources") => signature::deb822_sources,
                _ => continue,
            };
            if let Ok(text) = fs::read_to_string(&path) {
                out.extend(parse(&text).into_iter().map(|s| (path.clone(), s)));
            }
        }
    }
    out
}

/// The keyrings to verify with: `--keyring` files; else the `Signed-By` of
/// the apt source (under `root`) whose URI is the first of `bases` that has
/// one; else the default keyrings under `root`. Armoured keyrings are
/// dearmoured into `scratch` (gpgv 2.2 reads only binary ones).
fn keyrings(
    given: &[PathBuf],
    root: &Path,
    bases: &[String],
    scratch: &Path,
) -> Result<Keyrings, Fail> {
    let n = Cell::new(0u32);
    // Writes a dearmoured keyring into the scratch directory.
    let write = |bin: Vec<u8>, name: String| -> Result<Keyring, Fail> {
        n.set(n.get() + 1);
        let path = scratch.join(format!("keyring-{}.gpg", n.get()));
        fs::write(&path, bin)
            .map_err(|e| Fail::Msg(format!("writing '{}': {e}", path.display())))?;
        Ok(Keyring { path, name })
    };
    // A keyring gpgv can read: the file itself, or its dearmoured copy.
    let usable = |path: &Path| -> Result<Keyring, String> {
        let bytes = fs::read(path)
            .map_err(|e| format!("cannot read the keyring '{}': {e}", path.display()))?;
        let abs = std::path::absolute(path)
            .map_err(|e| format!("the keyring '{}': {e}", path.display()))?;
        if !signature::is_armored(&bytes) {
            return Ok(Keyring::new(abs));
        }
        let bin = signature::dearmor(&String::from_utf8_lossy(&bytes)).map_err(|e| {
            format!(
                "the keyring '{}' is ASCII-armoured but cannot be read: {e}",
                path.display()
            )
        })?;
        write(bin, path.display().to_string()).map_err(|e| match e {
            Fail::Msg(m) => m,
            _ => "cannot write a keyring".to_string(),
        })
    };
    let gpgv = PathBuf::from("gpgv");
    if !given.is_empty() {
        let files = given
            .iter()
            .map(|k| usable(k).map_err(Fail::Msg))
            .collect::<Result<Vec<_>, _>>()?;
        return Ok(Keyrings {
            gpgv,
            files,
            fingerprints: Vec::new(),
            origin: "--keyring".into(),
        });
    }
    // apt's trusted keyrings; a part that cannot be read is skipped with a
    // warning (apt skips it too).
    let defaults = || -> Vec<Keyring> {
        let mut paths: Vec<PathBuf> =
            [root.join(DEFAULT_KEYRING), root.join("etc/apt/trusted.gpg")]
                .into_iter()
                .filter(|p| p.is_file())
                .collect();
        if let Ok(dir) = fs::read_dir(root.join("etc/apt/trusted.gpg.d")) {
            let mut parts: Vec<PathBuf> = dir
                .filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| p.is_file() && signature::is_trusted_part(p))
                .collect();
            parts.sort();
            paths.extend(parts);
        }
        paths
            .iter()
            .filter_map(|p| match usable(p) {
                Ok(k) => Some(k),
                Err(m) => {
                    eprintln!("warning: skipping {m}");
                    None
                }
            })
            .collect()
    };
    let sources = apt_sources(root);
    for base in bases {
        let Some((file, entry)) = sources
            .iter()
            .find(|(_, s)| s.uris.iter().any(|u| signature::same_uri(u, base)))
        else {
            continue;
        };
        let Some(value) = &entry.signed_by else {
            // That source trusts the default keyrings.
            break;
        };
        let origin = format!("the Signed-By of {} for {base}", file.display());
        let mut files = Vec::new();
        let mut fingerprints = Vec::new();
        for item in signature::parse_signed_by(value) {
            match item {
                SignedBy::File(f) => files.push(
                    usable(Path::new(&f))
                        .map_err(|m| Fail::Msg(format!("{m} (named by {origin})")))?,
                ),
                SignedBy::Fingerprint(f) => fingerprints.push(f),
                SignedBy::Inline(block) => {
                    let bin = signature::dearmor(&block).map_err(|e| {
                        Fail::Msg(format!("the key block in {origin} cannot be read: {e}"))
                    })?;
                    files.push(write(bin, format!("the key block in {}", file.display()))?);
                }
            }
        }
        // Fingerprints select keys from the default keyrings (as apt does).
        if !fingerprints.is_empty() {
            files.extend(defaults());
        }
        return Ok(Keyrings {
            gpgv,
            files,
            fingerprints,
            origin,
        });
    }
    let files = defaults();
    let origin = if files.is_empty() {
        format!(
            "the default keyrings under {}, of which none exists: {DEFAULT_KEYRING}, etc/apt/trusted.gpg, \
             etc/apt/trusted.gpg.d/*.gpg and *.asc",
            root.display()
        )
    } else {
        format!("the default keyrings under {}", root.display())
    };
    Ok(Keyrings {
        gpgv,
        files,
        fingerprints: Vec::new(),
        origin,
    })
}

/// Where apt says `Acquire::Check-Valid-Until "false"`, if it does: the
/// files `etc/apt/apt.conf` then `etc/apt/apt.conf.d/*` (name order) under
/// `root`, the last setting winning.
fn apt_allows_expired(root: &Path) -> Option<PathBuf> {
    let mut files = vec![root.join("etc/apt/apt.conf")];
    if let Ok(dir) = fs::read_dir(root.join("etc/apt/apt.conf.d")) {
        let mut more: Vec<PathBuf> = dir.filter_map(|e| e.ok()).map(|e| e.path()).collect();
        more.sort();
        files.extend(more);
    }
    let mut found = None;
    for f in files {
        let Ok(text) = fs::read_to_string(&f) else {
            continue;
        };
        match apt_disables_valid_until(&text) {
            Some(true) => found = Some(f),
            Some(false) => found = None,
            None => {}
        }
    }
    found
}

/// Writes `bytes` to a temporary sibling of `path`, then renames it.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.write_all(bytes)?;
    // A lock is committed and read by others: not the temporary file's 0600.
    use std::os::unix::fs::PermissionsExt;
    tmp.as_file()
        .set_permissions(fs::Permissions::from_mode(0o644))?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// A size in bytes for people: `279.1 MiB`.
fn human(n: u64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < units.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", units[u])
    }
}

/// Archive files through `builtin:fetchurl`'s transport (bounded by the
/// configured limits, `mirror://` expanded), each into a scratch file.
struct MirrorSource {
    base: String,
    mirrors: Mirrors,
    limits: Limits,
    scratch: tempfile::TempDir,
    n: Cell<u32>,
}

impl MirrorSource {
    fn new(base: String, mirrors: Mirrors, limits: Limits) -> Result<MirrorSource, Fail> {
        let scratch = tempfile::Builder::new()
            .prefix("rocmx-debian-")
            .tempdir()
            .map_err(|e| Fail::Msg(format!("creating a scratch directory: {e}")))?;
        Ok(MirrorSource {
            base: base.trim_end_matches('/').to_string(),
            mirrors,
            limits,
            scratch,
            n: Cell::new(0),
        })
    }
}

impl ArchiveSource for MirrorSource {
    fn fetch(&self, path: &str, size: Option<u64>) -> Result<Vec<u8>, String> {
        let n = self.n.get();
        self.n.set(n + 1);
        let dest = self.scratch.path().join(format!("{n}"));
        let name = path.rsplit('/').next().unwrap_or("index").to_string();
        let req = FetchRequest {
            urls: vec![format!("{}/{path}", self.base)],
            executable: false,
            unpack: false,
            name,
            size,
        };
        fetchurl::fetch(
            &req,
            &self.mirrors,
            &self.limits,
            &dest,
            &mut std::io::sink(),
        )
        .map_err(|e| e.to_string())?;
        let bytes = fs::read(&dest).map_err(|e| format!("reading the download: {e}"));
        let _ = fs::remove_file(&dest);
        bytes
    }
}
