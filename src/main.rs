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
//! | 130  | interrupted by Ctrl-C (143 SIGTERM, 129 SIGHUP)          |
//!
//! `build` and the commands that build (`verify`, `challenge`) add Nix's build-failure
//! codes (100–111, see `cmd::build`).

// No unsafe code here: what needs it (the sandbox) lives in rocmx-builder.
#![forbid(unsafe_code)]

mod challenge;
mod cmd;
mod config;
mod evalstore;
mod fetcher;
mod flake;
mod gfx;
mod interrupt;
mod quorum;
mod slurm;
mod substitute;
mod unpack_debs;

/// The evaluator allocates many small, short-lived objects from a worker
/// thread; glibc's per-thread arenas grow through `mprotect` one step at a time,
/// which cost a quarter of evaluation time. mimalloc does not. It replaces
/// `malloc` itself (its `override` feature) rather than being the global
/// allocator: Rust's `System` allocator calls plain `malloc` for the usual
/// alignments, mimalloc's fastest path, where `MiMalloc` always took the
/// aligned-allocation path (5 % of an evaluation's instructions).
use mimalloc as _;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "rocmx",
    version,
    about = "Builds the ROCm stack from Nix-language descriptions into a content-addressed store"
)]
struct Cli {
    /// Physical root of the store (default: /rocmx when writable, else
    /// $XDG_DATA_HOME/rocmx). Store paths keep their logical /rocmx/store form.
    #[arg(long = "store", global = true, env = "ROCMX_STORE", value_name = "DIR")]
    store: Option<std::path::PathBuf>,
    /// Set a setting of rocmx.conf for this command, on every command
    /// (`--option max-build-processes 512`, `--option abort-on-warn true`,
    /// `--option trusted-public-keys 'NAME:BASE64'`, …); may be repeated.
    #[arg(long = "option", global = true, num_args = 2, value_names = ["NAME", "VALUE"], action = clap::ArgAction::Append)]
    option: Vec<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Evaluate an expression or file and print the result (like `nix-instantiate --eval`).
    Eval(cmd::eval::EvalArgs),
    /// An interactive evaluator (like `nix repl`): `rocmx repl [FILE | FLAKEREF]`.
    Repl(cmd::repl::ReplArgs),
    /// Work with the store: add, dump, restore, ls, cat, gc, delete, verify.
    Store(cmd::store::StoreArgs),
    /// Show metadata of store paths: NAR hash and size, references, closure size.
    PathInfo(cmd::path_info::PathInfoArgs),
    /// Hash a path (as a NAR) or a file.
    Hash(cmd::hash::HashArgs),
    /// Show why a store path depends on another (the chain of references).
    WhyDepends(cmd::why_depends::WhyDependsArgs),
    /// Evaluate, then build the derivations found and link their outputs (`result`).
    Build(cmd::build::BuildArgs),
    /// Build one resolved derivation from a binary cache and push the outputs back:
    /// what the Slurm jobs of `rocmx build --builders slurm` run.
    BuildRemote(cmd::build_remote::BuildRemoteArgs),
    /// Print the stored build log of a derivation or of an output path.
    Log(cmd::log::LogArgs),
    /// Work with derivations: `show` prints them as JSON.
    Derivation(cmd::derivation::DerivationArgs),
    /// Work with flakes: lock, update, show, metadata.
    Flake(cmd::flake::FlakeArgs),
    /// List the licence of every package in an installable's build closure.
    Licenses(cmd::licenses::LicensesArgs),
    /// Draw an installable's build closure: Graphviz dot (default), SVG or JSON.
    Graph(cmd::graph::GraphArgs),
    /// GPU targets: `list` the known ones, `detect` the machine's, `resolve` a `--gfx` value.
    Gfx(cmd::gfx::GfxArgs),
    /// Debian packages: `lock` pins a suite's packages (with dependencies) for a build root.
    Debian(cmd::debian::DebianArgs),
    /// Copy closures to (`--to URL`) or from (`--from URL`) a binary cache (file:///DIR, http(s)://HOST/PREFIX).
    Copy(cmd::copy::CopyArgs),
    /// Signing keys for binary caches: `generate NAME --secret-key-file PATH`.
    Key(cmd::key::KeyArgs),
    /// Serve the local store as a binary cache over HTTP (read-only, or `--writable` with a token).
    Serve(cmd::serve::ServeArgs),
    /// Compare the outputs realised here with what binary caches serve for the same derivations.
    Challenge(cmd::challenge::ChallengeArgs),
    /// Rebuild a closure under variations of the build environment (time, umask, user,
    /// …) and report which outputs are not reproducible, and why.
    Verify(cmd::verify::VerifyArgs),
    /// Compare two store paths (or trees) file by file, then with diffoscope when installed.
    Diff(cmd::diff::DiffArgs),
}

