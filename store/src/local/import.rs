//! Importing a store path that arrives as a NAR from outside (a binary cache), trusting
//! nothing about it.
//!
//! Owns: checking, while the archive is restored into a scratch directory, that it is
//! exactly what was claimed: its BLAKE3 and size against the claimed `NarHash` and
//! `NarSize`, and the restored tree against the claimed path, recomputed from the
//! content address kind (`text`, `source`, `fixed`, `output`: a store path certifies
//! its own bytes). Only then is it installed, by the same protocol as every addition
//! ([`super::add`]), with its references (which must be valid already), deriver and
//! signatures.
//!
//! Must not: fetch anything, check signatures (the caller's policy), or register
//! anything that failed a check; a refused import leaves no trace in the store.

use std::collections::BTreeSet;
use std::fs;
use std::io::{self, Read, Write};

use super::add::{Content, Install};
use super::error::StoreError;
use super::fsutil::{self, TempDir};
use super::{db, lock, LocalStore};
use crate::hash::{Encoding, Hash, HashAlgo, Hasher};
use crate::modulo::ModuloHasher;
use crate::nar;
use crate::path::{ContentAddress, IngestionMethod, StorePath};

/// What is claimed about a path being imported (a narinfo's fields).
#[derive(Debug, Clone)]
pub struct ImportClaim<'a> {
    /// The path.
    pub path: &'a StorePath,
    /// BLAKE3 of its NAR.
    pub nar_hash: &'a Hash,
    /// The NAR's size in bytes.
    pub nar_size: u64,
    /// Its references (itself included when it refers to itself).
    pub references: &'a BTreeSet<StorePath>,
    /// The derivation that built it.
    pub deriver: Option<&'a StorePath>,
    /// Its content address text (`output:blake3:…`, `fixed:r:sha256:…`, …); the kind
    /// decides how the path is recomputed, the hash in it is recomputed too.
    pub ca: &'a str,
    /// Signatures to record with it.
    pub signatures: &'a [String],
}

/// The kind of a content address text, with the algorithm of a fixed one.
enum Kind {
    Text,
    Source,
    Fixed(IngestionMethod, HashAlgo),
    Output,
}

fn kind_of(ca: &str) -> Option<Kind> {
    let (kind, rest) = ca.split_once(':')?;
    Some(match kind {
        "text" => Kind::Text,
        "source" => Kind::Source,
        "output" => Kind::Output,
        "fixed" => {
            let (method, typed) = match rest.strip_prefix("r:") {
                Some(t) => (IngestionMethod::Nar, t),
                None => (IngestionMethod::Flat, rest),
            };
            Kind::Fixed(method, Hash::parse(typed).ok()?.algo())
        }
        _ => return None,
    })
}

/// A reader that feeds the NAR's BLAKE3, an optional second hash and an optional
/// modulo hasher, and counts.
struct Tee<R> {
    inner: R,
    blake3: Hasher,
    extra: Option<Hasher>,
    modulo: Option<ModuloHasher>,
    count: u64,
    limit: u64,
    /// Set when the archive went past `limit`.
    over: bool,
}

impl<R: Read> Read for Tee<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        let got = &buf[..n];
        self.count += n as u64;
        if self.count > self.limit {
            self.over = true;
            return Err(io::Error::other("longer than claimed"));
        }
        self.blake3.update(got);
        if let Some(h) = self.extra.as_mut() {
            h.update(got);
        }
        if let Some(m) = self.modulo.as_mut() {
            m.write_all(got)?;
        }
        Ok(n)
    }
}

