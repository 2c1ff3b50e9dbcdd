//! The line editor's helper: Tab completion and multi-line input.
//!
//! Completion: commands, file names after `:l`/`:lf`, variables, builtins and
//! keywords, and `a.b.c` attribute paths, for which only the sets along the
//! path are evaluated, each to its outermost constructor (never deeply). An
//! expression that is not finished (an open bracket, string or `let`) makes
//! Enter continue on a new line instead of evaluating.

use std::cell::RefCell;
use std::path::Path;
use std::rc::Rc;

use rustyline::completion::Completer;
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::validate::{ValidationContext, ValidationResult, Validator};

use rocmx_lang::value::print::print_attr_name;
use rocmx_lang::Value;

use super::session::{is_incomplete, Session, COMMANDS, KEYWORDS};

pub(crate) struct Helper {
    session: Rc<RefCell<Session>>,
}

impl Helper {
    pub(crate) fn new(session: Rc<RefCell<Session>>) -> Helper {
        Helper { session }
    }
}

impl Completer for Helper {
    type Candidate = String;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        _ctx: &rustyline::Context<'_>,
    ) -> rustyline::Result<(usize, Vec<String>)> {
        Ok(match self.session.try_borrow_mut() {
            Ok(mut s) => s.complete(line, pos),
            Err(_) => (pos, Vec::new()),
        })
    }
}

impl Hinter for Helper {
    type Hint = String;
}

impl Highlighter for Helper {}

impl Validator for Helper {
    fn validate(&self, ctx: &mut ValidationContext) -> rustyline::Result<ValidationResult> {
        Ok(if is_incomplete(ctx.input()) {
            ValidationResult::Incomplete
        } else {
            ValidationResult::Valid(None)
        })
    }
}

impl rustyline::Helper for Helper {}

impl Session {
    /// Tab completion of the text before `pos`: commands, file names after
    /// `:l`/`:lf`, variables and builtins, and `a.b.c` attribute paths (only the
    /// sets along the path are forced, each to its outermost constructor).
    pub(crate) fn complete(&mut self, line: &str, pos: usize) -> (usize, Vec<String>) {
        let before = &line[..pos.min(line.len())];
        let lead = before.len() - before.trim_start().len();
        if let Some(cmd) = before.trim_start().strip_prefix(':') {
            return match cmd.find(' ') {
                None => {
                    let mut c: Vec<String> = COMMANDS
                        .iter()
                        .flat_map(|(n, _, _)| n.iter())
                        .filter(|n| n.starts_with(cmd))
                        .map(|n| format!(":{n}"))
                        .collect();
                    c.sort();
                    (lead, c)
                }
                Some(i) if matches!(&cmd[..i], "l" | "load" | "lf" | "load-flake") => {
                    let arg_start = lead + 1 + i + 1;
                    let arg = &before[arg_start..];
                    let arg_lead = arg.len() - arg.trim_start().len();
                    (arg_start + arg_lead, complete_file(arg.trim_start()))
                }
                Some(_) => self.complete_word(before),
            };
        }
        self.complete_word(before)
    }

    fn complete_word(&mut self, before: &str) -> (usize, Vec<String>) {
        let start = before
            .char_indices()
            .rev()
            .find(|(_, c)| !(c.is_alphanumeric() || matches!(c, '_' | '\'' | '-' | '.')))
            .map(|(i, c)| i + c.len_utf8())
            .unwrap_or(0);
        let word = &before[start..];
        let mut cands: Vec<String> = match word.rfind('.') {
            Some(dot) => {
                let (path, partial) = (&word[..dot], &word[dot + 1..]);
                if path.is_empty() || path.ends_with('.') || path.starts_with('.') {
                    return (start, Vec::new());
                }
                self.attr_names(path)
                    .into_iter()
                    .filter(|n| n.starts_with(partial))
                    .map(|n| format!("{path}.{}", print_attr_name(&n)))
                    .collect()
            }
            None => {
                if word.is_empty() {
                    return (start, Vec::new());
                }
                let mut names: Vec<String> = self.scope.keys().map(|k| k.to_string()).collect();
                names.extend(self.plain_globals().iter().cloned());
                names.extend(KEYWORDS.iter().map(|k| k.to_string()));
                if word.starts_with("__") {
                    names.extend(super::docs::names().map(|n| format!("__{n}")));
                }
                names.retain(|n| n.starts_with(word));
                names
            }
        };
        cands.sort();
        cands.dedup();
        (start, cands)
    }

    /// The attribute names of the set at `path` (`foo.bar`), evaluated
    /// shallowly; none when it is not a set or fails. Traces and warnings of
    /// that evaluation are not shown.
    fn attr_names(&mut self, path: &str) -> Vec<String> {
        let quiet = std::mem::replace(&mut self.ev.on_trace, Box::new(|_| {}));
        let r = self.eval(path);
        self.ev.on_trace = quiet;
        match r {
            Ok(Value::Attrs(a)) => a.keys().map(|k| k.to_string()).collect(),
            _ => Vec::new(),
        }
    }

    /// The builtins in scope by their plain name (`map`, `true`, …), found by
    /// compiling each name once.
    fn plain_globals(&mut self) -> &[String] {
        if self.plain_globals.is_none() {
            let quiet = std::mem::replace(&mut self.ev.on_trace, Box::new(|_| {}));
            let mut found = vec!["builtins".to_string()];
            for name in super::docs::names() {
                let ok = self
                    .ev
                    .compile_source("«completion»".into(), None, name.into(), Path::new("/"))
                    .is_ok();
                if ok {
                    found.push(name.to_string());
                }
            }
            self.ev.on_trace = quiet;
            self.plain_globals = Some(found);
        }
        self.plain_globals.as_deref().unwrap_or_default()
    }
}

/// File names completing `arg` (a path typed after `:l`), directories with `/`.
fn complete_file(arg: &str) -> Vec<String> {
    let (dir, prefix) = match arg.rfind('/') {
        Some(i) => (&arg[..=i], &arg[i + 1..]),
        None => ("", arg),
    };
    let read = if dir.is_empty() { "." } else { dir };
    let Ok(entries) = std::fs::read_dir(read) else {
        return Vec::new();
    };
    let mut out: Vec<String> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            if !name.starts_with(prefix) || (name.starts_with('.') && !prefix.starts_with('.')) {
                return None;
            }
            let slash = if e.path().is_dir() { "/" } else { "" };
            Some(format!("{dir}{name}{slash}"))
        })
        .collect();
    out.sort();
    out
}
