//! Package relations as binary `Packages` indices write them (Debian policy
//! 7.1): `Depends`, `Pre-Depends` and `Provides`.
//!
//! ```text
//! Depends: a | b (>= 1.2), c:any (<< 3) [amd64], d [!i386] <!nocheck>
//! Provides: mail-transport-agent, libfoo-abi (= 2)
//! ```
//!
//! A field is a comma-separated list of [`Dependency`]s (all must hold); a
//! dependency is a `|`-separated list of alternative [`Relation`]s (one must
//! hold). A relation is a name, an optional architecture qualifier
//! (`:any`, `:native`, `:ARCH`), an optional version constraint
//! `(OP VERSION)` with `OP` one of `<<`, `<=`, `=`, `>=`, `>>` (the obsolete
//! `<` and `>` read as `<=` and `>=`, as dpkg does), an optional architecture
//! restriction `[a !b]` and optional build-profile restrictions `<p> <!q r>`.
//! Restrictions are rare in binary indices but legal; [`Relation::applies`]
//! evaluates them for a host architecture with no build profile active.
//!
//! Owns: parsing that grammar and deciding whether a version satisfies a
//! constraint. Must not: look packages up or choose among alternatives
//! (that is `resolve`), or do I/O.

use std::fmt;

use debversion::Version;

/// A version comparison operator of a relation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// `<<`: strictly earlier.
    Lt,
    /// `<=`: earlier or equal.
    Le,
    /// `=`: exactly equal.
    Eq,
    /// `>=`: later or equal.
    Ge,
    /// `>>`: strictly later.
    Gt,
}

impl Op {
    /// The operator as written in control files.
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Lt => "<<",
            Op::Le => "<=",
            Op::Eq => "=",
            Op::Ge => ">=",
            Op::Gt => ">>",
        }
    }

    /// Whether `have OP want` holds, in dpkg's version order.
    pub fn holds(self, have: &Version, want: &Version) -> bool {
        let o = have.cmp(want);
        match self {
            Op::Lt => o.is_lt(),
            Op::Le => o.is_le(),
            Op::Eq => o.is_eq(),
            Op::Ge => o.is_ge(),
            Op::Gt => o.is_gt(),
        }
    }
}

/// A version constraint `(OP VERSION)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Constraint {
    /// The operator.
    pub op: Op,
    /// The version compared against.
    pub version: Version,
}

impl Constraint {
    /// Whether `version` satisfies this constraint.
    pub fn allows(&self, version: &Version) -> bool {
        self.op.holds(version, &self.version)
    }
}

impl fmt::Display for Constraint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "({} {})", self.op.as_str(), self.version)
    }
}

/// One alternative of a dependency.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relation {
    /// The package (or virtual package) name.
    pub name: String,
    /// The architecture qualifier after `:` (`any`, `native`, or an
    /// architecture name).
    pub arch_qualifier: Option<String>,
    /// The version constraint.
    pub constraint: Option<Constraint>,
    /// The architecture restriction `[…]`: `(negated, architecture)` terms.
    pub arches: Vec<(bool, String)>,
    /// Build-profile restriction formulas `<…> <…>`: each a list of
    /// `(negated, profile)` terms.
    pub profiles: Vec<Vec<(bool, String)>>,
}

impl Relation {
    /// Whether this relation is in force on `host` (an architecture such as
    /// `amd64`) with no build profile active. A relation restricted away
    /// (`[!amd64]` on amd64, `<nocheck>`) is dropped from its dependency.
    pub fn applies(&self, host: &str) -> bool {
        let arch_ok = if self.arches.is_empty() {
            true
        } else if self.arches.iter().all(|(neg, _)| *neg) {
            // `[!a !b]`: everywhere but those.
            !self.arches.iter().any(|(_, a)| arch_matches(a, host))
        } else {
            self.arches
                .iter()
                .any(|(neg, a)| !*neg && arch_matches(a, host))
        };
        // A formula holds when all its terms do; no profile is active, so a
        // positive term is false and a negated one true.
        let profiles_ok =
            self.profiles.is_empty() || self.profiles.iter().any(|f| f.iter().all(|(n, _)| *n));
        arch_ok && profiles_ok
    }

    /// Whether a package of architecture `arch` (`all` included) may
    /// satisfy this relation on a single-architecture `host`: unqualified,
    /// `:any` and `:native` relations yes; `:ARCH` only for that
    /// architecture.
    pub fn accepts_arch(&self, arch: &str, host: &str) -> bool {
        match self.arch_qualifier.as_deref() {
            None | Some("any") | Some("native") => true,
            Some(q) => q == arch || (q == host && arch == "all"),
        }
    }
}

impl fmt::Display for Relation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)?;
        if let Some(q) = &self.arch_qualifier {
            write!(f, ":{q}")?;
        }
        if let Some(c) = &self.constraint {
            write!(f, " {c}")?;
        }
        Ok(())
    }
}

