//! End-to-end tests of what a hostile builder meets through `rocmx build`: as root it
//! runs as an unprivileged host id and its outputs come back root-owned; the kernel's
//! settings are out of reach; processes, silence and time are bounded by settings from
//! `rocmx.conf`, `--option` and the flags, with messages that name the setting.
//!
//! Stores live in temporary directories (`--store DIR`). The builder is a static
//! busybox; the tests skip, saying why, when it is missing.

mod common;
use common::fixture::{processes_with, Work};
use common::{err, out};

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

/// A work directory with busybox; `None` (after saying why) without busybox.
fn fixture() -> Option<Work> {
    Work::with_busybox(&["cat", "echo", "mkdir", "sleep", "kill", "ls", "stat", "id"])
}

impl Work {
    /// Writes `default.nix` holding one derivation `name` running `script`.
    fn package(&self, name: &str, script: &str) {
        self.derivation("default.nix", name, script);
    }

    /// [`Work::run`] with `envs` set too.
    fn run_with(&self, args: &[&str], envs: &[(&str, &Path)]) -> Output {
        let mut c = self.command(args);
        for (k, v) in envs {
            c.env(k, v);
        }
        c.output().unwrap()
    }
}

/// This process's effective uid (the owner of a file it creates).
fn euid() -> u32 {
    let f = tempfile::NamedTempFile::new().unwrap();
    f.as_file().metadata().unwrap().uid()
}

/// As root, the builder is an unprivileged host id; what it built comes back owned by
/// root, read-only; it could not open a sysctl for writing.
#[test]
fn builds_never_run_as_host_root() {
    let Some(fx) = fixture() else { return };
    fx.package(
        "who",
        r#"mkdir $out; cat /proc/self/uid_map > $out/map
if (: >> /proc/sys/kernel/core_pattern) 2>/dev/null; then echo writable > $out/sysctl; else echo refused > $out/sysctl; fi
mkdir $out/sub; echo x > $out/sub/f"#,
    );
    let o = fx.run_with(
        &["build", "--no-link", "--print-out-paths", "./default.nix"],
        &[],
    );
    assert!(o.status.success(), "{}", err(&o));
    let logical = out(&o).trim().to_string();
    let phys = fx
        .dir
        .path()
        .join("root")
        .join(logical.trim_start_matches("/rocmx/"));
    assert_eq!(
        fs::read_to_string(phys.join("sysctl")).unwrap(),
        "refused\n"
    );
    let map = fs::read_to_string(phys.join("map")).unwrap();
    let build_line: Vec<&str> = map
        .lines()
        .find(|l| l.split_whitespace().next() == Some("1000"))
        .unwrap()
        .split_whitespace()
        .collect();
    if euid() == 0 {
        let host: u32 = build_line[1].parse().unwrap();
        assert_ne!(host, 0, "the build user is host root: {map}");
        for p in [
            phys.clone(),
            phys.join("sub"),
            phys.join("sub/f"),
            phys.join("map"),
        ] {
            let m = fs::symlink_metadata(&p).unwrap();
            assert_eq!((m.uid(), m.gid()), (0, 0), "{} is not root's", p.display());
            assert_eq!(m.mode() & 0o222, 0, "{} is writable", p.display());
        }
    } else {
        assert_eq!(build_line[1], euid().to_string());
    }
}

