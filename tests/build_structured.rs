//! End-to-end tests of structured attributes (`__structuredAttrs = true`) and
//! `exportReferencesGraph` in `rocmx build`, against stores in temporary directories.
//!
//! The builder is a static busybox reached through a path literal (`./bb`). Busybox's
//! shell has no arrays, so the builders read `.attrs.sh` and `.attrs.json` with `sed`
//! and `eval "set -- …"`; when bash is on the host, the test also sources the copied
//! `.attrs.sh` with it. The tests skip, saying why, when busybox is missing or the
//! kernel refuses user namespaces.

mod common;
use common::fixture::{succeeded, Work};
use common::{err, out};

use std::fs;
use std::path::Path;
use std::process::{Command, Output};

/// `dep` ← `user` (refers to dep); `targets` (structured, gets a list of gfx targets,
/// a set of flags and the graph of `user`); `graph` (unstructured graph of `user`).
const PACKAGES: &str = r#"
let
  bb = ./bb;
  base = {
    system = builtins.currentSystem;
    builder = "${bb}/bin/sh";
  };
  dep = derivation (base // {
    name = "dep";
    PATH = "${bb}/bin";
    args = [ "-c" "echo dep > $out" ];
  });
  user = derivation (base // {
    name = "user";
    PATH = "${bb}/bin";
    args = [ "-c" "echo ${dep} > $out" ];
  });
  targets = derivation (base // {
    name = "targets";
    __structuredAttrs = true;
    gpuTargets = [ "gfx1100" "gfx90a" ];
    flags = { opt = "-O2"; quoted = "it's"; };
    doCheck = true;
    jobs = 4;
    exportReferencesGraph.closure = [ user ];
    args = [ "-c" ''
      set -e
      PATH=${bb}/bin
      attrs=$NIX_ATTRS_SH_FILE
      out=$(sed -n "s/^declare -A outputs=(\['out'\]='\([^']*\)' )$/\1/p" "$attrs")
      mkdir "$out"
      list=$(sed -n 's/^declare -a gpuTargets=(\(.*\))$/\1/p' "$attrs")
      eval "set -- $list"
      for t in "$@"; do echo "$t"; done > "$out/targets"
      sed -n 's/.*"gpuTargets":\[\([^]]*\)\].*/\1/p' "$NIX_ATTRS_JSON_FILE" > "$out/targets-json"
      cp "$attrs" "$out/attrs.sh"
      cp "$NIX_ATTRS_JSON_FILE" "$out/attrs.json"
      env > "$out/env"
    '' ];
  });
  graph = derivation (base // {
    name = "graph";
    PATH = "${bb}/bin";
    exportReferencesGraph = [ "refs" user ];
    args = [ "-c" "cat refs > $out" ];
  });
  probe = derivation (base // { name = "probe"; args = [ "-c" "echo > $out" ]; });
in { inherit dep user targets graph probe; }
"#;

/// A work directory holding `packages.nix`, `bb/` and a store root.
fn fixture() -> Work {
    Work::new(&["cat", "cp", "echo", "env", "mkdir", "sed"]).packages(PACKAGES)
}

impl Work {
    /// `rocmx --store ROOT build --file packages.nix ATTR --no-link --print-out-paths`.
    fn run_build(&self, attr: &str) -> Output {
        self.run(&[
            "build",
            "--file",
            "packages.nix",
            attr,
            "--no-link",
            "--print-out-paths",
        ])
    }

    /// The output path of `attr`, built.
    fn build(&self, attr: &str) -> String {
        succeeded(&format!("building {attr}"), &self.run_build(attr))
            .trim()
            .to_string()
    }
}

/// Whether builds can run here (see [`common::fixture::can_build`]).
fn can_build() -> bool {
    common::fixture::can_build(|| fixture().run_build("probe"))
}

fn read(p: &Path) -> String {
    fs::read_to_string(p).unwrap_or_else(|e| panic!("reading {}: {e}", p.display()))
}

#[test]
fn structured_attributes_reach_the_builder_as_files() {
    if !can_build() {
        return;
    }
    let f = fixture();
    let out_path = f.build("targets");
    let out_dir = f.physical(&out_path);

    // The list, read from .attrs.sh (shell words) and from .attrs.json.
    assert_eq!(read(&out_dir.join("targets")), "gfx1100\ngfx90a\n");
    assert_eq!(
        read(&out_dir.join("targets-json")),
        "\"gfx1100\",\"gfx90a\"" // .attrs.json ends without a newline
    );

    // Only the two file variables, not the attributes themselves.
    let env = read(&out_dir.join("env"));
    let vars: Vec<&str> = env
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, _)| k)
        .collect();
    assert!(vars.contains(&"NIX_ATTRS_JSON_FILE"), "{env}");
    assert!(
        env.contains("NIX_ATTRS_JSON_FILE=/build/.attrs.json\n"),
        "{env}"
    );
    assert!(
        env.contains("NIX_ATTRS_SH_FILE=/build/.attrs.sh\n"),
        "{env}"
    );
    for absent in ["gpuTargets", "out", "__json", "doCheck", "name", "flags"] {
        assert!(
            !vars.contains(&absent),
            "{absent} is in the environment:\n{env}"
        );
    }

    // .attrs.sh: Nix's declarations; the output is the final path (the scratch path
    // written at build time was rewritten with the output).
    let sh = read(&out_dir.join("attrs.sh"));
    for line in [
        "declare doCheck=1\n".to_string(),
        "declare -A flags=(['opt']='-O2' ['quoted']='it'\\''s' )\n".to_string(),
        "declare -a gpuTargets=('gfx1100' 'gfx90a' )\n".to_string(),
        "declare jobs=4\n".to_string(),
        "declare name='targets'\n".to_string(),
        format!("declare -A outputs=(['out']='{out_path}' )\n"),
    ] {
        assert!(sh.contains(&line), "{line:?} not in .attrs.sh:\n{sh}");
    }
    assert!(
        !sh.contains("closure"),
        "nested values stay out of .attrs.sh:\n{sh}"
    );

    // Bash reads it back, when there is a bash.
    if Path::new("/bin/bash").exists() {
        let o = Command::new("/bin/bash")
            .arg("-c")
            .arg("source \"$1\"; echo \"${gpuTargets[1]} ${flags[quoted]} ${outputs[out]} $doCheck\"")
            .arg("bash")
            .arg(out_dir.join("attrs.sh"))
            .output()
            .expect("bash");
        assert_eq!(
            out(&o),
            format!("gfx90a it's {out_path} 1\n"),
            "{}",
            err(&o)
        );
    }

    // .attrs.json: the attributes, `outputs` as an object, the exported graph.
    let json: serde_json::Value =
        serde_json::from_str(&read(&out_dir.join("attrs.json"))).expect("JSON");
    assert_eq!(json["gpuTargets"], serde_json::json!(["gfx1100", "gfx90a"]));
    assert_eq!(json["flags"]["quoted"], "it's");
    assert_eq!(json["jobs"], 4);
    assert_eq!(json["outputs"], serde_json::json!({ "out": out_path }));
    let user = f.build("user");
    let dep = f.build("dep");
    let graph = json["closure"].as_array().expect("closure is a list");
    let paths: Vec<&str> = graph.iter().map(|e| e["path"].as_str().unwrap()).collect();
    let mut want = vec![user.as_str(), dep.as_str()];
    want.sort();
    assert_eq!(paths, want, "{graph:?}");
    let entry = |p: &str| graph.iter().find(|e| e["path"] == p).unwrap().clone();
    let (u, d) = (entry(&user), entry(&dep));
    assert_eq!(u["references"], serde_json::json!([dep]));
    assert_eq!(d["references"], serde_json::json!([]));
    for e in [&u, &d] {
        assert_eq!(e["valid"], true);
        assert!(e["narHash"].as_str().unwrap().starts_with("blake3:"), "{e}");
        assert!(e["narSize"].as_u64().unwrap() > 0, "{e}");
    }
    assert_eq!(
        u["closureSize"].as_u64().unwrap(),
        u["narSize"].as_u64().unwrap() + d["narSize"].as_u64().unwrap()
    );
}

#[test]
fn export_references_graph_without_structured_attributes_writes_a_file() {
    if !can_build() {
        return;
    }
    let f = fixture();
    let out_path = f.build("graph");
    let user = f.build("user");
    let dep = f.build("dep");
    let mut entries = vec![
        (user.clone(), format!("{user}\n\n1\n{dep}\n")),
        (dep.clone(), format!("{dep}\n\n0\n")),
    ];
    entries.sort();
    let want: String = entries.into_iter().map(|(_, e)| e).collect();
    assert_eq!(read(&f.physical(&out_path)), want);
}
