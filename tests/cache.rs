//! Binary caches end to end: `rocmx key generate`, `rocmx copy --to file://…` of a
//! built closure with its realisations, `rocmx copy --from` into an empty store, and a
//! tampered cache refused in every way, with nothing registered; caches over HTTP
//! (nginx, a broken server); `rocmx serve`, and pushing to it ([`serve`]).
//!
//! The builder is a static busybox; the tests skip, saying why, when it is missing.

mod common;
#[path = "cache/dry_run.rs"]
mod dry_run;
#[path = "cache/serve.rs"]
mod serve;

use std::fs;
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::fixture::{busybox_or_skip, sandbox_refused, Work, BIN};
use common::{err, out};
use rocmx_cache::keys::SecretKey;
use rocmx_cache::narinfo::NarInfo;

const PACKAGES: &str = r#"
let
  bb = ./bb;
  mk = name: script: derivation {
    inherit name;
    system = builtins.currentSystem;
    builder = "${bb}/bin/sh";
    args = [ "-c" script ];
    PATH = "${bb}/bin";
  };
  a = mk "cached-a" "echo A > $out";
  b = mk "cached-b" "mkdir $out; echo ${a} > $out/uses-a; echo B > $out/b";
in { inherit a b; }
"#;

/// The work directory of the cache tests: `p.nix`, busybox, and stores named by their
/// directory in it.
struct Fx(Work);

impl Deref for Fx {
    type Target = Work;
    fn deref(&self) -> &Work {
        &self.0
    }
}

impl Fx {
    fn new() -> Option<Fx> {
        busybox_or_skip()?;
        let w = Work::new(&["echo", "mkdir", "cat"]);
        w.write("p.nix", PACKAGES);
        Some(Fx(w))
    }

    /// `rocmx --store DIR/STORE ARGS…`.
    fn run(&self, store: &str, args: &[&str]) -> Output {
        self.run_in(&self.path(store), args)
    }

    /// Builds `b` in store `s1`, makes key `k-1`, pushes; gives (b's path, public key).
    fn filled_cache(&self) -> Option<(String, String)> {
        let nix = self.path("p.nix");
        let o = self.run(
            "s1",
            &[
                "build",
                "-f",
                nix.to_str().unwrap(),
                "b",
                "--no-link",
                "--print-out-paths",
            ],
        );
        if sandbox_refused(&o) {
            return None;
        }
        assert!(o.status.success(), "{}", err(&o));
        let b = out(&o).trim().to_string();
        let sk = self.path("k.secret");
        let o = Command::new(BIN)
            .args(["key", "generate", "k-1", "--secret-key-file"])
            .arg(&sk)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", err(&o));
        let pk = out(&o).trim().to_string();
        assert!(pk.starts_with("k-1:"), "{pk}");
        let cache = format!("file://{}", self.path("cache").display());
        let o = self.run(
            "s1",
            &[
                "copy",
                "--to",
                &cache,
                &b,
                "--option",
                "secret-key-files",
                sk.to_str().unwrap(),
            ],
        );
        assert!(o.status.success(), "{}", err(&o));
        assert!(err(&o).contains("pushed 2 paths"), "{}", err(&o));
        Some((b, pk))
    }

    fn fetch(&self, store: &str, cache: &Path, b: &str, trusted: &str) -> Output {
        let url = format!("file://{}", cache.display());
        self.run(
            store,
            &[
                "copy",
                "--from",
                &url,
                b,
                "--option",
                "trusted-public-keys",
                trusted,
            ],
        )
    }
}

fn narinfos(cache: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(cache)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "narinfo"))
        .collect();
    v.sort();
    v
}

/// The narinfo (path and parsed) of the store path whose name ends with `name`.
fn narinfo_of(cache: &Path, name: &str) -> (PathBuf, NarInfo) {
    for f in narinfos(cache) {
        let ni = NarInfo::parse(&fs::read_to_string(&f).unwrap()).unwrap();
        if ni.store_path.name() == name {
            return (f, ni);
        }
    }
    panic!("no narinfo for {name}");
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let t = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &t);
        } else {
            fs::copy(e.path(), &t).unwrap();
        }
    }
}

