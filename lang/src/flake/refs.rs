//! The flake reference grammar, and the primops `parseFlakeRef` and
//! `flakeRefToString` that expose it.
//!
//! Owns the flake reference grammar: flake ids (`nixpkgs/branch`), URLs
//! (`github:o/r`, `git+https://…`, `https://….tar.gz`, `path:…`) and absolute
//! paths, with the `dir` parameter split off, as Nix's `parseFlakeRef` and
//! `FlakeRef::to_string` do. The URL syntax lives in `refs/url.rs`, the
//! hashes in `refs/hash.rs`, the input schemes in `refs/scheme.rs`.
//! Nothing here fetches or resolves anything (no registry look-ups).

mod hash;
mod scheme;
mod url;

use self::scheme::{attrs_to_json, is_flake_id, matches_ref_regex, Input};
pub(crate) use self::scheme::{Attr, Attrs};
use self::url::{
    bad_url, decode_query, other, parse_url, percent_decode, FErr, FResult, ParsedUrl,
};
use crate::builtins::{mk_attrs, op, reject_context};
use crate::eval::{raise, ErrorExt, ErrorKind, EvalError, Evaluator, RResult};
use crate::value::{Args, PrimOp, Value};

pub(crate) static BUILTINS: &[PrimOp] = &[
    op("parseFlakeRef", 1, parse_flake_ref_op)
        .doc("flake-ref", "Parse a flake reference into its attributes."),
    op("flakeRefToString", 1, flake_ref_to_string_op).doc(
        "attrs",
        "Render flake reference attributes as a reference string.",
    ),
    op("getFlake", 1, get_flake_op).doc(
        "args",
        "Fetch a flake from a flake reference, and return its output attributes and some metadata.",
    ),
];

/// Fetch a flake from a flake reference, and return its output attributes and some metadata.
///
/// `builtins.getFlake REF` (a locked reference): the flake's value.
fn get_flake_op(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let s = ev.expect_string(&a[0]).frame(None, || {
        "while evaluating the argument passed to builtins.getFlake".into()
    })?;
    Ok(super::load::get_flake(ev, s.as_str())?)
}

/// A flake reference: an input and the subdirectory holding `flake.nix`.
struct FlakeRef {
    input: Input,
    subdir: String,
}

impl FlakeRef {
    /// The attributes `parseFlakeRef` returns.
    fn to_attrs(&self) -> Attrs {
        let mut attrs = self.input.attrs.clone();
        if !self.subdir.is_empty() {
            attrs.insert("dir".into(), Attr::Str(self.subdir.clone()));
        }
        attrs
    }

    fn from_attrs(attrs: &Attrs) -> FResult<FlakeRef> {
        let mut input_attrs = attrs.clone();
        input_attrs.remove("dir");
        let input = Input::from_attrs(input_attrs)?;
        let subdir = match attrs.get("dir") {
            None => String::new(),
            Some(Attr::Str(s)) => s.clone(),
            Some(_) => {
                return Err(other(format!(
                    "input attribute 'dir' is not a string {}",
                    attrs_to_json(attrs)
                )))
            }
        };
        Ok(FlakeRef { input, subdir })
    }

    fn to_url_string(&self) -> FResult<String> {
        let mut extra = url::Query::new();
        if !self.subdir.is_empty() {
            extra.insert("dir".into(), self.subdir.clone());
        }
        self.input.to_url_string(&extra)
    }
}

/// Splits `dir` and the fragment off a URL and makes the input (Nix's
/// `fromParsedURL`).
fn from_parsed_url(mut url: ParsedUrl, is_flake: bool) -> FResult<(FlakeRef, String)> {
    let subdir = url.query.remove("dir").unwrap_or_default();
    let fragment = std::mem::take(&mut url.fragment);
    let input = Input::from_url(&url, is_flake)?;
    Ok((FlakeRef { input, subdir }, fragment))
}

/// Whether `s` may be a fragment: `(pchar | [/? "^])*`, where Nix's pchar also
/// admits `"`.
fn is_fragment(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'%' {
            if b.get(i + 1).is_some_and(u8::is_ascii_hexdigit)
                && b.get(i + 2).is_some_and(u8::is_ascii_hexdigit)
            {
                i += 3;
                continue;
            }
            return false;
        }
        let ok = c.is_ascii_alphanumeric() || b"-._~!$&'\"()*+,;=:@/? ^".contains(&c);
        if !ok {
            return false;
        }
        i += 1;
    }
    true
}

