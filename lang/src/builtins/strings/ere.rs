//! POSIX extended regular expressions as Nix sees them: `std::regex` with the
//! `extended` grammar, as implemented by libstdc++.
//!
//! Owns parsing such a pattern (with libstdc++'s exact acceptance rules, e.g.
//! `\d` and `\]` are invalid, `]`/`}` are ordinary outside brackets, a
//! backslash is literal inside brackets), and matching with libstdc++'s
//! observable semantics: strings are bytes, `.` matches any byte but NUL,
//! `^`/`$` only match at the very start/end, greedy repetition takes the first
//! successful path (like Perl), but an alternation tries every branch and keeps
//! the longest overall match.
//!
//! Two engines implement those semantics:
//! * the `regex` crate (fast, linear time), fed a translation of the pattern.
//!   It is exact for whole-string matching and for searching with patterns
//!   without `|`;
//! * a backtracking executor that mirrors libstdc++'s automaton and depth-first
//!   executor, used for searching with patterns containing `|` (where
//!   "longest alternative" differs from the crate's leftmost-first rule), and
//!   as a fallback when the crate rejects a translation (size limits).
//!
//! Compiled patterns are cached per thread. This module must not know about
//! Nix values.

use std::cell::{OnceCell, RefCell};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::rc::Rc;

/// Why a pattern was rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RegexError {
    /// Not a valid extended regular expression.
    Invalid,
    /// Valid, but past libstdc++'s automaton size limit.
    TooBig,
}

/// libstdc++'s `_GLIBCXX_REGEX_STATE_LIMIT`.
const STATE_LIMIT: u64 = 100_000;

// ---- byte sets -------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct ByteSet([u64; 4]);

impl ByteSet {
    fn insert(&mut self, b: u8) {
        self.0[(b >> 6) as usize] |= 1 << (b & 63);
    }
    pub(crate) fn contains(&self, b: u8) -> bool {
        self.0[(b >> 6) as usize] & (1 << (b & 63)) != 0
    }
    fn union(&mut self, o: &ByteSet) {
        for i in 0..4 {
            self.0[i] |= o.0[i];
        }
    }
    fn complement(&self) -> ByteSet {
        ByteSet([!self.0[0], !self.0[1], !self.0[2], !self.0[3]])
    }
    fn from_fn(f: impl Fn(u8) -> bool) -> ByteSet {
        let mut s = ByteSet::default();
        for b in 0..=255u8 {
            if f(b) {
                s.insert(b);
            }
        }
        s
    }
    /// `.`: every byte but NUL.
    fn any() -> ByteSet {
        ByteSet::from_fn(|b| b != 0)
    }
}

impl std::fmt::Debug for ByteSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut s = String::new();
        push_set(&mut s, self);
        f.write_str(&s)
    }
}

// ---- syntax ------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Quant {
    /// `*`
    Star,
    /// `+`
    Plus,
    /// `?`
    Opt,
    /// `{n}`, `{n,}`, `{n,m}`
    Range(u32, Option<u32>),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Node {
    Empty,
    Lit(u8),
    Any,
    Set(ByteSet),
    /// `^`
    Bol,
    /// `$`
    Eol,
    /// A capturing group and its number (from 1, in order of `(`).
    Group(Box<Node>, usize),
    Concat(Vec<Node>),
    Alt(Vec<Node>),
    Repeat(Box<Node>, Quant),
}

/// Characters that a backslash may escape outside brackets (libstdc++'s
/// `_M_extended_spec_char`); escaping anything else is an error.
const SPECIAL: &[u8] = b".[\\()*+?{|^$";

/// POSIX collating element names, indexed by character (as libstdc++'s
/// `regex_traits::lookup_collatename` knows them).
const COLLATE_NAMES: [&str; 128] = [
    "NUL",
    "SOH",
    "STX",
    "ETX",
    "EOT",
    "ENQ",
    "ACK",
    "alert",
    "backspace",
    "tab",
    "newline",
    "vertical-tab",
    "form-feed",
    "carriage-return",
    "SO",
    "SI",
    "DLE",
    "DC1",
    "DC2",
    "DC3",
    "DC4",
    "NAK",
    "SYN",
    "ETB",
    "CAN",
    "EM",
    "SUB",
    "ESC",
    "IS4",
    "IS3",
    "IS2",
    "IS1",
    "space",
    "exclamation-mark",
    "quotation-mark",
    "number-sign",
    "dollar-sign",
    "percent-sign",
    "ampersand",
    "apostrophe",
    "left-parenthesis",
    "right-parenthesis",
    "asterisk",
    "plus-sign",
    "comma",
    "hyphen",
    "period",
    "slash",
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "colon",
    "semicolon",
    "less-than-sign",
    "equals-sign",
    "greater-than-sign",
    "question-mark",
    "commercial-at",
    "A",
    "B",
    "C",
    "D",
    "E",
    "F",
    "G",
    "H",
    "I",
    "J",
    "K",
    "L",
    "M",
    "N",
    "O",
    "P",
    "Q",
    "R",
    "S",
    "T",
    "U",
    "V",
    "W",
    "X",
    "Y",
    "Z",
    "left-square-bracket",
    "backslash",
    "right-square-bracket",
    "circumflex",
    "underscore",
    "grave-accent",
    "a",
    "b",
    "c",
    "d",
    "e",
    "f",
    "g",
    "h",
    "i",
    "j",
    "k",
    "l",
    "m",
    "n",
    "o",
    "p",
    "q",
    "r",
    "s",
    "t",
    "u",
    "v",
    "w",
    "x",
    "y",
    "z",
    "left-curly-bracket",
    "vertical-line",
    "right-curly-bracket",
    "tilde",
    "DEL",
];

fn lookup_collate(name: &[u8]) -> Option<u8> {
    COLLATE_NAMES
        .iter()
        .position(|n| n.as_bytes() == name)
        .map(|i| i as u8)
}

