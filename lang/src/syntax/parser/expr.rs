//! The expression grammar of `parser.y`: lambdas, `let`/`with`/`assert`, `if`,
//! pipes, operators by precedence climbing, application, selection and simple
//! expressions.
//!
//! Precedence, loosest first: `|>` (left) and `<|` (right), which do not mix;
//! `->` (right); `||`; `&&`; `==` `!=` (non-associative); `<` `<=` `>` `>=`
//! (non-associative); `//` (right); prefix `!`; `+` `-`; `*` `/`; `++` (right);
//! `?` (non-associative); prefix `-`; application; selection and `or`.
//! Lambdas, `if`, `let`, `with` and `assert` are not operands: `1 + if …` is a
//! syntax error, as in Nix.

use super::lexer::{Kw, Token, T};
use super::{Node, PResult, ParseError, Parser};
use crate::syntax::ast::*;

/// Operator precedence levels (higher binds tighter).
const IMPL: u8 = 1;
const OR: u8 = 2;
const AND: u8 = 3;
const EQ: u8 = 4;
const CMP: u8 = 5;
const UPDATE: u8 = 6;
const NOT: u8 = 7;
const ADD: u8 = 8;
const MUL: u8 = 9;
const CONCAT: u8 = 10;
const HAS: u8 = 11;
const NEG: u8 = 12;

#[derive(Clone, Copy, PartialEq)]
enum Assoc {
    Left,
    Right,
    Non,
}

/// The binary (or `?`) operator a token stands for: (op, level, associativity);
/// `None` for `?`, whose right side is an attribute path.
fn binop(t: T<'_>) -> Option<(Option<BinaryOp>, u8, Assoc)> {
    use Assoc::*;
    Some(match t {
        T::Impl => (Some(BinaryOp::Impl), IMPL, Right),
        T::OrOr => (Some(BinaryOp::Or), OR, Left),
        T::And => (Some(BinaryOp::And), AND, Left),
        T::Eq => (Some(BinaryOp::Eq), EQ, Non),
        T::Neq => (Some(BinaryOp::NotEq), EQ, Non),
        T::Sym('<') => (Some(BinaryOp::Lt), CMP, Non),
        T::Sym('>') => (Some(BinaryOp::Gt), CMP, Non),
        T::Leq => (Some(BinaryOp::Le), CMP, Non),
        T::Geq => (Some(BinaryOp::Ge), CMP, Non),
        T::Update => (Some(BinaryOp::Update), UPDATE, Right),
        T::Sym('+') => (Some(BinaryOp::Add), ADD, Left),
        T::Sym('-') => (Some(BinaryOp::Sub), ADD, Left),
        T::Sym('*') => (Some(BinaryOp::Mul), MUL, Left),
        T::Sym('/') => (Some(BinaryOp::Div), MUL, Left),
        T::Concat => (Some(BinaryOp::Concat), CONCAT, Right),
        T::Sym('?') => (None, HAS, Non),
        _ => return None,
    })
}

/// Whether a token can start an `expr_simple` (an application argument or list
/// element).
pub(super) fn starts_simple(t: T<'_>) -> bool {
    matches!(
        t,
        T::Id(_)
            | T::Int(_)
            | T::Float(_)
            | T::Quote
            | T::IndOpen
            | T::Path(_)
            | T::SPath(_)
            | T::Uri(_)
            | T::LBrace
            | T::Sym('(')
            | T::Sym('[')
            | T::Kw(Kw::Rec)
            | T::Kw(Kw::Let)
    )
}

fn boxed(n: Node) -> Box<Expr> {
    Box::new(n.e)
}

impl<'a> Parser<'a> {
    /// `expr`: any expression, including lambdas, `let`, `with`, `assert` and `if`.
    pub(super) fn parse_expr(&mut self) -> PResult<Node> {
        self.enter(|p| p.expr_function())
    }

