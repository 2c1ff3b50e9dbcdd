//! Reading a URL as an input of each scheme: the `…_from_url` functions, one per
//! fetcher (curl-like `file`/`tarball`, `git`, the `github`/`gitlab`/`sourcehut`
//! archives, `hg`, `indirect`, `path`), each giving the input's attributes or `None`
//! when the URL is not of its kind, as Nix's `inputFromURL` does.
//!
//! Must not: make the `Input` itself (its scheme checks the attributes as a whole
//! afterwards, in `super`), or fetch anything.

// The scheme module's grammar helpers and attribute accessors are this module's too.
use super::*;

fn has_tarball_extension(url: &ParsedUrl) -> bool {
    let Some(last) = url.path.last() else {
        return false;
    };
    [
        ".zip", ".tar", ".tgz", ".tar.gz", ".tar.xz", ".tar.bz2", ".tar.zst",
    ]
    .iter()
    .any(|e| last.ends_with(e))
}

fn parse_u64(s: &str) -> Option<u64> {
    let d = s.strip_prefix('+').unwrap_or(s);
    if d.is_empty() || !d.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    d.parse().ok()
}

pub(super) fn curl_from_url(
    scheme: Scheme,
    url: &ParsedUrl,
    require_tree: bool,
) -> FResult<Option<Attrs>> {
    let (app, transport) = parse_url_scheme(&url.scheme);
    if !matches!(transport, "file" | "http" | "https") {
        return Ok(None);
    }
    let valid = match app {
        Some(a) => a == scheme.name(),
        None if scheme == Scheme::Tarball => require_tree || has_tarball_extension(url),
        None => !require_tree && !has_tarball_extension(url),
    };
    if !valid {
        return Ok(None);
    }
    let mut url = url.clone();
    url.scheme = transport.to_string();
    let mut attrs = Attrs::new();
    if let Some(h) = url.query.get("narHash") {
        set_str(&mut attrs, "narHash", h.clone());
    }
    if let Some(r) = url.query.get("rev") {
        set_str(&mut attrs, "rev", r.clone());
    }
    for name in ["revCount", "lastModified"] {
        if let Some(n) = url.query.get(name).and_then(|v| parse_u64(v)) {
            attrs.insert(name.into(), Attr::Int(n));
        }
    }
    for name in scheme.allowed_attrs() {
        url.query.remove(*name);
    }
    set_str(&mut attrs, "type", scheme.name());
    set_str(&mut attrs, "url", url.to_string());
    Ok(Some(attrs))
}

pub(super) fn git_from_url(url: &ParsedUrl) -> FResult<Option<Attrs>> {
    if url.scheme != "git" && parse_url_scheme(&url.scheme).0 != Some("git") {
        return Ok(None);
    }
    let mut url2 = url.clone();
    url2.query.clear();
    let mut attrs = Attrs::new();
    set_str(&mut attrs, "type", "git");
    for (name, value) in &url.query {
        match name.as_str() {
            "rev" | "ref" | "keytype" | "publicKey" | "publicKeys" => {
                set_str(&mut attrs, name, value.clone())
            }
            "shallow" | "submodules" | "lfs" | "exportIgnore" | "allRefs" | "verifyCommit" => {
                attrs.insert(name.clone(), Attr::Bool(value == "1"));
            }
            _ => {
                url2.query.insert(name.clone(), value.clone());
            }
        }
    }
    set_str(&mut attrs, "url", url2.to_string());
    Scheme::Git.input_from_attrs(attrs).map(Some)
}

pub(super) fn git_archive_from_url(scheme: Scheme, url: &ParsedUrl) -> FResult<Option<Attrs>> {
    if url.scheme != scheme.name() {
        return Ok(None);
    }
    let path = url.path_segments();
    let mut rev: Option<String> = None;
    let mut r#ref: Option<String> = None;
    let mut host: Option<String> = None;
    match path.len() {
        0 | 1 => return Err(bad_url(format!("URL '{url}' is invalid"))),
        2 => {}
        3 => {
            if is_rev(&path[2]) {
                rev = Some(hash::parse_any(&path[2], HashAlgo::Sha1)?.to_hex());
            } else if is_legal_ref_name(&path[2]) {
                r#ref = Some(path[2].clone());
            } else {
                return Err(bad_url(format!(
                    "in URL '{url}', '{}' is not a commit hash or branch/tag name",
                    path[2]
                )));
            }
        }
        _ => {
            let rs = path[2..].join("/");
            if !is_legal_ref_name(&rs) {
                return Err(bad_url(format!(
                    "in URL '{url}', '{rs}' is not a branch/tag name"
                )));
            }
            r#ref = Some(rs);
        }
    }
    for (name, value) in &url.query {
        match name.as_str() {
            "rev" => {
                if rev.is_some() {
                    return Err(bad_url(format!(
                        "URL '{url}' contains multiple commit hashes"
                    )));
                }
                rev = Some(hash::parse_any(value, HashAlgo::Sha1)?.to_hex());
            }
            "ref" => {
                if !is_legal_ref_name(value) {
                    return Err(bad_url(format!(
                        "URL '{url}' contains an invalid branch/tag name"
                    )));
                }
                if r#ref.is_some() {
                    return Err(bad_url(format!(
                        "URL '{url}' contains multiple branch/tag names"
                    )));
                }
                r#ref = Some(value.clone());
            }
            "host" => {
                if !is_host(value) {
                    return Err(bad_url(format!(
                        "URL '{url}' contains an invalid instance host"
                    )));
                }
                host = Some(value.clone());
            }
            _ => {}
        }
    }
    if let (Some(r#ref), Some(rev)) = (&r#ref, &rev) {
        return Err(bad_url(format!(
            "URL '{url}' contains both a commit hash and a branch/tag name {ref} {rev}"
        )));
    }
    let mut attrs = Attrs::new();
    set_str(&mut attrs, "type", scheme.name());
    set_str(&mut attrs, "owner", path[0].clone());
    set_str(&mut attrs, "repo", path[1].clone());
    if let Some(rev) = rev {
        set_str(&mut attrs, "rev", rev);
    }
    if let Some(r) = r#ref {
        set_str(&mut attrs, "ref", r);
    }
    if let Some(h) = host {
        set_str(&mut attrs, "host", h);
    }
    if let Some(h) = url.query.get("narHash") {
        set_str(&mut attrs, "narHash", h.clone());
    }
    scheme.input_from_attrs(attrs).map(Some)
}

