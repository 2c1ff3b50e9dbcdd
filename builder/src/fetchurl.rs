//! Nix's `builtin:fetchurl` builder: download one file (or unpack one tarball)
//! named by a fixed-output derivation's environment into its output path.
//!
//! The derivation's attributes: `url` (required) and `urls` (more candidates,
//! separated by white space), `name`, `executable = "1"`, `unpack = "1"`, and
//! `size`: the download's exact size in bytes, when known (Debian pool entries
//! come with one). A download that grows past `size` is stopped at once, and
//! one that ends short of it, or whose `Content-Length` differs, fails.
//!
//! This module owns reading the request from the derivation's environment
//! ([`FetchRequest`]), expanding `mirror://` URLs ([`Mirrors`]), trying the
//! candidate URLs in order with one log line per attempt, and writing the
//! result atomically (a temporary sibling of the destination, renamed into
//! place; partial files are removed on failure). Submodules: `mirrors` (the
//! mirror table and apt sources), `transport` (http, https, file; redirects),
//! `guard` (reading under the [`Limits`]: stall, speed, whole-fetch time,
//! size), `limits` ([`Limits`]), `unpack` (tarball extraction that treats the
//! archive as hostile).
//!
//! Every fetch is bounded ([`Limits`]): connecting, a stall (no byte for
//! `stall_timeout`) or a crawl (less than `min_speed` over it), the whole
//! fetch (`timeout`, which the realiser tightens to the build's `--timeout`)
//! and the size (`max_size`). Redirects are followed only to http and https,
//! never from https down to http; anything else is refused, naming the URL
//! and the target.
//!
//! Network and environment: as in Nix, a fixed-output fetch shares the host's
//! network (it runs in the rocmx process, outside any sandbox; the declared
//! hash is what makes that safe). Its environment is kept minimal: only the
//! attributes above are read from the derivation, nothing is exported to
//! any process, and requests carry only `Host`, `User-Agent` and `Accept`:
//! no cookies, credentials, `Accept-Encoding` or proxy settings from the
//! environment. The only host setting used is `SSL_CERT_FILE` (trust anchors).
//!
//! It must not check the declared output hash (the realiser does that after
//! the fetch and reports expected/actual), register anything in the store,
//! normalise the result beyond plain permissions (output processing does), or
//! run anything but fixed-output fetches: only those may reach the network.

mod guard;
mod limits;
mod mirrors;
mod transport;
mod unpack;

use std::collections::BTreeMap;
use std::fmt;
use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use guard::{Attempt, Stop};
pub use limits::Limits;
pub use mirrors::{strip_comment, Mirrors};
use transport::{Failure, Transport};

/// What a `builtin:fetchurl` derivation asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchRequest {
    /// Candidate URLs in order: `url` first, then the words of `urls`
    /// (duplicates dropped). May hold `mirror://NAME/…` URLs.
    pub urls: Vec<String>,
    /// `executable = "1"`: the file is made executable (mode 0555).
    pub executable: bool,
    /// `unpack = "1"`: the download is a tarball whose contents become the
    /// output directory.
    pub unpack: bool,
    /// The derivation's `name`, or the last path segment of the first URL.
    pub name: String,
    /// `size`: the exact size of the download in bytes, when the derivation
    /// knows it (a Debian pool entry does).
    pub size: Option<u64>,
}

impl FetchRequest {
    /// Reads the request from a derivation's environment as Nix's
    /// `builtin:fetchurl` does: `url` (required), `urls` (optional, separated
    /// by white space), `executable` and `unpack` (true only when exactly
    /// `"1"`), `name`; and rocmx's `size` (optional, in bytes).
    ///
    /// Fails when `url` is missing or empty, when both `executable` and
    /// `unpack` are set (an unpacked tree is a directory), or when `size` is
    /// not a decimal number.
    pub fn from_env(env: &BTreeMap<String, String>) -> Result<Self, FetchError> {
        let main = env.get("url").map(|u| u.trim()).unwrap_or("");
        if main.is_empty() {
            return Err(FetchError::MissingUrl);
        }
        let mut urls = vec![main.to_string()];
        for u in env
            .get("urls")
            .map(String::as_str)
            .unwrap_or("")
            .split_whitespace()
        {
            if !urls.iter().any(|have| have == u) {
                urls.push(u.to_string());
            }
        }
        let flag = |key: &str| env.get(key).is_some_and(|v| v == "1");
        let executable = flag("executable");
        let unpack = flag("unpack");
        if executable && unpack {
            return Err(FetchError::ExecutableAndUnpack);
        }
        let name = match env.get("name").filter(|n| !n.is_empty()) {
            Some(n) => n.clone(),
            None => base_name(main),
        };
        let size = match env.get("size").map(|s| s.trim()) {
            None | Some("") => None,
            Some(s) => Some(s.parse::<u64>().map_err(|_| FetchError::BadSize {
                value: s.to_string(),
            })?),
        };
        Ok(FetchRequest {
            urls,
            executable,
            unpack,
            name,
            size,
        })
    }
}

