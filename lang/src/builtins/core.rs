//! Core primops: control flow, errors, tracing, type predicates, imports and
//! the search path.
//!
//! Owns `throw`, `abort`, `seq`, `deepSeq`, `tryEval`, `trace`, `warn`,
//! `addErrorContext`, `typeOf`/`is*`, `functionArgs`, `toString`, `import`,
//! `scopedImport`, `findFile`, `getEnv`, `placeholder`, `unsafeGetAttrPos`,
//! `break`. It must not implement container or string algorithms (see the sibling
//! modules).

use std::path::{Path, PathBuf};

use sha2::Digest;

use super::{mk_attrs, op};
use crate::eval::{
    raise, CoerceMode, EResult, ErrorExt, ErrorKind, EvalError, Evaluator, RResult, Raised,
};
use crate::value::{print, Args, PrimOp, Type, Value};

pub(crate) static BUILTINS: &[PrimOp] = &[
    op("throw", 1, throw).doc(
        "s",
        "Throw an error message s. This usually aborts Nix expression evaluation, but tryEval can catch it.",
    ),
    op("abort", 1, abort).doc(
        "s",
        "Abort Nix expression evaluation and print the error message s; tryEval cannot catch it.",
    ),
    op("seq", 2, seq).doc("e1 e2", "Evaluate e1, then evaluate and return e2."),
    op("deepSeq", 2, deep_seq).doc(
        "e1 e2",
        "Like seq e1 e2, except that e1 is evaluated deeply: if it is a list or set, its elements or attributes are also evaluated recursively.",
    ),
    op("tryEval", 1, try_eval).doc(
        "e",
        "Try to shallowly evaluate e: { success = true; value = e; }, or { success = false; value = false; } when throw or assert failed.",
    ),
    op("trace", 2, trace).doc(
        "e1 e2",
        "Evaluate e1 and print its abstract syntax representation on standard error. Then return e2.",
    ),
    op("traceVerbose", 2, trace_verbose).doc(
        "e1 e2",
        "Return e2; with --trace-verbose (which rocmx does not have) Nix first prints e1 on standard error.",
    ),
    op("warn", 2, warn).doc(
        "e1 e2",
        "Evaluate e1, which must be a string, and print it on standard error as a warning. Then return e2.",
    ),
    op("addErrorContext", 2, add_error_context).doc(
        "context value",
        "Evaluate value; if that fails, add the string context to the error's trace.",
    ),
    op("typeOf", 1, type_of).doc(
        "e",
        "Return a string representing the type of the value e: int, bool, string, path, null, set, list, lambda or float.",
    ),
    op("isNull", 1, is_null).doc(
        "e",
        "Return true if e evaluates to null, and false otherwise (equivalent to e == null).",
    )
    .tests(Type::Null),
    op("isInt", 1, is_int).doc(
        "e",
        "Return true if e evaluates to an integer, and false otherwise.",
    )
    .tests(Type::Int),
    op("isFloat", 1, is_float).doc(
        "e",
        "Return true if e evaluates to a float, and false otherwise.",
    )
    .tests(Type::Float),
    op("isBool", 1, is_bool).doc("e", "Return true if e evaluates to a bool, and false otherwise.")
    .tests(Type::Bool),
    op("isString", 1, is_string).doc(
        "e",
        "Return true if e evaluates to a string, and false otherwise.",
    )
    .tests(Type::String),
    op("isPath", 1, is_path).doc("e", "Return true if e evaluates to a path, and false otherwise.")
    .tests(Type::Path),
    op("isList", 1, is_list).doc("e", "Return true if e evaluates to a list, and false otherwise.")
    .tests(Type::List),
    op("isAttrs", 1, is_attrs).doc(
        "e",
        "Return true if e evaluates to a set, and false otherwise.",
    )
    .tests(Type::Set),
    op("isFunction", 1, is_function).doc(
        "e",
        "Return true if e evaluates to a function, and false otherwise.",
    )
    .tests(Type::Lambda),
    op("functionArgs", 1, function_args).doc(
        "f",
        "Return a set containing the names of the formal arguments expected by the function f, each mapped to whether it has a default value.",
    ),
    op("toString", 1, to_string).doc(
        "e",
        "Convert the expression e to a string: a string, path, integer, float, Boolean, null, list, or set with __toString or outPath.",
    ),
    op("import", 1, import).doc(
        "path",
        "Load, parse, and return the Nix expression in the file path (default.nix in it if path is a directory).",
    ),
    op("scopedImport", 2, scoped_import).doc(
        "scope path",
        "Like import, with the attributes of the set scope in scope in the file's expression.",
    ),
    op("findFile", 2, find_file).doc(
        "search-path lookup-path",
        "Find lookup-path in search-path (a list of { prefix; path; } sets), as <lookup-path> does with nixPath.",
    ),
    op("getEnv", 1, get_env).doc(
        "s",
        "Return the value of the environment variable s, or an empty string if the variable does not exist or evaluation is pure.",
    ),
    op("placeholder", 1, placeholder).doc(
        "output",
        "Return an output placeholder string for the specified output that will be substituted by the corresponding output path at build time.",
    ),
    op("unsafeGetAttrPos", 2, unsafe_get_attr_pos).doc(
        "s set",
        "Return the position { file; line; column; } of the attribute named s from set, or null.",
    ),
    op("break", 1, break_).doc(
        "v",
        "In debug mode, pause Nix expression evaluation and enter the REPL; otherwise (always, in rocmx) return the argument v.",
    ),
];

