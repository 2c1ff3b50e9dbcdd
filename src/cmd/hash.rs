//! `rocmx hash` (being written).

use clap::Args;

#[derive(Args, Debug)]
pub struct HashArgs {
    pub args: Vec<String>,
}

pub fn run(_a: HashArgs) -> i32 {
    eprintln!("error: not implemented yet");
    1
}
