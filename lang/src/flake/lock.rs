//! `flake.lock`: the format.
//!
//! JSON with sorted keys, two-space indentation and a final newline, so that
//! locking an unchanged flake gives a byte-identical file. The layout is Nix's
//! (version 7), so the file reads the same to someone coming from Nix:
//!
//! ```json
//! {
//!   "nodes": {
//!     "lib": {
//!       "flake": false,
//!       "locked": {
//!         "narHash": "sha256-…",
//!         "path": "./lib",
//!         "type": "path"
//!       },
//!       "original": {
//!         "path": "./lib",
//!         "type": "path"
//!       }
//!     },
//!     "root": {
//!       "inputs": {
//!         "lib": "lib"
//!       }
//!     }
//!   },
//!   "root": "root",
//!   "version": 7
//! }
//! ```
//!
//! Each node but the root records an input: `original` (the reference as
//! written in `flake.nix`), `locked` (its type, URL or path, `rev` where there
//! is one, `lastModified` for commits, and `narHash`: SHA-256 of the tree's
//! NAR, which rocmx checks on every fetch), `flake: false` for inputs that are
//! plain trees, and `inputs` (the node's own inputs: a node name, or a
//! `follows` path given as a list of input names from the root). `dir` (the
//! subdirectory holding `flake.nix`) appears in both references when set.
//!
//! This module parses and renders; it does not decide what to lock.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value as Json};

use super::source::{FlakeRef, Source};

/// The lock file version written (Nix's current one).
pub const VERSION: u64 = 7;

/// A parsed `flake.lock`.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct LockFile {
    /// Nodes by name; the root node is named [`LockFile::root`].
    pub nodes: BTreeMap<String, Node>,
    pub root: String,
}

/// One node: the root flake, or a locked input.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Node {
    /// The node's inputs.
    pub inputs: BTreeMap<String, Edge>,
    /// For inputs: the reference as written.
    pub original: Option<FlakeRef>,
    /// For inputs: what it was locked to.
    pub locked: Option<Locked>,
    /// `false` for an input declared `flake = false`.
    pub flake: bool,
}

/// Where an input of a node points.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Edge {
    /// Another node, by name.
    Node(String),
    /// `follows`: a path of input names from the root node.
    Follows(Vec<String>),
}

/// A locked input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Locked {
    /// The source with its revision, where it has one.
    pub source: Source,
    /// The subdirectory holding `flake.nix`.
    pub dir: String,
    /// SRI SHA-256 of the tree's NAR (`sha256-…`).
    pub nar_hash: String,
    /// The commit's time, for git and GitHub sources.
    pub last_modified: Option<u64>,
}

/// What is wrong with a lock file; the message names the node.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{0}")]
pub struct LockError(pub String);

fn bad(m: impl Into<String>) -> LockError {
    LockError(m.into())
}

impl LockFile {
    /// A lock with only a root node.
    pub fn empty() -> LockFile {
        let mut nodes = BTreeMap::new();
        nodes.insert(
            "root".to_string(),
            Node {
                flake: true,
                ..Node::default()
            },
        );
        LockFile {
            nodes,
            root: "root".into(),
        }
    }

    /// The root node.
    pub fn root_node(&self) -> &Node {
        &self.nodes[&self.root]
    }

    /// Follows an edge to a node name (`follows` paths walked from the root).
    pub fn resolve(&self, edge: &Edge) -> Result<String, LockError> {
        self.resolve_depth(edge, 0)
    }

    fn resolve_depth(&self, edge: &Edge, depth: usize) -> Result<String, LockError> {
        match edge {
            Edge::Node(n) => Ok(n.clone()),
            Edge::Follows(path) => {
                // Follows paths may lead through other follows; a cycle (or an
                // absurdly long chain) is an error, not a stack overflow.
                if depth > 64 {
                    return Err(bad(format!(
                        "follows path '{}' does not end (a cycle of follows)",
                        path.join("/")
                    )));
                }
                let mut cur = self.root.clone();
                for name in path {
                    let node = self.nodes.get(&cur).ok_or_else(|| {
                        bad(format!(
                            "follows path '{}' leads to a missing node",
                            path.join("/")
                        ))
                    })?;
                    let e = node.inputs.get(name).ok_or_else(|| {
                        bad(format!(
                            "follows path '{}' names no input '{name}'",
                            path.join("/")
                        ))
                    })?;
                    cur = self.resolve_depth(e, depth + 1)?;
                }
                Ok(cur)
            }
        }
    }

