//! The input sources rocmx fetches, as a typed enum over the flake reference
//! grammar of [`super::refs`].
//!
//! | written                                   | [`Source`]                         |
//! |-------------------------------------------|------------------------------------|
//! | `.`, `./dir`, `/abs/dir`, `path:DIR`      | `Path { path }`                    |
//! | `git+file:DIR[?ref=R&rev=H]`              | `Git { url: "file:///…", … }`      |
//! | `tarball+https://…`, `https://….tar.gz`   | `Tarball { url }`                  |
//! | `github:OWNER/REPO[/REF-or-REV]`          | `GitHub { owner, repo, … }`        |
//!
//! A `?dir=SUB` parameter names the subdirectory holding `flake.nix`; a
//! `?narHash=…` parameter pins the tree (Nix's locked reference form, used by
//! `builtins.getFlake`). Other input types of Nix's grammar (`flake:` ids from
//! a registry, `hg`, `gitlab`, `git+https`…) parse, but are refused here with
//! the forms that are supported.
//!
//! Relative paths stay relative in [`Source::Path`]: they are resolved against
//! the directory of the flake that declares them, so a lock file does not
//! record where a checkout happens to live. This module does no I/O.

use std::fmt;
use std::path::{Component, Path, PathBuf};

use super::refs::{self, Attr, Attrs};

/// Where a tree comes from.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Source {
    /// A directory: absolute, or relative to the declaring flake's directory.
    Path { path: String },
    /// A local git repository (`url` is `file:///…`); only tracked files count.
    /// Without `rev`, `ref` (default: `HEAD`) is followed when locking.
    Git {
        url: String,
        r#ref: Option<String>,
        rev: Option<String>,
    },
    /// An archive (tar, optionally gzip/xz/zstd compressed) over http(s) or
    /// `file://`, unpacked.
    Tarball { url: String },
    /// A GitHub repository at a branch/tag (`ref`) or commit (`rev`), fetched as
    /// the archive `https://github.com/OWNER/REPO/archive/REV.tar.gz`.
    GitHub {
        owner: String,
        repo: String,
        r#ref: Option<String>,
        rev: Option<String>,
    },
}

/// A flake reference: a source and the subdirectory holding `flake.nix`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlakeRef {
    pub source: Source,
    /// `?dir=…`: the subdirectory of the tree holding `flake.nix` (empty: the top).
    pub dir: String,
    /// `?narHash=…`: the NAR hash the tree must have (a locked reference).
    pub nar_hash: Option<String>,
}