/// Stack for the thread that does the work. Evaluation grows its own stack on
/// the heap as it recurses, but freeing a deeply nested value (a 100,000-long
/// linked list of sets, say) recurses natively; a large, lazily committed stack
/// keeps that safe.
const WORKER_STACK: usize = 1 << 30;

fn main() {
    let cli = Cli::parse();
    // Commands that may run sandboxed builds: the zygote that makes their sandboxes is
    // forked now, while this process is small and has no other thread (see
    // `rocmx_builder::sandbox::zygote`).
    if matches!(
        cli.command,
        Command::Build(_)
            | Command::BuildRemote(_)
            | Command::Challenge(_)
            | Command::Verify(_)
            | Command::Repl(_)
    ) {
        rocmx_builder::sandbox::zygote::start();
    }
    if let Err(e) = config::set_command_line(cli.option.clone()) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
    // The repl's line editor and `serve` handle Ctrl-C themselves.
    if !matches!(cli.command, Command::Repl(_) | Command::Serve(_)) {
        interrupt::install();
    }
    let worker = std::thread::Builder::new()
        .name("rocmx".into())
        .stack_size(WORKER_STACK)
        .spawn(move || {
            let store = cmd::StoreOpt { root: cli.store };
            let code = match cli.command {
                Command::Eval(args) => cmd::eval::run(args, &store),
                Command::Repl(args) => cmd::repl::run(args, &store),
                Command::Store(args) => cmd::store::run(args, &store),
                Command::PathInfo(args) => cmd::path_info::run(args, &store),
                Command::Hash(args) => cmd::hash::run(args, &store),
                Command::WhyDepends(args) => cmd::why_depends::run(args, &store),
                Command::Build(args) => cmd::build::run(args, &store),
                Command::BuildRemote(args) => cmd::build_remote::run(args, &store),
                Command::Log(args) => cmd::log::run(args, &store),
                Command::Derivation(args) => cmd::derivation::run(args, &store),
                Command::Flake(args) => cmd::flake::run(args, &store),
                Command::Licenses(args) => cmd::licenses::run(args, &store),
                Command::Graph(args) => cmd::graph::run(args, &store),
                Command::Gfx(args) => cmd::gfx::run(args),
                Command::Debian(args) => cmd::debian::run(args),
                Command::Copy(args) => cmd::copy::run(args, &store),
                Command::Key(args) => cmd::key::run(args),
                Command::Serve(args) => cmd::serve::run(args, &store),
                Command::Challenge(args) => cmd::challenge::run(args, &store),
                Command::Verify(args) => cmd::verify::run(args, &store),
                Command::Diff(args) => cmd::diff::run(args, &store),
            };
            cmd::checkpoint_stores();
            code
        });
    let code = match worker.map(|h| h.join()) {
        Ok(Ok(code)) => code,
        Ok(Err(_)) => 101, // the panic message was already printed
        Err(e) => {
            eprintln!("error: cannot start the worker thread: {e}");
            1
        }
    };
    std::process::exit(code);
}
