//! Error output that scripts and people read (issue 14, items 2, 10 and 11): what
//! rocmx renders itself carries no escape codes when standard error is a pipe, nor on
//! a terminal with `NO_COLOR` set; the "--show-trace" hint (item 10) appears only
//! when frames are hidden; errors in a `derivation`'s attributes point at the user's
//! file (item 2).

mod common;
use common::{err, make_writable};

use std::path::Path;
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_rocmx");

fn rocmx(store: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .env_remove("ROCMX_STORE")
        .env_remove("NO_COLOR")
        .env("ROCMX_CONFIG", "")
        .arg("--store")
        .arg(store)
        .args(args)
        .output()
        .expect("run rocmx")
}

#[test]
fn errors_on_a_pipe_carry_no_escape_codes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("root");
    for args in [
        &["eval", "--expr", "throw \"x\""][..],
        &["eval", "--expr", "let f = x: x.a; in f 1", "--show-trace"],
        &["build", "--no-link", "--expr", "throw \"x\""],
        &["eval", "--no-such-flag"],
    ] {
        let o = rocmx(&store, args);
        assert!(!o.status.success(), "{args:?}");
        assert!(!o.stderr.is_empty(), "{args:?}: nothing said");
        assert!(!o.stderr.contains(&0x1b), "{args:?}: {:?}", err(&o));
    }
    make_writable(dir.path());
}

#[test]
fn no_color_keeps_a_terminal_free_of_escape_codes() {
    // `script` runs the command on a pseudo-terminal and copies what it wrote.
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("SKIP: no `script` (util-linux) for a pseudo-terminal");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("root");
    let cmd = format!(
        "{BIN} --store '{}' eval --expr 'throw \"x\"'",
        store.display()
    );
    let o = Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .env("NO_COLOR", "1")
        .env("ROCMX_CONFIG", "")
        .env_remove("ROCMX_STORE")
        .output()
        .expect("run script");
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("error: x"), "{text:?}");
    assert!(!o.stdout.contains(&0x1b), "{text:?}");
    make_writable(dir.path());
}

#[test]
fn the_show_trace_hint_counts_only_hidden_frames() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("root");
    // A top-level throw: the snippet is all there is.
    let e = err(&rocmx(&store, &["eval", "--expr", "throw \"x\""]));
    assert!(e.starts_with("error: x\n"), "{e}");
    assert!(!e.contains("--show-trace"), "{e}");
    // One frame, and two.
    let e = err(&rocmx(
        &store,
        &["eval", "--expr", "let f = x: x.a; in f 1"],
    ));
    assert!(
        e.ends_with("(use '--show-trace' to show 1 more frame of context)\n"),
        "{e}"
    );
    let e = err(&rocmx(
        &store,
        &["eval", "--expr", "let f = x: x.a; g = y: f y; in g 1"],
    ));
    assert!(
        e.ends_with("(use '--show-trace' to show 2 more frames of context)\n"),
        "{e}"
    );
    make_writable(dir.path());
}

/// Item 2: an error in a `derivation`'s attributes points at the user's file (the
/// attribute, or the derivation's `name` for what concerns it whole), as Nix 2.8's
/// do, never into rocmx's own `derivation` wrapper, with or without `--show-trace`.
#[test]
fn derivation_attribute_errors_point_at_the_users_attribute() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("root");
    let cases = [
        (
            "no-system.nix",
            "derivation {\n  name = \"x\";\n  builder = \"/bin/sh\";\n}\n",
            "error: required attribute 'system' missing",
            ":2:3:",
        ),
        (
            "set-attr.nix",
            "derivation {\n  name = \"x\";\n  system = \"x86_64-linux\";\n  builder = \"/bin/sh\";\n  deps = { a = 1; };\n}\n",
            "error: cannot coerce a set to a string",
            ":5:3:",
        ),
        (
            "bad-name.nix",
            "derivation {\n  name = \"x y!\";\n  system = \"x86_64-linux\";\n  builder = \"/bin/sh\";\n}\n",
            "error: invalid derivation name",
            ":2:3:",
        ),
        (
            "bad-outputs.nix",
            "derivation {\n  name = \"x\";\n  system = \"x86_64-linux\";\n  builder = \"/bin/sh\";\n  outputs = [ \"out\" \"out\" ];\n}\n",
            "error: duplicate derivation output 'out'",
            ":5:3:",
        ),
    ];
    for (file, text, msg, at) in cases {
        let path = dir.path().join(file);
        std::fs::write(&path, text).unwrap();
        let expr = format!("(import {}).drvPath", path.display());
        for trace in [false, true] {
            let mut args = vec!["eval", "--expr", &expr];
            if trace {
                args.push("--show-trace");
            }
            let e = err(&rocmx(&store, &args));
            assert!(e.contains(msg), "{file}: {e}");
            let want = format!("at {}{at}", path.display());
            assert!(
                e.contains(&want),
                "{file} (trace {trace}): wants {want}: {e}"
            );
            assert!(!e.contains("rocmx-internal"), "{file}: {e}");
        }
        // The same through `rocmx build`.
        let e = err(&rocmx(
            &store,
            &["build", "--no-link", path.to_str().unwrap()],
        ));
        assert!(
            e.contains(&format!("at {}{at}", path.display())),
            "{file}: {e}"
        );
    }
    make_writable(dir.path());
}

/// Item 1: the declared minimum Rust is the locked dependencies' floor, and README's
/// install command and toolchain sentence agree with Cargo.toml.
#[test]
fn the_declared_toolchain_and_the_install_command_agree() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let cargo = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let version = cargo
        .lines()
        .find_map(|l| l.strip_prefix("rust-version = \""))
        .and_then(|l| l.strip_suffix('"'))
        .expect("Cargo.toml declares rust-version");
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    assert!(
        readme.contains("cargo install --path . --locked"),
        "README's install command"
    );
    assert!(
        readme.contains(&format!("Rust {version} or newer")),
        "README names Rust {version}"
    );
    // Each workspace crate inherits it.
    for krate in ["store", "lang", "builder", "debian", "cache"] {
        let t = std::fs::read_to_string(root.join(krate).join("Cargo.toml")).unwrap();
        assert!(t.contains("rust-version.workspace = true"), "{krate}");
    }
    // Line tables, not full debug info, in the release binary.
    assert!(cargo.contains("debug = \"line-tables-only\""));
}