impl Source {
    /// The input type as the lock file names it.
    pub fn type_name(&self) -> &'static str {
        match self {
            Source::Path { .. } => "path",
            Source::Git { .. } => "git",
            Source::Tarball { .. } => "tarball",
            Source::GitHub { .. } => "github",
        }
    }

    /// The revision, for sources that have one.
    pub fn rev(&self) -> Option<&str> {
        match self {
            Source::Git { rev, .. } | Source::GitHub { rev, .. } => rev.as_deref(),
            _ => None,
        }
    }

    /// Whether the source names one exact tree by itself (a commit), so that
    /// fetching it twice gives the same content.
    pub fn is_pinned(&self) -> bool {
        self.rev().is_some()
    }

    /// The same source with its revision set (and its ref kept, as Nix does
    /// in a lock file's `locked` entry for git).
    pub fn with_rev(&self, new_rev: &str) -> Source {
        match self {
            Source::Git { url, r#ref, .. } => Source::Git {
                url: url.clone(),
                r#ref: r#ref.clone(),
                rev: Some(new_rev.to_string()),
            },
            Source::GitHub { owner, repo, .. } => Source::GitHub {
                owner: owner.clone(),
                repo: repo.clone(),
                r#ref: None,
                rev: Some(new_rev.to_string()),
            },
            other => other.clone(),
        }
    }

    /// The archive URL of a GitHub source: the commit, else the ref, else `HEAD`.
    pub fn github_archive_url(owner: &str, repo: &str, rev_or_ref: Option<&str>) -> String {
        format!(
            "https://github.com/{owner}/{repo}/archive/{}.tar.gz",
            rev_or_ref.unwrap_or("HEAD")
        )
    }

    /// The input attributes (`type`, `path`, `url`, `owner`, `repo`, `ref`,
    /// `rev`), sorted, as the lock file stores them.
    pub fn to_attrs(&self) -> Vec<(&'static str, String)> {
        let mut v = vec![("type", self.type_name().to_string())];
        match self {
            Source::Path { path } => v.push(("path", path.clone())),
            Source::Git { url, r#ref, rev } => {
                v.push(("url", url.clone()));
                if let Some(r) = r#ref {
                    v.push(("ref", r.clone()));
                }
                if let Some(r) = rev {
                    v.push(("rev", r.clone()));
                }
            }
            Source::Tarball { url } => v.push(("url", url.clone())),
            Source::GitHub {
                owner,
                repo,
                r#ref,
                rev,
            } => {
                v.push(("owner", owner.clone()));
                v.push(("repo", repo.clone()));
                if let Some(r) = r#ref {
                    v.push(("ref", r.clone()));
                }
                if let Some(r) = rev {
                    v.push(("rev", r.clone()));
                }
            }
        }
        v.sort();
        v
    }

    /// Reads input attributes (from the reference grammar or a lock file).
    pub fn from_attrs(attrs: &[(String, String)]) -> Result<Source, String> {
        let get = |k: &str| attrs.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        let ty = get("type").ok_or("the input has no 'type'")?;
        let need = |k: &str| get(k).ok_or_else(|| format!("the {ty} input has no '{k}'"));
        let rev = get("rev");
        if let Some(r) = &rev {
            if !is_rev(r) {
                return Err(format!(
                    "'{r}' is not a commit hash (40 lower-case hexadecimal digits)"
                ));
            }
        }
        let known: &[&str] = match ty.as_str() {
            "path" => &["type", "path", "narHash", "lastModified", "rev", "revCount"],
            "git" => &[
                "type",
                "url",
                "ref",
                "rev",
                "narHash",
                "lastModified",
                "revCount",
            ],
            "tarball" => &["type", "url", "narHash", "lastModified"],
            "github" => &[
                "type",
                "owner",
                "repo",
                "ref",
                "rev",
                "narHash",
                "lastModified",
            ],
            _ => &[],
        };
        if let Some((k, _)) = attrs.iter().find(|(k, _)| !known.contains(&k.as_str())) {
            if !known.is_empty() {
                return Err(format!("the {ty} input has an unsupported attribute '{k}'"));
            }
        }
        match ty.as_str() {
            "path" => Ok(Source::Path {
                path: need("path")?,
            }),
            "git" => {
                let url = need("url")?;
                if !url.starts_with("file://") {
                    return Err(format!(
                        "git input '{url}' is not a local repository: rocmx fetches git inputs \
                         only from 'git+file:DIR' (use a 'tarball+https://…' or 'github:' \
                         reference for remote sources)"
                    ));
                }
                Ok(Source::Git {
                    url,
                    r#ref: get("ref"),
                    rev,
                })
            }
            "tarball" => Ok(Source::Tarball { url: need("url")? }),
            "github" => Ok(Source::GitHub {
                owner: need("owner")?,
                repo: need("repo")?,
                r#ref: get("ref"),
                rev,
            }),
            "indirect" => Err(format!(
                "'{}' names a flake registry entry; rocmx has no registry: write \
                 'github:OWNER/REPO', 'path:DIR', 'git+file:DIR' or a tarball URL",
                get("id").unwrap_or_default()
            )),
            other => Err(format!(
                "input type '{other}' is not supported; rocmx fetches 'path:', \
                 'git+file:', 'tarball+http(s)://' (or http(s)://….tar.gz) and 'github:' \
                 inputs"
            )),
        }
    }

    /// The directory of a `Git` source's `file://` URL.
    pub fn git_dir(url: &str) -> PathBuf {
        PathBuf::from(url.strip_prefix("file://").unwrap_or(url))
    }
}

impl fmt::Display for Source {
    /// The reference URL: `path:/x`, `git+file:///x?ref=main`, `github:o/r/REV`…
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Path { path } => write!(f, "path:{path}"),
            Source::Git { url, r#ref, rev } => {
                write!(f, "git+{url}")?;
                let mut sep = '?';
                if let Some(r) = r#ref {
                    write!(f, "{sep}ref={r}")?;
                    sep = '&';
                }
                if let Some(r) = rev {
                    write!(f, "{sep}rev={r}")?;
                }
                Ok(())
            }
            Source::Tarball { url } => {
                if has_tarball_suffix(url) {
                    write!(f, "{url}")
                } else {
                    write!(f, "tarball+{url}")
                }
            }
            Source::GitHub {
                owner,
                repo,
                r#ref,
                rev,
            } => {
                write!(f, "github:{owner}/{repo}")?;
                if let Some(r) = rev.as_ref().or(r#ref.as_ref()) {
                    write!(f, "/{r}")?;
                }
                Ok(())
            }
        }
    }
}