/// A character class by name (`[:alpha:]`), in the C locale.
fn class_set(name: &[u8]) -> Option<ByteSet> {
    let lower = name.to_ascii_lowercase();
    let f: fn(u8) -> bool = match &lower[..] {
        b"alnum" => |b| b.is_ascii_alphanumeric(),
        b"alpha" => |b| b.is_ascii_alphabetic(),
        b"blank" => |b| b == b' ' || b == b'\t',
        b"cntrl" => |b| b.is_ascii_control(),
        b"digit" | b"d" => |b| b.is_ascii_digit(),
        b"graph" => |b| b.is_ascii_graphic(),
        b"lower" => |b| b.is_ascii_lowercase(),
        b"print" => |b| b.is_ascii_graphic() || b == b' ',
        b"punct" => |b| b.is_ascii_punctuation(),
        b"space" | b"s" => |b| matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r'),
        b"upper" => |b| b.is_ascii_uppercase(),
        b"xdigit" => |b| b.is_ascii_hexdigit(),
        b"w" => |b| b.is_ascii_alphanumeric() || b == b'_',
        _ => return None,
    };
    Some(ByteSet::from_fn(f))
}

enum BTok {
    Dash,
    End,
    Char(u8),
    Coll(Vec<u8>),
    Equiv(Vec<u8>),
    Class(Vec<u8>),
}

#[derive(Clone, Copy)]
enum Last {
    None,
    Char(u8),
    Class,
}

struct Parser<'a> {
    p: &'a [u8],
    i: usize,
    groups: usize,
    depth: usize,
}

/// Deepest group nesting accepted (the parser and the passes over the tree
/// recurse once per level).
const MAX_NESTING: usize = 500;

