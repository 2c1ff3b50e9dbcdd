//! Reading one URL for `builtin:fetchurl`: `http://` and `https://` through
//! ureq (rustls, webpki roots or `SSL_CERT_FILE`), and `file://`.
//!
//! This module owns opening a URL as a byte stream, following redirects
//! (itself, at most [`MAX_REDIRECTS`], only to http and https and never from
//! https down to http), and describing why that failed in words a user can
//! act on ("connection refused", "HTTP 404 Not Found"). Every blocking call
//! is bounded by the connect or the stall timeout. It must not write files,
//! decide about fallbacks (the caller tries the next URL), enforce the size
//! or whole-fetch limits (`guard` does) or decode content: the bytes handed
//! back are the server's bytes, with no `Content-Encoding` negotiated. Requests
//! carry no cookies, credentials or proxy settings from the environment.

use std::fs::OpenOptions;
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::limits::{secs, Limits};
use super::mirrors::strip_prefix_ignore_case;

/// Redirects followed before giving up.
pub(super) const MAX_REDIRECTS: u32 = 10;

/// Why one URL could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Failure {
    /// What went wrong, without the URL.
    pub reason: String,
    /// The HTTP status, when the server answered with a non-2xx one.
    pub http_status: Option<u16>,
}

impl Failure {
    pub(super) fn new(reason: impl Into<String>) -> Self {
        Failure {
            reason: reason.into(),
            http_status: None,
        }
    }
}

/// An opened URL: the body stream and, when the server announced it, its length.
pub(super) struct Opened {
    /// The body.
    pub body: Box<dyn Read + Send>,
    /// `Content-Length`, or a file's size.
    pub expected_len: Option<u64>,
    /// The URL the body comes from (after redirects).
    pub url: String,
}

/// Opens URLs; holds the HTTP agent, built on first use so that a bad
/// `SSL_CERT_FILE` only matters when an `https://` URL is actually tried.
#[derive(Clone)]
pub(super) struct Transport {
    agent: Option<ureq::Agent>,
    connect_timeout: Duration,
    stall_timeout: Duration,
}

impl Transport {
    /// A transport whose connections and reads are bounded by `limits`.
    pub(super) fn new(limits: &Limits) -> Self {
        Transport {
            agent: None,
            connect_timeout: limits.connect_timeout,
            stall_timeout: limits.stall_timeout,
        }
    }

    /// The longest a read may wait for data.
    pub(super) fn stall_timeout(&self) -> Duration {
        self.stall_timeout
    }

    /// Gets ready to open `url` (builds the HTTP agent for http and https
    /// URLs), so that clones share it.
    pub(super) fn prepare(&mut self, url: &str) -> Result<(), Failure> {
        if is_http(url) {
            self.agent()?;
        }
        Ok(())
    }

    /// Opens `url` for reading; `redirected` is told each redirect target
    /// before it is requested.
    pub(super) fn open(
        &mut self,
        url: &str,
        redirected: &mut dyn FnMut(&str),
    ) -> Result<Opened, Failure> {
        if is_http(url) {
            self.open_http(url, redirected)
        } else if let Some(rest) = strip_prefix_ignore_case(url, "file://") {
            open_file(rest, url)
        } else {
            let scheme = url.split_once(':').map_or(url, |(s, _)| s);
            Err(Failure::new(format!(
                "unsupported URL scheme '{scheme}' (supported: http, https, file)"
            )))
        }
    }

    fn agent(&mut self) -> Result<&ureq::Agent, Failure> {
        if self.agent.is_none() {
            let tls = tls_config().map_err(Failure::new)?;
            let agent = ureq::AgentBuilder::new()
                .timeout_connect(self.connect_timeout)
                .timeout_read(self.stall_timeout)
                .timeout_write(self.stall_timeout)
                // Redirects are followed by `open_http`, which checks each target.
                .redirects(0)
                .try_proxy_from_env(false)
                .user_agent(concat!("rocmx-fetchurl/", env!("CARGO_PKG_VERSION")))
                .tls_config(tls)
                .build();
            self.agent = Some(agent);
        }
        self.agent
            .as_ref()
            .ok_or_else(|| Failure::new("internal error: no HTTP agent"))
    }

