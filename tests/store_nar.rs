//! End-to-end tests of `rocmx store dump|restore|ls|cat`, driving the binary.
//!
//! Random trees are dumped by rocmx and by `nix-store --dump` (when installed) and must be
//! byte-identical; every archive must also survive `restore` then `dump`. Hostile archives
//! must be refused with exit 1 and an error naming the problem, without leaving anything
//! outside the destination. Everything happens in temporary directories, always with
//! `--store <tempdir>`; /rocmx is never touched.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::fs;
use std::io::{Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_rocmx");

/// Number of random trees compared against `nix-store --dump` and round-tripped.
const TREES: u64 = 120;

// ---------------------------------------------------------------------------------------
// Helpers

/// A `rocmx` command with an explicit temporary store root and no inherited ROCMX_STORE.
fn rocmx(store: &Path) -> Command {
    let mut c = Command::new(BIN);
    c.env_remove("ROCMX_STORE").arg("--store").arg(store);
    c
}

/// Runs `cmd` with `input` on stdin and collects its output.
fn run_with_input(cmd: &mut Command, input: &[u8]) -> Output {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut stdin = child.stdin.take().expect("stdin");
    let input = input.to_vec();
    // Write from another thread: the child may exit (refusing the archive) before reading
    // everything, and a full pipe must not block the test.
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let out = child.wait_with_output().expect("wait");
    writer.join().expect("writer thread");
    out
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn rocmx_dump(store: &Path, path: &Path) -> Vec<u8> {
    let out = rocmx(store)
        .args(["store", "dump"])
        .arg(path)
        .output()
        .expect("run rocmx store dump");
    assert!(
        out.status.success(),
        "rocmx store dump {} failed: {}",
        path.display(),
        stderr(&out)
    );
    out.stdout
}

fn nix_dump(path: &Path) -> Vec<u8> {
    let out = Command::new("nix-store")
        .arg("--dump")
        .arg(path)
        .output()
        .expect("run nix-store --dump");
    assert!(
        out.status.success(),
        "nix-store --dump {} failed: {}",
        path.display(),
        stderr(&out)
    );
    out.stdout
}

/// Where two archives first differ, for the failure message.
fn first_difference(a: &[u8], b: &[u8]) -> String {
    let at = a
        .iter()
        .zip(b)
        .position(|(x, y)| x != y)
        .unwrap_or(a.len().min(b.len()));
    let lo = at.saturating_sub(16);
    format!(
        "lengths {} and {}, first difference at byte {at}: {:?} vs {:?}",
        a.len(),
        b.len(),
        String::from_utf8_lossy(&a[lo..(at + 16).min(a.len())]),
        String::from_utf8_lossy(&b[lo..(at + 16).min(b.len())])
    )
}

/// Every path under `dir` (relative), with its type and, for files, contents and mode.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, String> {
    let mut map = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in fs::read_dir(&d).expect("read_dir") {
            let p = entry.expect("entry").path();
            let m = fs::symlink_metadata(&p).expect("lstat");
            let rel = p.strip_prefix(dir).expect("prefix").to_path_buf();
            let desc = if m.file_type().is_symlink() {
                format!("symlink {:?}", fs::read_link(&p).expect("readlink"))
            } else if m.is_dir() {
                stack.push(p.clone());
                "dir".to_string()
            } else {
                format!(
                    "file {:o} {:?}",
                    m.permissions().mode(),
                    fs::read(&p).unwrap_or_default()
                )
            };
            map.insert(rel, desc);
        }
    }
    map
}

// ---------------------------------------------------------------------------------------
// Random trees

/// xorshift64* — small, seeded, good enough for test data.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

/// Name pieces: plain, spaces, leading dashes, unicode, dots, shell-special characters.
const NAME_PARTS: &[&[u8]] = &[
    b"a",
    b"b",
    b"B",
    b"Z",
    b"file",
    b"dir",
    b"0",
    b"9",
    b"with space",
    b" lead",
    b"trail ",
    b"-dash",
    b"--double-dash",
    b"-",
    "é".as_bytes(),
    "ä".as_bytes(),
    "日本".as_bytes(),
    "ß".as_bytes(),
    "😀".as_bytes(),
    b".hidden",
    b"..dots",
    b"x.y",
    b"a-b_c",
    b"~tilde",
    b"#hash",
    b"[x]",
    b"*star",
    b"$dollar",
    b"tab\there",
    b"new\nline",
    b"\xff\xfenot-utf8",
];

