//! `realisations/<drvhash>!<output>.json`: which store path an output of a resolved
//! derivation was realised to.
//!
//! ```text
//! {"id":"<drvhash>!out","outPath":"<hash>-hello-2.12.3","signatures":["cache-1:…"]}
//! ```
//!
//! `<drvhash>` is the resolved derivation's key, hex BLAKE3 of its ATerm (the
//! realiser's `resolve::resolved_hash`), so every machine that resolves a derivation to
//! the same inputs asks for the same file. `outPath` is a base name. Unknown fields are
//! ignored (Nix writes `dependentRealisations`).
//!
//! # Fingerprint
//!
//! ```text
//! rocmx-realisation-1;<drvhash>!<output>;/rocmx/store/<hash>-<name>
//! ```
//!
//! Must not: fetch anything or decide trust.

use serde::{Deserialize, Serialize};

use rocmx_store::StorePath;

use crate::keys::{PublicKey, SecretKey, TrustedKeys};

/// A realisation record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Realisation {
    /// Hex BLAKE3 of the resolved derivation.
    pub drv_hash: String,
    pub output: String,
    pub out_path: StorePath,
    pub signatures: Vec<String>,
}

#[derive(Serialize, Deserialize)]
struct Json {
    id: String,
    #[serde(rename = "outPath")]
    out_path: String,
    #[serde(default)]
    signatures: Vec<String>,
}

/// A realisation file that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct RealisationError(pub String);

/// Whether `s` is a resolved derivation hash (64 lower-case hex digits).
pub fn is_drv_hash(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Whether `s` is an output name (as derivations allow).
fn is_output_name(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"+-._?=".contains(&b))
}

impl Realisation {
    /// The file's name inside `realisations/`.
    pub fn file_name(drv_hash: &str, output: &str) -> String {
        format!("{drv_hash}!{output}.json")
    }

    /// Parses the JSON text.
    pub fn parse(text: &str) -> Result<Realisation, RealisationError> {
        let j: Json = serde_json::from_str(text)
            .map_err(|e| RealisationError(format!("not a realisation: {e}")))?;
        let (drv_hash, output) = j
            .id
            .split_once('!')
            .filter(|(h, o)| is_drv_hash(h) && is_output_name(o))
            .ok_or_else(|| RealisationError(format!("id '{}' is not <drvhash>!<output>", j.id)))?;
        let out_path = StorePath::from_base_name(&j.out_path)
            .map_err(|e| RealisationError(format!("outPath '{}': {e}", j.out_path)))?;
        Ok(Realisation {
            drv_hash: drv_hash.to_string(),
            output: output.to_string(),
            out_path,
            signatures: j.signatures,
        })
    }

    /// The JSON text (one line, and a newline).
    pub fn to_text(&self) -> String {
        let j = Json {
            id: format!("{}!{}", self.drv_hash, self.output),
            out_path: self.out_path.base_name(),
            signatures: self.signatures.clone(),
        };
        let mut s = serde_json::to_string(&j).expect("strings serialise");
        s.push('\n');
        s
    }

    /// The string a signature signs (see the module documentation).
    pub fn fingerprint(&self) -> String {
        format!(
            "rocmx-realisation-1;{}!{};{}",
            self.drv_hash,
            self.output,
            self.out_path.to_absolute()
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

    /// Every distinct trusted key whose signature over it is among `signatures` (its
    /// own, or the union of several copies of the same record: the fingerprint is the
    /// same for every copy that names the same `out_path`).
    pub fn signers<'a>(&self, keys: &'a TrustedKeys, signatures: &[String]) -> Vec<&'a PublicKey> {
        keys.signers(&self.fingerprint(), signatures)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: &str = "5f8a2b0c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8";

    #[test]
    fn literal_form_and_fingerprint() {
        let text = format!(
            "{{\"id\":\"{H}!out\",\"outPath\":\"0c8hkw6x4qd3k1n3p4sp4bbfj7b3wkyq-hello\",\"signatures\":[]}}\n"
        );
        let r = Realisation::parse(&text).unwrap();
        assert_eq!(r.to_text(), text);
        assert_eq!(
            r.fingerprint(),
            format!(
                "rocmx-realisation-1;{H}!out;/rocmx/store/0c8hkw6x4qd3k1n3p4sp4bbfj7b3wkyq-hello"
            )
        );
        assert_eq!(Realisation::file_name(H, "out"), format!("{H}!out.json"));
        // Nix's extra field is ignored.
        let nixish = text.replace(
            "\"signatures\":[]",
            "\"signatures\":[],\"dependentRealisations\":{}",
        );
        assert_eq!(Realisation::parse(&nixish).unwrap(), r);
    }

    #[test]
    fn signed_by_a_trusted_key_only() {
        let k = SecretKey::generate("k-1").unwrap();
        let other = SecretKey::generate("k-1").unwrap();
        let trusted = TrustedKeys::parse(&k.public().to_string()).unwrap();
        let mut r = Realisation {
            drv_hash: H.into(),
            output: "out".into(),
            out_path: "/rocmx/store/0c8hkw6x4qd3k1n3p4sp4bbfj7b3wkyq-hello"
                .parse()
                .unwrap(),
            signatures: vec![],
        };
        r.sign(&other);
        assert_eq!(r.trusted_by(&trusted), None);
        r.sign(&k);
        assert_eq!(
            Realisation::parse(&r.to_text())
                .unwrap()
                .trusted_by(&trusted),
            Some("k-1")
        );
        let mut moved = r.clone();
        moved.out_path = "/rocmx/store/1c8hkw6x4qd3k1n3p4sp4bbfj7b3wkyq-hello"
            .parse()
            .unwrap();
        assert_eq!(moved.trusted_by(&trusted), None);
    }

    #[test]
    fn bad_records_are_named() {
        for (text, needle) in [
            ("{", "not a realisation"),
            (
                "{\"id\":\"x!out\",\"outPath\":\"a\"}",
                "is not <drvhash>!<output>",
            ),
            (
                &*format!("{{\"id\":\"{H}!o/ut\",\"outPath\":\"a\"}}"),
                "is not <drvhash>!<output>",
            ),
            (
                &*format!("{{\"id\":\"{H}!out\",\"outPath\":\"../x\"}}"),
                "outPath '../x'",
            ),
        ] {
            let e = Realisation::parse(text).unwrap_err().to_string();
            assert!(e.contains(needle), "{text}: {e}");
        }
    }
}
