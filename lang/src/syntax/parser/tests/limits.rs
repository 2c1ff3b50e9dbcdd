//! Resource limits: deep nesting never overflows the stack, huge literals parse in
//! linear time, and arbitrary input never panics.

use super::super::super::ast::*;
use super::super::MAX_DEPTH;
use super::{parse, show};
use std::time::{Duration, Instant};

/// Runs `f` on a thread with a deliberately small stack, so that only the
/// parser's own stack management can make deep inputs work.
fn on_small_stack<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
    on_stack(256 * 1024, f)
}

fn on_stack<R: Send + 'static>(size: usize, f: impl FnOnce() -> R + Send + 'static) -> R {
    std::thread::Builder::new()
        .stack_size(size)
        .spawn(f)
        .unwrap()
        .join()
        .unwrap()
}

fn nested(open: &str, inner: &str, close: &str, n: usize) -> String {
    let mut s = open.repeat(n);
    s.push_str(inner);
    s.push_str(&close.repeat(n));
    s
}

#[test]
fn deep_parentheses_parse() {
    on_small_stack(|| {
        let e = parse(&nested("(", "1", ")", 100_000)).unwrap();
        assert_eq!(e.kind, ExprKind::Int(1));
        assert_eq!(e.span, Span::new(100_000, 100_001));
        let e = parse(&nested("(", "f x", ")", 100_000)).unwrap();
        assert!(matches!(e.kind, ExprKind::Apply { .. }));
        // Each level resumes after a parenthesized operand (and nests the tree,
        // which this small stack must still be able to drop).
        let e = parse(&nested("(", "f x", ") y", 500)).unwrap();
        assert!(matches!(e.kind, ExprKind::Apply { .. }));
        let e = parse(&nested("((", "1", ").a + 1)", 200)).unwrap();
        assert!(matches!(e.kind, ExprKind::Binary { .. }));
        let err = parse(&nested("(", "1", ")", 100_000)[1..]).unwrap_err();
        assert!(
            err.message.contains("expected end of file"),
            "{}",
            err.message
        );
        let err = parse(&nested("(", "1", ")", 100_000)[..200_000]).unwrap_err();
        assert!(err.message.contains("expected ')'"), "{}", err.message);
    });
}

#[test]
fn deep_lists_are_rejected_cleanly() {
    on_small_stack(|| {
        let src = nested("[", "1", "]", 100_000);
        let err = parse(&src).unwrap_err();
        assert_eq!(err.message, "expression nested too deeply");
        // Reported at the first list past the limit, before going any deeper.
        assert_eq!(
            err.span,
            Span::new(MAX_DEPTH as usize + 1, MAX_DEPTH as usize + 2)
        );
        // An unterminated version errs too, dropping the partial tree safely.
        assert!(parse(&src[..150_000]).is_err());
        // Other nested constructs hit the same limit, and the partial trees dropped
        // on the way out fit in the stack the parser keeps in reserve.
        let forms = [
            ("{a=", ";}"),
            ("rec { a.${", "} = 1; }"),
            ("x: { y ? ", " }: y"),
            ("let a = ", "; in a"),
            ("if a then ", " else b"),
            ("\"${", "}\""),
            ("''${", "}''"),
            ("./a/${", "}"),
            ("a.b or ", ""),
            ("assert ", "; 1"),
            ("[(", ")]"),
        ];
        for (open, close) in forms {
            let err = parse(&nested(open, "1", close, 100_000)).unwrap_err();
            assert_eq!(err.message, "expression nested too deeply", "{open}");
        }
    });
}

#[test]
fn nesting_up_to_the_limit_parses() {
    // Parsing this deep needs far more than 2 MiB of stack (the parser grows it);
    // dropping the tree does not, which is what the depth limit is for.
    on_stack(2 * 1024 * 1024, || {
        let n = MAX_DEPTH as usize - 10;
        for (open, close) in [
            ("[", "]"),
            ("{a=", ";}"),
            ("-(", ")"),
            ("x: ", ""),
            ("\"${", "}\""),
        ] {
            let e = parse(&nested(open, "1", close, n)).unwrap();
            drop(e);
        }
        let chain = format!("1{}", " + 1".repeat(n));
        assert!(parse(&chain).is_ok());
        let chain = format!("1{}", " + 1".repeat(100_000));
        assert_eq!(
            parse(&chain).unwrap_err().message,
            "expression nested too deeply"
        );
        let chain = format!("f{}", " x".repeat(100_000));
        assert_eq!(
            parse(&chain).unwrap_err().message,
            "expression nested too deeply"
        );
        let chain = format!("1{}", " ++ 1".repeat(100_000));
        assert_eq!(
            parse(&chain).unwrap_err().message,
            "expression nested too deeply"
        );
        let lets = format!("{}1", "let a = 1; in ".repeat(100_000));
        assert_eq!(
            parse(&lets).unwrap_err().message,
            "expression nested too deeply"
        );
        let neg = format!("{}1", "!".repeat(100_000));
        assert_eq!(
            parse(&neg).unwrap_err().message,
            "expression nested too deeply"
        );
    });
}

/// Runs `f` and checks it took less than `limit` (best of three runs, since the
/// machine may be busy). The limits are a few times the expected time on an idle
/// machine: they catch super-linear behaviour, not small regressions. Only
/// meaningful with optimizations (`cargo test --release`); debug builds run once
/// and only report.
fn timed<R>(what: &str, limit: Duration, f: impl Fn() -> R) -> R {
    let runs = if cfg!(debug_assertions) { 1 } else { 3 };
    let mut best = Duration::MAX;
    let mut result = None;
    for _ in 0..runs {
        let t = Instant::now();
        let r = f();
        best = best.min(t.elapsed());
        result = Some(r);
        if best < limit {
            break;
        }
    }
    eprintln!("{what}: {best:?}");
    if !cfg!(debug_assertions) {
        assert!(best < limit, "{what} took {best:?}");
    }
    result.unwrap()
}

