//! NARs compressed as a sequence of independent zstd frames, so that fetching can
//! decompress on every core.
//!
//! Owns: the framed form written at push time ([`compress_framed`]) and its parallel
//! decoding at fetch time ([`decoder`]).
//!
//! # Format
//!
//! A concatenation of zstd frames, each holding [`FRAME`] bytes of the NAR (the last
//! one less) and declaring its content size. A concatenation of frames is an ordinary
//! zstd stream (`zstd -d` and every decoder read it as one), so the cache layout does
//! not change: `Compression: zstd`, `nar/<filehash>.nar.zst`. The frames are made on
//! several threads, each with its own compressor, and written in order.
//!
//! # Decoding
//!
//! A splitting thread reads the compressed stream and cuts it at frame boundaries
//! (`ZSTD_findFrameCompressedSize`: the block headers, nothing decompressed); worker
//! threads decompress whole frames into buffers of their declared size; the reader
//! hands them out in order and gives the buffers back for reuse (fresh memory costs a
//! page fault per page, which on a VM costs about as much as the decompression). Anything else is decoded as one stream on the
//! splitting thread, from where the framed part ended: a frame that declares no size or
//! more than [`MAX_FRAME`] bytes, or [`MAX_FRAME`] bytes without a frame boundary (a NAR
//! compressed as one frame, by an older push or another tool). A frame that holds more
//! or less than it declares is an error. Memory stays bounded: a few frames per worker.
//!
//! Must not: trust a declared size beyond [`MAX_FRAME`], or hand out bytes out of
//! order.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex};

use zstd::zstd_safe;

use crate::pipe::{self, PipeReader};

/// Bytes of NAR per frame.
pub const FRAME: usize = 16 << 20;
/// The largest frame (compressed, or declared content) decoded in parallel.
pub const MAX_FRAME: usize = 64 << 20;

/// The threads to use: every core, at least one.
fn cores() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// A [`Write`] that cuts what it is given into [`FRAME`]-sized numbered chunks.
struct Chunker {
    tx: SyncSender<(u64, Vec<u8>)>,
    /// Chunks the compressors are done with (reused: fresh memory costs page faults).
    free: Receiver<Vec<u8>>,
    buf: Vec<u8>,
    seq: u64,
    total: u64,
}

impl Chunker {
    fn send(&mut self) -> io::Result<()> {
        let mut fresh = self.free.try_recv().unwrap_or_default();
        fresh.clear();
        fresh.reserve(FRAME);
        let chunk = std::mem::replace(&mut self.buf, fresh);
        self.tx
            .send((self.seq, chunk))
            .map_err(|_| io::Error::other("the compressing threads stopped"))?;
        self.seq += 1;
        Ok(())
    }
}

