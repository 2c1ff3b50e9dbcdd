//! The progress display of `rocmx build`: what the user sees on standard error while
//! the scheduler realises a closure.
//!
//! Owns: rendering the scheduler's [`Event`]s on standard error in one of three forms
//! ([`LogFormat`], `--log-format`), the `-L` log prefixes, and the live status area:
//!
//! - **bar** on a terminal: a status area at the bottom of the screen (counts, then one
//!   line per running build with its phase and elapsed time, then one per derivation
//!   waiting for the build lock another process holds), redrawn by a ticker thread
//!   at most ten times a second and only when its text changed; permanent lines
//!   (`built NAME in 1.2s`, failure messages, `skipped …`, `-L` log lines) are printed
//!   above it. Only these escape codes are written: cursor up (`ESC[nA`), erase line
//!   (`ESC[2K`) and erase below (`ESC[J`); status lines are cut to the terminal's width
//!   so that none wraps. Log lines and failure messages shown in this mode keep colours
//!   (SGR sequences, reset at the end of the line; none when `NO_COLOR` is set) but
//!   lose every other control character and escape sequence, so a builder cannot move
//!   the cursor. On Ctrl-C the area is erased before the process exits
//!   (`crate::interrupt`).
//! - **bar** elsewhere, and **plain**: one line per event, no escape codes at all, for
//!   pipes and files: log lines and failure messages are written as the builder wrote
//!   them minus the line terminator and every escape sequence (colours included), and
//!   phase markers are shown as phases.
//! - **json**: one JSON object per event and per complete log line (see
//!   [`LogFormat::Json`]).
//!
//! Log lines: a chunk of log is cut into lines at `\n` (a trailing `\r` is dropped);
//! the incomplete rest waits, per derivation, for the next chunk and is flushed when the
//! build ends (`Built`/`Failed`) or at [`Progress::finish`]. A line longer than 64 KiB
//! is cut into pieces. Phase markers (`@nix {"action":"setPhase","phase":"buildPhase"}`,
//! see `rocmx_builder::events`) set the phase shown in the status area; with `-L` they
//! are printed as `NAME> Running phase: buildPhase` in the plain and live forms, and in
//! JSON they appear both as a `log` object (the line as written) and, from
//! [`Event::Phase`], a `phase` object.
//!
//! Must not: write to standard output (results belong to `build.rs`), decide anything
//! about the build, or panic: events come from several threads (one mutex guards the
//! state; a poisoned lock is taken over), for derivations it may never have heard of,
//! with logs that are not UTF-8; write errors on standard error are ignored.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{IsTerminal, Write};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::common::human_size;
use rocmx_builder::events::{phase_of_line, Event, EventSink};
use rocmx_store::StorePath;

/// Time between two looks of the ticker at the status area.
const TICK: Duration = Duration::from_millis(100);
/// Running builds listed in the status area before "… and N more".
const MAX_RUNNING_LINES: usize = 8;
/// A partial log line longer than this is printed in pieces.
const MAX_LOG_LINE: usize = 64 * 1024;
/// Terminal width when neither the terminal nor `$COLUMNS` tells.
const DEFAULT_WIDTH: usize = 80;

/// How build progress is shown on standard error (`--log-format`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// A live status area when standard error is a terminal, plain lines otherwise.
    #[default]
    Bar,
    /// One line per event, no escape codes: `waiting for lock on '/rocmx/store/…-x.drv'...`
    /// (another process is building it), `building '/rocmx/store/…-x.drv'...`,
    /// `built x (1.2s)`, failure messages, `skipped …`; with `-L`, `x> ` and a log line.
    Plain,
    /// One JSON object per line: `planned` (`drvs`), `waiting` (`drv`, `name`: another
    /// process holds its build lock), `start` (`drv`, `name`), `phase`
    /// (`drv`, `phase`), `log` (`drv`, `line`: one complete line, lossy UTF-8, always,
    /// whatever `-L` says), `built` (`drv`, `outputs`, `duration_ms`), `cached` (`drv`,
    /// `outputs`), `failed` (`drv`, `message`), `skipped` (`drv`, `because`). Each has
    /// `action` first; store paths are absolute.
    Json,
}

/// The form actually used (a `Bar` not on a terminal is `Plain`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Live,
    Plain,
    Json,
}

/// Where the width of the terminal comes from.
#[derive(Clone, Copy, Debug)]
enum Width {
    /// Standard error's terminal, else `$COLUMNS`, else [`DEFAULT_WIDTH`].
    Terminal,
    /// Given (tests).
    #[cfg_attr(not(test), allow(dead_code))]
    Fixed(usize),
}

impl Width {
    fn columns(self) -> usize {
        match self {
            Width::Fixed(n) => n,
            Width::Terminal => terminal_columns()
                .or_else(|| {
                    std::env::var("COLUMNS")
                        .ok()
                        .and_then(|c| c.trim().parse::<usize>().ok())
                        .filter(|&c| c > 0)
                })
                .unwrap_or(DEFAULT_WIDTH),
        }
    }
}

/// The width of the terminal standard error is, if it is one.
fn terminal_columns() -> Option<usize> {
    let stderr = std::io::stderr();
    if !stderr.is_terminal() {
        return None;
    }
    let ws = rustix::termios::tcgetwinsize(&stderr).ok()?;
    (ws.ws_col > 0).then_some(ws.ws_col as usize)
}

/// The progress display of one run: an [`EventSink`] for the realiser that renders
/// on standard error (or any writer), in the form chosen by [`LogFormat`].
///
/// In the live form a ticker thread redraws the status area; [`Progress::finish`]
/// (or dropping the value) stops it and clears the area for good.
pub struct Progress {
    shared: Arc<Shared>,
    ticker: Mutex<Option<JoinHandle<()>>>,
    /// Erases the status area if the process is interrupted (Ctrl-C).
    _interrupt: Option<crate::interrupt::HookGuard>,
}

struct Shared {
    state: Mutex<State>,
    /// Wakes the ticker when it must stop.
    wake: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The process is being interrupted: erase the status area and draw nothing more.
    /// Gives up after half a second if the state cannot be had (the exit goes on).
    fn interrupt(&self) {
        let deadline = Instant::now() + Duration::from_millis(500);
        let mut st = loop {
            match self.state.try_lock() {
                Ok(g) => break g,
                Err(std::sync::TryLockError::Poisoned(e)) => break e.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(5))
                }
                Err(std::sync::TryLockError::WouldBlock) => return,
            }
        };
        st.stop = true;
        st.finished = true;
        if !st.drawn.is_empty() {
            let erase = format!("\x1b[{}A\r\x1b[J", st.drawn.len());
            st.drawn.clear();
            let _ = st.out.write_all(erase.as_bytes());
            let _ = st.out.flush();
        }
    }
}

