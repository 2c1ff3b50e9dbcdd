//! Tests of the NAR writer, parser and restore: literal vectors, `nix-store --dump` as an
//! oracle over random trees (skipped with a message when Nix is not installed), round
//! trips, and hostile archives.

use std::collections::BTreeSet;
use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use super::*;
use crate::hash::{Hash, HashAlgo};

fn tok(out: &mut Vec<u8>, s: &[u8]) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s);
    out.resize(out.len() + (8 - s.len() % 8) % 8, 0);
}

fn toks(parts: &[&[u8]]) -> Vec<u8> {
    let mut v = Vec::new();
    for p in parts {
        tok(&mut v, p);
    }
    v
}

fn dump(path: &Path) -> Vec<u8> {
    let mut v = Vec::new();
    let n = dump_path(path, &mut v).expect("dump");
    assert_eq!(n, v.len() as u64);
    v
}

/// `nix-store --dump`, or `None` when Nix is not installed.
fn nix_dump(path: &Path) -> Option<Vec<u8>> {
    let out = Command::new("nix-store")
        .arg("--dump")
        .arg(path)
        .output()
        .ok()?;
    assert!(
        out.status.success(),
        "nix-store --dump failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(out.stdout)
}

fn literal_tree(root: &Path) {
    fs::create_dir(root).expect("mkdir");
    fs::write(root.join("f"), "hello").expect("write");
    fs::create_dir(root.join("d")).expect("mkdir");
    fs::write(root.join("d/x"), "#!/bin/sh\n").expect("write");
    fs::set_permissions(root.join("d/x"), fs::Permissions::from_mode(0o755)).expect("chmod");
    symlink("f", root.join("d/l")).expect("symlink");
    fs::create_dir(root.join("e")).expect("mkdir");
}

#[test]
fn literal_single_file() {
    let tmp = tempfile::tempdir().expect("tmp");
    let f = tmp.path().join("f");
    fs::write(&f, "hello").expect("write");
    let expected = toks(&[
        b"nix-archive-1",
        b"(",
        b"type",
        b"regular",
        b"contents",
        b"hello",
        b")",
    ]);
    assert_eq!(dump(&f), expected);
    let mut mem = Vec::new();
    dump_regular(b"hello", false, &mut mem).expect("dump_regular");
    assert_eq!(mem, expected);
    // `nix-hash --type sha256 f` and `nix-store --dump f | b3sum`.
    let (h, size) = hash_path(&f, HashAlgo::Sha256).expect("hash");
    assert_eq!(
        h.to_hex(),
        "0a430879c266f8b57f4092a0f935cf3facd48bbccde5760d4748ca405171e969"
    );
    assert_eq!(size, 120);
    let (b, _) = hash_path(&f, HashAlgo::Blake3).expect("hash");
    assert_eq!(
        b.to_hex(),
        "ee3a6e397b4c9b8cdb48582fa5287f18a70eb975209e00db0605d6a4afd75af1"
    );
    assert_eq!(check(&expected[..]).expect("check"), 120);
}

#[test]
fn literal_tree_hash() {
    let tmp = tempfile::tempdir().expect("tmp");
    let root = tmp.path().join("lit");
    literal_tree(&root);
    let (h, size) = hash_path(&root, HashAlgo::Sha256).expect("hash");
    assert_eq!(
        h.to_hex(),
        "f0c473e6d844b4190bace59bc82842e2c99f73239c6ffab9fa3e7ec4ea544571"
    );
    assert_eq!(size, 1048);
    let mut exec = Vec::new();
    dump_regular(b"#!/bin/sh\n", true, &mut exec).expect("dump_regular");
    assert_eq!(dump(&root.join("d/x")), exec);
}

/// A small deterministic PRNG (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const NAMES: &[&str] = &[
    "a",
    "b",
    "B",
    "a b",
    "-rf",
    "--",
    "-",
    "ünïcödé",
    "日本語",
    "file.txt",
    ".hidden",
    "..a",
    "z z z",
    "x.tar.gz",
    "Ω",
    "a\tb",
    "emoji-🦀",
    "0",
    "00",
    "a-",
    "a_",
    "with'quote",
    "x\\y",
];