fn random_name(rng: &mut Rng) -> Vec<u8> {
    let parts = 1 + rng.below(3);
    let mut name = Vec::new();
    for _ in 0..parts {
        let part: &&[u8] = rng.pick(NAME_PARTS);
        name.extend_from_slice(part);
    }
    name.truncate(200);
    name
}

const LINK_TARGETS: &[&[u8]] = &[
    b"/nonexistent/dangling",
    b"/etc/hostname",
    b"/",
    b"../up",
    b"..",
    b".",
    b"sibling",
    b"a/b/c",
    b"-dash target",
    b"with space",
    "é/日本".as_bytes(),
    b"dangling-relative",
];

fn random_contents(rng: &mut Rng) -> Vec<u8> {
    let len = match rng.below(10) {
        0..=2 => 0,
        3..=5 => rng.below(17) as usize,
        6..=7 => rng.below(300) as usize,
        8 => rng.below(20_000) as usize,
        _ => rng.below(300_000) as usize,
    };
    rng.bytes(len)
}

/// File modes: owner-executable or not, with other bits that NAR ignores.
const FILE_MODES: &[u32] = &[
    0o644, 0o755, 0o700, 0o600, 0o444, 0o555, 0o654, 0o744, 0o611,
];

fn make_file(rng: &mut Rng, path: &Path) {
    fs::write(path, random_contents(rng)).expect("write file");
    let mode = *rng.pick(FILE_MODES);
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).expect("chmod");
}

fn make_symlink(rng: &mut Rng, path: &Path) {
    let target: Vec<u8> = if rng.chance(10) {
        (0..1 + rng.below(300))
            .map(|i| b'a' + (i % 26) as u8)
            .collect()
    } else {
        rng.pick(LINK_TARGETS).to_vec()
    };
    symlink(OsStr::from_bytes(&target), path).expect("symlink");
}

/// Fills directory `dir` (which exists) with random entries.
fn fill_dir(rng: &mut Rng, dir: &Path, depth: u32) {
    let n = if depth > 4 {
        rng.below(3)
    } else {
        rng.below(7)
    };
    for _ in 0..n {
        let name = random_name(rng);
        let path = dir.join(OsStr::from_bytes(&name));
        if fs::symlink_metadata(&path).is_ok() {
            continue; // name already used here
        }
        match rng.below(10) {
            0..=3 => make_file(rng, &path),
            4..=5 => make_symlink(rng, &path),
            _ => {
                fs::create_dir(&path).expect("mkdir");
                if depth < 7 && !rng.chance(20) {
                    fill_dir(rng, &path, depth + 1);
                }
            }
        }
    }
}

/// A random tree at `root` (which must not exist): mostly directories, sometimes a single
/// file or symlink, now and then a deep chain.
fn random_tree(seed: u64, root: &Path) {
    let mut rng = Rng::new(seed);
    match rng.below(20) {
        0 | 1 => make_file(&mut rng, root),
        2 => make_symlink(&mut rng, root),
        3 => fs::create_dir(root).expect("mkdir"), // empty directory
        4 => {
            // A deep chain of directories with something at the bottom.
            let mut p = root.to_path_buf();
            fs::create_dir(&p).expect("mkdir");
            for i in 0..(50 + rng.below(100)) {
                p.push(if i % 2 == 0 { "d" } else { "-e é" });
                fs::create_dir(&p).expect("mkdir");
            }
            fill_dir(&mut rng, &p, 5);
        }
        _ => {
            fs::create_dir(root).expect("mkdir");
            fill_dir(&mut rng, root, 0);
        }
    }
}

