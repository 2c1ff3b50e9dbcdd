//! Attribute sets, bindings (`a.b = e;`, `inherit (e) a "b";`), attribute paths and
//! lambda patterns (`{ a, b ? 1, ... }`), as in `parser.y`.
//!
//! Owns the syntax of these constructs only: duplicate and overlapping
//! attributes are left to `eval::compile`. Duplicate formal arguments are
//! rejected here because Nix rejects them while parsing.

use super::super::ast::*;
use super::lexer::{Kw, T};
use super::{Node, PResult, ParseError, Parser};

/// What may follow `{` or `;` in a set or `let`, for error messages.
const BINDING_START: &str = "attribute name, 'inherit'";

impl<'a> Parser<'a> {
    /// The bindings and closing `}` of `{ … }` / `rec { … }` (the `{` is consumed).
    pub(super) fn attr_set(&mut self, rec: bool, start: usize) -> PResult<Node> {
        let (bindings, d) = self.bindings(T::RBrace, "'}'")?;
        self.bump()?;
        self.node(ExprKind::Attrs { rec, bindings }, start, 1 + d)
    }

    /// Bindings up to (not including) the token `end`, which is named `end_what`
    /// in errors. Returns the bindings and the depth of their deepest expression.
    pub(super) fn bindings(&mut self, end: T<'_>, end_what: &str) -> PResult<(Vec<Binding>, u32)> {
        let mut bindings = Vec::new();
        let mut depth = 0;
        loop {
            let tok = self.peek()?;
            if tok.t == end {
                return Ok((bindings, depth));
            }
            match tok.t {
                T::Kw(Kw::Inherit) => {
                    self.bump()?;
                    let (from, d) = match self.eat(T::Sym('('))? {
                        Some(_) => {
                            let e = self.parse_expr()?;
                            self.expect(T::Sym(')'), "')'")?;
                            (Some(Box::new(e.e)), e.d)
                        }
                        None => (None, 0),
                    };
                    depth = depth.max(d);
                    let names = self.inherit_names()?;
                    let span = Span::new(tok.start, self.pos);
                    bindings.push(Binding::Inherit { from, names, span });
                }
                T::Id(_) | T::Kw(Kw::Or) | T::Quote | T::DollarCurly => {
                    let (path, pd) = self.attr_path()?;
                    self.expect(T::Sym('='), "'.' or '='")?;
                    let value = self.parse_expr()?;
                    self.expect(T::Sym(';'), "';'")?;
                    depth = depth.max(pd).max(value.d);
                    let span = Span::new(tok.start, self.pos);
                    bindings.push(Binding::Attr {
                        path,
                        value: value.e,
                        span,
                    });
                }
                T::Eof => return Err(self.unexpected(tok, Some(end_what))),
                _ => {
                    let what = format!("{BINDING_START} or {end_what}");
                    return Err(self.unexpected(tok, Some(&what)));
                }
            }
        }
    }

    /// The names after `inherit` / `inherit (e)`, and the closing `;`.
    fn inherit_names(&mut self) -> PResult<Vec<(Ident, Span)>> {
        let mut names = Vec::new();
        loop {
            let tok = self.peek()?;
            match tok.t {
                T::Sym(';') => {
                    self.bump()?;
                    return Ok(names);
                }
                T::Id(_) | T::Kw(Kw::Or) | T::Quote | T::DollarCurly => match self.attr_name()? {
                    (AttrName::Static(name, span), _) => names.push((name, span)),
                    (AttrName::Dynamic(_), _) => {
                        return Err(ParseError::new(
                            "dynamic attributes not allowed in inherit",
                            Span::new(tok.start, self.pos),
                        ))
                    }
                },
                _ => return Err(self.unexpected(tok, Some("attribute name or ';'"))),
            }
        }
    }

    /// `attrpath`: `a.b."c".${d}`. Returns the names and the depth of the deepest
    /// dynamic name.
    pub(super) fn attr_path(&mut self) -> PResult<(Vec<AttrName>, u32)> {
        let mut path = Vec::new();
        let mut depth = 0;
        loop {
            let (name, d) = self.attr_name()?;
            path.push(name);
            depth = depth.max(d);
            if self.peek()?.t != T::Sym('.') {
                return Ok((path, depth));
            }
            self.bump()?;
        }
    }

