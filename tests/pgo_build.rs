//! `tools/pgo-build.sh`, the profile-guided release build (README, "Install"):
//! its usage and its setup errors. The full build (two release builds and a
//! training run, about a quarter of an hour) is not run here; bench/README.md
//! records its runs.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/pgo-build.sh")
}

fn run(args: &[&str], path: Option<&Path>) -> Output {
    let mut c = Command::new("/bin/bash");
    c.arg(script()).args(args);
    if let Some(p) = path {
        c.env("PATH", p);
    }
    c.output().expect("run /bin/bash")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn help_prints_the_usage_and_what_is_trained_on() {
    let o = run(&["--help"], None);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("Usage: tools/pgo-build.sh [--install]"),
        "{out}"
    );
    assert!(out.contains("target/pgo/release/rocmx"), "{out}");
    assert!(out.contains("conformance suite"), "{out}");
    assert!(
        !out.contains("set -euo"),
        "the help stops before the code: {out}"
    );
}

#[test]
fn an_unknown_argument_is_a_usage_error_naming_it() {
    let o = run(&["--fast"], None);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("unknown argument '--fast'"), "{e}");
    assert!(e.contains("[--install]"), "{e}");
}

/// A toolchain without `llvm-profdata` is refused before anything is built,
/// with the command that installs it.
#[test]
fn a_toolchain_without_llvm_profdata_says_how_to_get_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bin = dir.path().join("bin");
    let sysroot = dir.path().join("sysroot");
    std::fs::create_dir_all(sysroot.join("lib/rustlib/x86_64-unknown-linux-gnu/bin"))
        .expect("mkdir");
    std::fs::create_dir_all(&bin).expect("mkdir");
    let fake = |name: &str, body: &str| {
        let p = bin.join(name);
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).expect("write");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    };
    fake("rustc", &format!("echo {}", sysroot.display()));
    // A cargo that fails loudly: the script must stop before building.
    fake("cargo", "echo 'cargo must not run' >&2; exit 99");
    for tool in ["find", "head", "dirname", "sed", "mkdir", "rm", "mktemp"] {
        let real = ["/usr/bin", "/bin"]
            .iter()
            .map(|d| Path::new(d).join(tool))
            .find(|p| p.exists())
            .unwrap_or_else(|| panic!("{tool} not found"));
        std::os::unix::fs::symlink(real, bin.join(tool)).expect("symlink");
    }
    let o = run(&[], Some(&bin));
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("llvm-profdata not found"), "{e}");
    assert!(e.contains("rustup component add llvm-tools"), "{e}");
    assert!(!e.contains("cargo must not run"), "{e}");
}
