//! Structured attributes (`__structuredAttrs = true`) and `exportReferencesGraph`: the
//! files a build finds in its build directory before it starts, and the environment the
//! builder gets with them.
//!
//! Owns: [`prepare`] (what to write and the builder's environment, from the derivation
//! as it is run), [`Prepared::write`] (the files, mode 0644, so that a builder running
//! under another uid can read them), and the formats below ([`attrs_shell`],
//! [`attrs_json`], [`registration`], [`graph_json`]).
//!
//! Must not: run or schedule builds, write anywhere but the build directory it is
//! given, or change the store (it only reads path metadata).
//!
//! The derivation given is the one the sandbox runs: resolved (input placeholders are
//! realised paths) and with each output's hash placeholder replaced by the path the
//! output is built at (its scratch path, or its final path for a fixed output). `__json`
//! is an environment value, so the JSON has had the same substitutions.
//!
//! # Structured attributes
//!
//! A derivation is structured when its environment has `__json` (evaluation's JSON of
//! its attributes). Its builder then sees none of the derivation's variables (not even
//! `out`), only the sandbox's fixed ones and
//!
//! ```text
//! NIX_ATTRS_JSON_FILE=/build/.attrs.json
//! NIX_ATTRS_SH_FILE=/build/.attrs.sh
//! ```
//!
//! `.attrs.json` is the `__json` object, compact, keys sorted, with `outputs` replaced
//! by an object mapping each output name to its path in the sandbox, and, if
//! `exportReferencesGraph` is an object, each of its keys `k` set (at the top level) to
//! the graph of `exportReferencesGraph.k` (a store path or a list of them):
//!
//! ```text
//! [{"closureSize":N,"narHash":"blake3:<nix32>","narSize":N,"path":P,"references":[…],"valid":true}, …]
//! ```
//!
//! one object per path of the closure, sorted by path (`"ca"` too when the path has a
//! content address). Nix writes the same keys; its `narHash` is `sha256:`, rocmx's NAR
//! hashes are BLAKE3.
//!
//! `.attrs.sh` has one line per top-level key matching `[A-Za-z_][A-Za-z0-9_]*`, in key
//! order, and nothing for other keys:
//!
//! ```text
//! declare K=V                      a simple value
//! declare -a K=(V1 V2 )            a list of simple values (each followed by a space)
//! declare -A K=(['k1']=V1 ['k2']=V2 )  an object of simple values
//! ```
//!
//! A simple value is a string, written `'…'` with each `'` as `'\''`; `null`, written
//! `''`; `true` → `1`, `false` → nothing; an integral number, in decimal. Anything else
//! (a non-integral number, a nested list or object) leaves its key out. Nix's rules are
//! the same, except that it truncates integers to 32 bits and decides integrality in
//! single precision.
//!
//! # `exportReferencesGraph` without structured attributes
//!
//! The variable's words are pairs `NAME PATH …`; `NAME` must match
//! `[A-Za-z_][A-Za-z0-9_.-]*` and `PATH` be a store path (a path inside one counts as the
//! store path). The file `/build/NAME` lists every path `P` of the closure, sorted:
//!
//! ```text
//! P\n\n<number of references>\n<each reference, sorted>\n
//! ```
//!
//! (the format of `nix-store --register-validity` without deriver and hash, as Nix
//! writes it).
//!
//! # Closures
//!
//! Each path named must be among the build's inputs (the closure of its resolved input
//! sources); its closure is then exported. A `.drv` in a closure brings the closures of
//! its registered outputs, as in Nix.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use rocmx_store::{Derivation, Encoding, LocalStore, StoreError, StorePath};
use serde_json::{Map, Value};

/// The build directory as the builder sees it.
pub const SANDBOX_BUILD_DIR: &str = "/build";
/// The JSON file of structured attributes, in the build directory.
pub const ATTRS_JSON: &str = ".attrs.json";
/// The shell file of structured attributes, in the build directory.
pub const ATTRS_SH: &str = ".attrs.sh";

