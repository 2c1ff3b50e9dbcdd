//! The Nix language test suite as a ratchet.
//!
//! Runs `../shared/conformance/run-nix-lang` against the `rocmx eval` binary and
//! fails when any kind scores below the floor recorded in
//! `tests/conformance-floor.txt`. The floor only moves up: raise it when the
//! score improves. When the suite is absent (a clone without `shared/`), the test
//! says so and passes.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

fn suite_runner() -> Option<PathBuf> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/conformance/run-nix-lang");
    p.exists().then_some(p)
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
        eprintln!("skipped: ../shared/conformance not found; the conformance ratchet did not run");
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
