//! Literal test vectors: precedence, literals, strings, paths, sets, lambdas, errors.

use super::super::super::ast::*;
use super::{err, ok, parse, show};

#[test]
fn precedence() {
    ok("1 + 2 * 3", "(+ 1 (* 2 3))");
    ok("1 * 2 + 3", "(+ (* 1 2) 3)");
    ok("1 - 2 - 3", "(- (- 1 2) 3)");
    ok("8 / 4 / 2", "(/ (/ 8 4) 2)");
    ok("a ++ b ++ c", "(++ a (++ b c))");
    ok("a // b // c", "(// a (// b c))");
    ok("a -> b -> c", "(-> a (-> b c))");
    ok("a || b && c", "(|| a (&& b c))");
    ok("a && b || c", "(|| (&& a b) c)");
    ok("a || b || c", "(|| (|| a b) c)");
    ok("a -> b || c", "(-> a (|| b c))");
    ok("a.b or c d", "(@ (. a b or c) d)");
    ok("-a.b", "(neg (. a b))");
    ok("- f x", "(neg (@ f x))");
    ok("!a == b", "(== (! a) b)");
    ok("!a + b", "(! (+ a b))");
    ok("!a // b", "(// (! a) b)");
    ok("!a && b", "(&& (! a) b)");
    ok("a + !b + c", "(+ a (! (+ b c)))");
    ok("!!a", "(! (! a))");
    ok("- -a", "(neg (neg a))");
    ok("-a ? b", "(? (neg a) b)");
    ok("-a * b", "(* (neg a) b)");
    ok("-a ++ b", "(++ (neg a) b)");
    ok("a ? b ++ c", "(++ (? a b) c)");
    ok("a ? b.c", "(? a b.c)");
    ok("a ? \"b\".${c}", "(? a b.${c})");
    ok("a ++ b ? c", "(++ a (? b c))");
    ok("f x y", "(@ (@ f x) y)");
    ok("f x.y z", "(@ (@ f (. x y)) z)");
    ok("a < b == c", "(== (< a b) c)");
    ok("a == b < c", "(== a (< b c))");
    ok("a == b && c != d", "(&& (== a b) (!= c d))");
    ok("a <= b || a >= b", "(|| (<= a b) (>= a b))");
    ok("a // b == c", "(== (// a b) c)");
    ok("a + b // c", "(// (+ a b) c)");
    ok("1 - -1", "(- 1 (neg 1))");
    ok("f -1", "(- f 1)");
    ok("a-b", "a-b");
    ok("a - b", "(- a b)");
    ok("a->b", "(> a- b)");
    ok("(a + b) * c", "(* (+ a b) c)");
    ok("((a))", "a");
    ok("(f) x", "(@ f x)");
    ok("((f) x) y", "(@ (@ f x) y)");
    ok("((a).b) c", "(@ (. a b) c)");
    ok("((a) + (b)) * ((c))", "(* (+ a b) c)");
}

#[test]
fn pipes() {
    ok("a |> f |> g", "(|> (|> a f) g)");
    ok("f <| g <| a", "(<| f (<| g a))");
    ok("a + b |> f x", "(|> (+ a b) (@ f x))");
    ok("f <| a -> b", "(<| f (-> a b))");
    ok("(a |> f) |> g", "(|> (|> a f) g)");
    err("a |> f <| b", "unexpected '<|'");
    err("f <| a |> g", "unexpected '|>'");
    err("a |> if a then b else c", "unexpected 'if'");
}

#[test]
fn non_associative() {
    err("a == b == c", "unexpected '=='");
    err("a == b != c", "unexpected '!='");
    err("a < b < c", "unexpected '<'");
    err("a < b > c", "unexpected '>'");
    err("a <= b >= c", "unexpected '>='");
    err("a == b < c == d", "unexpected '=='");
    err("a ? b ? c", "unexpected '?'");
    ok("(a == b) == c", "(== (== a b) c)");
    ok("a == (b == c)", "(== a (== b c))");
}

