//! `rocmx verify` (issue 13): derivations that are deliberately not reproducible, one
//! per variation, are each caught and attributed to their variation alone; a
//! deterministic derivation passes every variation; one that differs without any
//! variation is called non-deterministic; nothing rebuilt is registered.
//!
//! Builders are a static busybox (`./bb`); the `time` case needs a dynamically linked
//! `date` for libfaketime to act on, so it runs on a small root made of the host's
//! dash, date and C library (`./root`), and is skipped, saying why, without Debian's
//! `libfaketime`.

mod common;
use common::fixture::Work;
use common::{err, out};

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const FAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

const PACKAGES: &str = r#"
let
  bb = ./bb;
  mk = name: script: derivation {
    inherit name;
    system = builtins.currentSystem;
    builder = "${bb}/bin/sh";
    args = [ "-c" script ];
    PATH = "${bb}/bin";
  };
in rec {
  det = mk "v-det" "echo deterministic > $out; mkdir -p d; echo a > d/a; cat d/a >> $out";
  dep = mk "v-dep" "cat ${det} > $out; echo on top >> $out";
  timezone = mk "v-timezone" "date -d @0 +%H%z > $out";
  locale = mk "v-locale" ''
    if [ "''${LC_ALL:-$LANG}" = C.UTF-8 ]; then printf 'b\nB\na\n' | sort > $out
    else printf 'b\nB\na\n' | sort -f > $out; fi'';
  umask = mk "v-umask" "echo x > f; stat -c %a f > $out";
  cores = mk "v-cores" "nproc > $out";
  # The order of a fixed set of names (their values vary with other variations).
  envorder = mk "v-env-order" "env | cut -d= -f1 | grep -x -e HOME -e PATH -e TMPDIR -e name -e out > $out";
  dirorder = mk "v-dir-order" ''
    mkdir d; for n in q w e r t y u i o p a s d f g h j k l z x c v b n m; do echo $n > d/$n; done
    find d > $out'';
  buildpath = mk "v-build-path" "pwd > $out";
  user = mk "v-user" "id > $out";
  hostname = mk "v-hostname" "hostname > $out; cat /proc/sys/kernel/domainname >> $out";
  kernel = mk "v-kernel" "uname -r | cut -d. -f1 > $out";
  nondet = mk "v-nondet" "cat /proc/sys/kernel/random/uuid > $out";
  fails = mk "v-fails-elsewhere" "[ \"$(pwd)\" = /build ] && echo ok > $out";
  time = derivation {
    name = "v-time";
    system = builtins.currentSystem;
    builder = "/bin/sh";
    args = [ "-c" "date -u +%Y-%m > $out" ];
    rootfs = ./root;
    PATH = "/bin";
  };
}
"#;

/// Copies `file` (following links) into `root` at the same path.
fn copy_in(root: &Path, file: &Path) {
    let dest = root.join(file.strip_prefix("/").unwrap());
    fs::create_dir_all(dest.parent().unwrap()).unwrap();
    fs::copy(file, &dest).unwrap();
}

/// The shared libraries `exe` needs (absolute paths `ldd` names).
fn libs(exe: &Path) -> Vec<PathBuf> {
    let o = Command::new("ldd").arg(exe).output().unwrap();
    out(&o)
        .lines()
        .filter_map(|l| {
            l.split_whitespace()
                .find(|w| w.starts_with('/'))
                .map(PathBuf::from)
        })
        .collect()
}

/// A work directory with `packages.nix`, `bb/`, the small root of the `time` case
/// (`root/`, so the store is `store-root/`).
fn fixture() -> Work {
    let w = Work::new(&[
        "cat", "echo", "date", "printf", "sort", "stat", "nproc", "env", "grep", "mkdir", "find",
        "pwd", "id", "hostname", "uname", "cut", "[",
    ])
    .store_at("store-root");
    // The small dynamically linked root of the `time` case.
    let root = w.path("root");
    for (exe, name) in [("/bin/dash", "bin/sh"), ("/bin/date", "bin/date")] {
        let dest = root.join(name);
        fs::create_dir_all(dest.parent().unwrap()).unwrap();
        fs::copy(exe, &dest).unwrap();
        for l in libs(Path::new(exe)) {
            copy_in(&root, &l);
        }
    }
    if Path::new(FAKETIME).exists() {
        for l in libs(Path::new(FAKETIME)) {
            copy_in(&root, &l);
        }
    }
    w.packages(PACKAGES)
}

