//! Receiving a push: what a `PUT` to `rocmx serve --writable` does to the store.
//!
//! Owns: the files a push writes, in the order [`crate::push`] writes them, and what
//! each does:
//!
//! ```text
//! PUT /nar/<name>.nar.zst, /nar/<name>.nar   staged under <state>/uploads/serve-<pid>/
//!                                            (not in the store), at most max bytes in all
//! PUT /<hashpart>.narinfo                    the staged NAR it names imported through
//!                                            LocalStore::import_nar (NarHash, NarSize, CA
//!                                            and path checked), then unstaged
//! PUT /realisations/<drvhash>!<output>.json  recorded, if its path is valid
//! ```
//!
//! A narinfo or realisation is accepted only when a key of the server's
//! `trusted-public-keys` signed it: the server signs what it serves with its own keys,
//! and must not sign what nobody it trusts vouched for. A narinfo's references must be
//! valid first (the client pushes references first). Every refusal is a [`Refused`]:
//! an HTTP status and a one-line reason, with nothing registered. Staged NARs go when
//! their narinfo arrives (accepted or not), when they are an hour old, and with the
//! [`Receiver`]; a server that died leaves a directory the next one removes.
//!
//! The bearer token that guards all this is a [`Token`], compared in constant time.
//!
//! Must not: register anything unchecked, stage anything inside the store directory, or
//! know about HTTP beyond status codes.

use std::fmt;
use std::fs::{self, File};
use std::io::{self, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use rocmx_store::local::ImportClaim;
use rocmx_store::{LocalStore, StoreError};

use crate::keys::TrustedKeys;
use crate::narinfo::{Compression, NarInfo};
use crate::pull::MAX_RECORD;
use crate::realisation::{is_drv_hash, Realisation};

/// How long a staged NAR waits for its narinfo.
pub const STALE: Duration = Duration::from_secs(3600);

/// The shortest token accepted.
pub const MIN_TOKEN: usize = 16;

/// A refused `PUT`: the status to answer and why (one line).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub status: u16,
    pub why: String,
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.status, self.why)
    }
}

fn refuse(status: u16, why: impl fmt::Display) -> Refused {
    let why = why.to_string();
    Refused {
        status,
        why: why.split_whitespace().collect::<Vec<_>>().join(" "),
    }
}

/// The bearer token of a writable server.
pub struct Token(blake3::Hash);

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(…)")
    }
}

impl Token {
    /// The token a token file holds (its content, trimmed).
    pub fn from_text(text: &str) -> Result<Token, String> {
        let t = text.trim();
        if t.len() < MIN_TOKEN || t.chars().any(char::is_whitespace) {
            return Err(format!(
                "a token is one word of at least {MIN_TOKEN} characters, e.g. made with \
                 `head -c 32 /dev/urandom | base64 > FILE`"
            ));
        }
        Ok(Token(blake3::hash(t.as_bytes())))
    }

    /// Whether an `Authorization` header value is `Bearer <this token>`. The comparison
    /// takes the same time whatever the candidate (BLAKE3 digests, compared in
    /// constant time).
    pub fn admits(&self, authorization: Option<&str>) -> bool {
        let Some(v) = authorization else {
            return false;
        };
        let v = v.trim();
        let candidate = match v.split_once(' ') {
            Some((scheme, t)) if scheme.eq_ignore_ascii_case("bearer") => t.trim(),
            _ => return false,
        };
        blake3::hash(candidate.as_bytes()) == self.0
    }
}

/// A file a push writes, from the URL path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `nar/<name>`: a NAR, staged, compressed as its extension says.
    Nar(String, Compression),
    /// `<hashpart>.narinfo`.
    NarInfo(String),
    /// `realisations/<drvhash>!<output>.json`.
    Realisation(String, String),
}

const FORMS: &str =
    "nar/NAME.nar.zst, nar/NAME.nar, HASHPART.narinfo, realisations/DRVHASH!OUTPUT.json";

/// Parses the name of a NAR file, `<name>.nar.zst` or `<name>.nar`.
fn nar_name(name: &str) -> Option<Compression> {
    let (stem, c) = match name.strip_suffix(".nar.zst") {
        Some(s) => (s, Compression::Zstd),
        None => (name.strip_suffix(".nar")?, Compression::None),
    };
    (!stem.is_empty() && stem.len() <= 128 && stem.bytes().all(|b| b.is_ascii_alphanumeric()))
        .then_some(c)
}

