//! End-to-end tests of `rocmx graph`: the build closure of an installable as
//! Graphviz dot, JSON or SVG. Evaluation only: the packages are plain
//! `derivation { … }` values extended with `gfxDependent`, `gpuTargets`, `meta`
//! and `buildInputs`, never built (their `drvPath`s are not even computed).

mod common;
use common::fixture::Work;
use common::{err, out};

use std::fs;
use std::process::{Command, Output};

/// A package set in `default.nix`: `app` needs `solver` (gfx-dependent by
/// flag, broken), `firmware` (from a binary, non-free) and `odd` (whose
/// attributes throw or have the wrong types, and whose `drvPath` throws);
/// `solver` needs `blas` (gfx-dependent by its targets), which needs
/// `runtime` (gfx-independent).
const PACKAGES: &str = r#"
let
  mk = name: deps: extra:
    derivation { inherit name; system = builtins.currentSystem; builder = "/bin/sh"; buildInputs = deps; } // extra;
  runtime = mk "runtime" [ ] { gfxDependent = false; meta.license = { spdxId = "MIT"; free = true; }; };
  blas = mk "blas" [ runtime ] { gpuTargets = [ "gfx1100" "gfx90a" ]; meta.license = "Apache-2.0"; };
  firmware = mk "firmware" [ ] {
    meta = { fromBinary = "no source published"; license = { spdxId = "LicenseRef-unfree"; free = false; }; };
  };
  solver = mk "solver" [ blas runtime ] { gfxDependent = true; gpuTargets = null; meta.broken = "never built"; };
  odd = mk "odd" [ runtime ] {
    gfxDependent = throw "no flag";
    gpuTargets = [ "gfx1100" (throw "no target") ];
    meta = { broken = true; fromBinary = 3; };
    drvPath = throw "guarded";
    outPath = throw "guarded";
  };
  app = mk "app" [ solver firmware odd ] { gpuTargets = [ ]; };
in
{
  inherit app;
  small = mk "small" [ runtime ] { };
  both = [ (mk "small" [ runtime ] { }) blas ];
}
"#;

/// A work directory holding `default.nix` and the store `store/`.
fn fixture() -> Work {
    let w = Work::empty()
        .store_at("store")
        .env_remove("HSA_OVERRIDE_GFX_VERSION");
    fs::create_dir_all(w.root()).unwrap();
    w.write("default.nix", PACKAGES);
    w
}

fn ok(o: &Output) -> String {
    assert!(o.status.success(), "rocmx failed:\n{}\n{}", out(o), err(o));
    out(o)
}

/// The line of `dot` that declares the node `name`.
fn node_line<'a>(dot: &'a str, name: &str) -> &'a str {
    let prefix = format!("  \"{name}\" [");
    dot.lines()
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no node {name} in:\n{dot}"))
}

