//! The evaluation options every evaluating command shares (`eval`, `build`, `repl`,
//! `verify`, `challenge`, `licenses`, `graph`): one clap group flattened into each,
//! turned into [`EvalSettings`] in one place, so that no command silently ignores one.
//!
//! Owns: `--arg`/`--argstr`, `-I`/`ROCMX_PATH`/`NIX_PATH` (parsed as Nix parses
//! them: `NAME=PATH` or `PATH`), `--max-call-depth`, `--show-trace`,
//! `--extra-experimental-features`, the `--lint-*` levels, the evaluation settings
//! of `rocmx.conf` and `--option` (`abort-on-warn`, `restrict-eval`,
//! `allow-import-from-derivation`, `max-call-depth`), and file arguments written
//! `<NAME>` (looked up in the search path, as `nix-instantiate '<nixpkgs>'` does).
//!
//! Must not: evaluate anything but a `<NAME>` lookup, or know which command it
//! serves.

use std::path::{Path, PathBuf};

use clap::Args;
use rocmx_lang::eval::compile::{LintLevel, Lints};
use rocmx_lang::eval::EResult;
use rocmx_lang::{EvalSettings, Evaluator};

/// `--max-call-depth` when neither the flag nor a setting gives it.
const DEFAULT_MAX_CALL_DEPTH: usize = 20_000;

#[derive(Args, Debug, Clone, Default)]
pub(crate) struct EvalOpts {
    /// Pass NAME = EXPR to a top-level function with formals.
    #[arg(long = "arg", num_args = 2, value_names = ["NAME", "EXPR"], action = clap::ArgAction::Append)]
    pub(crate) arg: Vec<String>,
    /// Pass NAME = "STR" to a top-level function with formals.
    #[arg(long = "argstr", num_args = 2, value_names = ["NAME", "STR"], action = clap::ArgAction::Append)]
    pub(crate) argstr: Vec<String>,
    /// Add a search path entry: DIR or NAME=DIR (used by `<NAME>`, also as a file argument).
    #[arg(short = 'I', long = "include", value_name = "PATH")]
    pub(crate) include: Vec<String>,
    /// Maximum depth of nested function calls before evaluation stops [default: 20000,
    /// or the `max-call-depth` setting].
    #[arg(long, value_name = "N")]
    pub(crate) max_call_depth: Option<usize>,
    /// Show the chain of "while evaluating" frames on evaluation errors.
    #[arg(long)]
    pub(crate) show_trace: bool,
    /// Enable experimental language features (e.g. `parse-toml-timestamps`).
    #[arg(long = "extra-experimental-features", value_name = "FEATURES")]
    pub(crate) experimental: Vec<String>,
    /// How to treat URL literals: `warn`, `fatal` or `ignore`.
    #[arg(long, value_name = "LEVEL")]
    pub(crate) lint_url_literals: Option<String>,
    /// How to treat path literals without `./`: `warn`, `fatal` or `ignore`.
    #[arg(long, value_name = "LEVEL")]
    pub(crate) lint_short_path_literals: Option<String>,
    /// How to treat absolute path literals: `warn`, `fatal` or `ignore`.
    #[arg(long, value_name = "LEVEL")]
    pub(crate) lint_absolute_path_literals: Option<String>,
}

fn lint_level(s: &Option<String>) -> Result<LintLevel, String> {
    match s.as_deref() {
        None | Some("ignore") | Some("off") => Ok(LintLevel::Off),
        Some("warn") => Ok(LintLevel::Warn),
        Some("fatal") => Ok(LintLevel::Fatal),
        Some(other) => Err(format!(
            "invalid lint level '{other}'; expected 'warn', 'fatal' or 'ignore'"
        )),
    }
}

/// One `-I` / `NIX_PATH` entry: `NAME=PATH` or `PATH` (an empty prefix).
pub(crate) fn search_entry(s: &str) -> (String, String) {
    match s.split_once('=') {
        Some((prefix, path)) if !prefix.contains('/') => (prefix.to_string(), path.to_string()),
        _ => (String::new(), s.to_string()),
    }
}

impl EvalOpts {
    /// The search path: `-I` entries, then `ROCMX_PATH`, then `NIX_PATH`.
    pub(crate) fn search_path(&self) -> Vec<(String, String)> {
        let mut path: Vec<(String, String)> =
            self.include.iter().map(|s| search_entry(s)).collect();
        for var in ["ROCMX_PATH", "NIX_PATH"] {
            if let Ok(v) = std::env::var(var) {
                path.extend(v.split(':').filter(|s| !s.is_empty()).map(search_entry));
            }
        }
        path
    }

    /// The evaluator's settings: these flags over the settings of `rocmx.conf` and
    /// `--option`. An error is the user's (a bad level, a bad setting value).
    pub(crate) fn settings(&self) -> Result<EvalSettings, String> {
        let cfg = crate::config::read()?;
        let max_call_depth = match (self.max_call_depth, cfg.value("max-call-depth")) {
            (Some(n), _) => n,
            (None, Some(v)) => v
                .parse()
                .map_err(|_| format!("max-call-depth: '{v}' is not a number"))?,
            (None, None) => DEFAULT_MAX_CALL_DEPTH,
        };
        Ok(EvalSettings {
            search_path: self.search_path(),
            max_call_depth,
            lints: Lints {
                url_literals: lint_level(&self.lint_url_literals)?,
                short_path_literals: lint_level(&self.lint_short_path_literals)?,
                absolute_path_literals: lint_level(&self.lint_absolute_path_literals)?,
            },
            experimental_features: self
                .experimental
                .iter()
                .flat_map(|s| s.split_whitespace().map(str::to_string))
                .collect(),
            abort_on_warn: cfg.flag("abort-on-warn", false)?,
            restrict_eval: cfg.flag("restrict-eval", false)?,
            allow_import_from_derivation: cfg.flag("allow-import-from-derivation", true)?,
            ..EvalSettings::default()
        })
    }
}

/// A file argument: `<NAME>` or `<NAME/REST>` is looked up in the search path (an
/// error names what was not found, as `<NAME>` in an expression does); anything else
/// is a path relative to `base`.
pub(crate) fn file_arg(ev: &mut Evaluator, arg: &str, base: &Path) -> EResult<PathBuf> {
    if arg.len() > 2 && arg.starts_with('<') && arg.ends_with('>') {
        let v = ev.eval_string(arg, base)?;
        return ev.coerce_to_path(&v);
    }
    let path = super::common::absolute(Path::new(arg), base);
    Ok(rocmx_lang::eval::compile::canon_path(
        &path.to_string_lossy(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn search_entries_are_parsed_as_nix_parses_them() {
        assert_eq!(
            search_entry("nixpkgs=/a/b"),
            ("nixpkgs".into(), "/a/b".into())
        );
        assert_eq!(search_entry("/a/b"), (String::new(), "/a/b".into()));
        // An `=` after a slash is part of the path.
        assert_eq!(search_entry("/a=b/c"), (String::new(), "/a=b/c".into()));
    }

    #[test]
    fn bad_lint_levels_are_named() {
        let o = EvalOpts {
            lint_url_literals: Some("loud".into()),
            ..EvalOpts::default()
        };
        let e = o.settings().unwrap_err();
        assert!(e.contains("invalid lint level 'loud'"), "{e}");
    }
}
