//! A cache served over HTTP(S) (`http://HOST[:PORT]/PREFIX`, `https://…`): any static
//! file server (nginx, an object store's web endpoint) or `rocmx serve`.
//!
//! Owns: turning the file operations into requests. `GET` for files (404 and 410 mean
//! "not there"; any other status other than 200 is an error naming the cache and the
//! status), `HEAD` for existence, with a connection timeout and a read timeout so a
//! cache that never answers is given up on. Writing is a `PUT` with `Authorization:
//! Bearer TOKEN` (what `rocmx serve --writable` accepts), the token coming from the
//! `access-tokens` setting ([`AccessTokens`]: `HOST[:PORT]=TOKEN` words); without one,
//! writing is refused before anything is sent. A non-2xx answer to a `PUT` is an error
//! naming the cache, the status and the first line the server gave as its reason. A
//! `PUT` waits up to an hour for its answer (the server imports the NAR first).
//!
//! Must not: follow redirects to other hosts, use a proxy from the environment (a
//! cache is named exactly), or send a token to any host but the one it is for.

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

/// How long a `PUT` waits for its answer.
const PUT_ANSWER: Duration = Duration::from_secs(3600);

/// The `access-tokens` setting: white-space separated `HOST[:PORT]=TOKEN` words, as
/// Nix writes them. A token for `HOST` serves every port of it; `HOST:PORT` wins.
#[derive(Clone, Default)]
pub struct AccessTokens(Vec<(String, String)>);

impl std::fmt::Debug for AccessTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hosts: Vec<&str> = self.0.iter().map(|(h, _)| h.as_str()).collect();
        write!(f, "AccessTokens({hosts:?})")
    }
}

impl AccessTokens {
    /// Parses the setting's value.
    pub fn parse(value: &str) -> Result<AccessTokens, String> {
        let mut out = Vec::new();
        for word in value.split_whitespace() {
            match word.split_once('=') {
                Some((host, token)) if !host.is_empty() && !token.is_empty() => {
                    out.push((host.to_ascii_lowercase(), token.to_string()))
                }
                _ => {
                    // Never echo what may be a token.
                    return Err(format!("entry {} is not HOST[:PORT]=TOKEN", out.len() + 1));
                }
            }
        }
        Ok(AccessTokens(out))
    }

    /// The token for `authority` (`HOST[:PORT]`), if any.
    pub fn for_authority(&self, authority: &str) -> Option<&str> {
        let authority = authority.to_ascii_lowercase();
        let host = match authority.rsplit_once(':') {
            Some((h, port)) if port.bytes().all(|b| b.is_ascii_digit()) => h,
            _ => authority.as_str(),
        };
        let find = |k: &str| self.0.iter().rev().find(|(h, _)| h == k);
        find(&authority)
            .or_else(|| find(host))
            .map(|(_, t)| t.as_str())
    }
}

/// The `HOST[:PORT]` of an http(s) URL (user information dropped).
fn authority(url: &str) -> &str {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .unwrap_or(url);
    let auth = rest.split('/').next().unwrap_or("");
    auth.rsplit_once('@').map_or(auth, |(_, a)| a)
}

/// What a `PUT` sends.
enum Body<'a> {
    Bytes(&'a [u8]),
    /// A file, and its length.
    File(std::fs::File, u64),
}

