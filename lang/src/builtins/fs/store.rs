//! Primops that put paths into the store or name store paths: `path`,
//! `filterSource`, `toFile` and `storePath`, with `toPath` (a path coerced to a
//! string).
//!
//! Owns Nix's `addPath` (a source copied whole or filtered, by the user's
//! function and by what a git flake tracks; recursive or flat; checked against a
//! declared hash) and the references of `toFile`'s text. It must not write to the
//! store except through [`crate::store::EvalStore`], nor copy a path a git flake
//! does not track.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use rocmx_store::{ContentAddress, Hash, HashAlgo, IngestionMethod, StorePath};

use super::{
    base_name, coerce_to_path_ctx, expect_plain_string, read_bytes, real, resolve_symlinks,
    store_path_value, Resolve,
};
use crate::eval::{raise, EResult, ErrorExt, ErrorKind, EvalError, Evaluator, RResult};
use crate::store::PathFilter;
use crate::value::{Args, ContextElem, NixString, Value};

/// Calls a path filter as Nix does: `filter (toString path) type`, which must
/// return a Boolean.
fn call_filter(ev: &mut Evaluator, f: &Value, p: &Path, kind: &str) -> EResult<bool> {
    let r = ev.call_n(
        f,
        [
            Value::str(p.to_string_lossy().into_owned()),
            Value::str(kind),
        ],
    )?;
    Ok(ev.expect_bool(&r).frame(None, || {
        "while evaluating the return value of the path filter function".into()
    })?)
}

/// Nix's `addPath`: copies `src` into the store as `name`, filtered, with the
/// given ingestion method, checking `expected` when given.
fn add_path(
    ev: &mut Evaluator,
    name: &str,
    src: &Path,
    filter: Option<Value>,
    method: IngestionMethod,
    expected: Option<Hash>,
) -> EResult<Value> {
    let store = ev.store.clone();
    ev.check_tracked(src)?;
    let tracked = ev.tracked.clone();
    let visible = move |p: &Path| {
        tracked
            .iter()
            .all(|t| t.check(p) != crate::flake::fetch::Tracked::No)
    };
    let sp = match (method, expected, filter) {
        (IngestionMethod::Nar, None, None) if ev.tracked.is_empty() => {
            store.add_path(src, name, None)?
        }
        (IngestionMethod::Nar, None, None) => {
            let mut cb = |p: &Path, _: &str| Ok(visible(p));
            let cb: &mut PathFilter<'_> = &mut cb;
            store.add_path(src, name, Some(cb))?
        }
        (IngestionMethod::Nar, None, Some(f)) => {
            let mut cb = |p: &Path, kind: &str| {
                if !visible(p) {
                    return Ok(false);
                }
                call_filter(ev, &f, p, kind)
            };
            let cb: &mut PathFilter<'_> = &mut cb;
            store.add_path(src, name, Some(cb))?
        }
        (IngestionMethod::Nar, Some(h), None) => {
            store.add_fixed(src, name, IngestionMethod::Nar, &h)?
        }
        (IngestionMethod::Nar, Some(h), Some(f)) => {
            // The store cannot filter a fixed-output addition: hash the filtered NAR
            // here and derive the path from the declared hash.
            let r = real(ev, src);
            let mut cb = |p: &Path, kind: &str| call_filter(ev, &f, p, kind);
            let cb: &mut PathFilter<'_> = &mut cb;
            let nar = crate::store::nar_of(&r, Some(cb))?;
            let actual = Hash::digest(h.algo(), &nar);
            if actual != h {
                return Err(EvalError::new(
                    ErrorKind::Eval,
                    format!(
                        "hash mismatch in fixed-output path '{}':\n  specified: {}\n  got:       {}",
                        src.display(),
                        h.to_sri(),
                        actual.to_sri()
                    ),
                ));
            }
            let ca = ContentAddress::Fixed {
                method: IngestionMethod::Nar,
                hash: h,
            };
            StorePath::from_ca(name, &ca)
                .map_err(|e| EvalError::new(ErrorKind::Eval, e.to_string()))?
        }
        (IngestionMethod::Flat, expected, _) => {
            // A flat file is never filtered (the filter sees only entries below a directory).
            let h = match expected {
                Some(h) => h,
                None => {
                    let bytes = read_bytes(ev, src)?;
                    Hash::digest(HashAlgo::Sha256, &bytes)
                }
            };
            store.add_fixed(src, name, IngestionMethod::Flat, &h)?
        }
    };
    Ok(store_path_value(sp))
}

