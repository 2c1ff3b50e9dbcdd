//! `rocmx eval`: evaluate a file or expression and print the value.
//!
//! Behaves like `nix-instantiate --eval` (the options are the same, so the Nix
//! language test suite's runner drives it unchanged). Owns option handling, the
//! search path (`-I`, `ROCMX_PATH`, `NIX_PATH`), auto-calling with `--arg`/
//! `--argstr`, `-A` selection and output. Evaluation itself is `rocmx-lang`'s.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use clap::Args;

use super::common::{auto_args, auto_call, cwd, select, split_attr_path};
use super::evalopts::{file_arg, EvalOpts};
use rocmx_lang::eval::{EResult, ErrorKind, EvalError};
use rocmx_lang::store::MemStore;
use rocmx_lang::value::print;
use rocmx_lang::{EvalSettings, Evaluator};

#[derive(Args, Debug)]
pub struct EvalArgs {
    #[command(flatten)]
    flake: crate::flake::FlakeOpts,
    #[command(flatten)]
    opts: EvalOpts,
    /// The file to evaluate (a directory means its default.nix), or a flake
    /// installable `FLAKEREF#ATTRPATH` (a directory with flake.nix is a flake).
    file: Option<PathBuf>,
    /// Evaluate this expression instead of a file.
    #[arg(short = 'E', long = "expr", value_name = "EXPR")]
    expr: Option<String>,
    /// Force the result completely, not just to its outermost constructor.
    #[arg(long)]
    strict: bool,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
    /// Only parse; exit 0 when the input is syntactically valid.
    #[arg(long)]
    parse: bool,
    /// Select this attribute path from the result (may be repeated).
    #[arg(short = 'A', long = "attr", value_name = "ATTRPATH")]
    attr: Vec<String>,
    /// Write the sources that evaluation copies (path literals, `builtins.path`,
    /// `toFile`) to the store for real, as `nix-instantiate --eval --read-write-mode`
    /// does; without it they are only hashed.
    #[arg(long)]
    read_write_mode: bool,
    /// Hide the trace (the default).
    #[arg(long, hide = true)]
    no_show_trace: bool,
    /// Accepted for compatibility with `nix-instantiate --eval`.
    #[arg(long, hide = true)]
    eval: bool,
    /// Allow access to the environment (accepted for compatibility; the default).
    #[arg(long, hide = true)]
    impure: bool,
}

pub fn run(args: EvalArgs, store_opt: &super::StoreOpt) -> i32 {
    let settings = match args.opts.settings() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return 2;
        }
    };
    if args.file.is_none() && args.expr.is_none() {
        eprintln!("error: nothing to evaluate; give a FILE or -E EXPR");
        return 2;
    }
    // A flake installable evaluates against the local store (its inputs are
    // fetched into it); anything else stays in memory.
    let flake = match (&args.expr, &args.file) {
        (None, Some(f)) if !args.parse => {
            match crate::flake::parse_installable(&f.to_string_lossy(), &cwd()) {
                Ok(crate::flake::Installable::Flake {
                    reference,
                    fragment,
                }) => Some((reference, fragment)),
                Ok(_) => None,
                Err(e) => {
                    eprintln!("error: {}", e.msg);
                    return 1;
                }
            }
        }
        _ => None,
    };
    if let Some((reference, fragment)) = flake {
        return eval_flake(settings, &args, store_opt, &reference, &fragment);
    }
    if args.read_write_mode {
        return eval_read_write(settings, &args, store_opt);
    }
    let store = Rc::new(MemStore::new());
    let mut ev = Evaluator::new(settings, store.clone());
    let result = evaluate(&mut ev, &args);
    let code = report(ev, result, &args);
    store.close();
    code
}

/// Prints the value (exit 0) or the rendered error (exit 1).
fn report(ev: Evaluator, result: EResult<String>, args: &EvalArgs) -> i32 {
    let code = match result {
        Ok(text) => {
            let _ = writeln!(std::io::stdout().lock(), "{text}");
            0
        }
        Err(e) => {
            eprint!(
                "{}",
                ev.sources
                    .render(&e, args.opts.show_trace && !args.no_show_trace)
            );
            1
        }
    };
    // The process exits next; tearing down the heap value by value would only
    // cost time (and recursion on deep values).
    std::mem::forget(ev);
    code
}

