//! The work directory most end-to-end tests need: a temporary directory holding a
//! static busybox as `bb/bin/sh` with applet links (so expressions need nothing from
//! the host), a store root `root/`, and `rocmx` run there without the user's store or
//! configuration.
//!
//! What the test files vary is set when the [`Work`] is made: the package set
//! ([`Work::packages`]), where `rocmx` runs ([`Work::in_work_dir`]), the store root
//! ([`Work::store_at`]), extra environment ([`Work::env_path`], [`Work::env_remove`]),
//! a work directory other users can reach ([`Work::in_tmp`], [`as_nobody`]). Whether
//! builds can run at all is probed once per test binary ([`can_build`], used by
//! `require_sandbox!`).

use std::ffi::OsString;
use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use super::{busybox, err, make_writable, out};

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_rocmx");

/// The unprivileged user (and group) tests switch to.
pub const NOBODY: u32 = 65534;

/// A temporary work directory with busybox; removable again when dropped.
pub struct Work {
    pub dir: tempfile::TempDir,
    /// Where `rocmx` runs.
    cwd: PathBuf,
    /// The store root given with `--store`.
    store: PathBuf,
    /// The `rocmx` run: the binary under test, or a copy ([`Work::in_tmp`]).
    exe: PathBuf,
    /// Environment set (`Some`) or removed (`None`) after the defaults.
    env: Vec<(&'static str, Option<OsString>)>,
    /// Removed with `rocmx_store::tree::remove_tree` (trees of any depth).
    deep: bool,
}

impl Work {
    /// A work directory with `bb/bin/sh` and links for `applets`; `None` (after saying
    /// why) when busybox is not installed.
    pub fn with_busybox(applets: &[&str]) -> Option<Work> {
        let bb = busybox_or_say()?;
        let w = Work::empty();
        w.install_busybox("bb", &bb, applets);
        Some(w)
    }

    /// A work directory with `bb/bin/sh` and links for `applets`, for tests that know
    /// busybox is installed ([`can_build`]); panics without it.
    pub fn new(applets: &[&str]) -> Work {
        let w = Work::empty();
        w.install_busybox("bb", &busybox().expect("busybox"), applets);
        w
    }

    /// A work directory with busybox when it is installed, without when not.
    pub fn maybe_busybox(applets: &[&str]) -> Work {
        let w = Work::empty();
        if let Some(bb) = busybox() {
            w.install_busybox("bb", &bb, applets);
        }
        w
    }

    /// An empty work directory.
    pub fn empty() -> Work {
        Work::at(tempfile::tempdir().expect("tempdir"))
    }

    /// A work directory in /tmp (not `$TMPDIR`: every parent must be traversable by
    /// other users), of mode `mode`, with busybox `bb` and `applets`, subdirectories
    /// `work` (where `rocmx` runs), `home` and `tmp` (its `HOME` and `TMPDIR`; no
    /// `XDG_DATA_HOME`), and a copy of `rocmx` run instead of the binary under test
    /// (which may sit where other users cannot reach it).
    pub fn in_tmp(prefix: &str, mode: u32, bb: &Path, applets: &[&str]) -> Work {
        let dir = tempfile::Builder::new()
            .prefix(prefix)
            .tempdir_in("/tmp")
            .expect("tempdir in /tmp");
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(mode)).unwrap();
        let mut w = Work::at(dir);
        w.install_busybox("bb", bb, applets);
        for sub in ["work", "home", "tmp"] {
            fs::create_dir(w.path(sub)).unwrap();
        }
        let exe = w.path("rocmx");
        fs::copy(BIN, &exe).unwrap();
        fs::set_permissions(&exe, fs::Permissions::from_mode(0o755)).unwrap();
        // A fork made by another test's thread while the copy was written holds its
        // descriptor until that child execs, and running the copy fails with ETXTBSY
        // ("Text file busy") meanwhile. Wait for that once: nothing writes it again.
        for _ in 0..500 {
            match Command::new(&exe).arg("--version").output() {
                Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy => {
                    std::thread::sleep(std::time::Duration::from_millis(10))
                }
                _ => break,
            }
        }
        w.exe = exe;
        w.cwd = w.path("work");
        w.env_path("HOME", "home")
            .env_path("TMPDIR", "tmp")
            .env_remove("XDG_DATA_HOME")
    }

