//! Deterministic mutation testing of the `.drv` (ATerm) parser (issue 8: bad input never
//! panics).
//!
//! Owns: the seed derivations (three written by Nix 2.8, three written by `rocmx`), the
//! mutator (a fixed-seed xorshift generator: bit flips, byte replacements, deletions,
//! duplications and moves of spans, truncations, inserted tokens, rewritten string
//! literals, invalid UTF-8, NUL bytes, huge numbers, deep nesting) and the test that runs
//! about 20,000 mutated texts through [`parse`] under `catch_unwind`.
//!
//! For every text: parsing returns `Ok` or `Err` and never panics; an accepted text is
//! canonical (`print(parse(t)) == t`) and its printed form parses back to the same value;
//! the derived views of an accepted derivation (`to_json`, `store_path`, output-path
//! checks, references) do not panic either. The counts are printed (`--nocapture`).

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};

use super::aterm::{parse, print};
use super::Derivation;

/// Written by `rocmx build --dry-run` (a floating-output derivation).
const ROCMX_A: &str = r#"Derive([("out","","r:blake3","")],[],[],"x86_64-linux","/bin/sh",["-c","echo A > $out"],[("builder","/bin/sh"),("name","a"),("out","/1rz4g4znpzjwh1xymhjpm42vipw92pr73vdgl6xs1hycac8kf2n9"),("system","x86_64-linux")])"#;
/// Written by `rocmx build --dry-run` (a flat fixed-output derivation).
const ROCMX_FOD: &str = r#"Derive([("out","/rocmx/store/siffg34nh7fh9jzpz3acgs2vilh07cx7-fetched","sha256","e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")],[],[],"x86_64-linux","/bin/sh",["-c","echo > $out"],[("builder","/bin/sh"),("name","fetched"),("out","/rocmx/store/siffg34nh7fh9jzpz3acgs2vilh07cx7-fetched"),("outputHash","sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="),("outputHashMode","flat"),("system","x86_64-linux")])"#;
/// Written by `rocmx build --dry-run` (three outputs, two input derivations, a source,
/// escapes and non-ASCII text).
const ROCMX_MULTI: &str = r#"Derive([("dev","","r:blake3",""),("lib","","r:blake3",""),("out","","r:blake3","")],[("/rocmx/store/ay9vwsk0kmdyh4ymdkb7cc9s250mfpq7-a.drv",["out"]),("/rocmx/store/nav6ngd13l5slr101afz2x1n7szxakcv-fetched.drv",["out"])],["/rocmx/store/yms49znp25hy7923gwnwylz4h8ad8ih5-src.sh"],"x86_64-linux","/bin/sh",["-c","cat /rocmx/store/vwjr6jdfrvy89460n52h9kx6g0dajq6w-a /rocmx/store/siffg34nh7fh9jzpz3acgs2vilh07cx7-fetched /rocmx/store/yms49znp25hy7923gwnwylz4h8ad8ih5-src.sh > $out; mkdir $lib $dev"],[("builder","/bin/sh"),("dev","/02qcpld1y6xhs5gz9bchpxaw0xdhmsp5dv88lh25r2ss44kh8dxz"),("empty",""),("lib","/0sra2y18lr3h6j58qjm0w46yv36h1wjmilb09n8aimdpivdymscx"),("name","multi"),("out","/1rz4g4znpzjwh1xymhjpm42vipw92pr73vdgl6xs1hycac8kf2n9"),("outputs","out lib dev"),("system","x86_64-linux"),("tabs","a\tb\r\nc \" \\ ü")])"#;

/// The real derivations the mutations start from.
fn seeds() -> [&'static str; 6] {
    use super::aterm::tests::{NIX_CA, NIX_FLAT, NIX_FOD};
    [NIX_CA, NIX_FOD, NIX_FLAT, ROCMX_A, ROCMX_FOD, ROCMX_MULTI]
}

