//! Typed flake parameters: `config.NAME = { type; default; description; }`.
//!
//! | `type`             | command-line text (`--set NAME=TEXT`)   | value          |
//! |--------------------|------------------------------------------|----------------|
//! | `"string"`         | anything                                 | string         |
//! | `"bool"`           | `true`/`false` (also `1`/`0`, `yes`/`no`) | bool           |
//! | `"int"`            | a decimal integer                        | int            |
//! | `"list of string"` | comma-separated, items trimmed           | list of string |
//! | `"gfx targets"`    | comma-separated gfx targets (`--gfx`)    | list of string |
//!
//! `gfx targets` values are checked against the table of known targets by a
//! hook the caller supplies ([`GfxCheck`]), since the table is the binary's.
//! Owns declaring, parsing and checking parameters; turning them into
//! language values is [`super::load`]'s job.

use std::collections::BTreeMap;
use std::fmt;

/// A parameter's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamType {
    String,
    Bool,
    Int,
    ListOfString,
    GfxTargets,
}

impl ParamType {
    /// All types, in the order error messages list them.
    pub const ALL: [ParamType; 5] = [
        ParamType::String,
        ParamType::Bool,
        ParamType::Int,
        ParamType::ListOfString,
        ParamType::GfxTargets,
    ];

    /// The spelling in `flake.nix`.
    pub fn name(self) -> &'static str {
        match self {
            ParamType::String => "string",
            ParamType::Bool => "bool",
            ParamType::Int => "int",
            ParamType::ListOfString => "list of string",
            ParamType::GfxTargets => "gfx targets",
        }
    }

    pub fn from_name(s: &str) -> Option<ParamType> {
        ParamType::ALL.into_iter().find(|t| t.name() == s)
    }
}

impl fmt::Display for ParamType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A parameter's value.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ParamValue {
    String(String),
    Bool(bool),
    Int(i64),
    List(Vec<String>),
}

impl ParamValue {
    /// As JSON (for `--json` output and `rocmx flake show`).
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            ParamValue::String(s) => s.clone().into(),
            ParamValue::Bool(b) => (*b).into(),
            ParamValue::Int(i) => (*i).into(),
            ParamValue::List(l) => l.clone().into(),
        }
    }

    /// Whether the value fits the type (lists fit both list types).
    pub fn fits(&self, ty: ParamType) -> bool {
        matches!(
            (self, ty),
            (ParamValue::String(_), ParamType::String)
                | (ParamValue::Bool(_), ParamType::Bool)
                | (ParamValue::Int(_), ParamType::Int)
                | (
                    ParamValue::List(_),
                    ParamType::ListOfString | ParamType::GfxTargets
                )
        )
    }
}

impl fmt::Display for ParamValue {
    /// The command-line form: `gfx90a,gfx1100`, `true`, `3`, `text`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParamValue::String(s) => f.write_str(s),
            ParamValue::Bool(b) => write!(f, "{b}"),
            ParamValue::Int(i) => write!(f, "{i}"),
            ParamValue::List(l) => f.write_str(&l.join(",")),
        }
    }
}

/// A declared parameter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamDecl {
    pub name: String,
    pub ty: ParamType,
    /// `None`: the parameter must be set.
    pub default: Option<ParamValue>,
    pub description: Option<String>,
}

/// Checks (and canonicalises) a list of gfx targets; the error is one line.
pub type GfxCheck<'a> = &'a dyn Fn(&[String]) -> Result<Vec<String>, String>;

/// Parses command-line text for a parameter of type `ty`.
pub fn parse_text(ty: ParamType, text: &str, gfx: GfxCheck<'_>) -> Result<ParamValue, String> {
    let list = || -> Result<Vec<String>, String> {
        let items: Vec<String> = text.split(',').map(|s| s.trim().to_string()).collect();
        if text.trim().is_empty() {
            return Ok(Vec::new());
        }
        if items.iter().any(String::is_empty) {
            return Err(format!("'{text}' has an empty item"));
        }
        Ok(items)
    };
    match ty {
        ParamType::String => Ok(ParamValue::String(text.to_string())),
        ParamType::Bool => match text {
            "true" | "1" | "yes" => Ok(ParamValue::Bool(true)),
            "false" | "0" | "no" => Ok(ParamValue::Bool(false)),
            _ => Err(format!("'{text}' is not a bool (true or false)")),
        },
        ParamType::Int => text
            .trim()
            .parse::<i64>()
            .map(ParamValue::Int)
            .map_err(|_| format!("'{text}' is not an int")),
        ParamType::ListOfString => list().map(ParamValue::List),
        ParamType::GfxTargets => {
            let l = list()?;
            if l.is_empty() {
                return Err("the list of gfx targets is empty".into());
            }
            gfx(&l).map(ParamValue::List)
        }
    }
}

/// Why parameters could not be applied.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ParamError {
    #[error("unknown parameter '{name}'{hint}; {declared}")]
    Unknown {
        name: String,
        hint: String,
        declared: String,
    },
    #[error("bad value for parameter '{name}' ({ty}): {why}; {declared}")]
    BadValue {
        name: String,
        ty: ParamType,
        why: String,
        declared: String,
    },
    #[error("parameter '{name}' ({ty}) has no default; set it with --set {name}=VALUE")]
    Missing { name: String, ty: ParamType },
}

