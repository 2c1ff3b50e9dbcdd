//! What a person watching `rocmx build` sees (issue 14, items 7, 8 and 11's colour):
//! `-L` shows phase markers as phases; a failing builder's colours reach neither a
//! pipe nor a `NO_COLOR` terminal; Ctrl-C during the live display erases it, says
//! "interrupted", exits 130 and leaves no build running.

mod common;
use common::err;
use common::fixture::{processes_with, Work, BIN};

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const MARKER: &str = r#"echo '@nix {"action":"setPhase","phase":"buildPhase"}'"#;

fn have_script() -> bool {
    let ok = Command::new("script").arg("--version").output().is_ok();
    if !ok {
        eprintln!("skipping: no `script` (util-linux) for a pseudo-terminal");
    }
    ok
}

#[test]
fn print_build_logs_shows_phases_as_phases() {
    let Some(w) = Work::with_busybox(&["echo"]) else {
        return;
    };
    w.derivation(
        "default.nix",
        "phased",
        &format!("{MARKER}; echo compiling; echo done > $out"),
    );
    let o = w.run(&[
        "build",
        "--no-link",
        "-L",
        "--log-format",
        "plain",
        "./default.nix",
    ]);
    let e = err(&o);
    assert!(o.status.success(), "{e}");
    assert!(e.contains("phased> Running phase: buildPhase\n"), "{e}");
    assert!(e.contains("phased> compiling\n"), "{e}");
    assert!(!e.contains("@nix"), "a raw marker was printed: {e}");
    // Machines still get the line as written, and the phase as its own object.
    let Some(w2) = Work::with_busybox(&["echo"]) else {
        return;
    };
    w2.derivation("default.nix", "phased", &format!("{MARKER}; echo x > $out"));
    let o = w2.run(&[
        "build",
        "--no-link",
        "--log-format",
        "json",
        "./default.nix",
    ]);
    let e = err(&o);
    assert!(e.contains(r#""action":"phase""#), "{e}");
    assert!(e.contains(r#""line":"@nix "#), "{e}");
}

#[test]
fn a_failing_builders_colours_do_not_reach_a_pipe() {
    let Some(w) = Work::with_busybox(&["echo", "printf"]) else {
        return;
    };
    w.derivation(
        "default.nix",
        "colourful",
        &format!(r"{MARKER}; printf '\033[1;31mred alert\033[0m\n'; exit 3"),
    );
    for extra in [&[][..], &["-L"][..]] {
        let mut args = vec!["build", "--no-link", "./default.nix"];
        args.extend_from_slice(extra);
        let o = w.run(&args);
        assert_eq!(o.status.code(), Some(100), "{}", err(&o));
        assert!(err(&o).contains("red alert"), "{}", err(&o));
        assert!(
            !o.stderr.contains(&0x1b),
            "{extra:?}: escape codes on a pipe: {:?}",
            err(&o)
        );
        // The log tail shows the phase, not the marker.
        assert!(err(&o).contains("Running phase: buildPhase"), "{}", err(&o));
    }
}

#[test]
fn no_color_drops_a_builders_colours_on_a_terminal() {
    if !have_script() {
        return;
    }
    let Some(w) = Work::with_busybox(&["echo", "printf"]) else {
        return;
    };
    w.derivation(
        "default.nix",
        "colourful",
        r"printf '\033[1;31mred alert\033[0m\n'; exit 3",
    );
    for (no_color, coloured) in [(false, true), (true, false)] {
        let cmd = format!(
            "{BIN} --store '{}' build --no-link ./default.nix",
            w.root().display()
        );
        let mut c = Command::new("script");
        c.args(["-qec", &cmd, "/dev/null"])
            .current_dir(w.dir.path())
            .env_remove("ROCMX_STORE")
            .env("ROCMX_CONFIG", "");
        if no_color {
            c.env("NO_COLOR", "1");
        } else {
            c.env_remove("NO_COLOR");
        }
        let o = c.output().expect("run script");
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(text.contains("red alert"), "{text:?}");
        assert_eq!(
            text.contains("\x1b[1;31m"),
            coloured,
            "NO_COLOR={no_color}: {text:?}"
        );
    }
}

#[test]
fn ctrl_c_during_the_live_display_restores_the_terminal_and_stops_the_build() {
    if !have_script() {
        return;
    }
    let Some(w) = Work::with_busybox(&["echo", "sleep"]) else {
        return;
    };
    let marker = format!("rocmx-ctrl-c-probe-{}", std::process::id());
    w.derivation(
        "default.nix",
        "slow",
        &format!("{MARKER}; echo started; sleep 120; echo {marker} > $out"),
    );
    let cmd = format!(
        "{BIN} --store '{}' build --no-link ./default.nix",
        w.root().display()
    );
    // `script` copies its standard input to the terminal: a 0x03 written there is a
    // Ctrl-C typed on it, which the terminal turns into SIGINT for rocmx.
    let mut child = Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .current_dir(w.dir.path())
        .env_remove("ROCMX_STORE")
        .env_remove("NO_COLOR")
        .env("ROCMX_CONFIG", "")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run script");
    let t = Instant::now();
    while processes_with(&marker).is_empty() {
        if t.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("the build never started");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // Let the status area be drawn once more, then press Ctrl-C.
    std::thread::sleep(Duration::from_millis(300));
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"\x03").unwrap();
    stdin.flush().unwrap();
    let mut text = Vec::new();
    child.stdout.take().unwrap().read_to_end(&mut text).unwrap();
    let status = child.wait().unwrap();
    drop(stdin);
    let text = String::from_utf8_lossy(&text).into_owned();
    assert_eq!(status.code(), Some(130), "{text:?}");
    // The status area is erased (cursor up, erase below) before the message.
    let at = text.rfind("error: interrupted by the user").expect(&text);
    let erase = text[..at].rfind("\x1b[J").expect(&text);
    assert!(text[..erase].ends_with("A\r"), "{text:?}");
    assert!(
        !text[at..].contains("building slow"),
        "drawn again: {text:?}"
    );
    // No process of the build survives.
    let t = Instant::now();
    loop {
        let left: Vec<String> = processes_with(&marker)
            .into_iter()
            .filter(|c| !c.contains(BIN))
            .collect();
        if left.is_empty() {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "still running: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
