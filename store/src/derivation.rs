//! The derivation model: a pure build recipe, its paths and its JSON form.
//!
//! Owns: [`Derivation`] and [`DerivationOutput`], the `.drv` store path of a derivation
//! ([`Derivation::store_path`]: a `text` content address of its ATerm), fixed-output
//! paths, output path names, Nix's `builtins.placeholder` strings, and the JSON that
//! `nix derivation show` prints. The ATerm text form lives in [`aterm`].
//!
//! Must not: evaluate, resolve or build anything, or touch the filesystem.
//!
//! # Canonical serialisation
//!
//! A derivation's canonical form is its ATerm text, exactly as Nix writes `.drv` files
//! (no trailing newline):
//!
//! ```text
//! Derive([("out","","r:blake3","")],[("/rocmx/store/…-dep.drv",["out"])],
//!        ["/rocmx/store/…-src"],"x86_64-linux","/bin/sh",["-c","…"],[("name","hello")])
//! ```
//!
//! (one line in reality). Outputs, input derivations (and each one's output names), input
//! sources and environment keys are sorted and unique; strings escape `"` `\` and newline,
//! carriage return and tab as `\"` `\\` `\n` `\r` `\t` and nothing else, and hold no NUL
//! byte (no Nix string can). The parser accepts only this form, so `print(parse(t)) == t`
//! for every accepted `t`.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Map, Value};
use thiserror::Error;

use crate::hash::{Hash, HashAlgo, HashError};
use crate::path::{ContentAddress, IngestionMethod, StorePath, StorePathError};

pub mod aterm;
#[cfg(test)]
mod fuzz_tests;

/// How one output's path is determined. Textual forms, as the output tuple
/// `(name, path, hashAlgo, hash)` of the ATerm:
///
/// | variant    | tuple                                               |
/// |------------|-----------------------------------------------------|
/// | `Floating` | `("out","","r:blake3","")`                          |
/// | `Fixed`    | `("out","/rocmx/store/…-src","r:sha256","<hex>")`   |
///
/// `hashAlgo` is the method's prefix (`r:` for NAR, nothing for flat) and the algorithm.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum DerivationOutput {
    /// Content-addressed after the build: the path is known only once built.
    Floating {
        /// How the output is ingested (rocmx's own outputs use `Nar`).
        method: IngestionMethod,
        /// The hash algorithm named (rocmx's own outputs use `Blake3`).
        algo: HashAlgo,
    },
    /// Fixed-output: the hash is declared up front and fixes the path.
    Fixed {
        /// Flat file or NAR.
        method: IngestionMethod,
        /// The declared hash.
        hash: Hash,
        /// The output path, `StorePath::from_ca(name, Fixed { method, hash })`.
        path: StorePath,
    },
}

impl DerivationOutput {
    /// The fixed output of `name` with the given method and hash (path computed).
    pub fn fixed(name: &str, method: IngestionMethod, hash: Hash) -> Result<Self, StorePathError> {
        let path = fixed_output_path(name, method, hash)?;
        Ok(DerivationOutput::Fixed { method, hash, path })
    }

    /// The output path, when it is known before building.
    pub fn path(&self) -> Option<&StorePath> {
        match self {
            DerivationOutput::Floating { .. } => None,
            DerivationOutput::Fixed { path, .. } => Some(path),
        }
    }

    /// The ATerm/JSON `hashAlgo` field: method prefix and algorithm, e.g. `r:sha256`.
    pub fn hash_algo_field(&self) -> String {
        let (method, algo) = match self {
            DerivationOutput::Floating { method, algo } => (method, *algo),
            DerivationOutput::Fixed { method, hash, .. } => (method, hash.algo()),
        };
        format!("{}{}", method.nix_prefix(), algo)
    }
}

/// A derivation: outputs, inputs, and how to run the builder.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Derivation {
    /// Outputs by name (`out`, `dev`, …).
    pub outputs: BTreeMap<String, DerivationOutput>,
    /// Input derivations and which of their outputs are used.
    pub input_drvs: BTreeMap<StorePath, BTreeSet<String>>,
    /// Input store paths that are not derivation outputs (sources, `toFile` texts).
    pub input_srcs: BTreeSet<StorePath>,
    /// The platform, e.g. `x86_64-linux`.
    pub system: String,
    /// The program to run.
    pub builder: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Its environment.
    pub env: BTreeMap<String, String>,
}

