//! One `rocmx repl` session: the evaluator, the variables in scope and what a
//! line does.
//!
//! A line is an expression (evaluated and printed), `NAME = EXPR` (binds NAME,
//! lazily, for later lines; EXPR sees the previous NAME) or a `:command`.
//! Variables sit in a scope between the globals and the line, so they shadow
//! builtins as `let` would. Errors are rendered as `rocmx eval` renders them
//! and the session goes on.
//!
//! The evaluator writes to the local store (`.drv` files, copied sources) as
//! `rocmx build`'s does, so `:b` can build what was evaluated; when the store
//! cannot be opened the session evaluates in memory and `:b`/`:lf` say why they
//! cannot run.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::rc::Rc;

use rocmx_lang::eval::error::did_you_mean;
use rocmx_lang::eval::ir::{Env, Slots};
use rocmx_lang::eval::{EResult, ErrorKind, EvalError};
use rocmx_lang::flake::load::LockMode;
use rocmx_lang::store::MemStore;
use rocmx_lang::value::{Attrs, Sym};
use rocmx_lang::{EvalSettings, Evaluator, Value};
use rocmx_store::LocalStore;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::print::{self, Depth};
use super::ReplArgs;
use crate::cmd::common::{absolute, auto_args, auto_call, cwd};
use crate::evalstore::LocalEvalStore;
use crate::flake::{FlakeOpts, Installable};

/// What the loop does after a line.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Outcome {
    Continue,
    Quit,
}

/// The commands: names (the first is the short one), argument, description.
pub(super) const COMMANDS: &[(&[&str], &str, &str)] = &[
    (&["?", "help"], "", "Show this help"),
    (
        &["b", "build"],
        "EXPR",
        "Build a derivation and print its outputs",
    ),
    (&["doc"], "BUILTIN", "Show the documentation of a builtin"),
    (
        &["l", "load"],
        "FILE",
        "Load a file's attribute set into scope",
    ),
    (
        &["lf", "load-flake"],
        "FLAKEREF",
        "Load a flake's outputs into scope",
    ),
    (&["p", "print"], "EXPR", "Evaluate and print deeply"),
    (&["q", "quit"], "", "Exit"),
    (&["t", "type"], "EXPR", "Show the type of EXPR"),
    (
        &["te", "trace-enable"],
        "[BOOL]",
        "Show, hide or toggle error traces",
    ),
];

pub(super) const KEYWORDS: &[&str] = &[
    "assert", "else", "if", "in", "inherit", "let", "or", "rec", "then", "with",
];

/// Where evaluation writes store objects.
enum Stores {
    Local {
        store: Rc<LocalStore>,
        eval: Rc<LocalEvalStore>,
    },
    Memory(Rc<MemStore>, String),
}

pub(crate) struct Session {
    pub(super) ev: Evaluator,
    stores: Stores,
    /// The variables: `:l`, `:lf` and `NAME = EXPR` add here.
    pub(super) scope: BTreeMap<Sym, Value>,
    auto: Rc<Attrs>,
    flake: FlakeOpts,
    show_trace: bool,
    /// The builtins bound without `builtins.` (found on first completion).
    pub(super) plain_globals: Option<Vec<String>>,
    /// True while `:b` builds: the realiser cannot be cancelled, so a Ctrl-C then ends
    /// the repl (exit 130), as it ends `rocmx build`, instead of stopping an evaluation.
    pub(super) building: Arc<AtomicBool>,
}

fn err(msg: impl Into<String>) -> Box<EvalError> {
    EvalError::new(ErrorKind::Eval, msg)
}

