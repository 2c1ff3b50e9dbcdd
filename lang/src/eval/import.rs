//! Sources into values: parsing and compiling text (lint warnings reported or
//! fatal, `scopedImport`'s extra scope), [`Evaluator::eval_string`], and
//! `import` (each file evaluated once, then cached), with the gate on which
//! paths evaluation may read (`restrict-eval`'s search path, the files a git
//! flake tracks).
//!
//! It must not evaluate an imported file further than `import` returns it (weak
//! head normal form), nor read a path the gate refuses; the builtins that read
//! or copy files ask the same gate ([`Evaluator::check_tracked`],
//! [`Evaluator::is_visible`]).

use std::path::{Path, PathBuf};
use std::rc::Rc;

use super::compile::{self, Compiler};
use super::ir::{Ir, Pos};
use super::{EResult, ErrorKind, EvalError, Evaluator};
use crate::value::{Sym, Thunk, ThunkState, Value};

impl Evaluator {
    // ---- entry points ----------------------------------------------------

    /// Parses and compiles `text`; `path` anchors relative path literals.
    pub fn compile_source(
        &mut self,
        name: String,
        path: Option<PathBuf>,
        text: Rc<str>,
        base_dir: &Path,
    ) -> EResult<Rc<Ir>> {
        self.compile_source_scoped(name, path, text, base_dir, None)
    }

    /// Like [`Self::compile_source`], with an extra scope of `names` between the
    /// globals and the file (used by `scopedImport`); the environment to run the
    /// result in must then hold one slot per name, over the globals.
    pub fn compile_source_scoped(
        &mut self,
        name: String,
        path: Option<PathBuf>,
        text: Rc<str>,
        base_dir: &Path,
        scope: Option<&[Sym]>,
    ) -> EResult<Rc<Ir>> {
        let file = self.sources.add(name.clone(), path, text.clone());
        let ast = crate::syntax::parse(&text).map_err(|e| {
            EvalError::at(
                ErrorKind::Parse,
                if e.is_syntax_error() {
                    format!("syntax error, {}", e.message)
                } else {
                    e.message.clone()
                },
                Pos { file, span: e.span },
            )
        })?;
        let sources = &self.sources;
        let lc = |off: u32| sources.line_col(file, off);
        let globals = compile::GlobalScope {
            names: &self.global_names,
            values: &self.globals,
        };
        let mut c = Compiler::new(
            globals,
            file,
            &name,
            base_dir,
            &text,
            self.settings.lints,
            &lc,
        );
        if let Some(names) = scope {
            c.push_scope(names);
        }
        let ir = c.compile(&ast)?;
        let warnings = std::mem::take(&mut c.warnings);
        for (pos, msg) in warnings {
            if self.settings.abort_on_warn {
                return Err(EvalError::at(
                    ErrorKind::Eval,
                    format!("{msg} (a warning, fatal because of abort-on-warn)"),
                    pos,
                ));
            }
            let line = format!("warning: {msg}\n       at {}:", self.sources.describe(pos));
            (self.on_trace)(&line);
        }
        Ok(ir)
    }

    /// Evaluates an expression given as text (`-E`), relative to `base_dir`.
    pub fn eval_string(&mut self, text: &str, base_dir: &Path) -> EResult<Value> {
        let ir = self.compile_source("«string»".into(), None, text.into(), base_dir)?;
        let env = self.globals.clone();
        Ok(self.eval(&ir, &env)?)
    }

    /// Whether `p` may be seen: not below a tracked git work tree, or tracked
    /// in it.
    pub fn is_visible(&self, p: &Path) -> bool {
        self.allowed(p)
            && self
                .tracked
                .iter()
                .all(|t| t.check(p) != crate::flake::fetch::Tracked::No)
    }

    /// Whether `restrict-eval` lets the evaluation touch `p`: always without it;
    /// with it, when `p` is below a search path entry's directory or the store.
    fn allowed(&self, p: &Path) -> bool {
        if !self.settings.restrict_eval {
            return true;
        }
        let store = self.store.store_dir();
        // A relative `-I` entry counts from the working directory, as the lookup does.
        p.starts_with(store)
            || self
                .settings
                .search_path
                .iter()
                .any(|(_, dir)| std::path::absolute(dir).is_ok_and(|d| p.starts_with(d)))
    }

    /// An error for a path a git flake does not track, or that `restrict-eval`
    /// forbids.
    pub fn check_tracked(&self, p: &Path) -> EResult<()> {
        if !self.allowed(p) {
            return Err(EvalError::new(
                ErrorKind::Io,
                format!(
                    "access to path '{}' is forbidden in restricted mode (restrict-eval); add its directory to the search path with -I DIR",
                    p.display()
                ),
            ));
        }
        match self
            .tracked
            .iter()
            .find(|t| t.check(p) == crate::flake::fetch::Tracked::No)
        {
            None => Ok(()),
            Some(t) => Err(EvalError::new(
                ErrorKind::Io,
                format!(
                    "'{}' is not tracked by git, so the flake in '{}' cannot see it; run 'git add {}'",
                    p.display(),
                    t.top().display(),
                    p.strip_prefix(t.top()).unwrap_or(p).display()
                ),
            )),
        }
    }

    /// Evaluates a file (`import path`), cached per path.
    pub fn eval_file(&mut self, path: &Path) -> EResult<Value> {
        let mut path = path.to_path_buf();
        if path.is_dir() {
            path.push("default.nix");
        }
        if let Some(v) = self.import_cache.get(&path) {
            return Ok(v.clone());
        }
        self.check_tracked(&path)?;
        let real = self
            .store
            .realise_path(&path)
            .unwrap_or_else(|| path.clone());
        let bytes = std::fs::read(&real).map_err(|e| {
            EvalError::new(
                ErrorKind::Io,
                format!("reading file '{}': {e}", path.display()),
            )
        })?;
        let text = String::from_utf8(bytes).map_err(|e| {
            EvalError::new(
                ErrorKind::Parse,
                format!(
                    "file '{}' is not valid UTF-8 (at byte {})",
                    path.display(),
                    e.utf8_error().valid_up_to()
                ),
            )
        })?;
        let base = path.parent().unwrap_or(Path::new("/")).to_path_buf();
        let ir = self.compile_source(
            path.display().to_string(),
            Some(path.clone()),
            text.into(),
            &base,
        )?;
        // Cache a thunk first so a file importing itself is infinite recursion, not a hang.
        let env = self.globals.clone();
        let thunk = Value::Thunk(Thunk::new(ThunkState::Suspended(ir, env)));
        self.import_cache.insert(path, thunk.clone());
        Ok(self.force(&thunk)?)
    }

    // ---- imports and search path ---------------------------------------------

    /// `import path`: evaluates the file at `path` (or `path/default.nix`).
    pub fn import(&mut self, path: &Path) -> EResult<Value> {
        self.eval_file(path)
    }
}
