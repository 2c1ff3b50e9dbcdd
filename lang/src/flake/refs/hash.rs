//! The hashes that appear in flake references (`rev`, `narHash`): which forms
//! Nix accepts where (`algo:` or SRI `algo-` prefixes, bare digests of a known
//! algorithm) and its error messages. Decoding (base16, nix32, base64, SRI) is
//! `rocmx_store::Hash`'s; rendering too (`to_hex` for Git revisions, `to_sri`
//! for `narHash`).

use rocmx_store::{Encoding, Hash, HashAlgo, HashError};

use super::url::{FErr, FResult};

fn parse_algo(s: &str) -> FResult<HashAlgo> {
    s.parse().map_err(|_| {
        FErr::Other(format!(
            "unknown hash algorithm '{s}', expect 'blake3', 'md5', 'sha1', 'sha256', or 'sha512'"
        ))
    })
}

/// The number of bytes Nix's lenient base64 decoder yields for `s` (it stops at
/// `=`, skips newlines, and yields nothing for a string with a character
/// outside the alphabet), which its "length N != expected length M" names.
fn nix_base64_len(s: &str) -> usize {
    let mut chars = 0;
    for c in s.bytes().take_while(|&c| c != b'=') {
        match c {
            b'\n' => {}
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'+' | b'/' => chars += 1,
            _ => return 0,
        }
    }
    chars * 6 / 8
}

/// Base64 as Nix reads it: up to the first `=`, newlines skipped, padded or
/// not; the decoding itself is the store's.
fn parse_base64(rest: &str, algo: HashAlgo) -> Result<Hash, HashError> {
    let digits: String = rest
        .split('=')
        .next()
        .unwrap_or_default()
        .chars()
        .filter(|&c| c != '\n')
        .collect();
    Hash::parse_sri(&format!("{algo}-{digits}"))
}

/// Decodes `rest` (no prefix) for `algo`: base64 when `sri`, else the encoding
/// its length selects (bare base64 must be padded, as Nix has it).
fn parse_low_level(rest: &str, algo: HashAlgo, sri: bool) -> FResult<Hash> {
    let size = algo.size();
    let (name, parsed) = if sri {
        ("SRI", parse_base64(rest, algo))
    } else {
        let parsed = Hash::parse_digest(rest, algo);
        let encoding = match &parsed {
            Ok((_, e)) | Err(HashError::BadDigest { encoding: e, .. }) => Some(*e),
            Err(_) => None,
        };
        match encoding {
            Some(Encoding::Base16) => ("base16", parsed.map(|(h, _)| h)),
            Some(Encoding::Nix32) => ("nix32", parsed.map(|(h, _)| h)),
            Some(_) if rest.len() == size.div_ceil(3) * 4 => ("Base64", parse_base64(rest, algo)),
            _ => {
                return Err(FErr::BadHash(format!(
                    "hash '{rest}' has wrong length for hash algorithm '{algo}'"
                )))
            }
        }
    };
    parsed.map_err(|e| {
        // What Nix's decoders yield for a malformed digest: nothing for base16
        // and nix32, what precedes the defect for base64.
        let len = match name {
            "base16" | "nix32" => 0,
            _ => nix_base64_len(rest),
        };
        if len == size {
            // Base64 with non-zero trailing bits, which Nix's decoder ignores
            // and the store's refuses.
            FErr::BadHash(format!("invalid {name} hash '{rest}': {e}"))
        } else {
            FErr::BadHash(format!(
                "invalid {name} hash '{rest}', length {len} != expected length {size}"
            ))
        }
    })
}