/// Why ATerm text is not a canonical derivation, or a derivation is inconsistent.
/// Offsets are byte offsets into the text.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DerivationError {
    /// The text does not follow the grammar.
    #[error("derivation byte {offset}: expected {expected}")]
    Expected {
        /// Where.
        offset: usize,
        /// What the grammar requires there.
        expected: &'static str,
    },
    /// A string with an escape other than `\"` `\\` `\n` `\r` `\t`, or a raw newline,
    /// carriage return or tab (which canonical text escapes).
    #[error("derivation byte {offset}: non-canonical string character or escape")]
    BadString {
        /// Where.
        offset: usize,
    },
    /// A NUL byte in a string: no Nix string holds one (the evaluator refuses them), and
    /// none can reach a builder's arguments, environment or a thread name.
    #[error("derivation byte {offset}: NUL byte in a string (expected another character, or '\"' ending the string)")]
    NulByte {
        /// Where the NUL byte is.
        offset: usize,
    },
    /// A list that must be sorted is not.
    #[error("derivation byte {offset}: {what} {key:?} is out of order")]
    Unsorted {
        /// Where.
        offset: usize,
        /// Which list (`output`, `input derivation`, …).
        what: &'static str,
        /// The key out of order.
        key: String,
    },
    /// A key that must be unique appears twice.
    #[error("derivation byte {offset}: duplicate {what} {key:?}")]
    Duplicate {
        /// Where.
        offset: usize,
        /// Which list.
        what: &'static str,
        /// The key.
        key: String,
    },
    /// A store path field is not a store path.
    #[error("derivation byte {offset}: {source}")]
    StorePath {
        /// Where.
        offset: usize,
        /// Why.
        source: StorePathError,
    },
    /// An output's hash field is not a lowercase hex digest of its algorithm.
    #[error("derivation byte {offset}: bad output hash: {source}")]
    Hash {
        /// Where.
        offset: usize,
        /// Why.
        source: HashError,
    },
    /// An output's `hashAlgo` field is not `[r:]<algo>`.
    #[error("derivation byte {offset}: bad output hash algorithm {text:?}")]
    BadHashAlgo {
        /// Where.
        offset: usize,
        /// The field.
        text: String,
    },
    /// An output name that is empty, `drv`, or not a valid store path name.
    #[error("derivation byte {offset}: bad output name {name:?}")]
    BadOutputName {
        /// Where.
        offset: usize,
        /// The name.
        name: String,
    },
    /// An output form rocmx does not support (input-addressed or deferred outputs).
    #[error("derivation byte {offset}: output {output:?}: {reason}")]
    UnsupportedOutput {
        /// Where.
        offset: usize,
        /// The output name.
        output: String,
        /// Why.
        reason: &'static str,
    },
    /// Text after the closing parenthesis.
    #[error("derivation byte {offset}: trailing text")]
    TrailingText {
        /// Where.
        offset: usize,
    },
    /// A fixed output whose path does not match its name, method and hash.
    #[error("output {output:?} has path {found}, expected {expected}")]
    WrongOutputPath {
        /// The output name.
        output: String,
        /// The path computed.
        expected: StorePath,
        /// The path recorded.
        found: StorePath,
    },
    /// A derivation name that cannot name a store path.
    #[error("bad derivation name: {0}")]
    BadName(#[source] StorePathError),
}

impl Derivation {
    /// The canonical ATerm text (see the module documentation).
    pub fn to_aterm(&self) -> String {
        aterm::print(self)
    }

    /// Parses canonical ATerm text, strictly.
    pub fn parse(text: &str) -> Result<Derivation, DerivationError> {
        aterm::parse(text)
    }

    /// The `name` environment variable, if set.
    pub fn name(&self) -> Option<&str> {
        self.env.get("name").map(String::as_str)
    }

    /// The store paths the `.drv` file refers to: input sources and input derivations.
    pub fn references(&self) -> BTreeSet<StorePath> {
        self.input_srcs
            .iter()
            .chain(self.input_drvs.keys())
            .cloned()
            .collect()
    }

    /// The content address of the `.drv` file: `text`, BLAKE3 of the ATerm, references.
    pub fn content_address(&self) -> ContentAddress {
        ContentAddress::Text {
            hash: Hash::digest(HashAlgo::Blake3, self.to_aterm().as_bytes()),
            references: self.references(),
        }
    }

