//! The ATerm text of a derivation (`.drv` files): printing and strict parsing.
//!
//! Owns: the exact bytes Nix writes for a derivation (see [`super`] for the canonical form)
//! and a parser that accepts that form only, reporting the byte offset of every fault.
//!
//! Must not: decide what a derivation means (paths, hashes of derivations); it maps text to
//! [`Derivation`] and back. Never panics, whatever the text.

use std::collections::{BTreeMap, BTreeSet};

use super::{Derivation, DerivationError, DerivationOutput};
use crate::hash::{Encoding, Hash, HashAlgo, HashError};
use crate::path::{validate_name, IngestionMethod, StorePath};

/// The bytes [`string`] escapes: `"`, `\\`, newline, carriage return, tab.
static ESCAPED: [bool; 256] = {
    let mut t = [false; 256];
    t[b'"' as usize] = true;
    t[b'\\' as usize] = true;
    t[b'\n' as usize] = true;
    t[b'\r' as usize] = true;
    t[b'\t' as usize] = true;
    t
};

/// Appends `v` as an ATerm string literal.
fn string(out: &mut String, v: &str) {
    out.reserve(v.len() + 2);
    out.push('"');
    // Most strings have nothing to escape: a table lookup per byte proves it
    // for short ones (names, paths, flags), two vectorised scans for long ones
    // (whose set-up costs more than a short string's whole scan).
    let b = v.as_bytes();
    let clean = if b.len() <= 96 {
        !b.iter().any(|&c| ESCAPED[c as usize])
    } else {
        memchr::memchr3(b'"', b'\\', b'\n', b).is_none()
            && memchr::memchr2(b'\r', b'\t', b).is_none()
    };
    if clean {
        out.push_str(v);
        out.push('"');
        return;
    }
    // Runs without a character to escape are copied whole: the five escaped
    // characters are ASCII, so every cut is on a character boundary.
    let mut run = 0;
    for (i, b) in v.bytes().enumerate() {
        let esc = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            _ => continue,
        };
        out.push_str(&v[run..i]);
        out.push_str(esc);
        run = i + 1;
    }
    out.push_str(&v[run..]);
    out.push('"');
}

/// Appends a store path as a string literal: what `string(out, &p.to_string())`
/// appends, without the temporary (a valid name has nothing to escape).
fn path(out: &mut String, p: &StorePath) {
    out.push('"');
    p.push_absolute(out);
    out.push('"');
}

/// Appends `[a,b,…]`, each item written by `item`.
fn list<T>(
    out: &mut String,
    items: impl IntoIterator<Item = T>,
    mut item: impl FnMut(&mut String, T),
) {
    out.push('[');
    for (i, x) in items.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        item(out, x);
    }
    out.push(']');
}

/// The canonical ATerm text of `d`.
pub fn print(d: &Derivation) -> String {
    let mut s = String::with_capacity(1024);
    s.push_str("Derive(");
    list(&mut s, &d.outputs, |s, (name, o)| {
        s.push('(');
        string(s, name);
        s.push(',');
        match o.path() {
            Some(p) => path(s, p),
            None => string(s, ""),
        }
        s.push(',');
        string(s, &o.hash_algo_field());
        s.push(',');
        match o {
            DerivationOutput::Fixed { hash, .. } => string(s, &hash.to_hex()),
            DerivationOutput::Floating { .. } => string(s, ""),
        }
        s.push(')');
    });
    s.push(',');
    list(&mut s, &d.input_drvs, |s, (drv, outs)| {
        s.push('(');
        path(s, drv);
        s.push(',');
        list(s, outs, |s, o| string(s, o));
        s.push(')');
    });
    s.push(',');
    list(&mut s, &d.input_srcs, path);
    s.push(',');
    string(&mut s, &d.system);
    s.push(',');
    string(&mut s, &d.builder);
    s.push(',');
    list(&mut s, &d.args, |s, a| string(s, a));
    s.push(',');
    list(&mut s, &d.env, |s, (k, v)| {
        s.push('(');
        string(s, k);
        s.push(',');
        string(s, v);
        s.push(')');
    });
    s.push(')');
    s
}

