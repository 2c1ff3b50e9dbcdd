//! `rocmx eval` behaviours that are not about bad input: output forms, search
//! path, auto-calling, and cleanliness of the host afterwards.

use std::process::Command;

fn rocmx_eval(args: &[&str], tmpdir: &std::path::Path) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_rocmx"))
        .arg("eval")
        .args(args)
        .env("TMPDIR", tmpdir)
        .env_remove("NIX_PATH")
        .env_remove("ROCMX_PATH")
        .output()
        .expect("run rocmx");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Regression: texts read back during evaluation (here `<nix/fetchurl.nix>`)
/// were written to a temporary directory that was never removed.
#[test]
fn leaves_no_temporary_files() {
    let tmp = tempfile::tempdir().unwrap();
    let (code, out, err) = rocmx_eval(
        &[
            "--strict",
            "-E",
            "builtins.isFunction (import <nix/fetchurl.nix>)",
        ],
        tmp.path(),
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.trim(), "true");
    let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
    assert!(left.is_empty(), "temporary files left behind: {left:?}");
}

#[test]
fn json_output_and_auto_call() {
    let tmp = tempfile::tempdir().unwrap();
    let (code, out, err) = rocmx_eval(
        &["--json", "-E", "{ a = [ 1 \"x\" null true ]; b = 1.5; }"],
        tmp.path(),
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.trim(), r#"{"a":[1,"x",null,true],"b":1.5}"#);
    let f = tmp.path().join("f.nix");
    std::fs::write(&f, "{ x, y ? 2 }: x * y").unwrap();
    let (code, out, err) = rocmx_eval(&["--arg", "x", "21", f.to_str().unwrap()], tmp.path());
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.trim(), "42");
    let (code, out, _) = rocmx_eval(
        &["--argstr", "x", "hi", "-E", "{ x }: x + \"!\""],
        tmp.path(),
    );
    assert_eq!(code, 0);
    assert_eq!(out.trim(), "\"hi!\"");
}

#[test]
fn search_path_entries() {
    let tmp = tempfile::tempdir().unwrap();
    let lib = tmp.path().join("mylib");
    std::fs::create_dir(&lib).unwrap();
    std::fs::write(lib.join("default.nix"), "{ answer = 42; }").unwrap();
    let spec = format!("mylib={}", lib.display());
    let (code, out, err) = rocmx_eval(&["-I", &spec, "-E", "(import <mylib>).answer"], tmp.path());
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.trim(), "42");
    let (code, _, err) = rocmx_eval(&["-E", "<nowhere>"], tmp.path());
    assert_eq!(code, 1);
    assert!(
        err.contains("was not found in the Nix search path"),
        "{err}"
    );
}
