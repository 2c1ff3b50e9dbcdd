//! A bounded, in-memory pipe between a producing thread and a reader: used to read a
//! NAR ahead of its restore (fetching) and to stream a NAR being dumped (serving).
//!
//! Owns: the hand-over only (chunks of about [`CHUNK`] bytes, at most [`AHEAD`]
//! waiting). Dropping the reader makes the producer's next write fail, which stops it.

use std::io::{self, BufWriter, Read, Write};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};

/// Bytes per chunk.
pub const CHUNK: usize = 1 << 20;
/// Chunks that may wait.
pub const AHEAD: usize = 32;

/// A reader of what `produce` writes on its own thread; an error it returns is the
/// reader's last read.
pub fn reader_from<F>(produce: F) -> PipeReader
where
    F: FnOnce(&mut dyn Write) -> io::Result<()> + Send + 'static,
{
    let (tx, rx) = sync_channel(AHEAD);
    std::thread::spawn(move || {
        let errors = tx.clone();
        let mut w = BufWriter::with_capacity(CHUNK, PipeWriter { tx });
        let r = produce(&mut w).and_then(|()| w.flush());
        drop(w);
        let _ = errors.send(match r {
            Ok(()) => Ok(Vec::new()),
            Err(e) => Err(e),
        });
    });
    PipeReader {
        rx,
        cur: Vec::new(),
        pos: 0,
        done: false,
    }
}

/// Reads `inner` ahead on its own thread.
pub fn read_ahead(mut inner: Box<dyn Read + Send>) -> PipeReader {
    reader_from(move |w| io::copy(&mut inner, w).map(|_| ()))
}

struct PipeWriter {
    tx: SyncSender<io::Result<Vec<u8>>>,
}

impl Write for PipeWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        self.tx
            .send(Ok(buf.to_vec()))
            .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "the reader has gone"))?;
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The reading end (see [`reader_from`]).
pub struct PipeReader {
    rx: Receiver<io::Result<Vec<u8>>>,
    cur: Vec<u8>,
    pos: usize,
    done: bool,
}

impl Read for PipeReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.pos == self.cur.len() {
            if self.done || buf.is_empty() {
                return Ok(0);
            }
            match self.rx.recv() {
                // The end marker (the producer's writes are never empty).
                Ok(Ok(c)) if c.is_empty() => self.done = true,
                Ok(Ok(c)) => {
                    self.cur = c;
                    self.pos = 0;
                }
                Ok(Err(e)) => {
                    self.done = true;
                    return Err(e);
                }
                Err(_) => {
                    self.done = true;
                    return Err(io::Error::other("the producing thread stopped"));
                }
            }
        }
        let n = buf.len().min(self.cur.len() - self.pos);
        buf[..n].copy_from_slice(&self.cur[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn carries_everything_and_the_error() {
        let data: Vec<u8> = (0..3 * CHUNK + 17).map(|i| (i % 251) as u8).collect();
        let d = data.clone();
        let mut got = Vec::new();
        reader_from(move |w| w.write_all(&d))
            .read_to_end(&mut got)
            .unwrap();
        assert_eq!(got, data);
        let mut r = reader_from(|w| {
            w.write_all(b"abc")?;
            Err(io::Error::other("boom"))
        });
        let mut got = Vec::new();
        let e = r.read_to_end(&mut got).unwrap_err();
        assert_eq!(e.to_string(), "boom");
        let mut got = Vec::new();
        read_ahead(Box::new(&b"xyz"[..]))
            .read_to_end(&mut got)
            .unwrap();
        assert_eq!(got, b"xyz");
    }
}
