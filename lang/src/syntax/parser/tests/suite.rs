//! The Nix language conformance suite (`tests/functional/lang` of Nix), when a
//! copy is available: every `parse-okay`, `eval-okay` and `eval-fail` file must
//! parse (except a few that are deliberately syntax errors) and every syntactic
//! `parse-fail` file must fail. Skipped when the directory is missing; set
//! `NIX_LANG_TESTS` to point at it.

use super::super::super::ast::*;
use super::parse;
use std::collections::HashMap;
use std::path::PathBuf;

/// `parse-fail` tests whose failure is semantic (duplicate attributes, undefined
/// variables): Nix reports them from its parser, but here they belong to
/// `eval::compile`, so they must parse.
const SEMANTIC_PARSE_FAIL: &[&str] = &[
    "parse-fail-dup-attrs-1",
    "parse-fail-dup-attrs-2",
    "parse-fail-dup-attrs-3",
    "parse-fail-dup-attrs-4",
    "parse-fail-dup-attrs-7",
    "parse-fail-mixed-nested-attrs1",
    "parse-fail-mixed-nested-attrs2",
    "parse-fail-regression-20060610",
    "parse-fail-undef-var",
];

fn suite_dir() -> Option<PathBuf> {
    let candidates = [
        std::env::var_os("NIX_LANG_TESTS").map(PathBuf::from),
        Some(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/conformance/nix/lang")),
        Some(PathBuf::from("/work/shared/conformance/nix/lang")),
    ];
    candidates.into_iter().flatten().find(|d| d.is_dir())
}

/// The suite's `.nix` files whose names start with `prefix`, as (stem, source).
fn files(prefix: &str) -> Vec<(String, String)> {
    let Some(dir) = suite_dir() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if let Some(stem) = name.strip_prefix(prefix).and(name.strip_suffix(".nix")) {
            let bytes = std::fs::read(&path).unwrap();
            // Nix reads bytes; the parser takes text, so skip non-UTF-8 files.
            if let Ok(src) = String::from_utf8(bytes) {
                out.push((stem.to_string(), src));
            }
        }
    }
    out.sort();
    out
}

fn expected_error(stem: &str) -> String {
    let dir = suite_dir().unwrap();
    std::fs::read_to_string(dir.join(format!("{stem}.err.exp"))).unwrap_or_default()
}

#[test]
fn conformance_files_parse() {
    if suite_dir().is_none() {
        eprintln!("conformance suite not found; skipped");
        return;
    }
    let mut failures = Vec::new();
    let mut count = 0;
    for prefix in ["parse-okay-", "eval-okay-", "eval-fail-"] {
        for (stem, src) in files(prefix) {
            count += 1;
            let expected = expected_error(&stem);
            // eval-fail files whose expected error is a parse error.
            let must_fail = expected.contains("syntax error")
                || expected.contains("path has a trailing slash")
                || expected.contains("dynamic attributes not allowed")
                || expected.contains("duplicate formal function argument");
            match (parse(&src), must_fail) {
                (Ok(_), false) | (Err(_), true) => {}
                (Err(e), false) => failures.push(format!("{stem}: {} at {:?}", e.message, e.span)),
                (Ok(_), true) => failures.push(format!("{stem}: parsed but Nix rejects it")),
            }
        }
    }
    eprintln!("{count} files checked");
    assert!(count > 100, "suite looks incomplete");
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn conformance_parse_fail() {
    let mut failures = Vec::new();
    for (stem, src) in files("parse-fail-") {
        let semantic = SEMANTIC_PARSE_FAIL.contains(&stem.as_str());
        match parse(&src) {
            Ok(_) if !semantic => failures.push(format!("{stem}: parsed")),
            Err(e) if semantic => failures.push(format!("{stem}: {}", e.message)),
            Err(e) => {
                eprintln!("{stem}: {} at {:?}", e.message, e.span);
                // The kind agrees with the wording Nix prefixes with "syntax error, ".
                let worded =
                    e.message.starts_with("unexpected") || e.message.starts_with("unterminated");
                if e.is_syntax_error() != worded {
                    failures.push(format!("{stem}: {:?} for {:?}", e.kind, e.message));
                }
            }
            Ok(_) => {}
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Evaluates the string-only subset used by `eval-okay-ind-string.nix`: `let`,
/// variables, string literals and interpolation, `+` and `if true`.
fn eval_str(e: &Expr, env: &HashMap<String, String>) -> String {
    match &e.kind {
        ExprKind::Str(parts) => parts
            .iter()
            .map(|p| match p {
                StrPart::Lit(s) => s.clone(),
                StrPart::Interp(e) => eval_str(e, env),
            })
            .collect(),
        ExprKind::Var(v) => env[v.as_str()].clone(),
        ExprKind::Binary {
            op: BinaryOp::Add,
            lhs,
            rhs,
        } => eval_str(lhs, env) + &eval_str(rhs, env),
        ExprKind::If { cond, then, .. } => {
            assert!(matches!(&cond.kind, ExprKind::Var(v) if v == "true"));
            eval_str(then, env)
        }
        ExprKind::Let { bindings, body } => {
            let mut env = env.clone();
            for b in bindings {
                let Binding::Attr { path, value, .. } = b else {
                    panic!()
                };
                let [AttrName::Static(name, _)] = &path[..] else {
                    panic!()
                };
                let v = eval_str(value, &env);
                env.insert(name.to_string(), v);
            }
            eval_str(body, &env)
        }
        other => panic!("unsupported: {other:?}"),
    }
}

#[test]
fn conformance_indented_strings() {
    let Some(dir) = suite_dir() else { return };
    let src = std::fs::read_to_string(dir.join("eval-okay-ind-string.nix")).unwrap();
    let exp = std::fs::read_to_string(dir.join("eval-okay-ind-string.exp")).unwrap();
    let got = eval_str(&parse(&src).unwrap(), &HashMap::new());
    // The .exp file is the value printed as a Nix string literal.
    let printed = format!(
        "\"{}\"",
        got.replace('\\', "\\\\")
            .replace('"', "\\\"")
            .replace('\n', "\\n")
            .replace('\r', "\\r")
            .replace('\t', "\\t")
            .replace("${", "\\${")
    );
    assert_eq!(printed, exp.trim_end());
}
