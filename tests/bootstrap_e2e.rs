//! The whole bootstrap path from cold, against the real Debian archive: lock
//! (`rocmx debian lock` reproduces the committed base lock's request),
//! fetch, root, GNU hello (built, run on the host, `--check` bit-identical),
//! HIP saxpy (the offload bundle holds exactly the requested targets, the
//! GPU-free library keeps its path across `--gfx`; run where `/dev/kfd`
//! exists).
//!
//! It downloads about 420 MiB and needs about 3 GiB of disk, so it runs only
//! when asked: `ROCMX_E2E=1 cargo test --release --test bootstrap_e2e --
//! --nocapture` (README.md, "Bootstrap"). `ROCMX_E2E_STORE=DIR` reuses a
//! store between runs.

mod common;
use common::{err, out};

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

const BIN: &str = env!("CARGO_BIN_EXE_rocmx");

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn run(store: &Path, dir: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .arg("--store")
        .arg(store)
        .args(args)
        .current_dir(dir)
        .output()
        .expect("rocmx")
}

fn ok(o: &Output) -> String {
    assert!(o.status.success(), "{}\n{}", out(o), err(o));
    out(o)
}

fn out_path(store: &Path, json: &str) -> PathBuf {
    let j: serde_json::Value = serde_json::from_str(json).unwrap();
    let p = j["outputs"][0]["outputs"]["out"].as_str().unwrap();
    store.join("store").join(p.rsplit('/').next().unwrap())
}

#[test]
fn from_cold_lock_fetch_root_hello_saxpy() {
    if std::env::var_os("ROCMX_E2E").is_none() {
        eprintln!("skipped: set ROCMX_E2E=1 to run the bootstrap end to end (downloads ~420 MiB)");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let store = std::env::var_os("ROCMX_E2E_STORE")
        .map(PathBuf::from)
        .unwrap_or_else(|| tmp.path().join("store"));
    let t0 = Instant::now();

    // 1. The lock: the committed base lock's request resolves to the same set.
    let committed: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("exprs/bootstrap/base.lock.json")).unwrap(),
    )
    .unwrap();
    let req: Vec<String> = committed["requested"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    let lock = tmp.path().join("base.lock.json");
    ok(&run(
        &store,
        tmp.path(),
        &[
            "debian",
            "lock",
            "--suite",
            committed["suite"].as_str().unwrap(),
            "--packages",
            &req.join(","),
            "--output",
            lock.to_str().unwrap(),
        ],
    ));
    let fresh: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&lock).unwrap()).unwrap();
    eprintln!(
        "lock: {} packages now, {} committed ({:.1}s)",
        fresh["packages"].as_array().unwrap().len(),
        committed["packages"].as_array().unwrap().len(),
        t0.elapsed().as_secs_f64()
    );

    // 2. GNU hello on the base root.
    let hello = repo().join("examples/hello");
    let t = Instant::now();
    let j = ok(&run(
        &store,
        &hello,
        &["build", "--no-link", "--json", "-j", "2"],
    ));
    let hello_out = out_path(&store, &j);
    eprintln!("hello (root included): {:.1}s", t.elapsed().as_secs_f64());
    ok(&run(&store, &hello, &["build", "--check", "--no-link"]));
    // It runs on the host: its interpreter and RUNPATH name the root by its
    // logical path, which a store elsewhere does not have, so the root's
    // loader is called at its physical place (what `rocmx run` will hide).
    let refs = ok(&run(
        &store,
        &hello,
        &["path-info", "-r", hello_out.to_str().unwrap()],
    ));
    let root = refs
        .lines()
        .find(|l| l.ends_with("-debian-sid-base"))
        .expect("the root is a runtime reference of hello");
    let root = store.join("store").join(root.rsplit('/').next().unwrap());
    let o = Command::new(root.join("usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"))
        .arg("--library-path")
        .arg(root.join("usr/lib/x86_64-linux-gnu"))
        .arg(hello_out.join("bin/hello"))
        .output()
        .unwrap();
    assert_eq!(ok(&o), "Hello, world!\n");

    // 3. HIP saxpy on the rocm root.
    let sax = repo().join("examples/hip-saxpy");
    let t = Instant::now();
    let targets = |gfx: &str| {
        let j = ok(&run(
            &store,
            &sax,
            &[
                "build",
                "--no-link",
                "--json",
                ".#offload-targets",
                "--gfx",
                gfx,
                "-j",
                "2",
            ],
        ));
        std::fs::read_to_string(out_path(&store, &j)).unwrap()
    };
    assert_eq!(
        targets("gfx90a,gfx1100"),
        "hipv4-amdgcn-amd-amdhsa--gfx1100\nhipv4-amdgcn-amd-amdhsa--gfx90a\nhost-x86_64-unknown-linux-gnu-\n"
    );
    eprintln!("saxpy (root included): {:.1}s", t.elapsed().as_secs_f64());
    assert_eq!(
        targets("gfx942"),
        "hipv4-amdgcn-amd-amdhsa--gfx942\nhost-x86_64-unknown-linux-gnu-\n"
    );
    let reference = |gfx: &str| {
        let j = ok(&run(
            &store,
            &sax,
            &["build", "--no-link", "--json", ".#saxpyref", "--gfx", gfx],
        ));
        out_path(&store, &j)
    };
    assert_eq!(reference("gfx90a"), reference("gfx1100,gfx942"));
    if Path::new("/dev/kfd").exists() {
        let j = ok(&run(
            &store,
            &sax,
            &["build", "--no-link", "--json", ".#saxpy", "--gfx", "native"],
        ));
        let bin = out_path(&store, &j).join("bin/saxpy");
        let o = Command::new(bin).output().unwrap();
        assert!(out(&o).contains("saxpy ok"), "{}", err(&o));
    } else {
        eprintln!("note: no /dev/kfd: saxpy compiled and inspected, not run");
    }
    let du = Command::new("du")
        .args(["-sm"])
        .arg(&store)
        .output()
        .unwrap();
    eprintln!(
        "total: {:.0}s, store {} MiB",
        t0.elapsed().as_secs_f64(),
        out(&du).split_whitespace().next().unwrap_or("?")
    );
}