    /// Parses the text of a `flake.lock`. Every node an edge names must exist.
    pub fn parse(text: &str) -> Result<LockFile, LockError> {
        let j: Json = serde_json::from_str(text)
            .map_err(|e| bad(format!("flake.lock is not valid JSON: {e}")))?;
        let obj = j
            .as_object()
            .ok_or_else(|| bad("flake.lock is not a JSON object"))?;
        match obj.get("version").and_then(Json::as_u64) {
            Some(5..=7) => {}
            Some(v) => {
                return Err(bad(format!(
                    "flake.lock has version {v}; rocmx reads versions 5 to 7"
                )))
            }
            None => return Err(bad("flake.lock has no 'version'")),
        }
        let root = obj
            .get("root")
            .and_then(Json::as_str)
            .ok_or_else(|| bad("flake.lock has no 'root'"))?
            .to_string();
        let nodes_j = obj
            .get("nodes")
            .and_then(Json::as_object)
            .ok_or_else(|| bad("flake.lock has no 'nodes' object"))?;
        let mut nodes = BTreeMap::new();
        for (name, n) in nodes_j {
            nodes.insert(name.clone(), parse_node(name, n)?);
        }
        if !nodes.contains_key(&root) {
            return Err(bad(format!(
                "flake.lock's root node '{root}' does not exist"
            )));
        }
        for (name, n) in &nodes {
            if name != &root && (n.original.is_none() || n.locked.is_none()) {
                return Err(bad(format!(
                    "flake.lock: node '{name}' lacks 'original' or 'locked'"
                )));
            }
            for (input, e) in &n.inputs {
                if let Edge::Node(t) = e {
                    if !nodes.contains_key(t) {
                        return Err(bad(format!(
                            "flake.lock: input '{input}' of node '{name}' names a missing node '{t}'"
                        )));
                    }
                }
            }
        }
        let lock = LockFile { nodes, root };
        for n in lock.nodes.values() {
            for e in n.inputs.values() {
                lock.resolve(e)?;
            }
        }
        Ok(lock)
    }

    /// The canonical text: sorted keys, two-space indentation, final newline.
    pub fn render(&self) -> String {
        let mut nodes = Map::new();
        for (name, n) in &self.nodes {
            nodes.insert(name.clone(), render_node(n));
        }
        let mut top = Map::new();
        top.insert("nodes".into(), Json::Object(nodes));
        top.insert("root".into(), json!(self.root));
        top.insert("version".into(), json!(VERSION));
        let mut s = serde_json::to_string_pretty(&sort(Json::Object(top))).unwrap_or_default();
        s.push('\n');
        s
    }
}

/// Rebuilds objects with their keys inserted in order, so the output is sorted
/// whether or not serde_json keeps insertion order.
fn sort(v: Json) -> Json {
    match v {
        Json::Object(m) => {
            let sorted: BTreeMap<String, Json> = m.into_iter().map(|(k, v)| (k, sort(v))).collect();
            Json::Object(sorted.into_iter().collect())
        }
        Json::Array(a) => Json::Array(a.into_iter().map(sort).collect()),
        v => v,
    }
}

fn ref_attrs(source: &Source, dir: &str) -> Map<String, Json> {
    let mut m = Map::new();
    for (k, v) in source.to_attrs() {
        m.insert(k.to_string(), json!(v));
    }
    if !dir.is_empty() {
        m.insert("dir".into(), json!(dir));
    }
    m
}

