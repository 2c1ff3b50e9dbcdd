//! End-to-end tests of the store commands' first-hour rough edges (issue 14, items 3, 4
//! and 9): `store gc` keeps the derivers of live paths (`keep-derivations`, and
//! `keep-outputs` on request); `rocmx log` finds a log after its `.drv` was collected;
//! a path of another store is named as such, with the `--store` to use; `path-info
//! --json` shows content addresses; `store ls` follows a symlink given on the command
//! line. Stores live in temporary directories (`--store DIR`, never /rocmx).
//!
//! The build tests use a static busybox through a path literal and skip, saying why,
//! when busybox is missing or the kernel refuses user namespaces.

mod common;
use common::fixture::{Work, BIN};
use common::{err, out};

use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;
use std::process::Command;

/// `a` writes a log line; `b` depends on `a` (its output does not refer to it); `t` is a
/// tree with a symlink inside; `bad` fails.
const PACKAGES: &str = r#"
let
  bb = ./bb;
  mk = name: script: derivation {
    inherit name;
    system = builtins.currentSystem;
    builder = "${bb}/bin/sh";
    args = [ "-c" script ];
    PATH = "${bb}/bin";
  };
  a = mk "keep-a" "echo log-of-a; echo A > $out";
  b = mk "keep-b" "echo log-of-b; { cat ${a}; echo B; } > $out";
  t = mk "keep-t" "mkdir -p $out/sub; echo X > $out/sub/f; ln -s sub/f $out/link";
  bad = mk "keep-bad" "echo the-failure-tail; exit 3";
in { inherit a b t bad; }
"#;

/// A work directory (`packages.nix`, `bb/` when busybox is installed, `work/` where
/// commands run) and store roots under it; user configuration from `config/`.
fn fixture() -> Work {
    Work::maybe_busybox(&["cat", "echo", "mkdir", "ln"])
        .packages(PACKAGES)
        .in_work_dir()
        .env_path("XDG_CONFIG_HOME", "config")
}

impl Work {
    /// `rocmx build --file packages.nix ARGS…`.
    fn build(&self, args: &[&str]) -> String {
        let nix = self.nix();
        let mut all = vec!["build", "--file", nix.to_str().unwrap()];
        all.extend_from_slice(args);
        self.ok(&all)
    }

    /// The `.drv` path of attribute `attr`.
    fn drv_path(&self, attr: &str) -> String {
        let expr = format!("(import {}).{attr}.drvPath", self.nix().display());
        let s = self.ok(&["eval", "--expr", &expr]);
        s.trim().trim_matches('"').to_string()
    }

    /// Whether the logical store path `p` is valid in the main store.
    fn valid(&self, p: &str) -> bool {
        self.run(&["path-info", p]).status.success()
    }

    /// `path-info --json PATH`, its single object.
    fn info(&self, root: &Path, p: &str) -> serde_json::Value {
        let text = self.ok_in(root, &["path-info", "--json", p]);
        let v: serde_json::Value = serde_json::from_str(&text).expect("JSON");
        v[0].clone()
    }
}

/// Whether builds can run here (see [`common::fixture::can_build`]).
fn can_build() -> bool {
    common::fixture::can_build(|| fixture().build_file(&["a", "--no-link"]))
}

fn lines(s: &str) -> Vec<String> {
    s.lines().map(str::to_string).collect()
}