    fn open_http(
        &mut self,
        url: &str,
        redirected: &mut dyn FnMut(&str),
    ) -> Result<Opened, Failure> {
        let agent = self.agent()?.clone();
        let mut current = url.to_string();
        for _ in 0..=MAX_REDIRECTS {
            let resp = match agent.get(&current).call() {
                Ok(resp) => resp,
                Err(ureq::Error::Status(status, resp)) => {
                    return Err(status_failure(status, resp.status_text(), &current, url))
                }
                Err(ureq::Error::Transport(t)) => {
                    return Err(Failure::new(self.describe_transport(&t, &current)))
                }
            };
            let status = resp.status();
            if (200..300).contains(&status) {
                let expected_len = resp
                    .header("Content-Length")
                    .and_then(|v| v.trim().parse::<u64>().ok());
                return Ok(Opened {
                    body: Box::new(resp.into_reader()),
                    expected_len,
                    url: current,
                });
            }
            if !matches!(status, 301 | 302 | 303 | 307 | 308) {
                return Err(status_failure(status, resp.status_text(), &current, url));
            }
            let Some(location) = resp.header("Location") else {
                let mut f = status_failure(status, resp.status_text(), &current, url);
                f.reason.push_str(" without a Location header");
                return Err(f);
            };
            let next = redirect_target(&current, location)?;
            redirected(&next);
            current = next;
        }
        Err(Failure::new(format!(
            "too many redirects (more than {MAX_REDIRECTS}), the last to '{current}'"
        )))
    }

    /// Words for a ureq transport error while requesting `url`: the kind,
    /// then the innermost cause.
    fn describe_transport(&self, t: &ureq::Transport, url: &str) -> String {
        use ureq::ErrorKind as K;
        let io = io_cause(t);
        let specific = match (t.kind(), io.map(io::Error::kind)) {
            (K::ConnectionFailed, Some(io::ErrorKind::ConnectionRefused)) => {
                Some("connection refused".to_string())
            }
            (K::ConnectionFailed, Some(io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock)) => {
                Some(format!(
                    "connection timed out (after {} s)",
                    secs(self.connect_timeout)
                ))
            }
            (K::Io, Some(io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock)) => {
                Some(super::guard::no_data(self.stall_timeout, url).reason)
            }
            _ => None,
        };
        if let Some(s) = specific {
            return s;
        }
        let mut out = match t.kind() {
            K::ConnectionFailed => "connection failed".to_string(),
            K::Dns => "could not resolve the host name".to_string(),
            K::BadStatus | K::BadHeader => "malformed HTTP response".to_string(),
            K::InvalidUrl | K::UnknownScheme => "invalid URL".to_string(),
            K::Io => "I/O error".to_string(),
            kind => kind.to_string(),
        };
        if let Some(msg) = t.message() {
            out.push_str(&format!(": {msg}"));
        }
        if let Some(e) = io {
            out.push_str(&format!(" ({e})"));
        } else if let Some(src) = std::error::Error::source(t) {
            out.push_str(&format!(" ({src})"));
        }
        out
    }
}

/// Whether `url` is an http or https URL.
fn is_http(url: &str) -> bool {
    strip_prefix_ignore_case(url, "http://").is_some()
        || strip_prefix_ignore_case(url, "https://").is_some()
}

/// Where a redirect from `from` with header `Location: location` leads, if it
/// may be followed: to http or https only, and never from https to http.
fn redirect_target(from: &str, location: &str) -> Result<String, Failure> {
    let base = url::Url::parse(from)
        .map_err(|e| Failure::new(format!("cannot parse the URL '{from}': {e}")))?;
    let next = base.join(location.trim()).map_err(|e| {
        Failure::new(format!(
            "bad redirect from '{from}' to '{location}' (Location header): {e}"
        ))
    })?;
    let refuse = |why: &str| {
        Err(Failure::new(format!(
            "refusing the redirect to '{next}' (from '{from}'): {why}"
        )))
    };
    match (base.scheme(), next.scheme()) {
        ("https", "http") => refuse("a downgrade from https to http"),
        (_, "http" | "https") => Ok(next.to_string()),
        (_, other) => refuse(&format!(
            "builtin:fetchurl follows redirects to http and https URLs only, not '{other}'"
        )),
    }
}

