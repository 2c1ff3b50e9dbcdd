//! Reading one URL for `builtin:fetchurl` under its [`Limits`]: the time it
//! may take and the bytes it may deliver.
//!
//! This module owns the worker thread that opens and reads the URL (through
//! [`Transport`]), and everything that bounds it: the stall and minimum-speed
//! checks, the whole fetch's deadline, the size limit, the derivation's
//! expected size and the server's announced length. Blocking network calls
//! happen only on the worker, so the caller is never stuck in one: when a
//! limit is hit the caller stops waiting and drops the channel, and the
//! worker ends by itself at its next send (or when its own socket timeouts
//! fire, which are bounded by the connect and stall timeouts). A panic in
//! the HTTP client is caught on the worker and becomes an ordinary failure.
//!
//! It must not write files (the bytes go to the caller's sink), decide about
//! fallbacks (the caller tries the next URL) or look at the content.

use std::io::{self, Read, Write};
use std::panic::{self, AssertUnwindSafe};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender};
use std::thread;
use std::time::{Duration, Instant};

use super::limits::{secs, Limits};
use super::transport::{Failure, Transport};

/// What the worker tells the caller.
enum Event {
    /// The request was redirected to this URL.
    Redirected(String),
    /// The response is there; the body follows.
    Head {
        /// The announced length (`Content-Length`, or a file's size).
        expected_len: Option<u64>,
    },
    /// The next bytes of the body.
    Data(Vec<u8>),
    /// The body ended.
    End,
    /// Opening or reading failed.
    Failed(Failure),
}

/// How many chunks may wait in the channel (each at most [`CHUNK`] bytes).
const QUEUE: usize = 8;
/// The size of one read.
const CHUNK: usize = 1 << 16;
/// Extra time the caller waits for the response head beyond the connect and
/// stall timeouts, so that the worker's own, more precise, error comes first.
const HEAD_GRACE: Duration = Duration::from_secs(2);

/// One attempt to read a URL.
pub(super) struct Attempt<'a> {
    /// The URL (after `mirror://` expansion).
    pub url: &'a str,
    /// The limits of the fetch.
    pub limits: &'a Limits,
    /// When the whole fetch must be over.
    pub deadline: Option<Instant>,
    /// The exact size the derivation expects (its `size` attribute).
    pub expected_size: Option<u64>,
}

/// Why an attempt did not deliver the whole body.
pub(super) enum Stop {
    /// The source's fault (network, status, a limit): try the next URL.
    Failed(Failure),
    /// The whole fetch's time limit passed: try nothing more.
    OutOfTime(Failure),
    /// The sink failed (a local write error): stop at once.
    Local(io::Error),
}