    fn expr_function(&mut self) -> PResult<Node> {
        let tok = self.peek()?;
        let start = tok.start;
        match tok.t {
            T::Id(name) => match self.peek2()?.t {
                T::Sym(':') => {
                    self.bump()?;
                    self.bump()?;
                    let body = self.parse_expr()?;
                    let param = Param::Ident(name.into(), tok.span());
                    return self.lambda(param, 0, body, start);
                }
                T::Sym('@') => {
                    self.bump()?;
                    self.bump()?;
                    self.expect(T::LBrace, "'{'")?;
                    let (formals, ellipsis, d) = self.formals()?;
                    self.expect(T::Sym(':'), "':'")?;
                    let at = Some((name.into(), tok.span()));
                    let param = self.validate_formals(formals, ellipsis, at, start)?;
                    let body = self.parse_expr()?;
                    return self.lambda(param, d, body, start);
                }
                _ => {}
            },
            T::LBrace if self.brace_starts_formals()? => {
                self.bump()?;
                let (formals, ellipsis, d) = self.formals()?;
                let at = match self.peek()?.t {
                    T::Sym('@') => {
                        self.bump()?;
                        let id = self.peek()?;
                        let T::Id(name) = id.t else {
                            return Err(self.unexpected(id, Some("identifier")));
                        };
                        self.bump()?;
                        Some((name.into(), id.span()))
                    }
                    _ => None,
                };
                self.expect(T::Sym(':'), if at.is_none() { "':' or '@'" } else { "':'" })?;
                let param = self.validate_formals(formals, ellipsis, at, start)?;
                let body = self.parse_expr()?;
                return self.lambda(param, d, body, start);
            }
            T::Kw(kw @ (Kw::Assert | Kw::With)) => {
                self.bump()?;
                let first = self.parse_expr()?;
                self.expect(T::Sym(';'), "';'")?;
                let body = self.parse_expr()?;
                let d = 1 + first.d.max(body.d);
                let (first, body) = (boxed(first), boxed(body));
                let kind = match kw {
                    Kw::Assert => ExprKind::Assert { cond: first, body },
                    _ => ExprKind::With { env: first, body },
                };
                return self.node(kind, start, d);
            }
            T::Kw(Kw::Let) if self.peek2()?.t != T::LBrace => {
                self.bump()?;
                let (bindings, d) = self.bindings(T::Kw(Kw::In), "'in'")?;
                self.check_let_bindings(&bindings, start)?;
                self.bump()?; // `in`
                let body = self.parse_expr()?;
                let d = 1 + d.max(body.d);
                let kind = ExprKind::Let {
                    bindings,
                    body: boxed(body),
                };
                return self.node(kind, start, d);
            }
            _ => {}
        }
        self.expr_if()
    }

    fn lambda(&mut self, param: Param, d: u32, body: Node, start: usize) -> PResult<Node> {
        let d = 1 + d.max(body.d);
        let kind = ExprKind::Lambda {
            param,
            body: boxed(body),
        };
        self.node(kind, start, d)
    }

    fn expr_if(&mut self) -> PResult<Node> {
        let tok = self.peek()?;
        if tok.t != T::Kw(Kw::If) {
            return self.pipes(None);
        }
        self.bump()?;
        let cond = self.parse_expr()?;
        self.expect(T::Kw(Kw::Then), "'then'")?;
        let then = self.parse_expr()?;
        self.expect(T::Kw(Kw::Else), "'else'")?;
        let else_ = self.parse_expr()?;
        let d = 1 + cond.d.max(then.d).max(else_.d);
        let kind = ExprKind::If {
            cond: boxed(cond),
            then: boxed(then),
            else_: boxed(else_),
        };
        self.node(kind, tok.start, d)
    }

    /// `expr_pipe_into | expr_pipe_from | expr_op`. `prim` is an already parsed
    /// first simple expression (see [`Parser::parens`]).
    fn pipes(&mut self, prim: Option<Node>) -> PResult<Node> {
        let mut lhs = self.op(0, prim)?;
        let tok = self.peek()?;
        match tok.t {
            T::PipeInto => {
                while self.eat(T::PipeInto)?.is_some() {
                    let rhs = self.op(0, None)?;
                    lhs = self.binary(BinaryOp::PipeRight, lhs, rhs)?;
                }
                let tok = self.peek()?;
                if tok.t == T::PipeFrom {
                    return Err(self.mixed_pipes(tok));
                }
                Ok(lhs)
            }
            T::PipeFrom => {
                let mut operands = vec![lhs];
                while self.eat(T::PipeFrom)?.is_some() {
                    operands.push(self.op(0, None)?);
                }
                let tok = self.peek()?;
                if tok.t == T::PipeInto {
                    return Err(self.mixed_pipes(tok));
                }
                // `f <| g <| x` is `f <| (g <| x)`.
                let mut rhs = operands.pop().expect("at least two operands");
                while let Some(lhs) = operands.pop() {
                    rhs = self.binary(BinaryOp::PipeLeft, lhs, rhs)?;
                }
                Ok(rhs)
            }
            _ => Ok(lhs),
        }
    }

