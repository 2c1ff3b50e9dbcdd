//! [`HashPipe`]: a stream hashed on another thread, handed over in large reused buffers.
//!
//! Owns: the staging buffer, the channel of full buffers to the hashing thread and back,
//! and that thread's life (started at the first full buffer, stopped by
//! [`HashPipe::finish`] or on drop).
//!
//! Must not: know what is being hashed (the NAR writer and the local store's ingestion
//! feed it), read files itself, or leave its thread running once it is dropped.

use std::io::{self, Write};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::thread::JoinHandle;

use super::{Hash, HashAlgo, Hasher};

/// Size of the buffers handed to the hashing thread. 1 MiB stays in cache; larger ones
/// made the copy into them measurably slower, and every BLAKE3 update then starts at a
/// multiple of it, where BLAKE3 parallelises best.
pub const PIPE_BUFFER: usize = 1024 * 1024;

/// Full buffers that may wait for the hashing thread.
const PIPE_DEPTH: usize = 4;

/// A [`Write`] that hashes on another thread: bytes gather in a buffer of
/// [`PIPE_BUFFER`] bytes and each full buffer goes to the hashing thread, so that
/// producing the next one (mostly reading files, a copy in the kernel) overlaps hashing
/// this one, and BLAKE3's worker threads are not left idling (and spinning) through
/// every read. File contents can be read straight into the buffer ([`spare`](Self::spare),
/// [`commit`](Self::commit)), which saves a copy.
///
/// A stream shorter than one buffer never starts the thread: it is hashed at
/// [`finish`](Self::finish).
pub struct HashPipe {
    algo: HashAlgo,
    /// Always [`PIPE_BUFFER`] long; the first `fill` bytes are data.
    stage: Vec<u8>,
    fill: usize,
    count: u64,
    worker: Option<Worker>,
    /// Buffers made so far (at most `PIPE_DEPTH + 2`: the rest are reused).
    allocated: usize,
}

/// The hashing thread and the two directions of its channel.
struct Worker {
    full: SyncSender<(Vec<u8>, usize)>,
    empty: Receiver<Vec<u8>>,
    thread: JoinHandle<Hash>,
}

/// The error when the hashing thread is gone (it only stops early by panicking).
fn gone() -> io::Error {
    io::Error::other("the hashing thread stopped")
}

impl HashPipe {
    /// An empty stream to be hashed with `algo`.
    pub fn new(algo: HashAlgo) -> HashPipe {
        HashPipe {
            algo,
            stage: vec![0u8; PIPE_BUFFER],
            fill: 0,
            count: 0,
            worker: None,
            allocated: 1,
        }
    }

    /// Bytes taken so far.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The free room of the current buffer, to read into before [`commit`](Self::commit).
    /// Never empty, unless a hand-over to the hashing thread has failed.
    pub fn spare(&mut self) -> &mut [u8] {
        &mut self.stage[self.fill..]
    }

    /// Takes the first `n` bytes of [`spare`](Self::spare) as the next bytes of the
    /// stream. Panics if `n` exceeds the room.
    pub fn commit(&mut self, n: usize) -> io::Result<()> {
        assert!(n <= PIPE_BUFFER - self.fill, "commit beyond the spare room");
        self.fill += n;
        self.count += n as u64;
        if self.fill == PIPE_BUFFER {
            self.send()?;
        }
        Ok(())
    }

    /// Hands the current buffer to the hashing thread (started now if need be) and takes
    /// a returned one, or a new one while fewer than `PIPE_DEPTH + 2` exist.
    fn send(&mut self) -> io::Result<()> {
        let algo = self.algo;
        let w = self.worker.get_or_insert_with(|| Worker::start(algo));
        let next = match w.empty.try_recv() {
            Ok(buf) => buf,
            Err(_) if self.allocated < PIPE_DEPTH + 2 => {
                self.allocated += 1;
                vec![0u8; PIPE_BUFFER]
            }
            Err(_) => w.empty.recv().map_err(|_| gone())?,
        };
        let full = std::mem::replace(&mut self.stage, next);
        let len = std::mem::replace(&mut self.fill, 0);
        w.full.send((full, len)).map_err(|_| gone())
    }

