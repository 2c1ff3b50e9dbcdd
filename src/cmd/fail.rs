//! How a command fails: [`Fail`], the one failure type of `src/cmd`, and the wording of
//! the errors it carries (I/O errors as Nix prints them, without Rust's ` (os error N)`;
//! NAR errors with their paths quoted).
//!
//! Owns: turning a failure into the `error: …` line and the exit code
//! ([`Fail::exit_code`]). Must not: decide what a command does on failure beyond that
//! (continuing with other arguments, other exit codes are the command's), or print
//! anything but that line.

use std::io;
use std::path::Path;

use rocmx_store::NarError;

/// Why a command failed.
#[derive(Debug)]
pub(crate) enum Fail {
    /// Print `error: <message>` and exit 1.
    Msg(String),
    /// Already reported; exit 1.
    Reported,
    /// Whoever read standard output went away: exit 1 without a message.
    BrokenPipe,
}

impl Fail {
    pub(crate) fn msg(m: impl Into<String>) -> Fail {
        Fail::Msg(m.into())
    }

    /// A failure to write standard output.
    pub(crate) fn write(e: &io::Error) -> Fail {
        if e.kind() == io::ErrorKind::BrokenPipe {
            Fail::BrokenPipe
        } else {
            Fail::msg(format!("writing to standard output: {}", io_msg(e)))
        }
    }

    /// A NAR error while dumping or hashing.
    pub(crate) fn from_nar(e: &NarError) -> Fail {
        match e {
            NarError::Write(io) => Fail::write(io),
            _ => Fail::msg(nar_msg(e)),
        }
    }

    /// Reports the failure, if any, and gives the exit code (0 or 1).
    pub(crate) fn exit_code(r: Result<(), Fail>) -> i32 {
        match r {
            Ok(()) => 0,
            Err(Fail::Msg(m)) => {
                eprintln!("error: {m}");
                1
            }
            Err(Fail::Reported | Fail::BrokenPipe) => 1,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_errors_lose_the_errno_suffix() {
        let e = io::Error::from_raw_os_error(2);
        assert_eq!(io_msg(&e), "No such file or directory");
        assert_eq!(io_msg(&io::Error::other("x")), "x");
        let pipe = io::Error::from(io::ErrorKind::BrokenPipe);
        assert!(matches!(Fail::write(&pipe), Fail::BrokenPipe));
        let full = io::Error::from_raw_os_error(28);
        match Fail::write(&full) {
            Fail::Msg(m) => assert_eq!(m, "writing to standard output: No space left on device"),
            other => panic!("{other:?}"),
        }
    }
}
