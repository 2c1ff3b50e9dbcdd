//! Error output that scripts read (issue 14, item 11, colour): what rocmx renders
//! itself carries no escape codes when standard error is a pipe, nor on a terminal
//! with `NO_COLOR` set; and the "--show-trace" hint (item 10) appears only when
//! frames are hidden.

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