#[test]
fn gc_keeps_the_derivations_of_live_outputs_unless_told_not_to() {
    require_sandbox!();
    let f = fixture();
    let b_out = f.build(&["b", "--print-out-paths"]).trim().to_string();
    let (a_drv, b_drv) = (f.drv_path("a"), f.drv_path("b"));
    let a_out = f
        .build(&["a", "--no-link", "--print-out-paths"])
        .trim()
        .to_string();

    // keep-outputs keeps a's output: a.drv is live (an input of b.drv, b's deriver).
    let dry = lines(&f.ok(&[
        "store",
        "gc",
        "--dry-run",
        "--option",
        "keep-outputs",
        "true",
    ]));
    assert!(!dry.contains(&a_out), "{dry:?}");

    // By default (keep-derivations) the derivations stay, a's unrooted output goes.
    let gone = lines(&f.ok(&["store", "gc"]));
    assert!(gone.contains(&a_out), "{gone:?}");
    assert!(!gone.contains(&b_drv) && !gone.contains(&a_drv), "{gone:?}");
    assert!(f.valid(&b_drv) && f.valid(&a_drv) && f.valid(&b_out));
    let shown = f.ok(&["derivation", "show", "result"]);
    let j: serde_json::Value = serde_json::from_str(&shown).expect("JSON");
    assert!(
        j[b_drv.as_str()]["inputDrvs"][a_drv.as_str()].is_array(),
        "{j}"
    );

    // `store delete` refuses what gc keeps: the deriver of the live result.
    let o = f.run(&["store", "delete", &b_drv]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        err(&o).contains(&format!(
            "cannot delete {b_drv}: it is kept alive by the live path {b_out} \
             (keep-derivations is on)"
        )),
        "{}",
        err(&o)
    );
    assert!(f.valid(&b_drv));

    // A setting in rocmx.conf: keep-derivations = false lets them go.
    fs::create_dir_all(f.path("config/rocmx")).unwrap();
    fs::write(
        f.path("config/rocmx/rocmx.conf"),
        "keep-derivations = false\n",
    )
    .unwrap();
    let dry = lines(&f.ok(&["store", "gc", "--dry-run"]));
    assert!(dry.contains(&b_drv) && dry.contains(&a_drv), "{dry:?}");
    // --option wins over the file.
    let o = f.ok(&[
        "store",
        "gc",
        "--option",
        "keep-derivations",
        "true",
        "--dry-run",
    ]);
    assert!(o.starts_with("0 store paths would be deleted"), "{o}");
    let gone = lines(&f.ok(&["store", "gc"]));
    assert!(gone.contains(&b_drv), "{gone:?}");
    assert!(f.valid(&b_out) && !f.valid(&b_drv));
    // The result's deriver is gone: said so, not a raw "No such file".
    let o = f.run(&["derivation", "show", "result"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        err(&o).contains(&format!(
            "was built by '{b_drv}', which is no longer in the store"
        )),
        "{}",
        err(&o)
    );

    // A bad value is named.
    let o = f.run(&["store", "gc", "--option", "keep-outputs", "yes"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        err(&o).contains("keep-outputs: expected true or false, found 'yes'"),
        "{}",
        err(&o)
    );
}

#[test]
fn log_is_found_after_gc_deleted_the_derivation() {
    require_sandbox!();
    let f = fixture();
    f.build(&["b"]);
    let (a_drv, b_drv) = (f.drv_path("a"), f.drv_path("b"));
    // The failure message names the command to run.
    let nix = f.path("packages.nix");
    let o = f.run(&["build", "--file", nix.to_str().unwrap(), "bad", "--no-link"]);
    assert!(!o.status.success());
    let bad_drv = f.drv_path("bad");
    assert!(
        err(&o).contains(&format!("rocmx log {bad_drv}")),
        "{}",
        err(&o)
    );

    f.ok(&["store", "gc", "--option", "keep-derivations", "false"]);
    for d in [&a_drv, &b_drv, &bad_drv] {
        assert!(!f.valid(d), "{d} survived");
    }
    // By the logical path of the deleted .drv, by its physical path, and through the
    // output (its recorded deriver).
    assert!(f.ok(&["log", &a_drv]).contains("log-of-a"));
    assert!(f.ok(&["log", &bad_drv]).contains("the-failure-tail"));
    let physical = f
        .root()
        .join("store")
        .join(b_drv.strip_prefix("/rocmx/store/").unwrap());
    assert!(f
        .ok(&["log", physical.to_str().unwrap()])
        .contains("log-of-b"));
    assert!(f.ok(&["log", "result"]).contains("log-of-b"));

    // No log: said plainly.
    let none = format!("/rocmx/store/{}-never-built.drv", "v".repeat(32));
    let o = f.run(&["log", &none]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        err(&o).contains(&format!("no build log of '{none}' is stored")),
        "{}",
        err(&o)
    );
    // An added path was not built.
    fs::write(f.path("plain"), "x").unwrap();
    let added = f.ok(&["store", "add", f.path("plain").to_str().unwrap()]);
    let o = f.run(&["log", added.trim()]);
    assert!(err(&o).contains("has no build log"), "{}", err(&o));
}

#[test]
fn a_link_into_another_store_names_that_store() {
    let f = fixture();
    let other = f.path("other");
    fs::write(f.path("file"), "content").unwrap();
    let sp = f.ok_in(&other, &["store", "add", f.path("file").to_str().unwrap()]);
    let base = sp.trim().strip_prefix("/rocmx/store/").unwrap().to_string();
    symlink(other.join("store").join(&base), f.cwd().join("result-3")).unwrap();
    // Through a chain of links, and a path under the other store given directly.
    symlink("result-3", f.cwd().join("chain")).unwrap();
    let direct = other.join("store").join(&base);
    let here = f.root();
    for arg in ["result-3", "chain", direct.to_str().unwrap()] {
        let o = f.run(&["path-info", arg]);
        assert_eq!(o.status.code(), Some(1), "{arg}");
        let e = err(&o);
        let want = format!(
            "error: '{arg}' points into the store at {o} (physically {o}/store), not into \
             this one (at {h}, physically {h}/store); use --store {o} or ROCMX_STORE={o}\n",
            o = other.display(),
            h = here.display()
        );
        assert_eq!(e, want);
    }
    // Every command that takes store paths says so.
    for args in [
        &["why-depends", "result-3", "result-3"][..],
        &["store", "delete", "result-3"],
        &["log", "result-3"],
    ] {
        let o = f.run(args);
        assert!(
            err(&o).contains("points into the store at"),
            "{args:?}: {}",
            err(&o)
        );
    }
    // Taking the advice works.
    assert_eq!(f.ok_in(&other, &["path-info", "result-3"]), sp);
    // A path that is in no store keeps Nix's message.
    let o = f.run(&["path-info", "nothing-here"]);
    assert!(
        err(&o).contains("path 'nothing-here' is not in the store (/rocmx/store"),
        "{}",
        err(&o)
    );
}

#[test]
fn path_info_json_shows_content_addresses_of_added_and_imported_paths() {
    let f = fixture();
    fs::write(f.path("file"), "content").unwrap();
    let added = f
        .ok(&["store", "add", f.path("file").to_str().unwrap()])
        .trim()
        .to_string();
    let ca = f.info(&f.root(), &added)["ca"].clone();
    assert!(
        ca.as_str().is_some_and(|c| c.starts_with("source:blake3:")),
        "{ca}"
    );
    let fixed = f
        .ok(&[
            "store",
            "add-fixed",
            "sha256",
            f.path("file").to_str().unwrap(),
        ])
        .trim()
        .to_string();
    let fca = f.info(&f.root(), &fixed)["ca"].clone();
    assert!(
        fca.as_str().is_some_and(|c| c.starts_with("fixed:sha256:")),
        "{fca}"
    );

    // Through a binary cache into another store: the same content address.
    let sk = f.path("k.secret");
    let o = Command::new(BIN)
        .args(["key", "generate", "k-1", "--secret-key-file"])
        .arg(&sk)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", err(&o));
    let pk = out(&o).trim().to_string();
    let cache = format!("file://{}", f.path("cache").display());
    f.ok(&[
        "copy",
        "--to",
        &cache,
        &added,
        "--option",
        "secret-key-files",
        sk.to_str().unwrap(),
    ]);
    let other = f.path("other");
    f.ok_in(
        &other,
        &[
            "copy",
            "--from",
            &cache,
            &added,
            "--option",
            "trusted-public-keys",
            &pk,
        ],
    );
    assert_eq!(f.info(&other, &added)["ca"], ca);
}

#[test]
fn built_outputs_show_their_content_address_and_ls_follows_the_result_link() {
    require_sandbox!();
    let f = fixture();
    let t = f.build(&["t", "--print-out-paths"]).trim().to_string();
    let info = f.info(&f.root(), "result");
    assert_eq!(info["path"], t.as_str());
    let ca = info["ca"]
        .as_str()
        .unwrap_or_else(|| panic!("no ca: {info}"));
    assert!(ca.starts_with("output:blake3:"), "{ca}");
    assert_eq!(info["deriver"], f.drv_path("t").as_str());

    // The link given is followed; the link inside is listed as a link.
    let listing = f.ok(&["store", "ls", "-lR", "result"]);
    assert_eq!(
        listing,
        format!(
            "lrwxrwxrwx {z:>20} ./link -> sub/f\n\
             dr-xr-xr-x {z:>20} ./sub\n\
             -r--r--r-- {two:>20} ./sub/f\n",
            z = 0,
            two = 2
        )
    );
    // The same through the logical path, and the short form.
    assert_eq!(f.ok(&["store", "ls", "-lR", &t]), listing);
    assert_eq!(f.ok(&["store", "ls", "result"]), "./link\n./sub\n");
    // A link to a file shows the file under the name given.
    fs::create_dir_all(f.cwd().join("d")).unwrap();
    symlink(
        f.root()
            .join("store")
            .join(t.strip_prefix("/rocmx/store/").unwrap())
            .join("sub/f"),
        f.cwd().join("d/flink"),
    )
    .unwrap();
    assert_eq!(
        f.ok(&["store", "ls", "-l", "d/flink"]),
        format!("-r--r--r-- {:>20} flink\n", 2)
    );
}
