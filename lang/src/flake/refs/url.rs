//! RFC 3986 URLs as Nix's flake references see them: parsing (with Nix's
//! lenient treatment of spaces and quotes in queries and fragments), percent
//! encoding and decoding, and rendering back to a string.
//!
//! Owns [`ParsedUrl`] and [`Authority`] and the errors they raise ([`FErr`]); it
//! knows nothing about input schemes (see `scheme.rs`).

use std::collections::BTreeMap;
use std::fmt;

/// An error from flake reference handling. The variants mirror the C++
/// exception classes Nix distinguishes when it decides whether to fall back to
/// another way of reading a flake reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FErr {
    /// `BadURL`: the string is not a URL of the expected shape.
    BadUrl(String),
    /// `BadHash`: a malformed hash (a `rev` or `narHash`).
    BadHash(String),
    /// Any other error.
    Other(String),
}

impl FErr {
    pub(crate) fn message(&self) -> &str {
        match self {
            FErr::BadUrl(m) | FErr::BadHash(m) | FErr::Other(m) => m,
        }
    }
}

pub(crate) type FResult<T> = Result<T, FErr>;

pub(crate) fn bad_url(m: impl Into<String>) -> FErr {
    FErr::BadUrl(m.into())
}

pub(crate) fn other(m: impl Into<String>) -> FErr {
    FErr::Other(m.into())
}

/// A query: names to values, sorted by name (like Nix's `StringMap`).
pub(crate) type Query = BTreeMap<String, String>;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) enum HostType {
    #[default]
    Name,
    IPv4,
    IPv6,
    IPvFuture,
}

/// The authority of a URL (`user:password@host:port`), decoded.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub(crate) struct Authority {
    pub host_type: HostType,
    pub host: String,
    pub user: Option<String>,
    pub password: Option<String>,
    pub port: Option<u16>,
}

impl fmt::Display for Authority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(user) = &self.user {
            f.write_str(&percent_encode(user, ""))?;
            if let Some(pw) = &self.password {
                write!(f, ":{}", percent_encode(pw, ""))?;
            }
            f.write_str("@")?;
        }
        match self.host_type {
            HostType::Name => f.write_str(&percent_encode(&self.host, ""))?,
            HostType::IPv4 => f.write_str(&self.host)?,
            HostType::IPv6 | HostType::IPvFuture => {
                write!(f, "[{}]", percent_encode(&self.host, ":"))?
            }
        }
        if let Some(p) = self.port {
            write!(f, ":{p}")?;
        }
        Ok(())
    }
}

/// A parsed URL. `path` holds the decoded segments between slashes: `/a/b` is
/// `["", "a", "b"]`, `a/b` is `["a", "b"]`, the empty path is `[""]`.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub(crate) struct ParsedUrl {
    pub scheme: String,
    pub authority: Option<Authority>,
    pub path: Vec<String>,
    pub query: Query,
    pub fragment: String,
}

impl ParsedUrl {
    /// The non-empty path segments.
    pub(crate) fn path_segments(&self) -> Vec<String> {
        self.path
            .iter()
            .filter(|s| !s.is_empty())
            .cloned()
            .collect()
    }
}

impl fmt::Display for ParsedUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:", self.scheme)?;
        if let Some(a) = &self.authority {
            write!(f, "//{a}")?;
            // A path after an authority starts with a slash.
            if self.path.first().is_some_and(|s| !s.is_empty()) {
                f.write_str("/")?;
            }
        }
        f.write_str(&encode_url_path(&self.path))?;
        if !self.query.is_empty() {
            write!(f, "?{}", encode_query(&self.query))?;
        }
        if !self.fragment.is_empty() {
            write!(f, "#{}", percent_encode(&self.fragment, ""))?;
        }
        Ok(())
    }
}

/// `(application, transport)` of a scheme such as `git+https`.
pub(crate) fn parse_url_scheme(scheme: &str) -> (Option<&str>, &str) {
    match scheme.split_once('+') {
        Some((app, transport)) => (Some(app), transport),
        None => (None, scheme),
    }
}

// ---- character classes ---------------------------------------------------------

fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

fn is_sub_delim(b: u8) -> bool {
    matches!(
        b,
        b'!' | b'$' | b'&' | b'\'' | b'(' | b')' | b'*' | b'+' | b',' | b';' | b'='
    )
}

