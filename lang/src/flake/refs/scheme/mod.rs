//! Fetcher inputs and their schemes, as far as flake references need them:
//! building an input from a URL or from attributes, validating it, and turning
//! it back into a URL. Nothing here fetches anything.
//!
//! The schemes are Nix's built-in ones (`file`, `git`, `github`, `gitlab`,
//! `hg`, `indirect`, `path`, `sourcehut`, `tarball`), tried in that (name)
//! order when reading a URL, as Nix does. Reading a URL as each scheme's
//! input is `from_url.rs`.

use std::collections::BTreeMap;

mod from_url;

use from_url::{
    curl_from_url, git_archive_from_url, git_from_url, hg_from_url, indirect_from_url,
    path_from_url,
};

use super::hash;
use super::url::{
    bad_url, fix_git_url, other, parse_url, parse_url_scheme, render_url_path_ensure_legal,
    FResult, ParsedUrl, Query,
};
use rocmx_store::{Hash, HashAlgo};

/// One attribute of an input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Attr {
    Str(String),
    Int(u64),
    Bool(bool),
}

/// Input attributes, sorted by name.
pub(crate) type Attrs = BTreeMap<String, Attr>;

/// The attributes as compact JSON, as Nix shows them in error messages.
pub(crate) fn attrs_to_json(attrs: &Attrs) -> String {
    let mut s = String::from("{");
    for (i, (k, v)) in attrs.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        json_string(&mut s, k);
        s.push(':');
        match v {
            Attr::Str(x) => json_string(&mut s, x),
            Attr::Int(n) => s.push_str(&n.to_string()),
            Attr::Bool(b) => s.push_str(if *b { "true" } else { "false" }),
        }
    }
    s.push('}');
    s
}

fn json_string(out: &mut String, s: &str) {
    crate::builtins::json::json_escape_into(out, s)
}

fn maybe_str<'a>(attrs: &'a Attrs, name: &str) -> FResult<Option<&'a str>> {
    match attrs.get(name) {
        None => Ok(None),
        Some(Attr::Str(s)) => Ok(Some(s)),
        Some(_) => Err(other(format!(
            "input attribute '{name}' is not a string {}",
            attrs_to_json(attrs)
        ))),
    }
}

fn get_str<'a>(attrs: &'a Attrs, name: &str) -> FResult<&'a str> {
    maybe_str(attrs, name)?.ok_or_else(|| other(format!("input attribute '{name}' is missing")))
}

fn maybe_int(attrs: &Attrs, name: &str) -> FResult<Option<u64>> {
    match attrs.get(name) {
        None => Ok(None),
        Some(Attr::Int(n)) => Ok(Some(*n)),
        Some(_) => Err(other(format!("input attribute '{name}' is not an integer"))),
    }
}

