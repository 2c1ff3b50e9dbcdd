//! The abstract syntax tree of the Nix expression language, exactly as written.
//!
//! This module owns the *shape* of parsed source: every node carries the byte span
//! it came from so diagnostics can point at it. It must not resolve names, merge
//! nested attribute paths or check duplicates; that is `eval::compile`'s job, which
//! lowers this tree into the evaluator's IR.
//!
//! Textual forms map to nodes as follows (non-exhaustive):
//!
//! | source                         | node                                            |
//! |--------------------------------|-------------------------------------------------|
//! | `42`, `1.5e3`                  | [`ExprKind::Int`], [`ExprKind::Float`]          |
//! | `"a${b}c"`, `''a${b}''`        | [`ExprKind::Str`] with literal/interp parts     |
//! | `./a/${b}`, `/abs`, `~/x`      | [`ExprKind::Path`]                              |
//! | `<nixpkgs/lib>`                | [`ExprKind::SearchPath`]                        |
//! | `http://x.org/y`               | [`ExprKind::Uri`]                               |
//! | `a.b or c`                     | [`ExprKind::Select`] with `default`             |
//! | `a ? b.c`                      | [`ExprKind::HasAttr`]                           |
//! | `{ a.b = 1; inherit (x) y; }`  | [`ExprKind::Attrs`] with [`Binding`]s           |
//! | `let { body = 1; }`            | [`ExprKind::LegacyLet`]                         |
//! | `{ a, b ? 1, ... }@args: e`    | [`ExprKind::Lambda`] with [`Param::Formals`]    |
//! | `__curPos`                     | [`ExprKind::CurPos`]                            |

/// An identifier or attribute name: interned, one word, ordered by bytes.
pub type Ident = crate::sym::Sym;

/// A half-open byte range `[start, end)` into one source file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Hash)]
pub struct Span {
    pub start: u32,
    pub end: u32,
}

impl Span {
    pub fn new(start: usize, end: usize) -> Span {
        Span {
            start: start as u32,
            end: end as u32,
        }
    }
    /// The smallest span covering both.
    pub fn to(self, other: Span) -> Span {
        Span {
            start: self.start.min(other.start),
            end: self.end.max(other.end),
        }
    }
}

/// An expression with the span of source it was parsed from.
#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
}

impl Expr {
    pub fn new(kind: ExprKind, span: Span) -> Expr {
        Expr { kind, span }
    }
}

/// One piece of a string or path: literal text (escapes and indentation already
/// processed) or an interpolated `${expr}`.
#[derive(Clone, Debug, PartialEq)]
pub enum StrPart {
    Lit(String),
    Interp(Expr),
}

/// How a path literal is anchored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathAnchor {
    /// `./foo`, `../foo`, `foo/bar`: relative to the directory of the file being parsed.
    Relative,
    /// `/foo/bar`.
    Absolute,
    /// `~/foo`: relative to `$HOME`.
    Home,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnaryOp {
    /// `!e`
    Not,
    /// `-e`
    Neg,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinaryOp {
    Add,    // +
    Sub,    // -
    Mul,    // *
    Div,    // /
    Concat, // ++
    Update, // //
    Eq,     // ==
    NotEq,  // !=
    Lt,     // <
    Le,     // <=
    Gt,     // >
    Ge,     // >=
    And,    // &&
    Or,     // ||
    Impl,   // ->
    /// `a |> f` is `f a`.
    PipeRight,
    /// `f <| a` is `f a`.
    PipeLeft,
}

/// One component of an attribute path (`a."b".${c}`).
#[derive(Clone, Debug, PartialEq)]
pub enum AttrName {
    /// A plain identifier or a string literal without interpolation (`"b"`).
    Static(Ident, Span),
    /// `${e}` or `"x${e}"`: computed at evaluation time.
    Dynamic(Expr),
}

impl AttrName {
    pub fn span(&self) -> Span {
        match self {
            AttrName::Static(_, s) => *s,
            AttrName::Dynamic(e) => e.span,
        }
    }
}

/// A binding inside `{ … }`, `rec { … }` or `let … in`.
#[derive(Clone, Debug, PartialEq)]
pub enum Binding {
    /// `a.b.c = value;`. `path` is never empty.
    Attr {
        path: Vec<AttrName>,
        value: Expr,
        span: Span,
    },
    /// `inherit a b;` (`from` is `None`) or `inherit (e) a b;`.
    /// Names may be written as identifiers or string literals (`inherit "a";`);
    /// a dynamic name here is a parse error.
    Inherit {
        from: Option<Box<Expr>>,
        names: Vec<(Ident, Span)>,
        span: Span,
    },
}

/// A formal parameter in a pattern `{ name ? default }`.
#[derive(Clone, Debug, PartialEq)]
pub struct Formal {
    pub name: Ident,
    pub span: Span,
    pub default: Option<Expr>,
}

/// The parameter of a lambda.
#[derive(Clone, Debug, PartialEq)]
pub enum Param {
    /// `x: body`
    Ident(Ident, Span),
    /// `{ a, b ? 1, ... }: body`, optionally with `@name` before or after.
    Formals {
        formals: Vec<Formal>,
        ellipsis: bool,
        at: Option<(Ident, Span)>,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub enum ExprKind {
    Int(i64),
    Float(f64),
    /// A string; parts are in source order. An empty vector is `""`.
    Str(Vec<StrPart>),
    /// A path literal. The first literal part holds the prefix as written
    /// (`./`, `../`, `/`, `~/` are kept in the text so the evaluator can resolve it);
    /// later parts may be interpolations (`./a/${b}`).
    Path(PathAnchor, Vec<StrPart>),
    /// `<name/sub>`: the text between the angle brackets.
    SearchPath(String),
    /// An unquoted URI (`https://example.org/x`), which evaluates to a string.
    Uri(String),
    /// A variable reference. `true`, `false` and `null` are parsed as plain variables;
    /// they are bound in the global scope like any builtin.
    Var(Ident),
    List(Vec<Expr>),
    Attrs {
        rec: bool,
        bindings: Vec<Binding>,
    },
    Let {
        bindings: Vec<Binding>,
        body: Box<Expr>,
    },
    /// `let { a = 1; body = a; }`: a recursive set whose `body` attribute is the value.
    LegacyLet(Vec<Binding>),
    Lambda {
        param: Param,
        body: Box<Expr>,
    },
    Apply {
        func: Box<Expr>,
        arg: Box<Expr>,
    },
    /// `e.a.b` or `e.a.b or default`. `path` is never empty.
    Select {
        expr: Box<Expr>,
        path: Vec<AttrName>,
        default: Option<Box<Expr>>,
    },
    /// `e ? a.b`.
    HasAttr {
        expr: Box<Expr>,
        path: Vec<AttrName>,
    },
    With {
        env: Box<Expr>,
        body: Box<Expr>,
    },
    Assert {
        cond: Box<Expr>,
        body: Box<Expr>,
    },
    If {
        cond: Box<Expr>,
        then: Box<Expr>,
        else_: Box<Expr>,
    },
    Unary {
        op: UnaryOp,
        expr: Box<Expr>,
    },
    Binary {
        op: BinaryOp,
        lhs: Box<Expr>,
        rhs: Box<Expr>,
    },
    /// `__curPos`: the position of this expression as `{ file, line, column }`.
    CurPos,
}