impl LocalStore {
    /// Imports the NAR `nar` as `claim.path` after checking it against every claim (see
    /// the module documentation). Gives whether it was installed (`false`: the path was
    /// valid already, and `nar` was not read). References must be valid first.
    pub fn import_nar(&self, claim: &ImportClaim<'_>, nar: impl Read) -> Result<bool, StoreError> {
        let p = claim.path;
        let refuse = |problem: String| StoreError::ImportRefused {
            path: p.clone(),
            problem,
        };
        if self.is_valid(p)? {
            self.add_temp_root(p)?;
            return Ok(false);
        }
        if claim.nar_hash.algo() != HashAlgo::Blake3 {
            return Err(StoreError::NotBlake3 {
                what: "the NAR hash of an imported path",
                algo: claim.nar_hash.algo(),
            });
        }
        let kind = kind_of(claim.ca)
            .ok_or_else(|| refuse(format!("'{}' is not a content address", claim.ca)))?;
        let _gc = lock::gc_lock(&self.state_dir, false)?;
        let tmp = TempDir::new(&self.store_dir)?;
        let content = tmp.path().join("content");
        let mut tee = Tee {
            inner: nar,
            // The decompressing thread has the other core.
            blake3: Hasher::serial(HashAlgo::Blake3),
            extra: match kind {
                Kind::Fixed(IngestionMethod::Nar, algo) if algo != HashAlgo::Blake3 => {
                    Some(Hasher::new(algo))
                }
                _ => None,
            },
            modulo: matches!(kind, Kind::Output).then(|| ModuloHasher::new(&p.hash_part())),
            count: 0,
            limit: claim.nar_size,
            over: false,
        };
        if let Err(e) = nar::restore_direct(&mut tee, &content) {
            return Err(refuse(if tee.over {
                format!(
                    "its archive is longer than the {} bytes claimed",
                    claim.nar_size
                )
            } else {
                format!("its archive is unusable: {e}")
            }));
        }
        let nar_hash = tee.blake3.finish();
        if tee.count != claim.nar_size {
            return Err(refuse(format!(
                "its archive has {} bytes, {} were claimed",
                tee.count, claim.nar_size
            )));
        }
        if nar_hash != *claim.nar_hash {
            return Err(refuse(format!(
                "its archive hashes to {}, {} was claimed",
                nar_hash.to_typed(Encoding::Nix32),
                claim.nar_hash.to_typed(Encoding::Nix32)
            )));
        }
        let self_ref = claim.references.contains(p);
        let others: BTreeSet<StorePath> = claim
            .references
            .iter()
            .filter(|r| *r != p)
            .cloned()
            .collect();
        let no_refs = |what: &str| {
            if claim.references.is_empty() {
                Ok(())
            } else {
                Err(refuse(format!("a {what} path cannot have references")))
            }
        };
        let ca = match kind {
            Kind::Text => {
                if self_ref {
                    return Err(refuse("a text cannot refer to itself".into()));
                }
                let bytes = match fs::symlink_metadata(&content) {
                    Ok(m) if m.is_file() => {
                        fs::read(&content).map_err(StoreError::io("reading", &content))?
                    }
                    _ => return Err(refuse("a text must be a single regular file".into())),
                };
                ContentAddress::text(&bytes, others)
            }
            Kind::Source => {
                if self_ref {
                    return Err(refuse("a source cannot refer to itself".into()));
                }
                ContentAddress::Source {
                    nar_hash,
                    references: others,
                }
            }
            Kind::Fixed(IngestionMethod::Nar, algo) => {
                no_refs("fixed-output")?;
                ContentAddress::Fixed {
                    method: IngestionMethod::Nar,
                    hash: if algo == HashAlgo::Blake3 {
                        nar_hash
                    } else {
                        tee.extra.take().map(Hasher::finish).unwrap_or(nar_hash)
                    },
                }
            }
            Kind::Fixed(IngestionMethod::Flat, algo) => {
                no_refs("fixed-output")?;
                let mut f = match fs::symlink_metadata(&content) {
                    Ok(m) if m.is_file() => {
                        fs::File::open(&content).map_err(StoreError::io("reading", &content))?
                    }
                    _ => return Err(refuse("a flat fixed output must be a regular file".into())),
                };
                let mut h = Hasher::new(algo);
                io::copy(&mut f, &mut h).map_err(StoreError::io("reading", &content))?;
                ContentAddress::Fixed {
                    method: IngestionMethod::Flat,
                    hash: h.finish(),
                }
            }
            Kind::Output => {
                let (modulo, found_self) = tee.modulo.take().expect("set for outputs").finish();
                if found_self != self_ref {
                    return Err(refuse(format!(
                        "its references {} itself but its archive {}",
                        if self_ref {
                            "include"
                        } else {
                            "do not include"
                        },
                        if found_self { "does" } else { "does not" }
                    )));
                }
                ContentAddress::Output {
                    nar_hash: modulo,
                    references: others,
                    self_reference: self_ref,
                }
            }
        };
        let computed = StorePath::from_ca(p.name(), &ca)?;
        if computed != *p {
            return Err(refuse(format!(
                "its content belongs at {computed}: the archive or the claimed references or content address are wrong"
            )));
        }
        let ca_text = super::add::ca_string(&ca);
        if ca_text != claim.ca {
            return Err(refuse(format!(
                "its content address is {ca_text}, {} was claimed",
                claim.ca
            )));
        }
        fsutil::normalise_tree(&content)?;
        let inst = Install {
            path: p,
            nar_hash,
            nar_size: tee.count,
            refs: claim.references,
            deriver: claim.deriver,
            ca: Some(ca_text),
            drv_outputs: Vec::new(),
        };
        let installed = self.install(inst, Content::Premade(&content))?;
        if !claim.signatures.is_empty() {
            self.add_signatures(p, claim.signatures)?;
        }
        Ok(installed)
    }

