//! apt's sources and keyrings as the signature check needs them: one-line
//! `sources.list` entries and deb822 `.sources` paragraphs (their URIs and
//! `Signed-By`), matching a mirror's URI to them, and which files of
//! `etc/apt/trusted.gpg.d` apt reads.
//!
//! Must not: read any file (the binary reads apt's files and passes their text),
//! or decide whether a signature is good (`super`).

use std::path::Path;

/// One `deb` entry of apt's sources (`deb-src` entries are skipped).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AptSource {
    /// The archive URIs (`http://deb.debian.org/debian`).
    pub uris: Vec<String>,
    /// `Signed-By` / `[signed-by=…]`, as written (deb822 continuation lines
    /// joined with `\n`).
    pub signed_by: Option<String>,
}

/// What a `Signed-By` value names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SignedBy {
    /// A keyring file (an absolute path).
    File(String),
    /// A key fingerprint (upper-case; `!` kept).
    Fingerprint(String),
    /// An ASCII-armoured key block written in the sources file itself.
    Inline(String),
}

/// Splits a `Signed-By` value: an inline `-----BEGIN PGP PUBLIC KEY
/// BLOCK-----` (deb822 lines, ` .` for a blank line), else comma- or
/// space-separated items, absolute paths being files and anything else
/// fingerprints (as apt reads it).
pub fn parse_signed_by(value: &str) -> Vec<SignedBy> {
    if value.contains("-----BEGIN PGP PUBLIC KEY BLOCK-----") {
        let block: Vec<&str> = value
            .lines()
            .map(|l| {
                let l = l.trim();
                if l == "." {
                    ""
                } else {
                    l
                }
            })
            .collect();
        return vec![SignedBy::Inline(block.join("\n") + "\n")];
    }
    value
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|s| !s.is_empty())
        .map(|s| {
            if s.starts_with('/') {
                SignedBy::File(s.to_string())
            } else {
                SignedBy::Fingerprint(s.to_ascii_uppercase())
            }
        })
        .collect()
}

/// The `deb` entries of one-line `sources.list` text:
/// `deb [opt=val …] URI SUITE [COMPONENT…]`.
pub fn one_line_sources(text: &str) -> Vec<AptSource> {
    let mut out = Vec::new();
    for raw in text.lines() {
        let line = raw.split('#').next().unwrap_or("").trim();
        let Some(rest) = line.strip_prefix("deb") else {
            continue;
        };
        if !rest.starts_with(char::is_whitespace) {
            continue; // deb-src
        }
        let mut rest = rest.trim_start();
        let mut signed_by = None;
        if let Some(opts) = rest.strip_prefix('[') {
            let Some((opts, after)) = opts.split_once(']') else {
                continue;
            };
            for opt in opts.split_whitespace() {
                if let Some((k, v)) = opt.split_once('=') {
                    if k.eq_ignore_ascii_case("signed-by") {
                        signed_by = Some(v.to_string());
                    }
                }
            }
            rest = after.trim_start();
        }
        if let Some(uri) = rest.split_whitespace().next() {
            out.push(AptSource {
                uris: vec![uri.to_string()],
                signed_by,
            });
        }
    }
    out
}

/// The `deb` entries of deb822 `.sources` text (paragraphs with `Types`,
/// `URIs`, `Signed-By`; `Enabled: no` skipped; `#` comment lines ignored).
pub fn deb822_sources(text: &str) -> Vec<AptSource> {
    let mut out = Vec::new();
    let mut fields: Vec<(String, String)> = Vec::new();
    let mut flush = |fields: &mut Vec<(String, String)>| {
        let get = |name: &str| {
            fields
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.trim().to_string())
        };
        let is_deb = get("Types")
            .map(|t| t.split_whitespace().any(|x| x == "deb"))
            .unwrap_or(false);
        let enabled = get("Enabled")
            .map(|v| !matches!(v.to_ascii_lowercase().as_str(), "no" | "false" | "0"))
            .unwrap_or(true);
        if is_deb && enabled {
            let uris: Vec<String> = get("URIs")
                .unwrap_or_default()
                .split_whitespace()
                .map(str::to_string)
                .collect();
            if !uris.is_empty() {
                out.push(AptSource {
                    uris,
                    signed_by: get("Signed-By").filter(|s| !s.is_empty()),
                });
            }
        }
        fields.clear();
    };
    for line in text.lines() {
        if line.starts_with('#') {
            continue;
        }
        if line.trim().is_empty() {
            flush(&mut fields);
            continue;
        }
        if line.starts_with(char::is_whitespace) {
            if let Some((_, v)) = fields.last_mut() {
                v.push('\n');
                v.push_str(line);
            }
            continue;
        }
        if let Some((k, v)) = line.split_once(':') {
            fields.push((k.trim().to_string(), v.trim().to_string()));
        }
    }
    flush(&mut fields);
    out
}

