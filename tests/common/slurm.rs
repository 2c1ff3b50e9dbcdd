//! A private one-node Slurm cluster for end-to-end tests: `munged`, `slurmctld` and
//! `slurmd` started from a temporary directory, talking over loopback on ports no one
//! else uses, stopped (jobs, daemons and every process they left) when the
//! [`Cluster`] is dropped.
//!
//! ```ignore
//! let Some(cluster) = Cluster::start() else { return };   // "SKIP: …" already said
//! let o = cluster.command("sbatch").args(["--parsable", "--wrap", "true"]).output();
//! ```
//!
//! What it needs: Debian's `slurmctld slurmd slurm-client munge` (Slurm 22.05 and
//! munge 0.5 measured). Nothing of the host's Slurm or munge is used or disturbed: no
//! service is started, `/etc/slurm` and `/etc/munge` are not read, and the ports are
//! chosen free. When a program is missing, or the daemons do not come up within
//! [`START_TIMEOUT`], [`Cluster::start`] says `SKIP: …` and returns `None`; under CI
//! (`CI` set and not `false`/`0`, as `tests/conformance.rs` reads it) both are test
//! failures instead, since `.ci/run` installs the packages.
//!
//! The daemons run as the user running the tests (root in CI: `SlurmUser` and
//! `SlurmdUser` are that user; as another user the cluster works too, but jobs can
//! only run as that user). Jobs run as their submitter: as root, [`Cluster::command_as`]
//! submits as an unprivileged user through `setpriv --reuid --regid --clear-groups`,
//! and such a job runs as that uid. Everything such a user needs is reachable: the
//! temporary directory is in `/tmp` (every parent traversable, unlike a private
//! `$TMPDIR`) and of mode 0755, `slurm.conf` is 0644, the munge socket's directory
//! 0755, and [`Cluster::scratch`] is a sticky world-writable directory (1777) for job
//! scripts and output files.
//!
//! Each cluster is independent: parallel tests may start one each.
//!
//! Timing, measured on a 2-CPU Debian 12 VM (Slurm 22.05.8): the node is idle about
//! 1.03 s after the start ([`Cluster::started_in`]); slurmctld starts batch jobs from
//! its once-a-second background loop only (see [`slurm_conf`]), so a short job goes
//! from `sbatch` to `COMPLETED` in 0.1–1 s (about 2 s for the first job after the
//! start), the child of a failed parent is cancelled about 1 s after the parent
//! ends, and `srun true` takes about 35 ms. Dropping a cluster takes under 0.1 s with
//! no job running, about [`KILL_WAIT`] + 3 s with a job that ignores SIGTERM.
//!
//! Nothing is left behind. [`Drop`] cancels the jobs, stops the daemons and kills
//! what remains (found by [`MARKER`] and `SLURM_CONF` in process environments:
//! `slurmstepd` and job processes outlive slurmd by design). If the test process dies
//! without dropping the cluster (a SIGKILL on timeout, an abort), a guard process it
//! started does the same and removes the directory ([`Cluster::spawn_guard`]).

use std::fs::{self, File};
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long the daemons have to bring the node to `idle` (measured: about 1 s).
pub const START_TIMEOUT: Duration = Duration::from_secs(15);

/// How often readiness and job states are polled.
pub const POLL: Duration = Duration::from_millis(50);

/// The one partition (the default one, holding the one node).
pub const PARTITION: &str = "debug";

/// The one node's name (`slurmd -N localhost`; its address is 127.0.0.1).
pub const NODE: &str = "localhost";

/// `KillWait`: seconds between the SIGTERM and the SIGKILL of a cancelled job's
/// processes (Slurm's default, 30, would make every teardown of a cluster with a job
/// ignoring SIGTERM last half a minute).
pub const KILL_WAIT: u64 = 2;

/// The environment variable, set to the cluster's directory, that marks the daemons
/// and everything they start (`slurmstepd`, `slurmscriptd`): with `SLURM_CONF`, which
/// Slurm sets in every job's environment, it is how [`Drop`] finds what is left.
pub const MARKER: &str = "ROCMX_SLURM_FIXTURE";

/// The programs the cluster needs.
const PROGRAMS: [&str; 8] = [
    "munged",
    "slurmctld",
    "slurmd",
    "sbatch",
    "squeue",
    "scontrol",
    "scancel",
    "sinfo",
];

