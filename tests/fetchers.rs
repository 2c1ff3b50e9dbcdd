//! `exprs/lib/fetchers.nix` through `rocmx build --expr`: `fetchurl` tries its URLs in
//! order, accepts SRI and base16/base32 hashes, `fetchzip` unpacks with a recursive hash,
//! a missing hash throws pointing at `rocmx store prefetch`, and a prefetched URL builds
//! without downloading again.
//!
//! Owns only tests. Servers listen on 127.0.0.1 only; stores live in temporary
//! directories (`--store DIR`). `builtin:fetchurl` runs in-process: no sandbox needed.

mod common;
use common::http::Server;
use common::{err, make_writable, out};

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_rocmx");
const REPO: &str = env!("CARGO_MANIFEST_DIR");

/// `rocmx --store DIR/root ARGS…` in `dir`, without the host's configuration.
fn rocmx(dir: &Path, args: &[&str]) -> Output {
    let conf = dir.join("rocmx.conf");
    if !conf.exists() {
        fs::write(&conf, "").expect("write rocmx.conf");
    }
    Command::new(BIN)
        .env_remove("ROCMX_STORE")
        .env("ROCMX_CONFIG", &conf)
        .current_dir(dir)
        .arg("--store")
        .arg(dir.join("root"))
        .args(args)
        .output()
        .expect("run rocmx")
}

/// `let f = import …/fetchers.nix; in BODY`.
fn with_fetchers(body: &str) -> String {
    format!("let f = import {REPO}/exprs/lib/fetchers.nix; in {body}")
}

/// Builds the expression; gives the logical output path and its physical location.
fn build(dir: &Path, body: &str) -> (String, PathBuf) {
    let o = rocmx(
        dir,
        &[
            "build",
            "--expr",
            &with_fetchers(body),
            "--no-link",
            "--json",
        ],
    );
    assert!(
        o.status.success(),
        "exit {:?}: {}",
        o.status.code(),
        err(&o)
    );
    let text = out(&o);
    let v: serde_json::Value = serde_json::from_str(text.trim()).expect("build --json");
    let p = v["outputs"][0]["outputs"]["out"]
        .as_str()
        .unwrap_or_else(|| panic!("output path in {text}"))
        .to_string();
    let base = p.rsplit('/').next().expect("base name").to_string();
    (p, dir.join("root/store").join(base))
}

fn sha256_hex(f: &Path) -> String {
    let o = Command::new("sha256sum")
        .arg(f)
        .output()
        .expect("sha256sum");
    String::from_utf8_lossy(&o.stdout)
        .split_whitespace()
        .next()
        .expect("digest")
        .to_string()
}

fn rocmx_hash(dir: &Path, args: &[&str]) -> String {
    let o = rocmx(dir, args);
    assert!(o.status.success(), "{}", err(&o));
    out(&o).trim().to_string()
}

#[test]
fn fetchurl_tries_the_urls_in_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let body = b"the real bytes\n".to_vec();
    fs::write(d.join("ok"), &body).expect("write");
    let srv = Server::files(BTreeMap::from([("ok".to_string(), body.clone())]));
    let port = srv.port();
    let sri = rocmx_hash(d, &["hash", "file", "--type", "sha256", "--sri", "ok"]);
    let (p, real) = build(
        d,
        &format!(
            r#"f.fetchurl {{ urls = [ "http://127.0.0.1:{port}/missing" "http://127.0.0.1:{port}/ok" ]; hash = "{sri}"; }}"#
        ),
    );
    assert_eq!(srv.requests(), ["/missing", "/ok"]);
    // Named after the first URL's last segment.
    assert!(p.ends_with("-missing"), "{p}");
    assert_eq!(fs::read(&real).expect("read output"), body);
    assert_eq!(
        fs::metadata(&real).expect("meta").permissions().mode() & 0o777,
        0o444
    );

    // `sha256` in hex (and base32) names the same output: valid, nothing fetched.
    let hex = sha256_hex(&d.join("ok"));
    let (p2, _) = build(
        d,
        &format!(r#"f.fetchurl {{ url = "http://127.0.0.1:9/missing"; sha256 = "{hex}"; }}"#),
    );
    assert_eq!(p2, p);
    if let Ok(o) = Command::new("nix-hash")
        .args(["--type", "sha256", "--flat", "--base32"])
        .arg(d.join("ok"))
        .output()
    {
        if o.status.success() {
            let b32 = String::from_utf8_lossy(&o.stdout).trim().to_string();
            let (p3, _) = build(
                d,
                &format!(
                    r#"f.fetchurl {{ url = "http://127.0.0.1:9/missing"; sha256 = "{b32}"; }}"#
                ),
            );
            assert_eq!(p3, p);
        }
    }
    assert_eq!(srv.hits(), 2);

    // An explicit name, and executable (a recursive hash of the 0555 file).
    fs::set_permissions(d.join("ok"), fs::Permissions::from_mode(0o755)).expect("chmod");
    let nar = rocmx_hash(d, &["hash", "path", "--type", "sha256", "--sri", "ok"]);
    let (p4, real4) = build(
        d,
        &format!(
            r#"f.fetchurl {{ url = "http://127.0.0.1:{port}/ok"; name = "tool"; executable = true; hash = "{nar}"; }}"#
        ),
    );
    assert!(p4.ends_with("-tool"), "{p4}");
    assert_eq!(
        fs::metadata(&real4).expect("meta").permissions().mode() & 0o777,
        0o555
    );
    make_writable(d);
}

