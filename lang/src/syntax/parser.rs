//! The parser of the Nix expression language: source text to [`Expr`].
//!
//! This module owns the concrete syntax: it follows Nix's `lexer.l`/`parser.y`
//! (tokens, precedence, the `or` quirks, string escapes, indented-string
//! indentation stripping, path and URI literals) and produces the AST of
//! [`super::ast`] with byte spans. It reports the syntax errors Nix reports while
//! parsing (including duplicate formal arguments, dynamic attributes in `let` or
//! `inherit`, trailing slashes in paths and invalid number literals).
//!
//! It must not evaluate, resolve names, merge nested attribute paths or detect
//! duplicate attributes: that is `eval::compile`'s job. It must never panic or
//! overflow the stack, whatever the input.
//!
//! Structure (submodules under `parser/`): `lexer` tokenizes outside string
//! literals with nom recognizers and flex's longest-match rule; `strings` lexes
//! `"…"`, `''…''` and path literals, whose interpolations call back into the
//! expression grammar; `expr` is the expression grammar (a precedence climber over
//! the tokens); `binds` holds attribute sets, bindings, attribute paths and lambda
//! patterns.
//!
//! Resource limits: recursion runs under `stacker::maybe_grow`, so deep nesting
//! never overflows the stack; nested parentheses are parsed iteratively and cost
//! no depth at all. The depth of the produced tree is capped at [`MAX_DEPTH`]
//! ("expression nested too deeply") so that consumers can walk and drop it with
//! ordinary recursion on an ordinary stack. Everything else is linear in the input:
//! lookahead is bounded (three tokens) and there is no backtracking.

use super::ast::*;

mod binds;
mod expr;
mod lexer;
mod strings;
#[cfg(test)]
mod tests;

use lexer::{Token, T};

/// A syntax error: what went wrong and the byte span of the offending source.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct ParseError {
    /// A one-line description, e.g. `unexpected '}', expected ';'`.
    pub message: String,
    /// Where in the source; empty at the end of the file for "unexpected end of file".
    pub span: Span,
    /// Which kind of error, for callers that decide by it.
    pub kind: ParseErrorKind,
}

/// The kinds of [`ParseError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParseErrorKind {
    /// A token the grammar does not allow there: `unexpected '}', expected ';'`
    /// (also `unexpected '/' in path`).
    Unexpected,
    /// The input ends too early: `unexpected end of file`, or an unterminated
    /// string, indented string or comment. More input could complete it (the
    /// repl reads another line).
    Incomplete,
    /// Anything else, in Nix's own wording: `path has a trailing slash`,
    /// `invalid integer '…'`, `duplicate formal function argument 'x'`,
    /// `expression nested too deeply`, ….
    Other,
}

impl ParseError {
    fn new(message: impl Into<String>, span: Span) -> ParseError {
        Self::of(ParseErrorKind::Other, message, span)
    }

    fn of(kind: ParseErrorKind, message: impl Into<String>, span: Span) -> ParseError {
        ParseError {
            message: message.into(),
            span,
            kind,
        }
    }

    /// Whether Nix calls this a syntax error (and prints "syntax error, " before
    /// the message): an unexpected token or an early end of the input.
    pub fn is_syntax_error(&self) -> bool {
        self.kind != ParseErrorKind::Other
    }

    /// Whether the input ended inside an expression, so that more input could
    /// complete it ([`ParseErrorKind::Incomplete`]).
    pub fn is_incomplete(&self) -> bool {
        self.kind == ParseErrorKind::Incomplete
    }
}

/// Parses one Nix expression spanning all of `src`.
///
/// Spans in the result and in the error are byte offsets into `src`. A node's
/// span covers its own syntax: parentheses around an expression are not part of
/// its span (`(x: x)` is a lambda spanning `x: x`) but are part of the enclosing
/// node's (`(a).b` spans from `(`). Inputs of 4 GiB or more are rejected since
/// spans are 32-bit.
///
/// What Nix calls syntax errors ([`ParseError::is_syntax_error`]; Nix prints
/// them after "syntax error, ") have messages starting with `unexpected` or
/// `unterminated`; the others use Nix's own wording, e.g. `path has a trailing
/// slash`, `invalid integer '…'` or `duplicate formal function argument 'x'`,
/// plus `expression nested too deeply` for [`MAX_DEPTH`].
pub fn parse(src: &str) -> Result<Expr, ParseError> {
    if u32::try_from(src.len()).is_err() {
        return Err(ParseError::new(
            "source is too large (4 GiB or more)",
            Span::new(0, 0),
        ));
    }
    let mut p = Parser {
        src,
        pos: 0,
        peeked: None,
        peeked2: None,
        nesting: 0,
    };
    p.enter(|p| {
        let e = p.expr_root()?;
        let tok = p.peek()?;
        if tok.t != T::Eof {
            return Err(p.unexpected(tok, Some("end of file")));
        }
        Ok(e.e)
    })
}

