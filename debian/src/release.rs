//! A suite's `InRelease` / `Release` file: what the archive says about the
//! suite and the checksums of its index files.
//!
//! ```text
//! -----BEGIN PGP SIGNED MESSAGE-----
//! Hash: SHA256
//!
//! Suite: unstable
//! Codename: sid
//! Date: Fri, 30 Oct 2026 08:08:01 UTC
//! Valid-Until: Fri, 06 Nov 2026 08:08:01 UTC
//! Architectures: all amd64 arm64
//! Components: main contrib non-free-firmware non-free
//! SHA256:
//!  28476c95…caacf1b 10824484 main/binary-amd64/Packages.xz
//! -----BEGIN PGP SIGNATURE-----
//! …
//! -----END PGP SIGNATURE-----
//! ```
//!
//! `InRelease` is `Release` in an OpenPGP clearsigned envelope. Its
//! signature is verified by `signature` (gpgv) before anything here reads
//! the text: [`split_clearsigned`] first checks the envelope as apt does
//! (exactly one signed block, only `Hash:` armour headers, dash-escaping,
//! nothing but blank lines before or after it, so unsigned text appended
//! to a signed file is refused rather than read), and
//! [`Release::parse_text`] then parses the text gpgv verified. The lenient
//! [`strip_clearsign`] (and [`Release::parse`], which uses it) serve only
//! `--allow-unsigned`, where nothing is verified.
//!
//! Owns: the envelope, the fields above, the `SHA256` list, dates
//! (RFC 2822, `UTC` accepted as apt does), the `Valid-Until` check and
//! reading apt's `Acquire::Check-Valid-Until` setting out of configuration
//! text. Must not: fetch anything, read files, verify signatures
//! (`signature`), or look at the clock (the caller passes the time).

use chrono::{DateTime, Utc};

/// One entry of the `SHA256` list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexFile {
    /// The path relative to the suite's directory (`main/binary-amd64/Packages.xz`).
    pub path: String,
    /// The size in bytes.
    pub size: u64,
    /// The SHA-256, lower-case hex.
    pub sha256: String,
}

/// A parsed `Release` file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Release {
    /// `Suite` (`unstable`).
    pub suite: Option<String>,
    /// `Codename` (`sid`).
    pub codename: Option<String>,
    /// `Date`, as written.
    pub date: String,
    /// `Date`, parsed.
    pub date_utc: DateTime<Utc>,
    /// `Valid-Until`, parsed, when present.
    pub valid_until: Option<DateTime<Utc>>,
    /// `Architectures`.
    pub architectures: Vec<String>,
    /// `Components`.
    pub components: Vec<String>,
    /// The `SHA256` list, in file order.
    pub sha256: Vec<IndexFile>,
}

/// A `Release` file that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ReleaseError(pub String);

fn fail(msg: impl Into<String>) -> ReleaseError {
    ReleaseError(msg.into())
}

/// The text of an `InRelease` file with the armour and signature removed
/// (dash-escaping undone); text without armour is returned as is (a plain
/// `Release`). Lenient and unverified: only for `--allow-unsigned`; verified
/// files go through [`split_clearsigned`] and gpgv.
pub fn strip_clearsign(text: &str) -> Result<String, ReleaseError> {
    let mut lines = text.lines();
    let first = loop {
        match lines.next() {
            Some(l) if l.trim().is_empty() => continue,
            Some(l) => break l,
            None => return Err(fail("the Release file is empty")),
        }
    };
    if first.trim_end() != "-----BEGIN PGP SIGNED MESSAGE-----" {
        return Ok(text.to_string());
    }
    // Armour headers (`Hash: SHA256`) up to the first blank line.
    for l in lines.by_ref() {
        if l.trim().is_empty() {
            break;
        }
    }
    let mut out = String::with_capacity(text.len());
    for l in lines {
        if l.trim_end() == "-----BEGIN PGP SIGNATURE-----" {
            return Ok(out);
        }
        out.push_str(l.strip_prefix("- ").unwrap_or(l));
        out.push('\n');
    }
    Err(fail(
        "InRelease: the signed message has no '-----BEGIN PGP SIGNATURE-----' line",
    ))
}

