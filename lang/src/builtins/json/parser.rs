//! The JSON reader behind `builtins.fromJSON`.
//!
//! Follows the grammar and the error messages of nlohmann::json (which Nix uses):
//! positions are `line L, column C` counted in bytes, with the offending character
//! (or the end of input) counted as read. Integers become `Int` when they fit in
//! an `i64` (a larger unsigned one is an error, as in Nix; a more negative one
//! becomes a float), everything else a `Float`. Nesting depth is limited only by
//! memory: recursion grows its stack on the heap.

use crate::eval::{EResult, ErrorKind, EvalError};
use crate::value::{Attrs, Sym, Value};

use super::null_byte_error;

/// Parses a complete JSON text into a value.
pub(crate) fn parse_json(s: &str) -> EResult<Value> {
    let mut p = Parser {
        src: s,
        b: s.as_bytes(),
        i: 0,
    };
    let t = p.next_token()?;
    let v = p.value(t)?;
    let t = p.next_token()?;
    if !matches!(t.kind, Tok::Eof) {
        return Err(p.syntax_error(&t, "value", Some("end of input")));
    }
    Ok(v)
}

#[derive(Debug)]
enum Tok {
    BeginArray,
    EndArray,
    BeginObject,
    EndObject,
    Colon,
    Comma,
    True,
    False,
    Null,
    Str(String),
    Int(i64),
    /// An unsigned integer past `i64::MAX` (an error once it is used as a value).
    BigUnsigned(u64),
    Float(f64),
    Eof,
    /// A lexical error: message and the text read so far.
    Error(String, String),
}

struct Token {
    kind: Tok,
    /// Bytes read when the token was recognised (the end of input counts as one).
    end: usize,
}

struct Parser<'a> {
    src: &'a str,
    b: &'a [u8],
    i: usize,
}

fn token_name(t: &Tok) -> &'static str {
    match t {
        Tok::BeginArray => "'['",
        Tok::EndArray => "']'",
        Tok::BeginObject => "'{'",
        Tok::EndObject => "'}'",
        Tok::Colon => "':'",
        Tok::Comma => "','",
        Tok::True => "'true' literal",
        Tok::False => "'false' literal",
        Tok::Null => "'null' literal",
        Tok::Str(_) => "string literal",
        Tok::Int(_) | Tok::BigUnsigned(_) | Tok::Float(_) => "number literal",
        Tok::Eof => "end of input",
        Tok::Error(..) => "<parse error>",
    }
}

const CONTROL_NAMES: [&str; 32] = [
    "NUL", "SOH", "STX", "ETX", "EOT", "ENQ", "ACK", "BEL", "BS", "HT", "LF", "VT", "FF", "CR",
    "SO", "SI", "DLE", "DC1", "DC2", "DC3", "DC4", "NAK", "SYN", "ETB", "CAN", "EM", "SUB", "ESC",
    "FS", "GS", "RS", "US",
];

fn control_message(c: u8) -> String {
    let short = match c {
        0x08 => " or \\b",
        0x09 => " or \\t",
        0x0a => " or \\n",
        0x0c => " or \\f",
        0x0d => " or \\r",
        _ => "",
    };
    format!(
        "invalid string: control character U+{:04X} ({}) must be escaped to \\u{:04X}{}",
        c, CONTROL_NAMES[c as usize], c, short
    )
}

