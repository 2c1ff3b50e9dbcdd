//! `rocmx copy --to URL PATH…` and `rocmx copy --from URL PATH…`: moving closures
//! between the local store and a binary cache (`file:///DIR`; `http(s)://…` to read,
//! and to push to `rocmx serve --writable` with a token).
//!
//! Owns: reading the cache settings (`secret-key-files` signs what is pushed;
//! `trusted-public-keys` decides what is accepted; `access-tokens` authorises pushes
//! over HTTP), from rocmx.conf or `--option NAME VALUE`, and rendering the result. The
//! formats and the checks are `rocmx_cache`'s.
//!
//! Must not: accept anything no trusted key signed.

use std::path::PathBuf;

use clap::Args;
use rocmx_cache::{pull, push, transport};
use rocmx_store::StorePath;

use super::common::{open_store, require_valid, store_path_arg};
use super::fail::Fail;
use super::StoreOpt;

/// Copy store paths with their closures to or from a binary cache.
#[derive(Args)]
pub struct CopyArgs {
    /// Push to this cache (file:///DIR, or http://HOST:PORT of `rocmx serve --writable`
    /// with `--option access-tokens HOST:PORT=TOKEN`)
    #[arg(
        long,
        value_name = "URL",
        conflicts_with = "from",
        required_unless_present = "from"
    )]
    to: Option<String>,
    /// Fetch from this cache (file:///DIR, http(s)://HOST[:PORT][/PREFIX])
    #[arg(long, value_name = "URL")]
    from: Option<String>,
    /// Store paths (or links to them, e.g. ./result)
    #[arg(required = true, value_name = "PATH")]
    paths: Vec<PathBuf>,
}

pub fn run(a: CopyArgs, s: &StoreOpt) -> i32 {
    Fail::exit_code(copy(a, s))
}

fn copy(a: CopyArgs, s: &StoreOpt) -> Result<(), Fail> {
    let cfg = crate::config::read().map_err(Fail::Msg)?;
    let store = open_store(s)?;
    let url = a.to.as_deref().or(a.from.as_deref()).unwrap_or_default();
    let tokens = cfg.access_tokens().map_err(Fail::Msg)?;
    let cache = transport::open_with_tokens(url, transport::Timeouts::default(), &tokens)
        .map_err(|e| Fail::Msg(e.to_string()))?;
    if a.to.is_some() {
        let mut paths: Vec<StorePath> = Vec::new();
        for p in &a.paths {
            let sp = store_path_arg(&store, p)?;
            require_valid(&store, &sp)?;
            paths.push(sp);
        }
        cache.writable().map_err(|e| Fail::Msg(e.to_string()))?;
        let opts = push::PushOptions {
            keys: cfg.secret_keys().map_err(Fail::Msg)?,
            ..push::PushOptions::default()
        };
        if opts.keys.is_empty() {
            eprintln!(
                "warning: no secret-key-files: the pushed records carry only the signatures the store had; \
                 make a key with `rocmx key generate NAME --secret-key-file PATH`"
            );
        }
        let r = push::push(&store, cache.as_ref(), &paths, &opts, |p, n| {
            eprintln!("copying {p} ({n} bytes of NAR)");
        })
        .map_err(|e| Fail::Msg(e.to_string()))?;
        eprintln!(
            "pushed {} paths ({} already there), {} realisations; {} bytes of NAR in {} compressed",
            r.pushed.len(),
            r.present,
            r.realisations,
            r.nar_bytes,
            r.file_bytes
        );
    } else {
        let trusted = cfg.trusted_keys().map_err(Fail::Msg)?;
        let mut paths: Vec<StorePath> = Vec::new();
        for p in &a.paths {
            let text = p.to_string_lossy();
            let sp = StorePath::from_absolute(&text)
                .or_else(|_| store_path_arg(&store, p).map_err(|_| ()))
                .map_err(|()| {
                    Fail::Msg(format!(
                        "'{text}' is not a store path (/rocmx/store/HASH-NAME)"
                    ))
                })?;
            paths.push(sp);
        }
        let r = pull::pull(&store, cache.as_ref(), &paths, &trusted, |p, n| {
            eprintln!("copied {p} ({n} bytes of NAR)");
        })
        .map_err(|e| Fail::Msg(e.to_string()))?;
        eprintln!(
            "fetched {} paths, {} bytes of NAR",
            r.fetched.len(),
            r.nar_bytes
        );
    }
    Ok(())
}