/// A flake id with an optional ref and/or rev (`nixpkgs`, `nixpkgs/branch`,
/// `nixpkgs/branch/<rev>`), short for `flake:…`. `None` if `s` is not of that
/// form; an error if it is but names an invalid reference.
fn parse_flake_id_ref(s: &str, is_flake: bool) -> FResult<Option<(FlakeRef, String)>> {
    let (main, fragment) = match s.split_once('#') {
        Some((m, f)) => (m, Some(f)),
        None => (s, None),
    };
    let (id, r#ref) = match main.split_once('/') {
        Some((id, r)) => (id, Some(r)),
        None => (main, None),
    };
    if !is_flake_id(id)
        || r#ref.is_some_and(|r| !matches_ref_regex(r))
        || fragment.is_some_and(|f| !is_fragment(f))
    {
        return Ok(None);
    }
    let url = ParsedUrl {
        scheme: "flake".into(),
        path: main.split('/').map(str::to_string).collect(),
        ..Default::default()
    };
    let input = Input::from_url(&url, is_flake)?;
    let fragment = percent_decode(fragment.unwrap_or(""))?;
    Ok(Some((
        FlakeRef {
            input,
            subdir: String::new(),
        },
        fragment,
    )))
}

/// A URL flake reference; `None` if `s` is not a URL of a known shape.
fn parse_url_flake_ref(s: &str, is_flake: bool) -> FResult<Option<(FlakeRef, String)>> {
    match parse_url(s, true).and_then(|u| from_parsed_url(u, is_flake)) {
        Ok(r) => Ok(Some(r)),
        Err(FErr::BadUrl(_)) => Ok(None),
        Err(e) => Err(e),
    }
}

/// An absolute path with an optional query and fragment.
fn parse_path_flake_ref(s: &str, is_flake: bool) -> FResult<(FlakeRef, String)> {
    // `([^?#]*)(\?([^#]*))?(#(.*))?`, where `.` does not match line breaks.
    let end = s.find(['?', '#']).unwrap_or(s.len());
    let path = &s[..end];
    let rest = &s[end..];
    let (query, fragment) = match rest.strip_prefix('?') {
        Some(r) => match r.split_once('#') {
            Some((q, f)) => (q, f),
            None => (r, ""),
        },
        None => ("", rest.strip_prefix('#').unwrap_or("")),
    };
    if fragment.contains(['\n', '\r']) {
        return Err(other(format!("invalid flakeref '{s}'")));
    }
    let query = decode_query(query, true)?;
    let fragment = percent_decode(fragment)?;
    if !path.starts_with('/') {
        return Err(bad_url(format!(
            "flake reference '{s}' is not an absolute path"
        )));
    }
    from_parsed_url(
        ParsedUrl {
            scheme: "path".into(),
            authority: Some(url::Authority::default()),
            path: path.split('/').map(str::to_string).collect(),
            query,
            fragment,
        },
        is_flake,
    )
}

/// Nix's `parseFlakeRefWithFragment` without a base directory.
fn parse_with_fragment(s: &str) -> FResult<(FlakeRef, String)> {
    let is_flake = true;
    if let Some(r) = parse_flake_id_ref(s, is_flake)? {
        return Ok(r);
    }
    if let Some(r) = parse_url_flake_ref(s, is_flake)? {
        return Ok(r);
    }
    parse_path_flake_ref(s, is_flake)
}

/// Nix's `parseFlakeRef`: a fragment is an error.
fn parse(s: &str) -> FResult<FlakeRef> {
    let (flake_ref, fragment) = parse_with_fragment(s)?;
    if !fragment.is_empty() {
        return Err(other(format!(
            "unexpected fragment '{fragment}' in flake reference '{s}'"
        )));
    }
    Ok(flake_ref)
}

/// A flake reference string as input attributes (Nix's form: `type`, `path`,
/// `url`, `owner`, …), the `dir` parameter and the fragment (`#…`, decoded).
/// Relative paths are not accepted here; [`super::source`] resolves them first.
pub(crate) fn parse_ref(s: &str) -> Result<(Attrs, String, String), String> {
    let (r, fragment) = parse_with_fragment(s).map_err(|e| e.message().to_string())?;
    Ok((r.input.attrs, r.subdir, fragment))
}

fn to_eval_error(e: FErr) -> Box<EvalError> {
    EvalError::new(ErrorKind::Eval, e.message())
}

