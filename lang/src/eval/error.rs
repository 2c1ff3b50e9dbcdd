//! Evaluation errors and the source map used to render them.
//!
//! Owns [`EvalError`] (what went wrong, where, and the chain of "while evaluating"
//! frames) and [`SourceMap`] (file names and texts, byte offset → line:column).
//! Rendering with a snippet and caret lives here so the CLI and tests share it.
//! It must not decide *whether* something is an error; the evaluator does.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::rc::Rc;

use super::ir::Pos;

/// What kind of failure; decides catchability by `builtins.tryEval`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// A syntax error.
    Parse,
    /// A name not bound anywhere in scope.
    UndefinedVariable,
    /// `throw "…"`: catchable by `tryEval`.
    Throw,
    /// A failed `assert`: catchable by `tryEval`.
    Assert,
    /// `abort "…"`.
    Abort,
    /// A value of the wrong type.
    Type,
    /// A thunk that needs its own value.
    InfiniteRecursion,
    /// Past `--max-call-depth`.
    CallDepth,
    /// Reading files, imports, the store.
    Io,
    /// Anything else (missing attribute, bad argument, overflow, …).
    Eval,
}

/// One "while evaluating …" frame, innermost first in [`EvalError::frames`].
#[derive(Clone, Debug)]
pub struct Frame {
    pub pos: Option<Pos>,
    pub msg: String,
}

impl Frame {
    /// The frame `Evaluator::call_primop` adds to a builtin's error: "while calling
    /// the 'NAME' builtin", without a position.
    fn is_builtin_call(&self) -> bool {
        self.pos.is_none()
            && self
                .msg
                .strip_prefix("while calling the '")
                .and_then(|m| m.strip_suffix("' builtin"))
                .is_some_and(|name| !name.contains('\''))
    }
}

#[derive(Clone, Debug)]
pub struct EvalError {
    pub kind: ErrorKind,
    pub msg: String,
    pub pos: Option<Pos>,
    pub frames: Vec<Frame>,
}

/// Errors are boxed so `Result<Value, _>` stays small on the hot path.
pub type EResult<T> = Result<T, Box<EvalError>>;

impl EvalError {
    pub fn new(kind: ErrorKind, msg: impl Into<String>) -> Box<EvalError> {
        Box::new(EvalError {
            kind,
            msg: msg.into(),
            pos: None,
            frames: Vec::new(),
        })
    }
    pub fn at(kind: ErrorKind, msg: impl Into<String>, pos: Pos) -> Box<EvalError> {
        let mut e = Self::new(kind, msg);
        e.pos = Some(pos);
        e
    }
    /// The frames worth showing, innermost first: [`EvalError::frames`] without a
    /// first frame that only says which builtin raised the error ("while calling
    /// the 'throw' builtin", pushed by `Evaluator::call_primop` without a
    /// position) when the error's own position already shows that call.
    pub fn context_frames(&self) -> &[Frame] {
        match self.frames.split_first() {
            Some((first, rest)) if self.pos.is_some() && first.is_builtin_call() => rest,
            _ => &self.frames,
        }
    }
    /// Whether `builtins.tryEval` turns this error into `{ success = false; }`.
    pub fn is_catchable(&self) -> bool {
        matches!(self.kind, ErrorKind::Throw | ErrorKind::Assert)
    }
}

/// Adds position and frames to errors as they propagate.
pub trait ErrorExt<T> {
    /// Sets the error's position if it has none yet.
    fn at_pos(self, pos: Pos) -> EResult<T>;
    /// Pushes a "while …" frame.
    fn frame(self, pos: Option<Pos>, msg: impl FnOnce() -> String) -> EResult<T>;
}

impl<T> ErrorExt<T> for EResult<T> {
    #[inline]
    fn at_pos(self, pos: Pos) -> EResult<T> {
        self.map_err(|mut e| {
            if e.pos.is_none() {
                e.pos = Some(pos);
            }
            e
        })
    }
    #[inline]
    fn frame(self, pos: Option<Pos>, msg: impl FnOnce() -> String) -> EResult<T> {
        self.map_err(|mut e| {
            if e.frames.len() < 64 {
                e.frames.push(Frame { pos, msg: msg() });
            }
            e
        })
    }
}

