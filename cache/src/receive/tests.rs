//! The receive logic on two stores: a push, tampering, untrusted records, limits.

use std::collections::BTreeSet;

use rocmx_store::{nar, StorePath};

use super::*;
use crate::keys::SecretKey;

struct Fx {
    _t: tempfile::TempDir,
    a: LocalStore,
    b: LocalStore,
    key: SecretKey,
    rx: Receiver,
}

fn fx(max: u64) -> Fx {
    let t = tempfile::tempdir().unwrap();
    let a = LocalStore::open(&t.path().join("a")).unwrap();
    let b = LocalStore::open(&t.path().join("b")).unwrap();
    let key = SecretKey::generate("k-1").unwrap();
    let trusted = TrustedKeys::parse(&key.public().to_string()).unwrap();
    let rx = Receiver::new(&b, trusted, max).unwrap();
    Fx {
        _t: t,
        a,
        b,
        key,
        rx,
    }
}

impl Fx {
    /// `dep` and `top` (which refers to `dep`) in store a.
    fn closure(&self) -> (StorePath, StorePath) {
        let dep = self.a.add_text("dep", b"dep", &BTreeSet::new()).unwrap();
        let refs: BTreeSet<StorePath> = [dep.clone()].into_iter().collect();
        let text = format!("uses {}", dep.to_absolute());
        let top = self.a.add_text("top", text.as_bytes(), &refs).unwrap();
        (dep, top)
    }

    /// The compressed NAR of `p` and its narinfo, signed by `key`.
    fn upload(&self, p: &StorePath, key: &SecretKey) -> (String, Vec<u8>, NarInfo) {
        let mut nar = Vec::new();
        nar::dump_path(&self.a.real_path(p), &mut nar).unwrap();
        let url = format!("nar/{}.nar.zst", p.hash_part());
        let info = self.a.path_info(p).unwrap().unwrap();
        let mut ni = NarInfo::of_path(info, url.clone(), Compression::Zstd);
        ni.sign(key);
        (url, zstd::encode_all(&nar[..], 1).unwrap(), ni)
    }

    fn put(&self, path: &str, body: &[u8]) -> Result<String, Refused> {
        self.rx
            .receive(&self.b, path, Some(body.len() as u64), &mut &body[..])
    }

    fn push(&self, p: &StorePath, key: &SecretKey) -> Result<String, Refused> {
        let (url, file, ni) = self.upload(p, key);
        self.put(&format!("/{url}"), &file)?;
        self.put(
            &format!("/{}.narinfo", p.hash_part()),
            ni.to_text().as_bytes(),
        )
    }

    fn staged(&self) -> Vec<String> {
        fs::read_dir(self.rx.staging_dir())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect()
    }
}

#[test]
fn a_closure_pushed_references_first_is_imported() {
    let f = fx(1 << 30);
    let (dep, top) = f.closure();
    let e = f.push(&top, &f.key).unwrap_err();
    assert_eq!(e.status, 409, "{e}");
    assert!(e.why.contains("push references first"), "{e}");
    assert!(f.staged().is_empty(), "{:?}", f.staged());
    assert!(f.push(&dep, &f.key).unwrap().starts_with("imported"));
    assert!(f.push(&top, &f.key).unwrap().starts_with("imported"));
    let info = f.b.path_info(&top).unwrap().unwrap();
    assert_eq!(info.references.len(), 1);
    assert_eq!(info.signatures.len(), 1);
    assert!(f.staged().is_empty(), "{:?}", f.staged());
    assert_eq!(*f.rx.used(), 0);
    // Again: nothing to do.
    assert!(f.push(&top, &f.key).unwrap().contains("valid already"));

    let h = "ab".repeat(32);
    let mut r = Realisation {
        drv_hash: h.clone(),
        output: "out".into(),
        out_path: top.clone(),
        signatures: Vec::new(),
    };
    r.sign(&f.key);
    let rel = format!("/realisations/{h}!out.json");
    f.put(&rel, r.to_text().as_bytes()).unwrap();
    assert_eq!(f.b.query_realisation(&h, "out").unwrap(), Some(top));
}

