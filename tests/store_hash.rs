//! End-to-end tests of `rocmx hash path|file`, against `nix-hash`, `nix-store --dump`,
//! `b3sum` and `nix hash path` when they are installed, and against fixed vectors always.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_rocmx");

fn rocmx() -> Command {
    let mut c = Command::new(BIN);
    c.env_remove("ROCMX_STORE");
    c
}

fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `rocmx hash <args>` must succeed; its stdout.
fn hash(args: &[&str], paths: &[&Path]) -> String {
    let out = rocmx()
        .arg("hash")
        .args(args)
        .args(paths)
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "rocmx hash {args:?} {paths:?}: {}",
        err(&out)
    );
    text(&out)
}

/// A tool's stdout, which must succeed.
fn tool(cmd: &mut Command) -> String {
    let out = cmd.output().expect("run tool");
    assert!(out.status.success(), "{cmd:?}: {}", err(&out));
    text(&out)
}

/// Deterministic bytes.
fn bytes(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Paths to hash: a tree with some of everything, files of several sizes (one crossing
/// several of the hasher's buffers), an empty file, a symlink.
struct Fixture {
    _tmp: tempfile::TempDir,
    tree: PathBuf,
    files: Vec<PathBuf>,
    link: PathBuf,
    dir: PathBuf,
}

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().expect("tmp");
    let dir = tmp.path().to_path_buf();
    let tree = dir.join("tree");
    fs::create_dir_all(tree.join("sub/empty dir")).expect("mkdir");
    fs::write(tree.join("a"), b"hello\n").expect("write");
    fs::write(tree.join("sub/-x é"), bytes(1000, 3)).expect("write");
    fs::write(tree.join("sub/exe"), b"#!/bin/sh\n").expect("write");
    fs::set_permissions(tree.join("sub/exe"), fs::Permissions::from_mode(0o755)).expect("chmod");
    fs::write(tree.join("big"), bytes(9 << 20, 5)).expect("write");
    symlink("/nonexistent", tree.join("dangling")).expect("symlink");
    symlink("a", tree.join("rel")).expect("symlink");
    let mut files = Vec::new();
    for (name, size) in [
        ("empty", 0usize),
        ("one", 1),
        ("small", 4095),
        ("mid", 1 << 20),
    ] {
        let p = dir.join(name);
        fs::write(&p, bytes(size, size as u64 + 11)).expect("write");
        files.push(p);
    }
    files.push(tree.join("big"));
    let link = dir.join("link");
    symlink("tree/a", &link).expect("symlink");
    Fixture {
        _tmp: tmp,
        tree,
        files,
        link,
        dir,
    }
}

impl Fixture {
    /// Everything `hash path` is compared on.
    fn paths(&self) -> Vec<PathBuf> {
        let mut v = vec![self.tree.clone(), self.link.clone(), self.tree.join("sub")];
        v.extend(self.files.iter().cloned());
        v
    }
}

#[test]
fn path_sha256_equals_nix_hash() {
    if !have("nix-hash") {
        println!("skipped: nix-hash not found");
        return;
    }
    let f = fixture();
    for p in f.paths() {
        for (ours, theirs) in [(&["--base32"][..], &["--base32"][..]), (&["--base16"], &[])] {
            let mine = hash(&[&["path", "--type", "sha256"][..], ours].concat(), &[&p]);
            let nix = tool(
                Command::new("nix-hash")
                    .args(["--type", "sha256"])
                    .args(theirs)
                    .arg(&p),
            );
            assert_eq!(mine, nix, "{} {ours:?}", p.display());
        }
    }
}

#[test]
fn other_algorithms_equal_nix_hash() {
    if !have("nix-hash") {
        println!("skipped: nix-hash not found");
        return;
    }
    let f = fixture();
    for algo in ["sha1", "md5", "sha512", "sha256"] {
        let mine = hash(&["path", "--type", algo, "--base16"], &[&f.tree]);
        let nix = tool(Command::new("nix-hash").args(["--type", algo]).arg(&f.tree));
        assert_eq!(mine, nix, "path {algo}");
        let mine = hash(&["path", "--type", algo, "--base32"], &[&f.tree]);
        let nix = tool(
            Command::new("nix-hash")
                .args(["--type", algo, "--base32"])
                .arg(&f.tree),
        );
        assert_eq!(mine, nix, "path {algo} base32");
        let file = &f.files[2];
        let mine = hash(&["file", "--type", algo, "--base16"], &[file]);
        let nix = tool(
            Command::new("nix-hash")
                .args(["--flat", "--type", algo])
                .arg(file),
        );
        assert_eq!(mine, nix, "file {algo}");
    }
}

#[test]
fn file_equals_nix_hash_flat() {
    if !have("nix-hash") {
        println!("skipped: nix-hash not found");
        return;
    }
    let f = fixture();
    let mut files = f.files.clone();
    files.push(f.link.clone()); // followed, as nix-hash --flat does
    for p in &files {
        let mine = hash(&["file", "--type", "sha256", "--base32"], &[p]);
        let nix = tool(
            Command::new("nix-hash")
                .args(["--flat", "--type", "sha256", "--base32"])
                .arg(p),
        );
        assert_eq!(mine, nix, "{}", p.display());
        let mine = hash(&["file", "--type", "sha256", "--base16"], &[p]);
        let nix = tool(
            Command::new("nix-hash")
                .args(["--flat", "--type", "sha256"])
                .arg(p),
        );
        assert_eq!(mine, nix, "{}", p.display());
    }
}

#[test]
fn blake3_file_equals_b3sum() {
    if !have("b3sum") {
        println!("skipped: b3sum not found");
        return;
    }
    let f = fixture();
    for p in &f.files {
        let mine = hash(&["file", "--base16"], &[p]);
        let theirs = tool(Command::new("b3sum").arg("--no-names").arg(p));
        assert_eq!(mine, theirs, "{}", p.display());
    }
}

/// BLAKE3 of bytes, through `b3sum` on stdin.
fn b3sum_of(data: &[u8]) -> String {
    let mut child = Command::new("b3sum")
        .arg("--no-names")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("b3sum");
    let mut stdin = child.stdin.take().expect("stdin");
    let data = data.to_vec();
    let w = std::thread::spawn(move || stdin.write_all(&data).expect("write"));
    let out = child.wait_with_output().expect("wait");
    w.join().expect("writer");
    text(&out)
}

#[test]
fn blake3_path_equals_b3sum_of_nix_store_dump() {
    let f = fixture();
    let (nix, b3) = (have("nix-store"), have("b3sum"));
    if !nix || !b3 {
        println!("skipped: nix-store or b3sum not found");
    }
    for p in f.paths() {
        let mine = hash(&["path", "--base16"], &[&p]);
        if nix && b3 {
            let nar = Command::new("nix-store")
                .arg("--dump")
                .arg(&p)
                .output()
                .expect("nix-store --dump");
            assert!(nar.status.success());
            assert_eq!(mine, b3sum_of(&nar.stdout), "{}", p.display());
        }
        // Without external tools: the path hash is the flat hash of rocmx's own dump.
        let dump = rocmx()
            .args(["--store", &f.dir.join("s").display().to_string()])
            .args(["store", "dump"])
            .arg(&p)
            .output()
            .expect("dump");
        assert!(dump.status.success(), "{}", err(&dump));
        let nar_file = f.dir.join("nar");
        fs::write(&nar_file, &dump.stdout).expect("write");
        assert_eq!(
            mine,
            hash(&["file", "--base16"], &[&nar_file]),
            "{}",
            p.display()
        );
    }
}

/// Standard base64 decoding, for checking SRI output against base16.
fn base64_decode(s: &str) -> Vec<u8> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = Vec::new();
    let (mut acc, mut bits) = (0u32, 0);
    for c in s.bytes().filter(|&c| c != b'=') {
        let v = ALPHABET.iter().position(|&a| a == c).expect("base64 char") as u32;
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    out
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn sri_is_the_default_and_agrees_with_base16_and_base64() {
    let f = fixture();
    for algo in ["blake3", "sha256", "sha512", "sha1", "md5"] {
        for mode in ["path", "file"] {
            let p: &Path = if mode == "path" { &f.tree } else { &f.files[3] };
            let default = hash(&[mode, "--type", algo], &[p]);
            let sri = hash(&[mode, "--type", algo, "--sri"], &[p]);
            let b16 = hash(&[mode, "--type", algo, "--base16"], &[p]);
            let b64 = hash(&[mode, "--type", algo, "--base64"], &[p]);
            assert_eq!(default, sri, "{mode} {algo}");
            let digest = sri
                .trim_end()
                .strip_prefix(&format!("{algo}-"))
                .unwrap_or_else(|| panic!("{mode} {algo}: not SRI: {sri}"));
            assert_eq!(digest, b64.trim_end());
            assert_eq!(hex(&base64_decode(digest)), b16.trim_end(), "{mode} {algo}");
        }
    }
    // Without --type, BLAKE3.
    assert!(hash(&["path"], &[&f.tree]).starts_with("blake3-"));
    if have("nix") {
        let nix = Command::new("nix")
            .args([
                "--extra-experimental-features",
                "nix-command",
                "hash",
                "path",
            ])
            .args(["--type", "sha256"])
            .arg(&f.tree)
            .output()
            .expect("nix hash path");
        if nix.status.success() {
            assert_eq!(hash(&["path", "--type", "sha256"], &[&f.tree]), text(&nix));
        } else {
            println!("skipped: nix hash path failed: {}", err(&nix));
        }
    }
}

#[test]
fn known_vectors() {
    let tmp = tempfile::tempdir().expect("tmp");
    let empty = tmp.path().join("empty");
    fs::write(&empty, b"").expect("write");
    assert_eq!(
        hash(&["file", "--type", "sha256"], &[&empty]),
        "sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n"
    );
    assert_eq!(
        hash(&["file", "--type", "sha256", "--base32"], &[&empty]),
        "0mdqa9w1p6cmli6976v4wi0sw9r4p5prkj7lzfd1877wk11c9c73\n"
    );
    assert_eq!(
        hash(&["file"], &[&empty]),
        "blake3-rxNJufX5oaagQE3qNtzJSZvLJcmtwRK3zJqTyuQfMmI=\n"
    );
    // The well-known SHA-256 of "hello\n".
    let hello = tmp.path().join("hello");
    fs::write(&hello, b"hello\n").expect("write");
    assert_eq!(
        hash(&["file", "--type", "sha256", "--base16"], &[&hello]),
        "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03\n"
    );
}

#[test]
fn several_paths_give_one_line_each() {
    let f = fixture();
    let paths: Vec<PathBuf> = f.paths();
    let refs: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
    let all = hash(&["path", "--type", "sha256", "--base32"], &refs);
    let lines: Vec<&str> = all.lines().collect();
    assert_eq!(lines.len(), paths.len());
    for (p, line) in paths.iter().zip(lines) {
        let one = hash(&["path", "--type", "sha256", "--base32"], &[p]);
        assert_eq!(one.trim_end(), line);
    }
}

#[test]
fn missing_paths_and_directories_are_clean_errors() {
    let f = fixture();
    let missing = f.dir.join("missing");
    for mode in ["path", "file"] {
        let out = rocmx()
            .args(["hash", mode])
            .arg(&missing)
            .output()
            .expect("run");
        assert_eq!(out.status.code(), Some(1), "{mode}");
        assert_eq!(
            err(&out),
            format!(
                "error: getting status of '{}': No such file or directory\n",
                missing.display()
            ),
            "{mode}"
        );
        assert!(out.stdout.is_empty());
    }
    // The good paths are still hashed; the status says something failed.
    let out = rocmx()
        .args(["hash", "path", "--type", "sha256"])
        .arg(&f.tree)
        .arg(&missing)
        .arg(&f.files[0])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(text(&out).lines().count(), 2);
    let out = rocmx()
        .args(["hash", "file"])
        .arg(&f.tree)
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        err(&out),
        format!("error: '{}' is a directory\n", f.tree.display())
    );
}

#[test]
fn usage_errors_exit_2() {
    let tmp = tempfile::tempdir().expect("tmp");
    let p = tmp.path().display().to_string();
    for args in [
        vec!["hash"],
        vec!["hash", "path"],
        vec!["hash", "file"],
        vec!["hash", "dir", &p],
        vec!["hash", "path", "--type", "sha3", &p],
        vec!["hash", "path", "--base32", "--sri", &p],
        vec!["hash", "path", "--base16", "--base64", &p],
    ] {
        let out = rocmx().args(&args).output().expect("run");
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", err(&out));
    }
    let help = rocmx()
        .args(["hash", "path", "--help"])
        .output()
        .expect("run");
    assert!(help.status.success());
    assert!(text(&help).contains("SRI"), "{}", text(&help));
}

/// A logical `/rocmx/store/…` path is hashed from the physical store given by
/// `--store` (regression: `hash` once ignored `--store`).
#[test]
fn logical_store_path_maps_to_store_root() {
    let store = tempfile::tempdir().unwrap();
    let src = tempfile::tempdir().unwrap();
    let file = src.path().join("greeting.txt");
    fs::write(&file, b"hello rocmx\n").unwrap();
    let added = rocmx()
        .arg("--store")
        .arg(store.path())
        .args(["store", "add"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(added.status.success(), "{}", err(&added));
    let logical = text(&added).trim().to_string();
    assert!(logical.starts_with("/rocmx/store/"), "{logical}");
    let out = rocmx()
        .arg("--store")
        .arg(store.path())
        .args(["hash", "file", "--type", "sha256", "--base16", &logical])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", err(&out));
    assert_eq!(text(&out).trim(), sha256_hex(b"hello rocmx\n"));
}

fn sha256_hex(data: &[u8]) -> String {
    let out = Command::new("sha256sum")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            c.stdin.take().unwrap().write_all(data)?;
            c.wait_with_output()
        })
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string()
}