    /// Adds `signatures` to the valid path `p` (merged with those it has).
    pub fn add_signatures(&self, p: &StorePath, signatures: &[String]) -> Result<(), StoreError> {
        self.with_tx(|c, d| db::add_signatures(c, d, p, signatures))
            .and_then(|found| {
                if found {
                    Ok(())
                } else {
                    Err(self.not_valid(p))
                }
            })
    }

    /// The realisations that point at `p`: `(drv_hash, output, signatures)`.
    pub fn realisations_of(
        &self,
        p: &StorePath,
    ) -> Result<Vec<(String, String, Vec<String>)>, StoreError> {
        self.with_db(|c, d| db::realisations_of(c, d, p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn store() -> (tempfile::TempDir, LocalStore) {
        let t = tempfile::tempdir().unwrap();
        let s = LocalStore::open(t.path()).unwrap();
        (t, s)
    }

    /// The NAR of `p` in `s`, and its info.
    fn export(s: &LocalStore, p: &StorePath) -> (Vec<u8>, super::super::PathInfo) {
        let mut nar = Vec::new();
        nar::dump_path(&s.real_path(p), &mut nar).unwrap();
        (nar, s.path_info(p).unwrap().unwrap())
    }

    fn claim<'a>(
        p: &'a StorePath,
        info: &'a super::super::PathInfo,
        sigs: &'a [String],
    ) -> ImportClaim<'a> {
        ImportClaim {
            path: p,
            nar_hash: &info.nar_hash,
            nar_size: info.nar_size,
            references: &info.references,
            deriver: info.deriver.as_ref(),
            ca: info.ca.as_deref().unwrap(),
            signatures: sigs,
        }
    }

    /// Names in the store directory other than the valid paths.
    fn leftovers(s: &LocalStore, valid: &[&StorePath]) -> Vec<String> {
        let keep: Vec<String> = valid.iter().map(|p| p.base_name()).collect();
        fs::read_dir(s.store_dir())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| !keep.contains(n) && !n.starts_with('.'))
            .collect()
    }

    fn source_tree(dir: &Path) -> std::path::PathBuf {
        let src = dir.join("src");
        fs::create_dir_all(src.join("sub")).unwrap();
        fs::write(src.join("sub/a"), "alpha").unwrap();
        std::os::unix::fs::symlink("sub/a", src.join("l")).unwrap();
        src
    }

    #[test]
    fn a_source_and_a_text_cross_stores_and_keep_signatures() {
        let (ta, a) = store();
        let (_tb, b) = store();
        let src = a.add_path(&source_tree(ta.path()), "tree").unwrap();
        let text = a
            .add_text("note", b"see the tree", &BTreeSet::new())
            .unwrap();
        for p in [&src, &text] {
            let (nar, info) = export(&a, p);
            let sigs = vec!["k-1:c2ln".to_string()];
            assert!(b.import_nar(&claim(p, &info, &sigs), &nar[..]).unwrap());
            let got = b.path_info(p).unwrap().unwrap();
            assert_eq!(got.nar_hash, info.nar_hash);
            assert_eq!(got.ca, info.ca);
            assert_eq!(got.signatures, sigs);
            // Again: nothing read, nothing changed.
            assert!(!b.import_nar(&claim(p, &info, &sigs), &b""[..]).unwrap());
        }
    }