fn render_node(n: &Node) -> Json {
    let mut m = Map::new();
    if !n.inputs.is_empty() {
        let mut inputs = Map::new();
        for (k, e) in &n.inputs {
            inputs.insert(
                k.clone(),
                match e {
                    Edge::Node(t) => json!(t),
                    Edge::Follows(p) => json!(p),
                },
            );
        }
        m.insert("inputs".into(), Json::Object(inputs));
    }
    if let Some(o) = &n.original {
        let mut a = ref_attrs(&o.source, &o.dir);
        if let Some(h) = &o.nar_hash {
            a.insert("narHash".into(), json!(h));
        }
        m.insert("original".into(), Json::Object(a));
    }
    if let Some(l) = &n.locked {
        let mut a = ref_attrs(&l.source, &l.dir);
        a.insert("narHash".into(), json!(l.nar_hash));
        if let Some(t) = l.last_modified {
            a.insert("lastModified".into(), json!(t));
        }
        m.insert("locked".into(), Json::Object(a));
    }
    if !n.flake {
        m.insert("flake".into(), json!(false));
    }
    Json::Object(m)
}

/// Reads a reference object: string attributes plus `dir`, `narHash`,
/// `lastModified`.
fn parse_ref(
    node: &str,
    what: &str,
    j: &Json,
) -> Result<(Source, String, Option<String>, Option<u64>), LockError> {
    let obj = j.as_object().ok_or_else(|| {
        bad(format!(
            "flake.lock: node '{node}': '{what}' is not an object"
        ))
    })?;
    let mut attrs = Vec::new();
    let mut dir = String::new();
    let mut nar_hash = None;
    let mut last_modified = None;
    for (k, v) in obj {
        match (k.as_str(), v) {
            ("dir", Json::String(s)) => dir = s.clone(),
            ("narHash", Json::String(s)) => nar_hash = Some(s.clone()),
            ("lastModified", v) => {
                last_modified = Some(v.as_u64().ok_or_else(|| {
                    bad(format!(
                        "flake.lock: node '{node}': '{what}.lastModified' is not a number"
                    ))
                })?)
            }
            ("revCount", _) => {}
            (_, Json::String(s)) => attrs.push((k.clone(), s.clone())),
            _ => {
                return Err(bad(format!(
                    "flake.lock: node '{node}': '{what}.{k}' is not a string"
                )))
            }
        }
    }
    let source = Source::from_attrs(&attrs)
        .map_err(|e| bad(format!("flake.lock: node '{node}': '{what}': {e}")))?;
    Ok((source, dir, nar_hash, last_modified))
}

