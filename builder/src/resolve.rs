//! Resolution: a derivation rewritten against the realised outputs of its inputs, and the
//! cache key of realisations.
//!
//! Owns: [`resolve`] (input derivations → input sources, eval-time placeholders → realised
//! paths), [`resolved_hash`] (the key under which realisations are recorded), and the
//! scratch paths builds write to ([`scratch_path`]).
//!
//! Must not: read or write the store, or build.
//!
//! # The resolved derivation
//!
//! For every input derivation `d` (named `n` by its `name` variable) and every output `o`
//! of it that is used, realised to `p`:
//!
//! * every occurrence of `StorePath::placeholder_for_output(d, o, output_path_name(n, o))`
//!   (absolute) in the builder, the arguments and the environment values is replaced by
//!   `p` (absolute; both are store paths, so lengths differ only by the names, which are
//!   equal);
//! * `p` is added to the input sources;
//!
//! and the input derivations are emptied. The outputs, `system` and the output hash
//! placeholders (`/1rz4g…`) are unchanged.
//!
//! # The cache key
//!
//! `resolved_hash = hex(BLAKE3(resolved.to_aterm()))`, 64 lowercase hex digits.
//!
//! # Scratch paths
//!
//! While building, output `o` (final name `name`) of the resolved derivation with key `k`
//! is written at the scratch path `/rocmx/store/<h>-<name>`, where
//!
//! ```text
//! h = nix32(BLAKE3("rocmx-scratch-v1" NUL k NUL o NUL name)[0..20])
//! ```
//!
//! It has the length of the final path (same name, 32-character hash part), so
//! self-references are rewritten in place; it never becomes valid.

use std::collections::BTreeMap;

use rocmx_store::derivation::{hash_placeholder, output_path_name};
use rocmx_store::path::HASH_BYTES;
use rocmx_store::{Derivation, StorePath, StorePathError};

/// Replaces every `from` by its `to` in the builder, the arguments and the environment
/// values of `drv`.
///
/// All pairs are searched for in one pass per string (Aho-Corasick): one `contains`
/// per pair and string made this a fifth of planning `.#pytorch-rocm`, whose setup
/// scripts are long and whose derivations have dozens of inputs. No `to` contains a
/// `from` (placeholders are hashes nothing realised can contain), so replacing them
/// all at once is the same as replacing them one after the other. With at most
/// [`FEW_PAIRS`] pairs (most derivations: an output or two, a few inputs) each is
/// searched for on its own instead: building the automaton cost more than the
/// searches (a fifth of the main thread's time per build in a chain of trivial builds).
pub fn substitute(drv: &mut Derivation, pairs: &[(String, String)]) {
    if pairs.is_empty() {
        return;
    }
    let mut apply: Box<dyn FnMut(&mut String)> = if pairs.len() <= FEW_PAIRS {
        let finders: Vec<memchr::memmem::Finder<'_>> = pairs
            .iter()
            .map(|(from, _)| memchr::memmem::Finder::new(from.as_bytes()))
            .collect();
        Box::new(move |s: &mut String| {
            if let Some(r) = replace_few(s, pairs, &finders) {
                *s = r;
            }
        })
    } else {
        let ac = aho_corasick::AhoCorasick::builder()
            .match_kind(aho_corasick::MatchKind::LeftmostLongest)
            // Built once per derivation and run over a few kilobytes: a DFA's
            // construction would cost more than the search saves.
            .kind(Some(aho_corasick::AhoCorasickKind::ContiguousNFA))
            .build(pairs.iter().map(|(from, _)| from.as_bytes()))
            .expect("a few hundred store paths fit any automaton");
        let tos: Vec<&str> = pairs.iter().map(|(_, to)| to.as_str()).collect();
        Box::new(move |s: &mut String| {
            if ac.is_match(s.as_str()) {
                *s = ac.replace_all(s, &tos);
            }
        })
    };
    apply(&mut drv.builder);
    drv.args.iter_mut().for_each(&mut apply);
    drv.env.values_mut().for_each(&mut apply);
}

/// Up to how many pairs [`substitute`] searches for each on its own.
const FEW_PAIRS: usize = 8;

