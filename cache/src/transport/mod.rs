//! Where a cache's files are: reading and writing them by their path inside the cache.
//!
//! Owns: the cache URL forms and the file operations on them: `file:///DIR` (a
//! directory, read and written, [`file`]) and `http://HOST[:PORT]/PREFIX` or `https://…`
//! (read; written with a token of `access-tokens`, [`http`]).
//!
//! Must not: interpret what it reads (the formats are [`crate::narinfo`]'s and the
//! others'), or follow a path outside the cache: every path is relative, checked
//! component by component.

mod file;
mod http;

use std::io::Read;
use std::path::{Path, PathBuf};

pub use file::FileCache;
pub use http::{AccessTokens, HttpCache, Timeouts};

use crate::CacheError;

/// A cache's files.
pub trait Transport: Send + Sync {
    /// The URL it was opened with (for messages).
    fn url(&self) -> &str;
    /// A small file's bytes (at most `limit`), `None` if it does not exist.
    fn get(&self, rel: &str, limit: u64) -> Result<Option<Vec<u8>>, CacheError>;
    /// A stream of a (large) file, `None` if it does not exist.
    fn open(&self, rel: &str) -> Result<Option<Box<dyn Read + Send>>, CacheError>;
    /// Whether a file exists.
    fn exists(&self, rel: &str) -> Result<bool, CacheError>;
    /// Whether writing can be tried at all (an HTTP cache needs a token), checked
    /// before a push does any work.
    fn writable(&self) -> Result<(), CacheError> {
        Ok(())
    }
    /// Writes `bytes` as `rel`, atomically.
    fn put(&self, rel: &str, bytes: &[u8]) -> Result<(), CacheError>;
    /// Moves or copies the local file `src` to `rel`, atomically.
    fn put_file(&self, rel: &str, src: &Path) -> Result<(), CacheError>;
    /// A directory for temporary files that [`Transport::put_file`] can move from
    /// cheaply (inside the cache for a local one).
    fn scratch_dir(&self) -> Option<PathBuf>;
}

/// Opens a cache URL: `file:///DIR` (DIR is created on the first write) or
/// `http(s)://HOST[:PORT][/PREFIX]` (read only: no token), with the default timeouts.
pub fn open(url: &str) -> Result<Box<dyn Transport>, CacheError> {
    open_with(url, Timeouts::default())
}

/// [`open`] with the timeouts of an HTTP cache.
pub fn open_with(url: &str, timeouts: Timeouts) -> Result<Box<dyn Transport>, CacheError> {
    open_with_tokens(url, timeouts, &AccessTokens::default())
}

/// [`open_with`], an HTTP cache carrying the token `tokens` has for its host (which
/// lets it be written).
pub fn open_with_tokens(
    url: &str,
    timeouts: Timeouts,
    tokens: &AccessTokens,
) -> Result<Box<dyn Transport>, CacheError> {
    let bad = |why: &str| CacheError::Url {
        url: url.to_string(),
        why: why.to_string(),
    };
    if let Some(rest) = url.strip_prefix("file://") {
        let dir = rest.split(['?', '#']).next().unwrap_or("");
        if !dir.starts_with('/') {
            return Err(bad(
                "a file:// URL needs an absolute path (file:///srv/cache)",
            ));
        }
        return Ok(Box::new(file::FileCache::new(url, PathBuf::from(dir))));
    }
    if url.starts_with("http://") || url.starts_with("https://") {
        return http::HttpCache::new(url, timeouts)
            .map(|c| Box::new(c.with_tokens(tokens)) as Box<dyn Transport>);
    }
    Err(bad(
        "unknown kind of cache (file:///DIR, http://HOST/PREFIX, https://HOST/PREFIX)",
    ))
}

/// Checks that `rel` is a plain relative path: no empty, `.` or `..` components.
pub(crate) fn check_rel(rel: &str) -> Result<(), CacheError> {
    if rel.is_empty()
        || rel.starts_with('/')
        || rel
            .split('/')
            .any(|c| c.is_empty() || c == "." || c == "..")
    {
        return Err(CacheError::Protocol(format!(
            "'{rel}' is not a path inside the cache"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_cache_round_trip_and_refuses_escapes() {
        let d = tempfile::tempdir().unwrap();
        let url = format!("file://{}/c", d.path().display());
        let c = open(&url).unwrap();
        assert_eq!(c.get("x.narinfo", 10).unwrap(), None);
        c.put("realisations/a!out.json", b"{}").unwrap();
        assert_eq!(
            c.get("realisations/a!out.json", 10).unwrap().unwrap(),
            b"{}"
        );
        assert!(c.exists("realisations/a!out.json").unwrap());
        let e = c.get("realisations/a!out.json", 1).unwrap_err().to_string();
        assert!(e.contains("larger than 1 bytes"), "{e}");
        for bad in ["../x", "/etc/passwd", "a//b", "nar/../../x", ""] {
            assert!(c.get(bad, 10).is_err(), "{bad}");
            assert!(c.put(bad, b"x").is_err(), "{bad}");
        }
        assert!(!d.path().join("x").exists());
        for bad in ["file://relative/dir", "ftp://x", "s3://bucket", "http://"] {
            assert!(open(bad).is_err(), "{bad}");
        }
    }
}
