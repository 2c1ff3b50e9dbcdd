//! The build library (`exprs/lib/stdenv`): mkDerivation's phases, hooks,
//! `dont…` flags, patches, `doCheck`, `overrideAttrs`, and the small builders
//! (`writeText`, `runCommand`, `symlinkJoin`), built for real in the sandbox.
//!
//! The shell is a static busybox (no Debian root is needed to test the
//! phase logic; the Debian-rooted builds are exercised by the bootstrap
//! tests). Skips without busybox or user namespaces.

mod common;
use common::{busybox, err, out};

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_rocmx");

fn setup(d: &Path) {
    let bin = d.join("bb/bin");
    fs::create_dir_all(&bin).unwrap();
    fs::copy(busybox().unwrap(), bin.join("sh")).unwrap();
    for a in [
        "cat", "echo", "mkdir", "tar", "gzip", "patch", "cp", "chmod", "find", "ln", "cut", "tr",
        "grep", "printf",
    ] {
        symlink("sh", bin.join(a)).unwrap();
    }
    fs::create_dir_all(d.join("src-1.0")).unwrap();
    fs::write(d.join("src-1.0/greeting"), "hello\n").unwrap();
    let o = Command::new("tar")
        .args(["czf", "src-1.0.tar.gz", "src-1.0"])
        .current_dir(d)
        .output()
        .unwrap();
    assert!(o.status.success());
    fs::write(
        d.join("fix.patch"),
        "--- a/greeting\n+++ b/greeting\n@@ -1 +1 @@\n-hello\n+hello, patched\n",
    )
    .unwrap();
    let stdenv = Path::new(env!("CARGO_MANIFEST_DIR")).join("exprs/lib/stdenv");
    fs::write(
        d.join("t.nix"),
        format!(
            r#"let
  bb = ./bb;
  stdenv = import {} {{ shell = "${{bb}}/bin/sh"; path = [ bb ]; }};
  pkg = stdenv.mkDerivation {{
    pname = "demo"; version = "1.0";
    src = ./src-1.0.tar.gz;
    patches = [ ./fix.patch ];
    dontConfigure = true;
    buildPhase = "cat greeting > built";
    doCheck = true;
    checkPhase = "grep -q patched built && echo checked";
    installPhase = "mkdir -p $out/share; cp built $out/share/greeting";
    preBuild = "echo pre-build ran";
    postInstall = "echo post-install ran > $out/share/hook";
  }};
in {{
  inherit pkg;
  failingCheck = pkg.overrideAttrs (old: {{ pname = "fails"; checkPhase = "exit 7"; }});
  noCheck = pkg.overrideAttrs (old: {{ pname = "nocheck"; doCheck = false; checkPhase = "exit 7"; }});
  other = pkg.overrideAttrs (old: {{ pname = "demo2"; postInstall = old.postInstall + "; echo again >> $out/share/hook"; }});
  text = stdenv.writeText "note.txt" "some text";
  cmd = stdenv.runCommand "cmd" {{ v = "x"; }} "echo $v > $out";
  joined = stdenv.symlinkJoin {{ name = "joined"; paths = [ pkg ]; }};
}}
"#,
            stdenv.display()
        ),
    )
    .unwrap();
}

fn build(d: &Path, attr: &str) -> std::process::Output {
    Command::new(BIN)
        .arg("--store")
        .arg(d.join("store"))
        .args(["build", "-L", "--no-link", "--json", "-f", "t.nix", attr])
        .current_dir(d)
        .env("ROCMX_CONFIG", "/dev/null")
        .output()
        .unwrap()
}

fn out_path(d: &Path, o: &std::process::Output) -> PathBuf {
    assert!(o.status.success(), "{}\n{}", out(o), err(o));
    let j: serde_json::Value = serde_json::from_str(&out(o)).unwrap();
    let p = j["outputs"][0]["outputs"]["out"].as_str().unwrap();
    d.join("store/store").join(p.rsplit('/').next().unwrap())
}

