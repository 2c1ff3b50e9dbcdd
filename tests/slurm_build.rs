//! `rocmx build --builders slurm`: builds handed to a private one-node Slurm cluster
//! (`common::slurm`), with a `file://` builder cache as the only thing the submitter
//! and the jobs share besides the jobs' log files.
//!
//! As root (CI), rocmx runs as the unprivileged uid 65534, so the jobs run as that
//! user too, each in its own rootless sandbox; the jobs build in a store of their own
//! (`store=` in the builders setting), separate from the submitter's.

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::fixture::{busybox_or_skip, euid, Work, NOBODY};
use common::slurm::Cluster;
use common::{err, out};

/// Everything a run needs: the cluster, a work directory other users can reach,
/// stores and a cache, a signing key.
struct Setup {
    cluster: Cluster,
    w: Work,
    /// Whether rocmx runs as [`NOBODY`] (the tests run as root).
    as_nobody: bool,
}

impl Setup {
    fn new() -> Option<Setup> {
        let bb = busybox_or_skip()?;
        let cluster = Cluster::start()?;
        let w = Work::in_tmp("rocmx-slurm", 0o755, &bb, &["cat", "echo", "sleep", "wc"]);
        let as_nobody = euid() == Some(0);
        for d in [
            "sub", "worker", "local", "cache", "logs", "keys", "home", "tmp", "work",
        ] {
            let p = w.path(d);
            fs::create_dir_all(&p).unwrap();
            fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
            if as_nobody {
                std::os::unix::fs::chown(&p, Some(NOBODY), Some(NOBODY)).unwrap();
            }
        }
        let s = Setup {
            cluster,
            w,
            as_nobody,
        };
        // One key signs on both sides and is trusted on both (one site, one key).
        let sk = s.w.path("keys/sk");
        let o = s.rocmx(
            &s.w.path("sub"),
            &[
                "key",
                "generate",
                "slurm-test-1",
                "--secret-key-file",
                sk.to_str().unwrap(),
            ],
        );
        assert!(o.status.success(), "{}", err(&o));
        let pk = out(&o).trim().to_string();
        s.w.write(
            "rocmx.conf",
            &format!(
                "secret-key-files = {}\ntrusted-public-keys = {pk}\n",
                sk.display()
            ),
        );
        Some(s)
    }

    /// `rocmx --store STORE ARGS…` as the test user (uid 65534 under root), with the
    /// cluster's environment and the work directory's configuration.
    fn command(&self, store: &Path, args: &[&str]) -> Command {
        let exe = self.w.path("rocmx");
        let exe = exe.to_str().unwrap();
        let mut c = if self.as_nobody {
            self.cluster.command_as(NOBODY, NOBODY, exe)
        } else {
            self.cluster.command(exe)
        };
        c.env_remove("ROCMX_STORE")
            .env_remove("NO_COLOR")
            .env("ROCMX_CONFIG", self.w.path("rocmx.conf"))
            .env("XDG_CONFIG_HOME", self.w.path("no-config"))
            .env("HOME", self.w.path("home"))
            .env("TMPDIR", self.w.path("tmp"))
            .current_dir(self.w.path("work"))
            .arg("--store")
            .arg(store)
            .args(args);
        c
    }

    fn rocmx(&self, store: &Path, args: &[&str]) -> Output {
        self.command(store, args).output().expect("run rocmx")
    }

    fn builders(&self) -> String {
        format!(
            "slurm://{}?store={}&logs={}&poll-ms=100",
            self.cluster.partition(),
            self.w.path("worker").display(),
            self.w.path("logs").display()
        )
    }

    fn cache(&self) -> String {
        format!("file://{}", self.w.path("cache").display())
    }

    /// `rocmx build -f graph.nix --no-link --builders … --builder-cache … EXTRA…` in
    /// the submitter's store, through Slurm.
    fn build_command(&self, extra: &[&str]) -> Command {
        let nix = self.w.path("graph.nix");
        let (b, c) = (self.builders(), self.cache());
        let mut args = vec![
            "build",
            "-f",
            nix.to_str().unwrap(),
            "--no-link",
            "--builders",
            &b,
            "--builder-cache",
            &c,
        ];
        args.extend_from_slice(extra);
        self.command(&self.w.path("sub"), &args)
    }

    /// [`Setup::build_command`] with `--json`, run.
    fn build_slurm(&self, extra: &[&str]) -> Output {
        let mut args = vec!["--json"];
        args.extend_from_slice(extra);
        self.build_command(&args).output().expect("run rocmx")
    }
}

