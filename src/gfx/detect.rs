//! Detection of the machine's GPUs, as `rocm_agent_enumerator` does it: the
//! `gfx_target_version` of every KFD topology node.
//!
//! Owns: reading `<root>/class/kfd/kfd/topology/nodes/*/properties` (root
//! `$ROCMX_SYSFS_ROOT`, default `/sys`), skipping CPU nodes (version 0),
//! `HSA_OVERRIDE_GFX_VERSION`, and the version → name mapping. Must not:
//! panic or give up on odd files (they become warnings), or be called unless
//! the user asked (`--gfx native`, `rocmx gfx detect`).

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::{GfxError, GfxTable};

/// Where the KFD topology lives under the sysfs root.
const TOPOLOGY: &str = "class/kfd/kfd/topology";

/// One GPU node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GpuNode {
    /// The node's number (its directory name).
    pub node: u32,
    /// The version in effect (the override's, when set).
    pub gfx_target_version: u32,
    /// `gfx` + major (decimal) + minor, stepping (hex).
    pub target: String,
    /// Whether the table knows the target.
    pub known: bool,
    /// Example products, from the table.
    pub products: Vec<String>,
    /// What the device reports, when `HSA_OVERRIDE_GFX_VERSION` replaced it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reported_version: Option<u32>,
}

/// What detection found.
#[derive(Debug, Clone, Serialize)]
pub struct Detection {
    /// The topology directory read.
    pub topology: PathBuf,
    /// `HSA_OVERRIDE_GFX_VERSION` as given, when set.
    #[serde(rename = "override")]
    pub override_version: Option<String>,
    /// GPU nodes, by node number.
    pub nodes: Vec<GpuNode>,
    /// Nodes skipped or files not understood.
    pub warnings: Vec<String>,
}

impl Detection {
    /// The distinct target names, in node order.
    pub fn targets(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for n in &self.nodes {
            if !out.contains(&n.target) {
                out.push(n.target.clone());
            }
        }
        out
    }
}

/// `gfx` + decimal(v/10000 % 100) + hex(v/100 % 100) + hex(v % 100):
/// 90010 → gfx90a, 110000 → gfx1100, 90402 → gfx942.
pub fn name_of_version(v: u32) -> String {
    format!("gfx{}{:x}{:x}", v / 10000 % 100, v / 100 % 100, v % 100)
}

/// `MAJOR.MINOR.STEPPING` (decimal) → the KFD number, as the ROCm runtime reads
/// `HSA_OVERRIDE_GFX_VERSION`.
pub fn parse_override(value: &str) -> Result<u32, GfxError> {
    let bad = || GfxError::BadOverride {
        value: value.to_string(),
    };
    let parts: Vec<&str> = value.trim().split('.').collect();
    let [major, minor, stepping] = parts.as_slice() else {
        return Err(bad());
    };
    let num = |s: &str, max: u32| -> Result<u32, GfxError> {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) || s.len() > 3 {
            return Err(bad());
        }
        let n: u32 = s.parse().map_err(|_| bad())?;
        if n > max {
            return Err(bad());
        }
        Ok(n)
    };
    let major = num(major, 99)?;
    let (minor, stepping) = (num(minor, 15)?, num(stepping, 15)?);
    if major == 0 {
        return Err(bad());
    }
    Ok(major * 10000 + minor * 100 + stepping)
}

