//! Verifying a suite's `InRelease` (or `Release` + `Release.gpg`) OpenPGP
//! signature the way apt does, and finding the keyrings apt would use.
//!
//! The signature is checked by running `gpgv` (Debian's `gpgv` package):
//!
//! ```text
//! gpgv --homedir TMP --status-fd 1 --keyring K1 [--keyring K2 …] --output TMP/plain TMP/InRelease
//! gpgv --homedir TMP --status-fd 1 --keyring K1 [--keyring K2 …] TMP/Release.gpg TMP/Release
//! ```
//!
//! Shelling out is the norm here: apt itself verifies by running `gpgv` (or
//! `sqv`) and reading its `[GNUPG:]` status lines; no OpenPGP implementation
//! is linked in. The status lines are read as apt reads them
//! ([`parse_status`], [`decide`]): the file is accepted when at least one
//! signature is good (`GOODSIG` + `VALIDSIG`, with a digest stronger than
//! SHA-1) and none is bad (`BADSIG`); a second signature by a key the
//! keyrings lack (`NO_PUBKEY`) is then ignored, as Debian signs each
//! `InRelease` with two keys. Expired or revoked keys (`EXPKEYSIG`,
//! `REVKEYSIG`) and expired signatures (`EXPSIG`) do not count. When the apt
//! source names key fingerprints (`Signed-By: FPR`) only signatures by those
//! keys (or their subkeys; `FPR!` for that exact key) count.
//!
//! For a clearsigned `InRelease`, what is parsed afterwards is gpgv's own
//! `--output` (the text it verified), and the caller also checks that the
//! file is exactly one signed block with nothing but blank lines around it
//! (`release::split_clearsigned`): unsigned text before or after the block
//! is refused, as apt refuses it, instead of being silently dropped or used.
//! The verified text must equal that block's text (line by line, trailing
//! white space aside, which the signature does not cover).
//!
//! Keyrings, in apt's order, chosen by the binary ([`Keyrings::origin`] says
//! which): `--keyring FILE`; else the `Signed-By` of the apt source whose URI
//! is the mirror's ([`sources_for`], from `sources.list` one-line entries
//! `[signed-by=…]` and deb822 `.sources` paragraphs, key files, fingerprints
//! or an inline key block); else [`DEFAULT_KEYRING`] plus
//! `etc/apt/trusted.gpg` and `etc/apt/trusted.gpg.d/*.{gpg,asc}`. gpgv 2.2
//! cannot read ASCII-armoured keyrings, so `.asc` files and inline blocks
//! are dearmoured here ([`dearmor`]) into binary keyrings first.
//!
//! Owns: running gpgv on bytes it is given (in a private temporary
//! directory), reading its status lines, the accept/refuse rule and its
//! messages (which name the suite, the file, the key and the fix), parsing
//! apt source entries and `Signed-By`, dearmouring. Must not: fetch
//! anything, read apt's files or keyrings itself (the binary reads them and
//! passes text and paths), or parse the Release file (`release`).
//!
//! Submodules: `sources.rs` (apt source entries, `Signed-By`, matching the
//! mirror, keyring file names) and `armor.rs` (dearmouring), re-exported here.

use std::path::PathBuf;
use std::process::{Command, Stdio};

mod armor;
mod sources;

pub use armor::{dearmor, is_armored};
pub use sources::{
    deb822_sources, is_trusted_part, one_line_sources, parse_signed_by, same_uri, sources_for,
    AptSource, SignedBy,
};

/// The Debian archive keyring, relative to the root apt's files are read
/// under.
pub const DEFAULT_KEYRING: &str = "usr/share/keyrings/debian-archive-keyring.gpg";

/// How the Release file is trusted.
#[derive(Debug, Clone)]
pub enum Trust {
    /// Verified with gpgv against these keyrings.
    Keyrings(Keyrings),
    /// Not verified (`--allow-unsigned`): the armour is stripped and the
    /// text used as it is.
    Unsigned,
}

/// The keyrings a signature is checked against.
#[derive(Debug, Clone)]
pub struct Keyrings {
    /// The gpgv program (`gpgv`, looked up in `PATH`).
    pub gpgv: PathBuf,
    /// The keyrings, in order.
    pub files: Vec<Keyring>,
    /// When not empty, only signatures by these keys count (`Signed-By`
    /// fingerprints, upper-case hex, a trailing `!` for that exact key).
    pub fingerprints: Vec<String>,
    /// Where the keyrings come from, for messages: `--keyring`, `the
    /// Signed-By of /etc/apt/sources.list.d/debian.sources`, `the default
    /// keyrings`.
    pub origin: String,
}

