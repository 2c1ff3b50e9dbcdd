//! Several `rocmx build` processes on one store at once (issue 8).
//!
//! - `four_processes_run_each_builder_once`: four processes started together build one
//!   graph of 19 fixed-output derivations (see `common/concurrent.rs`); every builder
//!   reports to a loopback counter, so runs are counted outside the store: each runs
//!   exactly once, and every process succeeds with the same result.
//! - `four_processes_agree_on_a_nondeterministic_output`: a floating derivation whose
//!   output is random, built by four processes at once, gives one output path in all
//!   of them; the processes that found it being built say they waited for its lock.
//!
//! Both skip, saying why, when busybox is missing or the sandbox cannot run.

mod common;
#[path = "common/concurrent.rs"]
mod concurrent;

use std::time::Duration;

use concurrent::{drv_name, finish, graph, out_path, sandbox_usable, Counter, Fixture};

#[test]
fn four_processes_run_each_builder_once() {
    if !sandbox_usable() {
        return;
    }
    let f = Fixture::new("0.3");
    let counter = Counter::start(Duration::from_secs(180));
    let children: Vec<_> = (0..4)
        .map(|_| f.spawn_build(counter.port, "all", 4))
        .collect();
    let mut outs = Vec::new();
    for c in children {
        let (status, stdout, stderr) = finish(c);
        assert!(status.success(), "a build failed ({status}):\n{stderr}");
        outs.push(out_path(&stdout));
    }
    outs.dedup();
    assert_eq!(outs.len(), 1, "one result: {outs:?}");
    let hits = counter.counts("hit");
    let done = counter.counts("done");
    eprintln!("builder runs per derivation: {hits:?}");
    for (base, _) in graph() {
        let name = drv_name(&base, 0);
        assert_eq!(
            hits.get(&name),
            Some(&1),
            "{name} ran {:?} times",
            hits.get(&name)
        );
        assert_eq!(
            done.get(&name),
            Some(&1),
            "{name} finished {:?} times",
            done.get(&name)
        );
    }
    assert_eq!(hits.values().sum::<usize>(), 19, "{hits:?}");
}

#[test]
fn four_processes_agree_on_a_nondeterministic_output() {
    if !sandbox_usable() {
        return;
    }
    let f = Fixture::new("0");
    let children: Vec<_> = (0..4).map(|_| f.spawn_build(1, "nondet", 1)).collect();
    let mut outs = Vec::new();
    let mut waited = 0;
    for c in children {
        let (status, stdout, stderr) = finish(c);
        assert!(status.success(), "a build failed ({status}):\n{stderr}");
        if stderr.contains("waiting for lock on") {
            waited += 1;
        }
        outs.push(out_path(&stdout));
    }
    eprintln!("outputs: {outs:?}; {waited} process(es) waited for the lock");
    outs.sort();
    outs.dedup();
    assert_eq!(
        outs.len(),
        1,
        "one output path for one derivation: {outs:?}"
    );
    assert!(waited >= 1, "nobody waited for the build lock");
}
