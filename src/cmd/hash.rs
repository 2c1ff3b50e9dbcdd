//! `rocmx hash path|file`: the hash of a path's NAR serialisation (like `nix-hash`) or of a
//! file's contents (like `nix-hash --flat`), one line per PATH.
//!
//! Also home, for now, of the small error-rendering helpers that `store/nar.rs` shares
//! (`Failure`, `io_msg`, `nar_msg`, raw standard streams).

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::mpsc;

use clap::{ArgGroup, Args, Subcommand};
use rocmx_store::{nar, Encoding, Hash, HashAlgo, Hasher, NarError};

#[derive(Args, Debug)]
pub struct HashArgs {
    #[command(subcommand)]
    mode: Mode,
}

#[derive(Subcommand, Debug)]
enum Mode {
    /// Hash the NAR serialisation of each PATH (like `nix-hash --type ALGO PATH`).
    ///
    /// Prints one line per PATH, in SRI form (`<algo>-<base64>`) unless --base32, --base16
    /// or --base64 is given.
    Path(HashOpts),
    /// Hash the contents of each regular FILE (like `nix-hash --flat --type ALGO FILE`).
    ///
    /// Prints one line per FILE, in SRI form (`<algo>-<base64>`) unless --base32, --base16
    /// or --base64 is given. Symlinks are followed.
    File(HashOpts),
}

#[derive(Args, Debug)]
#[command(group(ArgGroup::new("encoding").args(["base32", "base16", "base64", "sri"])))]
struct HashOpts {
    /// Hash algorithm.
    #[arg(
        long = "type",
        value_name = "ALGO",
        default_value = "blake3",
        value_parser = ["blake3", "sha256", "sha1", "md5", "sha512"]
    )]
    algo: String,
    /// Print the digest in Nix's base32 (as `nix-hash --base32`).
    #[arg(long)]
    base32: bool,
    /// Print the digest in lowercase hexadecimal (as `nix-hash` by default).
    #[arg(long)]
    base16: bool,
    /// Print the digest in base64.
    #[arg(long)]
    base64: bool,
    /// Print `<algo>-<base64>`, Subresource Integrity form [default].
    #[arg(long)]
    sri: bool,
    /// The paths to hash.
    #[arg(required = true, value_name = "PATH")]
    paths: Vec<PathBuf>,
}

impl HashOpts {
    fn encoding(&self) -> Encoding {
        if self.base32 {
            Encoding::Nix32
        } else if self.base16 {
            Encoding::Base16
        } else if self.base64 {
            Encoding::Base64
        } else {
            Encoding::Sri
        }
    }
}

/// `store` maps logical `/rocmx/store/…` paths to the physical store root.
pub fn run(a: HashArgs, store: &super::StoreOpt) -> i32 {
    let (flat, opts) = match a.mode {
        Mode::Path(o) => (false, o),
        Mode::File(o) => (true, o),
    };
    let algo: HashAlgo = match opts.algo.parse() {
        Ok(algo) => algo,
        Err(e) => {
            // clap only lets the listed names through; kept for safety.
            eprintln!("error: {e}");
            return 2;
        }
    };
    let enc = opts.encoding();
    let mut out = io::stdout().lock();
    let mut failed = false;
    for given in &opts.paths {
        let path = &super::store::nar::locate(given, store).physical;
        let hashed = if flat {
            hash_file(path, algo)
        } else {
            hash_nar(path, algo)
        };
        match hashed {
            Ok(h) => {
                if let Err(e) = writeln!(out, "{}", h.encode(enc)).and_then(|()| out.flush()) {
                    return Failure::exit_code(Err(Failure::write(&e)));
                }
            }
            Err(f) => {
                // Report and go on with the other paths, like sha256sum.
                Failure::exit_code(Err(f));
                failed = true;
            }
        }
    }
    i32::from(failed)
}

/// The hash of the NAR of `path` (never followed).
fn hash_nar(path: &Path, algo: HashAlgo) -> Result<Hash, Failure> {
    std::fs::symlink_metadata(path).map_err(|e| {
        Failure::msg(format!(
            "getting status of '{}': {}",
            path.display(),
            io_msg(&e)
        ))
    })?;
    pipelined(algo, |sink| {
        nar::dump_path(path, sink).map_err(|e| Failure::msg(nar_msg(&e)))?;
        Ok(())
    })
}