/// A build in progress.
struct Running {
    drv: StorePath,
    name: String,
    since: Instant,
    phase: Option<String>,
}

/// Downloads from substituters: paths and bytes, all fetches of the run together.
#[derive(Default)]
struct Fetch {
    paths: usize,
    fetched: usize,
    bytes: u64,
    downloaded: u64,
}

/// How a derivation ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    Done,
    Failed,
    Skipped,
}

struct State {
    mode: Mode,
    /// Builders' colours (SGR sequences) are kept: the live form, unless `NO_COLOR`.
    colour: bool,
    print_logs: bool,
    out: Box<dyn Write + Send>,
    width: Width,
    /// Names given by `Started`.
    names: HashMap<StorePath, String>,
    /// Every derivation heard of (the plan and any other): the total.
    known: HashSet<StorePath>,
    outcomes: HashMap<StorePath, Outcome>,
    done: usize,
    failed: usize,
    skipped: usize,
    /// In the order they started.
    running: Vec<Running>,
    /// Derivations waiting for their build lock, in the order they began to.
    waiting: Vec<Running>,
    /// Incomplete log lines, per derivation (only kept when log lines are shown).
    partial: HashMap<StorePath, Vec<u8>>,
    /// Downloads from substituters.
    fetch: Fetch,
    /// The status lines on screen now (live form); the cursor is on the line below.
    drawn: Vec<String>,
    /// A ticker redraws: events then only print permanent lines.
    ticking: bool,
    /// The ticker must stop.
    stop: bool,
    /// [`Progress::finish`] was called: no status area any more.
    finished: bool,
}

impl Progress {
    /// A display writing to `err`. `format` picks the form (`Bar` becomes plain lines
    /// when `is_tty` is false); `print_build_logs` (`-L`) adds the builders' log lines
    /// to the bar and plain forms. In the live form a ticker thread is started.
    pub fn new(
        format: LogFormat,
        print_build_logs: bool,
        err: Box<dyn Write + Send>,
        is_tty: bool,
    ) -> Progress {
        let colour = colour_wanted();
        Progress::with_colour(
            format,
            print_build_logs,
            err,
            is_tty,
            Width::Terminal,
            true,
            colour,
        )
    }

    /// A display on standard error, live when it is a terminal (see [`Progress::new`]).
    pub fn stderr(format: LogFormat, print_build_logs: bool) -> Progress {
        let is_tty = std::io::stderr().is_terminal();
        Progress::new(
            format,
            print_build_logs,
            Box::new(std::io::stderr()),
            is_tty,
        )
    }

    #[cfg(test)]
    fn with_options(
        format: LogFormat,
        print_logs: bool,
        out: Box<dyn Write + Send>,
        is_tty: bool,
        width: Width,
        ticker: bool,
    ) -> Progress {
        Progress::with_colour(format, print_logs, out, is_tty, width, ticker, true)
    }

    fn with_colour(
        format: LogFormat,
        print_logs: bool,
        out: Box<dyn Write + Send>,
        is_tty: bool,
        width: Width,
        ticker: bool,
        colour: bool,
    ) -> Progress {
        let mode = match format {
            LogFormat::Bar if is_tty => Mode::Live,
            LogFormat::Bar | LogFormat::Plain => Mode::Plain,
            LogFormat::Json => Mode::Json,
        };
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                mode,
                colour,
                print_logs,
                out,
                width,
                names: HashMap::new(),
                known: HashSet::new(),
                outcomes: HashMap::new(),
                done: 0,
                failed: 0,
                skipped: 0,
                running: Vec::new(),
                waiting: Vec::new(),
                partial: HashMap::new(),
                fetch: Fetch::default(),
                drawn: Vec::new(),
                ticking: false,
                stop: false,
                finished: false,
            }),
            wake: Condvar::new(),
        });
        let mut handle = None;
        if mode == Mode::Live && ticker {
            let s = shared.clone();
            // Without a thread (spawn failed), events redraw the area themselves.
            if let Ok(h) = std::thread::Builder::new()
                .name("rocmx-progress".into())
                .spawn(move || tick_loop(&s))
            {
                shared.lock().ticking = true;
                handle = Some(h);
            }
        }
        let interrupt = (mode == Mode::Live).then(|| {
            let weak = Arc::downgrade(&shared);
            crate::interrupt::on_interrupt(move || {
                if let Some(s) = weak.upgrade() {
                    s.interrupt();
                }
            })
        });
        Progress {
            shared,
            ticker: Mutex::new(handle),
            _interrupt: interrupt,
        }
    }

    /// Ends the display: stops the ticker, prints incomplete log lines still waiting,
    /// and clears the status area for good (events that still come are printed as
    /// permanent lines only). Call it before printing the results. Idempotent; dropping
    /// the `Progress` does the same.
    pub fn finish(&self) {
        {
            let mut st = self.shared.lock();
            st.stop = true;
            self.shared.wake.notify_all();
        }
        let handle = self.ticker.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(h) = handle {
            let _ = h.join();
        }
        let mut st = self.shared.lock();
        if st.finished {
            return;
        }
        st.finished = true;
        let mut drvs: Vec<StorePath> = st.partial.keys().cloned().collect();
        drvs.sort();
        let mut perm = Vec::new();
        for drv in &drvs {
            st.flush_partial(drv, &mut perm);
        }
        st.emit(perm);
        let _ = st.out.flush();
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}

impl EventSink for Progress {
    fn event(&self, e: &Event) {
        self.shared.lock().handle(e);
    }
}

/// The ticker: redraws the status area until told to stop.
fn tick_loop(shared: &Shared) {
    let mut st = shared.lock();
    while !st.stop {
        st = match shared.wake.wait_timeout(st, TICK) {
            Ok((g, _)) => g,
            Err(e) => e.into_inner().0,
        };
        if st.stop {
            break;
        }
        st.redraw();
    }
}

impl State {
    fn name_of(&self, drv: &StorePath) -> String {
        match self.names.get(drv) {
            Some(n) => n.clone(),
            None => {
                let n = drv.name();
                n.strip_suffix(".drv").unwrap_or(n).to_string()
            }
        }
    }

    /// Records how `drv` ended (replacing an earlier outcome) and stops its build.
    fn set_outcome(&mut self, drv: &StorePath, o: Outcome) {
        self.known.insert(drv.clone());
        self.running.retain(|r| &r.drv != drv);
        self.waiting.retain(|r| &r.drv != drv);
        if let Some(old) = self.outcomes.insert(drv.clone(), o) {
            *self.counter(old) -= 1;
        }
        *self.counter(o) += 1;
    }

