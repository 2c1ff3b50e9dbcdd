//! Hash algorithms, digests and their textual forms, and streaming hashers.
//!
//! Owns: [`HashAlgo`], [`Hash`](struct@Hash) (an algorithm plus a digest of the right size), every
//! textual form of a digest that rocmx reads or writes ([`Encoding`]: nix32, base16, base64,
//! SRI, and Nix's typed `algo:digest` form), and [`Hasher`], a streaming hasher that is an
//! [`std::io::Write`]. BLAKE3 inputs past [`RAYON_THRESHOLD`] are hashed on several threads.
//! [`HashPipe`] (in `hash/pipe.rs`) is the one pipelined hasher: a stream hashed on
//! another thread, used by the NAR hashing of the store and by `rocmx hash`.
//!
//! Must not: know what is being hashed (NAR, store path fingerprints and derivations live
//! elsewhere), touch the filesystem, or panic on any text handed to a parser.

use std::fmt;
use std::io::{self, Write};
use std::str::FromStr;

use data_encoding::{BASE64, BASE64_NOPAD, HEXLOWER, HEXLOWER_PERMISSIVE};
use sha1::Digest as _;
use thiserror::Error;

use crate::nixbase32;

mod pipe;

pub use pipe::{HashPipe, PIPE_BUFFER};

/// A hash algorithm. Textual forms (as in `outputHashAlgo`, SRI prefixes and `algo:` forms):
///
/// | variant  | text     | digest bytes |
/// |----------|----------|--------------|
/// | `Blake3` | `blake3` | 32           |
/// | `Sha256` | `sha256` | 32           |
/// | `Sha1`   | `sha1`   | 20           |
/// | `Md5`    | `md5`    | 16           |
/// | `Sha512` | `sha512` | 64           |
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HashAlgo {
    /// BLAKE3 with 256-bit output; rocmx's primary hash.
    Blake3,
    /// SHA-256; kept for fixed-output compatibility with Nix.
    Sha256,
    /// SHA-1 (legacy fixed outputs only).
    Sha1,
    /// MD5 (legacy fixed outputs only).
    Md5,
    /// SHA-512 (fixed outputs).
    Sha512,
}

impl HashAlgo {
    /// Every algorithm, in declaration order.
    pub const ALL: [HashAlgo; 5] = [
        HashAlgo::Blake3,
        HashAlgo::Sha256,
        HashAlgo::Sha1,
        HashAlgo::Md5,
        HashAlgo::Sha512,
    ];

    /// The textual name: `blake3`, `sha256`, `sha1`, `md5` or `sha512`.
    pub fn name(self) -> &'static str {
        match self {
            HashAlgo::Blake3 => "blake3",
            HashAlgo::Sha256 => "sha256",
            HashAlgo::Sha1 => "sha1",
            HashAlgo::Md5 => "md5",
            HashAlgo::Sha512 => "sha512",
        }
    }

    /// Digest size in bytes.
    pub fn size(self) -> usize {
        match self {
            HashAlgo::Blake3 | HashAlgo::Sha256 => 32,
            HashAlgo::Sha1 => 20,
            HashAlgo::Md5 => 16,
            HashAlgo::Sha512 => 64,
        }
    }
}

impl fmt::Display for HashAlgo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for HashAlgo {
    type Err = HashError;
    fn from_str(s: &str) -> Result<Self, HashError> {
        HashAlgo::ALL
            .into_iter()
            .find(|a| a.name() == s)
            .ok_or_else(|| HashError::UnknownAlgo(s.to_string()))
    }
}

