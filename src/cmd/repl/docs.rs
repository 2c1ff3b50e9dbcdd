//! `rocmx repl`'s `:doc`: finding and rendering the documentation of builtins.
//!
//! The documentation itself is the evaluator's (`rocmx_lang::builtins::docs`):
//! each primop's table entry carries its arguments' names and one line in Nix's
//! words, and the other values of the `builtins` set have theirs next to them.
//! This module only accepts the spellings `map`, `builtins.map` and `__map` and
//! renders an entry as Nix's `:doc` does. `docs_cover_every_builtin` (in
//! `tests/repl.rs`) checks that every name of the `builtins` set has an entry.

use rocmx_lang::builtins::BuiltinDoc;

/// The names of every documented builtin (`map`, `true`, …).
pub(crate) fn names() -> impl Iterator<Item = &'static str> {
    rocmx_lang::builtins::docs().map(|d| d.name)
}

/// The entry of builtin `name` (`map`, `builtins.map` and `__map` alike).
pub(crate) fn lookup(name: &str) -> Option<BuiltinDoc> {
    let name = name.trim();
    let name = name.strip_prefix("builtins.").unwrap_or(name);
    let name = name.strip_prefix("__").unwrap_or(name);
    rocmx_lang::builtins::doc(name)
}

/// `:doc`'s text for an entry.
pub(crate) fn render(entry: BuiltinDoc) -> String {
    let synopsis = if entry.args.is_empty() {
        format!("builtins.{}", entry.name)
    } else {
        format!("builtins.{} {}", entry.name, entry.args)
    };
    format!("Synopsis: {synopsis}\n\n    {}\n", entry.doc)
}

#[cfg(test)]
mod tests {
    #[test]
    fn lookup_forms() {
        for n in ["map", "builtins.map", "__map"] {
            assert_eq!(super::lookup(n).map(|e| e.name), Some("map"));
        }
        assert!(super::lookup("nope").is_none());
    }

    #[test]
    fn rendering() {
        let map = super::lookup("map").expect("map is documented");
        assert!(super::render(map).starts_with("Synopsis: builtins.map f list\n\n    "));
        let t = super::lookup("true").expect("true is documented");
        assert!(super::render(t).starts_with("Synopsis: builtins.true\n\n    "));
    }
}