#[test]
fn dot_has_nodes_edges_and_encodings() {
    let fx = fixture();
    let dot = ok(&fx.run(&["graph", "default.nix", "-A", "app"]));
    assert!(
        dot.starts_with("digraph closure {\n  rankdir=LR;\n"),
        "{dot}"
    );
    assert!(dot.ends_with("}\n"), "{dot}");
    for n in ["app", "solver", "blas", "runtime", "firmware", "odd"] {
        node_line(&dot, n);
    }
    assert!(!dot.contains("\"small\""), "{dot}");
    let edges: Vec<&str> = dot.lines().filter(|l| l.contains(" -> ")).collect();
    assert_eq!(
        edges,
        vec![
            "  \"app\" -> \"firmware\";",
            "  \"app\" -> \"odd\";",
            "  \"app\" -> \"solver\";",
            "  \"blas\" -> \"runtime\";",
            "  \"odd\" -> \"runtime\";",
            "  \"solver\" -> \"blas\";",
            "  \"solver\" -> \"runtime\";",
        ],
        "{dot}"
    );
    // Gfx-dependent by its targets (listed on a second line) or by its flag.
    let blas = node_line(&dot, "blas");
    assert!(blas.contains("label=\"blas\\ngfx1100,gfx90a\""), "{blas}");
    assert!(blas.contains("fillcolor=\"#f4a261\""), "{blas}");
    let solver = node_line(&dot, "solver");
    assert!(solver.contains("label=\"solver\""), "{solver}");
    assert!(solver.contains("fillcolor=\"#f4a261\""), "{solver}");
    assert!(solver.contains("color=\"red\""), "broken: {solver}");
    assert!(!solver.contains("dashed"), "{solver}");
    // Gfx-independent: explicitly, by an empty target list, or by default.
    for n in ["runtime", "app", "firmware", "odd"] {
        let l = node_line(&dot, n);
        assert!(l.contains("fillcolor=\"#a8dadc\""), "{l}");
    }
    // From a binary: dashed, "binary" on the second line.
    let fw = node_line(&dot, "firmware");
    assert!(fw.contains("style=\"filled,dashed\""), "{fw}");
    assert!(fw.contains("label=\"firmware\\nbinary\""), "{fw}");
    assert!(!fw.contains("color=\"red\""), "{fw}");
    // Attributes that throw or have the wrong type read as absent; broken = true.
    let odd = node_line(&dot, "odd");
    assert!(odd.contains("label=\"odd\""), "{odd}");
    assert!(!odd.contains("dashed"), "{odd}");
    assert!(odd.contains("color=\"red\""), "{odd}");
    // The installable's own package: a double border.
    assert!(node_line(&dot, "app").contains("peripheries=2"), "{dot}");
    assert!(!node_line(&dot, "solver").contains("peripheries"), "{dot}");
    // The legend explains the encodings.
    let legend = &dot[dot.find("subgraph cluster_legend {").expect("legend")..];
    for s in [
        "gfx-dependent\", fillcolor=\"#f4a261\"",
        "gfx-independent\", fillcolor=\"#a8dadc\"",
        "style=\"filled,dashed\"",
        "color=\"red\"",
    ] {
        assert!(legend.contains(s), "{s} in {legend}");
    }
    // Deterministic.
    assert_eq!(ok(&fx.run(&["graph", "default.nix", "-A", "app"])), dot);
}

