//! `require-sigs-count N`: which store path the caches, together, vouch for as the
//! output of a floating derivation output.
//!
//! Owns: the rule. A cache serves one realisation per `<drvhash>!<output>`, so the
//! realisations of every cache asked are taken together: grouped by `outPath`, the
//! signatures of each group pooled (every copy naming the same path signs the same
//! fingerprint), and the distinct trusted keys with a valid signature among them
//! counted. A path is accepted when at least N keys signed it; when several paths are,
//! the one with the most signers (then the one of the first cache in order). When none
//! reaches N, nothing is accepted: the caller builds instead and warns with
//! [`Verdict::describe`], which names every claim (the caches and signers behind each
//! path), so a disagreement between caches is visible.
//!
//! Must not: fetch anything (the caller passes what the caches served, each record
//! already checked to carry at least one trusted signature), or decide which keys are
//! trusted.

use rocmx_cache::keys::TrustedKeys;
use rocmx_cache::realisation::Realisation;
use rocmx_store::StorePath;

/// One output path claimed by one or more caches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    /// The path claimed.
    pub out_path: StorePath,
    /// The caches that serve it, in the order asked.
    pub caches: Vec<String>,
    /// The names of the distinct trusted keys that signed it.
    pub signers: Vec<String>,
    /// Every signature of the group (pooled across the caches, each once).
    pub signatures: Vec<String>,
}

/// What the caches, together, say about one `<drvhash>!<output>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// No cache has a realisation of it.
    Absent,
    /// `accepted` has enough signers; `claims` are all the paths claimed (more than one
    /// when the caches disagree).
    Accepted { accepted: Claim, claims: Vec<Claim> },
    /// No path has enough signers.
    Refused { claims: Vec<Claim> },
}

/// Applies the rule (see the module documentation) to the realisations of
/// `drv_hash!output` that the caches served, in the order the caches were asked, as
/// `(cache URL, record)`.
pub fn decide(
    answers: &[(String, Realisation)],
    trusted: &TrustedKeys,
    required: usize,
) -> Verdict {
    let mut claims: Vec<Claim> = Vec::new();
    for (cache, r) in answers {
        let i = match claims.iter().position(|c| c.out_path == r.out_path) {
            Some(i) => i,
            None => {
                claims.push(Claim {
                    out_path: r.out_path.clone(),
                    caches: Vec::new(),
                    signers: Vec::new(),
                    signatures: Vec::new(),
                });
                claims.len() - 1
            }
        };
        let c = &mut claims[i];
        if !c.caches.contains(cache) {
            c.caches.push(cache.clone());
        }
        for s in &r.signatures {
            if !c.signatures.contains(s) {
                c.signatures.push(s.clone());
            }
        }
    }
    if claims.is_empty() {
        return Verdict::Absent;
    }
    for (c, r) in claims.iter_mut().zip(first_of_each(answers)) {
        c.signers = r
            .signers(trusted, &c.signatures)
            .iter()
            .map(|k| k.name().to_string())
            .collect();
    }
    // The most signers wins; `max_by_key` would keep the last of equals.
    let mut best: Option<&Claim> = None;
    for c in claims.iter().filter(|c| c.signers.len() >= required.max(1)) {
        if best.is_none_or(|b| c.signers.len() > b.signers.len()) {
            best = Some(c);
        }
    }
    match best {
        Some(b) => Verdict::Accepted {
            accepted: b.clone(),
            claims: claims.clone(),
        },
        None => Verdict::Refused { claims },
    }
}

/// For each distinct `out_path`, in order of first appearance, its first record (whose
/// fingerprint every record of the group shares).
fn first_of_each(answers: &[(String, Realisation)]) -> Vec<&Realisation> {
    let mut out: Vec<&Realisation> = Vec::new();
    for (_, r) in answers {
        if !out.iter().any(|o| o.out_path == r.out_path) {
            out.push(r);
        }
    }
    out
}

impl Claim {
    /// `/rocmx/store/…-x (file:///c1, signed by k-1, k-2)`.
    fn describe(&self) -> String {
        let signers = if self.signers.is_empty() {
            "no trusted signature".to_string()
        } else {
            format!("signed by {}", self.signers.join(", "))
        };
        format!("{} ({}; {signers})", self.out_path, self.caches.join(", "))
    }
}