fn is_pchar(b: u8) -> bool {
    is_unreserved(b) || is_sub_delim(b) || matches!(b, b':' | b'@')
}

/// Whether every byte of `s` is allowed by `ok` or is part of a valid `%XX`.
fn valid_chars(s: &str, ok: impl Fn(u8) -> bool) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            if i + 2 < b.len() && b[i + 1].is_ascii_hexdigit() && b[i + 2].is_ascii_hexdigit() {
                i += 3;
                continue;
            }
            return false;
        }
        if !ok(b[i]) {
            return false;
        }
        i += 1;
    }
    true
}

// ---- percent encoding ----------------------------------------------------------

/// Percent-encodes every byte that is neither unreserved nor in `keep`.
pub(crate) fn percent_encode(s: &str, keep: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for &b in s.as_bytes() {
        if is_unreserved(b) || (b.is_ascii() && keep.as_bytes().contains(&b)) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Percent-encodes only the bytes in `set` (Nix's lenient fix-ups).
fn percent_encode_set(s: &str, set: &[u8]) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_ascii() && set.contains(&(c as u8)) {
            out.push_str(&format!("%{:02X}", c as u8));
        } else {
            out.push(c);
        }
    }
    out
}

/// Decodes `%XX` escapes; a stray `%` is an error.
pub(crate) fn percent_decode(s: &str) -> FResult<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = |c: u8| (c as char).to_digit(16);
            match (
                b.get(i + 1).copied().and_then(hex),
                b.get(i + 2).copied().and_then(hex),
            ) {
                (Some(h), Some(l)) => {
                    out.push((h * 16 + l) as u8);
                    i += 3;
                    continue;
                }
                _ => {
                    return Err(bad_url(format!(
                        "invalid URI parameter '{s}': incomplete pct-encoding"
                    )))
                }
            }
        }
        out.push(b[i]);
        i += 1;
    }
    Ok(String::from_utf8(out)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()))
}

const ALLOWED_IN_QUERY: &str = ":@/?";
const ALLOWED_IN_PATH: &str = ":@";

pub(crate) fn encode_url_path(path: &[String]) -> String {
    path.iter()
        .map(|p| percent_encode(p, ALLOWED_IN_PATH))
        .collect::<Vec<_>>()
        .join("/")
}

pub(crate) fn encode_query(q: &Query) -> String {
    q.iter()
        .map(|(k, v)| {
            format!(
                "{}={}",
                percent_encode(k, ALLOWED_IN_QUERY),
                percent_encode(v, ALLOWED_IN_QUERY)
            )
        })
        .collect::<Vec<_>>()
        .join("&")
}

/// Decodes a raw query string (`a=1&b=2`). Parameters without `=` are ignored,
/// as Nix does (with a warning); the first of duplicate names wins.
pub(crate) fn decode_query(query: &str, lenient: bool) -> FResult<Query> {
    let fixed;
    let query = if lenient {
        fixed = percent_encode_set(query, b" \"");
        fixed.as_str()
    } else {
        query
    };
    if !valid_chars(query, |b| is_pchar(b) || b == b'/' || b == b'?') {
        return Err(bad_url(format!(
            "invalid URI query '{query}': invalid character"
        )));
    }
    let mut res = Query::new();
    if query.is_empty() {
        return Ok(res);
    }
    for param in query.split('&') {
        let Some((k, v)) = param.split_once('=') else {
            continue;
        };
        let k = percent_decode(k)?;
        let v = percent_decode(v)?;
        res.entry(k).or_insert(v);
    }
    Ok(res)
}

// ---- parsing -------------------------------------------------------------------

/// Nix's lenient fix-up: percent-encode spaces and quotes in the query, and
/// spaces, quotes and carets in the fragment, before strict parsing.
fn lenient_fixup(url: &str) -> String {
    let mut fixed = String::with_capacity(url.len());
    let mut view = url;
    if let Some(q) = view.find('?') {
        fixed.push_str(&view[..q]);
        fixed.push('?');
        view = &view[q + 1..];
        let frag_start = view.find('#').unwrap_or(view.len());
        fixed.push_str(&percent_encode_set(&view[..frag_start], b" \""));
        view = &view[frag_start..];
    }
    if let Some(h) = view.find('#') {
        fixed.push_str(&view[..h]);
        fixed.push('#');
        fixed.push_str(&percent_encode_set(&view[h + 1..], b" \"^"));
        return fixed;
    }
    fixed.push_str(view);
    fixed
}

