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
//! Submodules: `status.rs` (the live status area: its text, drawing it, the terminal's
//! width), `logs.rs` (builders' log lines: cut, kept, written in each form),
//! `escapes.rs` (what builders' text becomes: escape sequences stripped or
//! sanitised, status lines cut), `json.rs` (the JSON objects, with serde), `tests.rs`.
//!
//! Must not: write to standard output (results belong to `build.rs`), decide anything
//! about the build, or panic: events come from several threads (one mutex guards the
//! state; a poisoned lock is taken over), for derivations it may never have heard of,
//! with logs that are not UTF-8; write errors on standard error are ignored.

use std::collections::{HashMap, HashSet};
use std::io::{IsTerminal, Write};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::common::human_size;
use rocmx_builder::events::{Event, EventSink};
use rocmx_store::StorePath;

mod escapes;
mod json;
mod logs;
mod status;

use escapes::{sanitize, strip_escapes};
use json::JsonEvent;
use logs::shown_line;
use status::Width;

/// Time between two looks of the ticker at the status area.
const TICK: Duration = Duration::from_millis(100);
/// How build progress is shown on standard error (`--log-format`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// A live status area when standard error is a terminal, plain lines otherwise.
    #[default]
    Bar,
    /// One line per event, no escape codes: `waiting for lock on '/rocmx/store/…-x.drv'...`
    /// (another process is building it), `building '/rocmx/store/…-x.drv'...`,
    /// `built x (1.2s)`, failure messages, `skipped …`, `x: queued on slurm:debug (job
    /// 12)` for a build handed to an executor; with `-L`, `x> ` and a log line.
    Plain,
    /// One JSON object per line: `planned` (`drvs`), `waiting` (`drv`, `name`: another
    /// process holds its build lock), `start` (`drv`, `name`), `phase`
    /// (`drv`, `phase`), `remote` (`drv`, `executor`, `job`, `state`: `queued`,
    /// `running`, `resubmitted`, `fetching`), `log` (`drv`, `line`: one complete line, lossy UTF-8, always,
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
                    let drvs = drvs.iter().collect();
                    JsonEvent::Planned { drvs }.write_to(&mut perm);
                }
            }
            Event::Cached { drv, outputs } => {
                self.set_outcome(drv, Outcome::Done);
                if self.mode == Mode::Json {
                    JsonEvent::Cached { drv, outputs }.write_to(&mut perm);
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
                    Mode::Json => JsonEvent::Waiting { drv, name }.write_to(&mut perm),
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
                    Mode::Json => JsonEvent::Start { drv, name }.write_to(&mut perm),
                    Mode::Live => {}
                }
            }
            Event::Remote {
                drv,
                executor,
                job,
                state,
            } => {
                // The live display shows the remote state where a phase would be.
                let state = state.as_str();
                if let Some(r) = self.running.iter_mut().find(|r| &r.drv == drv) {
                    r.phase = Some(format!("{state} on {executor}, job {job}"));
                }
                match self.mode {
                    Mode::Plain => {
                        let name = self.name_of(drv);
                        let _ = writeln!(perm, "{name}: {state} on {executor} (job {job})");
                    }
                    Mode::Json => JsonEvent::Remote {
                        drv,
                        executor,
                        job,
                        state,
                    }
                    .write_to(&mut perm),
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
                    JsonEvent::Phase { drv, phase }.write_to(&mut perm);
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
                    Mode::Json => JsonEvent::Built {
                        drv,
                        outputs,
                        duration_ms: duration.as_millis(),
                    }
                    .write_to(&mut perm),
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
                    Mode::Json => JsonEvent::Failed { drv, message }.write_to(&mut perm),
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
                    Mode::Json => JsonEvent::Fetching {
                        paths: paths.len(),
                        download: *download,
                        unpacked: *unpacked,
                    }
                    .write_to(&mut perm),
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
                    Mode::Json => JsonEvent::Fetched {
                        path,
                        source,
                        bytes: *bytes,
                    }
                    .write_to(&mut perm),
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
                    Mode::Json => JsonEvent::Skipped { drv, because }.write_to(&mut perm),
                }
            }
        }
        self.emit(perm);
    }
}

/// Whether builders' colours may reach the terminal: not when `NO_COLOR` is set to
/// anything but the empty string (<https://no-color.org>).
fn colour_wanted() -> bool {
    std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

#[cfg(test)]
mod tests;
