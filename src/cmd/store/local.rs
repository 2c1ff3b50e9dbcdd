//! `rocmx store add|gc|delete|verify` (being written).

use clap::Args;

use crate::cmd::StoreOpt;

#[derive(Args, Debug)]
pub struct AddArgs {
    pub paths: Vec<std::path::PathBuf>,
}
#[derive(Args, Debug)]
pub struct GcArgs {}
#[derive(Args, Debug)]
pub struct DeleteArgs {
    pub paths: Vec<String>,
}
#[derive(Args, Debug)]
pub struct VerifyArgs {}

pub fn add(_a: AddArgs, _s: &StoreOpt) -> i32 {
    eprintln!("error: not implemented yet");
    1
}
pub fn gc(_a: GcArgs, _s: &StoreOpt) -> i32 {
    eprintln!("error: not implemented yet");
    1
}
pub fn delete(_a: DeleteArgs, _s: &StoreOpt) -> i32 {
    eprintln!("error: not implemented yet");
    1
}
pub fn verify(_a: VerifyArgs, _s: &StoreOpt) -> i32 {
    eprintln!("error: not implemented yet");
    1
}
