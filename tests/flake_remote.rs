//! Flakes and inputs that come over HTTP: a root flake given as a tarball
//! URL, a `tarball+http://` input, and a `github:` input whose archive is
//! served by a loopback server standing in for github.com
//! (`ROCMX_GITHUB_URL`). The lock pins the GitHub input to the commit named
//! in the archive's pax header; a server that later serves other bytes at
//! the same URL is caught by the locked NAR hash.

mod common;
use common::http::Server;
use common::{err, out};

use std::fs;
use std::path::Path;
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_rocmx");

fn run(dir: &Path, store: &Path, gh: u16, args: &[&str]) -> Output {
    Command::new(BIN)
        .arg("--store")
        .arg(store)
        .args(args)
        .current_dir(dir)
        .env("ROCMX_CONFIG", "/dev/null")
        .env("ROCMX_GITHUB_URL", format!("http://127.0.0.1:{gh}"))
        .output()
        .expect("rocmx")
}

fn ok(o: &Output) -> String {
    assert!(o.status.success(), "rocmx failed:\n{}\n{}", out(o), err(o));
    out(o)
}

fn sh(dir: &Path, script: &str) {
    let o = Command::new("sh")
        .args(["-ec", script])
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{script}: {}", err(&o));
}

fn tools() -> bool {
    ["git", "tar"].iter().all(|t| {
        Command::new(t)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

const FLAKE: &str = r#"{
  description = "served";
  outputs = { self, config }: {
    packages.${builtins.currentSystem}.default = derivation {
      name = "from-${builtins.replaceStrings ["\n"] [""] (builtins.readFile ./name)}";
      system = builtins.currentSystem;
      builder = "/bin/sh";
    };
  };
}
"#;

#[test]
fn tarball_and_github_flakes() {
    if !tools() {
        eprintln!("skipped: no git or tar");
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    let store = d.join("store");
    let www = d.join("www");
    fs::create_dir_all(www.join("o/r/archive")).unwrap();
    // A flake as a tarball (one top directory, stripped on unpacking).
    fs::create_dir_all(d.join("src/pkg")).unwrap();
    fs::write(d.join("src/pkg/flake.nix"), FLAKE).unwrap();
    fs::write(d.join("src/pkg/name"), "tarball\n").unwrap();
    sh(&d.join("src"), "tar czf ../www/pkg.tar.gz pkg");
    // A git repository served as GitHub would: `git archive` writes the commit
    // into the pax header.
    fs::create_dir_all(d.join("repo")).unwrap();
    fs::write(d.join("repo/flake.nix"), FLAKE).unwrap();
    fs::write(d.join("repo/name"), "github\n").unwrap();
    sh(
        &d.join("repo"),
        "git init -q && git add . && git -c user.name=t -c user.email=t@e commit -qm one && \
         git archive --format=tar.gz --prefix=r-main/ -o ../www/o/r/archive/main.tar.gz HEAD",
    );
    let commit = String::from_utf8(
        Command::new("git")
            .args(["rev-parse", "HEAD"])
            .current_dir(d.join("repo"))
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap()
    .trim()
    .to_string();
    // `GET /a/b` gives `www/a/b` as it is at the time, 404 otherwise.
    let srv = Server::dir(&www);
    let p = srv.port();

    // The root flake itself from a URL.
    let o = run(
        d,
        &store,
        p,
        &[
            "build",
            "--dry-run",
            "--json",
            &format!("http://127.0.0.1:{p}/pkg.tar.gz#default"),
        ],
    );
    assert!(ok(&o).contains("-from-tarball.drv"), "{}", out(&o));
    let m = ok(&run(
        d,
        &store,
        p,
        &[
            "flake",
            "metadata",
            &format!("tarball+http://127.0.0.1:{p}/pkg.tar.gz"),
        ],
    ));
    assert!(
        m.contains("Description:   served") && m.contains("NAR hash:      sha256-"),
        "{m}"
    );

    // The same as inputs of a local flake.
    fs::create_dir_all(d.join("top")).unwrap();
    fs::write(
        d.join("top/flake.nix"),
        format!(
            r#"{{
  inputs.tb.url = "tarball+http://127.0.0.1:{p}/pkg.tar.gz";
  inputs.gh.url = "github:o/r/main";
  outputs = {{ self, config, tb, gh }}: {{
    packages.${{builtins.currentSystem}} = {{
      tb = tb.packages.${{builtins.currentSystem}}.default;
      gh = gh.packages.${{builtins.currentSystem}}.default;
      ghRev = gh.rev;
    }};
  }};
}}
"#
        ),
    )
    .unwrap();
    let top = d.join("top");
    let o = run(
        &top,
        &store,
        p,
        &["build", "--dry-run", "--json", ".#gh", ".#tb"],
    );
    let text = ok(&o);
    assert!(
        text.contains("-from-github.drv") && text.contains("-from-tarball.drv"),
        "{text}"
    );
    assert!(
        srv.requests()
            .iter()
            .any(|a| a == "/o/r/archive/main.tar.gz"),
        "{:?}",
        srv.requests()
    );
    let lock: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(top.join("flake.lock")).unwrap()).unwrap();
    assert_eq!(
        lock["nodes"]["gh"]["locked"]["rev"],
        commit.as_str(),
        "{lock:#}"
    );
    assert_eq!(lock["nodes"]["gh"]["original"]["ref"], "main");
    assert_eq!(lock["nodes"]["tb"]["locked"]["type"], "tarball");
    assert!(lock["nodes"]["tb"]["locked"]["narHash"]
        .as_str()
        .unwrap()
        .starts_with("sha256-"));

    // With the lock, the inputs come from the store: no download at all.
    srv.clear_requests();
    ok(&run(
        &top,
        &store,
        p,
        &["build", "--dry-run", "--json", ".#gh", ".#tb"],
    ));
    assert_eq!(srv.hits(), 0, "{:?}", srv.requests());
    // A store without them fetches the GitHub input by its locked commit.
    let store = d.join("store2");
    fs::copy(
        www.join("o/r/archive/main.tar.gz"),
        www.join(format!("o/r/archive/{commit}.tar.gz")),
    )
    .unwrap();
    ok(&run(
        &top,
        &store,
        p,
        &["build", "--dry-run", "--json", ".#gh"],
    ));
    // (Every input is fetched while the lock is checked, the tarball too.)
    let asked = srv.requests();
    assert!(
        asked.contains(&format!("/o/r/archive/{commit}.tar.gz")),
        "{asked:?}"
    );
    assert!(
        !asked.iter().any(|a| a.ends_with("/main.tar.gz")),
        "{asked:?}"
    );

    // Other bytes at the tarball's URL (seen by a store that has not fetched
    // it yet): refused, lock and store unchanged.
    let store = d.join("store3");
    fs::create_dir_all(store.join("store")).unwrap();
    let lock_before = fs::read(top.join("flake.lock")).unwrap();
    let store_before: Vec<_> = fs::read_dir(store.join("store"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    fs::write(d.join("src/pkg/name"), "changed\n").unwrap();
    sh(&d.join("src"), "tar czf ../www/pkg.tar.gz pkg");
    let o = run(&top, &store, p, &["build", "--dry-run", ".#tb"]);
    assert!(!o.status.success());
    let e = err(&o);
    assert!(
        e.contains("input 'tb'") && e.contains("rocmx flake update tb"),
        "{e}"
    );
    assert_eq!(fs::read(top.join("flake.lock")).unwrap(), lock_before);
    // Only the other input (verified: github's tree) may have been added.
    for e in fs::read_dir(store.join("store")).unwrap() {
        let e = e.unwrap();
        if store_before.contains(&e.file_name()) || !e.path().is_dir() {
            continue;
        }
        let name = fs::read_to_string(e.path().join("name")).unwrap_or_default();
        assert_eq!(name, "github\n", "{:?} was added", e.path());
    }
    // Accepting it.
    ok(&run(&top, &store, p, &["flake", "update", "tb"]));
    let o = run(&top, &store, p, &["build", "--dry-run", "--json", ".#tb"]);
    assert!(ok(&o).contains("-from-changed.drv"));
}
