//! The Nix language test suite as a ratchet.
//!
//! Runs `../shared/conformance/run-nix-lang` against the `rocmx eval` binary and
//! fails when any kind scores below the floor recorded in
//! `tests/conformance-floor.txt`. The floor only moves up: raise it when the
//! score improves.
//!
//! `ROCMX_CONFORMANCE_DIR` names another suite directory (for this file's own
//! tests). When the suite is absent (a clone without `shared/`), the ratchet fails
//! under CI (`CI` set, other than `false` or `0`), naming the directory; elsewhere
//! it passes with a warning written past cargo's output capture, so that a plain
//! `cargo test` shows it. `.ci/run` looks for the suite itself and, when its machine
//! has none, says so and sets `ROCMX_CONFORMANCE_ALLOW_MISSING` (a warning again).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::Command;

/// The suite's directory: `ROCMX_CONFORMANCE_DIR`, else `../shared/conformance`.
fn suite_dir() -> PathBuf {
    match std::env::var_os("ROCMX_CONFORMANCE_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/conformance"),
    }
}

/// Whether this is a CI run, where a missing suite is a failure (unless the CI script
/// found no suite on its machine and said so with `ROCMX_CONFORMANCE_ALLOW_MISSING`).
fn under_ci() -> bool {
    matches!(std::env::var("CI").as_deref(), Ok(v) if !v.is_empty() && v != "false" && v != "0")
        && std::env::var_os("ROCMX_CONFORMANCE_ALLOW_MISSING").is_none()
}

/// The suite's runner; `None` (after a warning) when it is absent outside CI.
fn suite_runner() -> Option<PathBuf> {
    let dir = suite_dir();
    let p = dir.join("run-nix-lang");
    if p.exists() {
        return Some(p);
    }
    assert!(
        !under_ci(),
        "the conformance suite is missing: no {} (CI is set, so the ratchet must run; \
         check out shared/ next to the repository or set ROCMX_CONFORMANCE_DIR)",
        p.display()
    );
    // Straight to the standard error file, not through eprintln!, which cargo's
    // test harness captures and shows only for failing tests.
    let _ = writeln!(
        std::io::stderr().lock(),
        "\nwarning: conformance ratchet SKIPPED: no {} (the Nix language suite is not \
         checked out; under CI=true this is a failure)\n",
        p.display()
    );
    None
}

fn floor() -> BTreeMap<String, u32> {
    let text = include_str!("conformance-floor.txt");
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .filter_map(|l| {
            let (k, v) = l.split_once(char::is_whitespace)?;
            Some((k.to_string(), v.trim().parse().ok()?))
        })
        .collect()
}

#[test]
fn conformance_score_does_not_regress() {
    let Some(runner) = suite_runner() else {
        return;
    };
    let out = Command::new("bash")
        .arg(&runner)
        .arg(env!("CARGO_BIN_EXE_rocmx"))
        .arg("eval")
        .output()
        .expect("run-nix-lang runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    let mut scores = BTreeMap::new();
    for line in stdout.lines() {
        // "  okay: 130/145"
        if let Some((kind, rest)) = line.trim().split_once(": ") {
            if let Some((pass, _total)) = rest.split_once('/') {
                if let Ok(p) = pass.parse::<u32>() {
                    scores.insert(kind.to_string(), p);
                }
            }
        }
    }
    let floor = floor();
    assert!(!floor.is_empty(), "conformance-floor.txt is empty");
    let mut failures = Vec::new();
    for (kind, min) in &floor {
        let got = scores.get(kind).copied().unwrap_or(0);
        println!("{kind}: {got} (floor {min})");
        if got < *min {
            failures.push(format!("{kind}: {got} < floor {min}"));
        }
    }
    assert!(failures.is_empty(), "conformance regressed: {failures:?}");
}

/// Runs this test binary's ratchet alone with the suite pointed at a directory that
/// does not exist, `CI` as given (`None`: unset).
fn ratchet_without_suite(ci: Option<&str>) -> (std::process::Output, PathBuf) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let missing = tmp.path().join("no-such-suite");
    let mut cmd = Command::new(std::env::current_exe().expect("test binary"));
    cmd.args(["conformance_score_does_not_regress", "--exact"])
        .env("ROCMX_CONFORMANCE_DIR", &missing)
        .env_remove("CI")
        .env_remove("ROCMX_CONFORMANCE_ALLOW_MISSING");
    if let Some(v) = ci {
        cmd.env("CI", v);
    }
    (cmd.output().expect("run the test binary"), missing)
}

#[test]
fn a_missing_suite_fails_under_ci_naming_it() {
    let (o, missing) = ratchet_without_suite(Some("true"));
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        !o.status.success(),
        "passed without the suite under CI:\n{all}"
    );
    assert!(
        all.contains(&format!(
            "the conformance suite is missing: no {}/run-nix-lang",
            missing.display()
        )),
        "{all}"
    );
}

#[test]
fn a_missing_suite_outside_ci_warns_visibly() {
    for ci in [None, Some("false")] {
        let (o, missing) = ratchet_without_suite(ci);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "CI={ci:?}: {stderr}");
        // Shown although the harness captured the test's output.
        assert!(
            stderr.contains(&format!(
                "warning: conformance ratchet SKIPPED: no {}/run-nix-lang",
                missing.display()
            )),
            "CI={ci:?}: {stderr}"
        );
    }
}
