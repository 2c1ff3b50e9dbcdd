//! `rocmx path-info [--json] [-r|--recursive] [-s|--size] [-S|--closure-size] [--sigs] PATH…`:
//! what the local store records about paths, in the format of `nix path-info` (Nix 2.8).
//!
//! `--sigs` adds, as Nix does, a tab and the path's content address (`ca:…`) and
//! narinfo-style signatures (`NAME:BASE64`, space separated) to each line; then, for a
//! build output, one line per realisation that points at it (several builders may have
//! signed the same one): `  realisation <drvhash>!<output>`, a tab, its signatures. With
//! `--json` each object gains `realisations`: `[{"id": "<drvhash>!<output>",
//! "signatures": […]}]` (the path's own are in `signatures` either way).
//!
//! The helpers it shares with the other local-store commands (opening the store, store
//! paths from arguments, store errors' wording) are in `common.rs`; `--json` is written
//! with serde, field order as Nix's.
//!
//! Output order is Nix's: the paths (with `-r`, their closure) topologically sorted,
//! dependencies first, ties in path order. Sizes are NAR sizes; the closure size is the sum
//! over the closure.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, Write};
use std::path::PathBuf;

use clap::Args;
use rocmx_store::{LocalStore, PathInfo, StorePath};
use serde::Serialize;

use super::common::{not_valid_msg, open_store, require_valid, store_msg, store_path_arg};
use super::fail::Fail;
use super::StoreOpt;

#[derive(Args, Debug)]
pub struct PathInfoArgs {
    /// Print a JSON array of objects: path, narHash (SRI), narSize, references, ca,
    /// closureSize (with -S), deriver, registrationTime, signatures.
    #[arg(long)]
    pub json: bool,
    /// Apply to the closure of the paths (the paths and everything they refer to).
    #[arg(short = 'r', long)]
    pub recursive: bool,
    /// Print the NAR size of each path.
    #[arg(short = 's', long = "size")]
    pub size: bool,
    /// Print the closure size of each path (the sum of the NAR sizes of its closure).
    #[arg(short = 'S', long = "closure-size")]
    pub closure_size: bool,
    /// Print sizes as 12.3M rather than in bytes (`-h` in Nix; here `-h` is help).
    #[arg(long = "human-readable")]
    pub human_readable: bool,
    /// Print the signatures of each path (and its content address), and of every
    /// realisation that points at it, a line each (`--json`: a `realisations` field).
    #[arg(long)]
    pub sigs: bool,
    /// Store paths: /rocmx/store/<hash>-<name>, their physical location under the store
    /// root, or a symlink (such as `result`) to either.
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
}

pub fn run(a: PathInfoArgs, s: &StoreOpt) -> i32 {
    Fail::exit_code(run_inner(&a, s))
}

fn run_inner(a: &PathInfoArgs, s: &StoreOpt) -> Result<(), Fail> {
    let store = open_store(s)?;
    let mut given = BTreeSet::new();
    for p in &a.paths {
        let sp = store_path_arg(&store, p)?;
        require_valid(&store, &sp)?;
        given.insert(sp);
    }
    let set: BTreeSet<StorePath> = if a.recursive {
        let v: Vec<StorePath> = given.iter().cloned().collect();
        store.closure(&v).map_err(|e| Fail::Msg(store_msg(&e)))?
    } else {
        given
    };
    let mut infos: BTreeMap<StorePath, PathInfo> = BTreeMap::new();
    for p in &set {
        infos.insert(p.clone(), info_of(&store, p)?);
    }
    let order = topo_sort(&set, |p| {
        infos
            .get(p)
            .map(|i| i.references.clone())
            .unwrap_or_default()
    });
    let closure_sizes: BTreeMap<StorePath, u64> = if a.closure_size {
        let mut m = BTreeMap::new();
        for p in &order {
            m.insert(p.clone(), closure_size(&store, p, &mut infos)?);
        }
        m
    } else {
        BTreeMap::new()
    };

    let mut realisations: BTreeMap<StorePath, Vec<(String, String, Vec<String>)>> = BTreeMap::new();
    if a.sigs {
        for p in &order {
            let r = store
                .realisations_of(p)
                .map_err(|e| Fail::Msg(store_msg(&e)))?;
            realisations.insert(p.clone(), r);
        }
    }

    let mut out = io::BufWriter::new(io::stdout().lock());
    if a.json {
        let objects: Vec<JsonInfo<'_>> = order
            .iter()
            .map(|p| {
                JsonInfo::new(
                    &infos[p],
                    closure_sizes.get(p).copied(),
                    realisations.get(p).map(Vec::as_slice),
                )
            })
            .collect();
        let mut text = serde_json::to_string(&objects).map_err(|e| Fail::Msg(e.to_string()))?;
        text.push('\n');
        out.write_all(text.as_bytes())
            .map_err(|e| Fail::write(&e))?;
    } else {
        let width = order.iter().map(|p| p.to_string().len()).max().unwrap_or(0);
        for p in &order {
            let info = &infos[p];
            let mut line = p.to_string();
            if a.size || a.closure_size || a.sigs {
                line.push_str(&" ".repeat(width - line.len()));
            }
            if a.size {
                line.push_str(&size_column(info.nar_size, a.human_readable));
            }
            if a.closure_size {
                line.push_str(&size_column(closure_sizes[p], a.human_readable));
            }
            if a.sigs {
                let mut words: Vec<String> = Vec::new();
                if let Some(ca) = &info.ca {
                    words.push(format!("ca:{ca}"));
                }
                words.extend(info.signatures.iter().cloned());
                line.push('\t');
                line.push_str(&words.join(" "));
                for (h, o, sigs) in realisations.get(p).into_iter().flatten() {
                    line.push_str(&format!("\n  realisation {h}!{o}\t{}", sigs.join(" ")));
                }
            }
            line.push('\n');
            out.write_all(line.as_bytes())
                .map_err(|e| Fail::write(&e))?;
        }
    }
    out.flush().map_err(|e| Fail::write(&e))
}

