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
use common::{err, out};

use std::fs;
use std::os::unix::fs::{lchown, symlink, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_rocmx");
const NOBODY: u32 = 65534;

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

fn find(candidates: &[&str]) -> Option<PathBuf> {
    candidates.iter().map(PathBuf::from).find(|p| p.exists())
}

/// A directory in /tmp (0755, so 65534 reaches what is inside) holding the rocmx binary,
/// busybox as `bb/`, the package set, work directories and the store root.
struct Fixture {
    dir: tempfile::TempDir,
    setpriv: PathBuf,
    exe: PathBuf,
}

impl Fixture {
    fn new() -> Option<Fixture> {
        if fs::metadata("/proc/self").map(|m| m.uid()).ok() != Some(0) {
            eprintln!("skipping: not root, so cannot switch to uid {NOBODY}");
            return None;
        }
        let Some(setpriv) = find(&["/usr/bin/setpriv", "/bin/setpriv", "/usr/sbin/setpriv"]) else {
            eprintln!("skipping: setpriv is missing (install util-linux)");
            return None;
        };
        let Some(busybox) = find(&["/usr/bin/busybox", "/bin/busybox"]) else {
            eprintln!("skipping: busybox is missing (install busybox-static)");
            return None;
        };
        if let Err(e) = rocmx_builder::sandbox::check_user_namespaces() {
            eprintln!("skipping: the sandbox cannot run here:\n{e}");
            return None;
        }
        let dir = tempfile::Builder::new()
            .prefix("rocmx-two-users")
            .tempdir_in("/tmp")
            .expect("tempdir in /tmp");
        let d = dir.path();
        fs::set_permissions(d, fs::Permissions::from_mode(0o755)).unwrap();
        let bin = d.join("bb/bin");
        fs::create_dir_all(&bin).unwrap();
        fs::copy(&busybox, bin.join("sh")).unwrap();
        symlink("sh", bin.join("echo")).unwrap();
        fs::write(d.join("packages.nix"), PACKAGES).unwrap();
        for sub in ["work", "home", "tmp"] {
            fs::create_dir(d.join(sub)).unwrap();
            lchown(d.join(sub), Some(NOBODY), Some(NOBODY)).unwrap();
        }
        let exe = d.join("rocmx");
        fs::copy(BIN, &exe).unwrap();
        fs::set_permissions(&exe, fs::Permissions::from_mode(0o755)).unwrap();
        Some(Fixture { dir, setpriv, exe })
    }

    fn root(&self) -> PathBuf {
        self.dir.path().join("root")
    }

    /// `rocmx --store ROOT ARGS…`, as uid 65534 when `nobody`, else as root.
    fn run(&self, nobody: bool, args: &[&str]) -> Output {
        let mut c = if nobody {
            let mut c = Command::new(&self.setpriv);
            c.args([
                "--reuid",
                "65534",
                "--regid",
                "65534",
                "--clear-groups",
                "--",
            ])
            .arg(&self.exe);
            c
        } else {
            Command::new(&self.exe)
        };
        c.arg("--store")
            .arg(self.root())
            .args(args)
            .env_remove("ROCMX_STORE")
            .env_remove("XDG_DATA_HOME")
            .env("HOME", self.dir.path().join("home"))
            .env("TMPDIR", self.dir.path().join("tmp"))
            .current_dir(self.dir.path().join("work"))
            .output()
            .expect("run rocmx")
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
        let nix = self.dir.path().join("packages.nix");
        self.ok(
            nobody,
            &["build", "--file", nix.to_str().unwrap(), "--no-link", attr],
        )
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        common::make_writable(self.dir.path());
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
    let nix = f.dir.path().join("packages.nix");
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