    #[test]
    fn an_output_that_refers_to_itself_is_recomputed() {
        let (_ta, s) = store();
        // Build the tree under a scratch hash part, as the realiser does.
        let scratch = "0".repeat(32);
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        fs::create_dir(&out).unwrap();
        fs::write(out.join("f"), format!("me: /rocmx/store/{scratch}-x\n")).unwrap();
        let mut m = ModuloHasher::new(&scratch);
        nar::dump_path(&out, &mut m).unwrap();
        let (h, selfref) = m.finish();
        assert!(selfref);
        let ca = ContentAddress::Output {
            nar_hash: h,
            references: BTreeSet::new(),
            self_reference: true,
        };
        let p = StorePath::from_ca("x", &ca).unwrap();
        fs::write(out.join("f"), format!("me: {}\n", p.to_absolute())).unwrap();
        let mut nar = Vec::new();
        nar::dump_path(&out, &mut nar).unwrap();
        let nar_hash = Hash::digest(HashAlgo::Blake3, &nar);
        let refs: BTreeSet<StorePath> = [p.clone()].into_iter().collect();
        let ca_text = super::super::add::ca_string(&ca);
        let c = ImportClaim {
            path: &p,
            nar_hash: &nar_hash,
            nar_size: nar.len() as u64,
            references: &refs,
            deriver: None,
            ca: &ca_text,
            signatures: &[],
        };
        // Claiming no self-reference is caught.
        let none = BTreeSet::new();
        let e = s
            .import_nar(
                &ImportClaim {
                    references: &none,
                    ..c.clone()
                },
                &nar[..],
            )
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("do not include itself but its archive does"),
            "{e}"
        );
        assert!(s.import_nar(&c, &nar[..]).unwrap());
        assert_eq!(s.references(&p).unwrap(), refs);
    }

    /// A NAR string: length, bytes, padding to 8.
    fn nar_str(out: &mut Vec<u8>, s: &[u8]) {
        out.extend_from_slice(&(s.len() as u64).to_le_bytes());
        out.extend_from_slice(s);
        out.resize(out.len().div_ceil(8) * 8, 0);
    }

    #[test]
    fn every_mismatch_is_refused_and_leaves_nothing() {
        let (ta, a) = store();
        let (_tb, b) = store();
        let p = a.add_path(&source_tree(ta.path()), "tree").unwrap();
        let (nar, info) = export(&a, &p);
        let mut flipped = nar.clone();
        let at = flipped.windows(5).position(|w| w == b"alpha").unwrap();
        flipped[at] ^= 1;
        let truncated = &nar[..nar.len() - 9];
        let mut other = info.clone();
        other.nar_hash = Hash::digest(HashAlgo::Blake3, b"else");
        let renamed: StorePath = format!("/rocmx/store/{}-tree2", p.hash_part())
            .parse()
            .unwrap();
        let mut evil = Vec::new();
        for s in [
            &b"nix-archive-1"[..],
            b"(",
            b"type",
            b"directory",
            b"entry",
            b"(",
            b"name",
            b"..",
            b"node",
            b"(",
            b"type",
            b"regular",
            b"contents",
            b"x",
            b")",
            b")",
            b")",
        ] {
            nar_str(&mut evil, s);
        }
        let mut evil_info = info.clone();
        evil_info.nar_size = evil.len() as u64;
        evil_info.nar_hash = Hash::digest(HashAlgo::Blake3, &evil);
        let cases: Vec<(ImportClaim<'_>, &[u8], &str)> = vec![
            (claim(&p, &info, &[]), &flipped, "hashes to"),
            (claim(&p, &info, &[]), truncated, "its archive is unusable"),
            (claim(&p, &other, &[]), &nar, "was claimed"),
            (claim(&renamed, &info, &[]), &nar, "its content belongs at"),
            (claim(&p, &evil_info, &[]), &evil, "its archive is unusable"),
            (
                ImportClaim {
                    ca: "fixed:r:sha256:0000000000000000000000000000000000000000000000000000",
                    ..claim(&p, &info, &[])
                },
                &nar,
                "belongs at",
            ),
            (
                ImportClaim {
                    nar_size: 10,
                    ..claim(&p, &info, &[])
                },
                &nar,
                "longer than the 10 bytes",
            ),
        ];
        for (c, bytes, needle) in cases {
            let e = b.import_nar(&c, bytes).unwrap_err().to_string();
            assert!(
                e.contains(needle) && e.contains("refusing"),
                "{needle}: {e}"
            );
            assert!(!b.is_valid(c.path).unwrap());
            assert_eq!(leftovers(&b, &[]), Vec::<String>::new());
        }
        // A reference that is not valid yet.
        let refd = a
            .add_text(
                "uses",
                p.to_absolute().as_bytes(),
                &[p.clone()].into_iter().collect(),
            )
            .unwrap();
        let (n2, i2) = export(&a, &refd);
        let e = b
            .import_nar(&claim(&refd, &i2, &[]), &n2[..])
            .unwrap_err()
            .to_string();
        assert!(e.contains("is not valid; add it first"), "{e}");
    }
}