/// Parse a flake reference into its attributes.
fn parse_flake_ref_op(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let s = ev.expect_string(&a[0]).frame(None, || {
        "while evaluating the argument passed to builtins.parseFlakeRef".into()
    })?;
    reject_context(&s)?;
    let flake_ref = parse(s.as_str()).map_err(to_eval_error)?;
    let attrs = flake_ref.to_attrs();
    Ok(mk_attrs(
        attrs
            .iter()
            .map(|(k, v)| {
                let v = match v {
                    Attr::Str(s) => Value::str(s.clone()),
                    // Nix stores these as unsigned and converts like C++ does.
                    Attr::Int(n) => Value::Int(*n as i64),
                    Attr::Bool(b) => Value::bool(*b),
                };
                (k.as_str(), v)
            })
            .collect(),
    ))
}

/// Nix's `showType` for the values a flake reference may not contain.
fn show_type(v: &Value) -> &'static str {
    match v {
        Value::PrimOp(p) if p.args.is_empty() => "a built-in function",
        Value::PrimOp(_) => "a partially applied built-in function",
        other => other.type_().described(),
    }
}

/// Render flake reference attributes as a reference string.
fn flake_ref_to_string_op(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let set = ev.expect_attrs(&a[0]).frame(None, || {
        "while evaluating the argument passed to builtins.flakeRefToString".into()
    })?;
    let mut attrs = Attrs::new();
    for (name, v) in set.iter() {
        let v = ev.force(v)?;
        let attr = match &v {
            Value::Int(n) if *n < 0 => {
                return raise(EvalError::new(
                    ErrorKind::Eval,
                    format!("negative value given for flake ref attr {name}: {n}"),
                ))
            }
            Value::Int(n) => Attr::Int(*n as u64),
            Value::Bool(b) => Attr::Bool(b.get()),
            Value::String(s) => Attr::Str(s.as_str().to_string()),
            other => {
                return raise(EvalError::new(
                    ErrorKind::Eval,
                    format!(
                        "flake reference attribute sets may only contain integers, Booleans, \
                         and strings, but attribute '{name}' is {}",
                        show_type(other)
                    ),
                ))
            }
        };
        attrs.insert(name.to_string(), attr);
    }
    let s = FlakeRef::from_attrs(&attrs)
        .and_then(|f| f.to_url_string())
        .map_err(to_eval_error)?;
    Ok(Value::str(s))
}

#[cfg(test)]
mod tests {
    use crate::eval::test_eval;
    use crate::eval::testing::ok;

    /// The message of the error `e` evaluates to (the `error:` line).
    fn err(e: &str) -> String {
        match test_eval(e) {
            Ok(s) => panic!("{e}: expected an error, got {s}"),
            Err(err) => {
                let line = err
                    .lines()
                    .find_map(|l| l.strip_prefix("error: "))
                    .unwrap_or(&err);
                line.to_string()
            }
        }
    }

    fn parse(s: &str) -> String {
        ok(&format!("builtins.parseFlakeRef \"{s}\""))
    }

    fn parse_err(s: &str) -> String {
        err(&format!("builtins.parseFlakeRef \"{s}\""))
    }

    fn to_string(attrs: &str) -> String {
        ok(&format!("builtins.flakeRefToString {attrs}"))
    }

    fn to_string_err(attrs: &str) -> String {
        err(&format!("builtins.flakeRefToString {attrs}"))
    }

    const REV: &str = "2aae6c35c94fcfb415dbe95f408b9ce91ee846ed";