    fn mixed_pipes(&self, tok: Token<'_>) -> ParseError {
        let mut e = self.unexpected(tok, None);
        e.message.push_str(" ('|>' and '<|' cannot be mixed without parentheses)");
        e
    }

    /// `lhs op rhs`, spanning both.
    fn binary(&mut self, op: BinaryOp, lhs: Node, rhs: Node) -> PResult<Node> {
        let (start, d) = (lhs.start, 1 + lhs.d.max(rhs.d));
        let kind = ExprKind::Binary {
            op,
            lhs: boxed(lhs),
            rhs: boxed(rhs),
        };
        self.node(kind, start, d)
    }

    /// `expr_op` with operators of level `min` or tighter.
    fn op(&mut self, min: u8, prim: Option<Node>) -> PResult<Node> {
        self.enter(|p| p.op_inner(min, prim))
    }

    fn op_inner(&mut self, min: u8, prim: Option<Node>) -> PResult<Node> {
        let mut lhs = match prim {
            Some(prim) => self.app(Some(prim))?,
            None => {
                let tok = self.peek()?;
                let prefix = match tok.t {
                    T::Sym('!') => Some((UnaryOp::Not, NOT + 1)),
                    T::Sym('-') => Some((UnaryOp::Neg, NEG + 1)),
                    _ => None,
                };
                match prefix {
                    Some((op, level)) => {
                        self.bump()?;
                        let operand = self.op(level, None)?;
                        let d = 1 + operand.d;
                        let kind = ExprKind::Unary {
                            op,
                            expr: boxed(operand),
                        };
                        self.node(kind, tok.start, d)?
                    }
                    None => self.app(None)?,
                }
            }
        };
        loop {
            let tok = self.peek()?;
            let Some((op, level, assoc)) = binop(tok.t) else {
                break;
            };
            if level < min {
                break;
            }
            self.bump()?;
            lhs = match op {
                None => {
                    let (path, d) = self.attr_path()?;
                    let d = 1 + lhs.d.max(d);
                    let start = lhs.start;
                    let kind = ExprKind::HasAttr {
                        expr: boxed(lhs),
                        path,
                    };
                    self.node(kind, start, d)?
                }
                Some(op) => {
                    let next_min = if assoc == Assoc::Right { level } else { level + 1 };
                    let rhs = self.op(next_min, None)?;
                    self.binary(op, lhs, rhs)?
                }
            };
            if assoc == Assoc::Non {
                let next = self.peek()?;
                if matches!(binop(next.t), Some((_, l, _)) if l == level) {
                    let mut e = self.unexpected(next, None);
                    e.message.push_str(" (this operator is not associative; add parentheses)");
                    return Err(e);
                }
            }
        }
        Ok(lhs)
    }

    /// `expr_app`: left-associative application of selections.
    fn app(&mut self, prim: Option<Node>) -> PResult<Node> {
        let mut f = self.select(prim)?;
        while starts_simple(self.peek()?.t) {
            let arg = self.select(None)?;
            let (start, d) = (f.start, 1 + f.d.max(arg.d));
            let kind = ExprKind::Apply {
                func: boxed(f),
                arg: boxed(arg),
            };
            f = self.node(kind, start, d)?;
        }
        Ok(f)
    }

    /// `expr_select`: `e.a.b`, `e.a.b or default`, and `e or` (application of `e`
    /// to a variable named `or`, kept for compatibility as Nix does).
    pub(super) fn select(&mut self, prim: Option<Node>) -> PResult<Node> {
        self.enter(|p| {
            let e = match prim {
                Some(prim) => prim,
                None => p.simple()?,
            };
            let tok = p.peek()?;
            match tok.t {
                T::Sym('.') => {
                    p.bump()?;
                    let (path, pd) = p.attr_path()?;
                    let mut d = 1 + e.d.max(pd);
                    let default = match p.eat(T::Kw(Kw::Or))? {
                        Some(_) => {
                            let def = p.select(None)?;
                            d = d.max(1 + def.d);
                            Some(boxed(def))
                        }
                        None => None,
                    };
                    let start = e.start;
                    let kind = ExprKind::Select {
                        expr: boxed(e),
                        path,
                        default,
                    };
                    p.node(kind, start, d)
                }
                T::Kw(Kw::Or) => {
                    p.bump()?;
                    let or = Expr::new(ExprKind::Var("or".into()), tok.span());
                    let (start, d) = (e.start, 1 + e.d);
                    let kind = ExprKind::Apply {
                        func: boxed(e),
                        arg: Box::new(or),
                    };
                    p.node(kind, start, d)
                }
                _ => Ok(e),
            }
        })
    }

