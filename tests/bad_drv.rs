//! Mutated `.drv` files given to the `rocmx` binary (issue 8: bad input never panics).
//!
//! Owns: the end-to-end set of a few hundred deterministic mutations of derivations that
//! `rocmx` itself writes, added to a temporary store (`rocmx store add FILE.drv` gives a
//! valid store path whose name ends in `.drv`) and read back by every command that parses
//! a stored `.drv`: `rocmx derivation show`, `rocmx build --dry-run` (the CLI's reader)
//! and `rocmx build` (the realiser's reader). Every run must end with an exit code (0 or
//! 1: no signal, no panic's 101), within a generous deadline, and without "panicked" on
//! standard error; a text one command refuses as a derivation, the others refuse too.
//! The parser's own unit-level set is `store/src/derivation/fuzz_tests.rs`.

mod common;
use common::make_writable;

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_rocmx");

/// How long one process may take before the test calls it a hang.
const DEADLINE: Duration = Duration::from_secs(20);

/// Derivations for the seeds: floating, flat fixed-output, and three outputs with input
/// derivations, a source and escapes.
const SEEDS_NIX: &str = r#"
let
  src = builtins.toFile "src.sh" "echo \"hi\"\n\ttab\\";
  fod = derivation { name = "fetched"; system = "x86_64-linux"; builder = "/bin/sh";
    args = ["-c" "echo > $out"]; outputHashMode = "flat";
    outputHash = "sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="; };
  a = derivation { name = "a"; system = "x86_64-linux"; builder = "/bin/sh";
    args = ["-c" "echo A > $out"]; };
  multi = derivation { name = "multi"; system = "x86_64-linux"; builder = "/bin/sh";
    outputs = [ "out" "lib" "dev" ]; args = [ "-c" "cat ${a} ${fod} ${src} > $out; mkdir $lib $dev" ];
    tabs = "a\tb\r\nc \" \\ ü"; empty = ""; };
in { inherit fod a multi; }
"#;

/// How many mutated files (besides the unmutated seeds).
const MUTANTS: usize = 300;

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Runs `rocmx --store ROOT ARGS…` with output to files (no pipe can fill up), polling
/// for its end; a process alive after [`DEADLINE`] is killed and fails the test.
fn rocmx(dir: &Path, args: &[&str]) -> Run {
    let (out_path, err_path) = (dir.join("stdout"), dir.join("stderr"));
    let mut child = Command::new(BIN)
        .env_remove("ROCMX_STORE")
        .current_dir(dir)
        .arg("--store")
        .arg(dir.join("root"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(File::create(&out_path).expect("stdout file"))
        .stderr(File::create(&err_path).expect("stderr file"))
        .spawn()
        .expect("spawn rocmx");
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if start.elapsed() > DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            panic!("rocmx {args:?} still running after {DEADLINE:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let read = |p: &Path| String::from_utf8_lossy(&fs::read(p).unwrap_or_default()).into_owned();
    Run {
        code: status.code(),
        stdout: read(&out_path),
        stderr: read(&err_path),
    }
}

/// Fails unless `r` ended on its own with 0, 1 or a build failure's code and did not
/// panic.
fn assert_clean(r: &Run, what: &str, input: &[u8]) {
    let shown = String::from_utf8_lossy(&input[..input.len().min(600)]);
    assert!(
        r.code.is_some(),
        "{what}: killed by a signal on input {shown:?}\nstderr: {}",
        r.stderr
    );
    assert!(
        !r.stderr.contains("panicked"),
        "{what}: panicked on input {shown:?}\nstderr: {}",
        r.stderr
    );
    // 1 a refusal, 100-111 a build that failed (Nix's codes: 0x60 and bits).
    assert!(
        matches!(r.code, Some(0 | 1 | 100..=111)),
        "{what}: exit {:?} on input {shown:?}\nstderr: {}",
        r.code,
        r.stderr
    );
    if r.code != Some(0) {
        assert!(r.stderr.contains("error"), "{what}: silent failure");
    }
}

/// xorshift64 with a fixed seed: the same files on every run.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n.max(1) as u64) as usize
    }
}

const TOKENS: &[&[u8]] = &[
    b"\"",
    b"\\",
    b"(",
    b"[",
    b",",
    b")",
    b"]",
    b"\0",
    b"\xff\xfe",
    b"\xc3",
    b"\\x",
    b"99999999999999999999999999999999",
    b"\"\"",
    b"(\"out\",\"\",\"r:blake3\",\"\")",
    b"\n",
];

const FIELDS: &[&str] = &[
    "",
    "drv",
    "r:sha1",
    "sha256",
    "r:",
    "/rocmx/store/00000000000000000000000000000000-x.drv",
    "/rocmx/store/eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee-",
    "/nix/store/00000000000000000000000000000000-x",
    "da39a3ee5e6b4b0d3255bfef95601890afd80709",
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b85G",
    "x86_64-darwin",
    "a b",
];

/// One random edit of `t`.
fn mutate(rng: &mut Rng, t: &mut Vec<u8>) {
    let len = t.len();
    let at = rng.below(len + 1);
    let span = |rng: &mut Rng, max: usize| {
        let a = rng.below(len);
        (a, (a + 1 + rng.below(max)).min(len))
    };
    match rng.below(8) {
        0 if len > 0 => t[at.min(len - 1)] ^= 1 << rng.below(8),
        1 if len > 0 => t[at.min(len - 1)] = rng.below(256) as u8,
        2 if len > 0 => {
            let (a, b) = span(rng, 20);
            t.drain(a..b);
        }
        3 if len > 0 => {
            let (a, b) = span(rng, 60);
            let copy = t[a..b].to_vec();
            t.splice(at..at, copy);
        }
        4 => t.truncate(at),
        5 => {
            let quotes: Vec<usize> = (0..len).filter(|&i| t[i] == b'"').collect();
            if quotes.len() >= 2 {
                let k = rng.below(quotes.len() - 1);
                let field = FIELDS[rng.below(FIELDS.len())].as_bytes();
                t.splice(quotes[k] + 1..quotes[k + 1], field.iter().copied());
            }
        }
        _ => {
            let tok = TOKENS[rng.below(TOKENS.len())];
            t.splice(at..at, tok.iter().copied());
        }
    }
}

/// Has `rocmx` write the seed derivations into the store; returns their texts.
fn seeds(dir: &Path) -> Vec<Vec<u8>> {
    let nix = dir.join("seeds.nix");
    fs::write(&nix, SEEDS_NIX).expect("write seeds.nix");
    let r = rocmx(
        dir,
        &["build", "--dry-run", "--file", nix.to_str().unwrap()],
    );
    assert_eq!(r.code, Some(0), "writing the seeds: {}", r.stderr);
    let mut texts: Vec<(PathBuf, Vec<u8>)> = fs::read_dir(dir.join("root/store"))
        .expect("store")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "drv"))
        .map(|p| {
            let t = fs::read(&p).expect("read seed");
            (p, t)
        })
        .collect();
    texts.sort();
    assert_eq!(texts.len(), 3, "expected three seed derivations");
    texts.into_iter().map(|(_, t)| t).collect()
}