impl Work {
    /// `rocmx verify --file packages.nix ATTR --json ARGS…`, parsed.
    fn verify(&self, attr: &str, args: &[&str]) -> (Output, serde_json::Value) {
        let mut all = vec!["verify", "--file", "packages.nix", attr, "--json"];
        all.extend_from_slice(args);
        let o = self.run(&all);
        let j = serde_json::from_str(&out(&o))
            .unwrap_or_else(|e| panic!("verify {attr}: not JSON ({e}):\n{}\n{}", out(&o), err(&o)));
        (o, j)
    }

    fn store_entries(&self) -> BTreeSet<String> {
        let Ok(rd) = fs::read_dir(self.root().join("store")) else {
            return BTreeSet::new();
        };
        rd.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect()
    }
}

/// Whether builds can run here (see [`common::fixture::can_build`]).
fn can_build() -> bool {
    common::fixture::can_build(|| {
        fixture().run(&["build", "--file", "packages.nix", "det", "--no-link"])
    })
}

/// The one derivation's entry of a report.
fn entry<'a>(j: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    j["derivations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == name)
        .unwrap_or_else(|| panic!("{name} not in {j}"))
}

fn causes(e: &serde_json::Value) -> BTreeSet<String> {
    e["causes"]
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default()
}

#[test]
fn each_variation_is_caught_and_attributed_to_itself() {
    require_sandbox!();
    let f = fixture();
    let attrs = [
        "timezone",
        "locale",
        "umask",
        "cores",
        "envorder",
        "dirorder",
        "buildpath",
        "user",
        "hostname",
        "kernel",
    ];
    let mut build = vec!["build", "--file", "packages.nix", "--no-link"];
    build.extend(attrs);
    let o = f.run(&build);
    assert!(o.status.success(), "{}", err(&o));
    for (attr, name, variation) in [
        ("timezone", "v-timezone", "timezone"),
        ("locale", "v-locale", "locale"),
        ("umask", "v-umask", "umask"),
        ("cores", "v-cores", "cores"),
        ("envorder", "v-env-order", "env-order"),
        ("dirorder", "v-dir-order", "dir-order"),
        ("buildpath", "v-build-path", "build-path"),
        ("user", "v-user", "user"),
        ("hostname", "v-hostname", "hostname"),
        ("kernel", "v-kernel", "kernel"),
    ] {
        let before = f.store_entries();
        let (o, j) = f.verify(attr, &[]);
        assert_eq!(o.status.code(), Some(104), "{attr}: {}", err(&o));
        let e = entry(&j, name);
        assert_eq!(e["status"], "differs", "{attr}: {e}");
        assert_eq!(e["nondeterministic"], false, "{attr}: {e}");
        assert_eq!(
            causes(e),
            [variation.to_string()].into(),
            "{attr}: caused by exactly its variation: {e}"
        );
        // The differing file is named.
        let diffs = e["outputs"][0]["differences"].as_array().unwrap();
        assert!(!diffs.is_empty(), "{attr}: {e}");
        assert_eq!(j["reproducible"], 0, "{attr}");
        assert_eq!(j["verified"], 1, "{attr}");
        // Nothing rebuilt was registered (everything was built before the loop).
        assert_eq!(
            f.store_entries(),
            before,
            "{attr}: a verify registered something"
        );
        let again = f.store_entries();
        let (_, _) = f.verify(attr, &["--vary", variation]);
        assert_eq!(
            f.store_entries(),
            again,
            "{attr}: a verify registered something"
        );
    }
}

