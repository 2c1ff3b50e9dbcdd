//! Helpers for the tests of several `rocmx build` processes on one store
//! (`tests/build_concurrent.rs`, `tests/build_crash.rs`), included with
//! `#[path = "common/concurrent.rs"] mod concurrent;`.
//!
//! Builders are sandboxed without a network, except fixed-output derivations, which
//! share the host's. So the graph is made of fixed-output derivations whose builder
//! first tells a loopback [`Counter`] run by the test that it started
//! (`wget http://127.0.0.1:PORT/hit/NAME`) and, when done, that it finished
//! (`…/done/NAME`): every run of every builder is counted outside the store.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fs;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::ops::Deref;
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rocmx_store::{Hash, HashAlgo};

use super::common::fixture::{busybox_or_skip, Work};

/// Counts `GET /KIND/NAME` requests on a loopback port. Bounded: it stops by itself
/// after `limit`, or when dropped.
pub struct Counter {
    pub port: u16,
    hits: Arc<Mutex<BTreeMap<(String, String), usize>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Counter {
    pub fn start(limit: Duration) -> Counter {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let port = listener.local_addr().expect("addr").port();
        listener.set_nonblocking(true).expect("nonblocking");
        let hits = Arc::new(Mutex::new(BTreeMap::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (h, s) = (hits.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            let deadline = Instant::now() + limit;
            while !s.load(Ordering::Relaxed) && Instant::now() < deadline {
                match listener.accept() {
                    Ok((conn, _)) => serve(conn, &h),
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Counter {
            port,
            hits,
            stop,
            thread: Some(thread),
        }
    }

    /// How many times `/KIND/NAME` was requested, per name.
    pub fn counts(&self, kind: &str) -> BTreeMap<String, usize> {
        self.hits
            .lock()
            .unwrap()
            .iter()
            .filter(|((k, _), _)| k == kind)
            .map(|((_, n), c)| (n.clone(), *c))
            .collect()
    }
}

impl Drop for Counter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve(mut conn: TcpStream, hits: &Mutex<BTreeMap<(String, String), usize>>) {
    let _ = conn.set_nonblocking(false);
    let _ = conn.set_read_timeout(Some(Duration::from_secs(2)));
    let mut buf = Vec::new();
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < 16 * 1024 {
        match conn.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let text = String::from_utf8_lossy(&buf);
    let path = text.split_whitespace().nth(1).unwrap_or("");
    let mut parts = path.trim_start_matches('/').splitn(2, '/');
    if let (Some(kind), Some(name)) = (parts.next(), parts.next()) {
        *hits
            .lock()
            .unwrap()
            .entry((kind.to_string(), name.to_string()))
            .or_default() += 1;
    }
    let _ =
        conn.write_all(b"HTTP/1.0 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n");
}

/// The names of the graph's derivations: six leaves, six middles (two leaves each),
/// six tops (two middles each) and `all` (every top): 19 fixed-output derivations.
pub fn graph() -> Vec<(String, Vec<String>)> {
    let mut g = Vec::new();
    for i in 0..6 {
        g.push((format!("leaf{i}"), vec![]));
    }
    for i in 0..6 {
        g.push((
            format!("mid{i}"),
            vec![format!("leaf{i}"), format!("leaf{}", (i + 1) % 6)],
        ));
    }
    for i in 0..6 {
        g.push((
            format!("top{i}"),
            vec![format!("mid{i}"), format!("mid{}", (i + 2) % 6)],
        ));
    }
    g.push((
        "all".to_string(),
        (0..6).map(|i| format!("top{i}")).collect(),
    ));
    g
}

/// The name of the derivation `base` of the graph in round `round`.
pub fn drv_name(base: &str, round: usize) -> String {
    format!("{base}-r{round}")
}

/// The output path of derivation `base` of the graph in round `round` (a fixed output:
/// known in advance).
pub fn fixed_out(base: &str, round: usize) -> String {
    let hash = Hash::digest(HashAlgo::Sha256, format!("{base}\n").as_bytes());
    rocmx_store::derivation::fixed_output_path(
        &drv_name(base, round),
        rocmx_store::IngestionMethod::Flat,
        hash,
    )
    .expect("fixed output path")
    .to_absolute()
}

/// The package set: the fixed-output graph (each output is the file `BASE\n`, its
/// builder sleeping `sleep` seconds between its two hits; the derivations are named
/// `BASE-rROUND`, with `--argstr round ROUND`, `0` by default, so that each round
/// builds a new graph), and `nondet`, a floating derivation whose output is random.
pub fn packages(sleep: &str) -> String {
    let mut s = String::from(
        r#"{ port, round ? "0" }:
let
  bb = ./bb;
  fod = base: hash: deps: let name = "${base}-r${round}"; in derivation {
    inherit name;
    system = builtins.currentSystem;
    builder = "${bb}/bin/sh";
    args = [ "-c" ''
      wget -q -O /dev/null http://127.0.0.1:${port}/hit/${name} || exit 7
      for d in ${toString deps}; do cat $d > /dev/null || exit 8; done
      sleep SLEEP
      wget -q -O /dev/null http://127.0.0.1:${port}/done/${name} || exit 9
      echo ${base} > $out
    '' ];
    PATH = "${bb}/bin";
    outputHashAlgo = "sha256";
    outputHash = hash;
  };
  nondet = derivation {
    name = "nondet";
    system = builtins.currentSystem;
    builder = "${bb}/bin/sh";
    args = [ "-c" "sleep 2; cat /proc/sys/kernel/random/uuid > $out" ];
    PATH = "${bb}/bin";
  };
"#,
    )
    .replace("SLEEP", sleep);
    for (name, deps) in graph() {
        let hash = Hash::digest(HashAlgo::Sha256, format!("{name}\n").as_bytes()).to_sri();
        let deps: Vec<&str> = deps.iter().map(String::as_str).collect();
        s.push_str(&format!(
            "  {name} = fod \"{name}\" \"{hash}\" [ {} ];\n",
            deps.join(" ")
        ));
    }
    s.push_str("in { inherit nondet ");
    for (name, _) in graph() {
        s.push_str(&name);
        s.push(' ');
    }
    s.push_str("; }\n");
    s
}

/// A work directory with `bb/` (busybox and its applets), `packages.nix` and `work/`
/// (where `rocmx` runs), and a store root.
pub struct Fixture {
    w: Work,
}

impl Deref for Fixture {
    type Target = Work;
    fn deref(&self) -> &Work {
        &self.w
    }
}

impl Fixture {
    pub fn new(sleep: &str) -> Fixture {
        let w = Work::new(&["cat", "echo", "sleep", "wget"])
            .packages(&packages(sleep))
            .in_work_dir();
        Fixture { w }
    }

    /// `rocmx build --file packages.nix --argstr port PORT --no-link --json ATTR -j JOBS`,
    /// started with its output piped.
    pub fn spawn_build(&self, port: u16, attr: &str, jobs: usize) -> Child {
        self.spawn_round(port, 0, attr, jobs)
    }

    /// [`Fixture::spawn_build`] of round `round`'s graph.
    pub fn spawn_round(&self, port: u16, round: usize, attr: &str, jobs: usize) -> Child {
        let nix = self.nix();
        let port = port.to_string();
        let round = round.to_string();
        let jobs = jobs.to_string();
        self.command(&[
            "build",
            "--file",
            nix.to_str().unwrap(),
            "--argstr",
            "port",
            &port,
            "--argstr",
            "round",
            &round,
            "--no-link",
            "--json",
            "--log-format",
            "plain",
            "-j",
            &jobs,
            attr,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn rocmx")
    }
}

/// Whether the sandbox can run here; prints why not.
pub fn sandbox_usable() -> bool {
    if busybox_or_skip().is_none() {
        return false;
    }
    if let Err(e) = rocmx_builder::sandbox::check_user_namespaces() {
        eprintln!("SKIP: the sandbox cannot run here:\n{e}");
        return false;
    }
    true
}

/// The `outputs.out` of the first goal of a `--json` build result.
pub fn out_path(json: &str) -> String {
    let v: serde_json::Value =
        serde_json::from_str(json.trim()).unwrap_or_else(|e| panic!("not JSON ({e}): {json}"));
    v["outputs"][0]["outputs"]["out"]
        .as_str()
        .unwrap_or_else(|| panic!("no output in {json}"))
        .to_string()
}

/// Waits for a child's output, as text (stdout, stderr).
pub fn finish(c: Child) -> (std::process::ExitStatus, String, String) {
    let o = c.wait_with_output().expect("wait");
    (
        o.status,
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// Makes `dir` and its parents up to `/` traversable (for tests that switch users).
pub fn traversable(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let _ = fs::set_permissions(dir, fs::Permissions::from_mode(0o755));
}
