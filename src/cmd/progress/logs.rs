//! Builders' log lines in the progress display: chunks cut into lines, the incomplete
//! rest kept per derivation, over-long lines cut into pieces, and each line written in
//! the current form (phase markers shown as phases for people, kept as written in JSON).
//!
//! Must not: write to the terminal itself (lines go into the event's permanent output,
//! which `status.rs` writes), or keep a partial line of a derivation that ended.

use rocmx_builder::events::phase_of_line;
use rocmx_store::StorePath;

use super::escapes::{sanitize, strip_escapes};
use super::json::JsonEvent;
use super::{Mode, State};

/// A partial log line longer than this is printed in pieces.
pub(super) const MAX_LOG_LINE: usize = 64 * 1024;
impl State {
    /// Cuts a chunk of `drv`'s log into lines, keeping the incomplete rest.
    pub(super) fn log_chunk(&mut self, drv: &StorePath, data: &[u8], perm: &mut Vec<u8>) {
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
    pub(super) fn flush_partial(&mut self, drv: &StorePath, perm: &mut Vec<u8>) {
        if let Some(buf) = self.partial.remove(drv) {
            if !buf.is_empty() {
                self.log_line(drv, &buf, perm);
            }
        }
    }

    /// One log line (without its `\n`) in the current form. For people (plain, live),
    /// a phase marker is shown as the phase it announces ([`shown_line`]); JSON keeps
    /// the line as written.
    pub(super) fn log_line(&self, drv: &StorePath, line: &[u8], perm: &mut Vec<u8>) {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let shown;
        let line = if self.mode == Mode::Json {
            line
        } else {
            shown = shown_line(line);
            &shown[..]
        };
        match self.mode {
            Mode::Json => JsonEvent::Log {
                drv,
                line: String::from_utf8_lossy(line),
            }
            .write_to(perm),
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
}

/// A builder's line as people see it: a phase marker becomes `Running phase: NAME`
/// (nixpkgs' stdenv wording), anything else is unchanged.
pub(super) fn shown_line(line: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    match phase_of_line(line) {
        Some(phase) => format!("Running phase: {phase}").into_bytes().into(),
        None => line.into(),
    }
}