#[test]
fn random_trees_dump_like_nix_and_round_trip() {
    let tmp = tempfile::tempdir().expect("tmp");
    let store = tmp.path().join("store-root");
    let nix = have("nix-store");
    if !nix {
        println!("skipped: nix-store not found (round trips still tested)");
    }
    let (mut files, mut links, mut dirs) = (0usize, 0usize, 0usize);
    for seed in 0..TREES {
        let root = tmp.path().join(format!("tree-{seed}"));
        random_tree(seed, &root);
        for desc in snapshot(tmp.path()).values() {
            match desc.split(' ').next() {
                Some("file") => files += 1,
                Some("symlink") => links += 1,
                _ => dirs += 1,
            }
        }
        let ours = rocmx_dump(&store, &root);
        if nix {
            let theirs = nix_dump(&root);
            assert!(
                ours == theirs,
                "seed {seed}: rocmx store dump differs from nix-store --dump: {}",
                first_difference(&ours, &theirs)
            );
        }
        let restored = tmp.path().join(format!("restored-{seed}"));
        let out = run_with_input(
            rocmx(&store).args(["store", "restore"]).arg(&restored),
            &ours,
        );
        assert!(
            out.status.success(),
            "seed {seed}: restore failed: {}",
            stderr(&out)
        );
        let again = rocmx_dump(&store, &restored);
        assert!(
            again == ours,
            "seed {seed}: restore + dump does not round-trip: {}",
            first_difference(&again, &ours)
        );
        // Keep the snapshot walks cheap.
        let _ = fs::remove_dir_all(&restored).or_else(|_| fs::remove_file(&restored));
        let _ = fs::remove_dir_all(&root).or_else(|_| fs::remove_file(&root));
    }
    assert!(
        files > 100 && links > 50 && dirs > 50,
        "{files} {links} {dirs}"
    );
}

#[test]
fn large_and_executable_files_match_nix() {
    let tmp = tempfile::tempdir().expect("tmp");
    let store = tmp.path().join("s");
    let root = tmp.path().join("big");
    fs::create_dir(&root).expect("mkdir");
    let mut rng = Rng::new(7);
    // Sizes around the writer's chunk and padding boundaries.
    for (i, size) in [0usize, 1, 7, 8, 9, 1 << 20, (1 << 20) + 3, 5 << 20]
        .into_iter()
        .enumerate()
    {
        let p = root.join(format!("f{i}"));
        fs::write(&p, rng.bytes(size)).expect("write");
        if i % 2 == 1 {
            fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).expect("chmod");
        }
    }
    let ours = rocmx_dump(&store, &root);
    if have("nix-store") {
        let theirs = nix_dump(&root);
        assert!(ours == theirs, "{}", first_difference(&ours, &theirs));
    } else {
        println!("skipped: nix-store not found");
    }
    let restored = tmp.path().join("restored");
    let out = run_with_input(
        rocmx(&store).args(["store", "restore"]).arg(&restored),
        &ours,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(snapshot(&root).len(), snapshot(&restored).len());
    assert!(rocmx_dump(&store, &restored) == ours);
    let mode = fs::metadata(restored.join("f1"))
        .expect("stat")
        .permissions()
        .mode();
    assert!(mode & 0o100 != 0, "executable bit restored");
    let mode = fs::metadata(restored.join("f0"))
        .expect("stat")
        .permissions()
        .mode();
    assert!(mode & 0o100 == 0, "no executable bit on f0");
}

// ---------------------------------------------------------------------------------------
// Hand-made archives

/// An archive node, written exactly as given (no sorting), so that it can be hostile.
enum N<'a> {
    File(&'a [u8]),
    Exec(&'a [u8]),
    Link(&'a [u8]),
    Dir(Vec<(&'a [u8], N<'a>)>),
}

fn tok(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u64).to_le_bytes());
    out.extend_from_slice(b);
    out.resize(out.len() + (8 - b.len() % 8) % 8, 0);
}

fn node(out: &mut Vec<u8>, n: &N) {
    tok(out, b"(");
    tok(out, b"type");
    match n {
        N::File(c) | N::Exec(c) => {
            tok(out, b"regular");
            if matches!(n, N::Exec(_)) {
                tok(out, b"executable");
                tok(out, b"");
            }
            tok(out, b"contents");
            tok(out, c);
        }
        N::Link(t) => {
            tok(out, b"symlink");
            tok(out, b"target");
            tok(out, t);
        }
        N::Dir(entries) => {
            tok(out, b"directory");
            for (name, child) in entries {
                tok(out, b"entry");
                tok(out, b"(");
                tok(out, b"name");
                tok(out, name);
                tok(out, b"node");
                node(out, child);
                tok(out, b")");
            }
        }
    }
    tok(out, b")");
}

fn nar(n: &N) -> Vec<u8> {
    let mut out = Vec::new();
    tok(&mut out, b"nix-archive-1");
    node(&mut out, n);
    out
}