    fn counter(&mut self, o: Outcome) -> &mut usize {
        match o {
            Outcome::Done => &mut self.done,
            Outcome::Failed => &mut self.failed,
            Outcome::Skipped => &mut self.skipped,
        }
    }

    fn logs_shown(&self) -> bool {
        self.mode == Mode::Json || self.print_logs
    }

    fn handle(&mut self, e: &Event) {
        let mut perm = Vec::new();
        match e {
            Event::Planned { drvs } => {
                self.known.extend(drvs.iter().cloned());
                if self.mode == Mode::Json {
                    let list: Vec<String> = drvs.iter().map(|d| js(&d.to_absolute())).collect();
                    json_line(
                        &mut perm,
                        format_args!(r#"{{"action":"planned","drvs":[{}]}}"#, list.join(",")),
                    );
                }
            }
            Event::Cached { drv, outputs } => {
                self.set_outcome(drv, Outcome::Done);
                if self.mode == Mode::Json {
                    json_line(
                        &mut perm,
                        format_args!(
                            r#"{{"action":"cached","drv":{},"outputs":{}}}"#,
                            js(&drv.to_absolute()),
                            js_outputs(outputs)
                        ),
                    );
                }
            }
            Event::WaitingForLock { drv, name } => {
                self.known.insert(drv.clone());
                self.names.insert(drv.clone(), name.clone());
                if !self.waiting.iter().any(|r| &r.drv == drv) {
                    self.waiting.push(Running {
                        drv: drv.clone(),
                        name: name.clone(),
                        since: Instant::now(),
                        phase: None,
                    });
                }
                match self.mode {
                    Mode::Plain => {
                        let _ = writeln!(perm, "waiting for lock on '{}'...", drv.to_absolute());
                    }
                    Mode::Json => json_line(
                        &mut perm,
                        format_args!(
                            r#"{{"action":"waiting","drv":{},"name":{}}}"#,
                            js(&drv.to_absolute()),
                            js(name)
                        ),
                    ),
                    Mode::Live => {}
                }
            }
            Event::Started { drv, name } => {
                self.known.insert(drv.clone());
                self.names.insert(drv.clone(), name.clone());
                self.waiting.retain(|r| &r.drv != drv);
                if let Some(old) = self.outcomes.remove(drv) {
                    *self.counter(old) -= 1;
                }
                self.running.retain(|r| &r.drv != drv);
                self.running.push(Running {
                    drv: drv.clone(),
                    name: name.clone(),
                    since: Instant::now(),
                    phase: None,
                });
                match self.mode {
                    Mode::Plain => {
                        let _ = writeln!(perm, "building '{}'...", drv.to_absolute());
                    }
                    Mode::Json => json_line(
                        &mut perm,
                        format_args!(
                            r#"{{"action":"start","drv":{},"name":{}}}"#,
                            js(&drv.to_absolute()),
                            js(name)
                        ),
                    ),
                    Mode::Live => {}
                }
            }
            Event::Log { drv, data } => {
                if self.logs_shown() {
                    self.log_chunk(drv, data, &mut perm);
                }
            }
            Event::Phase { drv, phase } => {
                if let Some(r) = self.running.iter_mut().find(|r| &r.drv == drv) {
                    r.phase = Some(phase.clone());
                }
                if self.mode == Mode::Json {
                    json_line(
                        &mut perm,
                        format_args!(
                            r#"{{"action":"phase","drv":{},"phase":{}}}"#,
                            js(&drv.to_absolute()),
                            js(phase)
                        ),
                    );
                }
            }
            Event::Built {
                drv,
                outputs,
                duration,
            } => {
                self.flush_partial(drv, &mut perm);
                self.set_outcome(drv, Outcome::Done);
                let name = self.name_of(drv);
                let secs = duration.as_secs_f64();
                match self.mode {
                    Mode::Plain => {
                        let _ = writeln!(perm, "built {name} ({secs:.1}s)");
                    }
                    Mode::Live => {
                        let _ = writeln!(perm, "built {} in {secs:.1}s", sanitize(&name, false));
                    }
                    Mode::Json => json_line(
                        &mut perm,
                        format_args!(
                            r#"{{"action":"built","drv":{},"outputs":{},"duration_ms":{}}}"#,
                            js(&drv.to_absolute()),
                            js_outputs(outputs),
                            duration.as_millis()
                        ),
                    ),
                }
            }
            Event::Failed { drv, message } => {
                self.flush_partial(drv, &mut perm);
                self.set_outcome(drv, Outcome::Failed);
                match self.mode {
                    Mode::Plain => {
                        for line in message.lines() {
                            let line = shown_line(line.as_bytes());
                            perm.extend_from_slice(&strip_escapes(&line));
                            perm.push(b'\n');
                        }
                    }
                    Mode::Live => {
                        for line in message.lines() {
                            let line =
                                String::from_utf8_lossy(&shown_line(line.as_bytes())).into_owned();
                            perm.extend_from_slice(sanitize(&line, self.colour).as_bytes());
                            perm.push(b'\n');
                        }
                    }
                    Mode::Json => json_line(
                        &mut perm,
                        format_args!(
                            r#"{{"action":"failed","drv":{},"message":{}}}"#,
                            js(&drv.to_absolute()),
                            js(message)
                        ),
                    ),
                }
            }
            Event::Fetching {
                paths,
                download,
                unpacked,
            } => {
                self.fetch.paths += paths.len();
                self.fetch.bytes += download;
                let (d, u) = (human_size(*download), human_size(*unpacked));
                match self.mode {
                    Mode::Plain | Mode::Live => {
                        let _ = writeln!(
                            perm,
                            "fetching {} paths ({d} download, {u} unpacked)",
                            paths.len()
                        );
                    }
                    Mode::Json => json_line(
                        &mut perm,
                        format_args!(
                            r#"{{"action":"fetching","paths":{},"download":{download},"unpacked":{unpacked}}}"#,
                            paths.len()
                        ),
                    ),
                }
            }
            Event::Downloaded { bytes, .. } => {
                self.fetch.downloaded += bytes;
            }
            Event::Fetched {
                path,
                source,
                bytes,
            } => {
                self.fetch.fetched += 1;
                match self.mode {
                    Mode::Plain => {
                        let _ = writeln!(
                            perm,
                            "fetched {path} from {source} ({})",
                            human_size(*bytes)
                        );
                    }
                    Mode::Live => {
                        let _ = writeln!(
                            perm,
                            "fetched {} ({})",
                            sanitize(path.name(), false),
                            human_size(*bytes)
                        );
                    }
                    Mode::Json => json_line(
                        &mut perm,
                        format_args!(
                            r#"{{"action":"fetched","path":{},"source":{},"bytes":{bytes}}}"#,
                            js(&path.to_absolute()),
                            js(source)
                        ),
                    ),
                }
            }
            Event::Skipped { drv, because } => {
                self.flush_partial(drv, &mut perm);
                self.set_outcome(drv, Outcome::Skipped);
                let (name, failed) = (self.name_of(drv), self.name_of(because));
                match self.mode {
                    Mode::Plain => {
                        let _ = writeln!(perm, "skipped {name}: depends on failed {failed}");
                    }
                    Mode::Live => {
                        let _ = writeln!(
                            perm,
                            "skipped {}: depends on failed {}",
                            sanitize(&name, false),
                            sanitize(&failed, false)
                        );
                    }
                    Mode::Json => json_line(
                        &mut perm,
                        format_args!(
                            r#"{{"action":"skipped","drv":{},"because":{}}}"#,
                            js(&drv.to_absolute()),
                            js(&because.to_absolute())
                        ),
                    ),
                }
            }
        }
        self.emit(perm);
    }

    /// Cuts a chunk of `drv`'s log into lines, keeping the incomplete rest.
    fn log_chunk(&mut self, drv: &StorePath, data: &[u8], perm: &mut Vec<u8>) {
        let mut buf = self.partial.remove(drv).unwrap_or_default();
        let mut rest = data;
        while let Some(i) = rest.iter().position(|&b| b == b'\n') {
            buf.extend_from_slice(&rest[..i]);
            self.log_line(drv, &buf, perm);
            buf.clear();
            rest = &rest[i + 1..];
        }
        buf.extend_from_slice(rest);
        while buf.len() > MAX_LOG_LINE {
            let piece: Vec<u8> = buf.drain(..MAX_LOG_LINE).collect();
            self.log_line(drv, &piece, perm);
        }
        if !buf.is_empty() {
            self.partial.insert(drv.clone(), buf);
        }
    }

    /// Prints the incomplete log line of `drv`, if any.
    fn flush_partial(&mut self, drv: &StorePath, perm: &mut Vec<u8>) {
        if let Some(buf) = self.partial.remove(drv) {
            if !buf.is_empty() {
                self.log_line(drv, &buf, perm);
            }
        }
    }

    /// One log line (without its `\n`) in the current form. For people (plain, live),
    /// a phase marker is shown as the phase it announces ([`shown_line`]); JSON keeps
    /// the line as written.
    fn log_line(&self, drv: &StorePath, line: &[u8], perm: &mut Vec<u8>) {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let shown;
        let line = if self.mode == Mode::Json {
            line
        } else {
            shown = shown_line(line);
            &shown[..]
        };
        match self.mode {
            Mode::Json => json_line(
                perm,
                format_args!(
                    r#"{{"action":"log","drv":{},"line":{}}}"#,
                    js(&drv.to_absolute()),
                    js(&String::from_utf8_lossy(line))
                ),
            ),
            Mode::Plain => {
                perm.extend_from_slice(self.name_of(drv).as_bytes());
                perm.extend_from_slice(b"> ");
                perm.extend_from_slice(&strip_escapes(line));
                perm.push(b'\n');
            }
            Mode::Live => {
                perm.extend_from_slice(sanitize(&self.name_of(drv), false).as_bytes());
                perm.extend_from_slice(b"> ");
                let line = String::from_utf8_lossy(line);
                perm.extend_from_slice(sanitize(&line, self.colour).as_bytes());
                perm.push(b'\n');
            }
        }
    }

    /// Writes the permanent lines of one event; in the live form, above the status
    /// area (cleared, then drawn again below them).
    fn emit(&mut self, perm: Vec<u8>) {
        if self.mode != Mode::Live {
            if !perm.is_empty() {
                let _ = self.out.write_all(&perm);
                let _ = self.out.flush();
            }
            return;
        }
        if perm.is_empty() {
            if !self.finished {
                // Without a ticker, every event redraws (when the text changed).
                if !self.ticking {
                    self.redraw();
                }
                return;
            }
            if self.drawn.is_empty() {
                return;
            }
            // Finished: the area goes away below.
        }
        let mut buf = Vec::with_capacity(perm.len() + 512);
        if !self.drawn.is_empty() {
            let _ = write!(buf, "\x1b[{}A\r\x1b[J", self.drawn.len());
            self.drawn.clear();
        }
        buf.extend_from_slice(&perm);
        if !self.finished {
            let lines = self.render(Instant::now());
            draw_lines(&mut buf, &lines);
            self.drawn = lines;
        }
        let _ = self.out.write_all(&buf);
        let _ = self.out.flush();
    }

    /// Draws the status area again if its text changed.
    fn redraw(&mut self) {
        if self.mode != Mode::Live || self.finished {
            return;
        }
        let lines = self.render(Instant::now());
        if lines == self.drawn {
            return;
        }
        let mut buf = Vec::new();
        if !self.drawn.is_empty() {
            let _ = write!(buf, "\x1b[{}A\r", self.drawn.len());
        }
        draw_lines(&mut buf, &lines);
        // What is left of a taller area.
        buf.extend_from_slice(b"\x1b[J");
        self.drawn = lines;
        let _ = self.out.write_all(&buf);
        let _ = self.out.flush();
    }

    /// The status area: counts, then the running builds (each line cut to the width).
    fn render(&self, now: Instant) -> Vec<String> {
        if self.known.is_empty() && self.running.is_empty() && self.fetch.paths == 0 {
            return Vec::new();
        }
        let width = self.width.columns().saturating_sub(1).max(10);
        let total = self.known.len();
        let running = self.running.len();
        let waiting = self.waiting.len();
        let queued = total
            .saturating_sub(self.done)
            .saturating_sub(running)
            .saturating_sub(waiting)
            .saturating_sub(self.failed)
            .saturating_sub(self.skipped);
        let mut head = format!(
            "[done {}/{total}, running {running}, queued {queued}, failed {}",
            self.done, self.failed
        );
        if self.skipped > 0 {
            head.push_str(&format!(", skipped {}", self.skipped));
        }
        if waiting > 0 {
            head.push_str(&format!(", waiting {waiting}"));
        }
        if self.fetch.fetched < self.fetch.paths {
            head.push_str(&format!(
                ", fetched {}/{} paths {}/{}",
                self.fetch.fetched,
                self.fetch.paths,
                human_size(self.fetch.downloaded.min(self.fetch.bytes)),
                human_size(self.fetch.bytes)
            ));
        }
        head.push(']');
        let mut lines = vec![truncate(&head, width)];
        let listed = self
            .running
            .iter()
            .map(|r| (r, "building"))
            .chain(self.waiting.iter().map(|r| (r, "waiting for lock on")));
        for (r, what) in listed.take(MAX_RUNNING_LINES) {
            let mut line = format!("  {what} {}", printable(&r.name));
            if let Some(p) = &r.phase {
                line.push_str(&format!(" ({})", printable(p)));
            }
            line.push(' ');
            line.push_str(&elapsed(now.saturating_duration_since(r.since)));
            lines.push(truncate(&line, width));
        }
        if running + waiting > MAX_RUNNING_LINES {
            let more = format!("  … and {} more", running + waiting - MAX_RUNNING_LINES);
            lines.push(truncate(&more, width));
        }
        lines
    }
}

/// Appends status lines, each erasing the old text of its line first.
fn draw_lines(buf: &mut Vec<u8>, lines: &[String]) {
    for l in lines {
        buf.extend_from_slice(b"\x1b[2K");
        buf.extend_from_slice(l.as_bytes());
        buf.push(b'\n');
    }
}

/// A JSON string literal.
fn js(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_string())
}