/// Byte strings inserted at random places: grammar punctuation, escapes, NUL, invalid
/// UTF-8, huge numbers, pieces of the grammar.
const TOKENS: &[&[u8]] = &[
    b"\"",
    b"\\",
    b"(",
    b")",
    b"[",
    b"]",
    b",",
    b"\0",
    b"\\\"",
    b"\\x",
    b"\\\0",
    b"\xff",
    b"\xc3",
    b"\xe6\x97",
    b"\xed\xa0\x80",
    b"\xf4\x90\x80\x80",
    b"18446744073709551616",
    b"-99999999999999999999999999999999999999",
    b"1e999999",
    b"Derive(",
    b"\"\"",
    b"[]",
    b"(\"out\",\"\",\"r:blake3\",\"\")",
    b"(\"a\",\"b\")",
    b"\n",
    b"\t",
    "ü日本".as_bytes(),
];

/// Values written into a string literal (replacing its contents), to reach the semantic
/// checks: names, store paths, hash algorithms, digests.
const FIELDS: &[&str] = &[
    "",
    "out",
    "drv",
    "a b",
    ".",
    "..",
    "-",
    "r:",
    "r:r:sha256",
    "sha256",
    "r:sha1",
    "md5",
    "r:blake3",
    "sha512",
    "SHA256",
    "/rocmx/store",
    "/rocmx/store/",
    "/rocmx/store/00000000000000000000000000000000-x",
    "/rocmx/store/00000000000000000000000000000000-x.drv",
    "/rocmx/store/eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee-",
    "/rocmx/store/eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee-x/sub",
    "/rocmx/store/EEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEE-x",
    "/nix/store/00000000000000000000000000000000-x",
    "da39a3ee5e6b4b0d3255bfef95601890afd80709",
    "DA39A3EE5E6B4B0D3255BFEF95601890AFD80709",
    "d41d8cd98f00b204e9800998ecf8427e",
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b85g",
    "0mdqa9w1p6cmli6976v4wi0sw9r4p5prkj7lzfd1877wk11c9c73",
    "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz",
    "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=",
    "sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=",
    "340282366920938463463374607431768211456",
    "\\u0000",
    "ü",
];

/// xorshift64: deterministic, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Uniform-enough in `0..n` (`n > 0`).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// A span `[a, b)` of `len` bytes, at most `max` long (empty when `len` is 0).
    fn span(&mut self, len: usize, max: usize) -> (usize, usize) {
        if len == 0 {
            return (0, 0);
        }
        let a = self.below(len);
        let b = (a + 1 + self.below(max)).min(len);
        (a, b)
    }
}

/// Applies one random mutation to `t`.
fn mutate(rng: &mut Rng, t: &mut Vec<u8>) {
    let len = t.len();
    let at = if len == 0 { 0 } else { rng.below(len + 1) };
    match rng.below(10) {
        0 if len > 0 => {
            let i = rng.below(len);
            t[i] ^= 1 << rng.below(8);
        }
        1 if len > 0 => {
            let i = rng.below(len);
            t[i] = rng.next() as u8;
        }
        2 => {
            let (a, b) = rng.span(len, 24);
            t.drain(a..b);
        }
        3 => {
            let (a, b) = rng.span(len, 64);
            let copy = t[a..b].to_vec();
            let to = rng.below(len + 1);
            t.splice(to..to, copy);
        }
        4 => t.truncate(at),
        5 => {
            // Move a span elsewhere.
            let (a, b) = rng.span(len, 40);
            let piece: Vec<u8> = t.drain(a..b).collect();
            let to = rng.below(t.len() + 1);
            t.splice(to..to, piece);
        }
        6 | 7 => {
            // Rewrite the contents of a string literal.
            let quotes: Vec<usize> = (0..len).filter(|&i| t[i] == b'"').collect();
            if quotes.len() >= 2 {
                let k = rng.below(quotes.len() - 1);
                let (a, b) = (quotes[k] + 1, quotes[k + 1]);
                let field = FIELDS[rng.below(FIELDS.len())].as_bytes();
                t.splice(a..b, field.iter().copied());
            }
        }
        _ => {
            let tok = TOKENS[rng.below(TOKENS.len())];
            t.splice(at..at, tok.iter().copied());
        }
    }
}

