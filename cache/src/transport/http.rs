//! A cache served over HTTP(S) (`http://HOST[:PORT]/PREFIX`, `https://…`): any static
//! file server (nginx, an object store's web endpoint) or `rocmx serve`.
//!
//! Owns: turning the file operations into requests. `GET` for files (404 and 410 mean
//! "not there"; any other status other than 200 is an error naming the cache and the
//! status), `HEAD` for existence, with a connection timeout and a read timeout so a
//! cache that never answers is given up on. Writing is refused: pushing goes to a
//! `file://` cache (or, later, to `rocmx serve --writable`).
//!
//! Must not: follow redirects to other hosts, or use a proxy from the environment
//! (a cache is named exactly).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{check_rel, Transport};
use crate::CacheError;

/// How long to wait.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    /// To connect.
    pub connect: Duration,
    /// Without a byte arriving.
    pub read: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect: Duration::from_secs(10),
            read: Duration::from_secs(30),
        }
    }
}

/// A cache over HTTP(S).
pub struct HttpCache {
    url: String,
    /// `url` without a trailing slash.
    base: String,
    agent: ureq::Agent,
}

impl HttpCache {
    /// The cache at `url`.
    pub fn new(url: &str, t: Timeouts) -> Result<HttpCache, CacheError> {
        let rest = url
            .strip_prefix("http://")
            .or_else(|| url.strip_prefix("https://"))
            .unwrap_or("");
        if rest.is_empty() || rest.starts_with('/') || url.contains(['?', '#']) {
            return Err(CacheError::Url {
                url: url.to_string(),
                why: "expected http://HOST[:PORT][/PREFIX] (no query or fragment)".into(),
            });
        }
        let agent = ureq::AgentBuilder::new()
            .timeout_connect(t.connect)
            .timeout_read(t.read)
            .timeout_write(t.read)
            .redirects(0)
            .try_proxy_from_env(false)
            .user_agent(concat!("rocmx/", env!("CARGO_PKG_VERSION")))
            .build();
        Ok(HttpCache {
            url: url.to_string(),
            base: url.trim_end_matches('/').to_string(),
            agent,
        })
    }

    fn target(&self, rel: &str) -> Result<String, CacheError> {
        check_rel(rel)?;
        // `!` in realisation names is a sub-delim, allowed in a path as it is.
        Ok(format!("{}/{rel}", self.base))
    }

    fn fail(&self, rel: &str, why: String) -> CacheError {
        CacheError::Http {
            cache: self.url.clone(),
            file: rel.to_string(),
            why,
        }
    }

    /// `Ok(None)` for 404/410.
    fn request(&self, method: &str, rel: &str) -> Result<Option<ureq::Response>, CacheError> {
        let url = self.target(rel)?;
        match self.agent.request(method, &url).call() {
            Ok(r) if r.status() == 200 => Ok(Some(r)),
            Ok(r) => Err(self.fail(rel, format!("answered {} {}", r.status(), r.status_text()))),
            Err(ureq::Error::Status(404 | 410, _)) => Ok(None),
            Err(ureq::Error::Status(code, r)) => {
                Err(self.fail(rel, format!("answered {code} {}", r.status_text())))
            }
            Err(ureq::Error::Transport(t)) => Err(self.fail(rel, t.to_string())),
        }
    }
}

impl Transport for HttpCache {
    fn url(&self) -> &str {
        &self.url
    }

    fn get(&self, rel: &str, limit: u64) -> Result<Option<Vec<u8>>, CacheError> {
        let Some(r) = self.request("GET", rel)? else {
            return Ok(None);
        };
        let mut v = Vec::new();
        r.into_reader()
            .take(limit + 1)
            .read_to_end(&mut v)
            .map_err(|e| self.fail(rel, format!("reading the answer: {e}")))?;
        if v.len() as u64 > limit {
            return Err(CacheError::Protocol(format!(
                "{}: '{rel}' is larger than {limit} bytes",
                self.url
            )));
        }
        Ok(Some(v))
    }

    fn open(&self, rel: &str) -> Result<Option<Box<dyn Read + Send>>, CacheError> {
        Ok(self
            .request("GET", rel)?
            .map(|r| Box::new(r.into_reader()) as Box<dyn Read + Send>))
    }

    fn exists(&self, rel: &str) -> Result<bool, CacheError> {
        Ok(self.request("HEAD", rel)?.is_some())
    }

    fn put(&self, rel: &str, _bytes: &[u8]) -> Result<(), CacheError> {
        Err(self.fail(
            rel,
            "pushing over HTTP is not supported; push to a file:///DIR cache that the server serves"
                .into(),
        ))
    }

    fn put_file(&self, rel: &str, _src: &Path) -> Result<(), CacheError> {
        self.put(rel, &[])
    }

    fn scratch_dir(&self) -> Option<PathBuf> {
        None
    }
}
