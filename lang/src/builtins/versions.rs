//! Primops: version strings (`compareVersions`, `splitVersion`, `parseDrvName`).
//!
//! Owns Nix's version algorithms (its `names.cc`): a version is split into
//! components at `.` and `-` and at every change between digits and
//! non-digits; numeric components compare as numbers, `pre` sorts before
//! everything else, and a missing component sorts before a number. It must not
//! know anything about derivations beyond splitting a name at its version.

use std::cmp::Ordering;

use super::mk_attrs;
use super::op;
use super::strings::force_string_no_ctx;
use crate::eval::{Evaluator, RResult};
use crate::value::{Args, PrimOp, Value};

pub(crate) static BUILTINS: &[PrimOp] = &[
    op("compareVersions", 2, compare_versions_op).doc(
        "s1 s2",
        "Compare two version strings: -1 if s1 is older than s2, 0 if they are the same, and 1 if s1 is newer.",
    ),
    op("splitVersion", 1, split_version_op).doc(
        "s",
        "Split a string representing a version into its components, as compareVersions does.",
    ),
    op("parseDrvName", 1, parse_drv_name_op).doc(
        "s",
        "Split the string s into a package name and version: { name; version; }, at the first dash not followed by a letter.",
    ),
];

/// The next component of a version starting at `*pos`, skipping separators;
/// empty at the end.
fn next_component<'a>(s: &'a [u8], pos: &mut usize) -> &'a [u8] {
    while *pos < s.len() && (s[*pos] == b'.' || s[*pos] == b'-') {
        *pos += 1;
    }
    let start = *pos;
    if start >= s.len() {
        return &s[s.len()..];
    }
    if s[start].is_ascii_digit() {
        while *pos < s.len() && s[*pos].is_ascii_digit() {
            *pos += 1;
        }
    } else {
        while *pos < s.len() && !s[*pos].is_ascii_digit() && s[*pos] != b'.' && s[*pos] != b'-' {
            *pos += 1;
        }
    }
    &s[start..*pos]
}

/// A component as a C `int`, as Nix's `string2Int<int>` reads it (digits only;
/// `None` when empty or out of range).
fn component_int(c: &[u8]) -> Option<i32> {
    if c.is_empty() || !c.iter().all(|b| b.is_ascii_digit()) {
        return None;
    }
    std::str::from_utf8(c).ok()?.parse::<i32>().ok()
}

fn components_lt(c1: &[u8], c2: &[u8]) -> bool {
    let n1 = component_int(c1);
    let n2 = component_int(c2);
    match (n1, n2) {
        (Some(a), Some(b)) => a < b,
        _ if c1.is_empty() && n2.is_some() => true,
        _ if c1 == b"pre" && c2 != b"pre" => true,
        _ if c2 == b"pre" => false,
        // `2.3a` < `2.3.1`.
        (_, Some(_)) => true,
        (Some(_), _) => false,
        _ => c1 < c2,
    }
}

/// Nix's `compareVersions`.
pub(crate) fn compare_versions(v1: &str, v2: &str) -> Ordering {
    let (a, b) = (v1.as_bytes(), v2.as_bytes());
    let (mut p1, mut p2) = (0, 0);
    while p1 < a.len() || p2 < b.len() {
        let c1 = next_component(a, &mut p1);
        let c2 = next_component(b, &mut p2);
        if components_lt(c1, c2) {
            return Ordering::Less;
        }
        if components_lt(c2, c1) {
            return Ordering::Greater;
        }
    }
    Ordering::Equal
}

/// The components of a version, as `splitVersion` returns them.
pub(crate) fn split_version(v: &str) -> Vec<String> {
    let s = v.as_bytes();
    let mut pos = 0;
    let mut out = Vec::new();
    loop {
        let c = next_component(s, &mut pos);
        if c.is_empty() {
            break;
        }
        out.push(String::from_utf8_lossy(c).into_owned());
    }
    out
}

/// Splits a derivation name at the first `-` not followed by a letter.
pub(crate) fn parse_drv_name(s: &str) -> (String, String) {
    let b = s.as_bytes();
    for i in 0..b.len() {
        if b[i] == b'-' && i + 1 < b.len() && !b[i + 1].is_ascii_alphabetic() {
            return (
                String::from_utf8_lossy(&b[..i]).into_owned(),
                String::from_utf8_lossy(&b[i + 1..]).into_owned(),
            );
        }
    }
    (s.to_string(), String::new())
}

