//! The build environment's variable parts, as concrete values: who the build user is,
//! where `/build` is, the hostname, the umask, the CPUs, the order of the environment,
//! the kernel's version string, and a few variables. [`Variant::default`] is the
//! sandbox every build gets; `rocmx verify` (through [`crate::vary`]) changes some of
//! them to find builds whose output depends on them.
//!
//! This module owns the values and what follows from them inside the sandbox (the
//! generated `/etc/passwd` and `/etc/group`, the fixed variables); it knows nothing of
//! variation names, which are [`crate::vary`]'s.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use super::SandboxError;

/// Where the build directory is inside the sandbox by default.
pub const BUILD_TOP: &str = "/build";

/// Where a preloaded library ([`Variant::preload`]) is bound inside the sandbox.
pub const PRELOAD_DIR: &str = "/.rocmx-preload";

/// The variable parts of a build's environment (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Variant {
    /// The build user's inside uid and gid, and its name.
    pub uid: u32,
    pub gid: u32,
    pub user: String,
    /// `uname -n`, and the NIS domain name (`None`: the kernel's default, `(none)`).
    pub hostname: String,
    pub domainname: Option<String>,
    /// The builder's umask.
    pub umask: u32,
    /// The build directory's inside path (absolute, one component below `/`).
    pub build_top: PathBuf,
    /// `/build` on a fresh tmpfs (entries listed in creation order) instead of the
    /// host directory's overlay (the host filesystem's order: hash order on ext4).
    pub build_on_tmpfs: bool,
    /// Bind the builder to this many CPUs (the first ones it may use; `nproc` reports
    /// them), and export that number as `ROCMX_BUILD_CORES`. `None`: every CPU.
    pub cpus: Option<u32>,
    /// `ROCMX_BUILD_CORES` when `cpus` is `None` (`None`: the build's `cores`).
    pub cores_env: Option<u32>,
    /// Pass the environment in reverse order (normally sorted by name).
    pub reverse_env: bool,
    /// The `UNAME26` personality: `uname -r` reports a 2.6 version.
    pub uname26: bool,
    /// Variables set over the fixed ones (`TZ`, `LANG`, `LC_ALL`, …).
    pub env: BTreeMap<String, String>,
    /// A host library preloaded into every dynamically linked program (libfaketime):
    /// bound read-only under [`PRELOAD_DIR`] and named by `LD_PRELOAD`.
    pub preload: Option<PathBuf>,
}

impl Default for Variant {
    fn default() -> Self {
        Variant {
            uid: 1000,
            gid: 100,
            user: "rocmxbld".into(),
            hostname: "localhost".into(),
            domainname: None,
            umask: 0o022,
            build_top: PathBuf::from(BUILD_TOP),
            build_on_tmpfs: false,
            cpus: None,
            cores_env: None,
            reverse_env: false,
            uname26: false,
            env: BTreeMap::new(),
            preload: None,
        }
    }
}

impl Variant {
    /// The generated `/etc/passwd`: root, the build user and nobody.
    pub fn passwd(&self) -> String {
        format!(
            "root:x:0:0:rocmx build root:{top}:/noshell\n\
             {user}:x:{uid}:{gid}:rocmx build user:/homeless-shelter:/noshell\n\
             nobody:x:65534:65534:nobody:/:/noshell\n",
            top = self.build_top.display(),
            user = self.user,
            uid = self.uid,
            gid = self.gid,
        )
    }

    /// The generated `/etc/group`.
    pub fn group(&self) -> String {
        format!(
            "root:x:0:\n{user}:!:{gid}:\nnogroup:x:65534:\n",
            user = self.user,
            gid = self.gid
        )
    }

    /// The inside path of the preloaded library, if any.
    pub fn preload_inside(&self) -> Option<PathBuf> {
        let host = self.preload.as_ref()?;
        let name = host.file_name()?;
        Some(PathBuf::from(PRELOAD_DIR).join(name))
    }

    /// The environment the builder sees, as `(name, value)` in the order it is passed:
    /// the derivation's, the fixed variables over it, then this variant's (see the
    /// sandbox module's "Environment").
    pub fn environment(&self, env: &BTreeMap<String, String>, cores: u32) -> Vec<(String, String)> {
        let mut out = env.clone();
        out.entry("PATH".into())
            .or_insert_with(|| "/path-not-set".into());
        let top = self.build_top.display().to_string();
        let cores = self.cpus.or(self.cores_env).unwrap_or(cores);
        let fixed = [
            ("HOME", "/homeless-shelter".to_string()),
            ("TMPDIR", top.clone()),
            ("TMP", top.clone()),
            ("TEMP", top.clone()),
            ("TEMPDIR", top.clone()),
            ("NIX_BUILD_TOP", top),
            ("ROCMX_BUILD_CORES", cores.to_string()),
            ("SOURCE_DATE_EPOCH", "1".into()),
            ("TZ", "UTC".into()),
            ("LANG", "C.UTF-8".into()),
        ];
        for (k, v) in fixed {
            out.insert(k.to_string(), v);
        }
        for (k, v) in &self.env {
            out.insert(k.clone(), v.clone());
        }
        if let Some(inside) = self.preload_inside() {
            let inside = inside.display().to_string();
            let v = match out.get("LD_PRELOAD") {
                Some(old) if !old.is_empty() => format!("{inside}:{old}"),
                _ => inside,
            };
            out.insert("LD_PRELOAD".into(), v);
        }
        let mut v: Vec<(String, String)> = out.into_iter().collect();
        if self.reverse_env {
            v.reverse();
        }
        v
    }
}