/// A valid archive with some of everything.
fn valid_archive() -> Vec<u8> {
    nar(&N::Dir(vec![
        (b"a", N::File(b"hello\n")),
        (
            b"d",
            N::Dir(vec![
                (b"e", N::Exec(b"#!/bin/sh\necho hi\n")),
                (b"f", N::File(&[7u8; 100])),
            ]),
        ),
        (b"l", N::Link(b"a")),
    ]))
}

#[test]
fn hand_made_archive_is_canonical() {
    // Our test encoder agrees with the real writer, so the hostile variants below differ
    // from valid archives only where intended.
    let tmp = tempfile::tempdir().expect("tmp");
    let dest = tmp.path().join("dest");
    let bytes = valid_archive();
    let out = run_with_input(
        rocmx(&tmp.path().join("s"))
            .args(["store", "restore"])
            .arg(&dest),
        &bytes,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(fs::read(dest.join("a")).expect("read"), b"hello\n");
    assert_eq!(
        fs::read_link(dest.join("l")).expect("readlink"),
        Path::new("a")
    );
    assert!(rocmx_dump(&tmp.path().join("s"), &dest) == bytes);
}

/// Restores `bytes` into a fresh `dest` next to an `outside` directory (the target of any
/// escaping symlink) and checks: exit 1, an `error:` naming `expect` (and the byte offset
/// too), and the parent directory exactly as before.
fn assert_refused(case: &str, bytes: &[u8], expect: &str) {
    let tmp = tempfile::tempdir().expect("tmp");
    let parent = tmp.path().join("parent");
    let outside = parent.join("outside");
    fs::create_dir_all(&outside).expect("mkdir");
    fs::write(parent.join("existing"), b"keep").expect("write");
    let before = snapshot(&parent);
    let dest = parent.join("dest");
    let out = run_with_input(
        rocmx(&tmp.path().join("s"))
            .args(["store", "restore"])
            .arg(&dest),
        bytes,
    );
    let err = stderr(&out);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{case}: exit status; stderr: {err}"
    );
    assert!(err.starts_with("error: "), "{case}: {err}");
    assert!(
        err.contains(expect),
        "{case}: expected {expect:?} in: {err}"
    );
    assert!(err.contains("byte "), "{case}: no byte offset in: {err}");
    assert!(!err.contains("panicked"), "{case}: {err}");
    assert_eq!(
        snapshot(&parent),
        before,
        "{case}: the parent directory changed"
    );
    assert_eq!(fs::read_dir(&outside).expect("ls").count(), 0, "{case}");
}