/// Why the attribute files cannot be prepared. The realiser names the derivation.
#[derive(Debug, thiserror::Error)]
pub enum StructuredError {
    /// `__json` is not a JSON object.
    #[error("cannot process __json attribute: {0}")]
    BadJson(String),
    /// An odd number of words in `exportReferencesGraph`.
    #[error("odd number of tokens in 'exportReferencesGraph': '{0}'")]
    OddTokens(String),
    /// A file name that is not `[A-Za-z_][A-Za-z0-9_.-]*`.
    #[error("invalid file name '{0}' in 'exportReferencesGraph'")]
    BadFileName(String),
    /// Something that is not a store path where one is needed.
    #[error("'exportReferencesGraph' contains a non-store path '{0}'")]
    NotStorePath(String),
    /// A structured `exportReferencesGraph` entry that is neither a string nor a list
    /// of strings.
    #[error("'exportReferencesGraph.{0}' must be a store path or a list of store paths")]
    BadEntry(String),
    /// A path that is not among the build's inputs.
    #[error(
        "cannot export references of path '{0}' because it is not in the input closure of the derivation"
    )]
    NotInput(String),
    /// A path of a closure that is not valid (deleted meanwhile).
    #[error("path '{0}' of an exported closure is not valid")]
    NotValid(String),
    /// Reading path metadata.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Writing a file into the build directory.
    #[error("writing {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The failure.
        source: io::Error,
    },
}

/// The metadata of one exported path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathMeta {
    /// The path.
    pub path: StorePath,
    /// Its NAR hash, typed (`blake3:<nix32>`).
    pub nar_hash: String,
    /// Its NAR size.
    pub nar_size: u64,
    /// Its references, sorted.
    pub references: BTreeSet<StorePath>,
    /// Its content address, if any.
    pub ca: Option<String>,
    /// The sum of the NAR sizes of its closure.
    pub closure_size: u64,
}

/// Where exported graphs come from: the store, or a fake in tests.
pub trait PathSource {
    /// The metadata of every path in the closure of `roots`, `.drv` outputs included,
    /// sorted by path.
    fn export(&self, roots: &BTreeSet<StorePath>) -> Result<Vec<PathMeta>, StructuredError>;
}

impl PathSource for LocalStore {
    fn export(&self, roots: &BTreeSet<StorePath>) -> Result<Vec<PathMeta>, StructuredError> {
        let roots: Vec<StorePath> = roots.iter().cloned().collect();
        let mut paths = self.closure(&roots)?;
        let drvs: Vec<StorePath> = paths
            .iter()
            .filter(|p| p.is_derivation())
            .cloned()
            .collect();
        for d in drvs {
            let outs: Vec<StorePath> = self
                .derivation_outputs(&d)?
                .into_values()
                .filter(|o| matches!(self.is_valid(o), Ok(true)))
                .collect();
            paths.extend(self.closure(&outs)?);
        }
        let mut metas = Vec::with_capacity(paths.len());
        for p in paths {
            let info = self
                .path_info(&p)?
                .ok_or_else(|| StructuredError::NotValid(p.to_absolute()))?;
            let closure_size = self
                .closure(std::slice::from_ref(&p))?
                .iter()
                .map(|q| self.path_info(q).ok().flatten().map_or(0, |i| i.nar_size))
                .sum();
            metas.push(PathMeta {
                path: p,
                nar_hash: info.nar_hash.to_typed(Encoding::Nix32),
                nar_size: info.nar_size,
                references: info.references,
                ca: info.ca,
                closure_size,
            });
        }
        Ok(metas)
    }
}

/// What [`prepare`] decided: the builder's environment and the files to write.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Prepared {
    /// The derivation's environment, or, with structured attributes, only the two
    /// `NIX_ATTRS_*` variables.
    pub env: BTreeMap<String, String>,
    /// File name in the build directory → contents.
    pub files: BTreeMap<String, Vec<u8>>,
}