/// The last non-empty path segment of a URL (query and fragment ignored).
fn base_name(url: &str) -> String {
    let path = url.split(['?', '#']).next().unwrap_or(url);
    path.rsplit('/')
        .find(|s| !s.is_empty() && !s.ends_with(':'))
        .unwrap_or("download")
        .to_string()
}

/// What a successful fetch did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchOutcome {
    /// The URL (after `mirror://` expansion) the bytes came from.
    pub url: String,
    /// The number of bytes downloaded (the archive's size when unpacking).
    pub bytes: u64,
    /// The attempts that failed before this one, in order.
    pub failed: Vec<FailedAttempt>,
    /// When unpacking: the `comment` of the archive's first pax global header
    /// (`git archive` of a commit, and so GitHub's archives, write the commit
    /// id there).
    pub archive_comment: Option<String>,
    /// When unpacking: the newest modification time of the archive's entries
    /// (seconds since the epoch; a git archive's entries carry the commit time).
    pub archive_mtime: Option<u64>,
}

/// One URL that could not be fetched, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailedAttempt {
    /// The URL tried (after `mirror://` expansion).
    pub url: String,
    /// What went wrong, e.g. `connection refused` or `HTTP 404 Not Found`.
    pub reason: String,
    /// The HTTP status, when the server answered with a non-2xx one.
    pub http_status: Option<u16>,
}

impl fmt::Display for FailedAttempt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "'{}': {}", self.url, self.reason)
    }
}

/// Everything that can go wrong in `builtin:fetchurl`.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The derivation has no (or an empty) `url` attribute.
    #[error("builtin:fetchurl: the derivation has no 'url' attribute")]
    MissingUrl,
    /// `executable` and `unpack` were both set.
    #[error("builtin:fetchurl: 'executable' and 'unpack' cannot both be \"1\" (an unpacked tarball is a directory)")]
    ExecutableAndUnpack,
    /// The `size` attribute is not a byte count.
    #[error("builtin:fetchurl: attribute 'size' must be the download's size in bytes (a decimal number), not '{value}'")]
    BadSize {
        /// The attribute's value.
        value: String,
    },
    /// A bad line in the mirror configuration.
    #[error("mirror configuration, line {line}: {message}")]
    MirrorConfig {
        /// The line number, from 1.
        line: usize,
        /// What is wrong with it.
        message: String,
    },
    /// A `mirror://` URL names a mirror that is not configured.
    #[error("unknown mirror '{name}' in '{url}' ({known}); define it with a line 'mirror.{name} = URL [URL...]' in the mirror configuration")]
    UnknownMirror {
        /// The mirror name.
        name: String,
        /// The URL that named it.
        url: String,
        /// The known mirror names, in words.
        known: String,
    },
    /// A `mirror://` URL without a name or a path.
    #[error("malformed mirror URL '{url}': {reason}")]
    BadMirrorUrl {
        /// The URL.
        url: String,
        /// What is missing.
        reason: String,
    },
    /// The destination exists already.
    #[error("builtin:fetchurl: destination '{}' already exists", path.display())]
    DestExists {
        /// The destination.
        path: PathBuf,
    },
    /// A local file-system error while writing the result (not the source's fault).
    #[error("builtin:fetchurl: {what} '{}': {source}", path.display())]
    Io {
        /// What was being done.
        what: &'static str,
        /// The local path involved.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// The only URL could not be fetched.
    #[error("cannot download '{}': {}", .0.url, .0.reason)]
    Download(FailedAttempt),
    /// Every URL failed; each attempt is listed.
    #[error("cannot download '{name}': all {} URLs failed:{}", attempts.len(), list_attempts(attempts))]
    AllFailed {
        /// The request's name.
        name: String,
        /// The attempts, in order.
        attempts: Vec<FailedAttempt>,
    },
}