fn random_name(rng: &mut Rng) -> String {
    if rng.below(3) == 0 {
        let len = 1 + rng.below(12) as usize;
        (0..len)
            .map(|_| char::from(b'a' + rng.below(26) as u8))
            .collect()
    } else {
        NAMES[rng.below(NAMES.len() as u64) as usize].to_string()
    }
}

fn random_tree(rng: &mut Rng, dir: &Path, depth: u32) {
    let count = rng.below(if depth == 0 { 8 } else { 5 });
    let mut used = BTreeSet::new();
    for _ in 0..count {
        let name = random_name(rng);
        if !used.insert(name.clone()) {
            continue;
        }
        let p = dir.join(&name);
        match rng.below(10) {
            0..=3 => {
                let len = match rng.below(4) {
                    0 => 0,
                    1 => rng.below(9),
                    _ => rng.below(20_000),
                } as usize;
                let data: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
                fs::write(&p, data).expect("write");
                let mode = if rng.below(3) == 0 { 0o755 } else { 0o644 };
                fs::set_permissions(&p, fs::Permissions::from_mode(mode)).expect("chmod");
            }
            4 | 5 => {
                let target = match rng.below(4) {
                    0 => "/etc/passwd".to_string(),
                    1 => "does/not/exist".to_string(),
                    2 => format!("../{}", random_name(rng)),
                    _ => random_name(rng),
                };
                symlink(target, &p).expect("symlink");
            }
            _ => {
                fs::create_dir(&p).expect("mkdir");
                if depth < 4 {
                    random_tree(rng, &p, depth + 1);
                }
            }
        }
    }
}

#[test]
fn random_trees_match_nix_and_round_trip() {
    let tmp = tempfile::tempdir().expect("tmp");
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let have_nix = nix_dump(tmp.path()).is_some();
    if !have_nix {
        println!("nix-store not on PATH: skipping the nix-store --dump comparison");
    }
    for i in 0..120 {
        let root = tmp.path().join(format!("t{i}"));
        match i % 20 {
            // Some roots are single files or symlinks.
            7 => {
                fs::write(&root, vec![b'x'; i]).expect("write");
            }
            13 => symlink("/nowhere", &root).expect("symlink"),
            _ => {
                fs::create_dir(&root).expect("mkdir");
                random_tree(&mut rng, &root, 0);
            }
        }
        let ours = dump(&root);
        if have_nix {
            let theirs = nix_dump(&root).expect("nix-store");
            assert!(
                ours == theirs,
                "tree {i}: NAR differs from nix-store --dump"
            );
        }
        let back = tmp.path().join(format!("r{i}"));
        assert_eq!(
            restore(&ours[..], &back).expect("restore"),
            ours.len() as u64
        );
        assert!(dump(&back) == ours, "tree {i}: round trip differs");
    }
}

#[test]
fn hash_path_matches_nix_hash() {
    let tmp = tempfile::tempdir().expect("tmp");
    let root = tmp.path().join("t");
    fs::create_dir(&root).expect("mkdir");
    random_tree(&mut Rng(42), &root, 0);
    fs::write(root.join("big"), vec![7u8; 3 * 1024 * 1024 + 5]).expect("write");
    let Ok(out) = Command::new("nix-hash")
        .args(["--type", "sha256"])
        .arg(&root)
        .output()
    else {
        println!("nix-hash not on PATH: skipping");
        return;
    };
    let theirs = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let (ours, _) = hash_path(&root, HashAlgo::Sha256).expect("hash");
    assert_eq!(ours.to_hex(), theirs);
    let (b, _) = hash_path(&root, HashAlgo::Blake3).expect("hash");
    assert_eq!(b, Hash::digest(HashAlgo::Blake3, &dump(&root)));
}

#[test]
fn dump_refuses_special_files() {
    let tmp = tempfile::tempdir().expect("tmp");
    let sock = tmp.path().join("s");
    let _listener = std::os::unix::net::UnixListener::bind(&sock).expect("bind");
    assert!(matches!(
        dump_path(&sock, Vec::new()),
        Err(NarError::UnsupportedFileType { .. })
    ));
    assert!(matches!(
        dump_path(&tmp.path().join("missing"), Vec::new()),
        Err(NarError::Dump { .. })
    ));
}

