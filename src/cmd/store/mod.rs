//! `rocmx store …`: dispatch to the store subcommands.
//!
//! `nar.rs` owns the commands that work on any path or archive (dump, restore,
//! ls, cat); `local.rs` owns those that change or check the local store (add,
//! gc, delete, verify).

mod local;
pub(crate) mod nar;

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
        StoreCmd::Dump(a) => nar::dump(a, store),
        StoreCmd::Restore(a) => nar::restore(a),
        StoreCmd::Ls(a) => nar::ls(a, store),
        StoreCmd::Cat(a) => nar::cat(a, store),
        StoreCmd::Gc(a) => local::gc(a, store),
        StoreCmd::Delete(a) => local::delete(a, store),
        StoreCmd::Verify(a) => local::verify(a, store),
    }
}
