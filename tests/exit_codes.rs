//! `rocmx build`'s exit codes follow Nix's (issue 14, item 6): 100 a failed build,
//! 101 a timeout, 102 a fixed-output hash mismatch, 104 a `--check` difference, the
//! bits combined when several happen; 1 an evaluation error, 2 a bad command line.
//!
//! Builds use a static busybox (`./bb`) against a store in a temporary directory and
//! skip, saying why, when busybox is missing or the sandbox cannot run.

mod common;
use common::{busybox, err, make_writable};

use std::fs;
use std::os::unix::fs::symlink;
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_rocmx");

/// The SRI SHA-256 of the empty file: not what the fixed-output builders below write.
const EMPTY_SHA256: &str = "sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=";

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
in {
  ok = mk "ec-ok" "echo ok > $out";
  bad = mk "ec-bad" "echo the-failure; exit 3";
  slow = mk "ec-slow" "sleep 30; echo late > $out";
  nondet = mk "ec-nondet" "cat /proc/sys/kernel/random/uuid > $out";
  wronghash = derivation {
    name = "ec-wrong-hash";
    system = builtins.currentSystem;
    builder = "${bb}/bin/sh";
    args = [ "-c" "echo not-empty > $out" ];
    outputHashMode = "flat"; outputHashAlgo = "sha256";
    outputHash = "@EMPTY@";
  };
}
"#;

/// A work directory with `packages.nix`, `bb/` and a store root.
struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().expect("tempdir");
        let bin = dir.path().join("bb/bin");
        fs::create_dir_all(&bin).unwrap();
        fs::copy(busybox().expect("busybox"), bin.join("sh")).unwrap();
        for applet in ["cat", "echo", "sleep"] {
            symlink("sh", bin.join(applet)).unwrap();
        }
        fs::write(
            dir.path().join("packages.nix"),
            PACKAGES.replace("@EMPTY@", EMPTY_SHA256),
        )
        .unwrap();
        Fixture { dir }
    }

    /// `rocmx --store ROOT ARGS…` with no configuration file.
    fn run(&self, args: &[&str]) -> Output {
        Command::new(BIN)
            .env_remove("ROCMX_STORE")
            .env("ROCMX_CONFIG", "")
            .current_dir(self.dir.path())
            .arg("--store")
            .arg(self.dir.path().join("root"))
            .args(args)
            .output()
            .expect("run rocmx")
    }

    /// `rocmx build --file packages.nix --no-link ARGS…`.
    fn build(&self, args: &[&str]) -> Output {
        let mut all = vec!["build", "--file", "packages.nix", "--no-link"];
        all.extend_from_slice(args);
        self.run(&all)
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        make_writable(self.dir.path());
    }
}

/// Whether builds can run here (busybox, user namespaces); says why not once.
fn can_build() -> bool {
    static OK: OnceLock<bool> = OnceLock::new();
    *OK.get_or_init(|| {
        if busybox().is_none() {
            eprintln!("SKIP: no busybox (install busybox-static)");
            return false;
        }
        let o = Fixture::new().build(&["ok"]);
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

#[track_caller]
fn assert_code(o: &Output, code: i32) {
    assert_eq!(o.status.code(), Some(code), "stderr:\n{}", err(o));
}

#[test]
fn a_failed_build_exits_100() {
    require_sandbox!();
    let f = Fixture::new();
    let o = f.build(&["bad"]);
    assert_code(&o, 100);
    assert!(err(&o).contains("the-failure"), "{}", err(&o));
    // What depends on a failure adds nothing: still 100.
    let o = f.build(&["bad", "ok", "--keep-going"]);
    assert_code(&o, 100);
}

#[test]
fn a_timeout_exits_101() {
    require_sandbox!();
    let f = Fixture::new();
    let t = Instant::now();
    let o = f.build(&["slow", "--timeout", "1"]);
    assert_code(&o, 101);
    assert!(err(&o).contains("timed out"), "{}", err(&o));
    assert!(t.elapsed() < Duration::from_secs(25));
    // Nix counts a build killed for silence as a timeout too.
    let o = f.build(&["slow", "--max-silent-time", "1"]);
    assert_code(&o, 101);
}

#[test]
fn a_fixed_output_hash_mismatch_exits_102() {
    require_sandbox!();
    let f = Fixture::new();
    let o = f.build(&["wronghash"]);
    assert_code(&o, 102);
    assert!(err(&o).contains("hash mismatch"), "{}", err(&o));
}

#[test]
fn a_check_difference_exits_104() {
    require_sandbox!();
    let f = Fixture::new();
    assert_code(&f.build(&["nondet"]), 0);
    let o = f.build(&["nondet", "--check"]);
    assert_code(&o, 104);
    assert!(err(&o).contains("is not deterministic"), "{}", err(&o));
}

#[test]
fn several_kinds_of_failure_combine_their_bits() {
    require_sandbox!();
    let f = Fixture::new();
    // A timeout (1) and a hash mismatch (2), both failures (4): 96 + 7.
    let o = f.build(&["slow", "wronghash", "--keep-going", "--timeout", "1"]);
    assert_code(&o, 103);
}

#[test]
fn evaluation_errors_and_bad_usage_are_not_build_failures() {
    // No build runs: no sandbox needed.
    let dir = tempfile::tempdir().expect("tempdir");
    let run = |args: &[&str]| {
        Command::new(BIN)
            .env_remove("ROCMX_STORE")
            .env("ROCMX_CONFIG", "")
            .arg("--store")
            .arg(dir.path().join("root"))
            .args(args)
            .output()
            .expect("run rocmx")
    };
    assert_code(&run(&["build", "--no-link", "--expr", "throw \"x\""]), 1);
    assert_code(&run(&["build", "--no-link", "--no-such-flag"]), 2);
    make_writable(dir.path());
}

#[test]
fn help_lists_the_exit_codes() {
    let o = Command::new(BIN)
        .args(["build", "--help"])
        .output()
        .expect("run rocmx");
    assert!(o.status.success());
    let help = String::from_utf8_lossy(&o.stdout);
    for line in [
        "100  a build failed",
        "101  a build timed out",
        "102  a fixed-output derivation",
        "104  --check found a difference",
    ] {
        assert!(help.contains(line), "no '{line}' in:\n{help}");
    }
}