/// The signed text of a clearsigned file, checked as apt checks it before
/// verifying: blank lines, then `-----BEGIN PGP SIGNED MESSAGE-----`, armour
/// headers that are all `Hash: …` up to a blank line, the dash-escaped text
/// (a line starting with `-` must be `- …`), one or more signature blocks
/// `-----BEGIN PGP SIGNATURE-----` … `-----END PGP SIGNATURE-----`, then only
/// blank lines. `file` names the file in errors. Text that is not
/// clearsigned at all is [`ClearsignError::NotSigned`]; any other defect
/// (unsigned lines before or after the block, a second message) is
/// [`ClearsignError::Malformed`].
pub fn split_clearsigned(text: &str, file: &str) -> Result<String, ClearsignError> {
    #[derive(PartialEq)]
    enum State {
        Before,
        Headers,
        Body,
        Signature,
        After,
    }
    let bad = |n: usize, why: String| ClearsignError::Malformed(format!("{file}, line {n}: {why}"));
    let mut state = State::Before;
    let mut body = String::with_capacity(text.len());
    for (i, raw) in text.split('\n').enumerate() {
        let n = i + 1;
        let line = raw.trim_end();
        match state {
            State::Before => {
                if line == "-----BEGIN PGP SIGNED MESSAGE-----" {
                    state = State::Headers;
                } else if !line.is_empty() {
                    if !text.contains("-----BEGIN PGP SIGNED MESSAGE-----") {
                        return Err(ClearsignError::NotSigned(format!(
                            "{file} is not signed (no '-----BEGIN PGP SIGNED MESSAGE-----')"
                        )));
                    }
                    return Err(bad(
                        n,
                        format!("unsigned text before the signed message: '{}'", clip(line)),
                    ));
                }
            }
            State::Headers => {
                if line.is_empty() {
                    state = State::Body;
                } else if !line.starts_with("Hash: ") {
                    return Err(bad(
                        n,
                        format!(
                            "unexpected armour header '{}' (only 'Hash:' is allowed)",
                            clip(line)
                        ),
                    ));
                }
            }
            State::Body => {
                if line == "-----BEGIN PGP SIGNATURE-----" {
                    state = State::Signature;
                } else if let Some(rest) = raw.strip_prefix("- ") {
                    body.push_str(rest.strip_suffix('\r').unwrap_or(rest));
                    body.push('\n');
                } else if line.starts_with('-') {
                    return Err(bad(
                        n,
                        format!("unexpected line starting with a dash: '{}'", clip(line)),
                    ));
                } else {
                    body.push_str(raw.strip_suffix('\r').unwrap_or(raw));
                    body.push('\n');
                }
            }
            State::Signature => {
                if line == "-----END PGP SIGNATURE-----" {
                    state = State::After;
                } else if line.starts_with("-----") {
                    return Err(bad(
                        n,
                        format!("unexpected line in the signature block: '{}'", clip(line)),
                    ));
                }
            }
            State::After => {
                if line == "-----BEGIN PGP SIGNATURE-----" {
                    // A further signature of the same text.
                    state = State::Signature;
                } else if !line.is_empty() {
                    return Err(bad(
                        n,
                        format!("unsigned text after the signature: '{}' (the signature covers only the text before it)", clip(line)),
                    ));
                }
            }
        }
    }
    match state {
        State::After => Ok(body),
        State::Before => Err(ClearsignError::NotSigned(format!("{file} is empty"))),
        State::Headers | State::Body => Err(ClearsignError::NotSigned(format!(
            "{file} has a signed message but no '-----BEGIN PGP SIGNATURE-----'"
        ))),
        State::Signature => Err(ClearsignError::Malformed(format!(
            "{file}: the signature block has no '-----END PGP SIGNATURE-----' line"
        ))),
    }
}

/// Why a file is not a well-formed clearsigned message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClearsignError {
    /// It has no signature at all (a plain text, an error page).
    #[error("{0}")]
    NotSigned(String),
    /// It is signed but has unsigned text around the signed block, or is
    /// otherwise not one clearsigned message.
    #[error("{0}")]
    Malformed(String),
}

