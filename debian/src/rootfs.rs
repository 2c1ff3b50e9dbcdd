//! A root filesystem from `.deb` files: what `builtin:unpack-debs` makes.
//!
//! Owns: unpacking a list of packages in order into one merged-`/usr` root
//! ([`crate::deb::Unpacker`]), the root's `/bin`, `/sbin`, `/lib*` symlinks as
//! Debian 13 lays them out, and the short list of links that maintainer scripts
//! would have made and a toolchain needs (no script is ever run: they need the
//! packages' interpreters and `dpkg` itself, and are not reproducible).
//!
//! Each link is made only when its name is missing and its target is present;
//! alternatives point at their target directly (there is no `/etc/alternatives`
//! indirection, since nothing will run `update-alternatives` in the root).
//!
//! What is deliberately not done, with the reason:
//! - `/etc/passwd`, `/etc/group`, `/etc/hosts`: the sandbox generates them
//!   (`builder/src/sandbox/plan.rs`, `GENERATED_ETC`) and never takes them from a
//!   rootfs.
//! - `/tmp` (1777 in base-files): the sandbox mounts the rootfs read-only and
//!   points `TMPDIR` at `/build`; the store would normalise the mode to 0555
//!   anyway. It is kept as shipped.
//! - `/etc/ld.so.conf.d/*`: kept as shipped, but no `/etc/ld.so.cache` is made
//!   (`ldconfig` is not run). Debian's glibc searches its multiarch directories
//!   (`/usr/lib/x86_64-linux-gnu`, …) without a cache; a directory listed only
//!   in `ld.so.conf.d` is not searched, which the log notes.
//!
//! Must not: write outside the root, run anything from the packages, or touch
//! the network.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use crate::deb::{Control, DebError, Unpacker, MERGED_DIRS};

/// Links in `/usr/bin` that maintainer scripts make: (name, target, reason).
pub const ALTERNATIVES: [(&str, &str, &str); 5] = [
    (
        "cc",
        "gcc",
        "gcc's postinst: update-alternatives --install /usr/bin/cc cc /usr/bin/gcc (CMake, autoconf and make's default CC call cc)",
    ),
    (
        "c++",
        "g++",
        "g++'s postinst: update-alternatives --install /usr/bin/c++ c++ /usr/bin/g++ (CMake's default C++ compiler)",
    ),
    (
        "sh",
        "dash",
        "dash's postinst claims /bin/sh (a diversion and a link) where dash does not ship it; every build runs /bin/sh",
    ),
    (
        "awk",
        "mawk",
        "mawk's postinst: update-alternatives --install /usr/bin/awk awk /usr/bin/mawk (configure scripts call awk)",
    ),
    (
        "which",
        "which.debianutils",
        "debianutils' postinst: update-alternatives --install /usr/bin/which which /usr/bin/which.debianutils (build scripts probe tools with which)",
    ),
];

/// Why `python3` → the highest `python3.N` is made.
pub const PYTHON3_REASON: &str = "python3-minimal ships this link; a lock holding only python3.N-minimal lacks it, and CMake and Meson look for python3";

/// Why unversioned LLVM names → the highest versioned ones are made.
pub const LLVM_REASON: &str = "llvm-defaults (the clang, lld and llvm packages) ship these links; a lock naming only clang-N/lld-N/llvm-N lacks them, and hipcc and ROCm's CMake look for clang, ld.lld and llvm-* by plain name";

/// One link made after unpacking.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MadeLink {
    /// Absolute path in the root (`/usr/bin/cc`).
    pub path: String,
    /// The symlink's target as written (`gcc`).
    pub target: String,
    pub reason: &'static str,
}

/// What [`build`] did.
#[derive(Debug, Clone, Default)]
pub struct Rootfs {
    /// The packages, in unpacking order.
    pub packages: Vec<Control>,
    /// The links of [`ALTERNATIVES`], python3 and LLVM that were made.
    pub links: Vec<MadeLink>,
}

/// A failure to build a root.
#[derive(Debug, thiserror::Error)]
pub enum RootfsError {
    #[error("{0}")]
    Deb(#[from] DebError),
    #[error("{what} '{}': {error}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        error: io::Error,
    },
    #[error("/{0} is not a directory (a package replaced it); cannot lay out merged /usr")]
    NotADirectory(String),
}

fn io_err<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> RootfsError + 'a {
    move |error| RootfsError::Io {
        what,
        path: path.to_path_buf(),
        error,
    }
}