/// The length of a scheme at the start of `s` (up to, not including, the `:`).
fn scheme_len(s: &str) -> Option<usize> {
    let b = s.as_bytes();
    if !b.first()?.is_ascii_alphabetic() {
        return None;
    }
    for (i, &c) in b.iter().enumerate() {
        if c == b':' {
            return Some(i);
        }
        if !(c.is_ascii_alphanumeric() || matches!(c, b'+' | b'-' | b'.')) {
            return None;
        }
    }
    None
}

fn is_ipv4(s: &str) -> bool {
    let parts: Vec<&str> = s.split('.').collect();
    parts.len() == 4
        && parts.iter().all(|p| {
            !p.is_empty()
                && p.len() <= 3
                && p.bytes().all(|c| c.is_ascii_digit())
                && (p.len() == 1 || !p.starts_with('0'))
                && p.parse::<u16>().is_ok_and(|n| n <= 255)
        })
}

fn parse_authority(auth: &str, invalid: &dyn Fn() -> FErr) -> FResult<Authority> {
    let (userinfo, hostport) = match auth.split_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, auth),
    };
    let mut a = Authority::default();
    if let Some(u) = userinfo {
        if !valid_chars(u, |b| is_unreserved(b) || is_sub_delim(b) || b == b':') {
            return Err(invalid());
        }
        match u.split_once(':') {
            Some((user, pw)) => {
                a.user = Some(percent_decode(user)?);
                a.password = Some(percent_decode(pw)?);
            }
            None => a.user = Some(percent_decode(u)?),
        }
    }
    let port;
    if let Some(lit) = hostport.strip_prefix('[') {
        let Some((inner, rest)) = lit.split_once(']') else {
            return Err(invalid());
        };
        let future = inner.starts_with(['v', 'V']);
        let ok = if future {
            inner.len() > 1
                && valid_chars(&inner[1..], |b| {
                    is_unreserved(b) || is_sub_delim(b) || b == b':'
                })
        } else {
            let (addr, zone) = match inner.split_once("%25") {
                Some((a, z)) => (a, Some(z)),
                None => (inner, None),
            };
            addr.contains(':')
                && addr
                    .bytes()
                    .all(|b| b.is_ascii_hexdigit() || b == b':' || b == b'.')
                && zone.is_none_or(|z| !z.is_empty() && valid_chars(z, is_unreserved))
        };
        if !ok {
            return Err(invalid());
        }
        a.host_type = if future {
            HostType::IPvFuture
        } else {
            HostType::IPv6
        };
        a.host = percent_decode(inner)?;
        port = match rest.strip_prefix(':') {
            Some(p) => Some(p),
            None if rest.is_empty() => None,
            None => return Err(invalid()),
        };
    } else {
        let (host, p) = match hostport.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (hostport, None),
        };
        if !valid_chars(host, |b| is_unreserved(b) || is_sub_delim(b)) {
            return Err(invalid());
        }
        a.host_type = if is_ipv4(host) {
            HostType::IPv4
        } else {
            HostType::Name
        };
        a.host = percent_decode(host)?;
        port = p;
    }
    if let Some(p) = port {
        if !p.bytes().all(|b| b.is_ascii_digit()) {
            return Err(invalid());
        }
        if !p.is_empty() {
            match p.parse::<u16>() {
                Ok(n) if n != 0 => a.port = Some(n),
                _ => return Err(bad_url(format!("port '{p}' is invalid"))),
            }
        }
    }
    Ok(a)
}