/// Outputs as a JSON object of absolute store paths, in name order.
fn js_outputs(outputs: &BTreeMap<String, StorePath>) -> String {
    let fields: Vec<String> = outputs
        .iter()
        .map(|(k, v)| format!("{}:{}", js(k), js(&v.to_absolute())))
        .collect();
    format!("{{{}}}", fields.join(","))
}

fn json_line(perm: &mut Vec<u8>, args: std::fmt::Arguments<'_>) {
    let _ = perm.write_fmt(args);
    perm.push(b'\n');
}

/// `12s`, `3m05s`, `2h07m`.
fn elapsed(d: Duration) -> String {
    let s = d.as_secs();
    if s < 60 {
        format!("{s}s")
    } else if s < 3600 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
    }
}

/// For the status area: printable ASCII only (one column per character), the rest `?`.
fn printable(s: &str) -> String {
    s.chars()
        .map(|c| if (' '..='~').contains(&c) { c } else { '?' })
        .collect()
}

/// The first `width` characters of `s` (status lines are ASCII but for `…`).
fn truncate(s: &str, width: usize) -> String {
    match s.char_indices().nth(width) {
        Some((i, _)) => s[..i].to_string(),
        None => s.to_string(),
    }
}

/// A builder's line as people see it: a phase marker becomes `Running phase: NAME`
/// (nixpkgs' stdenv wording), anything else is unchanged.
fn shown_line(line: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    match phase_of_line(line) {
        Some(phase) => format!("Running phase: {phase}").into_bytes().into(),
        None => line.into(),
    }
}

