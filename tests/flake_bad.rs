//! Bad flakes and what evaluating a git flake may touch.
//!
//! Each bad input gives one error line naming the cause and the file, and
//! leaves the store and `flake.lock` as they were. A git flake sees only the
//! files git tracks: an untracked 500 MB file is neither read nor copied.

mod common;
#[path = "common/flake.rs"]
mod flakefx;
use common::{err, out};
use flakefx::{git, have_git, Fx};

use std::fs;
use std::process::Output;
use std::time::{Duration, SystemTime};

/// The error output: a failure with exactly one `error:` line.
fn one_error(o: &Output) -> String {
    assert!(!o.status.success(), "unexpected success:\n{}", out(o));
    let e = err(o);
    assert_eq!(
        e.lines().filter(|l| l.starts_with("error:")).count(),
        1,
        "one error line expected:\n{e}"
    );
    e
}

const GOOD: &str = r#"{
  inputs.data = { url = "path:./data"; flake = false; };
  outputs = { self, config, data }: {
    packages.${builtins.currentSystem}.default = derivation {
      name = "uses-data";
      system = builtins.currentSystem;
      builder = "/bin/sh";
      src = data;
    };
  };
}
"#;

fn good(fx: &Fx) {
    fx.write("f/data/file", "one\n");
    fx.write("f/flake.nix", GOOD);
    let o = fx.run(&["flake", "lock"]);
    assert!(o.status.success(), "{}", err(&o));
}

/// Runs `args` after `change`, expects one error containing `want`, and checks
/// that the store and the lock file did not change.
fn refused(fx: &Fx, args: &[&str], want: &[&str]) -> String {
    let store = fx.store_listing();
    let lock = fx.lock();
    let e = one_error(&fx.run(args));
    eprintln!("{args:?} →\n{e}");
    for w in want {
        assert!(e.contains(w), "expected '{w}' in:\n{e}");
    }
    assert_eq!(fx.store_listing(), store, "the store changed");
    assert_eq!(fx.lock(), lock, "flake.lock changed");
    e
}

#[test]
fn flake_without_outputs() {
    let fx = Fx::new();
    good(&fx);
    fx.write(
        "f/flake.nix",
        "{ description = \"nothing\"; inputs = { }; }\n",
    );
    refused(
        &fx,
        &["build", "--dry-run"],
        &["has no 'outputs' attribute", "flake.nix"],
    );
    fx.write("f/flake.nix", "{ output = { self }: { }; }\n");
    refused(
        &fx,
        &["build", "--dry-run"],
        &[
            "unsupported attribute 'output'; did you mean 'outputs'?",
            "flake.nix:1",
        ],
    );
}

#[test]
fn syntax_error_names_the_place() {
    let fx = Fx::new();
    good(&fx);
    fx.write(
        "f/flake.nix",
        "{\n  outputs = { self }: {\n    x = ;\n  };\n}\n",
    );
    refused(&fx, &["build", "--dry-run"], &["flake.nix:3"]);
    refused(&fx, &["flake", "lock"], &["flake.nix:3"]);
}

#[test]
fn lock_that_does_not_match_inputs() {
    let fx = Fx::new();
    good(&fx);
    // A new input that the lock lacks.
    fx.write("f/more/x", "x");
    fx.write(
        "f/flake.nix",
        &GOOD.replace(
            "inputs.data",
            "inputs.more = { url = \"path:./more\"; flake = false; };\n  inputs.data",
        ),
    );
    refused(
        &fx,
        &["build", "--dry-run"],
        &["flake.lock does not match flake.nix: input 'more' is declared in flake.nix but not locked", "rocmx flake lock"],
    );
    // A changed reference.
    fx.write("f/flake.nix", &GOOD.replace("path:./data", "path:./data2"));
    fx.write("f/data2/file", "two");
    refused(
        &fx,
        &["build", "--dry-run"],
        &["input 'data' is locked to a different reference"],
    );
    // A lock file that is not a lock file.
    fx.write("f/flake.nix", GOOD);
    let saved = fx.lock().unwrap();
    fs::write(fx.path("f/flake.lock"), "{ \"version\": 7 ").unwrap();
    refused(
        &fx,
        &["build", "--dry-run"],
        &["flake.lock is not valid JSON", "flake.lock'"],
    );
    fs::write(fx.path("f/flake.lock"), saved).unwrap();
}