#[test]
fn a_pushed_closure_fills_an_empty_store() {
    let Some(fx) = Fx::new() else { return };
    let Some((b, pk)) = fx.filled_cache() else {
        return;
    };
    let cache = fx.path("cache");
    assert!(cache.join("rocmx-cache-info").is_file());
    assert_eq!(narinfos(&cache).len(), 2);
    let reals: Vec<_> = fs::read_dir(cache.join("realisations")).unwrap().collect();
    assert_eq!(reals.len(), 2, "one realisation per built output");
    let (_, ni) = narinfo_of(&cache, "cached-b");
    assert!(ni.ca.as_deref().unwrap().starts_with("output:blake3:"));
    assert_eq!(ni.references.len(), 1);

    // Pushing again writes nothing new.
    let sk = fx.path("k.secret");
    let url = format!("file://{}", cache.display());
    let o = fx.run(
        "s1",
        &[
            "copy",
            "--to",
            &url,
            &b,
            "--option",
            "secret-key-files",
            sk.to_str().unwrap(),
        ],
    );
    assert!(
        err(&o).contains("pushed 0 paths (2 already there)"),
        "{}",
        err(&o)
    );

    let o = fx.fetch("s2", &cache, &b, &pk);
    assert!(o.status.success(), "{}", err(&o));
    assert!(err(&o).contains("fetched 2 paths"), "{}", err(&o));
    let real = fx
        .path("s2")
        .join("store")
        .join(b.trim_start_matches("/rocmx/store/"));
    assert_eq!(fs::read_to_string(real.join("b")).unwrap(), "B\n");
    let o = fx.run("s2", &["path-info", "--json", &b]);
    assert!(o.status.success(), "{}", err(&o));
    assert!(
        out(&o).contains("k-1:"),
        "the signature is kept: {}",
        out(&o)
    );
}