/// Detection with the environment: `$ROCMX_SYSFS_ROOT` (default `/sys`) and
/// `HSA_OVERRIDE_GFX_VERSION`.
pub fn detect() -> Result<Detection, GfxError> {
    let root = std::env::var_os("ROCMX_SYSFS_ROOT")
        .filter(|r| !r.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/sys"));
    let over = std::env::var("HSA_OVERRIDE_GFX_VERSION")
        .ok()
        .filter(|v| !v.trim().is_empty());
    detect_in(&root, over.as_deref())
}

/// Detection under the sysfs root `root`, with an optional override
/// (`"11.0.0"`). No GPU node is an error ([`GfxError::NoGpu`]).
pub fn detect_in(root: &Path, override_version: Option<&str>) -> Result<Detection, GfxError> {
    let forced = override_version.map(parse_override).transpose()?;
    let topology = root.join(TOPOLOGY);
    let no_gpu = |reason: String| GfxError::NoGpu {
        topology: topology.display().to_string(),
        reason,
    };
    let nodes_dir = topology.join("nodes");
    let entries = match std::fs::read_dir(&nodes_dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(no_gpu(format!(
                "{} does not exist: is the amdgpu driver loaded?",
                nodes_dir.display()
            )))
        }
        Err(e) => return Err(no_gpu(format!("cannot read {}: {e}", nodes_dir.display()))),
    };
    let mut warnings = Vec::new();
    let mut numbered: Vec<(u32, PathBuf)> = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        match name.parse::<u32>() {
            Ok(n) => numbered.push((n, entry.path())),
            Err(_) => warnings.push(format!(
                "{}: not a node number; skipped",
                entry.path().display()
            )),
        }
    }
    numbered.sort();
    let table = GfxTable::builtin();
    let mut nodes = Vec::new();
    let mut cpus = 0;
    for (n, dir) in numbered {
        let props = dir.join("properties");
        let text = match std::fs::read(&props) {
            Ok(b) => String::from_utf8_lossy(&b).into_owned(),
            Err(e) => {
                warnings.push(format!(
                    "node {n}: cannot read {}: {e}; skipped",
                    props.display()
                ));
                continue;
            }
        };
        let Some(reported) = gfx_target_version(&text) else {
            warnings.push(format!(
                "node {n}: no readable gfx_target_version line in {}; skipped",
                props.display()
            ));
            continue;
        };
        if reported == 0 {
            cpus += 1;
            continue;
        }
        let version = forced.unwrap_or(reported);
        let target = name_of_version(version);
        let info = table.by_version(version);
        nodes.push(GpuNode {
            node: n,
            gfx_target_version: version,
            known: info.is_some(),
            products: info.map(|i| i.products.clone()).unwrap_or_default(),
            target,
            reported_version: forced.filter(|&f| f != reported).map(|_| reported),
        });
    }
    if nodes.is_empty() {
        let reason = match (cpus, warnings.len()) {
            (0, 0) => "no topology nodes".to_string(),
            (c, 0) => format!("{c} CPU node{}, no GPU node", if c == 1 { "" } else { "s" }),
            (c, w) => format!(
                "{c} CPU node{}, {w} node{} not understood: {}",
                if c == 1 { "" } else { "s" },
                if w == 1 { "" } else { "s" },
                warnings.join("; ")
            ),
        };
        return Err(no_gpu(reason));
    }
    Ok(Detection {
        topology,
        override_version: override_version.map(str::to_string),
        nodes,
        warnings,
    })
}

/// The value of the `gfx_target_version N` line, if there is exactly a number.
fn gfx_target_version(properties: &str) -> Option<u32> {
    properties.lines().find_map(|line| {
        let mut words = line.split_whitespace();
        if words.next() != Some("gfx_target_version") {
            return None;
        }
        let v = words.next()?.parse::<u32>().ok()?;
        words.next().is_none().then_some(v)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(root: &Path, n: &str, props: &[u8]) {
        let d = root.join(TOPOLOGY).join("nodes").join(n);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("properties"), props).unwrap();
    }

    #[test]
    fn overrides() {
        assert_eq!(parse_override("11.0.0").unwrap(), 110000);
        assert_eq!(parse_override("9.0.10").unwrap(), 90010);
        assert_eq!(parse_override("10.3.0").unwrap(), 100300);
        assert_eq!(name_of_version(parse_override("9.4.2").unwrap()), "gfx942");
        for bad in [
            "", "11", "11.0", "11.0.0.0", "a.b.c", "11.0.16", "0.0.0", "-1.0.0", "11.0.+1",
            "1000.0.0",
        ] {
            assert!(parse_override(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn garbage_never_panics() {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        node(r, "0", b"cpu_cores_count 8\ngfx_target_version 0\n");
        node(r, "1", b"\xff\xfe\x00garbage\ngfx_target_version\n");
        node(r, "2", b"gfx_target_version 99999999999999999999\n");
        node(r, "3", b"gfx_target_version 4294967295\n");
        node(r, "4", b"gfx_target_version 90010 extra\n");
        node(r, "5", b"");
        node(r, "x", b"gfx_target_version 90010\n");
        node(r, "6", b"simd_count 4\n  gfx_target_version   110000  \n");
        let d = detect_in(r, None).unwrap();
        let names: Vec<_> = d
            .nodes
            .iter()
            .map(|n| (n.node, n.target.as_str()))
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
        assert_eq!(names[1], (6, "gfx1100"));
        assert!(!d.nodes[0].known, "{:?}", d.nodes[0]);
        assert!(d.warnings.len() >= 4, "{:?}", d.warnings);
        // Only garbage and CPUs: an error, not a panic.
        let empty = tempfile::tempdir().unwrap();
        node(empty.path(), "0", b"gfx_target_version 0\n");
        node(empty.path(), "1", b"\x00\x01");
        let e = detect_in(empty.path(), None).unwrap_err().to_string();
        assert!(e.contains("1 CPU node, 1 node not understood"), "{e}");
    }

    #[test]
    fn nodes_sorted_numerically_and_override() {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        node(r, "10", b"gfx_target_version 90402\n");
        node(r, "2", b"gfx_target_version 90010\n");
        node(r, "0", b"gfx_target_version 0\n");
        let d = detect_in(r, None).unwrap();
        assert_eq!(d.targets(), ["gfx90a", "gfx942"]);
        let o = detect_in(r, Some("11.0.0")).unwrap();
        assert_eq!(o.targets(), ["gfx1100"]);
        assert_eq!(o.nodes[0].reported_version, Some(90010));
        assert!(matches!(
            detect_in(r, Some("eleven")),
            Err(GfxError::BadOverride { .. })
        ));
    }
}