/// At most 60 characters of `line`, for messages.
fn clip(line: &str) -> String {
    match line.char_indices().nth(60) {
        Some((i, _)) => format!("{}…", &line[..i]),
        None => line.to_string(),
    }
}

/// Parses a Debian archive date: `Fri, 30 Oct 2026 08:08:01 UTC` (RFC 2822;
/// apt writes `UTC`, which RFC 2822 parsers reject, so it is read as
/// `+0000`).
pub fn parse_date(text: &str) -> Result<DateTime<Utc>, ReleaseError> {
    let t = text.trim();
    let normal = match t.strip_suffix("UTC") {
        Some(head) => format!("{head}+0000"),
        None => t.to_string(),
    };
    DateTime::parse_from_rfc2822(&normal)
        .map(|d| d.with_timezone(&Utc))
        .map_err(|e| fail(format!("bad date '{t}': {e}")))
}

/// The time `secs` seconds after the Unix epoch (the caller reads the clock).
pub fn from_unix(secs: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(secs, 0).unwrap_or_default()
}

/// Formats a date as the archive writes it.
pub fn format_date(d: &DateTime<Utc>) -> String {
    d.format("%a, %d %b %Y %H:%M:%S UTC").to_string()
}

impl Release {
    /// Parses the text of a `Release` file, or of an `InRelease` file whose
    /// armour is stripped first by [`strip_clearsign`], without verifying
    /// the signature (`--allow-unsigned`). `Date` is required; the `SHA256`
    /// list must be well formed.
    pub fn parse(text: &str) -> Result<Release, ReleaseError> {
        Release::parse_text(&strip_clearsign(text)?)
    }

    /// Parses the text of a `Release` file as it is: the verified text of
    /// an `InRelease` (gpgv's output) or a `Release` checked against
    /// `Release.gpg`. No armour is looked for.
    pub fn parse_text(body: &str) -> Result<Release, ReleaseError> {
        // The first paragraph only: a Release file has one.
        let para = deb822_fast::borrowed::iter_paragraphs_borrowed(body)
            .next()
            .ok_or_else(|| fail("the Release file has no fields"))?
            .map_err(|e| fail(format!("the Release file does not parse: {e}")))?;
        let single = |name: &str| {
            para.get(name)
                .map(|lines| lines.iter().map(|l| l.trim()).collect::<Vec<_>>().join(" "))
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
        };
        let words = |name: &str| {
            single(name)
                .map(|s| s.split_whitespace().map(str::to_string).collect())
                .unwrap_or_default()
        };
        let date = single("Date").ok_or_else(|| fail("the Release file has no 'Date' field"))?;
        let date_utc = parse_date(&date)?;
        let valid_until = single("Valid-Until").map(|v| parse_date(&v)).transpose()?;
        let mut sha256 = Vec::new();
        for line in para.get("SHA256").unwrap_or(&[]) {
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            let parts: Vec<&str> = line.split_whitespace().collect();
            let [hash, size, path] = parts[..] else {
                return Err(fail(format!(
                    "bad SHA256 line '{line}' (expected 'HASH SIZE PATH')"
                )));
            };
            if hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(fail(format!("bad SHA-256 '{hash}' for '{path}'")));
            }
            let size = size
                .parse()
                .map_err(|_| fail(format!("bad size '{size}' for '{path}'")))?;
            sha256.push(IndexFile {
                path: path.to_string(),
                size,
                sha256: hash.to_ascii_lowercase(),
            });
        }
        Ok(Release {
            suite: single("Suite"),
            codename: single("Codename"),
            date,
            date_utc,
            valid_until,
            architectures: words("Architectures"),
            components: words("Components"),
            sha256,
        })
    }

    /// The `SHA256` entry of `path` (relative to the suite directory).
    pub fn file(&self, path: &str) -> Option<&IndexFile> {
        self.sha256.iter().find(|f| f.path == path)
    }

    /// Checks `Valid-Until` against `now`. A Release without `Valid-Until`
    /// never expires. An expired one is an error unless `allow_expired`, in
    /// which case `Ok(Some(since))` tells the caller to warn.
    pub fn check_valid(
        &self,
        now: DateTime<Utc>,
        allow_expired: bool,
    ) -> Result<Option<DateTime<Utc>>, ReleaseError> {
        match self.valid_until {
            Some(until) if until < now => {
                if allow_expired {
                    Ok(Some(until))
                } else {
                    Err(fail(format!(
                        "the Release file of suite '{}' expired on {} (Valid-Until; dated {}): the mirror serves an old snapshot. \
                         Pass --allow-expired to use it anyway (apt: Acquire::Check-Valid-Until \"false\")",
                        self.codename.as_deref().or(self.suite.as_deref()).unwrap_or("?"),
                        format_date(&until),
                        self.date
                    )))
                }
            }
            _ => Ok(None),
        }
    }
}

