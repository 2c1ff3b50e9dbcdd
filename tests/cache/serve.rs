//! `rocmx serve` end to end (part of the `cache` test): serving a store, and pushes to
//! `rocmx serve --writable` over HTTP with a token, refused without the right token, on
//! a read-only server, or signed by a key the server does not trust.
//!
//! Every server runs in a [`Serve`]: its log goes to a file (never a pipe), and it is
//! stopped when the test ends, passed or failed.

use std::fs::{self, File};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use super::*;

/// `rocmx serve` on a free loopback port; stopped (TERM, then KILL) when dropped.
struct Serve {
    child: Option<Child>,
    port: u16,
    log: PathBuf,
}

impl Serve {
    fn start(fx: &Fx, store: &str, args: &[&str]) -> Serve {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let log = fx.path(&format!("serve-{port}.log"));
        let listen = format!("127.0.0.1:{port}");
        let child = fx
            .command_in(&fx.path(store), &["serve", "--listen", &listen])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let mut s = Serve {
            child: Some(child),
            port,
            log,
        };
        let t = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            let exited = s.child.as_mut().unwrap().try_wait().unwrap();
            if exited.is_some() || t.elapsed() > Duration::from_secs(20) {
                panic!("rocmx serve did not start ({exited:?}): {}", s.log());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        s
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn log(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGTERM, then the exit status (SIGKILL after 20 s) and the log.
    fn stop(&mut self) -> (Option<ExitStatus>, String) {
        let Some(mut child) = self.child.take() else {
            return (None, self.log());
        };
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        let t = Instant::now();
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break Some(s);
            }
            if t.elapsed() > Duration::from_secs(20) {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        (status, self.log())
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        self.stop();
    }
}

/// One request on its own connection: the status and the body.
fn http(port: u16, method: &str, path: &str, token: Option<&str>, body: &[u8]) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {}\r\n{auth}Connection: close\r\n\r\n",
        body.len()
    )
    .unwrap();
    s.write_all(body).unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

const TOKEN: &str = "dGVzdC10b2tlbi1mb3ItdGhlLXB1c2gtdGVzdHM=";

impl Fx {
    /// The token file, holding [`TOKEN`].
    fn token_file(&self) -> String {
        let f = self.path("token");
        fs::write(&f, format!("{TOKEN}\n")).unwrap();
        f.display().to_string()
    }

    /// `rocmx copy --to <srv> b` from store s1, signed with `key`, with `token`.
    fn push_http(&self, srv: &Serve, b: &str, key: &Path, token: Option<&str>) -> Output {
        let url = srv.url();
        let mut args = vec![
            "copy".to_string(),
            "--to".into(),
            url,
            b.into(),
            "--option".into(),
            "secret-key-files".into(),
            key.display().to_string(),
        ];
        if let Some(t) = token {
            args.extend([
                "--option".into(),
                "access-tokens".into(),
                format!("127.0.0.1:{}={t}", srv.port),
            ]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.run("s1", &args)
    }

    /// Whether `p` is valid in `store`.
    fn has(&self, store: &str, p: &str) -> bool {
        self.run(store, &["path-info", p]).status.success()
    }

    /// The files staged by servers on `store`.
    fn staged(&self, store: &str) -> Vec<String> {
        let mut v = Vec::new();
        if let Ok(rd) = fs::read_dir(self.path(store).join("var/rocmx/uploads")) {
            for d in rd.flatten() {
                for f in fs::read_dir(d.path()).unwrap().flatten() {
                    v.push(f.path().display().to_string());
                }
            }
        }
        v
    }
}

#[test]
fn rocmx_serve_serves_the_store_and_stops_on_sigterm() {
    let Some(fx) = Fx::new() else { return };
    let Some((b, pk)) = fx.filled_cache() else {
        return;
    };
    let sk = fx.path("k.secret");
    let mut srv = Serve::start(
        &fx,
        "s1",
        &["--option", "secret-key-files", sk.to_str().unwrap()],
    );
    let (o, v) = build_from(&fx, "s2", &srv.url(), &pk, &[]);
    let (status, log) = srv.stop();
    assert!(o.status.success(), "{}\nserver: {log}", err(&o));
    assert_eq!(v["built"], serde_json::json!([]), "{v}\nserver: {log}");
    assert_eq!(v["outputs"][0]["outputs"]["out"], serde_json::json!(b));
    assert!(
        status.is_some_and(|s| s.success()),
        "serve: {status:?}: {log}"
    );
    assert!(
        log.contains("GET /realisations/") && log.contains(" 200 "),
        "{log}"
    );
    assert!(log.trim_end().ends_with("stopped"), "{log}");
}

#[test]
fn a_closure_pushed_to_a_writable_serve_substitutes_elsewhere() {
    let Some(fx) = Fx::new() else { return };
    let Some((b, pk)) = fx.filled_cache() else {
        return;
    };
    let token_file = fx.token_file();
    let mut srv = Serve::start(
        &fx,
        "sB",
        &[
            "--writable",
            "--token-file",
            &token_file,
            "--option",
            "trusted-public-keys",
            &pk,
        ],
    );
    let sk = fx.path("k.secret");
    let o = fx.push_http(&srv, &b, &sk, Some(TOKEN));
    assert!(o.status.success(), "{}\nserver: {}", err(&o), srv.log());
    assert!(
        err(&o).contains("pushed 2 paths (0 already there), 2 realisations"),
        "{}",
        err(&o)
    );
    let o = fx.run("sB", &["path-info", "--json", &b]);
    assert!(o.status.success(), "{}", err(&o));
    assert!(
        out(&o).contains("k-1:"),
        "the signature is kept: {}",
        out(&o)
    );
    assert!(fx.staged("sB").is_empty(), "{:?}", fx.staged("sB"));

    // Again: the server has everything (HEAD), nothing is sent.
    let o = fx.push_http(&srv, &b, &sk, Some(TOKEN));
    assert!(
        err(&o).contains("pushed 0 paths (2 already there)"),
        "{}",
        err(&o)
    );

    // An empty store substitutes all of it from the server.
    let (o, v) = build_from(&fx, "sC", &srv.url(), &pk, &[]);
    assert!(o.status.success(), "{}\nserver: {}", err(&o), srv.log());
    assert_eq!(v["built"], serde_json::json!([]), "{v}");
    assert_eq!(v["outputs"][0]["outputs"]["out"], serde_json::json!(b));

    let (status, log) = srv.stop();
    assert!(
        status.is_some_and(|s| s.success()),
        "serve: {status:?}: {log}"
    );
    assert!(log.contains("writable"), "{log}");
    assert!(
        log.contains("PUT /nar/") && log.contains(" 200 ") && log.contains("(imported "),
        "{log}"
    );
    assert!(log.trim_end().ends_with("stopped"), "{log}");
    let uploads = fx.path("sB/var/rocmx/uploads");
    assert_eq!(fs::read_dir(uploads).unwrap().count(), 0, "staging removed");
}

#[test]
fn pushes_without_the_token_or_a_trusted_signature_register_nothing() {
    let Some(fx) = Fx::new() else { return };
    let Some((b, pk)) = fx.filled_cache() else {
        return;
    };
    let sk = fx.path("k.secret");
    let token_file = fx.token_file();

    // --writable needs a token file, and trusted keys.
    let o = fx.run("sB", &["serve", "--listen", "127.0.0.1:1", "--writable"]);
    assert!(!o.status.success());
    assert!(
        err(&o).contains("head -c 32 /dev/urandom | base64"),
        "{}",
        err(&o)
    );
    let o = fx.run(
        "sB",
        &[
            "serve",
            "--listen",
            "127.0.0.1:1",
            "--writable",
            "--token-file",
            &token_file,
        ],
    );
    assert!(err(&o).contains("needs trusted-public-keys"), "{}", err(&o));

    // A read-only server refuses pushes.
    let srv = Serve::start(&fx, "sR", &[]);
    let o = fx.push_http(&srv, &b, &sk, Some(TOKEN));
    assert!(!o.status.success());
    assert!(err(&o).contains("answered 405"), "{}", err(&o));
    let (status, body) = http(srv.port, "PUT", "/nar/x.nar", Some(TOKEN), b"x");
    assert_eq!(status, 405, "{body}");
    assert!(body.contains("--writable"), "{body}");
    assert!(!fx.has("sR", &b));
    drop(srv);

    let srv = Serve::start(
        &fx,
        "sB",
        &[
            "--writable",
            "--token-file",
            &token_file,
            "--option",
            "trusted-public-keys",
            &pk,
        ],
    );
    // No token; a wrong one.
    let o = fx.push_http(&srv, &b, &sk, None);
    assert!(!o.status.success());
    assert!(err(&o).contains("set access-tokens"), "{}", err(&o));
    let o = fx.push_http(&srv, &b, &sk, Some("not-the-token-0123456789"));
    assert!(!o.status.success());
    assert!(
        err(&o).contains("answered 401") && err(&o).contains("wrong token"),
        "{}",
        err(&o)
    );
    let (status, _) = http(srv.port, "PUT", "/nar/x.nar", None, b"x");
    assert_eq!(status, 401);
    assert!(!fx.has("sB", &b));

    // Signed by a key the server does not trust.
    let other = fx.path("other.secret");
    fs::write(&other, SecretKey::generate("k-2").unwrap().to_text()).unwrap();
    let o = fx.push_http(&srv, &b, &other, Some(TOKEN));
    assert!(!o.status.success());
    let e = err(&o);
    assert!(
        e.contains("answered 403") && e.contains("its signatures are by k-2"),
        "{e}"
    );
    assert!(!fx.has("sB", &b));
    assert!(fx.staged("sB").is_empty(), "{:?}", fx.staged("sB"));

    // A realisation: by an impostor of k-1, then of a path the server lacks.
    let f = fs::read_dir(fx.path("cache/realisations"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let mut r =
        rocmx_cache::realisation::Realisation::parse(&fs::read_to_string(&f).unwrap()).unwrap();
    let rel = format!(
        "/realisations/{}",
        rocmx_cache::realisation::Realisation::file_name(&r.drv_hash, &r.output)
    );
    let good = r.to_text();
    r.signatures.clear();
    r.sign(&SecretKey::generate("k-1").unwrap());
    let (status, body) = http(srv.port, "PUT", &rel, Some(TOKEN), r.to_text().as_bytes());
    assert_eq!(status, 403, "{body}");
    assert!(
        body.contains("not signed by a key this server trusts"),
        "{body}"
    );
    let (status, body) = http(srv.port, "PUT", &rel, Some(TOKEN), good.as_bytes());
    assert_eq!(status, 409, "{body}");
    assert!(body.contains("push the path first"), "{body}");
    assert_eq!(http(srv.port, "GET", &rel, None, b"").0, 404);

    // Bad targets and bodies.
    for (path, body, want) in [
        ("/nar/../../x.nar", &b"x"[..], 400),
        ("/../etc/x.narinfo", b"x", 400),
        ("/rocmx-cache-info", b"x", 400),
        (
            &*format!("/{}.narinfo", "0".repeat(32)),
            b"not a narinfo",
            400,
        ),
    ] {
        let (status, answer) = http(srv.port, "PUT", path, Some(TOKEN), body);
        assert_eq!(status, want, "{path}: {answer}");
        assert_eq!(answer.trim_end().lines().count(), 1, "{path}: {answer}");
    }
    let log = srv.log();
    assert!(log.contains("PUT /nar/../../x.nar 400"), "{log}");
    assert!(fx.run("sB", &["store", "verify"]).status.success());
    assert!(!fx.has("sB", &b));
}

/// A request that declares a body far larger than it sends, then closes, once
/// aborted the server (tiny_http drained it into a buffer of the declared size; see
/// vendor/tiny_http/Cargo.toml). The server answers, and goes on serving.
#[test]
fn a_huge_declared_body_does_not_take_the_server_down() {
    let Some(fx) = Fx::new() else { return };
    let srv = Serve::start(&fx, "s1", &[]);
    for method in ["PUT", "GET"] {
        let mut s = TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        write!(
            s,
            "{method} /x.narinfo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 18446744073709551615\r\n\r\nabc"
        )
        .unwrap();
        s.shutdown(std::net::Shutdown::Write).unwrap();
        let mut answer = String::new();
        let _ = s.read_to_string(&mut answer);
    }
    let (status, _) = http(srv.port, "GET", "/rocmx-cache-info", None, b"");
    assert_eq!(status, 200, "{}", srv.log());
}