/// One keyring.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keyring {
    /// What gpgv reads: a binary OpenPGP keyring (or keybox), an absolute
    /// path (a dearmoured copy for an armoured one).
    pub path: PathBuf,
    /// What messages call it: the file as given, or `the key block in FILE`.
    pub name: String,
}

impl Keyring {
    /// A keyring gpgv reads as it is.
    pub fn new(path: PathBuf) -> Keyring {
        Keyring {
            name: path.display().to_string(),
            path,
        }
    }
}

/// What is verified.
#[derive(Debug, Clone, Copy)]
pub enum Signed<'a> {
    /// An `InRelease` file: a clearsigned message.
    Clear(&'a [u8]),
    /// A `Release` file and its detached signature `Release.gpg`.
    Detached {
        /// The Release file's bytes (exactly what is signed).
        data: &'a [u8],
        /// The signature's bytes.
        signature: &'a [u8],
    },
}

/// A signature that counted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signer {
    /// The long key id (`6ED0E7B82643E131`).
    pub keyid: String,
    /// The signing key's fingerprint (from `VALIDSIG`).
    pub fingerprint: String,
    /// The user id gpgv printed.
    pub uid: String,
}

impl std::fmt::Display for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (key {})", self.uid, self.fingerprint)
    }
}

/// A verified file.
#[derive(Debug, Clone)]
pub struct Verified {
    /// The signed bytes: gpgv's output for a clearsigned file, the data for
    /// a detached signature.
    pub text: Vec<u8>,
    /// The signatures that counted (at least one).
    pub signers: Vec<Signer>,
}

/// A signature that cannot be trusted, or gpgv could not be run; the
/// message names the suite, the file, the key when known, and the fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SignatureError(pub String);

/// What a refusal should suggest when a key is missing.
pub const FIX_KEYRING: &str = "pass --keyring FILE with the archive's public key (a binary or ASCII-armoured OpenPGP keyring), \
or --allow-unsigned to proceed without verification";

/// What a refusal should suggest when the file itself is wrong.
pub const FIX_UNSIGNED: &str =
    "use a mirror that serves the archive's signed files, or pass --allow-unsigned to proceed without verification";

// ---------------------------------------------------------------------------
// gpgv's status lines
// ---------------------------------------------------------------------------

/// The verdict gpgv gave one signature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// `GOODSIG keyid uid`.
    Good,
    /// `BADSIG keyid uid`: the text does not match the signature.
    Bad,
    /// `EXPSIG keyid uid`: the signature has expired.
    ExpiredSig,
    /// `EXPKEYSIG keyid uid`: made by a key that has expired.
    ExpiredKey,
    /// `REVKEYSIG keyid uid`: made by a revoked key.
    RevokedKey,
    /// `ERRSIG keyid … rc [fpr]` then `NO_PUBKEY keyid`: the key is not in
    /// the keyrings.
    NoPubkey,
    /// `ERRSIG` for another reason (the `rc`: 4 is an unknown algorithm).
    Error(String),
}

/// One signature as gpgv reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signature {
    /// The long key id (or the fingerprint, for an `ERRSIG` that gives one).
    pub keyid: String,
    /// The user id (empty when the key is unknown).
    pub uid: String,
    /// The verdict; `None` when gpgv printed none.
    pub verdict: Option<Verdict>,
    /// `VALIDSIG`'s first field: the signing (sub)key's fingerprint.
    pub fingerprint: Option<String>,
    /// `VALIDSIG`'s last field: the primary key's fingerprint.
    pub primary: Option<String>,
    /// `VALIDSIG`'s hash algorithm (RFC 4880 9.4: 1 MD5, 2 SHA-1, 3
    /// RIPEMD-160, 8 SHA-256, …).
    pub hash_algo: Option<u32>,
}

impl Signature {
    fn new(keyid: &str) -> Signature {
        Signature {
            keyid: keyid.to_string(),
            uid: String::new(),
            verdict: None,
            fingerprint: None,
            primary: None,
            hash_algo: None,
        }
    }

    /// The key named in messages: the fingerprint when known.
    pub fn key(&self) -> &str {
        self.fingerprint.as_deref().unwrap_or(&self.keyid)
    }

