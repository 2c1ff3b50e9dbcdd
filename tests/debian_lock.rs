//! `rocmx debian lock` against a small fake Debian archive that the test
//! writes (InRelease clearsigned with a throwaway OpenPGP key that `gpg`
//! makes for each archive, or Release + Release.gpg; Packages.xz made with
//! the `xz` CLI, checksums with `sha256sum`) and serves from a loopback
//! HTTP server (`--mirror http://127.0.0.1:PORT/debian`). The archive's
//! public key is passed with `--keyring` unless a test says otherwise.
//!
//! Covered: alternatives (first satisfiable), Provides (a virtual name, a
//! provider already chosen, versioned Provides), version constraints that
//! choose and refuse, the Essential and Priority: required seed,
//! Pre-Depends, Recommends ignored, architecture restrictions, other
//! architectures skipped, `X-Rocm-Gpu-Architecture`, an unsatisfiable name
//! (the error names the chain), a Packages.xz checksum mismatch, an expired
//! Valid-Until (refused; accepted with --allow-expired or apt's setting),
//! the Release fallback, "up to date" and byte-identical re-locking.
//!
//! Signatures (verified with gpgv): a good one (InRelease, and Release +
//! Release.gpg); a checksum changed inside the signed text (BAD, refused
//! before the index is fetched); unsigned text appended after the signature
//! block (refused, and ignored under --allow-unsigned); a key not in the
//! keyrings (refused with its fingerprint and the fix); an unsigned
//! InRelease or Release (refused; --allow-unsigned works with a warning);
//! the keyrings apt would use (an armoured --keyring, the Signed-By of the
//! apt source for the mirror, which wins over the default keyrings, and
//! the default keyrings under ROCMX_APT_ROOT); no gpgv (install it).

mod common;
use common::http::Server;
use common::{err, out};

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
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
    server: Server,
    work: PathBuf,
    apt: PathBuf,
    /// The archive's signing key.
    key: Key,
    /// The signed text: what `InRelease` (or `Release`) holds inside the
    /// envelope.
    release: String,
}

/// A throwaway OpenPGP key (ed25519, no passphrase) in its own gpg home.
/// gpg-agent, which gpg starts for secret-key work, is stopped after every
/// call so that no test leaves one running.
struct Key {
    home: PathBuf,
    /// The public key, exported as a binary keyring file.
    keyring: PathBuf,
    /// The same, ASCII-armoured.
    armored: PathBuf,
    /// The primary key's fingerprint.
    fpr: String,
}

impl Key {
    fn new(dir: &Path, name: &str) -> Key {
        let home = dir.join(format!("gnupg-{name}"));
        fs::create_dir_all(&home).unwrap();
        fs::set_permissions(&home, fs::Permissions::from_mode(0o700)).unwrap();
        let k = Key {
            keyring: dir.join(format!("{name}.gpg")),
            armored: dir.join(format!("{name}.asc")),
            home,
            fpr: String::new(),
        };
        k.gpg(&[
            "--passphrase",
            "",
            "--quick-gen-key",
            &format!("rocmx test {name} <{name}@example.invalid>"),
            "ed25519",
            "sign",
            "never",
        ]);
        let bin = k.gpg(&["--export"]);
        assert!(!bin.stdout.is_empty(), "gpg --export gave nothing");
        fs::write(&k.keyring, &bin.stdout).unwrap();
        fs::write(&k.armored, k.gpg(&["--export", "--armor"]).stdout).unwrap();
        let listing = out(&k.gpg(&["--with-colons", "--list-keys"]));
        let fpr = listing
            .lines()
            .find_map(|l| l.strip_prefix("fpr:"))
            .map(|l| l.trim_matches(':').to_string())
            .expect("a fingerprint");
        Key { fpr, ..k }
    }