/// Compare two version strings: -1 if s1 is older than s2, 0 if they are the same, and 1 if s1 is newer.
fn compare_versions_op(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let v1 = force_string_no_ctx(ev, &a[0], || {
        "while evaluating the first argument passed to builtins.compareVersions".into()
    })?;
    let v2 = force_string_no_ctx(ev, &a[1], || {
        "while evaluating the second argument passed to builtins.compareVersions".into()
    })?;
    Ok(Value::Int(
        match compare_versions(v1.as_str(), v2.as_str()) {
            Ordering::Less => -1,
            Ordering::Equal => 0,
            Ordering::Greater => 1,
        },
    ))
}

/// Split a string representing a version into its components, as compareVersions does.
fn split_version_op(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let v = force_string_no_ctx(ev, &a[0], || {
        "while evaluating the first argument passed to builtins.splitVersion".into()
    })?;
    Ok(Value::list(
        split_version(v.as_str())
            .into_iter()
            .map(Value::str)
            .collect(),
    ))
}

/// Split the string s into a package name and version: { name; version; }, at the first dash not followed by a letter.
fn parse_drv_name_op(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let s = force_string_no_ctx(ev, &a[0], || {
        "while evaluating the first argument passed to builtins.parseDrvName".into()
    })?;
    let (name, version) = parse_drv_name(s.as_str());
    Ok(mk_attrs(vec![
        ("name", Value::str(name)),
        ("version", Value::str(version)),
    ]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::test_eval;
    use crate::eval::testing::err;

    fn ev(e: &str) -> String {
        match test_eval(e) {
            Ok(s) => s,
            Err(e) => panic!("unexpected error: {e}"),
        }
    }

    #[test]
    fn compare_vectors() {
        use Ordering::*;
        let cases = [
            ("1.0", "2.3", Less),
            ("2.1", "2.3", Less),
            ("2.3", "2.3", Equal),
            ("2.5", "2.3", Greater),
            ("3.1", "2.3", Greater),
            ("2.3.1", "2.3", Greater),
            ("2.3.1", "2.3a", Greater),
            ("2.3pre1", "2.3", Less),
            ("2.3pre3", "2.3pre12", Less),
            ("2.3a", "2.3c", Less),
            ("2.3pre1", "2.3c", Less),
            ("2.3pre1", "2.3q", Less),
            ("1.0", "1.0.0", Less),
            ("", "", Equal),
            ("1-2", "1.2", Equal),
            ("01", "1", Equal),
            ("a", "b", Less),
            ("pre", "a", Less),
            // A component past i32 is not a number to Nix, so it sorts
            // before any number.
            ("99999999999", "2", Less),
        ];
        for (a, b, want) in cases {
            assert_eq!(compare_versions(a, b), want, "{a} vs {b}");
            assert_eq!(compare_versions(b, a), want.reverse(), "{b} vs {a}");
        }
    }

    #[test]
    fn split_and_parse_vectors() {
        assert_eq!(split_version("1.2.3"), ["1", "2", "3"]);
        assert_eq!(
            split_version("1.2pre3-rc.x_y"),
            ["1", "2", "pre", "3", "rc", "x_y"]
        );
        assert_eq!(split_version("..-"), Vec::<String>::new());
        assert_eq!(
            parse_drv_name("hello-1.0.2"),
            ("hello".into(), "1.0.2".into())
        );
        assert_eq!(parse_drv_name("hello"), ("hello".into(), "".into()));
        assert_eq!(
            parse_drv_name("xf86-video-i810-1.7.4"),
            ("xf86-video-i810".into(), "1.7.4".into())
        );
        assert_eq!(
            parse_drv_name("name-that-ends-with-dash--1.0"),
            ("name-that-ends-with-dash".into(), "-1.0".into())
        );
        assert_eq!(parse_drv_name("a-"), ("a-".into(), "".into()));
    }

    #[test]
    fn primops() {
        assert_eq!(ev("builtins.compareVersions \"1.0\" \"2.3\""), "-1");
        assert_eq!(ev("builtins.compareVersions \"2.3\" \"2.3\""), "0");
        assert_eq!(ev("builtins.compareVersions \"2.3.1\" \"2.3a\""), "1");
        assert_eq!(
            ev("builtins.splitVersion \"1.2.3\""),
            "[ \"1\" \"2\" \"3\" ]"
        );
        assert_eq!(
            ev("builtins.parseDrvName \"915resolution-0.5.2\""),
            "{ name = \"915resolution\"; version = \"0.5.2\"; }"
        );
        let e = err("builtins.compareVersions 1 { }");
        assert!(
            e.contains("expected a string but found an integer: 1"),
            "{e}"
        );
        let e = err("builtins.compareVersions \"abd\" { }");
        assert!(e.contains("expected a string but found a set"), "{e}");
        let e = err("builtins.splitVersion 1");
        assert!(
            e.contains("expected a string but found an integer: 1"),
            "{e}"
        );
        let e = err("builtins.parseDrvName 1");
        assert!(
            e.contains("expected a string but found an integer: 1"),
            "{e}"
        );
    }
}