    fn at(dir: tempfile::TempDir) -> Work {
        Work {
            cwd: dir.path().to_path_buf(),
            store: dir.path().join("root"),
            exe: PathBuf::from(BIN),
            env: Vec::new(),
            deep: false,
            dir,
        }
    }

    /// Copies busybox `bb` to `REL/bin/sh` and links `applets` to it.
    pub fn install_busybox(&self, rel: &str, bb: &Path, applets: &[&str]) {
        let bin = self.path(rel).join("bin");
        fs::create_dir_all(&bin).unwrap();
        fs::copy(bb, bin.join("sh")).unwrap();
        for applet in applets {
            symlink("sh", bin.join(applet)).unwrap();
        }
    }

    /// Writes the package set `packages.nix` ([`Work::nix`]).
    pub fn packages(self, text: &str) -> Work {
        self.write("packages.nix", text);
        self
    }

    /// Runs `rocmx` in `work/` (made now), where `result` links appear.
    pub fn in_work_dir(mut self) -> Work {
        self.cwd = self.path("work");
        fs::create_dir_all(&self.cwd).unwrap();
        self
    }

    /// Uses the store root `rel` instead of `root`.
    pub fn store_at(mut self, rel: &str) -> Work {
        self.store = self.path(rel);
        self
    }

    /// Runs `rocmx` with `key` set to the path `rel` of the work directory.
    pub fn env_path(mut self, key: &'static str, rel: &str) -> Work {
        let value = self.path(rel).into_os_string();
        self.env.push((key, Some(value)));
        self
    }

    /// Runs `rocmx` without `key` in its environment.
    pub fn env_remove(mut self, key: &'static str) -> Work {
        self.env.push((key, None));
        self
    }

    /// Removes the directory with `rocmx_store::tree::remove_tree`, at any depth and
    /// whatever the modes, instead of making it writable first.
    pub fn removed_deep(mut self) -> Work {
        self.deep = true;
        self
    }

    /// `rel` inside the work directory.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// The store's physical root.
    pub fn root(&self) -> PathBuf {
        self.store.clone()
    }

    /// The directory `rocmx` runs in.
    pub fn cwd(&self) -> PathBuf {
        self.cwd.clone()
    }

    /// The package set written by [`Work::packages`].
    pub fn nix(&self) -> PathBuf {
        self.path("packages.nix")
    }

    /// Where the logical store path `logical` is on the host, in this store.
    pub fn physical(&self, logical: &str) -> PathBuf {
        let base = logical
            .strip_prefix("/rocmx/store/")
            .unwrap_or_else(|| panic!("not a logical store path: {logical}"));
        self.root().join("store").join(base)
    }

    /// Writes `text` to `rel`, making its directory first.
    pub fn write(&self, rel: &str, text: &str) {
        let p = self.path(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
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
        self.command_in(&self.store, args)
    }

    /// [`Work::command`] with the store root `store`.
    pub fn command_in(&self, store: &Path, args: &[&str]) -> Command {
        self.setup(Command::new(&self.exe), store, args)
    }

    /// [`Work::command`] run as uid and gid [`NOBODY`] ([`as_nobody`]).
    pub fn command_as_nobody(&self, setpriv: &Path, args: &[&str]) -> Command {
        self.setup(as_nobody(setpriv, &self.exe), &self.store, args)
    }

    fn setup(&self, mut c: Command, store: &Path, args: &[&str]) -> Command {
        c.env_remove("ROCMX_STORE")
            .env_remove("NO_COLOR")
            .env("ROCMX_CONFIG", "")
            .env("XDG_CONFIG_HOME", self.path("no-config"))
            .current_dir(&self.cwd)
            .arg("--store")
            .arg(store)
            .args(args);
        for (k, v) in &self.env {
            match v {
                Some(v) => c.env(k, v),
                None => c.env_remove(k),
            };
        }
        c
    }

    /// Runs [`Work::command`].
    pub fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("run rocmx")
    }

