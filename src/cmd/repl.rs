//! `rocmx repl [FILE | FLAKEREF]`: an interactive evaluator, like `nix repl`.
//!
//! Owns the command line, the two ways of reading input and the history file:
//! on a terminal, a `rustyline` editor (history, multi-line input while an
//! expression is incomplete, Tab completion, Ctrl-C cancels the line, Ctrl-D
//! exits); otherwise lines from standard input, without prompt, so scripts and
//! tests can drive it. What a line does is [`session`]'s; printing values is
//! [`print`]'s, completion [`complete`]'s, `:doc`'s lookup [`docs`]'s.
//!
//! History: `$XDG_STATE_HOME/rocmx/repl-history` (else
//! `~/.local/state/rocmx/repl-history`), read at start and appended after each
//! line; a history that cannot be read or written is silently skipped.
//!
//! Exit code: 0 (`:q`, Ctrl-D or the end of the input), whatever failed on the
//! way; 1 only when the terminal itself fails.

mod complete;
mod docs;
mod print;
mod session;

use std::cell::RefCell;
use std::io::{BufRead, IsTerminal};
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use clap::Args;
use rustyline::error::ReadlineError;
use rustyline::history::DefaultHistory;
use rustyline::{CompletionType, Config, Editor};

use session::{Outcome, Session};

#[derive(Args, Debug)]
pub struct ReplArgs {
    /// A file whose attribute set is loaded into scope (as `:l FILE`), or a
    /// flake whose outputs are (as `:lf FLAKEREF`).
    #[arg(value_name = "FILE|FLAKEREF")]
    pub(crate) target: Option<String>,
    /// The evaluation options (`--arg`/`--argstr` apply to a loaded file that is a
    /// function with formals; `:te` toggles `--show-trace`).
    #[command(flatten)]
    pub(crate) eval: crate::cmd::evalopts::EvalOpts,
    #[command(flatten)]
    pub(crate) flake: crate::flake::FlakeOpts,
}

const PROMPT: &str = "rocmx-repl> ";

pub fn run(args: ReplArgs, store_opt: &super::StoreOpt) -> i32 {
    let settings = match args.eval.settings() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return 2;
        }
    };
    let mut session = Session::new(&args, settings, store_opt);
    let interactive = std::io::stdin().is_terminal();
    if interactive {
        println!(
            "Welcome to rocmx {}. Type :? for help.",
            env!("CARGO_PKG_VERSION")
        );
    }
    if let Some(t) = &args.target {
        session.load_target(t);
    }
    if interactive {
        terminal(session)
    } else {
        piped(session)
    }
}

/// Lines from standard input (not a terminal): no prompt; an incomplete
/// expression continues on the next line.
fn piped(mut session: Session) -> i32 {
    let mut stdin = std::io::stdin().lock();
    let mut pending = String::new();
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match stdin.read_until(b'\n', &mut buf) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => {
                eprintln!("error: reading standard input: {e}");
                break;
            }
        }
        let line = String::from_utf8_lossy(&buf);
        let line = line.trim_end_matches(['\n', '\r']);
        if !pending.is_empty() {
            pending.push('\n');
        }
        pending.push_str(line);
        if session::is_incomplete(&pending) {
            continue;
        }
        let input = std::mem::take(&mut pending);
        if session.handle(&input) == Outcome::Quit {
            return finish(session);
        }
    }
    if !pending.trim().is_empty() {
        session.handle(&pending);
    }
    finish(session)
}

/// The line editor on a terminal. Ctrl-C at the prompt drops the line (the editor reads
/// it as a key); during an evaluation the terminal's SIGINT raises the evaluator's
/// interrupt flag, which stops the evaluation with "interrupted by the user" and brings
/// the prompt back, as in `nix repl` (during `:b` it ends the repl with 130).
fn terminal(session: Session) -> i32 {
    let session = Rc::new(RefCell::new(session));
    let config = Config::builder()
        .auto_add_history(false)
        .completion_type(CompletionType::List)
        .max_history_size(1000)
        .and_then(|b| b.history_ignore_dups(true))
        .map(|b| b.build())
        .unwrap_or_default();
    let mut rl: Editor<complete::Helper, DefaultHistory> = match Editor::with_config(config) {
        Ok(rl) => rl,
        Err(e) => {
            eprintln!("error: cannot use the terminal: {e}");
            return 1;
        }
    };
    // Registered after the editor, which takes SIGINT for its lifetime (registered
    // before, they would be replaced). signal-hook still calls the editor's handler,
    // whose next read then returns an interrupted line: an interrupted evaluation is
    // followed by one empty prompt.
    // `:b` cannot be cancelled: there, Ctrl-C ends the repl with 130 as before; that
    // handler goes first so that it is in place whenever the flag is.
    let interrupt = Arc::new(AtomicBool::new(false));
    let sigint = signal_hook::consts::SIGINT;
    let building = session.borrow().building.clone();
    if signal_hook::flag::register_conditional_shutdown(sigint, 130, building).is_ok()
        && signal_hook::flag::register(sigint, interrupt.clone()).is_ok()
    {
        session.borrow_mut().ev.interrupt = Some(interrupt.clone());
    }
    rl.set_helper(Some(complete::Helper::new(session.clone())));
    let history = history_path();
    if let Some(h) = &history {
        let _ = rl.load_history(h);
    }
    let mut code = 0;
    loop {
        match rl.readline(PROMPT) {
            Ok(line) => {
                if !line.trim().is_empty() {
                    let _ = rl.add_history_entry(line.as_str());
                    if let Some(h) = &history {
                        save_history(&mut rl, h);
                    }
                }
                // A Ctrl-C that arrived while idle must not stop this line.
                interrupt.store(false, Ordering::Relaxed);
                if session.borrow_mut().handle(&line) == Outcome::Quit {
                    break;
                }
            }
            // Ctrl-C: the line is dropped, a new prompt follows.
            Err(ReadlineError::Interrupted) => continue,
            Err(ReadlineError::Eof) => break,
            Err(e) => {
                eprintln!("error: reading the terminal: {e}");
                code = 1;
                break;
            }
        }
    }
    drop(rl);
    match Rc::try_unwrap(session) {
        Ok(s) => finish(s.into_inner()).max(code),
        Err(rc) => {
            std::mem::forget(rc);
            code
        }
    }
}

/// Ends the session: the process exits next, so the evaluator's heap is not
/// torn down value by value.
fn finish(session: Session) -> i32 {
    session.close();
    0
}

/// Where the history lives, with its directory created; `None` when there is
/// no such place.
fn history_path() -> Option<PathBuf> {
    let base = match std::env::var_os("XDG_STATE_HOME").filter(|v| !v.is_empty()) {
        Some(d) => PathBuf::from(d),
        None => {
            PathBuf::from(std::env::var_os("HOME").filter(|v| !v.is_empty())?).join(".local/state")
        }
    };
    let dir = base.join("rocmx");
    std::fs::create_dir_all(&dir).ok()?;
    Some(dir.join("repl-history"))
}

/// Appends the new entries to the history file; failures are ignored (a
/// read-only home must not stop the repl).
fn save_history(rl: &mut Editor<complete::Helper, DefaultHistory>, path: &std::path::Path) {
    if rl.append_history(path).is_err() {
        let _ = rl.save_history(path);
    }
}
