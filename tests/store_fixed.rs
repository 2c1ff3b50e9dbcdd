//! `rocmx store add-fixed` and `rocmx store prefetch`: seeding fixed-output objects.
//!
//! Owns only tests. The property that matters: the path add-fixed (or prefetch) prints
//! is the output path of a `builtin:fetchurl` derivation with that name and hash, and
//! that derivation then builds without any download (its URL is unreachable). Hashes are
//! checked against `sha256sum` and, when Nix is installed, `nix-hash`. Servers listen on
//! 127.0.0.1 only; stores live in temporary directories.

mod common;
use common::http::Server;
use common::{err, make_writable, out};

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_rocmx");

/// `rocmx --store ROOT ARGS…` in `dir`, with no configuration files of the host.
fn rocmx(dir: &Path, args: &[&str]) -> Output {
    let conf = dir.join("rocmx.conf");
    if !conf.exists() {
        fs::write(&conf, "").expect("write rocmx.conf");
    }
    Command::new(BIN)
        .env_remove("ROCMX_STORE")
        .env("ROCMX_CONFIG", conf)
        .env("XDG_CONFIG_HOME", dir.join("no-config"))
        .current_dir(dir)
        .arg("--store")
        .arg(dir.join("root"))
        .args(args)
        .output()
        .expect("run rocmx")
}

fn ok(o: &Output) -> String {
    assert!(o.status.success(), "exit {:?}: {}", o.status.code(), err(o));
    out(o)
}

/// Standard base64 with padding.
fn base64(bytes: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::new();
    for c in bytes.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= c.len() {
                s.push(T[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                s.push('=');
            }
        }
    }
    s
}

/// `sha256-<base64>` from a hex digest.
fn sri_of_hex(hex: &str) -> String {
    let bytes: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
        .collect();
    format!("sha256-{}", base64(&bytes))
}

/// The SRI SHA-256 of a file's bytes, by `sha256sum`.
fn sha256sum(f: &Path) -> String {
    let o = Command::new("sha256sum")
        .arg(f)
        .output()
        .expect("sha256sum");
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    sri_of_hex(text.split_whitespace().next().expect("digest"))
}

/// `nix-hash ARGS…` (hex), when Nix is installed.
fn nix_hash(args: &[&str], p: &Path) -> Option<String> {
    let o = Command::new("nix-hash").args(args).arg(p).output().ok()?;
    o.status
        .success()
        .then(|| String::from_utf8_lossy(&o.stdout).trim().to_string())
}

/// A `builtin:fetchurl` derivation named `name` of an unreachable URL.
fn fetchurl_expr(name: &str, mode: &str, algo: &str, hash: &str) -> String {
    format!(
        r#"derivation {{ name = "{name}"; builder = "builtin:fetchurl"; system = "builtin";
  url = "http://127.0.0.1:9/x"; outputHashMode = "{mode}"; outputHashAlgo = "{algo}";
  outputHash = "{hash}"; }}"#
    )
}

/// Builds `expr` and gives its one output path; fails unless nothing was built.
fn build_cached(dir: &Path, expr: &str) -> String {
    let o = rocmx(dir, &["build", "--expr", expr, "--no-link", "--json"]);
    let text = ok(&o);
    let v: serde_json::Value = serde_json::from_str(text.trim()).expect("build --json");
    assert_eq!(v["built"], serde_json::json!([]), "{text}");
    let outs = v["outputs"].as_array().expect("outputs");
    assert_eq!(outs.len(), 1, "{text}");
    let e = err(&o);
    assert!(!e.contains("downloading"), "{e}");
    outs[0]["outputs"]["out"]
        .as_str()
        .unwrap_or_else(|| panic!("output path in {text}"))
        .to_string()
}

