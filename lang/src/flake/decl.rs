//! Reading a `flake.nix`: its top level (`description`, `inputs`, `config`,
//! `outputs`), each input's declaration and each typed parameter's.
//!
//! `inputs.NAME` is a reference string, or `{ url; flake ? true; follows;
//! inputs.SUB.follows; }` (or the reference's attributes: `type`, `path`…);
//! `config.NAME = { type; default; description; }`. Only the top level is
//! evaluated here (and the parameters' defaults); `outputs` stays unevaluated.
//! Every error names the attribute and points into `flake.nix`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::params::{GfxCheck, ParamDecl, ParamType, ParamValue};
use super::source::{self, FlakeRef, Source};
use crate::eval::{error::did_you_mean, ir::Pos, EResult, ErrorKind, EvalError, Evaluator};
use crate::value::Value;

/// The top-level attributes a `flake.nix` may have.
const TOP_LEVEL: &[&str] = &["description", "inputs", "config", "outputs", "nixConfig"];

/// An input as declared.
#[derive(Clone, Debug)]
pub struct InputDecl {
    /// The reference; `None` only with `follows`.
    pub reference: Option<FlakeRef>,
    pub flake: bool,
    /// `follows = "a/b"`: a path of input names from the root flake.
    pub follows: Option<Vec<String>>,
    /// `inputs.SUB.follows` overrides for this input's own inputs.
    pub overrides: BTreeMap<String, Vec<String>>,
    pub pos: Pos,
}

/// A `flake.nix`, read.
#[derive(Clone)]
pub struct FlakeDecl {
    /// The directory holding `flake.nix` (logical).
    pub dir: PathBuf,
    pub description: Option<String>,
    pub inputs: BTreeMap<String, InputDecl>,
    pub params: Vec<ParamDecl>,
    pub outputs: Value,
}

fn err(msg: impl Into<String>) -> Box<EvalError> {
    EvalError::new(ErrorKind::Eval, msg)
}

pub(crate) fn err_at(msg: impl Into<String>, pos: Option<Pos>) -> Box<EvalError> {
    match pos {
        Some(p) if p != Pos::default() => EvalError::at(ErrorKind::Eval, msg, p),
        _ => err(msg),
    }
}

/// Reads `DIR/flake.nix` (evaluating only its top level).
pub fn read_flake(ev: &mut Evaluator, dir: &Path, gfx: GfxCheck<'_>) -> EResult<FlakeDecl> {
    let file = dir.join("flake.nix");
    let v = ev.eval_file(&file)?;
    let top = match ev.force(&v)? {
        Value::Attrs(a) => a,
        other => {
            return Err(err(format!(
                "'{}' must be a set, but it is {}",
                file.display(),
                other.type_().described()
            )))
        }
    };
    for (k, _) in top.iter() {
        if !TOP_LEVEL.contains(&k.as_str()) {
            let hint = did_you_mean(k, TOP_LEVEL.iter().copied())
                .map(|s| format!("; did you mean '{s}'?"))
                .unwrap_or_default();
            return Err(err_at(
                format!(
                    "'{}' has an unsupported attribute '{k}'{hint} (a flake has description, inputs, config and outputs)",
                    file.display()
                ),
                top.get_pos(k),
            ));
        }
    }
    let Some(outputs) = top.get("outputs").cloned() else {
        return Err(err(format!(
            "'{}' has no 'outputs' attribute: a flake needs `outputs = {{ self, ... }}: {{ … }};`",
            file.display()
        )));
    };
    let description = match top.get("description") {
        Some(d) => Some(ev.expect_string(&d.clone())?.as_str().to_string()),
        None => None,
    };
    let mut inputs = BTreeMap::new();
    if let Some(i) = top.get("inputs").cloned() {
        let i = ev.expect_attrs(&i)?;
        for (name, v) in i.iter() {
            let pos = i.get_pos(name).unwrap_or_default();
            let decl = read_input(ev, name, v, pos, dir)?;
            inputs.insert(name.to_string(), decl);
        }
    }
    for reserved in ["self", "config"] {
        if let Some(d) = inputs.get(reserved) {
            return Err(err_at(
                format!("an input may not be named '{reserved}'"),
                Some(d.pos),
            ));
        }
    }
    let mut decls = Vec::new();
    if let Some(c) = top.get("config").cloned() {
        let c = ev.expect_attrs(&c)?;
        for (name, v) in c.iter() {
            let pos = c.get_pos(name);
            decls.push(read_param(ev, name, v, pos, gfx)?);
        }
    }
    Ok(FlakeDecl {
        dir: dir.to_path_buf(),
        description,
        inputs,
        params: decls,
        outputs,
    })
}