    /// Runs gpg in this key's home (checking it succeeds), then stops the
    /// agent.
    fn gpg(&self, args: &[&str]) -> Output {
        let o = Command::new("gpg")
            .arg("--homedir")
            .arg(&self.home)
            .args(["--batch", "--no-tty", "--quiet"])
            .args(args)
            .output()
            .expect("gpg (Debian's gpg package) runs");
        let _ = Command::new("gpgconf")
            .arg("--homedir")
            .arg(&self.home)
            .args(["--kill", "gpg-agent"])
            .output();
        assert!(o.status.success(), "gpg {args:?}: {}", err(&o));
        o
    }

    /// `text` clearsigned.
    fn clearsign(&self, text: &str) -> String {
        let f = self.home.join("to-sign");
        fs::write(&f, text).unwrap();
        let o = self.gpg(&["--clearsign", "--output", "-", f.to_str().unwrap()]);
        String::from_utf8(o.stdout).unwrap()
    }

    /// A detached binary signature of `data` (`Release.gpg`).
    fn detach_sign(&self, data: &str) -> Vec<u8> {
        let f = self.home.join("to-sign");
        fs::write(&f, data).unwrap();
        self.gpg(&["--detach-sign", "--output", "-", f.to_str().unwrap()])
            .stdout
    }
}

/// Writes the archive: `Packages.xz` and `InRelease` (or `Release` and
/// `Release.gpg`), signed by a new key, with `valid_until` and, when
/// `tamper`, a wrong SHA-256 of the right size (signed: the archive lies).
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
    let key = Key::new(dir.path(), "archive");
    if inrelease {
        fs::write(suite.join("InRelease"), key.clearsign(&release)).unwrap();
    } else {
        fs::write(suite.join("Release"), &release).unwrap();
        fs::write(suite.join("Release.gpg"), key.detach_sign(&release)).unwrap();
    }
    let work = dir.path().join("work");
    let apt = dir.path().join("apt-root");
    fs::create_dir_all(&work).unwrap();
    fs::create_dir_all(apt.join("etc/apt/apt.conf.d")).unwrap();
    // `GET /a/b` gives `root/a/b`, 404 otherwise.
    let server = Server::dir(&root);
    Repo {
        _dir: dir,
        root,
        port: server.port(),
        server,
        work,
        apt,
        key,
        release,
    }
}

const FUTURE: &str = "Fri, 01 Jan 2100 00:00:00 UTC";
const PAST: &str = "Sat, 01 Jan 2000 00:00:00 UTC";

impl Repo {
    /// `rocmx debian lock` with the archive's key as `--keyring` (unless
    /// `extra` says `--allow-unsigned`).
    fn lock(&self, packages: &str, extra: &[&str]) -> Output {
        let mut args: Vec<&str> = extra.to_vec();
        if !extra.contains(&"--allow-unsigned") {
            args.push("--keyring");
            args.push(self.key.keyring.to_str().unwrap());
        }
        self.lock_bare(packages, &args)
    }

    /// `rocmx debian lock` with only `extra`.
    fn lock_bare(&self, packages: &str, extra: &[&str]) -> Output {
        self.command(packages, extra).output().expect("rocmx")
    }

    fn command(&self, packages: &str, extra: &[&str]) -> Command {
        let mut c = Command::new(BIN);
        c.args(["debian", "lock", "--suite", "sid", "--packages", packages])
            .arg("--mirror")
            .arg(self.mirror())
            .args(extra)
            .current_dir(&self.work)
            .env("ROCMX_CONFIG", "/dev/null")
            .env("ROCMX_APT_ROOT", &self.apt);
        c
    }

    fn mirror(&self) -> String {
        format!("http://127.0.0.1:{}/debian", self.port)
    }

    fn inrelease(&self) -> PathBuf {
        self.root.join("debian/dists/sid/InRelease")
    }

