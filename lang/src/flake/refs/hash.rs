//! The hashes that appear in flake references (`rev`, `narHash`): parsing in
//! any of Nix's encodings (base16, nix32, base64, SRI, with or without an
//! `algo:` prefix) and rendering as base16 or SRI, with Nix's error messages.

use super::url::{FErr, FResult};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Algo {
    Blake3,
    Md5,
    Sha1,
    Sha256,
    Sha512,
}

impl Algo {
    fn size(self) -> usize {
        match self {
            Algo::Md5 => 16,
            Algo::Sha1 => 20,
            Algo::Sha256 | Algo::Blake3 => 32,
            Algo::Sha512 => 64,
        }
    }
    pub(crate) fn name(self) -> &'static str {
        match self {
            Algo::Blake3 => "blake3",
            Algo::Md5 => "md5",
            Algo::Sha1 => "sha1",
            Algo::Sha256 => "sha256",
            Algo::Sha512 => "sha512",
        }
    }
}

fn parse_algo(s: &str) -> FResult<Algo> {
    Ok(match s {
        "blake3" => Algo::Blake3,
        "md5" => Algo::Md5,
        "sha1" => Algo::Sha1,
        "sha256" => Algo::Sha256,
        "sha512" => Algo::Sha512,
        _ => {
            return Err(FErr::Other(format!(
            "unknown hash algorithm '{s}', expect 'blake3', 'md5', 'sha1', 'sha256', or 'sha512'"
        )))
        }
    })
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Hash {
    pub algo: Algo,
    pub bytes: Vec<u8>,
}

const NIX32_CHARS: &[u8; 32] = b"0123456789abcdfghijklmnpqrsvwxyz";
const B64_CHARS: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fn nix32_len(size: usize) -> usize {
    (size * 8).saturating_sub(1) / 5 + 1
}

fn base64_len(size: usize) -> usize {
    size.div_ceil(3) * 4
}

fn decode_base16(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    s.as_bytes()
        .chunks(2)
        .map(|c| {
            let h = (c[0] as char).to_digit(16)?;
            let l = (c[1] as char).to_digit(16)?;
            Some((h * 16 + l) as u8)
        })
        .collect()
}

fn decode_nix32(s: &str) -> Option<Vec<u8>> {
    let b = s.as_bytes();
    let size = b.len() * 5 / 8;
    let mut res = vec![0u8; size];
    for n in 0..b.len() {
        let c = b[b.len() - n - 1];
        let digit = NIX32_CHARS.iter().position(|&x| x == c)? as u32;
        let bit = n * 5;
        let i = bit / 8;
        let j = (bit % 8) as u32;
        if i >= size {
            if digit != 0 {
                return None;
            }
            continue;
        }
        res[i] |= (digit << j) as u8;
        let carry = digit >> (8 - j);
        if i + 1 < size {
            res[i + 1] |= carry as u8;
        } else if carry != 0 {
            return None;
        }
    }
    Some(res)
}

fn decode_base64(s: &str) -> Option<Vec<u8>> {
    let mut res = Vec::new();
    let (mut d, mut bits) = (0u32, 0u32);
    for c in s.bytes() {
        if c == b'=' {
            break;
        }
        if c == b'\n' {
            continue;
        }
        let digit = B64_CHARS.iter().position(|&x| x == c)? as u32;
        bits += 6;
        d = (d << 6 | digit) & 0xffff;
        if bits >= 8 {
            res.push((d >> (bits - 8) & 0xff) as u8);
            bits -= 8;
        }
    }
    Some(res)
}

pub(crate) fn encode_base64(b: &[u8]) -> String {
    let mut out = String::new();
    for chunk in b.chunks(3) {
        let n = chunk.len();
        let v = (chunk[0] as u32) << 16
            | (chunk.get(1).copied().unwrap_or(0) as u32) << 8
            | chunk.get(2).copied().unwrap_or(0) as u32;
        for k in 0..4 {
            if k <= n {
                out.push(B64_CHARS[(v >> (18 - 6 * k) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

impl Hash {
    /// Lower-case base16, as Git shows commit hashes.
    pub(crate) fn git_rev(&self) -> String {
        self.bytes.iter().map(|b| format!("{b:02x}")).collect()
    }
    /// `algo-base64`.
    pub(crate) fn sri(&self) -> String {
        format!("{}-{}", self.algo.name(), encode_base64(&self.bytes))
    }
}

/// Decodes `rest` (no prefix) for `algo`, choosing the encoding by length
/// unless `sri` forces base64.
fn parse_low_level(rest: &str, algo: Algo, sri: bool) -> FResult<Hash> {
    let size = algo.size();
    let (decoded, name) = if sri {
        (decode_base64(rest), "SRI")
    } else if rest.len() == size * 2 {
        (decode_base16(rest), "base16")
    } else if rest.len() == nix32_len(size) {
        (decode_nix32(rest), "nix32")
    } else if rest.len() == base64_len(size) {
        (decode_base64(rest), "Base64")
    } else {
        return Err(FErr::BadHash(format!(
            "hash '{rest}' has wrong length for hash algorithm '{}'",
            algo.name()
        )));
    };
    let d = decoded.unwrap_or_default();
    if d.len() != size {
        return Err(FErr::BadHash(format!(
            "invalid {name} hash '{rest}', length {} != expected length {size}",
            d.len()
        )));
    }
    Ok(Hash { algo, bytes: d })
}

/// Splits an `algo:` or `algo-` (SRI) prefix off.
fn split_prefix(s: &str) -> FResult<(Option<Algo>, bool, &str)> {
    if let Some((a, rest)) = s.split_once(':') {
        return Ok((Some(parse_algo(a)?), false, rest));
    }
    if let Some((a, rest)) = s.split_once('-') {
        return Ok((Some(parse_algo(a)?), true, rest));
    }
    Ok((None, false, s))
}

/// `Hash::parseAnyPrefixed`: the string must name its algorithm.
pub(crate) fn parse_any_prefixed(s: &str) -> FResult<Hash> {
    let (algo, sri, rest) = split_prefix(s)?;
    let Some(algo) = algo else {
        return Err(FErr::BadHash(format!("hash '{s}' does not include a type")));
    };
    parse_low_level(rest, algo, sri)
}

/// `Hash::parseAny` with a known algorithm.
pub(crate) fn parse_any(s: &str, algo: Algo) -> FResult<Hash> {
    let (parsed, sri, rest) = split_prefix(s)?;
    if let Some(p) = parsed {
        if p != algo {
            return Err(FErr::BadHash(format!(
                "hash '{s}' should have type '{}'",
                algo.name()
            )));
        }
    }
    parse_low_level(rest, algo, sri)
}

/// `Hash::parseSRI`.
pub(crate) fn parse_sri(s: &str) -> FResult<Hash> {
    let Some((a, rest)) = s.split_once('-') else {
        return Err(FErr::BadHash(format!("hash '{s}' is not SRI")));
    };
    parse_low_level(rest, parse_algo(a)?, true)
}

/// A `rev` attribute as `Input::getRev` reads it: prefixed forms first, then a
/// bare SHA-1.
pub(crate) fn parse_rev(s: &str) -> FResult<Hash> {
    match parse_any_prefixed(s) {
        Ok(h) => Ok(h),
        Err(FErr::BadHash(_)) => parse_any(s, Algo::Sha1),
        Err(e) => Err(e),
    }
}

/// A `narHash` attribute as `Input::getNarHash` reads it.
pub(crate) fn parse_nar_hash(s: &str) -> FResult<Hash> {
    let h = if s.is_empty() {
        Hash {
            algo: Algo::Sha256,
            bytes: vec![0; 32],
        }
    } else {
        parse_sri(s)?
    };
    if h.algo != Algo::Sha256 {
        return Err(FErr::Other("narHash must use SHA-256".into()));
    }
    Ok(h)
}