/// A cache over HTTP(S).
pub struct HttpCache {
    url: String,
    /// `url` without a trailing slash.
    base: String,
    agent: ureq::Agent,
    /// For `PUT`s: the same, waiting longer for the answer.
    put_agent: ureq::Agent,
    /// `Authorization: Bearer` this, on every request.
    token: Option<String>,
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
        let agent = |read: Duration| {
            ureq::AgentBuilder::new()
                .timeout_connect(t.connect)
                .timeout_read(read)
                .timeout_write(t.read)
                .redirects(0)
                .try_proxy_from_env(false)
                .user_agent(concat!("rocmx/", env!("CARGO_PKG_VERSION")))
                .build()
        };
        Ok(HttpCache {
            url: url.to_string(),
            base: url.trim_end_matches('/').to_string(),
            agent: agent(t.read),
            put_agent: agent(PUT_ANSWER.max(t.read)),
            token: None,
        })
    }

    /// The same cache, with the token `tokens` has for its host, if any.
    pub fn with_tokens(mut self, tokens: &AccessTokens) -> HttpCache {
        self.token = tokens
            .for_authority(authority(&self.url))
            .map(str::to_string);
        self
    }

    fn authorized(&self, req: ureq::Request) -> ureq::Request {
        match &self.token {
            Some(t) => req.set("Authorization", &format!("Bearer {t}")),
            None => req,
        }
    }

    /// `PUT rel` with `body`.
    fn send_put(&self, rel: &str, body: Body<'_>) -> Result<(), CacheError> {
        self.writable()?;
        let url = self.target(rel)?;
        let req = self.authorized(self.put_agent.put(&url));
        let sent = match body {
            Body::Bytes(b) => req.send_bytes(b),
            Body::File(f, len) => req
                .set("Content-Length", &len.to_string())
                .send(std::io::BufReader::with_capacity(1 << 20, f)),
        };
        match sent {
            Ok(r) if (200..300).contains(&r.status()) => Ok(()),
            Ok(r) => Err(self.fail(rel, answered(r.status(), r))),
            Err(ureq::Error::Status(code, r)) => Err(self.fail(rel, answered(code, r))),
            Err(ureq::Error::Transport(t)) => Err(self.fail(rel, t.to_string())),
        }
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
        match self.authorized(self.agent.request(method, &url)).call() {
            Ok(r) if r.status() == 200 => Ok(Some(r)),
            Ok(r) => Err(self.fail(rel, answered(r.status(), r))),
            Err(ureq::Error::Status(404 | 410, _)) => Ok(None),
            Err(ureq::Error::Status(code, r)) => Err(self.fail(rel, answered(code, r))),
            Err(ureq::Error::Transport(t)) => Err(self.fail(rel, t.to_string())),
        }
    }
}

/// `answered CODE TEXT`, and the first line of the answer's body when there is one
/// (the server's reason), shortened.
fn answered(code: u16, r: ureq::Response) -> String {
    let mut s = format!("answered {code} {}", r.status_text());
    let mut body = Vec::new();
    let _ = r.into_reader().take(1024).read_to_end(&mut body);
    let text = String::from_utf8_lossy(&body);
    let line: String = text
        .lines()
        .next()
        .unwrap_or("")
        .trim()
        .chars()
        .take(300)
        .collect();
    if !line.is_empty() && !line.starts_with('<') {
        s.push_str(": ");
        s.push_str(&line);
    }
    s
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

    fn writable(&self) -> Result<(), CacheError> {
        if self.token.is_some() {
            return Ok(());
        }
        Err(CacheError::Url {
            url: self.url.clone(),
            why: format!(
                "pushing over HTTP needs a token for {host}: set access-tokens, e.g. \
                 --option access-tokens '{host}=TOKEN' (the content of the server's \
                 --token-file)",
                host = authority(&self.url)
            ),
        })
    }

    fn put(&self, rel: &str, bytes: &[u8]) -> Result<(), CacheError> {
        self.send_put(rel, Body::Bytes(bytes))
    }

    fn put_file(&self, rel: &str, src: &Path) -> Result<(), CacheError> {
        let f = std::fs::File::open(src).map_err(|e| CacheError::Io {
            cache: self.url.clone(),
            what: "reading the local copy of",
            file: rel.to_string(),
            source: e,
        })?;
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        self.send_put(rel, Body::File(f, len))
    }

    fn scratch_dir(&self) -> Option<PathBuf> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_by_host_and_port() {
        let t =
            AccessTokens::parse("cache.example:8080=tokA  Cache.Example=tokB other=tokC").unwrap();
        assert_eq!(t.for_authority("cache.example:8080"), Some("tokA"));
        assert_eq!(t.for_authority("cache.example:9090"), Some("tokB"));
        assert_eq!(t.for_authority("CACHE.example"), Some("tokB"));
        assert_eq!(t.for_authority("nowhere"), None);
        assert_eq!(authority("http://u:p@h:1/x/y"), "h:1");
        assert_eq!(authority("https://h"), "h");
        let e = AccessTokens::parse("a=1 secret").unwrap_err();
        assert!(e.contains("entry 2") && !e.contains("secret"), "{e}");
        assert!(!format!("{t:?}").contains("tok"));
        let c = HttpCache::new("http://cache.example:8080/p", Timeouts::default()).unwrap();
        let e = c.put("x.narinfo", b"").unwrap_err().to_string();
        assert!(
            e.contains("access-tokens 'cache.example:8080=TOKEN'"),
            "{e}"
        );
        assert!(c.with_tokens(&t).writable().is_ok());
    }
}