/// The deepest expression tree [`parse`] returns; deeper input is rejected with
/// "expression nested too deeply". Dropping or walking a tree recursively costs
/// stack per level (about 80 bytes for a plain drop), so this keeps a drop under a
/// megabyte. Parentheses do not count: they add no tree depth. (Nix's own parser
/// runs out of its parse stack at a comparable nesting of lists or sets.)
pub const MAX_DEPTH: u32 = 8_000;

/// Stack that must remain before recursing further; otherwise a new segment is
/// allocated. Also enough to drop a partial tree of [`MAX_DEPTH`] on an error path.
const RED_ZONE: usize = 2 * 1024 * 1024;
/// Size of each additional stack segment.
const STACK_SEGMENT: usize = 16 * 1024 * 1024;

type PResult<T> = Result<T, ParseError>;

/// An expression under construction: the expression, the depth of its tree and
/// where its source starts including enclosing parentheses (`(a).b` starts at `(`
/// although the inner `a` keeps its own span).
struct Node {
    e: Expr,
    d: u32,
    start: usize,
}

/// Parser state: a cursor over the source plus up to two lexed lookahead tokens.
struct Parser<'a> {
    src: &'a str,
    /// End of the last consumed token (whitespace after it not yet skipped).
    pos: usize,
    peeked: Option<Token<'a>>,
    /// The token after `peeked`, when it was needed.
    peeked2: Option<Token<'a>>,
    /// How many enclosing nodes are under construction (a lower bound of the final
    /// tree depth), checked before recursing so that deep input fails early.
    nesting: u32,
}

impl<'a> Parser<'a> {
    /// The next token, without consuming it.
    fn peek(&mut self) -> PResult<Token<'a>> {
        if let Some(t) = self.peeked {
            return Ok(t);
        }
        let t = lexer::next_token(self.src, self.pos)?;
        self.peeked = Some(t);
        Ok(t)
    }

    /// The token after the next one. Only valid when the next token does not open
    /// a string or path (their contents are not default-mode tokens).
    fn peek2(&mut self) -> PResult<Token<'a>> {
        let first = self.peek()?;
        if let Some(t) = self.peeked2 {
            return Ok(t);
        }
        let t = lexer::next_token(self.src, first.end)?;
        self.peeked2 = Some(t);
        Ok(t)
    }

    /// Consumes the peeked token.
    fn bump(&mut self) -> PResult<Token<'a>> {
        let t = self.peek()?;
        self.pos = t.end;
        self.peeked = self.peeked2.take();
        Ok(t)
    }

    /// Moves the cursor (after lexing string or path contents by hand).
    fn set_pos(&mut self, pos: usize) {
        self.pos = pos;
        self.peeked = None;
        self.peeked2 = None;
    }

    /// Consumes the next token if it is `t`.
    fn eat(&mut self, t: T<'_>) -> PResult<Option<Token<'a>>> {
        if self.peek()?.t == t {
            return self.bump().map(Some);
        }
        Ok(None)
    }

    /// Consumes the next token, which must be `t` (named `what` in the error).
    fn expect(&mut self, t: T<'_>, what: &str) -> PResult<Token<'a>> {
        let tok = self.peek()?;
        if tok.t == t {
            return self.bump();
        }
        Err(self.unexpected(tok, Some(what)))
    }

    /// "unexpected X[, expected Y]" at `tok`.
    fn unexpected(&self, tok: Token<'_>, expected: Option<&str>) -> ParseError {
        let mut msg = format!("unexpected {}", tok.describe(self.src));
        if let Some(what) = expected {
            msg.push_str(", expected ");
            msg.push_str(what);
        }
        let kind = if tok.t == T::Eof {
            ParseErrorKind::Incomplete
        } else {
            ParseErrorKind::Unexpected
        };
        ParseError::of(kind, msg, tok.span())
    }

    /// Builds a node spanning `start` to the end of the last consumed token, with
    /// tree depth `d`, enforcing [`MAX_DEPTH`].
    fn node(&self, kind: ExprKind, start: usize, d: u32) -> PResult<Node> {
        let span = Span::new(start, self.pos);
        if d > MAX_DEPTH {
            return Err(ParseError::new("expression nested too deeply", span));
        }
        Ok(Node {
            e: Expr::new(kind, span),
            d,
            start,
        })
    }

    /// Runs a recursive step with enough stack, growing it on the heap if needed.
    fn enter<R>(&mut self, f: impl FnOnce(&mut Self) -> PResult<R>) -> PResult<R> {
        stacker::maybe_grow(RED_ZONE, STACK_SEGMENT, || f(self))
    }

    /// Like [`Parser::enter`], for a sub-expression that will be a child of a node
    /// under construction: fails with "expression nested too deeply" at the next
    /// token once [`MAX_DEPTH`] such nodes are open, before using more stack.
    fn nest<R>(&mut self, f: impl FnOnce(&mut Self) -> PResult<R>) -> PResult<R> {
        if self.nesting >= MAX_DEPTH {
            let tok = self.peek()?;
            return Err(ParseError::new("expression nested too deeply", tok.span()));
        }
        self.nesting += 1;
        let r = self.enter(f);
        self.nesting -= 1;
        r
    }
}
