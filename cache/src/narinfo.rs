//! `<hashpart>.narinfo`: what a cache says about one store path.
//!
//! ```text
//! StorePath: /rocmx/store/0c8hkw6x4qd3k1n3p4sp4bbfj7b3wkyq-hello-2.12.3
//! URL: nar/1b7x…q0.nar.zst
//! Compression: zstd
//! FileHash: blake3:1b7x…q0
//! FileSize: 61452
//! NarHash: blake3:0m3l…9v
//! NarSize: 215320
//! References: 0c8hkw6x4qd3k1n3p4sp4bbfj7b3wkyq-hello-2.12.3 cm3y2rzzjk7fy4slja7jzwyycmyhrs0z-debian-sid-base
//! Deriver: iv07z0alakzyq0d7rh3ic7ccyqkj1s6f-hello-2.12.3.drv
//! CA: output:blake3:0m3l…9v
//! Sig: cache.example.org-1:Zm9v…==
//! ```
//!
//! One `Key: value` per line, in this order when written; unknown keys are ignored when
//! read (a later version may add some), a repeated one other than `Sig` is an error.
//! `References` and `Deriver` are base names; `FileHash` and `NarHash` are BLAKE3 in
//! nix32, typed; `Compression` is `zstd` or `none`; `CA` is the store's content address
//! text (`text:`, `source:`, `fixed:`, `output:`; see `rocmx_store::local::ca_string`).
//! `StorePath`, `URL`, `NarHash` and `NarSize` are required.
//!
//! # Fingerprint
//!
//! A `Sig` is an ed25519 signature ([`crate::keys`]) over Nix's narinfo fingerprint,
//! with the store's hash:
//!
//! ```text
//! 1;/rocmx/store/<hash>-<name>;blake3:<nix32 NarHash>;<NarSize>;/rocmx/store/<ref1>,/rocmx/store/<ref2>
//! ```
//!
//! (references sorted, comma separated, absolute; empty after the last `;` when there
//! are none). The URL, file hash and compression are not signed: the NAR they lead to
//! is checked against `NarHash`, and the tree against its content-addressed path.
//!
//! Must not: fetch or check anything beyond the text's own consistency.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use rocmx_store::{Encoding, Hash, HashAlgo, PathInfo, StorePath};

use crate::keys::{SecretKey, TrustedKeys};

/// How the NAR file is compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// `zstd`: `nar/<filehash>.nar.zst`.
    Zstd,
    /// `none`: `nar/<filehash>.nar`.
    None,
}

impl Compression {
    /// The narinfo spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Compression::Zstd => "zstd",
            Compression::None => "none",
        }
    }

    /// The NAR file's extension.
    pub fn extension(self) -> &'static str {
        match self {
            Compression::Zstd => ".nar.zst",
            Compression::None => ".nar",
        }
    }
}

/// A parsed narinfo.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NarInfo {
    pub store_path: StorePath,
    /// Relative to the cache's root (`nar/….nar.zst`).
    pub url: String,
    pub compression: Compression,
    /// BLAKE3 of the (compressed) file, when given.
    pub file_hash: Option<Hash>,
    pub file_size: Option<u64>,
    /// BLAKE3 of the NAR.
    pub nar_hash: Hash,
    pub nar_size: u64,
    pub references: BTreeSet<StorePath>,
    pub deriver: Option<StorePath>,
    /// The content address text, when given.
    pub ca: Option<String>,
    pub signatures: Vec<String>,
}

/// A narinfo that cannot be used: the line (1-based, 0 for the whole text) and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{message}", if *.line > 0 { format!("line {}: ", .line) } else { String::new() })]
pub struct NarInfoError {
    pub line: usize,
    pub message: String,
}

fn bad(line: usize, message: impl Into<String>) -> NarInfoError {
    NarInfoError {
        line,
        message: message.into(),
    }
}

fn blake3(line: usize, key: &str, v: &str) -> Result<Hash, NarInfoError> {
    let h = Hash::parse(v).map_err(|e| bad(line, format!("{key}: {e}")))?;
    if h.algo() != HashAlgo::Blake3 {
        return Err(bad(
            line,
            format!("{key}: a {} hash; rocmx caches use blake3", h.algo().name()),
        ));
    }
    Ok(h)
}

impl NarInfo {
    /// The narinfo of a valid path from what the store records about it (its
    /// signatures included), its NAR at `url`; no file hash or size.
    pub fn of_path(info: PathInfo, url: String, compression: Compression) -> NarInfo {
        NarInfo {
            store_path: info.path,
            url,
            compression,
            file_hash: None,
            file_size: None,
            nar_hash: info.nar_hash,
            nar_size: info.nar_size,
            references: info.references,
            deriver: info.deriver,
            ca: info.ca,
            signatures: info.signatures,
        }
    }

