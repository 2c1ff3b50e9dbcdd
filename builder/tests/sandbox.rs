//! Sandbox probes. Each `probe_*` test runs a busybox shell script as the builder, lets
//! it try something the sandbox must forbid, writes what happened into `$out`, and
//! fails if the forbidden thing succeeded.
//!
//! Rootless means rootless: `probes_pass_as_an_unprivileged_user` (run as root) re-runs
//! every `probe_*` test of this binary as uid 65534 through `setpriv`, from a temporary
//! directory that user owns, and asserts that they pass there too.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod support;

use rocmx_builder::ids::{self, IdLease, IdRange};
use rocmx_builder::sandbox::{
    self, plan, ExitStatus, HostIds, Limits, Outcome, SandboxError, SandboxSpec,
};
use support::log::SharedLog;

/// Set (to a directory the current user owns) in the unprivileged re-run.
const UNPRIV_DIR: &str = "ROCMX_SANDBOX_TEST_DIR";
const BUSYBOX: &str = "/usr/bin/busybox";
const BB: &str = "/rocmx/store/0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d-busybox";
const OUT: &str = "/rocmx/store/9z8y7x6w5v4u3t2s1r0q9p8o7n6m5l4k-probe";

/// A temporary input (busybox as `bin/sh` and `bin/env`), build directory and output.
struct Fixture {
    dir: tempfile::TempDir,
    busybox: PathBuf,
    build: PathBuf,
    out: PathBuf,
    log: SharedLog,
    /// As root: the unprivileged host ids the build user maps to.
    lease: Option<IdLease>,
}

fn base_dir() -> PathBuf {
    std::env::var_os(UNPRIV_DIR)
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir)
}

fn euid() -> u32 {
    nix::unistd::geteuid().as_raw()
}

impl Fixture {
    /// `None` (after printing why) when busybox is missing.
    fn new() -> Option<Fixture> {
        if !Path::new(BUSYBOX).exists() {
            eprintln!("skipping: {BUSYBOX} is missing (install busybox-static)");
            return None;
        }
        println!("probe running as uid {}", euid());
        let dir = tempfile::Builder::new()
            .prefix("rocmx-sandbox-test")
            .tempdir_in(base_dir())
            .unwrap();
        let busybox = dir.path().join("busybox");
        std::fs::create_dir_all(busybox.join("bin")).unwrap();
        std::fs::copy(BUSYBOX, busybox.join("bin/sh")).unwrap();
        std::os::unix::fs::symlink("sh", busybox.join("bin/env")).unwrap();
        let build = dir.path().join("build");
        std::fs::create_dir(&build).unwrap();
        std::fs::set_permissions(&build, std::fs::Permissions::from_mode(0o700)).unwrap();
        let scratch = dir.path().join("scratch");
        std::fs::create_dir(&scratch).unwrap();
        let out = scratch.join("probe");
        let lease = (euid() == 0).then(|| ids::lease(dir.path(), &IdRange::default()).unwrap());
        Some(Fixture {
            dir,
            busybox,
            build,
            out,
            log: SharedLog::default(),
            lease,
        })
    }

    /// A spec running `script` with busybox sh; `$out` and `$BB` are set.
    fn spec(&self, script: &str) -> SandboxSpec {
        let mut env = BTreeMap::new();
        env.insert("out".to_string(), OUT.to_string());
        env.insert("BB".to_string(), BB.to_string());
        SandboxSpec {
            builder: PathBuf::from(format!("{BB}/bin/sh")),
            args: vec!["-c".into(), script.into()],
            env,
            inputs: vec![(self.busybox.clone(), PathBuf::from(BB))],
            outputs: vec![(self.out.clone(), PathBuf::from(OUT))],
            staging: None,
            build_dir: self.build.clone(),
            work_dirs: None,
            shared_work_dir: None,
            rootfs: None,
            network: false,
            cores: 2,
            timeout: Some(Duration::from_secs(60)),
            max_silent: None,
            log: Box::new(self.log.clone()),
            host_ids: self.host_ids(),
            limits: Limits::default(),
            variant: Default::default(),
            held_until_reaped: None,
        }
    }

    /// The host ids builds map to: leased ones as root, none (the caller's) otherwise.
    fn host_ids(&self) -> Option<HostIds> {
        self.lease.as_ref().map(|l| l.ids)
    }

    /// Runs a spec that must succeed, and checks the output belongs to the caller.
    fn run_ok(&self, spec: SandboxSpec) -> Outcome {
        let outcome = sandbox::run(spec)
            .unwrap_or_else(|e| panic!("sandbox failed: {e}\nlog:\n{}", self.log.text()));
        assert_eq!(
            outcome.status,
            ExitStatus::Code(0),
            "log:\n{}",
            self.log.text()
        );
        if let Ok(m) = std::fs::symlink_metadata(&self.out) {
            assert_eq!(
                m.uid(),
                euid(),
                "the output belongs to the caller on the host"
            );
        }
        outcome
    }

    fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.out.join(name))
            .unwrap_or_else(|e| panic!("reading $out/{name}: {e}\nlog:\n{}", self.log.text()))
    }

    /// No staging directory may be left next to the output.
    fn assert_clean(&self) {
        let left: Vec<_> = std::fs::read_dir(self.out.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(".rocmx-sandbox-"))
            .collect();
        assert!(left.is_empty(), "staging directories left behind: {left:?}");
    }
}

#[test]
fn probe_user_namespaces_are_available() {
    sandbox::check_user_namespaces().unwrap();
}