/// One source text known to the evaluator.
pub struct SourceFile {
    /// The file's path, or a name such as `«string»` for `-E` input.
    pub name: String,
    pub path: Option<PathBuf>,
    pub text: Rc<str>,
    /// Byte offsets of line starts.
    line_starts: Vec<u32>,
}

/// Every file parsed during one evaluation, indexed by [`Pos::file`].
#[derive(Default)]
pub struct SourceMap {
    files: Vec<SourceFile>,
}

impl SourceMap {
    pub fn add(&mut self, name: String, path: Option<PathBuf>, text: Rc<str>) -> u32 {
        let mut line_starts = vec![0u32];
        for (i, b) in text.bytes().enumerate() {
            if b == b'\n' {
                line_starts.push(i as u32 + 1);
            }
        }
        self.files.push(SourceFile {
            name,
            path,
            text,
            line_starts,
        });
        (self.files.len() - 1) as u32
    }

    pub fn file(&self, id: u32) -> Option<&SourceFile> {
        self.files.get(id as usize)
    }

    /// 1-based line and column of a byte offset (column counts characters).
    pub fn line_col(&self, file: u32, offset: u32) -> (usize, usize) {
        let Some(f) = self.file(file) else {
            return (0, 0);
        };
        let line = match f.line_starts.binary_search(&offset) {
            Ok(i) => i,
            Err(i) => i - 1,
        };
        let start = f.line_starts[line] as usize;
        let end = (offset as usize).min(f.text.len());
        let col = f
            .text
            .get(start..end)
            .map_or(end - start, |s| s.chars().count())
            + 1;
        (line + 1, col)
    }

    /// `file:line:col`.
    pub fn describe(&self, pos: Pos) -> String {
        let (l, c) = self.line_col(pos.file, pos.span.start);
        let name = self.file(pos.file).map_or("«unknown»", |f| f.name.as_str());
        format!("{name}:{l}:{c}")
    }

    /// The source line at `pos` with a caret under it, or nothing for unknown files.
    pub fn snippet(&self, pos: Pos) -> String {
        let Some(f) = self.file(pos.file) else {
            return String::new();
        };
        let (l, c) = self.line_col(pos.file, pos.span.start);
        let start = f.line_starts[l - 1] as usize;
        let end = f.line_starts.get(l).map_or(f.text.len(), |e| *e as usize);
        let line = f
            .text
            .get(start..end)
            .unwrap_or("")
            .trim_end_matches(['\n', '\r']);
        // Keep snippets readable for minified or huge one-line inputs.
        let shown: String = line.chars().take(200).collect();
        let width = (pos.span.end.saturating_sub(pos.span.start) as usize).clamp(1, 80);
        let mut s = String::new();
        let _ = writeln!(s, "{l:>6}| {shown}");
        let _ = write!(
            s,
            "      | {}{}",
            " ".repeat(c.saturating_sub(1).min(200)),
            "^".repeat(width.min(shown.chars().count().saturating_sub(c - 1).max(1)))
        );
        s
    }

    /// Renders an error the way the CLI prints it: the frames outermost first,
    /// then the error with its location and snippet. Without `show_trace` the
    /// frames are left out and a hint counts them, when there are any.
    pub fn render(&self, e: &EvalError, show_trace: bool) -> String {
        let mut out = String::new();
        let frames = e.context_frames();
        if show_trace {
            for fr in frames.iter().rev() {
                let _ = writeln!(out, "       … {}", fr.msg);
                if let Some(p) = fr.pos {
                    let _ = writeln!(out, "         at {}:", self.describe(p));
                    let _ = writeln!(out, "{}", self.snippet(p));
                }
                out.push('\n');
            }
        }
        let _ = writeln!(out, "error: {}", e.msg);
        if let Some(p) = e.pos {
            let _ = writeln!(out, "       at {}:", self.describe(p));
            let _ = writeln!(out, "{}", self.snippet(p));
        }
        if !show_trace && !frames.is_empty() {
            let n = frames.len();
            let _ = writeln!(
                out,
                "       (use '--show-trace' to show {n} more {} of context)",
                if n == 1 { "frame" } else { "frames" }
            );
        }
        out
    }
}