    /// Parses narinfo text.
    pub fn parse(text: &str) -> Result<NarInfo, NarInfoError> {
        let mut store_path = None;
        let mut url = None;
        let mut compression = None;
        let mut file_hash = None;
        let mut file_size = None;
        let mut nar_hash = None;
        let mut nar_size = None;
        let mut references = None;
        let mut deriver = None;
        let mut ca = None;
        let mut signatures = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let n = i + 1;
            if raw.trim().is_empty() {
                continue;
            }
            let (key, value) = raw
                .split_once(": ")
                .or_else(|| raw.split_once(':'))
                .ok_or_else(|| bad(n, format!("'{raw}' is not 'Key: value'")))?;
            let v = value.trim();
            fn once<T>(
                slot: &mut Option<T>,
                n: usize,
                key: &str,
                v: T,
            ) -> Result<(), NarInfoError> {
                if slot.is_some() {
                    return Err(bad(n, format!("a second {key}")));
                }
                *slot = Some(v);
                Ok(())
            }
            let num = |v: &str| {
                v.parse::<u64>()
                    .map_err(|_| bad(n, format!("{key}: '{v}' is not a number")))
            };
            let path = |v: &str| {
                StorePath::from_base_name(v).map_err(|e| bad(n, format!("{key}: '{v}': {e}")))
            };
            match key {
                "StorePath" => once(
                    &mut store_path,
                    n,
                    key,
                    StorePath::from_absolute(v).map_err(|e| bad(n, format!("StorePath: {e}")))?,
                )?,
                "URL" => once(&mut url, n, key, v.to_string())?,
                "Compression" => once(
                    &mut compression,
                    n,
                    key,
                    match v {
                        "zstd" => Compression::Zstd,
                        "none" => Compression::None,
                        other => {
                            return Err(bad(
                                n,
                                format!("Compression '{other}' is not supported (zstd or none)"),
                            ))
                        }
                    },
                )?,
                "FileHash" => once(&mut file_hash, n, key, blake3(n, key, v)?)?,
                "FileSize" => once(&mut file_size, n, key, num(v)?)?,
                "NarHash" => once(&mut nar_hash, n, key, blake3(n, key, v)?)?,
                "NarSize" => once(&mut nar_size, n, key, num(v)?)?,
                "References" => once(
                    &mut references,
                    n,
                    key,
                    v.split_whitespace()
                        .map(path)
                        .collect::<Result<BTreeSet<_>, _>>()?,
                )?,
                "Deriver" if !v.is_empty() && v != "unknown-deriver" => {
                    once(&mut deriver, n, key, path(v)?)?
                }
                "Deriver" => {}
                "CA" => once(&mut ca, n, key, v.to_string())?,
                "Sig" => signatures.push(v.to_string()),
                _ => {}
            }
        }
        let need = |what: &str| bad(0, format!("no {what} line"));
        let url: String = url.ok_or_else(|| need("URL"))?;
        if url.is_empty()
            || url.starts_with('/')
            || url.split('/').any(|c| c == "..")
            || url.contains("://")
        {
            return Err(bad(
                0,
                format!("URL '{url}' is not a relative path inside the cache"),
            ));
        }
        Ok(NarInfo {
            store_path: store_path.ok_or_else(|| need("StorePath"))?,
            url,
            compression: compression.unwrap_or(Compression::Zstd),
            file_hash,
            file_size,
            nar_hash: nar_hash.ok_or_else(|| need("NarHash"))?,
            nar_size: nar_size.ok_or_else(|| need("NarSize"))?,
            references: references.unwrap_or_default(),
            deriver,
            ca,
            signatures,
        })
    }

    /// The text, keys in the documented order.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "StorePath: {}", self.store_path.to_absolute());
        let _ = writeln!(s, "URL: {}", self.url);
        let _ = writeln!(s, "Compression: {}", self.compression.as_str());
        if let Some(h) = &self.file_hash {
            let _ = writeln!(s, "FileHash: {}", h.to_typed(Encoding::Nix32));
        }
        if let Some(n) = self.file_size {
            let _ = writeln!(s, "FileSize: {n}");
        }
        let _ = writeln!(s, "NarHash: {}", self.nar_hash.to_typed(Encoding::Nix32));
        let _ = writeln!(s, "NarSize: {}", self.nar_size);
        let refs: Vec<String> = self.references.iter().map(StorePath::base_name).collect();
        let _ = writeln!(s, "References: {}", refs.join(" "));
        if let Some(d) = &self.deriver {
            let _ = writeln!(s, "Deriver: {}", d.base_name());
        }
        if let Some(ca) = &self.ca {
            let _ = writeln!(s, "CA: {ca}");
        }
        for sig in &self.signatures {
            let _ = writeln!(s, "Sig: {sig}");
        }
        s
    }

    /// The string a `Sig` signs (see the module documentation).
    pub fn fingerprint(&self) -> String {
        let refs: Vec<String> = self.references.iter().map(StorePath::to_absolute).collect();
        format!(
            "1;{};{};{};{}",
            self.store_path.to_absolute(),
            self.nar_hash.to_typed(Encoding::Nix32),
            self.nar_size,
            refs.join(",")
        )
    }

    /// Adds `key`'s signature (once).
    pub fn sign(&mut self, key: &SecretKey) {
        let sig = key.sign(&self.fingerprint());
        if !self.signatures.contains(&sig) {
            self.signatures.push(sig);
        }
    }

    /// The name of a trusted key that signed it, if any.
    pub fn trusted_by<'a>(&self, keys: &'a TrustedKeys) -> Option<&'a str> {
        keys.check(&self.fingerprint(), &self.signatures)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "StorePath: /rocmx/store/0c8hkw6x4qd3k1n3p4sp4bbfj7b3wkyq-hello-2.12.3
