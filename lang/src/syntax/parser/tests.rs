//! Unit tests for the parser: literal vectors rendered as compact S-expressions,
//! error messages and spans, resource limits, and (when the directory exists) the
//! Nix language conformance suite.

use super::*;

/// Renders an expression compactly: `(+ a b)`, `(@ f x)` for application,
/// `(. e a b)` for selection, `"lit${e}"` for strings, `{a=1;}` for sets.
fn show(e: &Expr) -> String {
    let mut s = String::new();
    render(e, &mut s);
    s
}

fn render_parts(parts: &[StrPart], out: &mut String) {
    for p in parts {
        match p {
            StrPart::Lit(l) => {
                for c in l.chars() {
                    match c {
                        '\\' => out.push_str("\\\\"),
                        '"' => out.push_str("\\\""),
                        '\n' => out.push_str("\\n"),
                        '\r' => out.push_str("\\r"),
                        '\t' => out.push_str("\\t"),
                        c => out.push(c),
                    }
                }
            }
            StrPart::Interp(e) => {
                out.push_str("${");
                render(e, out);
                out.push('}');
            }
        }
    }
}

fn render_path(path: &[AttrName], out: &mut String) {
    for (i, a) in path.iter().enumerate() {
        if i > 0 {
            out.push('.');
        }
        match a {
            AttrName::Static(n, _) => out.push_str(n),
            AttrName::Dynamic(e) => {
                out.push_str("${");
                render(e, out);
                out.push('}');
            }
        }
    }
}

fn render_bindings(bs: &[Binding], out: &mut String) {
    out.push('{');
    for b in bs {
        match b {
            Binding::Attr { path, value, .. } => {
                render_path(path, out);
                out.push('=');
                render(value, out);
                out.push(';');
            }
            Binding::Inherit { from, names, .. } => {
                out.push_str("inherit");
                if let Some(f) = from {
                    out.push_str(" (");
                    render(f, out);
                    out.push(')');
                }
                for (n, _) in names {
                    out.push(' ');
                    out.push_str(n);
                }
                out.push(';');
            }
        }
    }
    out.push('}');
}

