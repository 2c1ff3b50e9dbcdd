//! End-to-end tests of `builtin:fetchurl` through the `rocmx` binary: hostile
//! or stuck servers must end the build with a clear error, never a panic or a
//! hang.
//!
//! This file owns only tests: the servers listen on 127.0.0.1 only, serve for a
//! bounded time and stop by themselves; stores live in temporary directories
//! (`--store DIR`). `builtin:fetchurl` runs in-process, so no sandbox (user
//! namespaces, busybox) is needed.

mod common;
use common::http::Server;
use common::{err, make_writable};

use std::fs;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::thread;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_rocmx");

/// The SRI hash of the empty string: never reached, the fetches fail first.
const EMPTY_SHA256: &str = "sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=";

/// Starts a loopback server: `GET /to-file` redirects to `file:///etc/passwd`,
/// `GET /drip` sends one byte every 200 ms for at most a minute. Gives the port.
fn serve() -> u16 {
    Server::builder()
        .redirect("to-file", "file:///etc/passwd")
        .drip("drip", 300, Duration::from_millis(200))
        .start()
        .port()
}

/// Builds attribute `x` of a file holding one `builtin:fetchurl` derivation of
/// `url` with `rocmx build ARGS`, in a fresh store; kills it (and fails the
/// test) if it has not exited after `limit`.
fn build_fetch(dir: &Path, url: &str, args: &[&str], limit: Duration) -> Output {
    let nix = dir.join("fetch.nix");
    fs::write(
        &nix,
        format!(
            r#"{{ x = derivation {{
  name = "fetched"; builder = "builtin:fetchurl"; system = "builtin";
  url = "{url}";
  outputHashMode = "flat"; outputHashAlgo = "sha256"; outputHash = "{EMPTY_SHA256}";
}}; }}"#
        ),
    )
    .expect("write fetch.nix");
    let mut child = Command::new(BIN)
        .env_remove("ROCMX_STORE")
        .current_dir(dir)
        .arg("--store")
        .arg(dir.join("root"))
        .args(["build", "--file"])
        .arg(&nix)
        .args(["x", "--no-link"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run rocmx");
    let start = Instant::now();
    loop {
        match child.try_wait().expect("wait for rocmx") {
            Some(_) => return child.wait_with_output().expect("rocmx output"),
            None if start.elapsed() > limit => {
                let _ = child.kill();
                let o = child.wait_with_output().expect("rocmx output");
                panic!(
                    "rocmx build {url} did not exit within {limit:?}; stderr:\n{}",
                    err(&o)
                );
            }
            None => thread::sleep(Duration::from_millis(100)),
        }
    }
}

#[test]
fn a_redirect_to_a_file_url_fails_the_build_clearly() {
    let port = serve();
    let dir = tempfile::tempdir().expect("tempdir");
    let url = format!("http://127.0.0.1:{port}/to-file");
    let o = build_fetch(
        dir.path(),
        &url,
        &["--timeout", "5"],
        Duration::from_secs(60),
    );
    let e = err(&o);
    assert_eq!(o.status.code(), Some(100), "{e}");
    assert!(e.contains(&url), "{e}");
    assert!(
        e.contains("refusing the redirect to 'file:///etc/passwd'"),
        "{e}"
    );
    assert!(!e.contains("panicked"), "{e}");
    make_writable(dir.path());
}

#[test]
fn the_build_timeout_bounds_a_slow_download() {
    let port = serve();
    let dir = tempfile::tempdir().expect("tempdir");
    let url = format!("http://127.0.0.1:{port}/drip");
    let o = build_fetch(
        dir.path(),
        &url,
        &["--timeout", "3"],
        Duration::from_secs(45),
    );
    let e = err(&o);
    assert_eq!(o.status.code(), Some(100), "{e}");
    assert!(e.contains(&url), "{e}");
    assert!(e.contains("time limit of 3 s"), "{e}");
    make_writable(dir.path());
}