    /// The hash of the whole stream and its length. Waits for the hashing thread.
    pub fn finish(mut self) -> io::Result<(Hash, u64)> {
        let Some(w) = self.worker.take() else {
            // Never a full buffer: not worth a thread.
            let mut h = Hasher::new(self.algo);
            h.update(&self.stage[..self.fill]);
            return Ok((h.finish(), self.count));
        };
        let tail = std::mem::take(&mut self.stage);
        let sent = if self.fill > 0 {
            w.full.send((tail, self.fill)).map_err(|_| gone())
        } else {
            Ok(())
        };
        drop(w.full); // ends the thread's loop
        let hash = w.thread.join().map_err(|_| gone())?;
        sent.map(|()| (hash, self.count))
    }
}

impl Worker {
    fn start(algo: HashAlgo) -> Worker {
        let (full, full_rx) = mpsc::sync_channel::<(Vec<u8>, usize)>(PIPE_DEPTH);
        let (empty_tx, empty) = mpsc::channel::<Vec<u8>>();
        let thread = std::thread::spawn(move || {
            let mut h = Hasher::new(algo);
            for (buf, len) in full_rx {
                h.update(&buf[..len]);
                // The producer may be gone already (after an error); nothing to do then.
                let _ = empty_tx.send(buf);
            }
            h.finish()
        });
        Worker {
            full,
            empty,
            thread,
        }
    }
}

impl Drop for HashPipe {
    fn drop(&mut self) {
        // Abandoned (an error upstream): close the channel and wait, so no thread
        // outlives the pipe.
        if let Some(w) = self.worker.take() {
            drop(w.full);
            let _ = w.thread.join();
        }
    }
}

impl Write for HashPipe {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.write_all(data)?;
        Ok(data.len())
    }

    fn write_all(&mut self, mut data: &[u8]) -> io::Result<()> {
        while !data.is_empty() {
            let room = self.spare();
            let n = room.len().min(data.len());
            room[..n].copy_from_slice(&data[..n]);
            // After a failed hand-over there is no room: commit(0) retries and fails.
            self.commit(n)?;
            data = &data[n..];
        }
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equals_one_shot_for_every_length_and_write_pattern() {
        let data: Vec<u8> = (0..3 * PIPE_BUFFER + 12_345)
            .map(|i| (i * 7 + i / 251) as u8)
            .collect();
        for algo in [HashAlgo::Blake3, HashAlgo::Sha256] {
            for len in [
                0,
                1,
                PIPE_BUFFER - 1,
                PIPE_BUFFER,
                PIPE_BUFFER + 1,
                data.len(),
            ] {
                let want = Hash::digest(algo, &data[..len]);
                // As a writer, in odd pieces.
                let mut p = HashPipe::new(algo);
                for c in data[..len].chunks(65_537) {
                    p.write_all(c).expect("write");
                }
                assert_eq!(
                    p.finish().expect("finish"),
                    (want, len as u64),
                    "{algo} {len}"
                );
                // Read straight into the spare room, a little at a time.
                let mut p = HashPipe::new(algo);
                let mut rest = &data[..len];
                while !rest.is_empty() {
                    let room = p.spare();
                    let n = room.len().min(rest.len()).min(300_000);
                    room[..n].copy_from_slice(&rest[..n]);
                    p.commit(n).expect("commit");
                    rest = &rest[n..];
                }
                assert_eq!(p.count(), len as u64);
                assert_eq!(
                    p.finish().expect("finish"),
                    (want, len as u64),
                    "{algo} {len}"
                );
            }
        }
    }

    #[test]
    fn an_abandoned_pipe_joins_its_thread() {
        let mut p = HashPipe::new(HashAlgo::Blake3);
        p.write_all(&vec![1u8; 5 * PIPE_BUFFER + 3]).expect("write");
        drop(p);
    }
}
