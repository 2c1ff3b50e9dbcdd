//! Signing keys, in Nix's textual forms, and signatures.
//!
//! Owns: the three forms below (ed25519), generating a key pair, signing and checking
//! a fingerprint against a set of trusted keys.
//!
//! ```text
//! secret key   NAME:base64(seed[32] ‖ public[32])     (the file `--secret-key-file` writes)
//! public key   NAME:base64(public[32])                 (`trusted-public-keys`)
//! signature    NAME:base64(ed25519(fingerprint)[64])   (a `Sig:` line, a realisation's `signatures`)
//! ```
//!
//! `NAME` is any non-empty text without `:` or white space (by convention a host name
//! and a number, `cache.example.org-1`). A signature is checked with the trusted key of
//! the same name; signatures by names nobody trusts are ignored, not errors. What is
//! signed (the fingerprints) is specified where the record is: [`crate::narinfo`],
//! [`crate::realisation`].
//!
//! Must not: read or write files (the caller does), or decide which keys are trusted.

use std::fmt;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use ed25519_dalek::{Signer, SigningKey, Verifier, VerifyingKey};

/// A key or signature that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// Not `NAME:BASE64`.
    #[error("'{0}' is not NAME:BASE64 (a key name, a colon, base64)")]
    Form(String),
    /// The name is empty or has a colon or white space.
    #[error("'{0}' is not a key name (non-empty, no ':' or white space)")]
    Name(String),
    /// The base64 part does not decode, or has the wrong length.
    #[error("the {what} '{name}' must be {want} bytes of base64 ({problem})")]
    Bytes {
        what: &'static str,
        name: String,
        want: usize,
        problem: String,
    },
    /// The secret key's public half does not match its seed.
    #[error("the secret key '{0}' is damaged: its public half does not match its seed")]
    Mismatch(String),
    /// No randomness for a new key.
    #[error("cannot get randomness for a new key: {0}")]
    Random(String),
}

fn check_name(name: &str) -> Result<(), KeyError> {
    if name.is_empty() || name.contains(':') || name.chars().any(char::is_whitespace) {
        return Err(KeyError::Name(name.to_string()));
    }
    Ok(())
}

/// Splits `NAME:BASE64` and decodes the bytes, which must be `N` long.
fn split<const N: usize>(s: &str, what: &'static str) -> Result<(String, [u8; N]), KeyError> {
    let s = s.trim();
    let (name, b64) = s.split_once(':').ok_or_else(|| KeyError::Form(s.into()))?;
    check_name(name)?;
    let bad = |problem: String| KeyError::Bytes {
        what,
        name: name.to_string(),
        want: N,
        problem,
    };
    let bytes = STANDARD
        .decode(b64)
        .map_err(|e| bad(format!("not base64: {e}")))?;
    let arr: [u8; N] = bytes
        .as_slice()
        .try_into()
        .map_err(|_| bad(format!("{} bytes", bytes.len())))?;
    Ok((name.to_string(), arr))
}

/// A secret signing key.
#[derive(Clone)]
pub struct SecretKey {
    name: String,
    key: SigningKey,
}

impl fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SecretKey({})", self.name)
    }
}

impl SecretKey {
    /// A new random key called `name`.
    pub fn generate(name: &str) -> Result<SecretKey, KeyError> {
        check_name(name)?;
        let mut seed = [0u8; 32];
        getrandom::getrandom(&mut seed).map_err(|e| KeyError::Random(e.to_string()))?;
        Ok(SecretKey {
            name: name.to_string(),
            key: SigningKey::from_bytes(&seed),
        })
    }

    /// Parses the secret key form.
    pub fn parse(s: &str) -> Result<SecretKey, KeyError> {
        let (name, bytes) = split::<64>(s, "secret key")?;
        let mut seed = [0u8; 32];
        seed.copy_from_slice(&bytes[..32]);
        let key = SigningKey::from_bytes(&seed);
        if key.verifying_key().as_bytes() != &bytes[32..] {
            return Err(KeyError::Mismatch(name));
        }
        Ok(SecretKey { name, key })
    }

    /// The key's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The secret key form (what the key file holds).
    pub fn to_text(&self) -> String {
        let mut b = [0u8; 64];
        b[..32].copy_from_slice(self.key.as_bytes());
        b[32..].copy_from_slice(self.key.verifying_key().as_bytes());
        format!("{}:{}", self.name, STANDARD.encode(b))
    }

    /// The matching public key.
    pub fn public(&self) -> PublicKey {
        PublicKey {
            name: self.name.clone(),
            key: self.key.verifying_key(),
        }
    }

    /// Signs `fingerprint`; the signature form.
    pub fn sign(&self, fingerprint: &str) -> String {
        let sig = self.key.sign(fingerprint.as_bytes());
        format!("{}:{}", self.name, STANDARD.encode(sig.to_bytes()))
    }
}

/// A public key that signatures are checked with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicKey {
    name: String,
    key: VerifyingKey,
}

impl PublicKey {
    /// Parses the public key form.
    pub fn parse(s: &str) -> Result<PublicKey, KeyError> {
        let (name, bytes) = split::<32>(s, "public key")?;
        let key = VerifyingKey::from_bytes(&bytes).map_err(|e| KeyError::Bytes {
            what: "public key",
            name: name.clone(),
            want: 32,
            problem: format!("not a point on the curve: {e}"),
        })?;
        Ok(PublicKey { name, key })
    }

