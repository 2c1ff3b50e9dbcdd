//! Loading one suite's package index through an [`ArchiveSource`], and
//! looking packages up in it ([`Index`]).
//!
//! The files read, relative to the archive root (the mirror's base URL):
//!
//! ```text
//! dists/SUITE/InRelease                       (else dists/SUITE/Release + Release.gpg)
//! dists/SUITE/main/binary-ARCH/Packages.xz    (checked: Release's SHA256 size + hash)
//! ```
//!
//! The Release file is trusted only once its OpenPGP signature verifies
//! ([`LoadOptions::trust`], see `signature`): an `InRelease` must be one
//! clearsigned block with nothing unsigned around it
//! (`release::split_clearsigned`), gpgv must accept it, and what is parsed
//! is the text gpgv verified (which must also be the block's text); a
//! `Release` needs its detached `Release.gpg`. A missing, bad or unknown
//! signature is an error naming the suite, the file, the key and the fix.
//! Only [`Trust::Unsigned`] (`--allow-unsigned`) reads the file unverified.
//! `Packages.xz` is accepted only when its size and SHA-256 are those the
//! Release file lists, otherwise the error names the file and both values.
//! An expired Release (`Valid-Until` before [`LoadOptions::now`]) is an
//! error unless [`LoadOptions::allow_expired`]; then [`Loaded::expired`]
//! says since when, for the caller to warn.
//!
//! Owns: the order of those reads and the checks between them, and the
//! lookup tables (name → versions, newest first; virtual name →
//! providers). Must not: do I/O itself (the binary implements
//! [`ArchiveSource`] over its downloader), or pick packages (`resolve`).

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use debversion::Version;
use sha2::{Digest, Sha256};

use crate::packages::{self, PackageEntry};
use crate::release::{split_clearsigned, ClearsignError, Release};
use crate::signature::{self, Signed, Signer, Trust, FIX_UNSIGNED};

/// Where archive files come from: the binary's downloader over a mirror,
/// or a directory in tests.
pub trait ArchiveSource {
    /// The bytes of `path`, relative to the archive root
    /// (`dists/sid/InRelease`). `size`, when known, is the exact size
    /// expected (the source may stop a longer download). An error is a
    /// message naming what failed.
    fn fetch(&self, path: &str, size: Option<u64>) -> Result<Vec<u8>, String>;
}

/// What to load.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    /// The suite or codename (`sid`, `unstable`, `trixie`).
    pub suite: String,
    /// The host architecture (`amd64`).
    pub arch: String,
    /// The component (`main`).
    pub component: String,
    /// The time `Valid-Until` is compared with.
    pub now: DateTime<Utc>,
    /// Accept an expired Release file.
    pub allow_expired: bool,
    /// How the Release file's signature is checked.
    pub trust: Trust,
}

/// A loaded suite.
#[derive(Debug)]
pub struct Loaded {
    /// The Release file.
    pub release: Release,
    /// Which file it came from: `InRelease` or `Release`.
    pub release_file: &'static str,
    /// The signatures that verified it (empty with [`Trust::Unsigned`]).
    pub signers: Vec<Signer>,
    /// `Some(valid_until)` when the Release is expired and that was allowed.
    pub expired: Option<DateTime<Utc>>,
    /// The packages of the host architecture and `all`.
    pub index: Index,
    /// The compressed size of the Packages file read.
    pub packages_size: u64,
}

/// Loading failed; the message names the file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct IndexError(pub String);