/// Parses a URL as Nix's `parseURL` does; `lenient` tolerates unescaped spaces
/// and quotes in the query and fragment.
pub(crate) fn parse_url(url: &str, lenient: bool) -> FResult<ParsedUrl> {
    let fixed = if lenient {
        lenient_fixup(url)
    } else {
        url.to_string()
    };
    let invalid = || bad_url(format!("'{url}' is not a valid URL: leftover input"));

    let (scheme, rest) = match scheme_len(&fixed) {
        Some(n) => (Some(&fixed[..n]), &fixed[n + 1..]),
        None => (None, fixed.as_str()),
    };
    let (rest, fragment) = match rest.split_once('#') {
        Some((r, f)) => (r, Some(f)),
        None => (rest, None),
    };
    let (hier, query) = match rest.split_once('?') {
        Some((h, q)) => (h, Some(q)),
        None => (rest, None),
    };
    let query_ok = |s: &str| valid_chars(s, |b| is_pchar(b) || b == b'/' || b == b'?');
    if fragment.is_some_and(|f| !query_ok(f)) || query.is_some_and(|q| !query_ok(q)) {
        return Err(invalid());
    }
    let (authority, path) = match hier.strip_prefix("//") {
        Some(h) => {
            let end = h.find('/').unwrap_or(h.len());
            (Some(&h[..end]), &h[end..])
        }
        None => (None, hier),
    };
    if !valid_chars(path, |b| is_pchar(b) || b == b'/') {
        return Err(invalid());
    }
    let Some(scheme) = scheme else {
        // A relative reference: its first segment must not look like a scheme.
        if authority.is_none() && path.split('/').next().is_some_and(|s| s.contains(':')) {
            return Err(invalid());
        }
        return Err(bad_url(format!("'{fixed}' doesn't have a scheme")));
    };
    let authority = match authority {
        Some(a) => Some(parse_authority(a, &invalid)?),
        None => None,
    };

    let transport_is_file = parse_url_scheme(scheme).1 == "file";
    if let Some(a) = &authority {
        if !a.host.is_empty() && transport_is_file {
            return Err(bad_url(format!(
                "file:// URL '{fixed}' has unexpected authority '{a}'"
            )));
        }
    }
    let path = if transport_is_file && path.is_empty() {
        "/"
    } else {
        path
    };
    let path = path
        .split('/')
        .map(percent_decode)
        .collect::<FResult<Vec<_>>>()?;
    let query = decode_query(query.unwrap_or(""), lenient)?;
    let fragment = percent_decode(fragment.unwrap_or(""))?;
    Ok(ParsedUrl {
        scheme: scheme.to_string(),
        authority,
        path,
        query,
        fragment,
    })
}

/// Joins URL path segments into a file system path, rejecting segments that
/// cannot be file names (Nix's `renderUrlPathEnsureLegal`).
pub(crate) fn render_url_path_ensure_legal(path: &[String]) -> FResult<String> {
    for comp in path {
        if comp.contains('/') {
            return Err(bad_url(format!(
                "URL path component '{comp}' contains '/', which is not allowed in file names"
            )));
        }
        if comp.contains('\0') {
            return Err(bad_url(format!(
                "URL path component '{}' contains NUL byte which is not allowed",
                comp.replace('\0', "␀")
            )));
        }
    }
    Ok(path.join("/"))
}

/// Normalises a Git URL (Nix's `fixGitURL`): `user@host:path` becomes an
/// `ssh://` URL, plain paths become `file:` URLs, and a `git+` prefix is dropped.
pub(crate) fn fix_git_url(url: &str) -> FResult<ParsedUrl> {
    let mut url = url.to_string();
    if !url.starts_with('/') {
        // `([^/]*)@(.*):(.*)`, matched against the whole string.
        // The user part is the longest slash-free prefix ending before an `@`
        // that still leaves a `:` after it; the host runs to the last `:`.
        let no_slash = url.find('/').unwrap_or(url.len());
        let at = url[..no_slash]
            .rmatch_indices('@')
            .map(|(i, _)| i)
            .find(|&i| url[i + 1..].contains(':'));
        if let Some(at) = at {
            let user = &url[..at];
            let after = &url[at + 1..];
            if let Some(colon) = after.rfind(':') {
                url = format!("ssh://{user}@{}/{}", &after[..colon], &after[colon + 1..]);
            }
        }
    }
    if !url.starts_with("file:") && !url.starts_with("git+file:") && !url.contains("://") {
        let path: Vec<String> = url.split('/').map(str::to_string).collect();
        if path.first().is_some_and(|p| p.contains(':')) {
            return Err(bad_url(format!(
                "SCP-like URL '{url}' is not supported; use SSH URL syntax instead (ssh://...)"
            )));
        }
        return Ok(ParsedUrl {
            scheme: "file".into(),
            authority: url.starts_with('/').then(Authority::default),
            path,
            ..Default::default()
        });
    }
    let mut parsed = parse_url(&url, false)?;
    let (app, transport) = parse_url_scheme(&parsed.scheme);
    if app == Some("git") {
        parsed.scheme = transport.to_string();
    }
    Ok(parsed)
}