#[test]
fn hostile_archives_are_refused_without_writing_outside() {
    let outside_target = b"../outside";
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "dot-dot entry",
            nar(&N::Dir(vec![(b"..", N::File(b"x"))])),
            "\"..\" is not allowed",
        ),
        (
            "dot entry",
            nar(&N::Dir(vec![(b".", N::File(b"x"))])),
            "\".\" is not allowed",
        ),
        (
            "dot-dot entry after a real one",
            nar(&N::Dir(vec![
                (b"a", N::File(b"x")),
                (b"..", N::Dir(vec![(b"outside", N::Dir(vec![]))])),
            ])),
            "\"..\" is not allowed",
        ),
        (
            "entry with a slash",
            nar(&N::Dir(vec![(b"a/b", N::File(b"x"))])),
            "contains '/'",
        ),
        (
            "symlink followed by an entry beneath it",
            nar(&N::Dir(vec![
                (b"link", N::Link(outside_target)),
                (b"link/evil", N::File(b"pwned")),
            ])),
            "contains '/'",
        ),
        (
            "symlink followed by a directory of the same name",
            nar(&N::Dir(vec![
                (b"link", N::Link(outside_target)),
                (b"link", N::Dir(vec![(b"evil", N::File(b"pwned"))])),
            ])),
            "duplicate entry \"link\"",
        ),
        (
            "nested symlink escape",
            nar(&N::Dir(vec![(
                b"d",
                N::Dir(vec![
                    (b"up", N::Link(b"../../outside")),
                    (b"up", N::File(b"pwned")),
                ]),
            )])),
            "duplicate entry \"up\"",
        ),
        (
            "duplicate entries",
            nar(&N::Dir(vec![(b"x", N::File(b"1")), (b"x", N::File(b"2"))])),
            "duplicate entry \"x\"",
        ),
        (
            "unsorted entries",
            nar(&N::Dir(vec![(b"b", N::File(b"1")), (b"a", N::File(b"2"))])),
            "is not sorted after",
        ),
        (
            "empty name",
            nar(&N::Dir(vec![(b"", N::File(b"1"))])),
            "empty entry name",
        ),
        (
            "NUL in name",
            nar(&N::Dir(vec![(b"a\0b", N::File(b"1"))])),
            "contains NUL",
        ),
        (
            "empty symlink target",
            nar(&N::Dir(vec![(b"l", N::Link(b""))])),
            "symlink target",
        ),
        (
            "bad magic",
            {
                let mut v = Vec::new();
                tok(&mut v, b"nix-archive-2");
                node(&mut v, &N::File(b"x"));
                v
            },
            "bad magic",
        ),
        (
            "not an archive",
            b"hello, world, this is text\n".to_vec(),
            "bad magic",
        ),
        ("empty input", Vec::new(), "bad magic"),
        (
            "trailing garbage",
            {
                let mut v = valid_archive();
                v.extend_from_slice(b"garbage!");
                v
            },
            "trailing bytes",
        ),
        (
            "trailing zero token",
            {
                let mut v = valid_archive();
                v.extend_from_slice(&[0u8; 8]);
                v
            },
            "trailing bytes",
        ),
        (
            "a second archive",
            {
                let mut v = valid_archive();
                v.extend_from_slice(&valid_archive());
                v
            },
            "trailing bytes",
        ),
        (
            "absurd length",
            {
                let mut v = Vec::new();
                tok(&mut v, b"nix-archive-1");
                tok(&mut v, b"(");
                tok(&mut v, b"type");
                tok(&mut v, b"directory");
                tok(&mut v, b"entry");
                tok(&mut v, b"(");
                tok(&mut v, b"name");
                v.extend_from_slice(&u64::MAX.to_le_bytes());
                v
            },
            "exceeds the limit",
        ),
        (
            "non-zero padding",
            {
                let mut v = nar(&N::File(b"abc"));
                // "abc" is followed by five padding bytes before the closing ")".
                let pos = v.len() - 16 - 5;
                v[pos] = 1;
                v
            },
            "non-zero padding",
        ),
        (
            "unknown node type",
            {
                let mut v = Vec::new();
                tok(&mut v, b"nix-archive-1");
                tok(&mut v, b"(");
                tok(&mut v, b"type");
                tok(&mut v, b"fifo");
                tok(&mut v, b")");
                v
            },
            "expected regular, symlink or directory",
        ),
    ];
    for (case, bytes, expect) in &cases {
        assert_refused(case, bytes, expect);
    }
}

#[test]
fn truncated_archives_are_refused() {
    let full = valid_archive();
    let mut cuts = vec![1, 8, 16, 23, 24, 25, 40, 64, 100];
    cuts.extend([
        full.len() / 3,
        full.len() / 2,
        full.len() - 9,
        full.len() - 8,
        full.len() - 1,
    ]);
    // Inside the 100-byte file contents, and inside the executable's contents.
    let f_at = full
        .windows(8)
        .position(|w| w == [7u8; 8])
        .expect("contents of f");
    cuts.extend([f_at + 1, f_at + 50]);
    for cut in cuts {
        // The magic string ends at byte 21; its padding runs to 24.
        let expect = if cut < 21 { "bad magic" } else { "truncated" };
        assert_refused(&format!("cut at {cut}"), &full[..cut], expect);
    }
}

#[test]
fn restore_refuses_an_existing_destination() {
    let tmp = tempfile::tempdir().expect("tmp");
    let dest = tmp.path().join("dest");
    fs::create_dir(&dest).expect("mkdir");
    fs::write(dest.join("keep"), b"keep").expect("write");
    let out = run_with_input(
        rocmx(&tmp.path().join("s"))
            .args(["store", "restore"])
            .arg(&dest),
        &valid_archive(),
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("already exists"), "{}", stderr(&out));
    assert_eq!(fs::read(dest.join("keep")).expect("read"), b"keep");
    // A dangling symlink is an existing destination too.
    let link = tmp.path().join("link");
    symlink("/nonexistent", &link).expect("symlink");
    let out = run_with_input(
        rocmx(&tmp.path().join("s"))
            .args(["store", "restore"])
            .arg(&link),
        &valid_archive(),
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("already exists"));
}

