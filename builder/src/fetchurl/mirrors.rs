//! The mirror table of `builtin:fetchurl`: `mirror://NAME/rest` URLs and where
//! the base URLs of each `NAME` come from.
//!
//! This module owns the table ([`Mirrors`]), its two sources (the machine's apt
//! sources, for the `debian` mirror, and `mirror.NAME = URL …` configuration
//! lines) and the expansion of `mirror://` URLs into candidate URLs.
//!
//! It must not touch the network or the store, and it must not carry the host
//! name of any real mirror: every base URL comes from the machine or from the
//! user's configuration.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use super::FetchError;

/// The mirror table: mirror name → base URLs, tried in order.
///
/// Built empty with [`Mirrors::new`], from the machine's apt sources with
/// [`Mirrors::from_apt`], and amended with [`Mirrors::parse_config`] or
/// [`Mirrors::set`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Mirrors {
    table: BTreeMap<String, Vec<String>>,
}

impl Mirrors {
    /// An empty table: every `mirror://` URL is an error until one is added.
    pub fn new() -> Self {
        Self::default()
    }

    /// The table read from this machine's apt sources (root `/`); see
    /// [`Mirrors::from_apt_root`].
    pub fn from_apt() -> Self {
        Self::from_apt_root(Path::new("/"))
    }

