//! End-to-end tests of `rocmx build`, `rocmx log` and `rocmx derivation show`, run
//! against stores in temporary directories (`--store DIR`, never /rocmx).
//!
//! The builder is a static busybox reached through a path literal (`./bb`, holding
//! `bin/sh` and applet symlinks), so the expressions need nothing from the host.
//! The tests skip, saying why, when busybox is missing or the kernel refuses user
//! namespaces (the sandbox needs them).

mod common;
use common::fixture::{Work, BIN};
use common::http::Server;
use common::{busybox, err, out};

use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;
use std::process::{Command, Output};

/// The package set the tests build: a chain a → b → c, a diamond d1 → (d2, d3) → d4,
/// and a failing builder. `tag` only changes an environment variable of `a` that its
/// builder ignores (for early cutoff).
const PACKAGES: &str = r#"
{ tag ? "one" }:
let
  bb = ./bb;
  mk = name: extra: script: derivation ({
    inherit name;
    system = builtins.currentSystem;
    builder = "${bb}/bin/sh";
    args = [ "-c" script ];
    PATH = "${bb}/bin";
  } // extra);
  a = mk "chain-a" { unused = tag; } "echo hello-from-the-log; echo A > $out";
  b = mk "chain-b" { } "{ cat ${a}; echo B; } > $out";
  c = mk "chain-c" { } "{ cat ${b}; echo C; } > $out";
  d1 = mk "dia-1" { } "echo D1 > $out";
  d2 = mk "dia-2" { } "{ cat ${d1}; echo D2; } > $out";
  d3 = mk "dia-3" { } "{ cat ${d1}; echo D3; } > $out";
  d4 = mk "dia-4" { } "{ cat ${d2} ${d3}; echo D4; } > $out";
  bad = mk "will-fail" { } "echo first-line; echo the-failure-tail; exit 3";
  probe = mk "probe" { } "echo ok > $out";
in { inherit a b c d1 d2 d3 d4 bad probe; }
"#;

/// A work directory holding `packages.nix`, `bb/`, `work/` (where commands run and
/// `result` links appear) and a store root.
fn fixture() -> Work {
    Work::new(&["cat", "echo", "mkdir", "ls", "sleep"])
        .packages(PACKAGES)
        .in_work_dir()
}

impl Work {
    /// `rocmx build --file packages.nix ARGS…`.
    fn build(&self, args: &[&str]) -> String {
        let nix = self.nix();
        let mut all = vec!["build", "--file", nix.to_str().unwrap()];
        all.extend_from_slice(args);
        self.ok(&all)
    }

    /// `build --json --no-link ARGS…`, parsed.
    fn build_json(&self, args: &[&str]) -> serde_json::Value {
        let mut all = vec!["--json", "--no-link"];
        all.extend_from_slice(args);
        let text = self.build(&all);
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
    }

    /// The `.drv` path of attribute `attr` (with `--argstr tag TAG`), through `rocmx eval`.
    fn drv_path(&self, attr: &str, tag: &str) -> String {
        let nix = self.nix();
        let expr = format!(
            "(import {} {{ tag = \"{tag}\"; }}).{attr}.drvPath",
            nix.display()
        );
        let s = self.ok(&["eval", "--expr", &expr]);
        s.trim().trim_matches('"').to_string()
    }

    fn read_output(&self, logical: &str) -> String {
        fs::read_to_string(self.physical(logical)).expect("read output")
    }
}

/// Whether builds can run here (see [`common::fixture::can_build`]): a trivial build.
fn can_build() -> bool {
    common::fixture::can_build(|| fixture().build_file(&["probe", "--no-link"]))
}

fn strings(v: &serde_json::Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .map(|x| x.as_str().expect("string").to_string())
        .collect()
}

fn position(list: &[String], x: &str) -> usize {
    list.iter()
        .position(|y| y == x)
        .unwrap_or_else(|| panic!("{x} not in {list:?}"))
}

#[test]
fn chain_and_diamond_build_in_dependency_order() {
    require_sandbox!();
    let f = fixture();
    let j = f.build_json(&["c", "d4"]);

    // The JSON shape: outputs (one per target), built, substituted.
    let obj = j.as_object().expect("object");
    let keys: Vec<&String> = obj.keys().collect();
    assert_eq!(keys.len(), 3, "{j}");
    assert!(obj["substituted"].as_array().unwrap().is_empty());
    let outputs = obj["outputs"].as_array().unwrap();
    assert_eq!(outputs.len(), 2, "{j}");
    let c_drv = f.drv_path("c", "one");
    let d4_drv = f.drv_path("d4", "one");
    assert_eq!(outputs[0]["drvPath"], c_drv.as_str());
    assert_eq!(outputs[1]["drvPath"], d4_drv.as_str());
    let c_out = outputs[0]["outputs"]["out"].as_str().unwrap().to_string();
    let d4_out = outputs[1]["outputs"]["out"].as_str().unwrap().to_string();
    assert!(
        c_out.starts_with("/rocmx/store/") && c_out.ends_with("-chain-c"),
        "{c_out}"
    );

    // Each output holds its dependencies' outputs: they were built first.
    assert_eq!(f.read_output(&c_out), "A\nB\nC\n");
    assert_eq!(f.read_output(&d4_out), "D1\nD2\nD1\nD3\nD4\n");

    // Everything was built, once, dependencies before dependents.
    let built = strings(&obj["built"]);
    assert_eq!(built.len(), 7, "{built:?}");
    let at = |attr: &str| position(&built, &f.drv_path(attr, "one"));
    assert!(at("a") < at("b") && at("b") < at("c"), "{built:?}");
    assert!(at("d1") < at("d2") && at("d1") < at("d3"), "{built:?}");
    assert!(at("d2") < at("d4") && at("d3") < at("d4"), "{built:?}");

    // The command folded the database's write-ahead log back in before exiting (it
    // keeps its store open to the end): the next command has no log to read back.
    let wal = f.root().join("var/rocmx/db.sqlite-wal");
    assert_eq!(
        fs::metadata(&wal).map(|m| m.len()).unwrap_or(0),
        0,
        "{wal:?}"
    );

    // A second time, nothing is built and the outputs are the same.
    let again = f.build_json(&["c", "d4"]);
    assert_eq!(strings(&again["built"]), Vec::<String>::new(), "{again}");
    assert_eq!(again["outputs"], j["outputs"]);

    // --print-out-paths prints the logical output paths.
    let printed = f.build(&["c", "d4", "--no-link", "--print-out-paths"]);
    assert_eq!(printed, format!("{c_out}\n{d4_out}\n"));
}

#[test]
fn result_links_are_gc_roots() {
    require_sandbox!();
    let f = fixture();
    f.build(&["c"]);
    let result = f.cwd().join("result");
    let target = fs::read_link(&result).expect("result is a symlink");
    assert!(target.starts_with(f.root().join("store")), "{target:?}");
    assert_eq!(fs::read_to_string(&result).unwrap(), "A\nB\nC\n");

    f.ok(&["store", "gc"]);
    assert!(target.exists(), "gc deleted a path a result link holds");
    assert_eq!(fs::read_to_string(&result).unwrap(), "A\nB\nC\n");

    fs::remove_file(&result).unwrap();
    f.ok(&["store", "gc"]);
    assert!(!target.exists(), "gc kept a path nothing roots any more");

    // Several targets: result, result-2; --out-link changes the base name.
    f.build(&["a", "d1", "--out-link", "out"]);
    assert_eq!(fs::read_to_string(f.cwd().join("out")).unwrap(), "A\n");
    assert_eq!(fs::read_to_string(f.cwd().join("out-2")).unwrap(), "D1\n");
    assert!(!f.cwd().join("result").exists());
}

#[test]
fn early_cutoff_rebuilds_only_the_changed_derivation() {
    require_sandbox!();
    let f = fixture();
    let first = f.build_json(&["c", "--argstr", "tag", "one"]);
    assert_eq!(strings(&first["built"]).len(), 3, "{first}");

    // `tag` changes a's derivation (an unused variable) but not its output bytes:
    // a is built again, b and c resolve to what they were and are not.
    let a2 = f.drv_path("a", "two");
    assert_ne!(a2, f.drv_path("a", "one"));
    let second = f.build_json(&["c", "--argstr", "tag", "two"]);
    assert_eq!(strings(&second["built"]), vec![a2], "{second}");
    assert_ne!(
        second["outputs"][0]["drvPath"],
        first["outputs"][0]["drvPath"]
    );
    assert_eq!(
        second["outputs"][0]["outputs"],
        first["outputs"][0]["outputs"]
    );
}

#[test]
fn a_failing_build_names_the_derivation_and_its_log_tail() {
    require_sandbox!();
    let f = fixture();
    let nix = f.nix();
    let o = f.run(&["build", "--file", nix.to_str().unwrap(), "bad"]);
    let e = err(&o);
    assert_eq!(o.status.code(), Some(100), "stderr: {e}");
    assert!(e.contains("error: "), "{e}");
    assert!(
        e.contains("will-fail.drv"),
        "the derivation is not named: {e}"
    );
    assert!(e.contains("the-failure-tail"), "no log tail: {e}");
    assert!(!e.contains("panicked"), "{e}");
    assert!(!f.cwd().join("result").exists());
}

#[test]
fn log_and_derivation_show() {
    require_sandbox!();
    let f = fixture();
    f.build(&["a", "b"]);
    let drv = f.drv_path("a", "one");

    // -L streams the logs of what is built, prefixed with the name.
    let nix = f.nix();
    let o = f.run(&[
        "build",
        "--file",
        nix.to_str().unwrap(),
        "a",
        "-L",
        "--no-link",
        "--argstr",
        "tag",
        "streamed",
    ]);
    assert!(o.status.success(), "{}", err(&o));
    assert!(
        err(&o).contains("chain-a> hello-from-the-log\n"),
        "{}",
        err(&o)
    );

    let log = f.ok(&["log", &drv]);
    assert!(log.contains("hello-from-the-log"), "{log}");
    // An output path (here through the result link) stands for its derivation.
    let log2 = f.ok(&["log", "result"]);
    assert_eq!(log, log2);

    let text = f.ok(&["derivation", "show", &drv]);
    let j: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    let d = &j[drv.as_str()];
    assert!(
        d["builder"].as_str().unwrap().ends_with("-bb/bin/sh"),
        "{j}"
    );
    assert_eq!(d["env"]["unused"], "one");
    assert_eq!(d["args"][0], "-c");
    assert!(d["outputs"]["out"].is_object(), "{j}");

    // The dependent's derivation lists a's as an input.
    // A derivation that is not in the store is reported as such.
    let o = f.run(&["derivation", "show", &f.drv_path("c", "one")]);
    assert_eq!(o.status.code(), Some(1));
    assert!(err(&o).contains("is not valid"), "{}", err(&o));

    let b = f.drv_path("b", "one");
    let jb: serde_json::Value =
        serde_json::from_str(&f.ok(&["derivation", "show", &b])).expect("JSON");
    assert!(jb[b.as_str()]["inputDrvs"][drv.as_str()].is_array(), "{jb}");
}

#[test]
fn dry_run_builds_nothing() {
    require_sandbox!();
    let f = fixture();
    let text = f.build(&["c", "--dry-run", "--json"]);
    let plan: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(strings(&plan["build"]).len(), 3, "{plan}");
    assert!(!f.cwd().join("result").exists());
    let text = f.build(&["c", "--dry-run"]);
    assert!(text.contains("chain-a.drv"), "{text}");

    f.build(&["c", "--no-link"]);
    let plan: serde_json::Value =
        serde_json::from_str(&f.build(&["c", "--dry-run", "--json"])).expect("JSON");
    assert!(strings(&plan["build"]).is_empty(), "{plan}");
    // The goal is valid, so its inputs are not needed at all (as in Nix).
    assert_eq!(strings(&plan["valid"]).len(), 1, "{plan}");
    assert!(
        strings(&plan["valid"])[0].ends_with("chain-c.drv"),
        "{plan}"
    );
}

#[test]
fn evaluation_errors_are_rendered_and_bad_targets_refused() {
    // No sandbox needed: these fail before anything is built.
    if busybox().is_none() {
        return;
    }
    let f = fixture();
    let nix = f.nix();
    let o = f.run(&["build", "--file", nix.to_str().unwrap(), "nope"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(err(&o).contains("attribute 'nope'"), "{}", err(&o));

    let o = f.run(&["build", "--expr", "1 + 1"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(err(&o).contains("not a derivation"), "{}", err(&o));

    let o = f.run(&["build", "--expr", "let x = ; in x"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(err(&o).contains("error"), "{}", err(&o));

    let o = f.run(&["build"]);
    assert_eq!(o.status.code(), Some(2));
}

/// Writes `name.nix` into the fixture and builds it: `rocmx build --file name.nix ARGS`.
fn run_file(f: &Work, name: &str, text: &str, args: &[&str]) -> Output {
    let path = f.dir.path().join(name);
    fs::write(&path, text).unwrap();
    let mut all = vec!["build", "--file", path.to_str().unwrap()];
    all.extend_from_slice(args);
    f.run(&all)
}

const MK: &str = r#"
  bb = ./bb;
  mk = name: extra: script: derivation ({
    inherit name;
    system = builtins.currentSystem;
    builder = "${bb}/bin/sh";
    args = [ "-c" script ];
    PATH = "${bb}/bin";
  } // extra);
"#;

#[test]
fn wide_fan_out_builds_in_dependency_order() {
    require_sandbox!();
    let f = fixture();
    let text = format!(
        r#"let {MK}
  root = mk "fan-root" {{ }} "echo R > $out";
  leaves = builtins.genList (i: mk "fan-${{toString i}}" {{ }} "{{ cat ${{root}}; echo L${{toString i}}; }} > $out") 12;
  top = mk "fan-top" {{ }} "cat ${{toString leaves}} > $out";
in {{ inherit top; }}"#
    );
    let o = run_file(
        &f,
        "fan.nix",
        &text,
        &["top", "-j", "2", "--json", "--no-link"],
    );
    assert!(o.status.success(), "{}", err(&o));
    let j: serde_json::Value = serde_json::from_str(&out(&o)).expect("JSON");
    let built = strings(&j["built"]);
    assert_eq!(built.len(), 14, "{built:?}");
    assert!(built[0].ends_with("-fan-root.drv"), "{built:?}");
    assert!(built[13].ends_with("-fan-top.drv"), "{built:?}");
    let top = f.read_output(j["outputs"][0]["outputs"]["out"].as_str().unwrap());
    let expected: String = (0..12).map(|i| format!("R\nL{i}\n")).collect();
    assert_eq!(top, expected);
}

#[test]
fn two_jobs_really_run_at_once() {
    require_sandbox!();
    // Two fixed-output builds fetch from a server that answers only when both wait at
    // once: with -j 2 they both get `together`; one at a time, the first would time out.
    let server = Server::builder().barrier("barrier", 2).start();
    let f = fixture();
    let text = format!(
        r#"let {MK}
  fetch = n: mk "rendezvous-${{n}}" {{
    outputHashMode = "flat"; outputHashAlgo = "sha256";
    outputHash = "{hash}";
    tag = n;
  }} "wget -q -O $out http://127.0.0.1:{port}/barrier";
in {{ one = fetch "1"; two = fetch "2"; }}"#,
        hash = sha256_sri(b"together\n"),
        port = server.port()
    );
    fs::create_dir_all(f.dir.path().join("bb/bin")).unwrap();
    let _ = symlink("sh", f.dir.path().join("bb/bin/wget"));
    let o = run_file(
        &f,
        "rendezvous.nix",
        &text,
        &[
            "one",
            "two",
            "-j",
            "2",
            "--json",
            "--no-link",
            "--log-format",
            "json",
        ],
    );
    assert!(o.status.success(), "{}", err(&o));
    let j: serde_json::Value = serde_json::from_str(&out(&o)).expect("JSON");
    assert_eq!(strings(&j["built"]).len(), 2, "{j}");
    for i in 0..2 {
        let p = j["outputs"][i]["outputs"]["out"].as_str().unwrap();
        assert_eq!(f.read_output(p), "together\n");
    }
    // The events say the same: both started before either finished.
    let actions: Vec<String> = err(&o)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["action"].as_str().map(str::to_string))
        .filter(|a| a == "start" || a == "built")
        .collect();
    assert_eq!(actions, ["start", "start", "built", "built"], "{}", err(&o));
}

fn sha256_sri(data: &[u8]) -> String {
    let o = Command::new(BIN)
        .args(["hash", "file", "--type", "sha256", "--sri", "/dev/stdin"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write as _;
            c.stdin.take().unwrap().write_all(data)?;
            c.wait_with_output()
        })
        .expect("rocmx hash");
    String::from_utf8(o.stdout).unwrap().trim().to_string()
}

#[test]
fn keep_going_builds_everything_that_does_not_depend_on_the_failure() {
    require_sandbox!();
    let f = fixture();
    let text = format!(
        r#"let {MK}
  bad = mk "kg-bad" {{ }} "echo the-failure-tail; exit 7";
  after = mk "kg-after-bad" {{ }} "cat ${{bad}} > $out";
  top = mk "kg-top" {{ }} "cat ${{after}} > $out";
  a = mk "kg-a" {{ }} "echo A > $out";
  b = mk "kg-b" {{ }} "{{ cat ${{a}}; echo B; }} > $out";
in {{ inherit top b; }}"#
    );
    // Without --keep-going the run stops at the failure (one build at a time: the
    // failing one is first in line).
    let o = run_file(&f, "kg.nix", &text, &["top", "b", "--no-link"]);
    let e = err(&o);
    assert_eq!(o.status.code(), Some(100), "{e}");
    assert!(e.contains("kg-bad.drv"), "{e}");
    assert!(e.contains("the-failure-tail"), "{e}");
    assert!(e.contains("kg-b.drv' was not built"), "{e}");

    let o = run_file(
        &f,
        "kg.nix",
        &text,
        &["top", "b", "--keep-going", "--json", "--no-link"],
    );
    let e = err(&o);
    assert_eq!(o.status.code(), Some(100), "{e}");
    let j: serde_json::Value = serde_json::from_str(&out(&o)).expect("JSON");
    let built = strings(&j["built"]);
    assert_eq!(built.len(), 2, "{j}");
    assert!(
        built[0].ends_with("-kg-a.drv") && built[1].ends_with("-kg-b.drv"),
        "{j}"
    );
    let outputs = j["outputs"].as_array().unwrap();
    assert_eq!(outputs.len(), 1, "{j}");
    assert_eq!(
        f.read_output(outputs[0]["outputs"]["out"].as_str().unwrap()),
        "A\nB\n"
    );
    // The failure names the derivation, its log tail, and what was skipped.
    assert!(e.contains("kg-bad.drv"), "{e}");
    assert!(e.contains("the-failure-tail"), "{e}");
    assert!(e.contains("exit code 7"), "{e}");
    assert!(e.contains("2 derivation(s) were not built"), "{e}");
    assert!(
        e.contains("kg-after-bad.drv") && e.contains("kg-top.drv"),
        "{e}"
    );
    assert!(!e.contains("panicked"), "{e}");
}

#[test]
fn check_reports_a_non_deterministic_build() {
    require_sandbox!();
    let f = fixture();
    let text = format!(
        r#"let {MK}
  nondet = mk "nondet" {{ }} "mkdir $out; echo same > $out/stable; cat /proc/uptime /proc/sys/kernel/random/uuid > $out/when";
  det = mk "det" {{ }} "mkdir $out; echo same > $out/stable";
in {{ inherit nondet det; }}"#
    );
    // --check needs something to compare with.
    let o = run_file(&f, "check.nix", &text, &["nondet", "--check", "--no-link"]);
    assert_eq!(o.status.code(), Some(1), "{}", err(&o));
    assert!(err(&o).contains("has not been built yet"), "{}", err(&o));

    let o = run_file(
        &f,
        "check.nix",
        &text,
        &["nondet", "det", "--no-link", "--print-out-paths"],
    );
    assert!(o.status.success(), "{}", err(&o));
    let paths: Vec<String> = out(&o).lines().map(str::to_string).collect();

    let o = run_file(&f, "check.nix", &text, &["det", "--check", "--no-link"]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));

    let o = run_file(
        &f,
        "check.nix",
        &text,
        &["nondet", "--check", "--no-link", "--keep-failed"],
    );
    let e = err(&o);
    assert_eq!(o.status.code(), Some(104), "{e}");
    assert!(e.contains("is not deterministic"), "{e}");
    // The differing file, with sizes and hashes; the stable one is not listed.
    let line = e
        .lines()
        .find(|l| l.trim_start().starts_with("when:"))
        .unwrap_or_else(|| panic!("no line for 'when': {e}"));
    assert!(
        line.contains("bytes") && line.contains("blake3:") && line.contains('→'),
        "{line}"
    );
    assert!(!e.contains("stable:"), "{e}");
    let kept = format!("{}.check", f.physical(&paths[0]).display());
    assert!(Path::new(&kept).join("when").exists(), "{e}");
    // The registered output is untouched.
    assert_eq!(
        fs::read_to_string(f.physical(&paths[0]).join("stable")).unwrap(),
        "same\n"
    );
    f.ok(&["store", "verify", "--check-contents"]);
}

#[test]
fn multiple_outputs_refer_to_each_other_one_way() {
    require_sandbox!();
    let f = fixture();
    let text = format!(
        r#"let {MK}
  lib = mk "multi" {{ outputs = [ "out" "dev" ]; }} "mkdir $out $dev; echo lib > $out/lib; echo $out > $dev/points-to";
  user = mk "multi-user" {{ }} "cat ${{lib.dev}}/points-to > $out";
in {{ inherit lib user; }}"#
    );
    let o = run_file(&f, "multi.nix", &text, &["lib", "user", "--json"]);
    assert!(o.status.success(), "{}", err(&o));
    let j: serde_json::Value = serde_json::from_str(&out(&o)).expect("JSON");
    let outs = &j["outputs"][0]["outputs"];
    let out_p = outs["out"].as_str().unwrap();
    let dev_p = outs["dev"].as_str().unwrap();
    assert!(
        out_p.ends_with("-multi") && dev_p.ends_with("-multi-dev"),
        "{j}"
    );
    assert_eq!(
        f.read_output(&format!("{dev_p}/points-to")),
        format!("{out_p}\n")
    );
    let user = j["outputs"][1]["outputs"]["out"].as_str().unwrap();
    assert_eq!(f.read_output(user), format!("{out_p}\n"));
    // result, result-dev (first target), result-2 (second).
    assert_eq!(
        fs::read_to_string(f.cwd().join("result/lib")).unwrap(),
        "lib\n"
    );
    assert!(f.cwd().join("result-dev/points-to").exists());
    assert!(f.cwd().join("result-2").exists());
    // dev refers to out, and the store knows it.
    let refs = f.ok(&["path-info", "--json", dev_p]);
    assert!(refs.contains(out_p), "{refs}");

    // Outputs that refer to each other both ways cannot be content-addressed.
    let text = format!(
        r#"let {MK}
in {{ cyc = mk "cyc" {{ outputs = [ "out" "dev" ]; }} "mkdir $out $dev; echo $dev > $out/x; echo $out > $dev/y"; }}"#
    );
    let o = run_file(&f, "cyc.nix", &text, &["cyc", "--no-link"]);
    assert_eq!(o.status.code(), Some(100), "{}", err(&o));
    assert!(err(&o).contains("cycle"), "{}", err(&o));
}

#[test]
fn builtin_fetchurl_from_a_loopback_server_and_a_wrong_hash() {
    require_sandbox!();
    let server = Server::builder().file("file", b"fetched bytes\n").start();
    let f = fixture();
    let good = sha256_sri(b"fetched bytes\n");
    let wrong = sha256_sri(b"other bytes\n");
    let fod = |hash: &str| {
        format!(
            r#"{{ x = derivation {{
  name = "fetched"; builder = "builtin:fetchurl"; system = "builtin";
  url = "http://127.0.0.1:{port}/file";
  outputHashMode = "flat"; outputHashAlgo = "sha256"; outputHash = "{hash}";
}}; }}"#,
            port = server.port()
        )
    };
    let o = run_file(
        &f,
        "fetch.nix",
        &fod(&good),
        &["x", "--no-link", "--print-out-paths"],
    );
    assert!(o.status.success(), "{}", err(&o));
    let p = out(&o).trim().to_string();
    assert_eq!(f.read_output(&p), "fetched bytes\n");

    let o = run_file(&f, "fetch2.nix", &fod(&wrong), &["x", "--no-link"]);
    let e = err(&o);
    assert_eq!(o.status.code(), Some(102), "{e}");
    assert!(e.contains("hash mismatch"), "{e}");
    assert!(
        e.contains(&wrong) && e.contains(&good),
        "expected and actual: {e}"
    );
    // Nothing was registered under the wrong hash.
    let wrong_path = f.ok(&[
        "eval",
        "--expr",
        &format!("(import {}/fetch2.nix).x.outPath", f.dir.path().display()),
    ]);
    let wrong_path = wrong_path.trim().trim_matches('"');
    let o = f.run(&["path-info", wrong_path]);
    assert_ne!(o.status.code(), Some(0), "{}", out(&o));
    assert!(!f.physical(wrong_path).exists());

    // A server that answers 404: the URL and the status are named.
    let text = fod(&good)
        .replace("/file", "/missing")
        .replace("fetched", "missing");
    let o = run_file(&f, "fetch3.nix", &text, &["x", "--no-link"]);
    assert_eq!(o.status.code(), Some(100), "{}", err(&o));
    assert!(err(&o).contains("404"), "{}", err(&o));
}

#[test]
fn a_builder_that_cannot_run_is_named_and_fails_the_run() {
    require_sandbox!();
    let f = fixture();
    let o = f.run(&[
        "build",
        "--no-link",
        "-E",
        "derivation { name = \"no-builder\"; system = builtins.currentSystem; builder = \"/nonexistent\"; }",
    ]);
    let e = err(&o);
    assert_eq!(o.status.code(), Some(100), "{e}");
    assert!(
        e.contains("no-builder.drv': executing the builder /nonexistent: ENOENT"),
        "{e}"
    );
    // Said once, by the failure itself, and summed up once.
    assert_eq!(e.matches("ENOENT").count(), 1, "{e}");
    assert!(!e.contains("panicked"), "{e}");

    // -j 0 is refused before anything runs.
    let o = f.run(&[
        "build",
        "--no-link",
        "-j",
        "0",
        "-E",
        "derivation { name = \"x\"; system = \"x\"; builder = \"/x\"; }",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(err(&o).contains("--max-jobs 0"), "{}", err(&o));
}