/// A textual encoding of a digest. For a SHA-256 of the empty string:
///
/// | variant  | text                                                               |
/// |----------|--------------------------------------------------------------------|
/// | `Nix32`  | `0mdqa9w1p6cmli6976v4wi0sw9r4p5prkj7lzfd1877wk11c9c73`             |
/// | `Base16` | `e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855` |
/// | `Base64` | `47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=`                     |
/// | `Sri`    | `sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=`              |
///
/// Nix's typed form prefixes the first three with the algorithm and a colon
/// (`sha256:0mdqa9w1…`); see [`Hash::to_typed`]. Bare digests are told apart by length,
/// which never collides for one algorithm (base64 is accepted padded or unpadded).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Encoding {
    /// Nix's base 32 (see [`crate::nixbase32`]).
    Nix32,
    /// Lowercase hexadecimal (either case is accepted when parsing).
    Base16,
    /// Standard base64 with padding.
    Base64,
    /// Subresource Integrity: `<algo>-<base64>`.
    Sri,
}

/// Why a text is not a hash, or bytes are not a digest.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum HashError {
    /// The algorithm name is not one of `blake3`, `sha256`, `sha1`, `md5`, `sha512`.
    #[error("unknown hash algorithm {0:?}")]
    UnknownAlgo(String),
    /// The text has neither an `algo:` nor an `algo-` prefix, and no algorithm was given.
    #[error("hash {0:?} does not say its algorithm (expected `algo:digest` or `algo-base64`)")]
    MissingAlgo(String),
    /// The text names a different algorithm from the one required.
    #[error("hash has algorithm {found}, expected {expected}")]
    AlgoMismatch {
        /// Required algorithm.
        expected: HashAlgo,
        /// Algorithm the text names.
        found: HashAlgo,
    },
    /// The digest text's length matches no encoding of this algorithm.
    #[error("{algo} digest of {len} characters is neither nix32, base16 nor base64")]
    BadLength {
        /// The algorithm.
        algo: HashAlgo,
        /// Characters found.
        len: usize,
    },
    /// Raw digest bytes of the wrong size.
    #[error("{algo} digest must be {expected} bytes, got {found}")]
    BadSize {
        /// The algorithm.
        algo: HashAlgo,
        /// Required size.
        expected: usize,
        /// Size given.
        found: usize,
    },
    /// The digest text is malformed in the encoding its length selects.
    #[error("invalid {encoding:?} {algo} digest: {reason}")]
    BadDigest {
        /// The algorithm.
        algo: HashAlgo,
        /// The encoding chosen by length.
        encoding: Encoding,
        /// What is wrong.
        reason: String,
    },
}

/// A digest together with its algorithm. The size always matches the algorithm.
///
/// [`Display`](fmt::Display) and serde use the SRI form; [`FromStr`] accepts the SRI and
/// typed forms (see [`Hash::parse`]).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Hash {
    algo: HashAlgo,
    buf: [u8; 64],
}

impl Hash {
    /// A hash from raw digest bytes, which must be exactly `algo.size()` long.
    pub fn new(algo: HashAlgo, bytes: &[u8]) -> Result<Hash, HashError> {
        if bytes.len() != algo.size() {
            return Err(HashError::BadSize {
                algo,
                expected: algo.size(),
                found: bytes.len(),
            });
        }
        let mut buf = [0u8; 64];
        buf[..bytes.len()].copy_from_slice(bytes);
        Ok(Hash { algo, buf })
    }

    /// Hashes `data` in one call.
    pub fn digest(algo: HashAlgo, data: &[u8]) -> Hash {
        if algo == HashAlgo::Blake3 && data.len() < RAYON_THRESHOLD {
            // Most one-call digests are of short texts (every `.drv` an evaluation
            // writes): the streaming hasher's 1 MiB batching buffer would cost more
            // than the hashing.
            let mut buf = [0u8; 64];
            buf[..32].copy_from_slice(blake3::hash(data).as_bytes());
            return Hash { algo, buf };
        }
        let mut h = Hasher::new(algo);
        h.update(data);
        h.finish()
    }

    /// The algorithm.
    pub fn algo(&self) -> HashAlgo {
        self.algo
    }