fn status_failure(status: u16, text: &str, final_url: &str, url: &str) -> Failure {
    let mut reason = format!("HTTP {status}");
    if !text.is_empty() {
        reason.push(' ');
        reason.push_str(text);
    }
    if final_url != url {
        reason.push_str(&format!(" (after redirects, at '{final_url}')"));
    }
    Failure {
        reason,
        http_status: Some(status),
    }
}

/// The first `io::Error` in a transport error's chain of causes.
fn io_cause(t: &ureq::Transport) -> Option<&io::Error> {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(t);
    while let Some(e) = cur {
        if let Some(io) = e.downcast_ref::<io::Error>() {
            return Some(io);
        }
        cur = e.source();
    }
    None
}

/// The TLS configuration: rustls with the ring provider; trust anchors from
/// the PEM file named by `SSL_CERT_FILE` when it is set (replacing the
/// built-in ones, as curl and OpenSSL do), else the webpki roots.
fn tls_config() -> Result<Arc<rustls::ClientConfig>, String> {
    let file = std::env::var_os("SSL_CERT_FILE").filter(|v| !v.is_empty());
    tls_config_from(file.map(PathBuf::from).as_deref())
}

/// The TLS configuration trusting the PEM bundle `cert_file`, or the webpki
/// roots when there is none.
fn tls_config_from(cert_file: Option<&Path>) -> Result<Arc<rustls::ClientConfig>, String> {
    let mut roots = rustls::RootCertStore::empty();
    match cert_file {
        Some(path) => add_pem_roots(&mut roots, path)?,
        None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("setting up TLS: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// Adds the certificates of a PEM bundle to `roots`.
fn add_pem_roots(roots: &mut rustls::RootCertStore, path: &Path) -> Result<(), String> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::CertificateDer;
    let bytes = std::fs::read(path)
        .map_err(|e| format!("reading SSL_CERT_FILE '{}': {e}", path.display()))?;
    let mut added = 0usize;
    for cert in CertificateDer::pem_slice_iter(&bytes) {
        let cert = cert.map_err(|e| {
            format!(
                "SSL_CERT_FILE '{}' is not a valid PEM bundle: {e}",
                path.display()
            )
        })?;
        if roots.add(cert).is_ok() {
            added += 1;
        }
    }
    if added == 0 {
        return Err(format!(
            "SSL_CERT_FILE '{}' holds no usable certificate",
            path.display()
        ));
    }
    Ok(())
}

/// Opens the rest of a `file://` URL (`/abs/path` or `localhost/abs/path`,
/// percent-escapes decoded; `url` is the whole URL). Only regular files are
/// read: a FIFO could block forever and a device could be endless. The file is
/// opened non-blocking, so that opening a FIFO does not wait for a writer
/// (regular files ignore the flag).
fn open_file(rest: &str, url: &str) -> Result<Opened, Failure> {
    let rest = strip_prefix_ignore_case(rest, "localhost").unwrap_or(rest);
    if !rest.starts_with('/') {
        return Err(Failure::new(
            "a file:// URL must name an absolute path on this machine (file:///path)",
        ));
    }
    let rest = rest.split(['?', '#']).next().unwrap_or(rest);
    let path = PathBuf::from(percent_decode(rest).map_err(Failure::new)?);
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(&path)
        .map_err(|e| {
            Failure::new(match e.kind() {
                io::ErrorKind::NotFound => format!("no such file '{}'", path.display()),
                _ => format!("cannot open '{}': {e}", path.display()),
            })
        })?;
    let meta = file
        .metadata()
        .map_err(|e| Failure::new(format!("cannot stat '{}': {e}", path.display())))?;
    if meta.is_dir() {
        return Err(Failure::new(format!(
            "'{}' is a directory; builtin:fetchurl fetches single files",
            path.display()
        )));
    }
    if !meta.is_file() {
        return Err(Failure::new(format!(
            "'{}' is not a regular file; builtin:fetchurl reads only regular files from file:// URLs",
            path.display()
        )));
    }
    Ok(Opened {
        body: Box::new(file),
        expected_len: Some(meta.len()),
        url: url.to_string(),
    })
}

/// Decodes `%XX` escapes into an OS string's bytes.
fn percent_decode(s: &str) -> Result<std::ffi::OsString, String> {
    use std::os::unix::ffi::OsStringExt;
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| format!("bad percent-escape in file URL path '{s}'"))?;
            if hex == 0 {
                return Err(format!("file URL path '{s}' contains %00"));
            }
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Ok(std::ffi::OsString::from_vec(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_decoding() {
        assert_eq!(percent_decode("/a%20b/c%2Fd").unwrap(), "/a b/c/d");
        assert!(percent_decode("/a%2").is_err());
        assert!(percent_decode("/a%zz").is_err());
        assert!(percent_decode("/a%00b").is_err());
    }

    #[test]
    fn file_urls() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("x y");
        std::fs::write(&f, b"data").unwrap();
        let url_path = dir.path().join("x%20y");
        let mut opened = open_file(url_path.to_str().unwrap(), "file://x")
            .map_err(|f| f.reason)
            .unwrap();
        let mut s = String::new();
        opened.body.read_to_string(&mut s).unwrap();
        assert_eq!(s, "data");
        assert_eq!(opened.expected_len, Some(4));
        let err = open_file(dir.path().to_str().unwrap(), "file://x")
            .err()
            .unwrap();
        assert!(err.reason.contains("is a directory"), "{}", err.reason);
        let err = open_file("relative/path", "file://x").err().unwrap();
        assert!(err.reason.contains("absolute"), "{}", err.reason);
        let err = open_file("/nonexistent/rocmx-fetch-test", "file://x")
            .err()
            .unwrap();
        assert!(err.reason.contains("no such file"), "{}", err.reason);
    }

    #[test]
    fn tls_roots() {
        assert!(tls_config_from(None).is_ok());
        let err = tls_config_from(Some(Path::new("/nonexistent/rocmx-ca.pem"))).unwrap_err();
        assert!(err.contains("reading SSL_CERT_FILE"), "{err}");
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, b"no certificates here\n").unwrap();
        let err = tls_config_from(Some(&empty)).unwrap_err();
        assert!(err.contains("no usable certificate"), "{err}");
    }

    #[test]
    fn unsupported_scheme() {
        let err = Transport::new(&Limits::default())
            .open("ftp://x.example.invalid/f", &mut |_| {})
            .err()
            .unwrap();
        assert!(
            err.reason.contains("unsupported URL scheme 'ftp'"),
            "{}",
            err.reason
        );
    }

    #[test]
    fn redirect_policy() {
        let ok = |from: &str, loc: &str| redirect_target(from, loc).map_err(|f| f.reason);
        assert_eq!(
            ok("http://h.example.invalid/a/b", "../c?x=1").unwrap(),
            "http://h.example.invalid/c?x=1"
        );
        assert_eq!(
            ok("http://h.example.invalid/a", "https://s.example.invalid/f").unwrap(),
            "https://s.example.invalid/f"
        );
        assert_eq!(
            ok("https://h.example.invalid/a", "//m.example.invalid/f").unwrap(),
            "https://m.example.invalid/f"
        );
        let e = ok("https://h.example.invalid/a", "http://h.example.invalid/a").unwrap_err();
        assert!(
            e.contains("refusing the redirect to 'http://h.example.invalid/a'")
                && e.contains("from 'https://h.example.invalid/a'")
                && e.contains("downgrade"),
            "{e}"
        );
        for target in [
            "file:///etc/passwd",
            "data:text/plain,hi",
            "ftp://h.example.invalid/f",
        ] {
            let e = ok("http://h.example.invalid/a", target).unwrap_err();
            assert!(
                e.contains(&format!("refusing the redirect to '{target}'")),
                "{e}"
            );
        }
        let e = ok("http://h.example.invalid/a", "http://[bad").unwrap_err();
        assert!(e.contains("bad redirect"), "{e}");
    }
}