/// Throw an error message s. This usually aborts Nix expression evaluation, but tryEval can catch it.
fn throw(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let msg = ev.coerce_to_string(&a[0], CoerceMode::Interpolation)?;
    raise(EvalError::new(ErrorKind::Throw, msg.as_str()))
}

/// Abort Nix expression evaluation and print the error message s; tryEval cannot catch it.
fn abort(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let msg = ev.coerce_to_string(&a[0], CoerceMode::Interpolation)?;
    raise(EvalError::abort(msg.as_str()))
}

/// Evaluate e1, then evaluate and return e2.
fn seq(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    ev.force(&a[0])?;
    ev.force(&a[1])
}

/// Like seq e1 e2, except that e1 is evaluated deeply: if it is a list or set, its elements or attributes are also evaluated recursively.
fn deep_seq(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    ev.force_deep(&a[0])?;
    ev.force(&a[1])
}

/// Try to shallowly evaluate e: { success = true; value = e; }, or { success = false; value = false; } when throw or assert failed.
fn try_eval(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    match ev.force(&a[0]).map_err(Raised::take) {
        Ok(v) => Ok(mk_attrs(vec![("success", Value::bool(true)), ("value", v)])),
        Err(e) if e.is_catchable() => Ok(mk_attrs(vec![
            ("success", Value::bool(false)),
            ("value", Value::bool(false)),
        ])),
        Err(e) => Err(e.into()),
    }
}

fn trace_message(ev: &mut Evaluator, v: &Value) -> EResult<String> {
    let v = ev.force(v)?;
    Ok(match &v {
        Value::String(s) => s.as_str().to_string(),
        other => print::print_value(other),
    })
}

/// Evaluate e1 and print its abstract syntax representation on standard error. Then return e2.
fn trace(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let msg = trace_message(ev, &a[0])?;
    (ev.on_trace)(&format!("trace: {msg}"));
    ev.force(&a[1])
}

/// Return e2; with --trace-verbose (which rocmx does not have) Nix first prints e1 on standard error.
fn trace_verbose(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    ev.force(&a[1])
}

/// Evaluate e1, which must be a string, and print it on standard error as a warning. Then return e2.
fn warn(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let msg = ev.expect_string(&a[0])?;
    if ev.settings.abort_on_warn {
        return raise(EvalError::new(
            ErrorKind::Eval,
            format!(
                "{} (an evaluation warning, fatal because of abort-on-warn)",
                msg.as_str()
            ),
        ));
    }
    (ev.on_trace)(&format!("evaluation warning: {}", msg.as_str()));
    ev.force(&a[1])
}

/// Evaluate value; if that fails, add the string context to the error's trace.
fn add_error_context(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    // The error is taken out of flight before the context is evaluated.
    let r = ev.force(&a[1]).map_err(Raised::take);
    match r {
        Ok(v) => Ok(v),
        Err(e) => {
            let ctx = ev
                .coerce_to_string(&a[0], CoerceMode::Interpolation)
                .map(|s| s.as_str().to_string())
                .unwrap_or_default();
            raise::<Value>(e).frame(None, || ctx)
        }
    }
}

/// Return a string representing the type of the value e: int, bool, string, path, null, set, list, lambda or float.
fn type_of(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    Ok(Value::str(ev.forced_type(&a[0])?.type_of()))
}

/// The type predicates' function (`isInt`, …), for a call that passes one as
/// a value; a direct call is answered by the caller (`PrimOp::tests`).
fn is_type(ev: &mut Evaluator, a: Args, t: Type) -> RResult<Value> {
    Ok(Value::bool(ev.forced_type(&a[0])? == t))
}

/// Return true if e evaluates to null, and false otherwise (equivalent to e == null).
fn is_null(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    is_type(ev, a, Type::Null)
}

