//! `rocmx debian lock` against a small fake Debian archive that the test
//! writes (InRelease in a clearsign envelope, Packages.xz made with the `xz`
//! CLI, checksums with `sha256sum`) and serves from a loopback HTTP server
//! (`--mirror http://127.0.0.1:PORT/debian`).
//!
//! Covered: alternatives (first satisfiable), Provides (a virtual name, a
//! provider already chosen, versioned Provides), version constraints that
//! choose and refuse, the Essential and Priority: required seed,
//! Pre-Depends, Recommends ignored, architecture restrictions, other
//! architectures skipped, `X-Rocm-Gpu-Architecture`, an unsatisfiable name
//! (the error names the chain), a Packages.xz checksum mismatch, an expired
//! Valid-Until (refused; accepted with --allow-expired or apt's setting),
//! the Release fallback, "up to date" and byte-identical re-locking.

mod common;
use common::http::Server;
use common::{err, out};

use std::fs;
use std::path::PathBuf;
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_rocmx");

/// One package paragraph: the given fields plus Filename, Size and SHA256.
fn para(name: &str, version: &str, arch: &str, extra: &str) -> String {
    let sha = format!("{:064x}", name.len() * 1000 + version.len());
    format!(
        "Package: {name}\nVersion: {version}\nArchitecture: {arch}\n{extra}\
Description: {name}\n long text\n .\n more\n\
Filename: pool/main/{c}/{name}/{name}_{version}_{arch}.deb\nSize: {size}\nSHA256: {sha}\n\n",
        c = &name[..1],
        size = 100 + name.len()
    )
}

fn packages() -> String {
    [
        para("base-files", "13", "all", "Essential: yes\nPriority: required\n"),
        para("dash", "0.5", "amd64", "Priority: required\nPre-Depends: libc6 (>= 2.3)\n"),
        para("libc6", "2.40-1", "amd64", "Priority: optional\nMulti-Arch: same\n"),
        para(
            "app",
            "1.0",
            "amd64",
            "Pre-Depends: preinst-helper\n\
Depends: missing-alt | realalt, first | second, awk, editor, libfoo (<< 3), tool:any,\n winonly [i386], abi-virt (>= 2), librocfoo\nRecommends: recommended\n",
        ),
        para("preinst-helper", "1", "all", ""),
        para("realalt", "1", "all", ""),
        para("first", "1", "all", ""),
        para("second", "1", "all", ""),
        para("recommended", "1", "all", ""),
        para("mawk", "1.3", "amd64", "Provides: awk\n"),
        para("gawk", "5.2", "amd64", "Provides: awk\n"),
        para("nano", "8", "amd64", "Provides: editor\n"),
        para("vim", "9", "amd64", "Provides: editor\n"),
        para("libfoo", "1.0", "amd64", ""),
        para("libfoo", "3.0", "amd64", ""),
        para("libfoo", "2.0", "amd64", ""),
        para("tool", "1", "amd64", "Multi-Arch: allowed\n"),
        para("abi-a", "1", "all", "Provides: abi-virt (= 1)\n"),
        para("abi-b", "1", "all", "Provides: abi-virt\n"),
        para("abi-c", "1", "all", "Provides: abi-virt (= 2)\n"),
        para("librocfoo", "6.4", "amd64", "X-Rocm-Gpu-Architecture: gfx90a gfx1100\n"),
        para("armonly", "1", "arm64", "Essential: yes\n"),
        para("broken", "1", "all", "Depends: middle\n"),
        para("middle", "1", "all", "Depends: libc6, nosuch (>= 1) | alsonot\n"),
        para("needsnew", "1", "all", "Depends: libfoo (>= 5)\n"),
    ]
    .concat()
}

struct Repo {
    _dir: tempfile::TempDir,
    root: PathBuf,
    port: u16,
    work: PathBuf,
    apt: PathBuf,
}

