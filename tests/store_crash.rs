//! Crash safety and concurrency of `rocmx store add`, end to end.
//!
//! - `add_survives_sigkill_at_random_moments`: 60 times, `rocmx store add <tree>` (a tree
//!   of about 3 MB in a few hundred files, different every time) is killed with SIGKILL
//!   after a delay drawn from a seeded PRNG, stratified over 0 … 1.4 × the time a clean
//!   add takes, so that kills land during start-up and hashing, during copying and syncing,
//!   around registration, and after completion. After each kill
//!   `rocmx store verify --check-contents` must exit 0 and report no damage (leftovers of
//!   the killed add — a scratch directory, an unregistered entry — are warnings, never
//!   damage, and never valid), and the next add of the same tree must succeed and print the
//!   path a clean add gives. Every 15 iterations the store is new, so that kills also land
//!   while a store is being created.
//! - `concurrent_adds_of_one_tree_agree`: two (and three) `rocmx store add` of the same
//!   tree started together, into a new store and into an existing one, all succeed and
//!   print the same path; the store verifies clean with exactly that path valid.

use std::collections::{BTreeMap, BTreeSet};
mod common;
use common::fixture::{Work, BIN};
use common::{make_writable, source_path, Rng};

use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use rocmx_store::{LocalStore, StorePath};

const ITERATIONS: usize = 60;
const NEW_STORE_EVERY: usize = 15;
const SEED: u64 = 0x5eed_c4a5_4ad0_0001;

/// The two tests run one at a time, so that the timing of one does not skew the other.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn remove_all(p: &Path) {
    make_writable(p);
    let _ = fs::remove_dir_all(p);
}

/// A tree of about `target` bytes: several directories (some nested, one empty), many
/// small files, a few larger ones, executables, empty files and symlinks.
fn make_tree(dir: &Path, rng: &mut Rng, target: u64) {
    fs::create_dir_all(dir).expect("mkdir tree");
    let mut total = 0u64;
    let mut n = 0usize;
    let ndirs = 6 + rng.below(6) as usize;
    let dirs: Vec<PathBuf> = (0..ndirs)
        .map(|i| {
            let d = if i % 3 == 2 {
                dir.join(format!("d{}", i - 1)).join(format!("nested{i}"))
            } else {
                dir.join(format!("d{i}"))
            };
            fs::create_dir_all(&d).expect("mkdir");
            d
        })
        .collect();
    fs::create_dir_all(dir.join("empty-dir")).expect("mkdir");
    while total < target {
        let d = &dirs[rng.below(dirs.len() as u64) as usize];
        let size = match rng.below(20) {
            0 => 0,
            1 => 100_000 + rng.below(400_000),
            _ => rng.below(12_000),
        };
        let mut data = vec![0u8; size as usize];
        rng.fill(&mut data);
        let f = d.join(format!("file-{n}.dat"));
        fs::write(&f, &data).expect("write");
        if rng.below(8) == 0 {
            fs::set_permissions(&f, fs::Permissions::from_mode(0o755)).expect("chmod");
        }
        if rng.below(25) == 0 {
            symlink(format!("file-{n}.dat"), d.join(format!("link-{n}"))).expect("symlink");
        }
        total += size;
        n += 1;
    }
    symlink("/nonexistent/dangling", dir.join("dangling")).expect("symlink");
}

/// The path a clean add of `src` gives ([`source_path`] named as `src`).
fn expected_path(src: &Path) -> StorePath {
    let name = src.file_name().and_then(|n| n.to_str()).expect("name");
    source_path(src, name)
}

fn rocmx(root: &Path) -> Command {
    let mut c = Command::new(BIN);
    c.env_remove("ROCMX_STORE").arg("--store").arg(root);
    c
}

