//! `rocmx store prefetch URL [--unpack] [--executable] [--name NAME] [--hash-algo ALGO]
//! [--json] [--print-path] [--option NAME VALUE]`, as `nix-prefetch-url`.
//!
//! Downloads URL through `builtin:fetchurl`'s transport (http, https, `file://`,
//! `mirror://NAME/…` with the mirrors of `rocmx.conf` and the apt sources; bounded by the
//! download settings), adds the result to the store as the fixed-output object a
//! `fetchurl`/`fetchzip` of it gets (see `exprs/lib/fetchers.nix`), and prints its hash,
//! so that the later build finds it valid and downloads nothing.
//!
//! - default: the file, hashed flat; named after the URL's last path segment.
//! - `--executable`: the file made executable, hashed as a NAR (as `fetchurl { executable
//!   = true; }`).
//! - `--unpack`: the tarball unpacked (its single top-level directory, if that is all it
//!   has), hashed as a NAR; named `source` (as `fetchzip`'s default).
//!
//! Output: the hash in SRI form (`sha256-…`) on standard output, and `path is
//! '/rocmx/store/…'` on standard error (with `--print-path`, the path as a second line of
//! standard output instead). `--json`: one object `{"hash": SRI, "storePath": PATH,
//! "url": URL as given, "size": bytes downloaded}`. A failed download is `error: cannot
//! download 'URL': …` and exit 1.

use std::io::{self, Write};

use clap::Args;
use rocmx_builder::fetchurl::{self, FetchRequest};
use rocmx_store::{HashAlgo, IngestionMethod};

use crate::cmd::common::{open_store, parse_fixed_algo, store_msg};
use crate::cmd::fail::Fail;
use crate::cmd::StoreOpt;

#[derive(Args, Debug)]
pub struct PrefetchArgs {
    /// The URL (http, https, file or mirror://NAME/…).
    #[arg(value_name = "URL")]
    pub url: String,
    /// Unpack the tarball and hash the tree (as fetchzip).
    #[arg(long)]
    pub unpack: bool,
    /// Make the file executable and hash it as a NAR (as fetchurl { executable = true; }).
    #[arg(long, conflicts_with = "unpack")]
    pub executable: bool,
    /// The store path's name (default: the URL's last path segment; `source` with --unpack).
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// sha256, sha512, sha1 or blake3.
    #[arg(long, value_name = "ALGO", default_value = "sha256", value_parser = parse_fixed_algo)]
    pub hash_algo: HashAlgo,
    /// Print {"hash","storePath","url","size"} as JSON.
    #[arg(long)]
    pub json: bool,
    /// Print the store path as a second line of standard output.
    #[arg(long, conflicts_with = "json")]
    pub print_path: bool,
}

pub fn prefetch(a: PrefetchArgs, s: &StoreOpt) -> i32 {
    Fail::exit_code(prefetch_inner(&a, s))
}

fn prefetch_inner(a: &PrefetchArgs, s: &StoreOpt) -> Result<(), Fail> {
    let url = a.url.trim();
    if url.is_empty() {
        return Err(Fail::Msg("the URL is empty".into()));
    }
    let name = match &a.name {
        Some(n) => n.clone(),
        None if a.unpack => "source".to_string(),
        None => url_name(url),
    };
    rocmx_store::path::validate_name(&name).map_err(|e| {
        Fail::Msg(format!(
            "cannot name the store path after '{url}': {e}; choose a name with --name"
        ))
    })?;
    let cfg = crate::config::read().map_err(Fail::Msg)?;
    let mut opts = rocmx_builder::BuildOptions::default();
    cfg.apply(&mut opts).map_err(Fail::Msg)?;
    let store = open_store(s)?;

    let scratch = crate::fetcher::Scratch::new()
        .map_err(|e| Fail::Msg(format!("creating a scratch directory: {e}")))?;
    let dest = scratch.path().join(&name);
    let req = FetchRequest {
        urls: vec![url.to_string()],
        executable: a.executable,
        unpack: a.unpack,
        name: name.clone(),
        size: None,
    };
    let outcome = fetchurl::fetch(
        &req,
        &cfg.mirrors,
        &opts.fetch_limits,
        &dest,
        &mut Progress::default(),
    )
    .map_err(|e| Fail::Msg(e.to_string()))?;
    let method = if a.unpack || a.executable {
        IngestionMethod::Nar
    } else {
        IngestionMethod::Flat
    };
    let (path, hash) = store
        .add_fixed(&dest, &name, method, a.hash_algo)
        .map_err(|e| {
            Fail::Msg(format!(
                "adding the download of '{url}' to the store: {}",
                store_msg(&e)
            ))
        })?;
    drop(scratch);

    let mut out = io::stdout().lock();
    let text = if a.json {
        let v = serde_json::json!({
            "hash": hash.to_sri(),
            "storePath": path.to_string(),
            "url": url,
            "size": outcome.bytes,
        });
        format!("{v}\n")
    } else if a.print_path {
        format!("{}\n{path}\n", hash.to_sri())
    } else {
        eprintln!("path is '{path}'");
        format!("{}\n", hash.to_sri())
    };
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| Fail::write(&e))
}

/// The fetch's log on standard error, without its per-attempt `error: …` lines: the
/// final error names every failed attempt.
#[derive(Default)]
struct Progress {
    line: Vec<u8>,
}

impl Write for Progress {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        for &b in buf {
            self.line.push(b);
            if b == b'\n' {
                if !self.line.starts_with(b"error: ") {
                    let _ = io::stderr().write_all(&self.line);
                }
                self.line.clear();
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The last non-empty path segment of a URL (query and fragment ignored), as
/// `builtin:fetchurl` names a download.
fn url_name(url: &str) -> String {
    let path = url.split(['?', '#']).next().unwrap_or(url);
    path.rsplit('/')
        .find(|s| !s.is_empty() && !s.ends_with(':'))
        .unwrap_or("download")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_from_urls() {
        assert_eq!(url_name("http://h/a/b.tar.gz?x=1#y"), "b.tar.gz");
        assert_eq!(url_name("mirror://debian/pool/main/h/hello/"), "hello");
        assert_eq!(url_name("http://h"), "h");
        assert_eq!(url_name("http://"), "download");
    }
}