#[test]
fn phases_hooks_patches_and_overrides() {
    if busybox().is_none() {
        eprintln!("skipped: no busybox");
        return;
    }
    if let Err(e) = rocmx_builder::sandbox::check_user_namespaces() {
        eprintln!("skipped: {e}");
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    setup(d);
    let o = build(d, "pkg");
    let p = out_path(d, &o);
    assert_eq!(
        fs::read_to_string(p.join("share/greeting")).unwrap(),
        "hello, patched\n"
    );
    assert_eq!(
        fs::read_to_string(p.join("share/hook")).unwrap(),
        "post-install ran\n"
    );
    let log = err(&o);
    // `-L` shows each phase marker as `NAME> Running phase: PHASE`.
    let phases: Vec<&str> = log
        .lines()
        .filter_map(|l| l.split("> Running phase: ").nth(1))
        .collect();
    assert_eq!(
        phases,
        [
            "unpackPhase",
            "patchPhase",
            "buildPhase",
            "checkPhase",
            "installPhase",
            "fixupPhase"
        ],
        "{log}"
    );
    assert!(
        log.contains("pre-build ran") && log.contains("checked"),
        "{log}"
    );

    let o = build(d, "failingCheck");
    assert!(!o.status.success(), "a failing check fails the build");
    ok_path(d, "noCheck");
    let p = out_path(d, &build(d, "other"));
    assert_eq!(
        fs::read_to_string(p.join("share/hook")).unwrap(),
        "post-install ran\nagain\n"
    );
    let p = out_path(d, &build(d, "text"));
    assert_eq!(fs::read_to_string(p).unwrap(), "some text");
    let p = out_path(d, &build(d, "cmd"));
    assert_eq!(fs::read_to_string(p).unwrap(), "x\n");
    let p = out_path(d, &build(d, "joined"));
    let target = fs::read_link(p.join("share/greeting")).unwrap();
    assert!(
        target
            .to_string_lossy()
            .ends_with("-demo-1.0/share/greeting"),
        "{}",
        target.display()
    );
}

fn ok_path(d: &Path, attr: &str) -> PathBuf {
    out_path(d, &build(d, attr))
}

/// Every QA check fails a deliberately bad package, naming the check and the
/// file; `meta.qaExceptions` waives one. (`setuid` cannot be triggered by a
/// build: the sandbox's seccomp filter already refuses setuid files; the
/// check is covered by builder/src/qa.rs's unit test.)
#[test]
fn qa_checks_fail_bad_packages() {
    if busybox().is_none() || rocmx_builder::sandbox::check_user_namespaces().is_err() {
        eprintln!("skipped: no busybox or no user namespaces");
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    setup(d);
    // Host-made inputs: an ELF with a RUNPATH outside the store, an archive
    // with member mtimes (plain `ar rc`, not deterministic mode).
    let have_cc = Command::new("cc")
        .args(["-x", "c", "-", "-o"])
        .arg(d.join("rpath-bin"))
        .arg("-Wl,-rpath,/usr/local/lib")
        .stdin(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin
                .take()
                .unwrap()
                .write_all(b"int main(void){return 0;}\n")?;
            c.wait()
        })
        .is_ok_and(|s| s.success());
    fs::write(d.join("m.o"), "member").unwrap();
    let have_ar = Command::new("ar")
        .args(["rcU", "lib.a", "m.o"])
        .current_dir(d)
        .status()
        .is_ok_and(|s| s.success());
    let stdenv = Path::new(env!("CARGO_MANIFEST_DIR")).join("exprs/lib/stdenv");
    let mut cases: Vec<(&str, String, &str)> = vec![
        (
            "build-dir-reference",
            "echo prefix=$PWD > $out/x.pc".into(),
            "x.pc",
        ),
        (
            "world-writable",
            "echo x > $out/w; chmod 666 $out/w".into(),
            "w",
        ),
        ("broken-symlink", "ln -s nothere $out/l".into(), "l"),
    ];
    if have_cc {
        cases.push((
            "runpath-outside-store",
            "cp ${./rpath-bin} $out/b".into(),
            "b",
        ));
    }
    if have_ar {
        cases.push(("archive-mtime", "cp ${./lib.a} $out/lib.a".into(), "lib.a"));
    }
    for (check, script, file) in &cases {
        let expr = format!(
            r#"let bb = ./bb; stdenv = import {} {{ shell = "${{bb}}/bin/sh"; path = [ bb ]; }}; in
               stdenv.mkDerivation {{ name = "bad"; dontUnpack = true; dontPatch = true; dontConfigure = true; dontBuild = true;
                 installPhase = "mkdir $out; {script}"; }}"#,
            stdenv.display()
        );
        let o = Command::new(BIN)
            .arg("--store")
            .arg(d.join("store"))
            .args(["build", "--no-link", "--expr", &expr])
            .current_dir(d)
            .env("ROCMX_CONFIG", "/dev/null")
            .output()
            .unwrap();
        let e = err(&o);
        assert!(!o.status.success(), "{check}: the build should fail:\n{e}");
        assert!(
            e.contains(&format!("QA check '{check}' failed: {file}:")),
            "{check}:\n{e}"
        );
        // Waived, the same package builds.
        let waived = expr.replace(
            "name = \"bad\";",
            &format!("name = \"bad\"; meta.qaExceptions.\"{check}\" = \"testing the waiver\";"),
        );
        let o = Command::new(BIN)
            .arg("--store")
            .arg(d.join("store"))
            .args(["build", "--no-link", "--expr", &waived])
            .current_dir(d)
            .env("ROCMX_CONFIG", "/dev/null")
            .output()
            .unwrap();
        assert!(o.status.success(), "{check} waived:\n{}", err(&o));
    }
    eprintln!("QA checks exercised: {}", cases.len());
}

/// The non-free gate (DFSG-style) and `rocmx licenses`.
#[test]
fn nonfree_gate_and_license_listing() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    fs::create_dir_all(d.join("f/bb/bin")).unwrap();
    fs::write(d.join("f/bb/bin/sh"), "stand-in").unwrap();
    let lib = Path::new(env!("CARGO_MANIFEST_DIR")).join("exprs/lib");
    fs::write(
        d.join("f/flake.nix"),
        format!(
            r#"{{
  inputs.bb = {{ url = "path:./bb"; flake = false; }};
  config.allowNonfree = {{ type = "bool"; default = false; description = "accept non-free licences"; }};
  outputs = {{ self, config, bb }}:
    let
      licenses = import {lib}/licenses.nix;
      stdenv = import {lib}/stdenv {{ shell = "${{bb}}/bin/sh"; inherit (config) allowNonfree; }};
      mk = name: license: extra: stdenv.mkDerivation ({{ inherit name; buildCommand = "echo > $out"; meta.license = license; }} // extra);
      libfree = mk "libfree" licenses.mit {{ }};
      blob = mk "firmware-blob" licenses.unfreeRedistributable {{ }};
    in {{
      packages.${{builtins.currentSystem}} = {{
        app = mk "app" [ licenses.asl20 licenses.llvm-exception ] {{ buildInputs = [ libfree blob ]; }};
        plain = mk "plain" licenses.mit {{ buildInputs = [ libfree ]; }};
      }};
    }};
}}
"#,
            lib = lib.display()
        ),
    )
    .unwrap();
    let run = |args: &[&str]| {
        Command::new(BIN)
            .arg("--store")
            .arg(d.join("store"))
            .args(args)
            .current_dir(d.join("f"))
            .env("ROCMX_CONFIG", "/dev/null")
            .output()
            .unwrap()
    };
    let o = run(&["build", "--dry-run", ".#app"]);
    assert!(!o.status.success());
    let e = err(&o);
    assert!(
        e.contains("firmware-blob has a non-free licence (LicenseRef-unfree-redistributable); build it with --allow-nonfree"),
        "{e}"
    );
    let o = run(&["build", "--dry-run", ".#app", "--allow-nonfree"]);
    assert!(o.status.success(), "{}", err(&o));
    let o = run(&["build", "--dry-run", ".#plain"]);
    assert!(o.status.success(), "{}", err(&o));
    let o = run(&["licenses", ".#app"]);
    assert!(o.status.success(), "{}", err(&o));
    let text = out(&o);
    assert!(
        text.contains("firmware-blob") && text.contains("NON-FREE"),
        "{text}"
    );
    assert!(
        text.contains("Apache-2.0 AND Apache-2.0 WITH LLVM-exception"),
        "{text}"
    );
    assert!(text.contains("3 packages, 1 non-free"), "{text}");
    let o = run(&["licenses", ".#plain", "--json"]);
    let j: serde_json::Value = serde_json::from_str(&out(&o)).unwrap();
    assert_eq!(j.as_array().unwrap().len(), 2);
    assert!(j.as_array().unwrap().iter().all(|p| p["free"] == true));
}

