//! Reading `.deb` data members ahead of their extraction, on a second thread.
//!
//! Owns: the hand-over between a producer thread, which walks the packages in
//! order and decompresses each data member (xz dominates the cost of building a
//! root: about half of it), and the consumer, which extracts. The producer
//! runs at most [`AHEAD`] chunks of [`CHUNK`] bytes ahead, so memory stays
//! bounded whatever the packages' sizes.
//!
//! The protocol, per package, in lock order: [`Event::Begin`] (the control
//! paragraph and the member's name), then [`Event::Chunk`]s of the
//! decompressed tar stream, then [`Event::End`]; or [`Event::Failed`] at any
//! point, after which the producer stops. If the consumer stops (an error, or
//! it is done), the producer's next send fails and it stops too.
//!
//! Must not: write anything, or interpret the tar stream (that is
//! [`super::extract`]'s).

use std::io::{self, Read};
use std::path::PathBuf;
use std::sync::mpsc::{Receiver, SyncSender};

use super::{walk, Control, DebError};

/// Bytes per chunk handed over.
pub const CHUNK: usize = 1 << 18;
/// Chunks the producer may be ahead (64 MiB).
pub const AHEAD: usize = 256;

/// What the producer sends.
pub enum Event {
    /// The next package's data member starts: its control paragraph and the
    /// member's name (`data.tar.xz`, …).
    Begin(Control, String),
    /// Decompressed bytes of the current data member.
    Chunk(Vec<u8>),
    /// The current data member is complete.
    End,
    /// Walking or decompressing a package failed; nothing follows.
    Failed(DebError),
}

/// Walks `debs` in order, sending each data member as [`Event`]s on `tx`.
pub fn produce(debs: &[PathBuf], tx: SyncSender<Event>) {
    for deb in debs {
        // Set when the consumer has gone: stop quietly.
        let mut gone = false;
        let r = walk(
            deb,
            Some(&mut |c: &Control, member: &str, stream: &mut dyn Read| {
                if tx
                    .send(Event::Begin(c.clone(), member.to_string()))
                    .is_err()
                {
                    gone = true;
                    return Ok(());
                }
                loop {
                    let mut buf = vec![0u8; CHUNK];
                    let n = read_full(stream, &mut buf).map_err(|e| DebError {
                        deb: deb.clone(),
                        member: member.to_string(),
                        message: format!("decompressing: {e}"),
                    })?;
                    if n == 0 {
                        break;
                    }
                    buf.truncate(n);
                    if tx.send(Event::Chunk(buf)).is_err() {
                        gone = true;
                        return Ok(());
                    }
                }
                gone = tx.send(Event::End).is_err();
                Ok(())
            }),
        );
        if gone {
            return;
        }
        if let Err(e) = r {
            let _ = tx.send(Event::Failed(e));
            return;
        }
    }
}

/// Fills `buf` as far as the stream allows; 0 only at its end.
fn read_full(r: &mut dyn Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// The consumer's view of one data member: a [`Read`] over its chunks.
pub struct MemberReader<'a> {
    rx: &'a Receiver<Event>,
    cur: Vec<u8>,
    pos: usize,
    done: bool,
    /// The producer's failure, if it sent one inside this member.
    pub failed: Option<DebError>,
}

impl<'a> MemberReader<'a> {
    /// A reader for the member that [`Event::Begin`] just announced.
    pub fn new(rx: &'a Receiver<Event>) -> Self {
        MemberReader {
            rx,
            cur: Vec::new(),
            pos: 0,
            done: false,
            failed: None,
        }
    }

    /// Reads what is left of the member (the tar reader stops at its
    /// end-of-archive marker, before the padding).
    pub fn drain(&mut self) {
        while !self.done && self.next_chunk().is_ok() {}
    }

    fn next_chunk(&mut self) -> io::Result<()> {
        match self.rx.recv() {
            Ok(Event::Chunk(c)) => {
                self.cur = c;
                self.pos = 0;
            }
            Ok(Event::End) => self.done = true,
            Ok(Event::Failed(e)) => {
                self.done = true;
                let msg = e.message.clone();
                self.failed = Some(e);
                return Err(io::Error::other(msg));
            }
            Ok(Event::Begin(..)) => {
                self.done = true;
                return Err(io::Error::other("internal: a package began inside another"));
            }
            Err(_) => {
                self.done = true;
                return Err(io::Error::other("the reading thread stopped"));
            }
        }
        Ok(())
    }
}

impl Read for MemberReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.pos == self.cur.len() {
            if self.done {
                return Ok(0);
            }
            self.next_chunk()?;
        }
        let n = buf.len().min(self.cur.len() - self.pos);
        buf[..n].copy_from_slice(&self.cur[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}