    /// The path of the `.drv` file for a derivation named `name` (without `.drv`):
    /// `StorePath::from_ca("<name>.drv", &self.content_address())`.
    pub fn store_path(&self, name: &str) -> Result<StorePath, StorePathError> {
        StorePath::from_ca(&format!("{name}.drv"), &self.content_address())
    }

    /// The path each output will have or stands for before building: the fixed path of a
    /// fixed output, [`StorePath::placeholder_for_output`] of a floating one. `drv_path` is
    /// this derivation's path and `name` its name (without `.drv`).
    pub fn output_paths(
        &self,
        drv_path: &StorePath,
        name: &str,
    ) -> Result<BTreeMap<String, StorePath>, StorePathError> {
        let mut out = BTreeMap::new();
        for (output, o) in &self.outputs {
            let path = match o {
                DerivationOutput::Fixed { path, .. } => path.clone(),
                DerivationOutput::Floating { .. } => StorePath::placeholder_for_output(
                    drv_path,
                    output,
                    &output_path_name(name, output),
                )?,
            };
            out.insert(output.clone(), path);
        }
        Ok(out)
    }

    /// Checks that every fixed output's path is the one its name, method and hash give,
    /// for a derivation named `name`.
    pub fn check_output_paths(&self, name: &str) -> Result<(), DerivationError> {
        for (output, o) in &self.outputs {
            if let DerivationOutput::Fixed { method, hash, path } = o {
                let expected = fixed_output_path(&output_path_name(name, output), *method, *hash)
                    .map_err(DerivationError::BadName)?;
                if &expected != path {
                    return Err(DerivationError::WrongOutputPath {
                        output: output.clone(),
                        expected,
                        found: path.clone(),
                    });
                }
            }
        }
        Ok(())
    }

    /// The JSON object `nix derivation show` prints for this derivation (the value under
    /// its `.drv` path key): `outputs`, `inputSrcs`, `inputDrvs`, `system`, `builder`,
    /// `args`, `env`. Outputs carry `path` when known and `hashAlgo`/`hash` as in the ATerm.
    pub fn to_json(&self) -> Value {
        let outputs: Map<String, Value> = self
            .outputs
            .iter()
            .map(|(name, o)| {
                let mut m = Map::new();
                if let Some(p) = o.path() {
                    m.insert("path".into(), json!(p.to_string()));
                }
                m.insert("hashAlgo".into(), json!(o.hash_algo_field()));
                if let DerivationOutput::Fixed { hash, .. } = o {
                    m.insert("hash".into(), json!(hash.to_hex()));
                }
                (name.clone(), Value::Object(m))
            })
            .collect();
        let input_drvs: Map<String, Value> = self
            .input_drvs
            .iter()
            .map(|(p, outs)| (p.to_string(), json!(outs)))
            .collect();
        json!({
            "outputs": outputs,
            "inputSrcs": self.input_srcs.iter().map(|p| p.to_string()).collect::<Vec<_>>(),
            "inputDrvs": input_drvs,
            "system": self.system,
            "builder": self.builder,
            "args": self.args,
            "env": self.env,
        })
    }
}

/// The name of output `output`'s path for a derivation named `drv_name`: the name itself
/// for `out`, `<name>-<output>` otherwise (as Nix's `outputPathName`).
pub fn output_path_name(drv_name: &str, output: &str) -> String {
    if output == "out" {
        drv_name.to_string()
    } else {
        format!("{drv_name}-{output}")
    }
}

/// The path of a fixed output named `name`: `StorePath::from_ca(name, Fixed { method, hash })`.
pub fn fixed_output_path(
    name: &str,
    method: IngestionMethod,
    hash: Hash,
) -> Result<StorePath, StorePathError> {
    StorePath::from_ca(name, &ContentAddress::Fixed { method, hash })
}

/// Nix's `builtins.placeholder output`: `/` followed by the nix32 SHA-256 of
/// `nix-output:<output>`, e.g. `/1rz4g4znpzjwh1xymhjpm42vipw92pr73vdgl6xs1hycac8kf2n9` for
/// `out`. The builder replaces it by the real output path.
pub fn hash_placeholder(output: &str) -> String {
    // Nearly every output is `out`: its placeholder is computed once (SHA-256 in
    // software, on machines without SHA extensions, was 3 % of evaluating 3,000
    // derivations).
    static OUT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    if output == "out" {
        return OUT.get_or_init(|| compute_placeholder("out")).clone();
    }
    compute_placeholder(output)
}

