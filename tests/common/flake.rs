//! The fixture of the flake tests: a temporary directory with a store
//! (`store/`), files written into it, and `rocmx` run there with no
//! configuration file. Included by `tests/flake*.rs` as `mod flakefx`.
#![allow(dead_code)]

use std::fs;
use std::ops::Deref;
use std::path::Path;
use std::process::{Command, Output};

use super::common::fixture::Work;
use super::common::{err, out};

/// A [`Work`] with the store `store/`.
pub struct Fx(Work);

impl Deref for Fx {
    type Target = Work;
    fn deref(&self) -> &Work {
        &self.0
    }
}

impl Fx {
    pub fn new() -> Fx {
        let w = Work::empty()
            .store_at("store")
            .env_remove("HSA_OVERRIDE_GFX_VERSION");
        fs::create_dir_all(w.root()).unwrap();
        Fx(w)
    }

    /// A stand-in builder tree (never run by dry runs).
    pub fn bb(&self, rel: &str) {
        self.write(&format!("{rel}/bin/sh"), "not a shell\n");
    }

    /// `rocmx --store DIR ARGS` in the directory `cwd` (relative).
    pub fn run_in(&self, cwd: &str, args: &[&str]) -> Output {
        self.command(args)
            .current_dir(self.path(cwd))
            .output()
            .expect("run rocmx")
    }

    /// `rocmx` in the flake directory `f`.
    pub fn run(&self, args: &[&str]) -> Output {
        self.run_in("f", args)
    }

    /// Names of the objects in the store (to check that nothing was added).
    pub fn store_listing(&self) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(self.path("store/store"))
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    }

    /// The bytes of `f/flake.lock`, if it exists.
    pub fn lock(&self) -> Option<Vec<u8>> {
        fs::read(self.path("f/flake.lock")).ok()
    }
}

/// Runs git in `dir` with a fixed identity and no system or user config;
/// returns its trimmed output.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let o = Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@e",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .output()
        .expect("git");
    assert!(o.status.success(), "git {args:?}: {}", err(&o));
    out(&o).trim().to_string()
}

pub fn have_git() -> bool {
    Command::new("git")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}