impl FetchError {
    /// The failed attempts behind a download error (empty for other errors).
    pub fn attempts(&self) -> &[FailedAttempt] {
        match self {
            FetchError::Download(a) => std::slice::from_ref(a),
            FetchError::AllFailed { attempts, .. } => attempts,
            _ => &[],
        }
    }
}

fn list_attempts(attempts: &[FailedAttempt]) -> String {
    attempts.iter().map(|a| format!("\n  {a}")).collect()
}

/// Performs a `builtin:fetchurl` request: tries each URL of `req` (after
/// `mirror://` expansion through `mirrors`) in order until one works, and
/// writes the result to `dest`, which must not exist.
///
/// For every attempt a line `downloading 'URL'...` is written to `log`, and a
/// line saying why when it fails. The file is written to a temporary sibling
/// of `dest` and renamed into place, with mode 0555 when `req.executable`
/// else 0444; with `req.unpack` the archive is extracted into a temporary
/// directory that becomes `dest` (its only top-level directory does, when it
/// has exactly one entry and that is a directory). Nothing is left behind on
/// failure. A download that fails (network, HTTP status, truncation, a limit
/// of `limits`, an archive that cannot be unpacked) moves on to the next URL;
/// a local write error stops at once, and so does passing `limits.timeout`,
/// which covers the whole fetch. Redirects are logged (`redirected to 'URL'`).
///
/// The declared output hash is not checked here.
pub fn fetch(
    req: &FetchRequest,
    mirrors: &Mirrors,
    limits: &Limits,
    dest: &Path,
    log: &mut dyn Write,
) -> Result<FetchOutcome, FetchError> {
    if fs::symlink_metadata(dest).is_ok() {
        return Err(FetchError::DestExists {
            path: dest.to_path_buf(),
        });
    }
    let mut candidates: Vec<String> = Vec::new();
    for url in &req.urls {
        for u in mirrors.expand(url)? {
            if !candidates.contains(&u) {
                candidates.push(u);
            }
        }
    }
    if candidates.is_empty() {
        return Err(FetchError::MissingUrl);
    }
    let file_name = dest
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "out".to_string());
    // Unique per process and per call, so concurrent fetches never share one.
    static SERIAL: AtomicU64 = AtomicU64::new(0);
    let tag = format!(
        "{}-{}",
        std::process::id(),
        SERIAL.fetch_add(1, Ordering::Relaxed)
    );
    let tmp = Scratch::new(dest.with_file_name(format!(".{file_name}.fetchurl-{tag}.part")));
    let stage = Scratch::new(dest.with_file_name(format!(".{file_name}.fetchurl-{tag}.unpack")));
    tmp.clear()?;
    stage.clear()?;

    let deadline = limits.timeout.map(|t| Instant::now() + t);
    let mut transport = Transport::new(limits);
    let mut failed: Vec<FailedAttempt> = Vec::new();
    for url in &candidates {
        let _ = writeln!(log, "downloading '{url}'...");
        let attempt = Attempt {
            url,
            limits,
            deadline,
            expected_size: req.size,
        };
        let result =
            download(&attempt, &mut transport, &tmp.path, req.executable, log).and_then(|bytes| {
                if req.unpack {
                    unpack_into(&tmp.path, &stage.path).map(|info| (bytes, info))
                } else {
                    Ok((bytes, unpack::ArchiveInfo::default()))
                }
            });
        match result {
            Ok((bytes, info)) => {
                let ready = if req.unpack {
                    tmp.clear()?;
                    pick_root(&stage.path)?
                } else {
                    tmp.path.clone()
                };
                rename_no_replace(&ready, dest)?;
                // Whatever is left of the stage (nothing, or the emptied
                // wrapper directory) goes; the guards clean up the rest.
                stage.clear()?;
                return Ok(FetchOutcome {
                    url: url.clone(),
                    bytes,
                    failed,
                    archive_comment: info.comment,
                    archive_mtime: info.newest_mtime,
                });
            }
            Err(Step::Fatal(e)) => return Err(e),
            Err(Step::Failed(f, last)) => {
                let _ = writeln!(log, "error: fetching '{url}' failed: {}", f.reason);
                failed.push(FailedAttempt {
                    url: url.clone(),
                    reason: f.reason,
                    http_status: f.http_status,
                });
                tmp.clear()?;
                stage.clear()?;
                if last {
                    break;
                }
            }
        }
    }
    if failed.len() == 1 {
        Err(FetchError::Download(failed.remove(0)))
    } else {
        Err(FetchError::AllFailed {
            name: req.name.clone(),
            attempts: failed,
        })
    }
}

