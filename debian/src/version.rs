//! dpkg versions (`[epoch:]upstream[-revision]`, deb-version(7)) as the
//! rest of the crate uses them: [`debversion::Version`] does the parsing and
//! the ordering; this module only names the parse error after the package
//! it came from and holds the ordering's literal test vectors.
//!
//! ```text
//! 1.0~rc1 < 1.0 < 1.0-1 < 1.0a < 1.0+b1 < 1:0.1
//! ```
//!
//! Must not: re-implement the comparison.

pub use debversion::Version;

/// Parses the version of `package`; the error names both.
pub fn parse(package: &str, text: &str) -> Result<Version, String> {
    text.trim()
        .parse::<Version>()
        .map_err(|e| format!("package '{package}' has a bad version '{text}': {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cmp::Ordering::{self, *};

    fn cmp(a: &str, b: &str) -> Ordering {
        parse("t", a).unwrap().cmp(&parse("t", b).unwrap())
    }

    #[test]
    fn dpkg_order_vectors() {
        // (a, b, a ? b) — from deb-version(7) and dpkg's own test suite.
        for (a, b, want) in [
            ("1.0", "1.0", Equal),
            ("1.0-0", "1.0", Equal),
            ("0:1.0", "1.0", Equal),
            ("1.0~rc1", "1.0", Less),
            ("1.0~~", "1.0~", Less),
            ("1.0", "1.0-1", Less),
            ("1.0-1", "1.0a", Less),
            ("1.0a", "1.0+b1", Less),
            ("1.0+b1", "1:0.1", Less),
            ("1.2", "1.10", Less),
            ("2.38-1", "2.38-1+b1", Less),
            ("6.4.3-3", "6.4.3-3~exp1", Greater),
            ("1:1.2.13.dfsg-1", "1.2.13", Greater),
            ("21.1.8-1", "21.1.8-1", Equal),
            ("a", "b", Less),
            ("1.0-1", "1.0-1.1", Less),
        ] {
            assert_eq!(cmp(a, b), want, "{a} vs {b}");
            assert_eq!(cmp(b, a), want.reverse(), "{b} vs {a}");
        }
    }

    #[test]
    fn bad_versions_name_the_package() {
        let e = parse("hello", "").unwrap_err();
        assert!(e.contains("'hello'"), "{e}");
    }
}
