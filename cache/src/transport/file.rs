//! A cache in a local directory (`file:///DIR`).
//!
//! Owns: reading and writing its files. Writes are atomic (a temporary file in the same
//! directory, made durable, then renamed), so a reader never sees half a file and an
//! interrupted push leaves only temporary files (`.tmp-*`) that the next push ignores.
//! Must not: follow a path outside the directory (every path is checked first).

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use super::{check_rel, Transport};
use crate::CacheError;

/// A cache in a local directory.
pub struct FileCache {
    url: String,
    root: PathBuf,
}

impl FileCache {
    /// The cache at `root`, opened as `url`.
    pub fn new(url: &str, root: PathBuf) -> FileCache {
        FileCache {
            url: url.to_string(),
            root,
        }
    }

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
