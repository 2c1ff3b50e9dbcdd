//! `rocmx store dump|restore|ls|cat` (being written).

use clap::Args;

use crate::cmd::StoreOpt;

#[derive(Args, Debug)]
pub struct DumpArgs {
    pub path: std::path::PathBuf,
}
#[derive(Args, Debug)]
pub struct RestoreArgs {
    pub dest: std::path::PathBuf,
}
#[derive(Args, Debug)]
pub struct LsArgs {
    pub path: std::path::PathBuf,
}
#[derive(Args, Debug)]
pub struct CatArgs {
    pub path: std::path::PathBuf,
}

pub fn dump(_a: DumpArgs, _s: &StoreOpt) -> i32 {
    eprintln!("error: not implemented yet");
    1
}
pub fn restore(_a: RestoreArgs) -> i32 {
    eprintln!("error: not implemented yet");
    1
}
pub fn ls(_a: LsArgs, _s: &StoreOpt) -> i32 {
    eprintln!("error: not implemented yet");
    1
}
pub fn cat(_a: CatArgs, _s: &StoreOpt) -> i32 {
    eprintln!("error: not implemented yet");
    1
}