/// The input files: the unmutated seeds (controls), a few fixed hostile texts, then
/// [`MUTANTS`] random mutations of the seeds.
fn inputs(seeds: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut all: Vec<Vec<u8>> = seeds.to_vec();
    let mut deep = b"Derive(".to_vec();
    deep.extend(std::iter::repeat_n(b'[', 100_000));
    all.push(deep);
    all.push(Vec::new());
    all.push(vec![0; 4096]);
    all.push(b"Derive([(\"out\",\"\",\"r:blake3\",\"\")],[],[],\"\xff\xfe\",\"b\",[],[])".to_vec());
    let mut big = b"Derive([],[],[],\"s\",\"b\",[\"".to_vec();
    big.extend(std::iter::repeat_n(b'x', 8 << 20));
    big.extend_from_slice(b"\"],[])");
    all.push(big);
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    for i in 0..MUTANTS {
        let mut t = seeds[i % seeds.len()].clone();
        for _ in 0..1 + rng.below(3) {
            mutate(&mut rng, &mut t);
        }
        all.push(t);
    }
    all
}

/// A temporary directory made writable again (store contents are read-only) before it
/// is removed, also when the test fails.
struct Scratch(tempfile::TempDir);

impl Drop for Scratch {
    fn drop(&mut self) {
        make_writable(self.0.path());
    }
}

#[derive(Default, Debug)]
struct Counts {
    shown: usize,
    show_refused: usize,
    dry_ok: usize,
    dry_refused: usize,
    built: usize,
    build_failed: usize,
}

