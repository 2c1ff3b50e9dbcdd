//! The log of one build: compressed to its file, its tail kept for the failure message,
//! and every chunk and phase marker reported as [`Event`]s.
//!
//! Most logs are small, so a log is kept in memory and compressed in one go when the
//! build ends (zstd then sizes its tables for the actual length: a streaming encoder
//! would allocate and clear megabytes of them for every build). Only a log that grows
//! past [`STREAM_AFTER`] is streamed to its temporary file. Either way the stored file
//! is one zstd frame.
//!
//! Owns: [`LogSink`] (the writer handed to the sandbox or a built-in builder) and the
//! location of stored logs ([`log_path`]).
//!
//! Must not: decide anything about the build; it only records what the builder said.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rocmx_store::{LocalStore, StorePath};

use super::{io_err, BuildError};
use crate::events::{phase_of_line, Event, EventSink};

/// How many bytes of the log are kept in memory for the failure message.
const TAIL_BYTES: usize = 64 * 1024;
/// Lines of log in [`BuildError::Failed`].
const TAIL_LINES: usize = 25;
/// A partial line longer than this is not searched for a phase marker.
const MAX_MARKER_LINE: usize = 4096;
/// Logs up to this size are compressed in one go at the end; longer ones are streamed.
const STREAM_AFTER: usize = 1 << 20;
/// The zstd level of stored logs.
const LEVEL: i32 = 3;

/// Where the compressed log is.
enum Stored {
    /// Still in memory (nothing written yet).
    Memory(Vec<u8>),
    /// Being streamed to the temporary file.
    Stream(zstd::stream::write::Encoder<'static, fs::File>),
    /// Finished.
    Done,
}

struct LogInner {
    drv: StorePath,
    /// The temporary file (created once the log is streamed, or at the end).
    tmp: PathBuf,
    stored: Stored,
    tail: Vec<u8>,
    /// The current partial line (for phase markers), capped at [`MAX_MARKER_LINE`].
    line: Vec<u8>,
    line_overflow: bool,
    events: Arc<dyn EventSink>,
}

/// The build's log writer: compresses to a file, keeps a tail, reports events.
#[derive(Clone)]
pub(super) struct LogSink(Arc<Mutex<LogInner>>);

impl LogSink {
    /// A log for `drv`, compressed into the file `tmp` until [`LogSink::finish`] (the
    /// file is only created when the log is long, or at the end).
    pub(super) fn create(
        drv: &StorePath,
        tmp: &Path,
        events: Arc<dyn EventSink>,
    ) -> Result<LogSink, BuildError> {
        Ok(LogSink(Arc::new(Mutex::new(LogInner {
            drv: drv.clone(),
            tmp: tmp.to_path_buf(),
            stored: Stored::Memory(Vec::new()),
            tail: Vec::new(),
            line: Vec::new(),
            line_overflow: false,
            events,
        }))))
    }