    /// The table read from the apt sources under `root`
    /// (`etc/apt/sources.list`, then `etc/apt/sources.list.d/*.list` and
    /// `*.sources` in name order, as apt reads them).
    ///
    /// `debian` is set to the URIs of the `deb` entries (not `deb-src`) whose
    /// suites are not security suites, in file order and without duplicates;
    /// security archives are appended last, as a final fallback. Only `http`,
    /// `https` and `file` URIs are kept. Missing or unreadable files and
    /// malformed lines are skipped: this is best-effort discovery, and apt
    /// itself reports broken sources. No `debian` entry is made when nothing
    /// usable is found.
    pub fn from_apt_root(root: &Path) -> Self {
        let mut entries = Vec::new();
        let apt = root.join("etc/apt");
        if let Ok(text) = fs::read_to_string(apt.join("sources.list")) {
            entries.extend(parse_one_line_sources(&text));
        }
        if let Ok(dir) = fs::read_dir(apt.join("sources.list.d")) {
            let mut names: Vec<_> = dir
                .filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| p.is_file())
                .collect();
            names.sort();
            for path in names {
                let Some(ext) = path.extension().and_then(|e| e.to_str()) else {
                    continue;
                };
                let Ok(text) = fs::read_to_string(&path) else {
                    continue;
                };
                match ext {
                    "list" => entries.extend(parse_one_line_sources(&text)),
                    "sources" => entries.extend(parse_deb822_sources(&text)),
                    _ => {}
                }
            }
        }
        let mut mirrors = Mirrors::new();
        let uris = debian_uris(&entries);
        if !uris.is_empty() {
            mirrors.table.insert("debian".to_string(), uris);
        }
        mirrors
    }

    /// Applies configuration text: lines `mirror.NAME = URL [URL…]` add or
    /// replace the entry `NAME` (a later line wins over an earlier one). `#`
    /// starts a comment (at the start of a line or after white space); blank
    /// lines are ignored.
    ///
    /// The whole text is checked first: on any bad line nothing is changed and
    /// the error names the line number (from 1) and what is wrong.
    pub fn parse_config(&mut self, text: &str) -> Result<(), FetchError> {
        let mut updates = Vec::new();
        for (index, raw) in text.lines().enumerate() {
            let line = index + 1;
            let content = strip_comment(raw).trim();
            if content.is_empty() {
                continue;
            }
            let bad = |message: String| FetchError::MirrorConfig { line, message };
            let Some((key, value)) = content.split_once('=') else {
                return Err(bad(format!(
                    "expected 'mirror.NAME = URL [URL...]', found '{content}'"
                )));
            };
            let key = key.trim();
            let Some(name) = key.strip_prefix("mirror.") else {
                return Err(bad(format!(
                    "unknown setting '{key}' (only 'mirror.NAME = URL [URL...]' lines are allowed)"
                )));
            };
            if name.is_empty() {
                return Err(bad("missing mirror name after 'mirror.'".to_string()));
            }
            if let Some(c) = name
                .chars()
                .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
            {
                return Err(bad(format!(
                    "invalid character '{c}' in mirror name '{name}' (use letters, digits, '-', '_' and '.')"
                )));
            }
            let urls: Vec<String> = value.split_whitespace().map(str::to_string).collect();
            if urls.is_empty() {
                return Err(bad(format!("mirror '{name}' has no URL")));
            }
            for url in &urls {
                if let Err(why) = check_base_url(url) {
                    return Err(bad(format!("mirror '{name}': {why}")));
                }
            }
            updates.push((name.to_string(), urls));
        }
        for (name, urls) in updates {
            self.table.insert(name, urls);
        }
        Ok(())
    }

    /// Sets (or replaces) the base URLs of mirror `name`; an empty list removes it.
    pub fn set(&mut self, name: &str, urls: Vec<String>) {
        if urls.is_empty() {
            self.table.remove(name);
        } else {
            self.table.insert(name.to_string(), urls);
        }
    }

    /// The base URLs of mirror `name`, if it is known.
    pub fn get(&self, name: &str) -> Option<&[String]> {
        self.table.get(name).map(Vec::as_slice)
    }

    /// The known mirror names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.table.keys().map(String::as_str)
    }

    /// The candidate URLs for `url`: for `mirror://NAME/rest`, each base URL of
    /// `NAME` joined with `rest` (exactly one `/` between them); any other URL
    /// is returned as it is.
    ///
    /// Fails when `NAME` is unknown (the error lists the known names and says
    /// how to define one) or when the URL has no name or no path.
    pub fn expand(&self, url: &str) -> Result<Vec<String>, FetchError> {
        let Some(rest) = strip_prefix_ignore_case(url, "mirror://") else {
            return Ok(vec![url.to_string()]);
        };
        let (name, path) = rest.split_once('/').unwrap_or((rest, ""));
        if name.is_empty() {
            return Err(FetchError::BadMirrorUrl {
                url: url.to_string(),
                reason: "no mirror name after 'mirror://'".to_string(),
            });
        }
        let path = path.trim_start_matches('/');
        if path.is_empty() {
            return Err(FetchError::BadMirrorUrl {
                url: url.to_string(),
                reason: format!("no path after the mirror name '{name}'"),
            });
        }
        let Some(bases) = self.table.get(name) else {
            let known = if self.table.is_empty() {
                "no mirrors are configured".to_string()
            } else {
                format!(
                    "known mirrors: {}",
                    self.names().collect::<Vec<_>>().join(", ")
                )
            };
            return Err(FetchError::UnknownMirror {
                name: name.to_string(),
                url: url.to_string(),
                known,
            });
        };
        Ok(bases
            .iter()
            .map(|base| format!("{}/{}", base.trim_end_matches('/'), path))
            .collect())
    }
}

/// Checks that a mirror base URL has a supported scheme and a non-empty rest.
fn check_base_url(url: &str) -> Result<(), String> {
    for scheme in ["http://", "https://", "file://"] {
        if let Some(rest) = strip_prefix_ignore_case(url, scheme) {
            if rest.trim_matches('/').is_empty() && scheme != "file://" {
                return Err(format!("URL '{url}' has no host"));
            }
            return Ok(());
        }
    }
    Err(format!(
        "'{url}' is not an http://, https:// or file:// URL"
    ))
}

/// `s` without `prefix`, compared ASCII-case-insensitively (URL schemes).
pub(super) fn strip_prefix_ignore_case<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    if head.eq_ignore_ascii_case(prefix) {
        s.get(prefix.len()..)
    } else {
        None
    }
}

/// The line up to a `#` that starts it or follows white space.
pub fn strip_comment(line: &str) -> &str {
    let mut prev_space = true;
    for (i, c) in line.char_indices() {
        if c == '#' && prev_space {
            return &line[..i];
        }
        prev_space = c.is_whitespace();
    }
    line
}

