//! End-to-end tests of deep directory trees: a builder whose output is 15,000 levels
//! deep (absolute paths far beyond `PATH_MAX`), and leftovers that deep in the build and
//! store directories. rocmx must stop with a clear error, never crash, and nothing it
//! leaves behind may stop later builds, `store gc` or `store verify`.
//!
//! Run against stores in temporary directories (`--store DIR`) with a static busybox as
//! the builder, like `tests/build.rs`; skipped, saying why, when busybox is missing or
//! the kernel refuses user namespaces.

mod common;
use common::{busybox, err, out};

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

const BIN: &str = env!("CARGO_BIN_EXE_rocmx");

/// Shell code that makes, below the current directory, a chain of `a` directories
/// 15 × 1000 levels deep and a file at the bottom. `mkdir -p` and `cd -P` take relative
/// paths of 1000 components (2000 bytes), so no path the shell passes reaches
/// `PATH_MAX`, while the absolute ones go far past it. With `lock`, every 1000th level
/// is left read-only (0500) once its child exists, the way a hostile builder might.
fn deep_script(lock: bool) -> String {
    format!(
        "p=a; i=1; while [ $i -lt 1000 ]; do p=$p/a; i=$((i+1)); done; \
         j=0; while [ $j -lt 15 ]; do mkdir -p $p; cd -P $p || exit 7; {} j=$((j+1)); done; \
         echo bottom > f",
        if lock { "chmod 500 ..;" } else { "" }
    )
}

/// `deep`: an output 15,000 levels deep; `plain`: an ordinary output.
fn packages() -> String {
    format!(
        r#"
let
  bb = ./bb;
  mk = name: script: derivation {{
    inherit name;
    system = builtins.currentSystem;
    builder = "${{bb}}/bin/sh";
    args = [ "-c" script ];
    PATH = "${{bb}}/bin";
  }};
in {{
  deep = mk "deep" "mkdir $out; cd $out; {}";
  plain = mk "plain" "mkdir $out; echo fine > $out/f";
}}
"#,
        deep_script(true)
    )
}

/// A work directory holding `packages.nix`, `bb/` and a store root; removed (at any
/// depth, whatever the modes) when dropped.
struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().expect("tempdir");
        let bin = dir.path().join("bb/bin");
        fs::create_dir_all(&bin).unwrap();
        fs::copy(busybox().expect("busybox"), bin.join("sh")).unwrap();
        for applet in ["cat", "echo", "mkdir", "chmod"] {
            symlink("sh", bin.join(applet)).unwrap();
        }
        fs::write(dir.path().join("packages.nix"), packages()).unwrap();
        fs::create_dir_all(dir.path().join("work")).unwrap();
        Fixture { dir }
    }

    fn root(&self) -> PathBuf {
        self.dir.path().join("root")
    }

    fn builds(&self) -> PathBuf {
        self.root().join("var/rocmx/builds")
    }

    /// `rocmx --store ROOT <args>`, run in the work directory.
    fn run(&self, args: &[&str]) -> Output {
        Command::new(BIN)
            .env_remove("ROCMX_STORE")
            .current_dir(self.dir.path().join("work"))
            .arg("--store")
            .arg(self.root())
            .args(args)
            .output()
            .expect("run rocmx")
    }

    fn ok(&self, args: &[&str]) -> String {
        let o = self.run(args);
        assert!(
            o.status.success(),
            "rocmx {args:?} failed ({:?}):\nstdout: {}\nstderr: {}",
            o.status,
            out(&o),
            err(&o)
        );
        out(&o)
    }

    /// `rocmx build --file packages.nix ATTR --no-link --print-out-paths`.
    fn build(&self, attr: &str) -> Output {
        let nix = self.dir.path().join("packages.nix");
        self.run(&[
            "build",
            "--file",
            nix.to_str().unwrap(),
            attr,
            "--no-link",
            "--print-out-paths",
        ])
    }

    /// Builds `plain` and checks its output.
    fn build_plain(&self) {
        let o = self.build("plain");
        assert!(o.status.success(), "plain build failed:\n{}", err(&o));
        let logical = out(&o).trim().to_string();
        let base = logical.strip_prefix("/rocmx/store/").expect("logical path");
        let f = self.root().join("store").join(base).join("f");
        assert_eq!(fs::read_to_string(f).unwrap(), "fine\n");
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = rocmx_store::tree::remove_tree(self.dir.path());
    }
}