    /// Finishes the compressed stream and moves it to `dest`; gives the last lines.
    pub(super) fn finish(&self, tmp: &Path, dest: &Path) -> Result<String, BuildError> {
        let mut inner = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match std::mem::replace(&mut inner.stored, Stored::Done) {
            Stored::Memory(text) => {
                let frame = zstd::bulk::compress(&text, LEVEL)
                    .map_err(io_err("compressing the build log", tmp))?;
                fs::write(tmp, frame).map_err(io_err("writing the build log", tmp))?;
                fs::rename(tmp, dest).map_err(io_err("storing the build log", dest))?;
            }
            Stored::Stream(enc) => {
                enc.finish().map_err(io_err("writing the build log", tmp))?;
                fs::rename(tmp, dest).map_err(io_err("storing the build log", dest))?;
            }
            Stored::Done => {}
        }
        let text = String::from_utf8_lossy(&inner.tail);
        let lines: Vec<&str> = text.lines().collect();
        let start = lines.len().saturating_sub(TAIL_LINES);
        Ok(lines[start..].join("\n"))
    }
}

impl Write for LogSink {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let mut guard = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let inner = &mut *guard;
        match &mut inner.stored {
            Stored::Memory(text) if text.len() + data.len() <= STREAM_AFTER => {
                text.extend_from_slice(data);
            }
            Stored::Memory(text) => {
                // Long: stream from now on.
                let f = fs::File::create(&inner.tmp)?;
                let mut enc = zstd::stream::write::Encoder::new(f, LEVEL)?;
                enc.write_all(text)?;
                enc.write_all(data)?;
                inner.stored = Stored::Stream(enc);
            }
            Stored::Stream(enc) => enc.write_all(data)?,
            Stored::Done => {}
        }
        inner.tail.extend_from_slice(data);
        if inner.tail.len() > 2 * TAIL_BYTES {
            let cut = inner.tail.len() - TAIL_BYTES;
            inner.tail.drain(..cut);
        }
        // Phase markers, line by line.
        let mut phases = Vec::new();
        let mut rest = data;
        while let Some(i) = rest.iter().position(|&b| b == b'\n') {
            if !inner.line_overflow && inner.line.len() + i <= MAX_MARKER_LINE {
                inner.line.extend_from_slice(&rest[..i]);
                if let Some(p) = phase_of_line(&inner.line) {
                    phases.push(p);
                }
            }
            inner.line.clear();
            inner.line_overflow = false;
            rest = &rest[i + 1..];
        }
        if inner.line.len() + rest.len() > MAX_MARKER_LINE {
            inner.line.clear();
            inner.line_overflow = true;
        } else if !inner.line_overflow {
            inner.line.extend_from_slice(rest);
        }
        let events = inner.events.clone();
        let drv = inner.drv.clone();
        drop(guard);
        events.event(&Event::Log {
            drv: drv.clone(),
            data: data.to_vec(),
        });
        for phase in phases {
            events.event(&Event::Phase {
                drv: drv.clone(),
                phase,
            });
        }
        Ok(data.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Where the build log of `drv` is stored in `store`: `<state>/log/<drv hash part>.log.zst`.
pub fn log_path(store: &LocalStore, drv: &StorePath) -> PathBuf {
    store
        .state_dir()
        .join("log")
        .join(format!("{}.log.zst", drv.hash_part()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_and_tail() {
        let dir = tempfile::tempdir().unwrap();
        let drv = StorePath::from_absolute("/rocmx/store/00000000000000000000000000000000-x.drv")
            .unwrap();
        let seen: Arc<Mutex<Vec<Event>>> = Default::default();
        let s2 = seen.clone();
        let sink: Arc<dyn EventSink> =
            Arc::new(move |e: &Event| s2.lock().unwrap().push(e.clone()));
        let tmp = dir.path().join("log.tmp");
        let dest = dir.path().join("log.zst");
        let mut log = LogSink::create(&drv, &tmp, sink).unwrap();
        log.write_all(b"hello\n@nix {\"action\":\"setPh").unwrap();
        log.write_all(b"ase\",\"phase\":\"buildPhase\"}\nbye")
            .unwrap();
        let tail = log.finish(&tmp, &dest).unwrap();
        assert_eq!(
            tail,
            "hello\n@nix {\"action\":\"setPhase\",\"phase\":\"buildPhase\"}\nbye"
        );
        let phases: Vec<String> = seen
            .lock()
            .unwrap()
            .iter()
            .filter_map(|e| match e {
                Event::Phase { phase, .. } => Some(phase.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(phases, ["buildPhase"]);
        let back = zstd::decode_all(fs::File::open(&dest).unwrap()).unwrap();
        assert!(back.starts_with(b"hello\n@nix"));
    }
    #[test]
    fn short_and_long_logs_are_one_zstd_frame() {
        let dir = tempfile::tempdir().unwrap();
        let drv = StorePath::from_absolute("/rocmx/store/00000000000000000000000000000000-x.drv")
            .unwrap();
        let sink: Arc<dyn EventSink> = Arc::new(|_: &Event| {});
        // A line pattern that does not compress to nothing.
        let line = |i: usize| format!("line {i} {}\n", i.wrapping_mul(2654435761) % 1000003);
        for (name, lines) in [("short", 10usize), ("empty", 0), ("long", 200_000)] {
            let tmp = dir.path().join(format!("{name}.tmp"));
            let dest = dir.path().join(format!("{name}.zst"));
            let mut log = LogSink::create(&drv, &tmp, sink.clone()).unwrap();
            let mut expected = Vec::new();
            for i in 0..lines {
                let l = line(i);
                log.write_all(l.as_bytes()).unwrap();
                expected.extend_from_slice(l.as_bytes());
            }
            if name == "long" {
                assert!(expected.len() > STREAM_AFTER);
                assert!(tmp.exists(), "a long log is streamed to its file");
            } else {
                assert!(!tmp.exists(), "a short log stays in memory");
            }
            let tail = log.finish(&tmp, &dest).unwrap();
            assert!(!tmp.exists());
            let back = zstd::decode_all(fs::File::open(&dest).unwrap()).unwrap();
            assert_eq!(back, expected, "{name}");
            if lines > 0 {
                assert!(tail.ends_with(line(lines - 1).trim_end()), "{name}");
            }
        }
    }
}
