//! Primops: strings.
//!
//! Owns `stringLength`, `substring`, `replaceStrings`, `split`, `match`,
//! `concatStringsSep`, `baseNameOf`, `dirOf`, `hashString` and `convertHash`,
//! plus [`force_string_no_ctx`] (Nix's `forceStringNoCtx`). Strings are byte
//! strings to Nix: lengths and offsets count bytes, and a slice that cuts a
//! UTF-8 character is repaired lossily. Regular expressions (POSIX extended,
//! with libstdc++'s semantics) live in [`ere`]. It must not implement
//! coercions (the evaluator's `coerce_to_string` does).

mod ere;

use smallvec::SmallVec;
use std::path::Path;
use std::rc::Rc;

use super::context::reject_context;
use super::op;
use crate::eval::{raise, CoerceMode, EResult, ErrorExt, ErrorKind, EvalError, Evaluator, RResult};
use crate::value::{Args, Context, NixString, PrimOp, Value};
use rocmx_store::{Encoding, Hash, HashAlgo, HashError};

pub(crate) static BUILTINS: &[PrimOp] = &[
    op("stringLength", 1, string_length).doc("e", "Return the number of bytes of the string e."),
    op("substring", 3, substring).doc(
        "start len s",
        "Return the substring of s from byte position start (zero-based) up to but not including start + len.",
    ),
    op("replaceStrings", 3, replace_strings).doc(
        "from to s",
        "Given string s, replace every occurrence of the strings in from with the corresponding string in to.",
    ),
    op("split", 2, split).doc(
        "regex str",
        "Return a list of the strings between the matches of the extended POSIX regular expression regex in str, with the lists of each match's groups between them.",
    ),
    op("match", 2, match_).doc(
        "regex str",
        "Return the list of groups if the extended POSIX regular expression regex matches str precisely, otherwise null.",
    ),
    op("concatStringsSep", 2, concat_strings_sep).doc(
        "separator list",
        "Concatenate a list of strings with a separator between each element.",
    ),
    op("baseNameOf", 1, base_name_of_op).doc(
        "x",
        "Return the base name of the path or string x: the part after the last directory separator (one trailing slash of a string ignored).",
    ),
    op("dirOf", 1, dir_of).doc(
        "s",
        "Return the directory part of the string s, that is, everything before the final slash in the string.",
    ),
    op("hashString", 2, hash_string).doc(
        "type s",
        "Return a base-16 representation of the cryptographic hash of string s, with the algorithm type (md5, sha1, sha256 or sha512).",
    ),
    op("convertHash", 1, convert_hash).doc(
        "args",
        "Return the representation args.toHashFormat of the hash args.hash (its algorithm args.hashAlgo when the hash does not say).",
    ),
];

/// A string that must not refer to store paths (Nix's `forceStringNoCtx`);
/// `what` names the argument in the error trace.
pub(crate) fn force_string_no_ctx(
    ev: &mut Evaluator,
    v: &Value,
    what: impl FnOnce() -> String,
) -> EResult<NixString> {
    let s = ev.expect_string(v).frame(None, what)?;
    reject_context(&s)?;
    Ok(s)
}