impl Prepared {
    /// Writes the files into `build_dir` (which must not hold them yet), mode 0644.
    pub fn write(&self, build_dir: &Path) -> Result<(), StructuredError> {
        for (name, contents) in &self.files {
            let path = build_dir.join(name);
            let io_err = |source| StructuredError::Io {
                path: path.clone(),
                source,
            };
            let mut f = fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o644)
                .open(&path)
                .map_err(io_err)?;
            f.write_all(contents).map_err(io_err)?;
            // The umask may have taken bits away.
            f.set_permissions(fs::Permissions::from_mode(0o644))
                .map_err(io_err)?;
        }
        Ok(())
    }
}

/// Whether a build of `d` reads what the store has registered about its inputs: it
/// exports a references graph (the variable, or a key of structured attributes; the
/// test on `__json` may say yes for a string that merely names the key). Such a build
/// starts only once its inputs are registered, not merely at their final names.
pub fn exports_references(d: &Derivation) -> bool {
    d.env.contains_key("exportReferencesGraph")
        || d.env
            .get("__json")
            .is_some_and(|j| j.contains("\"exportReferencesGraph\""))
}

/// The builder's environment and the files for `drv` (the derivation as run, see the
/// module documentation), whose outputs are at `outputs` inside the sandbox and whose
/// inputs are `inputs`.
pub fn prepare(
    drv: &Derivation,
    outputs: &BTreeMap<String, StorePath>,
    inputs: &BTreeSet<StorePath>,
    source: &dyn PathSource,
) -> Result<Prepared, StructuredError> {
    let export = |paths: BTreeSet<StorePath>| -> Result<Vec<PathMeta>, StructuredError> {
        if let Some(p) = paths.iter().find(|p| !inputs.contains(p)) {
            return Err(StructuredError::NotInput(p.to_absolute()));
        }
        source.export(&paths)
    };
    let Some(json) = drv.env.get("__json") else {
        let mut files = BTreeMap::new();
        if let Some(spec) = drv.env.get("exportReferencesGraph") {
            for (name, path) in graph_pairs(spec)? {
                let metas = export([path].into_iter().collect())?;
                files.insert(name, registration(&metas).into_bytes());
            }
        }
        return Ok(Prepared {
            env: drv.env.clone(),
            files,
        });
    };
    let attrs: Map<String, Value> = match serde_json::from_str(json) {
        Ok(Value::Object(m)) => m,
        Ok(_) => return Err(StructuredError::BadJson("not a JSON object".into())),
        Err(e) => return Err(StructuredError::BadJson(e.to_string())),
    };
    let mut graphs = BTreeMap::new();
    if let Some(Value::Object(spec)) = attrs.get("exportReferencesGraph") {
        for (k, v) in spec {
            let strings: Vec<&str> = match v {
                Value::String(s) => vec![s.as_str()],
                Value::Array(items) => items
                    .iter()
                    .map(|x| {
                        x.as_str()
                            .ok_or_else(|| StructuredError::BadEntry(k.clone()))
                    })
                    .collect::<Result<_, _>>()?,
                _ => return Err(StructuredError::BadEntry(k.clone())),
            };
            let paths = strings
                .into_iter()
                .map(store_path_of)
                .collect::<Result<BTreeSet<_>, _>>()?;
            graphs.insert(k.clone(), export(paths)?);
        }
    }
    let full = attrs_json(attrs, outputs, &graphs);
    let env = [
        ("NIX_ATTRS_JSON_FILE", ATTRS_JSON),
        ("NIX_ATTRS_SH_FILE", ATTRS_SH),
    ]
    .into_iter()
    .map(|(k, f)| (k.to_string(), format!("{SANDBOX_BUILD_DIR}/{f}")))
    .collect();
    let files = [
        (
            ATTRS_JSON.to_string(),
            Value::Object(full.clone()).to_string().into_bytes(),
        ),
        (ATTRS_SH.to_string(), attrs_shell(&full).into_bytes()),
    ]
    .into_iter()
    .collect();
    Ok(Prepared { env, files })
}

