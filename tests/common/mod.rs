//! Helpers shared by the end-to-end tests (each test file includes this module).
#![allow(dead_code)]

pub mod fixture;
pub mod http;
pub mod slurm;

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

/// The path a clean `rocmx store add` of `src` as `name` gives: kind `source`, BLAKE3
/// of its NAR, no references.
pub fn source_path(src: &Path, name: &str) -> rocmx_store::StorePath {
    let (nar_hash, _) =
        rocmx_store::nar::hash_path(src, rocmx_store::HashAlgo::Blake3).expect("hash");
    rocmx_store::StorePath::from_ca(
        name,
        &rocmx_store::ContentAddress::Source {
            nar_hash,
            references: Default::default(),
        },
    )
    .expect("path")
}

/// splitmix64: small, seeded, good enough for delays and tree shapes.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// In [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Fills `buf` with pseudo-random bytes.
    pub fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let v = self.next().to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
    }
}