/// Parses an extended regular expression; returns its syntax tree and the
/// number of capturing groups.
pub(crate) fn parse(pat: &[u8]) -> Result<(Node, usize), RegexError> {
    let mut p = Parser {
        p: pat,
        i: 0,
        groups: 0,
        depth: 0,
    };
    let n = p.disjunction()?;
    if p.i != pat.len() {
        // A stray `)` or a quantifier with nothing to repeat.
        return Err(RegexError::Invalid);
    }
    Ok((n, p.groups))
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.p.get(self.i).copied()
    }

    fn disjunction(&mut self) -> Result<Node, RegexError> {
        let mut alts = vec![self.alternative()?];
        while self.peek() == Some(b'|') {
            self.i += 1;
            alts.push(self.alternative()?);
        }
        Ok(if alts.len() == 1 {
            alts.swap_remove(0)
        } else {
            Node::Alt(alts)
        })
    }

    fn alternative(&mut self) -> Result<Node, RegexError> {
        let mut items = Vec::new();
        while let Some(t) = self.term()? {
            items.push(t);
        }
        Ok(match items.len() {
            0 => Node::Empty,
            1 => items.swap_remove(0),
            _ => Node::Concat(items),
        })
    }

    fn term(&mut self) -> Result<Option<Node>, RegexError> {
        let Some(c) = self.peek() else {
            return Ok(None);
        };
        match c {
            b'^' => {
                self.i += 1;
                Ok(Some(Node::Bol))
            }
            b'$' => {
                self.i += 1;
                Ok(Some(Node::Eol))
            }
            b'|' | b')' | b'*' | b'+' | b'?' | b'{' => Ok(None),
            _ => {
                let mut atom = self.atom()?;
                while let Some(q) = self.quantifier()? {
                    atom = Node::Repeat(Box::new(atom), q);
                }
                Ok(Some(atom))
            }
        }
    }

    fn atom(&mut self) -> Result<Node, RegexError> {
        let Some(c) = self.peek() else {
            return Err(RegexError::Invalid);
        };
        self.i += 1;
        match c {
            b'.' => Ok(Node::Any),
            b'(' => {
                self.groups += 1;
                let idx = self.groups;
                self.depth += 1;
                if self.depth > MAX_NESTING {
                    return Err(RegexError::TooBig);
                }
                let inner = self.disjunction()?;
                self.depth -= 1;
                if self.peek() != Some(b')') {
                    return Err(RegexError::Invalid);
                }
                self.i += 1;
                Ok(Node::Group(Box::new(inner), idx))
            }
            b'[' => self.bracket(),
            b'\\' => match self.peek() {
                Some(d) if SPECIAL.contains(&d) => {
                    self.i += 1;
                    Ok(Node::Lit(d))
                }
                _ => Err(RegexError::Invalid),
            },
            c => Ok(Node::Lit(c)),
        }
    }

    fn number(&mut self) -> Result<Option<u32>, RegexError> {
        let start = self.i;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.i += 1;
        }
        if start == self.i {
            return Ok(None);
        }
        let mut v: u64 = 0;
        for &d in &self.p[start..self.i] {
            v = v * 10 + u64::from(d - b'0');
            if v > u64::from(u32::MAX) {
                return Err(RegexError::TooBig);
            }
        }
        Ok(Some(v as u32))
    }

    fn quantifier(&mut self) -> Result<Option<Quant>, RegexError> {
        let q = match self.peek() {
            Some(b'*') => Quant::Star,
            Some(b'+') => Quant::Plus,
            Some(b'?') => Quant::Opt,
            Some(b'{') => {
                self.i += 1;
                let min = self.number()?.ok_or(RegexError::Invalid)?;
                let max = if self.peek() == Some(b',') {
                    self.i += 1;
                    self.number()?
                } else {
                    Some(min)
                };
                if self.peek() != Some(b'}') {
                    return Err(RegexError::Invalid);
                }
                if max.is_some_and(|m| m < min) {
                    return Err(RegexError::Invalid);
                }
                Quant::Range(min, max)
            }
            _ => return Ok(None),
        };
        self.i += 1;
        Ok(Some(q))
    }

    fn eat_class(&mut self, k: u8) -> Result<Vec<u8>, RegexError> {
        let start = self.i;
        while self.peek().is_some_and(|c| c != k) {
            self.i += 1;
        }
        let name = self.p[start..self.i].to_vec();
        if self.peek() != Some(k) {
            return Err(RegexError::Invalid);
        }
        self.i += 1;
        if self.peek() != Some(b']') {
            return Err(RegexError::Invalid);
        }
        self.i += 1;
        Ok(name)
    }

    /// A bracket expression, after its `[`.
    fn bracket(&mut self) -> Result<Node, RegexError> {
        let neg = self.peek() == Some(b'^');
        if neg {
            self.i += 1;
        }
        // Tokens up to the closing `]`; a `]` first is an ordinary character.
        let mut toks = Vec::new();
        let mut at_start = true;
        loop {
            let Some(c) = self.peek() else {
                return Err(RegexError::Invalid);
            };
            self.i += 1;
            let t = match c {
                b'-' => BTok::Dash,
                b'[' => match self.peek() {
                    None => return Err(RegexError::Invalid),
                    Some(k @ (b'.' | b':' | b'=')) => {
                        self.i += 1;
                        let name = self.eat_class(k)?;
                        match k {
                            b'.' => BTok::Coll(name),
                            b':' => BTok::Class(name),
                            _ => BTok::Equiv(name),
                        }
                    }
                    Some(_) => BTok::Char(b'['),
                },
                b']' if !at_start => {
                    toks.push(BTok::End);
                    break;
                }
                c => BTok::Char(c),
            };
            toks.push(t);
            at_start = false;
        }

        // libstdc++'s `_M_expression_term`, including its POSIX rules for `-`.
        let mut set = ByteSet::default();
        let mut last = Last::None;
        let mut k = 0;
        match toks.first() {
            Some(BTok::Char(c)) => {
                last = Last::Char(*c);
                k = 1;
            }
            Some(BTok::Dash) => {
                last = Last::Char(b'-');
                k = 1;
            }
            _ => {}
        }
        fn push_char(set: &mut ByteSet, last: &mut Last, c: u8) {
            if let Last::Char(l) = *last {
                set.insert(l);
            }
            *last = Last::Char(c);
        }
        fn push_class(set: &mut ByteSet, last: &mut Last) {
            if let Last::Char(l) = *last {
                set.insert(l);
            }
            *last = Last::Class;
        }
        fn make_range(set: &mut ByteSet, l: u8, r: u8) -> Result<(), RegexError> {
            // `char` is signed in libstdc++ on the platforms Nix runs on.
            let (l, r) = (l as i8, r as i8);
            if l > r {
                return Err(RegexError::Invalid);
            }
            for b in l..=r {
                set.insert(b as u8);
            }
            Ok(())
        }
        loop {
            let Some(t) = toks.get(k) else {
                return Err(RegexError::Invalid);
            };
            k += 1;
            match t {
                BTok::End => break,
                BTok::Coll(name) => {
                    let c = lookup_collate(name).ok_or(RegexError::Invalid)?;
                    push_char(&mut set, &mut last, c);
                }
                BTok::Equiv(name) => {
                    let c = lookup_collate(name).ok_or(RegexError::Invalid)?;
                    push_class(&mut set, &mut last);
                    // Equivalence is by primary collation key, which ignores case.
                    set.insert(c.to_ascii_lowercase());
                    set.insert(c.to_ascii_uppercase());
                }
                BTok::Class(name) => {
                    let cs = class_set(name).ok_or(RegexError::Invalid)?;
                    push_class(&mut set, &mut last);
                    set.union(&cs);
                }
                BTok::Char(c) => push_char(&mut set, &mut last, *c),
                BTok::Dash => {
                    if matches!(toks.get(k), Some(BTok::End)) {
                        // `-]`: a literal dash at the end.
                        push_char(&mut set, &mut last, b'-');
                        break;
                    }
                    let Last::Char(l) = last else {
                        return Err(RegexError::Invalid);
                    };
                    match toks.get(k) {
                        Some(BTok::Char(r)) => make_range(&mut set, l, *r)?,
                        Some(BTok::Dash) => make_range(&mut set, l, b'-')?,
                        _ => return Err(RegexError::Invalid),
                    }
                    k += 1;
                    last = Last::None;
                }
            }
        }
        if let Last::Char(l) = last {
            set.insert(l);
        }
        Ok(Node::Set(if neg { set.complement() } else { set }))
    }
}

fn has_alt(n: &Node) -> bool {
    match n {
        Node::Alt(_) => true,
        Node::Group(i, _) | Node::Repeat(i, _) => has_alt(i),
        Node::Concat(v) => v.iter().any(has_alt),
        _ => false,
    }
}

/// Whether a capturing group sits inside a repetition whose body can match
/// empty. libstdc++ then lets the body run once more, empty, at the position
/// where it stopped (`(a*)*` on "a" captures ""), which the regex crate never
/// does; only the backtracking executor reproduces such captures.
fn group_in_nullable_loop(n: &Node, in_loop: bool) -> bool {
    match n {
        Node::Group(i, _) => in_loop || group_in_nullable_loop(i, in_loop),
        Node::Repeat(i, q) => {
            let exact_count = matches!(q, Quant::Range(a, Some(b)) if a == b);
            let nullable_loop = !exact_count && first_set(i).1;
            group_in_nullable_loop(i, in_loop || nullable_loop)
        }
        Node::Concat(v) | Node::Alt(v) => v.iter().any(|x| group_in_nullable_loop(x, in_loop)),
        _ => false,
    }
}