/// A dependency: alternatives, one of which must hold.
pub type Dependency = Vec<Relation>;

/// Whether the architecture name or wildcard `pattern` matches `host`
/// (`any`, `linux-any`, `any-amd64`, or the name itself). Every Debian
/// release architecture is a Linux one.
pub fn arch_matches(pattern: &str, host: &str) -> bool {
    pattern == host
        || pattern == "any"
        || pattern == "linux-any"
        || pattern.strip_prefix("any-") == Some(host)
        || pattern.strip_prefix("linux-") == Some(host)
}

/// A relation field that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad relation '{text}': {reason}")]
pub struct RelationError {
    /// The relation (one alternative) as written.
    pub text: String,
    /// What is wrong.
    pub reason: String,
}

/// Parses a `Depends`/`Pre-Depends` field: `a | b (>= 1), c`. An empty
/// field is an empty list; empty entries between commas are skipped, as dpkg
/// does for trailing commas.
pub fn parse_dependencies(field: &str) -> Result<Vec<Dependency>, RelationError> {
    let mut out = Vec::new();
    for dep in field.split(',') {
        if dep.trim().is_empty() {
            continue;
        }
        let alts = dep
            .split('|')
            .map(parse_relation)
            .collect::<Result<Vec<_>, _>>()?;
        out.push(alts);
    }
    Ok(out)
}

/// Parses a `Provides` field: a comma-separated list of names, each with an
/// optional `(= VERSION)` (the only operator Provides allows).
pub fn parse_provides(field: &str) -> Result<Vec<(String, Option<Version>)>, RelationError> {
    let mut out = Vec::new();
    for item in field.split(',') {
        if item.trim().is_empty() {
            continue;
        }
        let r = parse_relation(item)?;
        let version = match r.constraint {
            None => None,
            Some(Constraint {
                op: Op::Eq,
                version,
            }) => Some(version),
            Some(c) => {
                return Err(RelationError {
                    text: item.trim().to_string(),
                    reason: format!("Provides allows only '=' versions, not '{}'", c.op.as_str()),
                })
            }
        };
        out.push((r.name, version));
    }
    Ok(out)
}

/// Parses one alternative: `name[:qual] [(op version)] [[arches]] [<profiles>…]`.
pub fn parse_relation(text: &str) -> Result<Relation, RelationError> {
    let whole = text.trim();
    let err = |reason: &str| RelationError {
        text: whole.to_string(),
        reason: reason.to_string(),
    };
    let mut rest = whole;
    let name_end = rest
        .find(|c: char| c.is_whitespace() || "([<".contains(c))
        .unwrap_or(rest.len());
    let (full_name, after) = rest.split_at(name_end);
    rest = after.trim_start();
    if full_name.is_empty() {
        return Err(err("missing package name"));
    }
    let (name, arch_qualifier) = match full_name.split_once(':') {
        Some((n, q)) if !q.is_empty() && !n.is_empty() => (n, Some(q.to_string())),
        Some(_) => return Err(err("empty name or architecture qualifier around ':'")),
        None => (full_name, None),
    };
    if !valid_name(name) {
        return Err(err(&format!("'{name}' is not a valid package name")));
    }
    let mut constraint = None;
    if let Some(r) = rest.strip_prefix('(') {
        let close = r.find(')').ok_or_else(|| err("unclosed '('"))?;
        let inner = r[..close].trim();
        rest = r[close + 1..].trim_start();
        let (op, ver) = if let Some(v) = inner.strip_prefix("<<") {
            (Op::Lt, v)
        } else if let Some(v) = inner.strip_prefix("<=") {
            (Op::Le, v)
        } else if let Some(v) = inner.strip_prefix(">=") {
            (Op::Ge, v)
        } else if let Some(v) = inner.strip_prefix(">>") {
            (Op::Gt, v)
        } else if let Some(v) = inner.strip_prefix('=') {
            (Op::Eq, v)
        } else if let Some(v) = inner.strip_prefix('<') {
            (Op::Le, v)
        } else if let Some(v) = inner.strip_prefix('>') {
            (Op::Ge, v)
        } else {
            return Err(err("a version constraint needs one of << <= = >= >>"));
        };
        let ver = ver.trim();
        if ver.is_empty() {
            return Err(err("missing version after the operator"));
        }
        let version = ver
            .parse::<Version>()
            .map_err(|e| err(&format!("bad version '{ver}': {e}")))?;
        constraint = Some(Constraint { op, version });
    }
    let mut arches = Vec::new();
    if let Some(r) = rest.strip_prefix('[') {
        let close = r.find(']').ok_or_else(|| err("unclosed '['"))?;
        for a in r[..close].split_whitespace() {
            match a.strip_prefix('!') {
                Some(n) => arches.push((true, n.to_string())),
                None => arches.push((false, a.to_string())),
            }
        }
        if arches.is_empty() {
            return Err(err("empty architecture restriction '[]'"));
        }
        rest = r[close + 1..].trim_start();
    }
    let mut profiles = Vec::new();
    while let Some(r) = rest.strip_prefix('<') {
        let close = r.find('>').ok_or_else(|| err("unclosed '<'"))?;
        let terms: Vec<(bool, String)> = r[..close]
            .split_whitespace()
            .map(|t| match t.strip_prefix('!') {
                Some(n) => (true, n.to_string()),
                None => (false, t.to_string()),
            })
            .collect();
        if terms.is_empty() {
            return Err(err("empty build-profile restriction '<>'"));
        }
        profiles.push(terms);
        rest = r[close + 1..].trim_start();
    }
    if !rest.is_empty() {
        return Err(err(&format!("unexpected '{rest}'")));
    }
    Ok(Relation {
        name: name.to_string(),
        arch_qualifier,
        constraint,
        arches,
        profiles,
    })
}