#[test]
fn select_and_or() {
    ok("x.y.z", "(. x y.z)");
    ok("x.\"y\".${z}", "(. x y.${z})");
    ok("x.${\"y\"}", "(. x y)");
    ok("x.\"${y}\"", "(. x ${\"${y}\"})");
    ok("x.or", "(. x or)");
    ok("a.b.c or d.e", "(. a b.c or (. d e))");
    ok("a.b or c.d or e", "(. a b or (. c d or e))");
    ok("a or b", "(@ (@ a or) b)");
    ok("f or", "(@ f or)");
    ok("[ a or ]", "[(@ a or)]");
    ok("[ a.b or c d ]", "[(. a b or c) d]");
    ok("[ f x ]", "[f x]");
    ok("[ ]", "[]");
    ok("{ a = 1; }.a", "(. {a=1;} a)");
    ok("[1].a or 2", "(. [1] a or 2)");
    err("a.b or", "unexpected end of file");
    err("or", "unexpected 'or'");
}

#[test]
fn numbers() {
    ok("123", "123");
    ok("1.5", "1.5");
    ok(".5", "0.5");
    ok("0.5", "0.5");
    ok("1.", "1.0");
    ok("1.5e-3", "0.0015");
    ok("2.5E2", "250.0");
    ok("1e3", "(@ 1 e3)");
    ok("01.5", "(@ 1 0.5)");
    ok("8.x", "(@ 8.0 x)");
    ok("007", "7");
    ok("9223372036854775807", "9223372036854775807");
    ok("-9223372036854775807", "(neg 9223372036854775807)");
    assert_eq!(err("9223372036854775808", "invalid integer"), (0, 19));
    err(
        "-9223372036854775808",
        "invalid integer '9223372036854775808'",
    );
    err("1.0e400", "invalid float");
    err("1.0e-400", "invalid float");
    ok("0.0e-400", "0.0");
}

#[test]
fn identifiers_and_keywords() {
    ok("true", "true");
    ok("null", "null");
    ok("a'b-c_", "a'b-c_");
    ok("_x", "_x");
    ok("iffy", "iffy");
    ok("__curPos", "(curpos)");
    ok("[ __curPos ]", "[(curpos)]");
    err("if", "unexpected end of file");
    err(
        "a.if",
        "unexpected 'if', expected identifier, 'or', '${' or '\"'",
    );
    err("a.assert", "unexpected 'assert'");
    err("a.<nixpkgs>", "unexpected '<…>' path");
    err("a.~/foo", "unexpected '~/…' path");
    err("a.''x''", "unexpected start of an indented string");
    err("{ } ? ./foo", "unexpected path");
}