/// Prefix of every archive: magic, then the root directory header.
fn dir_head() -> Vec<u8> {
    toks(&[b"nix-archive-1", b"(", b"type", b"directory"])
}

fn entry(name: &[u8], node: &[&[u8]]) -> Vec<u8> {
    let mut v = toks(&[b"entry", b"(", b"name", name, b"node"]);
    v.extend(toks(node));
    v.extend(toks(&[b")"]));
    v
}

const FILE: &[&[u8]] = &[b"(", b"type", b"regular", b"contents", b"pwned", b")"];

fn archive(entries: &[Vec<u8>]) -> Vec<u8> {
    let mut v = dir_head();
    for e in entries {
        v.extend_from_slice(e);
    }
    v.extend(toks(&[b")"]));
    v
}

/// Restores `nar` at `<tmp>/box/dest` and checks it failed and left nothing anywhere.
fn assert_refused(nar: &[u8], what: &str) -> NarError {
    let tmp = tempfile::tempdir().expect("tmp");
    let outside = tmp.path().join("outside");
    fs::create_dir(&outside).expect("mkdir");
    let boxdir = tmp.path().join("box");
    fs::create_dir(&boxdir).expect("mkdir");
    let dest = boxdir.join("dest");
    let err = match restore(nar, &dest) {
        Ok(_) => panic!("{what}: hostile archive was accepted"),
        Err(e) => e,
    };
    assert!(
        fs::symlink_metadata(&dest).is_err(),
        "{what}: dest left behind"
    );
    assert_eq!(
        fs::read_dir(&boxdir).expect("ls").count(),
        0,
        "{what}: wrote beside dest"
    );
    assert_eq!(
        fs::read_dir(&outside).expect("ls").count(),
        0,
        "{what}: wrote outside"
    );
    assert!(
        fs::symlink_metadata(tmp.path().join("pwned")).is_err(),
        "{what}: escaped"
    );
    err
}

#[test]
fn hostile_archives_are_refused() {
    let sym_out: &[&[u8]] = &[b"(", b"type", b"symlink", b"target", b"../../outside", b")"];
    let dir_with_file = |name: &[u8]| {
        let mut v = toks(&[b"(", b"type", b"directory"]);
        v.extend(entry(name, FILE));
        v.extend(toks(&[b")"]));
        v
    };
    let raw_entry = |name: &[u8], node: Vec<u8>| {
        let mut v = toks(&[b"entry", b"(", b"name", name, b"node"]);
        v.extend(node);
        v.extend(toks(&[b")"]));
        v
    };
    let cases: Vec<(&str, &str, Vec<u8>)> = vec![
        ("DotName", "dotdot", archive(&[entry(b"..", FILE)])),
        ("DotName", "dot", archive(&[entry(b".", FILE)])),
        (
            "NameContainsSlash",
            "slash",
            archive(&[entry(b"a/../../pwned", FILE)]),
        ),
        ("EmptyName", "empty name", archive(&[entry(b"", FILE)])),
        ("NameContainsNul", "nul", archive(&[entry(b"a\0b", FILE)])),
        (
            "Duplicate",
            "symlink then dir beneath it",
            archive(&[
                entry(b"a", sym_out),
                raw_entry(b"a", dir_with_file(b"pwned")),
            ]),
        ),
        (
            "NameContainsSlash",
            "symlink then path beneath it",
            archive(&[entry(b"a", sym_out), entry(b"a/pwned", FILE)]),
        ),
        (
            "Duplicate",
            "duplicate",
            archive(&[entry(b"a", FILE), entry(b"a", FILE)]),
        ),
        (
            "Unsorted",
            "unsorted",
            archive(&[entry(b"b", FILE), entry(b"a", FILE)]),
        ),
        ("TrailingBytes", "trailing garbage", {
            let mut v = archive(&[entry(b"a", FILE)]);
            v.extend_from_slice(b"garbage!");
            v
        }),
        (
            "BadMagic",
            "bad magic",
            toks(&[
                b"nix-archive-2",
                b"(",
                b"type",
                b"regular",
                b"contents",
                b"",
                b")",
            ]),
        ),
        (
            "UnexpectedToken",
            "executable marker",
            archive(&[entry(
                b"a",
                &[
                    b"(",
                    b"type",
                    b"regular",
                    b"executable",
                    b"x",
                    b"contents",
                    b"",
                    b")",
                ],
            )]),
        ),
        (
            "UnexpectedToken",
            "no contents",
            archive(&[entry(b"a", &[b"(", b"type", b"regular", b")"])]),
        ),
        (
            "BadTarget",
            "empty target",
            archive(&[entry(
                b"a",
                &[b"(", b"type", b"symlink", b"target", b"", b")"],
            )]),
        ),
        (
            "UnexpectedToken",
            "unknown type",
            archive(&[entry(b"a", &[b"(", b"type", b"fifo", b")"])]),
        ),
        (
            "TooLong",
            "long name",
            archive(&[entry(&[b'a'; 256], FILE)]),
        ),
        (
            "TooLong",
            "long target",
            archive(&[entry(
                b"a",
                &[b"(", b"type", b"symlink", b"target", &[b'a'; 4097], b")"],
            )]),
        ),
    ];
    for (variant, what, nar) in &cases {
        let err = assert_refused(nar, what);
        assert!(format!("{err:?}").starts_with(variant), "{what}: {err:?}");
        assert!(
            err.to_string().contains("byte"),
            "{what}: no offset in {err}"
        );
    }
    // Absurd lengths are refused before any allocation.
    let mut huge = dir_head();
    huge.extend(toks(&[b"entry", b"(", b"name"]));
    huge.extend_from_slice(&(1u64 << 60).to_le_bytes());
    assert!(matches!(
        assert_refused(&huge, "huge name"),
        NarError::TooLong { what: "name", .. }
    ));
    let mut huge_file = toks(&[b"nix-archive-1", b"(", b"type", b"regular", b"contents"]);
    huge_file.extend_from_slice(&u64::MAX.to_le_bytes());
    huge_file.extend_from_slice(b"abc");
    assert!(matches!(
        assert_refused(&huge_file, "huge file"),
        NarError::Truncated { .. }
    ));
}

