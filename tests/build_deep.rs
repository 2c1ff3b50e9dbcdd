//! End-to-end tests of deep directory trees: a builder whose output is 15,000 levels
//! deep (absolute paths far beyond `PATH_MAX`), and leftovers that deep in the build and
//! store directories. rocmx must stop with a clear error, never crash, and nothing it
//! leaves behind may stop later builds, `store gc` or `store verify`.
//!
//! Run against stores in temporary directories (`--store DIR`) with a static busybox as
//! the builder, like `tests/build.rs`; skipped, saying why, when busybox is missing or
//! the kernel refuses user namespaces.

mod common;
use common::fixture::Work;
use common::{busybox, err, out};

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

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
fn fixture() -> Work {
    Work::new(&["cat", "echo", "mkdir", "chmod"])
        .packages(&packages())
        .in_work_dir()
        .removed_deep()
}

impl Work {
    fn builds(&self) -> PathBuf {
        self.root().join("var/rocmx/builds")
    }

    /// `rocmx build --file packages.nix ATTR --no-link --print-out-paths`.
    fn build(&self, attr: &str) -> Output {
        self.build_file(&[attr, "--no-link", "--print-out-paths"])
    }

    /// Builds `plain` and checks its output.
    fn build_plain(&self) {
        let o = self.build("plain");
        assert!(o.status.success(), "plain build failed:\n{}", err(&o));
        let logical = out(&o).trim().to_string();
        let f = self.physical(&logical).join("f");
        assert_eq!(fs::read_to_string(f).unwrap(), "fine\n");
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

/// Whether builds can run here (see [`common::fixture::can_build`]).
fn can_build() -> bool {
    common::fixture::can_build(|| fixture().build("plain"))
}

#[test]
fn a_15000_level_output_fails_with_the_real_cause_and_later_builds_work() {
    if !can_build() {
        return;
    }
    let f = fixture();
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
    let f = fixture();
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
