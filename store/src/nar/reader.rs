//! The strict streaming NAR parser.
//!
//! Owns: reading an archive from any [`Read`] without recursion, enforcing the canonical
//! grammar (see [`super`]), the name rules, sorting and uniqueness, the length caps,
//! padding, the end of the archive, and reporting the byte offset of every fault. It hands
//! the nodes, in archive order, to a [`NarVisitor`].
//!
//! Must not: touch the filesystem (visitors do), trust any length before checking it, or
//! buffer file contents (they are streamed to the visitor through [`Contents`]).

use std::ffi::OsStr;
use std::io::{self, BufReader, Read};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::{NarError, MAGIC, MAX_DEPTH, MAX_NAME_LEN, MAX_TARGET_LEN};

/// Receives the nodes of an archive, parents before children, siblings in sorted order.
/// Paths are relative to the root node, which has the empty path; every component has been
/// checked (non-empty, no `/`, no NUL, not `.` or `..`).
pub trait NarVisitor {
    /// A directory node. Its entries follow.
    fn directory(&mut self, path: &Path) -> Result<(), NarError>;
    /// A regular file of `size` bytes; `contents` yields them. Whatever the visitor leaves
    /// unread is skipped by the parser.
    fn regular(
        &mut self,
        path: &Path,
        executable: bool,
        size: u64,
        contents: &mut Contents<'_>,
    ) -> Result<(), NarError>;
    /// A symlink to `target` (not checked beyond being non-empty, NUL-free and capped).
    fn symlink(&mut self, path: &Path, target: &OsStr) -> Result<(), NarError>;
}

/// The archive reader, counting the offset.
struct Source<R> {
    inner: BufReader<R>,
    pos: u64,
}

impl<R: Read> Source<R> {
    /// Fills `buf` completely or fails with `Truncated`.
    fn exact(&mut self, buf: &mut [u8]) -> Result<(), NarError> {
        let mut done = 0;
        while done < buf.len() {
            match self.inner.read(&mut buf[done..]) {
                Ok(0) => return Err(NarError::Truncated { offset: self.pos }),
                Ok(n) => {
                    done += n;
                    self.pos += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(source) => {
                    return Err(NarError::Read {
                        offset: self.pos,
                        source,
                    })
                }
            }
        }
        Ok(())
    }

    fn u64(&mut self) -> Result<u64, NarError> {
        let mut b = [0u8; 8];
        self.exact(&mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    fn padding(&mut self, len: u64) -> Result<(), NarError> {
        let pad = ((8 - len % 8) % 8) as usize;
        let mut b = [0u8; 8];
        let offset = self.pos;
        self.exact(&mut b[..pad])?;
        if b.iter().any(|&x| x != 0) {
            return Err(NarError::BadPadding { offset });
        }
        Ok(())
    }

    /// Reads a string token of at most `max` bytes. Returns its offset and bytes.
    fn string(&mut self, what: &'static str, max: u64) -> Result<(u64, Vec<u8>), NarError> {
        let offset = self.pos;
        let len = self.u64()?;
        if len > max {
            return Err(NarError::TooLong {
                offset,
                what,
                len,
                max,
            });
        }
        let mut bytes = vec![0u8; len as usize];
        self.exact(&mut bytes)?;
        self.padding(len)?;
        Ok((offset, bytes))
    }

    /// Reads a keyword token and returns which of `choices` it is.
    fn keyword(
        &mut self,
        choices: &[&'static str],
        expected: &'static str,
    ) -> Result<usize, NarError> {
        let offset = self.pos;
        let len = self.u64()?;
        if len > 16 {
            let found = format!("a {len}-byte token");
            return Err(NarError::UnexpectedToken {
                offset,
                expected,
                found,
            });
        }
        let mut bytes = vec![0u8; len as usize];
        self.exact(&mut bytes)?;
        self.padding(len)?;
        choices
            .iter()
            .position(|c| c.as_bytes() == bytes.as_slice())
            .ok_or_else(|| NarError::UnexpectedToken {
                offset,
                expected,
                found: format!("{:?}", lossy(&bytes)),
            })
    }

    fn expect(&mut self, word: &'static str) -> Result<(), NarError> {
        self.keyword(&[word], word).map(|_| ())
    }
}

fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The contents of one regular file, handed to [`NarVisitor::regular`]. Reads end after
/// exactly the file's size; a truncated archive reads as an `UnexpectedEof` error.
pub struct Contents<'a> {
    src: &'a mut dyn Read,
    pos: &'a mut u64,
    remaining: u64,
    truncated: bool,
}

impl Read for Contents<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.remaining == 0 || buf.is_empty() {
            return Ok(0);
        }
        let want = usize::try_from(self.remaining)
            .unwrap_or(usize::MAX)
            .min(buf.len());
        let n = self.src.read(&mut buf[..want])?;
        if n == 0 {
            self.truncated = true;
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "NAR truncated in file contents",
            ));
        }
        self.remaining -= n as u64;
        *self.pos += n as u64;
        Ok(n)
    }
}