/// Whether two archive base URLs are the same (a trailing `/` aside, the
/// scheme and host in any case).
pub fn same_uri(a: &str, b: &str) -> bool {
    fn norm(u: &str) -> String {
        let u = u.trim().trim_end_matches('/');
        match u.split_once("://") {
            Some((scheme, rest)) => {
                let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
                format!(
                    "{}://{}/{}",
                    scheme.to_ascii_lowercase(),
                    host.to_ascii_lowercase(),
                    path
                )
            }
            None => u.to_string(),
        }
    }
    norm(a) == norm(b)
}

/// The entries among `sources` whose URIs include `base`.
pub fn sources_for<'a>(sources: &'a [AptSource], base: &str) -> Vec<&'a AptSource> {
    sources
        .iter()
        .filter(|s| s.uris.iter().any(|u| same_uri(u, base)))
        .collect()
}

/// Whether a file of `etc/apt/trusted.gpg.d` is a keyring apt reads
/// (`*.gpg`, binary, or `*.asc`, armoured). The default keyrings, in apt's
/// order, are [`super::DEFAULT_KEYRING`], `etc/apt/trusted.gpg`, then these in name
/// order; listing the directory is the caller's.
pub fn is_trusted_part(name: &Path) -> bool {
    matches!(
        name.extension().and_then(|e| e.to_str()),
        Some("gpg") | Some("asc")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apt_sources() {
        let deb822 = "\
Types: deb
# a comment
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://src.example/debian
Suites: x

Types: deb deb-src
URIs: http://inline.example/debian/
Suites: y
Enabled: yes
Signed-By:
 -----BEGIN PGP PUBLIC KEY BLOCK-----
 .
 mDMEZ
 -----END PGP PUBLIC KEY BLOCK-----

Types: deb
URIs: http://off.example/debian
Enabled: no
";
        let s = deb822_sources(deb822);
        assert_eq!(s.len(), 2);
        assert_eq!(
            s[0].signed_by.as_deref(),
            Some("/usr/share/keyrings/debian-archive-keyring.gpg")
        );
        let m = sources_for(&s, "http://inline.example/debian");
        assert_eq!(m.len(), 1);
        assert_eq!(
            parse_signed_by(m[0].signed_by.as_deref().unwrap()),
            vec![SignedBy::Inline(
                "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nmDMEZ\n-----END PGP PUBLIC KEY BLOCK-----\n"
                    .into()
            )]
        );
        assert!(sources_for(&s, "HTTP://DEB.debian.org/debian/").len() == 1);
        assert!(sources_for(&s, "http://deb.debian.org/debian-security").is_empty());

        let list = "deb [arch=amd64 signed-by=/k.gpg] http://a.example/debian sid main\n\
deb-src http://b.example/debian sid main\n# deb http://c.example/ x\ndeb http://d.example/debian sid main\n";
        let s = one_line_sources(list);
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].uris, ["http://a.example/debian"]);
        assert_eq!(s[0].signed_by.as_deref(), Some("/k.gpg"));
        assert_eq!(s[1].signed_by, None);

        assert_eq!(
            parse_signed_by("/a.gpg, 04b54c3cdca79751b16bc6b5225629df75b188bd!"),
            vec![
                SignedBy::File("/a.gpg".into()),
                SignedBy::Fingerprint("04B54C3CDCA79751B16BC6B5225629DF75B188BD!".into())
            ]
        );
    }
}
