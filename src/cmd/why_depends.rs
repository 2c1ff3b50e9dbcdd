//! `rocmx why_depends` (being written).

use clap::Args;

#[derive(Args, Debug)]
pub struct WhyDependsArgs {
    pub args: Vec<String>,
}

pub fn run(_a: WhyDependsArgs, _s: &super::StoreOpt) -> i32 {
    eprintln!("error: not implemented yet");
    1
}