pub(super) fn hg_from_url(url: &ParsedUrl) -> FResult<Option<Attrs>> {
    if !matches!(
        url.scheme.as_str(),
        "hg+http" | "hg+https" | "hg+ssh" | "hg+file"
    ) {
        return Ok(None);
    }
    let mut url2 = url.clone();
    url2.scheme = url.scheme["hg+".len()..].to_string();
    url2.query.clear();
    let mut attrs = Attrs::new();
    set_str(&mut attrs, "type", "hg");
    for (name, value) in &url.query {
        if name == "rev" || name == "ref" {
            set_str(&mut attrs, name, value.clone());
        } else {
            url2.query.insert(name.clone(), value.clone());
        }
    }
    set_str(&mut attrs, "url", url2.to_string());
    Scheme::Hg.input_from_attrs(attrs).map(Some)
}

pub(super) fn indirect_from_url(url: &ParsedUrl) -> FResult<Option<Attrs>> {
    if url.scheme != "flake" {
        return Ok(None);
    }
    let path = url.path_segments();
    let mut rev = None;
    let mut r#ref = None;
    match path.len() {
        1 => {}
        2 => {
            if is_rev(&path[1]) {
                rev = Some(hash::parse_any(&path[1], HashAlgo::Sha1)?.to_hex());
            } else if is_legal_ref_name(&path[1]) {
                r#ref = Some(path[1].clone());
            } else {
                return Err(bad_url(format!(
                    "in flake URL '{url}', '{}' is not a commit hash or branch/tag name",
                    path[1]
                )));
            }
        }
        3 => {
            if !is_legal_ref_name(&path[1]) {
                return Err(bad_url(format!(
                    "in flake URL '{url}', '{}' is not a branch/tag name",
                    path[1]
                )));
            }
            r#ref = Some(path[1].clone());
            if !is_rev(&path[2]) {
                return Err(bad_url(format!(
                    "in flake URL '{url}', '{}' is not a commit hash",
                    path[2]
                )));
            }
            rev = Some(hash::parse_any(&path[2], HashAlgo::Sha1)?.to_hex());
        }
        _ => return Err(bad_url(format!("GitHub URL '{url}' is invalid"))),
    }
    let id = &path[0];
    if !is_flake_id(id) {
        return Err(bad_url(format!("'{id}' is not a valid flake ID")));
    }
    let mut attrs = Attrs::new();
    set_str(&mut attrs, "type", "indirect");
    set_str(&mut attrs, "id", id.clone());
    if let Some(rev) = rev {
        set_str(&mut attrs, "rev", rev);
    }
    if let Some(r) = r#ref {
        set_str(&mut attrs, "ref", r);
    }
    Ok(Some(attrs))
}

pub(super) fn path_from_url(url: &ParsedUrl) -> FResult<Option<Attrs>> {
    if url.scheme != "path" {
        return Ok(None);
    }
    if let Some(a) = &url.authority {
        if !a.host.is_empty() {
            return Err(other(format!(
                "path URL '{url}' should not have an authority ('{a}')"
            )));
        }
    }
    let mut attrs = Attrs::new();
    set_str(&mut attrs, "type", "path");
    set_str(&mut attrs, "path", render_url_path_ensure_legal(&url.path)?);
    for (name, value) in &url.query {
        match name.as_str() {
            "rev" | "narHash" => set_str(&mut attrs, name, value.clone()),
            "revCount" | "lastModified" => match parse_u64(value) {
                Some(n) => {
                    attrs.insert(name.clone(), Attr::Int(n));
                }
                None => {
                    return Err(other(format!(
                        "path URL '{url}' has invalid parameter '{name}'"
                    )))
                }
            },
            _ => {
                return Err(other(format!(
                    "path URL '{url}' has unsupported parameter '{name}'"
                )))
            }
        }
    }
    Ok(Some(attrs))
}