impl Session {
    /// A session evaluating with `settings` (from [`ReplArgs::eval`]).
    pub(crate) fn new(
        args: &ReplArgs,
        settings: EvalSettings,
        store_opt: &crate::cmd::StoreOpt,
    ) -> Session {
        let (mut ev, stores) = match crate::cmd::common::open_store(store_opt) {
            Ok(store) => {
                let store = Rc::new(store);
                let eval = Rc::new(LocalEvalStore::new(store.clone()));
                let mut ev = Evaluator::new(settings, eval.clone());
                ev.fetcher = Some(Rc::new(crate::flake::LazyFetcher::new(store.clone())));
                (ev, Stores::Local { store, eval })
            }
            Err(e) => {
                let why = match e {
                    crate::cmd::fail::Fail::Msg(m) => m,
                    _ => "the store cannot be opened".into(),
                };
                eprintln!("warning: {why}; evaluating without a store (:b and :lf cannot run)");
                let mem = Rc::new(MemStore::new());
                (
                    Evaluator::new(settings, mem.clone()),
                    Stores::Memory(mem, why),
                )
            }
        };
        let auto = match auto_args(&mut ev, &args.eval.arg, &args.eval.argstr, &cwd()) {
            Ok(a) => a,
            Err(e) => {
                eprint!("{}", ev.sources.render(&e, args.eval.show_trace));
                Rc::new(Attrs::new())
            }
        };
        Session {
            ev,
            stores,
            scope: BTreeMap::new(),
            auto,
            flake: args.flake.clone(),
            show_trace: args.eval.show_trace,
            plain_globals: None,
            building: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Ends the session without tearing the evaluator's values down.
    pub(crate) fn close(self) {
        if let Stores::Memory(m, _) = &self.stores {
            m.close();
        }
        std::mem::forget(self);
    }

    fn report(&self, e: &EvalError) {
        eprint!("{}", self.ev.sources.render(e, self.show_trace));
    }

    fn say(&self, text: &str) {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{text}");
        let _ = out.flush();
    }

    /// The argument of `rocmx repl`: a file (or `<NAME>`), or a flake.
    pub(crate) fn load_target(&mut self, target: &str) {
        let r = if target.starts_with('<') {
            self.load_file(target)
        } else {
            match crate::flake::parse_installable(target, &cwd()) {
                Ok(Installable::File(_)) => self.load_file(target),
                Ok(Installable::Flake { .. }) => self.load_flake(target),
                Err(e) => Err(e),
            }
        };
        if let Err(e) = r {
            self.report(&e);
        }
        self.flush();
    }

    /// Does what `input` (one or more lines) says.
    pub(crate) fn handle(&mut self, input: &str) -> Outcome {
        let text = input.trim();
        if is_blank(text) {
            return Outcome::Continue;
        }
        let r = if let Some(cmd) = text.strip_prefix(':') {
            match self.command(cmd) {
                Ok(Outcome::Quit) => return Outcome::Quit,
                Ok(Outcome::Continue) => Ok(()),
                Err(e) => Err(e),
            }
        } else if let Some((name, expr)) = split_binding(text) {
            self.bind(name, expr)
        } else {
            self.show(text, Depth::Shallow)
        };
        if let Err(e) = r {
            self.report(&e);
        }
        self.flush();
        Outcome::Continue
    }

    /// Writes the `.drv` files and texts evaluation made, as Nix does at once.
    fn flush(&mut self) {
        if let Stores::Local { eval, .. } = &self.stores {
            if let Err(e) = eval.flush() {
                self.report(&e);
            }
        }
    }

    /// Compiles `text` in the session's scope and returns it unevaluated.
    fn delay(&mut self, text: &str) -> EResult<Value> {
        let names: Vec<Sym> = self.scope.keys().cloned().collect();
        let values: Slots = self.scope.values().cloned().collect();
        let ir = self.ev.compile_source_scoped(
            "«string»".into(),
            None,
            text.into(),
            &cwd(),
            Some(&names),
        )?;
        let env = Env::new(Some(self.ev.globals()), values);
        Ok(self.ev.delay(&ir, &env))
    }

    /// Evaluates `text` in the session's scope to its outermost constructor.
    pub(super) fn eval(&mut self, text: &str) -> EResult<Value> {
        let v = self.delay(text)?;
        Ok(self.ev.force(&v)?)
    }

    fn show(&mut self, text: &str, depth: Depth) -> EResult<()> {
        let v = self.eval(text)?;
        let shown = print::print(&mut self.ev, &v, depth)?;
        self.say(&shown);
        Ok(())
    }

    fn bind(&mut self, name: &str, expr: &str) -> EResult<()> {
        let v = self.delay(expr)?;
        self.scope.insert(Sym::new(name), v);
        Ok(())
    }

    fn command(&mut self, line: &str) -> EResult<Outcome> {
        let (name, arg) = match line.find(char::is_whitespace) {
            Some(i) => (&line[..i], line[i..].trim()),
            None => (line, ""),
        };
        let Some((names, want, _)) = COMMANDS.iter().find(|(n, _, _)| n.contains(&name)) else {
            let all = COMMANDS.iter().flat_map(|(n, _, _)| n.iter().copied());
            let hint = did_you_mean(name, all)
                .map(|s| format!("; did you mean ':{s}'?"))
                .unwrap_or_default();
            return Err(err(format!(
                "unknown command ':{name}'{hint} (:? lists the commands)"
            )));
        };
        let needs_arg = !want.is_empty() && !want.starts_with('[');
        if needs_arg && arg.is_empty() {
            return Err(err(format!(":{} needs an argument: {want}", names[0])));
        }
        match names[0] {
            "?" => self.say(&help()),
            "q" => return Ok(Outcome::Quit),
            "t" => {
                let v = self.eval(arg)?;
                self.say(print::type_name(&v));
            }
            "p" => self.show(arg, Depth::Deep)?,
            "l" => self.load_file(arg)?,
            "lf" => self.load_flake(arg)?,
            "b" => self.build(arg)?,
            "doc" => self.doc(arg)?,
            "te" => {
                self.show_trace = match arg {
                    "" => !self.show_trace,
                    "true" | "on" | "1" => true,
                    "false" | "off" | "0" => false,
                    other => return Err(err(format!(":te takes true or false, not '{other}'"))),
                };
                self.say(if self.show_trace {
                    "Error traces are shown."
                } else {
                    "Error traces are hidden."
                });
            }
            other => unreachable!("command :{other} has no handler"),
        }
        Ok(Outcome::Continue)
    }

    /// Adds the attributes of `v` (a set, or a function auto-called into one)
    /// to the scope.
    fn add_attrs(&mut self, v: &Value, what: &str) -> EResult<()> {
        let v = auto_call(&mut self.ev, v, &self.auto)?;
        let Value::Attrs(a) = self.ev.force(&v)? else {
            return Err(err(format!(
                "{what} is {}, not a set; only a set's attributes can be loaded",
                print::type_name(&self.ev.force(&v)?)
            )));
        };
        for (k, x) in a.iter() {
            self.scope.insert(*k, x.clone());
        }
        self.say(&format!("Added {} variables.", a.len()));
        Ok(())
    }

    /// `:l FILE`: a file (a directory's default.nix, or `<NAME>` from the
    /// search path).
    pub(crate) fn load_file(&mut self, arg: &str) -> EResult<()> {
        let v = if arg.starts_with('<') && arg.ends_with('>') {
            let p = self.eval(arg)?;
            match p {
                Value::Path(p) => self.ev.eval_file(&p)?,
                _ => return Err(err(format!("'{arg}' is not a path"))),
            }
        } else {
            let path = absolute(Path::new(arg), &cwd());
            self.ev.eval_file(&path)?
        };
        self.add_attrs(&v, &format!("the file '{arg}'"))
    }

    /// `:lf FLAKEREF`: the flake's outputs (and `inputs`, `outPath`, …), or
    /// with `#ATTRPATH` that attribute's attributes.
    pub(crate) fn load_flake(&mut self, arg: &str) -> EResult<()> {
        let store = match &self.stores {
            Stores::Local { store, .. } => store.clone(),
            Stores::Memory(_, why) => {
                return Err(err(format!("loading a flake needs the store: {why}")))
            }
        };
        let (reference, fragment) = match crate::flake::parse_installable(arg, &cwd())? {
            Installable::Flake {
                reference,
                fragment,
            } => (reference, fragment),
            Installable::File(_) => {
                return Err(err(format!(
                    "'{arg}' is not a flake: it is not a directory with a flake.nix"
                )))
            }
        };
        let fetcher = crate::flake::fetcher(&store)?;
        let loaded = crate::flake::load_root(
            &mut self.ev,
            &fetcher,
            &reference,
            LockMode::Use,
            &self.flake,
        )?;
        let v = if fragment.is_empty() {
            loaded.value.clone()
        } else {
            let system = self.ev.settings.system.clone();
            rocmx_lang::flake::installable::resolve(
                &mut self.ev,
                &loaded.value,
                &fragment,
                &system,
                &reference.to_string(),
            )?
            .0
        };
        self.add_attrs(&v, &format!("the flake '{arg}'"))
    }

    /// `:b EXPR`: builds the derivation and prints its outputs.
    fn build(&mut self, arg: &str) -> EResult<()> {
        let v = self.eval(arg)?;
        let is_drv = match &v {
            Value::Attrs(a) => match a.get("type") {
                Some(t) => {
                    matches!(self.ev.force(&t.clone())?, Value::String(s) if s.as_str() == "derivation")
                }
                None => false,
            },
            _ => false,
        };
        if !is_drv {
            return Err(err(format!(
                "the expression is {}, not a derivation, so it cannot be built",
                print::type_name(&v)
            )));
        }
        let (store, eval) = match &self.stores {
            Stores::Local { store, eval } => (store.clone(), eval.clone()),
            Stores::Memory(_, why) => return Err(err(format!("building needs the store: {why}"))),
        };
        self.building.store(true, Ordering::Relaxed);
        let r = crate::cmd::build::build_value(&mut self.ev, &eval, &store, &v);
        self.building.store(false, Ordering::Relaxed);
        match r? {
            Ok(built) => {
                let mut text = String::from("This derivation produced the following outputs:");
                for (name, path) in built {
                    text.push_str(&format!("\n  {name} -> {path}"));
                }
                self.say(&text);
                Ok(())
            }
            Err(msg) => Err(err(msg)),
        }
    }

    /// `:doc NAME`: the builtin's entry in the table.
    fn doc(&mut self, arg: &str) -> EResult<()> {
        if let Some(entry) = super::docs::lookup(arg) {
            self.say(&super::docs::render(entry));
            return Ok(());
        }
        // An expression that evaluates to a builtin (`f` after `f = map`).
        if let Ok(Value::PrimOp(app)) = self.eval(arg) {
            if let Some(entry) = super::docs::lookup(app.op.name) {
                self.say(&super::docs::render(entry));
                return Ok(());
            }
            return Err(err(format!(
                "the builtin '{}' has no documentation",
                app.op.name
            )));
        }
        let hint = did_you_mean(arg, super::docs::names())
            .map(|s| format!("; did you mean '{s}'?"))
            .unwrap_or_default();
        Err(err(format!(
            "'{arg}' is not a builtin; :doc documents builtins{hint}"
        )))
    }
}

/// `:?`'s text.
fn help() -> String {
    let mut s = String::from(
        "The following commands are available:\n\n  <expr>                     Evaluate and print expression\n  <x> = <expr>               Bind expression to variable\n",
    );
    for (names, arg, what) in COMMANDS {
        let name = if names.len() > 1 {
            format!(":{}, :{}", names[0], names[1])
        } else {
            format!(":{}", names[0])
        };
        let left = if arg.is_empty() {
            name
        } else {
            format!("{name} {arg}")
        };
        s.push_str(&format!("  {left:<26} {what}\n"));
    }
    s.push_str("\nTab completes variables, builtins and attribute paths (foo.ba<Tab>).");
    s
}

/// Only white space and comments.
fn is_blank(text: &str) -> bool {
    text.lines().all(|l| {
        let l = l.trim();
        l.is_empty() || l.starts_with('#')
    })
}

/// `NAME = EXPR` (not `a == b`): the name and the expression.
fn split_binding(line: &str) -> Option<(&str, &str)> {
    let eq = line.find('=')?;
    let name = line[..eq].trim();
    let rest = &line[eq + 1..];
    if rest.starts_with('=') || !is_identifier(name) {
        return None;
    }
    Some((name, rest.trim()))
}

fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    let Some(first) = chars.next() else {
        return false;
    };
    (first.is_ascii_alphabetic() || first == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '\'' | '-'))
        && !KEYWORDS.contains(&s)
}