#[test]
fn probe_cannot_read_host_passwd_or_home() {
    let Some(fx) = Fixture::new() else { return };
    let canary_dir = fx.dir.path().join("secret");
    std::fs::create_dir(&canary_dir).unwrap();
    std::fs::write(canary_dir.join("canary"), "TOPSECRET").unwrap();
    let home = std::env::var("HOME")
        .ok()
        .filter(|h| h != "/" && !h.is_empty())
        .unwrap_or("/root".into());
    let mut spec = fx.spec(
        r#"mkdir $out
cat /etc/passwd > $out/passwd
cat /etc/group > $out/group
cat /etc/hosts > $out/hosts
if cat "$CANARY" > $out/canary 2>/dev/null; then echo READ > $out/canary-status; else echo DENIED > $out/canary-status; fi
if ls -a "$HOSTHOME" > $out/home 2>/dev/null; then echo READ > $out/home-status; else echo DENIED > $out/home-status; fi
ls / > $out/root
ls /dev > $out/dev
"#,
    );
    spec.env.insert(
        "CANARY".into(),
        canary_dir.join("canary").display().to_string(),
    );
    spec.env.insert("HOSTHOME".into(), home.clone());
    fx.run_ok(spec);
    let passwd = fx.read("passwd");
    assert_eq!(passwd, plan::PASSWD);
    assert_ne!(passwd, std::fs::read_to_string("/etc/passwd").unwrap());
    assert_eq!(fx.read("group"), plan::GROUP);
    assert_eq!(fx.read("hosts"), "127.0.0.1 localhost\n::1 localhost\n");
    assert_eq!(
        fx.read("canary-status"),
        "DENIED\n",
        "the builder read a host file"
    );
    assert_eq!(
        fx.read("home-status"),
        "DENIED\n",
        "the builder listed the host's {home}"
    );
    assert_eq!(fx.read("root"), "build\ndev\netc\nproc\nrocmx\n");
    assert_eq!(
        fx.read("dev"),
        "fd\nfull\nnull\nptmx\npts\nrandom\nshm\nstderr\nstdin\nstdout\ntty\nurandom\nzero\n"
    );
    fx.assert_clean();
}

/// A loopback server on the host: counts connections, greets each one.
struct Server {
    port: u16,
    accepted: Arc<AtomicUsize>,
    stop: Arc<AtomicUsize>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    fn start() -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let accepted = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicUsize::new(0));
        let (a, s) = (accepted.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(60);
            while s.load(Ordering::SeqCst) == 0 && Instant::now() < deadline {
                match listener.accept() {
                    Ok((mut conn, _)) => {
                        a.fetch_add(1, Ordering::SeqCst);
                        conn.set_nonblocking(false).unwrap();
                        let _ = conn.write_all(b"HELLO-FROM-HOST\n");
                        let _ = conn.set_read_timeout(Some(Duration::from_millis(200)));
                        let mut b = [0u8; 64];
                        let _ = conn.read(&mut b);
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        Server {
            port,
            accepted,
            stop,
            thread: Some(thread),
        }
    }

    fn finish(mut self) -> usize {
        self.stop.store(1, Ordering::SeqCst);
        self.thread.take().unwrap().join().unwrap();
        self.accepted.load(Ordering::SeqCst)
    }
}

const NET_SCRIPT: &str = r#"mkdir $out
if echo ping | nc -w 3 127.0.0.1 $PORT > $out/nc 2>$out/nc-err; then echo CONNECTED > $out/status; else echo REFUSED > $out/status; fi
cat /proc/net/dev > $out/netdev
"#;

#[test]
fn probe_cannot_connect_to_host_loopback() {
    let Some(fx) = Fixture::new() else { return };
    let server = Server::start();
    let mut spec = fx.spec(NET_SCRIPT);
    spec.env.insert("PORT".into(), server.port.to_string());
    fx.run_ok(spec);
    let accepted = server.finish();
    assert_eq!(
        accepted, 0,
        "the builder reached the host's loopback server"
    );
    assert_eq!(fx.read("status"), "REFUSED\n");
    assert!(!fx.read("nc").contains("HELLO"));
    // Only a loopback interface, and it is up (connections to it are refused, not
    // unroutable).
    let ifaces: Vec<String> = fx
        .read("netdev")
        .lines()
        .skip(2)
        .map(|l| l.split(':').next().unwrap().trim().to_string())
        .collect();
    assert_eq!(ifaces, ["lo"]);
}

#[test]
fn probe_fixed_output_builds_reach_host_loopback() {
    let Some(fx) = Fixture::new() else { return };
    let server = Server::start();
    let mut spec = fx.spec(NET_SCRIPT);
    spec.env.insert("PORT".into(), server.port.to_string());
    spec.network = true;
    fx.run_ok(spec);
    let accepted = server.finish();
    assert_eq!(
        fx.read("status"),
        "CONNECTED\n",
        "nc: {}",
        fx.read("nc-err")
    );
    assert_eq!(fx.read("nc"), "HELLO-FROM-HOST\n");
    assert!(accepted >= 1);
}

#[test]
fn probe_cannot_write_inputs_or_root() {
    let Some(fx) = Fixture::new() else { return };
    let before = std::fs::read(fx.busybox.join("bin/sh")).unwrap();
    let mode_before = std::fs::metadata(&fx.busybox).unwrap().mode();
    let spec = fx.spec(
        r#"mkdir $out; r=""
touch $BB/newfile 2>/dev/null && r="$r touch"
echo x >> $BB/bin/sh 2>/dev/null && r="$r append"
mkdir $BB/d 2>/dev/null && r="$r mkdir"
chmod 777 $BB 2>/dev/null && r="$r chmod"
ln -s x $BB/link 2>/dev/null && r="$r symlink"
mv $BB/bin/env $BB/bin/env2 2>/dev/null && r="$r rename"
mount -o remount,rw $BB 2>/dev/null && r="$r remount"
umount $BB 2>/dev/null && r="$r umount"
touch /newfile 2>/dev/null && r="$r root"
echo x >> /etc/passwd 2>/dev/null && r="$r passwd"
mkdir /dev/x 2>/dev/null && r="$r dev"
echo "succeeded:$r" > $out/result
touch /build/ok && echo yes > $out/build-writable
"#,
    );
    fx.run_ok(spec);
    assert_eq!(
        fx.read("result"),
        "succeeded:\n",
        "some writes to read-only places succeeded"
    );
    assert_eq!(fx.read("build-writable"), "yes\n");
    assert!(fx.build.join("ok").exists());
    assert_eq!(std::fs::read(fx.busybox.join("bin/sh")).unwrap(), before);
    assert_eq!(std::fs::metadata(&fx.busybox).unwrap().mode(), mode_before);
    let entries: BTreeSet<String> = std::fs::read_dir(&fx.busybox)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(entries, BTreeSet::from(["bin".to_string()]));
}

#[test]
fn probe_cannot_see_host_processes() {
    let Some(fx) = Fixture::new() else { return };
    let mut host_child = Command::new(BUSYBOX).args(["sleep", "60"]).spawn().unwrap();
    let host_pid = host_child.id();
    let mut spec = fx.spec(
        r#"mkdir $out
echo $$ > $out/pid
ls /proc | grep -E '^[0-9]+$' > $out/pids
if kill -0 $HOSTPID 2>/dev/null; then echo VISIBLE > $out/kill; else echo INVISIBLE > $out/kill; fi
if cat /proc/1/environ > $out/environ 2>/dev/null; then echo READ > $out/environ-status; else echo DENIED > $out/environ-status; fi
"#,
    );
    spec.env.insert("HOSTPID".into(), host_pid.to_string());
    fx.run_ok(spec);
    let _ = host_child.kill();
    let _ = host_child.wait();
    assert_eq!(
        fx.read("pid"),
        "2\n",
        "the builder is pid 2 (its init is pid 1)"
    );
    let pids: Vec<u32> = fx
        .read("pids")
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    assert!(pids.contains(&1) && pids.contains(&2), "{pids:?}");
    assert!(
        pids.iter().all(|p| *p < 20),
        "host processes visible: {pids:?}"
    );
    if host_pid >= 20 {
        assert_eq!(fx.read("kill"), "INVISIBLE\n");
    }
    assert_eq!(
        fx.read("environ-status"),
        "DENIED\n",
        "the builder read its init's environment"
    );
}

#[test]
fn probe_setuid_bits_do_not_survive() {
    let Some(fx) = Fixture::new() else { return };
    let spec = fx.spec(
        r#"mkdir $out
echo x > $out/f; chmod 4755 $out/f; echo "chmod u+s: $?" > $out/report
echo y > $out/g; chmod 2755 $out/g; echo "chmod g+s: $?" >> $out/report
mkdir $out/d; chmod 3775 $out/d; echo "chmod dir g+s: $?" >> $out/report
echo z > /build/b; chmod u+s /build/b; echo "chmod u+s in /build: $?" >> $out/report
ls -ln $out >> $out/report
grep " /rocmx/store " /proc/self/mountinfo > $out/mountinfo
grep " /build " /proc/self/mountinfo >> $out/mountinfo
"#,
    );
    fx.run_ok(spec);
    let report = fx.read("report");
    println!("inside: {report}");
    for name in ["f", "g", "d", "report"] {
        let mode = std::fs::metadata(fx.out.join(name)).unwrap().mode();
        assert_eq!(
            mode & 0o6000,
            0,
            "{name} kept a setuid/setgid bit: {mode:o}"
        );
    }
    let mode = std::fs::metadata(fx.build.join("b")).unwrap().mode();
    assert_eq!(mode & 0o6000, 0, "/build/b got a setuid bit: {mode:o}");
    if cfg!(any(target_arch = "x86_64", target_arch = "aarch64")) {
        // The seccomp filter refuses the chmod itself.
        assert!(
            report.starts_with(
                "chmod u+s: 1\nchmod g+s: 1\nchmod dir g+s: 1\nchmod u+s in /build: 1\n"
            ),
            "{report}"
        );
    }
    // And the writable places are nosuid anyway.
    let mountinfo = fx.read("mountinfo");
    assert_eq!(
        mountinfo.lines().filter(|l| l.contains("nosuid")).count(),
        2,
        "{mountinfo}"
    );
}

/// Creating a file with a setuid mode directly (open(O_CREAT, 04755)), which no chmod
/// filter sees: python from the host's Debian tree used as the rootfs.
#[test]
fn probe_cannot_create_setuid_files_with_open() {
    let Some(fx) = Fixture::new() else { return };
    if !Path::new("/usr/bin/python3").exists() {
        eprintln!("skipping: /usr/bin/python3 is missing");
        return;
    }
    let mut spec = fx.spec("");
    spec.builder = PathBuf::from("/usr/bin/python3");
    spec.args = vec![
        "-c".into(),
        r#"
import os
out = os.environ["out"]
os.mkdir(out)
res = []
for name, mode in [("u", 0o4755), ("g", 0o2755)]:
    try:
        os.close(os.open(out + "/" + name, os.O_CREAT | os.O_WRONLY, mode))
        res.append(name + ":created")
    except OSError as e:
        res.append(name + ":" + str(e.errno))
try:
    os.close(os.open("/build/u", os.O_CREAT | os.O_WRONLY, 0o4755))
    res.append("build:created")
except OSError as e:
    res.append("build:" + str(e.errno))
open(out + "/report", "w").write(" ".join(res))
"#
        .into(),
    ];
    spec.rootfs = Some(PathBuf::from("/"));
    fx.run_ok(spec);
    let report = fx.read("report");
    if cfg!(any(target_arch = "x86_64", target_arch = "aarch64")) {
        assert_eq!(report, "u:1 g:1 build:1", "EPERM expected");
    }
    for p in [fx.out.join("u"), fx.out.join("g"), fx.build.join("u")] {
        if let Ok(m) = std::fs::metadata(&p) {
            assert_eq!(
                m.mode() & 0o6000,
                0,
                "{} has mode {:o}",
                p.display(),
                m.mode()
            );
        }
    }
}

fn status_field<'a>(status: &'a str, key: &str) -> &'a str {
    status
        .lines()
        .find_map(|l| l.strip_prefix(key).and_then(|r| r.strip_prefix(':')))
        .map(str::trim)
        .unwrap_or_else(|| panic!("no {key} in {status}"))
}