fn parse_node(name: &str, j: &Json) -> Result<Node, LockError> {
    let obj = j
        .as_object()
        .ok_or_else(|| bad(format!("flake.lock: node '{name}' is not an object")))?;
    let mut node = Node {
        flake: true,
        ..Node::default()
    };
    if let Some(inputs) = obj.get("inputs") {
        let inputs = inputs.as_object().ok_or_else(|| {
            bad(format!(
                "flake.lock: node '{name}': 'inputs' is not an object"
            ))
        })?;
        for (k, v) in inputs {
            let e = match v {
                Json::String(t) => Edge::Node(t.clone()),
                Json::Array(a) => Edge::Follows(
                    a.iter()
                        .map(|x| x.as_str().map(str::to_string))
                        .collect::<Option<Vec<_>>>()
                        .ok_or_else(|| {
                            bad(format!(
                                "flake.lock: node '{name}': input '{k}' has a follows path that is not a list of strings"
                            ))
                        })?,
                ),
                _ => {
                    return Err(bad(format!(
                        "flake.lock: node '{name}': input '{k}' is neither a node name nor a follows path"
                    )))
                }
            };
            node.inputs.insert(k.clone(), e);
        }
    }
    if let Some(o) = obj.get("original") {
        let (source, dir, nar_hash, _) = parse_ref(name, "original", o)?;
        node.original = Some(FlakeRef {
            source,
            dir,
            nar_hash,
        });
    }
    if let Some(l) = obj.get("locked") {
        let (source, dir, nar_hash, last_modified) = parse_ref(name, "locked", l)?;
        let nar_hash = nar_hash.ok_or_else(|| {
            bad(format!(
                "flake.lock: node '{name}': 'locked' has no 'narHash'"
            ))
        })?;
        if !nar_hash.starts_with("sha256-") {
            return Err(bad(format!(
                "flake.lock: node '{name}': narHash '{nar_hash}' is not an SRI SHA-256 hash"
            )));
        }
        node.locked = Some(Locked {
            source,
            dir,
            nar_hash,
            last_modified,
        });
    }
    match obj.get("flake") {
        None | Some(Json::Bool(true)) => {}
        Some(Json::Bool(false)) => node.flake = false,
        Some(_) => {
            return Err(bad(format!(
                "flake.lock: node '{name}': 'flake' is not a boolean"
            )))
        }
    }
    Ok(node)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = r#"{
  "nodes": {
    "lib": {
      "flake": false,
      "locked": {
        "narHash": "sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=",
        "path": "./lib",
        "type": "path"
      },
      "original": {
        "path": "./lib",
        "type": "path"
      }
    },
    "pkgs": {
      "inputs": {
        "lib": [
          "lib"
        ]
      },
      "locked": {
        "lastModified": 1700000000,
        "narHash": "sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=",
        "ref": "main",
        "rev": "0123456789abcdef0123456789abcdef01234567",
        "type": "git",
        "url": "file:///srv/pkgs"
      },
      "original": {
        "ref": "main",
        "type": "git",
        "url": "file:///srv/pkgs"
      }
    },
    "root": {
      "inputs": {
        "lib": "lib",
        "pkgs": "pkgs"
      }
    }
  },
  "root": "root",
  "version": 7
}
"#;

    #[test]
    fn round_trip_is_byte_identical() {
        let l = LockFile::parse(SAMPLE).unwrap();
        assert_eq!(l.render(), SAMPLE);
        assert_eq!(
            l.resolve(&l.nodes["pkgs"].inputs["lib"]).unwrap(),
            "lib".to_string()
        );
        assert!(!l.nodes["lib"].flake);
        assert_eq!(
            l.nodes["pkgs"].locked.as_ref().unwrap().source.rev(),
            Some("0123456789abcdef0123456789abcdef01234567")
        );
    }

    #[test]
    fn empty_lock() {
        assert_eq!(
            LockFile::empty().render(),
            "{\n  \"nodes\": {\n    \"root\": {}\n  },\n  \"root\": \"root\",\n  \"version\": 7\n}\n"
        );
    }

    #[test]
    fn bad_locks() {
        let e = |s: &str| LockFile::parse(s).unwrap_err().0;
        assert!(e("{").contains("not valid JSON"));
        assert!(e(r#"{"version":9,"root":"root","nodes":{"root":{}}}"#).contains("version 9"));
        assert!(e(r#"{"version":7,"root":"r","nodes":{}}"#).contains("'r' does not exist"));
        assert!(
            e(r#"{"version":7,"root":"root","nodes":{"root":{"inputs":{"a":"b"}}}}"#)
                .contains("missing node 'b'")
        );
        assert!(
            e(r#"{"version":7,"root":"root","nodes":{"root":{"inputs":{"a":["zz"]}}}}"#)
                .contains("names no input 'zz'")
        );
        assert!(
            e(r#"{"version":7,"root":"root","nodes":{"root":{"inputs":{"a":["a"]}}}}"#)
                .contains("cycle of follows")
        );
        assert!(e(
            r#"{"version":7,"root":"root","nodes":{"root":{"inputs":{"a":["b"],"b":["a"]}}}}"#
        )
        .contains("cycle of follows"));
        let no_hash = r#"{"version":7,"root":"root","nodes":{"root":{"inputs":{"a":"a"}},
            "a":{"original":{"type":"path","path":"/x"},"locked":{"type":"path","path":"/x"}}}}"#;
        assert!(e(no_hash).contains("no 'narHash'"));
        let hg = r#"{"version":7,"root":"root","nodes":{"root":{"inputs":{"a":"a"}},
            "a":{"original":{"type":"hg","url":"x"},"locked":{"type":"hg","url":"x","narHash":"sha256-x"}}}}"#;
        assert!(e(hg).contains("not supported"));
    }
}