    fn describe(&self) -> String {
        if self.uid.is_empty() {
            format!("key {}", self.key())
        } else {
            format!("key {} ({})", self.key(), self.uid)
        }
    }
}

/// Reads gpgv's `--status-fd` output into one [`Signature`] per signature
/// (a `NEWSIG` line, or a second verdict, starts the next one). Lines other
/// than `[GNUPG:] …` are ignored.
pub fn parse_status(text: &str) -> Vec<Signature> {
    let mut sigs: Vec<Signature> = Vec::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("[GNUPG:] ") else {
            continue;
        };
        let (kw, args) = rest.split_once(' ').unwrap_or((rest, ""));
        let mut words = args.split_whitespace();
        let first = words.next().unwrap_or("").to_ascii_uppercase();
        let uid = args
            .split_once(' ')
            .map(|(_, u)| u.trim().to_string())
            .unwrap_or_default();
        let verdict = match kw {
            "GOODSIG" => Some(Verdict::Good),
            "BADSIG" => Some(Verdict::Bad),
            "EXPSIG" => Some(Verdict::ExpiredSig),
            "EXPKEYSIG" => Some(Verdict::ExpiredKey),
            "REVKEYSIG" => Some(Verdict::RevokedKey),
            "ERRSIG" => {
                // keyid pkalgo hashalgo class time rc [fpr]
                let f: Vec<&str> = args.split_whitespace().collect();
                Some(Verdict::Error(f.get(5).copied().unwrap_or("?").to_string()))
            }
            _ => None,
        };
        match kw {
            "NEWSIG" => {
                sigs.push(Signature::new(""));
            }
            _ if verdict.is_some() => {
                let needs_new = match sigs.last() {
                    None => true,
                    Some(s) => s.verdict.is_some(),
                };
                if needs_new {
                    sigs.push(Signature::new(&first));
                }
                let s = sigs.last_mut().expect("pushed");
                s.keyid = first.clone();
                if kw == "ERRSIG" {
                    let f: Vec<&str> = args.split_whitespace().collect();
                    if let Some(fpr) = f.get(6) {
                        s.fingerprint = Some(fpr.to_ascii_uppercase());
                    }
                } else {
                    s.uid = uid;
                }
                s.verdict = verdict;
            }
            "NO_PUBKEY" => {
                if let Some(s) = sigs
                    .iter_mut()
                    .rev()
                    .find(|s| s.keyid.eq_ignore_ascii_case(&first))
                {
                    s.verdict = Some(Verdict::NoPubkey);
                } else {
                    let mut s = Signature::new(&first);
                    s.verdict = Some(Verdict::NoPubkey);
                    sigs.push(s);
                }
            }
            "VALIDSIG" => {
                // fpr date time expire version reserved pkalgo hashalgo class [primary]
                let f: Vec<&str> = args.split_whitespace().collect();
                if sigs.is_empty() {
                    sigs.push(Signature::new(""));
                }
                let s = sigs.last_mut().expect("pushed");
                s.fingerprint = f.first().map(|x| x.to_ascii_uppercase());
                s.hash_algo = f.get(7).and_then(|x| x.parse().ok());
                s.primary = f.get(9).map(|x| x.to_ascii_uppercase());
            }
            _ => {}
        }
    }
    // A NEWSIG followed by nothing (gpgv stopped) says nothing.
    sigs.retain(|s| s.verdict.is_some() || s.fingerprint.is_some());
    sigs
}

/// Whether a hash algorithm (RFC 4880 9.4) is too weak to count: MD5,
/// SHA-1, RIPEMD-160 (apt refuses them too).
fn weak_digest(algo: u32) -> Option<&'static str> {
    match algo {
        1 => Some("MD5"),
        2 => Some("SHA-1"),
        3 => Some("RIPEMD-160"),
        _ => None,
    }
}

/// Whether `want` (a Signed-By fingerprint, `!` for exactly that key) names
/// the key of `sig`.
fn allowed_by(want: &str, sig: &Signature) -> bool {
    let (fpr, exact) = match want.strip_suffix('!') {
        Some(f) => (f, true),
        None => (want, false),
    };
    let fpr = fpr.to_ascii_uppercase();
    if sig.fingerprint.as_deref() == Some(fpr.as_str()) {
        return true;
    }
    !exact && sig.primary.as_deref() == Some(fpr.as_str())
}