fn split_follows(s: &str) -> Vec<String> {
    s.split('/')
        .filter(|x| !x.is_empty())
        .map(str::to_string)
        .collect()
}

fn read_input(
    ev: &mut Evaluator,
    name: &str,
    v: &Value,
    pos: Pos,
    dir: &Path,
) -> EResult<InputDecl> {
    let parse = |s: &str| -> EResult<FlakeRef> {
        let (r, fragment) = source::parse(s, dir, true)
            .map_err(|e| err_at(format!("input '{name}': {e}"), Some(pos)))?;
        if !fragment.is_empty() {
            return Err(err_at(
                format!("input '{name}': a reference in 'inputs' has no '#{fragment}'"),
                Some(pos),
            ));
        }
        Ok(r)
    };
    let mut decl = InputDecl {
        reference: None,
        flake: true,
        follows: None,
        overrides: BTreeMap::new(),
        pos,
    };
    match ev.force(v)? {
        Value::String(s) => decl.reference = Some(parse(s.as_str())?),
        Value::Attrs(a) => {
            let mut attrs: Vec<(String, String)> = Vec::new();
            for (k, x) in a.iter() {
                let x = x.clone();
                match k.as_str() {
                    "url" => decl.reference = Some(parse(ev.expect_string(&x)?.as_str())?),
                    "flake" => decl.flake = ev.expect_bool(&x)?,
                    "follows" => decl.follows = Some(split_follows(ev.expect_string(&x)?.as_str())),
                    "inputs" => {
                        let sub = ev.expect_attrs(&x)?;
                        for (sn, sv) in sub.iter() {
                            let sa = ev.expect_attrs(&sv.clone())?;
                            match sa.get("follows") {
                                Some(f) => {
                                    let f = ev.expect_string(&f.clone())?;
                                    decl.overrides
                                        .insert(sn.to_string(), split_follows(f.as_str()));
                                }
                                None => {
                                    return Err(err_at(
                                        format!("input '{name}': only 'inputs.{sn}.follows' may be overridden"),
                                        Some(pos),
                                    ))
                                }
                            }
                        }
                    }
                    _ => {
                        let s = match ev.force(&x)? {
                            Value::String(s) => s.as_str().to_string(),
                            Value::Int(n) => n.to_string(),
                            Value::Bool(b) => b.get().to_string(),
                            other => {
                                return Err(err_at(
                                    format!(
                                        "input '{name}': attribute '{k}' is {}",
                                        other.type_().described()
                                    ),
                                    Some(pos),
                                ))
                            }
                        };
                        attrs.push((k.to_string(), s));
                    }
                }
            }
            if !attrs.is_empty() {
                if decl.reference.is_some() {
                    return Err(err_at(
                        format!("input '{name}' has both 'url' and '{}'", attrs[0].0),
                        Some(pos),
                    ));
                }
                let dir_attr = attrs.iter().position(|(k, _)| k == "dir");
                let sub = dir_attr.map(|i| attrs.remove(i).1).unwrap_or_default();
                let src = Source::from_attrs(&attrs)
                    .map_err(|e| err_at(format!("input '{name}': {e}"), Some(pos)))?;
                decl.reference = Some(FlakeRef {
                    source: src,
                    dir: sub,
                    nar_hash: None,
                });
            }
            if decl.reference.is_none() && decl.follows.is_none() {
                return Err(err_at(
                    format!("input '{name}' has neither 'url' nor 'follows'"),
                    Some(pos),
                ));
            }
        }
        other => {
            return Err(err_at(
                format!(
                    "input '{name}' must be a reference string or a set, but it is {}",
                    other.type_().described()
                ),
                Some(pos),
            ))
        }
    }
    Ok(decl)
}