#[test]
fn probe_holds_no_capability_and_runs_as_the_build_user() {
    let Some(fx) = Fixture::new() else { return };
    let spec = fx.spec(
        r#"mkdir $out
cat /proc/self/status > $out/status
id > $out/id
hostname > $out/hostname
cat /proc/sys/kernel/hostname > $out/uts
cat /proc/self/uid_map > $out/uid_map
"#,
    );
    fx.run_ok(spec);
    let status = fx.read("status");
    for key in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        assert_eq!(
            status_field(&status, key),
            "0000000000000000",
            "{key} in\n{status}"
        );
    }
    assert_eq!(status_field(&status, "NoNewPrivs"), "1");
    assert_eq!(status_field(&status, "Uid"), "1000\t1000\t1000\t1000");
    assert_eq!(status_field(&status, "Gid"), "100\t100\t100\t100");
    let id = fx.read("id");
    if euid() == 0 {
        // Host root's supplementary groups were dropped: none at all inside.
        assert_eq!(id, "uid=1000(rocmxbld) gid=100(rocmxbld)\n");
        assert_eq!(status_field(&status, "Groups"), "");
    } else {
        // An unprivileged caller cannot drop supplementary groups it may have.
        assert!(
            id.starts_with("uid=1000(rocmxbld) gid=100(rocmxbld)"),
            "{id}"
        );
    }
    assert_eq!(fx.read("hostname"), "localhost\n");
    assert_eq!(fx.read("uts"), "localhost\n");
    let map: Vec<String> = fx
        .read("uid_map")
        .split_whitespace()
        .map(String::from)
        .collect();
    match fx.host_ids() {
        // Host root: inside 0 is host root (init's, for the setup only), the build user
        // an unprivileged id.
        Some(h) => {
            assert_eq!(map, ["0", "0", "1", "1000", &h.uid.to_string(), "1"]);
            assert!(h.uid >= 1000, "{h:?}");
        }
        None => assert_eq!(map, ["1000", &euid().to_string(), "1"]),
    }
}

