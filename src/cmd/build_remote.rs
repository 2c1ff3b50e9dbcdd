//! `rocmx build-remote DRV --substituters URL --push-to URL`: what a Slurm job runs
//! (`--builders slurm`, see `crate::slurm`).
//!
//! Owns: the node's side of a remote build. It fetches the resolved derivation and
//! its input closure from the builder cache (signatures and hashes checked, as any
//! substitution), builds it in this node's store and sandbox (or finds it realised
//! there or in the cache), and pushes the outputs with their realisation, signed with
//! `secret-key-files`, back to the cache. Standard output carries the raw build log
//! (the submitter streams it); standard error carries rocmx's own messages. The exit
//! status is `rocmx build`'s (100–111 when the build failed, 1 when anything else
//! did).
//!
//! Must not: evaluate anything, or build a derivation that is not resolved (it would
//! need input derivations the cache does not carry).

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use rocmx_builder::events::Event;
use rocmx_builder::realise::Realiser;
use rocmx_cache::{pull, push, transport};
use rocmx_store::StorePath;

use super::common::open_store;
use super::fail::Fail;
use super::StoreOpt;

/// Build one resolved derivation from a binary cache and push its outputs back (what
/// a Slurm job of `rocmx build --builders slurm` runs).
#[derive(Args)]
pub struct BuildRemoteArgs {
    /// The resolved derivation (/rocmx/store/…-NAME.drv), as the cache has it.
    #[arg(value_name = "DRV")]
    drv: String,
    /// The cache to fetch the derivation and its inputs from (also asked for outputs
    /// already built).
    #[arg(long, value_name = "URL")]
    substituters: String,
    /// The cache to push the outputs and their realisation to.
    #[arg(long = "push-to", value_name = "URL")]
    push_to: String,
    /// Cores the build may use (the job's allocation).
    #[arg(long, value_name = "N")]
    cores: Option<u32>,
    /// Kill the build after SECS seconds (0: no limit).
    #[arg(long, value_name = "SECS")]
    timeout: Option<u64>,
}

pub fn run(a: BuildRemoteArgs, s: &StoreOpt) -> i32 {
    match build_remote(a, s) {
        Ok(code) => code,
        Err(Fail::Msg(m)) => {
            eprintln!("error: {m}");
            1
        }
        Err(_) => 1,
    }
}

fn build_remote(a: BuildRemoteArgs, s: &StoreOpt) -> Result<i32, Fail> {
    let store = open_store(s)?;
    let drv = StorePath::from_absolute(&a.drv)
        .map_err(|e| Fail::Msg(format!("'{}' is not a store path: {e}", a.drv)))?;
    let (mut opts, cfg) = super::build::configured_options()?;
    let trusted = cfg.trusted_keys().map_err(Fail::Msg)?;
    let tokens = cfg.access_tokens().map_err(Fail::Msg)?;
    let open = |url: &str| {
        transport::open_with_tokens(url, transport::Timeouts::default(), &tokens)
            .map_err(|e| Fail::Msg(format!("{url}: {e}")))
    };
    let from = open(&a.substituters)?;
    let to = open(&a.push_to)?;
    let keys = cfg.secret_keys().map_err(Fail::Msg)?;
    if keys.is_empty() {
        return Err(Fail::Msg(
            "no secret-key-files: the outputs pushed back would carry no signature the \
             submitter trusts"
                .into(),
        ));
    }

    // The derivation and its inputs, from the cache.
    pull::pull(
        &store,
        from.as_ref(),
        std::slice::from_ref(&drv),
        &trusted,
        |_, _| {},
    )
    .map_err(|e| Fail::Msg(format!("fetching {drv} and its inputs: {e}")))?;
    let d = super::common::read_drv(&store, &drv)?;
    if !d.input_drvs.is_empty() {
        return Err(Fail::Msg(format!(
            "{drv} has input derivations: build-remote builds resolved derivations only \
             (their inputs are store paths)"
        )));
    }

    if let Some(c) = a.cores {
        opts.cores = c;
    }
    if let Some(t) = a.timeout {
        opts.timeout = (t > 0).then(|| Duration::from_secs(t));
    }
    let caches = crate::substitute::Caches::new(
        &a.substituters,
        cfg.value("trusted-public-keys").unwrap_or(""),
        true,
        cfg.require_sigs_count().map_err(Fail::Msg)?,
        transport::Timeouts::default(),
    )
    .map_err(Fail::Msg)?;
    opts.substituter = Some(Arc::new(caches));
    let log = Arc::new(|e: &Event| {
        if let Event::Log { data, .. } = e {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(data);
            let _ = out.flush();
        }
    });
    let mut realiser = Realiser::new(&store, opts).with_events(log);
    let r = match realiser.realise(&drv) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(super::build::exit_code(&[&e], true));
        }
    };

    let outputs: Vec<StorePath> = r.outputs.values().cloned().collect();
    let opts = push::PushOptions {
        keys,
        ..push::PushOptions::default()
    };
    let report = push::push(&store, to.as_ref(), &outputs, &opts, |_, _| {})
        .map_err(|e| Fail::Msg(format!("pushing the outputs to {}: {e}", to.url())))?;
    eprintln!(
        "{} {drv}: pushed {} paths and {} realisations to {}",
        if r.built { "built" } else { "found" },
        report.pushed.len(),
        report.realisations,
        to.url()
    );
    Ok(0)
}
