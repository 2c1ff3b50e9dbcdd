//! `rocmx key generate NAME --secret-key-file PATH`: a new ed25519 signing key for a
//! binary cache, as `nix key generate-secret` + `convert-secret-to-public` do.
//!
//! Owns: writing the secret key file (mode 0600, never over an existing file) and
//! printing the public key `NAME:base64` on standard output. Must not: put the secret
//! anywhere else.

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;

use clap::{Args, Subcommand};
use rocmx_cache::keys::SecretKey;

/// Signing keys for binary caches.
#[derive(Args)]
pub struct KeyArgs {
    #[command(subcommand)]
    cmd: KeyCmd,
}

#[derive(Subcommand)]
enum KeyCmd {
    /// Generate a signing key: the secret key goes to --secret-key-file (mode 0600), the
    /// public key NAME:BASE64 is printed (put it in trusted-public-keys)
    Generate {
        /// The key's name, e.g. cache.example.org-1
        name: String,
        /// Where to write the secret key (must not exist)
        #[arg(long = "secret-key-file", value_name = "PATH")]
        secret_key_file: PathBuf,
    },
}

pub fn run(a: KeyArgs) -> i32 {
    match a.cmd {
        KeyCmd::Generate {
            name,
            secret_key_file,
        } => {
            let key = match SecretKey::generate(&name) {
                Ok(k) => k,
                Err(e) => {
                    eprintln!("error: {e}");
                    return 1;
                }
            };
            let written = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&secret_key_file)
                .and_then(|mut f| {
                    f.write_all(key.to_text().as_bytes())?;
                    f.write_all(b"\n")?;
                    f.sync_all()
                });
            if let Err(e) = written {
                let hint = if e.kind() == std::io::ErrorKind::AlreadyExists {
                    " (it exists; rocmx never overwrites a key: choose another path)"
                } else {
                    ""
                };
                eprintln!(
                    "error: writing the secret key to '{}': {e}{hint}",
                    secret_key_file.display()
                );
                return 1;
            }
            println!("{}", key.public());
            0
        }
    }
}