#[test]
fn errors_name_the_offset() {
    let nar = archive(&[entry(b"b", FILE), entry(b"a", FILE)]);
    // magic 24 + "(" 16 + "type" 16 + "directory" 24 = 80; entry b: 5 tokens (16 each but
    // "entry" 16) = 80, file node 6 tokens = 96, ")" 16 -> second entry at 272; its name
    // token follows "entry" "(" "name" at 272 + 48 = 320.
    match check(&nar[..]) {
        Err(NarError::Unsorted {
            offset,
            previous,
            name,
        }) => {
            assert_eq!((offset, previous.as_str(), name.as_str()), (320, "b", "a"));
        }
        other => panic!("unexpected {other:?}"),
    }
    let mut trailing = archive(&[]);
    let len = trailing.len() as u64;
    trailing.push(0);
    assert!(
        matches!(check(&trailing[..]), Err(NarError::TrailingBytes { offset }) if offset == len)
    );
    let mut bad_pad = toks(&[
        b"nix-archive-1",
        b"(",
        b"type",
        b"regular",
        b"contents",
        b"x",
        b")",
    ]);
    // magic 24, "(" 16, "type" 16, "regular" 16, "contents" 16, length 8, 'x' at 96.
    bad_pad[99] = 1;
    assert!(matches!(
        check(&bad_pad[..]),
        Err(NarError::BadPadding { offset: 97 })
    ));
    assert!(matches!(
        check(&b"\x0d\0\0\0\0\0\0\0nix-archive-2\0\0\0"[..]),
        Err(NarError::BadMagic { offset: 8 })
    ));
    assert!(matches!(
        check(&b""[..]),
        Err(NarError::BadMagic { offset: 0 })
    ));
}

#[test]
fn every_truncation_is_refused() {
    let tmp = tempfile::tempdir().expect("tmp");
    let root = tmp.path().join("lit");
    literal_tree(&root);
    let nar = dump(&root);
    for cut in 0..nar.len() {
        let err = assert_refused(&nar[..cut], "truncated");
        assert!(
            matches!(err, NarError::Truncated { .. } | NarError::BadMagic { .. }),
            "cut {cut}: {err:?}"
        );
    }
}