/// Applies apt's rule to what gpgv said about `file` (`dists/sid/InRelease`)
/// of `suite`: at least one good signature that counts, none bad. `exit` is
/// gpgv's exit status (1 means a bad signature even if no status line said
/// so). The error says what was wrong, with the key and the fix.
pub fn decide(
    sigs: &[Signature],
    exit: Option<i32>,
    keyrings: &Keyrings,
    suite: &str,
    file: &str,
) -> Result<Vec<Signer>, SignatureError> {
    let refuse = |what: String, fix: &str| {
        SignatureError(format!(
            "cannot trust {file} of suite '{suite}': {what}; keyrings used: {} ({}). To fix: {fix}",
            keyrings.origin,
            keyrings
                .files
                .iter()
                .map(|k| k.name.clone())
                .collect::<Vec<_>>()
                .join(", ")
        ))
    };
    if let Some(bad) = sigs.iter().find(|s| s.verdict == Some(Verdict::Bad)) {
        return Err(refuse(
            format!(
                "the signature by {} is BAD: the signed text was changed after signing (tampered with, or damaged by the mirror or a proxy)",
                bad.describe()
            ),
            FIX_UNSIGNED,
        ));
    }
    let mut good = Vec::new();
    let mut weak = Vec::new();
    let mut not_allowed = Vec::new();
    for s in sigs {
        if s.verdict != Some(Verdict::Good) {
            continue;
        }
        let Some(fpr) = s.fingerprint.clone() else {
            continue;
        };
        if let Some(name) = s.hash_algo.and_then(weak_digest) {
            weak.push(format!("{} uses the weak digest {name}", s.describe()));
            continue;
        }
        if !keyrings.fingerprints.is_empty()
            && !keyrings.fingerprints.iter().any(|w| allowed_by(w, s))
        {
            not_allowed.push(s.describe());
            continue;
        }
        good.push(Signer {
            keyid: s.keyid.clone(),
            fingerprint: fpr,
            uid: s.uid.clone(),
        });
    }
    if exit == Some(1) {
        return Err(refuse(
            "gpgv found a bad signature".to_string(),
            FIX_UNSIGNED,
        ));
    }
    if !good.is_empty() {
        return Ok(good);
    }
    let mut why = Vec::new();
    let missing: Vec<&str> = sigs
        .iter()
        .filter(|s| s.verdict == Some(Verdict::NoPubkey))
        .map(|s| s.key())
        .collect();
    match missing[..] {
        [] => {}
        [one] => why.push(format!(
            "it is signed by key {one}, which is not in the keyrings (NO_PUBKEY)"
        )),
        _ => why.push(format!(
            "it is signed by keys {}, none of which is in the keyrings (NO_PUBKEY)",
            missing.join(", ")
        )),
    }
    for s in sigs {
        match &s.verdict {
            Some(Verdict::ExpiredKey) => why.push(format!(
                "it is signed by {}, which has EXPIRED (update the keyring: Debian's debian-archive-keyring package)",
                s.describe()
            )),
            Some(Verdict::RevokedKey) => {
                why.push(format!("it is signed by {}, which is REVOKED", s.describe()))
            }
            Some(Verdict::ExpiredSig) => {
                why.push(format!("the signature by {} has expired", s.describe()))
            }
            Some(Verdict::Error(rc)) => why.push(format!(
                "gpgv could not check the signature by key {} (error {rc})",
                s.key()
            )),
            _ => {}
        }
    }
    why.extend(weak);
    if !not_allowed.is_empty() {
        why.push(format!(
            "it is signed by {}, but the apt source's Signed-By allows only {}",
            not_allowed.join(", "),
            keyrings.fingerprints.join(", ")
        ));
    }
    if why.is_empty() {
        return Err(refuse(
            "gpgv found no signature in it".to_string(),
            FIX_UNSIGNED,
        ));
    }
    Err(refuse(why.join("; "), FIX_KEYRING))
}