impl Write for Chunker {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let n = data.len().min(FRAME - self.buf.len());
        self.buf.extend_from_slice(&data[..n]);
        self.total += n as u64;
        if self.buf.len() == FRAME {
            self.send()?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Compresses what `produce` writes as independent frames (see the module
/// documentation) at `level`, on `threads` threads (0: every core), into `out`; gives
/// `out` back and the number of bytes `produce` wrote.
pub fn compress_framed<W: Write + Send>(
    level: i32,
    threads: usize,
    produce: impl FnOnce(&mut dyn Write) -> io::Result<()>,
    mut out: W,
) -> io::Result<(W, u64)> {
    let threads = if threads == 0 { cores() } else { threads };
    let (job_tx, job_rx) = sync_channel::<(u64, Vec<u8>)>(threads);
    let job_rx = Arc::new(Mutex::new(job_rx));
    let (res_tx, res_rx) = sync_channel::<(u64, io::Result<Vec<u8>>)>(threads * 2);
    // Buffers handed back for reuse: input chunks by the compressors, frames by the
    // writer.
    let (chunk_free_tx, chunk_free_rx) = sync_channel::<Vec<u8>>(threads * 2);
    let (frame_free_tx, frame_free_rx) = sync_channel::<Vec<u8>>(threads * 4);
    let frame_free_rx = Arc::new(Mutex::new(frame_free_rx));
    let bound = zstd_safe::compress_bound(FRAME);
    std::thread::scope(|s| {
        for _ in 0..threads {
            let (job_rx, res_tx) = (job_rx.clone(), res_tx.clone());
            let (chunk_free, frame_free) = (chunk_free_tx.clone(), frame_free_rx.clone());
            s.spawn(move || {
                let mut z = match zstd::bulk::Compressor::new(level) {
                    Ok(z) => z,
                    Err(e) => {
                        let _ = res_tx.send((u64::MAX, Err(e)));
                        return;
                    }
                };
                while let Some((seq, chunk)) = next(&job_rx) {
                    let mut frame = frame_free
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .try_recv()
                        .unwrap_or_default();
                    frame.clear();
                    frame.reserve(bound);
                    let r = z.compress_to_buffer(&chunk, &mut frame).map(|_| frame);
                    let _ = chunk_free.try_send(chunk);
                    if res_tx.send((seq, r)).is_err() {
                        return;
                    }
                }
            });
        }
        drop((res_tx, chunk_free_tx));
        // The writer: frames in order, as they come back.
        let writer = s.spawn(move || -> io::Result<W> {
            let mut waiting: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
            let mut want = 0u64;
            for (seq, frame) in res_rx {
                waiting.insert(seq, frame?);
                while let Some(f) = waiting.remove(&want) {
                    out.write_all(&f)?;
                    let _ = frame_free_tx.try_send(f);
                    want += 1;
                }
            }
            if !waiting.is_empty() {
                return Err(io::Error::other("a compressed frame went missing"));
            }
            Ok(out)
        });
        let mut chunker = Chunker {
            tx: job_tx,
            free: chunk_free_rx,
            buf: Vec::with_capacity(FRAME),
            seq: 0,
            total: 0,
        };
        let produced = produce(&mut chunker).and_then(|()| {
            if chunker.buf.is_empty() && chunker.seq > 0 {
                Ok(())
            } else {
                // The last chunk (an empty input still makes one frame).
                chunker.send()
            }
        });
        let total = chunker.total;
        drop(chunker);
        let written = writer
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("the frame writer panicked")));
        produced?;
        written.map(|out| (out, total))
    })
}

/// The next job, or `None` when there are no more.
fn next<T>(rx: &Mutex<Receiver<T>>) -> Option<T> {
    rx.lock().unwrap_or_else(|e| e.into_inner()).recv().ok()
}

/// What the reader receives, numbered in stream order.
enum Piece {
    /// A frame decoded by a worker.
    Decoded(io::Result<Vec<u8>>),
    /// The rest of the stream (these bytes, then the reader), decoded as one stream.
    Rest(Vec<u8>, Box<dyn Read + Send>),
    /// The stream ended inside a frame, or reading it failed.
    Failed(io::Error),
}

/// Decompresses one complete frame into `out` (cleared), which must then hold
/// exactly its declared size.
fn decode_frame(
    z: &mut zstd::bulk::Decompressor<'_>,
    frame: &[u8],
    out: &mut Vec<u8>,
) -> io::Result<()> {
    let size = match zstd_safe::get_frame_content_size(frame) {
        Ok(Some(n)) if n <= MAX_FRAME as u64 => n as usize,
        _ => return Err(io::Error::other("a zstd frame without a usable size")),
    };
    out.clear();
    out.reserve(size);
    let n = z.decompress_to_buffer(frame, out)?;
    if n != size {
        return Err(io::Error::other(format!(
            "a zstd frame declared {size} bytes and held {n}"
        )));
    }
    Ok(())
}

/// Whether a complete frame can go to a worker: a zstd frame (not a skippable one)
/// with a declared size within bounds.
fn parallel_frame(frame: &[u8]) -> bool {
    matches!(zstd_safe::get_frame_content_size(frame), Ok(Some(n)) if n <= MAX_FRAME as u64)
}

/// Cuts `src` into frames, numbered in stream order: frames to the workers (`jobs`),
/// the rest and failures to the reader (`direct`). See the module documentation.
fn split(
    mut src: Box<dyn Read + Send>,
    jobs: SyncSender<(u64, Vec<u8>)>,
    direct: SyncSender<(u64, Piece)>,
    free: Receiver<Vec<u8>>,
) {
    // One buffer for the whole stream: frames are copied out of it into buffers the
    // workers give back, so that no memory is fresh after the first frames.
    let mut buf: Vec<u8> = Vec::new();
    let mut seq = 0u64;
    let mut eof = false;
    loop {
        // Every complete frame at the start of the buffer.
        while !buf.is_empty() {
            let Ok(len) = zstd_safe::find_frame_compressed_size(&buf) else {
                break;
            };
            if !parallel_frame(&buf[..len]) {
                let rest = std::mem::take(&mut buf);
                let _ = direct.send((seq, Piece::Rest(rest, src)));
                return;
            }
            let mut frame = free.try_recv().unwrap_or_default();
            frame.clear();
            frame.extend_from_slice(&buf[..len]);
            buf.drain(..len);
            if jobs.send((seq, frame)).is_err() {
                return;
            }
            seq += 1;
        }
        if eof {
            if !buf.is_empty() {
                let e = io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the zstd stream ends inside a frame",
                );
                let _ = direct.send((seq, Piece::Failed(e)));
            }
            return;
        }
        if buf.len() >= MAX_FRAME {
            // No boundary in sight: one long frame.
            let rest = std::mem::take(&mut buf);
            let _ = direct.send((seq, Piece::Rest(rest, src)));
            return;
        }
        let start = buf.len();
        buf.resize(start + (1 << 20), 0);
        match src.read(&mut buf[start..]) {
            Ok(0) => {
                buf.truncate(start);
                eof = true;
            }
            Ok(n) => buf.truncate(start + n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => buf.truncate(start),
            Err(e) => {
                let _ = direct.send((seq, Piece::Failed(e)));
                return;
            }
        }
    }
}

/// The decompressed stream, in order; see [`decoder`].
pub struct FramedReader {
    /// Decoded frames and the splitter's other pieces, numbered.
    rx: Receiver<(u64, Piece)>,
    waiting: BTreeMap<u64, Piece>,
    want: u64,
    cur: Vec<u8>,
    pos: usize,
    /// Buffers the reader is done with, for the workers to decode into.
    free: SyncSender<Vec<u8>>,
    /// The rest of the stream, decoded as one (read ahead on its own thread).
    rest: Option<PipeReader>,
    done: bool,
}

impl Read for FramedReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            if self.pos < self.cur.len() {
                let n = buf.len().min(self.cur.len() - self.pos);
                buf[..n].copy_from_slice(&self.cur[self.pos..self.pos + n]);
                self.pos += n;
                return Ok(n);
            }
            if let Some(r) = self.rest.as_mut() {
                return r.read(buf);
            }
            if self.done {
                return Ok(0);
            }
            let piece = loop {
                if let Some(p) = self.waiting.remove(&self.want) {
                    break Some(p);
                }
                match self.rx.recv() {
                    Ok((seq, p)) => {
                        self.waiting.insert(seq, p);
                    }
                    // Every sender is gone: the stream ended after the last frame.
                    Err(_) => break None,
                }
            };
            let Some(piece) = piece else {
                if !self.waiting.is_empty() {
                    return Err(io::Error::other("a decoded frame went missing"));
                }
                self.done = true;
                return Ok(0);
            };
            self.want += 1;
            match piece {
                Piece::Decoded(Ok(bytes)) => {
                    let old = std::mem::replace(&mut self.cur, bytes);
                    self.pos = 0;
                    let _ = self.free.try_send(old);
                }
                Piece::Decoded(Err(e)) | Piece::Failed(e) => {
                    self.done = true;
                    return Err(e);
                }
                Piece::Rest(head, tail) => {
                    let d = zstd::stream::read::Decoder::new(io::Cursor::new(head).chain(tail))?;
                    self.rest = Some(pipe::read_ahead(Box::new(d)));
                }
            }
        }
    }
}