impl Attempt<'_> {
    /// Reads the URL through `transport`, handing the body to `sink` chunk by
    /// chunk; redirects are logged to `log`. Gives the number of bytes.
    pub(super) fn run(
        &self,
        transport: &mut Transport,
        log: &mut dyn Write,
        sink: &mut dyn FnMut(&[u8]) -> io::Result<()>,
    ) -> Result<u64, Stop> {
        transport.prepare(self.url).map_err(Stop::Failed)?;
        let rx = spawn_worker(transport.clone(), self.url.to_string())?;
        self.consume(&rx, log, sink)
    }

    /// Takes the worker's events from `rx` until the body ends or a limit is
    /// hit; see [`Attempt::run`].
    fn consume(
        &self,
        rx: &Receiver<Event>,
        log: &mut dyn Write,
        sink: &mut dyn FnMut(&[u8]) -> io::Result<()>,
    ) -> Result<u64, Stop> {
        let url = self.url;
        let limits = self.limits;
        // The response head: the worker's connect and read timeouts apply to
        // each request; this bound only guards against a worker stuck anyway.
        let head_wait = limits
            .connect_timeout
            .saturating_add(limits.stall_timeout)
            .saturating_add(HEAD_GRACE);
        let mut current = url.to_string();
        let mut head_by = Instant::now() + head_wait;
        let announced = loop {
            let Some(event) = self.receive(rx, head_by, &current)? else {
                return Err(Stop::Failed(Failure::new(format!(
                    "no response from '{current}' within {} s",
                    secs(head_wait)
                ))));
            };
            match event {
                Event::Redirected(to) => {
                    let _ = writeln!(log, "redirected to '{to}'");
                    current = to;
                    head_by = Instant::now() + head_wait;
                }
                Event::Head { expected_len } => break expected_len,
                Event::Failed(f) => return Err(Stop::Failed(f)),
                Event::Data(_) | Event::End => {
                    return Err(internal(url, "body before the response head"))
                }
            }
        };
        if let Some(len) = announced {
            if len > limits.max_size {
                return Err(Stop::Failed(Failure::new(format!(
                    "{} (the server announced {len} bytes)",
                    too_large(url, limits.max_size)
                ))));
            }
            if let Some(size) = self.expected_size.filter(|&s| s != len) {
                return Err(Stop::Failed(Failure::new(format!(
                    "'{url}' is {len} bytes long (Content-Length), not the expected {size} bytes of the derivation's 'size'"
                ))));
            }
        }

        let stall = limits.stall_timeout;
        let mut bytes: u64 = 0;
        let mut window_start = Instant::now();
        let mut window_bytes: u64 = 0;
        loop {
            if Instant::now() >= window_start + stall {
                // The window is over (even if data is waiting): judge it.
                if window_bytes == 0 {
                    return Err(Stop::Failed(no_data(stall, &current)));
                }
                let floor = (limits.min_speed as f64 * stall.as_secs_f64()) as u64;
                if window_bytes < floor {
                    return Err(Stop::Failed(Failure::new(format!(
                        "download of '{current}' is too slow: {window_bytes} bytes in the last {} s, less than {} bytes/s",
                        secs(stall),
                        limits.min_speed
                    ))));
                }
                window_start = Instant::now();
                window_bytes = 0;
            }
            let Some(event) = self.receive(rx, window_start + stall, &current)? else {
                continue;
            };
            match event {
                Event::Data(chunk) => {
                    bytes = bytes.saturating_add(chunk.len() as u64);
                    window_bytes = window_bytes.saturating_add(chunk.len() as u64);
                    if bytes > limits.max_size {
                        return Err(Stop::Failed(Failure::new(too_large(
                            &current,
                            limits.max_size,
                        ))));
                    }
                    if let Some(size) = self.expected_size.filter(|&s| bytes > s) {
                        return Err(Stop::Failed(Failure::new(format!(
                            "received more than the expected {size} bytes (the derivation's 'size') from '{current}'"
                        ))));
                    }
                    sink(&chunk).map_err(Stop::Local)?;
                }
                Event::End => break,
                Event::Failed(f) => return Err(Stop::Failed(f)),
                Event::Redirected(_) | Event::Head { .. } => {
                    return Err(internal(url, "a second response head"))
                }
            }
        }
        if let Some(len) = announced.filter(|&l| l != bytes) {
            return Err(Stop::Failed(Failure::new(format!(
                "truncated: received {bytes} of {len} bytes"
            ))));
        }
        if let Some(size) = self.expected_size.filter(|&s| s != bytes) {
            return Err(Stop::Failed(Failure::new(format!(
                "truncated: received {bytes} of {size} bytes (the derivation's 'size')"
            ))));
        }
        Ok(bytes)
    }

    /// The worker's next event, or `None` when `by` passed first; fails
    /// when the fetch's deadline passes first.
    fn receive(
        &self,
        rx: &Receiver<Event>,
        by: Instant,
        current: &str,
    ) -> Result<Option<Event>, Stop> {
        let out_of_time = || {
            let limit = self.limits.timeout.unwrap_or_default();
            Stop::OutOfTime(Failure::new(format!(
                "'{current}' did not arrive within the fetch's time limit of {} s (--timeout)",
                secs(limit)
            )))
        };
        // Checked first, so that a steady stream cannot outrun the deadline.
        if self.deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(out_of_time());
        }
        let until = match self.deadline {
            Some(d) if d <= by => d,
            _ => by,
        };
        let wait = until.saturating_duration_since(Instant::now());
        match rx.recv_timeout(wait) {
            Ok(event) => Ok(Some(event)),
            Err(RecvTimeoutError::Timeout) => match self.deadline {
                Some(d) if Instant::now() >= d => Err(out_of_time()),
                _ => Ok(None),
            },
            Err(RecvTimeoutError::Disconnected) => Err(internal(
                self.url,
                "the download thread ended without a result",
            )),
        }
    }
}

/// "no data received for N s from 'URL'".
pub(super) fn no_data(stall: Duration, url: &str) -> Failure {
    Failure::new(format!(
        "no data received for {} s from '{url}'",
        secs(stall)
    ))
}

fn too_large(url: &str, max: u64) -> String {
    format!("download of '{url}' exceeded the size limit of {max} bytes; raise download-size-limit")
}

fn internal(url: &str, what: &str) -> Stop {
    Stop::Failed(Failure::new(format!(
        "internal error while fetching '{url}': {what}"
    )))
}