/// One apt source: its type (`deb`, `deb-src`), URI and suites.
#[derive(Debug, Clone, PartialEq, Eq)]
struct AptSource {
    kind: String,
    uri: String,
    suites: Vec<String>,
}

/// Parses the one-line format: `deb [opt=val ...] URI SUITE [COMPONENT...]`.
fn parse_one_line_sources(text: &str) -> Vec<AptSource> {
    let mut out = Vec::new();
    for raw in text.lines() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let mut tokens = line.split_whitespace().peekable();
        let Some(kind) = tokens.next() else { continue };
        // Options: `[arch=amd64 signed-by=...]`, possibly glued to the type's
        // neighbour tokens as `[arch=amd64]`.
        if tokens.peek().is_some_and(|t| t.starts_with('[')) {
            let mut closed = false;
            for t in tokens.by_ref() {
                if t.ends_with(']') {
                    closed = true;
                    break;
                }
            }
            if !closed {
                continue;
            }
        }
        let Some(uri) = tokens.next() else { continue };
        let Some(suite) = tokens.next() else { continue };
        out.push(AptSource {
            kind: kind.to_string(),
            uri: uri.to_string(),
            suites: vec![suite.to_string()],
        });
    }
    out
}

/// Parses the deb822 format: stanzas of `Field: value` lines separated by
/// blank lines, continuation lines starting with white space. A stanza with
/// `Enabled: no` is skipped; each (type, URI) pair of a stanza is a source.
fn parse_deb822_sources(text: &str) -> Vec<AptSource> {
    let mut out = Vec::new();
    let mut stanza: Vec<(String, String)> = Vec::new();
    let mut flush = |stanza: &mut Vec<(String, String)>| {
        let field = |name: &str| {
            stanza
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.as_str())
        };
        let enabled = field("Enabled").is_none_or(|v| !v.trim().eq_ignore_ascii_case("no"));
        if enabled {
            let types: Vec<&str> = field("Types").unwrap_or("").split_whitespace().collect();
            let uris: Vec<&str> = field("URIs").unwrap_or("").split_whitespace().collect();
            let suites: Vec<String> = field("Suites")
                .unwrap_or("")
                .split_whitespace()
                .map(str::to_string)
                .collect();
            for kind in &types {
                for uri in &uris {
                    out.push(AptSource {
                        kind: kind.to_string(),
                        uri: uri.to_string(),
                        suites: suites.clone(),
                    });
                }
            }
        }
        stanza.clear();
    };
    for raw in text.lines() {
        if raw.starts_with('#') {
            continue;
        }
        if raw.trim().is_empty() {
            flush(&mut stanza);
            continue;
        }
        if raw.starts_with(' ') || raw.starts_with('\t') {
            if let Some((_, value)) = stanza.last_mut() {
                value.push('\n');
                value.push_str(raw.trim());
            }
            continue;
        }
        if let Some((key, value)) = raw.split_once(':') {
            stanza.push((key.trim().to_string(), value.trim().to_string()));
        }
    }
    flush(&mut stanza);
    out
}

/// Whether an apt suite is a security suite (`bookworm-security`, or the old
/// `stretch/updates` form).
fn is_security_suite(suite: &str) -> bool {
    suite.ends_with("-security") || suite.ends_with("/updates")
}

/// Normalises an apt URI into a URL we can fetch from, or `None` for schemes
/// we cannot use (`cdrom:`, `tor+http:`, `mirror+…`).
fn usable_uri(uri: &str) -> Option<String> {
    if strip_prefix_ignore_case(uri, "http://").is_some()
        || strip_prefix_ignore_case(uri, "https://").is_some()
    {
        return Some(uri.trim_end_matches('/').to_string());
    }
    if let Some(rest) = strip_prefix_ignore_case(uri, "file:") {
        // apt writes both `file:/srv/mirror` and `file:///srv/mirror`.
        let path = rest.trim_start_matches('/');
        return Some(format!("file:///{}", path.trim_end_matches('/')));
    }
    None
}

