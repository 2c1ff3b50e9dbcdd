//! Integration tests of the limits of `builtin:fetchurl`
//! ([`rocmx_builder::fetchurl::Limits`]) and its redirect checks, against the
//! loopback server of `support`: refused redirects, stalls, slow drips, the
//! whole fetch's time limit, the size limit, the `size` attribute, minimal
//! requests, `file://` URLs of things that are not regular files.
//!
//! This file owns only tests: it must not reach any address but the loopback
//! one, and must not name any real host. Timing is never asserted beyond
//! "the error arrives".

mod support;

use std::collections::BTreeMap;
use std::fs;
use std::thread;
use std::time::Duration;

use rocmx_builder::fetchurl::{fetch, FetchError, FetchRequest, Limits, Mirrors};
use support::{listing, noise, request, serve, Route};

/// Fetches `url` with `limits` into a fresh directory; gives the result, the
/// log and the directory (which must be empty after a failure).
fn fetch_one(url: &str, limits: &Limits) -> (Result<u64, FetchError>, String, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Vec::new();
    let result = fetch(
        &request(&[url.to_string()]),
        &Mirrors::new(),
        limits,
        &dir.path().join("out"),
        &mut log,
    )
    .map(|o| o.bytes);
    (result, String::from_utf8(log).unwrap(), dir)
}

/// Limits small enough for a test: a stalled or slow download fails within a
/// second or two.
fn quick() -> Limits {
    Limits {
        connect_timeout: Duration::from_secs(5),
        stall_timeout: Duration::from_secs(1),
        ..Limits::default()
    }
}

#[test]
fn redirects_to_other_schemes_are_refused_naming_both_urls() {
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("secret");
    fs::write(&secret, b"host file that must not be copied\n").unwrap();
    let targets = [
        format!("file://{}", secret.display()),
        "data:text/plain,hello".to_string(),
        "ftp://127.0.0.1/pub/x".to_string(),
    ];
    for target in targets {
        let addr = serve(vec![("/r", Route::Redirect(target.clone()))]);
        let url = format!("http://{addr}/r");
        let (result, log, out) = fetch_one(&url, &Limits::default());
        let msg = result.expect_err(&target).to_string();
        assert!(msg.contains(&url), "{msg}");
        assert!(msg.contains(&format!("redirect to '{target}'")), "{msg}");
        assert!(msg.contains("refusing"), "{msg}");
        assert!(log.contains("refusing"), "{log}");
        assert!(listing(out.path()).is_empty(), "{:?}", listing(out.path()));
    }
}

#[test]
fn relative_redirects_resolve_and_loops_end() {
    // `//host/path` keeps the scheme and changes the server.
    let other = serve(vec![("/final", Route::Body(b"found\n".to_vec()))]);
    let addr = serve(vec![
        ("/a/b/start", Route::Redirect("../moved/file".into())),
        ("/a/moved/file", Route::Redirect(format!("//{other}/final"))),
        ("/loop", Route::Redirect("/loop".into())),
    ]);
    let (result, _, out) = fetch_one(&format!("http://{addr}/a/b/start"), &quick());
    assert_eq!(result.unwrap(), 6);
    assert_eq!(fs::read(out.path().join("out")).unwrap(), b"found\n");

    let url = format!("http://{addr}/loop");
    let (result, _, out) = fetch_one(&url, &quick());
    let msg = result.unwrap_err().to_string();
    assert!(
        msg.contains(&url) && msg.contains("too many redirects"),
        "{msg}"
    );
    assert!(listing(out.path()).is_empty());
}

#[test]
fn a_stalled_body_fails_with_no_data_received() {
    let addr = serve(vec![(
        "/stall",
        Route::Stall {
            body: b"some bytes".to_vec(),
            hold: Duration::from_secs(30),
        },
    )]);
    let url = format!("http://{addr}/stall");
    let (result, log, out) = fetch_one(&url, &quick());
    let msg = result.unwrap_err().to_string();
    assert!(
        msg.contains(&format!("no data received for 1 s from '{url}'")),
        "{msg}"
    );
    assert!(log.contains("no data received"), "{log}");
    assert!(listing(out.path()).is_empty(), "{:?}", listing(out.path()));
}

#[test]
fn a_server_that_never_answers_fails_with_no_data_received() {
    let addr = serve(vec![(
        "/silent",
        Route::Silent {
            hold: Duration::from_secs(30),
        },
    )]);
    let url = format!("http://{addr}/silent");
    let (result, _, out) = fetch_one(&url, &quick());
    let msg = result.unwrap_err().to_string();
    assert!(msg.contains(&url), "{msg}");
    assert!(msg.contains("no data received for 1 s"), "{msg}");
    assert!(listing(out.path()).is_empty());
}

#[test]
fn a_slow_drip_fails_below_the_minimum_speed() {
    let addr = serve(vec![(
        "/drip",
        Route::Drip {
            every: Duration::from_millis(200),
            max: 300,
        },
    )]);
    let url = format!("http://{addr}/drip");
    let limits = Limits {
        min_speed: 1000,
        ..quick()
    };
    let (result, _, out) = fetch_one(&url, &limits);
    let msg = result.unwrap_err().to_string();
    assert!(msg.contains(&url), "{msg}");
    assert!(msg.contains("too slow"), "{msg}");
    assert!(msg.contains("1000 bytes/s"), "{msg}");
    assert!(listing(out.path()).is_empty());
}