fn env_lines(log: &str) -> BTreeMap<String, String> {
    log.lines()
        .map(|l| {
            let (k, v) = l.split_once('=').unwrap();
            (k.to_string(), v.to_string())
        })
        .collect()
}

#[test]
fn probe_environment_is_exactly_the_fixed_one() {
    let Some(fx) = Fixture::new() else { return };
    let mut spec = fx.spec("");
    spec.builder = PathBuf::from(format!("{BB}/bin/env"));
    spec.args = vec![];
    spec.env
        .insert("HOME".into(), "/should-be-overridden".into());
    spec.cores = 7;
    let expected: BTreeMap<String, String> = [
        ("BB", BB),
        ("HOME", "/homeless-shelter"),
        ("LANG", "C.UTF-8"),
        ("NIX_BUILD_TOP", "/build"),
        ("PATH", "/path-not-set"),
        ("ROCMX_BUILD_CORES", "7"),
        ("SOURCE_DATE_EPOCH", "1"),
        ("TEMP", "/build"),
        ("TEMPDIR", "/build"),
        ("TMP", "/build"),
        ("TMPDIR", "/build"),
        ("TZ", "UTC"),
        ("out", OUT),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    fx.run_ok(spec);
    assert_eq!(env_lines(&fx.log.text()), expected);
    // The builder did not create $out: nothing appears on the host.
    assert!(!fx.out.exists());
    fx.assert_clean();

    // A derivation may set PATH.
    let fx = Fixture::new().unwrap();
    let mut spec = fx.spec("");
    spec.builder = PathBuf::from(format!("{BB}/bin/env"));
    spec.args = vec![];
    spec.env.insert("PATH".into(), format!("{BB}/bin"));
    fx.run_ok(spec);
    assert_eq!(env_lines(&fx.log.text())["PATH"], format!("{BB}/bin"));
}

/// Host processes whose command line contains `marker`.
fn host_processes_with(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(cmd) = std::fs::read(e.path().join("cmdline")) {
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if cmd.contains(marker) {
                found.push(format!("{}: {cmd}", e.file_name().to_string_lossy()));
            }
        }
    }
    found
}

#[test]
fn probe_timeout_kills_the_whole_sandbox() {
    let Some(fx) = Fixture::new() else { return };
    // A marker unique to this test process (the unprivileged re-run runs concurrently).
    let marker = format!("101.{}", std::process::id());
    let mut spec = fx.spec(&format!(
        "mkdir $out; sleep {marker} & sleep {marker}; echo done"
    ));
    spec.timeout = Some(Duration::from_millis(1500));
    let t = Instant::now();
    let err = sandbox::run(spec).unwrap_err();
    let took = t.elapsed();
    assert!(matches!(err, SandboxError::Timeout(_)), "{err}");
    assert_eq!(err.to_string(), "build timed out after 1.5s");
    assert!(took < Duration::from_secs(10), "took {took:?}");
    // The background sleep died with the pid namespace.
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(host_processes_with(&marker), Vec::<String>::new());
    assert!(!fx.out.exists(), "a killed build leaves no output");
    fx.assert_clean();
}

#[test]
fn probe_max_silent_kills_a_quiet_build() {
    let Some(fx) = Fixture::new() else { return };
    let marker = format!("102.{}", std::process::id());
    let mut spec = fx.spec(&format!(
        "echo started; sleep 0.5; echo still-here; sleep {marker}"
    ));
    spec.max_silent = Some(Duration::from_secs(1));
    let t = Instant::now();
    let err = sandbox::run(spec).unwrap_err();
    assert!(matches!(err, SandboxError::Silent(_)), "{err}");
    assert!(t.elapsed() < Duration::from_secs(10));
    // Output resets the silence timer: "still-here" came after half a second.
    assert!(fx.log.text().starts_with("started\n"), "{}", fx.log.text());
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(host_processes_with(&marker), Vec::<String>::new());
}

#[test]
fn probe_exit_codes_and_signals_are_reported() {
    let Some(fx) = Fixture::new() else { return };
    let out = sandbox::run(fx.spec("echo failing >&2; exit 7")).unwrap();
    assert_eq!(out.status, ExitStatus::Code(7));
    assert_eq!(fx.log.text(), "failing\n");
    let fx = Fixture::new().unwrap();
    let out = sandbox::run(fx.spec("kill -9 $$")).unwrap();
    assert_eq!(out.status, ExitStatus::Signal(9));
    // The builder is not pid 1: SIGTERM to itself is not ignored.
    let fx = Fixture::new().unwrap();
    let out = sandbox::run(fx.spec("kill -TERM $$; sleep 5")).unwrap();
    assert_eq!(out.status, ExitStatus::Signal(15));
    assert!(out.duration < Duration::from_secs(4));
}

#[test]
fn probe_setup_failures_are_explained() {
    let Some(fx) = Fixture::new() else { return };
    let mut spec = fx.spec("");
    spec.builder = PathBuf::from(format!("{BB}/bin/missing"));
    let err = sandbox::run(spec).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("executing the builder {BB}/bin/missing: ENOENT (No such file or directory)")
    );
    fx.assert_clean();

    // An input nested in a read-only input cannot get its mount point.
    let mut spec = fx.spec("");
    spec.inputs
        .push((fx.busybox.clone(), PathBuf::from(format!("{BB}/nested"))));
    let err = sandbox::run(spec).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("sandbox setup failed: creating {BB}/nested: EROFS (Read-only file system)")
    );
    fx.assert_clean();

    let mut spec = fx.spec("");
    spec.inputs
        .push((fx.dir.path().join("nope"), PathBuf::from("/rocmx/store/x")));
    let err = sandbox::run(spec).unwrap_err();
    assert!(err.to_string().contains("ENOENT"), "{err}");

    // The same inside path twice, even from different sources.
    let mut spec = fx.spec("");
    let first = spec.inputs[0].1.clone();
    spec.inputs
        .push((fx.dir.path().to_path_buf(), first.clone()));
    let err = sandbox::run(spec).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "invalid sandbox specification: input {} given twice",
            first.display()
        )
    );

    std::fs::write(&fx.out, "already").unwrap();
    let err = sandbox::run(fx.spec("")).unwrap_err();
    assert!(matches!(err, SandboxError::InvalidSpec(_)), "{err}");
}