fn compute_placeholder(output: &str) -> String {
    let h = Hash::digest(HashAlgo::Sha256, format!("nix-output:{output}").as_bytes());
    format!("/{}", h.to_nix32())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sp(s: &str) -> StorePath {
        StorePath::from_absolute(s).expect("test path")
    }

    fn sample() -> Derivation {
        let sha = Hash::digest(HashAlgo::Sha256, b"");
        let mut d = Derivation {
            system: "x86_64-linux".into(),
            builder: "/bin/sh".into(),
            args: vec!["-c".into(), "echo \"hi\" > $out".into()],
            ..Derivation::default()
        };
        d.outputs.insert(
            "out".into(),
            DerivationOutput::Floating {
                method: IngestionMethod::Nar,
                algo: HashAlgo::Blake3,
            },
        );
        d.outputs.insert(
            "src".into(),
            DerivationOutput::fixed("hello-src", IngestionMethod::Nar, sha).expect("fixed"),
        );
        d.input_drvs.insert(
            sp("/rocmx/store/0kc0ghh0z5xkyadhz1fl5x2qqnbl0nsx-flat.drv"),
            ["out".to_string()].into_iter().collect(),
        );
        d.input_srcs
            .insert(sp("/rocmx/store/x3lq4ksyzpc9bla2r5qfrsbnpdbrba90-src.sh"));
        d.env.insert("name".into(), "hello".into());
        d
    }

    #[test]
    fn placeholders_match_nix() {
        assert_eq!(
            hash_placeholder("out"),
            "/1rz4g4znpzjwh1xymhjpm42vipw92pr73vdgl6xs1hycac8kf2n9"
        );
        assert_eq!(
            hash_placeholder("dev"),
            "/02qcpld1y6xhs5gz9bchpxaw0xdhmsp5dv88lh25r2ss44kh8dxz"
        );
        assert_eq!(output_path_name("hello", "out"), "hello");
        assert_eq!(output_path_name("hello", "dev"), "hello-dev");
    }

    #[test]
    fn drv_path_is_text_of_aterm() {
        let d = sample();
        let p = d.store_path("hello").expect("path");
        assert_eq!(p.name(), "hello.drv");
        let expected = StorePath::from_ca(
            "hello.drv",
            &ContentAddress::Text {
                hash: Hash::digest(HashAlgo::Blake3, d.to_aterm().as_bytes()),
                references: d.references(),
            },
        )
        .expect("path");
        assert_eq!(p, expected);
        assert_eq!(d.references().len(), 2);
        assert_eq!(d.check_output_paths("hello"), Ok(()));
        let outs = d.output_paths(&p, "hello").expect("outputs");
        assert_eq!(
            outs["out"],
            StorePath::placeholder_for_output(&p, "out", "hello").expect("placeholder")
        );
        assert_eq!(outs["src"].name(), "hello-src");
        // Changing anything changes the path.
        let mut e = d.clone();
        e.env.insert("x".into(), "y".into());
        assert_ne!(e.store_path("hello").expect("path"), p);
        // A wrong fixed path is caught.
        let mut bad = d;
        if let Some(DerivationOutput::Fixed { path, .. }) = bad.outputs.get_mut("src") {
            *path = sp("/rocmx/store/0kc0ghh0z5xkyadhz1fl5x2qqnbl0nsx-hello-src");
        }
        assert!(matches!(
            bad.check_output_paths("hello"),
            Err(DerivationError::WrongOutputPath { .. })
        ));
    }

    #[test]
    fn json_like_nix_derivation_show() {
        let d = sample();
        let src = d.outputs["src"].path().expect("fixed path").to_string();
        let expected = json!({
            "outputs": {
                "out": { "hashAlgo": "r:blake3" },
                "src": {
                    "path": src,
                    "hashAlgo": "r:sha256",
                    "hash": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
                }
            },
            "inputSrcs": ["/rocmx/store/x3lq4ksyzpc9bla2r5qfrsbnpdbrba90-src.sh"],
            "inputDrvs": { "/rocmx/store/0kc0ghh0z5xkyadhz1fl5x2qqnbl0nsx-flat.drv": ["out"] },
            "system": "x86_64-linux",
            "builder": "/bin/sh",
            "args": ["-c", "echo \"hi\" > $out"],
            "env": { "name": "hello" }
        });
        assert_eq!(d.to_json(), expected);
    }
}
