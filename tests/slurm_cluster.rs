//! The private Slurm cluster of `tests/common/slurm.rs` works: a batch job runs and
//! writes its output file, its state is read back, a dependent job of a failing parent
//! is cancelled, a held job can be cancelled, an unprivileged user can submit, and
//! dropping the cluster leaves no process behind.
//!
//! Each test starts its own cluster (about a second); they skip, saying why, when Slurm
//! or munge is not installed, and fail then under CI (`.ci/run` installs them).

mod common;
use common::fixture::{euid, processes_with, setpriv, NOBODY};
use common::slurm::{processes_of, running, Cluster};

use std::fs;
use std::time::{Duration, Instant};

/// How long a job of these tests may take from submission to its end (measured: under
/// 1 s for a job that starts at once; the scheduler runs every second).
const JOB: Duration = Duration::from_secs(30);

#[test]
fn a_batch_job_runs_and_writes_its_output() {
    let Some(c) = Cluster::start() else { return };
    let out = c.scratch().join("hello.out");
    let t = Instant::now();
    let id = c.sbatch(&[
        "--job-name=hello",
        "--output",
        out.to_str().unwrap(),
        "--wrap",
        "echo hello from job $SLURM_JOB_ID on $SLURM_JOB_PARTITION; id -u",
    ]);
    assert!(c.squeue_ids().contains(&id) || c.job_state(id).is_some());
    assert_eq!(c.wait_job(id, JOB), "COMPLETED", "{:?}", c.job(id));
    eprintln!(
        "a one-line job took {:?} from submission to COMPLETED",
        t.elapsed()
    );
    assert_eq!(c.job_field(id, "ExitCode").as_deref(), Some("0:0"));
    assert_eq!(
        fs::read_to_string(&out).unwrap(),
        format!(
            "hello from job {id} on {}\n{}\n",
            c.partition(),
            euid().unwrap()
        )
    );
    // Finished jobs leave the queue but stay known (MinJobAge).
    assert!(!c.squeue_ids().contains(&id));
    assert_eq!(c.job_state(id).as_deref(), Some("COMPLETED"));
    assert_eq!(c.job_state(999_999), None);
    // srun works too, and the node goes back to idle.
    let o = c.command("srun").arg("true").output().unwrap();
    assert!(o.status.success(), "{}", common::err(&o));
    c.wait_idle();
}