/// `s` with every pair's `from` replaced by its `to`, leftmost first and, of those
/// starting at the same place, the longest (Aho-Corasick's leftmost-longest); `None`
/// when there is none. `finders[i]` searches for `pairs[i].0`.
fn replace_few(
    s: &str,
    pairs: &[(String, String)],
    finders: &[memchr::memmem::Finder<'_>],
) -> Option<String> {
    let bytes = s.as_bytes();
    // Where each `from` occurs next, at or after `pos`.
    let mut next: Vec<Option<usize>> = finders.iter().map(|f| f.find(bytes)).collect();
    if next.iter().all(Option::is_none) {
        return None;
    }
    let mut out = String::with_capacity(s.len());
    let mut pos = 0;
    loop {
        let best = next
            .iter()
            .enumerate()
            .filter_map(|(i, n)| n.map(|at| (at, i)))
            .min_by(|a, b| {
                a.0.cmp(&b.0)
                    .then(pairs[b.1].0.len().cmp(&pairs[a.1].0.len()))
            });
        let Some((at, i)) = best else { break };
        out.push_str(&s[pos..at]);
        out.push_str(&pairs[i].1);
        pos = at + pairs[i].0.len();
        for (n, f) in next.iter_mut().zip(finders) {
            if n.is_some_and(|at| at < pos) {
                *n = f.find(&bytes[pos..]).map(|at| at + pos);
            }
        }
    }
    out.push_str(&s[pos..]);
    Some(out)
}

/// An input derivation as resolution needs it: its name and where its outputs went.
#[derive(Debug, Clone)]
pub struct ResolvedInput {
    /// Its `name` variable.
    pub name: String,
    /// Realised outputs.
    pub outputs: BTreeMap<String, StorePath>,
}

/// Why a derivation cannot be resolved.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// An input derivation was not given.
    #[error("input derivation {0} was not realised")]
    MissingInput(StorePath),
    /// An output of an input derivation that it does not have.
    #[error("input derivation {drv} has no output '{output}'")]
    MissingOutput {
        /// The input.
        drv: StorePath,
        /// The output asked for.
        output: String,
    },
    /// A placeholder could not be computed (bad name).
    #[error(transparent)]
    Path(#[from] StorePathError),
}

/// The resolved form of `drv`, given its realised inputs (see the module documentation).
pub fn resolve(
    drv: &Derivation,
    inputs: &BTreeMap<StorePath, ResolvedInput>,
) -> Result<Derivation, ResolveError> {
    let mut resolved = drv.clone();
    resolved.input_drvs.clear();
    let mut pairs = Vec::new();
    for (input, used) in &drv.input_drvs {
        let r = inputs
            .get(input)
            .ok_or_else(|| ResolveError::MissingInput(input.clone()))?;
        for o in used {
            let p = r
                .outputs
                .get(o)
                .ok_or_else(|| ResolveError::MissingOutput {
                    drv: input.clone(),
                    output: o.clone(),
                })?;
            let ph = StorePath::placeholder_for_output(input, o, &output_path_name(&r.name, o))?;
            pairs.push((ph.to_absolute(), p.to_absolute()));
            resolved.input_srcs.insert(p.clone());
        }
    }
    substitute(&mut resolved, &pairs);
    Ok(resolved)
}

/// The cache key of a resolved derivation: hex BLAKE3 of its ATerm.
pub fn resolved_hash(resolved: &Derivation) -> String {
    blake3::hash(resolved.to_aterm().as_bytes())
        .to_hex()
        .to_string()
}

/// The scratch path of output `output`, named `name`, of the resolved derivation with key
/// `key` (see the module documentation).
pub fn scratch_path(key: &str, output: &str, name: &str) -> Result<StorePath, StorePathError> {
    let fp = format!("rocmx-scratch-v1\0{key}\0{output}\0{name}");
    let digest = blake3::hash(fp.as_bytes());
    let mut h = [0u8; HASH_BYTES];
    h.copy_from_slice(&digest.as_bytes()[..HASH_BYTES]);
    StorePath::new(h, name)
}

/// The pairs that replace each output's hash placeholder by its scratch path.
pub fn output_pairs(scratch: &BTreeMap<String, StorePath>) -> Vec<(String, String)> {
    scratch
        .iter()
        .map(|(o, p)| (hash_placeholder(o), p.to_absolute()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rocmx_store::{DerivationOutput, HashAlgo, IngestionMethod};

    #[test]
    fn resolves_placeholders() {
        let dep: StorePath = "/rocmx/store/00bgd045z0d4icpbc2yyz4gx48ak44la-a.drv"
            .parse()
            .unwrap();
        let real: StorePath = "/rocmx/store/zzbgd045z0d4icpbc2yyz4gx48ak44la-a"
            .parse()
            .unwrap();
        let ph = StorePath::placeholder_for_output(&dep, "out", "a").unwrap();
        let mut d = Derivation {
            system: "x86_64-linux".into(),
            builder: format!("{ph}/bin/sh"),
            args: vec!["-c".into(), format!("cat {ph}/x > $out")],
            ..Derivation::default()
        };
        d.outputs.insert(
            "out".into(),
            DerivationOutput::Floating {
                method: IngestionMethod::Nar,
                algo: HashAlgo::Blake3,
            },
        );
        d.env.insert("dep".into(), ph.to_absolute());
        d.env.insert("out".into(), hash_placeholder("out"));
        d.input_drvs
            .insert(dep.clone(), ["out".to_string()].into_iter().collect());
        let inputs = [(
            dep.clone(),
            ResolvedInput {
                name: "a".into(),
                outputs: [("out".to_string(), real.clone())].into_iter().collect(),
            },
        )]
        .into_iter()
        .collect();
        let r = resolve(&d, &inputs).unwrap();
        assert!(r.input_drvs.is_empty());
        assert!(r.input_srcs.contains(&real));
        assert_eq!(r.builder, format!("{real}/bin/sh"));
        assert_eq!(r.env["dep"], real.to_absolute());
        assert_eq!(r.args[1], format!("cat {real}/x > $out"));
        assert_eq!(r.env["out"], hash_placeholder("out"));
        assert_eq!(resolved_hash(&r).len(), 64);
        let s = scratch_path(&resolved_hash(&r), "out", "b").unwrap();
        assert_eq!(s.to_absolute().len(), real.to_absolute().len());
    }

    /// Every occurrence of every pair is replaced, in every place, in one pass;
    /// strings without any are left alone; a longer `from` wins over its prefix.
    #[test]
    fn substitute_replaces_every_pair_everywhere() {
        let pairs = vec![
            ("/AAAA".to_string(), "/1111".to_string()),
            ("/BBBB".to_string(), "/2222".to_string()),
            ("/AAAA-dev".to_string(), "/3333-dev".to_string()),
        ];
        let mut d = Derivation {
            builder: "/AAAA/bin/sh".into(),
            args: vec!["/BBBB:/AAAA:/BBBB".into(), "nothing here".into()],
            ..Derivation::default()
        };
        d.env
            .insert("x".into(), "a /AAAA-dev/include b /AAAA/lib".into());
        d.env.insert("y".into(), "/AAA/BBB".into());
        substitute(&mut d, &pairs);
        assert_eq!(d.builder, "/1111/bin/sh");
        assert_eq!(d.args, ["/2222:/1111:/2222", "nothing here"]);
        assert_eq!(d.env["x"], "a /3333-dev/include b /1111/lib");
        assert_eq!(d.env["y"], "/AAA/BBB");
    }

    /// A few pairs are searched for one by one, more with one automaton: both give
    /// the same strings (leftmost-longest, non-overlapping), whatever the pairs' order.
    #[test]
    fn few_pairs_and_many_pairs_replace_alike() {
        // Strings over a small alphabet, so that `from`s overlap, nest and repeat.
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut rand = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        fn word(rand: &mut impl FnMut(u64) -> u64, len: u64) -> String {
            (0..len)
                .map(|_| ["a", "b", "/"][rand(3) as usize])
                .collect()
        }
        for round in 0..300 {
            let n = 1 + round % FEW_PAIRS;
            let mut pairs: Vec<(String, String)> = Vec::new();
            while pairs.len() < n {
                let len = 1 + rand(3);
                let from = format!("/{}", word(&mut rand, len));
                if pairs.iter().all(|(f, _)| *f != from) {
                    let to = format!("<{}>", pairs.len());
                    pairs.push((from, to));
                }
            }
            let len = rand(40);
            let s = word(&mut rand, len);
            let one_by_one = {
                let finders: Vec<_> = pairs
                    .iter()
                    .map(|(f, _)| memchr::memmem::Finder::new(f.as_bytes()))
                    .collect();
                replace_few(&s, &pairs, &finders).unwrap_or_else(|| s.clone())
            };
            let automaton = aho_corasick::AhoCorasick::builder()
                .match_kind(aho_corasick::MatchKind::LeftmostLongest)
                .build(pairs.iter().map(|(f, _)| f.as_bytes()))
                .unwrap()
                .replace_all(
                    &s,
                    &pairs.iter().map(|(_, t)| t.as_str()).collect::<Vec<_>>(),
                );
            assert_eq!(one_by_one, automaton, "{s:?} with {pairs:?}");
        }
        // Past FEW_PAIRS, through `substitute` itself.
        let pairs: Vec<(String, String)> = (0..FEW_PAIRS + 1)
            .map(|i| (format!("/P{i}/"), format!("/R{i}/")))
            .collect();
        let mut d = Derivation {
            builder: "/P0/x/P8/".into(),
            ..Derivation::default()
        };
        substitute(&mut d, &pairs);
        assert_eq!(d.builder, "/R0/x/R8/");
    }
}
