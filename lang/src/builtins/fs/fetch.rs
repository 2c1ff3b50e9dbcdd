//! The fetchers (`fetchurl`, `fetchTarball`, `fetchGit`, `fetchMercurial`,
//! `fetchTree`), which rocmx refuses during evaluation: fetching belongs to
//! fixed-output derivations (`builtin:fetchurl`).
//!
//! Owns the checks Nix makes before it would fetch (the argument's type, the
//! store path name the fetch would use, `fetchTree`'s absolute `file:` URLs and
//! non-negative numbers), so a bad call fails with Nix's message and a good one
//! with ours. It must not fetch anything, reach the network or write to the
//! store.

use super::expect_plain_string;
use crate::eval::{raise, EResult, ErrorExt, ErrorKind, EvalError, Evaluator, RResult};
use crate::value::{Args, Value};

fn unsupported(name: &str) -> Box<EvalError> {
    EvalError::new(
        ErrorKind::Eval,
        format!(
            "'{name}' is not supported during evaluation in rocmx; use a fixed-output derivation (builtin:fetchurl) instead"
        ),
    )
}

/// Checks the store path name a fetcher would use, with Nix's message.
fn check_fetch_name(name: &str, url: &str, fetcher: &str, hint: &str) -> EResult<()> {
    if let Err(e) = rocmx_store::path::validate_name(name) {
        let why = match &e {
            rocmx_store::StorePathError::InvalidNameChar { ch, .. } => {
                format!("name '{name}' contains illegal character '{ch}'")
            }
            other => other.to_string(),
        };
        return Err(EvalError::new(
            ErrorKind::Eval,
            format!(
                "invalid store path name when fetching URL '{url}': {why}. {hint} '{fetcher}'{}",
                hint_tail(hint)
            ),
        ));
    }
    Ok(())
}

fn hint_tail(hint: &str) -> &'static str {
    if hint.starts_with("Please pass") {
        ",  so that it can create a valid store path."
    } else {
        ", so that it can create a valid store path."
    }
}

fn url_base_name(url: &str) -> &str {
    let trimmed = url.strip_suffix('/').unwrap_or(url);
    trimmed.rsplit('/').next().unwrap_or(trimmed)
}

/// Download the specified URL and return the path of the downloaded file; rocmx refuses it during evaluation (use builtin:fetchurl).
pub(super) fn fetchurl(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let v = ev.force(&a[0])?;
    match &v {
        Value::Attrs(args) => {
            let url = match args.get("url").cloned() {
                Some(u) => expect_plain_string(ev, &u)
                    .frame(None, || "while evaluating the url we should fetch".into())?,
                None => return raise(EvalError::new(ErrorKind::Eval, "'url' argument required")),
            };
            match args.get("name").cloned() {
                Some(n) => {
                    let name = expect_plain_string(ev, &n).frame(None, || {
                        "while evaluating the name of the content we should fetch".into()
                    })?;
                    check_fetch_name(
                        &name,
                        &url,
                        "fetchurl",
                        "Please change the value for the 'name' attribute passed to",
                    )?;
                }
                None => check_fetch_name(
                    url_base_name(&url),
                    &url,
                    "fetchurl",
                    "Please add a valid 'name' attribute to the argument for",
                )?,
            }
        }
        _ => {
            let url = expect_plain_string(ev, &v)
                .frame(None, || "while evaluating the url we should fetch".into())?;
            check_fetch_name(
                url_base_name(&url),
                &url,
                "fetchurl",
                "Please pass an attribute set with 'url' and 'name' attributes to",
            )?;
        }
    }
    raise(unsupported("fetchurl"))
}

fn refuse_fetch(ev: &mut Evaluator, a: Args, name: &str) -> EResult<Value> {
    // Evaluate the argument first so its own errors surface as they would in Nix.
    let v = ev.force(&a[0])?;
    match &v {
        Value::Attrs(_) | Value::String(_) | Value::Path(_) => Err(unsupported(name)),
        other => Err(ev.type_error("a set", other)),
    }
}

/// Download the specified URL, unpack it and return the path of the unpacked tree; rocmx refuses it during evaluation.
pub(super) fn fetch_tarball(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    Ok(refuse_fetch(ev, a, "fetchTarball")?)
}

/// Fetch a path from git; rocmx refuses it during evaluation.
pub(super) fn fetch_git(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    Ok(refuse_fetch(ev, a, "fetchGit")?)
}

/// Fetch a path from Mercurial; rocmx refuses it during evaluation.
pub(super) fn fetch_mercurial(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    Ok(refuse_fetch(ev, a, "fetchMercurial")?)
}

/// Fetch a file system tree or a plain file and return its store path and metadata; rocmx refuses it during evaluation.
pub(super) fn fetch_tree(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let v = ev.force(&a[0])?;
    if let Value::String(s) = &v {
        let url = s.as_str();
        if let Some(rest) = url.strip_prefix("file:") {
            let p = rest.strip_prefix("//").unwrap_or(rest);
            if !p.starts_with('/') {
                return raise(EvalError::new(
                    ErrorKind::Eval,
                    format!("tarball '{url}' must use an absolute path. The 'file' scheme does not support relative paths."),
                ))
                .frame(None, || format!("while fetching the input '{url}'"));
            }
        }
    }
    if let Value::Attrs(args) = &v {
        for (k, x) in args.iter() {
            if let Value::Int(i) = ev.force(x)? {
                if i < 0 {
                    return raise(EvalError::new(
                        ErrorKind::Eval,
                        format!("negative value given for 'fetchTree' argument '{k}': {i}"),
                    ));
                }
            }
        }
    }
    Ok(refuse_fetch(ev, smallvec::smallvec![v], "fetchTree")?)
}

#[cfg(test)]
mod tests {
    use crate::eval::testing::{err, ok};

    #[test]
    fn fetchers_refused() {
        assert!(err(r#"builtins.fetchurl "https://example.com/~wiggle~""#).contains(
            "invalid store path name when fetching URL 'https://example.com/~wiggle~': name '~wiggle~' contains illegal character '~'. Please pass an attribute set with 'url' and 'name' attributes to 'fetchurl',  so that it can create a valid store path."
        ));
        assert!(err(r#"builtins.fetchurl { url = "https://example.com/foo.tar.gz"; name = "~wobble~"; }"#).contains(
            "name '~wobble~' contains illegal character '~'. Please change the value for the 'name' attribute passed to 'fetchurl', so that it can create a valid store path."
        ));
        assert!(
            err(r#"builtins.fetchurl "https://example.com/x.tar.gz""#).contains("not supported")
        );
        assert!(
            err(r#"builtins.fetchTarball "https://example.com/x.tar.gz""#)
                .contains("'fetchTarball' is not supported")
        );
        assert!(err(r#"builtins.fetchTree "file:./relative-path.tar.gz""#).contains(
            "tarball 'file:./relative-path.tar.gz' must use an absolute path. The 'file' scheme does not support relative paths."
        ));
        assert!(err(r#"builtins.fetchTree { type = "file"; owner = -1; }"#)
            .contains("negative value given for 'fetchTree' argument 'owner': -1"));
        // Laziness: an unused fetch is never evaluated.
        assert_eq!(
            ok(r#"let x = builtins.fetchurl "https://example.com/a"; in 1"#),
            "1"
        );
    }
}
