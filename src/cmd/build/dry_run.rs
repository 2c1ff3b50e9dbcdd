//! `rocmx build --dry-run`: the plan, as the realiser would carry it out
//! ([`Realiser::outlook`]), printed for people or as JSON.
//!
//! Derivations to build are split into real builds and fixed-output
//! downloads (`builtin:fetchurl` with an `outputHash`: sources and `.deb`s),
//! which are listed by URL and, where the derivation declares it (`size`),
//! by size, as `emerge -av` lists distfiles. Owns the presentation only; the
//! decision is the realiser's.

use std::collections::BTreeSet;
use std::io::Write;

use rocmx_builder::realise::Realiser;
use rocmx_store::{LocalStore, StorePath};

use super::super::common::human_size;
use super::super::fail::Fail;
use super::{options, params_field, BuildArgs, Target};

/// A fixed-output download the build would make.
struct FixedDownload {
    drv: StorePath,
    url: String,
    size: Option<u64>,
}

/// The fixed-output fetches among `build`, in its order, from the derivations the
/// realiser read for its outlook. A derivation that cannot be read is treated as a
/// build (the realiser reports it).
fn fixed_downloads(realiser: &mut Realiser<'_>, build: &[StorePath]) -> Vec<FixedDownload> {
    build
        .iter()
        .filter_map(|p| {
            let d = realiser.derivation(p).ok()?;
            if d.builder != "builtin:fetchurl" || !d.env.contains_key("outputHash") {
                return None;
            }
            Some(FixedDownload {
                drv: p.clone(),
                url: d.env.get("url").cloned().unwrap_or_default(),
                size: d.env.get("size").and_then(|s| s.parse().ok()),
            })
        })
        .collect()
}

/// A derivation to build, in `--dry-run --json`: its path, or with an executor that
/// takes it, `{"drvPath": …, "on": "slurm:debug", "how": "1 core, 60 min"}`.
fn remote_json(
    realiser: &mut Realiser<'_>,
    executor: Option<&dyn rocmx_builder::executor::Executor>,
    d: &StorePath,
) -> serde_json::Value {
    let remote = executor.and_then(|e| {
        let drv = realiser.derivation(d).ok()?;
        e.takes(&drv)
            .then(|| (e.name().to_string(), e.describe(&drv)))
    });
    match remote {
        Some((on, how)) => serde_json::json!({ "drvPath": d.to_absolute(), "on": on, "how": how }),
        None => d.to_absolute().into(),
    }
}

/// `--dry-run`: what the build would do, decided as the realiser decides (see
/// [`Realiser::outlook`]): dependencies first, early cutoff and the substituters
/// included, nothing built or fetched.
pub(super) fn dry_run(
    store: &LocalStore,
    targets: &[Target],
    args: &BuildArgs,
    params: Option<&serde_json::Value>,
) -> Result<(), Fail> {
    let opts = options(args, store)?;
    let executor = opts.executor.clone();
    let mut realiser = Realiser::new(store, opts);
    let goals: Vec<StorePath> = targets.iter().map(|t| t.drv.clone()).collect();
    let p = realiser
        .outlook(&goals)
        .map_err(|e| Fail::Msg(e.to_string()))?;
    let mut out = std::io::stdout().lock();
    if args.json {
        let abs = |v: &[StorePath]| {
            serde_json::Value::from(v.iter().map(|p| p.to_absolute()).collect::<Vec<_>>())
        };
        let fetch: Vec<serde_json::Value> = p
            .downloads
            .iter()
            .map(|d| {
                serde_json::json!({
                    "path": d.path.to_absolute(),
                    "downloadSize": d.bytes(),
                    "narSize": d.nar_size,
                    "from": d.source,
                })
            })
            .collect();
        let downloads: Vec<serde_json::Value> = fixed_downloads(&mut realiser, &p.build)
            .iter()
            .map(|d| {
                serde_json::json!({
                    "drvPath": d.drv.to_absolute(),
                    "url": d.url,
                    "size": d.size,
                })
            })
            .collect();
        let _ = writeln!(
            out,
            "{{\"build\":{},\"downloads\":{},\"fetch\":{},\"substitute\":{},\"valid\":{}{}}}",
            serde_json::Value::from(
                p.build
                    .iter()
                    .map(|d| remote_json(&mut realiser, executor.as_deref(), d))
                    .collect::<Vec<_>>()
            ),
            serde_json::Value::from(downloads),
            serde_json::Value::from(fetch),
            abs(&p.fetch),
            abs(&p.valid),
            params_field(params)
        );
        return Ok(());
    }
    if p.build.is_empty() && p.downloads.is_empty() {
        let _ = writeln!(
            out,
            "nothing to build or fetch; all {} derivations are valid",
            p.valid.len()
        );
        return Ok(());
    }
    let downloads = fixed_downloads(&mut realiser, &p.build);
    let fetched: BTreeSet<&StorePath> = downloads.iter().map(|d| &d.drv).collect();
    let builds: Vec<&StorePath> = p.build.iter().filter(|d| !fetched.contains(d)).collect();
    if !builds.is_empty() {
        let _ = writeln!(out, "these {} derivations will be built:", builds.len());
        for d in builds {
            let note = if p.waiting.contains(d) {
                " (unless its inputs rebuild to identical bytes, or a cache has it then)"
            } else {
                ""
            };
            // Where it would build, when an executor takes it: `(on slurm:debug: 1 core)`.
            let place = executor
                .as_ref()
                .and_then(|e| {
                    let drv = realiser.derivation(d).ok()?;
                    e.takes(&drv).then(|| format!(" ({})", e.describe(&drv)))
                })
                .unwrap_or_default();
            let _ = writeln!(out, "  {d}{place}{note}");
        }
    }
    if !downloads.is_empty() {
        let known: u64 = downloads.iter().filter_map(|d| d.size).sum();
        let unknown = downloads.iter().filter(|d| d.size.is_none()).count();
        let _ = writeln!(
            out,
            "these {} files will be downloaded (fixed outputs, checked by hash; {}{}):",
            downloads.len(),
            human_size(known),
            if unknown > 0 {
                format!(" and {unknown} of unknown size")
            } else {
                String::new()
            }
        );
        for d in &downloads {
            let size = d
                .size
                .map(human_size)
                .unwrap_or_else(|| "size unknown".into());
            let _ = writeln!(out, "  {} ({size})", d.url);
        }
    }
    if !p.downloads.is_empty() {
        let download: u64 = p.downloads.iter().map(|d| d.bytes()).sum();
        let unpacked: u64 = p.downloads.iter().map(|d| d.nar_size).sum();
        let _ = writeln!(
            out,
            "these {} paths will be fetched ({} download, {} unpacked):",
            p.downloads.len(),
            human_size(download),
            human_size(unpacked)
        );
        for d in &p.downloads {
            let _ = writeln!(
                out,
                "  {} ({} download, {} unpacked, from {})",
                d.path,
                human_size(d.bytes()),
                human_size(d.nar_size),
                d.source
            );
        }
    }
    if !p.valid.is_empty() {
        let _ = writeln!(
            out,
            "these {} derivations are already valid:",
            p.valid.len()
        );
        for d in &p.valid {
            let _ = writeln!(out, "  {d}");
        }
    }
    Ok(())
}