/// Copy the source tree e2 to the store, keeping only the files for which the predicate e1 (path, type) returns true.
pub(super) fn filter_source(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let (p, _) = coerce_to_path_ctx(ev, &a[1]).frame(None, || {
        "while evaluating the second argument (the path to filter) passed to 'builtins.filterSource'".into()
    })?;
    let f = ev.expect_function(&a[0]).frame(None, || {
        "while evaluating the first argument passed to builtins.filterSource".into()
    })?;
    let name = base_name(&p);
    Ok(add_path(
        ev,
        &name,
        &p,
        Some(f),
        IngestionMethod::Nar,
        None,
    )?)
    .frame(None, || format!("while adding path '{}'", p.display()))
}

/// `newHashAllowEmpty`: an empty hash means "tell me the right one".
fn parse_sha256(ev: &mut Evaluator, s: &str) -> EResult<Hash> {
    if s.is_empty() {
        let zero = Hash::new(HashAlgo::Sha256, &[0u8; 32])
            .map_err(|e| EvalError::new(ErrorKind::Eval, e.to_string()))?;
        (ev.on_trace)(&format!(
            "warning: found empty hash, assuming '{}'",
            zero.to_sri()
        ));
        return Ok(zero);
    }
    Hash::parse_with_algo(s, HashAlgo::Sha256)
        .map_err(|e| EvalError::new(ErrorKind::Eval, format!("invalid hash '{s}': {e}")))
}

/// Copy args.path to the store, optionally named (name), filtered (filter), flat (recursive = false) or checked (sha256).
pub(super) fn path(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let args = ev.expect_attrs(&a[0]).frame(None, || {
        "while evaluating the argument passed to 'builtins.path'".into()
    })?;
    let mut src: Option<PathBuf> = None;
    let mut name = String::new();
    let mut filter = None;
    let mut method = IngestionMethod::Nar;
    let mut expected = None;
    for (k, v) in args.iter() {
        match k.as_str() {
            "path" => {
                let (p, _) = coerce_to_path_ctx(ev, v).frame(None, || {
                    "while evaluating the 'path' attribute passed to 'builtins.path'".into()
                })?;
                src = Some(p);
            }
            "name" => {
                name = expect_plain_string(ev, v).frame(None, || {
                    "while evaluating the `name` attribute passed to builtins.path".into()
                })?;
            }
            "filter" => {
                filter = Some(ev.expect_function(v).frame(None, || {
                    "while evaluating the `filter` parameter passed to builtins.path".into()
                })?);
            }
            "recursive" => {
                let r = ev.expect_bool(v).frame(None, || {
                    "while evaluating the `recursive` attribute passed to builtins.path".into()
                })?;
                method = if r {
                    IngestionMethod::Nar
                } else {
                    IngestionMethod::Flat
                };
            }
            "sha256" => {
                let s = expect_plain_string(ev, v).frame(None, || {
                    "while evaluating the `sha256` attribute passed to builtins.path".into()
                })?;
                expected = Some(parse_sha256(ev, &s)?);
            }
            other => {
                return raise(EvalError::new(
                    ErrorKind::Eval,
                    format!("unsupported argument '{other}' to 'builtins.path'"),
                ))
            }
        }
    }
    let Some(src) = src else {
        return raise(EvalError::new(
            ErrorKind::Eval,
            "missing required 'path' attribute in the first argument to 'builtins.path'",
        ));
    };
    if name.is_empty() {
        name = base_name(&src);
    }
    Ok(add_path(ev, &name, &src, filter, method, expected)?)
        .frame(None, || format!("while adding path '{}'", src.display()))
}