/// Verifies `signed` (`file` of `suite`, for messages) with gpgv against
/// `keyrings`, in a private temporary directory (also gpgv's home, so no
/// user's `~/.gnupg` is read or written). A missing gpgv is an error saying
/// to install Debian's `gpgv` package.
pub fn verify(
    keyrings: &Keyrings,
    signed: Signed<'_>,
    suite: &str,
    file: &str,
) -> Result<Verified, SignatureError> {
    let io = |what: &str, e: std::io::Error| {
        SignatureError(format!(
            "cannot verify {file} of suite '{suite}': {what}: {e}"
        ))
    };
    if keyrings.files.is_empty() {
        return Err(SignatureError(format!(
            "cannot verify {file} of suite '{suite}': no keyring ({}). To fix: {FIX_KEYRING}",
            keyrings.origin
        )));
    }
    let dir = tempfile::Builder::new()
        .prefix("rocmx-gpgv-")
        .tempdir()
        .map_err(|e| io("creating a temporary directory", e))?;
    let home = dir.path().join("home");
    std::fs::create_dir(&home).map_err(|e| io("creating gpgv's home", e))?;
    let mut cmd = Command::new(&keyrings.gpgv);
    cmd.arg("--homedir")
        .arg(&home)
        .args(["--status-fd", "1"])
        .env("LC_ALL", "C")
        .env_remove("LANGUAGE")
        .stdin(Stdio::null());
    for k in &keyrings.files {
        cmd.arg("--keyring").arg(&k.path);
    }
    let plain = dir.path().join("plain");
    match signed {
        Signed::Clear(bytes) => {
            let input = dir.path().join("InRelease");
            std::fs::write(&input, bytes).map_err(|e| io("writing a temporary file", e))?;
            cmd.arg("--output").arg(&plain).arg(&input);
        }
        Signed::Detached { data, signature } => {
            let d = dir.path().join("Release");
            let s = dir.path().join("Release.gpg");
            std::fs::write(&d, data).map_err(|e| io("writing a temporary file", e))?;
            std::fs::write(&s, signature).map_err(|e| io("writing a temporary file", e))?;
            cmd.arg(&s).arg(&d);
        }
    }
    let out = match cmd.output() {
        Ok(o) => o,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(SignatureError(format!(
                "cannot verify {file} of suite '{suite}': '{}' is not installed: install Debian's gpgv package \
                 (apt-get install gpgv), or pass --allow-unsigned to proceed without verification",
                keyrings.gpgv.display()
            )))
        }
        Err(e) => return Err(io(&format!("running '{}'", keyrings.gpgv.display()), e)),
    };
    let status = String::from_utf8_lossy(&out.stdout);
    let sigs = parse_status(&status);
    let signers = decide(&sigs, out.status.code(), keyrings, suite, file).map_err(|e| {
        let said = String::from_utf8_lossy(&out.stderr);
        let said = said.trim();
        if said.is_empty() || !e.0.contains("gpgv found no signature") {
            e
        } else {
            SignatureError(format!("{} (gpgv said: {said})", e.0))
        }
    })?;
    let text = match signed {
        Signed::Clear(_) => {
            std::fs::read(&plain).map_err(|e| io("reading the text gpgv verified", e))?
        }
        Signed::Detached { data, .. } => data.to_vec(),
    };
    Ok(Verified { text, signers })
}

