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

mod common;
use common::fixture::{as_nobody, busybox_or_say, euid, setpriv, Work, NOBODY};

use std::fs;
use std::ops::Deref;
use std::os::unix::fs::{lchown, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Output;

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

/// A directory in /tmp that uid 65534 owns, holding everything the commands use
/// ([`Work::in_tmp`]: a copy of the rocmx binary, busybox, `work/`, `home/`, `tmp/`).
struct Fixture {
    w: Work,
    setpriv: PathBuf,
}

impl Deref for Fixture {
    type Target = Work;
    fn deref(&self) -> &Work {
        &self.w
    }
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
        let setpriv = setpriv()?;
        let busybox = busybox_or_say()?;
        if let Err(e) = rocmx_builder::sandbox::check_user_namespaces() {
            eprintln!("skipping: even root cannot create the sandbox's namespaces here:\n{e}");
            return None;
        }
        let w = Work::in_tmp(
            "rocmx-rootless",
            0o700,
            &busybox,
            &["cat", "echo", "mkdir", "id"],
        )
        .packages(PACKAGES);
        for sub in ["root", "secret"] {
            fs::create_dir(w.path(sub)).unwrap();
        }
        // Readable by 65534 on the host: only the sandbox keeps builds away from it.
        fs::write(w.path("secret/canary"), "TOPSECRET\n").unwrap();
        fs::set_permissions(w.path("secret/canary"), fs::Permissions::from_mode(0o600)).unwrap();
        chown_tree(w.dir.path());
        Some(Fixture { w, setpriv })
    }

    /// `rocmx --store ROOT ARGS…` as uid/gid 65534 without supplementary groups, in the
    /// work directory, with HOME and TMPDIR in the test directory.
    fn run(&self, args: &[&str]) -> Output {
        self.command_as_nobody(&self.setpriv, args)
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
    let o = as_nobody(&f.setpriv, Path::new("cat"))
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
