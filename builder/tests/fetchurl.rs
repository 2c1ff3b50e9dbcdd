//! Integration tests of `builtin:fetchurl` ([`rocmx_builder::fetchurl`])
//! against a tiny hand-written HTTP/1.1 server on 127.0.0.1 (`support`) and
//! `file://` URLs: downloads, fallbacks, modes, unpacking. The limits and
//! redirect checks are tested in `fetchurl_limits.rs`.
//!
//! This file owns only tests: it must not reach any address but the loopback
//! one, and must not name any real host.

mod support;

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::Path;

use rocmx_builder::fetchurl::{fetch, FetchError, FetchRequest, Limits, Mirrors};
use support::{listing, mode, noise, refused_port, request, serve, Route};

/// A gzip-compressed tarball with one top-level directory `pkg-1.0/`.
fn good_tarball() -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    let mut add = |path: &str, data: &[u8], mode: u32| {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(mode);
        h.set_entry_type(tar::EntryType::Regular);
        b.append_data(&mut h, path, data).expect("append");
    };
    add("pkg-1.0/README", b"read me\n", 0o644);
    add(
        "pkg-1.0/src/main.c",
        b"int main(void) { return 0; }\n",
        0o644,
    );
    add("pkg-1.0/configure", b"#!/bin/sh\n", 0o755);
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(tar::EntryType::Symlink);
    h.set_size(0);
    h.set_mode(0o777);
    b.append_link(&mut h, "pkg-1.0/link", "src/main.c")
        .expect("link");
    let tar = b.into_inner().expect("finish");
    gzip(&tar)
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(data).expect("gzip");
    enc.finish().expect("gzip")
}

/// A raw tar entry whose path is written byte-for-byte (the tar crate's
/// builder refuses `..` and absolute paths, which is what we test).
fn raw_entry(out: &mut Vec<u8>, path: &str, data: &[u8]) {
    let mut h = tar::Header::new_ustar();
    h.as_old_mut().name[..path.len()].copy_from_slice(path.as_bytes());
    h.set_entry_type(tar::EntryType::Regular);
    h.set_mode(0o644);
    h.set_size(data.len() as u64);
    h.set_cksum();
    out.extend_from_slice(h.as_bytes());
    out.extend_from_slice(data);
    out.resize(out.len().div_ceil(512) * 512, 0);
}

#[test]
fn http_fetch_is_byte_exact() {
    let big = noise(5 * 1024 * 1024);
    let addr = serve(vec![("/big.bin", Route::Body(big.clone()))]);
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("out");
    let url = format!("http://{addr}/big.bin");
    let mut log = Vec::new();
    let outcome = fetch(
        &request(std::slice::from_ref(&url)),
        &Mirrors::new(),
        &Limits::default(),
        &dest,
        &mut log,
    )
    .unwrap();
    assert_eq!(outcome.bytes, big.len() as u64);
    assert_eq!(outcome.url, url);
    assert!(outcome.failed.is_empty());
    assert!(fs::read(&dest).unwrap() == big, "content differs");
    assert_eq!(mode(&dest), 0o444);
    assert_eq!(
        String::from_utf8(log).unwrap(),
        format!("downloading '{url}'...\n")
    );
    assert_eq!(listing(dir.path()), ["out"], "no temporary file left");
}

#[test]
fn http_404_names_url_and_status() {
    let addr = serve(vec![]);
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("out");
    let url = format!("http://{addr}/missing.tar.gz");
    let mut log = Vec::new();
    let err = fetch(
        &request(std::slice::from_ref(&url)),
        &Mirrors::new(),
        &Limits::default(),
        &dest,
        &mut log,
    )
    .unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains(&url) && msg.contains("HTTP 404 Not Found"),
        "{msg}"
    );
    assert_eq!(err.attempts().len(), 1);
    assert_eq!(err.attempts()[0].http_status, Some(404));
    let log = String::from_utf8(log).unwrap();
    assert!(log.contains("404"), "{log}");
    assert!(listing(dir.path()).is_empty(), "{:?}", listing(dir.path()));
}

