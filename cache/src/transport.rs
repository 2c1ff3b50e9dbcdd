//! Where a cache's files are: reading and writing them by their path inside the cache.
//!
//! Owns: the cache URL forms and the file operations on them. Today `file:///DIR` (a
//! directory, read and written); writes are atomic (a temporary file in the same
//! directory, made durable, then renamed), so a reader never sees half a file and an
//! interrupted push leaves only temporary files that the next push ignores.
//!
//! Must not: interpret what it reads (the formats are [`crate::narinfo`]'s and the
//! others'), or follow a path outside the cache: every path is relative, checked
//! component by component.

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

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
    /// Writes `bytes` as `rel`, atomically.
    fn put(&self, rel: &str, bytes: &[u8]) -> Result<(), CacheError>;
    /// Moves or copies the local file `src` to `rel`, atomically.
    fn put_file(&self, rel: &str, src: &Path) -> Result<(), CacheError>;
    /// A directory for temporary files that [`Transport::put_file`] can move from
    /// cheaply (inside the cache for a local one).
    fn scratch_dir(&self) -> Option<PathBuf>;
}

/// Opens a cache URL: `file:///DIR` (DIR is created on the first write).
pub fn open(url: &str) -> Result<Box<dyn Transport>, CacheError> {
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
        return Ok(Box::new(FileCache {
            url: url.to_string(),
            root: PathBuf::from(dir),
        }));
    }
    if url.starts_with("http://") || url.starts_with("https://") {
        return Err(bad("HTTP caches are not supported yet (use file:///DIR)"));
    }
    Err(bad("unknown kind of cache (file:///DIR)"))
}

/// Checks that `rel` is a plain relative path: no empty, `.` or `..` components.
fn check_rel(rel: &str) -> Result<(), CacheError> {
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

/// A cache in a local directory.
pub struct FileCache {
    url: String,
    root: PathBuf,
}

impl FileCache {
    fn path(&self, rel: &str) -> Result<PathBuf, CacheError> {
        check_rel(rel)?;
        Ok(self.root.join(rel))
    }

    fn io(&self, what: &'static str, rel: &str) -> impl FnOnce(io::Error) -> CacheError + '_ {
        let rel = rel.to_string();
        move |e| CacheError::Io {
            cache: self.url.clone(),
            what,
            file: rel,
            source: e,
        }
    }

    /// Creates the parent directory of `p` and a temporary file next to it.
    fn temp_for(&self, p: &Path, rel: &str) -> Result<tempfile::NamedTempFile, CacheError> {
        let parent = p.parent().unwrap_or(&self.root);
        fs::create_dir_all(parent).map_err(self.io("creating the directory of", rel))?;
        tempfile::Builder::new()
            .prefix(".tmp-")
            .tempfile_in(parent)
            .map_err(self.io("creating a temporary file for", rel))
    }
}

impl Transport for FileCache {
    fn url(&self) -> &str {
        &self.url
    }

    fn get(&self, rel: &str, limit: u64) -> Result<Option<Vec<u8>>, CacheError> {
        let p = self.path(rel)?;
        let f = match File::open(&p) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(self.io("reading", rel)(e)),
        };
        let mut v = Vec::new();
        f.take(limit + 1)
            .read_to_end(&mut v)
            .map_err(self.io("reading", rel))?;
        if v.len() as u64 > limit {
            return Err(CacheError::Protocol(format!(
                "{}: '{rel}' is larger than {limit} bytes",
                self.url
            )));
        }
        Ok(Some(v))
    }

    fn open(&self, rel: &str) -> Result<Option<Box<dyn Read + Send>>, CacheError> {
        let p = self.path(rel)?;
        match File::open(&p) {
            Ok(f) => Ok(Some(Box::new(io::BufReader::with_capacity(1 << 20, f)))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(self.io("reading", rel)(e)),
        }
    }

    fn exists(&self, rel: &str) -> Result<bool, CacheError> {
        let p = self.path(rel)?;
        match fs::symlink_metadata(&p) {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(self.io("looking for", rel)(e)),
        }
    }

    fn put(&self, rel: &str, bytes: &[u8]) -> Result<(), CacheError> {
        let p = self.path(rel)?;
        let mut t = self.temp_for(&p, rel)?;
        t.write_all(bytes).map_err(self.io("writing", rel))?;
        t.as_file().sync_all().map_err(self.io("writing", rel))?;
        set_readable(t.path());
        t.persist(&p)
            .map_err(|e| self.io("renaming into place", rel)(e.error))?;
        Ok(())
    }

    fn put_file(&self, rel: &str, src: &Path) -> Result<(), CacheError> {
        let p = self.path(rel)?;
        let parent = p.parent().unwrap_or(&self.root);
        fs::create_dir_all(parent).map_err(self.io("creating the directory of", rel))?;
        File::open(src)
            .and_then(|f| f.sync_all())
            .map_err(self.io("writing", rel))?;
        set_readable(src);
        if fs::rename(src, &p).is_ok() {
            return Ok(());
        }
        // Another filesystem: copy through a temporary file next to the target.
        let mut t = self.temp_for(&p, rel)?;
        let mut f = File::open(src).map_err(self.io("reading the local copy of", rel))?;
        io::copy(&mut f, &mut t).map_err(self.io("writing", rel))?;
        t.as_file().sync_all().map_err(self.io("writing", rel))?;
        set_readable(t.path());
        t.persist(&p)
            .map_err(|e| self.io("renaming into place", rel)(e.error))?;
        Ok(())
    }

    fn scratch_dir(&self) -> Option<PathBuf> {
        let d = self.root.join("nar");
        fs::create_dir_all(&d).ok()?;
        Some(d)
    }
}

/// Files of a cache are world-readable (a file server serves them as they are).
fn set_readable(p: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let _ = fs::set_permissions(p, fs::Permissions::from_mode(0o644));
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
        for bad in ["file://relative/dir", "ftp://x", "s3://bucket"] {
            assert!(open(bad).is_err(), "{bad}");
        }
    }
}