/// The outcome of one step of an attempt: the source's fault (try the next
/// URL, unless the flag says the fetch is out of time) or a local failure
/// (stop).
enum Step {
    Failed(Failure, bool),
    Fatal(FetchError),
}

/// Downloads `attempt.url` into a new file at `tmp` with its final mode;
/// returns the byte count.
fn download(
    attempt: &Attempt<'_>,
    transport: &mut Transport,
    tmp: &Path,
    executable: bool,
    log: &mut dyn Write,
) -> Result<u64, Step> {
    let io_err = |what: &'static str| {
        move |source: io::Error| {
            Step::Fatal(FetchError::Io {
                what,
                path: tmp.to_path_buf(),
                source,
            })
        }
    };
    let mut out = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(tmp)
        .map_err(io_err("creating"))?;
    let bytes = attempt
        .run(transport, log, &mut |chunk| out.write_all(chunk))
        .map_err(|stop| match stop {
            Stop::Failed(f) => Step::Failed(f, false),
            Stop::OutOfTime(f) => Step::Failed(f, true),
            Stop::Local(e) => io_err("writing")(e),
        })?;
    out.sync_all().map_err(io_err("syncing"))?;
    let mode = if executable { 0o555 } else { 0o444 };
    fs::set_permissions(tmp, fs::Permissions::from_mode(mode))
        .map_err(io_err("setting the mode of"))?;
    Ok(bytes)
}

/// Extracts the archive at `archive` into a new directory `stage`.
fn unpack_into(archive: &Path, stage: &Path) -> Result<unpack::ArchiveInfo, Step> {
    fs::create_dir(stage).map_err(|source| {
        Step::Fatal(FetchError::Io {
            what: "creating",
            path: stage.to_path_buf(),
            source,
        })
    })?;
    unpack::unpack_file(archive, stage)
        .map_err(|reason| Step::Failed(Failure::new(format!("cannot unpack: {reason}")), false))
}

/// The directory that becomes the output: the stage's only entry when that
/// is a directory (as Nix strips a tarball's top-level directory), else the
/// stage itself.
fn pick_root(stage: &Path) -> Result<PathBuf, FetchError> {
    let io_err = |source| FetchError::Io {
        what: "reading",
        path: stage.to_path_buf(),
        source,
    };
    let mut entries = fs::read_dir(stage).map_err(io_err)?;
    let first = entries.next().transpose().map_err(io_err)?;
    let second = entries.next().transpose().map_err(io_err)?;
    if let (Some(only), None) = (first, second) {
        let file_type = only.file_type().map_err(io_err)?;
        if file_type.is_dir() {
            return Ok(only.path());
        }
    }
    Ok(stage.to_path_buf())
}

/// Renames `from` to `to`, failing if `to` exists (`RENAME_NOREPLACE`, with a
/// check-then-rename fallback where the file system lacks it).
fn rename_no_replace(from: &Path, to: &Path) -> Result<(), FetchError> {
    use nix::errno::Errno;
    use nix::fcntl::{renameat2, RenameFlags, AT_FDCWD};
    match renameat2(AT_FDCWD, from, AT_FDCWD, to, RenameFlags::RENAME_NOREPLACE) {
        Ok(()) => Ok(()),
        Err(Errno::EEXIST) => Err(FetchError::DestExists {
            path: to.to_path_buf(),
        }),
        Err(Errno::EINVAL | Errno::ENOSYS) => {
            if fs::symlink_metadata(to).is_ok() {
                return Err(FetchError::DestExists {
                    path: to.to_path_buf(),
                });
            }
            fs::rename(from, to).map_err(|source| FetchError::Io {
                what: "moving the download to",
                path: to.to_path_buf(),
                source,
            })
        }
        Err(e) => Err(FetchError::Io {
            what: "moving the download to",
            path: to.to_path_buf(),
            source: io::Error::from(e),
        }),
    }
}

/// A temporary path next to the destination, removed (file or tree) when
/// dropped or cleared.
struct Scratch {
    path: PathBuf,
}

impl Scratch {
    fn new(path: PathBuf) -> Self {
        Scratch { path }
    }