/// The `debian` mirror's base URLs from parsed sources: main archives in
/// order, then security-only archives; duplicates removed.
fn debian_uris(entries: &[AptSource]) -> Vec<String> {
    let mut main = Vec::new();
    let mut security = Vec::new();
    for e in entries.iter().filter(|e| e.kind == "deb") {
        let Some(uri) = usable_uri(&e.uri) else {
            continue;
        };
        let secure_only = !e.suites.is_empty() && e.suites.iter().all(|s| is_security_suite(s));
        if secure_only {
            security.push(uri);
        } else {
            main.push(uri);
        }
    }
    let mut out: Vec<String> = Vec::new();
    for uri in main.into_iter().chain(security) {
        if !out.contains(&uri) {
            out.push(uri);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_sources() {
        let text = "\
# comment line
deb http://deb.example.invalid/debian bookworm main contrib
deb-src http://src.example.invalid/debian bookworm main
deb [arch=amd64 signed-by=/usr/share/keyrings/k.gpg] http://opt.example.invalid/debian bookworm main
deb [trusted=yes] file:/srv/local-mirror ./
deb http://security.example.invalid/debian-security bookworm-security main
deb http://old-sec.example.invalid/debian-security stretch/updates main
deb cdrom:[Debian 12]/ bookworm main
deb http://deb.example.invalid/debian/ bookworm-updates main
broken-line
";
        let e = parse_one_line_sources(text);
        assert_eq!(e.len(), 8);
        assert_eq!(e[2].uri, "http://opt.example.invalid/debian");
        assert_eq!(e[3].uri, "file:/srv/local-mirror");
        assert_eq!(
            debian_uris(&e),
            vec![
                "http://deb.example.invalid/debian",
                "http://opt.example.invalid/debian",
                "file:///srv/local-mirror",
                "http://security.example.invalid/debian-security",
                "http://old-sec.example.invalid/debian-security",
            ]
        );
    }

    #[test]
    fn deb822_sources() {
        let text = "\
# leading comment
Types: deb deb-src
URIs: http://a.example.invalid/debian http://b.example.invalid/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: -----BEGIN PGP PUBLIC KEY BLOCK-----
 .
 xxxx
 -----END PGP PUBLIC KEY BLOCK-----

Types: deb
URIs: http://disabled.example.invalid/debian
Suites: bookworm
Enabled: no

types: deb
uris: https://security.example.invalid/debian-security
suites: bookworm-security
";
        let e = parse_deb822_sources(text);
        assert_eq!(e.len(), 5);
        assert!(e[0].suites.contains(&"bookworm-updates".to_string()));
        assert_eq!(
            debian_uris(&e),
            vec![
                "http://a.example.invalid/debian",
                "http://b.example.invalid/debian",
                "https://security.example.invalid/debian-security",
            ]
        );
    }

    #[test]
    fn from_apt_root_reads_all_files_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let apt = dir.path().join("etc/apt");
        fs::create_dir_all(apt.join("sources.list.d")).unwrap();
        fs::write(
            apt.join("sources.list"),
            "deb http://first.example.invalid/debian bookworm main\n",
        )
        .unwrap();
        fs::write(
            apt.join("sources.list.d/b.sources"),
            "Types: deb\nURIs: http://third.example.invalid/debian\nSuites: bookworm\n",
        )
        .unwrap();
        fs::write(
            apt.join("sources.list.d/a.list"),
            "deb http://second.example.invalid/debian bookworm main\n\
             deb http://first.example.invalid/debian/ bookworm-updates main\n",
        )
        .unwrap();
        fs::write(
            apt.join("sources.list.d/z.list.save"),
            "deb http://no.example.invalid/ x y\n",
        )
        .unwrap();
        let m = Mirrors::from_apt_root(dir.path());
        assert_eq!(
            m.get("debian").unwrap(),
            [
                "http://first.example.invalid/debian",
                "http://second.example.invalid/debian",
                "http://third.example.invalid/debian",
            ]
        );
        let empty = tempfile::tempdir().unwrap();
        assert_eq!(Mirrors::from_apt_root(empty.path()), Mirrors::new());
    }

    #[test]
    fn expand_joins_slashes() {
        let mut m = Mirrors::new();
        m.set(
            "debian",
            vec![
                "http://a.example.invalid/debian/".into(),
                "http://b.example.invalid/debian".into(),
            ],
        );
        let want = vec![
            "http://a.example.invalid/debian/pool/main/h/hello.tar.gz".to_string(),
            "http://b.example.invalid/debian/pool/main/h/hello.tar.gz".to_string(),
        ];
        assert_eq!(
            m.expand("mirror://debian/pool/main/h/hello.tar.gz")
                .unwrap(),
            want
        );
        assert_eq!(
            m.expand("mirror://debian//pool/main/h/hello.tar.gz")
                .unwrap(),
            want
        );
        assert_eq!(
            m.expand("https://x.example.invalid/a").unwrap(),
            vec!["https://x.example.invalid/a"]
        );
    }

    #[test]
    fn expand_errors() {
        let mut m = Mirrors::new();
        let err = m
            .expand("mirror://gnu/hello.tar.gz")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("'gnu'") && err.contains("no mirrors are configured"),
            "{err}"
        );
        assert!(err.contains("mirror.gnu = "), "{err}");
        m.set("debian", vec!["http://a.example.invalid/".into()]);
        m.set("pypi", vec!["http://p.example.invalid/".into()]);
        let err = m
            .expand("mirror://gnu/hello.tar.gz")
            .unwrap_err()
            .to_string();
        assert!(err.contains("known mirrors: debian, pypi"), "{err}");
        let err = m.expand("mirror://debian").unwrap_err().to_string();
        assert!(err.contains("no path"), "{err}");
        let err = m.expand("mirror://debian/").unwrap_err().to_string();
        assert!(err.contains("no path"), "{err}");
        let err = m.expand("mirror:///x").unwrap_err().to_string();
        assert!(err.contains("no mirror name"), "{err}");
    }

    #[test]
    fn config_overrides_and_adds() {
        let mut m = Mirrors::new();
        m.set("debian", vec!["http://apt.example.invalid/debian".into()]);
        m.parse_config(
            "# mirrors\n\n\
             mirror.debian = http://a.example.invalid/debian  https://b.example.invalid/debian # two\n\
             \tmirror.gnu=file:///srv/gnu\n",
        )
        .unwrap();
        assert_eq!(
            m.get("debian").unwrap(),
            [
                "http://a.example.invalid/debian",
                "https://b.example.invalid/debian"
            ]
        );
        assert_eq!(m.get("gnu").unwrap(), ["file:///srv/gnu"]);
        assert_eq!(m.names().collect::<Vec<_>>(), ["debian", "gnu"]);
    }

    #[test]
    fn config_errors_name_the_line() {
        let cases = [
            (
                "mirror.a = http://x.example.invalid\njunk\n",
                2,
                "expected 'mirror.NAME",
            ),
            (
                "\n\nproxy = http://x.example.invalid\n",
                3,
                "unknown setting 'proxy'",
            ),
            (
                "mirror. = http://x.example.invalid\n",
                1,
                "missing mirror name",
            ),
            (
                "mirror.a/b = http://x.example.invalid\n",
                1,
                "invalid character '/'",
            ),
            ("mirror.a =   # nothing\n", 1, "has no URL"),
            ("mirror.a = ftp://x.example.invalid\n", 1, "not an http://"),
            ("mirror.a = http://\n", 1, "has no host"),
        ];
        for (text, line, needle) in cases {
            let mut m = Mirrors::new();
            let err = m.parse_config(text).unwrap_err();
            match &err {
                FetchError::MirrorConfig { line: l, .. } => assert_eq!(*l, line, "{text:?}"),
                other => panic!("unexpected error {other:?}"),
            }
            let msg = err.to_string();
            assert!(msg.contains(needle), "{text:?}: {msg}");
            assert!(msg.contains(&format!("line {line}")), "{msg}");
            assert_eq!(m, Mirrors::new(), "nothing applied on error");
        }
    }
}
