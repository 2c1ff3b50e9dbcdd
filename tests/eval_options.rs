//! The evaluation options every evaluating command shares (issue 14, items 5 and 11):
//! `<NAME>` file arguments found in the search path, `--option` on every command
//! (`abort-on-warn`, `restrict-eval`, `allow-import-from-derivation`,
//! `max-call-depth`, an unknown one refused), `eval --read-write-mode`, and `build`
//! honouring the `--lint-*` levels it used to ignore.

mod common;
use common::fixture::Work;
use common::{err, make_writable, out};

use std::fs;
use std::path::Path;
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_rocmx");

fn rocmx(dir: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .env_remove("ROCMX_STORE")
        .env_remove("NIX_PATH")
        .env_remove("ROCMX_PATH")
        .env("ROCMX_CONFIG", "")
        .env("XDG_CONFIG_HOME", dir.join("no-config"))
        .current_dir(dir)
        .arg("--store")
        .arg(dir.join("root"))
        .args(args)
        .output()
        .expect("run rocmx")
}

/// A directory `sp/foo/default.nix` to find through the search path.
fn search_tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path().join("sp/foo")).unwrap();
    fs::write(
        dir.path().join("sp/foo/default.nix"),
        "{ x = 42; y = { z = 1; }; }\n",
    )
    .unwrap();
    dir
}

