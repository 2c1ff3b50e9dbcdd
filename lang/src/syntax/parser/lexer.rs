//! The default-mode tokenizer: turns the source text outside string literals into
//! [`Token`]s, one at a time, on demand.
//!
//! This module owns the lexical grammar of Nix's `lexer.l` (identifiers, keywords,
//! numbers, operators, paths, search paths, URIs, whitespace and comments), written
//! as small nom recognizers combined with flex's longest-match rule. It must not
//! look inside string literals or path interpolations: those are context-dependent
//! and lexed by [`super::strings`] while the parser drives them.

use nom::{
    branch::alt,
    bytes::complete::{tag, take_till, take_until, take_while, take_while1},
    character::complete::{char, digit0, digit1, multispace1, one_of, satisfy},
    combinator::{opt, recognize},
    multi::{many0_count, many1_count},
    sequence::{pair, tuple},
    IResult,
};

use super::super::ast::{PathAnchor, Span};
use super::{ParseError, ParseErrorKind};

/// nom result with a unit error: the lexer only needs "matched or not".
type Lex<'a> = IResult<&'a str, &'a str, ()>;

/// Reserved words. `or` is a keyword that the grammar also accepts as an
/// attribute name and, via application, as a variable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kw {
    If,
    Then,
    Else,
    Assert,
    With,
    Let,
    In,
    Rec,
    Inherit,
    Or,
}

/// The kind of a token, with its decoded payload where it has one.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum T<'a> {
    Id(&'a str),
    Int(i64),
    Float(f64),
    Kw(Kw),
    Ellipsis,
    Eq,
    Neq,
    Leq,
    Geq,
    And,
    OrOr,
    Impl,
    Update,
    Concat,
    PipeInto,
    PipeFrom,
    /// `${` outside a string (dynamic attribute names).
    DollarCurly,
    LBrace,
    RBrace,
    /// `"`: a string starts right after this token.
    Quote,
    /// `''` plus an optional run of spaces and one newline: an indented string
    /// starts right after this token.
    IndOpen,
    /// The start of a path literal; its text is the token's source range (it may end
    /// in `/` when an interpolation or more path text follows).
    Path(PathAnchor),
    /// `<a/b>`; the payload is the text between the brackets.
    SPath(&'a str),
    Uri(&'a str),
    /// Any other ASCII punctuation character (`(`, `;`, `+`, ...).
    Sym(char),
    /// A character that cannot start any token (non-ASCII, control characters).
    Invalid(char),
    Eof,
}

/// A token and its byte range in the source.
#[derive(Clone, Copy, Debug)]
pub(super) struct Token<'a> {
    pub t: T<'a>,
    pub start: usize,
    pub end: usize,
}

impl<'a> Token<'a> {
    pub fn span(&self) -> Span {
        Span::new(self.start, self.end)
    }

    /// How the token is named in "unexpected …" messages.
    pub fn describe(&self, src: &str) -> String {
        let text = &src[self.start..self.end];
        match self.t {
            T::Id(s) => format!("identifier '{s}'"),
            T::Int(_) => format!("integer '{text}'"),
            T::Float(_) => format!("floating-point literal '{text}'"),
            T::Kw(_) | T::Ellipsis | T::Eq | T::Neq | T::Leq | T::Geq | T::And | T::OrOr => {
                format!("'{text}'")
            }
            T::Impl | T::Update | T::Concat | T::PipeInto | T::PipeFrom => format!("'{text}'"),
            T::DollarCurly | T::LBrace | T::RBrace | T::Quote => format!("'{text}'"),
            T::IndOpen => "start of an indented string ('')".to_string(),
            T::Path(PathAnchor::Home) => format!("'~/…' path '{text}'"),
            T::Path(_) => format!("path '{text}'"),
            T::SPath(_) => format!("'<…>' path '{text}'"),
            T::Uri(_) => format!("URI '{text}'"),
            T::Sym(c) => format!("'{c}'"),
            T::Invalid(c) if c.is_control() => format!("invalid character U+{:04X}", c as u32),
            T::Invalid(c) => format!("invalid character '{c}'"),
            T::Eof => "end of file".to_string(),
        }
    }
}

/// `[a-zA-Z0-9._+-]`: a character allowed in a path segment.
pub(super) fn is_path_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '+')
}