#[test]
fn json_is_exact() {
    let fx = fixture();
    let o = fx.run(&["graph", "default.nix", "-A", "small", "--format", "json"]);
    let j: serde_json::Value = serde_json::from_str(&ok(&o)).expect("JSON");
    assert_eq!(
        j,
        serde_json::json!({
            "nodes": [
                {"name": "runtime", "gfxDependent": false, "gpuTargets": null, "fromBinary": null,
                 "broken": false, "licenses": [{"spdxId": "MIT", "free": true}]},
                {"name": "small", "gfxDependent": false, "gpuTargets": null, "fromBinary": null,
                 "broken": false, "licenses": []},
            ],
            "edges": [["small", "runtime"]],
        })
    );
    // A list at the top: every package in it is a root; one name, one node.
    let o = fx.run(&["graph", "default.nix", "-A", "both", "--format", "json"]);
    let j: serde_json::Value = serde_json::from_str(&ok(&o)).expect("JSON");
    assert_eq!(
        j["edges"],
        serde_json::json!([["blas", "runtime"], ["small", "runtime"]])
    );
    let names: Vec<&str> = j["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["blas", "runtime", "small"]);
    assert_eq!(
        j["nodes"][0]["gpuTargets"],
        serde_json::json!(["gfx1100", "gfx90a"])
    );
    assert_eq!(j["nodes"][0]["gfxDependent"], true);
    // The whole set: broken as a reason or true, fromBinary, licences.
    let o = fx.run(&["graph", "default.nix", "-A", "app", "--format", "json"]);
    let j: serde_json::Value = serde_json::from_str(&ok(&o)).expect("JSON");
    let node = |n: &str| {
        j["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["name"] == n)
            .unwrap_or_else(|| panic!("{n} in {j}"))
            .clone()
    };
    assert_eq!(node("solver")["broken"], "never built");
    assert_eq!(node("solver")["gfxDependent"], true);
    assert_eq!(node("odd")["broken"], true);
    assert_eq!(node("odd")["gpuTargets"], serde_json::Value::Null);
    assert_eq!(node("odd")["fromBinary"], serde_json::Value::Null);
    assert_eq!(node("firmware")["fromBinary"], "no source published");
    assert_eq!(
        node("firmware")["licenses"],
        serde_json::json!([{"spdxId": "LicenseRef-unfree", "free": false}])
    );
    assert_eq!(node("app")["gpuTargets"], serde_json::json!([]));
    assert_eq!(node("app")["gfxDependent"], false);
}

fn have_dot() -> bool {
    Command::new("dot")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn svg_through_graphviz_or_a_clear_error() {
    let fx = fixture();
    if have_dot() {
        let o = fx.run(&["graph", "default.nix", "-A", "app", "--format", "svg"]);
        let svg = ok(&o);
        assert!(svg.contains("<svg"), "{svg}");
        assert!(svg.contains("firmware"), "{svg}");
    } else {
        eprintln!("no Graphviz 'dot' on PATH: only the error is tested");
    }
    // Without dot on PATH.
    fs::create_dir_all(fx.path("empty-bin")).unwrap();
    let o = fx
        .command(&["graph", "default.nix", "-A", "app", "--format", "svg"])
        .env("PATH", fx.path("empty-bin"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    assert_eq!(
        err(&o),
        "error: --format svg needs Graphviz's 'dot' (Debian package graphviz); --format dot prints the graph without it\n"
    );
    assert!(o.stdout.is_empty());
}

#[test]
fn evaluation_errors_exit_1() {
    let fx = fixture();
    let o = fx.run(&["graph", "default.nix", "-A", "nothing"]);
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    assert!(err(&o).contains("error:"), "{}", err(&o));
    assert!(o.stdout.is_empty());
    let o = fx.run(&["graph", "default.nix", "-A", "app", "--format", "png"]);
    assert_eq!(o.status.code(), Some(2), "usage error: {}", err(&o));
}

/// A flake, with the flake options (`--gfx`) reaching its outputs.
#[test]
fn flake_installable_takes_flake_options() {
    let fx = fixture();
    fs::create_dir_all(fx.path("f")).unwrap();
    fs::write(
        fx.path("f/flake.nix"),
        r#"{
  config.gfxTargets = { type = "gfx targets"; default = [ "gfx90a" ]; description = "GPUs"; };
  outputs = { self, config }:
    let
      mk = name: deps: extra:
        derivation { inherit name; system = builtins.currentSystem; builder = "/bin/sh"; buildInputs = deps; } // extra;
      base = mk "base" [ ] { };
    in {
      packages.${builtins.currentSystem}.default = mk "kernels" [ base ] { gpuTargets = config.gfxTargets; };
    };
}
"#,
    )
    .unwrap();
    let graph = |args: &[&str]| {
        let mut a = vec!["graph"];
        a.extend_from_slice(args);
        let o = fx.command(&a).current_dir(fx.path("f")).output().unwrap();
        ok(&o)
    };
    let dot = graph(&[]);
    assert!(
        node_line(&dot, "kernels").contains("label=\"kernels\\ngfx90a\""),
        "{dot}"
    );
    assert!(dot.contains("  \"kernels\" -> \"base\";\n"), "{dot}");
    let j: serde_json::Value = serde_json::from_str(&graph(&[
        ".#default",
        "--gfx",
        "gfx1100,gfx90a",
        "--format",
        "json",
    ]))
    .unwrap();
    assert_eq!(
        j["nodes"][1],
        serde_json::json!({"name": "kernels", "gfxDependent": true, "gpuTargets": ["gfx1100", "gfx90a"],
            "fromBinary": null, "broken": false, "licenses": []})
    );
    assert_eq!(j["edges"], serde_json::json!([["kernels", "base"]]));
}