#[test]
fn mutated_drv_files_are_refused_or_handled_never_a_panic_or_hang() {
    let tmp = Scratch(tempfile::tempdir().expect("tempdir"));
    let dir = tmp.0.path();
    let seeds = seeds(dir);
    let inputs = inputs(&seeds);
    let files = dir.join("in");
    fs::create_dir_all(&files).expect("mkdir");
    let names: Vec<PathBuf> = (0..inputs.len())
        .map(|i| files.join(format!("m{i:03}.drv")))
        .collect();
    for (name, text) in names.iter().zip(&inputs) {
        fs::write(name, text).expect("write input");
    }
    let mut add = vec!["store", "add"];
    add.extend(names.iter().map(|n| n.to_str().unwrap()));
    let r = rocmx(dir, &add);
    assert_eq!(r.code, Some(0), "store add: {}", r.stderr);
    let paths: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(paths.len(), inputs.len(), "one store path per file");

    let mut c = Counts::default();
    for (i, (path, text)) in paths.iter().zip(&inputs).enumerate() {
        assert!(path.ends_with(&format!("-m{i:03}.drv")), "{path}");
        let show = rocmx(dir, &["derivation", "show", path]);
        assert_clean(&show, "derivation show", text);
        if show.code == Some(0) {
            c.shown += 1;
            let j: serde_json::Value = serde_json::from_str(&show.stdout)
                .unwrap_or_else(|e| panic!("not JSON ({e}): {}", show.stdout));
            assert!(j[*path].is_object(), "{j}");
        } else {
            c.show_refused += 1;
            assert!(
                show.stderr.contains("derivation '"),
                "the refusal names the derivation: {}",
                show.stderr
            );
        }
        if i < seeds.len() {
            assert_eq!(show.code, Some(0), "an unmutated seed: {}", show.stderr);
        }

        let target = format!("{{ type = \"derivation\"; drvPath = \"{path}\"; }}");
        let dry = rocmx(dir, &["build", "--dry-run", "--expr", &target]);
        assert_clean(&dry, "build --dry-run", text);
        match dry.code {
            Some(0) => c.dry_ok += 1,
            _ => c.dry_refused += 1,
        }
        let build = rocmx(
            dir,
            &[
                "build",
                "--no-link",
                "--timeout",
                "10",
                "--max-silent-time",
                "10",
                "--expr",
                &target,
            ],
        );
        assert_clean(&build, "build", text);
        match build.code {
            Some(0) => c.built += 1,
            _ => c.build_failed += 1,
        }
        // A text that is not a derivation is not one for any command.
        if show.code == Some(1) {
            assert_eq!(dry.code, Some(1), "dry run accepted what show refused");
            assert_eq!(
                build.code,
                Some(1),
                "build accepted what show refused: {}",
                build.stderr
            );
        }
    }
    eprintln!(
        "{} .drv files through rocmx ({} unmutated seeds, 5 fixed hostile texts, {MUTANTS} \
         mutants), 0 panics, 0 signals, 0 hangs:\n  derivation show: {} parsed, {} refused\n  \
         build --dry-run: {} ok, {} refused\n  build: {} built, {} failed",
        inputs.len(),
        seeds.len(),
        c.shown,
        c.show_refused,
        c.dry_ok,
        c.dry_refused,
        c.built,
        c.build_failed
    );
    // The set must exercise both sides of the parser.
    assert!(c.shown > seeds.len(), "no mutant parsed: {c:?}");
    assert!(c.show_refused > MUTANTS / 2, "few mutants refused: {c:?}");
}

/// Regression: a NUL byte in the `name` variable of a fixed-output derivation (found by
/// the mutated set above) was accepted by the parser, and `rocmx build` then panicked
/// naming the build's thread after it. Every command now refuses the file, naming the
/// byte offset.
#[test]
fn a_nul_byte_in_a_drv_string_is_refused_by_every_command() {
    let tmp = Scratch(tempfile::tempdir().expect("tempdir"));
    let dir = tmp.0.path();
    let text = "Derive([(\"out\",\"/rocmx/store/siffg34nh7fh9jzpz3acgs2vilh07cx7-fetched\",\"sha256\",\"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\")],[],[],\"x86_64-linux\",\"/bin/sh\",[\"-c\",\"echo > $out\"],[(\"builder\",\"/bsn/sh\"),(\"name\",\"fe\0tched\"),(\"out\",\"/rocmx/store/siffg34nh7fh9jzpz3acgs2vilh07cx7-fetched\"),(\"outputHash\",\"sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\"),(\"outputHashMode\",\"flat\"),(\"system\",\"r:\")])";
    let at = text.find('\0').expect("a NUL byte");
    let file = dir.join("nul.drv");
    fs::write(&file, text).expect("write");
    let r = rocmx(dir, &["store", "add", file.to_str().unwrap()]);
    assert_eq!(r.code, Some(0), "store add: {}", r.stderr);
    let path = r.stdout.trim().to_string();
    let target = format!("{{ type = \"derivation\"; drvPath = \"{path}\"; }}");
    let expected = format!("derivation byte {at}: NUL byte in a string");
    for args in [
        vec!["derivation", "show", path.as_str()],
        vec!["build", "--dry-run", "--expr", &target],
        vec!["build", "--no-link", "--expr", &target],
    ] {
        let r = rocmx(dir, &args);
        assert_clean(&r, &args.join(" "), text.as_bytes());
        assert_eq!(r.code, Some(1), "{args:?}: {}", r.stderr);
        assert!(r.stderr.contains(&expected), "{args:?}: {}", r.stderr);
    }
}