#[test]
fn restore_of_single_file_and_symlink_roots() {
    let tmp = tempfile::tempdir().expect("tmp");
    let s = tmp.path().join("s");
    let f = tmp.path().join("f");
    let out = run_with_input(
        rocmx(&s).args(["store", "restore"]).arg(&f),
        &nar(&N::Exec(b"#!/bin/sh\n")),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(fs::read(&f).expect("read"), b"#!/bin/sh\n");
    assert!(fs::metadata(&f).expect("stat").permissions().mode() & 0o100 != 0);
    let l = tmp.path().join("l");
    let out = run_with_input(
        rocmx(&s).args(["store", "restore"]).arg(&l),
        &nar(&N::Link(b"/nonexistent/target")),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        fs::read_link(&l).expect("readlink"),
        Path::new("/nonexistent/target")
    );
}

// ---------------------------------------------------------------------------------------
// dump errors, broken pipes, logical store paths

#[test]
fn dump_of_a_missing_path_is_a_clean_error() {
    let tmp = tempfile::tempdir().expect("tmp");
    let missing = tmp.path().join("missing");
    let out = rocmx(&tmp.path().join("s"))
        .args(["store", "dump"])
        .arg(&missing)
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        format!(
            "error: getting status of '{}': No such file or directory\n",
            missing.display()
        )
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn usage_errors_exit_2() {
    let tmp = tempfile::tempdir().expect("tmp");
    for args in [
        &["store", "dump"][..],
        &["store", "restore"],
        &["store", "ls"],
        &["store", "cat"],
        &["store", "frobnicate"],
        &["store", "ls", "--bogus", "x"],
    ] {
        let out = rocmx(tmp.path()).args(args).output().expect("run");
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
    }
}

#[test]
fn dump_into_a_closed_pipe_does_not_panic() {
    let tmp = tempfile::tempdir().expect("tmp");
    let big = tmp.path().join("big");
    fs::write(&big, vec![1u8; 8 << 20]).expect("write");
    for cmd in ["dump", "cat"] {
        let mut child = rocmx(&tmp.path().join("s"))
            .args(["store", cmd])
            .arg(&big)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        let mut stdout = child.stdout.take().expect("stdout");
        let mut first = [0u8; 16];
        stdout.read_exact(&mut first).expect("read");
        drop(stdout);
        let out = child.wait_with_output().expect("wait");
        let err = stderr(&out);
        assert!(!err.contains("panicked"), "{cmd}: {err}");
        assert_ne!(out.status.code(), Some(101), "{cmd}: {err}");
        assert_ne!(
            out.status.code(),
            Some(0),
            "{cmd}: a cut-off output is not success"
        );
    }
}

/// A valid-looking store base name: 32 nix32 characters, a dash, a name.
const BASE: &str = "0123456789abcdfghijklmnpqrsvwxyz-hello-1.0";

#[test]
fn logical_store_paths_map_to_the_physical_root() {
    let tmp = tempfile::tempdir().expect("tmp");
    let root = tmp.path().join("root");
    let obj = root.join("store").join(BASE);
    fs::create_dir_all(obj.join("bin")).expect("mkdir");
    fs::write(obj.join("bin/hello"), b"#!/bin/sh\necho hello\n").expect("write");
    fs::set_permissions(obj.join("bin/hello"), fs::Permissions::from_mode(0o755)).expect("chmod");
    // An absolute symlink to another path in the logical store.
    symlink(format!("/rocmx/store/{BASE}/bin/hello"), obj.join("link")).expect("symlink");
    let logical = format!("/rocmx/store/{BASE}");

    let ours = rocmx_dump(&root, Path::new(&logical));
    assert!(ours == rocmx_dump(&root, &obj));
    if have("nix-store") {
        assert!(ours == nix_dump(&obj));
    }

    // ROCMX_STORE works like --store.
    let out = Command::new(BIN)
        .env("ROCMX_STORE", &root)
        .args(["store", "dump", &logical])
        .output()
        .expect("run");
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(out.stdout == ours);

    let out = rocmx(&root)
        .args(["store", "ls", "-R", &logical])
        .output()
        .expect("run");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "./bin\n./bin/hello\n./link\n"
    );
    let out = rocmx(&root)
        .args(["store", "cat", &format!("{logical}/bin/hello")])
        .output()
        .expect("run");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(out.stdout, b"#!/bin/sh\necho hello\n");
    // cat follows the absolute symlink into the logical store, mapped to the root.
    let out = rocmx(&root)
        .args(["store", "cat", &format!("{logical}/link")])
        .output()
        .expect("run");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(out.stdout, b"#!/bin/sh\necho hello\n");

    // A missing store path names both forms.
    let missing = format!("/rocmx/store/{}", BASE.replace("hello", "absent"));
    let out = rocmx(&root)
        .args(["store", "dump", &missing])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains(&missing) && err.contains(&root.display().to_string()),
        "{err}"
    );
    assert!(err.contains("No such file or directory"), "{err}");
}

