//! Source text to AST: the lexer-free nom parser and its error type.
//!
//! Owns turning bytes into [`ast::Expr`] with spans, with Nix's exact string
//! escaping and indentation rules. It must not evaluate anything.

pub mod ast;
pub mod parser;

pub use parser::{parse, ParseError, ParseErrorKind};
