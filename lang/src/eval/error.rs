//! Evaluation errors and the source map used to render them.
//!
//! Owns [`EvalError`] (what went wrong, where, and the chain of "while evaluating"
//! frames) and [`SourceMap`] (file names and texts, byte offset → line:column).
//! An [`ErrorKind`] carries the data its message is built from (the undefined
//! variable, the missing attribute and the suggestion for it, the call-depth
//! limit, …), so callers match on the kind and never parse [`EvalError::msg`].
//! Rendering with a snippet and caret lives here so the CLI and tests share it;
//! without a source map an error displays as its message alone.
//! It must not decide *whether* something is an error; the evaluator does.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::rc::Rc;

use super::ir::Pos;
use crate::value::Sym;

/// What kind of failure, with the data its message is built from; decides
/// catchability by `builtins.tryEval`. Variants whose message is all there is
/// (`throw`'s is the thrown string itself) carry nothing beside
/// [`EvalError::msg`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// A syntax error.
    Parse,
    /// A name not bound anywhere in scope, and the closest name that is.
    UndefinedVariable { name: Sym, suggestion: Option<Sym> },
    /// `throw "…"`: catchable by `tryEval`; the message is the thrown string.
    Throw,
    /// A failed `assert`: catchable by `tryEval`; `condition` is its source text.
    Assert { condition: String },
    /// `abort "…"`: `message` is the string given to `abort`.
    Abort { message: String },
    /// A value of the wrong type.
    Type,
    /// A thunk that needs its own value.
    InfiniteRecursion,
    /// Past `--max-call-depth`, whose value was `limit`.
    CallDepth { limit: usize },
    /// Selecting an attribute a set does not have, and the closest one it has.
    MissingAttribute { name: Sym, suggestion: Option<Sym> },
    /// A flake parameter set on the command line that the flake does not declare.
    UnknownParameter { name: String },
    /// The evaluator's interrupt flag ([`crate::Evaluator::interrupt`]) was raised:
    /// the user pressed Ctrl-C. Not catchable by `tryEval`.
    Interrupted,
    /// Reading files, imports, the store.
    Io,
    /// Anything else (bad argument, overflow, …).
    Eval,
}

/// One "while evaluating …" frame, innermost first in [`EvalError::frames`].
#[derive(Clone, Debug)]
pub struct Frame {
    pub pos: Option<Pos>,
    pub msg: String,
    /// The builtin whose call this frame records ("while calling the 'NAME'
    /// builtin", pushed by `Evaluator::call_primop` without a position).
    pub builtin: Option<&'static str>,
}

#[derive(Clone, Debug)]
pub struct EvalError {
    pub kind: ErrorKind,
    pub msg: String,
    pub pos: Option<Pos>,
    pub frames: Vec<Frame>,
}

/// A result with its error boxed: what the public entry points and helpers
/// return. The hot path returns [`super::raised::RResult`] instead, whose
/// error is zero-sized (see `raised.rs` for why); `?` converts between them.
pub type EResult<T> = Result<T, Box<EvalError>>;

/// "; did you mean 'x'?" after a message, when there is a suggestion.
fn with_hint(mut msg: String, suggestion: Option<&Sym>) -> String {
    if let Some(s) = suggestion {
        let _ = write!(msg, "; did you mean '{s}'?");
    }
    msg
}

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
    /// "undefined variable 'NAME'[; did you mean 'S'?]".
    pub fn undefined_variable(name: &str, suggestion: Option<String>) -> Box<EvalError> {
        let suggestion = suggestion.map(Sym::from);
        let msg = with_hint(format!("undefined variable '{name}'"), suggestion.as_ref());
        let name = Sym::new(name);
        Self::new(ErrorKind::UndefinedVariable { name, suggestion }, msg)
    }
    /// "attribute 'NAME' missing[; did you mean 'S'?]".
    pub fn missing_attribute(name: &str, suggestion: Option<String>) -> Box<EvalError> {
        let suggestion = suggestion.map(Sym::from);
        let msg = with_hint(format!("attribute '{name}' missing"), suggestion.as_ref());
        let name = Sym::new(name);
        Self::new(ErrorKind::MissingAttribute { name, suggestion }, msg)
    }
    /// `abort MESSAGE`, in Nix's words.
    pub fn abort(message: &str) -> Box<EvalError> {
        Self::new(
            ErrorKind::Abort {
                message: message.to_string(),
            },
            format!("evaluation aborted with the following error message: '{message}'"),
        )
    }
    /// A failed `assert CONDITION; …`, in Nix's words.
    pub fn assertion_failed(condition: String, pos: Pos) -> Box<EvalError> {
        let msg = format!("assertion '{condition}' failed");
        Self::at(ErrorKind::Assert { condition }, msg, pos)
    }
    /// The frames worth showing, innermost first: [`EvalError::frames`] without a
    /// first frame that only says which builtin raised the error ("while calling
    /// the 'throw' builtin", pushed by `Evaluator::call_primop` without a
    /// position) when the error's own position already shows that call.
    pub fn context_frames(&self) -> &[Frame] {
        match self.frames.split_first() {
            Some((first, rest)) if self.pos.is_some() && first.builtin.is_some() => rest,
            _ => &self.frames,
        }
    }
    /// Whether `builtins.tryEval` turns this error into `{ success = false; }`.
    pub fn is_catchable(&self) -> bool {
        matches!(self.kind, ErrorKind::Throw | ErrorKind::Assert { .. })
    }
}

