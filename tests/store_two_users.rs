//! Two users on one store (issue 8): root and uid 65534.
//!
//! - `root_on_a_users_store_leaves_it_usable`: uid 65534 builds into its own store;
//!   root builds into it too (and is warned that the store is someone else's); then
//!   65534 builds again, which needs the lock files, state directories and database root
//!   used: they must still belong to 65534.
//! - `user_verifies_a_root_store_read_only`: root builds into a store it owns; uid
//!   65534, who may read it but not write it, runs `rocmx store verify`, which takes the
//!   GC lock shared on a file it cannot write.
//!
//! Run as root, switching to 65534 with `setpriv --reuid 65534 --regid 65534
//! --clear-groups` as `tests/build_rootless.rs` does; they skip, saying why, when not
//! root, or when setpriv, busybox or the sandbox's namespaces are missing.

mod common;
use common::fixture::{busybox_or_say, euid, setpriv, Work, NOBODY};
use common::{err, out};

use std::fs;
use std::os::unix::fs::{lchown, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::Output;

const PACKAGES: &str = r#"
{ tag ? "one" }:
let
  bb = ./bb;
  mk = name: script: derivation {
    inherit name;
    system = builtins.currentSystem;
    builder = "${bb}/bin/sh";
    args = [ "-c" script ];
    PATH = "${bb}/bin";
  };
in {
  a = mk "first-${tag}" "echo A > $out";
  b = mk "second-${tag}" "echo B > $out";
  c = mk "third-${tag}" "echo C > $out";
  d = mk "tree-${tag}" "mkdir $out; mkdir $out/sub; echo D > $out/sub/f";
}
"#;

/// A directory in /tmp (0755, so 65534 reaches what is inside; [`Work::in_tmp`]) holding
/// the rocmx binary, busybox as `bb/`, the package set, work directories and the store
/// root.
struct Fixture {
    w: Work,
    setpriv: PathBuf,
}

impl Fixture {
    fn new() -> Option<Fixture> {
        if euid() != Some(0) {
            eprintln!("skipping: not root, so cannot switch to uid {NOBODY}");
            return None;
        }
        let setpriv = setpriv()?;
        let busybox = busybox_or_say()?;
        if let Err(e) = rocmx_builder::sandbox::check_user_namespaces() {
            eprintln!("skipping: the sandbox cannot run here:\n{e}");
            return None;
        }
        let w = Work::in_tmp("rocmx-two-users", 0o755, &busybox, &["echo"]).packages(PACKAGES);
        for sub in ["work", "home", "tmp"] {
            lchown(w.path(sub), Some(NOBODY), Some(NOBODY)).unwrap();
        }
        Some(Fixture { w, setpriv })
    }

    fn root(&self) -> PathBuf {
        self.w.root()
    }

    /// `rocmx --store ROOT ARGS…`, as uid 65534 when `nobody`, else as root.
    fn run(&self, nobody: bool, args: &[&str]) -> Output {
        let mut c = if nobody {
            self.w.command_as_nobody(&self.setpriv, args)
        } else {
            self.w.command(args)
        };
        c.output().expect("run rocmx")
    }

    fn ok(&self, nobody: bool, args: &[&str]) -> Output {
        let o = self.run(nobody, args);
        let who = if nobody { "uid 65534" } else { "root" };
        assert!(
            o.status.success(),
            "rocmx {args:?} as {who} failed ({:?}):\nstdout: {}\nstderr: {}",
            o.status,
            out(&o),
            err(&o)
        );
        o
    }

    fn build(&self, nobody: bool, attr: &str) -> Output {
        let nix = self.w.nix();
        self.ok(
            nobody,
            &["build", "--file", nix.to_str().unwrap(), "--no-link", attr],
        )
    }
}

/// The shared state under `<root>/var/rocmx` that is not owned by `uid` (see the
/// exceptions below).
fn not_owned_by(root: &Path, uid: u32) -> Vec<(PathBuf, u32, u32)> {
    let state = root.join("var/rocmx");
    let mut bad = Vec::new();
    let mut stack = vec![state.clone()];
    while let Some(p) = stack.pop() {
        let Ok(m) = fs::symlink_metadata(&p) else {
            continue;
        };
        let rel = p.strip_prefix(&state).unwrap_or(&p).to_path_buf();
        // Build logs and root's temporary roots are root's own; `build-ids.lock`
        // (leases of the host ids builds run as) is used by root only.
        let skip = rel.starts_with("temproots") && rel != Path::new("temproots")
            || rel.starts_with("log") && rel != Path::new("log")
            || rel == Path::new("build-ids.lock");
        if m.uid() != uid && !skip {
            bad.push((rel, m.uid(), m.mode() & 0o7777));
        }
        if m.is_dir() {
            for e in fs::read_dir(&p).unwrap().flatten() {
                stack.push(e.path());
            }
        }
    }
    bad
}

#[test]
fn root_on_a_users_store_leaves_it_usable() {
    let Some(f) = Fixture::new() else { return };
    fs::create_dir(f.root()).unwrap();
    lchown(f.root(), Some(NOBODY), Some(NOBODY)).unwrap();
    f.build(true, "a");
    let warned = err(&f.build(false, "b"));
    // The owner collects what root built: the path locks root took are needed again.
    f.ok(true, &["store", "gc"]);
    f.build(false, "b");
    // Root also collects garbage and verifies: more shared files it might create.
    f.ok(false, &["store", "gc"]);
    f.ok(false, &["store", "verify"]);
    let bad = not_owned_by(&f.root(), NOBODY);
    f.build(true, "c");
    f.ok(true, &["store", "gc"]);
    f.ok(true, &["store", "verify"]);
    // A directory output root built (as a leased build user) belongs to the store's
    // owner, who can therefore collect it.
    let nix = f.w.nix();
    let o = f.ok(
        false,
        &[
            "build",
            "--file",
            nix.to_str().unwrap(),
            "--no-link",
            "--print-out-paths",
            "d",
        ],
    );
    let logical = out(&o).trim().to_string();
    let phys = f.root().join(logical.trim_start_matches("/rocmx/"));
    for p in [phys.clone(), phys.join("sub"), phys.join("sub/f")] {
        let m = fs::symlink_metadata(&p).unwrap();
        assert_eq!((m.uid(), m.gid()), (NOBODY, NOBODY), "{}", p.display());
    }
    f.ok(true, &["store", "gc"]);
    assert!(!phys.exists(), "65534's gc left root's build of a tree");
    assert!(bad.is_empty(), "state root left behind: {bad:?}");
    assert!(
        warned.contains("belongs to uid 65534"),
        "no warning for root on 65534's store:\n{warned}"
    );
}

#[test]
fn user_verifies_a_root_store_read_only() {
    let Some(f) = Fixture::new() else { return };
    f.build(false, "a");
    // Every process has ended: no journal files are left for the reader to open.
    let o = f.ok(true, &["store", "verify"]);
    assert!(!err(&o).contains("error"), "{}", err(&o));
    assert_eq!(
        fs::metadata(f.root().join("var/rocmx/gc.lock"))
            .unwrap()
            .uid(),
        0,
        "the store stays root's"
    );
}