    /// The digest bytes (`algo().size()` of them).
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.algo.size()]
    }

    /// The digest in `enc`. Bare for `Nix32`, `Base16`, `Base64`; `algo-base64` for `Sri`.
    pub fn encode(&self, enc: Encoding) -> String {
        match enc {
            Encoding::Nix32 => nixbase32::encode(self.as_bytes()),
            Encoding::Base16 => HEXLOWER.encode(self.as_bytes()),
            Encoding::Base64 => BASE64.encode(self.as_bytes()),
            Encoding::Sri => format!("{}-{}", self.algo, BASE64.encode(self.as_bytes())),
        }
    }

    /// Nix's typed form `algo:<digest in enc>`; for `Sri` the SRI form itself.
    pub fn to_typed(&self, enc: Encoding) -> String {
        match enc {
            Encoding::Sri => self.encode(Encoding::Sri),
            _ => format!("{}:{}", self.algo, self.encode(enc)),
        }
    }

    /// Lowercase hex digest (shorthand for `encode(Encoding::Base16)`).
    pub fn to_hex(&self) -> String {
        self.encode(Encoding::Base16)
    }

    /// Nix32 digest (shorthand for `encode(Encoding::Nix32)`).
    pub fn to_nix32(&self) -> String {
        self.encode(Encoding::Nix32)
    }

    /// The SRI form `algo-base64` (shorthand for `encode(Encoding::Sri)`).
    pub fn to_sri(&self) -> String {
        self.encode(Encoding::Sri)
    }

    /// Parses a hash that names its algorithm: SRI `sha256-<base64>` or Nix's typed form
    /// `sha256:<nix32|base16|base64>`.
    pub fn parse(s: &str) -> Result<Hash, HashError> {
        Self::parse_prefixed(s)?.ok_or_else(|| HashError::MissingAlgo(s.to_string()))
    }

    /// Parses a hash whose algorithm is known (as for `outputHash` with `outputHashAlgo`):
    /// a bare digest in any encoding, or an SRI/typed form naming the same algorithm.
    pub fn parse_with_algo(s: &str, algo: HashAlgo) -> Result<Hash, HashError> {
        match Self::parse_prefixed(s) {
            Ok(Some(h)) if h.algo == algo => Ok(h),
            Ok(Some(h)) => Err(HashError::AlgoMismatch {
                expected: algo,
                found: h.algo,
            }),
            Ok(None) => Ok(Self::parse_digest(s, algo)?.0),
            Err(e) => Err(e),
        }
    }

    /// Parses a bare digest of `algo`, telling the encoding by length. Returns the encoding
    /// found (`Nix32`, `Base16` or `Base64`).
    pub fn parse_digest(s: &str, algo: HashAlgo) -> Result<(Hash, Encoding), HashError> {
        let n = algo.size();
        let len = s.len();
        let bad = |encoding: Encoding, reason: String| HashError::BadDigest {
            algo,
            encoding,
            reason,
        };
        let (bytes, enc) = if len == 2 * n {
            let b = HEXLOWER_PERMISSIVE
                .decode(s.as_bytes())
                .map_err(|e| bad(Encoding::Base16, e.to_string()))?;
            (b, Encoding::Base16)
        } else if len == nixbase32::encoded_len(n) {
            let b = nixbase32::decode(s, n).map_err(|e| bad(Encoding::Nix32, e.to_string()))?;
            (b, Encoding::Nix32)
        } else if len == BASE64.encode_len(n) {
            let b = BASE64
                .decode(s.as_bytes())
                .map_err(|e| bad(Encoding::Base64, e.to_string()))?;
            (b, Encoding::Base64)
        } else if len == BASE64_NOPAD.encode_len(n) {
            let b = BASE64_NOPAD
                .decode(s.as_bytes())
                .map_err(|e| bad(Encoding::Base64, e.to_string()))?;
            (b, Encoding::Base64)
        } else {
            return Err(HashError::BadLength {
                algo,
                len: s.chars().count(),
            });
        };
        Ok((Hash::new(algo, &bytes)?, enc))
    }

    /// Parses the SRI form `algo-<base64>` only.
    pub fn parse_sri(s: &str) -> Result<Hash, HashError> {
        let (algo, digest) = s
            .split_once('-')
            .ok_or_else(|| HashError::MissingAlgo(s.to_string()))?;
        let algo: HashAlgo = algo.parse()?;
        let n = algo.size();
        let engine = if digest.len() == BASE64.encode_len(n) {
            &BASE64
        } else if digest.len() == BASE64_NOPAD.encode_len(n) {
            &BASE64_NOPAD
        } else {
            return Err(HashError::BadLength {
                algo,
                len: digest.chars().count(),
            });
        };
        let bytes = engine
            .decode(digest.as_bytes())
            .map_err(|e| HashError::BadDigest {
                algo,
                encoding: Encoding::Sri,
                reason: e.to_string(),
            })?;
        Hash::new(algo, &bytes)
    }

    /// `Ok(None)` when `s` has no `algo:` / `algo-` prefix at all.
    fn parse_prefixed(s: &str) -> Result<Option<Hash>, HashError> {
        if let Some((algo, digest)) = s.split_once(':') {
            let algo: HashAlgo = algo.parse()?;
            return Ok(Some(Self::parse_digest(digest, algo)?.0));
        }
        if let Some((algo, _)) = s.split_once('-') {
            if algo.parse::<HashAlgo>().is_ok() {
                return Self::parse_sri(s).map(Some);
            }
        }
        Ok(None)
    }
}

