//! The `rocmx` binary: command-line parsing and rendering, nothing else.
//!
//! Each subcommand lives in `cmd/` and calls into the library crates
//! (`rocmx-lang`, `rocmx-store`, `rocmx-builder`). This file owns the top-level
//! argument grammar and the exit codes:
//!
//! | code | meaning                                                  |
//! |------|----------------------------------------------------------|
//! | 0    | success                                                  |
//! | 1    | the request failed (evaluation error, bad input, …)      |
//! | 2    | the command line itself is wrong (usage error)           |

mod cmd;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "rocmx",
    version,
    about = "Builds the ROCm stack from Nix-language descriptions into a content-addressed store"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Evaluate an expression or file and print the result (like `nix-instantiate --eval`).
    Eval(cmd::eval::EvalArgs),
}

fn main() {
    let cli = Cli::parse();
    let code = match cli.command {
        Command::Eval(args) => cmd::eval::run(args),
    };
    std::process::exit(code);
}
