//! `rocmx build`'s exit codes follow Nix's (issue 14, item 6): 100 a failed build,
//! 101 a timeout, 102 a fixed-output hash mismatch, 104 a `--check` difference, the
//! bits combined when several happen; 1 an evaluation error, 2 a bad command line.
//!
//! Builds use a static busybox (`./bb`) against a store in a temporary directory and
//! skip, saying why, when busybox is missing or the sandbox cannot run.

mod common;
use common::err;
use common::fixture::{Work, BIN};

use std::process::{Command, Output};
use std::time::{Duration, Instant};

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
fn fixture() -> Work {
    Work::new(&["cat", "echo", "sleep"]).packages(&PACKAGES.replace("@EMPTY@", EMPTY_SHA256))
}

impl Work {
    /// `rocmx build --file packages.nix --no-link ARGS…`.
    fn build(&self, args: &[&str]) -> Output {
        let mut all = vec!["build", "--file", "packages.nix", "--no-link"];
        all.extend_from_slice(args);
        self.run(&all)
    }
}

/// Whether builds can run here (see [`common::fixture::can_build`]).
fn can_build() -> bool {
    common::fixture::can_build(|| fixture().build(&["ok"]))
}

#[track_caller]
fn assert_code(o: &Output, code: i32) {
    assert_eq!(o.status.code(), Some(code), "stderr:\n{}", err(o));
}

#[test]
fn a_failed_build_exits_100() {
    require_sandbox!();
    let f = fixture();
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
    let f = fixture();
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
    let f = fixture();
    let o = f.build(&["wronghash"]);
    assert_code(&o, 102);
    assert!(err(&o).contains("hash mismatch"), "{}", err(&o));
}

#[test]
fn a_check_difference_exits_104() {
    require_sandbox!();
    let f = fixture();
    assert_code(&f.build(&["nondet"]), 0);
    let o = f.build(&["nondet", "--check"]);
    assert_code(&o, 104);
    assert!(err(&o).contains("is not deterministic"), "{}", err(&o));
}

#[test]
fn several_kinds_of_failure_combine_their_bits() {
    require_sandbox!();
    let f = fixture();
    // A timeout (1) and a hash mismatch (2), both failures (4): 96 + 7.
    let o = f.build(&["slow", "wronghash", "--keep-going", "--timeout", "1"]);
    assert_code(&o, 103);
}

#[test]
fn evaluation_errors_and_bad_usage_are_not_build_failures() {
    // No build runs: no sandbox needed.
    let w = Work::empty();
    assert_code(&w.run(&["build", "--no-link", "--expr", "throw \"x\""]), 1);
    assert_code(&w.run(&["build", "--no-link", "--no-such-flag"]), 2);
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
