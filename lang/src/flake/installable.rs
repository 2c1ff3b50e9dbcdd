//! `FLAKEREF#ATTRPATH`: which attribute of a flake's outputs is meant.
//!
//! `ATTRPATH` is tried as `packages.<system>.ATTRPATH`, then
//! `legacyPackages.<system>.ATTRPATH`, then `ATTRPATH` itself; an empty one
//! means `packages.<system>.default`. Attribute names are split at dots
//! outside double quotes (`"a.b".c`). The error for a path found nowhere names
//! every candidate and the closest existing attribute.

use crate::eval::{error::did_you_mean, EResult, ErrorKind, EvalError, Evaluator};
use crate::value::Value;

/// Splits an attribute path at dots outside double quotes.
pub fn split_attr_path(p: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    for c in p.chars() {
        match c {
            '"' => quoted = !quoted,
            '.' if !quoted => out.push(std::mem::take(&mut cur)),
            c => cur.push(c),
        }
    }
    if quoted {
        return Err(format!("missing closing quote in attribute path '{p}'"));
    }
    if !p.is_empty() {
        out.push(cur);
    }
    if out.iter().any(String::is_empty) {
        return Err(format!("attribute path '{p}' has an empty attribute name"));
    }
    Ok(out)
}

/// The attribute paths tried for `fragment`, in order.
pub fn candidates(fragment: &str, system: &str) -> Result<Vec<Vec<String>>, String> {
    if fragment.is_empty() {
        return Ok(vec![vec![
            "packages".into(),
            system.to_string(),
            "default".into(),
        ]]);
    }
    let path = split_attr_path(fragment)?;
    let mut out = Vec::new();
    for prefix in ["packages", "legacyPackages"] {
        let mut p = vec![prefix.to_string(), system.to_string()];
        p.extend(path.iter().cloned());
        out.push(p);
    }
    out.push(path);
    Ok(out)
}

/// Looks `path` up in `v`; `Ok(Err(depth, names))` when the attribute at
/// `depth` is missing from a set with the given names.
fn lookup(
    ev: &mut Evaluator,
    v: &Value,
    path: &[String],
) -> EResult<Result<Value, (usize, Vec<String>)>> {
    let mut cur = v.clone();
    for (i, name) in path.iter().enumerate() {
        match ev.force(&cur)? {
            Value::Attrs(a) => match a.get(name) {
                Some(x) => cur = x.clone(),
                None => return Ok(Err((i, a.keys().map(|k| k.to_string()).collect()))),
            },
            _ => return Ok(Err((i, Vec::new()))),
        }
    }
    Ok(Ok(cur))
}

/// Resolves `fragment` in a flake's value. Returns the value and the path
/// that matched (joined with dots).
pub fn resolve(
    ev: &mut Evaluator,
    flake: &Value,
    fragment: &str,
    system: &str,
    flake_name: &str,
) -> EResult<(Value, String)> {
    let cands = candidates(fragment, system).map_err(|e| EvalError::new(ErrorKind::Eval, e))?;
    let mut best_hint: Option<(usize, String)> = None;
    for c in &cands {
        match lookup(ev, flake, c)? {
            Ok(v) => return Ok((v, c.join("."))),
            Err((depth, names)) => {
                if let Some(h) = did_you_mean(&c[depth], names.iter().map(String::as_str)) {
                    let mut p = c[..depth].to_vec();
                    p.push(h);
                    // Prefer the hint that got furthest along its path.
                    if best_hint.as_ref().is_none_or(|(d, _)| depth > *d) {
                        best_hint = Some((depth, p.join(".")));
                    }
                }
            }
        }
    }
    let tried: Vec<String> = cands.iter().map(|c| format!("'{}'", c.join("."))).collect();
    let hint = best_hint
        .map(|(_, h)| format!("; did you mean '{h}'?"))
        .unwrap_or_default();
    Err(EvalError::new(
        ErrorKind::Eval,
        format!(
            "flake '{flake_name}' does not provide attribute {}{hint}",
            tried.join(" or ")
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidate_order() {
        assert_eq!(
            candidates("", "x86_64-linux").unwrap(),
            vec![vec!["packages", "x86_64-linux", "default"]]
        );
        assert_eq!(
            candidates("hello", "x86_64-linux").unwrap(),
            vec![
                vec!["packages", "x86_64-linux", "hello"],
                vec!["legacyPackages", "x86_64-linux", "hello"],
                vec!["hello"],
            ]
        );
        assert_eq!(
            split_attr_path("a.\"b.c\".d").unwrap(),
            vec!["a", "b.c", "d"]
        );
        assert!(split_attr_path("a..b").is_err());
    }
}