fn spawn_add(root: &Path, tree: &Path) -> Child {
    rocmx(root)
        .args(["store", "add"])
        .arg(tree)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn rocmx store add")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `rocmx store add <tree>` must succeed and print exactly `want`.
fn add_ok(root: &Path, tree: &Path, want: &StorePath, what: &str) {
    let o = rocmx(root)
        .args(["store", "add"])
        .arg(tree)
        .output()
        .expect("run add");
    assert!(
        o.status.success(),
        "{what}: add failed ({:?}): {}",
        o.status,
        text(&o.stderr)
    );
    assert_eq!(
        text(&o.stdout),
        format!("{want}\n"),
        "{what}: wrong path; stderr: {}",
        text(&o.stderr)
    );
}

/// `rocmx store verify --check-contents` must exit 0 and report no damage.
fn verify_clean(root: &Path, what: &str) -> Output {
    let o = rocmx(root)
        .args(["store", "verify", "--check-contents"])
        .output()
        .expect("run verify");
    let e = text(&o.stderr);
    assert!(
        o.status.success() && !e.contains("error:") && !e.contains("panicked"),
        "{what}: verify --check-contents reports damage ({:?}):\n{e}",
        o.status
    );
    o
}

/// What the store directory shows after a kill.
fn classify(root: &Path, want: &StorePath) -> &'static str {
    let store_dir = root.join("store");
    let Ok(rd) = fs::read_dir(&store_dir) else {
        return "before the store existed";
    };
    let names: Vec<String> = rd
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    let valid = LocalStore::open(root)
        .and_then(|s| s.is_valid(want))
        .unwrap_or(false);
    if valid {
        "after registration"
    } else if names.iter().any(|n| *n == want.base_name()) {
        "between rename and registration"
    } else if names.iter().any(|n| n.starts_with(".tmp-")) {
        "while copying or syncing"
    } else {
        "before copying (start-up, hashing)"
    }
}

#[test]
fn add_survives_sigkill_at_random_moments() {
    let _serial = serial();
    let work = Work::empty();
    let w = work.dir.path();
    let mut rng = Rng(SEED);

    // How long a clean add of such a tree into an existing store takes.
    let calib_root = w.join("calibration-store");
    let mut times = Vec::new();
    for i in 0..4 {
        let tree = w.join(format!("calib-{i}")).join("payload");
        make_tree(&tree, &mut rng, 3 << 20);
        let want = expected_path(&tree);
        let t0 = Instant::now();
        add_ok(&calib_root, &tree, &want, "calibration");
        if i > 0 {
            times.push(t0.elapsed());
        }
        remove_all(tree.parent().expect("parent"));
    }
    times.sort();
    let mut samples = times.clone();
    let mut clean = times[times.len() / 2].max(Duration::from_millis(10));
    remove_all(&calib_root);
    eprintln!("clean add of a ~3 MB tree: {clean:?}");

    let mut outcomes: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut exited_before_kill = 0;
    let mut killed = 0;
    let mut root = PathBuf::new();
    let mut segment_paths: Vec<(StorePath, PathBuf)> = Vec::new();
    for i in 0..ITERATIONS {
        if i % NEW_STORE_EVERY == 0 {
            root = w.join(format!("store-{}", i / NEW_STORE_EVERY));
            for (_, t) in segment_paths.drain(..) {
                remove_all(t.parent().expect("parent"));
            }
        }
        let tree = w.join(format!("tree-{i}")).join("payload");
        let size = (2 << 20) + rng.below(2 << 20);
        make_tree(&tree, &mut rng, size);
        let want = expected_path(&tree);
        let targeted = i % 3 == 2;
        let mut child = spawn_add(&root, &tree);
        let t0 = Instant::now();
        if targeted {
            // Wait for the content to be renamed to its final name, then kill within
            // 0–300 µs: the kill lands while the path is synced and registered.
            let final_entry = root.join("store").join(want.base_name());
            while t0.elapsed() < Duration::from_secs(60) {
                if fs::symlink_metadata(&final_entry).is_ok()
                    || child.try_wait().ok().flatten().is_some()
                {
                    break;
                }
                std::thread::sleep(Duration::from_micros(20));
            }
            std::thread::sleep(Duration::from_micros(rng.below(300)));
        } else {
            // Stratified over 0 … 1.4 × clean, jittered within each stratum.
            let k = (i - i / 3) % 20; // the untargeted iterations, numbered
            std::thread::sleep(clean.mul_f64(1.4 * (k as f64 + rng.unit()) / 20.0));
        }
        let delay = t0.elapsed();
        let done = child.try_wait().expect("try_wait").is_some();
        let _ = child.kill();
        let out = child.wait_with_output().expect("wait");
        let mut full_add = false;
        if done && out.status.success() {
            exited_before_kill += 1;
            assert_eq!(
                text(&out.stdout),
                format!("{want}\n"),
                "iteration {i}: completed add printed a wrong path"
            );
            *outcomes.entry("completed before the kill").or_default() += 1;
        } else {
            assert!(
                !done || out.status.success(),
                "iteration {i}: add failed on its own ({:?}): {}",
                out.status,
                text(&out.stderr)
            );
            killed += 1;
            let c = classify(&root, &want);
            full_add = c != "after registration";
            *outcomes.entry(c).or_default() += 1;
        }

        let what = format!("iteration {i} (killed after {delay:?})");
        verify_clean(&root, &what);
        let t1 = Instant::now();
        add_ok(&root, &tree, &want, &what);
        if full_add && i % NEW_STORE_EVERY != 0 {
            // A complete add into an existing store: refine the estimate of a clean add.
            samples.push(t1.elapsed());
            samples.sort();
            clean = samples[samples.len() / 2];
        }
        segment_paths.push((want, tree));
        // Every path added in this store so far is still valid (verify checked contents).
        let store = LocalStore::open(&root).expect("open");
        for (p, _) in &segment_paths {
            assert!(
                store.is_valid(p).expect("is_valid"),
                "{what}: {p} is no longer valid"
            );
        }
    }
    eprintln!(
        "{ITERATIONS} iterations: {killed} killed mid-add, {exited_before_kill} finished before the kill; \
         where the kills landed: {outcomes:#?}"
    );
    assert!(
        killed >= ITERATIONS / 3,
        "too few kills landed mid-add: {outcomes:?}"
    );
    assert!(
        exited_before_kill >= 1,
        "no add finished before its kill: {outcomes:?}"
    );
    for stage in [
        "while copying or syncing",
        "between rename and registration",
    ] {
        assert!(
            outcomes.contains_key(stage),
            "no kill landed {stage}: {outcomes:?}"
        );
    }

    // Finally, repair removes every leftover and the store verifies without warnings.
    let o = rocmx(&root)
        .args(["store", "verify", "--repair"])
        .output()
        .expect("repair");
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = verify_clean(&root, "after repair");
    assert!(!text(&o.stderr).contains("warning"), "{}", text(&o.stderr));
    let entries: Vec<String> = fs::read_dir(root.join("store"))
        .expect("list")
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    let want: BTreeSet<String> = segment_paths.iter().map(|(p, _)| p.base_name()).collect();
    assert_eq!(entries.into_iter().collect::<BTreeSet<_>>(), want);
}