/// The texts to parse that are not random: every truncation of every seed, deep nesting,
/// huge strings and lists.
fn fixed_cases() -> Vec<Vec<u8>> {
    let mut cases = Vec::new();
    for seed in seeds() {
        for end in 0..seed.len() {
            cases.push(seed.as_bytes()[..end].to_vec());
        }
    }
    let deep = 100_000;
    for (prefix, open) in [
        ("", "["),
        ("", "("),
        ("Derive(", "["),
        ("Derive(", "("),
        ("Derive([", "("),
        ("Derive([],[", "("),
        ("Derive([],[],[],\"s\",\"b\",", "["),
        ("Derive([],[],[],\"s\",\"b\",[],[", "("),
    ] {
        let mut t = prefix.as_bytes().to_vec();
        t.extend(std::iter::repeat_n(open.as_bytes()[0], deep));
        cases.push(t);
    }
    // A huge string, a long list, many escapes, a NUL-filled text: all canonical but one.
    let huge = "x".repeat(4 << 20);
    cases.push(format!(r#"Derive([],[],[],"{huge}","/bin/sh",[],[])"#).into_bytes());
    let many = vec!["\"a\""; 200_000].join(",");
    cases.push(format!(r#"Derive([],[],[],"s","b",[{many}],[])"#).into_bytes());
    let escapes = "\\\\\\\"\\n".repeat(100_000);
    cases.push(format!(r#"Derive([],[],[],"s","b",["{escapes}"],[])"#).into_bytes());
    cases.push(vec![0; 1 << 16]);
    cases.push(format!(r#"Derive([],[],[],"s","b",["{}"],[])"#, "\0".repeat(1000)).into_bytes());
    cases
}

#[derive(Default)]
struct Tally {
    parsed: usize,
    refused: usize,
    not_utf8: usize,
    panics: usize,
    first_panic: Option<String>,
    round_trip_failures: usize,
    first_round_trip_failure: Option<String>,
    refusals: BTreeMap<String, usize>,
}

/// A short, printable form of a (possibly huge) input for failure messages.
fn show(t: &[u8]) -> String {
    if t.len() <= 2000 {
        format!("{:?}", String::from_utf8_lossy(t))
    } else {
        format!(
            "{:?}… ({} bytes)",
            String::from_utf8_lossy(&t[..2000]),
            t.len()
        )
    }
}

/// The derived views of an accepted derivation; none may panic.
fn exercise(d: &Derivation) {
    let _ = d.to_json();
    let _ = d.references();
    let _ = d.content_address();
    let name = d.name().unwrap_or("x").to_string();
    let _ = d.store_path(&name);
    let _ = d.check_output_paths(&name);
}

impl Tally {
    /// Parses `bytes` (as the CLI would after reading a file: invalid UTF-8 is refused
    /// before the parser, so such texts go through the lossy conversion instead).
    fn run(&mut self, bytes: &[u8]) {
        let text = match std::str::from_utf8(bytes) {
            Ok(t) => std::borrow::Cow::Borrowed(t),
            Err(_) => {
                self.not_utf8 += 1;
                String::from_utf8_lossy(bytes)
            }
        };
        let text: &str = &text;
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            let r = parse(text);
            if let Ok(d) = &r {
                exercise(d);
            }
            r
        }));
        match outcome {
            Err(_) => {
                self.panics += 1;
                self.first_panic.get_or_insert_with(|| show(bytes));
            }
            Ok(Err(e)) => {
                self.refused += 1;
                let dbg = format!("{e:?}");
                let kind = dbg.split([' ', '{', '(']).next().unwrap_or("").to_string();
                *self.refusals.entry(kind).or_default() += 1;
            }
            Ok(Ok(d)) => {
                self.parsed += 1;
                let printed = print(&d);
                let again = catch_unwind(|| parse(&printed));
                if printed != text || !matches!(&again, Ok(Ok(d2)) if *d2 == d) {
                    self.round_trip_failures += 1;
                    self.first_round_trip_failure
                        .get_or_insert_with(|| format!("{} printed as {printed:?}", show(bytes)));
                }
            }
        }
    }
}

#[test]
fn mutated_drv_texts_never_panic_and_accepted_ones_round_trip() {
    for seed in seeds() {
        let d = parse(seed).expect("seed parses");
        assert_eq!(print(&d), seed, "seed is canonical");
    }
    let mut tally = Tally::default();
    for case in fixed_cases() {
        tally.run(&case);
    }
    let fixed = tally.parsed + tally.refused + tally.panics;
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let seeds = seeds();
    let random = 20_000 - fixed;
    for i in 0..random {
        let mut t = seeds[i % seeds.len()].as_bytes().to_vec();
        // Mostly one or two mutations (texts that stay close to valid reach the deeper
        // checks), sometimes many.
        let n = match rng.below(8) {
            0..=3 => 1,
            4 | 5 => 2,
            6 => 3,
            _ => 4 + rng.below(12),
        };
        for _ in 0..n {
            mutate(&mut rng, &mut t);
        }
        tally.run(&t);
    }
    let total = tally.parsed + tally.refused + tally.panics;
    eprintln!(
        "{total} mutated .drv texts: {} parsed, {} refused, {} panics \
         ({fixed} fixed cases: truncations, deep nesting, huge texts; {random} random \
         mutations; {} not UTF-8, parsed after lossy conversion)",
        tally.parsed, tally.refused, tally.panics, tally.not_utf8
    );
    eprintln!("refusals by kind: {:?}", tally.refusals);
    assert_eq!(
        tally.panics,
        0,
        "the parser panicked; first input: {}",
        tally.first_panic.unwrap_or_default()
    );
    assert_eq!(
        tally.round_trip_failures,
        0,
        "an accepted text did not round-trip: {}",
        tally.first_round_trip_failure.unwrap_or_default()
    );
    assert_eq!(total, 20_000);
    // The mutations must reach past the grammar into the semantic checks, and some must
    // survive (edits inside free text), or this test would be testing little.
    assert!(tally.parsed >= 100, "only {} texts parsed", tally.parsed);
    for kind in [
        "Expected",
        "BadString",
        "Unsorted",
        "Duplicate",
        "StorePath",
        "Hash",
        "BadHashAlgo",
        "BadOutputName",
        "UnsupportedOutput",
        "TrailingText",
        "NulByte",
    ] {
        assert!(
            tally.refusals.contains_key(kind),
            "no mutation was refused with {kind}: {:?}",
            tally.refusals
        );
    }
}

/// Found by `tests/bad_drv.rs`: a NUL byte in the `name` variable was accepted, and the
/// realiser then panicked naming the build's thread after it. NUL bytes are now refused,
/// at their offset, wherever a string holds one.
#[test]
fn nul_byte_in_a_string_is_refused_at_its_offset() {
    use super::DerivationError;
    const FOUND: &str = "Derive([(\"out\",\"/rocmx/store/siffg34nh7fh9jzpz3acgs2vilh07cx7-fetched\",\"sha256\",\"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\")],[],[],\"x86_64-linux\",\"/bin/sh\",[\"-c\",\"echo > $out\"],[(\"builder\",\"/bsn/sh\"),(\"name\",\"fe\0tched\"),(\"out\",\"/rocmx/store/siffg34nh7fh9jzpz3acgs2vilh07cx7-fetched\"),(\"outputHash\",\"sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\"),(\"outputHashMode\",\"flat\"),(\"system\",\"r:\")])";
    let at = FOUND.find('\0').expect("a NUL byte");
    let e = parse(FOUND).expect_err("NUL refused");
    assert_eq!(e, DerivationError::NulByte { offset: at });
    assert_eq!(
        e.to_string(),
        format!("derivation byte {at}: NUL byte in a string (expected another character, or '\"' ending the string)")
    );
    // Everywhere a string can be: output name, path, algorithm, hash, input path and
    // output, source, system, builder, argument, variable name and value.
    for (i, _) in ROCMX_MULTI.match_indices('"') {
        let mut t = ROCMX_MULTI.to_string();
        t.insert(i + 1, '\0');
        match parse(&t) {
            Err(DerivationError::NulByte { offset }) => assert_eq!(offset, i + 1, "{t:?}"),
            // After a closing quote the NUL is outside any string: the grammar refuses it.
            Err(DerivationError::Expected { offset, .. }) => assert_eq!(offset, i + 1, "{t:?}"),
            other => panic!("{other:?} for {t:?}"),
        }
    }
}