/// Starts the thread that opens `url` and reads it into the channel.
fn spawn_worker(transport: Transport, url: String) -> Result<Receiver<Event>, Stop> {
    let (tx, rx) = mpsc::sync_channel(QUEUE);
    thread::Builder::new()
        .name("fetchurl".into())
        .spawn(move || {
            let crash = tx.clone();
            let outcome = panic::catch_unwind(AssertUnwindSafe(|| work(transport, &url, &tx)));
            if let Err(payload) = outcome {
                let what = payload
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown panic".to_string());
                let _ = crash.send(Event::Failed(Failure::new(format!(
                    "the HTTP client failed on '{url}' ({what})"
                ))));
            }
        })
        .map_err(|e| Stop::Local(io::Error::other(format!("starting a download thread: {e}"))))?;
    Ok(rx)
}

/// The worker: opens, then reads until the end, an error, or the caller
/// going away (a failed send).
fn work(mut transport: Transport, url: &str, tx: &SyncSender<Event>) {
    let mut redirected = |to: &str| {
        let _ = tx.send(Event::Redirected(to.to_string()));
    };
    let opened = match transport.open(url, &mut redirected) {
        Ok(o) => o,
        Err(f) => {
            let _ = tx.send(Event::Failed(f));
            return;
        }
    };
    let at = opened.url;
    let announced = opened.expected_len;
    if tx
        .send(Event::Head {
            expected_len: opened.expected_len,
        })
        .is_err()
    {
        return;
    }
    let mut body = opened.body;
    let mut bytes: u64 = 0;
    loop {
        let mut buf = vec![0u8; CHUNK];
        let event = match body.read(&mut buf) {
            Ok(0) => Event::End,
            Ok(n) => {
                buf.truncate(n);
                bytes = bytes.saturating_add(n as u64);
                Event::Data(buf)
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => Event::Failed(match e.kind() {
                io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => {
                    no_data(transport.stall_timeout(), &at)
                }
                io::ErrorKind::UnexpectedEof if announced.is_some() => Failure::new(format!(
                    "truncated: received {bytes} of {} bytes (the connection closed early)",
                    announced.unwrap_or_default()
                )),
                _ => Failure::new(format!(
                    "reading the body of '{at}' failed after {bytes} bytes: {e}"
                )),
            }),
        };
        let last = !matches!(event, Event::Data(_));
        if tx.send(event).is_err() || last {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A channel already holding a response head and `chunks` chunks of 1 KiB.
    fn queued(chunks: usize) -> Receiver<Event> {
        let (tx, rx) = mpsc::sync_channel(chunks + 2);
        tx.send(Event::Head { expected_len: None }).unwrap();
        for _ in 0..chunks {
            tx.send(Event::Data(vec![0; 1024])).unwrap();
        }
        tx.send(Event::End).unwrap();
        rx
    }

    fn reason(stop: Stop) -> String {
        match stop {
            Stop::Failed(f) | Stop::OutOfTime(f) => f.reason,
            Stop::Local(e) => panic!("local error {e}"),
        }
    }

    #[test]
    fn limits_hold_while_data_keeps_coming() {
        // Data is always waiting and the sink is slow: the deadline and the
        // speed check must still be applied between chunks.
        let slow = &mut |_: &[u8]| {
            thread::sleep(Duration::from_millis(5));
            Ok(())
        };
        let limits = Limits {
            timeout: Some(Duration::from_millis(50)),
            ..Limits::default()
        };
        let attempt = Attempt {
            url: "http://h.example.invalid/f",
            limits: &limits,
            deadline: Some(Instant::now() + Duration::from_millis(50)),
            expected_size: None,
        };
        let stop = attempt
            .consume(&queued(200), &mut Vec::new(), slow)
            .expect_err("the deadline passes long before 200 slow chunks");
        assert!(matches!(stop, Stop::OutOfTime(_)));
        assert!(reason(stop).contains("time limit of 0.05 s"));

        let limits = Limits {
            stall_timeout: Duration::from_millis(20),
            min_speed: 1 << 40,
            ..Limits::default()
        };
        let attempt = Attempt {
            url: "http://h.example.invalid/f",
            limits: &limits,
            deadline: None,
            expected_size: None,
        };
        let stop = attempt
            .consume(&queued(200), &mut Vec::new(), slow)
            .expect_err("far below the minimum speed");
        let r = reason(stop);
        assert!(
            r.contains("too slow") && r.contains("h.example.invalid"),
            "{r}"
        );

        // Without limits in the way, the same stream is delivered whole.
        let attempt = Attempt {
            url: "http://h.example.invalid/f",
            limits: &Limits::default(),
            deadline: None,
            expected_size: Some(10 * 1024),
        };
        let mut got = 0;
        let n = attempt
            .consume(&queued(10), &mut Vec::new(), &mut |c: &[u8]| {
                got += c.len();
                Ok(())
            })
            .map_err(reason)
            .unwrap();
        assert_eq!((n, got), (10 * 1024, 10 * 1024));
    }
}