#[test]
fn a_child_of_a_failing_parent_is_cancelled() {
    let Some(c) = Cluster::start() else { return };
    // Held until the child is queued, so the child is seen waiting on it.
    let parent = c.sbatch(&["--hold", "--output=/dev/null", "--wrap", "exit 3"]);
    let dependency = format!("--dependency=afterok:{parent}");
    let child = c.sbatch(&[
        &dependency,
        "--kill-on-invalid-dep=yes",
        "--output=/dev/null",
        "--wrap",
        "true",
    ]);
    assert_eq!(c.job_field(child, "Reason").as_deref(), Some("Dependency"));
    let o = c
        .command("scontrol")
        .args(["release", &parent.to_string()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", common::err(&o));
    let t = Instant::now();
    assert_eq!(c.wait_job(parent, JOB), "FAILED");
    assert_eq!(c.job_field(parent, "ExitCode").as_deref(), Some("3:0"));
    assert_eq!(c.wait_job(child, JOB), "CANCELLED");
    eprintln!(
        "the child was cancelled {:?} after its parent's release",
        t.elapsed()
    );
    assert_eq!(
        c.job_field(child, "Reason").as_deref(),
        Some("DependencyNeverSatisfied")
    );
    // A child submitted once its parent has failed is accepted, and cancelled too.
    let late = c.sbatch(&[
        &dependency,
        "--kill-on-invalid-dep=yes",
        "--output=/dev/null",
        "--wrap",
        "true",
    ]);
    let t = Instant::now();
    assert_eq!(c.wait_job(late, JOB), "CANCELLED");
    eprintln!(
        "a late child was cancelled {:?} after its submission",
        t.elapsed()
    );
    assert_eq!(
        c.job_field(late, "Reason").as_deref(),
        Some("DependencyNeverSatisfied")
    );
}

#[test]
fn a_held_job_is_cancelled() {
    let Some(c) = Cluster::start() else { return };
    let id = c.sbatch(&["--hold", "--output=/dev/null", "--wrap", "true"]);
    assert_eq!(c.job_state(id).as_deref(), Some("PENDING"));
    assert_eq!(c.job_field(id, "Reason").as_deref(), Some("JobHeldUser"));
    assert_eq!(c.squeue_ids(), vec![id]);
    let o = c.command("scancel").arg(id.to_string()).output().unwrap();
    assert!(o.status.success(), "{}", common::err(&o));
    assert_eq!(c.wait_job(id, JOB), "CANCELLED");
    assert!(c.squeue_ids().is_empty());
}

#[test]
fn an_unprivileged_user_submits_and_the_job_runs_as_that_user() {
    if euid() != Some(0) {
        eprintln!("SKIP: not root (cannot switch users)");
        return;
    }
    let Some(setpriv) = setpriv() else { return };
    let Some(c) = Cluster::start() else { return };
    // Whether that user may make user namespaces here at all: then it may in a job.
    let userns = std::process::Command::new(&setpriv)
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .args(["unshare", "--user", "--map-root-user", "true"])
        .status()
        .is_ok_and(|s| s.success());
    let out = c.scratch().join("nobody.out");
    let o = c
        .command_as(NOBODY, NOBODY, "sbatch")
        .args(["--parsable", "--output", out.to_str().unwrap(), "--wrap"])
        .arg("id -u; id -g; unshare --user --map-root-user id -u || echo no-userns")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", common::err(&o));
    let id: u64 = common::out(&o).trim().parse().unwrap();
    assert_eq!(c.wait_job(id, JOB), "COMPLETED", "{:?}", c.job(id));
    assert_eq!(
        c.job_field(id, "UserId").as_deref(),
        Some(format!("nobody({NOBODY})").as_str())
    );
    let text = fs::read_to_string(&out).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[..2], [NOBODY.to_string(), NOBODY.to_string()]);
    if userns {
        assert_eq!(lines[2], "0", "no user namespace in a job: {text}");
    } else {
        eprintln!("note: uid {NOBODY} cannot make user namespaces on this machine");
    }
    // The output file belongs to that user.
    use std::os::unix::fs::MetadataExt;
    assert_eq!(fs::metadata(&out).unwrap().uid(), NOBODY);
    // And that user can cancel its own held job.
    let o = c
        .command_as(NOBODY, NOBODY, "sbatch")
        .args(["--parsable", "--hold", "--output=/dev/null", "--wrap=true"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", common::err(&o));
    let held: u64 = common::out(&o).trim().parse().unwrap();
    let o = c
        .command_as(NOBODY, NOBODY, "scancel")
        .arg(held.to_string())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", common::err(&o));
    assert_eq!(c.wait_job(held, JOB), "CANCELLED");
}

#[test]
fn dropping_the_cluster_leaves_no_process() {
    let Some(c) = Cluster::start() else { return };
    // A running job that ignores SIGTERM, a job waiting for resources, a held job.
    let marker = format!("sleep 300.{}", std::process::id());
    let script = format!("trap '' TERM; {marker} & wait; {marker}");
    let busy = c.sbatch(&["--output=/dev/null", "--wrap", &script]);
    let cpus = c.cpus().to_string();
    let waiting = c.sbatch(&["--output=/dev/null", "-c", &cpus, "--wrap", &script]);
    let held = c.sbatch(&["--hold", "--output=/dev/null", "--wrap", "true"]);
    let t = Instant::now();
    while processes_with(&marker).is_empty() {
        assert!(t.elapsed() < JOB, "{:?}\n{}", c.job(busy), c.logs());
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(c.job_state(busy).as_deref(), Some("RUNNING"));
    assert_eq!(c.job_state(waiting).as_deref(), Some("PENDING"));
    assert_eq!(c.job_state(held).as_deref(), Some("PENDING"));
    let (dir, conf) = (c.dir().to_path_buf(), c.conf().to_path_buf());
    let pids = c.processes();
    assert!(pids.len() >= 5, "daemons, slurmstepd and the job: {pids:?}");
    let t = Instant::now();
    drop(c);
    eprintln!("the cluster was stopped in {:?}", t.elapsed());
    assert_eq!(processes_of(&dir, &conf), Vec::<u32>::new());
    assert_eq!(processes_with(&marker), Vec::<String>::new());
    for pid in pids {
        assert!(!running(pid), "process {pid} survived");
    }
    assert!(!dir.exists());
}