/// Roughly how many automaton states libstdc++ builds for `n`.
fn estimate_states(n: &Node) -> u64 {
    match n {
        Node::Empty => 1,
        Node::Lit(_) | Node::Any | Node::Set(_) | Node::Bol | Node::Eol => 1,
        Node::Group(i, _) => estimate_states(i).saturating_add(2),
        Node::Concat(v) => v
            .iter()
            .fold(1u64, |a, x| a.saturating_add(estimate_states(x))),
        Node::Alt(v) => v.iter().fold(0u64, |a, x| {
            a.saturating_add(estimate_states(x)).saturating_add(2)
        }),
        Node::Repeat(i, q) => {
            let e = estimate_states(i);
            match q {
                Quant::Star | Quant::Plus | Quant::Opt => e.saturating_add(2),
                Quant::Range(n, None) => e.saturating_mul(u64::from(*n) + 1).saturating_add(2),
                Quant::Range(_, Some(m)) => e
                    .saturating_add(1)
                    .saturating_mul(u64::from(*m))
                    .saturating_add(2),
            }
        }
    }
}

/// The bytes a match can start with, and whether it can be empty.
fn first_set(n: &Node) -> (ByteSet, bool) {
    match n {
        Node::Empty | Node::Bol | Node::Eol => (ByteSet::default(), true),
        Node::Lit(b) => {
            let mut s = ByteSet::default();
            s.insert(*b);
            (s, false)
        }
        Node::Any => (ByteSet::any(), false),
        Node::Set(s) => (*s, false),
        Node::Group(i, _) => first_set(i),
        Node::Concat(v) => {
            let mut s = ByteSet::default();
            for x in v {
                let (f, nullable) = first_set(x);
                s.union(&f);
                if !nullable {
                    return (s, false);
                }
            }
            (s, true)
        }
        Node::Alt(v) => {
            let mut s = ByteSet::default();
            let mut nullable = false;
            for x in v {
                let (f, n) = first_set(x);
                s.union(&f);
                nullable |= n;
            }
            (s, nullable)
        }
        Node::Repeat(i, q) => {
            let (f, n) = first_set(i);
            let min_zero = match q {
                Quant::Star | Quant::Opt => true,
                Quant::Plus => false,
                Quant::Range(m, _) => *m == 0,
            };
            (f, n || min_zero)
        }
    }
}

// ---- translation for the regex crate ----------------------------------------

fn push_byte(out: &mut String, b: u8) {
    if b.is_ascii_alphanumeric() {
        out.push(b as char);
    } else {
        let _ = write!(out, "\\x{b:02X}");
    }
}

fn push_set(out: &mut String, s: &ByteSet) {
    let mut ranges = Vec::new();
    let mut b = 0usize;
    while b < 256 {
        if s.contains(b as u8) {
            let lo = b;
            while b + 1 < 256 && s.contains((b + 1) as u8) {
                b += 1;
            }
            ranges.push((lo as u8, b as u8));
        }
        b += 1;
    }
    if ranges.is_empty() {
        // Matches nothing.
        out.push_str("[^\\x00-\\xFF]");
        return;
    }
    out.push('[');
    for (lo, hi) in ranges {
        let _ = write!(out, "\\x{lo:02X}");
        if hi != lo {
            let _ = write!(out, "-\\x{hi:02X}");
        }
    }
    out.push(']');
}

fn push_rust(n: &Node, out: &mut String) {
    match n {
        Node::Empty => out.push_str("(?:)"),
        Node::Lit(b) => push_byte(out, *b),
        Node::Any => out.push_str("[\\x01-\\xFF]"),
        Node::Set(s) => push_set(out, s),
        Node::Bol => out.push_str("\\A"),
        Node::Eol => out.push_str("\\z"),
        Node::Group(i, _) => {
            out.push('(');
            push_rust(i, out);
            out.push(')');
        }
        Node::Concat(v) => v.iter().for_each(|x| push_rust(x, out)),
        Node::Alt(v) => {
            out.push_str("(?:");
            for (k, x) in v.iter().enumerate() {
                if k > 0 {
                    out.push('|');
                }
                push_rust(x, out);
            }
            out.push(')');
        }
        Node::Repeat(i, q) => {
            out.push_str("(?:");
            push_rust(i, out);
            out.push(')');
            match q {
                Quant::Star => out.push('*'),
                Quant::Plus => out.push('+'),
                Quant::Opt => out.push('?'),
                Quant::Range(a, None) => {
                    let _ = write!(out, "{{{a},}}");
                }
                Quant::Range(a, Some(b)) if a == b => {
                    let _ = write!(out, "{{{a}}}");
                }
                Quant::Range(a, Some(b)) => {
                    let _ = write!(out, "{{{a},{b}}}");
                }
            }
        }
    }
}

/// The `regex` crate syntax (bytes, no Unicode) for a parsed pattern.
pub(crate) fn to_rust_syntax(n: &Node) -> String {
    let mut s = String::new();
    push_rust(n, &mut s);
    s
}

/// Parses `pat` and translates it (for tests).
#[cfg(test)]
pub(crate) fn translate(pat: &str) -> Result<String, RegexError> {
    parse(pat.as_bytes()).map(|(n, _)| to_rust_syntax(&n))
}

// ---- automaton and depth-first executor (libstdc++'s) -------------------------

#[derive(Clone, Copy, Debug)]
enum St {
    Byte(u8, usize),
    /// Index into `Nfa::sets`.
    Set(usize, usize),
    /// Try `alt`, then `next`, keep the longer match.
    Alt(usize, usize),
    /// Greedy repeat: `alt` is "once more", `next` is "stop".
    Rep(usize, usize),
    SubBegin(usize, usize),
    SubEnd(usize, usize),
    Bol(usize),
    Eol(usize),
    Accept,
}

struct Nfa {
    states: Vec<St>,
    sets: Vec<ByteSet>,
    start: usize,
}

