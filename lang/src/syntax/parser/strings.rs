//! String-like literals, whose contents are lexed here rather than by the
//! default-mode lexer: `"…"` (escapes, CR/LF normalisation), `''…''` (Nix's
//! indented-string tokens and its `stripIndentation`), and path literals with
//! interpolations (`./a/${b}/c`).
//!
//! Owns the exact textual rules of `lexer.l`'s `STRING`, `IND_STRING` and
//! `INPATH` states. Interpolations call back into the expression grammar; the
//! literal text is copied once, so huge literals parse in linear time.

use nom::bytes::complete::take_till;

use super::super::ast::*;
use super::lexer::{self, Token, T};
use super::{PResult, ParseError, ParseErrorKind, Parser};

/// Length of the run at the start of `bytes` containing none of the bytes `stop`
/// accepts.
fn run_len(bytes: &[u8], stop: impl Fn(u8) -> bool) -> usize {
    let r: nom::IResult<&[u8], &[u8], ()> = take_till(stop)(bytes);
    r.map(|(_, run)| run.len()).unwrap_or(0)
}

/// `unescapeStr` for the character after a backslash.
fn unescape(c: &str) -> &str {
    match c {
        "n" => "\n",
        "r" => "\r",
        "t" => "\t",
        other => other,
    }
}

/// The (possibly multi-byte) character at byte offset `i` of `src`.
fn char_at(src: &str, i: usize) -> Option<&str> {
    let c = src[i..].chars().next()?;
    Some(&src[i..i + c.len_utf8()])
}

/// Accumulates string parts, merging adjacent literal text.
#[derive(Default)]
struct Parts {
    parts: Vec<StrPart>,
    lit: String,
    depth: u32,
}

impl Parts {
    fn flush(&mut self) {
        if !self.lit.is_empty() {
            self.parts.push(StrPart::Lit(std::mem::take(&mut self.lit)));
        }
    }
    fn interp(&mut self, e: Expr, d: u32) {
        self.flush();
        self.depth = self.depth.max(d);
        self.parts.push(StrPart::Interp(e));
    }
    fn finish(mut self) -> (Vec<StrPart>, u32) {
        self.flush();
        (self.parts, self.depth)
    }
}