impl fmt::Display for Hash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_sri())
    }
}

impl fmt::Debug for Hash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Hash({})", self.to_typed(Encoding::Base16))
    }
}

impl FromStr for Hash {
    type Err = HashError;
    fn from_str(s: &str) -> Result<Self, HashError> {
        Hash::parse(s)
    }
}

impl serde::Serialize for Hash {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_sri())
    }
}

impl<'de> serde::Deserialize<'de> for Hash {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Hash::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// Inputs of at least this many bytes are handed to BLAKE3's multithreaded `update_rayon`;
/// smaller writes are buffered up to [`BLAKE3_BUFFER`] first.
pub const RAYON_THRESHOLD: usize = 128 * 1024;

/// Size of the buffer that gathers small BLAKE3 writes into multithreaded batches.
pub const BLAKE3_BUFFER: usize = 1024 * 1024;

/// Streaming BLAKE3 state that batches small writes for multithreaded hashing.
#[derive(Clone)]
pub struct Blake3Hasher {
    inner: blake3::Hasher,
    buf: Vec<u8>,
    /// Whether large inputs go to rayon (see [`Hasher::serial`]).
    parallel: bool,
}

impl Blake3Hasher {
    fn new(parallel: bool) -> Self {
        Blake3Hasher {
            inner: blake3::Hasher::new(),
            buf: Vec::new(),
            parallel,
        }
    }

    fn absorb(inner: &mut blake3::Hasher, data: &[u8]) {
        if data.len() >= RAYON_THRESHOLD {
            inner.update_rayon(data);
        } else {
            inner.update(data);
        }
    }

    fn update(&mut self, data: &[u8]) {
        if !self.parallel {
            self.inner.update(data);
            return;
        }
        if data.len() >= RAYON_THRESHOLD {
            if !self.buf.is_empty() {
                Self::absorb(&mut self.inner, &self.buf);
                self.buf.clear();
            }
            Self::absorb(&mut self.inner, data);
            return;
        }
        if self.buf.capacity() == 0 {
            self.buf.reserve_exact(BLAKE3_BUFFER);
        }
        self.buf.extend_from_slice(data);
        if self.buf.len() >= BLAKE3_BUFFER {
            Self::absorb(&mut self.inner, &self.buf);
            self.buf.clear();
        }
    }

