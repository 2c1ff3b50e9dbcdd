//! gfx targets end to end (issue 9): `rocmx gfx detect` against fake KFD
//! topologies in temporary directories (never the real /sys), `rocmx gfx list`
//! and `rocmx gfx resolve`, and `exprs/lib/gpu.nix` through `rocmx eval`.

use std::path::Path;
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_rocmx");

/// Runs `rocmx ARGS…` with `ROCMX_SYSFS_ROOT=sysfs` (and the override, if any).
fn rocmx(sysfs: &Path, hsa_override: Option<&str>, args: &[&str]) -> Output {
    let mut c = Command::new(BIN);
    c.env("ROCMX_SYSFS_ROOT", sysfs)
        .env_remove("HSA_OVERRIDE_GFX_VERSION")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(args);
    if let Some(v) = hsa_override {
        c.env("HSA_OVERRIDE_GFX_VERSION", v);
    }
    c.output().expect("running rocmx")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A fake sysfs root with one topology node per `(number, gfx_target_version)`.
fn sysfs(nodes: &[(u32, u32)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for &(n, v) in nodes {
        let d = dir.path().join(format!("class/kfd/kfd/topology/nodes/{n}"));
        std::fs::create_dir_all(&d).unwrap();
        let cpu = if v == 0 { 16 } else { 0 };
        let props = format!(
            "cpu_cores_count {cpu}\nsimd_count {}\nmem_banks_count 1\ngfx_target_version {v}\n\
             vendor_id {}\nlocation_id 0\n",
            if v == 0 { 0 } else { 440 },
            if v == 0 { 0 } else { 4098 }
        );
        std::fs::write(d.join("properties"), props).unwrap();
    }
    dir
}

fn detect(nodes: &[(u32, u32)], hsa_override: Option<&str>) -> (Output, String) {
    let root = sysfs(nodes);
    let o = rocmx(root.path(), hsa_override, &["gfx", "detect"]);
    let out = stdout(&o);
    (o, out)
}

#[test]
fn detect_mi210() {
    let (o, out) = detect(&[(0, 0), (1, 90010)], None);
    assert!(o.status.success(), "{}", stderr(&o));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert!(
        lines[0].starts_with("node 1: gfx90a (gfx_target_version 90010) "),
        "{out}"
    );
    assert!(lines[0].contains("MI210"), "{out}");
    assert_eq!(lines[1], "--gfx gfx90a");
}

#[test]
fn detect_mi300x_several_nodes_deduplicated_in_numeric_order() {
    // Node 10 sorts after node 9 (numerically, not as text).
    let nodes: Vec<(u32, u32)> = std::iter::once((0, 0))
        .chain((1..=10).map(|n| (n, 90402)))
        .collect();
    let (o, out) = detect(&nodes, None);
    assert!(o.status.success(), "{}", stderr(&o));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 11, "{out}");
    assert!(lines[0].starts_with("node 1: gfx942 (gfx_target_version 90402)"));
    assert!(lines[0].contains("MI300X"), "{out}");
    assert!(lines[9].starts_with("node 10: gfx942"), "{out}");
    assert_eq!(lines[10], "--gfx gfx942");
}

#[test]
fn detect_rx7900xtx_next_to_a_cpu_node() {
    let (o, out) = detect(&[(0, 0), (1, 110000)], None);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        out.contains("node 1: gfx1100 (gfx_target_version 110000)"),
        "{out}"
    );
    assert!(out.contains("RX 7900 XTX"), "{out}");
    assert!(!out.contains("node 0"), "CPU node listed: {out}");
    assert!(out.ends_with("--gfx gfx1100\n"), "{out}");
}