fn maybe_bool(attrs: &Attrs, name: &str) -> FResult<Option<bool>> {
    match attrs.get(name) {
        None => Ok(None),
        Some(Attr::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(other(format!("input attribute '{name}' is not a Boolean"))),
    }
}

fn set_str(attrs: &mut Attrs, name: &str, v: impl Into<String>) {
    attrs.insert(name.to_string(), Attr::Str(v.into()));
}

/// `Input::getRev`.
fn get_rev(attrs: &Attrs) -> FResult<Option<Hash>> {
    maybe_str(attrs, "rev")?.map(hash::parse_rev).transpose()
}

/// `Input::getNarHash`.
fn get_nar_hash(attrs: &Attrs) -> FResult<Option<Hash>> {
    maybe_str(attrs, "narHash")?
        .map(hash::parse_nar_hash)
        .transpose()
}

// ---- the grammar of refs, revisions, ids and hosts -------------------------------

/// `[0-9a-fA-F]{40}`: a Git commit hash.
pub(crate) fn is_rev(s: &str) -> bool {
    s.len() == 40 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// `[a-zA-Z0-9@][a-zA-Z0-9_.\/@+-]*`: Nix's (loose) ref syntax.
pub(crate) fn matches_ref_regex(s: &str) -> bool {
    let mut b = s.bytes();
    b.next()
        .is_some_and(|c| c.is_ascii_alphanumeric() || c == b'@')
        && b.all(|c| c.is_ascii_alphanumeric() || b"_./@+-".contains(&c))
}

/// `[a-zA-Z][a-zA-Z0-9_-]*`: a flake id.
pub(crate) fn is_flake_id(s: &str) -> bool {
    let mut b = s.bytes();
    b.next().is_some_and(|c| c.is_ascii_alphabetic())
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-')
}

/// `[a-zA-Z0-9.-]*`: a forge host.
fn is_host(s: &str) -> bool {
    s.bytes()
        .all(|c| c.is_ascii_alphanumeric() || c == b'.' || c == b'-')
}

/// Whether Git accepts `r` as a branch, tag or reference name (Nix's
/// `isLegalRefName`, which asks libgit2; these are `git check-ref-format`'s
/// rules with one-level names allowed).
pub(crate) fn is_legal_ref_name(r: &str) -> bool {
    if r.is_empty() || r == "@" || r.contains('\x7f') {
        return false;
    }
    let bad_char = r
        .bytes()
        .any(|c| c < 0x20 || matches!(c, b' ' | b'~' | b'^' | b':' | b'?' | b'*' | b'[' | b'\\'));
    if bad_char || r.contains("..") || r.contains("@{") || r.ends_with('.') {
        return false;
    }
    let components_ok = r
        .split('/')
        .all(|c| !c.is_empty() && !c.starts_with('.') && !c.ends_with(".lock"));
    if !components_ok {
        return false;
    }
    // A branch or tag name may not start with '-'; a full reference name
    // (several components, or an all-caps one like HEAD) may.
    !r.starts_with('-') || r.contains('/') || r.bytes().all(|c| c.is_ascii_uppercase() || c == b'_')
}

// ---- schemes --------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scheme {
    File,
    Git,
    GitHub,
    GitLab,
    Hg,
    Indirect,
    Path,
    SourceHut,
    Tarball,
}

/// In name order, the order Nix tries them in.
const SCHEMES: [Scheme; 9] = [
    Scheme::File,
    Scheme::Git,
    Scheme::GitHub,
    Scheme::GitLab,
    Scheme::Hg,
    Scheme::Indirect,
    Scheme::Path,
    Scheme::SourceHut,
    Scheme::Tarball,
];

const CURL_ATTRS: &[&str] = &[
    "url",
    "narHash",
    "name",
    "unpack",
    "rev",
    "revCount",
    "lastModified",
];

impl Scheme {
    fn name(self) -> &'static str {
        match self {
            Scheme::File => "file",
            Scheme::Git => "git",
            Scheme::GitHub => "github",
            Scheme::GitLab => "gitlab",
            Scheme::Hg => "hg",
            Scheme::Indirect => "indirect",
            Scheme::Path => "path",
            Scheme::SourceHut => "sourcehut",
            Scheme::Tarball => "tarball",
        }
    }

    fn from_name(n: &str) -> Option<Scheme> {
        SCHEMES.into_iter().find(|s| s.name() == n)
    }

    fn allowed_attrs(self) -> &'static [&'static str] {
        match self {
            Scheme::GitHub | Scheme::GitLab | Scheme::SourceHut => &[
                "owner",
                "repo",
                "ref",
                "rev",
                "narHash",
                "lastModified",
                "host",
                "treeHash",
            ],
            Scheme::Git => &[
                "url",
                "ref",
                "rev",
                "shallow",
                "submodules",
                "lfs",
                "exportIgnore",
                "lastModified",
                "revCount",
                "narHash",
                "allRefs",
                "name",
                "dirtyRev",
                "dirtyShortRev",
                "verifyCommit",
                "keytype",
                "publicKey",
                "publicKeys",
            ],
            Scheme::Hg => &["url", "ref", "rev", "revCount", "narHash", "name"],
            Scheme::Indirect => &["id", "ref", "rev", "narHash"],
            Scheme::Path => &["path", "rev", "revCount", "lastModified", "narHash"],
            Scheme::File | Scheme::Tarball => CURL_ATTRS,
        }
    }

    /// `InputScheme::inputFromURL`: `None` when the URL is not for this scheme.
    fn input_from_url(self, url: &ParsedUrl, require_tree: bool) -> FResult<Option<Attrs>> {
        match self {
            Scheme::File | Scheme::Tarball => curl_from_url(self, url, require_tree),
            Scheme::Git => git_from_url(url),
            Scheme::GitHub | Scheme::GitLab | Scheme::SourceHut => git_archive_from_url(self, url),
            Scheme::Hg => hg_from_url(url),
            Scheme::Indirect => indirect_from_url(url),
            Scheme::Path => path_from_url(url),
        }
    }

    /// `InputScheme::inputFromAttrs`: validates and normalises.
    fn input_from_attrs(self, mut attrs: Attrs) -> FResult<Attrs> {
        match self {
            Scheme::File | Scheme::Tarball => {}
            Scheme::GitHub | Scheme::GitLab | Scheme::SourceHut => {
                get_str(&attrs, "owner")?;
                get_str(&attrs, "repo")?;
                let r#ref = maybe_str(&attrs, "ref")?;
                let rev = maybe_str(&attrs, "rev")?;
                if let (Some(r#ref), Some(rev)) = (r#ref, rev) {
                    return Err(bad_url(format!(
                        "input {} contains both a commit hash ('{rev}') and a branch/tag name ('{ref}')",
                        attrs_to_json(&attrs)
                    )));
                }
                if let Some(rev) = rev {
                    hash::parse_any(rev, HashAlgo::Sha1)?;
                }
                if r#ref.is_some_and(|r| !is_legal_ref_name(r)) {
                    return Err(bad_url(format!(
                        "input {} contains an invalid branch/tag name",
                        attrs_to_json(&attrs)
                    )));
                }
                if maybe_str(&attrs, "host")?.is_some_and(|h| !is_host(h)) {
                    return Err(bad_url(format!(
                        "input {} contains an invalid instance host",
                        attrs_to_json(&attrs)
                    )));
                }
            }
            Scheme::Git => {
                maybe_bool(&attrs, "verifyCommit")?;
                if let Some(r) = maybe_str(&attrs, "ref")? {
                    if !is_legal_ref_name(r) {
                        return Err(bad_url(format!("invalid Git branch/tag name '{r}'")));
                    }
                }
                let url = fix_git_url(get_str(&attrs, "url")?)?.to_string();
                set_str(&mut attrs, "url", url);
                for name in ["shallow", "submodules", "allRefs"] {
                    maybe_bool(&attrs, name)?;
                }
            }
            Scheme::Hg => {
                if let Some(r) = maybe_str(&attrs, "ref")? {
                    if !matches_ref_regex(r) {
                        return Err(bad_url(format!("invalid Mercurial branch/tag name '{r}'")));
                    }
                }
            }
            Scheme::Indirect => {
                let id = get_str(&attrs, "id")?;
                if !is_flake_id(id) {
                    return Err(bad_url(format!("'{id}' is not a valid flake ID")));
                }
            }
            Scheme::Path => {
                get_str(&attrs, "path")?;
            }
        }
        Ok(attrs)
    }

    /// `InputScheme::toURL`.
    fn to_url(self, attrs: &Attrs) -> FResult<ParsedUrl> {
        match self {
            Scheme::File | Scheme::Tarball => {
                let mut url = parse_url(get_str(attrs, "url")?, false)?;
                if let Some(h) = get_nar_hash(attrs)? {
                    url.query.insert("narHash".into(), h.to_sri());
                }
                Ok(url)
            }
            Scheme::GitHub | Scheme::GitLab | Scheme::SourceHut => {
                let mut path = vec![
                    get_str(attrs, "owner")?.to_string(),
                    get_str(attrs, "repo")?.to_string(),
                ];
                if let Some(r) = maybe_str(attrs, "ref")? {
                    path.push(r.to_string());
                }
                if let Some(rev) = get_rev(attrs)? {
                    path.push(rev.to_hex());
                }
                let mut query = Query::new();
                if let Some(h) = get_nar_hash(attrs)? {
                    query.insert("narHash".into(), h.to_sri());
                }
                if let Some(host) = maybe_str(attrs, "host")? {
                    query.insert("host".into(), host.to_string());
                }
                Ok(ParsedUrl {
                    scheme: self.name().into(),
                    path,
                    query,
                    ..Default::default()
                })
            }
            Scheme::Git => {
                let mut url = parse_url(get_str(attrs, "url")?, false)?;
                if url.scheme != "git" {
                    url.scheme = format!("git+{}", url.scheme);
                }
                if let Some(rev) = get_rev(attrs)? {
                    url.query.insert("rev".into(), rev.to_hex());
                }
                if let Some(r) = maybe_str(attrs, "ref")? {
                    url.query.insert("ref".into(), r.to_string());
                }
                for name in [
                    "shallow",
                    "lfs",
                    "submodules",
                    "exportIgnore",
                    "verifyCommit",
                ] {
                    if maybe_bool(attrs, name)?.unwrap_or(false) {
                        url.query.insert(name.into(), "1".into());
                    }
                }
                let keys = public_keys(attrs)?;
                if let [(t, k)] = keys.as_slice() {
                    url.query.insert("keytype".into(), t.clone());
                    url.query.insert("publicKey".into(), k.clone());
                } else if keys.len() > 1 {
                    let json = serde_json::Value::Array(
                        keys.iter()
                            .map(|(t, k)| serde_json::json!({ "key": k, "type": t }))
                            .collect(),
                    );
                    url.query.insert("publicKeys".into(), json.to_string());
                }
                Ok(url)
            }
            Scheme::Hg => {
                let mut url = parse_url(get_str(attrs, "url")?, false)?;
                url.scheme = format!("hg+{}", url.scheme);
                if let Some(rev) = get_rev(attrs)? {
                    url.query.insert("rev".into(), rev.to_hex());
                }
                if let Some(r) = maybe_str(attrs, "ref")? {
                    url.query.insert("ref".into(), r.to_string());
                }
                Ok(url)
            }
            Scheme::Indirect => {
                let mut path = vec![get_str(attrs, "id")?.to_string()];
                if let Some(r) = maybe_str(attrs, "ref")? {
                    path.push(r.to_string());
                }
                if let Some(rev) = get_rev(attrs)? {
                    path.push(rev.to_hex());
                }
                Ok(ParsedUrl {
                    scheme: "flake".into(),
                    path,
                    ..Default::default()
                })
            }
            Scheme::Path => {
                let mut query = Query::new();
                for (k, v) in attrs {
                    if matches!(k.as_str(), "path" | "type" | "__final") {
                        continue;
                    }
                    let v = match v {
                        Attr::Str(s) => s.clone(),
                        Attr::Int(n) => n.to_string(),
                        Attr::Bool(b) => if *b { "1" } else { "0" }.to_string(),
                    };
                    query.insert(k.clone(), v);
                }
                Ok(ParsedUrl {
                    scheme: "path".into(),
                    path: get_str(attrs, "path")?
                        .split('/')
                        .map(str::to_string)
                        .collect(),
                    query,
                    ..Default::default()
                })
            }
        }
    }
}