/// drvPath → outputs, from `rocmx build --json`.
fn outputs(o: &Output) -> BTreeMap<String, serde_json::Value> {
    let v: serde_json::Value = serde_json::from_str(out(o).trim())
        .unwrap_or_else(|e| panic!("--json output: {e}\nstdout: {}\nstderr: {}", out(o), err(o)));
    v["outputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["drvPath"].as_str().unwrap().to_string(),
                o["outputs"].clone(),
            )
        })
        .collect()
}

/// Twelve derivations: a diamond (base → left, right → top), a chain of four, two
/// independent ones, and a failure branch (fail, and after-fail which needs it).
const GRAPH: &str = r#"
let
  bb = ./bb;
  mk = name: deps: script: derivation {
    inherit name deps;
    system = builtins.currentSystem;
    builder = "${bb}/bin/sh";
    PATH = "${bb}/bin";
    args = [ "-c" "echo building-${name}; ${script}" ];
  };
  base = mk "base" [ ] "echo base > $out";
  left = mk "left" [ base ] "cat ${base} > $out; echo L >> $out";
  right = mk "right" [ base ] "cat ${base} > $out; echo R >> $out";
  top = mk "top" [ left right ] "cat ${left} ${right} > $out";
  c1 = mk "c1" [ ] "echo 1 > $out";
  c2 = mk "c2" [ c1 ] "cat ${c1} > $out; echo 2 >> $out";
  c3 = mk "c3" [ c2 ] "cat ${c2} > $out; echo 3 >> $out";
  c4 = mk "c4" [ c3 ] "wc -l < ${c3} > $out";
  w1 = mk "w1" [ ] "echo w1 > $out";
  w2 = mk "w2" [ ] "echo w2 > $out";
  fail = mk "fail" [ base ] "echo this-build-fails-on-purpose; exit 3";
  after-fail = mk "after-fail" [ fail ] "cat ${fail} > $out";
in { inherit base left right top c1 c2 c3 c4 w1 w2 fail after-fail; }
"#;

