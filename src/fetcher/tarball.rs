//! `tarball` and `github` inputs: an archive downloaded with the builder's
//! transport (`builtin:fetchurl`'s: http, https, `file://`, `mirror://`, under
//! the fetcher's [`Limits`](rocmx_builder::fetchurl::Limits)) and unpacked by
//! its hostile-archive extraction, a single top-level directory stripped.
//!
//! A GitHub source is the archive `BASE/OWNER/REPO/archive/{rev|ref|HEAD}.tar.gz`
//! (`BASE` is `https://github.com`, or `ROCMX_GITHUB_URL`). It is locked
//! without the GitHub API: archives made by `git archive` of a commit, as
//! GitHub's are, name the commit in their pax global header (`comment=<id>`),
//! which becomes the locked `rev` (the ref is dropped, as Nix does). An archive
//! without that comment keeps the ref in `locked`: then only the NAR hash pins
//! the tree.
//!
//! Must not: talk to any API, follow anything but the transport's checked
//! redirects, or leave downloads behind (they live in a [`Scratch`]).

use std::path::PathBuf;

use rocmx_builder::fetchurl::{self, FetchRequest};
use rocmx_lang::flake::fetch::{FetchError, Fetched};
use rocmx_lang::flake::source::{is_rev, Source};
use rocmx_store::Hash;

use super::{fail, Fetcher, Scratch, SOURCE_NAME};

/// The default host of GitHub archives.
pub const GITHUB_URL: &str = "https://github.com";

/// The variable that overrides [`GITHUB_URL`] (tests, mirrors).
pub const GITHUB_URL_VAR: &str = "ROCMX_GITHUB_URL";

/// The GitHub base URL from the value of `ROCMX_GITHUB_URL`, if set and not
/// empty (a trailing `/` is dropped).
pub fn github_base(var: Option<String>) -> String {
    var.map(|v| v.trim().trim_end_matches('/').to_string())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| GITHUB_URL.to_string())
}

/// An unpacked download.
struct Downloaded {
    /// Owns the directory `tree` is in.
    _scratch: Scratch,
    tree: PathBuf,
    /// The archive's pax global `comment`.
    comment: Option<String>,
    /// The newest entry time.
    mtime: Option<u64>,
}

impl Fetcher {
    /// Downloads and unpacks `url` into a scratch directory.
    fn download(&self, source: &Source, url: &str) -> Result<Downloaded, FetchError> {
        let scratch = Scratch::new()
            .map_err(|e| fail(source, format!("creating a scratch directory: {e}")))?;
        let tree = scratch.path().join(SOURCE_NAME);
        let req = FetchRequest {
            urls: vec![url.to_string()],
            executable: false,
            unpack: true,
            name: SOURCE_NAME.to_string(),
            size: None,
        };
        let outcome = fetchurl::fetch(
            &req,
            &self.mirrors,
            &self.limits,
            &tree,
            &mut std::io::sink(),
        )
        .map_err(|e| fail(source, e))?;
        Ok(Downloaded {
            _scratch: scratch,
            tree,
            comment: outcome.archive_comment,
            mtime: outcome.archive_mtime,
        })
    }

    /// A `tarball` input: `locked` is the source itself.
    pub(super) fn fetch_archive(
        &self,
        source: &Source,
        url: &str,
        expected: Option<&Hash>,
    ) -> Result<Fetched, FetchError> {
        let d = self.download(source, url)?;
        let (sp, physical, nar_hash) = self.ingest(source, &d.tree, true, expected)?;
        Ok(Fetched {
            store_path: sp.to_absolute(),
            physical,
            locked: source.clone(),
            nar_hash,
            last_modified: d.mtime,
        })
    }

    /// A `github` input (see the module documentation for locking).
    pub(super) fn fetch_github(
        &self,
        source: &Source,
        expected: Option<&Hash>,
    ) -> Result<Fetched, FetchError> {
        let Source::GitHub {
            owner,
            repo,
            r#ref,
            rev,
        } = source
        else {
            unreachable!("fetch_github is called for GitHub sources");
        };
        for (what, v) in [
            ("owner", Some(owner)),
            ("repository", Some(repo)),
            ("ref", r#ref.as_ref()),
        ] {
            if let Some(v) = v {
                let bad = v.is_empty()
                    || v.starts_with('/')
                    || v.split('/').any(|p| p.is_empty() || p == "." || p == "..")
                    || v.chars().any(|c| c.is_whitespace() || "?#%\\".contains(c))
                    || (what != "ref" && v.contains('/'));
                if bad {
                    return Err(fail(source, format!("invalid GitHub {what} '{v}'")));
                }
            }
        }
        let url = Source::github_archive_url(owner, repo, rev.as_deref().or(r#ref.as_deref()));
        let url = match url.strip_prefix(GITHUB_URL) {
            Some(rest) => format!("{}{rest}", self.github_base),
            None => url,
        };
        let d = self.download(source, &url)?;
        let commit = d.comment.as_deref().filter(|c| is_rev(c));
        if let (Some(want), Some(got)) = (rev.as_deref(), commit) {
            if want != got {
                return Err(fail(
                    source,
                    format!("'{url}' is an archive of commit {got}, not {want}"),
                ));
            }
        }
        let locked = match commit {
            Some(c) => source.with_rev(c),
            None => source.clone(),
        };
        let (sp, physical, nar_hash) = self.ingest(source, &d.tree, true, expected)?;
        Ok(Fetched {
            store_path: sp.to_absolute(),
            physical,
            locked,
            nar_hash,
            last_modified: d.mtime,
        })
    }
}

#[cfg(test)]
mod tests;