#[test]
fn fetchzip_unpacks_with_a_recursive_hash() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let top = d.join("src/hello-2.12");
    fs::create_dir_all(top.join("src")).expect("mkdir");
    fs::write(top.join("src/hello.c"), "int main(void) { return 0; }\n").expect("write");
    fs::write(top.join("configure"), "#!/bin/sh\n").expect("write");
    fs::set_permissions(top.join("configure"), fs::Permissions::from_mode(0o755)).expect("chmod");
    let st = Command::new("tar")
        .args(["czf", "hello-2.12.tar.gz", "-C", "src", "hello-2.12"])
        .current_dir(d)
        .status()
        .expect("tar");
    assert!(st.success());
    let tgz = fs::read(d.join("hello-2.12.tar.gz")).expect("read");
    let port = Server::files(BTreeMap::from([("hello-2.12.tar.gz".to_string(), tgz)])).port();
    let hash = rocmx_hash(
        d,
        &[
            "hash",
            "path",
            "--type",
            "sha256",
            "--sri",
            "src/hello-2.12",
        ],
    );
    let (p, real) = build(
        d,
        &format!(
            r#"f.fetchzip {{ urls = [ "http://127.0.0.1:{port}/gone.tar.gz" "http://127.0.0.1:{port}/hello-2.12.tar.gz" ]; hash = "{hash}"; }}"#
        ),
    );
    assert!(p.ends_with("-source"), "{p}");
    assert_eq!(
        fs::read_to_string(real.join("src/hello.c")).expect("read"),
        "int main(void) { return 0; }\n"
    );
    assert_eq!(
        fs::metadata(real.join("configure"))
            .expect("meta")
            .permissions()
            .mode()
            & 0o777,
        0o555
    );

    // `rocmx store prefetch --unpack` prints the same hash, and its object is the one a
    // fetchzip with that hash needs.
    let o = rocmx(
        d,
        &[
            "store",
            "prefetch",
            "--unpack",
            &format!("http://127.0.0.1:{port}/hello-2.12.tar.gz"),
        ],
    );
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(out(&o).trim(), hash);
    assert!(err(&o).contains(&format!("path is '{p}'")), "{}", err(&o));
    make_writable(d);
}

#[test]
fn a_prefetched_url_builds_without_a_download() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let srv = Server::files(BTreeMap::from([(
        "pool/x_1.0.orig.tar.xz".to_string(),
        b"orig tarball".to_vec(),
    )]));
    let url = srv.url("pool/x_1.0.orig.tar.xz");
    let o = rocmx(d, &["store", "prefetch", &url]);
    assert!(o.status.success(), "{}", err(&o));
    let hash = out(&o).trim().to_string();
    assert_eq!(srv.hits(), 1);
    let (p, _) = build(
        d,
        &format!(r#"f.fetchurl {{ url = "{url}"; hash = "{hash}"; }}"#),
    );
    assert!(p.ends_with("-x_1.0.orig.tar.xz"), "{p}");
    assert!(err(&o).contains(&format!("path is '{p}'")), "{}", err(&o));
    assert_eq!(srv.hits(), 1, "fetched again");
    make_writable(d);
}

#[test]
fn a_missing_hash_throws_with_the_prefetch_hint() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    for (call, hint) in [
        (
            r#"f.fetchurl { url = "http://127.0.0.1:9/a.tar.gz"; }"#,
            "rocmx store prefetch http://127.0.0.1:9/a.tar.gz",
        ),
        (
            r#"f.fetchzip { urls = [ "http://127.0.0.1:9/b.tar.gz" ]; }"#,
            "rocmx store prefetch --unpack http://127.0.0.1:9/b.tar.gz",
        ),
    ] {
        let o = rocmx(d, &["build", "--expr", &with_fetchers(call), "--no-link"]);
        assert_eq!(o.status.code(), Some(1), "{}", err(&o));
        let e = err(&o);
        assert!(e.contains("no hash given") && e.contains(hint), "{e}");
    }
    let o = rocmx(
        d,
        &[
            "build",
            "--expr",
            &with_fetchers(
                r#"f.fetchurl { urls = [ ]; hash = "sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="; }"#,
            ),
            "--no-link",
        ],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(err(&o).contains("give `url` or `urls`"), "{}", err(&o));
    make_writable(d);
}