/// A reader of the decompressed `src`, decoded on `threads` threads (0: every core)
/// ahead of the reader; see the module documentation. Dropping it stops the threads.
pub fn decoder(src: Box<dyn Read + Send>, threads: usize) -> FramedReader {
    let threads = if threads == 0 { cores() } else { threads };
    let (job_tx, job_rx) = sync_channel::<(u64, Vec<u8>)>(threads);
    let job_rx = Arc::new(Mutex::new(job_rx));
    let (res_tx, res_rx) = sync_channel::<(u64, Piece)>(threads * 2);
    // Buffers given back: decoded frames by the reader, compressed ones by the workers.
    let (free_tx, free_rx) = sync_channel::<Vec<u8>>(threads * 2 + 2);
    let free_rx = Arc::new(Mutex::new(free_rx));
    let (zfree_tx, zfree_rx) = sync_channel::<Vec<u8>>(threads * 2 + 2);
    for _ in 0..threads {
        let (job_rx, res_tx, free_rx) = (job_rx.clone(), res_tx.clone(), free_rx.clone());
        let zfree = zfree_tx.clone();
        std::thread::spawn(move || {
            let mut z = match zstd::bulk::Decompressor::new() {
                Ok(z) => z,
                Err(e) => {
                    let _ = res_tx.send((u64::MAX, Piece::Failed(e)));
                    return;
                }
            };
            while let Some((seq, frame)) = next(&job_rx) {
                let mut out = free_rx
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .try_recv()
                    .unwrap_or_default();
                let r = decode_frame(&mut z, &frame, &mut out).map(|()| out);
                let _ = zfree.try_send(frame);
                if res_tx.send((seq, Piece::Decoded(r))).is_err() {
                    return;
                }
            }
        });
    }
    drop(zfree_tx);
    std::thread::spawn(move || split(src, job_tx, res_tx, zfree_rx));
    FramedReader {
        rx: res_rx,
        waiting: BTreeMap::new(),
        want: 0,
        cur: Vec::new(),
        pos: 0,
        free: free_tx,
        rest: None,
        done: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(n: usize) -> Vec<u8> {
        // Compressible but not trivial.
        (0..n)
            .map(|i| (((i / 7) as u32 * 2654435761u32) >> 24) as u8)
            .collect()
    }

    fn framed(d: &[u8], threads: usize) -> Vec<u8> {
        let (out, n) =
            compress_framed(3, threads, |w| w.write_all(d), Vec::new()).expect("compress");
        assert_eq!(n, d.len() as u64);
        out
    }

    fn decode(z: Vec<u8>, threads: usize) -> io::Result<Vec<u8>> {
        let mut r = decoder(Box::new(io::Cursor::new(z)), threads);
        let mut out = Vec::new();
        r.read_to_end(&mut out)?;
        Ok(out)
    }

    #[test]
    fn framed_round_trips_and_is_plain_zstd() {
        for size in [0, 1, FRAME - 1, FRAME, FRAME + 1, 3 * FRAME + 12_345] {
            let d = data(size);
            for threads in [1, 3] {
                let z = framed(&d, threads);
                // Any zstd decoder reads it as one stream.
                assert!(zstd::decode_all(&z[..]).unwrap() == d, "{size}");
                for dt in [1, 2, 4] {
                    assert!(decode(z.clone(), dt).unwrap() == d, "{size} {threads} {dt}");
                }
            }
        }
    }

    #[test]
    fn one_long_frame_and_unsized_frames_decode_as_a_stream() {
        let d = data(MAX_FRAME + 5 * FRAME);
        let one = zstd::encode_all(&d[..], 1).unwrap();
        assert!(decode(one, 2).unwrap() == d);
        // A streamed frame declares no size; after framed ones.
        let mut mixed = framed(&d[..FRAME + 3], 2);
        let mut e = zstd::stream::write::Encoder::new(Vec::new(), 1).unwrap();
        e.write_all(&d[..1000]).unwrap();
        mixed.extend(e.finish().unwrap());
        let mut want = d[..FRAME + 3].to_vec();
        want.extend_from_slice(&d[..1000]);
        assert!(decode(mixed, 2).unwrap() == want);
    }

    #[test]
    fn damaged_streams_are_errors() {
        let d = data(2 * FRAME + 100);
        let z = framed(&d, 2);
        // Cut inside the last frame.
        assert!(decode(z[..z.len() - 10].to_vec(), 2).is_err());
        // A flipped byte in the middle of a frame.
        let mut bad = z.clone();
        let mid = bad.len() / 2;
        bad[mid] ^= 0x55;
        match decode(bad, 2) {
            Err(_) => {}
            Ok(out) => assert!(out != d, "a damaged stream decoded to the original"),
        }
        // Garbage.
        assert!(decode(b"not zstd at all".to_vec(), 2).is_err());
        // A frame that declares a huge size is not allocated for.
        let mut huge = Vec::new();
        huge.extend_from_slice(&[0x28, 0xb5, 0x2f, 0xfd]); // magic
        huge.push(0xe0); // 8-byte content size, single segment
        huge.extend_from_slice(&(1u64 << 40).to_le_bytes());
        huge.extend_from_slice(&[1, 0, 0]); // last raw block of size 0
        assert!(decode(huge, 2).is_err());
    }
}