/// A string attribute of `drv` as the builder knows it: from `__json` when structured
/// (only if it is a JSON string there), else from the environment.
pub fn string_attr(drv: &Derivation, name: &str) -> Option<String> {
    match drv.env.get("__json") {
        None => drv.env.get(name).cloned(),
        Some(json) => match serde_json::from_str::<Value>(json).ok()?.get(name)? {
            Value::String(s) => Some(s.clone()),
            _ => None,
        },
    }
}

/// The complete `.attrs.json` object: `attrs` with `outputs` and the exported graphs.
pub fn attrs_json(
    mut attrs: Map<String, Value>,
    outputs: &BTreeMap<String, StorePath>,
    graphs: &BTreeMap<String, Vec<PathMeta>>,
) -> Map<String, Value> {
    let outs = outputs
        .iter()
        .map(|(o, p)| (o.clone(), Value::String(p.to_absolute())))
        .collect();
    attrs.insert("outputs".into(), Value::Object(outs));
    for (k, metas) in graphs {
        attrs.insert(k.clone(), graph_json(metas));
    }
    attrs
}

/// The structured form of an exported graph (see the module documentation).
pub fn graph_json(metas: &[PathMeta]) -> Value {
    let list = metas
        .iter()
        .map(|m| {
            let mut o = Map::new();
            o.insert("closureSize".into(), m.closure_size.into());
            o.insert("narHash".into(), m.nar_hash.clone().into());
            o.insert("narSize".into(), m.nar_size.into());
            o.insert("path".into(), m.path.to_absolute().into());
            let refs = m
                .references
                .iter()
                .map(|r| r.to_absolute().into())
                .collect();
            o.insert("references".into(), Value::Array(refs));
            o.insert("valid".into(), true.into());
            if let Some(ca) = &m.ca {
                o.insert("ca".into(), ca.clone().into());
            }
            Value::Object(o)
        })
        .collect();
    Value::Array(list)
}

/// The unstructured form of an exported graph (see the module documentation).
pub fn registration(metas: &[PathMeta]) -> String {
    let mut s = String::new();
    for m in metas {
        s.push_str(&m.path.to_absolute());
        s.push_str("\n\n");
        s.push_str(&format!("{}\n", m.references.len()));
        for r in &m.references {
            s.push_str(&r.to_absolute());
            s.push('\n');
        }
    }
    s
}

/// The `.attrs.sh` text for `attrs` (see the module documentation).
pub fn attrs_shell(attrs: &Map<String, Value>) -> String {
    let mut keys: Vec<&String> = attrs.keys().collect();
    keys.sort();
    let mut out = String::new();
    for key in keys {
        if !is_shell_name(key) {
            continue;
        }
        let value = &attrs[key.as_str()];
        if let Some(s) = shell_simple(value) {
            out.push_str(&format!("declare {key}={s}\n"));
            continue;
        }
        match value {
            Value::Array(items) => {
                let words: Option<Vec<String>> = items.iter().map(shell_simple).collect();
                if let Some(words) = words {
                    let body: String = words.iter().map(|w| format!("{w} ")).collect();
                    out.push_str(&format!("declare -a {key}=({body})\n"));
                }
            }
            Value::Object(m) => {
                let mut entries: Vec<(&String, &Value)> = m.iter().collect();
                entries.sort_by(|a, b| a.0.cmp(b.0));
                let words: Option<Vec<String>> = entries
                    .iter()
                    .map(|(k, v)| shell_simple(v).map(|s| format!("[{}]={s} ", shell_quote(k))))
                    .collect();
                if let Some(words) = words {
                    out.push_str(&format!("declare -A {key}=({})\n", words.concat()));
                }
            }
            _ => {}
        }
    }
    out
}

/// A simple JSON value in shell syntax, or `None` if it is not simple.
fn shell_simple(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(shell_quote(s)),
        Value::Null => Some("''".into()),
        Value::Bool(b) => Some(if *b { "1" } else { "" }.into()),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Some(i.to_string())
            } else if let Some(u) = n.as_u64() {
                Some(u.to_string())
            } else {
                let f = n.as_f64()?;
                // Integral and within i64: its digits; anything else is not simple.
                (f.is_finite() && f.fract() == 0.0 && f.abs() < 9.2e18)
                    .then(|| (f as i64).to_string())
            }
        }
        Value::Array(_) | Value::Object(_) => None,
    }
}

