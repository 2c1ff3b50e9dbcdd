//! `rocmx store …`: dispatch to the store subcommands.
//!
//! `nar.rs` owns the commands that work on any path or archive (dump, restore,
//! ls, cat); `local.rs` owns those that change or check the local store (add,
//! gc, delete, verify); `add_fixed.rs` and `prefetch.rs` seed fixed-output objects from a
//! file or a URL.

mod add_fixed;
mod local;
mod nar;
mod prefetch;

use clap::{Args, Subcommand};

use super::StoreOpt;

#[derive(Args, Debug)]
pub struct StoreArgs {
    #[command(subcommand)]
    cmd: StoreCmd,
}

#[derive(Subcommand, Debug)]
enum StoreCmd {
    /// Copy files or trees into the store and print their store paths.
    Add(local::AddArgs),
    /// Add files (or trees, with --recursive) as fixed-output objects and print their store
    /// paths, as nix-store --add-fixed.
    AddFixed(add_fixed::AddFixedArgs),
    /// Download a URL into the store as a fixed-output object and print its hash, as
    /// nix-prefetch-url.
    Prefetch(prefetch::PrefetchArgs),
    /// Write the NAR serialisation of a path (in the store or not) to stdout.
    Dump(nar::DumpArgs),
    /// Unpack a NAR from stdin into DEST.
    Restore(nar::RestoreArgs),
    /// List a path (in the store or not).
    Ls(nar::LsArgs),
    /// Print the contents of a file.
    Cat(nar::CatArgs),
    /// Delete unreachable store paths.
    Gc(local::GcArgs),
    /// Delete specific store paths, refusing those still referenced or rooted.
    Delete(local::DeleteArgs),
    /// Check that the database and the filesystem agree (and hashes, with --check-contents).
    Verify(local::VerifyArgs),
}

pub fn run(args: StoreArgs, store: &StoreOpt) -> i32 {
    match args.cmd {
        StoreCmd::Add(a) => local::add(a, store),
        StoreCmd::AddFixed(a) => add_fixed::add_fixed(a, store),
        StoreCmd::Prefetch(a) => prefetch::prefetch(a, store),
        StoreCmd::Dump(a) => nar::dump(a, store),
        StoreCmd::Restore(a) => nar::restore(a),
        StoreCmd::Ls(a) => nar::ls(a, store),
        StoreCmd::Cat(a) => nar::cat(a, store),
        StoreCmd::Gc(a) => local::gc(a, store),
        StoreCmd::Delete(a) => local::delete(a, store),
        StoreCmd::Verify(a) => local::verify(a, store),
    }
}