/// The public keys of a Git input (`publicKeys` JSON plus `publicKey`), as
/// `(type, key)` pairs.
fn public_keys(attrs: &Attrs) -> FResult<Vec<(String, String)>> {
    let mut keys = Vec::new();
    if let Some(s) = maybe_str(attrs, "publicKeys")? {
        let bad = |m: String| other(format!("invalid 'publicKeys' attribute: {m}"));
        let v: serde_json::Value = serde_json::from_str(s).map_err(|e| bad(e.to_string()))?;
        let arr = v
            .as_array()
            .ok_or_else(|| bad("expected a JSON array".into()))?;
        for k in arr {
            let key = k
                .get("key")
                .and_then(|x| x.as_str())
                .ok_or_else(|| bad("a key lacks a string 'key' field".into()))?;
            let t = match k.get("type") {
                None => "ssh-ed25519",
                Some(t) => t
                    .as_str()
                    .ok_or_else(|| bad("a key's 'type' is not a string".into()))?,
            };
            keys.push((t.to_string(), key.to_string()));
        }
    }
    if let Some(k) = maybe_str(attrs, "publicKey")? {
        let t = maybe_str(attrs, "keytype")?.unwrap_or("ssh-ed25519");
        keys.push((t.to_string(), k.to_string()));
    }
    Ok(keys)
}