type Result<T> = std::result::Result<T, DerivationError>;

/// A cursor over the text.
struct Parser<'a> {
    b: &'a [u8],
    pos: usize,
}

impl Parser<'_> {
    fn lit(&mut self, l: &'static str) -> Result<()> {
        if self
            .b
            .get(self.pos..)
            .is_some_and(|r| r.starts_with(l.as_bytes()))
        {
            self.pos += l.len();
            Ok(())
        } else {
            Err(DerivationError::Expected {
                offset: self.pos,
                expected: l,
            })
        }
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.pos).copied()
    }

    /// A string literal; returns its offset and value. Copies each run of plain
    /// bytes at once (a `.drv` is mostly long unescaped strings), and builds an error
    /// only when there is one.
    fn string(&mut self) -> Result<(usize, String)> {
        let start = self.pos;
        self.lit("\"")?;
        let mut v = Vec::new();
        loop {
            let rest = self.b.get(self.pos..).unwrap_or_default();
            // (A `let … else`, not `ok_or`: an error value made and dropped on every
            // call cost more than the scan.)
            let Some(run) = rest
                .iter()
                .position(|&c| matches!(c, b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0))
            else {
                return Err(DerivationError::Expected {
                    offset: self.b.len(),
                    expected: "\"",
                });
            };
            v.extend_from_slice(&rest[..run]);
            let at = self.pos + run;
            self.pos = at + 1;
            match rest[run] {
                b'"' => break,
                b'\\' => {
                    let Some(e) = self.peek() else {
                        return Err(DerivationError::BadString { offset: at });
                    };
                    self.pos += 1;
                    v.push(match e {
                        b'"' => b'"',
                        b'\\' => b'\\',
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        _ => return Err(DerivationError::BadString { offset: at }),
                    });
                }
                0 => return Err(DerivationError::NulByte { offset: at }),
                // A raw newline, carriage return or tab: Nix always escapes them.
                _ => return Err(DerivationError::BadString { offset: at }),
            }
        }
        // Only ASCII bytes were added or removed, so this cannot fail on `&str` input.
        let s = String::from_utf8(v).map_err(|_| DerivationError::BadString { offset: start })?;
        Ok((start, s))
    }

    /// `[item,item,…]`.
    fn list<T>(&mut self, mut item: impl FnMut(&mut Self) -> Result<T>) -> Result<Vec<T>> {
        self.lit("[")?;
        let mut out = Vec::new();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(out);
        }
        loop {
            out.push(item(self)?);
            if self.peek() == Some(b',') {
                self.pos += 1;
            } else {
                self.lit("]")?;
                return Ok(out);
            }
        }
    }

    fn store_path(&mut self) -> Result<(usize, StorePath)> {
        let (offset, s) = self.string()?;
        let p = StorePath::from_absolute(&s)
            .map_err(|source| DerivationError::StorePath { offset, source })?;
        Ok((offset, p))
    }
}