impl fmt::Display for FlakeRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.source)?;
        let mut sep = if self.source.to_string().contains('?') {
            '&'
        } else {
            '?'
        };
        if !self.dir.is_empty() {
            write!(f, "{sep}dir={}", self.dir)?;
            sep = '&';
        }
        if let Some(h) = &self.nar_hash {
            write!(f, "{sep}narHash={h}")?;
        }
        Ok(())
    }
}

fn has_tarball_suffix(url: &str) -> bool {
    let path = url.split(['?', '#']).next().unwrap_or(url);
    [".tar", ".tar.gz", ".tgz", ".tar.xz", ".tar.zst", ".tar.bz2"]
        .iter()
        .any(|s| path.ends_with(s))
}

/// 40 lower-case hexadecimal digits.
pub fn is_rev(s: &str) -> bool {
    s.len() == 40 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Whether a reference is written as a local path (`.`, `./x`, `../x`, `/x`,
/// `~/x` is not expanded).
fn is_path_like(s: &str) -> bool {
    let s = &s[..s.find(['?', '#']).unwrap_or(s.len())];
    s == "." || s == ".." || s.starts_with("./") || s.starts_with("../") || s.starts_with('/')
}

/// `a/./b/../c` → `a/c`, lexically (symlinks are not resolved).
fn normalise(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            c => out.push(c.as_os_str()),
        }
    }
    if out.as_os_str().is_empty() {
        out.push(".");
    }
    out
}

/// Parses a flake reference and its `#fragment`.
///
/// `base` is the directory relative paths are resolved against: the working
/// directory for the command line. With `keep_relative` (inputs written in a
/// `flake.nix`), relative `path:` references stay relative, normalised
/// (`./lib/` → `./lib`), for the declaring flake to resolve.
pub fn parse(s: &str, base: &Path, keep_relative: bool) -> Result<(FlakeRef, String), String> {
    let resolve = |p: &str| -> String {
        if p.starts_with('/') {
            normalise(Path::new(p)).to_string_lossy().into_owned()
        } else if keep_relative {
            let n = normalise(Path::new(p));
            let s = n.to_string_lossy();
            if s == "." || s.starts_with("..") {
                s.into_owned()
            } else {
                format!("./{s}")
            }
        } else {
            normalise(&base.join(p)).to_string_lossy().into_owned()
        }
    };
    let (text, relative_path) = if is_path_like(s) {
        (None, Some(s))
    } else if let Some(rest) = s.strip_prefix("path:") {
        if rest.starts_with('/') {
            (Some(s.to_string()), None)
        } else {
            (None, Some(rest))
        }
    } else {
        (Some(s.to_string()), None)
    };
    if let Some(p) = relative_path {
        // A path with an optional `?query` and `#fragment`: parse it with an
        // absolute placeholder, then put the (maybe relative) path back.
        let end = p.find(['?', '#']).unwrap_or(p.len());
        let placeholder = format!("/rocmx-relative{}", &p[end..]);
        let (attrs, dir, fragment) = refs::parse_ref(&placeholder)?;
        let mut r = from_parsed(&attrs, dir)?;
        r.source = Source::Path {
            path: resolve(&p[..end]),
        };
        return Ok((r, fragment));
    }
    let text = text.unwrap_or_default();
    let (attrs, dir, fragment) = refs::parse_ref(&text)?;
    Ok((from_parsed(&attrs, dir)?, fragment))
}