/// Prefixes of the environment variables Slurm's clients and daemons read as options
/// (`SBATCH_PARTITION`, `SLURM_JOB_ID`, …): removed from everything the cluster runs,
/// so a test run inside a Slurm job, or with such variables set, talks to this
/// cluster only and with default options.
const SLURM_ENV_PREFIXES: [&str; 8] = [
    "SLURM_",
    "SBATCH_",
    "SALLOC_",
    "SRUN_",
    "SQUEUE_",
    "SINFO_",
    "SCANCEL_",
    "SCONTROL_",
];

/// The guard's script (see [`Cluster::spawn_guard`]): `$1` is the cluster's
/// directory, `$2` its `slurm.conf`. The sweep is repeated until a pass finds nothing
/// (a dying slurmd may still fork), at most 50 times.
const GUARD: &str = r#"
IFS= read -r line
[ "$line" = done ] && exit 0
i=0
while [ $i -lt 50 ]; do
  found=
  for e in /proc/[0-9]*/environ; do
    pid=${e#/proc/}; pid=${pid%/environ}
    [ "$pid" = $$ ] && continue
    if grep -qzxF -e "ROCMX_SLURM_FIXTURE=$1" -e "SLURM_CONF=$2" "$e" 2>/dev/null; then
      kill -KILL "$pid" 2>/dev/null && found=1
    fi
  done
  [ -z "$found" ] && break
  i=$((i + 1))
  sleep 0.1
done
rm -rf "$1"
"#;

/// Whether this is a CI run, where a cluster that cannot start is a failure.
fn under_ci() -> bool {
    matches!(std::env::var("CI").as_deref(), Ok(v) if !v.is_empty() && v != "false" && v != "0")
}

/// Skips (outside CI) or fails (under CI), saying why.
fn skip_or_fail(why: &str) -> Option<Cluster> {
    if under_ci() {
        panic!("the Slurm test cluster is required under CI: {why}");
    }
    eprintln!("SKIP: {why}");
    None
}

/// `prog` in `$PATH` or the sbin directories (the daemons are in /usr/sbin, which is
/// not in every user's `$PATH`).
fn find_program(prog: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(PathBuf::from))
        .map(|d| d.join(prog))
        .find(|p| {
            fs::metadata(p)
                .map(|m| m.is_file() && m.mode() & 0o111 != 0)
                .unwrap_or(false)
        })
}

/// The running user's name (from `/etc/passwd`; the uid itself when absent).
fn current_user() -> String {
    let uid = fs::metadata("/proc/self").map(|m| m.uid()).unwrap_or(0);
    fs::read_to_string("/etc/passwd")
        .ok()
        .and_then(|p| {
            p.lines().find_map(|l| {
                let f: Vec<&str> = l.split(':').collect();
                (f.len() > 2 && f[2] == uid.to_string()).then(|| f[0].to_string())
            })
        })
        .unwrap_or_else(|| uid.to_string())
}

/// Two distinct free loopback TCP ports (both held while the second is chosen).
fn free_ports() -> (u16, u16) {
    let a = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let b = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    (
        a.local_addr().unwrap().port(),
        b.local_addr().unwrap().port(),
    )
}

/// The node's hardware line as `slurmd -C` reports it (`CPUs=… Boards=…
/// SocketsPerBoard=… CoresPerSocket=… ThreadsPerCore=… RealMemory=…`): what slurmd
/// will register with, so the node is never drained for a mismatch and `--mem` up to
/// the machine's memory can be satisfied. Falls back to the CPUs this process may use
/// and `MemTotal` of /proc/meminfo (which is what slurmd reads).
fn node_hardware(slurmd: &Path) -> (String, u64, u64) {
    let line = Command::new(slurmd)
        .arg("-C")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .and_then(|s| s.lines().next().map(str::to_string))
        .unwrap_or_default();
    let field = |k: &str| {
        line.split_whitespace()
            .find_map(|f| f.strip_prefix(k)?.strip_prefix('=')?.parse::<u64>().ok())
    };
    let keys = [
        "CPUs",
        "Boards",
        "SocketsPerBoard",
        "CoresPerSocket",
        "ThreadsPerCore",
        "RealMemory",
    ];
    if keys.iter().all(|k| field(k).is_some()) {
        let hw = keys
            .iter()
            .map(|k| format!("{k}={}", field(k).unwrap()))
            .collect::<Vec<_>>()
            .join(" ");
        return (hw, field("CPUs").unwrap(), field("RealMemory").unwrap());
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get() as u64);
    let mem = fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(1024, |kb| kb / 1024);
    (format!("CPUs={cpus} RealMemory={mem}"), cpus, mem)
}

/// What [`slurm_conf`] is made of.
struct Conf<'a> {
    root: &'a Path,
    ports: (u16, u16),
    user: &'a str,
    socket: &'a Path,
    hardware: &'a str,
    cpus: u64,
    memory: u64,
}