#[test]
fn a_graph_builds_through_slurm_as_it_builds_here() {
    let Some(s) = Setup::new() else { return };
    s.w.write("graph.nix", GRAPH);

    // The same graph built here, for comparison.
    let nix = s.w.path("graph.nix");
    let local = s.rocmx(
        &s.w.path("local"),
        &[
            "build",
            "-f",
            nix.to_str().unwrap(),
            "--no-link",
            "--json",
            "--keep-going",
        ],
    );
    assert_eq!(local.status.code(), Some(100), "{}", err(&local));
    let local = outputs(&local);
    assert_eq!(local.len(), 10, "{local:?}");

    // Without --keep-going the run stops at the failure; with it, the rest is built.
    let o = s.build_slurm(&["--keep-going", "--log-format", "json"]);
    let stderr = err(&o);
    assert_eq!(o.status.code(), Some(100), "{stderr}");
    let remote = outputs(&o);
    assert_eq!(
        remote, local,
        "the same CA paths as a local build\n{stderr}"
    );

    // Live states with the job id, in the JSON events.
    let states: Vec<serde_json::Value> = stderr
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["action"] == "remote")
        .collect();
    for st in ["queued", "running", "fetching"] {
        assert!(
            states
                .iter()
                .any(|v| v["state"] == st
                    && v["job"].as_str().is_some_and(|j| j.parse::<u64>().is_ok())),
            "no '{st}' state with a job id:\n{stderr}"
        );
    }
    assert!(
        states.iter().all(|v| v["executor"] == "slurm:debug"),
        "{stderr}"
    );

    // The failure names the derivation, its job id and the log tail.
    let failed = stderr
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["action"] == "failed")
        .unwrap_or_else(|| panic!("no failed event:\n{stderr}"));
    let message = failed["message"].as_str().unwrap();
    assert!(
        failed["drv"].as_str().unwrap().ends_with("-fail.drv"),
        "{message}"
    );
    assert!(message.contains("failed on slurm:debug (job "), "{message}");
    assert!(message.contains("exit code 100"), "{message}");
    assert!(message.contains("this-build-fails-on-purpose"), "{message}");
    assert!(stderr.contains("-after-fail.drv"), "{stderr}");

    // The outputs came from the jobs' own store, through the cache: both stores have
    let top = remote
        .iter()
        .find(|(d, _)| d.ends_with("-top.drv"))
        .map(|(_, o)| o["out"].as_str().unwrap().to_string())
        .unwrap();
    // them; the submitter's carries the signature the job pushed it with.
    let o = s.rocmx(&s.w.path("worker"), &["path-info", &top]);
    assert!(o.status.success(), "worker: {}", err(&o));
    let o = s.rocmx(&s.w.path("sub"), &["path-info", "--sigs", &top]);
    assert!(o.status.success(), "sub: {}", err(&o));
    assert!(out(&o).contains("slurm-test-1:"), "sub: {}", out(&o));
    assert!(fs::read_dir(s.w.path("cache")).unwrap().count() > 0);

    // `rocmx log` finds a remote build's log.
    let fail_drv = failed["drv"].as_str().unwrap();
    let o = s.rocmx(&s.w.path("sub"), &["log", fail_drv]);
    assert!(
        out(&o).contains("this-build-fails-on-purpose"),
        "{}",
        err(&o)
    );

    // A second run finds everything in the cache or the store: only the failed
    // derivation is submitted again.
    let again = s.build_slurm(&["--keep-going", "--log-format", "json"]);
    let queued: Vec<String> = err(&again)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["action"] == "remote" && v["state"] == "queued")
        .map(|v| v["drv"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(queued, [fail_drv.to_string()], "{}", err(&again));
    assert_eq!(outputs(&again), local);
}

#[test]
fn dry_run_says_what_goes_to_slurm() {
    let Some(s) = Setup::new() else { return };
    s.w.write("graph.nix", GRAPH);
    let o = s
        .build_command(&["-A", "top", "--dry-run"])
        .output()
        .expect("run rocmx");
    assert!(o.status.success(), "{}", err(&o));
    let text = out(&o);
    assert!(
        text.contains("these 4 derivations will be built:"),
        "{text}"
    );
    assert_eq!(text.matches("(on slurm:debug: 1 core").count(), 4, "{text}");
    assert!(s.cluster.squeue_ids().is_empty());
}

#[test]
fn ctrl_c_cancels_the_jobs_it_submitted() {
    let Some(s) = Setup::new() else { return };
    let cpus = s.cluster.cpus();
    // Each job takes the whole node: one runs, the others wait in the queue.
    s.w.write(
        "graph.nix",
        &format!(
            r#"
let
  mk = name: derivation {{
    inherit name;
    system = builtins.currentSystem;
    builder = "${{./bb}}/bin/sh";
    PATH = "${{./bb}}/bin";
    requiredCores = "{cpus}";
    args = [ "-c" "echo started; sleep 120; echo ${{name}} > $out" ];
  }};
in {{ a = mk "sleep-a"; b = mk "sleep-b"; c = mk "sleep-c"; }}
"#
        ),
    );
    let child = s
        .build_command(&[])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while s.cluster.squeue_ids().len() < 3 {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "three jobs were never queued"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // What a terminal's Ctrl-C sends to the foreground process.
    let pid = child.id();
    let _ = Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status();
    let o = child.wait_with_output().unwrap();
    let stderr = err(&o);
    assert_eq!(o.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("cancelling Slurm jobs"), "{stderr}");
    let t = Instant::now();
    while !s.cluster.squeue_ids().is_empty() {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "jobs left in the queue after Ctrl-C: {:?}",
            s.cluster.squeue_ids()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_tampered_input_in_the_builder_cache_fails_the_job_cleanly() {
    let Some(s) = Setup::new() else { return };
    s.w.write("work/data.txt", "the input\n");
    s.w.write(
        "graph.nix",
        r#"derivation {
  name = "uses-data";
  system = builtins.currentSystem;
  builder = "${./bb}/bin/sh";
  PATH = "${./bb}/bin";
  args = [ "-c" "cat ${./work/data.txt} > $out" ];
}"#,
    );
    let sub = s.w.path("sub");
    // The input source, in the submitter's store and then in the cache.
    let o = s.rocmx(
        &sub,
        &[
            "eval",
            "--read-write-mode",
            "--expr",
            &format!("\"${{{}}}\"", s.w.path("work/data.txt").display()),
        ],
    );
    assert!(o.status.success(), "{}", err(&o));
    let src = out(&o).trim().trim_matches('"').to_string();
    let cache = s.cache();
    let o = s.rocmx(&sub, &["copy", "--to", &cache, &src]);
    assert!(o.status.success(), "{}", err(&o));
    // Its NAR in the cache now holds other bytes.
    let nars = nar_files(&s.w.path("cache"));
    assert_eq!(nars.len(), 1, "{nars:?}");
    let other = zstd::encode_all(&b"not the NAR that was signed"[..], 3).unwrap();
    fs::write(&nars[0], other).unwrap();

    let o = s.build_command(&[]).output().expect("run rocmx");
    let stderr = err(&o);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("failed on slurm:debug (job "), "{stderr}");
    assert!(stderr.contains("fetching /rocmx/store/"), "{stderr}");
    // Nothing of it was registered in the job's store.
    let o = s.rocmx(&s.w.path("worker"), &["path-info", &src]);
    assert!(!o.status.success(), "{}", out(&o));
}

fn nar_files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.to_string_lossy().contains(".nar")
                && !p.to_string_lossy().ends_with(".narinfo")
            {
                found.push(p);
            }
        }
    }
    found
}