/// Unpacks `debs` in order into `root` (created; it must not exist), lays out
/// merged `/usr` and makes the links of the module comment. Notes go to `log`.
pub fn build(debs: &[PathBuf], root: &Path, log: &mut dyn Write) -> Result<Rootfs, RootfsError> {
    fs::create_dir(root).map_err(io_err("creating the root", root))?;
    let mut out = Rootfs {
        packages: Unpacker::new(root).unpack_all(debs, log)?,
        ..Rootfs::default()
    };
    let arch = out
        .packages
        .iter()
        .map(|c| c.architecture.as_str())
        .find(|a| !a.is_empty() && *a != "all")
        .unwrap_or("");
    merged_usr_links(root, arch)?;
    out.links = toolchain_links(root, log)?;
    note_ld_so_conf(root, log);
    Ok(out)
}

/// A real directory `root/rel` (created if missing); a symlink or file there
/// is an error.
fn real_dir(root: &Path, rel: &str) -> Result<PathBuf, RootfsError> {
    let p = root.join(rel);
    match fs::symlink_metadata(&p) {
        Ok(m) if m.is_dir() => Ok(p),
        Ok(_) => Err(RootfsError::NotADirectory(rel.to_string())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            fs::create_dir(&p).map_err(io_err("creating", &p))?;
            Ok(p)
        }
        Err(e) => Err(io_err("reading", &p)(e)),
    }
}

/// `/bin -> usr/bin`, `/sbin -> usr/sbin`, `/lib -> usr/lib` always;
/// `/lib64 -> usr/lib64` on amd64 (the ELF interpreter is
/// `/lib64/ld-linux-x86-64.so.2`); the other `lib*` aliases when a package
/// shipped something there.
fn merged_usr_links(root: &Path, arch: &str) -> Result<(), RootfsError> {
    real_dir(root, "usr")?;
    for d in MERGED_DIRS {
        let always = matches!(d, "bin" | "sbin" | "lib") || (d == "lib64" && arch == "amd64");
        if !always && !root.join("usr").join(d).exists() {
            continue;
        }
        real_dir(root, &format!("usr/{d}"))?;
        let link = root.join(d);
        symlink(format!("usr/{d}"), &link).map_err(io_err("creating", &link))?;
    }
    Ok(())
}

/// The names in `/usr/bin`.
fn bin_names(bin: &Path) -> Result<Vec<String>, RootfsError> {
    let mut names = Vec::new();
    for e in fs::read_dir(bin).map_err(io_err("reading", bin))? {
        let e = e.map_err(io_err("reading", bin))?;
        if let Ok(n) = e.file_name().into_string() {
            names.push(n);
        }
    }
    names.sort();
    Ok(names)
}

/// Whether an unversioned LLVM tool name gets a link to its versioned form.
fn is_llvm_tool(base: &str) -> bool {
    base == "clang"
        || base == "clang++"
        || base.starts_with("clang-")
        || base.starts_with("llvm-")
        || matches!(
            base,
            "ld.lld" | "lld" | "lld-link" | "ld64.lld" | "wasm-ld" | "opt" | "llc" | "lli"
        )
}

/// `name-N` split into (`name`, N) when N is a plain number.
fn versioned(name: &str) -> Option<(&str, u32)> {
    let (base, n) = name.rsplit_once('-')?;
    if base.is_empty() || n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((base, n.parse().ok()?))
}