impl Nfa {
    fn new(n: &Node) -> Nfa {
        let mut nfa = Nfa {
            states: vec![St::Accept],
            sets: Vec::new(),
            start: 0,
        };
        nfa.start = nfa.build(n, 0);
        nfa
    }

    fn push(&mut self, s: St) -> usize {
        self.states.push(s);
        self.states.len() - 1
    }

    /// Compiles `n` so that a match continues at `next`; returns its start.
    fn build(&mut self, n: &Node, next: usize) -> usize {
        match n {
            Node::Empty => next,
            Node::Lit(b) => self.push(St::Byte(*b, next)),
            Node::Any => {
                self.sets.push(ByteSet::any());
                self.push(St::Set(self.sets.len() - 1, next))
            }
            Node::Set(s) => {
                self.sets.push(*s);
                self.push(St::Set(self.sets.len() - 1, next))
            }
            Node::Bol => self.push(St::Bol(next)),
            Node::Eol => self.push(St::Eol(next)),
            Node::Group(i, idx) => {
                let end = self.push(St::SubEnd(*idx, next));
                let body = self.build(i, end);
                self.push(St::SubBegin(*idx, body))
            }
            Node::Concat(v) => v.iter().rev().fold(next, |cur, x| self.build(x, cur)),
            Node::Alt(v) => {
                // Left-nested like libstdc++: ((a|b)|c).
                let mut cur = self.build(&v[0], next);
                for x in &v[1..] {
                    let b = self.build(x, next);
                    cur = self.push(St::Alt(cur, b));
                }
                cur
            }
            Node::Repeat(i, q) => match *q {
                Quant::Star => self.star(i, next),
                Quant::Plus => {
                    let r = self.push(St::Rep(usize::MAX, next));
                    let body = self.build(i, r);
                    self.states[r] = St::Rep(body, next);
                    body
                }
                Quant::Opt => {
                    let body = self.build(i, next);
                    self.push(St::Rep(body, next))
                }
                Quant::Range(min, max) => {
                    let mut cur = match max {
                        None => self.star(i, next),
                        Some(m) => {
                            let mut cur = next;
                            for _ in min..m {
                                let body = self.build(i, cur);
                                cur = self.push(St::Rep(body, next));
                            }
                            cur
                        }
                    };
                    for _ in 0..min {
                        cur = self.build(i, cur);
                    }
                    cur
                }
            },
        }
    }

    fn star(&mut self, i: &Node, next: usize) -> usize {
        let r = self.push(St::Rep(usize::MAX, next));
        let body = self.build(i, r);
        self.states[r] = St::Rep(body, next);
        r
    }
}

type Span = Option<(usize, usize)>;

/// A group's capture while executing: (start, end, matched).
type Sub = (usize, usize, bool);

struct Exec<'a> {
    nfa: &'a Nfa,
    hay: &'a [u8],
    begin: usize,
    exact: bool,
    not_null: bool,
    /// Per group: (start, end, matched); index 0 unused.
    cur: Vec<Sub>,
    best: Option<(usize, Vec<Sub>)>,
    has_sol: bool,
    /// Per state: (position, entries) for repeats, to stop empty loops.
    rep: Vec<(usize, u8)>,
}

impl Exec<'_> {
    fn dfs(&mut self, s: usize, pos: usize) {
        stacker::maybe_grow(64 * 1024, 4 * 1024 * 1024, || self.step(s, pos));
    }

    fn step(&mut self, s: usize, pos: usize) {
        let nfa = self.nfa;
        match nfa.states[s] {
            St::Byte(b, next) => {
                if self.hay.get(pos) == Some(&b) {
                    self.dfs(next, pos + 1);
                }
            }
            St::Set(k, next) => {
                if self.hay.get(pos).is_some_and(|&c| nfa.sets[k].contains(c)) {
                    self.dfs(next, pos + 1);
                }
            }
            St::Alt(alt, next) => {
                self.dfs(alt, pos);
                let had = self.has_sol;
                self.has_sol = false;
                self.dfs(next, pos);
                self.has_sol |= had;
            }
            St::Rep(alt, next) => {
                let (p, c) = self.rep[s];
                if c == 0 || p != pos {
                    self.rep[s] = (pos, 1);
                    self.dfs(alt, pos);
                    self.rep[s] = (p, c);
                } else if c < 2 {
                    self.rep[s].1 += 1;
                    self.dfs(alt, pos);
                    self.rep[s].1 -= 1;
                }
                if !self.has_sol {
                    self.dfs(next, pos);
                }
            }
            St::SubBegin(g, next) => {
                let back = self.cur[g].0;
                self.cur[g].0 = pos;
                self.dfs(next, pos);
                self.cur[g].0 = back;
            }
            St::SubEnd(g, next) => {
                let back = self.cur[g];
                self.cur[g].1 = pos;
                self.cur[g].2 = true;
                self.dfs(next, pos);
                self.cur[g] = back;
            }
            St::Bol(next) => {
                if pos == 0 {
                    self.dfs(next, pos);
                }
            }
            St::Eol(next) => {
                if pos == self.hay.len() {
                    self.dfs(next, pos);
                }
            }
            St::Accept => {
                if self.not_null && pos == self.begin {
                    return;
                }
                self.has_sol = !self.exact || pos == self.hay.len();
                if self.has_sol && self.best.as_ref().is_none_or(|(end, _)| *end < pos) {
                    self.best = Some((pos, self.cur.clone()));
                }
            }
        }
    }

    fn run(&mut self, begin: usize) -> Option<Found> {
        self.begin = begin;
        self.best = None;
        self.has_sol = false;
        self.dfs(self.nfa.start, begin);
        let (end, caps) = self.best.take()?;
        Some(Found {
            start: begin,
            end,
            groups: caps[1..]
                .iter()
                .map(|&(a, b, m)| if m { Some((a, b)) } else { None })
                .collect(),
        })
    }
}

