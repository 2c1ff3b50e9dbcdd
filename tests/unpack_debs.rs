//! End-to-end tests of `debianRootfs` (exprs/lib/debian.nix) and
//! `builtin:unpack-debs` through the `rocmx` binary: a lock file, one
//! fixed-output fetch per `.deb` from a loopback mirror (`mirror.debian` in a
//! temporary `ROCMX_CONFIG`), then the root.
//!
//! This file owns only tests. The packages are built here with `dpkg-deb
//! --build` (the tests skip when it is missing), the hostile one by hand with
//! `ar` and `tar`; one is Debian 12's real `hostname` 3.23+nmu1 from
//! `tests/data` (10.5 kB, GPL-2, its copyright file inside). The server listens
//! on 127.0.0.1 only; stores live in temporary directories. Both built-in
//! builders run in-process, so no sandbox is needed.

mod common;
use common::http::Server;
use common::{err, make_writable};

use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_rocmx");
const REPO: &str = env!("CARGO_MANIFEST_DIR");

fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn run(cmd: &mut Command) {
    let o = cmd.output().expect("run a tool");
    assert!(
        o.status.success(),
        "{cmd:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        err(&o)
    );
}

fn write(path: &Path, text: &str, mode: u32) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

/// `dpkg-deb --build` of a tree made by `fill`, with compression `z`.
fn dpkg_deb(work: &Path, pkg: &str, z: &str, fill: impl FnOnce(&Path)) -> PathBuf {
    let tree = work.join(format!("tree-{pkg}"));
    let debian = tree.join("DEBIAN");
    fs::create_dir_all(&debian).unwrap();
    fs::set_permissions(&tree, fs::Permissions::from_mode(0o755)).unwrap();
    fs::set_permissions(&debian, fs::Permissions::from_mode(0o755)).unwrap();
    write(
        &debian.join("control"),
        &format!(
            "Package: {pkg}\nVersion: 1:1.0-1\nArchitecture: amd64\nMaintainer: Test <t@example.invalid>\nDescription: test package\n"
        ),
        0o644,
    );
    fill(&tree);
    let out = work.join(format!("{pkg}_1.0-1_amd64.deb"));
    run(Command::new("dpkg-deb")
        .arg(format!("-Z{z}"))
        .args(["--root-owner-group", "--build"])
        .arg(&tree)
        .arg(&out));
    out
}

/// A `.deb` whose data.tar holds `../escape`, made with `ar` and `tar -P`.
fn hostile_deb(work: &Path) -> PathBuf {
    let h = work.join("hostile");
    let inner = h.join("inner");
    fs::create_dir_all(&inner).unwrap();
    fs::write(h.join("debian-binary"), "2.0\n").unwrap();
    fs::write(h.join("escape"), "pwned\n").unwrap();
    fs::write(
        inner.join("control"),
        "Package: evil\nVersion: 1.0\nArchitecture: amd64\nDescription: hostile\n",
    )
    .unwrap();
    run(Command::new("tar")
        .current_dir(&inner)
        .args(["-czf", "../control.tar.gz", "./control"]));
    run(Command::new("tar")
        .current_dir(&inner)
        .args(["-P", "-cf", "../data.tar", "../escape"]));
    let out = work.join("evil_1.0_amd64.deb");
    run(Command::new("ar")
        .current_dir(&h)
        .arg("rc")
        .arg(&out)
        .args(["debian-binary", "control.tar.gz", "data.tar"]));
    out
}

fn sha256_hex(path: &Path) -> String {
    let o = Command::new("sha256sum")
        .arg(path)
        .output()
        .expect("sha256sum");
    String::from_utf8_lossy(&o.stdout)
        .split_whitespace()
        .next()
        .expect("a hash")
        .to_string()
}

/// Puts `debs` in the served pool and writes the lock naming them in order.
fn lock(dir: &Path, debs: &[(&str, &str, PathBuf)]) -> PathBuf {
    let mut entries = Vec::new();
    for (pkg, version, deb) in debs {
        let name = deb.file_name().unwrap().to_str().unwrap();
        let filename = format!("pool/main/{}/{pkg}/{name}", &pkg[..1]);
        let dest = dir.join("mirror").join(&filename);
        fs::create_dir_all(dest.parent().unwrap()).unwrap();
        fs::copy(deb, &dest).unwrap();
        let size = fs::metadata(&dest).unwrap().len();
        entries.push(format!(
            r#"{{"package": "{pkg}", "version": "{version}", "architecture": "amd64", "filename": "{filename}", "size": {size}, "sha256": "{}"}}"#,
            sha256_hex(&dest)
        ));
    }
    let path = dir.join("test.lock.json");
    fs::write(
        &path,
        format!("{{\"packages\": [\n{}\n]}}\n", entries.join(",\n")),
    )
    .unwrap();
    path
}