/// "the flake declares: gfxTargets (gfx targets), debug (bool)".
pub fn describe(decls: &[ParamDecl]) -> String {
    if decls.is_empty() {
        return "the flake declares no parameters (config)".into();
    }
    let list: Vec<String> = decls
        .iter()
        .map(|d| format!("{} ({})", d.name, d.ty))
        .collect();
    format!("the flake declares: {}", list.join(", "))
}

/// The values in force: the command line's `set` (raw text by name) over the
/// declared defaults. Every name set must be declared and every value must
/// parse; every declared parameter must end up with a value.
pub fn resolve(
    decls: &[ParamDecl],
    set: &BTreeMap<String, String>,
    gfx: GfxCheck<'_>,
) -> Result<BTreeMap<String, ParamValue>, ParamError> {
    for name in set.keys() {
        if !decls.iter().any(|d| &d.name == name) {
            let hint =
                crate::eval::error::did_you_mean(name, decls.iter().map(|d| d.name.as_str()))
                    .map(|s| format!(" (did you mean '{s}'?)"))
                    .unwrap_or_default();
            return Err(ParamError::Unknown {
                name: name.clone(),
                hint,
                declared: describe(decls),
            });
        }
    }
    let mut out = BTreeMap::new();
    for d in decls {
        let v = match set.get(&d.name) {
            Some(text) => parse_text(d.ty, text, gfx).map_err(|why| ParamError::BadValue {
                name: d.name.clone(),
                ty: d.ty,
                why,
                declared: describe(decls),
            })?,
            None => match &d.default {
                Some(v) => v.clone(),
                None => {
                    return Err(ParamError::Missing {
                        name: d.name.clone(),
                        ty: d.ty,
                    })
                }
            },
        };
        out.insert(d.name.clone(), v);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_gfx(l: &[String]) -> Result<Vec<String>, String> {
        if l.iter().any(|t| t == "gfx91a") {
            return Err("unknown gfx target 'gfx91a' (did you mean gfx90a?)".into());
        }
        Ok(l.to_vec())
    }

    fn decls() -> Vec<ParamDecl> {
        vec![
            ParamDecl {
                name: "gfxTargets".into(),
                ty: ParamType::GfxTargets,
                default: Some(ParamValue::List(vec!["gfx90a".into()])),
                description: None,
            },
            ParamDecl {
                name: "debug".into(),
                ty: ParamType::Bool,
                default: Some(ParamValue::Bool(false)),
                description: Some("assertions".into()),
            },
            ParamDecl {
                name: "jobs".into(),
                ty: ParamType::Int,
                default: None,
                description: None,
            },
        ]
    }

    #[test]
    fn parses_by_type() {
        let p = |t, s: &str| parse_text(t, s, &no_gfx);
        assert_eq!(p(ParamType::Bool, "true"), Ok(ParamValue::Bool(true)));
        assert_eq!(p(ParamType::Bool, "no"), Ok(ParamValue::Bool(false)));
        assert!(p(ParamType::Bool, "maybe")
            .unwrap_err()
            .contains("not a bool"));
        assert_eq!(p(ParamType::Int, "-3"), Ok(ParamValue::Int(-3)));
        assert!(p(ParamType::Int, "3x").is_err());
        assert_eq!(
            p(ParamType::ListOfString, "a, b"),
            Ok(ParamValue::List(vec!["a".into(), "b".into()]))
        );
        assert_eq!(p(ParamType::ListOfString, ""), Ok(ParamValue::List(vec![])));
        assert!(p(ParamType::ListOfString, "a,,b").is_err());
        assert!(p(ParamType::GfxTargets, "gfx91a")
            .unwrap_err()
            .contains("gfx90a"));
        assert!(p(ParamType::GfxTargets, "").is_err());
        assert_eq!(
            ParamType::from_name("list of string"),
            Some(ParamType::ListOfString)
        );
        assert_eq!(
            ParamValue::List(vec!["a".into(), "b".into()]).to_string(),
            "a,b"
        );
    }

    #[test]
    fn resolves_over_defaults() {
        let set: BTreeMap<String, String> = [("jobs".to_string(), "4".to_string())].into();
        let v = resolve(&decls(), &set, &no_gfx).unwrap();
        assert_eq!(v["jobs"], ParamValue::Int(4));
        assert_eq!(v["debug"], ParamValue::Bool(false));
        let missing = resolve(&decls(), &BTreeMap::new(), &no_gfx).unwrap_err();
        assert!(
            missing.to_string().contains("--set jobs=VALUE"),
            "{missing}"
        );
        let set: BTreeMap<String, String> = [("debgu".to_string(), "1".to_string())].into();
        let e = resolve(&decls(), &set, &no_gfx).unwrap_err().to_string();
        assert!(e.contains("unknown parameter 'debgu'"), "{e}");
        assert!(e.contains("did you mean 'debug'"), "{e}");
        assert!(
            e.contains("gfxTargets (gfx targets), debug (bool), jobs (int)"),
            "{e}"
        );
        let set: BTreeMap<String, String> = [("jobs".to_string(), "many".to_string())].into();
        let e = resolve(&decls(), &set, &no_gfx).unwrap_err().to_string();
        assert!(e.contains("bad value for parameter 'jobs' (int)"), "{e}");
    }
}