    fn finish(mut self) -> [u8; 32] {
        Self::absorb(&mut self.inner, &self.buf);
        *self.inner.finalize().as_bytes()
    }
}

/// A streaming hasher for one algorithm; feed it with [`Hasher::update`] or as an
/// [`io::Write`], then take the [`Hash`](struct@Hash) with [`Hasher::finish`].
#[derive(Clone)]
pub enum Hasher {
    /// BLAKE3, multithreaded for large inputs.
    Blake3(Box<Blake3Hasher>),
    /// SHA-256.
    Sha256(sha2::Sha256),
    /// SHA-1.
    Sha1(sha1::Sha1),
    /// MD5.
    Md5(md5::Md5),
    /// SHA-512.
    Sha512(sha2::Sha512),
}

impl Hasher {
    /// A fresh hasher for `algo`.
    pub fn new(algo: HashAlgo) -> Hasher {
        match algo {
            HashAlgo::Blake3 => Hasher::Blake3(Box::new(Blake3Hasher::new(true))),
            HashAlgo::Sha256 => Hasher::Sha256(sha2::Sha256::new()),
            HashAlgo::Sha1 => Hasher::Sha1(sha1::Sha1::new()),
            HashAlgo::Md5 => Hasher::Md5(md5::Md5::new()),
            HashAlgo::Sha512 => Hasher::Sha512(sha2::Sha512::new()),
        }
    }

    /// A hasher for `algo` that stays on the calling thread: for a stream that is
    /// already one stage of a pipeline whose other stages keep the cores busy
    /// (imports, pushes), where BLAKE3's rayon workers would only spin beside them.
    pub fn serial(algo: HashAlgo) -> Hasher {
        match algo {
            HashAlgo::Blake3 => Hasher::Blake3(Box::new(Blake3Hasher::new(false))),
            other => Hasher::new(other),
        }
    }

    /// The algorithm.
    pub fn algo(&self) -> HashAlgo {
        match self {
            Hasher::Blake3(_) => HashAlgo::Blake3,
            Hasher::Sha256(_) => HashAlgo::Sha256,
            Hasher::Sha1(_) => HashAlgo::Sha1,
            Hasher::Md5(_) => HashAlgo::Md5,
            Hasher::Sha512(_) => HashAlgo::Sha512,
        }
    }

    /// Feeds `data`.
    pub fn update(&mut self, data: &[u8]) {
        match self {
            Hasher::Blake3(h) => h.update(data),
            Hasher::Sha256(h) => h.update(data),
            Hasher::Sha1(h) => h.update(data),
            Hasher::Md5(h) => h.update(data),
            Hasher::Sha512(h) => h.update(data),
        }
    }

