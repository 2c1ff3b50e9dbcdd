//! Rootless means rootless: `rocmx build` run by an unprivileged user.
//!
//! Run as root, each test makes a temporary directory in /tmp owned by uid/gid 65534
//! (a copy of the `rocmx` binary, a static busybox as `bb/`, the package set, a work
//! directory and the store root), then runs every `rocmx` command as that user through
//! `setpriv --reuid 65534 --regid 65534 --clear-groups`. The builds must succeed there
//! as they do for root (`tests/build.rs`): dependency order, no view of the host's
//! files, a second run that builds nothing, a store that verifies and belongs entirely
//! to that user.
//!
//! The tests skip, saying why, when not run as root (they cannot switch users), when
//! `setpriv` or busybox is missing, or when even root cannot create user namespaces.
//! CI runs them as root with busybox-static installed, so there they really run.

use std::fs;
use std::os::unix::fs::{lchown, symlink, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_rocmx");

/// The unprivileged user (and group) the commands run as.
const NOBODY: u32 = 65534;

/// A chain a → b → c, a diamond d1 → (d2, d3) → d4, and a build that looks at the
/// host: its `/etc/passwd`, a file of the test directory (`hostfile`, a plain string
/// without context, so it is not copied into the store) and its own uid.
const PACKAGES: &str = r#"
{ hostfile ? "/nonexistent" }:
let
  bb = ./bb;
  mk = name: script: derivation {
    inherit name;
    system = builtins.currentSystem;
    builder = "${bb}/bin/sh";
    args = [ "-c" script ];
    PATH = "${bb}/bin";
  };
  a = mk "chain-a" "echo A > $out";
  b = mk "chain-b" "{ cat ${a}; echo B; } > $out";
  c = mk "chain-c" "{ cat ${b}; echo C; } > $out";
  d1 = mk "dia-1" "echo D1 > $out";
  d2 = mk "dia-2" "{ cat ${d1}; echo D2; } > $out";
  d3 = mk "dia-3" "{ cat ${d1}; echo D3; } > $out";
  d4 = mk "dia-4" "{ cat ${d2} ${d3}; echo D4; } > $out";
  host = mk "look-at-host" ''
    mkdir $out
    cat /etc/passwd > $out/passwd
    if cat ${hostfile} > $out/canary 2>/dev/null; then echo READ; else echo DENIED; fi > $out/canary-status
    id -u > $out/uid
  '';
in { inherit a b c d1 d2 d3 d4 host; }
"#;

fn find(candidates: &[&str]) -> Option<PathBuf> {
    candidates.iter().map(PathBuf::from).find(|p| p.exists())
}

/// The effective uid of this process (the owner of `/proc/self`).
fn euid() -> Option<u32> {
    fs::metadata("/proc/self").ok().map(|m| m.uid())
}

/// A directory in /tmp that uid 65534 owns, holding everything the commands use.
struct Fixture {
    dir: tempfile::TempDir,
    setpriv: PathBuf,
    /// The copy of the rocmx binary (the original may sit where 65534 cannot reach).
    exe: PathBuf,
}

impl Fixture {
    /// `None`, after printing why, when the tests cannot run here.
    fn new() -> Option<Fixture> {
        match euid() {
            Some(0) => {}
            uid => {
                let uid = uid.map_or("unknown".to_string(), |u| u.to_string());
                eprintln!(
                    "skipping: not root (euid {uid}), so cannot switch to uid {NOBODY}; \
                     tests/build.rs covers building as the current user"
                );
                return None;
            }
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
            eprintln!("skipping: even root cannot create the sandbox's namespaces here:\n{e}");
            return None;
        }
        // /tmp (not $TMPDIR): every parent must be traversable by uid 65534.
        let dir = tempfile::Builder::new()
            .prefix("rocmx-rootless")
            .tempdir_in("/tmp")
            .expect("tempdir in /tmp");
        let d = dir.path();
        fs::set_permissions(d, fs::Permissions::from_mode(0o700)).unwrap();
        let bin = d.join("bb/bin");
        fs::create_dir_all(&bin).unwrap();
        fs::copy(&busybox, bin.join("sh")).unwrap();
        for applet in ["cat", "echo", "mkdir", "id"] {
            symlink("sh", bin.join(applet)).unwrap();
        }
        fs::write(d.join("packages.nix"), PACKAGES).unwrap();
        for sub in ["work", "root", "home", "tmp", "secret"] {
            fs::create_dir(d.join(sub)).unwrap();
        }
        // Readable by 65534 on the host: only the sandbox keeps builds away from it.
        fs::write(d.join("secret/canary"), "TOPSECRET\n").unwrap();
        fs::set_permissions(d.join("secret/canary"), fs::Permissions::from_mode(0o600)).unwrap();
        let exe = d.join("rocmx");
        fs::copy(BIN, &exe).unwrap();
        fs::set_permissions(&exe, fs::Permissions::from_mode(0o755)).unwrap();
        chown_tree(d);
        Some(Fixture { dir, setpriv, exe })
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// The store root given with `--store`.
    fn root(&self) -> PathBuf {
        self.path("root")
    }

    /// `rocmx --store ROOT ARGS…` as uid/gid 65534 without supplementary groups, in the
    /// work directory, with HOME and TMPDIR in the test directory.
    fn run(&self, args: &[&str]) -> Output {
        Command::new(&self.setpriv)
            .args([
                "--reuid",
                "65534",
                "--regid",
                "65534",
                "--clear-groups",
                "--",
            ])
            .arg(&self.exe)
            .arg("--store")
            .arg(self.root())
            .args(args)
            .env_remove("ROCMX_STORE")
            .env_remove("XDG_DATA_HOME")
            .env("HOME", self.path("home"))
            .env("TMPDIR", self.path("tmp"))
            .current_dir(self.path("work"))
            .output()
            .expect("run setpriv")
    }

    fn ok(&self, args: &[&str]) -> Output {
        let o = self.run(args);
        assert!(
            o.status.success(),
            "rocmx {args:?} as uid {NOBODY} failed ({:?}):\nstdout: {}\nstderr: {}",
            o.status,
            text(&o.stdout),
            text(&o.stderr)
        );
        o
    }

    /// `rocmx build --file packages.nix ARGS…` as uid 65534; its standard output.
    fn build(&self, args: &[&str]) -> String {
        let nix = self.path("packages.nix");
        let mut all = vec!["build", "--file", nix.to_str().unwrap()];
        all.extend_from_slice(args);
        text(&self.ok(&all).stdout)
    }

    /// `build --json --no-link ARGS…`, parsed.
    fn build_json(&self, args: &[&str]) -> serde_json::Value {
        let mut all = vec!["--json", "--no-link"];
        all.extend_from_slice(args);
        let t = self.build(&all);
        serde_json::from_str(&t).unwrap_or_else(|e| panic!("not JSON ({e}): {t}"))
    }

    /// The host path of a logical output path.
    fn physical(&self, logical: &str) -> PathBuf {
        let base = logical
            .strip_prefix("/rocmx/store/")
            .unwrap_or_else(|| panic!("not a logical store path: {logical}"));
        self.root().join("store").join(base)
    }

    /// The file `rel` of output `logical` (`""`: the output itself).
    fn read(&self, logical: &str, rel: &str) -> String {
        let mut p = self.physical(logical);
        if !rel.is_empty() {
            p.push(rel);
        }
        fs::read_to_string(&p).unwrap_or_else(|e| panic!("reading {}: {e}", p.display()))
    }
}

/// Gives `dir` and everything below it to uid/gid 65534 (symlinks themselves included).
fn chown_tree(dir: &Path) {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(p) = stack.pop() {
        lchown(&p, Some(NOBODY), Some(NOBODY)).unwrap();
        if fs::symlink_metadata(&p).unwrap().is_dir() {
            for e in fs::read_dir(&p).unwrap() {
                stack.push(e.unwrap().path());
            }
        }
    }
}

/// Every entry under `dir` (itself included) as (path, uid, gid), without following links.
fn owners(dir: &Path) -> Vec<(PathBuf, u32, u32)> {
    let mut all = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(p) = stack.pop() {
        let m = fs::symlink_metadata(&p).unwrap();
        all.push((p.clone(), m.uid(), m.gid()));
        if m.is_dir() {
            for e in fs::read_dir(&p).unwrap() {
                stack.push(e.unwrap().path());
            }
        }
    }
    all
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn strings(v: &serde_json::Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .map(|x| x.as_str().expect("string").to_string())
        .collect()
}

/// The index of the `.drv` named `name` in `built`.
fn position(built: &[String], name: &str) -> usize {
    let suffix = format!("-{name}.drv");
    built
        .iter()
        .position(|d| d.ends_with(&suffix))
        .unwrap_or_else(|| panic!("{name} was not built: {built:?}"))
}

/// The output path of target `i` of a `--json` result.
fn out_path(j: &serde_json::Value, i: usize) -> String {
    j["outputs"][i]["outputs"]["out"]
        .as_str()
        .unwrap_or_else(|| panic!("no output {i} in {j}"))
        .to_string()
}

#[test]
fn chain_and_diamond_build_in_dependency_order_as_uid_65534() {
    let Some(f) = Fixture::new() else { return };
    let j = f.build_json(&["c", "d4"]);

    // Each output holds its dependencies' outputs: they were built first.
    let (c, d4) = (out_path(&j, 0), out_path(&j, 1));
    assert!(c.ends_with("-chain-c"), "{j}");
    assert!(d4.ends_with("-dia-4"), "{j}");
    assert_eq!(f.read(&c, ""), "A\nB\nC\n");
    assert_eq!(f.read(&d4, ""), "D1\nD2\nD1\nD3\nD4\n");

    // All seven were built, once each, dependencies before dependents.
    let built = strings(&j["built"]);
    assert_eq!(built.len(), 7, "{built:?}");
    let at = |name: &str| position(&built, name);
    assert!(at("chain-a") < at("chain-b") && at("chain-b") < at("chain-c"));
    assert!(at("dia-1") < at("dia-2") && at("dia-1") < at("dia-3"));
    assert!(at("dia-2") < at("dia-4") && at("dia-3") < at("dia-4"));
    assert_eq!(strings(&j["substituted"]), Vec::<String>::new());
}

#[test]
fn a_build_as_uid_65534_cannot_see_the_host() {
    let Some(f) = Fixture::new() else { return };
    let canary = f.path("secret/canary");
    // The canary is there for uid 65534 outside the sandbox.
    let o = Command::new(&f.setpriv)
        .args([
            "--reuid",
            "65534",
            "--regid",
            "65534",
            "--clear-groups",
            "--",
        ])
        .arg("cat")
        .arg(&canary)
        .output()
        .unwrap();
    assert_eq!(text(&o.stdout), "TOPSECRET\n", "{}", text(&o.stderr));

    let j = f.build_json(&["host", "--argstr", "hostfile", canary.to_str().unwrap()]);
    let out = out_path(&j, 0);
    assert!(out.ends_with("-look-at-host"), "{j}");

    let passwd = f.read(&out, "passwd");
    assert_eq!(passwd, rocmx_builder::sandbox::plan::PASSWD);
    let host = fs::read_to_string("/etc/passwd").unwrap();
    let host_root = host
        .lines()
        .find(|l| l.starts_with("root:"))
        .expect("the host's /etc/passwd has a root line");
    assert!(
        !passwd.lines().any(|l| l == host_root),
        "the build saw the host's root line {host_root:?}:\n{passwd}"
    );
    assert_eq!(f.read(&out, "canary-status"), "DENIED\n");
    assert_eq!(f.read(&out, "canary"), "");
    // The builder runs as the sandbox's build user whoever calls rocmx.
    assert_eq!(f.read(&out, "uid"), "1000\n");
}

#[test]
fn a_second_build_as_uid_65534_is_a_no_op() {
    let Some(f) = Fixture::new() else { return };
    let first = f.build_json(&["c", "d4", "host"]);
    assert_eq!(strings(&first["built"]).len(), 8, "{first}");

    let again = f.build_json(&["c", "d4", "host"]);
    assert_eq!(strings(&again["built"]), Vec::<String>::new(), "{again}");
    assert_eq!(again["outputs"], first["outputs"]);
    assert_eq!(again["outputs"].as_array().map(Vec::len), Some(3));
}

#[test]
fn the_store_of_uid_65534_verifies_and_belongs_to_it() {
    let Some(f) = Fixture::new() else { return };
    // With result links: they are indirect GC roots, registered in the store root too.
    f.build(&["c", "d4", "host"]);
    for link in ["result", "result-2", "result-3"] {
        let target = fs::read_link(f.path("work").join(link))
            .unwrap_or_else(|e| panic!("{link} is not a link: {e}"));
        assert!(target.starts_with(f.root().join("store")), "{target:?}");
    }
    assert_eq!(
        fs::read_to_string(f.path("work/result")).unwrap(),
        "A\nB\nC\n"
    );

    let o = f.ok(&["store", "verify", "--check-contents"]);
    let valid = fs::read_dir(f.root().join("store"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| !n.to_string_lossy().starts_with('.'))
        .count();
    // 8 outputs, 8 .drv files and the busybox source.
    assert_eq!(valid, 17);
    assert_eq!(
        text(&o.stderr),
        format!("checked {valid} valid paths, contents included: no damage\n")
    );

    let mut all = owners(&f.root());
    all.extend(owners(&f.path("work")));
    assert!(all.len() > 40, "too few entries to mean anything: {all:?}");
    let foreign: Vec<_> = all
        .iter()
        .filter(|(_, uid, gid)| (*uid, *gid) != (NOBODY, NOBODY))
        .collect();
    assert!(
        foreign.is_empty(),
        "entries not owned by {NOBODY}:{NOBODY}: {foreign:?}"
    );
}