#[test]
fn a_job_lost_with_its_node_is_submitted_again() {
    let Some(s) = Setup::new() else { return };
    s.w.write(
        "graph.nix",
        r#"derivation {
  name = "survives-a-node";
  system = builtins.currentSystem;
  builder = "${./bb}/bin/sh";
  PATH = "${./bb}/bin";
  args = [ "-c" "echo started; sleep 2; echo done > $out" ];
}"#,
    );
    let child = s
        .build_command(&["--log-format", "json"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Once the job runs, its node goes down under it: Slurm ends it NODE_FAIL.
    let t = Instant::now();
    let first = loop {
        let running = s
            .cluster
            .squeue_ids()
            .into_iter()
            .find(|id| s.cluster.job_state(*id).as_deref() == Some("RUNNING"));
        if let Some(id) = running {
            break id;
        }
        assert!(t.elapsed() < Duration::from_secs(60), "the job never ran");
        std::thread::sleep(Duration::from_millis(50));
    };
    let node = |state: &str| {
        let o = s
            .cluster
            .command("scontrol")
            .args([
                "update",
                "nodename=localhost",
                &format!("state={state}"),
                "reason=test",
            ])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", err(&o));
    };
    // The cluster's ReturnToService=2 brings the node back at once: the second job
    // runs there.
    node("down");
    let o = child.wait_with_output().unwrap();
    let stderr = err(&o);
    assert!(o.status.success(), "{stderr}");
    assert!(stderr.contains(r#""state":"resubmitted""#), "{stderr}");
    assert!(
        s.cluster
            .job_state(first)
            .is_some_and(|st| st.starts_with("NODE_FAIL")),
        "{:?}",
        s.cluster.job_state(first)
    );
}

/// `rocmx serve --writable` as the builder cache: the jobs push over HTTP with the
/// token from `access-tokens`, which the submitter's config carries to them.
#[test]
fn a_writable_rocmx_serve_is_a_builder_cache() {
    let Some(s) = Setup::new() else { return };
    s.w.write("graph.nix", GRAPH);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let token = "c2x1cm0tYnVpbGRlci1jYWNoZS10b2tlbg==";
    s.w.write("token", &format!("{token}\n"));
    let conf = fs::read_to_string(s.w.path("rocmx.conf")).unwrap();
    let pk = conf
        .lines()
        .find_map(|l| l.strip_prefix("trusted-public-keys = "))
        .unwrap()
        .to_string();
    s.w.write(
        "rocmx.conf",
        &format!("{conf}access-tokens = 127.0.0.1:{port}={token}\n"),
    );
    fs::create_dir_all(s.w.path("served")).unwrap();
    let log = fs::File::create(s.w.path("serve.log")).unwrap();
    let token_file = s.w.path("token");
    let mut server = Command::new(s.w.path("rocmx"))
        .env_remove("ROCMX_STORE")
        .env("ROCMX_CONFIG", "")
        .arg("--store")
        .arg(s.w.path("served"))
        .args([
            "serve",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--writable",
        ])
        .arg("--token-file")
        .arg(&token_file)
        .args(["--option", "trusted-public-keys", &pk])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    let t = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "rocmx serve did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let nix = s.w.path("graph.nix");
    let b = s.builders();
    let url = format!("http://127.0.0.1:{port}");
    let o = s.rocmx(
        &s.w.path("sub"),
        &[
            "build",
            "-f",
            nix.to_str().unwrap(),
            "-A",
            "top",
            "--no-link",
            "--json",
            "--builders",
            &b,
            "--builder-cache",
            &url,
        ],
    );
    let _ = server.kill();
    let _ = server.wait();
    let served = fs::read_to_string(s.w.path("serve.log")).unwrap_or_default();
    assert!(o.status.success(), "{}\nserver: {served}", err(&o));
    let local = s.rocmx(
        &s.w.path("local"),
        &[
            "build",
            "-f",
            nix.to_str().unwrap(),
            "-A",
            "top",
            "--no-link",
            "--json",
        ],
    );
    assert!(local.status.success(), "{}", err(&local));
    assert_eq!(outputs(&o), outputs(&local));
    // The jobs pushed there: PUTs in the server's log.
    assert!(served.contains("PUT"), "{served}");
}