#[test]
fn a_tampered_cache_is_refused_and_nothing_is_registered() {
    let Some(fx) = Fx::new() else { return };
    let Some((b, pk)) = fx.filled_cache() else {
        return;
    };
    let good = fx.path("cache");
    let key = SecretKey::parse(&fs::read_to_string(fx.path("k.secret")).unwrap()).unwrap();
    let other = SecretKey::generate("k-1").unwrap();

    type Tamper = Box<dyn Fn(&Path)>;
    let flip_b: Tamper = Box::new(|c: &Path| {
        let (_, ni) = narinfo_of(c, "cached-b");
        let f = c.join(&ni.url);
        let mut nar = zstd::decode_all(&fs::read(&f).unwrap()[..]).unwrap();
        let at = nar.windows(2).position(|w| w == b"B\n").unwrap();
        nar[at] = b'C';
        fs::write(&f, zstd::encode_all(&nar[..], 1).unwrap()).unwrap();
    });
    let truncate_a: Tamper = Box::new(|c: &Path| {
        let (_, ni) = narinfo_of(c, "cached-a");
        let f = c.join(&ni.url);
        let nar = zstd::decode_all(&fs::read(&f).unwrap()[..]).unwrap();
        fs::write(&f, zstd::encode_all(&nar[..nar.len() - 24], 1).unwrap()).unwrap();
    });
    let resign = key.clone();
    let wrong_hash: Tamper = Box::new(move |c: &Path| {
        let (f, mut ni) = narinfo_of(c, "cached-a");
        ni.nar_hash = rocmx_store::Hash::digest(rocmx_store::HashAlgo::Blake3, b"other");
        ni.signatures.clear();
        ni.sign(&resign);
        fs::write(f, ni.to_text()).unwrap();
    });
    let other_key = other.clone();
    let untrusted: Tamper = Box::new(move |c: &Path| {
        let (f, mut ni) = narinfo_of(c, "cached-b");
        ni.signatures.clear();
        ni.sign(&other_key);
        fs::write(f, ni.to_text()).unwrap();
    });
    let unsigned: Tamper = Box::new(|c: &Path| {
        let (f, mut ni) = narinfo_of(c, "cached-a");
        ni.signatures.clear();
        fs::write(f, ni.to_text()).unwrap();
    });
    let resign2 = key.clone();
    let traversal: Tamper = Box::new(move |c: &Path| {
        let (f, mut ni) = narinfo_of(c, "cached-b");
        let mut nar = Vec::new();
        for s in [
            &b"nix-archive-1"[..],
            b"(",
            b"type",
            b"directory",
            b"entry",
            b"(",
            b"name",
            b"..",
            b"node",
            b"(",
            b"type",
            b"regular",
            b"contents",
            b"x",
            b")",
            b")",
            b")",
        ] {
            nar.extend_from_slice(&(s.len() as u64).to_le_bytes());
            nar.extend_from_slice(s);
            nar.resize(nar.len().div_ceil(8) * 8, 0);
        }
        fs::write(c.join(&ni.url), zstd::encode_all(&nar[..], 1).unwrap()).unwrap();
        ni.nar_size = nar.len() as u64;
        ni.nar_hash = rocmx_store::Hash::digest(rocmx_store::HashAlgo::Blake3, &nar);
        ni.signatures.clear();
        ni.sign(&resign2);
        fs::write(f, ni.to_text()).unwrap();
    });
    let cases: Vec<(&str, Tamper, &str)> = vec![
        ("flipped", flip_b, "hashes to"),
        ("truncated", truncate_a, "refusing"),
        ("wrong-narhash", wrong_hash, "was claimed"),
        (
            "untrusted",
            untrusted,
            "its signatures are by k-1, none of them trusted or valid",
        ),
        ("unsigned", unsigned, "it has no signature"),
        ("traversal", traversal, "its archive is unusable"),
    ];
    for (i, (what, tamper, needle)) in cases.into_iter().enumerate() {
        let c = fx.path(&format!("bad-{what}"));
        copy_dir(&good, &c);
        tamper(&c);
        let store = format!("t{i}");
        let o = fx.fetch(&store, &c, &b, &pk);
        assert!(!o.status.success(), "{what}: accepted");
        let e = err(&o);
        assert!(e.contains(needle), "{what}: {e}");
        let o = fx.run(&store, &["path-info", &b]);
        assert!(!o.status.success(), "{what}: {b} was registered");
        if let Ok(rd) = fs::read_dir(fx.path(&store).join("store")) {
            let names: Vec<String> = rd
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| !n.starts_with('.') && n.ends_with("cached-b"))
                .collect();
            assert!(names.is_empty(), "{what}: left {names:?}");
        }
    }
}

/// `rocmx build --json` in store `s`, with the cache as substituter; the parsed result.
fn build_json(
    fx: &Fx,
    s: &str,
    cache: &Path,
    pk: &str,
    extra: &[&str],
) -> (Output, serde_json::Value) {
    build_from(fx, s, &format!("file://{}", cache.display()), pk, extra)
}

/// `rocmx build --json` of `b` in store `s` with `--substituters urls`; the output and
/// the parsed result (null when it is not JSON).
fn build_from(
    fx: &Fx,
    s: &str,
    url: &str,
    pk: &str,
    extra: &[&str],
) -> (Output, serde_json::Value) {
    let nix = fx.path("p.nix");
    let mut args = vec![
        "build",
        "-f",
        nix.to_str().unwrap(),
        "b",
        "--no-link",
        "--json",
        "--substituters",
        url,
        "--option",
        "trusted-public-keys",
        pk,
    ];
    args.extend_from_slice(extra);
    let o = fx.run(s, &args);
    let v = serde_json::from_str(out(&o).trim()).unwrap_or(serde_json::Value::Null);
    (o, v)
}