/// `rocmx eval --read-write-mode`: as [`run`], against the local store, so that
/// what evaluation copies is really added (and registered) there.
fn eval_read_write(settings: EvalSettings, args: &EvalArgs, store_opt: &super::StoreOpt) -> i32 {
    let store = match super::common::open_store_or_exit(store_opt) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let eval_store = Rc::new(crate::evalstore::LocalEvalStore::new(store));
    let mut ev = Evaluator::new(settings, eval_store.clone());
    let result = evaluate(&mut ev, args).and_then(|t| eval_store.flush().map(|()| t));
    report(ev, result, args)
}

/// `rocmx eval FLAKEREF#ATTRPATH`: the attribute of the flake, resolved as
/// `rocmx build` resolves it, printed like any value.
fn eval_flake(
    settings: EvalSettings,
    args: &EvalArgs,
    store_opt: &super::StoreOpt,
    reference: &rocmx_lang::flake::FlakeRef,
    fragment: &str,
) -> i32 {
    if !args.opts.arg.is_empty() || !args.opts.argstr.is_empty() || !args.attr.is_empty() {
        eprintln!("error: --arg, --argstr and -A do not apply to a flake; write {reference}#ATTRPATH and --set NAME=VALUE");
        return 2;
    }
    let store = match super::common::open_store_or_exit(store_opt) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let eval_store = Rc::new(crate::evalstore::LocalEvalStore::new(store.clone()));
    let mut ev = Evaluator::new(settings, eval_store.clone());
    let r = (|| -> EResult<String> {
        let fetcher = crate::flake::fetcher(&store)?;
        let loaded = crate::flake::load_root(
            &mut ev,
            &fetcher,
            reference,
            rocmx_lang::flake::load::LockMode::Use,
            &args.flake,
        )?;
        let system = ev.settings.system.clone();
        // An empty fragment is the flake itself, as `nix eval .` does.
        let mut v = if fragment.is_empty() {
            loaded.value.clone()
        } else {
            rocmx_lang::flake::installable::resolve(
                &mut ev,
                &loaded.value,
                fragment,
                &system,
                &reference.to_string(),
            )?
            .0
        };
        if args.strict || args.json {
            v = ev.force_deep(&v)?;
        }
        let text = if args.json {
            rocmx_lang::builtins::value_to_json(&mut ev, &v)?
        } else {
            print::print_value(&ev.force(&v)?)
        };
        eval_store.flush()?;
        Ok(text)
    })();
    report(ev, r, args)
}

fn evaluate(ev: &mut Evaluator, args: &EvalArgs) -> EResult<String> {
    let base = cwd();
    if args.parse {
        match (&args.expr, &args.file) {
            (Some(e), _) => {
                ev.compile_source("«string»".into(), None, e.as_str().into(), &base)?;
            }
            (None, Some(f)) => {
                let path = file_arg(ev, &f.to_string_lossy(), &base)?;
                let text = read_source(&path)?;
                let dir = path.parent().unwrap_or(Path::new("/")).to_path_buf();
                ev.compile_source(
                    path.display().to_string(),
                    Some(path.clone()),
                    text.into(),
                    &dir,
                )?;
            }
            (None, None) => unreachable!("checked by run"),
        }
        return Ok(String::new());
    }
    let root = match (&args.expr, &args.file) {
        (Some(e), _) => ev.eval_string(e, &base)?,
        (None, Some(f)) => {
            let path = file_arg(ev, &f.to_string_lossy(), &base)?;
            ev.eval_file(&path)?
        }
        (None, None) => unreachable!("checked by run"),
    };
    let auto_args = auto_args(ev, &args.opts.arg, &args.opts.argstr, &base)?;
    let mut v = root;
    for path in &args.attr {
        for name in split_attr_path(path)? {
            v = auto_call(ev, &v, &auto_args)?;
            v = select(ev, &v, &name, path)?;
        }
    }
    v = auto_call(ev, &v, &auto_args)?;
    if args.strict || args.json {
        v = ev.force_deep(&v)?;
    }
    if args.json {
        return rocmx_lang::builtins::value_to_json(ev, &v);
    }
    Ok(print::print_value(&v))
}

fn read_source(path: &Path) -> EResult<String> {
    let bytes = std::fs::read(path).map_err(|e| {
        EvalError::new(
            ErrorKind::Io,
            format!("reading file '{}': {e}", path.display()),
        )
    })?;
    String::from_utf8(bytes).map_err(|e| {
        EvalError::new(
            ErrorKind::Parse,
            format!(
                "file '{}' is not valid UTF-8 (at byte {})",
                path.display(),
                e.utf8_error().valid_up_to()
            ),
        )
    })
}