impl Verdict {
    /// A warning for the user when the verdict is worth one (a refusal, or an
    /// acceptance over a disagreement), naming `what` (`<drvhash>!<output>`).
    pub fn describe(&self, what: &str, required: usize) -> Option<String> {
        let list = |claims: &[Claim]| {
            claims
                .iter()
                .map(Claim::describe)
                .collect::<Vec<_>>()
                .join(" versus ")
        };
        match self {
            Verdict::Absent => None,
            Verdict::Accepted { claims, .. } if claims.len() < 2 => None,
            Verdict::Accepted { accepted, claims } => Some(format!(
                "caches disagree on the realisation {what}: {}; using {}, which {} trusted keys signed (require-sigs-count {required})",
                list(claims),
                accepted.out_path,
                accepted.signers.len()
            )),
            Verdict::Refused { claims } if claims.len() > 1 => Some(format!(
                "caches disagree on the realisation {what}: {}; no path has the {required} trusted signatures require-sigs-count asks for, so it is not substituted (it is built instead)",
                list(claims)
            )),
            Verdict::Refused { claims } => Some(format!(
                "the realisation {what} is {}, fewer than the {required} trusted signatures require-sigs-count asks for, so it is not substituted (it is built instead)",
                list(claims)
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rocmx_cache::keys::SecretKey;

    const H: &str = "5f8a2b0c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8";

    fn real(path_char: char, keys: &[&SecretKey]) -> Realisation {
        let mut r = Realisation {
            drv_hash: H.into(),
            output: "out".into(),
            out_path: format!("/rocmx/store/{}-r", path_char.to_string().repeat(32))
                .parse()
                .unwrap(),
            signatures: vec![],
        };
        for k in keys {
            r.sign(k);
        }
        r
    }

    fn keys() -> (SecretKey, SecretKey, SecretKey, TrustedKeys) {
        let a = SecretKey::generate("a-1").unwrap();
        let b = SecretKey::generate("b-1").unwrap();
        let c = SecretKey::generate("c-1").unwrap();
        let t = TrustedKeys::parse(&format!("{} {}", a.public(), b.public())).unwrap();
        (a, b, c, t)
    }

    #[test]
    fn agreeing_caches_pool_their_signers() {
        let (a, b, _, t) = keys();
        let answers = vec![
            ("c1".to_string(), real('v', &[&a])),
            ("c2".to_string(), real('v', &[&b])),
        ];
        let Verdict::Accepted { accepted, claims } = decide(&answers, &t, 2) else {
            panic!("not accepted");
        };
        assert_eq!(accepted.signers, ["a-1", "b-1"]);
        assert_eq!(accepted.caches, ["c1", "c2"]);
        assert_eq!(accepted.signatures.len(), 2);
        assert_eq!(claims.len(), 1);
        assert_eq!(decide(&answers, &t, 2).describe("x!out", 2), None);
        // One cache is not enough for 2, but is for 1.
        assert!(matches!(
            decide(&answers[..1], &t, 2),
            Verdict::Refused { .. }
        ));
        assert!(matches!(
            decide(&answers[..1], &t, 1),
            Verdict::Accepted { .. }
        ));
        assert_eq!(decide(&[], &t, 2), Verdict::Absent);
    }

    #[test]
    fn disagreeing_caches_are_refused_and_named() {
        let (a, b, c, t) = keys();
        let answers = vec![
            ("c1".to_string(), real('v', &[&a, &c])),
            ("c2".to_string(), real('s', &[&b])),
        ];
        let v = decide(&answers, &t, 2);
        let Verdict::Refused { claims } = &v else {
            panic!("{v:?}");
        };
        // An untrusted key does not count.
        assert_eq!(claims[0].signers, ["a-1"]);
        let w = v.describe("x!out", 2).unwrap();
        assert!(w.contains("caches disagree"), "{w}");
        assert!(
            w.contains("c1; signed by a-1") && w.contains("c2; signed by b-1"),
            "{w}"
        );
        assert!(w.contains("built instead"), "{w}");
        // With 1, the first cache's path wins (equal counts), with a warning.
        let v = decide(&answers, &t, 1);
        let Verdict::Accepted { accepted, .. } = &v else {
            panic!("{v:?}");
        };
        assert_eq!(accepted.caches, ["c1"]);
        assert!(v.describe("x!out", 1).unwrap().contains("using"));
    }

    #[test]
    fn one_cache_holding_two_signatures_is_enough() {
        let (a, b, _, t) = keys();
        let answers = vec![
            ("c1".to_string(), real('s', &[&a])),
            ("c2".to_string(), real('v', &[&a, &b])),
        ];
        let Verdict::Accepted { accepted, .. } = decide(&answers, &t, 2) else {
            panic!("not accepted");
        };
        assert_eq!(accepted.caches, ["c2"]);
        // A signature over another path does not count for this one.
        let mut moved = real('v', &[]);
        moved.signatures = real('s', &[&b]).signatures;
        let answers = vec![
            ("c1".to_string(), real('v', &[&a])),
            ("c2".to_string(), moved),
        ];
        assert!(matches!(decide(&answers, &t, 2), Verdict::Refused { .. }));
    }
}