/// A string value from bytes that may not be valid UTF-8 (a regex or a slice
/// may cut a character).
fn bytes_to_string(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `text[a..b]` as a new string: a copy when both ends fall on character
/// boundaries (nearly always; no validation needed), else [`bytes_to_string`].
fn slice_to_string(text: &str, a: usize, b: usize) -> String {
    match text.get(a..b) {
        Some(p) => p.to_owned(),
        None => bytes_to_string(&text.as_bytes()[a..b]),
    }
}

/// Return the number of bytes of the string e.
fn string_length(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let s = ev
        .coerce_to_string(&a[0], CoerceMode::Interpolation)
        .frame(None, || {
            "while evaluating the argument passed to builtins.stringLength".into()
        })?;
    Ok(Value::Int(s.as_str().len() as i64))
}

/// Return the substring of s from byte position start (zero-based) up to but not including start + len.
fn substring(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let start = ev.expect_int(&a[0]).frame(None, || {
        "while evaluating the first argument (the start offset) passed to builtins.substring".into()
    })?;
    if start < 0 {
        return raise(EvalError::new(
            ErrorKind::Eval,
            "negative start position in 'substring'",
        ));
    }
    let len = ev.expect_int(&a[1]).frame(None, || {
        "while evaluating the second argument (the substring length) passed to builtins.substring".into()
    })?;
    // An empty substring of a string keeps its context without copying it.
    if len == 0 {
        if let Value::String(s) = ev.force(&a[2])? {
            return Ok(Value::String(NixString::with_context(
                String::new(),
                s.context().clone(),
            )));
        }
    }
    let s = ev
        .coerce_to_string(&a[2], CoerceMode::Interpolation)
        .frame(None, || {
            "while evaluating the third argument (the string) passed to builtins.substring".into()
        })?;
    let text = s.as_str();
    let size = text.len();
    let start = usize::try_from(start).unwrap_or(usize::MAX);
    if start >= size {
        return Ok(Value::String(NixString::with_context(
            String::new(),
            s.context().clone(),
        )));
    }
    // A negative length means "to the end" (Nix converts it to a huge size_t).
    let end = match usize::try_from(len) {
        Ok(l) => start.saturating_add(l).min(size),
        Err(_) => size,
    };
    if start == 0 && end == size {
        return Ok(Value::String(s));
    }
    let piece = slice_to_string(text, start, end);
    Ok(Value::String(NixString::with_context(
        piece,
        s.context().clone(),
    )))
}

/// Given string s, replace every occurrence of the strings in from with the corresponding string in to.
fn replace_strings(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let from_l = ev.expect_list(&a[0]).frame(None, || {
        "while evaluating the first argument passed to builtins.replaceStrings".into()
    })?;
    let to_l = ev.expect_list(&a[1]).frame(None, || {
        "while evaluating the second argument passed to builtins.replaceStrings".into()
    })?;
    if from_l.len() != to_l.len() {
        return raise(EvalError::new(
            ErrorKind::Eval,
            "'from' and 'to' arguments passed to builtins.replaceStrings have different lengths",
        ));
    }
    // Inline for a few patterns, the usual call: no allocation for them.
    let mut from: SmallVec<[NixString; 4]> = SmallVec::with_capacity(from_l.len());
    for x in from_l.iter() {
        from.push(ev.expect_string(x).frame(None, || {
            "while evaluating one of the strings to replace passed to builtins.replaceStrings"
                .into()
        })?);
    }
    let s = ev.expect_string(&a[2]).frame(None, || {
        "while evaluating the third argument passed to builtins.replaceStrings".into()
    })?;
    if from.is_empty() {
        return Ok(Value::String(s));
    }

    let src = s.as_str().as_bytes();
    let n = src.len();
    let pats: SmallVec<[&[u8]; 4]> = from.iter().map(|p| p.as_str().as_bytes()).collect();
    let has_empty = pats.iter().any(|p| p.is_empty());
    // Patterns by first byte, in their original order (a counting sort):
    // `by_first[offsets[b]..offsets[b + 1]]`. Worth its set-up (about 600
    // instructions: the two tables cleared, the prefix sums) only when there
    // are enough positions and patterns to try; a short string (a name, a
    // version) is scanned trying every pattern at every position.
    let table = !has_empty && n * pats.len() > 128;
    let mut offsets = [0u32; 257];
    let mut by_first: Vec<u32> = Vec::new();
    let mut starts = [false; 256];
    if table {
        for p in &pats {
            offsets[p[0] as usize + 1] += 1;
            starts[p[0] as usize] = true;
        }
        for b in 0..256 {
            offsets[b + 1] += offsets[b];
        }
        by_first = vec![0; pats.len()];
        let mut fill = offsets;
        for (i, p) in pats.iter().enumerate() {
            let slot = &mut fill[p[0] as usize];
            by_first[*slot as usize] = i as u32;
            *slot += 1;
        }
    }

    let mut ctx = s.context().clone();
    let mut cache: SmallVec<[Option<NixString>; 4]> = smallvec::smallvec![None; pats.len()];
    let mut out: Vec<u8> = Vec::with_capacity(n);
    let mut replaced = false;
    let mut p = 0usize;
    // Position `n` is visited too: an empty pattern matches at the end.
    while p <= n {
        if table {
            // Copy the run of bytes that cannot start a match in one go.
            let q = src[p..]
                .iter()
                .position(|&c| starts[c as usize])
                .map_or(n, |k| p + k);
            out.extend_from_slice(&src[p..q]);
            p = q;
            if p >= n {
                break;
            }
        }
        let cands: &[u32] = if !table {
            &[]
        } else {
            let b = src[p] as usize;
            &by_first[offsets[b] as usize..offsets[b + 1] as usize]
        };
        let hit = if !table {
            (0..pats.len()).find(|&i| src[p..].starts_with(pats[i]))
        } else {
            cands
                .iter()
                .map(|&i| i as usize)
                .find(|&i| src[p..].starts_with(pats[i]))
        };
        match hit {
            Some(i) => {
                replaced = true;
                if cache[i].is_none() {
                    let r = ev.expect_string(&to_l[i]).frame(None, || {
                        "while evaluating one of the replacement strings passed to builtins.replaceStrings".into()
                    })?;
                    ctx.extend(r.context());
                    cache[i] = Some(r);
                }
                if let Some(r) = &cache[i] {
                    out.extend_from_slice(r.as_str().as_bytes());
                }
                if pats[i].is_empty() {
                    if p < n {
                        out.push(src[p]);
                    }
                    p += 1;
                } else {
                    p += pats[i].len();
                }
            }
            None => {
                if p < n {
                    out.push(src[p]);
                }
                p += 1;
            }
        }
    }
    if !replaced {
        return Ok(Value::String(s));
    }
    let text = String::from_utf8(out).unwrap_or_else(|e| bytes_to_string(e.as_bytes()));
    Ok(Value::String(NixString::with_context(text, ctx)))
}

fn compile_regex(re: &str) -> EResult<Rc<ere::Regex>> {
    ere::compile(re).map_err(|e| {
        let msg = match e {
            ere::RegexError::Invalid => format!("invalid regular expression '{re}'"),
            ere::RegexError::TooBig => {
                format!("memory limit exceeded by regular expression '{re}'")
            }
        };
        EvalError::new(ErrorKind::Eval, msg)
    })
}

fn group_values(hay: &str, groups: &[Option<(usize, usize)>]) -> Value {
    Value::list(
        groups
            .iter()
            .map(|g| match g {
                Some((a, b)) => Value::str(slice_to_string(hay, *a, *b)),
                None => Value::Null,
            })
            .collect(),
    )
}

/// Return the list of groups if the extended POSIX regular expression regex matches str precisely, otherwise null.
fn match_(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let re = force_string_no_ctx(ev, &a[0], || {
        "while evaluating the first argument passed to builtins.match".into()
    })?;
    let regex = compile_regex(re.as_str())?;
    let s = ev.expect_string(&a[1]).frame(None, || {
        "while evaluating the second argument passed to builtins.match".into()
    })?;
    let hay = s.as_str();
    Ok(match regex.match_full(hay.as_bytes()) {
        Some(groups) => group_values(hay, &groups),
        None => Value::Null,
    })
}

/// Return a list of the strings between the matches of the extended POSIX regular expression regex in str, with the lists of each match's groups between them.
fn split(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let re = force_string_no_ctx(ev, &a[0], || {
        "while evaluating the first argument passed to builtins.split".into()
    })?;
    let regex = compile_regex(re.as_str())?;
    let s = ev.expect_string(&a[1]).frame(None, || {
        "while evaluating the second argument passed to builtins.split".into()
    })?;
    let hay = s.as_str();
    let matches = regex.find_all(hay.as_bytes());
    if matches.is_empty() {
        return Ok(Value::list(vec![Value::String(s)]));
    }
    let mut out = Vec::with_capacity(2 * matches.len() + 1);
    let mut prev = 0;
    for m in &matches {
        out.push(Value::str(slice_to_string(hay, prev, m.start)));
        out.push(group_values(hay, &m.groups));
        prev = m.end;
    }
    out.push(Value::str(slice_to_string(hay, prev, hay.len())));
    Ok(Value::list(out))
}

/// Concatenate a list of strings with a separator between each element.
fn concat_strings_sep(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let sep = ev.expect_string(&a[0]).frame(None, || {
        "while evaluating the first argument (the separator string) passed to builtins.concatStringsSep".into()
    })?;
    let list = ev.expect_list(&a[1]).frame(None, || {
        "while evaluating the second argument (the list of strings to concat) passed to builtins.concatStringsSep"
            .into()
    })?;
    // The contexts met, joined once at the end (see `Context::union_of`).
    let mut ctxs: Vec<Context> = Vec::new();
    if sep.has_context() {
        ctxs.push(sep.context().clone());
    }
    let mut out = String::new();
    for (i, x) in list.iter().enumerate() {
        let part = ev.coerce_to_string(x, CoerceMode::Interpolation).frame(None, || {
            "while evaluating one element of the list of strings to concat passed to builtins.concatStringsSep".into()
        })?;
        if list.len() == 1 && !sep.has_context() {
            return Ok(Value::String(part));
        }
        if i > 0 {
            out.push_str(sep.as_str());
        }
        out.push_str(part.as_str());
        if part.has_context() {
            ctxs.push(part.context().clone());
        }
    }
    Ok(Value::String(NixString::with_context(
        out,
        Context::union_of(&ctxs),
    )))
}

/// Nix's `baseNameOf`: the text after the last `/`, ignoring one trailing `/`.
pub(crate) fn base_name_of(path: &str) -> &str {
    let b = path.as_bytes();
    if b.is_empty() {
        return "";
    }
    let mut last = b.len() - 1;
    if b[last] == b'/' && last > 0 {
        last -= 1;
    }
    let start = b[..=last]
        .iter()
        .rposition(|&c| c == b'/')
        .map_or(0, |k| k + 1);
    // `start` and `last + 1` are next to ASCII `/` or at the ends.
    path.get(start..=last).unwrap_or("")
}

/// Return the base name of the path or string x: the part after the last directory separator (one trailing slash of a string ignored).
fn base_name_of_op(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let s = ev
        .coerce_to_string(&a[0], CoerceMode::NoCopy)
        .frame(None, || {
            "while evaluating the first argument passed to builtins.baseNameOf".into()
        })?;
    let base = base_name_of(s.as_str());
    if base.len() == s.as_str().len() {
        return Ok(Value::String(s));
    }
    Ok(Value::String(NixString::with_context(
        base.to_string(),
        s.context().clone(),
    )))
}

/// Return the directory part of the string s, that is, everything before the final slash in the string.
fn dir_of(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let v = ev.force(&a[0])?;
    if let Value::Path(p) = &v {
        return Ok(match p.parent() {
            Some(parent) => Value::Path(Rc::new(parent.to_path_buf())),
            None => Value::Path(Rc::new(Path::new("/").to_path_buf())),
        });
    }
    let s = ev
        .coerce_to_string(&v, CoerceMode::NoCopy)
        .frame(None, || {
            "while evaluating the first argument passed to 'builtins.dirOf'".into()
        })?;
    let text = s.as_str();
    let dir = match text.rfind('/') {
        None => ".",
        Some(0) => "/",
        Some(k) => &text[..k],
    };
    Ok(Value::String(NixString::with_context(
        dir.to_string(),
        s.context().clone(),
    )))
}

fn parse_hash_algo(name: &str) -> EResult<HashAlgo> {
    name.parse::<HashAlgo>().map_err(|_| {
        EvalError::new(
            ErrorKind::Eval,
            format!("unknown hash algorithm '{name}', expect 'blake3', 'md5', 'sha1', 'sha256', or 'sha512'"),
        )
    })
}

/// Return a base-16 representation of the cryptographic hash of string s, with the algorithm type (md5, sha1, sha256 or sha512).
fn hash_string(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let algo = force_string_no_ctx(ev, &a[0], || {
        "while evaluating the first argument passed to builtins.hashString".into()
    })?;
    let algo = parse_hash_algo(algo.as_str())?;
    let s = ev.expect_string(&a[1]).frame(None, || {
        "while evaluating the second argument passed to builtins.hashString".into()
    })?;
    Ok(Value::str(
        Hash::digest(algo, s.as_str().as_bytes()).to_hex(),
    ))
}

fn hash_err(e: HashError, rest: &str, whole: &str, algo: HashAlgo) -> Box<EvalError> {
    let msg = match e {
        HashError::BadLength { .. } => {
            format!("hash '{rest}' has wrong length for hash algorithm '{algo}'")
        }
        HashError::BadDigest { encoding, .. } => {
            let enc = match encoding {
                Encoding::Base16 => "base-16",
                Encoding::Nix32 => "nix32",
                Encoding::Base64 => "base-64",
                Encoding::Sri => "SRI",
            };
            format!("invalid {enc} hash '{whole}'")
        }
        HashError::UnknownAlgo(a) => {
            format!("unknown hash algorithm '{a}', expect 'blake3', 'md5', 'sha1', 'sha256', or 'sha512'")
        }
        other => format!("invalid hash '{whole}': {other}"),
    };
    EvalError::new(ErrorKind::Eval, msg)
}

/// Nix's `Hash::parseAny`: `algo:digest`, SRI `algo-base64`, or a bare digest
/// of the algorithm given.
fn parse_any_hash(s: &str, algo: Option<HashAlgo>) -> EResult<Hash> {
    let (parsed, rest, sri) = if let Some((pre, rest)) = s.split_once(':') {
        (Some(parse_hash_algo(pre)?), rest, false)
    } else if let Some((pre, rest)) = s.split_once('-') {
        (Some(parse_hash_algo(pre)?), rest, true)
    } else {
        (None, s, false)
    };
    let algo = match (parsed, algo) {
        (None, None) => {
            return Err(EvalError::new(
                ErrorKind::Eval,
                format!(
                "hash '{s}' does not include a type, nor is the type otherwise known from context"
            ),
            ))
        }
        (Some(p), Some(o)) if p != o => {
            return Err(EvalError::new(
                ErrorKind::Eval,
                format!("hash '{s}' should have type '{o}'"),
            ))
        }
        (Some(p), _) => p,
        (None, Some(o)) => o,
    };
    if sri {
        Hash::parse_sri(&format!("{algo}-{rest}")).map_err(|e| match e {
            HashError::BadLength { .. }
            | HashError::BadDigest { .. }
            | HashError::BadSize { .. } => {
                EvalError::new(ErrorKind::Eval, format!("invalid SRI hash '{s}'"))
            }
            e => hash_err(e, rest, s, algo),
        })
    } else {
        Hash::parse_digest(rest, algo)
            .map(|(h, _)| h)
            .map_err(|e| hash_err(e, rest, s, algo))
    }
}

/// Return the representation args.toHashFormat of the hash args.hash (its algorithm args.hashAlgo when the hash does not say).
fn convert_hash(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let attrs = ev.expect_attrs(&a[0]).frame(None, || {
        "while evaluating the first argument passed to builtins.convertHash".into()
    })?;
    let get = |name: &str| -> EResult<Value> {
        attrs
            .get(name)
            .cloned()
            .ok_or_else(|| EvalError::missing_attribute(name, None))
            .frame(None, || format!("while locating the attribute '{name}'"))
    };
    let hash = get("hash")?;
    let hash = force_string_no_ctx(ev, &hash, || "while evaluating the attribute 'hash'".into())?;
    let algo = match attrs.get("hashAlgo").cloned() {
        Some(v) => {
            let s = force_string_no_ctx(ev, &v, || {
                "while evaluating the attribute 'hashAlgo'".into()
            })?;
            Some(parse_hash_algo(s.as_str())?)
        }
        None => None,
    };
    let format = get("toHashFormat")?;
    let format = force_string_no_ctx(ev, &format, || {
        "while evaluating the attribute 'toHashFormat'".into()
    })?;
    let enc = match format.as_str() {
        "base16" => Encoding::Base16,
        "nix32" | "base32" => Encoding::Nix32,
        "base64" => Encoding::Base64,
        "sri" => Encoding::Sri,
        other => {
            return raise(EvalError::new(
                ErrorKind::Eval,
                format!(
                    "unknown hash format '{other}', expect 'base16', 'base32', 'base64', or 'sri'"
                ),
            ))
        }
    };
    let h = parse_any_hash(hash.as_str(), algo)?;
    Ok(Value::str(h.encode(enc)))
}

#[cfg(test)]
mod tests {
    use super::base_name_of;
    use crate::eval::test_eval;
    use crate::eval::testing::err;

    fn ev(e: &str) -> String {
        match test_eval(e) {
            Ok(s) => s,
            Err(err) => panic!("unexpected error for {e}: {err}"),
        }
    }

    fn assert_err(e: &str, want: &str) {
        let got = err(e);
        assert!(
            got.contains(want),
            "error for {e}:\n{got}\ndoes not contain {want:?}"
        );
    }

    #[test]
    fn string_length_and_substring() {
        assert_eq!(ev("builtins.stringLength \"foo\""), "3");
        assert_eq!(ev("builtins.stringLength \"é\""), "2");
        assert_eq!(
            ev(
                r#"let s = "foobar"; in builtins.substring 1 2 s + "x" + builtins.substring 0 (builtins.stringLength s) s + "y" + builtins.substring 3 100 s + "z" + builtins.substring 2 (builtins.sub (builtins.stringLength s) 3) s + "a" + builtins.substring 3 0 s + "b" + builtins.substring 3 1 s + "c" + builtins.substring 5 10 "perl" + "_" + builtins.substring 3 (-1) "tebbad""#
            ),
            "\"ooxfoobarybarzobaabbc_bad\""
        );
        assert_eq!(ev("builtins.substring 10 1 \"abc\""), "\"\"");
        assert_eq!(ev("builtins.substring 1 (-1) \"abc\""), "\"bc\"");
        // Cutting a character does not panic.
        assert_eq!(
            ev("builtins.stringLength (builtins.substring 0 1 \"é\")"),
            "3"
        );
        assert_err(
            "builtins.substring (-3) 3 \"sometext\"",
            "negative start position in 'substring'",
        );
        assert_err(
            "builtins.substring { } \"foo\" true",
            "expected an integer but found a set",
        );
        assert_err(
            "builtins.substring 3 \"foo\" true",
            "expected an integer but found a string",
        );
        assert_err(
            "builtins.substring 0 3 { }",
            "cannot coerce a set to a string",
        );
        assert_err(
            "builtins.stringLength { }",
            "cannot coerce a set to a string",
        );
    }

    /// Strings long enough (with enough patterns) for the first-byte table,
    /// and the same patterns on short strings, which are scanned without it.
    /// Expected from Nix 2.8.
    #[test]
    fn replace_strings_long_and_short() {
        assert_eq!(
            ev("with builtins; let long = concatStringsSep \"\" (genList (i: \"abcb-${toString i}é\") 40); in [\n  (replaceStrings [ \"abc\" \"ab\" \"b\" \"é\" ] [ \"1\" \"2\" \"3\" \"e\" ] long)\n  (replaceStrings [ \"-\" \"x\" ] [ \"_\" \"y\" ] long)\n  (stringLength (replaceStrings [ \"1\" ] [ \"\" ] long))\n]"),
            "[ \"13-0e13-1e13-2e13-3e13-4e13-5e13-6e13-7e13-8e13-9e13-10e13-11e13-12e13-13e13-14e13-15e13-16e13-17e13-18e13-19e13-20e13-21e13-22e13-23e13-24e13-25e13-26e13-27e13-28e13-29e13-30e13-31e13-32e13-33e13-34e13-35e13-36e13-37e13-38e13-39e\" \"abcb_0éabcb_1éabcb_2éabcb_3éabcb_4éabcb_5éabcb_6éabcb_7éabcb_8éabcb_9éabcb_10éabcb_11éabcb_12éabcb_13éabcb_14éabcb_15éabcb_16éabcb_17éabcb_18éabcb_19éabcb_20éabcb_21éabcb_22éabcb_23éabcb_24éabcb_25éabcb_26éabcb_27éabcb_28éabcb_29éabcb_30éabcb_31éabcb_32éabcb_33éabcb_34éabcb_35éabcb_36éabcb_37éabcb_38éabcb_39é\" 336 ]"
        );
    }

    #[test]
    fn replace_strings() {
        assert_eq!(
            ev(r#"with builtins; [
              (replaceStrings [ "o" ] [ "a" ] "foobar")
              (replaceStrings [ "o" ] [ "" ] "foobar")
              (replaceStrings [ "oo" ] [ "u" ] "foobar")
              (replaceStrings [ "oo" "a" ] [ "a" "oo" ] "foobar")
              (replaceStrings [ "oo" "oo" ] [ "u" "i" ] "foobar")
              (replaceStrings [ "" ] [ "X" ] "abc")
              (replaceStrings [ "" ] [ "X" ] "")
              (replaceStrings [ "-" ] [ "_" ] "a-b")
              (replaceStrings [ "oo" "XX" ] [ "u" (throw "unreachable") ] "foobar")
              (replaceStrings [ "" "a" ] [ "X" "Y" ] "aba")
              (replaceStrings [ "a" "" ] [ "Y" "X" ] "aba")
              (replaceStrings [ ] [ ] "abc")
              (replaceStrings [ "abc" "ab" "b" ] [ "1" "2" "3" ] "ababcbb")
            ]"#),
            "[ \"faabar\" \"fbar\" \"fubar\" \"faboor\" \"fubar\" \"XaXbXcX\" \"X\" \"a_b\" \"fubar\" \"XaXbXaX\" \"YXbYX\" \"abc\" \"2133\" ]"
        );
        assert_err(
            "builtins.replaceStrings 0 0 { }",
            "expected a list but found an integer: 0",
        );
        assert_err(
            "builtins.replaceStrings [ ] 0 { }",
            "expected a list but found an integer: 0",
        );
        assert_err(
            "builtins.replaceStrings [ 0 ] [ ] { }",
            "'from' and 'to' arguments passed to builtins.replaceStrings have different lengths",
        );
        assert_err(
            "builtins.replaceStrings [ 1 ] [ \"new\" ] { }",
            "expected a string but found an integer: 1",
        );
        assert_err(
            "builtins.replaceStrings [ \"oo\" ] [ true ] \"foo\"",
            "expected a string but found a Boolean: true",
        );
        assert_err(
            "builtins.replaceStrings [ \"old\" ] [ \"new\" ] { }",
            "expected a string but found a set",
        );
    }

    #[test]
    fn replace_strings_large() {
        let out = ev(r#"let
              line = i: "line ${toString i}: value=${toString (i * i)}\n";
              text = builtins.concatStringsSep "" (builtins.genList line 20000);
              r = builtins.replaceStrings [ "line " "=" "value" ] [ "L" " := " "" ] text;
            in [ (builtins.stringLength text) (builtins.stringLength r) (builtins.substring 0 20 r) ]"#);
        assert!(out.ends_with("\"L0:  := 0\\nL1:  := 1\\n\" ]"), "{out}");
    }

    #[test]
    fn regex_match() {
        assert_eq!(ev(r#"builtins.match "ab" "abc""#), "null");
        assert_eq!(ev(r#"builtins.match "abc" "abc""#), "[ ]");
        assert_eq!(ev(r#"builtins.match "a(b)(c)" "abc""#), "[ \"b\" \"c\" ]");
        assert_eq!(
            ev(r#"builtins.match "[[:space:]]+([[:upper:]]+)[[:space:]]+" "  FOO   ""#),
            "[ \"FOO\" ]"
        );
        assert_eq!(
            ev(r#"builtins.match "((.*)/)?([^/]*)\\.(nix|cc)" "foobar.cc""#),
            "[ null null \"foobar\" \"cc\" ]"
        );
        assert_eq!(
            ev(r#"builtins.match "(.+)+(.+)" "17.0.14+7""#),
            "[ \"17.0.14+\" \"7\" ]"
        );
        assert_eq!(ev(r#"builtins.match "a]" "a]""#), "[ ]");
        assert_err(
            r#"builtins.match "(.*" """#,
            "invalid regular expression '(.*'",
        );
        assert_err(
            r#"builtins.match "\\d" "1""#,
            "invalid regular expression '\\d'",
        );
        assert_err(
            "builtins.match 1 { }",
            "expected a string but found an integer: 1",
        );
        assert_err(
            "builtins.match \"foo\" { }",
            "expected a string but found a set",
        );
    }

    #[test]
    fn regex_split() {
        assert_eq!(
            ev(r#"builtins.split "(a)b" "abc""#),
            "[ \"\" [ \"a\" ] \"c\" ]"
        );
        assert_eq!(
            ev(r#"builtins.split "([ac])" "abc""#),
            "[ \"\" [ \"a\" ] \"b\" [ \"c\" ] \"\" ]"
        );
        assert_eq!(
            ev(r#"builtins.split "(a)|(c)" "abc""#),
            "[ \"\" [ \"a\" null ] \"b\" [ null \"c\" ] \"\" ]"
        );
        assert_eq!(
            ev(r#"builtins.split "([[:upper:]]+)" "  FOO   ""#),
            "[ \"  \" [ \"FOO\" ] \"   \" ]"
        );
        assert_eq!(ev(r#"builtins.split "fo+" "f""#), "[ \"f\" ]");
        assert_eq!(
            ev(r#"builtins.split "x*" "axb""#),
            "[ \"\" [ ] \"a\" [ ] \"\" [ ] \"b\" [ ] \"\" ]"
        );
        assert_eq!(ev(r#"builtins.split "a|ab" "xabx""#), "[ \"x\" [ ] \"x\" ]");
        assert_eq!(
            ev(r#"builtins.split ":=" "a:=b:=""#),
            "[ \"a\" [ ] \"b\" [ ] \"\" ]"
        );
        assert_err(
            r#"builtins.split "f(o*o" "1foo2""#,
            "invalid regular expression 'f(o*o'",
        );
        assert_err(
            "builtins.split 1 { }",
            "expected a string but found an integer: 1",
        );
        assert_err(
            "builtins.split \"foo\" { }",
            "expected a string but found a set",
        );
    }

    #[test]
    fn concat_strings_sep() {
        assert_eq!(
            ev(
                r#"with builtins; [ (concatStringsSep "" [ ]) (concatStringsSep "" [ "foo" "bar" "xyzzy" ]) (concatStringsSep ", " [ "foo" "bar" "xyzzy" ]) (concatStringsSep ", " [ "foo" ]) (concatStringsSep ", " [ ]) ]"#
            ),
            "[ \"\" \"foobarxyzzy\" \"foo, bar, xyzzy\" \"foo\" \"\" ]"
        );
        assert_err(
            "builtins.concatStringsSep 1 { }",
            "expected a string but found an integer: 1",
        );
        assert_err(
            "builtins.concatStringsSep \"foo\" { }",
            "expected a list but found a set",
        );
        assert_err(
            "builtins.concatStringsSep \"foo\" [ 1 2 { } ]",
            "cannot coerce an integer to a string: 1",
        );
    }

    #[test]
    fn base_and_dir_names() {
        let cases = [
            ("", ""),
            (".", "."),
            ("a", "a"),
            ("a/", "a"),
            ("a/.", "."),
            ("a/b", "b"),
            ("a/b/c.", "c."),
            ("a\\b", "a\\b"),
            ("a//b", "b"),
            ("a//", ""),
            ("/", ""),
            ("/a", "a"),
        ];
        for (i, o) in cases {
            assert_eq!(base_name_of(i), o, "baseNameOf {i:?}");
        }
        assert_eq!(ev("baseNameOf /foo/bar"), "\"bar\"");
        assert_err(
            "builtins.baseNameOf [ ]",
            "cannot coerce a list to a string",
        );
        assert_eq!(
            ev(r#"map dirOf [ "" "filename" "a/b" "a///b" "/" "//" "///" "/a" "a/b/c/.//d" ]"#),
            "[ \".\" \".\" \"a\" \"a//\" \"/\" \"/\" \"//\" \"/\" \"a/b/c/./\" ]"
        );
        assert_eq!(
            ev("[ (dirOf /.) (dirOf /foo) (dirOf /foo/bar) ]"),
            "[ / / /foo ]"
        );
    }

    #[test]
    fn hashes() {
        assert_eq!(
            ev(r#"builtins.hashString "md5" """#),
            "\"d41d8cd98f00b204e9800998ecf8427e\""
        );
        assert_eq!(
            ev(r#"builtins.hashString "sha1" "text 1""#),
            "\"cd54e8568c1b37cf1e5badb0779bcbf382212189\""
        );
        assert_eq!(
            ev(r#"builtins.hashString "sha256" "text 2""#),
            "\"ad0387b3bd8652f730ca46d25f9c170af0fd589f42e7f23f5a9e6412d97d7e56\""
        );
        assert_err(
            r#"builtins.hashString "foo" "content""#,
            "unknown hash algorithm 'foo', expect 'blake3', 'md5', 'sha1', 'sha256', or 'sha512'",
        );
        assert_err(
            "builtins.hashString 1 { }",
            "expected a string but found an integer: 1",
        );
        assert_err(
            r#"builtins.hashString "sha256" { }"#,
            "expected a string but found a set",
        );

        let h16 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
        let conv = |hash: &str, algo: Option<&str>, fmt: &str| {
            let algo = algo.map_or(String::new(), |a| format!("hashAlgo = \"{a}\";"));
            ev(&format!(
                "builtins.convertHash {{ hash = \"{hash}\"; {algo} toHashFormat = \"{fmt}\"; }}"
            ))
        };
        assert_eq!(
            conv(h16, Some("sha256"), "nix32"),
            "\"0mdqa9w1p6cmli6976v4wi0sw9r4p5prkj7lzfd1877wk11c9c73\""
        );
        assert_eq!(
            conv(h16, Some("sha256"), "base32"),
            "\"0mdqa9w1p6cmli6976v4wi0sw9r4p5prkj7lzfd1877wk11c9c73\""
        );
        assert_eq!(
            conv(&format!("sha256:{h16}"), None, "base64"),
            "\"47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\""
        );
        assert_eq!(
            conv(&format!("sha256:{h16}"), None, "sri"),
            "\"sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\""
        );
        assert_eq!(
            conv(
                "sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=",
                None,
                "base16"
            ),
            format!("\"{h16}\"")
        );
        assert_eq!(
            conv("md5-1B2M2Y8AsgTpgAmY7PhCfg==", Some("md5"), "base16"),
            "\"d41d8cd98f00b204e9800998ecf8427e\""
        );
        assert_err(
            &format!("builtins.convertHash {{ hash = \"{h16}\"; toHashFormat = \"sri\"; }}"),
            "does not include a type, nor is the type otherwise known from context",
        );
        assert_err(
            &format!("builtins.convertHash {{ hash = \"sha256:{h16}\"; hashAlgo = \"sha1\"; toHashFormat = \"sri\"; }}"),
            "should have type 'sha1'",
        );
        assert_err(
            "builtins.convertHash { hash = \"abc\"; hashAlgo = \"sha1\"; toHashFormat = \"sri\"; }",
            "hash 'abc' has wrong length for hash algorithm 'sha1'",
        );
        assert_err(
            &format!("builtins.convertHash {{ hash = \"{h16}\"; hashAlgo = \"sha256\"; toHashFormat = \"hex\"; }}"),
            "unknown hash format 'hex'",
        );
        assert_err(
            "builtins.convertHash { toHashFormat = \"sri\"; }",
            "attribute 'hash' missing",
        );
    }

    #[test]
    fn no_context_arguments() {
        let s = "(builtins.appendContext \"x\" { \"/rocmx/store/00000000000000000000000000000000-foo\" = { path = true; }; })";
        assert_err(
            &format!("builtins.compareVersions {s} \"1\""),
            "the string 'x' is not allowed to refer to a store path (such as '/rocmx/store/00000000000000000000000000000000-foo')",
        );
        // Context survives the string operations that keep it.
        assert_eq!(
            ev(&format!("builtins.hasContext (builtins.substring 0 0 {s})")),
            "true"
        );
        assert_eq!(
            ev(&format!(
                "builtins.hasContext (builtins.replaceStrings [ \"a\" ] [ {s} ] \"bab\")"
            )),
            "true"
        );
        assert_eq!(
            ev(&format!(
                "builtins.hasContext (builtins.concatStringsSep {s} [ \"a\" ])"
            )),
            "true"
        );
        assert_eq!(ev(&format!("builtins.hasContext (baseNameOf {s})")), "true");
        assert_eq!(ev(&format!("builtins.split \"y\" {s}")), "[ \"x\" ]");
    }
    /// Random patterns (alternations, nullable loops) against the output of
    /// Nix 2.8 (`[ (match p s) (split p s) ]`), which uses libstdc++'s regex.
    #[test]
    fn regex_differential_vectors() {
        let cases: &[(&str, &str, &str)] = &[
            (
                r#"|[^a]*b{0,}|c{1,2}"#,
                r#"ac"#,
                r#"[ null [ "" [ ] "a" [ ] "" [ ] "" ] ]"#,
            ),
            (
                r#"(a*|)"#,
                r#"bc"#,
                r#"[ null [ "" [ "" ] "b" [ "" ] "c" [ "" ] "" ] ]"#,
            ),
            (
                r#"c{0,}(.b$|a{0,1}ba)*$|a()|"#,
                r#"acbaaaabcb"#,
                r#"[ null [ "" [ null "" ] "" [ null null ] "c" [ null null ] "b" [ null "" ] "" [ null "" ] "" [ null "" ] "" [ null "" ] "" [ null null ] "b" [ "cb" null ] "" [ null null ] "" ] ]"#,
            ),
            (
                r#"|[b-c]*.{0,1}b|a?"#,
                r#"acaabccbaa"#,
                r#"[ null [ "" [ ] "" [ ] "c" [ ] "" [ ] "" [ ] "" [ ] "" [ ] "" [ ] "" ] ]"#,
            ),
            (
                r#"|.b{1,2}^"#,
                r#"ccb"#,
                r#"[ null [ "" [ ] "c" [ ] "c" [ ] "b" [ ] "" ] ]"#,
            ),
            (
                r#"c|.{1,2}((^bc*||ab*b)?)?|"#,
                r#"bba"#,
                r#"[ null [ "" [ "" "" ] "" [ "" "" ] "" [ null null ] "" ] ]"#,
            ),
            (
                r#"bb*|b?"#,
                r#"babaccba"#,
                r#"[ null [ "" [ ] "" [ ] "a" [ ] "" [ ] "a" [ ] "c" [ ] "c" [ ] "" [ ] "a" [ ] "" ] ]"#,
            ),
            (
                r#"|c.{0,1}|."#,
                r#"cacba"#,
                r#"[ null [ "" [ ] "" [ ] "" [ ] "" [ ] "" ] ]"#,
            ),
            (
                r#"(b{2}.c||)|"#,
                r#"ccbabcaaa"#,
                r#"[ null [ "" [ "" ] "c" [ "" ] "c" [ "" ] "b" [ "" ] "a" [ "" ] "b" [ "" ] "c" [ "" ] "a" [ "" ] "a" [ "" ] "a" [ "" ] "" ] ]"#,
            ),
            (
                r#"b*^||"#,
                r#"baaaaa"#,
                r#"[ null [ "" [ ] "b" [ ] "a" [ ] "a" [ ] "a" [ ] "a" [ ] "a" [ ] "" ] ]"#,
            ),
            (
                r#".||[^a]+"#,
                r#"cbacaaaab"#,
                r#"[ null [ "" [ ] "" [ ] "" [ ] "" [ ] "" [ ] "" [ ] "" [ ] "" [ ] "" [ ] "" ] ]"#,
            ),
            (r#"a+|^b+(|$.)"#, r#"c"#, r#"[ null [ "c" ] ]"#),
            (
                r#"|c{0,}|c"#,
                r#"aacabaab"#,
                r#"[ null [ "" [ ] "a" [ ] "a" [ ] "" [ ] "a" [ ] "b" [ ] "a" [ ] "a" [ ] "b" [ ] "" ] ]"#,
            ),
            (
                r#"|.{2}b{1,2}[^a]|a*"#,
                r#"bbbcbabba"#,
                r#"[ null [ "" [ ] "" [ ] "" [ ] "" [ ] "" ] ]"#,
            ),
            (
                r#"(((cb|ac?)||b)()a){0,1}c[ab]"#,
                r#"acbcccabcb"#,
                r#"[ null [ "" [ "a" "" null "" ] "cc" [ null null null null ] "b" [ null null null null ] "" ] ]"#,
            ),
            (
                r#"b|"#,
                r#"abacaa"#,
                r#"[ null [ "" [ ] "a" [ ] "" [ ] "a" [ ] "c" [ ] "a" [ ] "a" [ ] "" ] ]"#,
            ),
            (
                r#"[^a]+(b{2})|."#,
                r#"abccbaabac"#,
                r#"[ null [ "" [ null ] "" [ null ] "" [ null ] "" [ null ] "" [ null ] "" [ null ] "" [ null ] "" [ null ] "" [ null ] "" [ null ] "" ] ]"#,
            ),
            (
                r#"a(){0,1}^|c{1,2}a"#,
                r#"acaabcb"#,
                r#"[ null [ "a" [ null ] "abcb" ] ]"#,
            ),
            (
                r#"a*[b-c]{0,1}(b|)"#,
                r#"accabacb"#,
                r#"[ null [ "" [ "" ] "" [ "" ] "" [ "" ] "" [ "b" ] "" [ "" ] "" ] ]"#,
            ),
            (
                r#"|a(.{0,})|b?"#,
                r#""#,
                r#"[ [ null ] [ "" [ null ] "" ] ]"#,
            ),
            (
                r#"|b{0,}$c{0,1}|"#,
                r#"baa"#,
                r#"[ null [ "" [ ] "b" [ ] "a" [ ] "a" [ ] "" ] ]"#,
            ),
            (
                r#"bb+[^a]{2}|[^a]*(){0,1}"#,
                r#""#,
                r#"[ [ "" ] [ "" [ "" ] "" ] ]"#,
            ),
            (
                r#"ab||$"#,
                r#"caabbbbb"#,
                r#"[ null [ "" [ ] "c" [ ] "a" [ ] "" [ ] "b" [ ] "b" [ ] "b" [ ] "b" [ ] "" ] ]"#,
            ),
            (
                r#".c{2}b{0,1}|a*([ab]c{0,}[^a]|a)a?"#,
                r#"aaabbaaa"#,
                r#"[ null [ "" [ "bb" ] "" [ "a" ] "" ] ]"#,
            ),
            (r#"b{0,}a{1,2}|b*a"#, r#"b"#, r#"[ null [ "b" ] ]"#),
            (
                r#"(.([^a]{2}(a|))*|c)+."#,
                r#"bcbbcaabca"#,
                r#"[ [ "abc" "bc" "" ] [ "" [ "abc" "bc" "" ] "" ] ]"#,
            ),
            (
                r#"ab|([b-c]b?|(bb)?)?([ab]{2}|)a?"#,
                r#"cbca"#,
                r#"[ null [ "" [ "cb" null "" ] "" [ "c" null "" ] "" [ "" null "" ] "" ] ]"#,
            ),
            (
                r#"([ab]b{0,1})[b-c]?||"#,
                r#"caccbabbca"#,
                r#"[ null [ "" [ null ] "c" [ "a" ] "" [ null ] "c" [ "b" ] "" [ "ab" ] "" [ null ] "c" [ "a" ] "" [ null ] "" ] ]"#,
            ),
            (
                r#"cb|^"#,
                r#"bbcbcbb"#,
                r#"[ null [ "" [ ] "bb" [ ] "" [ ] "b" ] ]"#,
            ),
            (
                r#"b(b*$a{1,2})?|"#,
                r#"babccbcc"#,
                r#"[ null [ "" [ null ] "" [ null ] "a" [ null ] "" [ null ] "c" [ null ] "c" [ null ] "" [ null ] "c" [ null ] "c" [ null ] "" ] ]"#,
            ),
            (
                r#"[^a](((a*ac{0,}){1,2}a?){2}.[ab]{0,1})*"#,
                r#"cacbbba"#,
                r#"[ null [ "" [ null null null ] "a" [ null null null ] "" [ null null null ] "" [ null null null ] "" [ null null null ] "a" ] ]"#,
            ),
            (
                r#"[^a]()*"#,
                r#"abbccbc"#,
                r#"[ null [ "a" [ "" ] "" [ "" ] "" [ "" ] "" [ "" ] "" [ "" ] "" [ "" ] "" ] ]"#,
            ),
            (r#"(b)[b-c](c?()*b*)"#, r#"aac"#, r#"[ null [ "aac" ] ]"#),
            (
                r#"[b-c]()*c"#,
                r#"aabbcaaca"#,
                r#"[ null [ "aab" [ "" ] "aaca" ] ]"#,
            ),
            (
                r#"b*[ab]{0,}(a^)+"#,
                r#"aaccbbaaba"#,
                r#"[ null [ "aaccbbaaba" ] ]"#,
            ),
            (
                r#"[^a]?(ac{1,2})*b{0,1}"#,
                r#"aaccbbbaa"#,
                r#"[ null [ "" [ null ] "a" [ "acc" ] "" [ null ] "" [ null ] "a" [ null ] "a" [ null ] "" ] ]"#,
            ),
            (
                r#"a(a{1,2}b{0,})*"#,
                r#"accabc"#,
                r#"[ null [ "" [ null ] "cc" [ null ] "bc" ] ]"#,
            ),
        ];
        for (p, s, want) in cases {
            let e =
                format!("[ (builtins.match \"{p}\" \"{s}\") (builtins.split \"{p}\" \"{s}\") ]");
            assert_eq!(ev(&e), *want, "{e}");
        }
    }
    /// Bracket expressions and escapes against Nix 2.8 (source-level Nix
    /// strings; `INVALID`: rejected as an invalid regular expression).
    #[test]
    fn regex_bracket_vectors() {
        let cases: &[(&str, &str, &str)] = &[
            (
                r#"[^z-]*"#,
                r#"-\a"#,
                r#"[ null [ "" [ ] "-" [ ] "" [ ] "" ] ]"#,
            ),
            (r#"[|[:digit:]*^]"#, r#""#, r#"[ null [ "" ] ]"#),
            (r#"[^?]az-]*"#, r#"."#, r#"[ null [ "." ] ]"#),
            (r#"\\[.a.]b^]*"#, r#"\z["#, r#"[ null [ "z[" ] ]"#),
            (r#"[^:)]"#, r#"=["#, r#"[ null [ "" [ ] "" [ ] "" ] ]"#),
            (r#"[^=[:alpha:]]"#, r#"."#, r#"[ [ ] [ "" [ ] "" ] ]"#),
            (r#"[*[]b"#, r#"]["#, r#"[ null [ "][" ] ]"#),
            (r#"-}]"#, r#"\]"#, r#"[ null [ "]" ] ]"#),
            (r#"[][]*"#, r#"b"#, r#"[ null [ "" [ ] "b" [ ] "" ] ]"#),
            (r#"[^[.a.][]b"#, r#"\.^"#, r#"[ null [ ".^" ] ]"#),
            (
                r#"[^^-}*[.a.]]*"#,
                r#"="#,
                r#"[ [ ] [ "" [ ] "" [ ] "" ] ]"#,
            ),
            (r#"[}]*"#, r#"\-"#, r#"[ null [ "" [ ] "-" [ ] "" ] ]"#),
            (r#"\\-:|:]b"#, r#""#, r#"INVALID"#),
            (r#"\\){[=b=].["#, r#"=-"#, r#"INVALID"#),
            (r#"[^:[.a.]zz."#, r#""#, r#"INVALID"#),
            (r#"a.b{-]*"#, r#"a"#, r#"INVALID"#),
            (r#"[^.*.[:digit:]"#, r#"a."#, r#"INVALID"#),
            (r#"\\b[.a.]]b"#, r#"-"#, r#"INVALID"#),
            (r#"\\{.([:alpha:]="#, r#"aab"#, r#"INVALID"#),
            (r#"[^[=[.a.]-z"#, r#""#, r#"INVALID"#),
            (r#"a[.a.][.a.])=\\"#, r#""#, r#"INVALID"#),
            (r#"a{)[:alpha:]a["#, r#"b"#, r#"INVALID"#),
            (r#"\\:]b"#, r#"^\z"#, r#"INVALID"#),
            (r#"?[[-]b"#, r#":^z"#, r#"INVALID"#),
        ];
        for (p, s, want) in cases {
            let e =
                format!("[ (builtins.match \"{p}\" \"{s}\") (builtins.split \"{p}\" \"{s}\") ]");
            let got = match test_eval(&e) {
                Ok(v) => v,
                Err(err) if err.contains("invalid regular expression") => "INVALID".to_string(),
                Err(err) => panic!("{e}: {err}"),
            };
            assert_eq!(got, *want, "{e}");
        }
    }
}