    /// The digest of everything fed so far.
    pub fn finish(self) -> Hash {
        let algo = self.algo();
        let mut buf = [0u8; 64];
        match self {
            Hasher::Blake3(h) => buf[..32].copy_from_slice(&h.finish()),
            Hasher::Sha256(h) => buf[..32].copy_from_slice(&h.finalize()),
            Hasher::Sha1(h) => buf[..20].copy_from_slice(&h.finalize()),
            Hasher::Md5(h) => buf[..16].copy_from_slice(&h.finalize()),
            Hasher::Sha512(h) => buf.copy_from_slice(&h.finalize()),
        }
        Hash { algo, buf }
    }
}

impl Write for Hasher {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.update(data);
        Ok(data.len())
    }
    fn write_all(&mut self, data: &[u8]) -> io::Result<()> {
        self.update(data);
        Ok(())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A writer that passes everything to `inner` while hashing and counting it.
pub struct HashingWriter<W> {
    inner: W,
    hasher: Hasher,
    count: u64,
}

impl<W: Write> HashingWriter<W> {
    /// Wraps `inner`, hashing with `algo`.
    pub fn new(inner: W, algo: HashAlgo) -> Self {
        HashingWriter {
            inner,
            hasher: Hasher::new(algo),
            count: 0,
        }
    }

    /// Wraps `inner`, hashing with [`Hasher::serial`].
    pub fn serial(inner: W, algo: HashAlgo) -> Self {
        HashingWriter {
            inner,
            hasher: Hasher::serial(algo),
            count: 0,
        }
    }

    /// Bytes written so far.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The inner writer, the hash and the byte count.
    pub fn finish(self) -> (W, Hash, u64) {
        (self.inner, self.hasher.finish(), self.count)
    }
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(data)?;
        let done = data.get(..n).unwrap_or(data);
        self.hasher.update(done);
        self.count += done.len() as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHA256_EMPTY_HEX: &str =
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

    #[test]
    fn serial_and_parallel_blake3_agree_on_every_write_pattern() {
        let data: Vec<u8> = (0..3 * BLAKE3_BUFFER + 12_345)
            .map(|i| (i * 7) as u8)
            .collect();
        let want = blake3::hash(&data);
        for piece in [
            1,
            4096,
            RAYON_THRESHOLD - 1,
            RAYON_THRESHOLD,
            BLAKE3_BUFFER + 3,
        ] {
            for mut h in [
                Hasher::new(HashAlgo::Blake3),
                Hasher::serial(HashAlgo::Blake3),
            ] {
                for c in data.chunks(piece) {
                    h.update(c);
                }
                assert_eq!(h.finish().as_bytes(), want.as_bytes(), "{piece}");
            }
        }
    }

    #[test]
    fn digests_of_literal_inputs() {
        let vectors = [
            (HashAlgo::Sha256, "", SHA256_EMPTY_HEX),
            (
                HashAlgo::Sha256,
                "abc",
                "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
            ),
            (
                HashAlgo::Blake3,
                "",
                "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262",
            ),
            (HashAlgo::Md5, "abc", "900150983cd24fb0d6963f7d28e17f72"),
            (
                HashAlgo::Sha1,
                "abc",
                "a9993e364706816aba3e25717850c26c9cd0d89d",
            ),
            (
                HashAlgo::Sha512,
                "",
                "cf83e1357eefb8bdf1542850d66d8007d620e4050b5715dc83f4a921d36ce9ce\
                 47d0d13c5d85f2b0ff8318d2877eec2f63b931bd47417a81a538327af927da3e",
            ),
        ];
        for (algo, input, hex) in vectors {
            assert_eq!(Hash::digest(algo, input.as_bytes()).to_hex(), hex, "{algo}");
        }
    }

    #[test]
    fn one_call_blake3_digests_agree_with_the_streaming_hasher() {
        assert_eq!(
            Hash::digest(HashAlgo::Blake3, b"abc").to_hex(),
            "6437b3ac38465133ffb63b75273a8db548c558465d79db03fd359c6cd5bd9d85"
        );
        let data: Vec<u8> = (0..RAYON_THRESHOLD + 5000)
            .map(|i| (i * 7 % 251) as u8)
            .collect();
        for len in [
            1,
            1024,
            1025,
            RAYON_THRESHOLD - 1,
            RAYON_THRESHOLD,
            data.len(),
        ] {
            let mut h = Hasher::new(HashAlgo::Blake3);
            for piece in data[..len].chunks(1000) {
                h.update(piece);
            }
            assert_eq!(
                Hash::digest(HashAlgo::Blake3, &data[..len]),
                h.finish(),
                "{len}"
            );
        }
    }

    #[test]
    fn encodings_of_sha256_empty() {
        let h = Hash::digest(HashAlgo::Sha256, b"");
        assert_eq!(
            h.encode(Encoding::Nix32),
            "0mdqa9w1p6cmli6976v4wi0sw9r4p5prkj7lzfd1877wk11c9c73"
        );
        assert_eq!(h.encode(Encoding::Base16), SHA256_EMPTY_HEX);
        assert_eq!(
            h.encode(Encoding::Base64),
            "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="
        );
        assert_eq!(
            h.encode(Encoding::Sri),
            "sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="
        );
        assert_eq!(
            h.to_typed(Encoding::Nix32),
            "sha256:0mdqa9w1p6cmli6976v4wi0sw9r4p5prkj7lzfd1877wk11c9c73"
        );
        assert_eq!(h.to_string(), h.to_sri());
        let b = Hash::digest(HashAlgo::Blake3, b"");
        assert_eq!(
            b.to_sri(),
            "blake3-rxNJufX5oaagQE3qNtzJSZvLJcmtwRK3zJqTyuQfMmI="
        );
    }

    #[test]
    fn parses_every_form() {
        let h = Hash::digest(HashAlgo::Sha256, b"");
        let forms = [
            "sha256:0mdqa9w1p6cmli6976v4wi0sw9r4p5prkj7lzfd1877wk11c9c73",
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            "sha256:E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855",
            "sha256:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=",
            "sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=",
            "sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU",
        ];
        for f in forms {
            assert_eq!(Hash::parse(f), Ok(h), "{f}");
            assert_eq!(f.parse::<Hash>(), Ok(h), "{f}");
            assert_eq!(Hash::parse_with_algo(f, HashAlgo::Sha256), Ok(h), "{f}");
        }
        assert_eq!(
            Hash::parse_with_algo(
                "0mdqa9w1p6cmli6976v4wi0sw9r4p5prkj7lzfd1877wk11c9c73",
                HashAlgo::Sha256
            ),
            Ok(h)
        );
        assert_eq!(
            Hash::parse_digest(SHA256_EMPTY_HEX, HashAlgo::Sha256).map(|x| x.1),
            Ok(Encoding::Base16)
        );
        for algo in HashAlgo::ALL {
            let h = Hash::digest(algo, b"round trip");
            for enc in [Encoding::Nix32, Encoding::Base16, Encoding::Base64] {
                assert_eq!(Hash::parse(&h.to_typed(enc)), Ok(h));
                assert_eq!(Hash::parse_digest(&h.encode(enc), algo), Ok((h, enc)));
            }
            assert_eq!(Hash::parse_sri(&h.to_sri()), Ok(h));
        }
    }

    #[test]
    fn rejects_malformed_hashes() {
        assert_eq!(
            Hash::parse("sha255:00"),
            Err(HashError::UnknownAlgo("sha255".into()))
        );
        assert!(matches!(
            Hash::parse(SHA256_EMPTY_HEX),
            Err(HashError::MissingAlgo(_))
        ));
        assert!(matches!(
            Hash::parse("sha256:abc"),
            Err(HashError::BadLength { len: 3, .. })
        ));
        assert!(matches!(
            Hash::parse("sha256:0mdqa9w1p6cmli6976v4wi0sw9r4p5prkj7lzfd1877wk11c9c7e"),
            Err(HashError::BadDigest {
                encoding: Encoding::Nix32,
                ..
            })
        ));
        assert!(matches!(
            Hash::parse("sha256:g3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
            Err(HashError::BadDigest {
                encoding: Encoding::Base16,
                ..
            })
        ));
        assert!(Hash::parse("sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuF!=").is_err());
        assert_eq!(
            Hash::parse_with_algo("md5:3y8bwfr609h3lh9ch0izcqq7fl", HashAlgo::Sha256),
            Err(HashError::AlgoMismatch {
                expected: HashAlgo::Sha256,
                found: HashAlgo::Md5
            })
        );
        assert!(Hash::parse("sha256:é").is_err());
        assert!(Hash::parse("").is_err());
        assert!(Hash::new(HashAlgo::Sha1, &[0; 19]).is_err());
    }

    #[test]
    fn streaming_equals_one_shot_across_thresholds() {
        let data: Vec<u8> = (0..3 * BLAKE3_BUFFER + 12345)
            .map(|i| (i * 7 + i / 251) as u8)
            .collect();
        for algo in HashAlgo::ALL {
            let whole = Hash::digest(algo, &data);
            let mut h = Hasher::new(algo);
            let mut rest = &data[..];
            let mut step = 1usize;
            while !rest.is_empty() {
                let n = step.min(rest.len());
                h.write_all(&rest[..n]).expect("hasher write");
                rest = &rest[n..];
                step = (step * 3 + 1) % (RAYON_THRESHOLD * 2);
            }
            assert_eq!(h.finish(), whole, "{algo}");
        }
        let plain = blake3::hash(&data);
        assert_eq!(
            Hash::digest(HashAlgo::Blake3, &data).as_bytes(),
            plain.as_bytes()
        );
    }

    #[test]
    fn hashing_writer_tees() {
        let mut w = HashingWriter::new(Vec::new(), HashAlgo::Sha256);
        w.write_all(b"abc").expect("write");
        let (inner, h, n) = w.finish();
        assert_eq!(inner, b"abc");
        assert_eq!(n, 3);
        assert_eq!(
            h.to_hex(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
