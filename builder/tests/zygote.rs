//! The sandbox through rocmx's zygote (`sandbox::zygote`), and without it once it has
//! died. Its own `main` (no test harness): the zygote can only be started while the
//! process has one thread.
//!
//! Checks: the zygote makes an init only when asked ([`zygote::prepare`]), a build runs
//! in that init, which is the zygote's child, not ours; a timeout kills it (through the pidfd); the builder sees the same sandbox
//! through the zygote as from a clone of our own (ids, capabilities, seccomp, the
//! processes, the network interfaces, the root's entries); once the zygote is killed,
//! builds clone init themselves.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

mod support;

use rocmx_builder::ids::{self, IdLease, IdRange};
use rocmx_builder::sandbox::{self, zygote, ExitStatus, Limits, SandboxError, SandboxSpec};
use support::log::SharedLog;

const BUSYBOX: &str = "/usr/bin/busybox";
const BB: &str = "/rocmx/store/0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d-busybox";
const OUT: &str = "/rocmx/store/9z8y7x6w5v4u3t2s1r0q9p8o7n6m5l4k-probe";

/// What the builder reports about its sandbox.
// The processes are listed to a file before they are counted: in a pipe, `ls`
// could read /proc before or after the shell started `grep`, and the count
// was 3 or 4 by that race alone (a CI run failed on it).
const VIEW: &str = r#"
{ id -u; id -g; hostname; grep -E '^(Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs|Seccomp):' /proc/self/status
  ls /proc > /build/procs; grep -c '^[0-9]' /build/procs; cut -d: -f1 /proc/net/dev | tail -n +3; ls -a /; ls /dev; ls -a /build
  cat /proc/1/comm; } > $out
"#;

struct Fixture {
    dir: tempfile::TempDir,
    busybox: PathBuf,
    lease: Option<IdLease>,
    runs: usize,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::Builder::new()
            .prefix("rocmx-zygote-test")
            .tempdir()
            .unwrap();
        let busybox = dir.path().join("busybox");
        std::fs::create_dir_all(busybox.join("bin")).unwrap();
        std::fs::copy(BUSYBOX, busybox.join("bin/sh")).unwrap();
        let root = nix::unistd::geteuid().is_root();
        let lease = root.then(|| ids::lease(dir.path(), &IdRange::default()).unwrap());
        Fixture {
            dir,
            busybox,
            lease,
            runs: 0,
        }
    }

    /// Runs `script`; the output's host path and the result.
    fn run(
        &mut self,
        script: &str,
        timeout: Duration,
    ) -> (PathBuf, Result<ExitStatus, SandboxError>, String) {
        self.runs += 1;
        let run = self.dir.path().join(format!("run{}", self.runs));
        let build = run.join("build");
        std::fs::create_dir_all(&build).unwrap();
        let out = run.join("out");
        let log = SharedLog::default();
        let mut env = BTreeMap::new();
        env.insert("out".to_string(), OUT.to_string());
        env.insert("PATH".to_string(), format!("{BB}/bin"));
        let spec = SandboxSpec {
            builder: PathBuf::from(format!("{BB}/bin/sh")),
            args: vec!["-c".into(), script.into()],
            env,
            inputs: vec![(self.busybox.clone(), PathBuf::from(BB))],
            outputs: vec![(out.clone(), PathBuf::from(OUT))],
            staging: None,
            build_dir: build,
            work_dirs: None,
            shared_work_dir: None,
            rootfs: None,
            network: false,
            cores: 1,
            timeout: Some(timeout),
            max_silent: None,
            log: Box::new(log.clone()),
            host_ids: self.lease.as_ref().map(|l| l.ids),
            limits: Limits::default(),
            variant: Default::default(),
            held_until_reaped: None,
        };
        let r = sandbox::run(spec).map(|o| o.status);
        let text = log.text();
        (out, r, text)
    }

    fn view(&mut self) -> String {
        let script = format!("for c in id hostname grep ls cut tail cat; do ln -s sh /build/$c; done; export PATH=/build; {VIEW}");
        let (out, r, log) = self.run(&script, Duration::from_secs(60));
        assert_eq!(r.unwrap(), ExitStatus::Code(0), "log:\n{log}");
        std::fs::read_to_string(out).unwrap()
    }
}

/// The parent pid of each process (host view).
fn parents() -> Vec<(i32, i32)> {
    let mut v = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        // After the command name's closing parenthesis: state, then the parent pid.
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        if let Some(ppid) = rest.split_whitespace().nth(1).and_then(|p| p.parse().ok()) {
            v.push((pid, ppid));
        }
    }
    v
}

fn main() {
    zygote::start();
    if !Path::new(BUSYBOX).exists() {
        eprintln!("skipping: {BUSYBOX} is missing (install busybox-static)");
        return;
    }
    let zpid = zygote::pid().expect("the zygote starts in a single-threaded process");
    let me = std::process::id() as i32;
    let mut fx = Fixture::new();

    // Nothing is made before it is asked for (a no-op rebuild asks for nothing).
    let children = |of: i32| -> Vec<i32> {
        parents()
            .into_iter()
            .filter(|p| p.1 == of)
            .map(|p| p.0)
            .collect()
    };
    assert_eq!(
        children(zpid),
        Vec::<i32>::new(),
        "no init before prepare()"
    );
    // Asked, the zygote makes an init ahead of the build ...
    zygote::prepare();
    let mut ahead = Vec::new();
    for _ in 0..200 {
        ahead = children(zpid);
        if !ahead.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(ahead.len(), 1, "one init made ahead: {ahead:?}");
    let spare = ahead[0];
    // ... and the build runs in it: while the build sleeps, that init has id maps, and
    // it is the zygote's child, not ours.
    let script = "echo started; sleep 2; echo done > $out";
    let watcher = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(700));
        let maps = std::fs::read_to_string(format!("/proc/{spare}/uid_map")).unwrap_or_default();
        (parents(), maps)
    });
    let (out, r, log) = fx.run(script, Duration::from_secs(60));
    assert_eq!(r.unwrap(), ExitStatus::Code(0), "log:\n{log}");
    assert_eq!(std::fs::read_to_string(out).unwrap(), "done\n");
    let (during, maps) = watcher.join().unwrap();
    assert!(
        !maps.trim().is_empty(),
        "the init made ahead ran the build (its id maps are written)"
    );
    let ours: Vec<i32> = during.iter().filter(|p| p.1 == me).map(|p| p.0).collect();
    assert_eq!(ours, vec![zpid], "our only child is the zygote: {during:?}");
    let inits = during.iter().filter(|p| p.1 == zpid).count();
    assert!(
        inits >= 2,
        "the build's init and the next one are the zygote's: {during:?}"
    );
    println!("ok: a build runs in the init the zygote made ahead");

    // A timeout kills the build through init's pidfd.
    let (_, r, _) = fx.run("sleep 60", Duration::from_millis(500));
    assert!(matches!(r, Err(SandboxError::Timeout(_))), "{r:?}");
    println!("ok: a timeout kills an init of the zygote's");

    let through_zygote = fx.view();

    // Without the zygote (killed): builds clone init themselves, and the builder sees
    // the same sandbox.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(zpid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(zpid), None).unwrap();
    let direct = fx.view();
    assert_eq!(zygote::pid(), None, "a dead zygote is forgotten");
    assert_eq!(through_zygote, direct, "the same sandbox either way");
    assert!(direct.contains("NoNewPrivs:\t1"), "{direct}");
    assert!(direct.contains("CapEff:\t0000000000000000"), "{direct}");
    println!("ok: without the zygote, the same sandbox\n{direct}");
}