/// nlohmann's rendering of the token text in "last read" (control characters as `<U+XXXX>`).
fn token_text(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if (c as u32) < 0x20 {
            out.push_str(&format!("<U+{:04X}>", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

impl<'a> Parser<'a> {
    /// The text from `start` up to and including the byte at `upto` (clamped).
    fn read_text(&self, start: usize, upto_incl: usize) -> String {
        let end = (upto_incl + 1).min(self.b.len());
        let mut end = end.max(start);
        while end < self.b.len() && !self.src.is_char_boundary(end) {
            end += 1;
        }
        token_text(self.src.get(start..end).unwrap_or(""))
    }

    fn lex_error(&self, msg: impl Into<String>, start: usize, bad: usize) -> Token {
        Token {
            kind: Tok::Error(msg.into(), self.read_text(start, bad)),
            end: bad + 1,
        }
    }

    fn next_token(&mut self) -> EResult<Token> {
        while let Some(&c) = self.b.get(self.i) {
            if matches!(c, b' ' | b'\t' | b'\n' | b'\r') {
                self.i += 1;
            } else {
                break;
            }
        }
        let start = self.i;
        let Some(&c) = self.b.get(start) else {
            return Ok(Token {
                kind: Tok::Eof,
                end: self.b.len() + 1,
            });
        };
        let simple = |k: Tok, p: &mut Self| {
            p.i += 1;
            Ok(Token { kind: k, end: p.i })
        };
        match c {
            b'[' => simple(Tok::BeginArray, self),
            b']' => simple(Tok::EndArray, self),
            b'{' => simple(Tok::BeginObject, self),
            b'}' => simple(Tok::EndObject, self),
            b':' => simple(Tok::Colon, self),
            b',' => simple(Tok::Comma, self),
            b't' => Ok(self.literal("true", Tok::True)),
            b'f' => Ok(self.literal("false", Tok::False)),
            b'n' => Ok(self.literal("null", Tok::Null)),
            b'"' => Ok(self.string()),
            b'-' | b'0'..=b'9' => self.number(),
            _ => {
                // The whole (possibly multi-byte) character is what was read.
                let len = self
                    .src
                    .get(start..)
                    .and_then(|r| r.chars().next())
                    .map_or(1, |ch| ch.len_utf8());
                Ok(self.lex_error("invalid literal", start, start + len - 1))
            }
        }
    }

    fn literal(&mut self, word: &str, kind: Tok) -> Token {
        let start = self.i;
        for (k, w) in word.bytes().enumerate() {
            match self.b.get(start + k) {
                Some(&c) if c == w => {}
                Some(_) => return self.lex_error("invalid literal", start, start + k),
                None => {
                    return Token {
                        kind: Tok::Error(
                            "invalid literal".into(),
                            self.read_text(start, start + k - 1),
                        ),
                        end: self.b.len() + 1,
                    }
                }
            }
        }
        self.i = start + word.len();
        Token { kind, end: self.i }
    }

    fn hex4(&self, at: usize) -> Option<u32> {
        let h = self.src.get(at..at + 4)?;
        if !h.bytes().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        u32::from_str_radix(h, 16).ok()
    }

    fn string(&mut self) -> Token {
        let start = self.i;
        let mut i = start + 1;
        let mut out = String::new();
        loop {
            let Some(&c) = self.b.get(i) else {
                return Token {
                    kind: Tok::Error(
                        "invalid string: missing closing quote".into(),
                        self.read_text(start, self.b.len().saturating_sub(1)),
                    ),
                    end: self.b.len() + 1,
                };
            };
            match c {
                b'"' => {
                    self.i = i + 1;
                    return Token {
                        kind: Tok::Str(out),
                        end: self.i,
                    };
                }
                b'\\' => {
                    let Some(&e) = self.b.get(i + 1) else {
                        return Token {
                            kind: Tok::Error(
                                "invalid string: missing closing quote".into(),
                                self.read_text(start, self.b.len().saturating_sub(1)),
                            ),
                            end: self.b.len() + 1,
                        };
                    };
                    let simple = match e {
                        b'"' => Some('"'),
                        b'\\' => Some('\\'),
                        b'/' => Some('/'),
                        b'b' => Some('\u{8}'),
                        b'f' => Some('\u{c}'),
                        b'n' => Some('\n'),
                        b'r' => Some('\r'),
                        b't' => Some('\t'),
                        _ => None,
                    };
                    if let Some(ch) = simple {
                        out.push(ch);
                        i += 2;
                        continue;
                    }
                    if e != b'u' {
                        return self.lex_error(
                            "invalid string: forbidden character after backslash",
                            start,
                            i + 1,
                        );
                    }
                    let Some(cp) = self.hex4(i + 2) else {
                        let bad = (i + 2..i + 6)
                            .find(|&k| self.b.get(k).is_none_or(|c| !c.is_ascii_hexdigit()));
                        return self.lex_error(
                            "invalid string: '\\u' must be followed by 4 hex digits",
                            start,
                            bad.unwrap_or(i + 5),
                        );
                    };
                    i += 6;
                    if (0xD800..0xDC00).contains(&cp) {
                        let low =
                            if self.b.get(i) == Some(&b'\\') && self.b.get(i + 1) == Some(&b'u') {
                                self.hex4(i + 2)
                            } else {
                                None
                            };
                        match low {
                            Some(lo) if (0xDC00..0xE000).contains(&lo) => {
                                let full = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                                out.push(char::from_u32(full).unwrap_or('\u{FFFD}'));
                                i += 6;
                            }
                            _ => {
                                let bad = if self.b.get(i) == Some(&b'\\')
                                    && self.b.get(i + 1) == Some(&b'u')
                                {
                                    i + 5
                                } else {
                                    i
                                };
                                return self.lex_error(
                                    "invalid string: surrogate U+D800..U+DBFF must be followed by U+DC00..U+DFFF",
                                    start,
                                    bad,
                                );
                            }
                        }
                    } else if (0xDC00..0xE000).contains(&cp) {
                        return self.lex_error(
                            "invalid string: surrogate U+DC00..U+DFFF must follow U+D800..U+DBFF",
                            start,
                            i - 1,
                        );
                    } else {
                        out.push(char::from_u32(cp).unwrap_or('\u{FFFD}'));
                    }
                }
                c if c < 0x20 => return self.lex_error(control_message(c), start, i),
                _ => {
                    // Copy a run of ordinary characters at once (always whole UTF-8 sequences,
                    // since the run stops only at ASCII bytes).
                    let run_end = (i..self.b.len())
                        .find(|&k| matches!(self.b[k], b'"' | b'\\') || self.b[k] < 0x20)
                        .unwrap_or(self.b.len());
                    out.push_str(self.src.get(i..run_end).unwrap_or(""));
                    i = run_end;
                }
            }
        }
    }

    fn number(&mut self) -> EResult<Token> {
        let start = self.i;
        let b = self.b;
        let at = |k: usize| b.get(k).copied();
        let mut i = start;
        let mut is_float = false;
        if at(i) == Some(b'-') {
            i += 1;
            if !at(i).is_some_and(|c| c.is_ascii_digit()) {
                return Ok(self.number_error("invalid number; expected digit after '-'", start, i));
            }
        }
        if at(i) == Some(b'0') {
            i += 1;
        } else {
            while at(i).is_some_and(|c| c.is_ascii_digit()) {
                i += 1;
            }
        }
        if at(i) == Some(b'.') {
            is_float = true;
            i += 1;
            if !at(i).is_some_and(|c| c.is_ascii_digit()) {
                return Ok(self.number_error("invalid number; expected digit after '.'", start, i));
            }
            while at(i).is_some_and(|c| c.is_ascii_digit()) {
                i += 1;
            }
        }
        if matches!(at(i), Some(b'e' | b'E')) {
            is_float = true;
            i += 1;
            if matches!(at(i), Some(b'+' | b'-')) {
                i += 1;
                if !at(i).is_some_and(|c| c.is_ascii_digit()) {
                    return Ok(self.number_error(
                        "invalid number; expected digit after exponent sign",
                        start,
                        i,
                    ));
                }
            } else if !at(i).is_some_and(|c| c.is_ascii_digit()) {
                return Ok(self.number_error(
                    "invalid number; expected '+', '-', or digit after exponent",
                    start,
                    i,
                ));
            }
            while at(i).is_some_and(|c| c.is_ascii_digit()) {
                i += 1;
            }
        }
        self.i = i;
        let text = self.src.get(start..i).unwrap_or("0");
        let as_float = |text: &str| -> EResult<Tok> {
            let f: f64 = text.parse().unwrap_or(0.0);
            if !f.is_finite() {
                return Err(EvalError::new(
                    ErrorKind::Eval,
                    format!("[json.exception.out_of_range.406] number overflow parsing '{text}'"),
                ));
            }
            Ok(Tok::Float(f))
        };
        let kind = if is_float {
            as_float(text)?
        } else if text.starts_with('-') {
            match text.parse::<i64>() {
                Ok(n) => Tok::Int(n),
                Err(_) => as_float(text)?,
            }
        } else {
            match text.parse::<u64>() {
                Ok(n) => match i64::try_from(n) {
                    Ok(n) => Tok::Int(n),
                    Err(_) => Tok::BigUnsigned(n),
                },
                Err(_) => as_float(text)?,
            }
        };
        Ok(Token { kind, end: i })
    }

    fn number_error(&self, msg: &str, start: usize, bad: usize) -> Token {
        if bad >= self.b.len() {
            Token {
                kind: Tok::Error(
                    msg.into(),
                    self.read_text(start, self.b.len().saturating_sub(1)),
                ),
                end: self.b.len() + 1,
            }
        } else {
            self.lex_error(msg, start, bad)
        }
    }

    /// `parse error at line L, column C: syntax error while parsing CTX - …`.
    fn syntax_error(&self, t: &Token, context: &str, expected: Option<&str>) -> Box<EvalError> {
        let read = t.end.min(self.b.len());
        let consumed = &self.b[..read];
        let line = 1 + consumed.iter().filter(|&&c| c == b'\n').count();
        let line_start = consumed
            .iter()
            .rposition(|&c| c == b'\n')
            .map_or(0, |p| p + 1);
        let column = t.end - line_start;
        let mut msg = format!(
            "[json.exception.parse_error.101] parse error at line {line}, column {column}: syntax error while parsing {context} - "
        );
        match &t.kind {
            Tok::Error(m, text) => msg.push_str(&format!("{m}; last read: '{text}'")),
            other => msg.push_str(&format!("unexpected {}", token_name(other))),
        }
        if let Some(e) = expected {
            msg.push_str(&format!("; expected {e}"));
        }
        EvalError::new(ErrorKind::Eval, msg)
    }

    fn value(&mut self, t: Token) -> EResult<Value> {
        stacker::maybe_grow(64 * 1024, 2 * 1024 * 1024, || self.value_inner(t))
    }

    fn value_inner(&mut self, t: Token) -> EResult<Value> {
        match t.kind {
            Tok::Null => Ok(Value::Null),
            Tok::True => Ok(Value::bool(true)),
            Tok::False => Ok(Value::bool(false)),
            Tok::Int(n) => Ok(Value::Int(n)),
            Tok::BigUnsigned(n) => Err(EvalError::new(
                ErrorKind::Eval,
                format!("unsigned json number {n} outside of Nix integer range"),
            )),
            Tok::Float(f) => Ok(Value::float(f)),
            Tok::Str(s) => {
                if s.contains('\0') {
                    return Err(EvalError::new(ErrorKind::Eval, null_byte_error(&s)));
                }
                Ok(Value::str(s))
            }
            Tok::BeginArray => {
                let mut items = Vec::new();
                let mut t = self.next_token()?;
                if matches!(t.kind, Tok::EndArray) {
                    return Ok(Value::list(items));
                }
                loop {
                    items.push(self.value(t)?);
                    let sep = self.next_token()?;
                    match sep.kind {
                        Tok::Comma => t = self.next_token()?,
                        Tok::EndArray => return Ok(Value::list(items)),
                        _ => return Err(self.syntax_error(&sep, "array", Some("']'"))),
                    }
                }
            }
            Tok::BeginObject => {
                let mut entries: Vec<(Sym, Value)> = Vec::new();
                let mut key = self.next_token()?;
                if matches!(key.kind, Tok::EndObject) {
                    return Ok(Value::attrs(Attrs::new()));
                }
                loop {
                    let k = match key.kind {
                        Tok::Str(s) => s,
                        kind => {
                            let t = Token { kind, end: key.end };
                            return Err(self.syntax_error(
                                &t,
                                "object key",
                                Some("string literal"),
                            ));
                        }
                    };
                    if k.contains('\0') {
                        return Err(EvalError::new(ErrorKind::Eval, null_byte_error(&k)));
                    }
                    let colon = self.next_token()?;
                    if !matches!(colon.kind, Tok::Colon) {
                        return Err(self.syntax_error(&colon, "object separator", Some("':'")));
                    }
                    let vt = self.next_token()?;
                    let v = self.value(vt)?;
                    entries.push((Sym::new(&k), v));
                    let sep = self.next_token()?;
                    match sep.kind {
                        Tok::Comma => key = self.next_token()?,
                        Tok::EndObject => return Ok(Value::attrs(Attrs::from_unsorted(entries))),
                        _ => return Err(self.syntax_error(&sep, "object", Some("'}'"))),
                    }
                }
            }
            Tok::Error(..) => Err(self.syntax_error(&t, "value", None)),
            _ => Err(self.syntax_error(&t, "value", Some("'[', '{', or a literal"))),
        }
    }
}