#[test]
fn a_file_argument_in_angle_brackets_is_looked_up_in_the_search_path() {
    let dir = search_tree();
    let d = dir.path();
    let named = format!("foo={}", d.join("sp/foo").display());
    let plain = d.join("sp").display().to_string();
    for include in [&named, &plain] {
        let o = rocmx(d, &["eval", "-I", include, "<foo>", "-A", "x"]);
        assert_eq!(out(&o), "42\n", "-I {include}: {}", err(&o));
    }
    let o = rocmx(d, &["eval", "-I", &plain, "<foo>", "-A", "y.q"]);
    assert!(
        err(&o).contains("attribute 'q' in selection path 'y.q' not found"),
        "{}",
        err(&o)
    );
    let o = rocmx(d, &["eval", "<nope>"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        err(&o).contains("file 'nope' was not found in the Nix search path"),
        "{}",
        err(&o)
    );
    assert!(!err(&o).contains("reading file"), "{}", err(&o));
    make_writable(d);
}

#[test]
fn build_takes_angle_bracket_files_and_its_lint_options() {
    let Some(w) = Work::with_busybox(&["echo"]) else {
        return;
    };
    fs::create_dir_all(w.path("sp/pkg")).unwrap();
    w.derivation("sp/pkg/default.nix", "found", "echo found > $out");
    fs::rename(w.path("bb"), w.path("sp/pkg/bb")).unwrap();
    let sp = w.path("sp").display().to_string();
    let o = w.run(&["build", "--no-link", "-I", &sp, "<pkg>", "--json"]);
    assert!(o.status.success(), "{}", err(&o));
    assert!(out(&o).contains("-found"), "{}", out(&o));
    // --lint-url-literals fatal was silently ignored by build.
    w.write("url.nix", "builtins.seq http://example.invalid/x (derivation { name = \"u\"; system = \"x\"; builder = \"/b\"; })\n");
    let o = w.run(&[
        "build",
        "--no-link",
        "./url.nix",
        "--lint-url-literals",
        "fatal",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", err(&o));
    assert!(err(&o).contains("URL literal"), "{}", err(&o));
}

#[test]
fn abort_on_warn_max_call_depth_and_unknown_settings_work_on_every_command() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let warn = "builtins.warn \"careful\" 1";
    let o = rocmx(d, &["eval", "--expr", warn]);
    assert_eq!(out(&o), "1\n");
    assert!(
        err(&o).contains("evaluation warning: careful"),
        "{}",
        err(&o)
    );
    for cmd in [
        &["eval", "--expr", warn][..],
        &["build", "--no-link", "--expr", warn],
    ] {
        let mut args = cmd.to_vec();
        args.extend(["--option", "abort-on-warn", "true"]);
        let o = rocmx(d, &args);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", err(&o));
        assert!(err(&o).contains("careful"), "{}", err(&o));
        assert!(err(&o).contains("abort-on-warn"), "{}", err(&o));
    }
    // The global flag also goes before the command.
    let o = rocmx(
        d,
        &["--option", "abort-on-warn", "true", "eval", "--expr", warn],
    );
    assert_eq!(o.status.code(), Some(1), "{}", err(&o));
    // The setting, and the flag over it.
    let deep = "let f = n: if n == 0 then 0 else f (n - 1); in f 500";
    let o = rocmx(
        d,
        &["eval", "--expr", deep, "--option", "max-call-depth", "50"],
    );
    assert!(
        err(&o).contains("max-call-depth exceeded (50)"),
        "{}",
        err(&o)
    );
    let o = rocmx(
        d,
        &[
            "eval",
            "--expr",
            deep,
            "--option",
            "max-call-depth",
            "50",
            "--max-call-depth",
            "1000",
        ],
    );
    assert_eq!(out(&o), "0\n", "{}", err(&o));
    // A misspelt setting is refused by any command, with the closest one.
    let o = rocmx(d, &["gfx", "list", "--option", "abort-on-warm", "true"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        err(&o).contains("did you mean 'abort-on-warn'"),
        "{}",
        err(&o)
    );
    let o = rocmx(
        d,
        &["eval", "--expr", "1", "--option", "restrict-eval", "maybe"],
    );
    assert!(err(&o).contains("expected true or false"), "{}", err(&o));
    make_writable(d);
}

#[test]
fn restrict_eval_allows_only_the_search_path_and_the_store() {
    let dir = search_tree();
    let d = dir.path();
    fs::write(d.join("outside.nix"), "1\n").unwrap();
    let o = rocmx(
        d,
        &["eval", "./outside.nix", "--option", "restrict-eval", "true"],
    );
    assert_eq!(o.status.code(), Some(1));
    let e = err(&o);
    assert!(e.contains("is forbidden in restricted mode"), "{e}");
    assert!(
        e.contains(&format!("'{}'", d.join("outside.nix").display())),
        "{e}"
    );
    let sp = d.join("sp").display().to_string();
    let o = rocmx(
        d,
        &[
            "eval",
            "-I",
            &sp,
            "<foo>",
            "-A",
            "x",
            "--option",
            "restrict-eval",
            "true",
        ],
    );
    assert_eq!(out(&o), "42\n", "{}", err(&o));
    // A relative search path entry counts from the working directory.
    let o = rocmx(
        d,
        &[
            "eval",
            "-I",
            "sp",
            "<foo>",
            "-A",
            "x",
            "--option",
            "restrict-eval",
            "true",
        ],
    );
    assert_eq!(out(&o), "42\n", "{}", err(&o));
    // Reading a file outside the search path from an allowed one.
    let read = format!("builtins.readFile {}", d.join("outside.nix").display());
    let o = rocmx(
        d,
        &[
            "eval",
            "-I",
            &sp,
            "--expr",
            &read,
            "--option",
            "restrict-eval",
            "true",
        ],
    );
    assert!(
        err(&o).contains("forbidden in restricted mode"),
        "{}",
        err(&o)
    );
    make_writable(d);
}

#[test]
fn import_from_derivation_can_be_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let ifd = "let d = derivation { name = \"gen\"; system = \"x86_64-linux\"; builder = \"/b\"; }; in builtins.readFile \"${d}/x\"";
    let o = rocmx(
        d,
        &[
            "eval",
            "--expr",
            ifd,
            "--option",
            "allow-import-from-derivation",
            "false",
        ],
    );
    assert_eq!(o.status.code(), Some(1));
    let e = err(&o);
    assert!(
        e.contains(
            "during evaluation because the option 'allow-import-from-derivation' is disabled"
        ),
        "{e}"
    );
    assert!(e.contains("-gen.drv^out'"), "{e}");
    make_writable(d);
}

#[test]
fn read_write_mode_really_adds_the_copied_sources() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fs::write(d.join("data.txt"), "hello\n").unwrap();
    let expr = "\"${./data.txt}\"";
    let o = rocmx(d, &["eval", "--expr", expr]);
    let path = out(&o).trim().trim_matches('"').to_string();
    assert!(
        path.starts_with("/rocmx/store/") && path.ends_with("-data.txt"),
        "{path}"
    );
    let name = path.trim_start_matches("/rocmx/store/").to_string();
    assert!(
        !d.join("root/store").join(&name).exists(),
        "written without --read-write-mode"
    );
    let o = rocmx(d, &["eval", "--read-write-mode", "--expr", expr]);
    assert_eq!(out(&o).trim().trim_matches('"'), path, "{}", err(&o));
    let real = d.join("root/store").join(&name);
    assert_eq!(fs::read_to_string(&real).unwrap(), "hello\n");
    let o = rocmx(d, &["path-info", &path]);
    assert!(o.status.success(), "not registered: {}", err(&o));
    make_writable(d);
}