/// The cluster's `slurm.conf`. The choices, line by line:
///
/// - `SlurmctldHost=localhost(127.0.0.1)`, node `localhost` at `NodeAddr=127.0.0.1`
///   (`slurmd -N localhost`): everything over loopback, whatever the machine's
///   hostname; `SlurmctldPort`/`SlurmdPort` chosen free ([`free_ports`]), so parallel
///   clusters and a host Slurm (6817/6818) do not clash.
/// - `SlurmUser`/`SlurmdUser`: the running user (root in CI), so no `slurm` account
///   and no privilege change are needed.
/// - `AuthType=auth/munge` with `AuthInfo=socket=…`: the private munged; `CredType`
///   (job credentials between slurmctld and slurmd) uses the same socket.
/// - State, spool, pid and log files, and an empty `PlugStackConfig` (no host SPANK
///   plugin), all under the cluster's directory.
/// - `ProctrackType=proctrack/linuxproc`, `TaskPlugin=task/none`,
///   `JobAcctGatherType=jobacct_gather/none`, no accounting, no job completion log,
///   `MpiDefault=none`, `MailProg=/bin/true`: nothing that needs cgroups, systemd,
///   slurmdbd or mail.
/// - `SelectType=select/cons_tres` with `CR_Core_Memory` and `DefMemPerCPU` = memory /
///   CPUs: jobs share the node by cores; memory is accounted so `--mem` requests up to
///   `RealMemory` are honoured, while a job without `--mem` takes only its share
///   (with Slurm's default, the whole node, one job would run at a time).
/// - `SchedulerParameters=batch_sched_delay=0,sched_interval=1`: slurmctld starts
///   batch jobs only from its background loop; with these a job starts within a
///   second of its submission and a dependency that can never be satisfied is acted
///   on within a second (Slurm's defaults: up to 3 s, and a full pass every 60 s).
/// - `ReturnToService=2`: a node that was down is usable again as soon as slurmd
///   registers.
/// - `MinJobAge=3600`: finished jobs stay visible to `scontrol show job` for an hour.
/// - `KillWait=`[`KILL_WAIT`].
/// - The node's hardware as `slurmd -C` finds it ([`node_hardware`]), so it is never
///   drained for a mismatch; `State=UNKNOWN` until slurmd registers.
/// - One partition, [`PARTITION`], the default, unlimited in time.
fn slurm_conf(c: &Conf) -> String {
    let root = c.root.display();
    format!(
        "\
# A private one-node test cluster (tests/common/slurm.rs); everything under {root}.
ClusterName=rocmxtest
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={d_port}
SlurmUser={user}
SlurmdUser={user}
AuthType=auth/munge
AuthInfo=socket={socket}
CredType=cred/munge
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd.log
PlugStackConfig={root}/plugstack.conf
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
MailProg=/bin/true
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU={def_mem}
SchedulerParameters=batch_sched_delay=0,sched_interval=1
ReturnToService=2
MinJobAge=3600
KillWait={KILL_WAIT}
NodeName={NODE} NodeAddr=127.0.0.1 {hardware} State=UNKNOWN
PartitionName={PARTITION} Nodes=ALL Default=YES MaxTime=INFINITE State=UP
",
        ctld_port = c.ports.0,
        d_port = c.ports.1,
        user = c.user,
        socket = c.socket.display(),
        hardware = c.hardware,
        def_mem = (c.memory / c.cpus.max(1)).max(1),
    )
}