/// `max-silent-time` from rocmx.conf ends a builder that stopped itself; `--option`
/// and `--max-silent-time` override the file.
#[test]
fn silence_bound_from_the_configuration() {
    let Some(fx) = fixture() else { return };
    fx.package("stops", "echo stopping; kill -STOP $$; echo never");
    let conf = fx.dir.path().join("rocmx.conf");
    fs::write(&conf, "# test\nmax-silent-time = 1\n").unwrap();
    let t = Instant::now();
    let o = fx.run_with(
        &["build", "--no-link", "./default.nix"],
        &[("ROCMX_CONFIG", &conf)],
    );
    assert!(!o.status.success());
    assert!(
        err(&o).contains("build killed after 1s without output"),
        "{}",
        err(&o)
    );
    assert!(t.elapsed() < Duration::from_secs(30));
    // --option wins over the file, and the flag over both.
    fs::write(&conf, "max-silent-time = 600\n").unwrap();
    let o = fx.run_with(
        &[
            "build",
            "--no-link",
            "--option",
            "max-silent-time",
            "1",
            "./default.nix",
        ],
        &[("ROCMX_CONFIG", &conf)],
    );
    assert!(
        err(&o).contains("build killed after 1s without output"),
        "{}",
        err(&o)
    );
    let o = fx.run_with(
        &[
            "build",
            "--no-link",
            "--option",
            "max-silent-time",
            "600",
            "--max-silent-time",
            "1",
            "./default.nix",
        ],
        &[("ROCMX_CONFIG", &conf)],
    );
    assert!(
        err(&o).contains("build killed after 1s without output"),
        "{}",
        err(&o)
    );
}

/// A builder that starts processes until refused fails, naming the setting.
#[test]
fn process_bound_names_the_setting() {
    let Some(fx) = fixture() else { return };
    fx.package(
        "many",
        r#"i=0; while [ $i -lt 500 ]; do sleep 1000 & i=$((i+1)); done; sleep 1000"#,
    );
    let t = Instant::now();
    let o = fx.run_with(
        &[
            "build",
            "--no-link",
            "--option",
            "max-build-processes",
            "32",
            "--timeout",
            "60",
            "./default.nix",
        ],
        &[],
    );
    assert!(!o.status.success());
    assert!(
        err(&o).contains("build exceeded 32 processes (the max-build-processes setting)"),
        "{}",
        err(&o)
    );
    assert!(t.elapsed() < Duration::from_secs(50));
}

/// Mistyped settings are named with their place and the closest known one.
#[test]
fn unknown_settings_are_explained() {
    let Some(fx) = fixture() else { return };
    fx.package("x", "echo x > $out");
    let conf = fx.dir.path().join("rocmx.conf");
    fs::write(&conf, "\nmax-build-proceses = 10\n").unwrap();
    let o = fx.run_with(
        &["build", "--no-link", "./default.nix"],
        &[("ROCMX_CONFIG", &conf)],
    );
    assert_eq!(o.status.code(), Some(1), "{}", err(&o));
    let e = err(&o);
    assert!(e.contains("line 2"), "{e}");
    assert!(e.contains("did you mean 'max-build-processes'?"), "{e}");
    let o = fx.run_with(
        &[
            "build",
            "--no-link",
            "--option",
            "shm-size",
            "big",
            "./default.nix",
        ],
        &[],
    );
    assert!(err(&o).contains("expected a size such as"), "{}", err(&o));
}

/// Killing `rocmx build` ends its builds: as root the sandbox's init changes its
/// credentials, which clears the parent-death signal, and it is in its own session, so
/// neither a SIGKILL of rocmx nor a Ctrl-C would reach it unless it arms the signal
/// again (a bug found while stopping a long ROCm build).
#[test]
fn a_killed_rocmx_leaves_no_build_running() {
    let Some(fx) = fixture() else { return };
    let marker = format!("rocmx-orphan-probe-{}", std::process::id());
    fx.package(
        "orphan",
        &format!("echo started; sleep 60; echo {marker} > $out"),
    );
    let mut child = fx
        .command(&[
            "build",
            "--no-link",
            "./default.nix",
            "--log-format",
            "plain",
        ])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Processes whose command line holds the marker: the builder's shell.
    let running = || processes_with(&marker);
    let t = Instant::now();
    while running().is_empty() {
        if t.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            panic!("the build never started");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let t = Instant::now();
    loop {
        let left = running();
        if left.is_empty() {
            break;
        }
        if t.elapsed() > Duration::from_secs(10) {
            panic!("the build outlived rocmx: {left:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