fn is_id_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '\'' | '-')
}

fn is_uri_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "%/?:@&=+$,-_.!~*'".contains(c)
}

/// `ID`: `[a-zA-Z_][a-zA-Z0-9_'-]*`.
fn ident(i: &str) -> Lex<'_> {
    recognize(pair(
        satisfy(|c| c.is_ascii_alphabetic() || c == '_'),
        take_while(is_id_char),
    ))(i)
}

/// `FLOAT`: `(([1-9][0-9]*\.[0-9]*)|(0?\.[0-9]+))([Ee][+-]?[0-9]+)?`.
fn float(i: &str) -> Lex<'_> {
    recognize(pair(
        alt((
            recognize(tuple((one_of("123456789"), digit0, char('.'), digit0))),
            recognize(tuple((opt(char('0')), char('.'), digit1))),
        )),
        opt(tuple((one_of("Ee"), opt(one_of("+-")), digit1))),
    ))(i)
}

/// One or more `/segment`s.
fn segments(i: &str) -> IResult<&str, usize, ()> {
    many1_count(pair(char('/'), take_while1(is_path_char)))(i)
}

/// `PATH`: `{PATH_CHAR}*(\/{PATH_CHAR}+)+\/?` (the trailing slash is matched so that
/// the parser can report it or continue with an interpolation).
pub(super) fn path(i: &str) -> Lex<'_> {
    recognize(tuple((take_while(is_path_char), segments, opt(char('/')))))(i)
}

/// `PATH_SEG`: `{PATH_CHAR}*\/`.
pub(super) fn path_seg(i: &str) -> Lex<'_> {
    recognize(pair(take_while(is_path_char), char('/')))(i)
}

/// `HPATH`: `\~(\/{PATH_CHAR}+)+\/?`.
fn home_path(i: &str) -> Lex<'_> {
    recognize(tuple((char('~'), segments, opt(char('/')))))(i)
}

/// `SPATH`: `\<{PATH_CHAR}+(\/{PATH_CHAR}+)*\>`.
fn search_path(i: &str) -> Lex<'_> {
    recognize(tuple((
        char('<'),
        take_while1(is_path_char),
        many0_count(pair(char('/'), take_while1(is_path_char))),
        char('>'),
    )))(i)
}

/// `URI`: `[a-zA-Z][a-zA-Z0-9\+\-\.]*\:[a-zA-Z0-9\%\/\?\:\@\&\=\+\$\,\-\_\.\!\~\*\']+`.
fn uri(i: &str) -> Lex<'_> {
    recognize(tuple((
        satisfy(|c| c.is_ascii_alphabetic()),
        take_while(|c: char| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')),
        char(':'),
        take_while1(is_uri_char),
    )))(i)
}

/// Whitespace (` \t\r\n`), `# line` comments and `/* block */` comments.
fn trivia(i: &str) -> IResult<&str, usize, ()> {
    many0_count(alt((
        multispace1,
        recognize(pair(char('#'), take_till(|c| c == '\n' || c == '\r'))),
        recognize(tuple((tag("/*"), take_until("*/"), tag("*/")))),
    )))(i)
}

/// Length of a successful match, or 0.
fn len_of(r: Lex<'_>) -> usize {
    r.map(|(_, m)| m.len()).unwrap_or(0)
}