/// A running one-node cluster. Dropping it cancels every job, stops the daemons and
/// kills whatever process of theirs is left, then removes its directory.
pub struct Cluster {
    /// `/tmp/rocmx-slurm-XXXXXX`, mode 0755: `slurm.conf`, `munge/`, `state/`,
    /// `spool/`, `log/`, `scratch/`.
    dir: Option<tempfile::TempDir>,
    conf: PathBuf,
    scratch: PathBuf,
    /// `SlurmctldPort` and `SlurmdPort`.
    ports: (u16, u16),
    /// `munged`, `slurmctld`, `slurmd`, in the order started.
    daemons: Vec<(&'static str, Child)>,
    /// The guard ([`Cluster::spawn_guard`]).
    guard: Option<Child>,
    /// Absolute paths of [`PROGRAMS`].
    programs: Vec<(&'static str, PathBuf)>,
    /// The node's CPUs and `RealMemory` (MiB).
    cpus: u64,
    memory: u64,
    /// How long the start took (until the node was idle; about 1.03 s measured).
    pub started_in: Duration,
}

impl Cluster {
    /// Starts a cluster and waits until its node is idle. `None` after `SKIP: …` when
    /// a program is missing or the daemons do not come up in [`START_TIMEOUT`]
    /// (failures under CI). A start whose daemon exits early (a port taken between
    /// choosing and binding it) is retried with other ports, twice.
    pub fn start() -> Option<Cluster> {
        let mut programs = Vec::new();
        let mut missing = Vec::new();
        for p in PROGRAMS {
            match find_program(p) {
                Some(path) => programs.push((p, path)),
                None => missing.push(p),
            }
        }
        if !missing.is_empty() {
            return skip_or_fail(&format!(
                "Slurm or munge is not installed (missing: {}; install slurmctld slurmd slurm-client munge)",
                missing.join(", ")
            ));
        }
        let mut why = String::new();
        for _ in 0..3 {
            match Cluster::start_once(programs.clone()) {
                Ok(c) => return Some(c),
                Err((retry, w)) => {
                    why = w;
                    if !retry {
                        break;
                    }
                }
            }
        }
        skip_or_fail(&format!("the Slurm test cluster did not start: {why}"))
    }

    /// One attempt. The error says whether another attempt may help (a daemon exited)
    /// and what the logs said.
    fn start_once(programs: Vec<(&'static str, PathBuf)>) -> Result<Cluster, (bool, String)> {
        let t0 = Instant::now();
        let dir = tempfile::Builder::new()
            .prefix("rocmx-slurm-")
            .tempdir_in("/tmp")
            .expect("tempdir in /tmp");
        let root = dir.path().to_path_buf();
        fs::set_permissions(&root, fs::Permissions::from_mode(0o755)).unwrap();
        for (sub, mode) in [
            ("munge", 0o755),
            ("state", 0o755),
            ("spool", 0o755),
            ("log", 0o755),
            ("scratch", 0o1777),
        ] {
            let d = root.join(sub);
            fs::create_dir(&d).unwrap();
            fs::set_permissions(&d, fs::Permissions::from_mode(mode)).unwrap();
        }
        let user = current_user();
        let ports = free_ports();
        let slurmd = programs
            .iter()
            .find(|(p, _)| *p == "slurmd")
            .unwrap()
            .1
            .clone();
        let (hardware, cpus, memory) = node_hardware(&slurmd);
        let conf = root.join("slurm.conf");
        let mut c = Cluster {
            dir: Some(dir),
            conf: conf.clone(),
            scratch: root.join("scratch"),
            ports,
            daemons: Vec::new(),
            guard: None,
            programs,
            cpus,
            memory,
            started_in: Duration::ZERO,
        };

        c.spawn_guard().map_err(|e| (false, e))?;

        // munge: a fresh 1024-bit key (what `mungekey` makes) of mode 0400, owned by
        // the user running munged, as munged insists; the socket in a 0755 directory
        // so unprivileged submitters can reach it (munged makes the socket 0777).
        let key = root.join("munge/munge.key");
        let mut bytes = vec![0u8; 128];
        File::open("/dev/urandom")
            .and_then(|mut f| f.read_exact(&mut bytes))
            .expect("/dev/urandom");
        fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o400)
            .open(&key)
            .and_then(|mut f| std::io::Write::write_all(&mut f, &bytes))
            .expect("munge key");
        let socket = root.join("munge/munge.socket");
        let p = |f: &str| root.join(f).to_string_lossy().into_owned();
        let munged_args = vec![
            "--foreground".to_string(),
            format!("--key-file={}", p("munge/munge.key")),
            format!("--socket={}", socket.display()),
            format!("--pid-file={}", p("munge/munged.pid")),
            format!("--log-file={}", p("log/munged.log")),
            format!("--seed-file={}", p("munge/munged.seed")),
        ];
        c.spawn_daemon("munged", &munged_args)
            .map_err(|e| (false, e))?;
        while !socket.exists() {
            if let Some(e) = c.exited_daemon() {
                return Err((true, e));
            }
            if t0.elapsed() > START_TIMEOUT {
                return Err((false, format!("munged made no socket\n{}", c.logs())));
            }
            std::thread::sleep(Duration::from_millis(5));
        }

        let conf_text = slurm_conf(&Conf {
            root: &root,
            ports,
            user: &user,
            socket: &socket,
            hardware: &hardware,
            cpus,
            memory,
        });
        fs::write(&conf, conf_text).unwrap();
        fs::write(root.join("plugstack.conf"), "").unwrap();
        for f in [&conf, &root.join("plugstack.conf")] {
            fs::set_permissions(f, fs::Permissions::from_mode(0o644)).unwrap();
        }

        let conf_s = conf.to_string_lossy().into_owned();
        c.spawn_daemon(
            "slurmctld",
            &["-D".into(), "-i".into(), "-f".into(), conf_s.clone()],
        )
        .map_err(|e| (false, e))?;
        c.spawn_daemon(
            "slurmd",
            &["-D".into(), "-N".into(), NODE.into(), "-f".into(), conf_s],
        )
        .map_err(|e| (false, e))?;

        loop {
            if c.node_state().as_deref() == Some("idle") {
                break;
            }
            if let Some(e) = c.exited_daemon() {
                return Err((true, e));
            }
            if t0.elapsed() > START_TIMEOUT {
                return Err((
                    false,
                    format!(
                        "the node was not idle after {START_TIMEOUT:?} (sinfo: {:?})\n{}",
                        c.node_state(),
                        c.logs()
                    ),
                ));
            }
            std::thread::sleep(POLL);
        }
        c.started_in = t0.elapsed();
        eprintln!(
            "slurm test cluster up in {:?}: {} (ports {} and {})",
            c.started_in,
            c.dir().display(),
            ports.0,
            ports.1
        );
        Ok(c)
    }

    /// Starts a daemon in the foreground with the cluster's environment and the
    /// marker, its output to `log/NAME.out`.
    fn spawn_daemon(&mut self, name: &'static str, args: &[String]) -> Result<(), String> {
        let out = self.dir().join(format!("log/{name}.out"));
        let mut cmd = Command::new(self.program(name));
        cmd.args(args)
            .stdin(Stdio::null())
            .stdout(File::create(&out).unwrap())
            .stderr(File::create(&out).unwrap());
        self.set_env(&mut cmd);
        cmd.env(MARKER, self.dir());
        let child = cmd.spawn().map_err(|e| format!("{name}: {e}"))?;
        self.daemons.push((name, child));
        Ok(())
    }

    /// Starts the guard: a shell blocked reading a pipe from this process. [`Drop`]
    /// writes `done` to it after its own cleanup, and the guard exits; if this process
    /// dies without dropping the cluster (a panic that aborts, a test harness's
    /// SIGKILL on timeout, Ctrl-C), the pipe's end closes, the read fails, and the
    /// guard kills every process carrying the marker or the cluster's `SLURM_CONF`
    /// (daemons, `slurmstepd`, jobs) and removes the directory. (The pipe is
    /// close-on-exec, so no other child of this process holds it open.)
    fn spawn_guard(&mut self) -> Result<(), String> {
        let mut cmd = Command::new("/bin/sh");
        cmd.args(["-c", GUARD, "rocmx-slurm-guard"])
            .arg(self.dir())
            .arg(&self.conf)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        for (k, _) in std::env::vars_os() {
            let k = k.to_string_lossy();
            if SLURM_ENV_PREFIXES.iter().any(|p| k.starts_with(p)) || k == MARKER {
                cmd.env_remove(&*k);
            }
        }
        self.guard = Some(cmd.spawn().map_err(|e| format!("the guard: {e}"))?);
        Ok(())
    }

    /// The first daemon found to have exited, described with the logs.
    fn exited_daemon(&mut self) -> Option<String> {
        let mut exited = None;
        for (name, child) in &mut self.daemons {
            if let Ok(Some(status)) = child.try_wait() {
                exited = Some(format!("{name} exited ({status})"));
                break;
            }
        }
        exited.map(|e| format!("{e}\n{}", self.logs()))
    }

    /// The last lines of every log and daemon output, for failure messages.
    pub fn logs(&self) -> String {
        let mut s = String::new();
        let Ok(rd) = fs::read_dir(self.dir().join("log")) else {
            return s;
        };
        let mut files: Vec<PathBuf> = rd.flatten().map(|e| e.path()).collect();
        files.sort();
        for f in files {
            let text = fs::read_to_string(&f).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            let tail = &lines[lines.len().saturating_sub(15)..];
            s.push_str(&format!("--- {}\n{}\n", f.display(), tail.join("\n")));
        }
        s
    }

    /// The cluster's directory (`slurm.conf`, `munge/`, `state/`, `spool/`, `log/`,
    /// `scratch/`).
    pub fn dir(&self) -> &Path {
        self.dir.as_ref().unwrap().path()
    }

    /// The configuration file (what `SLURM_CONF` names).
    pub fn conf(&self) -> &Path {
        &self.conf
    }

    /// A sticky world-writable directory (1777) in the cluster's directory: where
    /// commands run by default, so jobs' default working directory and `slurm-%j.out`
    /// files land here (never in the repository), and where job scripts and output
    /// files of any user can go.
    pub fn scratch(&self) -> &Path {
        &self.scratch
    }

    /// The partition to submit to (the default one).
    pub fn partition(&self) -> &'static str {
        PARTITION
    }

    /// The node's CPUs (jobs running at once: at most this many one-CPU jobs).
    pub fn cpus(&self) -> u64 {
        self.cpus
    }

    /// The node's `RealMemory`, in MiB: the largest `--mem` that can be satisfied.
    /// Memory is a consumable resource (`CR_Core_Memory`) with `DefMemPerCPU` the
    /// node's memory divided by its CPUs, so jobs without `--mem` do not each take the
    /// whole node (Slurm's default, which would run one job at a time).
    pub fn memory_mib(&self) -> u64 {
        self.memory
    }

    /// `SlurmctldPort` and `SlurmdPort`.
    pub fn ports(&self) -> (u16, u16) {
        self.ports
    }

    /// The environment a Slurm client needs to talk to this cluster: `SLURM_CONF`.
    /// (Remove the caller's own `SLURM_*`/`SBATCH_*`… variables too, as
    /// [`Cluster::command`] does, if they may be set.)
    pub fn env(&self) -> Vec<(String, String)> {
        vec![(
            "SLURM_CONF".to_string(),
            self.conf.to_string_lossy().into_owned(),
        )]
    }

    /// Removes the inherited Slurm option variables from `cmd` and sets [`Cluster::env`].
    fn set_env(&self, cmd: &mut Command) {
        for (k, _) in std::env::vars_os() {
            let k = k.to_string_lossy();
            if SLURM_ENV_PREFIXES.iter().any(|p| k.starts_with(p)) {
                cmd.env_remove(&*k);
            }
        }
        cmd.envs(self.env());
    }

    /// The absolute path of one of the cluster's programs, else `prog` itself.
    fn program(&self, prog: &str) -> PathBuf {
        self.programs
            .iter()
            .find(|(p, _)| *p == prog)
            .map(|(_, path)| path.clone())
            .or_else(|| find_program(prog))
            .unwrap_or_else(|| PathBuf::from(prog))
    }

    /// `prog` (a Slurm client such as `sbatch`, or anything else) with the cluster's
    /// environment, the caller's Slurm variables removed, standard input closed, run in
    /// [`Cluster::scratch`].
    pub fn command(&self, prog: &str) -> Command {
        let mut cmd = Command::new(self.program(prog));
        self.set_env(&mut cmd);
        cmd.current_dir(&self.scratch).stdin(Stdio::null());
        cmd
    }

    /// [`Cluster::command`] run as `uid`:`gid` without supplementary groups, through
    /// `setpriv --reuid --regid --clear-groups` (root only). `sbatch` run so submits a
    /// job that runs as that uid; the environment (`SLURM_CONF`) passes through.
    pub fn command_as(&self, uid: u32, gid: u32, prog: &str) -> Command {
        let setpriv = find_program("setpriv").expect("setpriv (util-linux)");
        let mut cmd = Command::new(setpriv);
        cmd.args([
            "--reuid",
            &uid.to_string(),
            "--regid",
            &gid.to_string(),
            "--clear-groups",
            "--",
        ])
        .arg(self.program(prog));
        self.set_env(&mut cmd);
        cmd.current_dir(&self.scratch).stdin(Stdio::null());
        cmd
    }

    /// Runs a client, its standard output when it succeeds.
    fn query(&self, prog: &str, args: &[&str]) -> Option<String> {
        let o = self
            .command(prog)
            .args(args)
            .stderr(Stdio::null())
            .output()
            .ok()?;
        o.status
            .success()
            .then(|| String::from_utf8_lossy(&o.stdout).into_owned())
    }

    /// The node's state as `sinfo -h -o %T` gives it (`idle`, `mixed`, `allocated`,
    /// `down*`, …), `None` while slurmctld does not answer.
    pub fn node_state(&self) -> Option<String> {
        self.query("sinfo", &["-h", "-o", "%T"])
            .map(|s| s.trim().to_string())
    }

    /// Waits (polling every [`POLL`]) until the node is idle: no job running or
    /// completing. False after `timeout`.
    pub fn wait_idle_for(&self, timeout: Duration) -> bool {
        let t = Instant::now();
        loop {
            if self.node_state().as_deref() == Some("idle") {
                return true;
            }
            if t.elapsed() > timeout {
                return false;
            }
            std::thread::sleep(POLL);
        }
    }

    /// [`Cluster::wait_idle_for`] 60 s; panics with the logs if the node is still busy.
    pub fn wait_idle(&self) {
        if !self.wait_idle_for(Duration::from_secs(60)) {
            panic!(
                "the node is not idle after 60 s (sinfo: {:?})\n{}",
                self.node_state(),
                self.logs()
            );
        }
    }

    /// `sbatch --parsable ARGS` as the running user: the job id. Panics (with sbatch's
    /// error) when the submission is refused.
    pub fn sbatch(&self, args: &[&str]) -> u64 {
        let o = self
            .command("sbatch")
            .arg("--parsable")
            .args(args)
            .output()
            .expect("sbatch");
        assert!(
            o.status.success(),
            "sbatch {args:?} failed: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        parse_job_id(&String::from_utf8_lossy(&o.stdout))
            .unwrap_or_else(|| panic!("sbatch printed no job id: {o:?}"))
    }

    /// The fields of `scontrol show job -o ID` (`JobState`, `Reason`, `ExitCode`,
    /// `UserId`, `StdOut`, …); `None` when slurmctld does not know the job. Values
    /// with spaces are kept whole (a word without `=` continues the previous value).
    pub fn job(&self, id: u64) -> Option<Vec<(String, String)>> {
        let out = self.query("scontrol", &["show", "job", "-o", &id.to_string()])?;
        let line = out.lines().next()?;
        let mut fields: Vec<(String, String)> = Vec::new();
        for word in line.split(' ') {
            match word.split_once('=') {
                Some((k, v))
                    if !k.is_empty()
                        && k.chars().all(|c| c.is_ascii_alphanumeric() || c == ':') =>
                {
                    fields.push((k.to_string(), v.to_string()))
                }
                _ => {
                    if let Some((_, v)) = fields.last_mut() {
                        v.push(' ');
                        v.push_str(word);
                    }
                }
            }
        }
        Some(fields)
    }

    /// One field of [`Cluster::job`].
    pub fn job_field(&self, id: u64, key: &str) -> Option<String> {
        self.job(id)?
            .into_iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
    }

    /// The job's `JobState` (`PENDING`, `RUNNING`, `COMPLETED`, `FAILED`,
    /// `CANCELLED`, …); finished jobs stay known for an hour (`MinJobAge=3600`).
    pub fn job_state(&self, id: u64) -> Option<String> {
        self.job_field(id, "JobState")
    }

    /// Waits (polling every [`POLL`]) until the job has left `PENDING`, `RUNNING`,
    /// `COMPLETING` and the other transient states, and returns its state; panics with
    /// the logs after `timeout`.
    pub fn wait_job(&self, id: u64, timeout: Duration) -> String {
        let t = Instant::now();
        loop {
            let state = self.job_state(id);
            if let Some(s) = &state {
                if is_final(s) {
                    return s.clone();
                }
            }
            if t.elapsed() > timeout {
                panic!(
                    "job {id} still {state:?} after {timeout:?}: {:?}\n{}",
                    self.job(id),
                    self.logs()
                );
            }
            std::thread::sleep(POLL);
        }
    }

    /// The ids of the jobs in the queue (`squeue -h -o %A`: pending, running,
    /// completing, suspended; finished jobs are not listed), of every user.
    pub fn squeue_ids(&self) -> Vec<u64> {
        self.query("squeue", &["-h", "-o", "%A"])
            .map(|s| s.lines().filter_map(parse_job_id).collect())
            .unwrap_or_default()
    }

    /// Cancels every queued job and waits (at most [`KILL_WAIT`] + 10 s) until the
    /// queue is empty.
    pub fn cancel_all(&self) {
        let t = Instant::now();
        loop {
            let ids = self.squeue_ids();
            if ids.is_empty() || t.elapsed() > Duration::from_secs(KILL_WAIT + 10) {
                return;
            }
            let _ = self
                .command("scancel")
                .arg("--quiet")
                .args(ids.iter().map(u64::to_string))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
            std::thread::sleep(POLL);
        }
    }

    /// The pids of the processes this cluster started that still run: the daemons,
    /// `slurmscriptd`, `slurmstepd` (marked by [`MARKER`]), and job processes
    /// (`SLURM_CONF` naming this cluster's configuration).
    pub fn processes(&self) -> Vec<u32> {
        processes_of(self.dir(), &self.conf)
    }
}

/// The pids (not this process's) whose environment holds `MARKER=dir` or
/// `SLURM_CONF=conf`: what a cluster in `dir` left running.
pub fn processes_of(dir: &Path, conf: &Path) -> Vec<u32> {
    let marker = format!("{MARKER}={}", dir.display()).into_bytes();
    let slurm_conf = format!("SLURM_CONF={}", conf.display()).into_bytes();
    let me = std::process::id();
    let Ok(rd) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != me)
        .filter(|pid| {
            fs::read(format!("/proc/{pid}/environ")).is_ok_and(|env| {
                env.split(|&b| b == 0)
                    .any(|v| v == marker.as_slice() || v == slurm_conf.as_slice())
            })
        })
        .collect()
}

/// The fields of `/proc/PID/stat` after `pid (comm)` (comm may hold spaces and
/// parentheses): the state first.
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    Some(rest.split_whitespace().map(str::to_string).collect())
}