#[test]
fn redirects_are_followed() {
    let addr = serve(vec![
        ("/old", Route::Redirect("/new".into())),
        ("/new", Route::Body(b"moved content\n".to_vec())),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("out");
    fetch(
        &request(&[format!("http://{addr}/old")]),
        &Mirrors::new(),
        &Limits::default(),
        &dest,
        &mut Vec::new(),
    )
    .unwrap();
    assert_eq!(fs::read(&dest).unwrap(), b"moved content\n");
}

#[test]
fn mirror_falls_back_to_a_working_url() {
    let addr = serve(vec![(
        "/good/pool/hello.txt",
        Route::Body(b"hello\n".to_vec()),
    )]);
    let refused = format!("http://127.0.0.1:{}/base", refused_port());
    let mut mirrors = Mirrors::new();
    mirrors
        .parse_config(&format!(
            "mirror.test = {refused} http://{addr}/broken/ http://{addr}/good\n"
        ))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("hello.txt");
    let mut log = Vec::new();
    let outcome = fetch(
        &request(&["mirror://test/pool/hello.txt".into()]),
        &mirrors,
        &Limits::default(),
        &dest,
        &mut log,
    )
    .unwrap();
    assert_eq!(fs::read(&dest).unwrap(), b"hello\n");
    assert_eq!(outcome.url, format!("http://{addr}/good/pool/hello.txt"));
    assert_eq!(outcome.failed.len(), 2);
    assert_eq!(outcome.failed[0].url, format!("{refused}/pool/hello.txt"));
    assert!(
        outcome.failed[0].reason.contains("connection refused"),
        "{:?}",
        outcome.failed
    );
    assert_eq!(outcome.failed[1].http_status, Some(404));
    let log = String::from_utf8(log).unwrap();
    let attempts = log
        .lines()
        .filter(|l| l.starts_with("downloading '"))
        .count();
    assert_eq!(attempts, 3, "{log}");
    assert_eq!(
        log.lines().filter(|l| l.starts_with("error: ")).count(),
        2,
        "{log}"
    );
    assert!(log.contains("connection refused"), "{log}");
}

#[test]
fn all_failures_are_listed() {
    let addr = serve(vec![]);
    let refused = format!("http://127.0.0.1:{}/a.tar.gz", refused_port());
    let missing = format!("http://{addr}/a.tar.gz");
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("out");
    let err = fetch(
        &request(&[refused.clone(), missing.clone()]),
        &Mirrors::new(),
        &Limits::default(),
        &dest,
        &mut Vec::new(),
    )
    .unwrap_err();
    assert!(matches!(err, FetchError::AllFailed { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains("all 2 URLs failed"), "{msg}");
    assert!(
        msg.contains(&format!("'{refused}': connection refused")),
        "{msg}"
    );
    assert!(msg.contains(&format!("'{missing}': HTTP 404")), "{msg}");
    assert!(listing(dir.path()).is_empty());
}

#[test]
fn truncated_body_fails_and_leaves_nothing() {
    let addr = serve(vec![(
        "/short",
        Route::Truncated {
            claimed: 100_000,
            body: noise(1000),
        },
    )]);
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("out");
    let url = format!("http://{addr}/short");
    let err = fetch(
        &request(std::slice::from_ref(&url)),
        &Mirrors::new(),
        &Limits::default(),
        &dest,
        &mut Vec::new(),
    )
    .unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains(&url), "{msg}");
    assert!(
        msg.contains("truncated") || msg.contains("reading the body failed"),
        "{msg}"
    );
    assert!(listing(dir.path()).is_empty(), "{:?}", listing(dir.path()));
}

#[test]
fn file_url_and_executable_mode() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("tool.sh");
    fs::write(&src, b"#!/bin/sh\necho hi\n").unwrap();
    let dest = dir.path().join("out");
    let mut req = request(&[format!("file://{}", src.display())]);
    req.executable = true;
    let outcome = fetch(
        &req,
        &Mirrors::new(),
        &Limits::default(),
        &dest,
        &mut Vec::new(),
    )
    .unwrap();
    assert_eq!(outcome.bytes, 18);
    assert_eq!(fs::read(&dest).unwrap(), b"#!/bin/sh\necho hi\n");
    assert_eq!(mode(&dest), 0o555);

    // A directory is refused, and so is an existing destination.
    let err = fetch(
        &request(&[format!("file://{}", dir.path().display())]),
        &Mirrors::new(),
        &Limits::default(),
        &dir.path().join("out2"),
        &mut Vec::new(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("is a directory"), "{err}");
    let err = fetch(
        &req,
        &Mirrors::new(),
        &Limits::default(),
        &dest,
        &mut Vec::new(),
    )
    .unwrap_err();
    assert!(matches!(err, FetchError::DestExists { .. }), "{err}");
    assert_eq!(listing(dir.path()), ["out", "tool.sh"]);
}

#[test]
fn request_from_env_drives_fetch() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("data");
    fs::write(&src, b"payload").unwrap();
    let env: BTreeMap<String, String> = [
        (
            "url",
            format!("file://{}", dir.path().join("absent").display()),
        ),
        ("urls", format!("file://{}", src.display())),
        ("name", "data".to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let req = FetchRequest::from_env(&env).unwrap();
    let dest = dir.path().join("out");
    let outcome = fetch(
        &req,
        &Mirrors::new(),
        &Limits::default(),
        &dest,
        &mut Vec::new(),
    )
    .unwrap();
    assert_eq!(outcome.failed.len(), 1);
    assert!(
        outcome.failed[0].reason.contains("no such file"),
        "{:?}",
        outcome.failed
    );
    assert_eq!(fs::read(&dest).unwrap(), b"payload");
}

#[test]
fn unpack_tar_gz_strips_single_top_dir() {
    let addr = serve(vec![("/pkg-1.0.tar.gz", Route::Body(good_tarball()))]);
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("out");
    let mut req = request(&[format!("http://{addr}/pkg-1.0.tar.gz")]);
    req.unpack = true;
    fetch(
        &req,
        &Mirrors::new(),
        &Limits::default(),
        &dest,
        &mut Vec::new(),
    )
    .unwrap();
    assert!(dest.is_dir());
    assert_eq!(listing(&dest), ["README", "configure", "link", "src"]);
    assert_eq!(fs::read(dest.join("README")).unwrap(), b"read me\n");
    assert_eq!(
        fs::read(dest.join("src/main.c")).unwrap(),
        b"int main(void) { return 0; }\n"
    );
    assert_eq!(
        fs::read_link(dest.join("link")).unwrap(),
        Path::new("src/main.c")
    );
    assert_ne!(
        mode(&dest.join("configure")) & 0o111,
        0,
        "executable bit kept"
    );
    assert_eq!(mode(&dest.join("README")) & 0o111, 0);
    assert_eq!(listing(dir.path()), ["out"], "no temporary left");
}

#[test]
fn unpack_xz_and_zstd_with_several_top_entries() {
    let mut b = tar::Builder::new(Vec::new());
    for (path, data) in [("a.txt", &b"A"[..]), ("b/c.txt", &b"C"[..])] {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        b.append_data(&mut h, path, data).unwrap();
    }
    let tar = b.into_inner().unwrap();
    let mut xz = xz2::write::XzEncoder::new(Vec::new(), 6);
    xz.write_all(&tar).unwrap();
    let xz = xz.finish().unwrap();
    let zst = zstd::encode_all(&tar[..], 3).unwrap();
    let dir = tempfile::tempdir().unwrap();
    for (name, bytes) in [("t.tar", tar.clone()), ("t.tar.xz", xz), ("t.tar.zst", zst)] {
        let src = dir.path().join(name);
        fs::write(&src, bytes).unwrap();
        let dest = dir.path().join(format!("out-{name}"));
        let mut req = request(&[format!("file://{}", src.display())]);
        req.unpack = true;
        fetch(
            &req,
            &Mirrors::new(),
            &Limits::default(),
            &dest,
            &mut Vec::new(),
        )
        .unwrap();
        assert_eq!(listing(&dest), ["a.txt", "b"], "{name}");
        assert_eq!(fs::read(dest.join("b/c.txt")).unwrap(), b"C", "{name}");
    }
}

#[test]
fn unpack_of_a_non_archive_fails_cleanly() {
    let addr = serve(vec![(
        "/page",
        Route::Body(b"<html>mirror error page</html>".to_vec()),
    )]);
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("out");
    let mut req = request(&[format!("http://{addr}/page")]);
    req.unpack = true;
    let err = fetch(
        &req,
        &Mirrors::new(),
        &Limits::default(),
        &dest,
        &mut Vec::new(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("cannot unpack"), "{err}");
    assert!(listing(dir.path()).is_empty(), "{:?}", listing(dir.path()));
}

#[test]
fn hostile_tarball_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    fs::create_dir(&work).unwrap();
    let abs_target = dir.path().join("abs-evil");
    let cases = [
        ("dotdot", "../evil".to_string(), work.join("evil")),
        (
            "absolute",
            abs_target.display().to_string(),
            abs_target.clone(),
        ),
    ];
    for (label, path, escape) in cases {
        let mut tar = Vec::new();
        raw_entry(&mut tar, "pkg/ok.txt", b"fine");
        raw_entry(&mut tar, &path, b"pwned");
        tar.extend_from_slice(&[0u8; 1024]);
        let addr = serve(vec![("/evil.tar.gz", Route::Body(gzip(&tar)))]);
        let dest = work.join("out");
        let mut req = request(&[format!("http://{addr}/evil.tar.gz")]);
        req.unpack = true;
        let err = fetch(
            &req,
            &Mirrors::new(),
            &Limits::default(),
            &dest,
            &mut Vec::new(),
        )
        .unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("refusing hostile archive entry"),
            "{label}: {msg}"
        );
        assert!(!escape.exists(), "{label}: wrote outside dest");
        assert!(listing(&work).is_empty(), "{label}: {:?}", listing(&work));
    }
    assert_eq!(listing(dir.path()), ["work"]);
}

#[test]
fn https_to_a_plain_http_server_fails_with_the_url() {
    let addr = serve(vec![("/f", Route::Body(b"x".to_vec()))]);
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("out");
    let url = format!("https://{addr}/f");
    let err = fetch(
        &request(std::slice::from_ref(&url)),
        &Mirrors::new(),
        &Limits::default(),
        &dest,
        &mut Vec::new(),
    )
    .unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.starts_with(&format!("cannot download '{url}': ")),
        "{msg}"
    );
    assert!(listing(dir.path()).is_empty());
}