#[test]
fn the_whole_fetch_honours_its_time_limit() {
    // A drip fast enough for the speed check, endless for the test's purposes.
    let addr = serve(vec![
        (
            "/drip",
            Route::Drip {
                every: Duration::from_millis(50),
                max: 1200,
            },
        ),
        ("/good", Route::Body(b"never tried".to_vec())),
    ]);
    let drip = format!("http://{addr}/drip");
    let good = format!("http://{addr}/good");
    let limits = Limits {
        stall_timeout: Duration::from_secs(30),
        min_speed: 0,
        timeout: Some(Duration::from_secs(2)),
        ..Limits::default()
    };
    let dir = tempfile::tempdir().unwrap();
    let mut log = Vec::new();
    let err = fetch(
        &request(&[drip.clone(), good]),
        &Mirrors::new(),
        &limits,
        &dir.path().join("out"),
        &mut log,
    )
    .unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains(&drip), "{msg}");
    assert!(msg.contains("time limit of 2 s"), "{msg}");
    // The limit covers the whole fetch: the second URL is not tried.
    assert_eq!(err.attempts().len(), 1, "{msg}");
    let log = String::from_utf8(log).unwrap();
    assert_eq!(log.matches("downloading '").count(), 1, "{log}");
    assert!(listing(dir.path()).is_empty());
}

#[test]
fn an_endless_body_stops_at_the_size_limit() {
    let addr = serve(vec![("/zeros", Route::Endless { max: 256 << 20 })]);
    let url = format!("http://{addr}/zeros");
    let limits = Limits {
        max_size: 1 << 20,
        ..quick()
    };
    let (result, _, out) = fetch_one(&url, &limits);
    let msg = result.unwrap_err().to_string();
    assert!(
        msg.contains(&format!(
            "download of '{url}' exceeded the size limit of 1048576 bytes; raise download-size-limit"
        )),
        "{msg}"
    );
    assert!(listing(out.path()).is_empty(), "{:?}", listing(out.path()));
}

#[test]
fn an_announced_length_over_the_size_limit_fails_at_once() {
    let addr = serve(vec![(
        "/huge",
        Route::Truncated {
            claimed: 10 << 30,
            body: noise(1000),
        },
    )]);
    let url = format!("http://{addr}/huge");
    let limits = Limits {
        max_size: 1 << 20,
        ..quick()
    };
    let (result, _, out) = fetch_one(&url, &limits);
    let msg = result.unwrap_err().to_string();
    assert!(
        msg.contains("exceeded the size limit of 1048576 bytes"),
        "{msg}"
    );
    assert!(msg.contains("10737418240"), "announced size named: {msg}");
    assert!(listing(out.path()).is_empty());
}

#[test]
fn the_size_attribute_bounds_the_download() {
    let body = noise(1000);
    let addr = serve(vec![
        ("/sized", Route::Body(body.clone())),
        (
            "/open",
            Route::Stall {
                body: body.clone(),
                hold: Duration::from_millis(0),
            },
        ),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let run = |path: &str, size: &str, out: &str| {
        let env: BTreeMap<String, String> = [
            ("url", format!("http://{addr}{path}")),
            ("size", size.to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let req = FetchRequest::from_env(&env).unwrap();
        assert_eq!(req.size, size.parse().ok());
        fetch(
            &req,
            &Mirrors::new(),
            &quick(),
            &dir.path().join(out),
            &mut Vec::new(),
        )
    };
    // Announced by Content-Length: refused before the body is read.
    let msg = run("/sized", "10", "a").unwrap_err().to_string();
    assert!(msg.contains("expected 10 bytes"), "{msg}");
    assert!(msg.contains("1000"), "{msg}");
    // No length announced: stopped once more than expected arrived.
    let msg = run("/open", "10", "b").unwrap_err().to_string();
    assert!(msg.contains("more than the expected 10 bytes"), "{msg}");
    // Too short is an error too.
    let msg = run("/open", "2000", "c").unwrap_err().to_string();
    assert!(msg.contains("1000 of 2000 bytes"), "{msg}");
    assert!(listing(dir.path()).is_empty(), "{:?}", listing(dir.path()));
    // The right size passes.
    assert_eq!(run("/open", "1000", "d").unwrap().bytes, 1000);
    assert_eq!(fs::read(dir.path().join("d")).unwrap(), body);

    let env: BTreeMap<String, String> = [("url", "http://127.0.0.1/x"), ("size", "12k")]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let err = FetchRequest::from_env(&env).unwrap_err();
    assert!(matches!(err, FetchError::BadSize { .. }), "{err}");
    assert!(err.to_string().contains("'12k'"), "{err}");
}

#[test]
fn requests_carry_no_credentials_and_no_content_negotiation() {
    let addr = serve(vec![("/echo", Route::Echo)]);
    let (result, _, out) = fetch_one(&format!("http://{addr}/echo"), &quick());
    result.unwrap();
    let head = fs::read_to_string(out.path().join("out")).unwrap();
    let mut names: Vec<String> = head
        .lines()
        .skip(1)
        .filter_map(|l| l.split_once(':'))
        .map(|(n, _)| n.trim().to_ascii_lowercase())
        .collect();
    names.sort();
    assert_eq!(names, ["accept", "host", "user-agent"], "{head}");
}

#[test]
fn file_urls_must_name_regular_files() {
    // A FIFO would block the fetch forever; a device could be endless.
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    for url in [
        format!("file://{}", fifo.display()),
        "file:///dev/zero".to_string(),
    ] {
        let (tx, rx) = std::sync::mpsc::channel();
        let u = url.clone();
        thread::spawn(move || {
            let _ = tx.send(fetch_one(&u, &quick()).0.map_err(|e| e.to_string()));
        });
        let result = rx
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("fetching {url} did not end"));
        let msg = result.unwrap_err();
        assert!(msg.contains("not a regular file"), "{msg}");
    }
}
