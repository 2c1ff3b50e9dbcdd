//! Choosing the packages of a build chroot from one suite's [`Index`], as
//! apt would when it installs them into an empty root.
//!
//! The rules, in full (they fix the result; the same index and request give
//! the same set):
//!
//! 1. **Seed**: the requested relations in the order given (a name, or a
//!    name with a constraint: `cmake`, `gcc (>= 4:14)`), then every package
//!    with `Essential: yes`, then every package with `Priority: required`,
//!    each group by name. That is `mmdebstrap --variant=buildd`'s essential
//!    set plus the `required` priority (apt, `dpkg`'s helpers, …) and what
//!    was asked for. All seeds are chosen before any dependency is followed.
//! 2. **Closure**: breadth first in the order chosen, each chosen package's
//!    `Pre-Depends` then `Depends` (not `Recommends` or `Suggests`).
//!    Relations restricted away for the host (`[!amd64]`, `<stage1>`) are
//!    dropped; a dependency left with no alternative is ignored.
//! 3. **Already satisfied**: a dependency one of whose alternatives is met
//!    by a package chosen so far (by its name and version, or by what it
//!    `Provides`) adds nothing.
//! 4. **Otherwise the first satisfiable alternative**, in the order written.
//!    An alternative is satisfiable by a *real* package of that name (the
//!    newest version allowed by its constraint, architecture the host's or
//!    `all`) before any *provider*; among providers, the first by package
//!    name (then newest). An unversioned `Provides` never satisfies a
//!    versioned relation, a versioned one only when its version does.
//! 5. **One version per name**: a name chosen once stays at that version; a
//!    later relation it does not satisfy cannot choose another version.
//! 6. A dependency that no alternative can satisfy is an error
//!    ([`ResolveError`]) naming it and the chain of packages that led to it,
//!    from a seed: `app (requested) -> libfoo -> nosuch`.
//!
//! Conflicts and Breaks are not looked at (a single suite is
//! co-installable in practice); neither are Recommends, as with
//! `--no-install-recommends`.
//!
//! Owns: these rules and the explanation of failures. Must not: do I/O or
//! know about lock files (`lock`).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt;

use crate::index::Index;
use crate::relation::{self, Relation};

/// Why a package is in the result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
    /// Asked for.
    Requested,
    /// `Essential: yes`.
    Essential,
    /// `Priority: required`.
    Required,
    /// A dependency of another chosen package.
    Dependency {
        /// The package whose field named it.
        by: String,
        /// `Depends` or `Pre-Depends`.
        field: &'static str,
        /// The relation as written (one alternative).
        relation: String,
    },
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::Requested => f.write_str("requested"),
            Reason::Essential => f.write_str("Essential: yes"),
            Reason::Required => f.write_str("Priority: required"),
            Reason::Dependency {
                by,
                field,
                relation,
            } => write!(f, "{field} of {by}: {relation}"),
        }
    }
}

/// The chosen packages.
#[derive(Debug, Clone)]
pub struct Resolution {
    /// Index entries, sorted by package name.
    pub chosen: Vec<u32>,
    /// Why each package (by name) was chosen.
    pub reasons: BTreeMap<String, Reason>,
}

/// Resolution failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    /// A requested item does not parse as a relation.
    #[error("bad requested package '{text}': {reason}")]
    BadRequest {
        /// As given.
        text: String,
        /// Why.
        reason: String,
    },
    /// A relation field of a package in the index does not parse.
    #[error("package '{package}': {message}")]
    BadField {
        /// The package.
        package: String,
        /// The parse error.
        message: String,
    },
    /// Nothing satisfies a dependency.
    #[error("cannot satisfy '{dependency}' ({needed_by}): {why}\n  chain: {}", chain.join(" -> "))]
    Unsatisfiable {
        /// The dependency as written (alternatives joined with ` | `).
        dependency: String,
        /// `requested`, or `Depends of PKG VERSION`.
        needed_by: String,
        /// Why each alternative fails.
        why: String,
        /// From a seed to the missing name: `app (requested)`, `libfoo`, `nosuch`.
        chain: Vec<String>,
    },
}

