//! Hostile and malformed input to `rocmx eval`: every case must end in a clean
//! error with a location (exit 1), never a panic, a stack overflow, a signal or
//! a hang. Also the deep-recursion guarantees of issue 2.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

struct Outcome {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Runs `rocmx eval ARGS…` with a generous deadline; a hang fails the test.
fn rocmx_eval(args: &[&str], dir: &Path) -> Outcome {
    let mut child = Command::new(env!("CARGO_BIN_EXE_rocmx"))
        .arg("eval")
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn rocmx");
    let start = Instant::now();
    loop {
        if child.try_wait().expect("wait").is_some() {
            break;
        }
        if start.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            panic!("rocmx eval {args:?} hung for 120 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().expect("output");
    Outcome {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Asserts a clean evaluation error whose message mentions `needle` and a
/// `file:line:col` location.
fn assert_clean_error(o: &Outcome, needle: &str, file_name: &str) {
    assert_eq!(
        o.code,
        Some(1),
        "expected exit 1 (an error, not a crash); stderr:\n{}",
        o.stderr
    );
    assert!(o.stderr.contains("error:"), "no error line:\n{}", o.stderr);
    assert!(
        o.stderr.contains(needle),
        "error should mention {needle:?}:\n{}",
        o.stderr
    );
    assert!(
        o.stderr.contains(&format!("{file_name}:")),
        "error should name a location in {file_name}:\n{}",
        o.stderr
    );
    assert!(!o.stderr.contains("panicked"), "panic:\n{}", o.stderr);
}

fn write(dir: &Path, name: &str, content: &[u8]) {
    std::fs::File::create(dir.join(name))
        .and_then(|mut f| f.write_all(content))
        .expect("write fixture");
}

#[test]
fn deeply_nested_parentheses() {
    let d = tempfile::tempdir().unwrap();
    let n = 100_000;
    let src = format!("{}1{}", "(".repeat(n), ")".repeat(n));
    write(d.path(), "parens.nix", src.as_bytes());
    let o = rocmx_eval(&["parens.nix"], d.path());
    // Either it evaluates (to 1) or it is refused cleanly with a location.
    if o.code == Some(0) {
        assert_eq!(o.stdout.trim(), "1");
    } else {
        assert_clean_error(&o, "nested", "parens.nix");
    }
}

#[test]
fn deeply_nested_lists() {
    let d = tempfile::tempdir().unwrap();
    let n = 100_000;
    let src = format!("{}1{}", "[".repeat(n), "]".repeat(n));
    write(d.path(), "lists.nix", src.as_bytes());
    let o = rocmx_eval(&["--strict", "lists.nix"], d.path());
    if o.code == Some(0) {
        assert!(o.stdout.starts_with("[ [ [ "));
    } else {
        assert_clean_error(&o, "nested", "lists.nix");
    }
}

#[test]
fn fifty_megabyte_string_literal() {
    let d = tempfile::tempdir().unwrap();
    let mut src = Vec::with_capacity(50 * 1024 * 1024 + 64);
    src.extend_from_slice(b"builtins.stringLength \"");
    src.resize(src.len() + 50 * 1024 * 1024, b'x');
    src.extend_from_slice(b"\"");
    write(d.path(), "big.nix", &src);
    let o = rocmx_eval(&["big.nix"], d.path());
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert_eq!(o.stdout.trim(), (50 * 1024 * 1024).to_string());
}

#[test]
fn unterminated_string_at_eof() {
    let d = tempfile::tempdir().unwrap();
    write(d.path(), "s.nix", b"let x = \"abc\nin x");
    let o = rocmx_eval(&["s.nix"], d.path());
    assert_clean_error(&o, "string", "s.nix");
    write(d.path(), "i.nix", b"''abc\n");
    let o = rocmx_eval(&["i.nix"], d.path());
    assert_clean_error(&o, "string", "i.nix");
}

#[test]
fn unterminated_comment_at_eof() {
    let d = tempfile::tempdir().unwrap();
    write(d.path(), "c.nix", b"1 + /* never closed\n");
    let o = rocmx_eval(&["c.nix"], d.path());
    assert_clean_error(&o, "comment", "c.nix");
}

#[test]
fn invalid_utf8() {
    let d = tempfile::tempdir().unwrap();
    write(d.path(), "u.nix", b"\"abc\xff\xfe\"");
    let o = rocmx_eval(&["u.nix"], d.path());
    assert_eq!(o.code, Some(1), "{}", o.stderr);
    assert!(o.stderr.contains("UTF-8"), "{}", o.stderr);
    assert!(o.stderr.contains("u.nix"), "{}", o.stderr);
}

#[test]
fn self_importing_file() {
    let d = tempfile::tempdir().unwrap();
    write(d.path(), "self.nix", b"import ./self.nix");
    let o = rocmx_eval(&["self.nix"], d.path());
    assert_clean_error(&o, "infinite recursion", "self.nix");
}

#[test]
fn let_x_equals_x() {
    let d = tempfile::tempdir().unwrap();
    write(d.path(), "x.nix", b"let x = x; in x");
    let o = rocmx_eval(&["x.nix"], d.path());
    assert_clean_error(&o, "infinite recursion", "x.nix");
}

#[test]
fn recursion_depth_ten_thousand_works() {
    let d = tempfile::tempdir().unwrap();
    write(
        d.path(),
        "deep.nix",
        b"let f = n: if n == 0 then 0 else 1 + f (n - 1); in f 10000",
    );
    let o = rocmx_eval(&["deep.nix"], d.path());
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert_eq!(o.stdout.trim(), "10000");
}

#[test]
fn past_max_call_depth_is_a_clean_error() {
    let d = tempfile::tempdir().unwrap();
    write(
        d.path(),
        "deep.nix",
        b"let f = n: if n == 0 then 0 else 1 + f (n - 1); in f 1000000",
    );
    let o = rocmx_eval(&["--max-call-depth", "100000", "deep.nix"], d.path());
    assert_clean_error(&o, "max-call-depth", "deep.nix");
    // Unbounded recursion with the default limit also stops cleanly.
    write(d.path(), "inf.nix", b"let f = x: f (x + 1); in f 0");
    let o = rocmx_eval(&["inf.nix"], d.path());
    assert_clean_error(&o, "max-call-depth", "inf.nix");
}

#[test]
fn undefined_variable_suggests_a_name() {
    let d = tempfile::tempdir().unwrap();
    write(d.path(), "v.nix", b"let value = 1; in valeu");
    let o = rocmx_eval(&["v.nix"], d.path());
    assert_clean_error(&o, "undefined variable 'valeu'", "v.nix");
    assert!(o.stderr.contains("did you mean 'value'"), "{}", o.stderr);
}

#[test]
fn unusable_derivation_output_names_are_clean_errors_at_the_attribute() {
    // `..` and `""` used to evaluate and write a `.drv` that rocmx's own parser
    // rejects; every bad `outputs` must stop evaluation, pointing at the attribute.
    let d = tempfile::tempdir().unwrap();
    for (outputs, needle) in [
        (r#"[ ".." ]"#, "invalid derivation output name '..'"),
        (
            r#"[ "" ]"#,
            "derivation cannot have an empty set of outputs",
        ),
        (r#"[ "drv" ]"#, "invalid derivation output name 'drv'"),
        (r#"[ "out" "out" ]"#, "duplicate derivation output 'out'"),
        (r#"[ "a/b" ]"#, "invalid derivation output name 'a/b'"),
    ] {
        let text = format!(
            "builtins.seq (derivationStrict {{\n  name = \"a\"; system = \"x\"; builder = \"b\";\n  outputs = {outputs};\n}}).drvPath 1\n"
        );
        write(d.path(), "outs.nix", text.as_bytes());
        let o = rocmx_eval(&["outs.nix"], d.path());
        assert_clean_error(&o, needle, "outs.nix");
        assert!(o.stderr.contains("outs.nix:3:3"), "{outputs}: {}", o.stderr);
    }
}
