//! Nix's base-32 codec ("nix32").
//!
//! Owns: the alphabet `0123456789abcdfghijklmnpqrsvwxyz` (no `e`, `o`, `t`, `u`) and Nix's
//! exact bit order, in which the *last* character of the text holds the lowest five bits of
//! the first byte, so that the text reads as the digest taken as a little-endian number,
//! most significant digit first. A consequence used elsewhere: comparing two nix32 strings
//! of equal length gives the same order as comparing the digests byte-reversed.
//!
//! Must not: know about hash algorithms, store paths or any other encoding; it maps bytes to
//! text and back, nothing more. Decoding never panics, whatever the input.

use thiserror::Error;

/// The 32 characters of Nix's base-32 alphabet, in digit order.
pub const ALPHABET: &[u8; 32] = b"0123456789abcdfghijklmnpqrsvwxyz";

/// Why a string is not the nix32 encoding of a digest of the expected size.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Nix32Error {
    /// The text has the wrong number of characters for the expected digest size.
    #[error("nix32 string has {found} characters, expected {expected}")]
    BadLength {
        /// Characters expected for the digest size.
        expected: usize,
        /// Characters found.
        found: usize,
    },
    /// A character outside the nix32 alphabet.
    #[error("invalid character {ch:?} at position {position} in nix32 string")]
    InvalidChar {
        /// Zero-based character position.
        position: usize,
        /// The offending character.
        ch: char,
    },
    /// The leading digit carries bits beyond the digest size (the text encodes a larger number).
    #[error("nix32 string encodes more than {bytes} bytes")]
    Overflow {
        /// The expected digest size in bytes.
        bytes: usize,
    },
}

/// The number of nix32 characters that encode `bytes` bytes: `ceil(bytes * 8 / 5)`.
pub const fn encoded_len(bytes: usize) -> usize {
    if bytes == 0 {
        0
    } else {
        (bytes * 8 - 1) / 5 + 1
    }
}

/// Encodes `bytes` in nix32, exactly as Nix's `printHash32` does.
pub fn encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(encoded_len(bytes.len()));
    encode_into(bytes, &mut out);
    out
}

/// Appends the nix32 encoding of `bytes` to `out` (what [`encode`] returns).
pub fn encode_into(bytes: &[u8], out: &mut String) {
    let len = encoded_len(bytes.len());
    out.reserve(len);
    for n in (0..len).rev() {
        let b = n * 5;
        let i = b / 8;
        let j = b % 8;
        let lo = bytes.get(i).map_or(0u16, |&x| u16::from(x) >> j);
        let hi = bytes.get(i + 1).map_or(0u16, |&x| u16::from(x) << (8 - j));
        out.push(char::from(ALPHABET[usize::from(((lo | hi) & 0x1f) as u8)]));
    }
}

/// The 32 nix32 characters of a 20-byte digest (a store path's hash part), without
/// allocating.
pub fn encode20(bytes: &[u8; 20]) -> [u8; 32] {
    // The digest as one 160-bit little-endian number: digit n (from the end of the
    // text) is bits 5n..5n+5. Five bytes are exactly eight digits, so each 40-bit
    // group is read as one integer and gives its eight digits by plain shifts.
    let mut out = [0u8; 32];
    for (k, group) in bytes.chunks_exact(5).enumerate() {
        let mut word = [0u8; 8];
        word[..5].copy_from_slice(group);
        let bits = u64::from_le_bytes(word);
        for j in 0..8 {
            out[31 - (8 * k + j)] = ALPHABET[((bits >> (5 * j)) & 0x1f) as usize];
        }
    }
    out
}

/// The 20 bytes whose [`encode20`] is `text` (32 characters), or `None` when a
/// byte is not a nix32 character. 32 digits are exactly 160 bits, so nothing can
/// overflow; each group of eight digits fills five bytes through one integer.
pub fn decode20(text: &[u8; 32]) -> Option<[u8; 20]> {
    let mut out = [0u8; 20];
    for (k, group) in out.chunks_exact_mut(5).enumerate() {
        let mut bits = 0u64;
        for j in 0..8 {
            bits |= u64::from(digit_of(text[31 - (8 * k + j)])?) << (5 * j);
        }
        group.copy_from_slice(&bits.to_le_bytes()[..5]);
    }
    Some(out)
}

/// The digit value of a nix32 character, or `None` outside the alphabet.
fn digit_of(c: u8) -> Option<u8> {
    match DIGITS[c as usize] {
        0xff => None,
        d => Some(d),
    }
}

/// The value of each byte as a nix32 digit, `0xff` for bytes outside the alphabet.
const DIGITS: [u8; 256] = {
    let mut t = [0xffu8; 256];
    let mut i = 0;
    while i < ALPHABET.len() {
        t[ALPHABET[i] as usize] = i as u8;
        i += 1;
    }
    t
};