/// Makes a 15,000-level leftover at `dir` (which must not exist) with busybox.
fn make_deep_leftover(dir: &Path) {
    fs::create_dir(dir).unwrap();
    let o = Command::new(busybox().expect("busybox"))
        .args(["sh", "-c", &deep_script(true)])
        .current_dir(dir)
        .output()
        .expect("busybox");
    assert!(o.status.success(), "making the leftover: {}", err(&o));
}

/// A pid that belongs to no process now (a child that has exited and been reaped).
fn dead_pid() -> u32 {
    let mut c = Command::new("/bin/true").spawn().expect("spawn");
    let pid = c.id();
    c.wait().expect("wait");
    pid
}

/// Whether builds can run here (see `tests/build.rs`).
fn can_build() -> bool {
    static OK: OnceLock<bool> = OnceLock::new();
    *OK.get_or_init(|| {
        if busybox().is_none() {
            eprintln!("SKIP: no busybox (install busybox-static)");
            return false;
        }
        let f = Fixture::new();
        let o = f.build("plain");
        if o.status.success() {
            return true;
        }
        let e = err(&o);
        if e.to_lowercase().contains("namespace") {
            eprintln!("SKIP: the sandbox cannot run here:\n{e}");
            return false;
        }
        panic!("a trivial build failed:\n{e}");
    })
}

#[test]
fn a_15000_level_output_fails_with_the_real_cause_and_later_builds_work() {
    if !can_build() {
        return;
    }
    let f = Fixture::new();
    let o = f.build("deep");
    let e = err(&o);
    assert!(
        !o.status.success() && o.status.code().is_some(),
        "rocmx must fail with an exit code, not a signal ({:?}):\n{e}",
        o.status
    );
    assert!(
        e.contains("output 'out' of '") && e.contains("is nested deeper than 2048 levels"),
        "the error must name the output and the depth limit:\n{e}"
    );
    assert!(!e.contains("sandbox setup failed"), "{e}");
    assert!(!e.contains("overflow"), "{e}");
    // Nothing of the failed build stays behind.
    let left: Vec<_> = fs::read_dir(f.builds())
        .map(|rd| rd.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "left in the build directory: {left:?}");

    // The store still works.
    f.build_plain();
    f.ok(&["store", "gc"]);
    f.ok(&["store", "verify"]);
    f.build_plain();
}

#[test]
fn deep_leftovers_of_crashed_runs_never_block_builds_gc_or_verify() {
    if !can_build() {
        return;
    }
    let f = Fixture::new();
    f.build_plain();
    // A crashed run's build directory, its output 15,000 levels deep and read-only.
    let stale = f.builds().join(format!("{}-0", dead_pid()));
    fs::create_dir_all(&stale).unwrap();
    make_deep_leftover(&stale.join("out0"));
    // A crashed add's scratch directory in the store, as deep.
    let scratch = f.root().join("store/.tmp-1-0-000000000000");
    make_deep_leftover(&scratch);

    // The next build removes the stale build directory and succeeds.
    let nix = f.dir.path().join("packages.nix");
    let o = f.run(&[
        "build",
        "--file",
        nix.to_str().unwrap(),
        "plain",
        "--no-link",
        "--rebuild",
    ]);
    assert!(o.status.success(), "build after the leftover:\n{}", err(&o));
    assert!(
        fs::symlink_metadata(&stale).is_err(),
        "the stale build directory stays"
    );

    // verify reports the scratch leftover (a leftover is no damage: either exit code
    // is fine, a signal is not); repair and gc remove it.
    let o = f.run(&["store", "verify"]);
    assert!(o.status.code().is_some(), "{:?}:\n{}", o.status, err(&o));
    f.ok(&["store", "verify", "--repair"]);
    assert!(
        fs::symlink_metadata(&scratch).is_err(),
        "verify --repair left it"
    );
    make_deep_leftover(&scratch);
    f.ok(&["store", "gc"]);
    assert!(fs::symlink_metadata(&scratch).is_err(), "gc left it");
    f.build_plain();
}