fn from_parsed(attrs: &Attrs, dir: String) -> Result<FlakeRef, String> {
    let mut flat: Vec<(String, String)> = Vec::new();
    let mut nar_hash = None;
    for (k, v) in attrs {
        let v = match v {
            Attr::Str(s) => s.clone(),
            Attr::Int(n) => n.to_string(),
            Attr::Bool(b) => b.to_string(),
        };
        if k == "narHash" {
            nar_hash = Some(v);
            continue;
        }
        if k == "lastModified" || k == "revCount" {
            continue;
        }
        flat.push((k.clone(), v));
    }
    Ok(FlakeRef {
        source: Source::from_attrs(&flat)?,
        dir,
        nar_hash,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> FlakeRef {
        parse(s, Path::new("/home/u/proj"), false).unwrap().0
    }

    fn path(s: &str) -> Source {
        Source::Path { path: s.into() }
    }

    #[test]
    fn local_paths() {
        assert_eq!(p(".").source, path("/home/u/proj"));
        assert_eq!(p("./sub/").source, path("/home/u/proj/sub"));
        assert_eq!(p("../other").source, path("/home/u/other"));
        assert_eq!(p("/abs/x").source, path("/abs/x"));
        assert_eq!(p("path:/abs/x").source, path("/abs/x"));
        assert_eq!(p("path:./x").source, path("/home/u/proj/x"));
        let (r, frag) = parse(".#pkgs.hello", Path::new("/b"), false).unwrap();
        assert_eq!((r.source, frag.as_str()), (path("/b"), "pkgs.hello"));
        let (r, _) = parse("./x?dir=sub", Path::new("/b"), false).unwrap();
        assert_eq!((r.source, r.dir.as_str()), (path("/b/x"), "sub"));
    }

    #[test]
    fn relative_inputs_stay_relative() {
        let rel = |s: &str| parse(s, Path::new("/ignored"), true).unwrap().0.source;
        assert_eq!(rel("path:./lib/"), path("./lib"));
        assert_eq!(rel("./lib"), path("./lib"));
        assert_eq!(rel("../up"), path("../up"));
        assert_eq!(rel("path:/abs"), path("/abs"));
    }

    #[test]
    fn git_tarball_github() {
        let r = p("git+file:///srv/repo?ref=main&rev=0123456789abcdef0123456789abcdef01234567");
        assert_eq!(
            r.source,
            Source::Git {
                url: "file:///srv/repo".into(),
                r#ref: Some("main".into()),
                rev: Some("0123456789abcdef0123456789abcdef01234567".into())
            }
        );
        assert_eq!(
            r.source.to_string(),
            "git+file:///srv/repo?ref=main&rev=0123456789abcdef0123456789abcdef01234567"
        );
        let t = p("https://example.org/x-1.0.tar.gz");
        assert_eq!(
            t.source,
            Source::Tarball {
                url: "https://example.org/x-1.0.tar.gz".into()
            }
        );
        assert_eq!(t.source.to_string(), "https://example.org/x-1.0.tar.gz");
        let t = p("tarball+http://127.0.0.1:8080/dl?id=3");
        assert_eq!(
            t.source.to_string(),
            "tarball+http://127.0.0.1:8080/dl?id=3"
        );
        let g = p("github:ROCm/rocm-cmake/rocm-6.4.0");
        assert_eq!(
            g.source,
            Source::GitHub {
                owner: "ROCm".into(),
                repo: "rocm-cmake".into(),
                r#ref: Some("rocm-6.4.0".into()),
                rev: None
            }
        );
        assert_eq!(g.source.to_string(), "github:ROCm/rocm-cmake/rocm-6.4.0");
        assert_eq!(
            Source::github_archive_url("ROCm", "rocm-cmake", Some("rocm-6.4.0")),
            "https://github.com/ROCm/rocm-cmake/archive/rocm-6.4.0.tar.gz"
        );
        let pinned = g
            .source
            .with_rev("0123456789abcdef0123456789abcdef01234567");
        assert!(pinned.is_pinned());
        assert_eq!(
            pinned.to_string(),
            "github:ROCm/rocm-cmake/0123456789abcdef0123456789abcdef01234567"
        );
    }

    #[test]
    fn locked_reference() {
        let r = p("path:/x?narHash=sha256-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA%3D");
        assert_eq!(
            r.nar_hash.as_deref(),
            Some("sha256-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=")
        );
    }

    #[test]
    fn refused() {
        let e = |s: &str| parse(s, Path::new("/b"), false).unwrap_err();
        assert!(e("nixpkgs").contains("no registry"), "{}", e("nixpkgs"));
        assert!(e("git+https://example.org/r.git").contains("git+file"));
        assert!(e("hg+https://example.org/r").contains("not supported"));
    }

    #[test]
    fn attrs_round_trip() {
        for s in [
            path("./lib"),
            Source::Tarball {
                url: "https://e.org/a.tar.xz".into(),
            },
            Source::Git {
                url: "file:///r".into(),
                r#ref: None,
                rev: Some("0123456789abcdef0123456789abcdef01234567".into()),
            },
        ] {
            let attrs: Vec<(String, String)> = s
                .to_attrs()
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect();
            assert_eq!(Source::from_attrs(&attrs).unwrap(), s);
        }
    }
}
