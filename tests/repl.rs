//! End-to-end tests of `rocmx repl`, driving the real binary against a store in
//! a temporary directory (`--store DIR`; `ROCMX_CONFIG` empty, `XDG_CONFIG_HOME`
//! and `XDG_STATE_HOME` inside the directory).
//!
//! Piped standard input (no terminal) is how scripts drive it; a real terminal
//! is tested through `script` (util-linux) or, failing that, tmux, with a
//! transcript of keystrokes including Tab; `:b` builds with a static busybox and
//! skips, saying why, when busybox or the sandbox is missing.

mod common;
use common::fixture::{busybox_or_skip, Work, BIN};
use common::{err, out};

use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
/// The prompt, without its trailing space (tmux's captures drop it).
const PROMPT: &str = "rocmx-repl>";

/// A temporary directory with `root/` (the store), `state/`, `config/` and
/// `work/` (where the repl runs).
fn fixture() -> Work {
    let w = Work::empty()
        .in_work_dir()
        .env_path("XDG_CONFIG_HOME", "config")
        .env_path("XDG_STATE_HOME", "state");
    for d in ["state", "config"] {
        fs::create_dir_all(w.path(d)).unwrap();
    }
    w
}

impl Work {
    /// `rocmx repl ARGS…` with `input` on standard input.
    fn repl(&self, args: &[&str], input: &str) -> Output {
        let mut child = self
            .command(&["repl"])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run rocmx repl");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        let o = child.wait_with_output().expect("wait for rocmx repl");
        assert!(
            o.status.success(),
            "rocmx repl failed ({:?}):\nstdout: {}\nstderr: {}",
            o.status,
            out(&o),
            err(&o)
        );
        o
    }
}

const SET_NIX: &str =
    r#"{ greeting = "hello"; nested = { inner = [ 1 "two" { deep = true; } ]; }; n = 41; }"#;

