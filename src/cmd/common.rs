//! Helpers shared by the commands that evaluate (`eval`, `build`): auto-calling
//! with `--arg`/`--argstr`, `-A` attribute paths, paths relative to the
//! working directory. Nothing here prints.

use std::path::{Path, PathBuf};
use std::rc::Rc;

use rocmx_lang::eval::error::did_you_mean;
use rocmx_lang::eval::{EResult, ErrorKind, EvalError};
use rocmx_lang::value::{Attrs, Sym};
use rocmx_lang::{Evaluator, Value};

/// The working directory, or `/` when it cannot be read.
pub(crate) fn cwd() -> PathBuf {
    std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"))
}

/// `f` made absolute against `base`.
pub(crate) fn absolute(f: &Path, base: &Path) -> PathBuf {
    if f.is_absolute() {
        f.to_path_buf()
    } else {
        base.join(f)
    }
}

/// The `--arg NAME EXPR` / `--argstr NAME STR` values (flattened pairs) as a
/// set, each `--arg` expression evaluated lazily.
pub(crate) fn auto_args(
    ev: &mut Evaluator,
    arg: &[String],
    argstr: &[String],
    base: &Path,
) -> EResult<Rc<Attrs>> {
    let mut entries = Vec::new();
    for pair in arg.chunks(2) {
        if let [name, expr] = pair {
            let ir =
                ev.compile_source(format!("«--arg {name}»"), None, expr.as_str().into(), base)?;
            let env = ev.globals().clone();
            let v = ev.delay(&ir, &env);
            entries.push((Sym::new(name), v));
        }
    }
    for pair in argstr.chunks(2) {
        if let [name, s] = pair {
            entries.push((Sym::new(name), Value::str(s.clone())));
        }
    }
    Ok(Rc::new(Attrs::from_unsorted(entries)))
}

/// Calls a function with formals on the matching auto-arguments; other values
/// are returned unchanged.
pub(crate) fn auto_call(ev: &mut Evaluator, v: &Value, auto: &Rc<Attrs>) -> EResult<Value> {
    let f = ev.force(v)?;
    if let Value::Lambda(c) = &f {
        if let rocmx_lang::eval::ir::IrParam::Formals {
            formals, ellipsis, ..
        } = &c.def.param
        {
            let passed: Vec<(Sym, Value)> = if *ellipsis {
                auto.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
            } else {
                formals
                    .iter()
                    .filter_map(|(n, _)| auto.get(n).map(|v| (n.clone(), v.clone())))
                    .collect()
            };
            return ev.call(&f, Value::attrs(Attrs::from_unsorted(passed)));
        }
    }
    Ok(f)
}

/// Splits an `-A` path at dots outside double quotes (the language's rule for
/// attribute paths, shared with flake installables).
pub(crate) fn split_attr_path(p: &str) -> EResult<Vec<String>> {
    rocmx_lang::flake::installable::split_attr_path(p)
        .map_err(|e| EvalError::new(ErrorKind::Eval, e))
}

/// One step of the `-A` path `path`: an attribute of a set or an index into a list
/// (errors name the whole path, as Nix's do).
pub(crate) fn select(ev: &mut Evaluator, v: &Value, name: &str, path: &str) -> EResult<Value> {
    let f = ev.force(v)?;
    match &f {
        Value::Attrs(a) => match a.get(name) {
            Some(x) => ev.force(&x.clone()),
            None => {
                let hint = did_you_mean(name, a.keys().map(|k| k.as_str()))
                    .map(|s| format!("; did you mean '{s}'?"))
                    .unwrap_or_default();
                Err(EvalError::new(
                    ErrorKind::Eval,
                    format!("attribute '{name}' in selection path '{path}' not found{hint}"),
                ))
            }
        },
        Value::List(l) => {
            let i: usize = name.parse().map_err(|_| {
                EvalError::new(
                    ErrorKind::Eval,
                    format!("'{name}' is not a valid list index"),
                )
            })?;
            match l.get(i) {
                Some(x) => ev.force(&x.clone()),
                None => Err(EvalError::new(
                    ErrorKind::Eval,
                    format!("list index {i} in selection path '{path}' is out of bounds"),
                )),
            }
        }
        other => Err(EvalError::new(
            ErrorKind::Type,
            format!(
                "the expression selected by the selection path '{path}' should be a set but is {}",
                other.type_().described()
            ),
        )),
    }
}

/// `1.23 MiB`, as Nix prints download sizes (KiB below a mebibyte).
pub(crate) fn human_size(bytes: u64) -> String {
    if bytes < 1 << 20 {
        format!("{:.2} KiB", bytes as f64 / 1024.0)
    } else if bytes < 1 << 30 {
        format!("{:.2} MiB", bytes as f64 / (1u64 << 20) as f64)
    } else {
        format!("{:.2} GiB", bytes as f64 / (1u64 << 30) as f64)
    }
}

/// Where `cmd` is found on `PATH`, if anywhere (for optional tools: diffoscope, dot).
pub(crate) fn on_path(cmd: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(cmd))
        .find(|p| p.is_file())
}