// ---- inputs ---------------------------------------------------------------------

/// A fetcher input: its attributes and, if the type is known, its scheme.
#[derive(Clone, Debug)]
pub(crate) struct Input {
    pub attrs: Attrs,
    scheme: Option<Scheme>,
}

/// The checks Nix makes on every input (`fixupInput`).
fn fixup(attrs: &Attrs) -> FResult<()> {
    get_str(attrs, "type")?;
    maybe_str(attrs, "ref")?;
    maybe_int(attrs, "revCount")?;
    maybe_int(attrs, "lastModified")?;
    Ok(())
}

impl Input {
    /// `Input::fromURL`.
    pub(crate) fn from_url(url: &ParsedUrl, require_tree: bool) -> FResult<Input> {
        for scheme in SCHEMES {
            if let Some(attrs) = scheme.input_from_url(url, require_tree)? {
                fixup(&attrs)?;
                return Ok(Input {
                    attrs,
                    scheme: Some(scheme),
                });
            }
        }
        let (app, transport) = parse_url_scheme(&url.scheme);
        if app == Some("file") && transport == "git" {
            return Err(other(format!(
                "input '{url}' is unsupported; did you mean 'git+file' instead of 'file+git'?"
            )));
        }
        Err(other(format!("input '{url}' is unsupported")))
    }

