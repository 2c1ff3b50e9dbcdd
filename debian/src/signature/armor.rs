//! ASCII armour: telling an armoured OpenPGP key block from a binary keyring, and
//! dearmouring it (base64 body, CRC-24 checksum checked) into the binary form gpgv
//! 2.2 reads.
//!
//! Written by hand: about a hundred lines (RFC 4880 §6), and the OpenPGP crates that
//! do it bring a whole OpenPGP implementation this crate deliberately does not
//! link (gpgv verifies). Must not: interpret the packets it decodes.

/// Whether `bytes` look like an ASCII-armoured OpenPGP block.
pub fn is_armored(bytes: &[u8]) -> bool {
    let start = bytes
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(bytes.len());
    bytes[start..].starts_with(b"-----BEGIN PGP ")
}

/// The binary packets of every `-----BEGIN PGP PUBLIC KEY BLOCK-----` in
/// `text`, concatenated (a binary keyring gpgv reads). The CRC-24 checksum
/// line (`=XXXX`) is checked when present.
pub fn dearmor(text: &str) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    let mut lines = text.lines().map(str::trim);
    let mut blocks = 0;
    while let Some(l) = lines.next() {
        if l != "-----BEGIN PGP PUBLIC KEY BLOCK-----" {
            continue;
        }
        blocks += 1;
        // Armour headers (`Comment: …`) up to a blank line; some writers
        // omit the blank line when there are no headers.
        let mut body = String::new();
        let mut in_headers = true;
        let mut crc = None;
        let mut ended = false;
        for l in lines.by_ref() {
            if l == "-----END PGP PUBLIC KEY BLOCK-----" {
                ended = true;
                break;
            }
            if in_headers {
                if l.is_empty() {
                    in_headers = false;
                    continue;
                }
                if l.contains(": ") {
                    continue;
                }
                in_headers = false;
            }
            if let Some(c) = l.strip_prefix('=') {
                crc = Some(c.to_string());
                continue;
            }
            body.push_str(l);
        }
        if !ended {
            return Err("the key block has no '-----END PGP PUBLIC KEY BLOCK-----' line".into());
        }
        let bytes = base64_decode(&body).ok_or("the key block is not valid base64")?;
        if let Some(c) = crc {
            let want = base64_decode(&c).filter(|v| v.len() == 3);
            let got = crc24(&bytes);
            let got = [(got >> 16) as u8, (got >> 8) as u8, got as u8];
            if want.as_deref() != Some(&got[..]) {
                return Err("the key block's checksum does not match".into());
            }
        }
        out.extend_from_slice(&bytes);
    }
    if blocks == 0 {
        return Err("no '-----BEGIN PGP PUBLIC KEY BLOCK-----' in it".into());
    }
    Ok(out)
}

fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let mut acc = 0u32;
    let mut bits = 0;
    for c in s.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            b'=' => break,
            b' ' | b'\t' | b'\r' | b'\n' => continue,
            _ => return None,
        };
        acc = (acc << 6) | v as u32;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

/// OpenPGP's CRC-24 (RFC 4880 6.1).
fn crc24(data: &[u8]) -> u32 {
    let mut crc: u32 = 0xB704CE;
    for &b in data {
        crc ^= (b as u32) << 16;
        for _ in 0..8 {
            crc <<= 1;
            if crc & 0x1000000 != 0 {
                crc ^= 0x1864CFB;
            }
        }
    }
    crc & 0xFFFFFF
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn armour() {
        // "hello" with its CRC-24.
        let bytes = b"hello";
        let crc = crc24(bytes);
        let crc_b = [(crc >> 16) as u8, (crc >> 8) as u8, crc as u8];
        let enc = |b: &[u8]| {
            const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
            let mut s = String::new();
            for c in b.chunks(3) {
                let n = (c[0] as u32) << 16
                    | (*c.get(1).unwrap_or(&0) as u32) << 8
                    | *c.get(2).unwrap_or(&0) as u32;
                for i in 0..4 {
                    if i <= c.len() {
                        s.push(A[(n >> (18 - 6 * i)) as usize & 63] as char);
                    } else {
                        s.push('=');
                    }
                }
            }
            s
        };
        let text = format!(
            "-----BEGIN PGP PUBLIC KEY BLOCK-----\nComment: test\n\n{}\n={}\n-----END PGP PUBLIC KEY BLOCK-----\n",
            enc(bytes),
            enc(&crc_b)
        );
        assert!(is_armored(text.as_bytes()));
        assert!(!is_armored(b"\x99\x01"));
        assert_eq!(dearmor(&text).unwrap(), bytes);
        let twice = format!("{text}{text}");
        assert_eq!(dearmor(&twice).unwrap(), b"hellohello");
        let broken = text.replace(&enc(bytes), &enc(b"hellp"));
        assert!(dearmor(&broken).unwrap_err().contains("checksum"));
        assert!(dearmor("nothing").is_err());
    }
}