/// A language value as a parameter value of type `ty`, or why it is not one.
fn to_param_value(
    ev: &mut Evaluator,
    ty: ParamType,
    v: &Value,
) -> EResult<Result<ParamValue, String>> {
    let v = ev.force(v)?;
    Ok(match (ty, &v) {
        (ParamType::String, Value::String(s)) => Ok(ParamValue::String(s.as_str().into())),
        (ParamType::Bool, Value::Bool(b)) => Ok(ParamValue::Bool(b.get())),
        (ParamType::Int, Value::Int(i)) => Ok(ParamValue::Int(*i)),
        (ParamType::ListOfString | ParamType::GfxTargets, Value::List(l)) => {
            let mut out = Vec::new();
            for x in l.iter() {
                match ev.force(x)? {
                    Value::String(s) => out.push(s.as_str().to_string()),
                    other => {
                        return Ok(Err(format!(
                            "a list element is {}, not a string",
                            other.type_().described()
                        )))
                    }
                }
            }
            Ok(ParamValue::List(out))
        }
        (ty, other) => Err(format!("it is {}, not a {ty}", other.type_().described())),
    })
}

fn read_param(
    ev: &mut Evaluator,
    name: &str,
    v: &Value,
    pos: Option<Pos>,
    gfx: GfxCheck<'_>,
) -> EResult<ParamDecl> {
    let a = match ev.force(v)? {
        Value::Attrs(a) => a,
        other => {
            return Err(err_at(
                format!(
                "parameter '{name}' must be a set {{ type; default; description; }}, but it is {}",
                other.type_().described()
            ),
                pos,
            ))
        }
    };
    let types: Vec<String> = ParamType::ALL.iter().map(|t| format!("\"{t}\"")).collect();
    let ty = match a.get("type") {
        None => {
            return Err(err_at(
                format!(
                    "parameter '{name}' has no 'type' (one of {})",
                    types.join(", ")
                ),
                pos,
            ))
        }
        Some(t) => {
            let t = ev.expect_string(&t.clone())?;
            ParamType::from_name(t.as_str()).ok_or_else(|| {
                err_at(
                    format!(
                        "parameter '{name}' has an unknown type \"{}\" (one of {})",
                        t.as_str(),
                        types.join(", ")
                    ),
                    a.get_pos("type").or(pos),
                )
            })?
        }
    };
    for (k, _) in a.iter() {
        if !["type", "default", "description"].contains(&k.as_str()) {
            return Err(err_at(
                format!("parameter '{name}' has an unknown attribute '{k}' (type, default, description)"),
                a.get_pos(k).or(pos),
            ));
        }
    }
    let default = match a.get("default") {
        None => None,
        Some(d) => {
            let dpos = a.get_pos("default").or(pos);
            let mut val = to_param_value(ev, ty, &d.clone())?.map_err(|why| {
                err_at(
                    format!("the default of parameter '{name}' ({ty}) is wrong: {why}"),
                    dpos,
                )
            })?;
            if let (ParamType::GfxTargets, ParamValue::List(l)) = (ty, &val) {
                val = ParamValue::List(gfx(l).map_err(|why| {
                    err_at(
                        format!("the default of parameter '{name}' ({ty}) is wrong: {why}"),
                        dpos,
                    )
                })?);
            }
            Some(val)
        }
    };
    let description = match a.get("description") {
        Some(d) => Some(ev.expect_string(&d.clone())?.as_str().to_string()),
        None => None,
    };
    Ok(ParamDecl {
        name: name.to_string(),
        ty,
        default,
        description,
    })
}