/// Debug builds run the size tests on a tenth of the input.
const SHRINK: usize = if cfg!(debug_assertions) { 10 } else { 1 };

#[test]
fn huge_string_literals_are_linear() {
    let body = "abcdefghij\\n$x ${"
        .replace("${", "'")
        .repeat(3_000_000 / SHRINK); // ~50 MB
    let src = format!("\"{body}\"");
    let e = timed("50 MB string", Duration::from_millis(1000), || {
        parse(&src).unwrap()
    });
    let ExprKind::Str(parts) = &e.kind else {
        panic!()
    };
    assert_eq!(parts.len(), 1);

    let line = "    some text with $dollars and 'quotes' in it\n";
    let src = format!("''\n{}''", line.repeat(50_000_000 / SHRINK / line.len()));
    let e = timed("50 MB indented string", Duration::from_millis(1500), || {
        parse(&src).unwrap()
    });
    let ExprKind::Str(parts) = &e.kind else {
        panic!()
    };
    let StrPart::Lit(text) = &parts[0] else {
        panic!()
    };
    assert!(text.starts_with("some text with $dollars"));

    let src = format!("\"{}\"", "a${b}".repeat(1_000_000 / SHRINK));
    timed("1M interpolations", Duration::from_millis(3000), || {
        parse(&src).unwrap()
    });
}

#[test]
fn large_files_parse_fast() {
    let mut src =
        String::from("{ pkgs, lib ? pkgs.lib, ... }:\nlet\n  inherit (lib) mkIf;\nin rec {\n");
    for i in 0..60_000 / SHRINK {
        src.push_str(&format!(
            "  pkg{i} = pkgs.callPackage ./pkgs/p{i}/default.nix {{ inherit (pkgs) stdenv; \
             flag = if lib.versionAtLeast \"1.{i}\" x then [ \"a\" ] ++ b else {{ }}; }};\n  \
             # comment {i}\n  str{i} = ''\n    echo ${{pkg{i}}}/bin\n  '';\n"
        ));
    }
    src.push_str("}\n");
    let mb = src.len() as f64 / 1e6;
    timed(
        &format!("{mb:.1} MB file"),
        Duration::from_millis(3000),
        || parse(&src).unwrap(),
    );
    // A flat list of a million elements is not deep.
    let list = format!("[{}]", " x".repeat(1_000_000 / SHRINK));
    timed("1M element list", Duration::from_millis(1500), || {
        parse(&list).unwrap()
    });
}

/// A small deterministic generator (xorshift).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[test]
fn random_input_never_panics() {
    const PIECES: &[&str] = &[
        "(",
        ")",
        "[",
        "]",
        "{",
        "}",
        "${",
        "\"",
        "''",
        "'''",
        "''$",
        "''\\",
        "$",
        "\\",
        ";",
        ":",
        ",",
        ".",
        "...",
        "@",
        "?",
        "=",
        "==",
        "!",
        "!=",
        "<",
        "<=",
        ">",
        ">=",
        "&&",
        "||",
        "->",
        "//",
        "++",
        "+",
        "-",
        "*",
        "/",
        "|>",
        "<|",
        "#",
        "/*",
        "*/",
        "\n",
        "\r",
        " ",
        "\t",
        "a",
        "or",
        "if",
        "then",
        "else",
        "let",
        "in",
        "rec",
        "inherit",
        "with",
        "assert",
        "x:",
        "1",
        "1.5",
        ".5",
        "99999999999999999999",
        "./a",
        "a/b",
        "/",
        "~/",
        "<n>",
        "http://x",
        "é",
        "\u{0}",
        "__curPos",
    ];
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let seeds = [
        "{ a = 1; b = [ ./x \"y${z}\" ''\n  w\n'' ]; }.a or (x: x)",
        "let f = { a, b ? 2, ... }@args: a + b; in f { a = 1; } |> g",
        "rec { inherit (x) y; \"k\" = if a then b else c; }",
    ];
    for round in 0..30_000 / SHRINK {
        let mut s = String::new();
        if round % 2 == 0 {
            for _ in 0..rng.below(40) {
                s.push_str(PIECES[rng.below(PIECES.len())]);
                if rng.below(3) == 0 {
                    s.push(' ');
                }
            }
        } else {
            s.push_str(seeds[rng.below(seeds.len())]);
            for _ in 0..1 + rng.below(4) {
                let at = rng.below(s.len() + 1);
                let at = (0..=at).rev().find(|&i| s.is_char_boundary(i)).unwrap_or(0);
                if rng.below(2) == 0 {
                    s.insert_str(at, PIECES[rng.below(PIECES.len())]);
                } else {
                    let end = (at + 1 + rng.below(4)).min(s.len());
                    let end = (end..=s.len()).find(|&i| s.is_char_boundary(i)).unwrap();
                    s.replace_range(at..end, "");
                }
            }
        }
        match parse(&s) {
            Ok(e) => {
                let _ = show(&e);
            }
            Err(e) => {
                assert!(
                    e.span.start <= e.span.end && e.span.end as usize <= s.len(),
                    "{s:?}: {e:?}"
                );
                assert!(!e.message.is_empty());
            }
        }
    }
}
