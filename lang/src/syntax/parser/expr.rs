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

use super::super::ast::*;
use super::lexer::{Kw, Token, T};
use super::{Node, PResult, ParseError, Parser};

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
    /// `expr`: any expression, including lambdas, `let`, `with`, `assert` and
    /// `if`, that becomes a child of a node being built (one more level of nesting).
    pub(super) fn parse_expr(&mut self) -> PResult<Node> {
        self.nest(|p| p.expr_function())
    }

    /// `expr` at the top or directly inside parentheses: no added nesting.
    pub(super) fn expr_root(&mut self) -> PResult<Node> {
        self.enter(|p| p.expr_function())
    }

    /// `expr_function` and `expr_if`. Each construct is parsed by its own
    /// non-inlined function so that the common path keeps a small stack frame.
    fn expr_function(&mut self) -> PResult<Node> {
        let tok = self.peek()?;
        match tok.t {
            T::Id(name) if matches!(self.peek2()?.t, T::Sym(':') | T::Sym('@')) => {
                self.lambda_ident(tok, name)
            }
            T::LBrace if self.brace_starts_formals()? => self.lambda_formals(tok),
            T::Kw(Kw::Assert | Kw::With) => self.assert_with(tok),
            T::Kw(Kw::Let) if self.peek2()?.t != T::LBrace => self.let_in(tok),
            T::Kw(Kw::If) => self.if_then_else(tok),
            _ => self.pipes(None),
        }
    }

    /// `x: body` and `x @ { formals }: body`, at the identifier `tok`.
    #[inline(never)]
    fn lambda_ident(&mut self, tok: Token<'a>, name: &str) -> PResult<Node> {
        self.bump()?;
        let (param, d) = if self.bump()?.t == T::Sym(':') {
            (Param::Ident(name.into(), tok.span()), 0)
        } else {
            self.expect(T::LBrace, "'{'")?;
            let (formals, ellipsis, d) = self.formals()?;
            self.expect(T::Sym(':'), "':'")?;
            let at = Some((name.into(), tok.span()));
            (self.validate_formals(formals, ellipsis, at, tok.start)?, d)
        };
        let body = self.parse_expr()?;
        self.lambda(param, d, body, tok.start)
    }

    /// `{ formals }: body` and `{ formals } @ x: body`, at the `{` `tok`.
    #[inline(never)]
    fn lambda_formals(&mut self, tok: Token<'a>) -> PResult<Node> {
        self.bump()?;
        let (formals, ellipsis, d) = self.formals()?;
        let at = match self.eat(T::Sym('@'))? {
            Some(_) => {
                let id = self.peek()?;
                let T::Id(name) = id.t else {
                    return Err(self.unexpected(id, Some("identifier")));
                };
                self.bump()?;
                Some((name.into(), id.span()))
            }
            None => None,
        };
        self.expect(T::Sym(':'), if at.is_none() { "':' or '@'" } else { "':'" })?;
        let param = self.validate_formals(formals, ellipsis, at, tok.start)?;
        let body = self.parse_expr()?;
        self.lambda(param, d, body, tok.start)
    }

    fn lambda(&mut self, param: Param, d: u32, body: Node, start: usize) -> PResult<Node> {
        let d = 1 + d.max(body.d);
        let kind = ExprKind::Lambda {
            param,
            body: boxed(body),
        };
        self.node(kind, start, d)
    }

    /// `assert e; body` and `with e; body`, at the keyword `tok`.
    #[inline(never)]
    fn assert_with(&mut self, tok: Token<'a>) -> PResult<Node> {
        self.bump()?;
        let first = self.parse_expr()?;
        self.expect(T::Sym(';'), "';'")?;
        let body = self.parse_expr()?;
        let d = 1 + first.d.max(body.d);
        let (first, body) = (boxed(first), boxed(body));
        let kind = match tok.t {
            T::Kw(Kw::Assert) => ExprKind::Assert { cond: first, body },
            _ => ExprKind::With { env: first, body },
        };
        self.node(kind, tok.start, d)
    }

    /// `let bindings in body`, at the `let` `tok`.
    #[inline(never)]
    fn let_in(&mut self, tok: Token<'a>) -> PResult<Node> {
        self.bump()?;
        let (bindings, d) = self.bindings(T::Kw(Kw::In), "'in'")?;
        self.check_let_bindings(&bindings, tok.start)?;
        self.bump()?; // `in`
        let body = self.parse_expr()?;
        let d = 1 + d.max(body.d);
        let kind = ExprKind::Let {
            bindings,
            body: boxed(body),
        };
        self.node(kind, tok.start, d)
    }

    /// `if c then a else b`, at the `if` `tok`.
    #[inline(never)]
    fn if_then_else(&mut self, tok: Token<'a>) -> PResult<Node> {
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
        let lhs = self.op(0, prim)?;
        match self.peek()?.t {
            T::PipeInto | T::PipeFrom => self.pipe_chain(lhs),
            _ => Ok(lhs),
        }
    }

    /// The `|> …` or `<| …` chain after its first operand.
    #[inline(never)]
    fn pipe_chain(&mut self, mut lhs: Node) -> PResult<Node> {
        if self.peek()?.t == T::PipeInto {
            while self.eat(T::PipeInto)?.is_some() {
                let rhs = self.op_child(0)?;
                lhs = self.binary(BinaryOp::PipeRight, lhs, rhs)?;
            }
            let tok = self.peek()?;
            if tok.t == T::PipeFrom {
                return Err(self.mixed_pipes(tok));
            }
            return Ok(lhs);
        }
        let mut operands = Vec::new();
        while self.eat(T::PipeFrom)?.is_some() {
            operands.push(self.op_child(0)?);
        }
        let tok = self.peek()?;
        if tok.t == T::PipeInto {
            return Err(self.mixed_pipes(tok));
        }
        // `f <| g <| x` is `f <| (g <| x)`.
        let Some(mut rhs) = operands.pop() else {
            return Ok(lhs);
        };
        while let Some(prev) = operands.pop() {
            rhs = self.binary(BinaryOp::PipeLeft, prev, rhs)?;
        }
        self.binary(BinaryOp::PipeLeft, lhs, rhs)
    }

    fn mixed_pipes(&self, tok: Token<'_>) -> ParseError {
        let mut e = self.unexpected(tok, None);
        e.message
            .push_str(" ('|>' and '<|' cannot be mixed without parentheses)");
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

    /// `expr_op` with operators of level `min` or tighter. (Every recursion cycle
    /// passes through [`Parser::nest`] or [`Parser::expr_root`], which guard the
    /// stack; these direct calls do not need to.)
    fn op(&mut self, min: u8, prim: Option<Node>) -> PResult<Node> {
        self.op_inner(min, prim)
    }

    /// An operand of an operator being built.
    fn op_child(&mut self, min: u8) -> PResult<Node> {
        self.nest(|p| p.op_inner(min, None))
    }

    fn op_inner(&mut self, min: u8, prim: Option<Node>) -> PResult<Node> {
        let mut lhs = match prim {
            Some(prim) => self.app(Some(prim))?,
            None => match self.peek()?.t {
                T::Sym('!' | '-') => self.prefix()?,
                _ => self.app(None)?,
            },
        };
        loop {
            let tok = self.peek()?;
            match binop(tok.t) {
                Some((op, level, assoc)) if level >= min => {
                    lhs = self.infix(lhs, op, level, assoc)?;
                }
                _ => return Ok(lhs),
            }
        }
    }

    /// `!e` or `-e`.
    #[inline(never)]
    fn prefix(&mut self) -> PResult<Node> {
        let tok = self.bump()?;
        let (op, level) = match tok.t {
            T::Sym('!') => (UnaryOp::Not, NOT + 1),
            _ => (UnaryOp::Neg, NEG + 1),
        };
        let operand = self.op_child(level)?;
        let d = 1 + operand.d;
        let kind = ExprKind::Unary {
            op,
            expr: boxed(operand),
        };
        self.node(kind, tok.start, d)
    }

    /// `lhs op rhs` (or `lhs ? path`) with the operator as the next token.
    #[inline(never)]
    fn infix(&mut self, lhs: Node, op: Option<BinaryOp>, level: u8, assoc: Assoc) -> PResult<Node> {
        self.bump()?;
        let e = match op {
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
                let next_min = if assoc == Assoc::Right {
                    level
                } else {
                    level + 1
                };
                let rhs = self.op_child(next_min)?;
                self.binary(op, lhs, rhs)?
            }
        };
        if assoc == Assoc::Non {
            let next = self.peek()?;
            if matches!(binop(next.t), Some((_, l, _)) if l == level) {
                let mut err = self.unexpected(next, None);
                err.message
                    .push_str(" (this operator is not associative; add parentheses)");
                return Err(err);
            }
        }
        Ok(e)
    }

    /// `expr_app`: left-associative application of selections.
    fn app(&mut self, prim: Option<Node>) -> PResult<Node> {
        let mut f = self.select(prim)?;
        while starts_simple(self.peek()?.t) {
            let arg = self.select_child()?;
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
    fn select(&mut self, prim: Option<Node>) -> PResult<Node> {
        self.select_inner(prim)
    }

    /// A selection that becomes an application argument, list element or default.
    fn select_child(&mut self) -> PResult<Node> {
        self.nest(|p| p.select_inner(None))
    }

    fn select_inner(&mut self, prim: Option<Node>) -> PResult<Node> {
        let e = match prim {
            Some(prim) => prim,
            None => self.simple()?,
        };
        match self.peek()?.t {
            T::Sym('.') | T::Kw(Kw::Or) => self.select_suffix(e),
            _ => Ok(e),
        }
    }

    /// `.path`, `.path or default` or a lone `or` after the simple expression `e`.
    #[inline(never)]
    fn select_suffix(&mut self, e: Node) -> PResult<Node> {
        let tok = self.bump()?;
        let start = e.start;
        if tok.t == T::Kw(Kw::Or) {
            let or = Expr::new(ExprKind::Var("or".into()), tok.span());
            let d = 1 + e.d;
            let kind = ExprKind::Apply {
                func: boxed(e),
                arg: Box::new(or),
            };
            return self.node(kind, start, d);
        }
        let (path, pd) = self.attr_path()?;
        let mut d = 1 + e.d.max(pd);
        let default = match self.eat(T::Kw(Kw::Or))? {
            Some(_) => {
                let def = self.select_child()?;
                d = d.max(1 + def.d);
                Some(boxed(def))
            }
            None => None,
        };
        let kind = ExprKind::Select {
            expr: boxed(e),
            path,
            default,
        };
        self.node(kind, start, d)
    }

    /// `expr_simple`.
    #[inline(never)]
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
            T::Sym('[') => self.list(),
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
            _ => Err(self.unexpected(tok, None)),
        }
    }

    /// `[ elems ]`: selections separated by whitespace.
    #[inline(never)]
    fn list(&mut self) -> PResult<Node> {
        let start = self.bump()?.start;
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
            let elem = self.select_child()?;
            d = d.max(elem.d);
            elems.push(elem.e);
        }
        self.node(ExprKind::List(elems), start, 1 + d)
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
        let mut inner = self.expr_root()?;
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