    /// Removes whatever is at the path (a leftover of an earlier attempt or
    /// of a crashed process with the same pid).
    fn clear(&self) -> Result<(), FetchError> {
        let result = match fs::symlink_metadata(&self.path) {
            Ok(m) if m.is_dir() => fs::remove_dir_all(&self.path),
            Ok(_) => fs::remove_file(&self.path),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
        };
        result.map_err(|source| FetchError::Io {
            what: "removing temporary",
            path: self.path.clone(),
            source,
        })
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = self.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn request_from_env() {
        let r = FetchRequest::from_env(&env(&[
            ("url", "mirror://debian/pool/h/hello_2.10.orig.tar.gz"),
            ("urls", " http://a.example.invalid/x  mirror://debian/pool/h/hello_2.10.orig.tar.gz\thttp://b.example.invalid/y "),
            ("name", "hello-src"),
            ("unpack", "1"),
            ("executable", "0"),
            ("out", "/rocmx/store/xxx-hello-src"),
        ]))
        .unwrap();
        assert_eq!(
            r,
            FetchRequest {
                urls: vec![
                    "mirror://debian/pool/h/hello_2.10.orig.tar.gz".into(),
                    "http://a.example.invalid/x".into(),
                    "http://b.example.invalid/y".into(),
                ],
                executable: false,
                unpack: true,
                name: "hello-src".into(),
                size: None,
            }
        );
        let r = FetchRequest::from_env(&env(&[
            ("url", "https://x.example.invalid/dl/tool?raw=true"),
            ("executable", "1"),
            ("unpack", "true"),
        ]))
        .unwrap();
        assert!(r.executable && !r.unpack, "only \"1\" is true");
        assert_eq!(r.name, "tool");
        assert_eq!(r.urls, ["https://x.example.invalid/dl/tool?raw=true"]);
    }

    #[test]
    fn request_errors() {
        assert!(matches!(
            FetchRequest::from_env(&env(&[])),
            Err(FetchError::MissingUrl)
        ));
        assert!(matches!(
            FetchRequest::from_env(&env(&[
                ("url", "  "),
                ("urls", "http://a.example.invalid/")
            ])),
            Err(FetchError::MissingUrl)
        ));
        let e = FetchRequest::from_env(&env(&[
            ("url", "http://a.example.invalid/f"),
            ("executable", "1"),
            ("unpack", "1"),
        ]))
        .unwrap_err();
        assert!(matches!(e, FetchError::ExecutableAndUnpack));
        assert!(e.to_string().contains("'executable' and 'unpack'"));
    }

    #[test]
    fn base_names() {
        assert_eq!(base_name("http://h.example.invalid/a/b.tar.gz"), "b.tar.gz");
        assert_eq!(base_name("http://h.example.invalid/a/dir/"), "dir");
        assert_eq!(base_name("http://h.example.invalid"), "h.example.invalid");
        assert_eq!(base_name("file:///"), "download");
    }

    #[test]
    fn all_failed_lists_every_attempt() {
        let e = FetchError::AllFailed {
            name: "src".into(),
            attempts: vec![
                FailedAttempt {
                    url: "http://a.example.invalid/f".into(),
                    reason: "connection refused".into(),
                    http_status: None,
                },
                FailedAttempt {
                    url: "http://b.example.invalid/f".into(),
                    reason: "HTTP 404 Not Found".into(),
                    http_status: Some(404),
                },
            ],
        };
        assert_eq!(
            e.to_string(),
            "cannot download 'src': all 2 URLs failed:\n  'http://a.example.invalid/f': connection refused\n  'http://b.example.invalid/f': HTTP 404 Not Found"
        );
        assert_eq!(e.attempts().len(), 2);
    }

    #[test]
    fn fetch_refuses_existing_dest_and_unknown_mirror() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src");
        fs::write(&src, b"abc").unwrap();
        let req = FetchRequest {
            urls: vec![format!("file://{}", src.display())],
            executable: false,
            unpack: false,
            name: "src".into(),
            size: None,
        };
        let mut log = Vec::new();
        let err = fetch(&req, &Mirrors::new(), &Limits::default(), &src, &mut log).unwrap_err();
        assert!(matches!(err, FetchError::DestExists { .. }), "{err}");
        let req = FetchRequest {
            urls: vec!["mirror://nope/x".into()],
            ..req
        };
        let err = fetch(
            &req,
            &Mirrors::new(),
            &Limits::default(),
            &dir.path().join("out"),
            &mut log,
        )
        .unwrap_err();
        assert!(matches!(err, FetchError::UnknownMirror { .. }), "{err}");
        assert!(log.is_empty());
    }
}