/// Decodes a nix32 string into exactly `size` bytes, strictly: the length must be
/// [`encoded_len`]`(size)` and no bit beyond `size` bytes may be set.
pub fn decode(text: &str, size: usize) -> Result<Vec<u8>, Nix32Error> {
    let expected = encoded_len(size);
    let raw = text.as_bytes();
    if raw.len() != expected {
        return Err(Nix32Error::BadLength {
            expected,
            found: text.chars().count(),
        });
    }
    let mut out = vec![0u8; size];
    for (position, &c) in raw.iter().enumerate() {
        let digit = digit_of(c).ok_or_else(|| Nix32Error::InvalidChar {
            position,
            ch: text[position..]
                .chars()
                .next()
                .unwrap_or(char::REPLACEMENT_CHARACTER),
        })?;
        let n = expected - position - 1;
        let b = n * 5;
        let i = b / 8;
        let j = b % 8;
        let wide = u16::from(digit) << j;
        if let Some(slot) = out.get_mut(i) {
            *slot |= (wide & 0xff) as u8;
        }
        let carry = (wide >> 8) as u8;
        if carry != 0 {
            match out.get_mut(i + 1) {
                Some(slot) => *slot |= carry,
                None => return Err(Nix32Error::Overflow { bytes: size }),
            }
        }
    }
    Ok(out)
}

/// Whether `c` is a character of the nix32 alphabet.
pub fn is_nix32_char(c: char) -> bool {
    c.is_ascii() && digit_of(c as u8).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 1,000 pseudo-random 20-byte digests (xorshift from `seed`).
    fn digests(mut rng: u64) -> Vec<[u8; 20]> {
        (0..1000)
            .map(|_| {
                let mut b = [0u8; 20];
                for x in b.iter_mut() {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    *x = rng as u8;
                }
                b
            })
            .collect()
    }

    #[test]
    fn encode20_is_encode() {
        for b in digests(0x9e37_79b9_7f4a_7c15) {
            assert_eq!(std::str::from_utf8(&encode20(&b)).unwrap(), encode(&b));
        }
        assert_eq!(&encode20(&[0xff; 20]), encode(&[0xff; 20]).as_bytes());
        assert_eq!(&encode20(&[0; 20]), b"00000000000000000000000000000000");
    }

    #[test]
    fn decode20_is_decode() {
        for b in digests(0x2545_f491_4f6c_dd1d) {
            let text = encode20(&b);
            assert_eq!(decode20(&text), Some(b));
            let s = std::str::from_utf8(&text).unwrap();
            assert_eq!(decode(s, 20).unwrap(), b.to_vec());
        }
        let mut bad = *b"0123456789abcdfghijklmnpqrsvwxyz";
        assert!(decode20(&bad).is_some());
        for c in [b'e', b'o', b'u', b't', b'-', 0xc3] {
            bad[7] = c;
            assert_eq!(decode20(&bad), None, "{c}");
        }
    }

    fn hex(s: &str) -> Vec<u8> {
        data_encoding::HEXLOWER
            .decode(s.as_bytes())
            .expect("test hex")
    }

    #[test]
    fn sha256_of_empty_string() {
        let digest = hex("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
        assert_eq!(
            encode(&digest),
            "0mdqa9w1p6cmli6976v4wi0sw9r4p5prkj7lzfd1877wk11c9c73"
        );
        assert_eq!(
            decode("0mdqa9w1p6cmli6976v4wi0sw9r4p5prkj7lzfd1877wk11c9c73", 32),
            Ok(digest)
        );
    }

    #[test]
    fn literal_vectors() {
        // Checked with `nix-hash --type … --to-base32`.
        assert_eq!(
            encode(&hex("d41d8cd98f00b204e9800998ecf8427e")),
            "3y8bwfr609h3lh9ch0izcqq7fl"
        );
        assert_eq!(
            encode(&hex("da39a3ee5e6b4b0d3255bfef95601890afd80709")),
            "143xibwh31h9bvxzalr0sjvbbvpa6ffs"
        );
        assert_eq!(encode(&[]), "");
        assert_eq!(encode(&[0x1f]), "0z");
        assert_eq!(encode(&[0xff]), "7z");
        assert_eq!(decode("7z", 1), Ok(vec![0xff]));
        assert_eq!(encoded_len(20), 32);
        assert_eq!(encoded_len(32), 52);
        assert_eq!(encoded_len(64), 103);
        assert_eq!(encoded_len(16), 26);
    }

    #[test]
    fn rejects_bad_input() {
        assert_eq!(decode("8z", 1), Err(Nix32Error::Overflow { bytes: 1 }));
        assert_eq!(
            decode("0e", 1),
            Err(Nix32Error::InvalidChar {
                position: 1,
                ch: 'e'
            })
        );
        assert_eq!(
            decode("0", 1),
            Err(Nix32Error::BadLength {
                expected: 2,
                found: 1
            })
        );
        assert!(decode("é0", 1).is_err());
        assert!(decode("0é", 2).is_err());
    }

    #[test]
    fn round_trips_every_byte_pattern() {
        for size in [1usize, 2, 5, 16, 20, 32, 64] {
            for seed in 0u8..=255 {
                let bytes: Vec<u8> = (0..size)
                    .map(|k| {
                        seed.wrapping_mul(31)
                            .wrapping_add((k as u8).wrapping_mul(7))
                    })
                    .collect();
                let text = encode(&bytes);
                assert_eq!(text.len(), encoded_len(size));
                assert_eq!(decode(&text, size), Ok(bytes));
            }
        }
    }

    #[test]
    fn text_order_is_reversed_byte_order() {
        let a = [1u8, 0, 0, 0, 0];
        let b = [0u8, 0, 0, 0, 1];
        assert!(encode(&a) < encode(&b));
    }
}
