//! One module per subcommand. Each parses nothing itself (clap did) and renders
//! library results for the terminal. What several commands share is in `common.rs`
//! (helpers) and `fail.rs` (the one failure type); a command imports from another
//! command's module only to run that command's work (`build`'s evaluation and
//! realisation, for `challenge`, `verify` and `repl`'s `:b`).

pub mod build;
pub mod build_remote;
pub mod challenge;
pub(crate) mod common;
pub mod copy;
pub mod debian;
pub mod derivation;
pub mod diff;
pub mod eval;
pub(crate) mod evalopts;
pub(crate) mod fail;
pub mod flake;
pub mod gfx;
pub mod graph;
pub mod hash;
pub mod key;
pub mod licenses;
pub mod log;
pub mod packages;
pub mod path_info;
pub mod progress;
pub mod repl;
pub mod serve;
pub mod store;
pub mod verify;
pub mod why_depends;

use std::path::PathBuf;

/// The global `--store DIR` / `ROCMX_STORE` option.
#[derive(Clone, Debug, Default)]
pub struct StoreOpt {
    /// The physical root, when given; `None` means the default location.
    pub root: Option<PathBuf>,
}
pub(crate) use common::checkpoint_stores;