// ---- compiled patterns ----------------------------------------------------------

/// One match: its byte span and the spans of its groups (`None`: did not take part).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Found {
    pub start: usize,
    pub end: usize,
    pub groups: Vec<Span>,
}

pub(crate) struct Regex {
    ast: Node,
    ngroups: usize,
    has_alt: bool,
    /// Captures only the backtracking executor gets right (see
    /// [`group_in_nullable_loop`]).
    quirky_captures: bool,
    /// Bytes a match can start with, when it cannot be empty.
    first: Option<ByteSet>,
    exact: OnceCell<Option<regex::bytes::Regex>>,
    search: OnceCell<Option<regex::bytes::Regex>>,
    nfa: OnceCell<Nfa>,
}

fn build_rust(body: &str) -> Option<regex::bytes::Regex> {
    regex::bytes::RegexBuilder::new(body)
        .size_limit(64 << 20)
        .dfa_size_limit(16 << 20)
        .build()
        .ok()
}

impl Regex {
    fn new(pat: &str) -> Result<Regex, RegexError> {
        let (ast, ngroups) = parse(pat.as_bytes())?;
        if estimate_states(&ast) > STATE_LIMIT {
            return Err(RegexError::TooBig);
        }
        let (first, nullable) = first_set(&ast);
        Ok(Regex {
            has_alt: has_alt(&ast),
            quirky_captures: group_in_nullable_loop(&ast, false),
            first: if nullable { None } else { Some(first) },
            ast,
            ngroups,
            exact: OnceCell::new(),
            search: OnceCell::new(),
            nfa: OnceCell::new(),
        })
    }

    fn nfa(&self) -> &Nfa {
        self.nfa.get_or_init(|| Nfa::new(&self.ast))
    }

    fn exec<'a>(&'a self, hay: &'a [u8], exact: bool, not_null: bool) -> Exec<'a> {
        let nfa = self.nfa();
        Exec {
            nfa,
            hay,
            begin: 0,
            exact,
            not_null,
            cur: vec![(0, 0, false); self.ngroups + 1],
            best: None,
            has_sol: false,
            rep: vec![(0, 0); nfa.states.len()],
        }
    }

    /// `std::regex_match`: the whole of `hay`, or `None`.
    pub(crate) fn match_full(&self, hay: &[u8]) -> Option<Vec<Span>> {
        let re = self.exact.get_or_init(|| {
            if self.quirky_captures {
                return None;
            }
            build_rust(&format!("(?s-u)\\A(?:{})\\z", to_rust_syntax(&self.ast)))
        });
        match re {
            Some(re) => {
                let mut locs = re.capture_locations();
                re.captures_read(&mut locs, hay)?;
                Some((1..=self.ngroups).map(|i| locs.get(i)).collect())
            }
            None => self.exec(hay, true, false).run(0).map(|f| f.groups),
        }
    }

    fn rust_search(&self) -> Option<&regex::bytes::Regex> {
        if self.has_alt || self.quirky_captures {
            return None;
        }
        self.search
            .get_or_init(|| build_rust(&format!("(?s-u){}", to_rust_syntax(&self.ast))))
            .as_ref()
    }

    /// `std::regex_search` from `start` (the text before it is context):
    /// the first position with a match, and its longest/first match there.
    /// `continuous` only tries `start`; `not_null` rejects empty matches.
    fn search_from(
        &self,
        hay: &[u8],
        start: usize,
        not_null: bool,
        continuous: bool,
    ) -> Option<Found> {
        if let Some(re) = self.rust_search() {
            if not_null || continuous {
                // Only used to retry after an empty match; a greedy pattern
                // without alternatives that matched empty has no non-empty
                // match at the same place.
                return None;
            }
            if self.ngroups == 0 {
                // Without groups the faster `find` suffices.
                let m = re.find_at(hay, start)?;
                return Some(Found {
                    start: m.start(),
                    end: m.end(),
                    groups: Vec::new(),
                });
            }
            let mut locs = re.capture_locations();
            let m = re.captures_read_at(&mut locs, hay, start)?;
            return Some(Found {
                start: m.start(),
                end: m.end(),
                groups: (1..=self.ngroups).map(|i| locs.get(i)).collect(),
            });
        }
        let mut ex = self.exec(hay, false, not_null);
        for b in start..=hay.len() {
            if let Some(first) = &self.first {
                if hay.get(b).is_none_or(|&c| !first.contains(c)) {
                    if continuous {
                        return None;
                    }
                    continue;
                }
            }
            if let Some(f) = ex.run(b) {
                return Some(f);
            }
            if continuous {
                return None;
            }
        }
        None
    }

    /// Every match, in the order `std::cregex_iterator` produces them.
    pub(crate) fn find_all(&self, hay: &[u8]) -> Vec<Found> {
        let mut out = Vec::new();
        let Some(mut m) = self.search_from(hay, 0, false, false) else {
            return out;
        };
        loop {
            let (s, e) = (m.start, m.end);
            out.push(m);
            let next = if s == e {
                if e >= hay.len() {
                    break;
                }
                self.search_from(hay, e, true, true)
                    .or_else(|| self.search_from(hay, e + 1, false, false))
            } else {
                self.search_from(hay, e, false, false)
            };
            match next {
                Some(n) => m = n,
                None => break,
            }
        }
        out
    }
}

thread_local! {
    static CACHE: RefCell<HashMap<String, Result<Rc<Regex>, RegexError>>> = RefCell::new(HashMap::new());
}