/// Store the string s in a file in the Nix store and return its path; the file has suffix name.
pub(super) fn to_file(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let name = expect_plain_string(ev, &a[0]).frame(None, || {
        "while evaluating the first argument passed to builtins.toFile".into()
    })?;
    let contents = ev.expect_string(&a[1]).frame(None, || {
        "while evaluating the second argument passed to builtins.toFile".into()
    })?;
    let mut refs = BTreeSet::new();
    for c in contents.context().iter() {
        match c {
            ContextElem::Opaque(p) => {
                refs.insert(
                    StorePath::from_absolute(p)
                        .map_err(|e| EvalError::new(ErrorKind::Eval, e.to_string()))?,
                );
            }
            other => {
                return raise(EvalError::new(
                    ErrorKind::Eval,
                    format!(
                        "files created by builtins.toFile may not reference derivations, but {name} references {}",
                        other.encode()
                    ),
                ))
            }
        }
    }
    let sp = ev.store.clone().add_text(&name, contents.as_str(), &refs)?;
    Ok(store_path_value(sp))
}

/// DEPRECATED. Use /. + "/path" to convert a string into an absolute path.
pub(super) fn to_path(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let (p, ctx) = coerce_to_path_ctx(ev, &a[0]).frame(None, || {
        "while evaluating the first argument passed to builtins.toPath".into()
    })?;
    Ok(Value::String(NixString::with_context(
        p.to_string_lossy().into_owned(),
        ctx,
    )))
}

/// Splits an absolute path inside the store into the store path and the rest.
fn store_path_of(store_dir: &str, p: &str) -> Option<String> {
    let rest = p.strip_prefix(store_dir)?.strip_prefix('/')?;
    let base = rest.split('/').next()?;
    if base.is_empty() {
        return None;
    }
    Some(format!("{store_dir}/{base}"))
}

/// Define a dependency on an already existing store path: path, with the context of its store path.
pub(super) fn store_path(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    if !ev.settings.impure {
        return raise(EvalError::new(
            ErrorKind::Eval,
            "'builtins.storePath' is not allowed in pure evaluation mode",
        ));
    }
    let (mut p, mut ctx) = coerce_to_path_ctx(ev, &a[0]).frame(None, || {
        "while evaluating the first argument passed to 'builtins.storePath'".into()
    })?;
    let store_dir = ev.store.store_dir().to_string();
    // Resolve symlinks unless the path is itself directly in the store.
    if p.parent() != Some(Path::new(&store_dir)) {
        p = resolve_symlinks(ev, &p, Resolve::Full)?;
    }
    let ps = p.to_string_lossy().into_owned();
    let Some(sp) = store_path_of(&store_dir, &ps) else {
        return raise(EvalError::new(
            ErrorKind::Eval,
            format!("path '{ps}' is not in the Nix store"),
        ));
    };
    let base = sp.rsplit('/').next().unwrap_or("");
    StorePath::from_base_name(base).map_err(|e| EvalError::new(ErrorKind::Eval, e.to_string()))?;
    let known = ev.store.realise_path(Path::new(&sp)).is_some() || Path::new(&sp).exists();
    if !known {
        return raise(EvalError::new(
            ErrorKind::Eval,
            format!("path '{sp}' is not valid"),
        ));
    }
    ctx.insert(ContextElem::Opaque(sp.into()));
    Ok(Value::String(NixString::with_context(ps, ctx)))
}

#[cfg(test)]
mod tests {
    use super::super::tests::Fixture;
    use crate::eval::testing::{err, ok};