    /// One attribute name: an identifier, `or`, a string or `${e}`. A string
    /// without interpolation, and `${…}` around one, are static names, as in Nix.
    fn attr_name(&mut self) -> PResult<(AttrName, u32)> {
        let tok = self.peek()?;
        match tok.t {
            T::Id(name) => {
                self.bump()?;
                Ok((AttrName::Static(name.into(), tok.span()), 0))
            }
            T::Kw(Kw::Or) => {
                self.bump()?;
                Ok((AttrName::Static("or".into(), tok.span()), 0))
            }
            T::Quote => {
                let open = self.bump()?;
                let (mut parts, d) = self.string(open)?;
                let span = Span::new(tok.start, self.pos);
                if parts.iter().all(|p| matches!(p, StrPart::Lit(_))) {
                    let text = match parts.pop() {
                        Some(StrPart::Lit(s)) => s,
                        _ => String::new(),
                    };
                    return Ok((AttrName::Static(text.into(), span), 0));
                }
                let e = self.node(ExprKind::Str(parts), tok.start, 1 + d)?;
                Ok((AttrName::Dynamic(e.e), e.d))
            }
            T::DollarCurly => {
                self.bump()?;
                let e = self.parse_expr()?;
                self.expect(T::RBrace, "'}'")?;
                let span = Span::new(tok.start, self.pos);
                match e.e.kind {
                    ExprKind::Str(mut parts)
                        if parts.iter().all(|p| matches!(p, StrPart::Lit(_))) =>
                    {
                        let text = match parts.pop() {
                            Some(StrPart::Lit(s)) => s,
                            _ => String::new(),
                        };
                        Ok((AttrName::Static(text.into(), span), 0))
                    }
                    _ => Ok((AttrName::Dynamic(e.e), e.d)),
                }
            }
            _ => Err(self.unexpected(tok, Some("identifier, 'or', '${' or '\"'"))),
        }
    }

    /// Whether the `{` about to be read opens a lambda pattern rather than a set,
    /// from at most three tokens: `{ }` followed by `:` or `@`, `{ ...`, or
    /// `{ id` followed by `,`, `?` or `}`.
    pub(super) fn brace_starts_formals(&mut self) -> PResult<bool> {
        let second = self.peek2()?;
        Ok(match second.t {
            T::Ellipsis => true,
            T::RBrace => {
                let third = super::lexer::next_token(self.src, second.end)?;
                matches!(third.t, T::Sym(':') | T::Sym('@'))
            }
            T::Id(_) => {
                let third = super::lexer::next_token(self.src, second.end)?;
                matches!(third.t, T::Sym(',') | T::Sym('?') | T::RBrace)
            }
            _ => false,
        })
    }

    /// The formals of a pattern and its closing `}` (the `{` is consumed):
    /// `a, b ? e, ...`. Returns them, whether `...` was present and the depth of
    /// the deepest default.
    pub(super) fn formals(&mut self) -> PResult<(Vec<Formal>, bool, u32)> {
        let mut formals = Vec::new();
        let mut depth = 0;
        loop {
            let tok = self.peek()?;
            match tok.t {
                T::RBrace => {
                    self.bump()?;
                    return Ok((formals, false, depth));
                }
                T::Ellipsis => {
                    self.bump()?;
                    self.expect(T::RBrace, "'}'")?;
                    return Ok((formals, true, depth));
                }
                T::Id(name) => {
                    self.bump()?;
                    let default = match self.eat(T::Sym('?'))? {
                        Some(_) => {
                            let e = self.parse_expr()?;
                            depth = depth.max(e.d);
                            Some(e.e)
                        }
                        None => None,
                    };
                    formals.push(Formal {
                        name: name.into(),
                        span: tok.span(),
                        default,
                    });
                    let next = self.peek()?;
                    match next.t {
                        T::Sym(',') => {
                            self.bump()?;
                        }
                        T::RBrace => {}
                        _ => return Err(self.unexpected(next, Some("',' or '}'"))),
                    }
                }
                _ => {
                    let what = if formals.is_empty() {
                        "identifier, '...' or '}'"
                    } else {
                        "identifier, '...' or '}' after ','"
                    };
                    return Err(self.unexpected(tok, Some(what)));
                }
            }
        }
    }

    /// Nix's `validateFormals`: no formal may appear twice (the error is at the
    /// second occurrence of the duplicated name that appears first), and the `@`
    /// name may not be a formal (the error is at the lambda).
    pub(super) fn validate_formals(
        &self,
        formals: Vec<Formal>,
        ellipsis: bool,
        at: Option<(Ident, Span)>,
        lambda_start: usize,
    ) -> PResult<Param> {
        let mut order: Vec<usize> = (0..formals.len()).collect();
        order.sort_by(|&a, &b| formals[a].name.cmp(&formals[b].name).then(a.cmp(&b)));
        // (index of the name's first occurrence, index of its second occurrence)
        let dup = order
            .windows(2)
            .filter(|w| formals[w[0]].name == formals[w[1]].name)
            .map(|w| (w[0], w[1]))
            .fold(None::<(usize, usize)>, |best, (first, second)| match best {
                Some((f, _)) if formals[f].name == formals[first].name => best,
                Some((f, _)) if f < first => best,
                _ => Some((first, second)),
            });
        if let Some((_, second)) = dup {
            let f = &formals[second];
            return Err(ParseError::new(
                format!("duplicate formal function argument '{}'", f.name),
                f.span,
            ));
        }
        if let Some((name, _)) = &at {
            if formals.iter().any(|f| &f.name == name) {
                return Err(ParseError::new(
                    format!("duplicate formal function argument '{name}'"),
                    Span::new(lambda_start, self.pos),
                ));
            }
        }
        Ok(Param::Formals {
            formals,
            ellipsis,
            at,
        })
    }
}