// ---------------------------------------------------------------------------------------
// ls and cat

fn ls_fixture(dir: &Path) -> PathBuf {
    let t = dir.join("t");
    fs::create_dir_all(t.join("d/empty")).expect("mkdir");
    fs::write(t.join("a"), b"hi\n").expect("write");
    fs::write(t.join("d/e"), b"").expect("write");
    fs::set_permissions(t.join("d/e"), fs::Permissions::from_mode(0o755)).expect("chmod");
    fs::write(t.join("-dash name"), b"12345").expect("write");
    symlink("a", t.join("l")).expect("symlink");
    t
}

fn ls(store: &Path, args: &[&str], path: &Path) -> (i32, String, String) {
    let out = rocmx(store)
        .args(["store", "ls"])
        .args(args)
        .arg(path)
        .output()
        .expect("run");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr(&out),
    )
}

#[test]
fn ls_lists_like_nix_store_ls() {
    let tmp = tempfile::tempdir().expect("tmp");
    let s = tmp.path().join("s");
    let t = ls_fixture(tmp.path());
    assert_eq!(
        ls(&s, &[], &t),
        (0, "./-dash name\n./a\n./d\n./l\n".into(), String::new())
    );
    assert_eq!(
        ls(&s, &["-R"], &t).1,
        "./-dash name\n./a\n./d\n./d/e\n./d/empty\n./l\n"
    );
    let long = "\
-r--r--r--                    5 ./-dash name
-r--r--r--                    3 ./a
dr-xr-xr-x                    0 ./d
-r-xr-xr-x                    0 ./d/e
dr-xr-xr-x                    0 ./d/empty
lrwxrwxrwx                    0 ./l -> a
";
    assert_eq!(ls(&s, &["-R", "-l"], &t).1, long);
    assert_eq!(ls(&s, &["-lR"], &t).1, long);
    assert_eq!(
        ls(&s, &["-l"], &t.join("l")).1,
        "lrwxrwxrwx                    0 l -> a\n"
    );
    assert_eq!(ls(&s, &[], &t.join("a")).1, "a\n");
    assert_eq!(
        ls(&s, &["-l"], &t.join("d/e")).1,
        "-r-xr-xr-x                    0 e\n"
    );
    assert_eq!(ls(&s, &["-d"], &t.join("d")).1, "d\n");
    assert_eq!(ls(&s, &[], &t.join("d/empty")).1, "");
    let (code, out, err) = ls(&s, &[], &t.join("nope"));
    assert_eq!(code, 1);
    assert_eq!(out, "");
    assert_eq!(
        err,
        format!(
            "error: getting status of '{}': No such file or directory\n",
            t.join("nope").display()
        )
    );
}

#[test]
fn cat_prints_files_and_refuses_directories() {
    let tmp = tempfile::tempdir().expect("tmp");
    let s = tmp.path().join("s");
    let t = ls_fixture(tmp.path());
    let cat = |p: &Path| {
        rocmx(&s)
            .args(["store", "cat"])
            .arg(p)
            .output()
            .expect("run")
    };
    let out = cat(&t.join("a"));
    assert!(out.status.success());
    assert_eq!(out.stdout, b"hi\n");
    let out = cat(&t.join("l"));
    assert_eq!(out.stdout, b"hi\n", "symlinks are followed");
    let out = cat(&t.join("d/e"));
    assert!(out.status.success());
    assert!(out.stdout.is_empty());
    let out = cat(&t.join("d"));
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        format!("error: '{}' is a directory\n", t.join("d").display())
    );
    let out = cat(&t.join("nope"));
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("No such file or directory"));
    let loop_link = t.join("loop");
    symlink("loop", &loop_link).expect("symlink");
    let out = cat(&loop_link);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("too many levels of symbolic links"));
}
