//! Helpers shared by the end-to-end tests (each test file includes this module).
#![allow(dead_code)]

pub mod fixture;
pub mod http;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Output;

/// Makes a tree removable again: directories 0755, files 0644 (store contents and
/// build results are read-only).
pub fn make_writable(p: &Path) {
    if let Ok(m) = fs::symlink_metadata(p) {
        if m.is_dir() {
            let _ = fs::set_permissions(p, fs::Permissions::from_mode(0o755));
            if let Ok(rd) = fs::read_dir(p) {
                for e in rd.flatten() {
                    make_writable(&e.path());
                }
            }
        } else if m.is_file() {
            let _ = fs::set_permissions(p, fs::Permissions::from_mode(0o644));
        }
    }
}

/// A command's standard output, as text.
pub fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A command's standard error, as text.
pub fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The static busybox the build tests use as their builder (Debian's
/// `busybox-static`), if installed.
pub fn busybox() -> Option<PathBuf> {
    ["/usr/bin/busybox", "/bin/busybox"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}