    /// Runs [`Work::command_in`].
    pub fn run_in(&self, store: &Path, args: &[&str]) -> Output {
        self.command_in(store, args).output().expect("run rocmx")
    }

    /// Runs [`Work::command`], which must succeed; its standard output.
    pub fn ok(&self, args: &[&str]) -> String {
        self.ok_in(&self.store, args)
    }

    /// Runs [`Work::command_in`], which must succeed; its standard output.
    pub fn ok_in(&self, store: &Path, args: &[&str]) -> String {
        succeeded(&format!("rocmx {args:?}"), &self.run_in(store, args))
    }

    /// `rocmx build --file packages.nix ARGS…`.
    pub fn build_file(&self, args: &[&str]) -> Output {
        let nix = self.nix();
        let mut all = vec!["build", "--file", nix.to_str().unwrap()];
        all.extend_from_slice(args);
        self.run(&all)
    }
}

impl Drop for Work {
    fn drop(&mut self) {
        if self.deep {
            let _ = rocmx_store::tree::remove_tree(self.dir.path());
        } else {
            make_writable(self.dir.path());
        }
    }
}

/// The standard output of `o`, which must have succeeded (`what failed (STATUS):` with
/// both outputs when not).
#[track_caller]
pub fn succeeded(what: &str, o: &Output) -> String {
    assert!(
        o.status.success(),
        "{what} failed ({:?}):\nstdout: {}\nstderr: {}",
        o.status,
        out(o),
        err(o)
    );
    out(o)
}

/// Busybox, or `None` after saying `skipping: busybox is missing`.
pub fn busybox_or_say() -> Option<PathBuf> {
    let bb = busybox();
    if bb.is_none() {
        eprintln!("skipping: busybox is missing (install busybox-static)");
    }
    bb
}

/// Busybox, or `None` after saying `SKIP: no busybox` (the build tests' wording).
pub fn busybox_or_skip() -> Option<PathBuf> {
    let bb = busybox();
    if bb.is_none() {
        eprintln!("SKIP: no busybox (install busybox-static)");
    }
    bb
}

/// Whether the build `o` failed because the sandbox cannot run here (its error names
/// namespaces); says so.
pub fn sandbox_refused(o: &Output) -> bool {
    let refused = !o.status.success() && err(o).to_lowercase().contains("namespace");
    if refused {
        eprintln!("SKIP: the sandbox cannot run here:\n{}", err(o));
    }
    refused
}

/// Whether builds can run here: busybox exists and the trivial build `probe` succeeds.
/// Decided once per test binary: when the probe fails because of user namespaces, the
/// reason is printed once and the tests skip; any other failure is a test failure.
pub fn can_build(probe: impl FnOnce() -> Output) -> bool {
    static OK: OnceLock<bool> = OnceLock::new();
    *OK.get_or_init(|| {
        if busybox_or_skip().is_none() {
            return false;
        }
        let o = probe();
        if o.status.success() {
            return true;
        }
        if sandbox_refused(&o) {
            return false;
        }
        panic!("a trivial build failed:\n{}", err(&o));
    })
}

/// Returns from the test unless builds can run here: the test file's `can_build()`
/// (which calls [`can_build`] with its probe) decides.
#[macro_export]
macro_rules! require_sandbox {
    () => {
        if !can_build() {
            return;
        }
    };
}

/// The effective uid of this process (the owner of `/proc/self`).
pub fn euid() -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    fs::metadata("/proc/self").ok().map(|m| m.uid())
}

/// `setpriv`, or `None` after saying it is missing.
pub fn setpriv() -> Option<PathBuf> {
    let found = ["/usr/bin/setpriv", "/bin/setpriv", "/usr/sbin/setpriv"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists());
    if found.is_none() {
        eprintln!("skipping: setpriv is missing (install util-linux)");
    }
    found
}

/// `exe` run as uid and gid [`NOBODY`] without supplementary groups, through `setpriv`.
pub fn as_nobody(setpriv: &Path, exe: &Path) -> Command {
    let mut c = Command::new(setpriv);
    c.args([
        "--reuid",
        "65534",
        "--regid",
        "65534",
        "--clear-groups",
        "--",
    ])
    .arg(exe);
    c
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
