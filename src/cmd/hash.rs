//! `rocmx hash path|file`: the hash of a path's NAR serialisation (like `nix-hash`) or of a
//! file's contents (like `nix-hash --flat`), one line per PATH. Logical `/rocmx/store/…`
//! paths are hashed under the physical store root (`common::locate`, as `store dump`).

use std::fs::File;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use clap::{ArgGroup, Args, Subcommand};
use rocmx_store::{nar, Encoding, Hash, HashAlgo, HashPipe};

use super::common::locate;
use super::fail::{io_msg, nar_msg, Fail};

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
        let path = &locate(given, store).physical;
        let hashed = if flat {
            hash_file(path, algo)
        } else {
            hash_nar(path, algo)
        };
        match hashed {
            Ok(h) => {
                if let Err(e) = writeln!(out, "{}", h.encode(enc)).and_then(|()| out.flush()) {
                    return Fail::exit_code(Err(Fail::write(&e)));
                }
            }
            Err(f) => {
                // Report and go on with the other paths, like sha256sum.
                Fail::exit_code(Err(f));
                failed = true;
            }
        }
    }
    i32::from(failed)
}

/// The hash of the NAR of `path` (never followed).
fn hash_nar(path: &Path, algo: HashAlgo) -> Result<Hash, Fail> {
    std::fs::symlink_metadata(path).map_err(|e| {
        Fail::msg(format!(
            "getting status of '{}': {}",
            path.display(),
            io_msg(&e)
        ))
    })?;
    // Pipelined in the store: file contents are read into the hashing thread's buffers.
    nar::hash_path(path, algo)
        .map(|(h, _)| h)
        .map_err(|e| Fail::msg(nar_msg(&e)))
}

/// The hash of the contents of the file at `path` (symlinks followed).
fn hash_file(path: &Path, algo: HashAlgo) -> Result<Hash, Fail> {
    let fail = |what: &str, e: &io::Error| {
        Fail::msg(format!("{what} '{}': {}", path.display(), io_msg(e)))
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
        return Err(Fail::msg(format!("'{}' is a directory", path.display())));
    }
    // Read straight into the buffers that the store's pipe hashes on another thread.
    let mut pipe = HashPipe::new(algo);
    loop {
        match file.read(pipe.spare()) {
            Ok(0) => break,
            Ok(n) => pipe.commit(n).map_err(|e| fail("hashing", &e))?,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(fail("reading file", &e)),
        }
    }
    pipe.finish()
        .map(|(h, _)| h)
        .map_err(|e| fail("hashing", &e))
}