#[test]
fn concurrent_adds_of_one_tree_agree() {
    let _serial = serial();
    let work = Work::empty();
    let w = work.dir.path();
    let mut rng = Rng(SEED ^ 0xc0c0);
    for round in 0..6 {
        let procs = if round % 3 == 2 { 3 } else { 2 };
        // Rounds 0, 2, 4 start on a store that does not exist yet (both create it).
        let root = w.join(format!("store-{}", round / 2));
        let tree = w.join(format!("tree-{round}")).join("shared-tree");
        make_tree(&tree, &mut rng, 8 << 20);
        let want = expected_path(&tree);
        let children: Vec<Child> = (0..procs).map(|_| spawn_add(&root, &tree)).collect();
        for (k, c) in children.into_iter().enumerate() {
            let o = c.wait_with_output().expect("wait");
            assert!(
                o.status.success(),
                "round {round}, process {k}: add failed ({:?}): {}",
                o.status,
                text(&o.stderr)
            );
            assert_eq!(
                text(&o.stdout),
                format!("{want}\n"),
                "round {round}, process {k}"
            );
        }
        let o = verify_clean(&root, &format!("round {round}"));
        assert!(
            !text(&o.stderr).contains("warning"),
            "round {round}: leftovers: {}",
            text(&o.stderr)
        );
        let store = LocalStore::open(&root).expect("open");
        assert!(store.is_valid(&want).expect("is_valid"));
        let n = store.all_valid().expect("all").len();
        assert_eq!(n, 1 + round % 2, "round {round}: one path per tree");
    }
}