#[test]
fn detect_mixed_machine_json() {
    let root = sysfs(&[(0, 0), (1, 90010), (2, 110000), (3, 90010), (4, 0)]);
    let o = rocmx(root.path(), None, &["gfx", "detect", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["targets"], serde_json::json!(["gfx90a", "gfx1100"]));
    let nodes = v["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 3);
    assert_eq!(nodes[1]["node"], 2);
    assert_eq!(nodes[1]["target"], "gfx1100");
    assert_eq!(nodes[1]["gfx_target_version"], 110000);
    assert_eq!(nodes[1]["known"], true);
    assert!(v["override"].is_null());
}

#[test]
fn hsa_override_turns_gfx1101_into_gfx1100() {
    let (o, out) = detect(&[(0, 0), (1, 110001)], Some("11.0.0"));
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        out.starts_with("node 1: gfx1100 (gfx_target_version 110000, set by HSA_OVERRIDE_GFX_VERSION; the device reports 110001)"),
        "{out}"
    );
    assert!(out.ends_with("--gfx gfx1100\n"), "{out}");
    // Without the override the device is what it reports.
    let (_, plain) = detect(&[(0, 0), (1, 110001)], None);
    assert!(plain.ends_with("--gfx gfx1101\n"), "{plain}");
    // A malformed override is refused, naming the value.
    let (o, _) = detect(&[(1, 110001)], Some("gfx1100"));
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("HSA_OVERRIDE_GFX_VERSION='gfx1100' is not MAJOR.MINOR.STEPPING"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn cpu_only_is_no_gpu() {
    let root = sysfs(&[(0, 0)]);
    let o = rocmx(root.path(), None, &["gfx", "detect"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(o.stdout.is_empty());
    let e = stderr(&o);
    let topology = root.path().join("class/kfd/kfd/topology");
    assert_eq!(
        e.trim_end(),
        format!(
            "error: no AMD GPU found in {} (1 CPU node, no GPU node); name the targets with --gfx LIST, e.g. --gfx gfx1100",
            topology.display()
        )
    );
}

#[test]
fn no_topology_is_no_gpu_with_the_root_used() {
    let root = tempfile::tempdir().unwrap();
    let o = rocmx(root.path(), None, &["gfx", "detect", "--json"]);
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(e.starts_with("error: no AMD GPU found in "), "{e}");
    assert!(e.contains(&root.path().display().to_string()), "{e}");
    assert!(e.contains("is the amdgpu driver loaded?"), "{e}");
    assert!(e.contains("--gfx gfx1100"), "{e}");
    assert!(!e.contains("panicked"));
    // `resolve native` gives the same error.
    let o = rocmx(root.path(), None, &["gfx", "resolve", "native"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("no AMD GPU found in "));
}

#[test]
fn unknown_target_is_reported_with_a_note() {
    let (o, out) = detect(&[(1, 100600)], None);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        out.contains("node 1: gfx1060 (gfx_target_version 100600) not in rocmx's gfx table"),
        "{out}"
    );
}

#[test]
fn garbage_properties_never_panic() {
    let root = sysfs(&[(2, 90010)]);
    let nodes = root.path().join("class/kfd/kfd/topology/nodes");
    for (name, bytes) in [
        ("0", &b"\xff\xfe garbage\x00\n"[..]),
        ("1", b"gfx_target_version not-a-number\n"),
        ("3", b"gfx_target_version 123456789012345678901234567890\n"),
        ("junk", b"gfx_target_version 90010\n"),
    ] {
        std::fs::create_dir_all(nodes.join(name)).unwrap();
        std::fs::write(nodes.join(name).join("properties"), bytes).unwrap();
    }
    // A node directory without a properties file.
    std::fs::create_dir_all(nodes.join("4")).unwrap();
    let o = rocmx(root.path(), None, &["gfx", "detect"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o).lines().last(), Some("--gfx gfx90a"));
    let e = stderr(&o);
    assert!(
        e.contains("warning: node 1: no readable gfx_target_version line"),
        "{e}"
    );
    assert!(e.contains("warning: node 4: cannot read"), "{e}");
    assert!(!e.contains("panicked"), "{e}");
}

#[test]
fn list_json_has_gfx90a() {
    let root = tempfile::tempdir().unwrap();
    let o = rocmx(root.path(), None, &["gfx", "list", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let targets = v.as_array().unwrap();
    let a = targets
        .iter()
        .find(|t| t["name"] == "gfx90a")
        .expect("gfx90a listed");
    assert_eq!(a["gfx_target_version"], 90010);
    assert_eq!(a["family"], "gfx9");
    assert_eq!(a["features"]["xnack"], "any");
    assert!(targets.iter().any(|t| t["name"] == "gfx1201"));

    let o = rocmx(root.path(), None, &["gfx", "list"]);
    assert!(o.status.success());
    let out = stdout(&o);
    assert!(out.starts_with("NAME "), "{out}");
    let line = out.lines().find(|l| l.starts_with("gfx942 ")).unwrap();
    assert!(
        line.contains("gfx9-4-generic") && line.contains("90402"),
        "{line}"
    );
}

#[test]
fn resolve_lists_and_errors() {
    let root = tempfile::tempdir().unwrap();
    let run = |spec: &str| rocmx(root.path(), None, &["gfx", "resolve", spec]);
    let o = run(" gfx90a:xnack-:sramecc+ ,gfx1100,gfx90a:sramecc+:xnack-");
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "gfx90a:sramecc+:xnack-,gfx1100\n");

    let o = run("gfx91a");
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).starts_with("error: unknown gfx target 'gfx91a' (did you mean gfx90a, "),
        "{}",
        stderr(&o)
    );
    let o = run("gfx1100:xnack-");
    assert!(
        stderr(&o).contains("gfx1100 does not support xnack"),
        "{}",
        stderr(&o)
    );
    let o = run("gfx90a,,gfx942");
    assert!(stderr(&o).contains("empty gfx target"), "{}", stderr(&o));

    let o = rocmx(root.path(), None, &["gfx", "resolve", "all", "--json"]);
    let all: Vec<String> = serde_json::from_slice(&o.stdout).unwrap();
    assert!(all.len() >= 27 && all.contains(&"gfx950".to_string()));

    let fake = sysfs(&[(0, 0), (1, 90402), (2, 90402)]);
    let o = rocmx(fake.path(), None, &["gfx", "resolve", "native"]);
    assert_eq!(stdout(&o), "gfx942\n", "{}", stderr(&o));
}

#[test]
fn gpu_nix_intersect() {
    let root = tempfile::tempdir().unwrap();
    let eval = |expr: &str| {
        rocmx(
            root.path(),
            None,
            &["eval", "--strict", "--json", "--expr", expr],
        )
    };
    let o = eval(
        r#"let g = import ./exprs/lib/gpu.nix; in g.intersect {
             pname = "rocblas"; supported = [ "gfx90a" "gfx942" "gfx1100" ];
             requested = [ "gfx90a:xnack-" "gfx1010" "gfx1100" ]; }"#,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v, serde_json::json!(["gfx90a:xnack-", "gfx1100"]));

    let o = eval(
        r#"let g = import ./exprs/lib/gpu.nix; in g.intersect {
             pname = "rocblas"; supported = [ "gfx90a" "gfx942" ]; requested = [ "gfx1010" ]; }"#,
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains(
            "rocblas supports none of the requested gfx targets: requested [gfx1010], supported [gfx90a gfx942]"
        ),
        "{}",
        stderr(&o)
    );

    // The library reads the same table as the binary.
    let o = eval(
        r#"let g = import ./exprs/lib/gpu.nix; in {
             v = (g.byName "gfx90a").gfx_target_version;
             b = g.baseName "gfx942:sramecc+:xnack-";
             n = builtins.length g.names;
             gfx11 = g.supportedBy (t: t.family == "gfx11" && t.rocm != [ ]); }"#,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["v"], 90010);
    assert_eq!(v["b"], "gfx942");
    let list = rocmx(root.path(), None, &["gfx", "list", "--json"]);
    let all: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
    assert_eq!(v["n"], all.as_array().unwrap().len());
    assert_eq!(v["gfx11"][0], "gfx1100");
}
