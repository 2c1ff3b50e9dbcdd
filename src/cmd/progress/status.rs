//! The live status area of the progress display: the counts and the running builds,
//! drawn below the permanent lines, redrawn when its text changed, and cut to the
//! terminal's width.
//!
//! Owns: [`Width`] (where the width comes from), the status lines' text
//! (`State::render`), and writing them (`State::emit` puts an event's permanent lines
//! above the area, `State::redraw` draws it again). Only cursor up, erase line and erase
//! below are written. Must not: decide what an event means (`super`), or write anything
//! in the plain and JSON forms but the permanent lines it is given.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use super::escapes::{printable, truncate};
use super::{Mode, State};
use crate::cmd::common::human_size;

/// Running builds listed in the status area before "… and N more".
pub(super) const MAX_RUNNING_LINES: usize = 8;
/// Terminal width when neither the terminal nor `$COLUMNS` tells.
pub(super) const DEFAULT_WIDTH: usize = 80;

/// Where the width of the terminal comes from.
#[derive(Clone, Copy, Debug)]
pub(super) enum Width {
    /// Standard error's terminal, else `$COLUMNS`, else [`DEFAULT_WIDTH`].
    Terminal,
    /// Given (tests).
    #[cfg_attr(not(test), allow(dead_code))]
    Fixed(usize),
}

impl Width {
    pub(super) fn columns(self) -> usize {
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
pub(super) fn terminal_columns() -> Option<usize> {
    let stderr = std::io::stderr();
    if !stderr.is_terminal() {
        return None;
    }
    let ws = rustix::termios::tcgetwinsize(&stderr).ok()?;
    (ws.ws_col > 0).then_some(ws.ws_col as usize)
}

impl State {
    /// Writes the permanent lines of one event; in the live form, above the status
    /// area (cleared, then drawn again below them).
    pub(super) fn emit(&mut self, perm: Vec<u8>) {
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
    pub(super) fn redraw(&mut self) {
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
    pub(super) fn render(&self, now: Instant) -> Vec<String> {
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
pub(super) fn draw_lines(buf: &mut Vec<u8>, lines: &[String]) {
    for l in lines {
        buf.extend_from_slice(b"\x1b[2K");
        buf.extend_from_slice(l.as_bytes());
        buf.push(b'\n');
    }
}

/// `12s`, `3m05s`, `2h07m`.
pub(super) fn elapsed(d: Duration) -> String {
    let s = d.as_secs();
    if s < 60 {
        format!("{s}s")
    } else if s < 3600 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
    }
}