    #[test]
    fn parse_github() {
        assert_eq!(
            parse("github:NixOS/nixpkgs/23.05?dir=lib"),
            r#"{ dir = "lib"; owner = "NixOS"; ref = "23.05"; repo = "nixpkgs"; type = "github"; }"#
        );
        assert_eq!(
            parse("github:NixOS/nixpkgs"),
            r#"{ owner = "NixOS"; repo = "nixpkgs"; type = "github"; }"#
        );
        assert_eq!(
            parse(&format!("github:NixOS/nixpkgs/{}", REV.to_uppercase())),
            format!(r#"{{ owner = "NixOS"; repo = "nixpkgs"; rev = "{REV}"; type = "github"; }}"#)
        );
        assert_eq!(
            parse("github:NixOS/nixpkgs/release/23.05"),
            r#"{ owner = "NixOS"; ref = "release/23.05"; repo = "nixpkgs"; type = "github"; }"#
        );
        assert_eq!(
            parse("github:foo/bar/branch%23"),
            r#"{ owner = "foo"; ref = "branch#"; repo = "bar"; type = "github"; }"#
        );
        assert_eq!(
            parse("github:foo/bar?ref=main&host=git.example.org&narHash=sha256-x"),
            r#"{ host = "git.example.org"; narHash = "sha256-x"; owner = "foo"; ref = "main"; repo = "bar"; type = "github"; }"#
        );
        assert_eq!(
            parse("github://////owner%42/////repo%41///branch%43////"),
            r#"{ owner = "ownerB"; ref = "branchC"; repo = "repoA"; type = "github"; }"#
        );
        assert_eq!(
            parse("gitlab:/owner%252Fsubgroup/////repo%41///branch%43////"),
            r#"{ owner = "owner%2Fsubgroup"; ref = "branchC"; repo = "repoA"; type = "gitlab"; }"#
        );
        assert_eq!(
            parse("sourcehut:~user/repo?host=git.example.org"),
            r#"{ host = "git.example.org"; owner = "~user"; repo = "repo"; type = "sourcehut"; }"#
        );
    }

    #[test]
    fn parse_indirect() {
        assert_eq!(
            parse("nixpkgs"),
            r#"{ id = "nixpkgs"; type = "indirect"; }"#
        );
        assert_eq!(
            parse("flake:nixpkgs/branch"),
            r#"{ id = "nixpkgs"; ref = "branch"; type = "indirect"; }"#
        );
        assert_eq!(
            parse("nixpkgs/branch////"),
            r#"{ id = "nixpkgs"; ref = "branch"; type = "indirect"; }"#
        );
        assert_eq!(
            parse(&format!("nixpkgs/branch///{REV}///")),
            format!(r#"{{ id = "nixpkgs"; ref = "branch"; rev = "{REV}"; type = "indirect"; }}"#)
        );
        assert_eq!(
            parse(&format!("nixpkgs/{REV}")),
            format!(r#"{{ id = "nixpkgs"; rev = "{REV}"; type = "indirect"; }}"#)
        );
        assert_eq!(
            parse("flake:/nixpkgs///branch////?dir=sub"),
            r#"{ dir = "sub"; id = "nixpkgs"; ref = "branch"; type = "indirect"; }"#
        );
    }

    #[test]
    fn parse_git_and_hg() {
        assert_eq!(
            parse("git+https://example.org/repo?ref=main&shallow=1&dir=sub&foo=bar"),
            r#"{ dir = "sub"; ref = "main"; shallow = true; type = "git"; url = "https://example.org/repo?foo=bar"; }"#
        );
        assert_eq!(
            parse("git://somewhere/repo?ref=branch"),
            r#"{ ref = "branch"; type = "git"; url = "git://somewhere/repo"; }"#
        );
        assert_eq!(
            parse("git+ssh://git@github.com/NixOS/nix.git?ref=refs/heads/master&submodules=0"),
            r#"{ ref = "refs/heads/master"; submodules = false; type = "git"; url = "ssh://git@github.com/NixOS/nix.git"; }"#
        );
        assert_eq!(
            parse(&format!("git+file:///home/me/src?rev={REV}")),
            format!(r#"{{ rev = "{REV}"; type = "git"; url = "file:///home/me/src"; }}"#)
        );
        assert_eq!(
            parse("hg+https://hg.example.org/repo?ref=default"),
            r#"{ ref = "default"; type = "hg"; url = "https://hg.example.org/repo"; }"#
        );
    }

    #[test]
    fn parse_path_and_tarball() {
        assert_eq!(
            parse("/foo/bar"),
            r#"{ path = "/foo/bar"; type = "path"; }"#
        );
        assert_eq!(
            parse(&format!("/foo/bar?revCount=123&rev={REV}")),
            format!(r#"{{ path = "/foo/bar"; rev = "{REV}"; revCount = 123; type = "path"; }}"#)
        );
        assert_eq!(
            parse("path:/foo/bar?lastModified=1700000000&dir=x"),
            r#"{ dir = "x"; lastModified = 1700000000; path = "/foo/bar"; type = "path"; }"#
        );
        assert_eq!(
            parse("/foo bar/baz?dir=bla space"),
            r#"{ dir = "bla space"; path = "/foo bar/baz"; type = "path"; }"#
        );
        assert_eq!(parse("path:./sub"), r#"{ path = "./sub"; type = "path"; }"#);
        assert_eq!(
            parse("https://example.com/foo.tar.gz?narHash=sha256-abc&x=1&revCount=5"),
            r#"{ narHash = "sha256-abc"; revCount = 5; type = "tarball"; url = "https://example.com/foo.tar.gz?x=1"; }"#
        );
        // A flake is a tree, so a plain URL is a tarball unless it says `file+`.
        assert_eq!(
            parse("http://localhost:8181/test/+3d"),
            r#"{ type = "tarball"; url = "http://localhost:8181/test/%2B3d"; }"#
        );
        assert_eq!(
            parse("file+https://example.com/foo.txt"),
            r#"{ type = "file"; url = "https://example.com/foo.txt"; }"#
        );
        assert_eq!(
            parse("tarball+file:///tmp/x"),
            r#"{ type = "tarball"; url = "file:///tmp/x"; }"#
        );
    }

    #[test]
    fn parse_errors() {
        assert_eq!(
            parse_err("nixpkgs#hello"),
            "unexpected fragment 'hello' in flake reference 'nixpkgs#hello'"
        );
        assert_eq!(
            parse_err("github:foo"),
            "flake reference 'github:foo' is not an absolute path"
        );
        assert_eq!(
            parse_err("./foo"),
            "flake reference './foo' is not an absolute path"
        );
        assert_eq!(parse_err("foo:bar"), "input 'foo:bar' is unsupported");
        assert_eq!(
            parse_err("file+git:///x"),
            "input 'file+git:///x' is unsupported; did you mean 'git+file' instead of 'file+git'?"
        );
        assert_eq!(
            parse_err("/foo/bar?xyzzy=123"),
            "path URL 'path:///foo/bar?xyzzy=123' has unsupported parameter 'xyzzy'"
        );
        assert_eq!(
            parse_err("/foo/bar?revCount=x"),
            "path URL 'path:///foo/bar?revCount=x' has invalid parameter 'revCount'"
        );
        assert_eq!(
            parse_err("path://host/foo"),
            "path URL 'path://host/foo' should not have an authority ('host')"
        );
        assert_eq!(
            parse_err("github:a/b?rev=xyz"),
            "hash 'xyz' has wrong length for hash algorithm 'sha1'"
        );
        assert_eq!(
            parse_err("nixpkgs/a/b"),
            "in flake URL 'flake:nixpkgs/a/b', 'b' is not a commit hash"
        );
        assert_eq!(parse_err(""), "flake reference '' is not an absolute path");
        assert_eq!(
            err("builtins.parseFlakeRef 1"),
            "expected a string but found an integer: 1"
        );
        // Malformed input never panics.
        for s in [
            "%",
            "a:%zz",
            "[",
            "git+https://[::1",
            "http://a:99999/",
            "/a?b=%",
            "::",
            "#",
            "?",
            "/\\u{0}",
        ] {
            let _ = test_eval(&format!("builtins.parseFlakeRef \"{s}\""));
        }
    }

    #[test]
    fn to_string_ok() {
        assert_eq!(
            to_string(
                r#"{ type = "github"; owner = "NixOS"; repo = "nixpkgs"; ref = "23.05"; dir = "lib"; }"#
            ),
            r#""github:NixOS/nixpkgs/23.05?dir=lib""#
        );
        assert_eq!(
            to_string(&format!(
                r#"{{ type = "github"; owner = "NixOS"; repo = "nixpkgs"; rev = "{}"; host = "example.org"; }}"#,
                REV.to_uppercase()
            )),
            format!(r#""github:NixOS/nixpkgs/{REV}?host=example.org""#)
        );
        assert_eq!(
            to_string(r#"{ type = "indirect"; id = "nixpkgs"; }"#),
            r#""flake:nixpkgs""#
        );
        assert_eq!(
            to_string(&format!(
                r#"{{ type = "indirect"; id = "nixpkgs"; ref = "b"; rev = "{REV}"; }}"#
            )),
            format!(r#""flake:nixpkgs/b/{REV}""#)
        );
        assert_eq!(
            to_string(
                r#"{ type = "git"; url = "https://example.org/repo"; ref = "main"; shallow = true; submodules = false; }"#
            ),
            r#""git+https://example.org/repo?ref=main&shallow=1""#
        );
        assert_eq!(
            to_string(r#"{ type = "git"; url = "git@github.com:NixOS/nix.git"; }"#),
            r#""git+ssh://git@github.com/NixOS/nix.git""#
        );
        assert_eq!(
            to_string(&format!(
                r#"{{ type = "path"; path = "/foo/bar"; revCount = 123; rev = "{REV}"; }}"#
            )),
            format!(r#""path:/foo/bar?rev={REV}&revCount=123""#)
        );
        assert_eq!(
            to_string(r#"{ type = "path"; path = "/foo bar/baz"; dir = "bla space"; }"#),
            r#""path:/foo%20bar/baz?dir=bla%20space""#
        );
        assert_eq!(
            to_string(r#"{ type = "tarball"; url = "http://localhost:8181/test/+3d.tar.gz"; }"#),
            r#""http://localhost:8181/test/%2B3d.tar.gz""#
        );
        assert_eq!(
            to_string(r#"{ type = "file"; url = "https://x/y.txt"; narHash = ""; }"#),
            r#""https://x/y.txt?narHash=sha256-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA%3D""#
        );
        assert_eq!(
            to_string(r#"{ type = "hg"; url = "https://hg.example.org/repo"; ref = "default"; }"#),
            r#""hg+https://hg.example.org/repo?ref=default""#
        );
    }

    #[test]
    fn round_trips() {
        for s in [
            "github:NixOS/nixpkgs/23.05?dir=lib",
            "flake:nixpkgs/branch",
            "git+https://somewhere.aaaaaaa/repo?ref=branch",
            "path:/foo/bar?rev=2aae6c35c94fcfb415dbe95f408b9ce91ee846ed&revCount=123",
            "gitlab:owner%252Fsubgroup/repoA/branchC",
        ] {
            assert_eq!(
                ok(&format!(
                    "builtins.flakeRefToString (builtins.parseFlakeRef \"{s}\")"
                )),
                format!("\"{s}\"")
            );
        }
    }

    #[test]
    fn to_string_errors() {
        assert_eq!(
            to_string_err(r#"{ type = "github"; owner = "NixOS"; repo = -1; }"#),
            "negative value given for flake ref attr repo: -1"
        );
        assert_eq!(
            to_string_err(r#"{ type = "github"; owner = "a"; repo = [ ]; }"#),
            "flake reference attribute sets may only contain integers, Booleans, and strings, but attribute 'repo' is a list"
        );
        assert_eq!(
            to_string_err("{ }"),
            "'type' attribute to specify input scheme is required but not provided"
        );
        assert_eq!(
            to_string_err(r#"{ type = "foo"; }"#),
            r#"cannot show unsupported input '{"type":"foo"}'"#
        );
        assert_eq!(
            to_string_err(r#"{ type = "github"; owner = "a"; repo = "b"; foo = "x"; }"#),
            "input attribute 'foo' not supported by scheme 'github'"
        );
        assert_eq!(
            to_string_err(r#"{ type = "github"; owner = "a"; }"#),
            "input attribute 'repo' is missing"
        );
        assert_eq!(
            to_string_err(r#"{ type = "github"; owner = 1; repo = "b"; }"#),
            r#"input attribute 'owner' is not a string {"owner":1,"repo":"b","type":"github"}"#
        );
        assert_eq!(
            to_string_err(&format!(
                r#"{{ type = "github"; owner = "a"; repo = "b"; ref = "x"; rev = "{REV}"; }}"#
            )),
            format!(
                r#"input {{"owner":"a","ref":"x","repo":"b","rev":"{REV}","type":"github"}} contains both a commit hash ('{REV}') and a branch/tag name ('x')"#
            )
        );
        assert_eq!(
            to_string_err(r#"{ type = "path"; path = "/x"; revCount = "1"; }"#),
            "input attribute 'revCount' is not an integer"
        );
        assert_eq!(
            to_string_err(r#"{ type = "git"; url = "https://x/y"; shallow = "1"; }"#),
            "input attribute 'shallow' is not a Boolean"
        );
        assert_eq!(
            to_string_err(r#"{ type = "path"; path = "/x"; dir = 1; }"#),
            r#"input attribute 'dir' is not a string {"dir":1,"path":"/x","type":"path"}"#
        );
        assert_eq!(
            to_string_err(r#"{ type = "github"; owner = "a"; repo = "b"; rev = "xyz"; }"#),
            "hash 'xyz' has wrong length for hash algorithm 'sha1'"
        );
        assert_eq!(
            to_string_err(
                r#"{ type = "tarball"; url = "https://x/y"; narHash = "md5-1B2M2Y8AsgTpgAmY7PhCfg=="; }"#
            ),
            "narHash must use SHA-256"
        );
        assert_eq!(
            err("builtins.flakeRefToString 1"),
            "expected a set but found an integer: 1"
        );
    }
}