/// Parses a whole archive from `reader`, handing its nodes to `visitor`, and checks that
/// nothing follows it. Returns the archive size in bytes.
pub fn parse<R: Read, V: NarVisitor + ?Sized>(reader: R, visitor: &mut V) -> Result<u64, NarError> {
    let mut src = Source {
        inner: BufReader::with_capacity(256 * 1024, reader),
        pos: 0,
    };
    let magic_len = src.u64().map_err(|_| NarError::BadMagic { offset: 0 })?;
    if magic_len != MAGIC.len() as u64 {
        return Err(NarError::BadMagic { offset: 0 });
    }
    let mut magic = [0u8; 13];
    src.exact(&mut magic)
        .map_err(|_| NarError::BadMagic { offset: 8 })?;
    if magic != MAGIC {
        return Err(NarError::BadMagic { offset: 8 });
    }
    src.padding(MAGIC.len() as u64)?;

    // One entry per open directory: the previous entry name, for the order check.
    let mut stack: Vec<Option<Vec<u8>>> = Vec::new();
    let mut path = PathBuf::new();
    'node: loop {
        src.expect("(")?;
        src.expect("type")?;
        let kind = src.keyword(
            &["regular", "symlink", "directory"],
            "regular, symlink or directory",
        )?;
        let mut completed = true;
        match kind {
            0 => regular(&mut src, &path, visitor)?,
            1 => {
                src.expect("target")?;
                let (offset, target) = src.string("symlink target", MAX_TARGET_LEN)?;
                if target.is_empty() || target.contains(&0) {
                    return Err(NarError::BadTarget { offset });
                }
                src.expect(")")?;
                visitor.symlink(&path, OsStr::from_bytes(&target))?;
            }
            _ => {
                visitor.directory(&path)?;
                stack.push(None);
                completed = false;
            }
        }
        loop {
            if completed {
                if stack.is_empty() {
                    break 'node;
                }
                src.expect(")")?; // closes the entry
                path.pop();
            }
            let offset = src.pos;
            if src.keyword(&["entry", ")"], "entry or )")? == 1 {
                stack.pop();
                completed = true;
                continue;
            }
            src.expect("(")?;
            src.expect("name")?;
            let (name_offset, name) = src.string("name", MAX_NAME_LEN)?;
            check_name(name_offset, &name)?;
            let depth = stack.len();
            let Some(previous) = stack.last_mut() else {
                return Err(NarError::UnexpectedToken {
                    offset,
                    expected: ")",
                    found: "entry".into(),
                });
            };
            if let Some(prev) = previous.as_deref() {
                if name.as_slice() == prev {
                    return Err(NarError::Duplicate {
                        offset: name_offset,
                        name: lossy(&name),
                    });
                }
                if name.as_slice() < prev {
                    return Err(NarError::Unsorted {
                        offset: name_offset,
                        previous: lossy(prev),
                        name: lossy(&name),
                    });
                }
            }
            src.expect("node")?;
            if depth >= MAX_DEPTH {
                return Err(NarError::TooDeep { offset });
            }
            path.push(OsStr::from_bytes(&name));
            *previous = Some(name);
            continue 'node;
        }
    }

    let end = src.pos;
    let mut one = [0u8; 1];
    loop {
        match src.inner.read(&mut one) {
            Ok(0) => return Ok(end),
            Ok(_) => return Err(NarError::TrailingBytes { offset: end }),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(source) => {
                return Err(NarError::Read {
                    offset: end,
                    source,
                })
            }
        }
    }
}

/// The rest of a regular node after `"regular"`, including its closing `")"`.
fn regular<R: Read, V: NarVisitor + ?Sized>(
    src: &mut Source<R>,
    path: &Path,
    visitor: &mut V,
) -> Result<(), NarError> {
    let mut executable = false;
    if src.keyword(&["executable", "contents"], "executable or contents")? == 0 {
        let offset = src.pos;
        let (_, marker) = src.string("executable marker", 16)?;
        if !marker.is_empty() {
            let found = format!("{:?}", lossy(&marker));
            return Err(NarError::UnexpectedToken {
                offset,
                expected: "\"\"",
                found,
            });
        }
        executable = true;
        src.expect("contents")?;
    }
    let size = src.u64()?;
    let mut contents = Contents {
        src: &mut src.inner,
        pos: &mut src.pos,
        remaining: size,
        truncated: false,
    };
    let visited = visitor.regular(path, executable, size, &mut contents);
    if contents.truncated {
        return Err(NarError::Truncated {
            offset: *contents.pos,
        });
    }
    visited?;
    // Skip whatever the visitor left unread.
    let mut scratch = [0u8; 8192];
    loop {
        match contents.read(&mut scratch) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) if contents.truncated => {
                return Err(NarError::Truncated {
                    offset: *contents.pos,
                })
            }
            Err(source) => {
                return Err(NarError::Read {
                    offset: *contents.pos,
                    source,
                })
            }
        }
    }
    src.padding(size)?;
    src.expect(")")
}

/// Checks an entry name: non-empty, no `/`, no NUL, not `.` or `..`.
fn check_name(offset: u64, name: &[u8]) -> Result<(), NarError> {
    if name.is_empty() {
        return Err(NarError::EmptyName { offset });
    }
    if name.contains(&b'/') {
        return Err(NarError::NameContainsSlash {
            offset,
            name: lossy(name),
        });
    }
    if name.contains(&0) {
        return Err(NarError::NameContainsNul {
            offset,
            name: lossy(name),
        });
    }
    if name == b"." || name == b".." {
        return Err(NarError::DotName {
            offset,
            name: lossy(name),
        });
    }
    Ok(())
}

/// A visitor that accepts everything.
struct Validate;

impl NarVisitor for Validate {
    fn directory(&mut self, _: &Path) -> Result<(), NarError> {
        Ok(())
    }
    fn regular(&mut self, _: &Path, _: bool, _: u64, _: &mut Contents<'_>) -> Result<(), NarError> {
        Ok(())
    }
    fn symlink(&mut self, _: &Path, _: &OsStr) -> Result<(), NarError> {
        Ok(())
    }
}

/// Checks that `reader` holds exactly one canonical archive; returns its size.
pub fn check<R: Read>(reader: R) -> Result<u64, NarError> {
    parse(reader, &mut Validate)
}