/// Skips whitespace and comments from `pos`; fails on an unterminated `/*`.
pub(super) fn skip_trivia(src: &str, pos: usize) -> Result<usize, ParseError> {
    let rest = &src[pos..];
    if !matches!(
        rest.as_bytes().first(),
        Some(b' ' | b'\t' | b'\r' | b'\n' | b'#' | b'/')
    ) {
        return Ok(pos);
    }
    let after = match trivia(rest) {
        Ok((after, _)) => after,
        Err(_) => rest,
    };
    let at = src.len() - after.len();
    if after.starts_with("/*") {
        return Err(ParseError::of(
            ParseErrorKind::Incomplete,
            "unterminated comment",
            Span::new(at, at + 2),
        ));
    }
    Ok(at)
}

fn keyword(s: &str) -> Option<Kw> {
    Some(match s {
        "if" => Kw::If,
        "then" => Kw::Then,
        "else" => Kw::Else,
        "assert" => Kw::Assert,
        "with" => Kw::With,
        "let" => Kw::Let,
        "in" => Kw::In,
        "rec" => Kw::Rec,
        "inherit" => Kw::Inherit,
        "or" => Kw::Or,
        _ => return None,
    })
}

/// What a word-like candidate would produce if it wins the longest match.
#[derive(Clone, Copy)]
enum Cand {
    Word,
    Fixed(T<'static>),
    Int,
    Float,
    /// A path prefix ending in `/` that is directly followed by `${`.
    PathSeg(PathAnchor),
    Path(PathAnchor),
    Uri,
    Single,
}

fn anchor_of(text: &str) -> PathAnchor {
    if text.starts_with('~') {
        PathAnchor::Home
    } else if text.starts_with('/') {
        PathAnchor::Absolute
    } else {
        PathAnchor::Relative
    }
}

/// Tokens starting with a character that several rules compete for (letters,
/// digits, `.`, `+`, `-`, `/`, `~`, `_`): flex's longest match, ties going to the
/// rule listed first in `lexer.l`.
fn word_like<'a>(rest: &'a str, start: usize) -> Result<(T<'a>, usize), ParseError> {
    // (match length used for the longest-match comparison, token length, candidate)
    let mut best: (usize, usize, Cand) = (1, 1, Cand::Single);
    let mut offer = |cmp_len: usize, tok_len: usize, c: Cand| {
        if cmp_len > best.0 || (cmp_len == best.0 && matches!(best.2, Cand::Single)) {
            best = (cmp_len, tok_len, c);
        }
    };
    // Rule order in lexer.l: keywords, `...`, operators, ID, INT, FLOAT,
    // PATH_SEG${ / HPATH_START${, PATH, HPATH, SPATH, URI.
    for (text, t) in [
        ("...", T::Ellipsis),
        ("->", T::Impl),
        ("//", T::Update),
        ("++", T::Concat),
    ] {
        if rest.starts_with(text) {
            offer(text.len(), text.len(), Cand::Fixed(t));
        }
    }
    let n = len_of(ident(rest));
    if n > 0 {
        offer(n, n, Cand::Word);
    }
    let n = len_of(digit1(rest));
    if n > 0 {
        offer(n, n, Cand::Int);
    }
    let n = len_of(float(rest));
    if n > 0 {
        offer(n, n, Cand::Float);
    }
    // Paths need a `/` right after the leading path characters (or `~`), URIs a
    // `:` right after the scheme: check that before trying them.
    let bytes = rest.as_bytes();
    let path_chars = bytes
        .iter()
        .take_while(|&&b| is_path_char(b as char))
        .count();
    if bytes.get(path_chars) == Some(&b'/') || rest.starts_with("~/") {
        let seg = if rest.starts_with("~/") {
            2
        } else {
            len_of(path_seg(rest))
        };
        if seg > 0 && rest[seg..].starts_with("${") {
            offer(seg + 2, seg, Cand::PathSeg(anchor_of(rest)));
        }
        let n = len_of(path(rest)).max(len_of(home_path(rest)));
        if n > 0 {
            offer(n, n, Cand::Path(anchor_of(rest)));
        }
    }
    let scheme = bytes
        .iter()
        .take_while(|&&b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
        .count();
    if bytes.get(scheme) == Some(&b':') {
        let n = len_of(uri(rest));
        if n > 0 {
            offer(n, n, Cand::Uri);
        }
    }
    let (_, len, cand) = best;
    let text = &rest[..len];
    let t = match cand {
        Cand::Word => keyword(text).map(T::Kw).unwrap_or(T::Id(text)),
        Cand::Fixed(t) => t,
        Cand::Int => match text.parse::<i64>() {
            Ok(v) => T::Int(v),
            Err(_) => {
                return Err(ParseError::new(
                    format!("invalid integer '{text}'"),
                    Span::new(start, start + len),
                ))
            }
        },
        Cand::Float => match text.parse::<f64>() {
            // Like strtod's ERANGE: overflow, and underflow to a subnormal or zero.
            Ok(v) if v.is_normal() || (v == 0.0 && !has_nonzero_mantissa(text)) => T::Float(v),
            _ => {
                return Err(ParseError::new(
                    format!("invalid float '{text}'"),
                    Span::new(start, start + len),
                ))
            }
        },
        Cand::PathSeg(a) | Cand::Path(a) => T::Path(a),
        Cand::Uri => T::Uri(text),
        Cand::Single => T::Sym(rest.chars().next().unwrap_or('?')),
    };
    Ok((t, len))
}

/// Whether the digits before the exponent of a float literal are not all zero.
fn has_nonzero_mantissa(text: &str) -> bool {
    text.split(['e', 'E'])
        .next()
        .unwrap_or("")
        .bytes()
        .any(|b| (b'1'..=b'9').contains(&b))
}

/// Lexes the next token at or after `pos` (skipping whitespace and comments).
pub(super) fn next_token(src: &str, pos: usize) -> Result<Token<'_>, ParseError> {
    let start = skip_trivia(src, pos)?;
    let rest = &src[start..];
    let Some(c) = rest.chars().next() else {
        return Ok(Token {
            t: T::Eof,
            start,
            end: start,
        });
    };
    let two = |s: &str, t: T<'static>, one: T<'static>| {
        if rest.starts_with(s) {
            (t, 2)
        } else {
            (one, 1)
        }
    };
    let (t, len) = match c {
        'a'..='z' | 'A'..='Z' | '0'..='9' | '_' | '.' | '+' | '-' | '/' | '~' => {
            word_like(rest, start)?
        }
        '=' => two("==", T::Eq, T::Sym('=')),
        '!' => two("!=", T::Neq, T::Sym('!')),
        '>' => two(">=", T::Geq, T::Sym('>')),
        '&' => two("&&", T::And, T::Sym('&')),
        '$' => two("${", T::DollarCurly, T::Sym('$')),
        '|' if rest.starts_with("|>") => (T::PipeInto, 2),
        '|' => two("||", T::OrOr, T::Sym('|')),
        '<' => match search_path(rest) {
            Ok((_, m)) => (T::SPath(&m[1..m.len() - 1]), m.len()),
            Err(_) if rest.starts_with("<|") => (T::PipeFrom, 2),
            Err(_) => two("<=", T::Leq, T::Sym('<')),
        },
        '{' => (T::LBrace, 1),
        '}' => (T::RBrace, 1),
        '"' => (T::Quote, 1),
        '\'' if rest.starts_with("''") => {
            // `''(\ *\n)?`: a first line holding only spaces is part of the opener.
            let spaces = rest[2..].bytes().take_while(|&b| b == b' ').count();
            let nl = usize::from(rest[2 + spaces..].starts_with('\n'));
            (T::IndOpen, if nl == 1 { 2 + spaces + 1 } else { 2 })
        }
        c if c.is_ascii_graphic() => (T::Sym(c), 1),
        c => (T::Invalid(c), c.len_utf8()),
    };
    Ok(Token {
        t,
        start,
        end: start + len,
    })
}
