//! Reading one URL for `builtin:fetchurl`: `http://` and `https://` through
//! ureq (rustls, webpki roots or `SSL_CERT_FILE`), and `file://`.
//!
//! This module owns opening a URL as a byte stream and describing why that
//! failed in words a user can act on ("connection refused", "HTTP 404 Not
//! Found"). It must not write files, decide about fallbacks (the caller tries
//! the next URL) or decode content: the bytes handed back are the server's
//! bytes, with no `Content-Encoding` negotiated.

use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::mirrors::strip_prefix_ignore_case;

/// Time allowed to establish a connection (TCP and TLS).
pub(super) const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// Time allowed without receiving any data once connected.
pub(super) const READ_TIMEOUT: Duration = Duration::from_secs(300);
/// Redirects followed before giving up.
const MAX_REDIRECTS: u32 = 10;

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
    pub body: Box<dyn Read + Send>,
    pub expected_len: Option<u64>,
}

/// Opens URLs; holds the HTTP agent, built on first use so that a bad
/// `SSL_CERT_FILE` only matters when an `https://` URL is actually tried.
#[derive(Default)]
pub(super) struct Transport {
    agent: Option<ureq::Agent>,
}

impl Transport {
    /// Opens `url` for reading.
    pub(super) fn open(&mut self, url: &str) -> Result<Opened, Failure> {
        if strip_prefix_ignore_case(url, "http://").is_some()
            || strip_prefix_ignore_case(url, "https://").is_some()
        {
            self.open_http(url)
        } else if let Some(rest) = strip_prefix_ignore_case(url, "file://") {
            open_file(rest)
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
                .timeout_connect(CONNECT_TIMEOUT)
                .timeout_read(READ_TIMEOUT)
                .timeout_write(READ_TIMEOUT)
                .redirects(MAX_REDIRECTS)
                .user_agent(concat!("rocmx-fetchurl/", env!("CARGO_PKG_VERSION")))
                .tls_config(tls)
                .build();
            self.agent = Some(agent);
        }
        self.agent
            .as_ref()
            .ok_or_else(|| Failure::new("internal error: no HTTP agent"))
    }

    fn open_http(&mut self, url: &str) -> Result<Opened, Failure> {
        let agent = self.agent()?;
        match agent.get(url).call() {
            Ok(resp) => {
                let status = resp.status();
                if !(200..300).contains(&status) {
                    return Err(status_failure(
                        status,
                        resp.status_text(),
                        resp.get_url(),
                        url,
                    ));
                }
                let expected_len = resp
                    .header("Content-Length")
                    .and_then(|v| v.trim().parse::<u64>().ok());
                Ok(Opened {
                    body: Box::new(resp.into_reader()),
                    expected_len,
                })
            }
            Err(ureq::Error::Status(status, resp)) => Err(status_failure(
                status,
                resp.status_text(),
                resp.get_url(),
                url,
            )),
            Err(ureq::Error::Transport(t)) => Err(Failure::new(describe_transport(&t))),
        }
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

/// Words for a ureq transport error: the kind, then the innermost cause.
fn describe_transport(t: &ureq::Transport) -> String {
    use ureq::ErrorKind as K;
    let io = io_cause(t);
    let specific = match (t.kind(), io.map(io::Error::kind)) {
        (K::ConnectionFailed, Some(io::ErrorKind::ConnectionRefused)) => {
            Some("connection refused".to_string())
        }
        (K::ConnectionFailed, Some(io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock)) => {
            Some(format!(
                "connection timed out (after {} s)",
                CONNECT_TIMEOUT.as_secs()
            ))
        }
        (K::Io, Some(io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock)) => Some(format!(
            "timed out: no data for {} s",
            READ_TIMEOUT.as_secs()
        )),
        (K::TooManyRedirects, _) => Some(format!("too many redirects (more than {MAX_REDIRECTS})")),
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
/// percent-escapes decoded); directories are refused.
fn open_file(rest: &str) -> Result<Opened, Failure> {
    let rest = strip_prefix_ignore_case(rest, "localhost").unwrap_or(rest);
    if !rest.starts_with('/') {
        return Err(Failure::new(
            "a file:// URL must name an absolute path on this machine (file:///path)",
        ));
    }
    let rest = rest.split(['?', '#']).next().unwrap_or(rest);
    let path = PathBuf::from(percent_decode(rest).map_err(Failure::new)?);
    let file = File::open(&path).map_err(|e| {
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
    let expected_len = meta.is_file().then_some(meta.len());
    Ok(Opened {
        body: Box::new(file),
        expected_len,
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
        let mut opened = open_file(url_path.to_str().unwrap())
            .map_err(|f| f.reason)
            .unwrap();
        let mut s = String::new();
        opened.body.read_to_string(&mut s).unwrap();
        assert_eq!(s, "data");
        assert_eq!(opened.expected_len, Some(4));
        let err = open_file(dir.path().to_str().unwrap()).err().unwrap();
        assert!(err.reason.contains("is a directory"), "{}", err.reason);
        let err = open_file("relative/path").err().unwrap();
        assert!(err.reason.contains("absolute"), "{}", err.reason);
        let err = open_file("/nonexistent/rocmx-fetch-test").err().unwrap();
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
        let err = Transport::default()
            .open("ftp://x.example.invalid/f")
            .err()
            .unwrap();
        assert!(
            err.reason.contains("unsupported URL scheme 'ftp'"),
            "{}",
            err.reason
        );
    }
}
