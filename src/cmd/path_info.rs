//! `rocmx path_info` (being written).

use clap::Args;

#[derive(Args, Debug)]
pub struct PathInfoArgs {
    pub args: Vec<String>,
}

pub fn run(_a: PathInfoArgs, _s: &super::StoreOpt) -> i32 {
    eprintln!("error: not implemented yet");
    1
}