/// The links to make in `/usr/bin` given its names: (name, target, reason).
pub fn planned_links(names: &[String]) -> Vec<(String, String, &'static str)> {
    let has = |n: &str| names.iter().any(|x| x == n);
    let mut plan: Vec<(String, String, &'static str)> = Vec::new();
    for (name, target, reason) in ALTERNATIVES {
        if !has(name) && has(target) {
            plan.push((name.into(), target.into(), reason));
        }
    }
    // python3 → the highest python3.N.
    if !has("python3") {
        let best = names
            .iter()
            .filter_map(|n| {
                let minor = n.strip_prefix("python3.")?;
                (!minor.is_empty() && minor.bytes().all(|b| b.is_ascii_digit()))
                    .then(|| (minor.parse::<u32>().ok(), n))
            })
            .filter_map(|(m, n)| Some((m?, n)))
            .max();
        if let Some((_, n)) = best {
            plan.push(("python3".into(), n.clone(), PYTHON3_REASON));
        }
    }
    // clang, ld.lld, llvm-* → the highest version present.
    let mut llvm: std::collections::BTreeMap<&str, (u32, &String)> = Default::default();
    for n in names {
        if let Some((base, v)) = versioned(n) {
            if is_llvm_tool(base) && !has(base) && llvm.get(base).is_none_or(|(w, _)| v > *w) {
                llvm.insert(base, (v, n));
            }
        }
    }
    for (base, (_, n)) in llvm {
        plan.push((base.into(), n.clone(), LLVM_REASON));
    }
    plan
}

fn toolchain_links(root: &Path, log: &mut dyn Write) -> Result<Vec<MadeLink>, RootfsError> {
    let bin = real_dir(root, "usr/bin")?;
    let names = bin_names(&bin)?;
    let mut made = Vec::new();
    for (name, target, reason) in planned_links(&names) {
        let link = bin.join(&name);
        symlink(&target, &link).map_err(io_err("creating", &link))?;
        writeln!(log, "link /usr/bin/{name} -> {target}: {reason}").ok();
        made.push(MadeLink {
            path: format!("/usr/bin/{name}"),
            target,
            reason,
        });
    }
    Ok(made)
}

/// Notes the `ld.so.conf.d` files, whose directories the loader does not search
/// without a cache.
fn note_ld_so_conf(root: &Path, log: &mut dyn Write) {
    let dir = root.join("etc/ld.so.conf.d");
    if !fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir()) {
        return;
    }
    let Ok(rd) = fs::read_dir(&dir) else { return };
    let mut names: Vec<String> = rd
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.ends_with(".conf"))
        .collect();
    names.sort();
    if !names.is_empty() {
        writeln!(
            log,
            "note: no ld.so.cache is made; directories listed only in /etc/ld.so.conf.d/{{{}}} are not searched by the dynamic loader",
            names.join(",")
        )
        .ok();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn plans_the_links() {
        let plan = planned_links(&names(&[
            "gcc",
            "g++",
            "c++",
            "mawk",
            "python3.12",
            "python3.13",
            "python3.13-config",
            "clang-19",
            "clang-21",
            "clang++-21",
            "ld.lld-21",
            "llvm-ar-21",
            "llvm-config-21",
            "clang-offload-bundler-21",
            "gcc-14",
            "x86_64-linux-gnu-gcc-14",
        ]));
        let got: Vec<(&str, &str)> = plan
            .iter()
            .map(|(a, b, _)| (a.as_str(), b.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("cc", "gcc"),
                ("awk", "mawk"),
                ("python3", "python3.13"),
                ("clang", "clang-21"),
                ("clang++", "clang++-21"),
                ("clang-offload-bundler", "clang-offload-bundler-21"),
                ("ld.lld", "ld.lld-21"),
                ("llvm-ar", "llvm-ar-21"),
                ("llvm-config", "llvm-config-21"),
            ]
        );
        // Nothing when the names exist already.
        assert!(planned_links(&names(&[
            "cc",
            "gcc",
            "python3",
            "python3.13",
            "clang",
            "clang-21"
        ]))
        .is_empty());
    }

    #[test]
    fn versioned_names() {
        assert_eq!(versioned("clang-21"), Some(("clang", 21)));
        assert_eq!(versioned("llvm-config-21"), Some(("llvm-config", 21)));
        assert_eq!(versioned("clang-cpp"), None);
        assert_eq!(versioned("-21"), None);
    }
}

#[cfg(test)]
mod real_deb {
    use super::*;

    /// Debian 12's `hostname` 3.23+nmu1 (amd64, 10.5 kB, GPL-2; its copyright
    /// file is inside): ships `/bin/hostname` and relative links next to it.
    fn hostname_deb() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/hostname_3.23+nmu1_amd64.deb")
    }

    #[test]
    fn a_real_package_lands_under_usr() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        let mut log = Vec::new();
        let r = build(&[hostname_deb()], &root, &mut log).unwrap();
        assert_eq!(r.packages.len(), 1);
        assert_eq!(r.packages[0].to_string(), "hostname 3.23+nmu1 (amd64)");
        assert!(root.join("usr/bin/hostname").is_file());
        assert_eq!(
            fs::read_link(root.join("usr/bin/dnsdomainname")).unwrap(),
            Path::new("hostname")
        );
        for d in ["bin", "sbin", "lib", "lib64"] {
            assert_eq!(
                fs::read_link(root.join(d)).unwrap(),
                Path::new("usr").join(d)
            );
        }
        assert!(root.join("bin/hostname").is_file());
        assert!(!root.join("lib32").exists());
        assert!(root.join("usr/share/doc/hostname/copyright").is_file());
        let log = String::from_utf8(log).unwrap();
        assert!(log.contains("unpacked hostname 3.23+nmu1"), "{log}");
    }
}