fn is_hash_part(s: &str) -> bool {
    s.len() == rocmx_store::path::HASH_PART_LEN
        && s.bytes()
            .all(|b| rocmx_store::nixbase32::ALPHABET.contains(&b))
}

fn is_output_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"+-._?=".contains(&b))
}

/// What the URL path `path` (with its leading `/`) of a `PUT` names.
pub fn target(path: &str) -> Result<Target, Refused> {
    let bad = || {
        refuse(
            400,
            format!("'{path}' is not a file a push writes ({FORMS})"),
        )
    };
    let rel = path.strip_prefix('/').ok_or_else(bad)?;
    if let Some(name) = rel.strip_prefix("nar/") {
        let c = nar_name(name).ok_or_else(bad)?;
        return Ok(Target::Nar(name.to_string(), c));
    }
    if let Some(h) = rel.strip_suffix(".narinfo") {
        return is_hash_part(h)
            .then(|| Target::NarInfo(h.to_string()))
            .ok_or_else(bad);
    }
    if let Some(name) = rel
        .strip_prefix("realisations/")
        .and_then(|r| r.strip_suffix(".json"))
    {
        let (h, o) = name.split_once('!').ok_or_else(bad)?;
        if is_drv_hash(h) && is_output_name(o) {
            return Ok(Target::Realisation(h.to_string(), o.to_string()));
        }
    }
    Err(bad())
}

/// Receives pushes into one store.
pub struct Receiver {
    /// `<state>/uploads/serve-<pid>`.
    dir: PathBuf,
    trusted: TrustedKeys,
    /// The most bytes staged at once (one upload or several).
    max: u64,
    /// Bytes staged or being staged.
    used: Mutex<u64>,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = rocmx_store::tree::remove_tree(&self.dir);
    }
}

/// Whether the staging directory `serve-<pid>` belongs to a live process.
fn alive(name: &str) -> bool {
    name.strip_prefix("serve-")
        .and_then(|p| p.parse::<u32>().ok())
        .is_some_and(|pid| Path::new(&format!("/proc/{pid}")).exists())
}

impl Receiver {
    /// A receiver for `store`, accepting records `trusted` signed and staging at most
    /// `max` bytes. Removes what dead servers staged.
    pub fn new(store: &LocalStore, trusted: TrustedKeys, max: u64) -> Result<Receiver, String> {
        let uploads = store.state_dir().join("uploads");
        if let Ok(rd) = fs::read_dir(&uploads) {
            for e in rd.flatten() {
                if !alive(&e.file_name().to_string_lossy()) {
                    let _ = rocmx_store::tree::remove_tree(&e.path());
                }
            }
        }
        let dir = uploads.join(format!("serve-{}", std::process::id()));
        let _ = rocmx_store::tree::remove_tree(&dir);
        fs::create_dir_all(&dir)
            .map_err(|e| format!("creating the upload directory '{}': {e}", dir.display()))?;
        Ok(Receiver {
            dir,
            trusted,
            max,
            used: Mutex::new(0),
        })
    }

    /// Where NARs are staged.
    pub fn staging_dir(&self) -> &Path {
        &self.dir
    }