#[test]
fn a_deterministic_closure_passes_every_variation() {
    require_sandbox!();
    let f = fixture();
    let (o, j) = f.verify("dep", &["--rounds", "2"]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert_eq!(j["verified"], 2, "dep and det: {j}");
    assert_eq!(j["reproducible"], 2, "{j}");
    for n in ["v-det", "v-dep"] {
        assert_eq!(entry(&j, n)["status"], "reproducible", "{j}");
    }
    // --no-deps verifies the top only.
    let (o, j) = f.verify("dep", &["--no-deps"]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert_eq!(j["verified"], 1, "{j}");
    // The plain report ends with the summary line.
    let o = f.run(&["verify", "--file", "packages.nix", "dep"]);
    assert!(
        out(&o)
            .trim_end()
            .ends_with("2 of 2 derivations reproducible"),
        "{}",
        out(&o)
    );
}

#[test]
fn differing_without_variations_is_nondeterminism() {
    require_sandbox!();
    let f = fixture();
    let (o, j) = f.verify("nondet", &[]);
    assert_eq!(o.status.code(), Some(104), "{}", err(&o));
    let e = entry(&j, "v-nondet");
    assert_eq!(e["status"], "differs");
    assert_eq!(e["nondeterministic"], true, "{e}");
    assert!(causes(e).is_empty(), "{e}");
    let o = f.run(&["verify", "--file", "packages.nix", "nondet"]);
    assert!(
        out(&o).contains("v-nondet: NOT reproducible: differs even without variations"),
        "{}",
        out(&o)
    );
}

#[test]
fn a_build_that_fails_under_a_variation_is_reported_with_it() {
    require_sandbox!();
    let f = fixture();
    let (o, j) = f.verify("fails", &[]);
    assert_eq!(o.status.code(), Some(100), "{}", err(&o));
    let e = entry(&j, "v-fails-elsewhere");
    assert_eq!(e["status"], "failed", "{e}");
    let c: Vec<&str> = e["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(c, ["build-path"], "{e}");
}

#[test]
fn the_clock_is_shifted_with_libfaketime() {
    require_sandbox!();
    if !Path::new(FAKETIME).exists() {
        eprintln!("SKIP: no {FAKETIME} (apt-get install libfaketime)");
        return;
    }
    let f = fixture();
    let (o, j) = f.verify("time", &[]);
    assert_eq!(o.status.code(), Some(104), "{}", err(&o));
    let e = entry(&j, "v-time");
    assert_eq!(e["status"], "differs", "{e}");
    assert_eq!(causes(e), ["time".to_string()].into(), "{e}");
}

#[test]
fn bad_variation_names_are_refused_with_a_suggestion() {
    let f = fixture();
    let o = f.run(&["verify", "--file", "packages.nix", "det", "--vary", "umsk"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        err(&o).contains("unknown variation 'umsk' (did you mean 'umask'?)"),
        "{}",
        err(&o)
    );
    let o = f.run(&["verify", "--file", "packages.nix", "det", "--rounds", "0"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn diffoscope_reports_are_written_and_the_rebuilt_copy_removed() {
    require_sandbox!();
    if Command::new("diffoscope")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!(
            "SKIP: no diffoscope (apt-get install --no-install-recommends diffoscope-minimal)"
        );
        return;
    }
    let f = fixture();
    let reports = f.dir.path().join("reports");
    let (o, j) = f.verify(
        "umask",
        &["--vary", "umask", "--diffoscope", reports.to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(104), "{}", err(&o));
    let e = entry(&j, "v-umask");
    let files: Vec<&str> = e["diffoscope"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(files.len(), 2, "{e}");
    let text = fs::read_to_string(reports.join("v-umask-out.txt")).unwrap();
    assert!(text.contains("644") && text.contains("664"), "{text}");
    assert!(reports.join("v-umask-out.html").is_file());
    assert!(
        f.store_entries().iter().all(|n| !n.ends_with(".check")),
        "the rebuilt copy was left in the store"
    );
}

#[test]
fn diff_compares_two_paths_file_by_file() {
    require_sandbox!();
    let f = fixture();
    let o = f.run(&[
        "build",
        "--file",
        "packages.nix",
        "det",
        "dep",
        "--no-link",
        "--print-out-paths",
    ]);
    assert!(o.status.success(), "{}", err(&o));
    let paths: Vec<String> = out(&o).lines().map(String::from).collect();
    assert_eq!(paths.len(), 2);
    // The same path: identical.
    let o = f.run(&["diff", &paths[0], &paths[0]]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert_eq!(out(&o).trim(), "identical");
    // Two outputs: the differing file is named, with both sides' sizes.
    let o = f.run(&["diff", &paths[0], &paths[1], "--json"]);
    assert_eq!(o.status.code(), Some(104), "{}", err(&o));
    let j: serde_json::Value = serde_json::from_str(&out(&o)).unwrap();
    assert_eq!(j["identical"], false);
    assert_eq!(j["differences"][0]["path"], "", "{j}");
    let o = f.run(&["diff", &paths[0], &paths[1], "--no-diffoscope"]);
    assert_eq!(o.status.code(), Some(104));
    assert!(out(&o).starts_with(".: "), "{}", out(&o));
    // Plain trees outside the store work too; a missing path is an error naming it.
    let a = f.dir.path().join("a");
    let b = f.dir.path().join("b");
    fs::create_dir_all(a.join("sub")).unwrap();
    fs::create_dir_all(b.join("sub")).unwrap();
    fs::write(a.join("sub/x"), "one").unwrap();
    fs::write(b.join("sub/x"), "two").unwrap();
    fs::write(b.join("extra"), "").unwrap();
    let o = f.run(&[
        "diff",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--no-diffoscope",
    ]);
    assert_eq!(o.status.code(), Some(104));
    let text = out(&o);
    assert!(text.contains("extra: only in the new output"), "{text}");
    assert!(text.contains("sub/x: "), "{text}");
    let o = f.run(&["diff", a.to_str().unwrap(), "/nonexistent-rocmx-path"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        err(&o).contains("'/nonexistent-rocmx-path' is neither in the store"),
        "{}",
        err(&o)
    );
}