/// One token of an indented string, as `lexer.l` splits it.
enum IndTok<'a> {
    /// Raw text, subject to indentation stripping (`hasIndentation`).
    Text(&'a str),
    /// An escape or a lone `$` / `'`: counts as content for the indentation.
    Esc(&'a str),
    Interp(Expr),
}

/// Length of the longest `([^$']|$[^{']|'[^'$])+` prefix of `b`.
fn ind_text_len(b: &[u8]) -> usize {
    let mut i = 0;
    loop {
        match b.get(i) {
            None => return i,
            Some(b'$') => match b.get(i + 1) {
                None | Some(b'{') | Some(b'\'') => return i,
                Some(_) => i += 2,
            },
            Some(b'\'') => match b.get(i + 1) {
                None | Some(b'\'') | Some(b'$') => return i,
                Some(_) => i += 2,
            },
            Some(_) => i += 1 + run_len(&b[i + 1..], |c| c == b'$' || c == b'\''),
        }
    }
}

impl<'a> Parser<'a> {
    /// Parses an interpolation whose `${` ends at `pos`, through its `}`; returns
    /// the position after the `}`.
    fn interpolation(&mut self, pos: usize, parts: &mut Parts) -> PResult<usize> {
        self.set_pos(pos);
        let e = self.parse_expr()?;
        self.expect(T::RBrace, "'}'")?;
        parts.interp(e.e, e.d);
        Ok(self.pos)
    }

    /// The contents and closing quote of `"…"` after the opening `open`. Returns
    /// the parts and the depth of the deepest interpolation.
    pub(super) fn string(&mut self, open: Token<'a>) -> PResult<(Vec<StrPart>, u32)> {
        let src = self.src;
        let bytes = src.as_bytes();
        let unterminated = || {
            ParseError::of(
                ParseErrorKind::Incomplete,
                "unterminated string",
                open.span(),
            )
        };
        let mut parts = Parts::default();
        let mut pos = open.end;
        loop {
            let n = run_len(&bytes[pos..], |b| matches!(b, b'"' | b'\\' | b'$' | b'\r'));
            parts.lit.push_str(&src[pos..pos + n]);
            pos += n;
            match bytes.get(pos) {
                None => return Err(unterminated()),
                Some(b'"') => {
                    self.set_pos(pos + 1);
                    return Ok(parts.finish());
                }
                Some(b'\\') => {
                    let c = char_at(src, pos + 1).ok_or_else(unterminated)?;
                    parts.lit.push_str(unescape(c));
                    pos += 1 + c.len();
                }
                Some(b'\r') => {
                    // CR and CR/LF become LF (not an escaped `\r`).
                    parts.lit.push('\n');
                    pos += 1 + usize::from(bytes.get(pos + 1) == Some(&b'\n'));
                }
                Some(_) => match bytes.get(pos + 1) {
                    Some(b'{') => pos = self.interpolation(pos + 2, &mut parts)?,
                    // `$$` is literal, so `$${` is too.
                    Some(b'$') => {
                        parts.lit.push_str("$$");
                        pos += 2;
                    }
                    Some(_) => {
                        parts.lit.push('$');
                        pos += 1;
                    }
                    None => return Err(unterminated()),
                },
            }
        }
    }

    /// The contents and closing `''` of an indented string after `open`, with
    /// indentation stripped. Returns the parts and the deepest interpolation.
    pub(super) fn ind_string(&mut self, open: Token<'a>) -> PResult<(Vec<StrPart>, u32)> {
        let src = self.src;
        let bytes = src.as_bytes();
        let mut toks = Vec::new();
        let mut depth = 0;
        let mut pos = open.end;
        loop {
            let rest = &bytes[pos..];
            if rest.starts_with(b"''") {
                let (text, len) = match rest.get(2) {
                    Some(b'$') => ("$", 3),
                    Some(b'\'') => ("''", 3),
                    Some(b'\\') if rest.len() > 3 => {
                        let c = char_at(src, pos + 3).unwrap_or("\\");
                        (unescape(c), 3 + c.len())
                    }
                    _ => {
                        self.set_pos(pos + 2);
                        break;
                    }
                };
                toks.push(IndTok::Esc(text));
                pos += len;
            } else if rest.starts_with(b"${") {
                self.set_pos(pos + 2);
                let e = self.parse_expr()?;
                self.expect(T::RBrace, "'}'")?;
                depth = depth.max(e.d);
                toks.push(IndTok::Interp(e.e));
                pos = self.pos;
            } else if rest.is_empty() {
                return Err(ParseError::of(
                    ParseErrorKind::Incomplete,
                    "unterminated indented string",
                    open.span(),
                ));
            } else {
                let n = ind_text_len(rest);
                if n > 0 {
                    toks.push(IndTok::Text(&src[pos..pos + n]));
                    pos += n;
                } else {
                    // A `$` before `'` or a `'` before `$` (or either at the end).
                    toks.push(IndTok::Esc(&src[pos..pos + 1]));
                    pos += 1;
                }
            }
        }
        Ok((strip_indentation(toks), depth))
    }

    /// The rest of a path literal after its first token `tok`: more path text and
    /// `${…}` interpolations, as `lexer.l`'s `INPATH` states split them.
    pub(super) fn path(&mut self, tok: Token<'a>) -> PResult<(Vec<StrPart>, u32)> {
        let src = self.src;
        let mut parts = Parts::default();
        parts.lit.push_str(&src[tok.start..tok.end]);
        let mut pos = tok.end;
        let mut trailing_slash = src[..pos].ends_with('/');
        // Text pieces before the first interpolation: `parser.y` allows one, and
        // only if an interpolation follows it.
        let mut pieces_before = 0;
        let mut first_piece = pos;
        let mut interpolated = false;
        loop {
            let rest = &src[pos..];
            if rest.starts_with("${") {
                if !interpolated && pieces_before > 1 {
                    return Err(stray_slash(first_piece));
                }
                pos = self.interpolation(pos + 2, &mut parts)?;
                interpolated = true;
                trailing_slash = false;
                continue;
            }
            let n = [lexer::path(rest), lexer::path_seg(rest)]
                .into_iter()
                .filter_map(|r| r.ok().map(|(_, m)| m.len()))
                .chain(Some(
                    rest.chars().take_while(|&c| lexer::is_path_char(c)).count(),
                ))
                .max()
                .unwrap_or(0);
            if n == 0 {
                break;
            }
            if !interpolated {
                if pieces_before == 0 {
                    first_piece = pos;
                }
                pieces_before += 1;
            }
            parts.lit.push_str(&rest[..n]);
            trailing_slash = rest[..n].ends_with('/');
            pos += n;
        }
        if trailing_slash {
            // Nix reports it at the character after the slash.
            return Err(ParseError::new(
                "path has a trailing slash",
                Span::new(pos, pos),
            ));
        }
        if !interpolated && pieces_before > 0 {
            return Err(stray_slash(first_piece));
        }
        self.set_pos(pos);
        Ok(parts.finish())
    }
}

/// The error for `./a//b`: after a path's trailing slash, Nix only accepts an
/// interpolation (possibly after one more `/`).
fn stray_slash(at: usize) -> ParseError {
    ParseError::of(
        ParseErrorKind::Unexpected,
        "unexpected '/' in path",
        Span::new(at, at + 1),
    )
}

/// Nix's `stripIndentation`: removes the common indentation (in spaces) of the
/// lines that have content, then the final line if it holds only spaces.
fn strip_indentation(toks: Vec<IndTok<'_>>) -> Vec<StrPart> {
    // Minimum indentation; lines holding only spaces do not count, while
    // interpolations and escapes count as content.
    let mut at_line_start = true;
    let mut min_indent = 1_000_000;
    let mut cur_indent = 0;
    for tok in &toks {
        let IndTok::Text(text) = tok else {
            if at_line_start {
                at_line_start = false;
                min_indent = min_indent.min(cur_indent);
            }
            continue;
        };
        for &b in text.as_bytes() {
            if at_line_start {
                match b {
                    b' ' => cur_indent += 1,
                    b'\n' => cur_indent = 0,
                    _ => {
                        at_line_start = false;
                        min_indent = min_indent.min(cur_indent);
                    }
                }
            } else if b == b'\n' {
                at_line_start = true;
                cur_indent = 0;
            }
        }
    }

    // Strip it from every line. Escapes are stripped like text here (as in Nix).
    let mut parts = Parts::default();
    let mut at_line_start = true;
    let mut dropped = 0;
    let count = toks.len();
    for (i, tok) in toks.into_iter().enumerate() {
        let text = match tok {
            IndTok::Interp(e) => {
                at_line_start = false;
                dropped = 0;
                parts.interp(e, 0);
                continue;
            }
            IndTok::Text(t) | IndTok::Esc(t) => t,
        };
        let out = &mut parts.lit;
        let base = out.len();
        let bytes = text.as_bytes();
        let mut j = 0;
        while j < bytes.len() {
            if !at_line_start {
                // Copy up to and including the next newline.
                let n = run_len(&bytes[j..], |b| b == b'\n');
                let end = (j + n + 1).min(bytes.len());
                out.push_str(&text[j..end]);
                at_line_start = end > j + n;
                j = end;
                continue;
            }
            match bytes[j] {
                b' ' => {
                    if dropped >= min_indent {
                        out.push(' ');
                    }
                    dropped += 1;
                }
                b'\n' => {
                    dropped = 0;
                    out.push('\n');
                }
                _ => {
                    at_line_start = false;
                    dropped = 0;
                    continue;
                }
            }
            j += 1;
        }
        if i + 1 == count {
            // Drop a final line that holds only spaces.
            if let Some(nl) = out[base..].rfind('\n') {
                let nl = base + nl;
                if out[nl + 1..].bytes().all(|b| b == b' ') {
                    out.truncate(nl + 1);
                }
            }
        }
    }
    parts.finish().0
}