/// Writes the archive: `Packages.xz` and `InRelease` (or only `Release`),
/// with `valid_until` and, when `tamper`, a wrong SHA-256 of the right size.
fn repo(valid_until: &str, tamper: bool, inrelease: bool) -> Repo {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("www");
    let suite = root.join("debian/dists/sid");
    let bin = suite.join("main/binary-amd64");
    fs::create_dir_all(&bin).unwrap();
    fs::write(bin.join("Packages"), packages()).unwrap();
    let st = Command::new("xz")
        .args(["-9", "-k"])
        .arg(bin.join("Packages"))
        .status()
        .expect("xz");
    assert!(st.success());
    let xz = fs::read(bin.join("Packages.xz")).unwrap();
    let sum = Command::new("sha256sum")
        .arg(bin.join("Packages.xz"))
        .output()
        .unwrap();
    let mut sha = out(&sum)[..64].to_string();
    if tamper {
        let flipped = if sha.starts_with('0') { "1" } else { "0" };
        sha.replace_range(..1, flipped);
    }
    let release = format!(
        "Origin: Fake\nSuite: unstable\nCodename: sid\n\
Date: Fri, 30 Oct 2026 08:08:01 UTC\nValid-Until: {valid_until}\n\
Architectures: all amd64 arm64\nComponents: main\nDescription: fake\n\
SHA256:\n {sha} {} main/binary-amd64/Packages.xz\n \
{} 3 main/binary-amd64/Release\n",
        xz.len(),
        "a".repeat(64)
    );
    if inrelease {
        let signed = format!(
            "-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA256\n\n{release}\
-----BEGIN PGP SIGNATURE-----\n\nnot-a-real-signature\n-----END PGP SIGNATURE-----\n"
        );
        fs::write(suite.join("InRelease"), signed).unwrap();
    } else {
        fs::write(suite.join("Release"), release).unwrap();
    }
    let work = dir.path().join("work");
    let apt = dir.path().join("apt-root");
    fs::create_dir_all(&work).unwrap();
    fs::create_dir_all(apt.join("etc/apt/apt.conf.d")).unwrap();
    // `GET /a/b` gives `root/a/b`, 404 otherwise.
    let port = Server::dir(&root).port();
    Repo {
        _dir: dir,
        root,
        port,
        work,
        apt,
    }
}

const FUTURE: &str = "Fri, 01 Jan 2100 00:00:00 UTC";
const PAST: &str = "Sat, 01 Jan 2000 00:00:00 UTC";

impl Repo {
    fn lock(&self, packages: &str, extra: &[&str]) -> Output {
        Command::new(BIN)
            .args(["debian", "lock", "--suite", "sid", "--packages", packages])
            .arg("--mirror")
            .arg(format!("http://127.0.0.1:{}/debian", self.port))
            .args(extra)
            .current_dir(&self.work)
            .env("ROCMX_CONFIG", "/dev/null")
            .env("ROCMX_APT_ROOT", &self.apt)
            .output()
            .expect("rocmx")
    }

    fn lock_file(&self) -> String {
        fs::read_to_string(self.work.join("debian.lock.json")).unwrap()
    }
}

