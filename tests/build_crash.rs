//! Concurrent builds, garbage collection and crashes on one store (issue 8).
//!
//! `builds_gc_and_sigkills_leave_a_sound_store`: for about 25 seconds, rounds of four
//! `rocmx build` processes (`-j 2`) start together on a new graph of 19 fixed-output
//! derivations each (see `common/concurrent.rs`: every builder run is counted by a
//! loopback counter), while a loop runs `rocmx store gc` and, at moments drawn from a
//! seeded PRNG, running build processes are killed with SIGKILL (and replaced, so that
//! each round ends with four successful builds). The graph's outputs are rooted in
//! advance (`gcroots/` symlinks to their fixed paths), so the collector never removes a
//! finished one: a builder runs again only because the process holding its build lock
//! was killed. So, per round: every derivation ran at least once, and the runs beyond
//! one are at most the kills times the builds a process runs at once (2) — one build
//! per surviving build lock. Afterwards `rocmx store verify --check-contents` reports
//! no damage and a final build of every round's graph succeeds without running a
//! builder. The counts observed are printed (see them with `--nocapture`).
//!
//! Skips, saying why, when busybox is missing or the sandbox cannot run.

mod common;
#[path = "common/concurrent.rs"]
mod concurrent;

use std::os::unix::fs::symlink;
use std::process::Child;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::Rng;
use concurrent::{drv_name, finish, fixed_out, graph, sandbox_usable, Counter, Fixture};

const SEED: u64 = 0x0c4a_5b01_1d5e_ed08;
/// Rounds start until this much time has passed.
const DURATION: Duration = Duration::from_secs(25);
/// Builds one process runs at once.
const JOBS: usize = 2;
const PROCESSES: usize = 4;

/// What one round saw.
struct Round {
    kills: usize,
    runs: usize,
    extra: usize,
}

#[test]
fn builds_gc_and_sigkills_leave_a_sound_store() {
    if !sandbox_usable() {
        return;
    }
    let f = Fixture::new("0.2");
    let counter = Counter::start(Duration::from_secs(150));
    let port = counter.port;
    let gcroots = f.root().join("var/rocmx/gcroots");
    std::fs::create_dir_all(&gcroots).unwrap();
    let mut rng = Rng(SEED);

    // The collector, in a loop until told to stop.
    let stop = Arc::new(AtomicBool::new(false));
    let gc_runs = Arc::new(AtomicUsize::new(0));
    let gc = {
        let (stop, gc_runs) = (stop.clone(), gc_runs.clone());
        let cmd_root = f.root();
        let work = f.dir.path().join("work");
        std::thread::spawn(move || {
            let mut failures = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let o = std::process::Command::new(common::fixture::BIN)
                    .env_remove("ROCMX_STORE")
                    .current_dir(&work)
                    .arg("--store")
                    .arg(&cmd_root)
                    .args(["store", "gc"])
                    .output()
                    .expect("run gc");
                if !o.status.success() {
                    failures.push(String::from_utf8_lossy(&o.stderr).into_owned());
                }
                gc_runs.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(150));
            }
            failures
        })
    };

    let start = Instant::now();
    let mut rounds: Vec<Round> = Vec::new();
    while start.elapsed() < DURATION {
        let round = rounds.len();
        for (base, _) in graph() {
            symlink(
                fixed_out(&base, round),
                gcroots.join(format!("test-{}", drv_name(&base, round))),
            )
            .unwrap();
        }
        // Kills of this round: up to three, while it runs (a round takes 1–2 s).
        let mut kill_at: Vec<Duration> = (0..rng.below(4))
            .map(|_| Duration::from_millis(100 + rng.below(1200)))
            .collect();
        kill_at.sort();
        let round_start = Instant::now();
        let mut procs: Vec<Child> = (0..PROCESSES)
            .map(|_| f.spawn_round(port, round, "all", JOBS))
            .collect();
        let mut done = 0;
        let mut kills = 0;
        let limit = Instant::now() + Duration::from_secs(60);
        while done < PROCESSES {
            assert!(Instant::now() < limit, "round {round} does not end");
            if kill_at.first().is_some_and(|t| round_start.elapsed() >= *t) {
                kill_at.remove(0);
                let running: Vec<usize> = (0..procs.len())
                    .filter(|&i| matches!(procs[i].try_wait(), Ok(None)))
                    .collect();
                if !running.is_empty() {
                    let i = running[rng.below(running.len() as u64) as usize];
                    let _ = procs[i].kill();
                    let _ = procs[i].wait();
                    kills += 1;
                    // Its replacement.
                    procs[i] = f.spawn_round(port, round, "all", JOBS);
                }
            }
            let mut i = 0;
            while i < procs.len() {
                if let Ok(Some(_)) = procs[i].try_wait() {
                    let (status, _, stderr) = finish(procs.remove(i));
                    assert!(
                        status.success(),
                        "a build of round {round} failed ({status}):\n{stderr}"
                    );
                    done += 1;
                } else {
                    i += 1;
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let hits = counter.counts("hit");
        let mut runs = 0;
        let mut extra = 0;
        for (base, _) in graph() {
            let name = drv_name(&base, round);
            let n = hits.get(&name).copied().unwrap_or(0);
            assert!(n >= 1, "{name} never ran");
            assert!(
                n <= 1 + kills,
                "{name} ran {n} times with {kills} kill(s) in round {round}"
            );
            runs += n;
            extra += n - 1;
        }
        assert!(
            extra <= kills * JOBS,
            "round {round}: {extra} extra runs with {kills} kill(s): {hits:?}"
        );
        eprintln!("round {round}: {kills} kill(s), {runs} builder runs for 19 derivations ({extra} extra)");
        rounds.push(Round { kills, runs, extra });
    }
    stop.store(true, Ordering::Relaxed);
    let gc_failures = gc.join().expect("gc thread");
    assert!(gc_failures.is_empty(), "gc failed: {gc_failures:?}");

    let o = f.run(&["store", "verify", "--check-contents"]);
    let verify_err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "verify found damage:\n{verify_err}");

    // A final build of every round's graph: all there, nothing runs.
    let before: usize = counter.counts("hit").values().sum();
    for round in 0..rounds.len() {
        let (status, _, stderr) = finish(f.spawn_round(port, round, "all", JOBS));
        assert!(status.success(), "final build of round {round}:\n{stderr}");
    }
    let after: usize = counter.counts("hit").values().sum();
    assert_eq!(before, after, "the final builds ran builders");

    let kills: usize = rounds.iter().map(|r| r.kills).sum();
    let runs: usize = rounds.iter().map(|r| r.runs).sum();
    let extra: usize = rounds.iter().map(|r| r.extra).sum();
    eprintln!(
        "{} rounds in {:.1}s: {} derivations, {runs} builder runs ({extra} extra), \
         {kills} SIGKILLs, {} gc runs; verify: {}",
        rounds.len(),
        start.elapsed().as_secs_f64(),
        rounds.len() * 19,
        gc_runs.load(Ordering::Relaxed),
        verify_err.lines().last().unwrap_or("clean")
    );
}
