//! rocmx-lang: the Nix expression language for rocmx.
//!
//! Owns the whole pipeline from source text to values: [`syntax`] (nom parser,
//! AST with byte spans), [`eval`] (lowering to IR, the lazy evaluator, errors and
//! their rendering), [`value`] (runtime values and their printing), [`builtins`]
//! (the primops) and [`store`] (the narrow trait through which evaluation writes
//! store objects).
//!
//! Must not: run builds, open the store database, or parse command lines. It uses
//! `rocmx-store` only for formats (hashes, store paths, NAR, derivations).

// No unsafe code here: what needs it (the sandbox) lives in rocmx-builder.
#![forbid(unsafe_code)]

pub mod builtins;
pub mod eval;
pub mod flake;
pub mod store;
pub mod sym;
pub mod syntax;
pub mod value;

pub use eval::{EResult, EvalError, EvalSettings, Evaluator};
pub use value::Value;
