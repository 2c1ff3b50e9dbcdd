//! End-to-end tests of flakes: `rocmx build FLAKEREF#ATTRPATH`, bare `rocmx
//! build`, `rocmx flake lock|update|show|metadata`, typed parameters (`--set`,
//! `--gfx`), `builtins.getFlake`, and the errors for bad flakes. Each test
//! works in a temporary directory with its own store (`--store DIR`).
//!
//! Most tests stop at `--dry-run --json`: they are about evaluation and
//! locking, so the builder (`bb/bin/sh`) need not run and is a stand-in file.
//! The one real build uses a static busybox and skips without it or without
//! user namespaces.

mod common;
#[path = "common/flake.rs"]
mod flakefx;
use common::fixture::BIN;
use common::{err, out};
use flakefx::{git, have_git, Fx};

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn ok(o: &Output) -> String {
    assert!(o.status.success(), "rocmx failed:\n{}\n{}", out(o), err(o));
    out(o)
}

fn failed(o: &Output) -> String {
    assert!(
        !o.status.success(),
        "rocmx unexpectedly succeeded:\n{}",
        out(o)
    );
    err(o)
}

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_str(&ok(o)).expect("JSON output")
}

/// The `.drv` names of a dry run's build list, without hashes.
fn planned(o: &Output) -> Vec<String> {
    let j = json(o);
    let mut v: Vec<String> = j["build"]
        .as_array()
        .unwrap()
        .iter()
        .chain(j["valid"].as_array().unwrap())
        .map(|p| p.as_str().unwrap().to_string())
        .collect();
    v.sort();
    v
}

/// `/rocmx/store/<hash>-NAME` → `NAME`.
fn names(paths: &[String]) -> Vec<String> {
    paths
        .iter()
        .map(|p| {
            let base = p.rsplit('/').next().unwrap_or(p);
            base.split_once('-')
                .map(|(_, n)| n)
                .unwrap_or(base)
                .to_string()
        })
        .collect()
}

/// Standard base64 of bytes given in hexadecimal.
fn hex_to_base64(hex: &str) -> String {
    const T: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let bytes: Vec<u8> = (0..hex.len() / 2)
        .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
        .collect();
    let mut s = String::new();
    for c in bytes.chunks(3) {
        let n = (c[0] as u32) << 16
            | (*c.get(1).unwrap_or(&0) as u32) << 8
            | *c.get(2).unwrap_or(&0) as u32;
        for i in 0..4 {
            if i <= c.len() {
                s.push(T[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                s.push('=');
            }
        }
    }
    s
}

const MK: &str = r#"
      mk = name: derivation {
        inherit name;
        system = builtins.currentSystem;
        builder = "${bb}/bin/sh";
        args = [ "-c" "echo > $out" ];
      };
"#;

fn flake_with(inputs: &str, config: &str, outputs_body: &str) -> String {
    format!(
        r#"{{
  description = "a test flake";
  inputs = {{ {inputs} }};
  config = {{ {config} }};
  outputs = {{ self, config, bb, ... }}@inputs:
    let
{MK}
    in {outputs_body};
}}
"#
    )
}

const BB_INPUT: &str = r#"bb = { url = "path:./bb"; flake = false; };"#;

// ---- installables and bare builds -------------------------------------------------