#[test]
fn strings() {
    ok(r#""""#, r#""""#);
    assert_eq!(parse(r#""""#).unwrap().kind, ExprKind::Str(vec![]));
    ok(r#""abc""#, r#""abc""#);
    ok(r#""a\nb\tc\rd""#, r#""a\nb\tc\rd""#);
    ok(r#""\\ \" \$ \x \é""#, r#""\\ \" $ x é""#);
    ok(r#""\${x}""#, r#""${x}""#);
    ok(r#""$${x}""#, r#""$${x}""#);
    ok(r#""$$${x}""#, r#""$$${x}""#);
    ok(r#""a$""#, r#""a$""#);
    ok(r#""$""#, r#""$""#);
    ok(r#""$\n""#, r#""$\n""#);
    ok(r#""$a{b}""#, r#""$a{b}""#);
    ok(r#""${x}""#, r#""${x}""#);
    ok(r#""a${x}b${y}c""#, r#""a${x}b${y}c""#);
    ok(r#""a${"b${c}"}d""#, r#""a${"b${c}"}d""#);
    ok(r#""${ { a = "}"; }.a }""#, r#""${(. {a="}";} a)}""#);
    ok("\"a\r\nb\rc\"", r#""a\nb\nc""#);
    ok("\"a\\\r\nb\"", r#""a\r\nb""#);
    ok("\"multi\nline\"", r#""multi\nline""#);
    assert_eq!(err("\"abc", "unterminated string"), (0, 1));
    assert_eq!(err("x \"abc\\", "unterminated string"), (2, 3));
    err("\"abc$", "unterminated string");
    err("\"${a\"", "unterminated string");
    err("\"${a", "unexpected end of file, expected '}'");
    err("\"${a b c\"", "unterminated string");
}

#[test]
fn indented_strings() {
    ok("''\n  a\n  b\n''", r#""a\nb\n""#);
    ok("''\n  a\n    b\n  ''", r#""a\n  b\n""#);
    ok("''  a''", r#""a""#);
    ok("''''", r#""""#);
    ok("'' ''", r#""""#);
    ok("''\n''", r#""""#);
    ok("''\n  ''", r#""""#);
    ok("''${x}''", r#""${x}""#);
    ok("''\n  ${x}\n''", r#""${x}\n""#);
    ok("''\n  a\n\tb\n''", r#""  a\n\tb\n""#);
    ok("''\n    a\n\n  b\n''", r#""  a\n\nb\n""#);
    ok("''\n  a\n  ''", r#""a\n""#);
    ok("''\n  a\n  b''", r#""a\nb""#);
    ok("''\n  a\n   ''", r#""a\n""#);
    ok("''a''\\nb''", r#""a\nb""#);
    ok("''a'''b''", r#""a''b""#);
    ok("''a''$b''", r#""a$b""#);
    ok("''a''${b}''", r#""a${b}""#);
    ok("''''\\t''", r#""\t""#);
    ok("''''\\x''", r#""x""#);
    ok("''$${x}''", r#""$${x}""#);
    ok("''a$''", r#""a$""#);
    ok("''a'b''", r#""a'b""#);
    ok("''$'x''", r#""$'x""#);
    ok("''a'$b''", r#""a'$b""#);
    ok("''\\x''", r#""\\x""#);
    ok("''\"''", r#""\"""#);
    // Interpolations and escapes count as content for the indentation.
    ok("''\n  ${x}\n    a\n''", r#""${x}\n  a\n""#);
    ok("''\n    a\n  ''\\n''", r#""  a\n\n""#);
    ok("''\n  a ${x} b\n    c\n''", r#""a ${x} b\n  c\n""#);
    // An escaped space at the start of a line is stripped like indentation.
    ok("''\n  a\n ''\\ b\n''", r#"" a\n b\n""#);
    // The first line is dropped only if it holds spaces only (no tabs).
    ok("''\t\n  a\n''", r#""\t\n  a\n""#);
    ok("''  \n  a\n''", r#""a\n""#);
    // The last line is kept when it has content, dropped when only spaces.
    ok("''\n  a\n  b ''", r#""a\nb ""#);
    ok("''\n  a\n  ${x}  ''", r#""a\n${x}  ""#);
    assert_eq!(err("x ''abc", "unterminated indented string"), (2, 4));
    err("''abc'", "unterminated indented string");
    err("''abc$", "unterminated indented string");
    // `a''` is an identifier.
    err("''${a''", "unexpected end of file, expected '}'");
    err("''${a}", "unterminated indented string");
}

#[test]
fn paths() {
    ok("./a", r#"(rel "./a")"#);
    ok("../a/b.nix", r#"(rel "../a/b.nix")"#);
    ok("a/b", r#"(rel "a/b")"#);
    ok("a-b_c+d.e/f", r#"(rel "a-b_c+d.e/f")"#);
    ok("1/2", r#"(rel "1/2")"#);
    ok("1 / 2", "(/ 1 2)");
    ok("a//b", "(// a b)");
    ok("/x/y", r#"(abs "/x/y")"#);
    ok("~/x", r#"(home "~/x")"#);
    ok("./a/${b}/c", r#"(rel "./a/${b}/c")"#);
    ok("./${b}", r#"(rel "./${b}")"#);
    ok("/${b}", r#"(abs "/${b}")"#);
    ok("~/${b}.nix", r#"(home "~/${b}.nix")"#);
    ok("a/${b}", r#"(rel "a/${b}")"#);
    ok("./a${b}", r#"(rel "./a${b}")"#);
    ok("./a/${b}${c}d", r#"(rel "./a/${b}${c}d")"#);
    ok("./a//${b}", r#"(rel "./a//${b}")"#);
    ok("./a/${b}//c", r#"(rel "./a/${b}//c")"#);
    ok("[./a ./b]", r#"[(rel "./a") (rel "./b")]"#);
    ok("x: ./a", r#"(fn x (rel "./a"))"#);
    err("./a.nix:b", "unexpected ':', expected end of file");
    assert_eq!(err("./a/", "path has a trailing slash"), (4, 4));
    err("./a/${b}/", "path has a trailing slash");
    err("/nix/store/\n", "path has a trailing slash");
    err("~/a/ x", "path has a trailing slash");
    err("./a//b", "unexpected '/' in path");
    err("./a///${b}", "unexpected '/' in path");
    err("./${b", "expected '}'");
    err("~", "unexpected '~'");
}

#[test]
fn search_paths_and_uris() {
    ok("<nixpkgs>", "<nixpkgs>");
    ok("<nixpkgs/lib>", "<nixpkgs/lib>");
    ok("import <nixpkgs> {}", "(@ (@ import <nixpkgs>) {})");
    ok("a <b> c", "(@ (@ a <b>) c)");
    ok("a<b", "(< a b)");
    ok("a < b", "(< a b)");
    ok("a <= b", "(<= a b)");
    ok(
        "http://example.org/x?y=1&z=%20",
        "(uri http://example.org/x?y=1&z=%20)",
    );
    ok(
        "git+ssh://git@github.com:a/b.git",
        "(uri git+ssh://git@github.com:a/b.git)",
    );
    ok("x:x", "(uri x:x)");
    ok("x: x", "(fn x x)");
    ok(
        "[ mirror://gnu/hello.tar.gz ]",
        "[(uri mirror://gnu/hello.tar.gz)]",
    );
    err("{ inherit http://x; }", "unexpected URI");
}

#[test]
fn attribute_sets() {
    ok("{ }", "{}");
    ok("{}", "{}");
    ok("{ a = 1; }", "{a=1;}");
    ok("rec { a = 1; b = a; }", "rec{a=1;b=a;}");
    ok("{ a.b.\"c\".${d} = e; }", "{a.b.c.${d}=e;}");
    ok("{ \"${x}\" = 1; }", "{${\"${x}\"}=1;}");
    ok("{ ${\"a\"} = 1; }", "{a=1;}");
    ok("{ \"a b\" = 1; or = 2; }", "{a b=1;or=2;}");
    ok(
        "{ inherit a \"b\"; inherit (e) c or; }",
        "{inherit a b;inherit (e) c or;}",
    );
    ok("{ inherit; inherit (x); }", "{inherit;inherit (x);}");
    ok("{ inherit ${\"a\"}; }", "{inherit a;}");
    ok(
        "{ a = x: x; b = if c then d else e; }",
        "{a=(fn x x);b=(if c d e);}",
    );
    ok("{ a = 1; a = 2; }", "{a=1;a=2;}");
    ok("let { body = 1; }", "let{body=1;}");
    ok("let a = 1; in a", "(let {a=1;} a)");
    ok("let in a", "(let {} a)");
    ok("let a.${b} = 1; in a", "(let {a.${b}=1;} a)");
    ok("let ${\"a\"} = 1; in a", "(let {a=1;} a)");
    ok("f let { a = 1; }", "(@ f let{a=1;})");
    assert_eq!(
        err(
            "let ${a} = 1; in a",
            "dynamic attributes not allowed in let"
        ),
        (0, 7)
    );
    err(
        "let \"${a}\" = 1; in a",
        "dynamic attributes not allowed in let",
    );
    assert_eq!(
        err(
            "{ inherit (a) ${b}; }",
            "dynamic attributes not allowed in inherit"
        ),
        (14, 18)
    );
    err(
        "{ inherit \"${b}\"; }",
        "dynamic attributes not allowed in inherit",
    );
    assert_eq!(
        err("{ a = 1;", "unexpected end of file, expected '}'"),
        (8, 8)
    );
    err("{ a = 1 }", "unexpected '}', expected ';'");
    err("{ a ... }", "unexpected '...', expected '.' or '='");
    err("{ 1 = x; }", "unexpected integer '1'");
    err("{ 1.5 = x; }", "unexpected floating-point literal '1.5'");
    err(
        "let a = 1; a",
        "unexpected end of file, expected '.' or '='",
    );
    err("let a = 1; in", "unexpected end of file");
    err("f let a = 1; in a", "expected '{'");
    err("rec a", "unexpected identifier 'a', expected '{'");
}

#[test]
fn lambdas() {
    ok("x: y: x", "(fn x (fn y x))");
    ok("{ a, b ? 1, ... }: a", "(fn {a b?1 ...} a)");
    ok("args@{ a }: a", "(fn {a}@args a)");
    ok("{ a }@args: a", "(fn {a}@args a)");
    ok("{ a } @ args : a", "(fn {a}@args a)");
    ok("{}: 1", "(fn {} 1)");
    ok("{ }@a: 1", "(fn {}@a 1)");
    ok("{ ... }: 1", "(fn {...} 1)");
    ok("{ a, }: a", "(fn {a} a)");
    ok("{ a ? x: x, b }: a", "(fn {a?(fn x x) b} a)");
    ok("{ a ? { }, b ? {a=1;} }: a", "(fn {a?{} b?{a=1;}} a)");
    ok("x: { a = x; }", "(fn x {a=x;})");
    ok("with a; b", "(with a b)");
    ok("assert a; b", "(assert a b)");
    ok("with a; x: assert x; x", "(with a (fn x (assert x x)))");
    ok("if a then b else c", "(if a b c)");
    ok("if a then b else x: x", "(if a b (fn x x))");
    ok("if a then if b then c else d else e", "(if a (if b c d) e)");
    ok("f (x: x)", "(@ f (fn x x))");
    assert_eq!(
        err("{x, y, x}: x", "duplicate formal function argument 'x'"),
        (7, 8)
    );
    err("{b, a, b, a}: x", "duplicate formal function argument 'b'");
    assert_eq!(
        err(
            "args@{args, x}: x",
            "duplicate formal function argument 'args'"
        )
        .0,
        0
    );
    err("{ a }@a: a", "duplicate formal function argument 'a'");
    err(
        "{x, y : [\"baz\"]}: x",
        "unexpected ':', expected ',' or '}'",
    );
    err("{ a, ..., }: a", "unexpected ',', expected '}'");
    err("{ ..., a }: a", "expected '}'");
    err("{ , }: 1", "unexpected ','");
    err("{ a }", "expected ':' or '@'");
    err("{ a }@b", "expected ':'");
    err("x@y: 1", "unexpected identifier 'y', expected '{'");
    err("1 + x: x", "unexpected ':'");
    err("1 + if a then b else c", "unexpected 'if'");
    err("if 1 else", "unexpected 'else', expected 'then'");
    err("if then", "unexpected 'then'");
    err("map x: x", "unexpected ':'");
}

#[test]
fn comments_and_whitespace() {
    ok("/* a */ 1 # b\n", "1");
    ok("1 # comment", "1");
    ok("# x\r1", "1");
    ok("\t1\r\n+\n2 ", "(+ 1 2)");
    ok("1/**/+/***/2", "(+ 1 2)");
    ok("/* a * / b **/ 1", "1");
    ok("a /*x*/ b", "(@ a b)");
    assert_eq!(err("1 /* unterminated", "unterminated comment"), (2, 4));
    err("/*/ 1", "unterminated comment");
}

#[test]
fn errors() {
    assert_eq!(err("}", "unexpected '}'"), (0, 1));
    assert_eq!(parse("}").unwrap_err().message, "unexpected '}'");
    assert_eq!(
        parse("{ a = 1;").unwrap_err().message,
        "unexpected end of file, expected '}'"
    );
    assert_eq!(parse("\"abc").unwrap_err().message, "unterminated string");
    assert_eq!(err("&& true", "unexpected '&&'"), (0, 2));
    err("++ []", "unexpected '++'");
    err("// 1", "unexpected '//'");
    err("-> x", "unexpected '->'");
    err("|| true", "unexpected '||'");
    assert_eq!(err("1 != != 2", "unexpected '!='"), (5, 7));
    assert_eq!(
        err(
            "123 é 4",
            "unexpected invalid character 'é', expected end of file"
        ),
        (4, 6)
    );
    assert_eq!(err("(\n# no content\n", "unexpected end of file"), (15, 15));
    err("", "unexpected end of file");
    err("(1", "unexpected end of file, expected ')'");
    err("((1)", "unexpected end of file, expected ')'");
    err("[1 2", "unexpected end of file, expected ']'");
    err("[1 + 2]", "unexpected '+', expected ']'");
    err("a b c )", "unexpected ')', expected end of file");
    err("1 +", "unexpected end of file");
    err("a 1\"$", "unterminated string");
    err("${a}", "unexpected '${'");
    err("a.${b", "expected '}'");
    err("`", "unexpected '`'");
    err("\u{7}", "invalid character U+0007");
}

#[test]
fn spans() {
    let e = parse("1 + 2 * 3").unwrap();
    assert_eq!(e.span, Span::new(0, 9));
    let ExprKind::Binary { rhs, .. } = &e.kind else {
        panic!()
    };
    assert_eq!(rhs.span, Span::new(4, 9));

    let e = parse("(a).b").unwrap();
    assert_eq!(e.span, Span::new(0, 5));
    let ExprKind::Select { expr, path, .. } = &e.kind else {
        panic!()
    };
    assert_eq!(expr.span, Span::new(1, 2));
    assert_eq!(path[0].span(), Span::new(4, 5));

    let e = parse(" f (x) ").unwrap();
    assert_eq!(e.span, Span::new(1, 6));

    let e = parse("(x: x)").unwrap();
    assert_eq!(e.span, Span::new(1, 5));

    let e = parse("{ a.\"b\" = 1; inherit c; }").unwrap();
    let ExprKind::Attrs { bindings, .. } = &e.kind else {
        panic!()
    };
    let Binding::Attr { path, value, span } = &bindings[0] else {
        panic!()
    };
    assert_eq!(
        (path[0].span(), path[1].span()),
        (Span::new(2, 3), Span::new(4, 7))
    );
    assert_eq!((value.span, *span), (Span::new(10, 11), Span::new(2, 12)));
    let Binding::Inherit { names, span, .. } = &bindings[1] else {
        panic!()
    };
    assert_eq!((names[0].1, *span), (Span::new(21, 22), Span::new(13, 23)));

    let e = parse("{ a, b ? 1 }@c: a").unwrap();
    let ExprKind::Lambda {
        param: Param::Formals { formals, at, .. },
        ..
    } = &e.kind
    else {
        panic!()
    };
    assert_eq!(formals[1].span, Span::new(5, 6));
    assert_eq!(at.as_ref().unwrap().1, Span::new(13, 14));

    let e = parse("\"a${b}\"").unwrap();
    let ExprKind::Str(parts) = &e.kind else {
        panic!()
    };
    let StrPart::Interp(b) = &parts[1] else {
        panic!()
    };
    assert_eq!((e.span, b.span), (Span::new(0, 7), Span::new(4, 5)));

    let e = parse("a.b or c").unwrap();
    assert_eq!(e.span, Span::new(0, 8));
    let e = parse("f or").unwrap();
    let ExprKind::Apply { arg, .. } = &e.kind else {
        panic!()
    };
    assert_eq!(arg.span, Span::new(2, 4));
    assert_eq!(show(&e), "(@ f or)");
}
