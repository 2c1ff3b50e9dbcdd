//! What builders' text becomes on standard error: escape sequences and control
//! characters dropped for pipes and files ([`strip_escapes`]), colours kept or dropped
//! on a terminal ([`sanitize`]), status lines made printable and cut to the width.
//!
//! Must not: let anything through that moves the cursor or changes the terminal's state
//! (only SGR colours, and only from [`sanitize`] when asked for), or panic on any input
//! (logs need not be UTF-8).

/// For the status area: printable ASCII only (one column per character), the rest `?`.
pub(super) fn printable(s: &str) -> String {
    s.chars()
        .map(|c| if (' '..='~').contains(&c) { c } else { '?' })
        .collect()
}

/// The first `width` characters of `s` (status lines are ASCII but for `…`).
pub(super) fn truncate(s: &str, width: usize) -> String {
    match s.char_indices().nth(width) {
        Some((i, _)) => s[..i].to_string(),
        None => s.to_string(),
    }
}

/// A line for the plain form, which is for pipes and files: escape sequences
/// (`ESC [ … final`, `ESC ] … BEL/ST` and the other strings, `ESC ( B` and two-byte `ESC x`) are
/// dropped, every other byte is kept as written.
pub(super) fn strip_escapes(s: &[u8]) -> Vec<u8> {
    if !s.contains(&0x1b) {
        return s.to_vec();
    }
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        if s[i] != 0x1b {
            out.push(s[i]);
            i += 1;
            continue;
        }
        i += 1;
        match s.get(i) {
            Some(b'[') => {
                i += 1;
                while i < s.len() && (0x20..=0x3f).contains(&s[i]) {
                    i += 1;
                }
                if i < s.len() && (0x40..=0x7e).contains(&s[i]) {
                    i += 1;
                }
            }
            Some(b']' | b'P' | b'X' | b'^' | b'_') => {
                i += 1;
                while i < s.len() {
                    if s[i] == 0x07 {
                        i += 1;
                        break;
                    }
                    if s[i] == 0x1b {
                        i += 1 + usize::from(s.get(i + 1) == Some(&b'\\'));
                        break;
                    }
                    i += 1;
                }
            }
            // nF sequences (`ESC ( B`): intermediates, then a final byte.
            Some(_) => {
                while i < s.len() && (0x20..=0x2f).contains(&s[i]) {
                    i += 1;
                }
                i += 1;
            }
            None => {}
        }
    }
    out
}

/// A line for the live form: colours (SGR sequences) are kept and reset at the end
/// when `colour` is true, dropped otherwise; other escape sequences and control
/// characters but tab are dropped.
pub(super) fn sanitize(s: &str, colour: bool) -> String {
    let mut out = String::with_capacity(s.len());
    let mut coloured = false;
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\x1b' => match chars.next() {
                // CSI: parameters and intermediates (0x20–0x3f), then a final byte.
                Some('[') => {
                    let mut seq = String::from("\x1b[");
                    let mut fin = None;
                    for c in chars.by_ref() {
                        seq.push(c);
                        if ('\x40'..='\x7e').contains(&c) {
                            fin = Some(c);
                            break;
                        }
                        if !('\x20'..='\x3f').contains(&c) {
                            break;
                        }
                    }
                    let params_ok = seq[2..seq.len() - fin.map_or(0, |_| 1)]
                        .chars()
                        .all(|c| c.is_ascii_digit() || c == ';');
                    if fin == Some('m') && params_ok && colour {
                        out.push_str(&seq);
                        coloured = true;
                    }
                }
                // OSC (and the other strings): up to BEL or ST.
                Some(']') | Some('P') | Some('X') | Some('^') | Some('_') => {
                    while let Some(c) = chars.next() {
                        if c == '\x07' {
                            break;
                        }
                        if c == '\x1b' {
                            if chars.peek() == Some(&'\\') {
                                chars.next();
                            }
                            break;
                        }
                    }
                }
                // nF sequences (`ESC ( B`: intermediates, then a final character),
                // two-character ones, and a lone ESC at the end.
                Some(c) if ('\x20'..='\x2f').contains(&c) => {
                    while chars.next_if(|c| ('\x20'..='\x2f').contains(c)).is_some() {}
                    chars.next();
                }
                _ => {}
            },
            '\t' => out.push(c),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    if coloured {
        out.push_str("\x1b[0m");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn live_lines_keep_colours_only_and_status_lines_are_cut() {
        assert_eq!(truncate("abcdef", 3), "abc");
        assert_eq!(truncate("ab", 3), "ab");
        assert_eq!(
            sanitize("a\tb\x1b]0;title\x07c\x1b[1;32mg\x1b", true),
            "a\tbc\x1b[1;32mg\x1b[0m"
        );
        assert_eq!(
            sanitize("a\tb\x1b]0;title\x07c\x1b[1;32mg\x1b", false),
            "a\tbcg"
        );
        assert_eq!(sanitize("x\x1b[?25ly", true), "xy");
        assert_eq!(sanitize("a\x1b(Bb\x1b7c", true), "abc");
    }

    #[test]
    fn plain_lines_lose_escape_sequences_and_keep_other_bytes() {
        let cases: [(&[u8], &[u8]); 7] = [
            (b"plain \xff text", b"plain \xff text"),
            (b"\x1b[1;31merror:\x1b[0m boom", b"error: boom"),
            (b"\x1b]0;title\x07after", b"after"),
            (b"\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\", b"link"),
            (b"a\x1b(Bb", b"ab"),
            (b"cut\x1b[", b"cut"),
            (b"end\x1b", b"end"),
        ];
        for (input, want) in cases {
            assert_eq!(
                strip_escapes(input),
                want,
                "{:?}",
                String::from_utf8_lossy(input)
            );
        }
    }
}