#[test]
fn input_whose_content_changed() {
    let fx = Fx::new();
    good(&fx);
    fx.write("f/data/file", "tampered\n");
    refused(
        &fx,
        &["build", "--dry-run"],
        &[
            "input 'data'",
            "locked narHash sha256-",
            "rocmx flake update data",
        ],
    );
    // Accepting the change is one command; then it builds.
    let o = fx.run(&["flake", "update", "data"]);
    assert!(o.status.success(), "{}", err(&o));
    let o = fx.run(&["build", "--dry-run"]);
    assert!(o.status.success(), "{}", err(&o));
}

#[test]
fn missing_attribute_and_unknown_parameter() {
    let fx = Fx::new();
    good(&fx);
    refused(
        &fx,
        &["build", "--dry-run", ".#defualt"],
        &["did you mean 'packages.x86_64-linux.default'?"],
    );
    refused(
        &fx,
        &["build", "--dry-run", "--set", "jobs=3"],
        &["unknown parameter 'jobs'", "declares no parameters"],
    );
    refused(
        &fx,
        &["build", "--dry-run", "--gfx", "gfx90a"],
        &["--gfx sets the parameter 'gfxTargets'"],
    );
    // Bad parameter declarations.
    fx.write(
        "f/flake.nix",
        &GOOD.replace(
            "outputs =",
            "config.x = { type = \"float\"; };\n  outputs =",
        ),
    );
    refused(
        &fx,
        &["build", "--dry-run"],
        &[
            "parameter 'x' has an unknown type \"float\"",
            "\"gfx targets\"",
        ],
    );
    fx.write(
        "f/flake.nix",
        &GOOD.replace("outputs =", "config.x = { type = \"int\"; };\n  outputs ="),
    );
    refused(
        &fx,
        &["build", "--dry-run"],
        &["parameter 'x' (int) has no default; set it with --set x=VALUE"],
    );
}

#[test]
fn bad_references() {
    let fx = Fx::new();
    good(&fx);
    fx.write("f/flake.nix", &GOOD.replace("path:./data", "nixpkgs"));
    refused(&fx, &["flake", "lock"], &["rocmx has no registry"]);
    fx.write(
        "f/flake.nix",
        &GOOD.replace("path:./data", "git+https://example.org/x.git"),
    );
    refused(&fx, &["flake", "lock"], &["git+file"]);
    fx.write(
        "f/flake.nix",
        &GOOD.replace("path:./data", "path:./nowhere"),
    );
    refused(&fx, &["flake", "lock"], &["nowhere"]);
    let o = fx.run(&["build", "--dry-run", "path:/definitely/not/here#x"]);
    one_error(&o);
}

// ---- git flakes ---------------------------------------------------------------------

fn atime(p: &std::path::Path) -> SystemTime {
    fs::metadata(p).unwrap().accessed().unwrap()
}

/// Sets a file's access time far in the past (so that any read moves it,
/// even under `relatime`).
fn age(p: &std::path::Path) {
    let f = fs::File::options().write(true).open(p).unwrap();
    let old = SystemTime::UNIX_EPOCH + Duration::from_secs(946_684_800);
    f.set_times(fs::FileTimes::new().set_accessed(old)).unwrap();
}