    /// `expr_simple`.
    fn simple(&mut self) -> PResult<Node> {
        let tok = self.peek()?;
        let start = tok.start;
        match tok.t {
            T::Id(name) => {
                self.bump()?;
                let kind = if name == "__curPos" {
                    ExprKind::CurPos
                } else {
                    ExprKind::Var(name.into())
                };
                self.node(kind, start, 1)
            }
            T::Int(v) => {
                self.bump()?;
                self.node(ExprKind::Int(v), start, 1)
            }
            T::Float(v) => {
                self.bump()?;
                self.node(ExprKind::Float(v), start, 1)
            }
            T::Uri(text) => {
                self.bump()?;
                self.node(ExprKind::Uri(text.to_string()), start, 1)
            }
            T::SPath(text) => {
                self.bump()?;
                self.node(ExprKind::SearchPath(text.to_string()), start, 1)
            }
            T::Quote => {
                let open = self.bump()?;
                let (parts, d) = self.string(open)?;
                self.node(ExprKind::Str(parts), start, 1 + d)
            }
            T::IndOpen => {
                let open = self.bump()?;
                let (parts, d) = self.ind_string(open)?;
                self.node(ExprKind::Str(parts), start, 1 + d)
            }
            T::Path(anchor) => {
                let tok = self.bump()?;
                let (parts, d) = self.path(tok)?;
                self.node(ExprKind::Path(anchor, parts), start, 1 + d)
            }
            T::Sym('(') => self.parens(),
            T::Sym('[') => {
                self.bump()?;
                let mut elems = Vec::new();
                let mut d = 0;
                loop {
                    let tok = self.peek()?;
                    if tok.t == T::Sym(']') {
                        self.bump()?;
                        break;
                    }
                    if !starts_simple(tok.t) {
                        return Err(self.unexpected(tok, Some("']'")));
                    }
                    let elem = self.select(None)?;
                    d = d.max(elem.d);
                    elems.push(elem.e);
                }
                self.node(ExprKind::List(elems), start, 1 + d)
            }
            T::LBrace => {
                self.bump()?;
                self.attr_set(false, start)
            }
            T::Kw(Kw::Rec) => {
                self.bump()?;
                self.expect(T::LBrace, "'{'")?;
                self.attr_set(true, start)
            }
            T::Kw(Kw::Let) => {
                self.bump()?;
                self.expect(T::LBrace, "'{'")?;
                let (bindings, d) = self.bindings(T::RBrace, "'}'")?;
                self.bump()?;
                self.node(ExprKind::LegacyLet(bindings), start, 1 + d)
            }
            _ => Err(self.unexpected(tok, Some("expression"))),
        }
    }

    /// `( expr )`, parsed without recursion for directly nested parentheses: all
    /// leading `(` are consumed, the innermost expression is parsed, and each
    /// closing `)` yields a simple expression from which the enclosing expression
    /// resumes (`((a) b)` resumes after `(a)` with the application).
    fn parens(&mut self) -> PResult<Node> {
        let mut opens = Vec::new();
        while self.peek()?.t == T::Sym('(') {
            opens.push(self.bump()?.start);
        }
        let mut inner = self.parse_expr()?;
        while let Some(open) = opens.pop() {
            let tok = self.peek()?;
            if tok.t != T::Sym(')') {
                return Err(self.unexpected(tok, Some("')'")));
            }
            self.bump()?;
            inner.start = open;
            if opens.is_empty() {
                break;
            }
            inner = self.pipes(Some(inner))?;
        }
        Ok(inner)
    }

    /// Rejects bindings Nix does not allow in `let … in`: a dynamic first attribute
    /// (reported, as Nix does, from the `let` at `start`).
    fn check_let_bindings(&self, bindings: &[Binding], start: usize) -> PResult<()> {
        for b in bindings {
            if let Binding::Attr { path, .. } = b {
                if let Some(AttrName::Dynamic(e)) = path.first() {
                    return Err(ParseError::new(
                        "dynamic attributes not allowed in let",
                        Span::new(start, e.span.end as usize),
                    ));
                }
            }
        }
        Ok(())
    }
}