#[test]
fn attribute_resolution_order() {
    let fx = Fx::new();
    fx.bb("f/bb");
    fx.write(
        "f/flake.nix",
        &flake_with(
            BB_INPUT,
            "",
            r#"{
      packages.${builtins.currentSystem} = { p = mk "from-packages"; default = mk "the-default"; };
      legacyPackages.${builtins.currentSystem} = { p = mk "legacy-p"; q = mk "from-legacy"; };
      p = mk "top-p"; q = mk "top-q"; r = mk "from-top";
      nested.deeper.s = mk "nested-s";
    }"#,
        ),
    );
    let plan = |attr: &str| {
        names(&planned(
            &fx.run_in("f", &["build", "--dry-run", "--json", attr]),
        ))
    };
    assert_eq!(plan(".#p"), vec!["from-packages.drv"]);
    assert_eq!(plan(".#q"), vec!["from-legacy.drv"]);
    assert_eq!(plan(".#r"), vec!["from-top.drv"]);
    assert_eq!(plan(".#nested.deeper.s"), vec!["nested-s.drv"]);
    assert_eq!(plan("."), vec!["the-default.drv"]);
    // The flake's directory given by path from elsewhere.
    let o = fx.run_in(".", &["build", "--dry-run", "--json", "./f#r"]);
    assert_eq!(names(&planned(&o)), vec!["from-top.drv"]);
    let e = failed(&fx.run_in("f", &["build", "--dry-run", ".#pp"]));
    assert!(
        e.contains("does not provide attribute 'packages.x86_64-linux.pp' or 'legacyPackages.x86_64-linux.pp' or 'pp'"),
        "{e}"
    );
    assert!(e.contains("did you mean 'packages.x86_64-linux.p'?"), "{e}");
    assert_eq!(
        e.lines().filter(|l| l.starts_with("error:")).count(),
        1,
        "{e}"
    );
}