/// Whether process `pid` exists and is not a zombie (an exited process its parent has
/// not reaped yet: it runs nothing and holds nothing but its pid).
pub fn running(pid: u32) -> bool {
    stat_fields(pid)
        .is_some_and(|f| !matches!(f.first().map(String::as_str), None | Some("Z" | "X")))
}

/// When process `pid` started (clock ticks after boot): with the pid, a process's
/// identity (pids are reused).
pub fn start_time(pid: u32) -> Option<u64> {
    stat_fields(pid)?.get(19)?.parse().ok()
}

/// Whether a `JobState` is final (the job will not run or change any more).
pub fn is_final(state: &str) -> bool {
    !matches!(
        state,
        "PENDING"
            | "RUNNING"
            | "COMPLETING"
            | "CONFIGURING"
            | "SUSPENDED"
            | "REQUEUED"
            | "REQUEUE_HOLD"
            | "REQUEUE_FED"
            | "RESIZING"
            | "SIGNALING"
            | "STAGE_OUT"
            | "STOPPED"
            | "RESV_DEL_HOLD"
            | "SPECIAL_EXIT"
    )
}

/// A job id at the start of `s` (`sbatch --parsable` prints `ID` or `ID;CLUSTER`).
fn parse_job_id(s: &str) -> Option<u64> {
    s.trim().split(';').next()?.parse().ok()
}