    /// `Input::fromAttrs`.
    pub(crate) fn from_attrs(attrs: Attrs) -> FResult<Input> {
        let Some(type_) = maybe_str(&attrs, "type")? else {
            return Err(other(
                "'type' attribute to specify input scheme is required but not provided",
            ));
        };
        let Some(scheme) = Scheme::from_name(type_) else {
            fixup(&attrs)?;
            return Ok(Input {
                attrs,
                scheme: None,
            });
        };
        let allowed = scheme.allowed_attrs();
        for name in attrs.keys() {
            if name != "type" && name != "__final" && !allowed.contains(&name.as_str()) {
                return Err(other(format!(
                    "input attribute '{name}' not supported by scheme '{}'",
                    scheme.name()
                )));
            }
        }
        let attrs = scheme.input_from_attrs(attrs)?;
        fixup(&attrs)?;
        Ok(Input {
            attrs,
            scheme: Some(scheme),
        })
    }

    /// `Input::toURLString`: the URL with `extra` query parameters added (they
    /// do not replace the scheme's own).
    pub(crate) fn to_url_string(&self, extra: &Query) -> FResult<String> {
        let Some(scheme) = self.scheme else {
            return Err(other(format!(
                "cannot show unsupported input '{}'",
                attrs_to_json(&self.attrs)
            )));
        };
        let mut url = scheme.to_url(&self.attrs)?;
        for (k, v) in extra {
            url.query.entry(k.clone()).or_insert_with(|| v.clone());
        }
        Ok(url.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ref_names() {
        for ok in [
            "main",
            "release/23.05",
            "v1.0",
            "HEAD",
            "branch#",
            "a@b",
            "refs/heads/x",
        ] {
            assert!(is_legal_ref_name(ok), "{ok}");
        }
        for bad in [
            "", "@", "a..b", "a b", "a:b", "-x", ".x", "a/.x", "x.lock", "a/", "/a", "a//b",
            "a@{b", "x.", "a\\b", "a~1", "a^", "a?", "a*", "a[b",
        ] {
            assert!(!is_legal_ref_name(bad), "{bad}");
        }
    }

    #[test]
    fn json() {
        let mut a = Attrs::new();
        a.insert("type".into(), Attr::Str("x\"\n".into()));
        a.insert("n".into(), Attr::Int(3));
        a.insert("b".into(), Attr::Bool(true));
        assert_eq!(attrs_to_json(&a), r#"{"b":true,"n":3,"type":"x\"\n"}"#);
    }
}