/// Fails unless `items` (with offsets) are strictly increasing.
fn sorted<'k, K: Ord + 'k + ToString>(
    what: &'static str,
    items: impl IntoIterator<Item = (usize, &'k K)>,
) -> Result<()> {
    let mut prev: Option<&K> = None;
    for (offset, k) in items {
        if let Some(p) = prev {
            match k.cmp(p) {
                std::cmp::Ordering::Equal => {
                    return Err(DerivationError::Duplicate {
                        offset,
                        what,
                        key: k.to_string(),
                    })
                }
                std::cmp::Ordering::Less => {
                    return Err(DerivationError::Unsorted {
                        offset,
                        what,
                        key: k.to_string(),
                    })
                }
                std::cmp::Ordering::Greater => {}
            }
        }
        prev = Some(k);
    }
    Ok(())
}

fn output_name(offset: usize, name: &str) -> Result<()> {
    if name == "drv" || validate_name(name).is_err() {
        return Err(DerivationError::BadOutputName {
            offset,
            name: name.to_string(),
        });
    }
    Ok(())
}

/// One output tuple `(name,path,hashAlgo,hash)`.
fn output(p: &mut Parser<'_>) -> Result<(usize, String, DerivationOutput)> {
    p.lit("(")?;
    let (name_at, name) = p.string()?;
    output_name(name_at, &name)?;
    p.lit(",")?;
    let (path_at, path) = p.string()?;
    p.lit(",")?;
    let (algo_at, algo_text) = p.string()?;
    p.lit(",")?;
    let (hash_at, hash_text) = p.string()?;
    p.lit(")")?;
    let unsupported = |reason| DerivationError::UnsupportedOutput {
        offset: name_at,
        output: name.clone(),
        reason,
    };
    if algo_text.is_empty() {
        return Err(unsupported(if path.is_empty() {
            "deferred outputs are not supported"
        } else {
            "input-addressed outputs are not supported"
        }));
    }
    let (method, bare) = match algo_text.strip_prefix("r:") {
        Some(rest) => (IngestionMethod::Nar, rest),
        None => (IngestionMethod::Flat, algo_text.as_str()),
    };
    let algo: HashAlgo = bare.parse().map_err(|_| DerivationError::BadHashAlgo {
        offset: algo_at,
        text: algo_text.clone(),
    })?;
    let o = match (path.is_empty(), hash_text.is_empty()) {
        (true, true) => DerivationOutput::Floating { method, algo },
        (false, false) => {
            let path =
                StorePath::from_absolute(&path).map_err(|source| DerivationError::StorePath {
                    offset: path_at,
                    source,
                })?;
            let hash_err = |source| DerivationError::Hash {
                offset: hash_at,
                source,
            };
            let (hash, enc) = Hash::parse_digest(&hash_text, algo).map_err(hash_err)?;
            if enc != Encoding::Base16 || hash.to_hex() != hash_text {
                return Err(hash_err(HashError::BadDigest {
                    algo,
                    encoding: enc,
                    reason: "a derivation's output hash must be lowercase base16".into(),
                }));
            }
            DerivationOutput::Fixed { method, hash, path }
        }
        (false, true) => return Err(unsupported("input-addressed outputs are not supported")),
        (true, false) => return Err(unsupported("a fixed output needs its path")),
    };
    Ok((name_at, name, o))
}

/// Parses canonical ATerm text.
pub fn parse(text: &str) -> Result<Derivation> {
    let mut p = Parser {
        b: text.as_bytes(),
        pos: 0,
    };
    p.lit("Derive(")?;
    let outputs = p.list(output)?;
    sorted("output", outputs.iter().map(|(at, name, _)| (*at, name)))?;
    p.lit(",")?;
    let input_drvs = p.list(|p| {
        p.lit("(")?;
        let (at, path) = p.store_path()?;
        p.lit(",")?;
        let outs = p.list(|p| {
            let (at, name) = p.string()?;
            output_name(at, &name)?;
            Ok((at, name))
        })?;
        sorted("output name", outs.iter().map(|(at, n)| (*at, n)))?;
        p.lit(")")?;
        Ok((
            at,
            path,
            outs.into_iter()
                .map(|(_, n)| n)
                .collect::<BTreeSet<String>>(),
        ))
    })?;
    sorted(
        "input derivation",
        input_drvs.iter().map(|(at, path, _)| (*at, path)),
    )?;
    p.lit(",")?;
    let input_srcs = p.list(Parser::store_path)?;
    sorted(
        "input source",
        input_srcs.iter().map(|(at, path)| (*at, path)),
    )?;
    p.lit(",")?;
    let (_, system) = p.string()?;
    p.lit(",")?;
    let (_, builder) = p.string()?;
    p.lit(",")?;
    let args = p.list(|p| Ok(p.string()?.1))?;
    p.lit(",")?;
    let env = p.list(|p| {
        p.lit("(")?;
        let (at, k) = p.string()?;
        p.lit(",")?;
        let (_, v) = p.string()?;
        p.lit(")")?;
        Ok((at, k, v))
    })?;
    sorted(
        "environment variable",
        env.iter().map(|(at, k, _)| (*at, k)),
    )?;
    p.lit(")")?;
    if p.pos != text.len() {
        return Err(DerivationError::TrailingText { offset: p.pos });
    }
    Ok(Derivation {
        outputs: outputs
            .into_iter()
            .map(|(_, n, o)| (n, o))
            .collect::<BTreeMap<_, _>>(),
        input_drvs: input_drvs.into_iter().map(|(_, p, o)| (p, o)).collect(),
        input_srcs: input_srcs.into_iter().map(|(_, p)| p).collect(),
        system,
        builder,
        args,
        env: env.into_iter().map(|(_, k, v)| (k, v)).collect(),
    })
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// Written by Nix 2.8 (`nix-instantiate` with the logical store at `/rocmx/store`).
    pub(crate) const NIX_CA: &str = r#"Derive([("dev","","r:sha256",""),("out","","r:sha256","")],[("/rocmx/store/0kc0ghh0z5xkyadhz1fl5x2qqnbl0nsx-flat.drv",["out"]),("/rocmx/store/k9qha5ky7g6b2vsn7ggz8j6fj3q3xhj4-fod.drv",["out"])],["/rocmx/store/x3lq4ksyzpc9bla2r5qfrsbnpdbrba90-src.sh"],"x86_64-linux","/bin/sh",["-c","echo \"q\" \\ \n\r\t done","/rocmx/store/x3lq4ksyzpc9bla2r5qfrsbnpdbrba90-src.sh"],[("builder","/bin/sh"),("deps","/rocmx/store/2xj7ajbylg030gib4bnlg8kmc759c4w6-fod /rocmx/store/2xj7ajbylg030gib4bnlg8kmc759c4w6-fod /rocmx/store/40kci91dz4fp2li427p16a0jzfd1hrra-flat"),("dev","/02qcpld1y6xhs5gz9bchpxaw0xdhmsp5dv88lh25r2ss44kh8dxz"),("name","ca"),("out","/1rz4g4znpzjwh1xymhjpm42vipw92pr73vdgl6xs1hycac8kf2n9"),("outputHashAlgo","sha256"),("outputHashMode","recursive"),("outputs","out dev"),("system","x86_64-linux"),("weird","ü 日本 $ {} $")])"#;
    pub(crate) const NIX_FOD: &str = r#"Derive([("out","/rocmx/store/2xj7ajbylg030gib4bnlg8kmc759c4w6-fod","r:sha256","e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")],[],[],"x86_64-linux","/bin/sh",["-c","echo > $out"],[("builder","/bin/sh"),("name","fod"),("out","/rocmx/store/2xj7ajbylg030gib4bnlg8kmc759c4w6-fod"),("outputHash","0mdqa9w1p6cmli6976v4wi0sw9r4p5prkj7lzfd1877wk11c9c73"),("outputHashAlgo","sha256"),("outputHashMode","recursive"),("system","x86_64-linux")])"#;
    pub(crate) const NIX_FLAT: &str = r#"Derive([("out","/rocmx/store/40kci91dz4fp2li427p16a0jzfd1hrra-flat","sha1","da39a3ee5e6b4b0d3255bfef95601890afd80709")],[],[],"x86_64-linux","/bin/sh",[],[("builder","/bin/sh"),("name","flat"),("out","/rocmx/store/40kci91dz4fp2li427p16a0jzfd1hrra-flat"),("outputHash","sha1-2jmj7l5rSw0yVb/vlWAYkK/YBwk="),("system","x86_64-linux")])"#;

    #[test]
    fn nix_written_derivations_round_trip() {
        for text in [NIX_CA, NIX_FOD, NIX_FLAT] {
            let d = parse(text).expect("parse");
            assert_eq!(print(&d), text);
        }
        let ca = parse(NIX_CA).expect("parse");
        assert_eq!(
            ca.outputs["dev"],
            DerivationOutput::Floating {
                method: IngestionMethod::Nar,
                algo: HashAlgo::Sha256
            }
        );
        assert_eq!(ca.args[1], "echo \"q\" \\ \n\r\t done");
        assert_eq!(ca.input_drvs.len(), 2);
        assert_eq!(ca.env["weird"], "ü 日本 $ {} $");
        let flat = parse(NIX_FLAT).expect("parse");
        match &flat.outputs["out"] {
            DerivationOutput::Fixed { method, hash, path } => {
                assert_eq!(*method, IngestionMethod::Flat);
                assert_eq!(hash.to_sri(), "sha1-2jmj7l5rSw0yVb/vlWAYkK/YBwk=");
                assert_eq!(path.name(), "flat");
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn prints_literal_vector() {
        let mut d = Derivation {
            system: "x86_64-linux".into(),
            builder: "/bin/sh".into(),
            args: vec!["-c".into(), "a\"b\\c\nd\re\tf".into()],
            ..Derivation::default()
        };
        d.outputs.insert(
            "out".into(),
            DerivationOutput::Floating {
                method: IngestionMethod::Nar,
                algo: HashAlgo::Blake3,
            },
        );
        d.env.insert("name".into(), "x".into());
        let text = r#"Derive([("out","","r:blake3","")],[],[],"x86_64-linux","/bin/sh",["-c","a\"b\\c\nd\re\tf"],[("name","x")])"#;
        assert_eq!(print(&d), text);
        assert_eq!(parse(text), Ok(d));
    }

    #[test]
    fn rejects_non_canonical_text() {
        use DerivationError as E;
        let base = NIX_FOD;
        type Check = fn(&E) -> bool;
        let cases: Vec<(String, Check)> = vec![
            (base.replacen("Derive(", "Derive (", 1), |e| {
                matches!(e, E::Expected { offset: 0, .. })
            }),
            (format!("{base}\n"), |e| matches!(e, E::TrailingText { .. })),
            (base[..base.len() - 1].to_string(), |e| {
                matches!(e, E::Expected { expected: ")", .. })
            }),
            (base.replacen("echo > $out", "echo \\x", 1), |e| {
                matches!(e, E::BadString { .. })
            }),
            (base.replacen("echo > $out", "a\nb", 1), |e| {
                matches!(e, E::BadString { .. })
            }),
            (base.replacen("e3b0c442", "E3B0C442", 1), |e| {
                matches!(e, E::Hash { .. })
            }),
            (
                base.replacen(
                    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\")],",
                    "0mdqa9w1p6cmli6976v4wi0sw9r4p5prkj7lzfd1877wk11c9c73\")],",
                    1,
                ),
                |e| matches!(e, E::Hash { .. }),
            ),
            (base.replacen("r:sha256", "r:sha999", 1), |e| {
                matches!(e, E::BadHashAlgo { .. })
            }),
            (base.replacen("r:sha256", "", 1), |e| {
                matches!(e, E::UnsupportedOutput { .. })
            }),
            (
                base.replacen("(\"out\",\"/rocmx", "(\"o u t\",\"/rocmx", 1),
                |e| matches!(e, E::BadOutputName { .. }),
            ),
            (
                base.replacen("/rocmx/store/2xj7", "/nix/store/2xj7", 1),
                |e| matches!(e, E::StorePath { offset: 15, .. }),
            ),
            (
                base.replacen(
                    "(\"builder\",\"/bin/sh\"),(\"name\",\"fod\")",
                    "(\"name\",\"fod\"),(\"builder\",\"/bin/sh\")",
                    1,
                ),
                |e| {
                    matches!(
                        e,
                        E::Unsorted {
                            what: "environment variable",
                            ..
                        }
                    )
                },
            ),
            (
                base.replacen(
                    "(\"builder\",\"/bin/sh\"),",
                    "(\"builder\",\"/bin/sh\"),(\"builder\",\"x\"),",
                    1,
                ),
                |e| {
                    matches!(
                        e,
                        E::Duplicate {
                            what: "environment variable",
                            ..
                        }
                    )
                },
            ),
            (
                NIX_CA.replacen("[\"out\"]),", "[\"out\",\"out\"]),", 1),
                |e| {
                    matches!(
                        e,
                        E::Duplicate {
                            what: "output name",
                            ..
                        }
                    )
                },
            ),
            (
                NIX_CA.replacen(
                    "(\"dev\",\"\",\"r:sha256\",\"\"),(\"out\",\"\",\"r:sha256\",\"\")",
                    "(\"out\",\"\",\"r:sha256\",\"\"),(\"dev\",\"\",\"r:sha256\",\"\")",
                    1,
                ),
                |e| matches!(e, E::Unsorted { what: "output", .. }),
            ),
            (String::new(), |e| {
                matches!(e, E::Expected { offset: 0, .. })
            }),
            ("Derive([(\"".to_string(), |e| {
                matches!(e, E::Expected { .. })
            }),
            ("Derive([(\"out\\".to_string(), |e| {
                matches!(e, E::BadString { .. })
            }),
        ];
        for (text, ok) in cases {
            match parse(&text) {
                Ok(_) => panic!("accepted {text:?}"),
                Err(e) => assert!(ok(&e), "wrong error {e:?} for {text:?}"),
            }
        }
    }

    #[test]
    fn string_errors_name_the_offending_byte() {
        use DerivationError as E;
        // `Derive([("` is 10 bytes: the string's text starts at offset 10.
        let cases: [(&str, E); 5] = [
            (
                "Derive([(\"out",
                E::Expected {
                    offset: 13,
                    expected: "\"",
                },
            ),
            ("Derive([(\"ou\\", E::BadString { offset: 12 }),
            ("Derive([(\"ou\\q\"", E::BadString { offset: 12 }),
            ("Derive([(\"o\tut\"", E::BadString { offset: 11 }),
            ("Derive([(\"ou\0t\"", E::NulByte { offset: 12 }),
        ];
        for (text, want) in cases {
            assert_eq!(parse(text), Err(want), "for {text:?}");
        }
        // Escapes between long plain runs keep every byte.
        let (_, s) = Parser {
            b: br#""abc\"def\\ghi\njkl""#,
            pos: 0,
        }
        .string()
        .unwrap();
        assert_eq!(s, "abc\"def\\ghi\njkl");
    }

    #[test]
    fn every_prefix_is_rejected_without_panic() {
        for end in 0..NIX_CA.len() {
            if let Some(prefix) = NIX_CA.get(..end) {
                assert!(parse(prefix).is_err());
            }
        }
    }

    /// Has Nix 2.8 write derivations (logical store `/rocmx/store`, physical root in a
    /// temporary directory) and checks that each parses and prints back to the same bytes,
    /// and that `to_json` equals `nix show-derivation`.
    #[test]
    fn nix_instantiate_oracle() {
        use std::process::Command;
        let Ok(tmp) = tempfile::tempdir() else { return };
        let expr = tmp.path().join("d.nix");
        let nix = r#"
          let
            fod = derivation { name = "fod"; system = "x86_64-linux"; builder = "/bin/sh";
              args = ["-c" "echo > $out"]; outputHashMode = "recursive";
              outputHashAlgo = "sha256"; outputHash = "sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="; };
            flat = derivation { name = "flat"; system = "x86_64-linux"; builder = "/bin/sh";
              outputHash = "sha512-z4PhNX7vuL3xVChQ1m2AB9Yg5AULVxXcg/SpIdNs6c5H0NE8XYXysP+DGNKHfuwvY7kxvUdBeoGlODJ6+SfaPg=="; };
            src = builtins.toFile "src.sh" "echo \"hi\"\n\ttab\\";
          in derivation {
            name = "ca"; system = "x86_64-linux"; builder = "/bin/sh";
            args = [ "-c" "echo \"q\" \\ \n\r\t done" src ];
            __contentAddressed = true; outputHashMode = "recursive"; outputHashAlgo = "sha256";
            outputs = [ "out" "dev" "bin" ];
            deps = [ fod fod.out flat ];
            weird = "ü 日本 \$ {} $ \" '' ";
          }
        "#;
        if std::fs::write(&expr, nix).is_err() {
            return;
        }
        let store = format!(
            "local?root={}&store=/rocmx/store",
            tmp.path().join("root").display()
        );
        let Ok(out) = Command::new("nix-instantiate")
            .args([
                "--extra-experimental-features",
                "ca-derivations",
                "--store",
                &store,
            ])
            .arg(&expr)
            .output()
        else {
            println!("nix-instantiate not on PATH: skipping the Nix derivation oracle");
            return;
        };
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let top = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let phys = tmp.path().join("root/nix/store");
        let mut seen = 0;
        for entry in std::fs::read_dir(&phys).expect("physical store") {
            let path = entry.expect("entry").path();
            if path.extension().and_then(|e| e.to_str()) != Some("drv") {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("read drv");
            let d = parse(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert_eq!(print(&d), text);
            seen += 1;
            let Some(base) = path.file_name().and_then(|n| n.to_str()) else {
                continue;
            };
            let logical = format!("/rocmx/store/{base}");
            let shown = Command::new("nix")
                .args([
                    "--extra-experimental-features",
                    "nix-command ca-derivations",
                ])
                .args(["show-derivation", "--store", &store, &logical])
                .output()
                .expect("nix show-derivation");
            assert!(
                shown.status.success(),
                "{}",
                String::from_utf8_lossy(&shown.stderr)
            );
            let json: serde_json::Value = serde_json::from_slice(&shown.stdout).expect("json");
            assert_eq!(json[&logical], d.to_json(), "{logical}");
        }
        assert_eq!(seen, 3, "expected three derivations (top-level: {top})");
    }

    #[test]
    fn mutated_text_never_panics_and_accepted_text_is_canonical() {
        let mut state = 0x1234_5678_9abc_def0u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let alphabet = ['"', '\\', ',', '(', ')', '[', ']', 'n', 'a', 'é', '\n'];
        for _ in 0..3000 {
            let mut chars: Vec<char> = NIX_CA.chars().collect();
            for _ in 0..1 + next() % 3 {
                let at = (next() % chars.len() as u64) as usize;
                match next() % 3 {
                    0 => chars[at] = alphabet[(next() % alphabet.len() as u64) as usize],
                    1 => {
                        chars.remove(at);
                    }
                    _ => chars.insert(at, alphabet[(next() % alphabet.len() as u64) as usize]),
                }
            }
            let text: String = chars.into_iter().collect();
            if let Ok(d) = parse(&text) {
                assert_eq!(print(&d), text);
            }
        }
    }

    /// The escapes, literally, around and between multi-byte characters.
    #[test]
    fn string_literals_escape_exactly_five_characters() {
        let mut out = String::new();
        super::string(&mut out, "a\"b\\c\nd\re\tf é\u{1F600}\"");
        assert_eq!(out, "\"a\\\"b\\\\c\\nd\\re\\tf é\u{1F600}\\\"\"");
        out.clear();
        super::string(&mut out, "");
        assert_eq!(out, "\"\"");
    }

    /// Short strings (table scan) and long ones (vectorised scan) escape the
    /// same characters wherever they stand.
    #[test]
    fn both_scans_find_every_escaped_character() {
        let reference = |v: &str| {
            let mut r = String::from("\"");
            for c in v.chars() {
                match c {
                    '"' => r.push_str("\\\""),
                    '\\' => r.push_str("\\\\"),
                    '\n' => r.push_str("\\n"),
                    '\r' => r.push_str("\\r"),
                    '\t' => r.push_str("\\t"),
                    c => r.push(c),
                }
            }
            r.push('"');
            r
        };
        for len in [1, 2, 31, 32, 33, 95, 96, 97, 150] {
            for at in [0, len / 2, len - 1] {
                for c in [
                    '"', '\\', '\n', '\r', '\t', 'x', 'é', '\u{1}', '\u{1f}', ' ', '#', ']',
                    '\u{7f}',
                ] {
                    let mut v: String = "a".repeat(len - 1);
                    v.insert(at.min(v.len()), c);
                    let mut out = String::new();
                    super::string(&mut out, &v);
                    assert_eq!(out, reference(&v), "{len} {at} {c:?}");
                }
            }
        }
    }
}