/// Splits an `algo:` or `algo-` (SRI) prefix off.
fn split_prefix(s: &str) -> FResult<(Option<HashAlgo>, bool, &str)> {
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
pub(crate) fn parse_any(s: &str, algo: HashAlgo) -> FResult<Hash> {
    let (parsed, sri, rest) = split_prefix(s)?;
    if let Some(p) = parsed {
        if p != algo {
            return Err(FErr::BadHash(format!(
                "hash '{s}' should have type '{algo}'"
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
        Err(FErr::BadHash(_)) => parse_any(s, HashAlgo::Sha1),
        Err(e) => Err(e),
    }
}

/// A `narHash` attribute as `Input::getNarHash` reads it.
pub(crate) fn parse_nar_hash(s: &str) -> FResult<Hash> {
    let h = if s.is_empty() {
        Hash::new(HashAlgo::Sha256, &[0; 32]).map_err(|e| FErr::Other(e.to_string()))?
    } else {
        parse_sri(s)?
    };
    if h.algo() != HashAlgo::Sha256 {
        return Err(FErr::Other("narHash must use SHA-256".into()));
    }
    Ok(h)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(r: FResult<Hash>) -> String {
        match r {
            Ok(h) => format!("ok {}", h.to_sri()),
            Err(e) => e.message().to_string(),
        }
    }

    #[test]
    fn forms_and_messages() {
        // SHA-1 of "": every encoding Nix accepts for a known algorithm.
        let hex = "da39a3ee5e6b4b0d3255bfef95601890afd80709";
        let sri = "sha1-2jmj7l5rSw0yVb/vlWAYkK/YBwk=";
        for s in [
            hex.to_string(),
            hex.to_uppercase(),
            "143xibwh31h9bvxzalr0sjvbbvpa6ffs".to_string(), // nix32
            "2jmj7l5rSw0yVb/vlWAYkK/YBwk=".to_string(),
            format!("sha1:{hex}"),
            sri.to_string(),
            "sha1-2jmj7l5rSw0yVb/vlWAYkK/YBwk".to_string(),
            "sha1-2jmj7l5rSw0yVb/vlWAYkK/YBwk==".to_string(),
        ] {
            assert_eq!(
                msg(parse_any(&s, HashAlgo::Sha1)),
                format!("ok {sri}"),
                "{s}"
            );
        }
        assert_eq!(
            parse_rev(hex).map(|h| h.to_hex()).ok().as_deref(),
            Some(hex)
        );
        let cases = [
            (
                parse_any("xyz", HashAlgo::Sha1),
                "hash 'xyz' has wrong length for hash algorithm 'sha1'",
            ),
            (
                // Bare base64 must be padded.
                parse_any("2jmj7l5rSw0yVb/vlWAYkK/YBwk", HashAlgo::Sha1),
                "hash '2jmj7l5rSw0yVb/vlWAYkK/YBwk' has wrong length for hash algorithm 'sha1'",
            ),
            (
                parse_any("ga39a3ee5e6b4b0d3255bfef95601890afd80709", HashAlgo::Sha1),
                "invalid base16 hash 'ga39a3ee5e6b4b0d3255bfef95601890afd80709', length 0 != expected length 20",
            ),
            (
                parse_any("e43xibwh31h9bvxzalr0sjvbbvpa6ffs", HashAlgo::Sha1),
                "invalid nix32 hash 'e43xibwh31h9bvxzalr0sjvbbvpa6ffs', length 0 != expected length 20",
            ),
            (
                parse_any("2jmj7l5rSw0yVb/vlWAY=K/YBwk=", HashAlgo::Sha1),
                "invalid Base64 hash '2jmj7l5rSw0yVb/vlWAY=K/YBwk=', length 15 != expected length 20",
            ),
            (
                parse_sri("sha1-2jmj7l5r"),
                "invalid SRI hash '2jmj7l5r', length 6 != expected length 20",
            ),
            (
                parse_sri("sha1-2jmj7l5rSw0yVb/vlWAYkK/YBw!"),
                "invalid SRI hash '2jmj7l5rSw0yVb/vlWAYkK/YBw!', length 0 != expected length 20",
            ),
            (parse_sri(hex), &*format!("hash '{hex}' is not SRI")),
            (
                parse_any_prefixed(hex),
                &*format!("hash '{hex}' does not include a type"),
            ),
            (
                parse_any(&format!("md5:{hex}"), HashAlgo::Sha1),
                &*format!("hash 'md5:{hex}' should have type 'sha1'"),
            ),
            (
                parse_any("sha3:x", HashAlgo::Sha1),
                "unknown hash algorithm 'sha3', expect 'blake3', 'md5', 'sha1', 'sha256', or 'sha512'",
            ),
            (parse_nar_hash(sri), "narHash must use SHA-256"),
        ];
        for (got, want) in cases {
            assert_eq!(msg(got), want);
        }
        assert_eq!(
            msg(parse_nar_hash("")),
            "ok sha256-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="
        );
    }
}