/// Whether two texts are the same lines once trailing white space (which a
/// clearsigned signature does not cover) and trailing blank lines are
/// dropped.
pub fn same_signed_text(a: &str, b: &str) -> bool {
    fn norm(t: &str) -> Vec<&str> {
        let mut v: Vec<&str> = t.lines().map(str::trim_end).collect();
        while v.last() == Some(&"") {
            v.pop();
        }
        v
    }
    norm(a) == norm(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEBIAN: &str = "\
[GNUPG:] NEWSIG
[GNUPG:] ERRSIG 6ED0E7B82643E131 1 8 01 1793347767 9 4CB50190207B4758A3F73A796ED0E7B82643E131
[GNUPG:] NO_PUBKEY 6ED0E7B82643E131
[GNUPG:] NEWSIG
[GNUPG:] KEY_CONSIDERED 04B54C3CDCA79751B16BC6B5225629DF75B188BD 0
[GNUPG:] GOODSIG 78DBA3BC47EF2265 Debian Archive Automatic Signing Key (13/trixie) <ftpmaster@debian.org>
[GNUPG:] VALIDSIG B8E5F13176D2A7A75220028078DBA3BC47EF2265 2026-10-30 1793347770 0 4 0 1 8 01 04B54C3CDCA79751B16BC6B5225629DF75B188BD
";

    fn rings(fprs: &[&str]) -> Keyrings {
        Keyrings {
            gpgv: "gpgv".into(),
            files: vec![Keyring::new("/k.gpg".into())],
            fingerprints: fprs.iter().map(|s| s.to_string()).collect(),
            origin: "--keyring".into(),
        }
    }

    #[test]
    fn one_good_signature_is_enough() {
        let sigs = parse_status(DEBIAN);
        assert_eq!(sigs.len(), 2);
        assert_eq!(sigs[0].verdict, Some(Verdict::NoPubkey));
        assert_eq!(sigs[0].key(), "4CB50190207B4758A3F73A796ED0E7B82643E131");
        assert_eq!(sigs[1].verdict, Some(Verdict::Good));
        assert_eq!(sigs[1].hash_algo, Some(8));
        let good = decide(&sigs, Some(2), &rings(&[]), "sid", "dists/sid/InRelease").unwrap();
        assert_eq!(good.len(), 1);
        assert_eq!(good[0].keyid, "78DBA3BC47EF2265");
        assert_eq!(
            good[0].fingerprint,
            "B8E5F13176D2A7A75220028078DBA3BC47EF2265"
        );
        // Signed-By fingerprints: the primary key's allows its subkey…
        let primary = "04B54C3CDCA79751B16BC6B5225629DF75B188BD";
        assert!(decide(&sigs, Some(2), &rings(&[primary]), "sid", "f").is_ok());
        // … unless `!` asks for that exact key.
        let e = decide(
            &sigs,
            Some(2),
            &rings(&[&format!("{primary}!")]),
            "sid",
            "f",
        )
        .unwrap_err()
        .0;
        assert!(e.contains("Signed-By allows only"), "{e}");
    }

    #[test]
    fn refusals_name_the_key_and_the_fix() {
        let only_missing = "[GNUPG:] NEWSIG\n[GNUPG:] ERRSIG 0B899C956237BFBF 22 8 01 1796099579 9 39CEE3FE40DCFF4D83892A160B899C956237BFBF\n[GNUPG:] NO_PUBKEY 0B899C956237BFBF\n";
        let e = decide(
            &parse_status(only_missing),
            Some(2),
            &rings(&[]),
            "sid",
            "dists/sid/InRelease",
        )
        .unwrap_err()
        .0;
        assert!(
            e.contains("cannot trust dists/sid/InRelease of suite 'sid'"),
            "{e}"
        );
        assert!(
            e.contains("signed by key 39CEE3FE40DCFF4D83892A160B899C956237BFBF, which is not in the keyrings (NO_PUBKEY)"),
            "{e}"
        );
        assert!(e.contains("--keyring FILE"), "{e}");
        assert!(e.contains("--allow-unsigned"), "{e}");

        let bad = "[GNUPG:] NEWSIG\n[GNUPG:] BADSIG 6ED0E7B82643E131 Debian Archive\n";
        let e = decide(&parse_status(bad), Some(1), &rings(&[]), "sid", "f")
            .unwrap_err()
            .0;
        assert!(
            e.contains("the signature by key 6ED0E7B82643E131 (Debian Archive) is BAD"),
            "{e}"
        );
        // A bad one spoils a good one.
        let both = format!("{DEBIAN}{bad}");
        assert!(decide(&parse_status(&both), Some(1), &rings(&[]), "sid", "f").is_err());

        let expired = "[GNUPG:] NEWSIG\n[GNUPG:] EXPKEYSIG 6ED0E7B82643E131 Old Key\n[GNUPG:] VALIDSIG 4CB50190207B4758A3F73A796ED0E7B82643E131 2026-10-30 1 0 4 0 1 8 01 4CB50190207B4758A3F73A796ED0E7B82643E131\n";
        let e = decide(&parse_status(expired), Some(0), &rings(&[]), "sid", "f")
            .unwrap_err()
            .0;
        assert!(e.contains("which has EXPIRED"), "{e}");

        let sha1 = "[GNUPG:] GOODSIG 6ED0E7B82643E131 K\n[GNUPG:] VALIDSIG 4CB50190207B4758A3F73A796ED0E7B82643E131 2026-10-30 1 0 4 0 1 2 01 4CB50190207B4758A3F73A796ED0E7B82643E131\n";
        let e = decide(&parse_status(sha1), Some(0), &rings(&[]), "sid", "f")
            .unwrap_err()
            .0;
        assert!(e.contains("weak digest SHA-1"), "{e}");

        let e = decide(&[], Some(2), &rings(&[]), "sid", "f").unwrap_err().0;
        assert!(e.contains("gpgv found no signature"), "{e}");
    }

    #[test]
    fn signed_text_comparison() {
        assert!(same_signed_text("a\nb  \n", "a\nb\n\n"));
        assert!(!same_signed_text("a\nb\n", "a\nb\nc\n"));
    }
}