fn names_versions(lock: &str) -> Vec<(String, String)> {
    let v: serde_json::Value = serde_json::from_str(lock).unwrap();
    v["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["package"].as_str().unwrap().to_string(),
                p["version"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn resolves_the_fake_archive_and_relocks_identically() {
    let r = repo(FUTURE, false, true);
    let o = r.lock("app,vim", &[]);
    assert!(o.status.success(), "{}", err(&o));
    assert!(out(&o).contains("locked 13 packages"), "{}", out(&o));
    assert!(err(&o).contains("signature is not verified"), "{}", err(&o));
    let text = r.lock_file();
    let got = names_versions(&text);
    let want: Vec<(String, String)> = [
        ("abi-c", "1"),          // versioned Provides: only (= 2) satisfies (>= 2)
        ("app", "1.0"),          // requested
        ("base-files", "13"),    // Essential: yes
        ("dash", "0.5"),         // Priority: required
        ("first", "1"),          // first | second: the first
        ("gawk", "5.2"),         // awk: providers by name
        ("libc6", "2.40-1"),     // Pre-Depends of dash
        ("libfoo", "2.0"),       // (<< 3): the newest allowed, not 3.0
        ("librocfoo", "6.4"),    // gfx field kept
        ("preinst-helper", "1"), // Pre-Depends of app
        ("realalt", "1"),        // missing-alt | realalt
        ("tool", "1"),           // tool:any
        ("vim", "9"),            // requested; also provides editor (no nano)
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    assert_eq!(got, want);
    assert!(
        !text.contains("recommended") && !text.contains("armonly") && !text.contains("winonly")
    );
    assert!(text.ends_with("}\n"));
    assert!(text.contains("\"date\": \"Fri, 30 Oct 2026 08:08:01 UTC\""));
    assert!(
        text.contains("\"requested\": [\n    \"app\",\n    \"vim\"\n  ]"),
        "{text}"
    );
    assert!(
        text.contains("\"gfxArchitectures\": [\n        \"gfx90a\",\n        \"gfx1100\"\n      ]"),
        "{text}"
    );
    assert_eq!(text.matches("gfxArchitectures").count(), 1);
    assert!(text.contains("\"filename\": \"pool/main/l/libfoo/libfoo_2.0_amd64.deb\""));
    assert!(!text.contains("127.0.0.1"), "no mirror host in the lock");

    // The same request: up to date, nothing rewritten.
    let o = r.lock("vim,app,app", &[]);
    assert!(o.status.success(), "{}", err(&o));
    assert!(out(&o).contains("is up to date"), "{}", out(&o));
    // Re-resolving gives the same bytes.
    let o = r.lock("app,vim", &["--update"]);
    assert!(o.status.success(), "{}", err(&o));
    assert!(out(&o).contains("locked 13 packages"), "{}", out(&o));
    assert_eq!(r.lock_file(), text);
    // Another request re-resolves without --update.
    let o = r.lock("app", &[]);
    assert!(o.status.success(), "{}", err(&o));
    let got = names_versions(&r.lock_file());
    assert!(
        got.iter().any(|(n, _)| n == "nano"),
        "editor by name now: {got:?}"
    );
    assert!(!got.iter().any(|(n, _)| n == "vim"));
}

#[test]
fn unsatisfiable_names_who_needed_it() {
    let r = repo(FUTURE, false, true);
    let o = r.lock("broken", &[]);
    assert!(!o.status.success());
    let e = err(&o);
    assert!(
        e.contains("cannot satisfy 'nosuch (>= 1) | alsonot'"),
        "{e}"
    );
    assert!(e.contains("Depends of middle 1"), "{e}");
    assert!(e.contains("no package or provider named 'nosuch'"), "{e}");
    assert!(
        e.contains("chain: broken (requested) -> middle -> nosuch (>= 1) | alsonot"),
        "{e}"
    );
    assert!(!r.work.join("debian.lock.json").exists());

    let o = r.lock("no-such-package", &[]);
    assert!(!o.status.success());
    assert!(
        err(&o).contains("cannot satisfy 'no-such-package' (requested)"),
        "{}",
        err(&o)
    );
}

#[test]
fn a_version_constraint_refuses() {
    let r = repo(FUTURE, false, true);
    let o = r.lock("needsnew", &[]);
    assert!(!o.status.success());
    let e = err(&o);
    assert!(
        e.contains("'libfoo' has versions 3.0 [amd64], 2.0 [amd64], 1.0 [amd64]"),
        "{e}"
    );
    assert!(e.contains("none satisfies 'libfoo (>= 5)'"), "{e}");
    assert!(
        e.contains("chain: needsnew (requested) -> libfoo (>= 5)"),
        "{e}"
    );
    // A constraint on the request itself.
    let o = r.lock("libfoo (<< 2)", &[]);
    assert!(o.status.success(), "{}", err(&o));
    assert!(names_versions(&r.lock_file()).contains(&("libfoo".into(), "1.0".into())));
}

#[test]
fn a_tampered_packages_index_is_refused() {
    let r = repo(FUTURE, true, true);
    let o = r.lock("app", &[]);
    assert!(!o.status.success());
    let e = err(&o);
    assert!(
        e.contains("'dists/sid/main/binary-amd64/Packages.xz' has SHA-256"),
        "{e}"
    );
    assert!(e.contains("but InRelease says"), "{e}");
}

#[test]
fn an_expired_release_needs_consent() {
    let r = repo(PAST, false, true);
    let o = r.lock("app", &[]);
    assert!(!o.status.success());
    let e = err(&o);
    assert!(
        e.contains("expired on Sat, 01 Jan 2000 00:00:00 UTC"),
        "{e}"
    );
    assert!(e.contains("--allow-expired"), "{e}");

    let o = r.lock("app", &["--allow-expired"]);
    assert!(o.status.success(), "{}", err(&o));
    let e = err(&o);
    assert!(
        e.contains("warning: the Release file of suite 'sid' is expired: valid until Sat, 01 Jan 2000 00:00:00 UTC"),
        "{e}"
    );
    assert!(e.contains("because of --allow-expired"), "{e}");

    // apt's own setting counts too.
    fs::write(
        r.apt.join("etc/apt/apt.conf.d/99snapshot"),
        "// snapshot mirror\nAcquire::Check-Valid-Until \"false\";\n",
    )
    .unwrap();
    let o = r.lock("app", &["--update"]);
    assert!(o.status.success(), "{}", err(&o));
    assert!(
        err(&o).contains("Acquire::Check-Valid-Until \"false\" in '"),
        "{}",
        err(&o)
    );
}

#[test]
fn falls_back_to_release() {
    let r = repo(FUTURE, false, false);
    assert!(!r.root.join("debian/dists/sid/InRelease").exists());
    let o = r.lock("app,vim", &["-o", "x.json"]);
    assert!(o.status.success(), "{}", err(&o));
    let text = fs::read_to_string(r.work.join("x.json")).unwrap();
    assert_eq!(names_versions(&text).len(), 13);
}