#[test]
fn piped_session() {
    let f = fixture();
    f.write("work/set.nix", SET_NIX);
    let input = "\
1 + 2
x = 40
x + 2
:t x
:t \"s\"
:p { a = { b = [ 1 \"two\" ]; }; c = 2.5; }
:l set.nix
n + 1
greeting
:p nested
undefinedVar + 1
\"after the error\"
:q
\"never evaluated\"
";
    let o = f.repl(&[], input);
    let stdout = out(&o);
    let expected = "\
3
42
an integer
a string
{ a = { b = [ 1 \"two\" ]; }; c = 2.5; }
Added 3 variables.
42
\"hello\"
{ inner = [ 1 \"two\" { deep = true; } ]; }
\"after the error\"
";
    assert_eq!(stdout, expected, "stderr: {}", err(&o));
    // The error is rendered as `rocmx eval` renders it.
    let eval = f
        .command(&[])
        .args(["eval", "--expr", "undefinedVar + 1"])
        .output()
        .unwrap();
    assert!(!eval.status.success());
    assert_eq!(err(&o), err(&eval));
    assert!(err(&o).contains("undefined variable 'undefinedVar'"));
}

#[test]
fn printing_bindings_and_multi_line_input() {
    let f = fixture();
    let input = "\
s = { a = 1; b = throw \"lazy\"; }
s.a
s
{ first = 1;
  second = [ 1
    2 ]; }
map
f = x: x
f
builtins.length [ 1 2 3 ]
:p { ok = 1; bad = throw \"inside\"; }
a == 1
a = 1
a == 1
";
    let o = f.repl(&[], input);
    let stdout = out(&o);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines[0], "1");
    // Unevaluated attributes are shown as thunks, never forced.
    assert_eq!(lines[1], "{ a = 1; b = «thunk»; }");
    // A list literal is built at once (it evaluates nothing), so it is a
    // value, not a thunk, and shown as one; nothing was forced to show it.
    assert_eq!(lines[2], "{ first = 1; second = [ 1 2 ]; }");
    assert_eq!(lines[3], "«primop map»");
    assert_eq!(lines[4], "«lambda @ «string»:1:1»");
    assert_eq!(lines[5], "3");
    assert_eq!(lines[6], "{ bad = «error: inside»; ok = 1; }");
    assert_eq!(lines[7], "true");
    assert_eq!(lines.len(), 8, "{stdout}");
    // `a == 1` before `a` exists is an error, not a binding.
    assert!(err(&o).contains("undefined variable 'a'"), "{}", err(&o));
}

#[test]
fn commands_docs_and_errors() {
    let f = fixture();
    let input = "\
:doc map
:doc builtins.attrNames
:doc nope
:lff .
:t
:?
:b 1
";
    let o = f.repl(&[], input);
    let stdout = out(&o);
    let stderr = err(&o);
    assert!(
        stdout.contains("Synopsis: builtins.map f list\n"),
        "{stdout}"
    );
    assert!(stdout.contains("Synopsis: builtins.attrNames set\n"));
    assert!(stdout.contains("The following commands are available:"));
    assert!(stdout.contains(":lf, :load-flake FLAKEREF"));
    assert!(
        stderr.contains("error: 'nope' is not a builtin"),
        "{stderr}"
    );
    assert!(
        stderr.contains("error: unknown command ':lff'; did you mean ':lf'?"),
        "{stderr}"
    );
    assert!(stderr.contains("error: :t needs an argument: EXPR"));
    assert!(stderr.contains("not a derivation, so it cannot be built"));
}

/// Every name of the `builtins` set has a `:doc` entry.
#[test]
fn docs_cover_every_builtin() {
    let f = fixture();
    let names = f
        .command(&[])
        .args(["eval", "--json", "--expr", "builtins.attrNames builtins"])
        .output()
        .unwrap();
    let names: Vec<String> = serde_json::from_str(&out(&names)).expect("JSON list");
    assert!(names.len() > 100);
    let input: String = names.iter().map(|n| format!(":doc {n}\n")).collect();
    let o = f.repl(&[], &input);
    assert_eq!(err(&o), "", "builtins without documentation");
    assert_eq!(out(&o).matches("Synopsis: builtins.").count(), names.len());
}

#[test]
fn loading_files_and_flakes() {
    let f = fixture();
    f.write("work/set.nix", SET_NIX);
    f.write(
        "work/fn.nix",
        "{ who ? \"nobody\" }: { greeting = \"hi ${who}\"; }",
    );
    f.write(
        "work/fl/flake.nix",
        "{ outputs = { self, ... }: { answer = 42; lib.double = x: x * 2; }; }",
    );
    // A file argument that fails to load is reported; the repl still starts.
    let o = f.repl(&["missing.nix"], "1 + 1\n");
    assert_eq!(out(&o), "2\n");
    assert!(err(&o).contains("missing.nix"), "{}", err(&o));
    // A file argument, auto-called with --argstr.
    let o = f.repl(&["fn.nix", "--argstr", "who", "me"], "greeting\n");
    assert_eq!(out(&o), "Added 1 variables.\n\"hi me\"\n");
    // A flake argument, and :lf.
    let o = f.repl(&["./fl"], "answer\nlib.double 4\n");
    let stdout = out(&o);
    assert!(stdout.starts_with("Added "), "{stdout}{}", err(&o));
    assert!(stdout.ends_with("42\n8\n"), "{stdout}");
    let o = f.repl(&[], ":lf ./fl\nanswer\n:lf ./set.nix\n");
    assert!(out(&o).ends_with("42\n"), "{}", out(&o));
    assert!(err(&o).contains("is not a flake"), "{}", err(&o));
}

// ---- a real terminal -------------------------------------------------------

/// A program on a pseudo-terminal: keystrokes in, transcript out.
trait Pty {
    fn send(&mut self, keys: &str);
    /// What the terminal showed so far, escape sequences and CRs removed.
    fn transcript(&mut self) -> String;
    /// The exit code, once the program has ended.
    fn exit_code(&mut self) -> Option<i32>;
}

/// `script -qfec CMD /dev/null`, fed through a pipe.
struct Script {
    child: Child,
    stdin: Option<ChildStdin>,
    out: Arc<Mutex<Vec<u8>>>,
}

impl Script {
    fn spawn(cmdline: &str, env: &[(&str, &Path)]) -> Option<Script> {
        let mut c = Command::new("script");
        c.args(["-qfec", cmdline, "/dev/null"])
            .env("TERM", "xterm")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        for (k, v) in env {
            c.env(k, v);
        }
        let mut child = c.spawn().ok()?;
        let mut stdout = child.stdout.take()?;
        let out = Arc::new(Mutex::new(Vec::new()));
        let sink = out.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stdout.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        let stdin = child.stdin.take();
        Some(Script { child, stdin, out })
    }
}

impl Pty for Script {
    fn send(&mut self, keys: &str) {
        if let Some(s) = &mut self.stdin {
            let _ = s.write_all(keys.as_bytes());
            let _ = s.flush();
        }
    }
    fn transcript(&mut self) -> String {
        clean(&String::from_utf8_lossy(&self.out.lock().unwrap()))
    }
    fn exit_code(&mut self) -> Option<i32> {
        self.child.try_wait().ok().flatten().and_then(|s| s.code())
    }
}

impl Drop for Script {
    fn drop(&mut self) {
        self.stdin.take();
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// A tmux server of our own (its own socket), one window running the command.
struct Tmux {
    socket: PathBuf,
}

impl Tmux {
    fn spawn(cmdline: &str, env: &[(&str, &Path)], socket: PathBuf) -> Option<Tmux> {
        let wrapped = format!("{cmdline}; echo \"EXITED $?\"; sleep 60");
        let mut c = Command::new("tmux");
        c.arg("-S")
            .arg(&socket)
            .args(["new-session", "-d", "-x", "120", "-y", "50", &wrapped])
            .env("TERM", "xterm")
            .env_remove("TMUX");
        for (k, v) in env {
            c.env(k, v);
        }
        let ok = c.status().ok()?.success();
        ok.then_some(Tmux { socket })
    }

    fn tmux(&self, args: &[&str]) -> Option<Output> {
        Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(args)
            .output()
            .ok()
    }
}

impl Pty for Tmux {
    fn send(&mut self, keys: &str) {
        // Control characters by name, the rest literally.
        for part in keys.split_inclusive(['\r', '\t', '\x03', '\x04']) {
            let (text, key) = match part.chars().last() {
                Some('\r') => (&part[..part.len() - 1], Some("Enter")),
                Some('\t') => (&part[..part.len() - 1], Some("Tab")),
                Some('\x03') => (&part[..part.len() - 1], Some("C-c")),
                Some('\x04') => (&part[..part.len() - 1], Some("C-d")),
                _ => (part, None),
            };
            if !text.is_empty() {
                self.tmux(&["send-keys", "-t", "0", "-l", text]);
            }
            if let Some(k) = key {
                self.tmux(&["send-keys", "-t", "0", k]);
            }
        }
    }
    fn transcript(&mut self) -> String {
        self.tmux(&["capture-pane", "-p", "-t", "0", "-S", "-200"])
            .map(|o| out(&o))
            .unwrap_or_default()
    }
    fn exit_code(&mut self) -> Option<i32> {
        let t = self.transcript();
        let i = t.find("EXITED ")?;
        t[i + 7..].split_whitespace().next()?.parse().ok()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        self.tmux(&["kill-server"]);
    }
}

/// Removes escape sequences (CSI, OSC) and carriage returns.
fn clean(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\x1b' => match chars.next() {
                Some('[') => {
                    for d in chars.by_ref() {
                        if ('\x40'..='\x7e').contains(&d) {
                            break;
                        }
                    }
                }
                Some(']') => {
                    for d in chars.by_ref() {
                        if d == '\x07' {
                            break;
                        }
                    }
                }
                _ => {}
            },
            '\r' => {}
            c => out.push(c),
        }
    }
    out
}

/// Waits until `ok` holds for the transcript; panics with it after 20 s.
fn wait(p: &mut dyn Pty, what: &str, ok: impl Fn(&str) -> bool) -> String {
    let start = Instant::now();
    loop {
        let t = p.transcript();
        if ok(&t) {
            return t;
        }
        if start.elapsed() > Duration::from_secs(20) {
            panic!("timed out waiting for {what}; transcript:\n{t}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits for the `n`th prompt (lines that start with it: the editor redraws
/// the line it edits, after Tab, on the same line).
fn prompt(p: &mut dyn Pty, n: usize) -> String {
    wait(p, &format!("prompt {n}"), |t| {
        t.lines().filter(|l| l.starts_with(PROMPT)).count() >= n
    })
}

fn exit_code(p: &mut dyn Pty) -> i32 {
    let start = Instant::now();
    loop {
        if let Some(c) = p.exit_code() {
            return c;
        }
        if start.elapsed() > Duration::from_secs(20) {
            panic!("the repl did not exit; transcript:\n{}", p.transcript());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The repl on a terminal, under `script` or else tmux; `None` (with the reason
/// printed) when neither gives one.
fn terminal(f: &Work, state: &Path, args: &str) -> Option<Box<dyn Pty>> {
    let cmdline = format!("'{BIN}' --store '{}' repl {args}", f.path("root").display());
    // `exec`: the repl must be the terminal's foreground process itself. A shell left
    // waiting in between gets the same Ctrl-C, and dash (CI's /bin/sh) then dies of
    // it after the repl has handled it and exited 0.
    let cmdline = format!("cd '{}' && exec {cmdline}", f.path("work").display());
    let config = f.path("config");
    let env: [(&str, &Path); 4] = [
        // script(1) runs the command line with $SHELL: the same shell everywhere.
        ("SHELL", Path::new("/bin/sh")),
        ("ROCMX_CONFIG", Path::new("")),
        ("XDG_CONFIG_HOME", &config),
        ("XDG_STATE_HOME", state),
    ];
    let ready = |p: &mut dyn Pty| {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(10) {
            if p.transcript().contains(PROMPT) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    };
    if let Some(mut s) = Script::spawn(&cmdline, &env) {
        if ready(&mut s) {
            return Some(Box::new(s));
        }
        eprintln!("script gave no prompt:\n{}", s.transcript());
    }
    let socket = f.path("tmux.sock");
    if let Some(mut t) = Tmux::spawn(&cmdline, &env, socket) {
        if ready(&mut t) {
            return Some(Box::new(t));
        }
        eprintln!("tmux gave no prompt:\n{}", t.transcript());
    }
    None
}

#[test]
fn terminal_session_with_completion() {
    let f = fixture();
    f.write("work/set.nix", SET_NIX);
    let state = f.path("state");
    let Some(mut t) = terminal(&f, &state, "set.nix") else {
        eprintln!("SKIP: neither script nor tmux runs the repl on a terminal here");
        return;
    };
    let t = &mut *t;
    let shown = prompt(t, 1);
    assert!(shown.contains("Type :? for help."), "{shown}");
    assert!(shown.contains("Added 3 variables."), "{shown}");
    // A binding, then Tab completes its attribute name.
    t.send("foo = { alpha = 1; beta = 2; }\r");
    prompt(t, 2);
    t.send("foo.al\t");
    wait(t, "the completed name", |s| s.contains("foo.alpha"));
    t.send(" + 1\r");
    wait(t, "the result", |s| s.contains("foo.alpha + 1\n2\n"));
    prompt(t, 3);
    // Attribute names of a loaded set, and of a nested one.
    t.send("nested.in\t");
    wait(t, "the completed nested name", |s| {
        s.contains("nested.inner")
    });
    t.send("\r");
    wait(t, "the nested list", |s| {
        s.contains("[ 1 \"two\" «thunk» ]") || s.contains("[ 1 \"two\" { deep = true; } ]")
    });
    prompt(t, 4);
    // Ctrl-C drops the line.
    t.send("abandoned\x03");
    prompt(t, 5);
    // An expression over two lines.
    t.send("[ 1\r");
    t.send("2 ]\r");
    wait(t, "the two-line list", |s| s.contains("[ 1 2 ]"));
    prompt(t, 6);
    // An error, and the session goes on.
    t.send("nope\r");
    wait(t, "the error", |s| {
        s.contains("error: undefined variable 'nope'")
    });
    prompt(t, 7);
    t.send("\x04");
    assert_eq!(exit_code(t), 0, "{}", t.transcript());
    let transcript = t.transcript();
    assert!(!transcript.contains("undefined variable 'abandoned'"));
    let history = fs::read_to_string(state.join("rocmx/repl-history")).expect("history file");
    assert!(
        history.contains("foo = { alpha = 1; beta = 2; }"),
        "{history}"
    );
    assert!(history.contains("foo.alpha + 1"), "{history}");
    assert!(!history.contains("abandoned"), "{history}");
}

/// Ctrl-C during an evaluation stops it and brings the prompt back; the session and
/// its bindings live on (before, the signal killed the repl).
#[test]
fn terminal_ctrl_c_interrupts_an_evaluation() {
    let f = fixture();
    let state = f.path("state");
    let Some(mut t) = terminal(&f, &state, "") else {
        eprintln!("SKIP: neither script nor tmux runs the repl on a terminal here");
        return;
    };
    let t = &mut *t;
    t.send("x = 41\r");
    prompt(t, 2);
    // 2^60 calls, 60 deep: runs far longer than this test, in constant memory.
    t.send("let f = n: if n == 0 then 0 else f (n - 1) + f (n - 1); in f 60\r");
    std::thread::sleep(Duration::from_millis(500));
    t.send("\x03");
    wait(t, "the interruption", |s| {
        s.contains("error: interrupted by the user")
    });
    prompt(t, 3);
    t.send("x + 1\r");
    wait(t, "the result after it", |s| s.contains("\n42\n"));
    prompt(t, 4);
    t.send(":q\r");
    assert_eq!(exit_code(t), 0, "{}", t.transcript());
}

#[test]
fn terminal_without_writable_history() {
    let f = fixture();
    // A file where the state directory should be: no history can be kept.
    f.write("state-file", "");
    let state = f.path("state-file");
    let Some(mut t) = terminal(&f, &state, "") else {
        eprintln!("SKIP: neither script nor tmux runs the repl on a terminal here");
        return;
    };
    let t = &mut *t;
    t.send("6 * 7\r");
    wait(t, "the result", |s| s.contains("\n42\n"));
    prompt(t, 2);
    t.send(":q\r");
    assert_eq!(exit_code(t), 0, "{}", t.transcript());
}

// ---- :b ----------------------------------------------------------------------

#[test]
fn build_command() {
    let Some(bb) = busybox_or_skip() else {
        return;
    };
    let f = fixture();
    f.install_busybox("work/bb", &bb, &["echo"]);
    f.write(
        "work/pkgs.nix",
        r#"let bb = ./bb; in {
  hello = derivation {
    name = "repl-hello";
    system = builtins.currentSystem;
    builder = "${bb}/bin/sh";
    args = [ "-c" "echo hi-from-the-repl > $out" ];
    PATH = "${bb}/bin";
  };
}"#,
    );
    let o = f.repl(&[], ":l pkgs.nix\nhello\n:b hello\n");
    let stdout = out(&o);
    let stderr = err(&o);
    if !stdout.contains(" -> ") && stderr.to_lowercase().contains("namespace") {
        eprintln!("SKIP: the sandbox cannot run here:\n{stderr}");
        return;
    }
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines[0], "Added 1 variables.");
    assert!(
        lines[1].starts_with("«derivation /rocmx/store/") && lines[1].ends_with("-repl-hello.drv»"),
        "{stdout}"
    );
    assert_eq!(
        lines[2], "This derivation produced the following outputs:",
        "{stdout}\n{stderr}"
    );
    let path = lines[3]
        .strip_prefix("  out -> ")
        .unwrap_or_else(|| panic!("no output line: {stdout}"));
    let base = path.strip_prefix("/rocmx/store/").expect("a store path");
    assert!(base.ends_with("-repl-hello"), "{path}");
    let physical = f.path("root/store").join(base);
    assert_eq!(
        fs::read_to_string(&physical).expect("the output exists"),
        "hi-from-the-repl\n"
    );
    // The .drv was written to the store too (the repl flushes after a line).
    let drv = lines[1]
        .trim_start_matches("«derivation ")
        .trim_end_matches('»');
    let drv = f
        .path("root/store")
        .join(drv.strip_prefix("/rocmx/store/").unwrap());
    assert!(drv.exists(), "{}", drv.display());
}