/// Whether apt configuration text turns the `Valid-Until` check off:
/// `Acquire::Check-Valid-Until "false";` (also `false`/`no`/`0`, with or
/// without quotes, in any case), the last setting winning. `//` and `#`
/// comments are skipped. The nested-block form `Acquire { … }` is not
/// understood (a simple search, as documented).
pub fn apt_disables_valid_until(config_text: &str) -> Option<bool> {
    let mut found = None;
    for raw in config_text.lines() {
        let line = raw.trim();
        if line.starts_with("//") || line.starts_with('#') {
            continue;
        }
        for stmt in line.split(';') {
            let stmt = stmt.trim();
            let Some((key, value)) = stmt.split_once(char::is_whitespace) else {
                continue;
            };
            if !key.eq_ignore_ascii_case("Acquire::Check-Valid-Until") {
                continue;
            }
            let value = value.trim().trim_matches('"').to_ascii_lowercase();
            match value.as_str() {
                "false" | "no" | "0" | "off" => found = Some(true),
                "true" | "yes" | "1" | "on" => found = Some(false),
                _ => {}
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    const SIGNED: &str = "-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA256\n\n\
Origin: Debian\nSuite: unstable\nCodename: sid\nDate: Fri, 30 Oct 2026 08:08:01 UTC\n\
Valid-Until: Fri, 06 Nov 2026 08:08:01 UTC\nArchitectures: all amd64\nComponents: main contrib\n\
MD5Sum:\n d70654e4ff73403c5076a564041f1484 10824484 main/binary-amd64/Packages.xz\n\
SHA256:\n 28476c952cd0732e0ba28e3c14fbb9a8beb412eb2b3cb96bf9d067d54caacf1b 10824484 main/binary-amd64/Packages.xz\n db5df6f8c6ff9c8e2e90907c9c7bd55512715433e978d3b94600842e74c3d31b 64988655 main/binary-amd64/Packages\n\
-----BEGIN PGP SIGNATURE-----\n\nabc\n-----END PGP SIGNATURE-----\n";

    #[test]
    fn parses_an_inrelease() {
        let r = Release::parse(SIGNED).unwrap();
        assert_eq!(r.suite.as_deref(), Some("unstable"));
        assert_eq!(r.codename.as_deref(), Some("sid"));
        assert_eq!(r.date, "Fri, 30 Oct 2026 08:08:01 UTC");
        assert_eq!(format_date(&r.date_utc), r.date);
        assert_eq!(r.architectures, ["all", "amd64"]);
        assert_eq!(r.components, ["main", "contrib"]);
        assert_eq!(r.sha256.len(), 2);
        let f = r.file("main/binary-amd64/Packages.xz").unwrap();
        assert_eq!(f.size, 10824484);
        assert!(f.sha256.starts_with("28476c95"));
    }

    #[test]
    fn expiry() {
        let r = Release::parse(SIGNED).unwrap();
        let before = parse_date("Sat, 31 Oct 2026 00:00:00 UTC").unwrap();
        let after = parse_date("Tue, 01 Dec 2026 00:00:00 +0000").unwrap();
        assert_eq!(r.check_valid(before, false).unwrap(), None);
        let e = r.check_valid(after, false).unwrap_err().0;
        assert!(
            e.contains("expired on Fri, 06 Nov 2026 08:08:01 UTC"),
            "{e}"
        );
        assert!(e.contains("--allow-expired"), "{e}");
        assert_eq!(r.check_valid(after, true).unwrap(), r.valid_until);
    }

    #[test]
    fn plain_release_and_errors() {
        let plain = "Suite: x\nDate: Mon, 01 Jan 2024 00:00:00 UTC\n";
        assert_eq!(Release::parse(plain).unwrap().suite.as_deref(), Some("x"));
        assert!(Release::parse("Suite: x\n")
            .unwrap_err()
            .0
            .contains("'Date'"));
        let bad = "Date: Mon, 01 Jan 2024 00:00:00 UTC\nSHA256:\n abc 1 x\n";
        assert!(Release::parse(bad).unwrap_err().0.contains("bad SHA-256"));
        let unsigned = "-----BEGIN PGP SIGNED MESSAGE-----\n\nDate: x\n";
        assert!(Release::parse(unsigned).is_err());
    }

    #[test]
    fn dash_escaping() {
        let t = "-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA256\n\n- -dash\nok\n-----BEGIN PGP SIGNATURE-----\n";
        assert_eq!(strip_clearsign(t).unwrap(), "-dash\nok\n");
    }

    #[test]
    fn strict_envelope() {
        let f = "dists/sid/InRelease";
        let body = "Date: x\n- -dash\n";
        let signed = format!(
            "-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA256\n\n{body}-----BEGIN PGP SIGNATURE-----\n\nabc\n-----END PGP SIGNATURE-----\n"
        );
        assert_eq!(split_clearsigned(&signed, f).unwrap(), "Date: x\n-dash\n");
        assert_eq!(
            split_clearsigned(&format!("\n{signed}\n\n"), f).unwrap(),
            "Date: x\n-dash\n"
        );
        // Two signatures of the same text.
        let two = signed.replace(
            "-----END PGP SIGNATURE-----\n",
            "-----END PGP SIGNATURE-----\n-----BEGIN PGP SIGNATURE-----\n\ndef\n-----END PGP SIGNATURE-----\n",
        );
        assert!(split_clearsigned(&two, f).is_ok());
        let after = format!("{signed}SHA256:\n 00 1 main/binary-amd64/Packages.xz\n");
        let e = split_clearsigned(&after, f).unwrap_err();
        assert!(matches!(e, ClearsignError::Malformed(_)));
        assert!(
            e.to_string().contains(
                "dists/sid/InRelease, line 10: unsigned text after the signature: 'SHA256:'"
            ),
            "{e}"
        );
        let before = format!("Date: y\n{signed}");
        assert!(split_clearsigned(&before, f)
            .unwrap_err()
            .to_string()
            .contains("unsigned text before the signed message"));
        let second = format!("{signed}{signed}");
        assert!(split_clearsigned(&second, f)
            .unwrap_err()
            .to_string()
            .contains("unsigned text after the signature: '-----BEGIN PGP SIGNED MESSAGE-----'"));
        let header = signed.replace("Hash: SHA256", "Charset: x");
        assert!(split_clearsigned(&header, f)
            .unwrap_err()
            .to_string()
            .contains("unexpected armour header"));
        let dash = signed.replace("- -dash", "-dash");
        assert!(split_clearsigned(&dash, f)
            .unwrap_err()
            .to_string()
            .contains("starting with a dash"));
        assert!(matches!(
            split_clearsigned("Date: x\n", f),
            Err(ClearsignError::NotSigned(_))
        ));
        assert!(matches!(
            split_clearsigned("-----BEGIN PGP SIGNED MESSAGE-----\n\nDate: x\n", f),
            Err(ClearsignError::NotSigned(_))
        ));
        let open = signed.replace("-----END PGP SIGNATURE-----\n", "");
        assert!(matches!(
            split_clearsigned(&open, f),
            Err(ClearsignError::Malformed(_))
        ));
    }

    #[test]
    fn apt_setting() {
        assert_eq!(
            apt_disables_valid_until("Acquire::Check-Valid-Until \"false\";\n"),
            Some(true)
        );
        assert_eq!(
            apt_disables_valid_until("// Acquire::Check-Valid-Until \"false\";\n"),
            None
        );
        assert_eq!(
            apt_disables_valid_until(
                "Acquire::Check-Valid-Until false;\nAcquire::Check-Valid-Until \"true\";"
            ),
            Some(false)
        );
        assert_eq!(apt_disables_valid_until("APT::Get::Foo \"1\";"), None);
    }
}