/// `rocmx build -L --no-link --print-out-paths --expr (debianRootfs …)` with the
/// loopback mirror.
fn build_root(dir: &Path, lock: &Path) -> Output {
    // The mirror: `GET /pool/…` gives `dir/mirror/pool/…`, 404 otherwise.
    let port = Server::dir(dir.join("mirror")).port();
    let conf = dir.join("rocmx.conf");
    fs::write(&conf, format!("mirror.debian = http://127.0.0.1:{port}\n")).unwrap();
    let expr = format!(
        r#"(import {REPO}/exprs/lib/debian.nix).debianRootfs {{ name = "test-root"; lock = {}; }}"#,
        lock.display()
    );
    Command::new(BIN)
        .env_remove("ROCMX_STORE")
        .env("ROCMX_CONFIG", &conf)
        .env("XDG_CONFIG_HOME", dir.join("xdg"))
        .arg("--store")
        .arg(dir.join("store"))
        .args(["build", "-L", "--no-link", "--print-out-paths", "--expr"])
        .arg(&expr)
        .output()
        .expect("run rocmx")
}

fn physical(dir: &Path, logical: &str) -> PathBuf {
    let base = logical
        .trim()
        .strip_prefix("/rocmx/store/")
        .unwrap_or_else(|| panic!("not a store path: {logical}"));
    dir.join("store/store").join(base)
}

fn skip() -> bool {
    for t in ["dpkg-deb", "ar", "tar", "sha256sum"] {
        if !have(t) {
            eprintln!("SKIP: no {t}");
            return true;
        }
    }
    false
}