/// Return true if e evaluates to an integer, and false otherwise.
fn is_int(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    is_type(ev, a, Type::Int)
}

/// Return true if e evaluates to a float, and false otherwise.
fn is_float(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    is_type(ev, a, Type::Float)
}

/// Return true if e evaluates to a bool, and false otherwise.
fn is_bool(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    is_type(ev, a, Type::Bool)
}

/// Return true if e evaluates to a string, and false otherwise.
fn is_string(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    is_type(ev, a, Type::String)
}

/// Return true if e evaluates to a path, and false otherwise.
fn is_path(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    is_type(ev, a, Type::Path)
}

/// Return true if e evaluates to a list, and false otherwise.
fn is_list(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    is_type(ev, a, Type::List)
}

/// Return true if e evaluates to a set, and false otherwise.
fn is_attrs(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    is_type(ev, a, Type::Set)
}

/// Return true if e evaluates to a function, and false otherwise.
fn is_function(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    is_type(ev, a, Type::Lambda)
}

/// Return a set containing the names of the formal arguments expected by the function f, each mapped to whether it has a default value.
fn function_args(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let f = ev.force(&a[0])?;
    match &f {
        Value::Lambda(c) => match &c.def.param {
            crate::eval::ir::IrParam::Formals {
                formals, positions, ..
            } => Ok(Value::attrs(crate::value::Attrs::from_unsorted_pos(
                formals
                    .iter()
                    .zip(positions)
                    .map(|((n, d), p)| (*n, Value::bool(d.is_some()), (*p).into()))
                    .collect(),
            ))),
            _ => Ok(mk_attrs(vec![])),
        },
        Value::PrimOp(_) => Ok(mk_attrs(vec![])),
        other => raise(ev.type_error("a function", other)),
    }
}

/// Convert the expression e to a string: a string, path, integer, float, Boolean, null, list, or set with __toString or outPath.
fn to_string(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let s = ev.coerce_to_string(&a[0], CoerceMode::ToString)?;
    Ok(Value::String(s))
}

/// The path an `import`-like builtin should read.
fn import_path(ev: &mut Evaluator, v: &Value) -> EResult<PathBuf> {
    let (p, ctx) = super::fs::coerce_to_path_ctx(ev, v)?;
    super::fs::check_import_from_derivation(ev, &ctx)?;
    Ok(p)
}

/// Load, parse, and return the Nix expression in the file path (default.nix in it if path is a directory).
fn import(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let p = import_path(ev, &a[0])?;
    Ok(ev.import(&p)?).frame(None, || format!("while importing '{}'", p.display()))
}

/// Like import, with the attributes of the set scope in scope in the file's expression.
fn scoped_import(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    // `scopedImport attrs path`: the file is evaluated with the names of `attrs`
    // bound lexically between the globals and the file, so they shadow builtins
    // (`import`, `builtins`, …) as in Nix. Not cached: each scope differs.
    let scope = ev.expect_attrs(&a[0])?;
    let mut p = import_path(ev, &a[1])?;
    if p.is_dir() {
        p.push("default.nix");
    }
    ev.check_tracked(&p)?;
    let real = ev.store.realise_path(&p).unwrap_or_else(|| p.clone());
    let text = std::fs::read_to_string(&real).map_err(|e| {
        EvalError::new(
            ErrorKind::Io,
            format!("reading file '{}': {e}", p.display()),
        )
    })?;
    let base = p.parent().unwrap_or(Path::new("/")).to_path_buf();
    let names: Vec<crate::value::Sym> = scope.keys().cloned().collect();
    let values: Vec<Value> = scope.values().cloned().collect();
    let ir = ev.compile_source_scoped(
        p.display().to_string(),
        Some(p.clone()),
        text.into(),
        &base,
        Some(&names),
    )?;
    let env =
        crate::eval::ir::Env::new(Some(ev.globals()), crate::eval::ir::Slots::from_vec(values));
    ev.eval(&ir, &env)
}