/// The message alone: positions and frames need the [`SourceMap`]
/// ([`SourceMap::render`] is how the CLI prints an error).
impl std::fmt::Display for EvalError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.msg)
    }
}

impl std::error::Error for EvalError {}

/// Adds position and frames to errors as they propagate, on both kinds of
/// result: [`EResult`] and the hot path's [`super::raised::RResult`].
pub trait ErrorExt: Sized {
    /// Sets the error's position if it has none yet.
    fn at_pos(self, pos: Pos) -> Self;
    /// Pushes a "while …" frame.
    fn frame(self, pos: Option<Pos>, msg: impl FnOnce() -> String) -> Self;
    /// Pushes the frame of a call of builtin `name`: "while calling the 'NAME'
    /// builtin", without a position.
    fn builtin_frame(self, name: &'static str) -> Self;
}

/// The frame [`ErrorExt::builtin_frame`] pushes.
fn builtin_frame_of(name: &'static str) -> Frame {
    Frame {
        pos: None,
        msg: format!("while calling the '{name}' builtin"),
        builtin: Some(name),
    }
}

impl<T> ErrorExt for EResult<T> {
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
                e.frames.push(Frame {
                    pos,
                    msg: msg(),
                    builtin: None,
                });
            }
            e
        })
    }
    #[inline]
    fn builtin_frame(self, name: &'static str) -> EResult<T> {
        self.map_err(|mut e| {
            if e.frames.len() < 64 {
                e.frames.push(builtin_frame_of(name));
            }
            e
        })
    }
}

impl<T> ErrorExt for super::raised::RResult<T> {
    #[inline]
    fn at_pos(self, pos: Pos) -> Self {
        self.map_err(|r| r.at_pos(pos))
    }
    #[inline]
    fn frame(self, pos: Option<Pos>, msg: impl FnOnce() -> String) -> Self {
        self.map_err(|r| {
            r.frame(|| Frame {
                pos,
                msg: msg(),
                builtin: None,
            })
        })
    }
    #[inline]
    fn builtin_frame(self, name: &'static str) -> Self {
        self.map_err(|r| r.frame(|| builtin_frame_of(name)))
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

    /// `expr`'s error, evaluated strictly.
    fn error_of(expr: &str, settings: crate::EvalSettings) -> Box<EvalError> {
        let store = Rc::new(crate::store::MemStore::new());
        let mut ev = crate::Evaluator::new(settings, store);
        ev.on_trace = Box::new(|_| {});
        ev.eval_string(expr, std::path::Path::new("/"))
            .and_then(|v| ev.force_deep(&v))
            .expect_err("the expression fails")
    }

    #[test]
    fn kinds_carry_the_data_of_their_messages() {
        let e = |expr: &str| error_of(expr, crate::EvalSettings::default());
        let u = e("let foo = 1; in fooo");
        assert_eq!(
            u.kind,
            ErrorKind::UndefinedVariable {
                name: "fooo".into(),
                suggestion: Some("foo".into())
            }
        );
        assert_eq!(
            u.to_string(),
            "undefined variable 'fooo'; did you mean 'foo'?"
        );
        let m = e("{ abc = 1; }.abd");
        assert_eq!(
            m.kind,
            ErrorKind::MissingAttribute {
                name: "abd".into(),
                suggestion: Some("abc".into())
            }
        );
        assert_eq!(
            m.to_string(),
            "attribute 'abd' missing; did you mean 'abc'?"
        );
        let g = e("builtins.getAttr \"x\" { }");
        assert!(
            matches!(&g.kind, ErrorKind::MissingAttribute { name, suggestion: None } if name == "x")
        );
        let a = e("abort \"stop\"");
        assert_eq!(
            a.kind,
            ErrorKind::Abort {
                message: "stop".into()
            }
        );
        assert_eq!(
            a.msg,
            "evaluation aborted with the following error message: 'stop'"
        );
        assert!(!a.is_catchable());
        let s = e("assert 1 == 2; 3");
        assert_eq!(
            s.kind,
            ErrorKind::Assert {
                condition: "1 == 2".into()
            }
        );
        assert!(s.is_catchable());
        let t = e("throw \"x\"");
        assert_eq!((t.kind.clone(), t.msg.as_str()), (ErrorKind::Throw, "x"));
        assert!(t.is_catchable());
        let deep = crate::EvalSettings {
            max_call_depth: 50,
            ..crate::EvalSettings::default()
        };
        let d = error_of(
            "let f = n: if n == 0 then 0 else 1 + f (n - 1); in f 100",
            deep,
        );
        assert_eq!(d.kind, ErrorKind::CallDepth { limit: 50 });
    }

    #[test]
    fn a_builtin_call_frame_names_its_builtin() {
        let e = error_of("builtins.head []", crate::EvalSettings::default());
        assert_eq!(e.frames.first().and_then(|f| f.builtin), Some("head"));
        assert_eq!(e.frames[0].msg, "while calling the 'head' builtin");
        let e = error_of(
            "builtins.addErrorContext \"while calling the 'x' builtin\" (throw \"y\")",
            crate::EvalSettings::default(),
        );
        assert!(e
            .frames
            .iter()
            .all(|f| f.builtin.is_none() || f.pos.is_none()));
        assert_eq!(
            e.frames.iter().filter(|f| f.builtin.is_some()).count(),
            2,
            "throw's and addErrorContext's calls, not the context text"
        );
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