/// The compiled form of `pat`, cached per thread.
pub(crate) fn compile(pat: &str) -> Result<Rc<Regex>, RegexError> {
    if let Some(r) = CACHE.with(|c| c.borrow().get(pat).cloned()) {
        return r;
    }
    let r = stacker::maybe_grow(256 * 1024, 4 * 1024 * 1024, || Regex::new(pat)).map(Rc::new);
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        if c.len() >= 4096 {
            c.clear();
        }
        c.insert(pat.to_string(), r.clone());
    });
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn translation_vectors() {
        let cases: &[(&str, &str)] = &[
            ("abc", "abc"),
            ("a.c", "a[\\x01-\\xFF]c"),
            ("a*", "(?:a)*"),
            ("a**", "(?:(?:a)*)*"),
            ("a+?", "(?:(?:a)+)?"),
            ("a{2}", "(?:a){2}"),
            ("a{2,}", "(?:a){2,}"),
            ("a{2,3}", "(?:a){2,3}"),
            ("(a|b)c", "((?:a|b))c"),
            ("a|", "(?:a|(?:))"),
            ("^a$", "\\Aa\\z"),
            ("x^", "x\\A"),
            ("\\.\\*\\[\\|", "\\x2E\\x2A\\x5B\\x7C"),
            ("a]b}", "a\\x5Db\\x7D"),
            ("[abc]", "[\\x61-\\x63]"),
            ("[]a]", "[\\x5D\\x61]"),
            ("[^]a]", "[\\x00-\\x5C\\x5E-\\x60\\x62-\\xFF]"),
            ("[a-]", "[\\x2D\\x61]"),
            ("[--0]", "[\\x2D-\\x30]"),
            ("[\\n]", "[\\x5C\\x6E]"),
            ("[[:digit:]x]", "[\\x30-\\x39\\x78]"),
            ("[[:space:]]", "[\\x09-\\x0D\\x20]"),
            ("[[:w:]]", "[\\x30-\\x39\\x41-\\x5A\\x5F\\x61-\\x7A]"),
            ("[[.hyphen.]]", "[\\x2D]"),
            ("[[=a=]]", "[\\x41\\x61]"),
            ("[[a]", "[\\x5B\\x61]"),
            ("é", "\\xC3\\xA9"),
            ("()", "((?:))"),
        ];
        for (pat, want) in cases {
            assert_eq!(translate(pat).as_deref(), Ok(*want), "pattern {pat:?}");
        }
    }

    #[test]
    fn invalid_patterns() {
        for pat in [
            "(.*",
            "f(o*o",
            ")",
            "a)",
            "*a",
            "a|*b",
            "^*",
            "(*a)",
            "a{",
            "a{,2}",
            "a{3,2}",
            "a{ 1}",
            "a{1 }",
            "\\d",
            "\\]",
            "\\}",
            "\\/",
            "a\\",
            "(a)\\1",
            "[a",
            "[]",
            "[^]",
            "[[:foo:]]",
            "[z-a]",
            "[a-z-0]",
            "[[:alpha:]-z]",
            "[[.0.]]",
            "[[:alpha:",
            "(?:a)",
        ] {
            assert_eq!(translate(pat), Err(RegexError::Invalid), "pattern {pat:?}");
        }
        assert_eq!(translate("a{99999999999}"), Err(RegexError::TooBig));
        let deep = format!("{}a{}", "(".repeat(600), ")".repeat(600));
        assert_eq!(translate(&deep), Err(RegexError::TooBig));
        let ok = format!("{}a{}", "(".repeat(300), ")".repeat(300));
        assert_eq!(
            compile(&ok)
                .map(|r| r.match_full(b"a").map(|g| g.len()))
                .ok(),
            Some(Some(300))
        );
        assert!(matches!(
            Regex::new("(a{1000}){1000}"),
            Err(RegexError::TooBig)
        ));
    }

    fn groups(r: &Regex, s: &str) -> Option<Vec<Option<String>>> {
        r.match_full(s.as_bytes()).map(|g| {
            g.into_iter()
                .map(|sp| {
                    sp.map(|(a, b)| String::from_utf8_lossy(&s.as_bytes()[a..b]).into_owned())
                })
                .collect()
        })
    }

    /// `split` rendered like Nix prints it, from matches.
    fn split_repr(pat: &str, s: &str) -> String {
        let r = compile(pat).unwrap();
        render(s, &r.find_all(s.as_bytes()))
    }

    fn render(s: &str, ms: &[Found]) -> String {
        let b = s.as_bytes();
        let mut out = vec![];
        let mut prev = 0;
        let q = |a: usize, e: usize| format!("{:?}", String::from_utf8_lossy(&b[a..e]));
        for m in ms {
            out.push(q(prev, m.start));
            let gs: Vec<String> = m
                .groups
                .iter()
                .map(|g| g.map_or("null".to_string(), |(x, y)| q(x, y)))
                .collect();
            out.push(format!("[{}]", gs.join(" ")));
            prev = m.end;
        }
        out.push(q(prev, b.len()));
        out.join(" ")
    }

    #[test]
    fn whole_string_matching() {
        let r = compile("((.*)/)?([^/]*)\\.(nix|cc)").unwrap();
        assert_eq!(
            groups(&r, "/path/to/foobar.nix"),
            Some(vec![
                Some("/path/to/".into()),
                Some("/path/to".into()),
                Some("foobar".into()),
                Some("nix".into())
            ])
        );
        assert_eq!(
            groups(&r, "foobar.cc"),
            Some(vec![None, None, Some("foobar".into()), Some("cc".into())])
        );
        assert_eq!(groups(&compile("fo*").unwrap(), "foobar"), None);
        assert_eq!(groups(&compile("(a)|b").unwrap(), "b"), Some(vec![None]));
        assert_eq!(
            groups(&compile("(.+)+(.+)").unwrap(), "17.0.14+7"),
            Some(vec![Some("17.0.14+".into()), Some("7".into())])
        );
        assert_eq!(
            groups(&compile("(a|ab)(c|bcd)(d*)").unwrap(), "abcd"),
            Some(vec![Some("a".into()), Some("bcd".into()), Some("".into())])
        );
        assert_eq!(
            groups(&compile("(a*)+b").unwrap(), "b"),
            Some(vec![Some("".into())])
        );
        // libstdc++ runs a nullable loop body once more, empty (Nix 2.8 results).
        let s = |x: &str| Some(x.to_string());
        assert_eq!(groups(&compile("(a*)*").unwrap(), "a"), Some(vec![s("")]));
        assert_eq!(groups(&compile("(a*)+").unwrap(), "aa"), Some(vec![s("")]));
        assert_eq!(groups(&compile("(a?)*").unwrap(), "aa"), Some(vec![s("")]));
        assert_eq!(
            groups(&compile("((a)b?)*").unwrap(), "abab"),
            Some(vec![s("ab"), s("a")])
        );
        assert_eq!(groups(&compile("(x?y?)*z?").unwrap(), "xyzxyz"), None);
        assert_eq!(
            groups(&compile("(a|b)*").unwrap(), "ab"),
            Some(vec![s("b")])
        );
        assert_eq!(groups(&compile("()*").unwrap(), "a"), None);
        // `.` and `$` see bytes and the very end; newlines are ordinary.
        assert_eq!(groups(&compile("a.b$").unwrap(), "a\nb"), Some(vec![]));
        assert_eq!(
            groups(&compile("(.)(.)").unwrap(), "é"),
            Some(vec![Some("\u{fffd}".into()), Some("\u{fffd}".into())])
        );
    }

    /// Expected values from Nix 2.8 (`builtins.split`).
    #[test]
    fn split_vectors() {
        let cases: &[(&str, &str, &str)] = &[
            ("x*", "axb", r#""" [] "a" [] "" [] "b" [] """#),
            ("a|ab", "xabx", r#""x" [] "x""#),
            (
                "(a*)(ab)?",
                "aab",
                r#""" ["aa" null] "" ["" null] "b" ["" null] """#,
            ),
            ("(a)|b", "xbx", r#""x" [null] "x""#),
            ("", "ab", r#""" [] "a" [] "b" [] """#),
            ("a|ab|abc", "abcd", r#""" [] "d""#),
            ("(a|ab)(c|bcd)", "abcd", r#""" ["a" "bcd"] """#),
            ("(a*)*", "b", r#""" [""] "b" [""] """#),
            ("(a*)+", "b", r#""" [""] "b" [""] """#),
            ("(a|)+", "aab", r#""" [""] "" [""] "b" [""] """#),
            ("(o+)", "oooofoooo", r#""" ["oooo"] "f" ["oooo"] """#),
            ("fo{1,2}", "fooo", r#""" [] "o""#),
            ("fo+", "f", r#""f""#),
            ("(a)|(c)", "abc", r#""" ["a" null] "b" [null "c"] """#),
            (
                "[[:space:]]+|([',.!?])",
                "Nix Rocks!\nThat's why I use it.\n",
                r#""Nix" [null] "Rocks" ["!"] "" [null] "That" ["'"] "s" [null] "why" [null] "I" [null] "use" [null] "it" ["."] "" [null] """#,
            ),
            ("^a", "aaa", r#""" [] "aa""#),
            ("(a*)*", "a", r#""" [""] "" [""] """#),
            ("(x?y?)*z?", "xyzxyz", r#""" [""] "" [""] "" [""] """#),
            ("a$", "aaa", r#""aa" [] """#),
        ];
        for (pat, s, want) in cases {
            assert_eq!(split_repr(pat, s), *want, "split {pat:?} {s:?}");
        }
    }

    /// Without `|` the regex crate and the backtracking executor agree.
    #[test]
    fn engines_agree_without_alternation() {
        let pats = [
            "a*",
            "a(b)",
            "(a)*b",
            "(ab)?a?",
            "x+y*",
            "[[:digit:]]+",
            "(.)(.*)",
            "((a)b?)*",
            "a{0}",
            "(a{1,2}){2}",
            "",
            "b*$",
            "^b*",
            ".*",
            "(.+)+(.+)",
            "c(a*)c",
            "(a*){2}",
            "x*(y+)*",
        ];
        let hays = [
            "", "a", "aab", "abab", "xyyxy", "12a345", "cac", "ccaacc", "bbb", "xyzxyz", "17.0+7",
        ];
        for p in pats {
            let r = compile(p).unwrap();
            assert!(r.rust_search().is_some());
            for h in hays {
                let b = h.as_bytes();
                // The crate, through find_all.
                let fast = r.find_all(b);
                // The executor, driven the same way.
                let slow = {
                    let mut out = Vec::new();
                    let search = |start: usize, nn: bool, cont: bool| {
                        let mut ex = r.exec(b, false, nn);
                        for s in start..=b.len() {
                            if let Some(f) = ex.run(s) {
                                return Some(f);
                            }
                            if cont {
                                return None;
                            }
                        }
                        None
                    };
                    let mut m = search(0, false, false);
                    while let Some(f) = m {
                        let (s, e) = (f.start, f.end);
                        out.push(f);
                        m = if s == e {
                            if e >= b.len() {
                                None
                            } else {
                                search(e, true, true).or_else(|| search(e + 1, false, false))
                            }
                        } else {
                            search(e, false, false)
                        };
                    }
                    out
                };
                assert_eq!(render(h, &fast), render(h, &slow), "pattern {p:?} on {h:?}");
                // And whole-string matching.
                let exact_slow = r.exec(b, true, false).run(0).map(|f| f.groups);
                assert_eq!(r.match_full(b), exact_slow, "match {p:?} on {h:?}");
            }
        }
    }

    #[test]
    fn empty_class_compiles() {
        let mut s = String::new();
        push_set(&mut s, &ByteSet::default());
        assert_eq!(s, "[^\\x00-\\xFF]");
        assert!(build_rust("(?s-u)[^\\x00-\\xFF]").is_some());
    }
}
