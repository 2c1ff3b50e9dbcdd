//! Hashing a build output modulo its self-references, for the `output` content address.
//!
//! Owns: the exact definition of the "modulo hash" that
//! [`ContentAddress::Output`](crate::path::ContentAddress::Output) carries as `nar_hash`:
//!
//! ```text
//! modulo_hash = BLAKE3( masked_nar || "|" offset_1 || "|" offset_2 || … )
//! ```
//!
//! where `masked_nar` is the output's NAR with every occurrence of its own 32-character
//! hash part (found left to right, non-overlapping) replaced by 32 NUL bytes, and
//! `offset_k` are the byte offsets of those occurrences in the NAR, ascending, in decimal.
//! The result does not depend on the hash part the output was built under, so the final
//! path can be computed from it and the self-references rewritten afterwards.
//!
//! Must not: rewrite files or know about NAR structure; it sees a byte stream.

use std::io::{self, Write};

use memchr::memmem::Finder;

use crate::hash::{Hash, HashAlgo, Hasher};

/// A writer that hashes a NAR modulo self-references; see the module documentation.
pub struct ModuloHasher {
    needle: Vec<u8>,
    hasher: Hasher,
    /// Bytes held back because a match may straddle the next write.
    pending: Vec<u8>,
    /// Stream offset of `pending[0]`.
    offset: u64,
    positions: Vec<u64>,
}

impl ModuloHasher {
    /// A hasher that masks occurrences of `self_hash_part` (the 32-character hash part the
    /// output was built under). An empty needle masks nothing.
    pub fn new(self_hash_part: &str) -> Self {
        ModuloHasher {
            needle: self_hash_part.as_bytes().to_vec(),
            hasher: Hasher::new(HashAlgo::Blake3),
            pending: Vec::new(),
            offset: 0,
            positions: Vec::new(),
        }
    }

    /// Masks every complete occurrence in `pending`, then hashes all but the bytes that
    /// could begin an occurrence completed by later input (all of them when `last`).
    fn process(&mut self, last: bool) {
        let n = self.needle.len();
        let mut resume = 0;
        if n > 0 {
            let finder = Finder::new(&self.needle);
            while let Some(i) = self
                .pending
                .get(resume..)
                .and_then(|rest| finder.find(rest))
            {
                let at = resume + i;
                self.positions.push(self.offset + at as u64);
                self.pending[at..at + n].fill(0);
                resume = at + n;
            }
        }
        let keep = if last || n == 0 { 0 } else { n - 1 };
        let emit = self
            .pending
            .len()
            .saturating_sub(keep)
            .max(resume.min(self.pending.len()));
        self.hasher.update(&self.pending[..emit]);
        self.pending.drain(..emit);
        self.offset += emit as u64;
    }

    /// The modulo hash and whether any self-reference was found.
    pub fn finish(mut self) -> (Hash, bool) {
        self.process(true);
        for p in &self.positions {
            self.hasher.update(format!("|{p}").as_bytes());
        }
        (self.hasher.finish(), !self.positions.is_empty())
    }
}

impl Write for ModuloHasher {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.pending.extend_from_slice(data);
        if self.pending.len() >= 64 * 1024 {
            self.process(false);
        }
        Ok(data.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SELF: &str = "00bgd045z0d4icpbc2yyz4gx48ak44la";
    const OTHER: &str = "zzbgd045z0d4icpbc2yyz4gx48ak44la";

    fn modulo(data: &[u8], needle: &str, chunk: usize) -> (Hash, bool) {
        let mut m = ModuloHasher::new(needle);
        for c in data.chunks(chunk.max(1)) {
            m.write_all(c).expect("write");
        }
        m.finish()
    }

    #[test]
    fn literal_definition() {
        let data = format!("ab{SELF}cd{SELF}");
        let mut expected = b"ab".to_vec();
        expected.extend_from_slice(&[0; 32]);
        expected.extend_from_slice(b"cd");
        expected.extend_from_slice(&[0; 32]);
        expected.extend_from_slice(b"|2|36");
        let want = Hash::digest(HashAlgo::Blake3, &expected);
        for chunk in [1, 3, 31, 32, 33, 1000] {
            assert_eq!(
                modulo(data.as_bytes(), SELF, chunk),
                (want, true),
                "chunk {chunk}"
            );
        }
        assert_eq!(
            modulo(b"plain", SELF, 2),
            (Hash::digest(HashAlgo::Blake3, b"plain"), false)
        );
    }

    #[test]
    fn independent_of_the_build_hash_part() {
        let a = format!("x{SELF}y").repeat(5000);
        let b = format!("x{OTHER}y").repeat(5000);
        let ha = modulo(a.as_bytes(), SELF, 7777);
        let hb = modulo(b.as_bytes(), OTHER, 4096);
        assert_eq!(ha, hb);
        assert!(ha.1);
        assert_ne!(ha, modulo(a.as_bytes(), OTHER, 4096));
    }
}
