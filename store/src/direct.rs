//! Writing big files straight to the disk (`O_DIRECT`), for data that has to be made
//! durable before it is used anyway: restored imports, compressed NARs pushed to a
//! cache.
//!
//! Owns: [`DirectWriter`], which collects what it is given into aligned chunks of
//! [`CHUNK`] bytes and writes each whole chunk with `O_DIRECT`, and the tail (less
//! than a chunk, possibly unaligned) through the page cache at [`DirectWriter::finish`].
//! Skipping the page cache saves copying the data into it first, which is most of the
//! cost of writing a big file on a VM: first-touching page-cache memory costs more than
//! the disk write (600 MiB measured here: 1.4 s of system time buffered, 0.35 s wall
//! and almost no CPU direct). A filesystem that refuses `O_DIRECT` (tmpfs) gets
//! ordinary writes.
//!
//! Must not: leave the file with `O_DIRECT` set after [`DirectWriter::finish`], or
//! lose bytes: a write the kernel refuses direct is done buffered.

use std::fs::File;
use std::io::{self, Write};

use rustix::fs::OFlags;
use rustix::io::Errno;

/// The size of one direct write.
pub const CHUNK: usize = 4 << 20;
/// The alignment of direct writes (memory, length and file offset): the largest
/// logical block size in use.
const ALIGN: usize = 4096;

/// Writes a new file (from offset 0) in direct chunks; see the module documentation.
/// Call [`DirectWriter::finish`]: dropping it writes the tail too, but cannot report an
/// error.
pub struct DirectWriter {
    file: Option<File>,
    /// [`CHUNK`] bytes plus room to align them; the chunk starts at `start`.
    buf: Vec<u8>,
    start: usize,
    filled: usize,
    direct: bool,
}

impl DirectWriter {
    /// Wraps `file`, a new file open for writing at offset 0, turning `O_DIRECT` on
    /// when its filesystem allows it.
    pub fn new(file: File) -> DirectWriter {
        let direct = rustix::fs::fcntl_getfl(&file)
            .and_then(|f| rustix::fs::fcntl_setfl(&file, f | OFlags::DIRECT))
            .is_ok();
        let (buf, start) = if direct {
            let buf = vec![0u8; CHUNK + ALIGN];
            let start = buf.as_ptr().align_offset(ALIGN);
            (buf, start)
        } else {
            (Vec::new(), 0)
        };
        DirectWriter {
            file: Some(file),
            buf,
            start,
            filled: 0,
            direct,
        }
    }

    /// Whether whole chunks still go direct.
    pub fn is_direct(&self) -> bool {
        self.direct
    }

    /// Writes what is buffered (the tail through the page cache), turns `O_DIRECT` off
    /// and gives the file back.
    pub fn finish(mut self) -> io::Result<File> {
        self.write_tail()?;
        Ok(self.file.take().expect("present until finished"))
    }

    fn file(&mut self) -> &mut File {
        self.file.as_mut().expect("present until finished")
    }

    /// Turns `O_DIRECT` off: from now on everything goes through the page cache.
    fn buffered(&mut self) -> io::Result<()> {
        if self.direct {
            self.direct = false;
            let f = self.file();
            let flags = rustix::fs::fcntl_getfl(&*f)?;
            rustix::fs::fcntl_setfl(&*f, flags - OFlags::DIRECT)?;
        }
        Ok(())
    }

    /// Writes the full chunk direct (buffered if the kernel refuses).
    fn write_chunk(&mut self) -> io::Result<()> {
        let mut done = 0;
        while done < CHUNK && self.direct {
            let (start, end) = (self.start + done, self.start + CHUNK);
            let file = self.file.as_mut().expect("present until finished");
            match file.write(&self.buf[start..end]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    done += n;
                    // A short write that is not aligned leaves the offset unaligned.
                    if n % ALIGN != 0 {
                        self.buffered()?;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.raw_os_error() == Some(Errno::INVAL.raw_os_error()) => {
                    self.buffered()?
                }
                Err(e) => return Err(e),
            }
        }
        if done < CHUNK {
            let (start, end) = (self.start + done, self.start + CHUNK);
            let file = self.file.as_mut().expect("present until finished");
            file.write_all(&self.buf[start..end])?;
        }
        self.filled = 0;
        Ok(())
    }

    fn write_tail(&mut self) -> io::Result<()> {
        if self.file.is_none() {
            return Ok(());
        }
        self.buffered()?;
        if self.filled > 0 {
            let (start, end) = (self.start, self.start + self.filled);
            let file = self.file.as_mut().expect("checked above");
            file.write_all(&self.buf[start..end])?;
            self.filled = 0;
        }
        Ok(())
    }
}

impl Write for DirectWriter {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        if !self.direct {
            if self.filled > 0 {
                self.write_tail()?;
            }
            return self.file().write(data);
        }
        let n = data.len().min(CHUNK - self.filled);
        let at = self.start + self.filled;
        self.buf[at..at + n].copy_from_slice(&data[..n]);
        self.filled += n;
        if self.filled == CHUNK {
            self.write_chunk()?;
        }
        Ok(n)
    }

    /// Passes on what can be written now: nothing of a partial chunk while direct (it
    /// would leave the offset unaligned); [`DirectWriter::finish`] writes it.
    fn flush(&mut self) -> io::Result<()> {
        if !self.direct {
            self.write_tail()?;
        }
        Ok(())
    }
}

impl Drop for DirectWriter {
    fn drop(&mut self) {
        let _ = self.write_tail();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::{Path, PathBuf};

    fn bytes(n: usize, seed: u8) -> Vec<u8> {
        (0..n)
            .map(|i| (i as u64 * 131 + seed as u64) as u8)
            .collect()
    }

    /// Sizes around every boundary, written in pieces of awkward sizes, on a disk
    /// filesystem and on tmpfs (which refuses `O_DIRECT`): the same bytes come back.
    #[test]
    fn every_size_round_trips_direct_or_not() {
        let mut bases: Vec<PathBuf> = vec![std::env::temp_dir()];
        if Path::new("/dev/shm").is_dir() {
            bases.push(PathBuf::from("/dev/shm"));
        }
        let sizes = [
            0,
            1,
            ALIGN - 1,
            ALIGN,
            CHUNK - 1,
            CHUNK,
            CHUNK + 1,
            2 * CHUNK + ALIGN + 7,
        ];
        for base in bases {
            let d = tempfile::tempdir_in(&base).unwrap();
            for (i, size) in sizes.iter().enumerate() {
                let data = bytes(*size, i as u8);
                let p = d.path().join(format!("f{i}"));
                let mut w = DirectWriter::new(File::create(&p).unwrap());
                for piece in data.chunks(65_537 + i) {
                    w.write_all(piece).unwrap();
                }
                w.flush().unwrap();
                let f = w.finish().unwrap();
                let flags = rustix::fs::fcntl_getfl(&f).unwrap();
                assert!(!flags.contains(OFlags::DIRECT), "left direct");
                drop(f);
                assert!(
                    std::fs::read(&p).unwrap() == data,
                    "{} {size}",
                    base.display()
                );
            }
        }
    }

    #[test]
    fn dropping_writes_the_tail() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        let data = bytes(CHUNK + 100, 3);
        {
            let mut w = DirectWriter::new(File::create(&p).unwrap());
            w.write_all(&data).unwrap();
        }
        assert!(std::fs::read(&p).unwrap() == data);
    }
}