fn render(e: &Expr, out: &mut String) {
    let list = |head: &str, items: &[&Expr], out: &mut String| {
        out.push('(');
        out.push_str(head);
        for i in items {
            out.push(' ');
            render(i, out);
        }
        out.push(')');
    };
    match &e.kind {
        ExprKind::Int(i) => out.push_str(&i.to_string()),
        ExprKind::Float(f) => out.push_str(&format!("{f:?}")),
        ExprKind::Str(parts) => {
            out.push('"');
            render_parts(parts, out);
            out.push('"');
        }
        ExprKind::Path(a, parts) => {
            out.push_str(match a {
                PathAnchor::Relative => "(rel \"",
                PathAnchor::Absolute => "(abs \"",
                PathAnchor::Home => "(home \"",
            });
            render_parts(parts, out);
            out.push_str("\")");
        }
        ExprKind::SearchPath(p) => out.push_str(&format!("<{p}>")),
        ExprKind::Uri(u) => out.push_str(&format!("(uri {u})")),
        ExprKind::Var(v) => out.push_str(v),
        ExprKind::CurPos => out.push_str("(curpos)"),
        ExprKind::List(items) => {
            out.push('[');
            for (i, x) in items.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                render(x, out);
            }
            out.push(']');
        }
        ExprKind::Attrs { rec, bindings } => {
            if *rec {
                out.push_str("rec");
            }
            render_bindings(bindings, out);
        }
        ExprKind::Let { bindings, body } => {
            out.push_str("(let ");
            render_bindings(bindings, out);
            out.push(' ');
            render(body, out);
            out.push(')');
        }
        ExprKind::LegacyLet(bs) => {
            out.push_str("let");
            render_bindings(bs, out);
        }
        ExprKind::Lambda { param, body } => {
            out.push_str("(fn ");
            match param {
                Param::Ident(x, _) => out.push_str(x),
                Param::Formals {
                    formals,
                    ellipsis,
                    at,
                } => {
                    out.push('{');
                    for (i, f) in formals.iter().enumerate() {
                        if i > 0 {
                            out.push(' ');
                        }
                        out.push_str(&f.name);
                        if let Some(d) = &f.default {
                            out.push('?');
                            render(d, out);
                        }
                    }
                    if *ellipsis {
                        out.push_str(if formals.is_empty() { "..." } else { " ..." });
                    }
                    out.push('}');
                    if let Some((a, _)) = at {
                        out.push('@');
                        out.push_str(a);
                    }
                }
            }
            out.push(' ');
            render(body, out);
            out.push(')');
        }
        ExprKind::Apply { func, arg } => list("@", &[func, arg], out),
        ExprKind::Select {
            expr,
            path,
            default,
        } => {
            out.push_str("(. ");
            render(expr, out);
            out.push(' ');
            render_path(path, out);
            if let Some(d) = default {
                out.push_str(" or ");
                render(d, out);
            }
            out.push(')');
        }
        ExprKind::HasAttr { expr, path } => {
            out.push_str("(? ");
            render(expr, out);
            out.push(' ');
            render_path(path, out);
            out.push(')');
        }
        ExprKind::With { env, body } => list("with", &[env, body], out),
        ExprKind::Assert { cond, body } => list("assert", &[cond, body], out),
        ExprKind::If { cond, then, else_ } => list("if", &[cond, then, else_], out),
        ExprKind::Unary { op, expr } => {
            list(if *op == UnaryOp::Not { "!" } else { "neg" }, &[expr], out)
        }
        ExprKind::Binary { op, lhs, rhs } => {
            let op = match op {
                BinaryOp::Add => "+",
                BinaryOp::Sub => "-",
                BinaryOp::Mul => "*",
                BinaryOp::Div => "/",
                BinaryOp::Concat => "++",
                BinaryOp::Update => "//",
                BinaryOp::Eq => "==",
                BinaryOp::NotEq => "!=",
                BinaryOp::Lt => "<",
                BinaryOp::Le => "<=",
                BinaryOp::Gt => ">",
                BinaryOp::Ge => ">=",
                BinaryOp::And => "&&",
                BinaryOp::Or => "||",
                BinaryOp::Impl => "->",
                BinaryOp::PipeRight => "|>",
                BinaryOp::PipeLeft => "<|",
            };
            list(op, &[lhs, rhs], out)
        }
    }
}

#[track_caller]
fn ok(src: &str, expected: &str) {
    match parse(src) {
        Ok(e) => assert_eq!(show(&e), expected, "source: {src:?}"),
        Err(e) => panic!("{src:?} failed to parse: {} at {:?}", e.message, e.span),
    }
}

/// Asserts a parse error whose message contains `msg`; returns its span.
#[track_caller]
fn err(src: &str, msg: &str) -> (u32, u32) {
    match parse(src) {
        Ok(e) => panic!(
            "{src:?} parsed as {} but should fail with {msg:?}",
            show(&e)
        ),
        Err(e) => {
            assert!(
                e.message.contains(msg),
                "{src:?}: message {:?} does not contain {msg:?}",
                e.message
            );
            (e.span.start, e.span.end)
        }
    }
}

#[test]
fn error_kinds() {
    let kind = |src: &str| parse(src).map(|_| ()).unwrap_err().kind;
    for src in [
        "{ a = 1;",
        "x: [",
        "let x = 1; in",
        "''abc",
        "\"abc",
        "/* x",
        "f (",
        "a.",
    ] {
        assert_eq!(kind(src), ParseErrorKind::Incomplete, "{src:?}");
    }
    for src in ["1 )", "{ a = 1; } }", "let in in 1", "[ 1 ] ]"] {
        assert_eq!(kind(src), ParseErrorKind::Unexpected, "{src:?}");
    }
    for src in ["{ x, x }: x", "99999999999999999999", "let ${a} = 1; in 1"] {
        assert_eq!(kind(src), ParseErrorKind::Other, "{src:?}");
    }
    assert!(parse("1 )").unwrap_err().is_syntax_error());
    assert!(!parse("1 )").unwrap_err().is_incomplete());
    assert!(parse("\"abc").unwrap_err().is_incomplete());
    assert!(!parse("{ x, x }: x").unwrap_err().is_syntax_error());
}

mod limits;
mod suite;
mod vectors;