/// The closest candidate to `name` by edit distance, for "did you mean" hints.
pub fn did_you_mean<'a>(name: &str, candidates: impl Iterator<Item = &'a str>) -> Option<String> {
    let mut best: Option<(usize, &str)> = None;
    for c in candidates {
        let d = levenshtein(name, c);
        if d <= 2.max(name.len() / 3) && best.is_none_or(|(bd, _)| d < bd) {
            best = Some((d, c));
        }
    }
    best.map(|(_, c)| c.to_string())
}

fn levenshtein(a: &str, b: &str) -> usize {
    if a.chars().count().abs_diff(b.chars().count()) > 3 {
        return usize::MAX;
    }
    edit_distance(a, b)
}

/// The Levenshtein distance of two strings, by characters (the one edit
/// distance of the workspace's "did you mean" hints).
pub fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for i in 1..=a.len() {
        cur[0] = i;
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            cur[j] = (prev[j] + 1).min(cur[j - 1] + 1).min(prev[j - 1] + cost);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::syntax::ast::Span;

    #[test]
    fn line_col_and_snippet() {
        let mut sm = SourceMap::default();
        let f = sm.add("t.nix".into(), None, "let\n  x = 1;\nin y".into());
        let pos = Pos {
            file: f,
            span: Span::new(16, 17),
        };
        assert_eq!(sm.describe(pos), "t.nix:3:4");
        assert_eq!(sm.snippet(pos), "     3| in y\n      |    ^");
    }

    /// `expr` evaluated strictly and its error rendered without and with the trace.
    fn rendered(expr: &str) -> (String, String) {
        let store = Rc::new(crate::store::MemStore::new());
        let mut ev = crate::Evaluator::new(crate::EvalSettings::default(), store);
        ev.on_trace = Box::new(|_| {});
        let e = ev
            .eval_string(expr, std::path::Path::new("/"))
            .and_then(|v| ev.force_deep(&v))
            .expect_err("the expression fails");
        (ev.sources.render(&e, false), ev.sources.render(&e, true))
    }

    #[test]
    fn a_top_level_throw_has_no_frames_to_show() {
        let (plain, trace) = rendered("throw \"x\"");
        assert!(!plain.contains("show-trace"), "{plain}");
        assert_eq!(trace, plain);
        assert!(
            plain.starts_with("error: x\n       at «string»:1:1:"),
            "{plain}"
        );
        // The same for a builtin's own error: the snippet shows the call.
        let (plain, _) = rendered("builtins.head []");
        assert!(!plain.contains("show-trace"), "{plain}");
    }

    #[test]
    fn hidden_frames_are_counted_in_words() {
        let (plain, trace) = rendered("let f = x: throw \"x\"; in f 1");
        assert!(
            plain.ends_with("(use '--show-trace' to show 1 more frame of context)\n"),
            "{plain}"
        );
        assert_eq!(trace.matches("       … ").count(), 1, "{trace}");
        assert!(trace.contains("… while calling 'f'"), "{trace}");
        let (plain, trace) = rendered("let f = x: x.a; g = y: f y; in g 1");
        assert!(
            plain.ends_with("(use '--show-trace' to show 2 more frames of context)\n"),
            "{plain}"
        );
        assert_eq!(trace.matches("       … ").count(), 2, "{trace}");
    }

    #[test]
    fn suggestions() {
        let c = ["foo", "bar", "baz"];
        assert_eq!(
            did_you_mean("fo", c.iter().copied()).as_deref(),
            Some("foo")
        );
        assert_eq!(did_you_mean("qqqqq", c.iter().copied()), None);
    }
}
