//! The work directory most end-to-end tests need: a temporary directory holding a
//! static busybox as `bb/bin/sh` with applet links (so expressions need nothing from
//! the host), a store root `root/`, and `rocmx` run there without the user's store or
//! configuration.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::PathBuf;
use std::process::{Command, Output};

use super::{busybox, err, make_writable, out};

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_rocmx");

/// A temporary work directory with busybox; removable again when dropped.
pub struct Work {
    pub dir: tempfile::TempDir,
}

impl Work {
    /// A work directory with `bb/bin/sh` and links for `applets`; `None` (after saying
    /// why) when busybox is not installed.
    pub fn with_busybox(applets: &[&str]) -> Option<Work> {
        let Some(bb) = busybox() else {
            eprintln!("skipping: busybox is missing (install busybox-static)");
            return None;
        };
        let dir = tempfile::tempdir().expect("tempdir");
        let bin = dir.path().join("bb/bin");
        fs::create_dir_all(&bin).unwrap();
        fs::copy(bb, bin.join("sh")).unwrap();
        for applet in applets {
            symlink("sh", bin.join(applet)).unwrap();
        }
        Some(Work { dir })
    }

    /// `rel` inside the work directory.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// The store's physical root.
    pub fn root(&self) -> PathBuf {
        self.path("root")
    }

    /// Writes `text` to `rel`.
    pub fn write(&self, rel: &str, text: &str) {
        fs::write(self.path(rel), text).unwrap();
    }

    /// Writes `rel` holding one derivation `name` whose builder runs the shell
    /// `script` with busybox on its `PATH`.
    pub fn derivation(&self, rel: &str, name: &str, script: &str) {
        self.write(
            rel,
            &format!(
                r#"derivation {{
  name = "{name}";
  system = builtins.currentSystem;
  builder = "${{./bb}}/bin/sh";
  PATH = "${{./bb}}/bin";
  args = [ "-c" ''{script}'' ];
}}
"#
            ),
        );
    }

    /// `rocmx --store ROOT ARGS…` in the work directory, without `ROCMX_STORE`,
    /// `NO_COLOR` or any configuration file.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(BIN);
        c.env_remove("ROCMX_STORE")
            .env_remove("NO_COLOR")
            .env("ROCMX_CONFIG", "")
            .env("XDG_CONFIG_HOME", self.path("no-config"))
            .current_dir(self.dir.path())
            .arg("--store")
            .arg(self.root())
            .args(args);
        c
    }

    /// Runs [`Work::command`].
    pub fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("run rocmx")
    }

    /// Runs [`Work::command`], which must succeed; its standard output.
    pub fn ok(&self, args: &[&str]) -> String {
        let o = self.run(args);
        assert!(
            o.status.success(),
            "rocmx {args:?} failed ({:?}):\nstdout: {}\nstderr: {}",
            o.status,
            out(&o),
            err(&o)
        );
        out(&o)
    }
}

impl Drop for Work {
    fn drop(&mut self) {
        make_writable(self.dir.path());
    }
}

/// Command lines of the running processes that contain `marker`.
pub fn processes_with(marker: &str) -> Vec<String> {
    let Ok(rd) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    rd.flatten()
        .filter(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
        .filter_map(|e| fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(marker))
        .collect()
}