    /// The key's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether `signature` (the signature form) is this key's over `fingerprint`.
    pub fn verifies(&self, fingerprint: &str, signature: &str) -> bool {
        let Ok((name, bytes)) = split::<64>(signature, "signature") else {
            return false;
        };
        if name != self.name {
            return false;
        }
        let sig = ed25519_dalek::Signature::from_bytes(&bytes);
        self.key.verify(fingerprint.as_bytes(), &sig).is_ok()
    }
}

impl fmt::Display for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.name, STANDARD.encode(self.key.as_bytes()))
    }
}

/// A set of trusted public keys (`trusted-public-keys`).
#[derive(Debug, Clone, Default)]
pub struct TrustedKeys {
    keys: Vec<PublicKey>,
}

impl TrustedKeys {
    /// Parses a white-space separated list of public keys.
    pub fn parse(list: &str) -> Result<TrustedKeys, KeyError> {
        Ok(TrustedKeys {
            keys: list
                .split_whitespace()
                .map(PublicKey::parse)
                .collect::<Result<_, _>>()?,
        })
    }

    /// Adds a key.
    pub fn push(&mut self, k: PublicKey) {
        self.keys.push(k);
    }

    /// Whether there are no keys.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The name of the first trusted key that made one of `signatures` over
    /// `fingerprint`, if any.
    pub fn check(&self, fingerprint: &str, signatures: &[String]) -> Option<&str> {
        self.keys.iter().find_map(|k| {
            signatures
                .iter()
                .any(|s| k.verifies(fingerprint, s))
                .then_some(k.name())
        })
    }

    /// Every distinct trusted key that made one of `signatures` over `fingerprint`, in
    /// the order of the trusted list (a key listed twice counts once).
    pub fn signers(&self, fingerprint: &str, signatures: &[String]) -> Vec<&PublicKey> {
        let mut out: Vec<&PublicKey> = Vec::new();
        for k in &self.keys {
            if !out.contains(&k) && signatures.iter().any(|s| k.verifies(fingerprint, s)) {
                out.push(k);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 8032, test 1: the empty message.
    const SEED: &str = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60";
    const PUBLIC: &str = "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a";
    const SIG: &str = "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b";

    fn unhex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn literal_vectors() {
        let mut b = unhex(SEED);
        b.extend(unhex(PUBLIC));
        let sk = SecretKey::parse(&format!("test-1:{}", STANDARD.encode(&b))).unwrap();
        assert_eq!(
            sk.public().to_string(),
            format!("test-1:{}", STANDARD.encode(unhex(PUBLIC)))
        );
        let sig = sk.sign("");
        assert_eq!(sig, format!("test-1:{}", STANDARD.encode(unhex(SIG))));
        assert!(sk.public().verifies("", &sig));
        assert!(!sk.public().verifies("x", &sig));
        assert_eq!(
            SecretKey::parse(&sk.to_text()).unwrap().to_text(),
            sk.to_text()
        );
    }

    #[test]
    fn signatures_by_other_names_or_keys_do_not_count() {
        let a = SecretKey::generate("a").unwrap();
        let b = SecretKey::generate("b").unwrap();
        let trusted = TrustedKeys::parse(&format!("{}  {}", a.public(), b.public())).unwrap();
        let fp = "1;/rocmx/store/x;blake3:y;1;";
        assert_eq!(trusted.check(fp, &[b.sign(fp)]), Some("b"));
        // a's signature relabelled as b's.
        let forged = format!("b:{}", a.sign(fp).split_once(':').unwrap().1);
        assert_eq!(trusted.check(fp, std::slice::from_ref(&forged)), None);
        let c = SecretKey::generate("c").unwrap();
        assert_eq!(trusted.check(fp, &[c.sign(fp), "junk".into()]), None);
        assert_eq!(trusted.check(fp, &[c.sign(fp), a.sign(fp)]), Some("a"));
    }

    #[test]
    fn signers_are_the_distinct_trusted_keys_with_a_valid_signature() {
        let a = SecretKey::generate("a").unwrap();
        let b = SecretKey::generate("b").unwrap();
        let c = SecretKey::generate("c").unwrap();
        // a listed twice counts once; c is not trusted.
        let trusted =
            TrustedKeys::parse(&format!("{} {} {}", a.public(), b.public(), a.public())).unwrap();
        let fp = "rocmx-realisation-1;x!out;/rocmx/store/y";
        let names = |sigs: &[String]| -> Vec<String> {
            trusted
                .signers(fp, sigs)
                .iter()
                .map(|k| k.name().to_string())
                .collect()
        };
        assert_eq!(names(&[b.sign(fp), a.sign(fp), a.sign(fp)]), ["a", "b"]);
        assert_eq!(names(&[c.sign(fp), b.sign("other")]), Vec::<String>::new());
        assert_eq!(names(&[c.sign(fp), b.sign(fp)]), ["b"]);
    }

    #[test]
    fn bad_forms_are_named() {
        for (text, needle) in [
            ("nocolon", "not NAME:BASE64"),
            (":AAAA", "not a key name"),
            ("a b:AAAA", "not a key name"),
            ("k:!!!", "not base64"),
            ("k:AAAA", "32 bytes of base64 (3 bytes)"),
        ] {
            let e = PublicKey::parse(text).unwrap_err().to_string();
            assert!(e.contains(needle), "{text}: {e}");
        }
        let sk = SecretKey::generate("k").unwrap();
        let mut b = STANDARD
            .decode(sk.to_text().split_once(':').unwrap().1)
            .unwrap();
        b[40] ^= 1;
        let e = SecretKey::parse(&format!("k:{}", STANDARD.encode(b)))
            .unwrap_err()
            .to_string();
        assert!(e.contains("damaged"), "{e}");
    }
}