URL: nar/0000000000000000000000000000000000000000000000000000.nar.zst
Compression: zstd
FileHash: blake3:0000000000000000000000000000000000000000000000000000
FileSize: 61452
NarHash: blake3:1111111111111111111111111111111111111111111111111111
NarSize: 215320
References: 0c8hkw6x4qd3k1n3p4sp4bbfj7b3wkyq-hello-2.12.3 cm3y2rzzjk7fy4slja7jzwyycmyhrs0z-debian-sid-base
Deriver: iv07z0alakzyq0d7rh3ic7ccyqkj1s6f-hello-2.12.3.drv
CA: output:blake3:1111111111111111111111111111111111111111111111111111
";

    #[test]
    fn round_trips_and_fingerprints_literally() {
        let n = NarInfo::parse(TEXT).unwrap();
        assert_eq!(n.to_text(), TEXT);
        assert_eq!(n.nar_size, 215320);
        assert_eq!(n.references.len(), 2);
        assert_eq!(
            n.fingerprint(),
            "1;/rocmx/store/0c8hkw6x4qd3k1n3p4sp4bbfj7b3wkyq-hello-2.12.3;\
             blake3:1111111111111111111111111111111111111111111111111111;215320;\
             /rocmx/store/0c8hkw6x4qd3k1n3p4sp4bbfj7b3wkyq-hello-2.12.3,\
             /rocmx/store/cm3y2rzzjk7fy4slja7jzwyycmyhrs0z-debian-sid-base"
        );
    }

    #[test]
    fn signatures_cover_the_fingerprint() {
        let key = SecretKey::generate("c-1").unwrap();
        let trusted = TrustedKeys::parse(&key.public().to_string()).unwrap();
        let mut n = NarInfo::parse(TEXT).unwrap();
        assert_eq!(n.trusted_by(&trusted), None);
        n.sign(&key);
        n.sign(&key);
        assert_eq!(n.signatures.len(), 1);
        let back = NarInfo::parse(&n.to_text()).unwrap();
        assert_eq!(back.trusted_by(&trusted), Some("c-1"));
        // Changing a signed field voids it; the URL is not signed.
        let mut t = back.clone();
        t.nar_size += 1;
        assert_eq!(t.trusted_by(&trusted), None);
        let mut t = back.clone();
        t.references.clear();
        assert_eq!(t.trusted_by(&trusted), None);
        let mut t = back;
        t.url = "nar/other.nar.zst".into();
        assert_eq!(t.trusted_by(&trusted), Some("c-1"));
    }

    #[test]
    fn bad_text_is_named() {
        let cases = [
            (
                TEXT.replace("NarSize: 215320", "NarSize: many"),
                "line 7: NarSize: 'many' is not a number",
            ),
            (
                TEXT.replace("Compression: zstd", "Compression: xz"),
                "line 3: Compression 'xz' is not supported",
            ),
            (
                TEXT.replace("URL: nar/", "URL: ../"),
                "not a relative path inside the cache",
            ),
            (
                TEXT.replace("URL: nar/", "URL: http://evil/"),
                "not a relative path inside the cache",
            ),
            (
                TEXT.replace("NarHash: blake3:", "NarHash: sha256:"),
                "line 6: NarHash:",
            ),
            (
                TEXT.replace("StorePath: /rocmx/store/", "StorePath: /nix/store/"),
                "line 1: StorePath:",
            ),
            (format!("{TEXT}NarSize: 1\n"), "line 11: a second NarSize"),
            (TEXT.replace("NarHash", "Narhash"), "no NarHash line"),
            (
                "garbage".to_string(),
                "line 1: 'garbage' is not 'Key: value'",
            ),
        ];
        for (text, needle) in cases {
            let e = NarInfo::parse(&text).unwrap_err().to_string();
            assert!(e.contains(needle), "{needle}: {e}");
        }
        // Unknown keys are ignored.
        assert!(NarInfo::parse(&format!("{TEXT}Future: x\n")).is_ok());
    }
}