#[test]
fn bare_build_takes_the_flake_else_default_nix() {
    let fx = Fx::new();
    fx.bb("f/bb");
    fx.write(
        "f/flake.nix",
        &flake_with(
            BB_INPUT,
            "",
            r#"{ packages.${builtins.currentSystem}.default = mk "flake-default"; }"#,
        ),
    );
    // A default.nix next to flake.nix loses, as with `nix build`.
    fx.write("f/default.nix", "throw \"default.nix must not be read\"");
    let o = fx.run_in("f", &["build", "--dry-run", "--json"]);
    assert_eq!(names(&planned(&o)), vec!["flake-default.drv"]);
    assert!(
        fx.path("f/flake.lock").exists(),
        "a missing lock is created"
    );

    fx.bb("d/bb");
    fx.write(
        "d/default.nix",
        r#"derivation { name = "classic"; system = builtins.currentSystem; builder = "${./bb}/bin/sh"; }"#,
    );
    let o = fx.run_in("d", &["build", "--dry-run", "--json"]);
    assert_eq!(names(&planned(&o)), vec!["classic.drv"]);
    // A file argument works as before, and so does a directory without flake.nix.
    let o = fx.run_in(".", &["build", "--dry-run", "--json", "d/default.nix"]);
    assert_eq!(names(&planned(&o)), vec!["classic.drv"]);
    let o = fx.run_in(".", &["build", "--dry-run", "--json", "d"]);
    assert_eq!(names(&planned(&o)), vec!["classic.drv"]);

    fs::create_dir_all(fx.path("empty")).unwrap();
    let o = fx.run_in("empty", &["build"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        err(&o).contains("no flake.nix or default.nix"),
        "{}",
        err(&o)
    );
}

/// A real build of a flake with a busybox builder, then a no-op rebuild.
#[test]
fn bare_build_really_builds() {
    let Some(busybox) = ["/usr/bin/busybox", "/bin/busybox"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
    else {
        eprintln!("skipped: no busybox");
        return;
    };
    if let Err(e) = rocmx_builder::sandbox::check_user_namespaces() {
        eprintln!("skipped: the sandbox cannot run here: {e}");
        return;
    }
    if false {
        eprintln!("skipped: the sandbox cannot run here");
        return;
    }
    let fx = Fx::new();
    fs::create_dir_all(fx.path("f/bb/bin")).unwrap();
    fs::copy(&busybox, fx.path("f/bb/bin/sh")).unwrap();
    fx.write(
        "f/flake.nix",
        r#"{
  inputs.bb = { url = "path:./bb"; flake = false; };
  config.who = { type = "string"; default = "world"; };
  outputs = { self, config, bb }: {
    packages.${builtins.currentSystem}.default = derivation {
      name = "hello";
      system = builtins.currentSystem;
      builder = "${bb}/bin/sh";
      args = [ "-c" "echo Hello, ${config.who}! > $out" ];
    };
  };
}
"#,
    );
    let o = fx.run_in("f", &["build", "--set", "who=flakes"]);
    ok(&o);
    assert_eq!(
        fs::read_to_string(fx.path("f/result")).unwrap(),
        "Hello, flakes!\n"
    );
    let o = fx.run_in("f", &["build", "--set", "who=flakes", "--json"]);
    let j = json(&o);
    assert_eq!(
        j["built"],
        serde_json::json!([]),
        "a no-op rebuild builds nothing"
    );
    assert_eq!(j["parameters"], serde_json::json!({ "who": "flakes" }));
}

// ---- the lock file ----------------------------------------------------------------

fn git_repo(fx: &Fx, rel: &str, file: &str, text: &str) -> String {
    let d = fx.path(rel);
    fs::create_dir_all(&d).unwrap();
    git(&d, &["init", "-q"]);
    fs::write(d.join(file), text).unwrap();
    git(&d, &["add", "."]);
    git(&d, &["commit", "-qm", "one"]);
    git(&d, &["rev-parse", "HEAD"])
}

fn locked_rev(lock: &str, input: &str) -> String {
    let j: serde_json::Value = serde_json::from_str(lock).unwrap();
    j["nodes"][input]["locked"]["rev"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

#[test]
fn lock_create_relock_and_selective_update() {
    if !have_git() {
        eprintln!("skipped: no git");
        return;
    }
    let fx = Fx::new();
    let rev_a1 = git_repo(&fx, "a", "a.txt", "a1");
    let rev_b1 = git_repo(&fx, "b", "b.txt", "b1");
    fx.bb("f/bb");
    let inputs = format!(
        r#"{BB_INPUT}
      a = {{ url = "git+file://{}"; flake = false; }};
      b = {{ url = "git+file://{}"; flake = false; }};"#,
        fx.path("a").display(),
        fx.path("b").display()
    );
    fx.write(
        "f/flake.nix",
        &flake_with(
            &inputs,
            "",
            r#"{ packages.${builtins.currentSystem}.default = (mk "uses-a") // { a = builtins.readFile "${inputs.a}/a.txt"; }; }"#,
        ),
    );
    let o = fx.run_in("f", &["flake", "lock"]);
    ok(&o);
    assert!(err(&o).contains("creating lock file"), "{}", err(&o));
    let lock1 = fs::read_to_string(fx.path("f/flake.lock")).unwrap();
    assert_eq!(locked_rev(&lock1, "a"), rev_a1);
    assert_eq!(locked_rev(&lock1, "b"), rev_b1);
    assert!(
        lock1.ends_with("}\n") && lock1.contains("\n  \"nodes\": {\n"),
        "{lock1}"
    );
    let j: serde_json::Value = serde_json::from_str(&lock1).unwrap();
    assert!(j["nodes"]["bb"]["locked"]["narHash"]
        .as_str()
        .unwrap()
        .starts_with("sha256-"));
    assert_eq!(j["nodes"]["a"]["original"]["type"], "git");

    // Re-locking an unchanged flake gives the very same bytes and says nothing.
    let o = fx.run_in("f", &["flake", "lock"]);
    ok(&o);
    assert!(!err(&o).contains("lock file"), "{}", err(&o));
    assert_eq!(fs::read_to_string(fx.path("f/flake.lock")).unwrap(), lock1);

    // New commits in both repositories: a build keeps using the locked ones.
    fs::write(fx.path("a/a.txt"), "a2").unwrap();
    git(&fx.path("a"), &["commit", "-qam", "two"]);
    fs::write(fx.path("b/b.txt"), "b2").unwrap();
    git(&fx.path("b"), &["commit", "-qam", "two"]);
    ok(&fx.run_in("f", &["build", "--dry-run", "--json"]));
    assert_eq!(fs::read_to_string(fx.path("f/flake.lock")).unwrap(), lock1);

    // `update a` moves a only.
    let o = fx.run_in("f", &["flake", "update", "a"]);
    ok(&o);
    assert!(err(&o).contains("Updated input 'a'"), "{}", err(&o));
    let lock2 = fs::read_to_string(fx.path("f/flake.lock")).unwrap();
    let rev_a2 = git(&fx.path("a"), &["rev-parse", "HEAD"]);
    assert_eq!(locked_rev(&lock2, "a"), rev_a2);
    assert_eq!(locked_rev(&lock2, "b"), rev_b1);
    let changed: Vec<(&str, &str)> = lock1
        .lines()
        .zip(lock2.lines())
        .filter(|(x, y)| x != y)
        .collect();
    // (lastModified changes too unless both commits fell in the same second)
    assert!(
        (2..=3).contains(&changed.len()),
        "only a's lastModified, narHash and rev change: {changed:?}"
    );
    assert!(
        changed.iter().all(|(x, _)| x.contains("lastModified")
            || x.contains("narHash")
            || x.contains(&rev_a1)),
        "{changed:?}"
    );

    // `update` with no names moves everything; an unknown name is an error.
    ok(&fx.run_in("f", &["flake", "update"]));
    let lock3 = fs::read_to_string(fx.path("f/flake.lock")).unwrap();
    assert_ne!(locked_rev(&lock3, "b"), rev_b1);
    let e = failed(&fx.run_in("f", &["flake", "update", "c"]));
    assert!(e.contains("no input 'c'") && e.contains("a, b, bb"), "{e}");

    // Metadata shows the inputs; dropping an input and re-locking removes it.
    let m = ok(&fx.run_in("f", &["flake", "metadata"]));
    assert!(m.contains("Description:   a test flake"), "{m}");
    assert!(
        m.contains(&format!("a: git+file://{}", fx.path("a").display())),
        "{m}"
    );
    let mj = json(&fx.run_in("f", &["flake", "metadata", "--json"]));
    assert_eq!(mj["locks"]["nodes"]["root"]["inputs"]["b"], "b");
    let text = fs::read_to_string(fx.path("f/flake.nix")).unwrap();
    let b_line = format!(
        "      b = {{ url = \"git+file://{}\"; flake = false; }};",
        fx.path("b").display()
    );
    fx.write("f/flake.nix", &text.replace(&b_line, ""));
    let e = failed(&fx.run_in("f", &["build", "--dry-run"]));
    assert!(
        e.contains("input 'b' is locked but no longer declared"),
        "{e}"
    );
    assert!(e.contains("rocmx flake lock"), "{e}");
    let o = fx.run_in("f", &["flake", "lock"]);
    ok(&o);
    assert!(err(&o).contains("Removed input 'b'"), "{}", err(&o));
    assert!(!fs::read_to_string(fx.path("f/flake.lock"))
        .unwrap()
        .contains("\"b\""));
}

#[test]
fn git_input_pinned_by_rev_and_ref() {
    if !have_git() {
        eprintln!("skipped: no git");
        return;
    }
    let fx = Fx::new();
    let rev1 = git_repo(&fx, "r", "v.txt", "one");
    fs::write(fx.path("r/v.txt"), "two").unwrap();
    git(&fx.path("r"), &["commit", "-qam", "two"]);
    fx.bb("f/bb");
    let inputs = format!(
        r#"{BB_INPUT} old = {{ url = "git+file://{}?rev={rev1}"; flake = false; }};"#,
        fx.path("r").display()
    );
    fx.write(
        "f/flake.nix",
        &flake_with(
            &inputs,
            "",
            r#"{ packages.${builtins.currentSystem}.default = mk (builtins.readFile "${inputs.old}/v.txt"); }"#,
        ),
    );
    let o = fx.run_in("f", &["build", "--dry-run", "--json"]);
    assert_eq!(names(&planned(&o)), vec!["one.drv"]);
}

// ---- parameters ---------------------------------------------------------------------

fn params_flake(fx: &Fx) {
    fx.bb("f/bb");
    fx.write(
        "f/flake.nix",
        &flake_with(
            BB_INPUT,
            r#"
      debug = { type = "bool"; default = false; description = "assertions"; };
      jobs = { type = "int"; default = 2; };
      flavour = { type = "string"; default = "plain"; };
      extras = { type = "list of string"; default = [ ]; };
      gfxTargets = { type = "gfx targets"; default = [ "gfx90a" ]; description = "GPUs"; };"#,
            r#"{
      packages.${builtins.currentSystem}.default = mk (builtins.concatStringsSep "-" ([
        config.flavour (if config.debug then "debug" else "release") (toString config.jobs)
      ] ++ config.extras ++ map (builtins.replaceStrings [":"] ["_"]) config.gfxTargets));
    }"#,
        ),
    );
}

#[test]
fn parameters_reach_outputs_by_type() {
    let fx = Fx::new();
    params_flake(&fx);
    let o = fx.run_in("f", &["build", "--dry-run", "--json"]);
    assert_eq!(names(&planned(&o)), vec!["plain-release-2-gfx90a.drv"]);
    let j = json(&fx.run_in("f", &["build", "--dry-run", "--json"]));
    assert_eq!(
        j["parameters"],
        serde_json::json!({"debug": false, "extras": [], "flavour": "plain", "gfxTargets": ["gfx90a"], "jobs": 2})
    );
    let o = fx.run_in(
        "f",
        &[
            "build",
            "--dry-run",
            "--json",
            "--set",
            "debug=true",
            "--set",
            "jobs=16",
            "--set",
            "flavour=fancy",
            "--set",
            "extras=x, y",
            "--gfx",
            "gfx942,gfx90a:xnack-",
        ],
    );
    assert!(
        planned(&o)[0].ends_with("fancy-debug-16-x-y-gfx942-gfx90a_xnack-.drv"),
        "{:?}",
        planned(&o)
    );
    // --set gfxTargets=… is the same as --gfx.
    let a = planned(&fx.run_in("f", &["build", "--dry-run", "--json", "--gfx", "gfx1100"]));
    let b = planned(&fx.run_in(
        "f",
        &[
            "build",
            "--dry-run",
            "--json",
            "--set",
            "gfxTargets=gfx1100",
        ],
    ));
    assert_eq!(a, b);
    // `all` is every known target.
    let all = json(&fx.run_in("f", &["flake", "show", "--json", "--gfx", "all"]));
    let all = all["parameters"]["gfxTargets"]["value"]
        .as_array()
        .unwrap()
        .clone();
    assert!(
        all.len() > 20 && all.contains(&"gfx1100".into()) && all.contains(&"gfx906".into()),
        "{all:?}"
    );

    let show = json(&fx.run_in("f", &["flake", "show", "--json", "--set", "jobs=3"]));
    assert_eq!(
        show["parameters"]["jobs"],
        serde_json::json!({"type": "int", "default": 2, "value": 3})
    );
    assert_eq!(show["parameters"]["gfxTargets"]["type"], "gfx targets");
    assert_eq!(show["parameters"]["debug"]["description"], "assertions");
    let text = ok(&fx.run_in("f", &["flake", "show"]));
    assert!(
        text.contains("gfxTargets (gfx targets) = gfx90a [default: gfx90a]: GPUs"),
        "{text}"
    );
    assert!(text.contains("default: package"), "{text}");
}

#[test]
fn parameter_errors_list_the_declared_ones() {
    let fx = Fx::new();
    params_flake(&fx);
    let before = fx.store_listing();
    let e = failed(&fx.run_in("f", &["build", "--dry-run", "--set", "degub=true"]));
    assert!(
        e.contains("unknown parameter 'degub' (did you mean 'debug'?)"),
        "{e}"
    );
    assert!(
        e.contains("debug (bool), extras (list of string), flavour (string), gfxTargets (gfx targets), jobs (int)"),
        "{e}"
    );
    let e = failed(&fx.run_in("f", &["build", "--dry-run", "--set", "jobs=many"]));
    assert!(
        e.contains("bad value for parameter 'jobs' (int): 'many' is not an int"),
        "{e}"
    );
    let e = failed(&fx.run_in("f", &["build", "--dry-run", "--set", "debug=perhaps"]));
    assert!(e.contains("'perhaps' is not a bool"), "{e}");
    let e = failed(&fx.run_in("f", &["build", "--dry-run", "--set", "nonsense"]));
    assert!(e.contains("is not NAME=VALUE"), "{e}");
    let e = failed(&fx.run_in("f", &["build", "--dry-run", "--gfx", "gfx91a"]));
    assert!(
        e.contains("unknown gfx target 'gfx91a'") && e.contains("gfx90a"),
        "{e}"
    );
    let e = failed(&fx.run_in("f", &["build", "--dry-run", "--gfx", "gfx1100:xnack+"]));
    assert!(e.contains("gfx1100 does not support xnack"), "{e}");
    let e = failed(&fx.run_in(
        "f",
        &["build", "--dry-run", "--set", "gfxTargets=gfx90a,gfx91a"],
    ));
    assert!(e.contains("gfxTargets") && e.contains("gfx91a"), "{e}");
    // --gfx native without a GPU (an empty fake sysfs) fails clearly.
    fs::create_dir_all(fx.path("sys/class/kfd/kfd/topology/nodes/0")).unwrap();
    fx.write(
        "sys/class/kfd/kfd/topology/nodes/0/properties",
        "gfx_target_version 0\n",
    );
    let o = Command::new(BIN)
        .args(["--store"])
        .arg(fx.path("store"))
        .args(["build", "--dry-run", "--gfx", "native"])
        .current_dir(fx.path("f"))
        .env("ROCMX_SYSFS_ROOT", fx.path("sys"))
        .env_remove("HSA_OVERRIDE_GFX_VERSION")
        .output()
        .unwrap();
    let e = failed(&o);
    assert!(e.contains("no AMD GPU found") && e.contains("--gfx"), "{e}");
    // A wrongly typed default is an error at the declaration.
    let text = fs::read_to_string(fx.path("f/flake.nix")).unwrap();
    fx.write(
        "f/flake.nix",
        &text.replace("default = 2;", "default = \"two\";"),
    );
    let e = failed(&fx.run_in("f", &["build", "--dry-run"]));
    assert!(
        e.contains("the default of parameter 'jobs' (int) is wrong: it is a string"),
        "{e}"
    );
    assert!(e.contains("flake.nix:"), "{e}");
    // Nothing reached the store but the bb input fetched by earlier runs.
    let after = fx.store_listing();
    assert!(
        after
            .iter()
            .all(|p| before.contains(p) || p.ends_with("-source")),
        "{after:?}"
    );
}

/// The gfx-matrix example: only the package that compiles GPU code changes
/// with the target list.
#[test]
fn gfx_choice_changes_only_gpu_packages() {
    let fx = Fx::new();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    fx.write(
        "examples/gfx-matrix/flake.nix",
        &fs::read_to_string(repo.join("examples/gfx-matrix/flake.nix")).unwrap(),
    );
    for f in ["gpu.nix", "gfx-targets.json"] {
        fx.write(
            &format!("exprs/lib/{f}"),
            &fs::read_to_string(repo.join("exprs/lib").join(f)).unwrap(),
        );
    }
    fx.bb("examples/hello/bb");
    let plan = |attr: &str, gfx: &str| {
        planned(&fx.run_in(
            "examples/gfx-matrix",
            &["build", "--dry-run", "--json", attr, "--gfx", gfx],
        ))
    };
    let one = plan(".#kernels", "gfx90a");
    let two = plan(".#kernels", "gfx90a,gfx1100");
    assert_ne!(one, two, "kernels depends on the targets");
    for pkg in [".#runtime", ".#tools"] {
        assert_eq!(
            plan(pkg, "gfx90a"),
            plan(pkg, "gfx90a,gfx1100"),
            "{pkg} is shared"
        );
        assert_eq!(plan(pkg, "gfx90a"), plan(pkg, "all"), "{pkg} is shared");
    }
    let app1 = plan(".#app", "gfx90a");
    let app2 = plan(".#app", "gfx90a,gfx1100");
    let runtime: Vec<&String> = app1
        .iter()
        .filter(|p| p.ends_with("-runtime.drv"))
        .collect();
    assert_eq!(runtime.len(), 1);
    assert!(
        app2.contains(runtime[0]),
        "app's runtime is the same for both"
    );
    // Unsupported targets only: the error names the package and both lists.
    let e = failed(&fx.run_in(
        "examples/gfx-matrix",
        &["build", "--dry-run", ".#kernels", "--gfx", "gfx1010"],
    ));
    assert!(
        e.contains("kernels supports none of the requested gfx targets: requested [gfx1010], supported [gfx906"),
        "{e}"
    );
    // The GPU-free package still evaluates with that choice.
    ok(&fx.run_in(
        "examples/gfx-matrix",
        &["build", "--dry-run", ".#runtime", "--gfx", "gfx1010"],
    ));
}

// ---- getFlake -----------------------------------------------------------------------

#[test]
fn get_flake_needs_a_locked_reference() {
    let fx = Fx::new();
    fx.bb("f/bb");
    fx.write(
        "f/flake.nix",
        &flake_with(
            BB_INPUT,
            "",
            r#"{ packages.${builtins.currentSystem}.default = mk "via-getflake"; }"#,
        ),
    );
    ok(&fx.run_in("f", &["flake", "lock"]));
    let hash = Command::new("nix-hash")
        .args(["--type", "sha256"])
        .arg(fx.path("f"))
        .output();
    let dir = fx.path("f").display().to_string();
    // Unlocked: refused (evaluation is pure).
    let expr =
        format!(r#"(builtins.getFlake "path:{dir}").packages.${{builtins.currentSystem}}.default"#);
    let e = failed(&fx.run_in(".", &["build", "--dry-run", "--expr", &expr]));
    assert!(e.contains("is not locked"), "{e}");
    // Locked by the tree's NAR hash (computed here by Nix when it is installed).
    let Ok(h) = hash else {
        eprintln!("skipped the locked half: no nix-hash");
        return;
    };
    if !h.status.success() {
        return;
    }
    let sri = format!("sha256-{}", hex_to_base64(out(&h).trim()));
    let expr = format!(
        r#"(builtins.getFlake "path:{dir}?narHash={}").packages.${{builtins.currentSystem}}.default"#,
        sri.replace('=', "%3D")
            .replace('+', "%2B")
            .replace('/', "%2F")
    );
    let o = fx.run_in(".", &["build", "--dry-run", "--json", "--expr", &expr]);
    assert_eq!(names(&planned(&o)), vec!["via-getflake.drv"]);
    let bad = format!(
        r#"(builtins.getFlake "path:{dir}?narHash=sha256-{}%3D").packages.${{builtins.currentSystem}}.default"#,
        "A".repeat(43)
    );
    let e = failed(&fx.run_in(".", &["build", "--dry-run", "--expr", &bad]));
    assert!(e.contains("narHash") || e.contains("changed"), "{e}");
}

// ---- input flakes, follows ----------------------------------------------------------

#[test]
fn input_flakes_are_locked_transitively_and_follow() {
    let fx = Fx::new();
    fx.bb("f/bb");
    // lib is a flake with its own input `data`, and a parameter left at its default.
    fx.write("lib/data/v", "lib's data\n");
    fx.write("mine/v", "my data\n");
    fx.write(
        "lib/flake.nix",
        r#"{
  inputs.data = { url = "path:./data"; flake = false; };
  config.flavour = { type = "string"; default = "lib-default"; };
  outputs = { self, config, data }: {
    v = builtins.readFile "${data}/v";
    flavour = config.flavour;
    me = self.outPath;
  };
}
"#,
    );
    let lib_path = fx.path("lib").display().to_string();
    let inputs = format!(
        r#"{BB_INPUT}
      lib.url = "path:{lib_path}";
      viaLib = {{ url = "path:{lib_path}"; inputs.data.follows = "mine"; }};
      mine = {{ url = "path:./mine-link"; flake = false; }};"#
    );
    std::os::unix::fs::symlink(fx.path("mine"), fx.path("f/mine-link")).unwrap();
    fx.write(
        "f/flake.nix",
        &flake_with(
            &inputs,
            "",
            r#"{ packages.${builtins.currentSystem}.default = mk "x-${builtins.replaceStrings ["\n" " " "'"] ["" "-" ""] inputs.lib.v}-${builtins.replaceStrings ["\n" " " "'"] ["" "-" ""] inputs.viaLib.v}-${inputs.lib.flavour}"; }"#,
        ),
    );
    let o = fx.run_in("f", &["build", "--dry-run", "--json"]);
    assert_eq!(
        names(&planned(&o)),
        vec!["x-libs-data-my-data-lib-default.drv"]
    );
    let lock: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(fx.path("f/flake.lock")).unwrap()).unwrap();
    let nodes = &lock["nodes"];
    assert_eq!(nodes["lib"]["inputs"]["data"], "data", "{lock:#}");
    assert_eq!(nodes["data"]["original"]["path"], "./data");
    assert_eq!(
        nodes["viaLib"]["inputs"]["data"],
        serde_json::json!(["mine"])
    );
    // Re-locking keeps the same bytes with nested nodes and follows too.
    let before = fs::read(fx.path("f/flake.lock")).unwrap();
    ok(&fx.run_in("f", &["flake", "lock"]));
    assert_eq!(fs::read(fx.path("f/flake.lock")).unwrap(), before);
    let m = ok(&fx.run_in("f", &["flake", "metadata"]));
    assert!(m.contains("data follows input 'mine'"), "{m}");
    // A follows path that leads nowhere is an error.
    let text = fs::read_to_string(fx.path("f/flake.nix")).unwrap();
    fx.write(
        "f/flake.nix",
        &text.replace("follows = \"mine\"", "follows = \"nothere\""),
    );
    let e = failed(&fx.run_in("f", &["flake", "lock"]));
    assert!(e.contains("names no input 'nothere'"), "{e}");
}

#[test]
fn eval_takes_installables() {
    let fx = Fx::new();
    params_flake(&fx);
    let o = fx.run_in(
        "f",
        &["eval", "--json", ".#default.name", "--gfx", "gfx942"],
    );
    assert_eq!(ok(&o).trim(), "\"plain-release-2-gfx942\"");
    let o = fx.run_in("f", &["eval", "--strict", ".#config"]);
    assert!(
        ok(&o).contains("gfxTargets = [ \"gfx90a\" ]"),
        "{}",
        out(&o)
    );
    let e = failed(&fx.run_in("f", &["eval", ".#default", "--arg", "x", "1"]));
    assert!(e.contains("do not apply to a flake"), "{e}");
    // A file is still a file.
    fx.write("f/plain.nix", "{ x ? 1 }: x + 1");
    assert_eq!(
        ok(&fx.run_in("f", &["eval", "plain.nix", "--arg", "x", "2"])).trim(),
        "3"
    );
}