/// Checks a variant against the spec: a build directory one level below `/` that no
/// input or output claims and the sandbox does not provide, an unprivileged build user,
/// a hostname the kernel takes.
pub(super) fn check(v: &Variant, inputs: &[PathBuf], output: &Path) -> Result<(), SandboxError> {
    let bad = |why: String| Err(SandboxError::InvalidSpec(why));
    let top = &v.build_top;
    let comps: Vec<Component<'_>> = top.components().collect();
    let name = match comps.as_slice() {
        [Component::RootDir, Component::Normal(n)] => n.to_string_lossy().to_string(),
        _ => {
            return bad(format!(
                "build directory {}: not one level below /",
                top.display()
            ))
        }
    };
    if top != Path::new(BUILD_TOP)
        && (["dev", "proc", "etc", "build"].contains(&name.as_str())
            || name == PRELOAD_DIR.trim_start_matches('/')
            || inputs
                .iter()
                .chain([output.to_path_buf()].iter())
                .any(|i| i.starts_with(Path::new("/").join(&name))))
    {
        return bad(format!(
            "build directory {}: taken by the sandbox, an input or the output",
            top.display()
        ));
    }
    if v.uid == 0 || v.gid == 0 || v.uid == 65534 || v.gid == 65534 {
        return bad(format!(
            "build user {}:{}: must be neither root nor nobody",
            v.uid, v.gid
        ));
    }
    if v.hostname.is_empty() || v.hostname.len() > 64 {
        return bad(format!("hostname {:?}: 1 to 64 bytes", v.hostname));
    }
    if v.domainname.as_ref().is_some_and(|d| d.len() > 64) {
        return bad("domain name: at most 64 bytes".into());
    }
    if v.user.is_empty() || v.user.contains([':', '\n']) {
        return bad(format!("build user name {:?}", v.user));
    }
    if v.cpus == Some(0) {
        return bad("cpus: at least 1".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_is_the_documented_sandbox() {
        let v = Variant::default();
        assert_eq!(
            v.passwd(),
            "root:x:0:0:rocmx build root:/build:/noshell\n\
             rocmxbld:x:1000:100:rocmx build user:/homeless-shelter:/noshell\n\
             nobody:x:65534:65534:nobody:/:/noshell\n"
        );
        assert_eq!(v.group(), "root:x:0:\nrocmxbld:!:100:\nnogroup:x:65534:\n");
        let env = v.environment(&BTreeMap::new(), 3);
        let names: Vec<&str> = env.iter().map(|(k, _)| k.as_str()).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        assert_eq!(names, sorted, "sorted by name");
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("ROCMX_BUILD_CORES"), Some("3"));
        assert_eq!(get("TMPDIR"), Some("/build"));
        assert_eq!(get("LD_PRELOAD"), None);
    }

    #[test]
    fn a_variant_changes_what_follows_from_it() {
        let v = Variant {
            uid: 2000,
            gid: 200,
            user: "rocmxvar".into(),
            build_top: PathBuf::from("/rocmx-verify-build"),
            cpus: Some(1),
            reverse_env: true,
            preload: Some(PathBuf::from(
                "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
            )),
            env: [("TZ".to_string(), "VFY-14".to_string())].into(),
            ..Variant::default()
        };
        assert!(v.passwd().contains("rocmxvar:x:2000:200:"));
        assert!(v
            .passwd()
            .starts_with("root:x:0:0:rocmx build root:/rocmx-verify-build:"));
        assert_eq!(v.group(), "root:x:0:\nrocmxvar:!:200:\nnogroup:x:65534:\n");
        let mut drv = BTreeMap::new();
        drv.insert("LD_PRELOAD".to_string(), "/x/libmine.so".to_string());
        let env = v.environment(&drv, 8);
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("ROCMX_BUILD_CORES"), Some("1"));
        assert_eq!(get("TZ"), Some("VFY-14"));
        assert_eq!(get("NIX_BUILD_TOP"), Some("/rocmx-verify-build"));
        assert_eq!(
            get("LD_PRELOAD"),
            Some("/.rocmx-preload/libfaketime.so.1:/x/libmine.so")
        );
        assert_eq!(env.first().map(|(k, _)| k.as_str()), Some("TZ"), "reversed");
    }
}