/// `\t%11d`, or with `human` `\t%6.1f<unit>` (K, M, G, …), as `nix path-info` prints sizes.
fn size_column(n: u64, human: bool) -> String {
    if !human {
        return format!("\t{n:>11}");
    }
    let mut v = n as f64;
    let mut unit = ' ';
    for u in ['K', 'M', 'G', 'T', 'P', 'E', 'Z', 'Y'] {
        if v <= 1024.0 {
            break;
        }
        v /= 1024.0;
        unit = u;
    }
    format!("\t{v:>6.1}{unit}")
}

/// One object of `--json`, keys in Nix's order (then, with `--sigs`, `realisations`).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct JsonInfo<'a> {
    path: &'a StorePath,
    nar_hash: String,
    nar_size: u64,
    references: &'a BTreeSet<StorePath>,
    ca: Option<&'a str>,
    /// With `-S`.
    #[serde(skip_serializing_if = "Option::is_none")]
    closure_size: Option<u64>,
    deriver: Option<&'a StorePath>,
    registration_time: i64,
    signatures: &'a [String],
    /// With `--sigs`.
    #[serde(skip_serializing_if = "Option::is_none")]
    realisations: Option<Vec<JsonRealisation<'a>>>,
}

/// A realisation pointing at the path: `<drvhash>!<output>` and its signatures.
#[derive(Serialize)]
struct JsonRealisation<'a> {
    id: String,
    signatures: &'a [String],
}

impl<'a> JsonInfo<'a> {
    fn new(
        info: &'a PathInfo,
        closure_size: Option<u64>,
        realisations: Option<&'a [(String, String, Vec<String>)]>,
    ) -> JsonInfo<'a> {
        JsonInfo {
            path: &info.path,
            nar_hash: info.nar_hash.to_sri(),
            nar_size: info.nar_size,
            references: &info.references,
            ca: info.ca.as_deref(),
            closure_size,
            deriver: info.deriver.as_ref(),
            registration_time: info.registration_time,
            signatures: &info.signatures,
            realisations: realisations.map(|rs| {
                rs.iter()
                    .map(|(h, out, sigs)| JsonRealisation {
                        id: format!("{h}!{out}"),
                        signatures: sigs,
                    })
                    .collect()
            }),
        }
    }
}

/// The sum of the NAR sizes of `p`'s closure; `infos` caches what was read.
fn closure_size(
    store: &LocalStore,
    p: &StorePath,
    infos: &mut BTreeMap<StorePath, PathInfo>,
) -> Result<u64, Fail> {
    let closure = store
        .closure(std::slice::from_ref(p))
        .map_err(|e| Fail::Msg(store_msg(&e)))?;
    let mut total = 0u64;
    for q in closure {
        if !infos.contains_key(&q) {
            let i = info_of(store, &q)?;
            infos.insert(q.clone(), i);
        }
        total = total.saturating_add(infos[&q].nar_size);
    }
    Ok(total)
}

fn info_of(store: &LocalStore, p: &StorePath) -> Result<PathInfo, Fail> {
    match store.path_info(p) {
        Ok(Some(i)) => Ok(i),
        Ok(None) => Err(Fail::Msg(not_valid_msg(store, p))),
        Err(e) => Err(Fail::Msg(store_msg(&e))),
    }
}

