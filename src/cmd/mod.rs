//! One module per subcommand. Each parses nothing itself (clap did) and renders
//! library results for the terminal.

pub mod eval;