    #[test]
    fn to_file_and_read_back() {
        let r = ok(
            r#"let f = builtins.toFile "greeting" "hi ${"there"}"; in [ (builtins.readFile f) f ]"#,
        );
        assert!(r.starts_with(r#"[ "hi there" ""#), "{r}");
        assert!(r.ends_with(r#"-greeting" ]"#), "{r}");
        // Store paths in the contents become references; the result has itself as context.
        assert_eq!(
            ok(
                r#"let a = builtins.toFile "a" "x"; b = builtins.toFile "b" "${a}"; in builtins.attrNames (builtins.getContext b) == [ b ]"#
            ),
            "true"
        );
        assert!(err(r#"builtins.toFile "bad~name" "x""#).contains("~"));
    }

    #[test]
    fn to_path_and_store_path() {
        assert_eq!(ok(r#"builtins.toPath "/a/b/../c/""#), r#""/a/c""#);
        assert_eq!(ok(r#"builtins.toPath /x/y"#), r#""/x/y""#);
        assert!(err(r#"builtins.toPath "foo/bar""#)
            .contains("string 'foo/bar' doesn't represent an absolute path"));
        assert!(err(r#"builtins.toPath [ ]"#).contains("cannot coerce a list to a string: [ ]"));
        assert!(
            err("builtins.storePath true").contains("cannot coerce a Boolean to a string: true")
        );
        assert!(err(r#"builtins.storePath "/tmp""#).contains("path '/tmp' is not in the Nix store"));
        assert_eq!(
            ok(r#"let f = builtins.toFile "sp" "x"; in builtins.storePath f == f"#),
            "true"
        );
    }

    #[test]
    fn path_and_filter_source() {
        let f = Fixture::new();
        let d = f.p();
        let r = ok(&format!(
            r#"builtins.path {{ path = {d}/sub; name = "src"; }}"#
        ));
        assert!(r.ends_with(r#"-src""#), "{r}");
        // A filter that drops dotfiles changes the store path.
        let same = ok(&format!(
            r#"builtins.filterSource (p: t: true) {d}/sub == builtins.path {{ path = {d}/sub; }}"#
        ));
        assert_eq!(same, "true");
        let differs = ok(&format!(
            r#"builtins.filterSource (p: t: p != "{d}/sub/.hidden") {d}/sub != builtins.path {{ path = {d}/sub; }}"#
        ));
        assert_eq!(differs, "true");
        // The filter sees absolute paths and types (never the root itself).
        assert_eq!(
            ok(&format!(
                r#"builtins.isString (builtins.filterSource (p: t: if (p == "{d}/sub/b" || p == "{d}/sub/.hidden") && t == "regular" then true else throw "unexpected ${{p}} ${{t}}") {d}/sub)"#
            )),
            "true"
        );
        assert!(err(&format!(r#"builtins.filterSource (_: 1) {d}/sub"#))
            .contains("attempt to call something which is not a function but an integer: 1"));
        assert!(err(&format!(r#"builtins.filterSource (_: _: 1) {d}/sub"#))
            .contains("expected a Boolean but found an integer: 1"));
        assert!(err(r#"builtins.filterSource [ ] [ ]"#)
            .contains("cannot coerce a list to a string: [ ]"));
        assert!(err(r#"builtins.filterSource [ ] "foo""#)
            .contains("string 'foo' doesn't represent an absolute path"));
        assert!(err(&format!(r#"builtins.filterSource [ ] {d}"#))
            .contains("expected a function but found a list"));
        assert!(err(&format!(r#"builtins.path {{ path = {d}; foo = 1; }}"#))
            .contains("unsupported argument 'foo' to 'builtins.path'"));
        assert!(err(r#"builtins.path { name = "x"; }"#).contains(
            "missing required 'path' attribute in the first argument to 'builtins.path'"
        ));
    }

    #[test]
    fn path_with_hash() {
        let f = Fixture::new();
        let d = f.p();
        // sha256 of "hello\n" (flat).
        let h = "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03";
        let r = ok(&format!(
            r#"builtins.path {{ path = {d}/a.txt; recursive = false; sha256 = "{h}"; name = "out"; }}"#
        ));
        assert!(r.ends_with(r#"-out""#), "{r}");
        let flat_no_hash = ok(&format!(
            r#"builtins.path {{ path = {d}/a.txt; recursive = false; name = "out"; }}"#
        ));
        assert_eq!(r, flat_no_hash);
        let bad = "0000000000000000000000000000000000000000000000000000000000000000";
        assert!(err(&format!(
            r#"builtins.path {{ path = {d}/a.txt; recursive = false; sha256 = "{bad}"; }}"#
        ))
        .contains("hash mismatch"));
        assert!(err(&format!(
            r#"builtins.path {{ path = {d}/sub; filter = p: t: true; sha256 = "{bad}"; }}"#
        ))
        .contains("hash mismatch"));
    }
}