    fn used(&self) -> MutexGuard<'_, u64> {
        self.used.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Answers `PUT path` with the body `body` (`declared`: its announced length, if
    /// any): a one-line account of what was done, or why not.
    pub fn receive(
        &self,
        store: &LocalStore,
        path: &str,
        declared: Option<u64>,
        body: &mut dyn Read,
    ) -> Result<String, Refused> {
        let t = target(path)?;
        let limit = match t {
            Target::Nar(..) => self.max,
            _ => MAX_RECORD,
        };
        if declared.is_some_and(|n| n > limit) {
            return Err(too_large(path, limit));
        }
        match t {
            Target::Nar(name, _) => self.stage(&name, body),
            Target::NarInfo(hash) => {
                let text = record(path, body)?;
                self.narinfo(store, &hash, &text)
            }
            Target::Realisation(h, o) => {
                let text = record(path, body)?;
                self.realisation(store, &h, &o, &text)
            }
        }
    }

    /// Stages a NAR file as `name`.
    fn stage(&self, name: &str, body: &mut dyn Read) -> Result<String, Refused> {
        self.sweep();
        let io = |what: &str, e: io::Error| refuse(500, format!("{what} nar/{name}: {e}"));
        let mut tmp = tempfile::Builder::new()
            .prefix(".tmp-")
            .tempfile_in(&self.dir)
            .map_err(|e| io("staging", e))?;
        let mut taken = 0u64;
        let mut buf = vec![0u8; 1 << 20];
        let res = loop {
            let n = match body.read(&mut buf) {
                Ok(0) => break Ok(()),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => break Err(refuse(400, format!("the upload broke off: {e}"))),
            };
            {
                let mut used = self.used();
                if *used + n as u64 > self.max {
                    break Err(refuse(
                        413,
                        format!(
                            "nar/{name}: uploads are limited to {} bytes staged at once \
                             (--max-upload-size)",
                            self.max
                        ),
                    ));
                }
                *used += n as u64;
            }
            taken += n as u64;
            if let Err(e) = tmp.write_all(&buf[..n]) {
                break Err(io("staging", e));
            }
        };
        let res = res.and_then(|()| {
            let mut used = self.used();
            let dest = self.dir.join(name);
            let old = fs::metadata(&dest).map(|m| m.len()).ok();
            tmp.persist(&dest).map_err(|e| io("staging", e.error))?;
            if let Some(old) = old {
                *used = used.saturating_sub(old);
            }
            Ok(())
        });
        if let Err(e) = res {
            let mut used = self.used();
            *used = used.saturating_sub(taken);
            return Err(e);
        }
        Ok(format!("staged nar/{name} ({taken} bytes)"))
    }

    /// Removes the staged NAR `name`, if there.
    fn unstage(&self, name: &str) {
        let mut used = self.used();
        let p = self.dir.join(name);
        if let Ok(m) = fs::metadata(&p) {
            if fs::remove_file(&p).is_ok() {
                *used = used.saturating_sub(m.len());
            }
        }
    }

    /// Removes staged NARs older than [`STALE`].
    fn sweep(&self) {
        let Ok(rd) = fs::read_dir(&self.dir) else {
            return;
        };
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let old = e
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age > STALE);
            if old && !name.starts_with(".tmp-") {
                self.unstage(&name);
            }
        }
    }

    /// A pushed narinfo: its NAR imported.
    fn narinfo(&self, store: &LocalStore, hash: &str, text: &str) -> Result<String, Refused> {
        let ni = NarInfo::parse(text).map_err(|e| refuse(400, format!("{hash}.narinfo: {e}")))?;
        let p = ni.store_path.clone();
        if p.hash_part() != hash {
            return Err(refuse(400, format!("{hash}.narinfo describes {p}")));
        }
        let staged = ni
            .url
            .strip_prefix("nar/")
            .filter(|n| nar_name(n).is_some())
            .map(str::to_string);
        let res = self.import(store, &ni, staged.as_deref());
        if let Some(name) = staged {
            self.unstage(&name);
        }
        res
    }

    fn import(
        &self,
        store: &LocalStore,
        ni: &NarInfo,
        staged: Option<&str>,
    ) -> Result<String, Refused> {
        let p = &ni.store_path;
        if ni.trusted_by(&self.trusted).is_none() {
            return Err(refuse(
                403,
                format!(
                    "the narinfo of {p} is not signed by a key this server trusts ({}); \
                     add the pushing key to the server's trusted-public-keys",
                    untrusted_why(&ni.signatures)
                ),
            ));
        }
        if store.is_valid(p).map_err(store_failed)? {
            return Ok(format!("{p} is valid already"));
        }
        let ca = ni.ca.as_deref().ok_or_else(|| {
            refuse(
                400,
                format!(
                    "the narinfo of {p} has no CA line; rocmx imports only content-addressed paths"
                ),
            )
        })?;
        for r in ni.references.iter().filter(|r| *r != p) {
            if !store.is_valid(r).map_err(store_failed)? {
                return Err(refuse(
                    409,
                    format!(
                        "{p} refers to {r}, which this store does not have; push references first"
                    ),
                ));
            }
        }
        let name = staged.ok_or_else(|| {
            refuse(
                400,
                format!(
                    "the narinfo of {p} names '{}', not nar/NAME.nar.zst or nar/NAME.nar",
                    ni.url
                ),
            )
        })?;
        if nar_name(name) != Some(ni.compression) {
            return Err(refuse(
                400,
                format!(
                    "the narinfo of {p} says Compression: {} but names {}",
                    ni.compression.as_str(),
                    ni.url
                ),
            ));
        }
        let f = match File::open(self.dir.join(name)) {
            Ok(f) => BufReader::with_capacity(1 << 20, f),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(refuse(
                    409,
                    format!(
                        "{} was not uploaded; PUT it before the narinfo of {p}",
                        ni.url
                    ),
                ))
            }
            Err(e) => return Err(refuse(500, format!("reading the staged {}: {e}", ni.url))),
        };
        let nar: Box<dyn Read> = match ni.compression {
            Compression::None => Box::new(f),
            Compression::Zstd => Box::new(
                zstd::stream::read::Decoder::with_buffer(f)
                    .map_err(|e| refuse(400, format!("{}: {e}", ni.url)))?,
            ),
        };
        let claim = ImportClaim {
            path: p,
            nar_hash: &ni.nar_hash,
            nar_size: ni.nar_size,
            references: &ni.references,
            deriver: ni.deriver.as_ref(),
            ca,
            signatures: &ni.signatures,
        };
        match store.import_nar(&claim, nar) {
            Ok(true) => Ok(format!("imported {p} ({} bytes of NAR)", ni.nar_size)),
            Ok(false) => Ok(format!("{p} is valid already")),
            Err(e @ (StoreError::ImportRefused { .. } | StoreError::NotBlake3 { .. })) => {
                Err(refuse(400, e))
            }
            Err(e @ StoreError::InvalidReference { .. }) => Err(refuse(409, e)),
            Err(e) => Err(store_failed(e)),
        }
    }

    /// A pushed realisation: recorded.
    fn realisation(
        &self,
        store: &LocalStore,
        drv_hash: &str,
        output: &str,
        text: &str,
    ) -> Result<String, Refused> {
        let name = Realisation::file_name(drv_hash, output);
        let r = Realisation::parse(text).map_err(|e| refuse(400, format!("{name}: {e}")))?;
        if r.drv_hash != drv_hash || r.output != output {
            return Err(refuse(
                400,
                format!("{name} describes {}!{}", r.drv_hash, r.output),
            ));
        }
        if r.trusted_by(&self.trusted).is_none() {
            return Err(refuse(
                403,
                format!(
                    "the realisation {drv_hash}!{output} is not signed by a key this server \
                     trusts ({}); add the pushing key to the server's trusted-public-keys",
                    untrusted_why(&r.signatures)
                ),
            ));
        }
        if !store.is_valid(&r.out_path).map_err(store_failed)? {
            return Err(refuse(
                409,
                format!(
                    "the realisation {drv_hash}!{output} names {}, which this store does not \
                     have; push the path first",
                    r.out_path
                ),
            ));
        }
        match store.add_realisation(drv_hash, output, &r.out_path, &r.signatures) {
            Ok(()) => Ok(format!("recorded {drv_hash}!{output} = {}", r.out_path)),
            Err(e @ StoreError::RealisationConflict { .. }) => Err(refuse(409, e)),
            Err(e) => Err(store_failed(e)),
        }
    }
}

fn too_large(path: &str, limit: u64) -> Refused {
    refuse(413, format!("'{path}' is larger than {limit} bytes"))
}

fn store_failed(e: StoreError) -> Refused {
    refuse(500, format!("the store failed: {e}"))
}

/// A record's text, at most [`MAX_RECORD`] bytes.
fn record(path: &str, body: &mut dyn Read) -> Result<String, Refused> {
    let mut v = Vec::new();
    body.take(MAX_RECORD + 1)
        .read_to_end(&mut v)
        .map_err(|e| refuse(400, format!("the upload broke off: {e}")))?;
    if v.len() as u64 > MAX_RECORD {
        return Err(too_large(path, MAX_RECORD));
    }
    String::from_utf8(v).map_err(|_| refuse(400, format!("'{path}' is not UTF-8 text")))
}

/// Why a record is not trusted, for the message.
fn untrusted_why(sigs: &[String]) -> String {
    if sigs.is_empty() {
        return "it has no signature".into();
    }
    let mut names: Vec<&str> = sigs.iter().filter_map(|s| s.split(':').next()).collect();
    names.sort_unstable();
    names.dedup();
    format!("its signatures are by {}", names.join(", "))
}

#[cfg(test)]
mod tests;