/// The lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let d = Sha256::digest(bytes);
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// Reads the suite's Release and Packages index (see the module
/// documentation for the files and the checks).
pub fn load(src: &dyn ArchiveSource, opts: &LoadOptions) -> Result<Loaded, IndexError> {
    let dists = format!("dists/{}", opts.suite);
    let (bytes, release_file) = match src.fetch(&format!("{dists}/InRelease"), None) {
        Ok(b) => (b, "InRelease"),
        Err(in_err) => match src.fetch(&format!("{dists}/Release"), None) {
            Ok(b) => (b, "Release"),
            Err(err) => {
                return Err(IndexError(format!(
                    "cannot read suite '{}': {in_err}; {err}",
                    opts.suite
                )))
            }
        },
    };
    let file = format!("{dists}/{release_file}");
    let utf8 = |b: Vec<u8>| {
        String::from_utf8(b).map_err(|_| IndexError(format!("{file} is not UTF-8 text")))
    };
    let (release, signers) = match &opts.trust {
        Trust::Unsigned => {
            let text = utf8(bytes)?;
            let release = Release::parse(&text).map_err(|e| IndexError(format!("{file}: {e}")))?;
            (release, Vec::new())
        }
        Trust::Keyrings(keyrings) if release_file == "InRelease" => {
            let text = utf8(bytes)?;
            // The envelope first, as apt does: unsigned text around the
            // signed block is refused, not skipped.
            let block = split_clearsigned(&text, &file).map_err(|e| {
                IndexError(match e {
                    ClearsignError::NotSigned(m) => format!(
                        "cannot trust {file} of suite '{}': {m}. To fix: {FIX_UNSIGNED}",
                        opts.suite
                    ),
                    ClearsignError::Malformed(m) => format!(
                        "cannot trust {file} of suite '{}': it is not exactly one signed message: {m}. To fix: {FIX_UNSIGNED}",
                        opts.suite
                    ),
                })
            })?;
            let verified =
                signature::verify(keyrings, Signed::Clear(text.as_bytes()), &opts.suite, &file)
                    .map_err(|e| IndexError(e.0))?;
            let signed = utf8(verified.text)?;
            // What is parsed is what gpgv verified; it must also be the
            // block read above (two readings of one envelope agree).
            if !signature::same_signed_text(&signed, &block) {
                return Err(IndexError(format!(
                    "cannot trust {file} of suite '{}': the text gpgv verified differs from the file's signed block. To fix: {FIX_UNSIGNED}",
                    opts.suite
                )));
            }
            let release =
                Release::parse_text(&signed).map_err(|e| IndexError(format!("{file}: {e}")))?;
            (release, verified.signers)
        }
        Trust::Keyrings(keyrings) => {
            let sig_path = format!("{dists}/Release.gpg");
            let sig = src.fetch(&sig_path, None).map_err(|e| {
                IndexError(format!(
                    "cannot trust {file} of suite '{}': the suite has no InRelease and the Release file is not signed \
                     ({sig_path}: {e}). To fix: {FIX_UNSIGNED}",
                    opts.suite
                ))
            })?;
            let verified = signature::verify(
                keyrings,
                Signed::Detached {
                    data: &bytes,
                    signature: &sig,
                },
                &opts.suite,
                &file,
            )
            .map_err(|e| IndexError(e.0))?;
            let text = utf8(verified.text)?;
            let release =
                Release::parse_text(&text).map_err(|e| IndexError(format!("{file}: {e}")))?;
            (release, verified.signers)
        }
    };
    let expired = release
        .check_valid(opts.now, opts.allow_expired)
        .map_err(|e| IndexError(format!("{file}: {e}")))?;
    if !release.architectures.is_empty() && !release.architectures.contains(&opts.arch) {
        return Err(IndexError(format!(
            "suite '{}' has no architecture '{}' (it has: {})",
            opts.suite,
            opts.arch,
            release.architectures.join(" ")
        )));
    }
    let rel_path = format!("{}/binary-{}/Packages.xz", opts.component, opts.arch);
    let entry = release
        .file(&rel_path)
        .ok_or_else(|| {
            IndexError(format!(
                "{dists}/{release_file} lists no SHA256 for '{rel_path}'"
            ))
        })?
        .clone();
    let path = format!("{dists}/{rel_path}");
    let xz = src
        .fetch(&path, Some(entry.size))
        .map_err(|e| IndexError(format!("cannot read '{path}': {e}")))?;
    if xz.len() as u64 != entry.size {
        return Err(IndexError(format!(
            "'{path}' is {} bytes, but {release_file} says {}: the mirror is inconsistent or the file was tampered with",
            xz.len(),
            entry.size
        )));
    }
    let got = sha256_hex(&xz);
    if got != entry.sha256 {
        return Err(IndexError(format!(
            "'{path}' has SHA-256 {got}, but {release_file} says {}: the mirror is inconsistent or the file was tampered with",
            entry.sha256
        )));
    }
    let entries = packages::read_packages_xz(&xz, &opts.arch)
        .map_err(|e| IndexError(format!("'{path}': {e}")))?;
    drop(xz);
    Ok(Loaded {
        release,
        release_file,
        signers,
        expired,
        index: Index::new(entries),
        packages_size: entry.size,
    })
}

/// The packages of one suite and architecture, with lookup tables.
#[derive(Debug, Default)]
pub struct Index {
    packages: Vec<PackageEntry>,
    /// Name → indices into `packages`, newest version first.
    by_name: HashMap<String, Vec<u32>>,
    /// Virtual name → (provider index, provided version), by provider name
    /// then newest first.
    providers: HashMap<String, Vec<(u32, Option<Version>)>>,
}

impl Index {
    /// Builds the lookup tables over `packages`.
    pub fn new(packages: Vec<PackageEntry>) -> Index {
        let mut by_name: HashMap<String, Vec<u32>> = HashMap::new();
        let mut providers: HashMap<String, Vec<(u32, Option<Version>)>> = HashMap::new();
        for (i, p) in packages.iter().enumerate() {
            by_name.entry(p.name.clone()).or_default().push(i as u32);
            for (virt, v) in &p.provides {
                providers
                    .entry(virt.clone())
                    .or_default()
                    .push((i as u32, v.clone()));
            }
        }
        // Newest first; equal versions (an `all` and an `ARCH` paragraph)
        // keep index order, so the result does not depend on hash order.
        for v in by_name.values_mut() {
            v.sort_by(|&a, &b| {
                packages[b as usize]
                    .version
                    .cmp(&packages[a as usize].version)
                    .then(a.cmp(&b))
            });
        }
        for v in providers.values_mut() {
            v.sort_by(|(a, _), (b, _)| {
                let (pa, pb) = (&packages[*a as usize], &packages[*b as usize]);
                pa.name
                    .cmp(&pb.name)
                    .then(pb.version.cmp(&pa.version))
                    .then(a.cmp(b))
            });
        }
        Index {
            packages,
            by_name,
            providers,
        }
    }

    /// Every package version, in index order.
    pub fn packages(&self) -> &[PackageEntry] {
        &self.packages
    }

    /// The entry with number `i` (as returned by the lookups).
    pub fn get(&self, i: u32) -> &PackageEntry {
        &self.packages[i as usize]
    }

    /// The versions of the real package `name`, newest first.
    pub fn versions(&self, name: &str) -> &[u32] {
        self.by_name.get(name).map(Vec::as_slice).unwrap_or(&[])
    }

    /// The packages providing the virtual name `name`, with the version
    /// provided: by provider name, then newest first.
    pub fn providers(&self, name: &str) -> &[(u32, Option<Version>)] {
        self.providers.get(name).map(Vec::as_slice).unwrap_or(&[])
    }

    /// Whether `name` is known at all (real or virtual).
    pub fn knows(&self, name: &str) -> bool {
        self.by_name.contains_key(name) || self.providers.contains_key(name)
    }
}