#[test]
fn untracked_files_are_neither_read_nor_copied() {
    if !have_git() {
        eprintln!("skipped: no git");
        return;
    }
    let fx = Fx::new();
    let f = fx.path("f");
    fx.write(
        "f/flake.nix",
        r#"{
  outputs = { self, config }: {
    packages.${builtins.currentSystem} = {
      default = derivation {
        name = "whole-tree";
        system = builtins.currentSystem;
        builder = "/bin/sh";
        src = self;
        one = ./src;
      };
      readsUntracked = builtins.readFile ./big.iso;
      seesUntracked = builtins.pathExists ./big.iso;
      listing = builtins.attrNames (builtins.readDir ./.);
    };
  };
}
"#,
    );
    fx.write("f/src/a.c", "int main;\n");
    git(&f, &["init", "-q"]);
    git(&f, &["add", "flake.nix", "src/a.c"]);
    // 500 MB that git does not track (sparse: no disk needed).
    let big = f.join("big.iso");
    fs::File::create(&big).unwrap().set_len(500 << 20).unwrap();
    fx.write("f/notes.txt", "untracked too\n");
    // Does this filesystem update access times at all? A control file says.
    let control = f.join("control");
    fs::write(&control, "x").unwrap();
    age(&control);
    let _ = fs::read(&control).unwrap();
    let atime_works =
        atime(&control) > SystemTime::UNIX_EPOCH + Duration::from_secs(946_684_800 + 1);
    age(&big);
    let before = atime(&big);

    let o = fx.run(&["build", "--dry-run", "--json"]);
    assert!(o.status.success(), "{}", err(&o));
    let o = fx.run(&["flake", "show", "--json"]);
    assert!(
        !o.status.success(),
        "show evaluates readsUntracked, which must fail"
    );
    if atime_works {
        assert_eq!(atime(&big), before, "big.iso was read");
    } else {
        eprintln!("note: this filesystem does not update access times; checked the store only");
    }
    // The copies of the tree hold tracked files only.
    let mut copied = Vec::new();
    for e in fs::read_dir(fx.path("store/store")).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            let names: Vec<String> = fs::read_dir(&p)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            copied.push(names);
        }
    }
    assert!(
        copied.iter().any(|n| n.contains(&"flake.nix".to_string())),
        "{copied:?}"
    );
    for names in &copied {
        for bad in ["big.iso", "notes.txt", ".git", "control"] {
            assert!(
                !names.contains(&bad.to_string()),
                "{bad} was copied: {copied:?}"
            );
        }
    }
    let size: u64 = walk_size(&fx.path("store/store"));
    assert!(size < 1 << 20, "the store holds {size} bytes");

    // Reading it directly is an error that says why; listing does not show it.
    let e = one_error(&fx.run(&["build", "--dry-run", ".#readsUntracked"]));
    assert!(
        e.contains("big.iso' is not tracked by git") && e.contains("git add big.iso"),
        "{e}"
    );
    if atime_works {
        assert_eq!(atime(&big), before, "big.iso was read");
    }
}

#[test]
fn untracked_flake_nix_is_refused() {
    if !have_git() {
        return;
    }
    let fx = Fx::new();
    fx.write("f/flake.nix", "{ outputs = { self, config }: { }; }\n");
    fx.write("f/other", "x");
    git(&fx.path("f"), &["init", "-q"]);
    git(&fx.path("f"), &["add", "other"]);
    let e = one_error(&fx.run(&["flake", "show"]));
    assert!(
        e.contains("flake.nix' is not tracked by git") && e.contains("git add flake.nix"),
        "{e}"
    );
}

fn walk_size(p: &std::path::Path) -> u64 {
    let m = fs::symlink_metadata(p).unwrap();
    if m.is_dir() {
        fs::read_dir(p)
            .unwrap()
            .map(|e| walk_size(&e.unwrap().path()))
            .sum()
    } else {
        m.len()
    }
}

#[test]
fn a_flake_that_inputs_itself() {
    let fx = Fx::new();
    fx.write(
        "f/flake.nix",
        "{ inputs.me.url = \"path:./.\"; outputs = { self, config, me }: { }; }\n",
    );
    // (The flake's own tree is fetched as its input, once: that object stays.)
    let e = one_error(&fx.run(&["flake", "lock"]));
    assert!(
        e.contains("nested more than 32 flakes deep; is there a cycle of inputs?"),
        "{e}"
    );
    assert!(fx.lock().is_none(), "no lock file was written");
}

#[test]
fn hostile_lock_files() {
    let fx = Fx::new();
    good(&fx);
    for (text, want) in [
        (
            r#"{"version":7,"root":"root","nodes":{"root":{"inputs":{"data":["data"]}}}}"#,
            "cycle of follows",
        ),
        (
            r#"{"version":7,"root":"root","nodes":{"root":{"inputs":{"data":"x"}}}}"#,
            "missing node 'x'",
        ),
        (r#"[1,2,3]"#, "not a JSON object"),
        (
            r#"{"version":7,"root":"root","nodes":{"root":{"inputs":{"data":"data"}},"data":{"original":{"type":"path","path":"./data"},"locked":{"type":"path","path":"/etc","narHash":"sha256-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}}}}"#,
            "locked to a different reference",
        ),
    ] {
        fs::write(fx.path("f/flake.lock"), text).unwrap();
        refused(&fx, &["build", "--dry-run"], &[want]);
    }
}