    /// Whether the Packages index was asked for.
    fn fetched_index(&self) -> bool {
        self.server
            .requests()
            .iter()
            .any(|r| r.ends_with("/Packages.xz"))
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
    assert!(
        err(&o).contains(&format!(
            "verified dists/sid/InRelease: good signature by rocmx test archive <archive@example.invalid> (key {}) (--keyring)",
            r.key.fpr
        )),
        "{}",
        err(&o)
    );
    assert!(!err(&o).contains("not verified"), "{}", err(&o));
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
    assert!(
        err(&o).contains("verified dists/sid/Release: good signature by rocmx test archive"),
        "{}",
        err(&o)
    );
    let text = fs::read_to_string(r.work.join("x.json")).unwrap();
    assert_eq!(names_versions(&text).len(), 13);

    // Release changed after Release.gpg was made: BAD.
    let release = r.root.join("debian/dists/sid/Release");
    fs::write(
        &release,
        r.release.replace("Description: fake", "Description: evil"),
    )
    .unwrap();
    let o = r.lock("app,vim", &["-o", "y.json"]);
    assert!(!o.status.success());
    assert!(
        err(&o).contains("cannot trust dists/sid/Release of suite 'sid': the signature by key"),
        "{}",
        err(&o)
    );
    assert!(err(&o).contains("is BAD"), "{}", err(&o));
    assert!(!r.work.join("y.json").exists());
}

/// The part of the archive's Release text that lists Packages.xz, and the
/// same line with another hash.
fn packages_line(release: &str) -> (String, String) {
    let line = release
        .lines()
        .find(|l| l.ends_with(" main/binary-amd64/Packages.xz"))
        .unwrap()
        .to_string();
    let hash = line.split_whitespace().next().unwrap();
    let other = if hash.starts_with('0') { "1" } else { "0" };
    let forged = line.replacen(&hash[..1], other, 1);
    (line, forged)
}

#[test]
fn a_changed_line_inside_the_signed_text_is_refused() {
    let r = repo(FUTURE, false, true);
    let signed = fs::read_to_string(r.inrelease()).unwrap();
    let (line, forged) = packages_line(&r.release);
    assert!(signed.contains(&line));
    fs::write(r.inrelease(), signed.replace(&line, &forged)).unwrap();
    let o = r.lock("app", &[]);
    assert!(!o.status.success());
    let e = err(&o);
    // BADSIG names the long key id (the fingerprint's last 16 digits).
    assert!(
        e.contains(&format!(
            "error: cannot trust dists/sid/InRelease of suite 'sid': the signature by key {} (rocmx test archive <archive@example.invalid>) is BAD: \
             the signed text was changed after signing (tampered with, or damaged by the mirror or a proxy); keyrings used: --keyring ({})",
            &r.key.fpr[24..],
            r.key.keyring.display()
        )),
        "{e}"
    );
    assert!(
        e.contains("To fix: use a mirror that serves the archive's signed files, or pass --allow-unsigned to proceed without verification"),
        "{e}"
    );
    assert!(!r.fetched_index(), "nothing is read past a bad Release");
    assert!(!r.work.join("debian.lock.json").exists());
}

#[test]
fn text_after_the_signature_block_is_not_used() {
    let r = repo(FUTURE, false, true);
    let signed = fs::read_to_string(r.inrelease()).unwrap();
    let (_, forged) = packages_line(&r.release);
    // Another SHA256 list after the signature: a parser that read past the
    // signed block (or a lax deb822 reader) would take the forged hash.
    let appended = format!("{signed}\nSHA256:\n{forged}\n");
    fs::write(r.inrelease(), &appended).unwrap();
    let o = r.lock("app", &[]);
    assert!(!o.status.success());
    let e = err(&o);
    assert!(
        e.contains(
            "cannot trust dists/sid/InRelease of suite 'sid': it is not exactly one signed message"
        ),
        "{e}"
    );
    assert!(
        e.contains("unsigned text after the signature: 'SHA256:' (the signature covers only the text before it)"),
        "{e}"
    );
    assert!(!r.fetched_index());

    // Text put before the signed block is refused the same way.
    fs::write(r.inrelease(), format!("SHA256:\n{forged}\n\n{signed}")).unwrap();
    let o = r.lock("app", &[]);
    assert!(!o.status.success());
    assert!(
        err(&o).contains("unsigned text before the signed message: 'SHA256:'"),
        "{}",
        err(&o)
    );

    // Unverified (--allow-unsigned), the appended list is still ignored:
    // the signed block's hash is the one checked, so the index matches
    // (the forged one would not).
    fs::write(r.inrelease(), &appended).unwrap();
    let o = r.lock("app", &["--allow-unsigned"]);
    assert!(o.status.success(), "{}", err(&o));
    assert!(r.work.join("debian.lock.json").exists());
}

#[test]
fn an_unknown_key_is_refused_with_its_id_and_the_fix() {
    let r = repo(FUTURE, false, true);
    let dir = tempfile::tempdir().unwrap();
    let other = Key::new(dir.path(), "other");
    let o = r.lock_bare("app", &["--keyring", other.keyring.to_str().unwrap()]);
    assert!(!o.status.success());
    let e = err(&o);
    assert!(
        e.contains(&format!(
            "error: cannot trust dists/sid/InRelease of suite 'sid': it is signed by key {}, which is not in the keyrings (NO_PUBKEY); \
             keyrings used: --keyring ({})",
            r.key.fpr,
            other.keyring.display()
        )),
        "{e}"
    );
    assert!(
        e.contains("To fix: pass --keyring FILE with the archive's public key (a binary or ASCII-armoured OpenPGP keyring), or --allow-unsigned to proceed without verification"),
        "{e}"
    );
    assert!(!r.fetched_index());
    // Both keyrings: the archive's key is found.
    let o = r.lock_bare(
        "app",
        &[
            "--keyring",
            other.keyring.to_str().unwrap(),
            "--keyring",
            r.key.keyring.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", err(&o));
}

#[test]
fn an_unsigned_archive_needs_allow_unsigned() {
    // A Release without Release.gpg.
    let r = repo(FUTURE, false, false);
    fs::remove_file(r.root.join("debian/dists/sid/Release.gpg")).unwrap();
    let o = r.lock("app", &[]);
    assert!(!o.status.success());
    let e = err(&o);
    assert!(
        e.contains("cannot trust dists/sid/Release of suite 'sid': the suite has no InRelease and the Release file is not signed (dists/sid/Release.gpg: "),
        "{e}"
    );
    assert!(
        e.contains("pass --allow-unsigned to proceed without verification"),
        "{e}"
    );
    assert!(!r.work.join("debian.lock.json").exists());

    let o = r.lock("app", &["--allow-unsigned"]);
    assert!(o.status.success(), "{}", err(&o));
    assert!(
        err(&o).contains("warning: --allow-unsigned: the Release file of suite 'sid' is used WITHOUT verifying its OpenPGP signature"),
        "{}",
        err(&o)
    );
    assert!(!err(&o).contains("verified dists"), "{}", err(&o));
    assert!(out(&o).contains("locked "), "{}", out(&o));

    // An InRelease that is plain text.
    let r = repo(FUTURE, false, true);
    fs::write(r.inrelease(), &r.release).unwrap();
    let o = r.lock("app", &[]);
    assert!(!o.status.success());
    assert!(
        err(&o).contains("cannot trust dists/sid/InRelease of suite 'sid': dists/sid/InRelease is not signed (no '-----BEGIN PGP SIGNED MESSAGE-----')"),
        "{}",
        err(&o)
    );
    let o = r.lock("app", &["--allow-unsigned"]);
    assert!(o.status.success(), "{}", err(&o));
}

#[test]
fn keyrings_come_from_the_apt_source_then_the_defaults() {
    let r = repo(FUTURE, false, true);
    let dir = tempfile::tempdir().unwrap();
    let other = Key::new(dir.path(), "other");

    // An armoured --keyring is dearmoured for gpgv; messages name the
    // file as given.
    let o = r.lock_bare("app", &["--keyring", r.key.armored.to_str().unwrap()]);
    assert!(o.status.success(), "{}", err(&o));
    let o = r.lock_bare(
        "app",
        &["--update", "--keyring", other.armored.to_str().unwrap()],
    );
    assert!(!o.status.success());
    assert!(
        err(&o).contains(&format!(
            "keyrings used: --keyring ({}).",
            other.armored.display()
        )),
        "{}",
        err(&o)
    );

    // Nothing given, no apt source, no default keyring under the root.
    let o = r.lock_bare("app", &["--update"]);
    assert!(!o.status.success());
    let e = err(&o);
    assert!(
        e.contains(&format!(
            "error: cannot verify dists/sid/InRelease of suite 'sid': no keyring (the default keyrings under {}, of which none exists: \
             usr/share/keyrings/debian-archive-keyring.gpg, etc/apt/trusted.gpg, etc/apt/trusted.gpg.d/*.gpg and *.asc). \
             To fix: pass --keyring FILE",
            r.apt.display()
        )),
        "{e}"
    );

    // The default keyrings: etc/apt/trusted.gpg.d/*.asc under the root.
    let trusted = r.apt.join("etc/apt/trusted.gpg.d");
    fs::create_dir_all(&trusted).unwrap();
    fs::copy(&r.key.armored, trusted.join("archive.asc")).unwrap();
    let o = r.lock_bare("app", &["--update"]);
    assert!(o.status.success(), "{}", err(&o));
    assert!(
        err(&o).contains(&format!("(the default keyrings under {})", r.apt.display())),
        "{}",
        err(&o)
    );

    // The apt source for this mirror names another keyring: it wins over
    // the defaults (which hold the right key), as in apt.
    let list_d = r.apt.join("etc/apt/sources.list.d");
    fs::create_dir_all(&list_d).unwrap();
    let sources = list_d.join("fake.sources");
    let write_sources = |signed_by: &str| {
        fs::write(
            &sources,
            format!(
                "Types: deb\nURIs: http://elsewhere.invalid/debian\nSuites: sid\nComponents: main\nSigned-By: {}\n\n\
Types: deb\nURIs: {}/\nSuites: sid\nComponents: main\nSigned-By: {signed_by}\n",
                other.keyring.display(),
                r.mirror()
            ),
        )
        .unwrap();
    };
    write_sources(other.keyring.to_str().unwrap());
    let o = r.lock_bare("app", &["--update"]);
    assert!(!o.status.success());
    let e = err(&o);
    assert!(
        e.contains("which is not in the keyrings (NO_PUBKEY)"),
        "{e}"
    );
    assert!(
        e.contains(&format!(
            "keyrings used: the Signed-By of {} for {}",
            sources.display(),
            r.mirror()
        )),
        "{e}"
    );

    // Signed-By naming the archive's key: a file, or its fingerprint
    // (selecting from the default keyrings).
    write_sources(r.key.keyring.to_str().unwrap());
    let o = r.lock_bare("app", &["--update"]);
    assert!(o.status.success(), "{}", err(&o));
    assert!(
        err(&o).contains(&format!(
            "(the Signed-By of {} for {})",
            sources.display(),
            r.mirror()
        )),
        "{}",
        err(&o)
    );
    write_sources(&r.key.fpr);
    let o = r.lock_bare("app", &["--update"]);
    assert!(o.status.success(), "{}", err(&o));
    write_sources(&other.fpr);
    fs::copy(&other.armored, trusted.join("other.asc")).unwrap();
    let o = r.lock_bare("app", &["--update"]);
    assert!(!o.status.success());
    assert!(
        err(&o).contains(&format!(
            "but the apt source's Signed-By allows only {}",
            other.fpr
        )),
        "{}",
        err(&o)
    );

    // --keyring wins over everything.
    let o = r.lock_bare(
        "app",
        &["--update", "--keyring", r.key.keyring.to_str().unwrap()],
    );
    assert!(o.status.success(), "{}", err(&o));
}

#[test]
fn without_gpgv_says_to_install_it() {
    let r = repo(FUTURE, false, true);
    let empty = tempfile::tempdir().unwrap();
    let o = r
        .command("app", &["--keyring", r.key.keyring.to_str().unwrap()])
        .env("PATH", empty.path())
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(
        err(&o).contains("error: cannot verify dists/sid/InRelease of suite 'sid': 'gpgv' is not installed: install Debian's gpgv package (apt-get install gpgv), or pass --allow-unsigned to proceed without verification"),
        "{}",
        err(&o)
    );
}