#[test]
fn add_fixed_flat_is_what_a_fetchurl_of_that_hash_needs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let f = d.join("hello-2.12.tar.gz");
    fs::write(&f, b"pretend tarball\n").expect("write");
    let printed = ok(&rocmx(
        d,
        &["store", "add-fixed", "sha256", "hello-2.12.tar.gz"],
    ));
    let path = printed.trim().to_string();
    assert!(
        path.starts_with("/rocmx/store/") && path.ends_with("-hello-2.12.tar.gz"),
        "{path}"
    );
    // The content is there, read-only.
    let cat = ok(&rocmx(d, &["store", "cat", &path]));
    assert_eq!(cat, "pretend tarball\n");

    // A fetchurl derivation of an unreachable URL with that hash is valid already: the
    // same path, nothing built or downloaded. The hash in SRI, base32 and hex alike.
    let sri = sha256sum(&f);
    assert_eq!(
        build_cached(d, &fetchurl_expr("hello-2.12.tar.gz", "flat", "", &sri)),
        path
    );
    if let Some(b32) = nix_hash(&["--type", "sha256", "--flat", "--base32"], &f) {
        assert_eq!(
            build_cached(
                d,
                &fetchurl_expr("hello-2.12.tar.gz", "flat", "sha256", &b32)
            ),
            path
        );
    }
    // Adding again prints the same path.
    let again = ok(&rocmx(
        d,
        &["store", "add-fixed", "sha256", "hello-2.12.tar.gz"],
    ));
    assert_eq!(again.trim(), path);

    // Other algorithms give other paths, each a fetchurl's with that algorithm.
    for algo in ["sha512", "sha1", "blake3"] {
        let p = ok(&rocmx(
            d,
            &["store", "add-fixed", algo, "hello-2.12.tar.gz"],
        ));
        assert_ne!(p.trim(), path, "{algo}");
        let h = ok(&rocmx(
            d,
            &["hash", "file", "--type", algo, "--sri", "hello-2.12.tar.gz"],
        ));
        assert_eq!(
            build_cached(d, &fetchurl_expr("hello-2.12.tar.gz", "flat", "", h.trim())),
            p.trim(),
            "{algo}"
        );
    }
    make_writable(d);
}

#[test]
fn add_fixed_recursive_is_what_a_recursive_fetch_needs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let src = d.join("source");
    fs::create_dir_all(src.join("sub")).expect("mkdir");
    fs::write(src.join("a"), "a\n").expect("write");
    fs::write(src.join("sub/run"), "#!/bin/sh\n").expect("write");
    std::os::unix::fs::symlink("../a", src.join("sub/link")).expect("symlink");
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(src.join("sub/run"), fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let printed = ok(&rocmx(
        d,
        &["store", "add-fixed", "--recursive", "sha256", "source"],
    ));
    let path = printed.trim().to_string();
    assert!(path.ends_with("-source"), "{path}");
    let h = ok(&rocmx(
        d,
        &["hash", "path", "--type", "sha256", "--sri", "source"],
    ));
    if let Some(hex) = nix_hash(&["--type", "sha256"], &src) {
        assert_eq!(h.trim(), sri_of_hex(&hex));
    }
    assert_eq!(
        build_cached(d, &fetchurl_expr("source", "recursive", "", h.trim())),
        path
    );
    let ls = ok(&rocmx(d, &["store", "ls", "-R", &path]));
    assert!(ls.contains("sub/link") && ls.contains("sub/run"), "{ls}");
    make_writable(d);
}

#[test]
fn add_fixed_refuses_clearly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    fs::create_dir(d.join("tree")).expect("mkdir");
    fs::write(d.join("f"), "x").expect("write");

    let o = rocmx(d, &["store", "add-fixed", "sha256", "tree"]);
    assert_eq!(o.status.code(), Some(1));
    let e = err(&o);
    assert!(
        e.contains("'tree'") && e.contains("directory") && e.contains("--recursive"),
        "{e}"
    );

    let o = rocmx(d, &["store", "add-fixed", "sha256", "f", "missing"]);
    assert_eq!(o.status.code(), Some(1));
    let e = err(&o);
    assert!(e.contains("'missing'") && e.contains("No such file"), "{e}");
    // Nothing was added: arguments are checked first.
    assert_eq!(out(&o), "");

    let o = rocmx(d, &["store", "add-fixed", "md4", "f"]);
    assert_eq!(o.status.code(), Some(2));
    let e = err(&o);
    assert!(
        e.contains("unknown hash algorithm 'md4'") && e.contains("sha256"),
        "{e}"
    );
    make_writable(d);
}