/// Size of the reads that feed the hasher in `hash file`.
const FLAT_CHUNK: usize = 1024 * 1024;

/// The hash of the contents of the file at `path` (symlinks followed).
fn hash_file(path: &Path, algo: HashAlgo) -> Result<Hash, Failure> {
    let fail = |what: &str, e: &io::Error| {
        Failure::msg(format!("{what} '{}': {}", path.display(), io_msg(e)))
    };
    let mut file = File::open(path).map_err(|e| {
        if e.kind() == io::ErrorKind::NotFound {
            fail("getting status of", &e)
        } else {
            fail("opening file", &e)
        }
    })?;
    let meta = file.metadata().map_err(|e| fail("getting status of", &e))?;
    if meta.is_dir() {
        return Err(Failure::msg(format!("'{}' is a directory", path.display())));
    }
    pipelined(algo, |sink| {
        let mut buf = vec![0u8; FLAT_CHUNK];
        loop {
            match file.read(&mut buf) {
                Ok(0) => return Ok(()),
                Ok(n) => sink.write_all(&buf[..n]).map_err(|e| {
                    Failure::msg(format!("hashing '{}': {}", path.display(), io_msg(&e)))
                })?,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(fail("reading file", &e)),
            }
        }
    })
}

/// Size of the buffers handed from the reading thread to the hashing thread.
const PIPE_BUFFER: usize = 1024 * 1024;
/// Full buffers that may wait for the hashing thread.
const PIPE_DEPTH: usize = 4;

/// Hashes what `produce` writes into the sink, on another thread: reading files (from the
/// page cache, mostly a copy in the kernel) and hashing then overlap instead of
/// alternating, and BLAKE3's worker threads hash one buffer while the next is read instead
/// of idling (and spinning) through every read. Buffers of 1 MiB stay in cache; larger ones
/// made the extra copy into them measurably slower here.
///
/// TODO(integration): `rocmx_store::nar::hash_path` could do the same (reading file
/// contents straight into the hashing buffers, which saves the copy), so that `store add`
/// profits too; this is the CLI-side version.
fn pipelined(
    algo: HashAlgo,
    produce: impl FnOnce(&mut PipeSink) -> Result<(), Failure>,
) -> Result<Hash, Failure> {
    let (full_tx, full_rx) = mpsc::sync_channel::<Vec<u8>>(PIPE_DEPTH);
    let (empty_tx, empty_rx) = mpsc::channel::<Vec<u8>>();
    std::thread::scope(|scope| {
        let hasher = scope.spawn(move || {
            let mut h = Hasher::new(algo);
            for mut buf in full_rx {
                h.update(&buf);
                buf.clear();
                // The producer may be gone already (after an error); nothing to do then.
                let _ = empty_tx.send(buf);
            }
            h.finish()
        });
        let mut sink = PipeSink {
            full: Some(full_tx),
            empty: empty_rx,
            cur: Vec::with_capacity(PIPE_BUFFER),
            allocated: 1,
        };
        let produced = produce(&mut sink).and_then(|()| {
            sink.close()
                .map_err(|e| Failure::msg(format!("hashing: {}", io_msg(&e))))
        });
        drop(sink); // closes the channel if producing failed
        let hash = hasher
            .join()
            .map_err(|_| Failure::msg("hashing: the hashing thread panicked"))?;
        produced.map(|()| hash)
    })
}

/// A writer that gathers bytes into large buffers and sends them to the hashing thread,
/// reusing the buffers it gets back.
struct PipeSink {
    full: Option<mpsc::SyncSender<Vec<u8>>>,
    empty: mpsc::Receiver<Vec<u8>>,
    cur: Vec<u8>,
    allocated: usize,
}

impl PipeSink {
    fn send(&mut self) -> io::Result<()> {
        let next = match self.empty.try_recv() {
            Ok(buf) => buf,
            Err(_) if self.allocated < PIPE_DEPTH + 2 => {
                self.allocated += 1;
                Vec::with_capacity(PIPE_BUFFER)
            }
            Err(_) => self
                .empty
                .recv()
                .map_err(|_| io::Error::other("the hashing thread stopped"))?,
        };
        let full = std::mem::replace(&mut self.cur, next);
        self.full
            .as_ref()
            .ok_or_else(|| io::Error::other("hash pipe closed"))?
            .send(full)
            .map_err(|_| io::Error::other("the hashing thread stopped"))
    }