/// `debianSource`: the orig tarball unpacked and `debian/patches/series`
/// applied in order (comments, blank lines and per-patch options honoured).
#[test]
fn debian_source_applies_the_patch_series() {
    if busybox().is_none() || rocmx_builder::sandbox::check_user_namespaces().is_err() {
        eprintln!("skipped: no busybox or no user namespaces");
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    setup(d);
    for a in ["xz", "mv", "head", "sed"] {
        let _ = symlink("sh", d.join("bb/bin").join(a));
    }
    // foo_1.0.orig.tar.gz and foo_1.0-2.debian.tar.xz
    fs::create_dir_all(d.join("o/foo-1.0")).unwrap();
    fs::write(d.join("o/foo-1.0/greeting"), "hello\n").unwrap();
    fs::create_dir_all(d.join("deb/debian/patches")).unwrap();
    fs::write(
        d.join("deb/debian/patches/series"),
        "# applied in order\n01-fix.patch\n\n02-more.patch -p1\n",
    )
    .unwrap();
    fs::write(
        d.join("deb/debian/patches/01-fix.patch"),
        "--- a/greeting\n+++ b/greeting\n@@ -1 +1 @@\n-hello\n+hello, patched\n",
    )
    .unwrap();
    fs::write(
        d.join("deb/debian/patches/02-more.patch"),
        "--- a/greeting\n+++ b/greeting\n@@ -1 +1,2 @@\n hello, patched\n+and again\n",
    )
    .unwrap();
    let sh = |script: &str| {
        let o = Command::new("sh")
            .args(["-ec", script])
            .current_dir(d)
            .output()
            .unwrap();
        assert!(o.status.success(), "{script}: {}", err(&o));
    };
    sh("tar -C o -czf foo_1.0.orig.tar.gz foo-1.0 && tar -C deb -cf - debian | xz > foo_1.0-2.debian.tar.xz");
    let sri = |f: &str| {
        let b = fs::read(d.join(f)).unwrap();
        rocmx_store::Hash::digest(rocmx_store::HashAlgo::Sha256, &b).to_sri()
    };
    let lib = Path::new(env!("CARGO_MANIFEST_DIR")).join("exprs/lib");
    let expr = format!(
        r#"let bb = ./bb; stdenv = import {lib}/stdenv {{ shell = "${{bb}}/bin/sh"; path = [ bb ]; }};
           debian = import {lib}/debian.nix; in
           debian.debianSource {{ inherit stdenv; pname = "foo"; version = "1:1.0-2";
             orig = {{ url = "file://{d}/foo_1.0.orig.tar.gz"; hash = "{o}"; }};
             debian = {{ url = "file://{d}/foo_1.0-2.debian.tar.xz"; hash = "{x}"; }}; }}"#,
        lib = lib.display(),
        d = d.display(),
        o = sri("foo_1.0.orig.tar.gz"),
        x = sri("foo_1.0-2.debian.tar.xz"),
    );
    let o = Command::new(BIN)
        .arg("--store")
        .arg(d.join("store"))
        .args(["build", "--no-link", "--json", "-L", "--expr", &expr])
        .current_dir(d)
        .env("ROCMX_CONFIG", "/dev/null")
        .output()
        .unwrap();
    let p = out_path(d, &o);
    assert!(
        p.to_string_lossy().ends_with("-foo-1.0-source"),
        "{}",
        p.display()
    );
    assert_eq!(
        fs::read_to_string(p.join("greeting")).unwrap(),
        "hello, patched\nand again\n"
    );
    let log = err(&o);
    let first = log
        .find("applying debian/patches/01-fix.patch")
        .expect("01 applied");
    let second = log
        .find("applying debian/patches/02-more.patch")
        .expect("02 applied");
    assert!(first < second, "{log}");
}