/// Sends `sig` to `pid` through kill(1).
fn signal(pid: u32, sig: &str) {
    let _ = Command::new("kill")
        .args([sig, &pid.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

impl Drop for Cluster {
    /// Cancels every job (waiting until the queue is empty, so slurmd and
    /// slurmstepd kill the jobs' processes the ordinary way), stops the daemons
    /// (SIGTERM, SIGKILL after 5 s), then kills whatever process of the cluster is
    /// still there (`slurmscriptd`, a `slurmstepd`, a job process that escaped) until
    /// none is left, and removes the directory.
    fn drop(&mut self) {
        // Killed and waited for too (if still the same process): one of them may be
        // exiting (its environment unreadable) when the sweep below looks, or have
        // replaced its environment.
        let before: Vec<(u32, u64)> = self
            .processes()
            .into_iter()
            .filter_map(|pid| Some((pid, start_time(pid)?)))
            .collect();
        let alive = self
            .daemons
            .iter_mut()
            .all(|(_, c)| matches!(c.try_wait(), Ok(None)));
        if alive {
            self.cancel_all();
        }
        for (_, child) in self.daemons.iter().rev() {
            signal(child.id(), "-TERM");
        }
        let t = Instant::now();
        for (_, child) in self.daemons.iter_mut().rev() {
            loop {
                match child.try_wait() {
                    Ok(None) if t.elapsed() < Duration::from_secs(5) => {
                        std::thread::sleep(Duration::from_millis(10))
                    }
                    Ok(None) => {
                        let _ = child.kill();
                        let _ = child.wait();
                        break;
                    }
                    _ => break,
                }
            }
        }
        let t = Instant::now();
        let mut killed = before;
        loop {
            killed.extend(
                self.processes()
                    .into_iter()
                    .filter_map(|pid| Some((pid, start_time(pid)?))),
            );
            killed.retain(|&(pid, start)| running(pid) && start_time(pid) == Some(start));
            if killed.is_empty() {
                break;
            }
            if t.elapsed() > Duration::from_secs(10) {
                eprintln!(
                    "warning: processes of the slurm test cluster survive SIGKILL: {killed:?}"
                );
                break;
            }
            for &(pid, _) in &killed {
                signal(pid, "-KILL");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        if let Some(mut guard) = self.guard.take() {
            if let Some(mut stdin) = guard.stdin.take() {
                let _ = std::io::Write::write_all(&mut stdin, b"done\n");
            }
            let _ = guard.wait();
        }
        if let Some(dir) = self.dir.take() {
            super::make_writable(dir.path());
            drop(dir);
        }
    }
}