/// Whether builders' colours may reach the terminal: not when `NO_COLOR` is set to
/// anything but the empty string (<https://no-color.org>).
fn colour_wanted() -> bool {
    std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// A line for the plain form, which is for pipes and files: escape sequences
/// (`ESC [ … final`, `ESC ] … BEL/ST` and the other strings, `ESC ( B` and two-byte `ESC x`) are
/// dropped, every other byte is kept as written.
fn strip_escapes(s: &[u8]) -> Vec<u8> {
    if !s.contains(&0x1b) {
        return s.to_vec();
    }
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        if s[i] != 0x1b {
            out.push(s[i]);
            i += 1;
            continue;
        }
        i += 1;
        match s.get(i) {
            Some(b'[') => {
                i += 1;
                while i < s.len() && (0x20..=0x3f).contains(&s[i]) {
                    i += 1;
                }
                if i < s.len() && (0x40..=0x7e).contains(&s[i]) {
                    i += 1;
                }
            }
            Some(b']' | b'P' | b'X' | b'^' | b'_') => {
                i += 1;
                while i < s.len() {
                    if s[i] == 0x07 {
                        i += 1;
                        break;
                    }
                    if s[i] == 0x1b {
                        i += 1 + usize::from(s.get(i + 1) == Some(&b'\\'));
                        break;
                    }
                    i += 1;
                }
            }
            // nF sequences (`ESC ( B`): intermediates, then a final byte.
            Some(_) => {
                while i < s.len() && (0x20..=0x2f).contains(&s[i]) {
                    i += 1;
                }
                i += 1;
            }
            None => {}
        }
    }
    out
}

