//! End-to-end tests of `rocmx build`, `rocmx log` and `rocmx derivation show`, run
//! against stores in temporary directories (`--store DIR`, never /rocmx).
//!
//! The builder is a static busybox reached through a path literal (`./bb`, holding
//! `bin/sh` and applet symlinks), so the expressions need nothing from the host.
//! The tests skip, saying why, when busybox is missing or the kernel refuses user
//! namespaces (the sandbox needs them).

use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

const BIN: &str = env!("CARGO_BIN_EXE_rocmx");

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

fn busybox() -> Option<PathBuf> {
    ["/usr/bin/busybox", "/bin/busybox"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

/// A work directory holding `packages.nix`, `bb/`, and a store root; made writable
/// again before it is removed.
struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().expect("tempdir");
        let bin = dir.path().join("bb/bin");
        fs::create_dir_all(&bin).unwrap();
        fs::copy(busybox().expect("busybox"), bin.join("sh")).unwrap();
        for applet in ["cat", "echo", "mkdir", "ls", "sleep"] {
            symlink("sh", bin.join(applet)).unwrap();
        }
        fs::write(dir.path().join("packages.nix"), PACKAGES).unwrap();
        fs::create_dir_all(dir.path().join("work")).unwrap();
        Fixture { dir }
    }

    fn root(&self) -> PathBuf {
        self.dir.path().join("root")
    }

    fn nix(&self) -> PathBuf {
        self.dir.path().join("packages.nix")
    }

    /// The directory commands run in (where `result` links appear).
    fn work(&self) -> PathBuf {
        self.dir.path().join("work")
    }

    /// `rocmx --store ROOT <args>`, run in the work directory.
    fn run(&self, args: &[&str]) -> Output {
        Command::new(BIN)
            .env_remove("ROCMX_STORE")
            .current_dir(self.work())
            .arg("--store")
            .arg(self.root())
            .args(args)
            .output()
            .expect("run rocmx")
    }

    fn ok(&self, args: &[&str]) -> String {
        let o = self.run(args);
        assert!(
            o.status.success(),
            "rocmx {args:?} failed ({:?}):\nstdout: {}\nstderr: {}",
            o.status,
            out(&o),
            err(&o)
        );
        out(&o)
    }

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

    fn physical(&self, logical: &str) -> PathBuf {
        let base = logical.strip_prefix("/rocmx/store/").expect("logical path");
        self.root().join("store").join(base)
    }

    fn read_output(&self, logical: &str) -> String {
        fs::read_to_string(self.physical(logical)).expect("read output")
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        make_writable(self.dir.path());
    }
}

fn make_writable(p: &Path) {
    if let Ok(m) = fs::symlink_metadata(p) {
        if m.is_dir() {
            let _ = fs::set_permissions(p, fs::Permissions::from_mode(0o755));
            if let Ok(rd) = fs::read_dir(p) {
                for e in rd.flatten() {
                    make_writable(&e.path());
                }
            }
        } else if m.is_file() {
            let _ = fs::set_permissions(p, fs::Permissions::from_mode(0o644));
        }
    }
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Whether builds can run here: busybox exists and a trivial build succeeds. When it
/// fails because of user namespaces, the reason is printed once and the tests skip;
/// any other failure is a test failure.
fn can_build() -> bool {
    static OK: OnceLock<bool> = OnceLock::new();
    *OK.get_or_init(|| {
        if busybox().is_none() {
            eprintln!("SKIP: no busybox (install busybox-static)");
            return false;
        }
        let f = Fixture::new();
        let nix = f.nix();
        let o = f.run(&[
            "build",
            "--file",
            nix.to_str().unwrap(),
            "probe",
            "--no-link",
        ]);
        if o.status.success() {
            return true;
        }
        let e = err(&o);
        if e.to_lowercase().contains("namespace") {
            eprintln!("SKIP: the sandbox cannot run here:\n{e}");
            return false;
        }
        panic!("a trivial build failed:\n{e}");
    })
}

macro_rules! require_sandbox {
    () => {
        if !can_build() {
            return;
        }
    };
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
    let f = Fixture::new();
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
    let f = Fixture::new();
    f.build(&["c"]);
    let result = f.work().join("result");
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
    assert_eq!(fs::read_to_string(f.work().join("out")).unwrap(), "A\n");
    assert_eq!(fs::read_to_string(f.work().join("out-2")).unwrap(), "D1\n");
    assert!(!f.work().join("result").exists());
}

#[test]
fn early_cutoff_rebuilds_only_the_changed_derivation() {
    require_sandbox!();
    let f = Fixture::new();
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
    let f = Fixture::new();
    let nix = f.nix();
    let o = f.run(&["build", "--file", nix.to_str().unwrap(), "bad"]);
    let e = err(&o);
    assert_eq!(o.status.code(), Some(1), "stderr: {e}");
    assert!(e.contains("error: "), "{e}");
    assert!(
        e.contains("will-fail.drv"),
        "the derivation is not named: {e}"
    );
    assert!(e.contains("the-failure-tail"), "no log tail: {e}");
    assert!(!e.contains("panicked"), "{e}");
    assert!(!f.work().join("result").exists());
}

#[test]
fn log_and_derivation_show() {
    require_sandbox!();
    let f = Fixture::new();
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
    let f = Fixture::new();
    let text = f.build(&["c", "--dry-run", "--json"]);
    let plan: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(strings(&plan["build"]).len(), 3, "{plan}");
    assert!(!f.work().join("result").exists());
    let text = f.build(&["c", "--dry-run"]);
    assert!(text.contains("chain-a.drv"), "{text}");

    f.build(&["c", "--no-link"]);
    let plan: serde_json::Value =
        serde_json::from_str(&f.build(&["c", "--dry-run", "--json"])).expect("JSON");
    assert!(strings(&plan["build"]).is_empty(), "{plan}");
    assert_eq!(strings(&plan["valid"]).len(), 3, "{plan}");
}

#[test]
fn evaluation_errors_are_rendered_and_bad_targets_refused() {
    // No sandbox needed: these fail before anything is built.
    if busybox().is_none() {
        return;
    }
    let f = Fixture::new();
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