    /// Sends what is left and closes the channel.
    fn close(&mut self) -> io::Result<()> {
        if !self.cur.is_empty() {
            self.send()?;
        }
        self.full = None;
        Ok(())
    }
}

impl Write for PipeSink {
    fn write(&mut self, mut data: &[u8]) -> io::Result<usize> {
        let n = data.len();
        while !data.is_empty() {
            let room = PIPE_BUFFER - self.cur.len();
            let take = room.min(data.len());
            self.cur.extend_from_slice(&data[..take]);
            data = &data[take..];
            if self.cur.len() == PIPE_BUFFER {
                self.send()?;
            }
        }
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------
// Shared with `store/nar.rs`: errors and raw standard streams.

/// Why a command failed.
#[derive(Debug)]
pub(crate) enum Failure {
    /// Print `error: <message>` and exit 1.
    Msg(String),
    /// Already printed; exit 1.
    Reported,
    /// Whoever read standard output went away: exit 1 without a message.
    BrokenPipe,
}

impl Failure {
    pub(crate) fn msg(m: impl Into<String>) -> Failure {
        Failure::Msg(m.into())
    }

    /// A failure to write standard output.
    pub(crate) fn write(e: &io::Error) -> Failure {
        if e.kind() == io::ErrorKind::BrokenPipe {
            Failure::BrokenPipe
        } else {
            Failure::msg(format!("writing to standard output: {}", io_msg(e)))
        }
    }

    /// A NAR error while dumping or hashing.
    pub(crate) fn from_nar(e: &NarError) -> Failure {
        match e {
            NarError::Write(io) => Failure::write(io),
            _ => Failure::msg(nar_msg(e)),
        }
    }

    /// Reports the failure, if any, and gives the exit code (0 or 1).
    pub(crate) fn exit_code(r: Result<(), Failure>) -> i32 {
        match r {
            Ok(()) => 0,
            Err(Failure::Msg(m)) => {
                eprintln!("error: {m}");
                1
            }
            Err(Failure::Reported | Failure::BrokenPipe) => 1,
        }
    }
}

/// An I/O error's message without Rust's ` (os error N)` suffix, as Nix prints it.
pub(crate) fn io_msg(e: &io::Error) -> String {
    let s = e.to_string();
    match e.raw_os_error() {
        Some(code) => s
            .strip_suffix(&format!(" (os error {code})"))
            .map(str::to_string)
            .unwrap_or(s),
        None => s,
    }
}

/// A NAR error in Nix's style: paths in single quotes, I/O errors without the errno suffix.
/// Parse errors keep the library's text, which names the byte offset.
pub(crate) fn nar_msg(e: &NarError) -> String {
    let q = |p: &Path| format!("'{}'", p.display());
    match e {
        NarError::Dump { path, source } => format!("dumping {}: {}", q(path), io_msg(source)),
        NarError::Restore { path, source } => {
            format!("restoring {}: {}", q(path), io_msg(source))
        }
        NarError::DestinationExists { path } => {
            format!("restore destination {} already exists", q(path))
        }
        NarError::UnsafeParent { path } => format!(
            "restoring {}: parent is not a directory created by this restore",
            q(path)
        ),
        NarError::UnsupportedFileType { path } => format!(
            "dumping {}: unsupported file type (only regular files, directories and symlinks)",
            q(path)
        ),
        NarError::FileChangedSize { path } => {
            format!("dumping {}: file changed size while being read", q(path))
        }
        NarError::Read { offset, source } => {
            format!("reading NAR at byte {offset}: {}", io_msg(source))
        }
        NarError::Write(source) => format!("writing NAR: {}", io_msg(source)),
        other => other.to_string(),
    }
}

/// Standard output as an unbuffered `File` (callers add a `BufWriter`), bypassing the
/// line-buffered `Stdout`, which would scan binary output for newlines.
pub(crate) fn raw_stdout() -> Result<File, Failure> {
    io::stdout()
        .as_fd()
        .try_clone_to_owned()
        .map(File::from)
        .map_err(|e| Failure::msg(format!("standard output: {}", io_msg(&e))))
}

/// Standard input as an unbuffered `File` (the NAR parser buffers).
pub(crate) fn raw_stdin() -> Result<File, Failure> {
    io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .map(File::from)
        .map_err(|e| Failure::msg(format!("standard input: {}", io_msg(&e))))
}