#[test]
fn prefetch_prints_the_hash_and_seeds_the_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let body: Vec<u8> = (0..100_000u32).map(|i| (i * 7 % 251) as u8).collect();
    fs::write(d.join("expected"), &body).expect("write");
    let files = BTreeMap::from([("dl/pkg-1.0.tar.xz".to_string(), body.clone())]);
    let srv = Server::files(files);
    let port = srv.port();
    let url = format!("http://127.0.0.1:{port}/dl/pkg-1.0.tar.xz");

    let o = rocmx(d, &["store", "prefetch", &url]);
    let hash = ok(&o).trim().to_string();
    assert_eq!(hash, sha256sum(&d.join("expected")));
    if let Some(b32) = nix_hash(
        &["--type", "sha256", "--flat", "--base32"],
        &d.join("expected"),
    ) {
        // The same digest as Nix's, in the form fetchurl's `sha256` takes.
        assert_eq!(
            build_cached(d, &fetchurl_expr("pkg-1.0.tar.xz", "flat", "sha256", &b32)),
            err(&o)
                .lines()
                .find_map(|l| l.strip_prefix("path is '"))
                .and_then(|l| l.strip_suffix('\''))
                .expect("path is '…'")
        );
    }

    let o = rocmx(d, &["store", "prefetch", "--json", &url]);
    let v: serde_json::Value = serde_json::from_str(ok(&o).trim()).expect("json");
    assert_eq!(v["hash"], hash.as_str());
    assert_eq!(v["url"], url.as_str());
    assert_eq!(v["size"], 100_000);
    let sp = v["storePath"].as_str().expect("storePath").to_string();
    assert!(sp.ends_with("-pkg-1.0.tar.xz"), "{sp}");
    assert_eq!(srv.hits(), 2);
    // What a fetchurl of it needs is in the store: no download.
    assert_eq!(
        build_cached(d, &fetchurl_expr("pkg-1.0.tar.xz", "flat", "", &hash)),
        sp
    );
    assert_eq!(srv.hits(), 2);

    // --print-path, --name, --hash-algo.
    let o = rocmx(
        d,
        &[
            "store",
            "prefetch",
            "--print-path",
            "--name",
            "other",
            "--hash-algo",
            "sha512",
            &url,
        ],
    );
    let text = ok(&o);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(lines[0].starts_with("sha512-"), "{text}");
    assert!(
        lines[1].starts_with("/rocmx/store/") && lines[1].ends_with("-other"),
        "{text}"
    );
    make_writable(d);
}

#[test]
fn prefetch_unpack_hashes_the_tree() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let top = d.join("src/pkg-1.0");
    fs::create_dir_all(top.join("doc")).expect("mkdir");
    fs::write(top.join("configure"), "#!/bin/sh\necho hi\n").expect("write");
    fs::write(top.join("doc/README"), "read me\n").expect("write");
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(top.join("configure"), fs::Permissions::from_mode(0o755))
            .expect("chmod");
    }
    let st = Command::new("tar")
        .args(["czf", "pkg-1.0.tar.gz", "-C", "src", "pkg-1.0"])
        .current_dir(d)
        .status()
        .expect("tar");
    assert!(st.success());
    let tgz = fs::read(d.join("pkg-1.0.tar.gz")).expect("read");
    let port = Server::files(BTreeMap::from([("pkg-1.0.tar.gz".to_string(), tgz)])).port();
    let url = format!("http://127.0.0.1:{port}/pkg-1.0.tar.gz");

    let o = rocmx(d, &["store", "prefetch", "--unpack", "--json", &url]);
    let v: serde_json::Value = serde_json::from_str(ok(&o).trim()).expect("json");
    // The top-level directory's NAR hash, named `source` (fetchzip's default).
    let want = ok(&rocmx(
        d,
        &["hash", "path", "--type", "sha256", "--sri", "src/pkg-1.0"],
    ));
    assert_eq!(v["hash"], want.trim());
    if let Some(hex) = nix_hash(&["--type", "sha256"], &top) {
        assert_eq!(v["hash"], sri_of_hex(&hex).as_str());
    }
    let sp = v["storePath"].as_str().expect("storePath");
    assert!(sp.ends_with("-source"), "{sp}");
    let cat = ok(&rocmx(d, &["store", "cat", &format!("{sp}/doc/README")]));
    assert_eq!(cat, "read me\n");
    let expr = format!(
        r#"derivation {{ name = "source"; builder = "builtin:fetchurl"; system = "builtin";
  url = "http://127.0.0.1:9/x"; unpack = "1"; outputHashMode = "recursive"; outputHash = "{}"; }}"#,
        want.trim()
    );
    assert_eq!(build_cached(d, &expr), sp);
    make_writable(d);
}

#[test]
fn prefetch_failures_are_clear() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let port = Server::files(BTreeMap::new()).port();
    let url = format!("http://127.0.0.1:{port}/gone.tar.gz");
    let o = rocmx(d, &["store", "prefetch", &url]);
    assert_eq!(o.status.code(), Some(1));
    let e = err(&o);
    assert!(
        e.contains(&format!("error: cannot download '{url}'")),
        "{e}"
    );
    assert!(e.contains("404"), "{e}");
    assert_eq!(out(&o), "");

    let o = rocmx(d, &["store", "prefetch", "--hash-algo", "md5", &url]);
    assert_eq!(o.status.code(), Some(2));
    let e = err(&o);
    assert!(e.contains("unknown hash algorithm 'md5'"), "{e}");

    // A URL whose last segment cannot name a store path asks for --name.
    let o = rocmx(
        d,
        &[
            "store",
            "prefetch",
            &format!("http://127.0.0.1:{port}/a%20b"),
        ],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(err(&o).contains("--name"), "{}", err(&o));
    make_writable(d);
}