/// Resolves `requested` (relations, usually bare names) plus the seed set
/// against `index` for `host` (see the module documentation for the rules).
pub fn resolve(
    index: &Index,
    requested: &[String],
    host: &str,
) -> Result<Resolution, ResolveError> {
    let mut st = State {
        index,
        host,
        chosen: HashMap::new(),
        provided: HashMap::new(),
        reasons: BTreeMap::new(),
        order: Vec::new(),
    };
    // 1. Seeds.
    for text in requested {
        let rel = relation::parse_relation(text).map_err(|e| ResolveError::BadRequest {
            text: text.clone(),
            reason: e.reason,
        })?;
        if st.satisfied(&rel) {
            st.reasons.insert(rel.name.clone(), Reason::Requested);
            continue;
        }
        match st.pick(&rel) {
            Ok(i) => st.choose(i, Reason::Requested),
            Err(why) => {
                return Err(ResolveError::Unsatisfiable {
                    dependency: rel.to_string(),
                    needed_by: "requested".into(),
                    why,
                    chain: vec![format!("{} (requested)", rel.name)],
                })
            }
        }
    }
    for (flag, reason) in [(true, Reason::Essential), (false, Reason::Required)] {
        let mut names: Vec<&str> = index
            .packages()
            .iter()
            .filter(|p| {
                if flag {
                    p.essential
                } else {
                    p.priority == "required"
                }
            })
            .map(|p| p.name.as_str())
            .collect();
        names.sort_unstable();
        names.dedup();
        for name in names {
            if !st.chosen.contains_key(name) {
                st.choose(index.versions(name)[0], reason.clone());
            }
        }
    }
    // 2. Closure, breadth first.
    let mut queue: VecDeque<u32> = st.order.iter().copied().collect();
    while let Some(i) = queue.pop_front() {
        let p = index.get(i);
        let deps = p.dependencies().map_err(|e| ResolveError::BadField {
            package: p.name.clone(),
            message: e.to_string(),
        })?;
        for (field, dep) in deps {
            let alts: Vec<&Relation> = dep.iter().filter(|r| r.applies(host)).collect();
            if alts.is_empty() || alts.iter().any(|r| st.satisfied(r)) {
                continue;
            }
            let mut why = Vec::new();
            let mut picked = None;
            for r in &alts {
                match st.pick(r) {
                    Ok(j) => {
                        picked = Some((j, r.to_string()));
                        break;
                    }
                    Err(w) => why.push(w),
                }
            }
            match picked {
                Some((j, relation)) => {
                    st.choose(
                        j,
                        Reason::Dependency {
                            by: p.name.clone(),
                            field,
                            relation,
                        },
                    );
                    queue.push_back(j);
                }
                None => {
                    let dependency = alts
                        .iter()
                        .map(|r| r.to_string())
                        .collect::<Vec<_>>()
                        .join(" | ");
                    let mut chain = st.chain(&p.name);
                    chain.push(dependency.clone());
                    return Err(ResolveError::Unsatisfiable {
                        dependency,
                        needed_by: format!("{field} of {} {}", p.name, p.version),
                        why: why.join("; "),
                        chain,
                    });
                }
            }
        }
    }
    let mut chosen: Vec<u32> = st.chosen.values().copied().collect();
    chosen.sort_by(|&a, &b| index.get(a).name.cmp(&index.get(b).name));
    Ok(Resolution {
        chosen,
        reasons: st.reasons,
    })
}

struct State<'a> {
    index: &'a Index,
    host: &'a str,
    /// Name → the chosen entry.
    chosen: HashMap<String, u32>,
    /// Virtual name → (chosen provider, provided version).
    provided: HashMap<String, Vec<(u32, Option<debversion::Version>)>>,
    reasons: BTreeMap<String, Reason>,
    /// Entries in the order chosen.
    order: Vec<u32>,
}