/// Whether `input` is an expression that goes on (an open bracket, string,
/// `let` without `in`…): the parser stopped at its end.
pub(crate) fn is_incomplete(input: &str) -> bool {
    let text = input.trim();
    if text.starts_with(':') {
        return false;
    }
    let expr = match split_binding(text) {
        Some((_, e)) => e,
        None if is_blank(text) => return false,
        None => text,
    };
    match rocmx_lang::syntax::parse(expr) {
        Ok(_) => false,
        Err(e) => e.is_incomplete(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bindings() {
        assert_eq!(split_binding("x = 1"), Some(("x", "1")));
        assert_eq!(split_binding("foo-bar' =2"), Some(("foo-bar'", "2")));
        assert_eq!(split_binding("x == 1"), None);
        assert_eq!(split_binding("{ a = 1; }"), None);
        assert_eq!(split_binding("a: a = 1"), None);
        assert_eq!(split_binding("let = 1"), None);
    }

    #[test]
    fn incomplete() {
        assert!(is_incomplete("{ a = 1;"));
        assert!(is_incomplete("x = ["));
        assert!(is_incomplete("''abc"));
        assert!(is_incomplete("let x = 1; in"));
        assert!(!is_incomplete("1 )"));
        assert!(!is_incomplete(":p {"));
        assert!(!is_incomplete("# just a comment"));
        assert!(!is_incomplete("1 + 1"));
    }
}