/// `set` in Nix's order: a depth-first post-order (references before referrers) over the
/// paths in path order, following only references inside `set`. References on a cycle
/// (impossible for content-addressed paths) are cut where the walk meets them.
pub(crate) fn topo_sort(
    set: &BTreeSet<StorePath>,
    refs: impl Fn(&StorePath) -> BTreeSet<StorePath>,
) -> Vec<StorePath> {
    let mut out = Vec::with_capacity(set.len());
    let mut visited: BTreeSet<StorePath> = BTreeSet::new();
    for start in set {
        if visited.contains(start) {
            continue;
        }
        visited.insert(start.clone());
        // (node, its references still to visit)
        let mut stack: Vec<(StorePath, Vec<StorePath>)> =
            vec![(start.clone(), children(start, set, &refs))];
        while let Some((_, todo)) = stack.last_mut() {
            match todo.pop() {
                Some(c) => {
                    if visited.insert(c.clone()) {
                        let cs = children(&c, set, &refs);
                        stack.push((c, cs));
                    }
                }
                None => {
                    if let Some((n, _)) = stack.pop() {
                        out.push(n);
                    }
                }
            }
        }
    }
    out
}

/// References of `p` inside `set`, itself excluded, in reverse order (popped from the end).
fn children(
    p: &StorePath,
    set: &BTreeSet<StorePath>,
    refs: &impl Fn(&StorePath) -> BTreeSet<StorePath>,
) -> Vec<StorePath> {
    let mut v: Vec<StorePath> = refs(p)
        .into_iter()
        .filter(|r| r != p && set.contains(r))
        .collect();
    v.reverse();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sp(c: char, name: &str) -> StorePath {
        format!("/rocmx/store/{}-{name}", c.to_string().repeat(32))
            .parse()
            .expect("path")
    }

    #[test]
    fn topo_sort_puts_references_first_as_nix_does() {
        let (a, b, c) = (sp('v', "a"), sp('s', "b"), sp('p', "c"));
        let mut refs: BTreeMap<StorePath, BTreeSet<StorePath>> = BTreeMap::new();
        refs.insert(c.clone(), [b.clone()].into());
        refs.insert(b.clone(), [a.clone(), b.clone()].into());
        let get = |p: &StorePath| refs.get(p).cloned().unwrap_or_default();
        let all: BTreeSet<StorePath> = [a.clone(), b.clone(), c.clone()].into();
        assert_eq!(topo_sort(&all, get), vec![a.clone(), b.clone(), c.clone()]);
        let some: BTreeSet<StorePath> = [a.clone(), c.clone()].into();
        assert_eq!(topo_sort(&some, get), vec![c, a]);
    }

    #[test]
    fn json_objects_keep_nix_key_order() {
        let (a, b, d) = (sp('v', "a"), sp('s', "b"), sp('p', "c.drv"));
        let nar_hash = rocmx_store::Hash::digest(rocmx_store::HashAlgo::Blake3, b"x");
        let info = PathInfo {
            path: a.clone(),
            nar_hash,
            nar_size: 120,
            registration_time: 17,
            deriver: None,
            signatures: vec!["k:AAA=".into()],
            references: [b.clone()].into(),
            ca: None,
        };
        let text = |i: &PathInfo, c, r| serde_json::to_string(&JsonInfo::new(i, c, r)).unwrap();
        let sri = nar_hash.to_sri();
        assert_eq!(
            text(&info, None, None),
            format!(
                r#"{{"path":"{a}","narHash":"{sri}","narSize":120,"references":["{b}"],"ca":null,"deriver":null,"registrationTime":17,"signatures":["k:AAA="]}}"#
            )
        );
        let info = PathInfo {
            deriver: Some(d.clone()),
            ca: Some("source:blake3:x".into()),
            ..info
        };
        let rs = vec![(
            "h".to_string(),
            "out".to_string(),
            vec!["k:B\"".to_string()],
        )];
        assert_eq!(
            text(&info, Some(300), Some(&rs)),
            format!(
                r#"{{"path":"{a}","narHash":"{sri}","narSize":120,"references":["{b}"],"ca":"source:blake3:x","closureSize":300,"deriver":"{d}","registrationTime":17,"signatures":["k:AAA="],"realisations":[{{"id":"h!out","signatures":["k:B\""]}}]}}"#
            )
        );
    }

    #[test]
    fn sizes_as_nix_prints_them() {
        assert_eq!(size_column(120, false), "\t        120");
        assert_eq!(size_column(1536, true), "\t   1.5K");
    }
}