/// Find lookup-path in search-path (a list of { prefix; path; } sets), as <lookup-path> does with nixPath.
fn find_file(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let list = ev.expect_list(&a[0])?;
    let name = ev.expect_string(&a[1])?;
    let name = name.as_str().to_string();
    for entry in list.iter() {
        let e = ev.expect_attrs(entry)?;
        let prefix = match e.get("prefix") {
            Some(p) => ev.expect_string(&p.clone())?.as_str().to_string(),
            None => String::new(),
        };
        let Some(path) = e.get("path").cloned() else {
            return raise(EvalError::new(
                ErrorKind::Eval,
                "attribute 'path' missing in search path entry",
            ));
        };
        let path = ev
            .coerce_to_string(&path, CoerceMode::NoCopy)?
            .as_str()
            .to_string();
        let rest = if prefix.is_empty() {
            Some(name.as_str())
        } else if name == prefix {
            Some("")
        } else {
            name.strip_prefix(&format!("{prefix}/"))
        };
        let Some(rest) = rest else { continue };
        let candidate = if rest.is_empty() {
            PathBuf::from(&path)
        } else {
            Path::new(&path).join(rest)
        };
        let candidate = if candidate.is_absolute() {
            candidate
        } else {
            std::env::current_dir().unwrap_or_default().join(candidate)
        };
        if candidate.exists() {
            return Ok(Value::Path(std::rc::Rc::new(
                crate::eval::compile::canon_path(&candidate.to_string_lossy()),
            )));
        }
    }
    if let Some(text) = corepkg(&name) {
        let file = name.rsplit('/').next().unwrap_or("corepkg.nix");
        let p = ev.store.add_text(file, text, &Default::default())?;
        return Ok(Value::Path(std::rc::Rc::new(PathBuf::from(
            p.to_absolute(),
        ))));
    }
    // Thrown, so `tryEval <x>` can catch it as in Nix.
    raise(EvalError::new(
        ErrorKind::Throw,
        format!("file '{name}' was not found in the Nix search path (add it using $NIX_PATH, $ROCMX_PATH or -I)"),
    ))
}

/// Files reachable as `<nix/…>` when no search path entry provides them, as
/// Nix's built-in "corepkgs" are. `fetchurl.nix` makes a fixed-output
/// derivation that the built-in `builtin:fetchurl` builder realises.
fn corepkg(name: &str) -> Option<&'static str> {
    match name {
        "nix/fetchurl.nix" => Some(
            r#"{ url, sha256 ? "", hash ? "", name ? baseNameOf (toString url),
  executable ? false, unpack ? false,
  outputHashMode ? if unpack || executable then "recursive" else "flat" }:
derivation {
  inherit name url executable unpack outputHashMode;
  builder = "builtin:fetchurl";
  system = "builtin";
  outputHash = if hash != "" then hash else sha256;
  outputHashAlgo = if hash != "" then "" else "sha256";
  urls = [ url ];
  preferLocalBuild = true;
}
"#,
        ),
        _ => None,
    }
}

/// Return the value of the environment variable s, or an empty string if the variable does not exist or evaluation is pure.
fn get_env(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let name = ev.expect_string(&a[0])?;
    let v = if ev.settings.impure {
        std::env::var(name.as_str()).unwrap_or_default()
    } else {
        String::new()
    };
    Ok(Value::str(v))
}

/// `placeholder "out"`: Nix's hash placeholder, `/` + nix32(sha256("nix-output:out")).
pub(crate) fn output_placeholder(output: &str) -> String {
    let digest = sha2::Sha256::digest(format!("nix-output:{output}").as_bytes());
    let h = rocmx_store::Hash::new(rocmx_store::HashAlgo::Sha256, &digest).map(|h| h.to_nix32());
    format!("/{}", h.unwrap_or_default())
}

/// Return an output placeholder string for the specified output that will be substituted by the corresponding output path at build time.
fn placeholder(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let name = ev.expect_string(&a[0])?;
    Ok(Value::str(output_placeholder(name.as_str())))
}

/// Return the position { file; line; column; } of the attribute named s from set, or null.
///
/// `unsafeGetAttrPos name set`: `{ file, line, column }` of where `name` was
/// defined, or null when unknown (made by a builtin) or absent.
fn unsafe_get_attr_pos(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let name = ev.expect_string(&a[0])?;
    let set = ev.expect_attrs(&a[1])?;
    let Some(pos) = set.get_pos(name.as_str()) else {
        return Ok(Value::Null);
    };
    let (line, column) = ev.sources.line_col(pos.file, pos.span.start);
    let file = ev
        .sources
        .file(pos.file)
        .map(|f| f.name.clone())
        .unwrap_or_default();
    Ok(mk_attrs(vec![
        ("column", Value::Int(column as i64)),
        ("file", Value::str(file)),
        ("line", Value::Int(line as i64)),
    ]))
}

/// In debug mode, pause Nix expression evaluation and enter the REPL; otherwise (always, in rocmx) return the argument v.
fn break_(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    ev.force(&a[0])
}

#[cfg(test)]
mod tests {
    #[test]
    fn placeholder_matches_nix() {
        assert_eq!(
            super::output_placeholder("out"),
            "/1rz4g4znpzjwh1xymhjpm42vipw92pr73vdgl6xs1hycac8kf2n9"
        );
    }
}