#[test]
fn too_deep_is_refused() {
    let mut nar = toks(&[b"nix-archive-1"]);
    for _ in 0..=MAX_DEPTH {
        nar.extend(toks(&[
            b"(",
            b"type",
            b"directory",
            b"entry",
            b"(",
            b"name",
            b"a",
            b"node",
        ]));
    }
    nar.extend(toks(FILE));
    assert!(matches!(check(&nar[..]), Err(NarError::TooDeep { .. })));
}

#[test]
fn restore_refuses_existing_destination() {
    let tmp = tempfile::tempdir().expect("tmp");
    let mut nar = Vec::new();
    dump_regular(b"x", false, &mut nar).expect("dump");
    let dest = tmp.path().join("d");
    fs::write(&dest, "keep").expect("write");
    assert!(matches!(
        restore(&nar[..], &dest),
        Err(NarError::DestinationExists { .. })
    ));
    assert_eq!(fs::read(&dest).expect("read"), b"keep");
    let link: PathBuf = tmp.path().join("l");
    symlink("/nonexistent-target", &link).expect("symlink");
    assert!(matches!(
        restore(&nar[..], &link),
        Err(NarError::DestinationExists { .. })
    ));
}

#[test]
fn mutated_archives_never_panic() {
    let tmp = tempfile::tempdir().expect("tmp");
    let root = tmp.path().join("lit");
    literal_tree(&root);
    let nar = dump(&root);
    let mut rng = Rng(7);
    for i in 0..3000 {
        let mut m = nar.clone();
        for _ in 0..1 + rng.below(4) {
            let at = rng.below(m.len() as u64) as usize;
            match rng.below(3) {
                0 => m[at] = rng.next() as u8,
                1 => m[at] ^= 1 << rng.below(8),
                _ => m.truncate(at),
            }
            if m.is_empty() {
                break;
            }
        }
        let parsed = check(&m[..]);
        if i % 100 == 0 {
            // Restoring also never panics and cleans up after itself on failure.
            let dest = tmp.path().join(format!("m{i}"));
            if restore(&m[..], &dest).is_err() {
                assert!(fs::symlink_metadata(&dest).is_err());
            }
        }
        if m == nar {
            assert!(parsed.is_ok());
        }
    }
}

/// Direct writes: files around every boundary (the direct threshold, the alignment,
/// whole and partial chunks) come back byte for byte, with their modes, on a disk
/// filesystem and on tmpfs (which refuses `O_DIRECT`: buffered instead).
#[test]
fn restore_direct_round_trips_files_around_every_boundary() {
    let sizes: [u64; 8] = [
        0,
        4095,
        DIRECT_MIN - 1,
        DIRECT_MIN,
        DIRECT_MIN + 1,
        (4 << 20) + 4097,
        8 << 20,
        (9 << 20) - 1,
    ];
    let mut bases = vec![std::env::temp_dir()];
    if Path::new("/dev/shm").is_dir() {
        bases.push(PathBuf::from("/dev/shm"));
    }
    for base in bases {
        let tmp = tempfile::tempdir_in(&base).expect("tmp");
        let src = tmp.path().join("src");
        fs::create_dir(&src).expect("mkdir");
        for (i, size) in sizes.iter().enumerate() {
            let bytes: Vec<u8> = (0..*size).map(|j| (j * 31 + i as u64 * 7) as u8).collect();
            let f = src.join(format!("f{i}"));
            fs::write(&f, &bytes).expect("write");
            if i % 2 == 1 {
                fs::set_permissions(&f, fs::Permissions::from_mode(0o755)).expect("chmod");
            }
        }
        let nar = dump(&src);
        let out = tmp.path().join("out");
        restore_direct(&nar[..], &out).expect("restore_direct");
        assert_eq!(dump(&out), nar, "{}", base.display());
        for (i, size) in sizes.iter().enumerate() {
            let m = fs::metadata(out.join(format!("f{i}"))).expect("stat");
            assert_eq!(m.len(), *size);
            assert_eq!(m.permissions().mode() & 0o100 != 0, i % 2 == 1);
        }
        // A truncated archive leaves nothing behind.
        let cut = tmp.path().join("cut");
        assert!(restore_direct(&nar[..nar.len() - 5000], &cut).is_err());
        assert!(fs::symlink_metadata(&cut).is_err());
    }
}