impl State<'_> {
    fn choose(&mut self, i: u32, reason: Reason) {
        let p = self.index.get(i);
        self.chosen.insert(p.name.clone(), i);
        for (virt, v) in &p.provides {
            self.provided
                .entry(virt.clone())
                .or_default()
                .push((i, v.clone()));
        }
        self.reasons.insert(p.name.clone(), reason);
        self.order.push(i);
    }

    /// Rule 3: met by a package chosen so far.
    fn satisfied(&self, r: &Relation) -> bool {
        if let Some(&i) = self.chosen.get(&r.name) {
            let p = self.index.get(i);
            if r.accepts_arch(&p.architecture, self.host)
                && r.constraint.as_ref().is_none_or(|c| c.allows(&p.version))
            {
                return true;
            }
        }
        self.provided.get(&r.name).is_some_and(|ps| {
            ps.iter().any(|(i, v)| {
                r.accepts_arch(&self.index.get(*i).architecture, self.host)
                    && provides_ok(r, v.as_ref())
            })
        })
    }

    /// Rules 4 and 5: the entry to choose for `r`, or why there is none.
    fn pick(&self, r: &Relation) -> Result<u32, String> {
        let ix = self.index;
        let versions = ix.versions(&r.name);
        if let Some(&have) = self.chosen.get(&r.name) {
            // Rule 5 (it is not satisfied, or we would not be here).
            let p = ix.get(have);
            if ix.providers(&r.name).is_empty() {
                return Err(format!(
                    "'{}' is already chosen at version {} ({}), which does not satisfy it",
                    r.name,
                    p.version,
                    self.reasons
                        .get(&r.name)
                        .map(|w| w.to_string())
                        .unwrap_or_default()
                ));
            }
        } else if let Some(&i) = versions.iter().find(|&&i| {
            let p = ix.get(i);
            r.accepts_arch(&p.architecture, self.host)
                && r.constraint.as_ref().is_none_or(|c| c.allows(&p.version))
        }) {
            return Ok(i);
        }
        let providers = ix.providers(&r.name);
        for (i, v) in providers {
            let p = ix.get(*i);
            let free = self.chosen.get(&p.name).is_none_or(|&c| c == *i);
            if free && r.accepts_arch(&p.architecture, self.host) && provides_ok(r, v.as_ref()) {
                return Ok(*i);
            }
        }
        // Why not, in words.
        let mut why = if versions.is_empty() && providers.is_empty() {
            format!("no package or provider named '{}'", r.name)
        } else if versions.is_empty() {
            format!("'{}' is virtual", r.name)
        } else {
            let list: Vec<String> = versions
                .iter()
                .map(|&i| {
                    let p = ix.get(i);
                    format!("{} [{}]", p.version, p.architecture)
                })
                .collect();
            format!("'{}' has versions {}", r.name, list.join(", "))
        };
        if !providers.is_empty() {
            let list: Vec<String> = providers
                .iter()
                .map(|(i, v)| match v {
                    Some(v) => format!("{} (= {v})", ix.get(*i).name),
                    None => ix.get(*i).name.clone(),
                })
                .collect();
            why.push_str(&format!(", provided by {}", list.join(", ")));
        }
        if let Some(q) = &r.arch_qualifier {
            why.push_str(&format!(", wanted for architecture '{q}'"));
        }
        Err(format!("{why}; none satisfies '{r}'"))
    }

    /// The chain of reasons from a seed down to `name`.
    fn chain(&self, name: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut cur = name.to_string();
        // Bounded: each step goes to a package chosen earlier.
        for _ in 0..=self.chosen.len() {
            match self.reasons.get(&cur) {
                Some(Reason::Dependency { by, .. }) => {
                    out.push(cur.clone());
                    cur = by.clone();
                }
                Some(seed) => {
                    out.push(format!("{cur} ({seed})"));
                    break;
                }
                None => {
                    out.push(cur.clone());
                    break;
                }
            }
        }
        out.reverse();
        out
    }
}

/// Whether a `Provides` with version `v` satisfies `r` (policy 7.5: an
/// unversioned one satisfies only unversioned relations).
fn provides_ok(r: &Relation, v: Option<&debversion::Version>) -> bool {
    match (&r.constraint, v) {
        (None, _) => true,
        (Some(c), Some(v)) => c.allows(v),
        (Some(_), None) => false,
    }
}