/// Policy 5.6.1: lower-case letters, digits, `+ - .`, at least two
/// characters, starting alphanumerically. Upper case is tolerated (old
/// archives have it).
fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        s.parse().unwrap()
    }

    #[test]
    fn alternatives_constraints_qualifiers() {
        let deps = parse_dependencies("a | b (>= 1.2), c:any (<< 3) [amd64], d").unwrap();
        assert_eq!(deps.len(), 3);
        assert_eq!(deps[0].len(), 2);
        assert_eq!(deps[0][0].name, "a");
        assert_eq!(deps[0][0].constraint, None);
        assert_eq!(deps[0][1].to_string(), "b (>= 1.2)");
        let c = &deps[1][0];
        assert_eq!(c.name, "c");
        assert_eq!(c.arch_qualifier.as_deref(), Some("any"));
        assert_eq!(c.constraint.as_ref().unwrap().op, Op::Lt);
        assert_eq!(c.arches, vec![(false, "amd64".to_string())]);
        assert!(c.applies("amd64"));
        assert!(!c.applies("i386"));
        assert_eq!(deps[2][0].name, "d");
    }

    #[test]
    fn every_operator_and_the_obsolete_ones() {
        for (text, op) in [
            ("x (<< 1)", Op::Lt),
            ("x (<= 1)", Op::Le),
            ("x (= 1)", Op::Eq),
            ("x (>= 1)", Op::Ge),
            ("x (>> 1)", Op::Gt),
            ("x (< 1)", Op::Le),
            ("x (> 1)", Op::Ge),
            ("x(>=1)", Op::Ge),
        ] {
            assert_eq!(
                parse_relation(text).unwrap().constraint.unwrap().op,
                op,
                "{text}"
            );
        }
    }

    #[test]
    fn restrictions() {
        let r = parse_relation("d [!i386 !arm64] <!nocheck> <stage1>").unwrap();
        assert!(r.applies("amd64"));
        assert!(!r.applies("i386"));
        assert_eq!(r.profiles.len(), 2);
        let r = parse_relation("e <stage1>").unwrap();
        assert!(!r.applies("amd64"));
        let r = parse_relation("f [linux-any]").unwrap();
        assert!(r.applies("amd64"));
        let r = parse_relation("g:i386").unwrap();
        assert!(!r.accepts_arch("amd64", "amd64"));
        assert!(parse_relation("g:native")
            .unwrap()
            .accepts_arch("amd64", "amd64"));
    }

    #[test]
    fn trailing_commas_and_empty_fields() {
        assert!(parse_dependencies("").unwrap().is_empty());
        assert_eq!(parse_dependencies("a, b,").unwrap().len(), 2);
    }

    #[test]
    fn bad_relations() {
        for bad in [
            "a (>= 1", "a (~ 1)", "a (>= )", "(>= 1)", "a b", "a [amd64", "a []", "-a", "a:",
        ] {
            assert!(parse_relation(bad).is_err(), "{bad} should not parse");
        }
        let e = parse_dependencies("ok, a (>= 1").unwrap_err();
        assert_eq!(e.text, "a (>= 1");
    }

    #[test]
    fn provides() {
        let p = parse_provides("mail-transport-agent, libfoo-abi (= 2:1.0-1)").unwrap();
        assert_eq!(p[0], ("mail-transport-agent".to_string(), None));
        assert_eq!(p[1].1, Some(v("2:1.0-1")));
        assert!(parse_provides("x (>= 1)").is_err());
    }

    #[test]
    fn constraint_holds_in_dpkg_order() {
        let c = parse_relation("x (>= 1.2)").unwrap().constraint.unwrap();
        assert!(c.allows(&v("1.2")));
        assert!(c.allows(&v("1.10")));
        assert!(!c.allows(&v("1.2~rc1")));
        assert!(c.allows(&v("1:0.1")));
        let c = parse_relation("x (<< 3)").unwrap().constraint.unwrap();
        assert!(c.allows(&v("2.99")));
        assert!(!c.allows(&v("3")));
        assert!(c.allows(&v("3~beta")));
    }
}