#[test]
fn a_lock_becomes_a_merged_usr_root() {
    if skip() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let work = dir.join("work");
    fs::create_dir_all(&work).unwrap();
    // a: /bin/foo (merged into /usr/bin), a link next to it, a hard link, a
    // setuid file, and what the link list looks for.
    let a = dpkg_deb(&work, "pkg-a", "xz", |t| {
        write(&t.join("bin/foo"), "#!/bin/sh\necho a\n", 0o755);
        std::os::unix::fs::symlink("foo", t.join("bin/foo-alias")).unwrap();
        write(&t.join("usr/share/pkg-a/one"), "shared\n", 0o644);
        fs::hard_link(t.join("usr/share/pkg-a/one"), t.join("usr/share/pkg-a/two")).unwrap();
        write(&t.join("usr/bin/su-ish"), "#!/bin/sh\n", 0o4755);
        write(&t.join("sbin/tool"), "#!/bin/sh\n", 0o755);
        for f in ["gcc", "python3.13", "clang-21", "ld.lld-21", "mawk"] {
            write(&t.join("usr/bin").join(f), "#!/bin/sh\n", 0o755);
        }
        write(
            &t.join("etc/ld.so.conf.d/x86_64-linux-gnu.conf"),
            "/usr/local/lib/x86_64-linux-gnu\n",
            0o644,
        );
    });
    // b: /usr/bin/foo, the same file as a's /bin/foo once /usr is merged; later
    // in the lock, so it wins.
    let b = dpkg_deb(&work, "pkg-b", "zstd", |t| {
        write(&t.join("usr/bin/foo"), "#!/bin/sh\necho b\n", 0o755);
    });
    let hostname = Path::new(REPO).join("tests/data/hostname_3.23+nmu1_amd64.deb");
    let lock = lock(
        dir,
        &[
            ("hostname", "3.23+nmu1", hostname),
            ("pkg-a", "1:1.0-1", a),
            ("pkg-b", "1:1.0-1", b),
        ],
    );
    let o = build_root(dir, &lock);
    let e = err(&o);
    assert!(o.status.success(), "build failed:\n{e}");
    let root = physical(dir, &String::from_utf8_lossy(&o.stdout));

    // Merged /usr.
    for d in ["bin", "sbin", "lib", "lib64"] {
        assert_eq!(
            fs::read_link(root.join(d)).unwrap(),
            Path::new("usr").join(d),
            "/{d}"
        );
        assert!(root.join("usr").join(d).is_dir(), "/usr/{d}");
    }
    assert!(root.join("usr/bin/hostname").is_file());
    assert_eq!(
        fs::read_link(root.join("usr/bin/dnsdomainname")).unwrap(),
        Path::new("hostname")
    );
    assert!(root.join("usr/sbin/tool").is_file());
    assert_eq!(
        fs::read_to_string(root.join("usr/bin/foo")).unwrap(),
        "#!/bin/sh\necho b\n"
    );
    assert!(
        e.contains("pkg-b replaces /usr/bin/foo from pkg-a"),
        "overwrite not reported:\n{e}"
    );
    assert_eq!(
        fs::read_link(root.join("usr/bin/foo-alias")).unwrap(),
        Path::new("foo")
    );
    assert_eq!(
        fs::read_to_string(root.join("usr/share/pkg-a/two")).unwrap(),
        "shared\n"
    );
    // No setuid bits; the executable bit is kept.
    let m = fs::metadata(root.join("usr/bin/su-ish"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(m & 0o6000, 0, "mode {m:o}");
    assert_ne!(m & 0o111, 0, "mode {m:o}");
    // The link list: made where missing, the package's own kept.
    let link = |n: &str| fs::read_link(root.join("usr/bin").join(n)).ok();
    assert_eq!(link("cc"), Some(PathBuf::from("gcc")));
    assert_eq!(link("python3"), Some(PathBuf::from("python3.13")));
    assert_eq!(link("clang"), Some(PathBuf::from("clang-21")));
    assert_eq!(link("ld.lld"), Some(PathBuf::from("ld.lld-21")));
    assert_eq!(link("awk"), Some(PathBuf::from("mawk")));
    assert_eq!(link("c++"), None, "no g++, so no c++");
    assert!(e.contains("link /usr/bin/python3 -> python3.13"), "{e}");
    assert!(e.contains("no ld.so.cache is made"), "{e}");
    assert!(root
        .join("etc/ld.so.conf.d/x86_64-linux-gnu.conf")
        .is_file());

    // The same lock is the same root: a second build is instant and equal.
    let o2 = build_root(dir, &lock);
    assert!(o2.status.success(), "{}", err(&o2));
    assert_eq!(o.stdout, o2.stdout);
    make_writable(dir);
}

#[test]
fn a_hostile_deb_is_refused_naming_it() {
    if skip() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let work = dir.join("work");
    fs::create_dir_all(&work).unwrap();
    let evil = hostile_deb(&work);
    // tar -P kept the '..' (check the fixture itself).
    let mut listing = String::new();
    Command::new("ar")
        .arg("p")
        .arg(&evil)
        .arg("data.tar")
        .output()
        .map(|o| o.stdout)
        .map(|b| {
            let mut t = tar_names(&b);
            t.read_to_string(&mut listing).unwrap();
        })
        .unwrap();
    assert!(listing.contains("../escape"), "{listing}");

    let lock = lock(dir, &[("evil", "1.0", evil)]);
    let o = build_root(dir, &lock);
    let e = err(&o);
    assert_eq!(o.status.code(), Some(100), "{e}");
    assert!(
        e.contains("refusing hostile entry '../escape'") && e.contains("the path contains '..'"),
        "{e}"
    );
    assert!(e.contains("evil_1.0.deb: member 'data.tar'"), "{e}");
    assert!(!e.contains("panicked"), "{e}");
    make_writable(dir);
}

/// The entry names of a plain tar, one a line (`tar -t` on the bytes).
fn tar_names(bytes: &[u8]) -> impl Read {
    let mut child = Command::new("tar")
        .args(["-tf", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("tar -t");
    child.stdin.take().unwrap().write_all(bytes).unwrap();
    let o = child.wait_with_output().unwrap();
    std::io::Cursor::new(o.stdout)
}

#[test]
fn a_pinned_deb_the_mirror_lost_fails_naming_it() {
    if skip() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let work = dir.join("work");
    fs::create_dir_all(&work).unwrap();
    let gone = dpkg_deb(&work, "pkg-gone", "gzip", |t| {
        write(&t.join("usr/share/gone/x"), "x\n", 0o644);
    });
    let lock = lock(dir, &[("pkg-gone", "1:1.0-1", gone)]);
    // The pool dropped it after the lock was written.
    fs::remove_dir_all(dir.join("mirror/pool/main/p/pkg-gone")).unwrap();
    let o = build_root(dir, &lock);
    let e = err(&o);
    assert_eq!(o.status.code(), Some(100), "{e}");
    assert!(e.contains("pkg-gone_1_1.0-1.deb"), "{e}");
    // … and says how to recover.
    assert!(
        e.contains("the pinned pkg-gone 1:1.0-1 is no longer on the mirror: run 'rocmx debian lock --update'"),
        "{e}"
    );
    assert!(e.contains("404"), "{e}");
    assert!(!e.contains("panicked"), "{e}");
    make_writable(dir);
}