#[test]
fn tampered_or_untrusted_uploads_register_nothing() {
    let f = fx(1 << 30);
    let (dep, top) = f.closure();
    // One byte of the NAR flipped.
    let (url, _, ni) = f.upload(&dep, &f.key);
    let mut nar = Vec::new();
    nar::dump_path(&f.a.real_path(&dep), &mut nar).unwrap();
    let at = nar.windows(3).position(|w| w == b"dep").unwrap();
    nar[at] = b'x';
    f.put(&format!("/{url}"), &zstd::encode_all(&nar[..], 1).unwrap())
        .unwrap();
    let e = f
        .put(
            &format!("/{}.narinfo", dep.hash_part()),
            ni.to_text().as_bytes(),
        )
        .unwrap_err();
    assert_eq!(e.status, 400, "{e}");
    assert!(
        e.why.contains("refusing") && e.why.contains("hashes to"),
        "{e}"
    );
    assert!(!f.b.is_valid(&dep).unwrap());
    assert!(f.staged().is_empty(), "{:?}", f.staged());

    // Signed by an impostor with the trusted key's name; unsigned.
    let other = SecretKey::generate("k-1").unwrap();
    let e = f.push(&dep, &other).unwrap_err();
    assert_eq!(e.status, 403, "{e}");
    assert!(e.why.contains("signatures are by k-1"), "{e}");
    let (url, file, mut ni) = f.upload(&dep, &f.key);
    ni.signatures.clear();
    f.put(&format!("/{url}"), &file).unwrap();
    let e = f
        .put(
            &format!("/{}.narinfo", dep.hash_part()),
            ni.to_text().as_bytes(),
        )
        .unwrap_err();
    assert!(e.status == 403 && e.why.contains("no signature"), "{e}");
    assert!(!f.b.is_valid(&dep).unwrap());
    assert!(f.staged().is_empty(), "{:?}", f.staged());

    // A narinfo whose NAR never came.
    let (_, _, ni) = f.upload(&dep, &f.key);
    let e = f
        .put(
            &format!("/{}.narinfo", dep.hash_part()),
            ni.to_text().as_bytes(),
        )
        .unwrap_err();
    assert!(e.status == 409 && e.why.contains("was not uploaded"), "{e}");
    // Filed under another path's name.
    let e = f
        .put(
            &format!("/{}.narinfo", top.hash_part()),
            ni.to_text().as_bytes(),
        )
        .unwrap_err();
    assert!(e.status == 400 && e.why.contains("describes"), "{e}");

    // Realisations: untrusted, of a path the store lacks, malformed.
    let h = "cd".repeat(32);
    let rel = format!("/realisations/{h}!out.json");
    let mut r = Realisation {
        drv_hash: h.clone(),
        output: "out".into(),
        out_path: dep.clone(),
        signatures: Vec::new(),
    };
    r.sign(&other);
    let e = f.put(&rel, r.to_text().as_bytes()).unwrap_err();
    assert_eq!(e.status, 403, "{e}");
    r.signatures.clear();
    r.sign(&f.key);
    let e = f.put(&rel, r.to_text().as_bytes()).unwrap_err();
    assert!(
        e.status == 409 && e.why.contains("push the path first"),
        "{e}"
    );
    let e = f.put(&rel, b"{\"id\": 1}").unwrap_err();
    assert_eq!(e.status, 400, "{e}");
    let e = f
        .put(
            &format!("/realisations/{}!out.json", "ef".repeat(32)),
            r.to_text().as_bytes(),
        )
        .unwrap_err();
    assert!(e.status == 400 && e.why.contains("describes"), "{e}");
    assert_eq!(f.b.query_realisation(&h, "out").unwrap(), None);
    assert!(f.b.all_valid().unwrap().is_empty());
}

#[test]
fn bad_targets_and_sizes_are_refused() {
    for bad in [
        "/../etc/passwd",
        "/nar/../db.sqlite",
        "/nar/a/b.nar",
        "/nar/.nar",
        "/nar/x.tar",
        "nar/x.nar",
        "/x.narinfo",
        "/rocmx-cache-info",
        "/realisations/x!out.json",
        "/realisations/../x.json",
        &format!("/realisations/{}!a/b.json", "ab".repeat(32)),
        &format!("/realisations/{}.json", "ab".repeat(32)),
    ] {
        let e = target(bad).unwrap_err();
        assert_eq!(e.status, 400, "{bad}: {e}");
    }
    assert_eq!(
        target("/nar/0abc.nar.zst").unwrap(),
        Target::Nar("0abc.nar.zst".into(), Compression::Zstd)
    );
    let f = fx(10);
    let e = f.put("/nar/big.nar", &[0u8; 11]).unwrap_err();
    assert_eq!(e.status, 413, "{e}");
    // Without a declared length: refused while staging, nothing left.
    let e =
        f.rx.receive(&f.b, "/nar/big.nar", None, &mut &[0u8; 11][..])
            .unwrap_err();
    assert!(
        e.status == 413 && e.why.contains("--max-upload-size"),
        "{e}"
    );
    assert!(f.staged().is_empty(), "{:?}", f.staged());
    assert_eq!(*f.rx.used(), 0);
    f.put("/nar/small.nar", &[0u8; 6]).unwrap();
    // Replaced: both count while the new one arrives, then only the new one.
    f.put("/nar/small.nar", &[0u8; 4]).unwrap();
    assert_eq!(*f.rx.used(), 4);
    let e = f.put("/nar/other.nar", &[0u8; 7]).unwrap_err();
    assert_eq!(e.status, 413, "{e}");
    let big = vec![b'x'; MAX_RECORD as usize + 1];
    let e =
        f.rx.receive(
            &f.b,
            &format!("/{}.narinfo", "0".repeat(32)),
            None,
            &mut &big[..],
        )
        .unwrap_err();
    assert_eq!(e.status, 413, "{e}");
    let dir = f.rx.staging_dir().to_path_buf();
    drop(f);
    assert!(
        !dir.exists(),
        "the staging directory goes with the receiver"
    );
}

#[test]
fn tokens_are_bearer_words() {
    assert!(Token::from_text("short").is_err());
    assert!(Token::from_text("two words but long enough").is_err());
    let t = Token::from_text("  c2VjcmV0LXRva2VuLTEyMzQ1Njc4OQ==\n").unwrap();
    assert!(t.admits(Some("Bearer c2VjcmV0LXRva2VuLTEyMzQ1Njc4OQ==")));
    assert!(t.admits(Some("bearer  c2VjcmV0LXRva2VuLTEyMzQ1Njc4OQ== ")));
    assert!(!t.admits(Some("Bearer c2VjcmV0LXRva2VuLTEyMzQ1Njc4OQ")));
    assert!(!t.admits(Some("Basic c2VjcmV0LXRva2VuLTEyMzQ1Njc4OQ==")));
    assert!(!t.admits(Some("c2VjcmV0LXRva2VuLTEyMzQ1Njc4OQ==")));
    assert!(!t.admits(None));
    assert_eq!(format!("{t:?}"), "Token(…)");
}