#[test]
fn build_substitutes_instead_of_building() {
    let Some(fx) = Fx::new() else { return };
    let Some((b, pk)) = fx.filled_cache() else {
        return;
    };
    let cache = fx.path("cache");
    let (o, v) = build_json(&fx, "s2", &cache, &pk, &[]);
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(v["built"], serde_json::json!([]), "{v}");
    // Only the goal is substituted: its output brings a's output (which it refers
    // to) along as part of its closure, and a's derivation is not needed at all.
    assert_eq!(v["substituted"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(v["outputs"][0]["outputs"]["out"], serde_json::json!(b));
    let a_out = fx.run("s2", &["path-info", "--recursive", &b]);
    assert_eq!(out(&a_out).lines().count(), 2, "b and a: {}", out(&a_out));

    // --offline builds.
    let (o, v) = build_json(&fx, "s3", &cache, &pk, &["--offline"]);
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(v["built"].as_array().unwrap().len(), 2, "{v}");

    // An untrusted cache is skipped with a warning naming it, and the build runs.
    let (o, v) = build_json(
        &fx,
        "s4",
        &cache,
        "other-1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
        &[],
    );
    assert!(o.status.success(), "{}", err(&o));
    assert!(
        err(&o).contains("is not signed by a trusted key"),
        "{}",
        err(&o)
    );
    assert!(
        err(&o).contains(&format!("not asking 'file://{}' again", cache.display())),
        "{}",
        err(&o)
    );
    assert_eq!(v["built"].as_array().unwrap().len(), 2, "{v}");
}

#[test]
fn a_cache_that_fails_to_deliver_needs_fallback() {
    let Some(fx) = Fx::new() else { return };
    let Some((_b, pk)) = fx.filled_cache() else {
        return;
    };
    let bad = fx.path("bad");
    copy_dir(&fx.path("cache"), &bad);
    let (_, ni) = narinfo_of(&bad, "cached-b");
    fs::write(
        bad.join(&ni.url),
        zstd::encode_all(&b"nix-archive-1"[..], 1).unwrap(),
    )
    .unwrap();

    let (o, _) = build_json(&fx, "s2", &bad, &pk, &[]);
    assert!(!o.status.success());
    assert!(
        err(&o).contains("pass --fallback to build it instead"),
        "{}",
        err(&o)
    );
    assert!(err(&o).contains("refusing"), "{}", err(&o));

    let (o, v) = build_json(&fx, "s3", &bad, &pk, &["--fallback"]);
    assert!(o.status.success(), "{}", err(&o));
    assert!(
        err(&o).contains("building instead (--fallback)"),
        "{}",
        err(&o)
    );
    // a came from the cache, b was built.
    assert_eq!(v["built"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(v["substituted"].as_array().unwrap().len(), 1, "{v}");
}

/// nginx serving `root` on a free loopback port, stopped when dropped.
struct Nginx {
    child: std::process::Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Nginx {
    fn start(root: &Path) -> Option<Nginx> {
        let bin = ["/usr/sbin/nginx", "/usr/bin/nginx"]
            .into_iter()
            .find(|p| Path::new(p).exists());
        let Some(bin) = bin else {
            eprintln!("SKIP: no nginx (install Debian's nginx)");
            return None;
        };
        let dir = tempfile::tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let p = dir.path().display();
        let root_user = Command::new("id")
            .arg("-u")
            .output()
            .map(|o| out(&o).trim() == "0");
        let conf =
            format!(
            "{user}master_process off; pid {p}/nginx.pid; error_log {p}/error.log; daemon off;\n\
             events {{ worker_connections 64; }}\n\
             http {{ access_log off; client_body_temp_path {p}/b; proxy_temp_path {p}/p;\n\
               fastcgi_temp_path {p}/f; uwsgi_temp_path {p}/u; scgi_temp_path {p}/s;\n\
               server {{ listen 127.0.0.1:{port}; root {root}; }} }}\n",
            user = if root_user.unwrap_or(false) { "user root; " } else { "" },
            root = root.display(),
        );
        fs::write(dir.path().join("nginx.conf"), conf).unwrap();
        let child = Command::new(bin)
            .args(["-p"])
            .arg(dir.path())
            .arg("-c")
            .arg(dir.path().join("nginx.conf"))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        for _ in 0..100 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Some(Nginx {
                    child,
                    port,
                    _dir: dir,
                });
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let mut child = child;
        let _ = child.kill();
        let _ = child.wait();
        panic!(
            "nginx did not start: {}",
            fs::read_to_string(dir.path().join("error.log")).unwrap_or_default()
        );
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        // TERM, not KILL: nginx stops cleanly and leaves no process behind.
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}

#[test]
fn an_http_cache_served_by_nginx_substitutes() {
    let Some(fx) = Fx::new() else { return };
    let Some((b, pk)) = fx.filled_cache() else {
        return;
    };
    let cache = fx.path("cache");
    // nginx, when not running as root, must be able to reach it.
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(fx.dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let Some(ngx) = Nginx::start(&cache) else {
        return;
    };
    let url = format!("http://127.0.0.1:{}", ngx.port);
    let (o, v) = build_from(&fx, "s2", &url, &pk, &[]);
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(v["built"], serde_json::json!([]), "{v}");
    assert_eq!(v["outputs"][0]["outputs"]["out"], serde_json::json!(b));
    // copy --from over HTTP too.
    let o = fx.run(
        "s3",
        &[
            "copy",
            "--from",
            &url,
            &b,
            "--option",
            "trusted-public-keys",
            &pk,
        ],
    );
    assert!(o.status.success(), "{}", err(&o));
}

/// A loopback server that answers every request with `status`, or never answers.
fn broken_server(status: Option<u16>) -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            match status {
                Some(code) => {
                    use std::io::{Read, Write};
                    let mut buf = [0u8; 4096];
                    let _ = s.read(&mut buf);
                    let _ = write!(
                        s,
                        "HTTP/1.1 {code} Oops\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    );
                }
                None => held.push(s),
            }
        }
    });
    port
}

#[test]
fn a_cache_that_errors_or_never_answers_is_skipped() {
    let Some(fx) = Fx::new() else { return };
    let Some((_b, pk)) = fx.filled_cache() else {
        return;
    };
    for (i, status) in [Some(500), None].into_iter().enumerate() {
        let port = broken_server(status);
        let urls = format!(
            "http://127.0.0.1:{port} file://{}",
            fx.path("cache").display()
        );
        let (o, v) = build_from(
            &fx,
            &format!("e{i}"),
            &urls,
            &pk,
            &["--option", "stalled-download-timeout", "1"],
        );
        assert!(o.status.success(), "{}", err(&o));
        let e = err(&o);
        let needle = if status.is_some() {
            "answered 500"
        } else {
            "timed out"
        };
        assert!(
            e.contains(needle) && e.contains(&format!("127.0.0.1:{port}")),
            "{e}"
        );
        // The next cache served everything.
        assert_eq!(v["built"], serde_json::json!([]), "{v}");
    }
}

#[test]
fn a_realisation_signed_by_an_untrusted_key_is_not_used() {
    let Some(fx) = Fx::new() else { return };
    let Some((_b, pk)) = fx.filled_cache() else {
        return;
    };
    let c = fx.path("forged");
    copy_dir(&fx.path("cache"), &c);
    let other = SecretKey::generate("k-1").unwrap();
    for e in fs::read_dir(c.join("realisations")).unwrap() {
        let f = e.unwrap().path();
        let mut r =
            rocmx_cache::realisation::Realisation::parse(&fs::read_to_string(&f).unwrap()).unwrap();
        r.signatures.clear();
        r.sign(&other);
        fs::write(&f, r.to_text()).unwrap();
    }
    let (o, v) = build_json(&fx, "s2", &c, &pk, &[]);
    assert!(o.status.success(), "{}", err(&o));
    let e = err(&o);
    assert!(
        e.contains("the realisation") && e.contains("is not signed by a trusted key"),
        "{e}"
    );
    assert_eq!(v["built"].as_array().unwrap().len(), 2, "{v}");
    assert_eq!(v["substituted"], serde_json::json!([]), "{v}");
}