/// A line for the live form: colours (SGR sequences) are kept and reset at the end
/// when `colour` is true, dropped otherwise; other escape sequences and control
/// characters but tab are dropped.
fn sanitize(s: &str, colour: bool) -> String {
    let mut out = String::with_capacity(s.len());
    let mut coloured = false;
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\x1b' => match chars.next() {
                // CSI: parameters and intermediates (0x20–0x3f), then a final byte.
                Some('[') => {
                    let mut seq = String::from("\x1b[");
                    let mut fin = None;
                    for c in chars.by_ref() {
                        seq.push(c);
                        if ('\x40'..='\x7e').contains(&c) {
                            fin = Some(c);
                            break;
                        }
                        if !('\x20'..='\x3f').contains(&c) {
                            break;
                        }
                    }
                    let params_ok = seq[2..seq.len() - fin.map_or(0, |_| 1)]
                        .chars()
                        .all(|c| c.is_ascii_digit() || c == ';');
                    if fin == Some('m') && params_ok && colour {
                        out.push_str(&seq);
                        coloured = true;
                    }
                }
                // OSC (and the other strings): up to BEL or ST.
                Some(']') | Some('P') | Some('X') | Some('^') | Some('_') => {
                    while let Some(c) = chars.next() {
                        if c == '\x07' {
                            break;
                        }
                        if c == '\x1b' {
                            if chars.peek() == Some(&'\\') {
                                chars.next();
                            }
                            break;
                        }
                    }
                }
                // nF sequences (`ESC ( B`: intermediates, then a final character),
                // two-character ones, and a lone ESC at the end.
                Some(c) if ('\x20'..='\x2f').contains(&c) => {
                    while chars.next_if(|c| ('\x20'..='\x2f').contains(c)).is_some() {}
                    chars.next();
                }
                _ => {}
            },
            '\t' => out.push(c),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    if coloured {
        out.push_str("\x1b[0m");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer into a shared buffer.
    #[derive(Clone, Default)]
    struct Buf(Arc<Mutex<Vec<u8>>>);

    impl Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Buf {
        fn text(&self) -> String {
            String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
        }
        fn bytes(&self) -> Vec<u8> {
            self.0.lock().unwrap().clone()
        }
    }

    fn p(s: &str) -> StorePath {
        StorePath::from_absolute(s).unwrap()
    }

    const A: &str = "/rocmx/store/00000000000000000000000000000000-hello.drv";
    const B: &str = "/rocmx/store/11111111111111111111111111111111-world.drv";
    const C: &str = "/rocmx/store/22222222222222222222222222222222-dep.drv";
    const D: &str = "/rocmx/store/33333333333333333333333333333333-top.drv";
    const A_OUT: &str = "/rocmx/store/44444444444444444444444444444444-hello";
    const C_OUT: &str = "/rocmx/store/55555555555555555555555555555555-dep";

    fn outs(path: &str) -> BTreeMap<String, StorePath> {
        BTreeMap::from([("out".to_string(), p(path))])
    }

    /// A run: one cached, one built (with logs and a phase), one failed, one skipped.
    fn events() -> Vec<Event> {
        vec![
            Event::Planned {
                drvs: vec![p(C), p(A), p(B), p(D)],
            },
            Event::Cached {
                drv: p(C),
                outputs: outs(C_OUT),
            },
            Event::Started {
                drv: p(A),
                name: "hello".into(),
            },
            Event::Log {
                drv: p(A),
                data: b"line one\nline ".to_vec(),
            },
            Event::Log {
                drv: p(A),
                data: b"two\r\n@nix {\"action\":\"setPhase\",\"phase\":\"buildPhase\"}\n".to_vec(),
            },
            Event::Phase {
                drv: p(A),
                phase: "buildPhase".into(),
            },
            Event::Log {
                drv: p(A),
                data: b"no newline \xff".to_vec(),
            },
            Event::Built {
                drv: p(A),
                outputs: outs(A_OUT),
                duration: Duration::from_millis(1234),
            },
            Event::Started {
                drv: p(B),
                name: "world".into(),
            },
            Event::Log {
                drv: p(B),
                data: b"oops\n".to_vec(),
            },
            Event::Failed {
                drv: p(B),
                message: format!(
                    "builder for '{B}' failed with exit code 1\nlast log lines:\noops"
                ),
            },
            Event::Skipped {
                drv: p(D),
                because: p(B),
            },
        ]
    }

    fn run(format: LogFormat, logs: bool, tty: bool) -> Buf {
        let buf = Buf::default();
        let pr = Progress::with_options(
            format,
            logs,
            Box::new(buf.clone()),
            tty,
            Width::Fixed(80),
            false,
        );
        for e in events() {
            pr.event(&e);
        }
        pr.finish();
        buf
    }

    #[test]
    fn plain_with_logs() {
        let buf = run(LogFormat::Plain, true, true);
        let expected = format!(
            "building '{A}'...\n\
             hello> line one\n\
             hello> line two\n\
             hello> Running phase: buildPhase\n\
             hello> no newline \u{fffd}\n\
             built hello (1.2s)\n\
             building '{B}'...\n\
             world> oops\n\
             builder for '{B}' failed with exit code 1\n\
             last log lines:\n\
             oops\n\
             skipped top: depends on failed world\n"
        );
        // The non-UTF-8 byte is written as is.
        assert_eq!(buf.text(), expected);
        assert!(buf.bytes().windows(2).any(|w| w == b" \xff"));
        assert!(!buf.bytes().contains(&0x1b));
    }

    #[test]
    fn bar_without_tty_is_plain_without_logs() {
        let buf = run(LogFormat::Bar, false, false);
        let expected = format!(
            "building '{A}'...\n\
             built hello (1.2s)\n\
             building '{B}'...\n\
             builder for '{B}' failed with exit code 1\n\
             last log lines:\n\
             oops\n\
             skipped top: depends on failed world\n"
        );
        assert_eq!(buf.text(), expected);
    }

    #[test]
    fn json() {
        // -L or not, the same.
        for logs in [false, true] {
            let buf = run(LogFormat::Json, logs, false);
            let expected = [
                format!(r#"{{"action":"planned","drvs":["{C}","{A}","{B}","{D}"]}}"#),
                format!(r#"{{"action":"cached","drv":"{C}","outputs":{{"out":"{C_OUT}"}}}}"#),
                format!(r#"{{"action":"start","drv":"{A}","name":"hello"}}"#),
                format!(r#"{{"action":"log","drv":"{A}","line":"line one"}}"#),
                format!(r#"{{"action":"log","drv":"{A}","line":"line two"}}"#),
                format!(
                    r#"{{"action":"log","drv":"{A}","line":"@nix {{\"action\":\"setPhase\",\"phase\":\"buildPhase\"}}"}}"#
                ),
                format!(r#"{{"action":"phase","drv":"{A}","phase":"buildPhase"}}"#),
                format!(r#"{{"action":"log","drv":"{A}","line":"no newline �"}}"#),
                format!(
                    r#"{{"action":"built","drv":"{A}","outputs":{{"out":"{A_OUT}"}},"duration_ms":1234}}"#
                ),
                format!(r#"{{"action":"start","drv":"{B}","name":"world"}}"#),
                format!(r#"{{"action":"log","drv":"{B}","line":"oops"}}"#),
                format!(
                    r#"{{"action":"failed","drv":"{B}","message":"builder for '{B}' failed with exit code 1\nlast log lines:\noops"}}"#
                ),
                format!(r#"{{"action":"skipped","drv":"{D}","because":"{B}"}}"#),
            ];
            let text = buf.text();
            assert_eq!(text, expected.join("\n") + "\n");
            for l in text.lines() {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                assert!(v["action"].is_string());
            }
        }
    }

    /// A tiny terminal: enough of VT100 for what the display writes.
    fn screen(bytes: &[u8]) -> Vec<String> {
        let text = String::from_utf8_lossy(bytes);
        let mut lines: Vec<Vec<char>> = vec![Vec::new()];
        let (mut row, mut col) = (0usize, 0usize);
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\n' => {
                    row += 1;
                    col = 0;
                    if lines.len() <= row {
                        lines.push(Vec::new());
                    }
                }
                '\r' => col = 0,
                '\x1b' => {
                    assert_eq!(chars.next(), Some('['));
                    let mut params = String::new();
                    let fin = loop {
                        let c = chars.next().expect("unterminated escape");
                        if c.is_ascii_digit() || c == ';' {
                            params.push(c);
                        } else {
                            break c;
                        }
                    };
                    match fin {
                        'A' => {
                            let n: usize = params.parse().unwrap();
                            assert!(n >= 1 && n <= row, "cursor up {n} from row {row}");
                            row -= n;
                        }
                        'K' => {
                            assert_eq!(params, "2");
                            lines[row].clear();
                        }
                        'J' => {
                            assert_eq!(params, "");
                            lines[row].truncate(col);
                            lines.truncate(row + 1);
                        }
                        'm' => {}
                        other => panic!("unexpected escape {other}"),
                    }
                }
                c => {
                    let line = &mut lines[row];
                    while line.len() < col {
                        line.push(' ');
                    }
                    if col < line.len() {
                        line[col] = c;
                    } else {
                        line.push(c);
                    }
                    col += 1;
                }
            }
        }
        let mut out: Vec<String> = lines.into_iter().map(|l| l.into_iter().collect()).collect();
        while out.last().is_some_and(|l| l.is_empty()) {
            out.pop();
        }
        out
    }

    fn live(logs: bool, width: usize) -> (Progress, Buf) {
        let buf = Buf::default();
        let pr = Progress::with_options(
            LogFormat::Bar,
            logs,
            Box::new(buf.clone()),
            true,
            Width::Fixed(width),
            false,
        );
        (pr, buf)
    }

    #[test]
    fn fetches_show_paths_and_bytes() {
        let (pr, buf) = live(false, 100);
        let (a, b) = (p(A), p(B));
        pr.event(&Event::Fetching {
            paths: vec![a.clone(), b.clone()],
            download: 3 << 20,
            unpacked: 8 << 20,
        });
        pr.event(&Event::Downloaded {
            path: a.clone(),
            bytes: 1 << 20,
        });
        let s = screen(&buf.bytes());
        assert_eq!(
            s,
            [
                "fetching 2 paths (3.00 MiB download, 8.00 MiB unpacked)",
                "[done 0/0, running 0, queued 0, failed 0, fetched 0/2 paths 1.00 MiB/3.00 MiB]",
            ]
        );
        pr.event(&Event::Fetched {
            path: a.clone(),
            source: "file:///c".into(),
            bytes: 1 << 20,
        });
        pr.event(&Event::Fetched {
            path: b.clone(),
            source: "file:///c".into(),
            bytes: 2 << 20,
        });
        pr.finish();
        let s = screen(&buf.bytes());
        assert_eq!(s.len(), 3, "{s:?}");
        assert_eq!(s[1], format!("fetched {} (1.00 MiB)", a.name()));

        // Plain and JSON forms.
        for (format, want) in [
            (
                LogFormat::Plain,
                format!("fetched {a} from file:///c (1.00 MiB)"),
            ),
            (
                LogFormat::Json,
                format!(
                    r#"{{"action":"fetched","path":"{}","source":"file:///c","bytes":1048576}}"#,
                    a.to_absolute()
                ),
            ),
        ] {
            let buf = Buf::default();
            let pr = Progress::new(format, false, Box::new(buf.clone()), false);
            pr.event(&Event::Fetched {
                path: a.clone(),
                source: "file:///c".into(),
                bytes: 1 << 20,
            });
            pr.finish();
            let text = String::from_utf8(buf.bytes()).unwrap();
            assert!(text.contains(&want), "{text}");
        }
    }

    #[test]
    fn bar_live() {
        let (pr, buf) = live(true, 80);
        let ev = events();
        for e in &ev[..6] {
            pr.event(e);
        }
        let s = screen(&buf.bytes());
        assert_eq!(
            s,
            [
                "hello> line one",
                "hello> line two",
                "hello> Running phase: buildPhase",
                "[done 1/4, running 1, queued 2, failed 0]",
                "  building hello (buildPhase) 0s",
            ]
        );
        for e in &ev[6..] {
            pr.event(e);
        }
        let s = screen(&buf.bytes());
        assert_eq!(
            s.last().unwrap(),
            "[done 2/4, running 0, queued 0, failed 1, skipped 1]"
        );
        pr.finish();
        let s = screen(&buf.bytes());
        assert_eq!(
            s,
            [
                "hello> line one",
                "hello> line two",
                "hello> Running phase: buildPhase",
                "hello> no newline \u{fffd}",
                "built hello in 1.2s",
                "world> oops",
                &format!("builder for '{B}' failed with exit code 1"),
                "last log lines:",
                "oops",
                "skipped top: depends on failed world",
            ]
        );
        // After finish: permanent lines only, the area stays away.
        let len = buf.bytes().len();
        pr.finish();
        pr.event(&Event::Started {
            drv: p(A),
            name: "hello".into(),
        });
        assert_eq!(buf.bytes().len(), len);
    }

    #[test]
    fn bar_live_without_logs_many_running_narrow() {
        let (pr, buf) = live(false, 30);
        let drvs: Vec<StorePath> = (0..10u8)
            .map(|i| StorePath::new([i; 20], &format!("package-with-a-long-name-{i}.drv")).unwrap())
            .collect();
        pr.event(&Event::Planned { drvs: drvs.clone() });
        assert_eq!(screen(&buf.bytes()), ["[done 0/10, running 0, queued"]);
        for (i, d) in drvs.iter().enumerate() {
            pr.event(&Event::Started {
                drv: d.clone(),
                name: format!("p{i}"),
            });
            pr.event(&Event::Log {
                drv: d.clone(),
                data: b"not shown\n".to_vec(),
            });
        }
        pr.event(&Event::Phase {
            drv: drvs[1].clone(),
            phase: "install\x1b[2JPhase".into(),
        });
        let s = screen(&buf.bytes());
        assert_eq!(s.len(), 10);
        assert_eq!(s[0], "[done 0/10, running 10, queue");
        assert_eq!(s[1], "  building p0 0s");
        assert_eq!(s[2], "  building p1 (install?[2JPha");
        assert_eq!(s[9], "  … and 2 more");
        pr.event(&Event::Failed {
            drv: drvs[0].clone(),
            message: "error: \x1b[31mred\x1b[0m \x1b[Hcursor\x07".into(),
        });
        let s = screen(&buf.bytes());
        assert_eq!(s[0], "error: red cursor");
        assert!(buf.text().contains("\x1b[31mred"));
        assert_eq!(s[1], "[done 0/10, running 9, queued");
        drop(pr);
        assert_eq!(screen(&buf.bytes()), ["error: red cursor"]);
    }

    #[test]
    fn ticker_redraws_and_stops() {
        let buf = Buf::default();
        let pr = Progress::with_options(
            LogFormat::Bar,
            false,
            Box::new(buf.clone()),
            true,
            Width::Fixed(80),
            true,
        );
        pr.event(&Event::Started {
            drv: p(A),
            name: "hello".into(),
        });
        let deadline = Instant::now() + Duration::from_secs(5);
        while !buf.text().contains("building hello") && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(
            screen(&buf.bytes()),
            [
                "[done 0/1, running 1, queued 0, failed 0]",
                "  building hello 0s"
            ]
        );
        pr.finish();
        assert!(screen(&buf.bytes()).is_empty());
        let len = buf.bytes().len();
        std::thread::sleep(3 * TICK);
        assert_eq!(buf.bytes().len(), len);
    }

    #[test]
    fn odd_input_does_not_panic() {
        for format in [LogFormat::Bar, LogFormat::Plain, LogFormat::Json] {
            for tty in [false, true] {
                let buf = Buf::default();
                let pr = Progress::with_options(
                    format,
                    true,
                    Box::new(buf.clone()),
                    tty,
                    Width::Fixed(0),
                    false,
                );
                // Events about derivations never planned nor started, twice over.
                for _ in 0..2 {
                    pr.event(&Event::Log {
                        drv: p(B),
                        data: vec![0xff; MAX_LOG_LINE * 2 + 3],
                    });
                    pr.event(&Event::Phase {
                        drv: p(C),
                        phase: "\u{1F600}".into(),
                    });
                    pr.event(&Event::Built {
                        drv: p(C),
                        outputs: BTreeMap::new(),
                        duration: Duration::ZERO,
                    });
                    pr.event(&Event::Failed {
                        drv: p(C),
                        message: String::new(),
                    });
                    pr.event(&Event::Skipped {
                        drv: p(D),
                        because: p(A),
                    });
                    pr.event(&Event::Cached {
                        drv: p(D),
                        outputs: BTreeMap::new(),
                    });
                }
                pr.finish();
                let text = buf.text();
                if format == LogFormat::Plain || (format == LogFormat::Bar && !tty) {
                    // Pieces of 64 KiB as they fill, the rest at finish; named after
                    // the drv path.
                    assert_eq!(text.matches("world> ").count(), 5);
                    assert!(text.contains("skipped top: depends on failed hello\n"));
                }
            }
        }
    }

    #[test]
    fn waiting_for_lock_in_every_form() {
        let evs = [
            Event::Planned {
                drvs: vec![p(A), p(B)],
            },
            Event::WaitingForLock {
                drv: p(A),
                name: "hello".into(),
            },
            Event::Cached {
                drv: p(A),
                outputs: outs(A_OUT),
            },
        ];
        let run = |format, tty| {
            let buf = Buf::default();
            let pr = Progress::with_options(
                format,
                false,
                Box::new(buf.clone()),
                tty,
                Width::Fixed(80),
                false,
            );
            (pr, buf)
        };
        let (pr, buf) = run(LogFormat::Plain, false);
        evs.iter().for_each(|e| pr.event(e));
        pr.finish();
        assert_eq!(buf.text(), format!("waiting for lock on '{A}'...\n"));

        let (pr, buf) = run(LogFormat::Json, false);
        evs.iter().for_each(|e| pr.event(e));
        pr.finish();
        let text = buf.text();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[1],
            format!(r#"{{"action":"waiting","drv":"{A}","name":"hello"}}"#)
        );
        assert!(lines[2].starts_with(r#"{"action":"cached""#));

        let (pr, buf) = run(LogFormat::Bar, true);
        evs[..2].iter().for_each(|e| pr.event(e));
        assert_eq!(
            screen(&buf.bytes()),
            [
                "[done 0/2, running 0, queued 1, failed 0, waiting 1]",
                "  waiting for lock on hello 0s",
            ]
        );
        pr.event(&evs[2]);
        assert_eq!(
            screen(&buf.bytes()),
            ["[done 1/2, running 0, queued 1, failed 0]"]
        );
        pr.finish();
    }

    #[test]
    fn helpers() {
        assert_eq!(elapsed(Duration::from_secs(12)), "12s");
        assert_eq!(elapsed(Duration::from_secs(185)), "3m05s");
        assert_eq!(elapsed(Duration::from_secs(7620)), "2h07m");
        assert_eq!(truncate("abcdef", 3), "abc");
        assert_eq!(truncate("ab", 3), "ab");
        assert_eq!(
            sanitize("a\tb\x1b]0;title\x07c\x1b[1;32mg\x1b", true),
            "a\tbc\x1b[1;32mg\x1b[0m"
        );
        assert_eq!(
            sanitize("a\tb\x1b]0;title\x07c\x1b[1;32mg\x1b", false),
            "a\tbcg"
        );
        assert_eq!(sanitize("x\x1b[?25ly", true), "xy");
        assert_eq!(sanitize("a\x1b(Bb\x1b7c", true), "abc");
    }

    #[test]
    fn plain_lines_lose_escape_sequences_and_keep_other_bytes() {
        let cases: [(&[u8], &[u8]); 7] = [
            (b"plain \xff text", b"plain \xff text"),
            (b"\x1b[1;31merror:\x1b[0m boom", b"error: boom"),
            (b"\x1b]0;title\x07after", b"after"),
            (b"\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\", b"link"),
            (b"a\x1b(Bb", b"ab"),
            (b"cut\x1b[", b"cut"),
            (b"end\x1b", b"end"),
        ];
        for (input, want) in cases {
            assert_eq!(
                strip_escapes(input),
                want,
                "{:?}",
                String::from_utf8_lossy(input)
            );
        }
    }

    #[test]
    fn colours_of_a_failure_reach_neither_a_pipe_nor_a_no_color_terminal() {
        let failed = Event::Failed {
            drv: p(A),
            message: "builder failed\n\x1b[31mred\x1b[0m line".into(),
        };
        // Plain (a pipe): no escape at all.
        let buf = Buf::default();
        let pr = Progress::with_options(
            LogFormat::Plain,
            false,
            Box::new(buf.clone()),
            false,
            Width::Fixed(80),
            false,
        );
        pr.event(&failed);
        pr.finish();
        assert_eq!(buf.text(), "builder failed\nred line\n");
        // Live with colour: kept; live with NO_COLOR: dropped.
        for (colour, want) in [(true, "\x1b[31mred\x1b[0m line"), (false, "red line")] {
            let buf = Buf::default();
            let pr = Progress::with_colour(
                LogFormat::Bar,
                false,
                Box::new(buf.clone()),
                true,
                Width::Fixed(80),
                false,
                colour,
            );
            pr.event(&failed);
            pr.finish();
            let text = buf.text();
            assert!(text.contains(want), "{colour}: {text:?}");
            if !colour {
                assert!(!text.contains("\x1b[31m"), "{text:?}");
            }
        }
    }

    #[test]
    fn an_interrupt_erases_the_status_area_and_stops_drawing() {
        let (pr, buf) = live(false, 80);
        pr.event(&Event::Started {
            drv: p(A),
            name: "hello".into(),
        });
        let before = buf.bytes().len();
        assert!(before > 0, "the status area was drawn");
        pr.shared.interrupt();
        let after = buf.bytes();
        assert!(
            after[before..].starts_with(b"\x1b["),
            "{:?}",
            String::from_utf8_lossy(&after)
        );
        assert!(after.ends_with(b"A\r\x1b[J"));
        // Nothing is drawn any more.
        pr.event(&Event::Started {
            drv: p(B),
            name: "two".into(),
        });
        pr.finish();
        assert_eq!(buf.bytes().len(), after.len());
    }
}