/// `s` single-quoted for the shell.
fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// `[A-Za-z_][A-Za-z0-9_]*`.
fn is_shell_name(s: &str) -> bool {
    let mut b = s.bytes();
    matches!(b.next(), Some(c) if c.is_ascii_alphabetic() || c == b'_')
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

/// `[A-Za-z_][A-Za-z0-9_.-]*`.
fn is_graph_file_name(s: &str) -> bool {
    let mut b = s.bytes();
    matches!(b.next(), Some(c) if c.is_ascii_alphabetic() || c == b'_')
        && b.all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-'))
}

/// The store path that `s` is or is inside.
fn store_path_of(s: &str) -> Result<StorePath, StructuredError> {
    StorePath::from_absolute_with_subpath(s)
        .map(|(p, _)| p)
        .map_err(|_| StructuredError::NotStorePath(s.to_string()))
}

/// The `(file name, store path)` pairs of an unstructured `exportReferencesGraph`.
fn graph_pairs(spec: &str) -> Result<Vec<(String, StorePath)>, StructuredError> {
    let words: Vec<&str> = spec
        .split([' ', '\t', '\n', '\r'])
        .filter(|w| !w.is_empty())
        .collect();
    if !words.len().is_multiple_of(2) {
        return Err(StructuredError::OddTokens(spec.to_string()));
    }
    words
        .chunks(2)
        .map(|pair| {
            let [name, path] = pair else {
                return Err(StructuredError::OddTokens(spec.to_string()));
            };
            if !is_graph_file_name(name) {
                return Err(StructuredError::BadFileName(name.to_string()));
            }
            Ok((name.to_string(), store_path_of(path)?))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "/rocmx/store/0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a-a";
    const B: &str = "/rocmx/store/1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b-b";
    const OUT: &str = "/rocmx/store/2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c-x";
    const DEV: &str = "/rocmx/store/3d3d3d3d3d3d3d3d3d3d3d3d3d3d3d3d-x-dev";

    fn sp(s: &str) -> StorePath {
        StorePath::from_absolute(s).unwrap()
    }

    fn object(text: &str) -> Map<String, Value> {
        match serde_json::from_str(text).unwrap() {
            Value::Object(m) => m,
            _ => panic!("not an object"),
        }
    }

    #[test]
    fn a_build_exporting_references_is_known_by_its_attributes() {
        let with = |k: &str, v: &str| {
            let mut d = Derivation::default();
            d.env.insert(k.into(), v.into());
            d
        };
        assert!(exports_references(&with("exportReferencesGraph", "g /x")));
        assert!(exports_references(&with(
            "__json",
            r#"{"exportReferencesGraph":{"g":"/x"}}"#
        )));
        assert!(!exports_references(&with("__json", r#"{"name":"x"}"#)));
        assert!(!exports_references(&with("name", "exportReferencesGraph")));
    }

    /// `a` refers to `b`; `b` to nothing.
    struct Fake;
    impl PathSource for Fake {
        fn export(&self, roots: &BTreeSet<StorePath>) -> Result<Vec<PathMeta>, StructuredError> {
            let mut all = BTreeSet::new();
            for r in roots {
                all.insert(r.clone());
                if *r == sp(A) {
                    all.insert(sp(B));
                }
            }
            Ok(all.into_iter().map(|p| meta(&p)).collect())
        }
    }

    fn meta(p: &StorePath) -> PathMeta {
        let a = *p == sp(A);
        PathMeta {
            path: p.clone(),
            nar_hash: format!("blake3:{}", if a { "aaaa" } else { "bbbb" }),
            nar_size: if a { 100 } else { 20 },
            references: if a {
                [sp(B)].into_iter().collect()
            } else {
                BTreeSet::new()
            },
            ca: (!a).then(|| "source:blake3:cccc".to_string()),
            closure_size: if a { 120 } else { 20 },
        }
    }

    fn drv(env: &[(&str, &str)]) -> Derivation {
        Derivation {
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Derivation::default()
        }
    }

    fn outputs() -> BTreeMap<String, StorePath> {
        [("dev".to_string(), sp(DEV)), ("out".to_string(), sp(OUT))]
            .into_iter()
            .collect()
    }

    #[test]
    fn shell_declarations_follow_nix() {
        let attrs = object(
            r#"{"name":"x","gpuTargets":["gfx1100","gfx90a"],"doCheck":true,"dontStrip":false,
                "n":3,"neg":-7,"f":2.0,"half":1.5,"nothing":null,"quote":"it's",
                "env":{"B":"2","A":"1 1"},"nested":{"a":[1]},"mixed":["a",["b"]],
                "bad-name":"x","_ok1":"y","halfs":[1.5],"empty":[],"emptySet":{}}"#,
        );
        let expected = "\
declare _ok1='y'
declare doCheck=1
declare dontStrip=
declare -a empty=()
declare -A emptySet=()
declare -A env=(['A']='1 1' ['B']='2' )
declare f=2
declare -a gpuTargets=('gfx1100' 'gfx90a' )
declare n=3
declare name='x'
declare neg=-7
declare nothing=''
declare quote='it'\\''s'
";
        assert_eq!(attrs_shell(&attrs), expected);
    }

    #[test]
    fn structured_attributes_give_two_files_and_two_variables() {
        let json = format!(
            r#"{{"builder":"/bin/sh","gpuTargets":["gfx1100","gfx90a"],"outputs":["out","dev"],"dep":"{A}/lib"}}"#
        );
        let d = drv(&[("__json", &json), ("out", OUT), ("dev", DEV)]);
        let inputs = [sp(A), sp(B)].into_iter().collect();
        let p = prepare(&d, &outputs(), &inputs, &Fake).unwrap();
        let env: Vec<(&str, &str)> = p
            .env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(
            env,
            [
                ("NIX_ATTRS_JSON_FILE", "/build/.attrs.json"),
                ("NIX_ATTRS_SH_FILE", "/build/.attrs.sh")
            ]
        );
        let text = String::from_utf8(p.files[".attrs.json"].clone()).unwrap();
        assert_eq!(
            text,
            format!(
                r#"{{"builder":"/bin/sh","dep":"{A}/lib","gpuTargets":["gfx1100","gfx90a"],"outputs":{{"dev":"{DEV}","out":"{OUT}"}}}}"#
            )
        );
        let sh = String::from_utf8(p.files[".attrs.sh"].clone()).unwrap();
        assert_eq!(
            sh,
            format!(
                "declare builder='/bin/sh'\ndeclare dep='{A}/lib'\n\
                 declare -a gpuTargets=('gfx1100' 'gfx90a' )\n\
                 declare -A outputs=(['dev']='{DEV}' ['out']='{OUT}' )\n"
            )
        );
        assert_eq!(p.files.len(), 2);
    }

    #[test]
    fn structured_export_references_graph() {
        let json = format!(
            r#"{{"exportReferencesGraph":{{"closure":"{A}/bin/x","several":["{B}","{A}"]}},"outputs":["out"]}}"#
        );
        let d = drv(&[("__json", &json)]);
        let inputs = [sp(A), sp(B)].into_iter().collect();
        let p = prepare(&d, &outputs(), &inputs, &Fake).unwrap();
        let got: Value = serde_json::from_slice(&p.files[".attrs.json"]).unwrap();
        let a = format!(
            r#"{{"closureSize":120,"narHash":"blake3:aaaa","narSize":100,"path":"{A}","references":["{B}"],"valid":true}}"#
        );
        let b = format!(
            r#"{{"ca":"source:blake3:cccc","closureSize":20,"narHash":"blake3:bbbb","narSize":20,"path":"{B}","references":[],"valid":true}}"#
        );
        let want: Value = serde_json::from_str(&format!("[{a},{b}]")).unwrap();
        assert_eq!(got["closure"], want);
        assert_eq!(got["several"], want);
        // The graph is nested: not in .attrs.sh; the spec object is not simple either.
        let sh = String::from_utf8(p.files[".attrs.sh"].clone()).unwrap();
        assert!(
            !sh.contains("closure") && !sh.contains("exportReferencesGraph"),
            "{sh}"
        );

        // Only inputs may be exported.
        let only_b = [sp(B)].into_iter().collect();
        let e = prepare(&d, &outputs(), &only_b, &Fake).unwrap_err();
        assert!(
            matches!(e, StructuredError::NotInput(ref p) if p == A),
            "{e}"
        );
        let d = drv(&[("__json", r#"{"exportReferencesGraph":{"g":1}}"#)]);
        assert!(matches!(
            prepare(&d, &outputs(), &inputs, &Fake),
            Err(StructuredError::BadEntry(ref k)) if k == "g"
        ));
    }

    #[test]
    fn unstructured_export_references_graph() {
        let spec = format!("graph {A}\n  bgraph.txt {B}/share");
        let d = drv(&[("exportReferencesGraph", &spec), ("out", OUT)]);
        let inputs = [sp(A), sp(B)].into_iter().collect();
        let p = prepare(&d, &outputs(), &inputs, &Fake).unwrap();
        // The environment is the derivation's.
        assert_eq!(p.env, d.env);
        assert_eq!(
            String::from_utf8(p.files["graph"].clone()).unwrap(),
            format!("{A}\n\n1\n{B}\n{B}\n\n0\n")
        );
        assert_eq!(
            String::from_utf8(p.files["bgraph.txt"].clone()).unwrap(),
            format!("{B}\n\n0\n")
        );
        for (bad, want) in [
            (format!("graph {A} x"), "odd number of tokens"),
            (format!("1graph {A}"), "invalid file name '1graph'"),
            (format!("../g {A}"), "invalid file name '../g'"),
            ("g /tmp/x".to_string(), "non-store path '/tmp/x'"),
        ] {
            let d = drv(&[("exportReferencesGraph", &bad)]);
            let e = prepare(&d, &outputs(), &inputs, &Fake)
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{bad}: {e}");
        }
        // Without the variable, nothing to write.
        let p = prepare(&drv(&[("out", OUT)]), &outputs(), &inputs, &Fake).unwrap();
        assert!(p.files.is_empty());
    }

    #[test]
    fn bad_json_is_an_error_not_a_panic() {
        for bad in ["", "[1]", "{", "\"x\""] {
            let e = prepare(
                &drv(&[("__json", bad)]),
                &outputs(),
                &BTreeSet::new(),
                &Fake,
            )
            .unwrap_err();
            assert!(
                e.to_string().starts_with("cannot process __json attribute"),
                "{e}"
            );
        }
    }

    #[test]
    fn files_are_written_readable_by_others() {
        let dir = tempfile::tempdir().unwrap();
        let p = Prepared {
            env: BTreeMap::new(),
            files: [(".attrs.sh".to_string(), b"declare x='1'\n".to_vec())]
                .into_iter()
                .collect(),
        };
        p.write(dir.path()).unwrap();
        let m = fs::metadata(dir.path().join(".attrs.sh")).unwrap();
        assert_eq!(m.permissions().mode() & 0o777, 0o644);
        assert_eq!(
            fs::read(dir.path().join(".attrs.sh")).unwrap(),
            b"declare x='1'\n"
        );
        // A second write refuses to overwrite (or follow) what is there.
        assert!(p.write(dir.path()).is_err());
    }

    #[test]
    fn string_attributes_come_from_the_json_when_structured() {
        let d = drv(&[("__json", r#"{"rootfs":"/r","n":1}"#), ("rootfs", "/env")]);
        assert_eq!(string_attr(&d, "rootfs").as_deref(), Some("/r"));
        assert_eq!(string_attr(&d, "n"), None);
        let d = drv(&[("rootfs", "/env")]);
        assert_eq!(string_attr(&d, "rootfs").as_deref(), Some("/env"));
    }
}