/// Everything is mounted in the sandbox's own mount namespace: the host's mount table
/// never shows any of it, during or after the build.
#[test]
fn probe_no_mounts_on_the_host() {
    let Some(fx) = Fixture::new() else { return };
    let spec = fx.spec("mkdir $out; sleep 1");
    let staging_parent = fx.out.parent().unwrap().to_path_buf();
    let build = std::thread::spawn(move || sandbox::run(spec).map(|o| o.status));
    let mut seen = Vec::new();
    let t = Instant::now();
    while !build.is_finished() && t.elapsed() < Duration::from_secs(20) {
        let table = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        seen.extend(
            table
                .lines()
                .filter(|l| {
                    l.contains(".rocmx-sandbox-") || l.contains(&*staging_parent.to_string_lossy())
                })
                .map(String::from),
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(build.join().unwrap().unwrap(), ExitStatus::Code(0));
    assert_eq!(
        seen,
        Vec::<String>::new(),
        "sandbox mounts visible on the host"
    );
    fx.assert_clean();
}

#[test]
fn probe_output_may_be_a_single_file() {
    let Some(fx) = Fixture::new() else { return };
    fx.run_ok(fx.spec("printf flat > $out; echo junk > /rocmx/store/other"));
    assert_eq!(std::fs::read_to_string(&fx.out).unwrap(), "flat");
    assert!(!fx.out.parent().unwrap().join("other").exists());
    fx.assert_clean();
}

#[test]
fn probe_rootfs_is_a_read_only_base() {
    let Some(fx) = Fixture::new() else { return };
    let rootfs = fx.dir.path().join("rootfs");
    for d in ["usr/bin", "etc/apt", "dev", "proc", "tmp"] {
        std::fs::create_dir_all(rootfs.join(d)).unwrap();
    }
    std::fs::copy(BUSYBOX, rootfs.join("usr/bin/busybox")).unwrap();
    std::os::unix::fs::symlink("busybox", rootfs.join("usr/bin/sh")).unwrap();
    std::os::unix::fs::symlink("usr/bin", rootfs.join("bin")).unwrap();
    std::fs::write(rootfs.join("etc/os-release"), "ID=fake\n").unwrap();
    std::fs::write(rootfs.join("etc/passwd"), "rootfs-passwd\n").unwrap();
    let mut spec = fx.spec(
        r#"mkdir $out
cat /etc/os-release > $out/os
cat /etc/passwd > $out/passwd
if touch /usr/x 2>/dev/null || touch /etc/apt/x 2>/dev/null || touch /x 2>/dev/null; then echo WRITABLE > $out/w; else echo RO > $out/w; fi
ls / > $out/ls
"#,
    );
    spec.builder = PathBuf::from("/bin/sh");
    spec.rootfs = Some(rootfs);
    fx.run_ok(spec);
    assert_eq!(fx.read("os"), "ID=fake\n");
    assert_eq!(fx.read("passwd"), plan::PASSWD);
    assert_eq!(fx.read("w"), "RO\n");
    assert_eq!(
        fx.read("ls"),
        "bin\nbuild\ndev\netc\nproc\nrocmx\ntmp\nusr\n"
    );
}

/// The host's own Debian tree as a rootfs: its dynamically linked tools work unchanged.
#[test]
fn probe_host_debian_tree_as_rootfs() {
    let Some(fx) = Fixture::new() else { return };
    if !Path::new("/etc/debian_version").exists() || !Path::new("/usr/bin/ls").exists() {
        eprintln!("skipping: the host is not a Debian-style tree");
        return;
    }
    let mut spec = fx.spec(
        "/usr/bin/mkdir $out; /usr/bin/ls /usr/bin > $out/bin && /usr/bin/cat /etc/debian_version > $out/v",
    );
    spec.builder = PathBuf::from("/bin/sh"); // the host's dash
    spec.rootfs = Some(PathBuf::from("/"));
    fx.run_ok(spec);
    assert!(fx.read("bin").lines().any(|l| l == "ls"));
    assert_eq!(
        fx.read("v"),
        std::fs::read_to_string("/etc/debian_version").unwrap()
    );
}

/// The kernel's settings are out of reach: as root (the build user is an unprivileged
/// host id) and as an unprivileged caller alike. Only opens for writing (`: >>`), which
/// is where the kernel checks: nothing is ever written, whatever the outcome.
#[test]
fn probe_cannot_write_kernel_settings() {
    let Some(fx) = Fixture::new() else { return };
    let spec = fx.spec(
        r#"mkdir $out; touch $out/bad $out/ok
for f in /proc/sys/kernel/printk_ratelimit_burst /proc/sys/kernel/core_pattern \
         /proc/sys/vm/drop_caches /proc/sysrq-trigger /proc/sys/net/core/somaxconn; do
  [ -e $f ] || continue
  if (: >> $f) 2>/dev/null; then echo "$f" >> $out/bad; else echo "$f" >> $out/ok; fi
done
if [ -e /sys/kernel ]; then echo /sys >> $out/bad; fi
cat /proc/keys /proc/timer_list > $out/masked
grep -E ' /proc/(sys|sysrq-trigger|irq|bus) ' /proc/self/mountinfo > $out/ro
"#,
    );
    fx.run_ok(spec);
    assert_eq!(fx.read("bad"), "", "writable from the sandbox");
    assert!(fx.read("ok").contains("/proc/sys/kernel/core_pattern"));
    if Path::new("/proc/sysrq-trigger").exists() {
        assert!(fx.read("ok").contains("/proc/sysrq-trigger"));
    }
    assert_eq!(
        fx.read("masked"),
        "",
        "/proc/keys and /proc/timer_list are hidden"
    );
    let ro = fx.read("ro");
    for p in ["/proc/sys ", "/proc/sysrq-trigger ", "/proc/irq "] {
        if !Path::new(p.trim_end()).exists() {
            continue; // not in this kernel
        }
        let line = ro
            .lines()
            .find(|l| l.contains(p))
            .unwrap_or_else(|| panic!("{p}: {ro}"));
        assert!(line.contains(" ro,") || line.contains(" ro "), "{line}");
    }
}

/// Whether the running kernel is at least `major.minor`.
fn kernel_at_least(major: u32, minor: u32) -> bool {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut parts = release
        .trim()
        .split(|c: char| !c.is_ascii_digit())
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let (a, b) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (a, b) >= (major, minor)
}

/// No host path shows in the builder's mount table: inputs come from overlays of their
/// directories, `/build` and the output's directory are overlays too, all with layers
/// named by descriptor.
#[test]
fn probe_mountinfo_shows_no_host_path() {
    let Some(fx) = Fixture::new() else { return };
    fx.run_ok(fx.spec(
        "mkdir $out; cat /proc/self/mountinfo > $out/m; echo ok > /build/w; cat /build/w > $out/w",
    ));
    let m = fx.read("m");
    let host = fx.dir.path().to_str().unwrap();
    assert!(!m.contains(host), "{host} in\n{m}");
    for mp in [" /build ", " /rocmx/store ", &format!(" {BB} ")] {
        let line = m
            .lines()
            .find(|l| l.contains(mp))
            .unwrap_or_else(|| panic!("{mp}: {m}"));
        assert!(line.contains(" - overlay rocmx "), "{line}");
        assert!(line.contains("/proc/self/fd/"), "{line}");
        // The writable ones keep their attributes as `user.overlay.*`: without
        // `userxattr` each mount logged four warnings to the kernel log.
        if mp != format!(" {BB} ") && kernel_at_least(5, 11) {
            assert!(line.contains(",userxattr"), "{line}");
        }
    }
    assert_eq!(fx.read("w"), "ok\n");
    fx.assert_clean();
    let left: Vec<_> = std::fs::read_dir(fx.dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".rocmx-work-"))
        .collect();
    assert!(left.is_empty(), "work directories left: {left:?}");
}

/// Inputs directly in the store directory (a directory, a file, a symlink) are where
/// the builder expects them, with the overlays (their mount points in a tmpfs under the
/// store directory's overlay) and without (work directories on another filesystem make
/// the overlay mounts fail: plain binds, the mount points made in the bound directory);
/// either way nothing of them is left next to the output.
#[test]
fn probe_inputs_beside_the_output_with_and_without_overlays() {
    const DATA: &str = "/rocmx/store/1a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d-data";
    const LINK: &str = "/rocmx/store/2a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d-link";
    for overlays in [true, false] {
        let Some(fx) = Fixture::new() else { return };
        std::fs::write(fx.dir.path().join("data"), "payload\n").unwrap();
        std::os::unix::fs::symlink(
            "0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d-busybox",
            fx.dir.path().join("link"),
        )
        .unwrap();
        let mut spec = fx.spec(&format!(
            "mkdir $out; cat {DATA} > $out/data; readlink {LINK} > $out/link
test -x {LINK}/bin/sh && echo yes > $out/through
echo x >> {DATA} 2>/dev/null && echo written > $out/written
grep ' /rocmx/store ' /proc/self/mountinfo > $out/m
"
        ));
        spec.inputs
            .push((fx.dir.path().join("data"), PathBuf::from(DATA)));
        spec.inputs
            .push((fx.dir.path().join("link"), PathBuf::from(LINK)));
        // Kept until the build is over.
        let _shm = if overlays {
            None
        } else {
            let Ok(d) = tempfile::tempdir_in("/dev/shm") else {
                eprintln!("skipping the run without overlays: no /dev/shm");
                return;
            };
            let (b, o) = (d.path().join("b"), d.path().join("o"));
            std::fs::create_dir(&b).unwrap();
            std::fs::create_dir(&o).unwrap();
            spec.work_dirs = Some((b, o));
            Some(d)
        };
        fx.run_ok(spec);
        assert_eq!(fx.read("data"), "payload\n", "overlays: {overlays}");
        assert_eq!(
            fx.read("link"),
            "0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d-busybox\n"
        );
        assert_eq!(fx.read("through"), "yes\n");
        assert!(
            !fx.out.join("written").exists(),
            "a file input was writable"
        );
        let m = fx.read("m");
        assert_eq!(m.contains(" - overlay rocmx "), overlays, "{m}");
        assert_eq!(
            std::fs::read_to_string(fx.dir.path().join("data")).unwrap(),
            "payload\n"
        );
        fx.assert_clean();
        let beside: Vec<String> = std::fs::read_dir(fx.out.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n != "probe")
            .collect();
        assert!(beside.is_empty(), "left next to the output: {beside:?}");
    }
}

/// `/build` and the store directory from one writable overlay of their common host
/// directory (the realiser's layout): inputs beside the output, a writable `/build`
/// whose files land in the host build directory, no host path in `mountinfo`, nothing
/// of the set-up left in `/`; and the same with the overlay made to fail (its work
/// directory on another filesystem): plain binds.
#[test]
fn probe_build_and_output_share_one_overlay() {
    const DATA: &str = "/rocmx/store/1a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d-data";
    for overlay in [true, false] {
        let Some(fx) = Fixture::new() else { return };
        let rw = fx.dir.path().join("rw");
        let (build, stage) = (rw.join("build"), rw.join("stage"));
        std::fs::create_dir_all(&build).unwrap();
        std::fs::set_permissions(&build, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::fs::create_dir_all(&stage).unwrap();
        std::fs::set_permissions(&rw, std::fs::Permissions::from_mode(0o700)).unwrap();
        let out = rw.join("probe");
        std::fs::write(fx.dir.path().join("data"), "payload\n").unwrap();
        // Kept until the build is over.
        let shm = if overlay {
            None
        } else {
            let Ok(d) = tempfile::tempdir_in("/dev/shm") else {
                eprintln!("skipping the run without overlays: no /dev/shm");
                return;
            };
            Some(d)
        };
        let work = match &shm {
            Some(d) => d.path().to_path_buf(),
            None => fx.dir.path().join("work"),
        };
        std::fs::create_dir_all(&work).unwrap();
        std::fs::create_dir_all(work.join("stage")).unwrap();
        let mut spec = fx.spec(&format!(
            "mkdir $out; cat {DATA} > $out/data; echo w > /build/made; cat /build/made > $out/w
grep -E ' /build | /rocmx/store ' /proc/self/mountinfo > $out/m; ls -a / > $out/root
"
        ));
        spec.inputs
            .push((fx.dir.path().join("data"), PathBuf::from(DATA)));
        spec.build_dir = build.clone();
        spec.staging = Some(stage.clone());
        spec.outputs = vec![(out.clone(), PathBuf::from(OUT))];
        spec.work_dirs = Some((work.clone(), work.join("stage")));
        spec.shared_work_dir = Some(work.clone());
        fx.run_ok(spec);
        let read = |n: &str| std::fs::read_to_string(out.join(n)).unwrap();
        assert_eq!(read("data"), "payload\n", "overlay: {overlay}");
        assert_eq!(read("w"), "w\n");
        assert_eq!(std::fs::read_to_string(build.join("made")).unwrap(), "w\n");
        let m = read("m");
        assert_eq!(m.lines().count(), 2, "{m}");
        for line in m.lines() {
            assert_eq!(line.contains(" - overlay rocmx "), overlay, "{line}");
        }
        if overlay {
            assert!(!m.contains(fx.dir.path().to_str().unwrap()), "{m}");
            // One overlay: both mounts show the same device.
            let devs: BTreeSet<&str> = m.lines().filter_map(|l| l.split(' ').nth(2)).collect();
            assert_eq!(devs.len(), 1, "{m}");
        }
        let root = read("root");
        assert!(!root.contains(".rocmx"), "left in /: {root}");
        let left: Vec<String> = std::fs::read_dir(&stage)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(left.is_empty(), "left in the staging directory: {left:?}");
    }
}

/// A builder that starts processes until the limit refuses more: the build ends, saying
/// so, and nothing it started survives.
#[test]
fn probe_process_limit_stops_a_fork_bomb() {
    let Some(fx) = Fixture::new() else { return };
    let marker = format!("103.{}", std::process::id());
    let mut spec = fx.spec(&format!(
        "mkdir $out; i=0; while [ $i -lt 200 ]; do sleep {marker} & i=$((i+1)); done; sleep {marker}"
    ));
    spec.limits.max_processes = Some(64);
    spec.timeout = Some(Duration::from_secs(60));
    let t = Instant::now();
    let err = sandbox::run(spec).unwrap_err();
    assert!(matches!(err, SandboxError::TooManyProcesses(64)), "{err}");
    assert_eq!(
        err.to_string(),
        "build exceeded 64 processes (the max-build-processes setting)"
    );
    assert!(t.elapsed() < Duration::from_secs(50), "{:?}", t.elapsed());
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(host_processes_with(&marker), Vec::<String>::new());
    // The limit is the build's own: ulimit -u shows it, and a build below it runs.
    let fx = Fixture::new().unwrap();
    let mut spec = fx.spec(
        "mkdir $out; ulimit -u > $out/u; for i in 1 2 3 4 5 6 7 8; do sleep 0.1 & done; wait",
    );
    spec.limits.max_processes = Some(64);
    fx.run_ok(spec);
    assert_eq!(fx.read("u"), "64\n");
}

/// A builder that exits leaving a process that keeps appending to a file of `$out`
/// through a descriptor (so moving the output does not stop it), a daemon whose output
/// is not the log's (so the log's end does not wait for it): when `run`
/// returns, that process is already gone (init kills and reaps everything before it
/// reports the status, and the parent moves the output only then, while init itself may
/// still be being torn down), so the output the caller hashes cannot change afterwards.
/// With and without the process limit (init's two reaping loops).
#[test]
fn probe_processes_left_behind_are_gone_when_run_returns() {
    for limit in [None, Some(64)] {
        let Some(fx) = Fixture::new() else { return };
        let marker = format!("104.{}", std::process::id());
        let mut spec = fx.spec(&format!(
            "mkdir $out; $BB/bin/sh -c 'exec 3>>\"$1/late\"; while :; do echo x >&3; done' {marker} $out >/dev/null 2>&1 & \
             while [ ! -s $out/late ]; do :; done; echo done"
        ));
        spec.limits.max_processes = limit;
        fx.run_ok(spec);
        // No sleep: gone at return, not eventually.
        assert_eq!(
            host_processes_with(&marker),
            Vec::<String>::new(),
            "{limit:?}"
        );
        let size = || std::fs::metadata(fx.out.join("late")).unwrap().len();
        let before = size();
        assert!(before > 0);
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(
            size(),
            before,
            "the output changed after run returned ({limit:?})"
        );
        fx.assert_clean();
    }
}

/// `/dev/shm` is a tmpfs of the configured size.
#[test]
fn probe_dev_shm_is_bounded() {
    let Some(fx) = Fixture::new() else { return };
    let mut spec = fx.spec(
        "mkdir $out; if dd if=/dev/zero of=/dev/shm/big bs=1024 count=4096 2> $out/dd; then echo yes > $out/fit; else echo no > $out/fit; fi",
    );
    spec.limits.shm_size = Some(1 << 20);
    fx.run_ok(spec);
    assert_eq!(fx.read("fit"), "no\n");
    assert!(fx.read("dd").contains("No space left"), "{}", fx.read("dd"));
}

/// A build that writes more than its disk bound is killed, naming the bound.
#[test]
fn probe_disk_limit_kills_a_runaway_build() {
    let Some(fx) = Fixture::new() else { return };
    let marker = format!("104.{}", std::process::id());
    let mut spec = fx.spec(&format!(
        "mkdir $out; dd if=/dev/zero of=/build/big bs=65536 count=256; sync; sleep {marker}"
    ));
    spec.limits.disk = Some(4 << 20);
    let t = Instant::now();
    let err = sandbox::run(spec).unwrap_err();
    assert!(
        matches!(err, SandboxError::DiskLimit { limit, .. } if limit == 4 << 20),
        "{err}"
    );
    assert!(err.to_string().contains("build-dir-size"), "{err}");
    assert!(t.elapsed() < Duration::from_secs(30), "{:?}", t.elapsed());
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(host_processes_with(&marker), Vec::<String>::new());
}

/// A builder that stops itself cannot hang the build: the silence bound ends it.
#[test]
fn probe_stopped_builder_is_killed_by_the_silence_bound() {
    let Some(fx) = Fixture::new() else { return };
    let mut spec = fx.spec("echo stopping; kill -STOP $$; echo resumed");
    spec.max_silent = Some(Duration::from_secs(1));
    let t = Instant::now();
    let err = sandbox::run(spec).unwrap_err();
    assert!(matches!(err, SandboxError::Silent(_)), "{err}");
    assert!(t.elapsed() < Duration::from_secs(10));
    assert_eq!(fx.log.text(), "stopping\n");
}

/// The caller's session keyring is not the build's, and the keyring calls are denied.
#[test]
#[cfg(target_arch = "x86_64")]
fn probe_cannot_reach_the_callers_keyring() {
    let Some(fx) = Fixture::new() else { return };
    let python = Path::new("/usr/bin/python3");
    if !python.exists() || !Path::new("/etc/debian_version").exists() {
        eprintln!("skipping: needs the host's /usr/bin/python3 (a Debian tree as rootfs)");
        return;
    }
    // A secret in this process's session keyring (add_key = 248 on x86_64).
    let id = unsafe {
        libc::syscall(
            248,
            c"user".as_ptr(),
            c"rocmx-probe-secret".as_ptr(),
            b"s3cret".as_ptr(),
            6usize,
            -3i32, // KEY_SPEC_SESSION_KEYRING
        )
    };
    if id < 0 {
        eprintln!(
            "skipping: this process cannot use a session keyring ({})",
            std::io::Error::last_os_error()
        );
        return;
    }
    let script = r#"
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
out = os.environ["out"]
os.mkdir(out)
r1 = libc.syscall(250, 0, -3, 0)  # keyctl(KEYCTL_GET_KEYRING_ID, session, 0)
e1 = ctypes.get_errno()
r2 = libc.syscall(249, b"user", b"rocmx-probe-secret", None, 0)  # request_key
e2 = ctypes.get_errno()
open(out + "/r", "w").write("%d %d %d %d\n" % (r1, e1, r2, e2))
open(out + "/keys", "w").write(open("/proc/keys").read())
"#;
    let mut spec = fx.spec("");
    spec.builder = python.to_path_buf();
    spec.args = vec!["-c".into(), script.into()];
    spec.rootfs = Some(PathBuf::from("/"));
    let result = sandbox::run(spec);
    // KEYCTL_INVALIDATE (21): the secret goes, whatever happened.
    unsafe { libc::syscall(250, 21, id) };
    let outcome = result.unwrap();
    assert!(outcome.status.success(), "{}", fx.log.text());
    assert_eq!(fx.read("r"), format!("-1 {e} -1 {e}\n", e = libc::ENOSYS));
    assert_eq!(fx.read("keys"), "");
}

const REFUSAL_INNER: &str = "ROCMX_SANDBOX_TEST_REFUSAL";

/// The kernel refusing user namespaces, for real: inside a user namespace whose
/// `user.max_user_namespaces` is 0 (that limit is per namespace, so this changes nothing
/// on the host), the probe and `run` stop with the reason and the fix.
#[test]
fn probe_refused_user_namespaces_are_explained() {
    let Some(unshare) = ["/usr/bin/unshare", "/bin/unshare"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
    else {
        eprintln!("skipping: unshare (util-linux) is missing");
        return;
    };
    let exe = std::env::current_exe().unwrap();
    let out = Command::new(unshare)
        .args(["-Ur", "sh", "-c"])
        .arg("echo 0 > /proc/sys/user/max_user_namespaces && exec \"$0\" refused_inner --exact --nocapture")
        .arg(&exe)
        .env(REFUSAL_INNER, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success());
    assert!(stdout.contains("test refused_inner ... ok"));
    assert!(stdout.contains("refusal checked"));
}

#[test]
fn refused_inner() {
    if std::env::var_os(REFUSAL_INNER).is_none() {
        return; // only meaningful inside probe_refused_user_namespaces_are_explained
    }
    let expected = "user namespaces are disabled by the sysctl user.max_user_namespaces = 0";
    match sandbox::check_user_namespaces() {
        Err(SandboxError::UserNamespacesRefused { reason, fix }) => {
            assert_eq!(
                reason,
                format!("unshare(CLONE_NEWUSER|CLONE_NEWNS|CLONE_NEWPID) failed with ENOSPC: {expected}")
            );
            assert!(fix.contains("sysctl -w user.max_user_namespaces="), "{fix}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    let Some(fx) = Fixture::new() else { return };
    let err = sandbox::run(fx.spec("mkdir $out")).unwrap_err();
    println!("run() says: {err}");
    match &err {
        SandboxError::UserNamespacesRefused { reason, .. } => {
            assert!(
                reason.ends_with(&format!("failed with ENOSPC: {expected}")),
                "{reason}"
            )
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert!(!fx.out.exists());
    fx.assert_clean();
    println!("refusal checked");
}

/// Rootless means rootless: every probe again, as uid 65534.
#[test]
fn probes_pass_as_an_unprivileged_user() {
    if std::env::var_os(UNPRIV_DIR).is_some() {
        return; // we are the re-run
    }
    if euid() != 0 {
        eprintln!(
            "skipping: not root, so cannot switch to another user (the probes ran as uid {})",
            euid()
        );
        return;
    }
    let Some(setpriv) = ["/usr/bin/setpriv", "/bin/setpriv", "/usr/sbin/setpriv"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
    else {
        eprintln!("skipping: setpriv is missing (util-linux)");
        return;
    };
    if !Path::new(BUSYBOX).exists() {
        eprintln!("skipping: {BUSYBOX} is missing");
        return;
    }
    let dir = tempfile::Builder::new()
        .prefix("rocmx-sandbox-unpriv")
        .tempdir()
        .unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    std::os::unix::fs::chown(dir.path(), Some(65534), Some(65534)).unwrap();
    // The test binary may live where uid 65534 cannot reach it: use a copy.
    let exe = dir.path().join("sandbox-probes");
    std::fs::copy(std::env::current_exe().unwrap(), &exe).unwrap();
    std::os::unix::fs::chown(&exe, Some(65534), Some(65534)).unwrap();
    let out = Command::new(setpriv)
        .args(["--reuid", "65534", "--regid", "65534", "--clear-groups"])
        .arg(&exe)
        .args(["probe_", "--test-threads", "2", "--nocapture"])
        .env(UNPRIV_DIR, dir.path())
        .current_dir(dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("--- unprivileged run ---\n{stdout}\n{stderr}");
    assert!(out.status.success(), "the probes failed as uid 65534");
    assert!(stdout.contains("probe running as uid 65534"));
    let summary = stdout
        .lines()
        .rfind(|l| l.starts_with("test result:"))
        .unwrap();
    assert!(summary.contains(" 0 failed"), "{summary}");
    let passed: usize = summary.split_whitespace().nth(3).unwrap().parse().unwrap();
    assert!(passed >= 18, "only {passed} probes ran: {summary}");
    assert!(
        !stderr.contains("skipping"),
        "a probe was skipped as uid 65534:\n{stderr}"
    );
}

/// Not a probe: how long one trivial sandboxed build takes (run with `--ignored`).
#[test]
#[ignore]
fn sandbox_overhead() {
    let n = 50;
    let fx = Fixture::new().unwrap();
    let mut total = Duration::ZERO;
    for _ in 0..n {
        let t = Instant::now();
        fx.run_ok(fx.spec("echo hi > $out"));
        total += t.elapsed();
        std::fs::remove_file(&fx.out).unwrap();
    }
    println!("{:?} per trivial sandboxed build", total / n);
}
