//! Tests of the local store as a whole: adding, queries, roots, GC, delete, verify,
//! concurrency. Every store lives in a temporary directory.

use std::collections::BTreeSet;
use std::fs;
use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::*;
use crate::hash::HashAlgo;
use crate::nar;
use crate::path::IngestionMethod;

fn store() -> (tempfile::TempDir, LocalStore) {
    let tmp = tempfile::tempdir().expect("tmp");
    let s = LocalStore::open(&tmp.path().join("root")).expect("open");
    (tmp, s)
}

/// A small tree: files, an executable, a symlink, an empty directory.
fn tree(dir: &Path) -> PathBuf {
    let t = dir.join("src");
    fs::create_dir_all(t.join("sub/empty")).expect("mkdir");
    fs::write(t.join("a"), "hello").expect("write");
    fs::write(t.join("sub/run"), "#!/bin/sh\n").expect("write");
    fs::set_permissions(t.join("sub/run"), fs::Permissions::from_mode(0o4755)).expect("chmod");
    symlink("../a", t.join("sub/link")).expect("symlink");
    t
}

/// A normalised one-file tree at `dir/name` holding `text`, with its NAR hash and size.
fn scratch(dir: &Path, name: &str, text: &str) -> (PathBuf, Hash, u64) {
    let d = dir.join(name);
    fs::create_dir(&d).expect("mkdir");
    fs::write(d.join("f"), text).expect("write");
    normalise_tree(&d).expect("normalise");
    let (h, n) = nar::hash_path(&d, HashAlgo::Blake3).expect("hash");
    (d, h, n)
}

fn set(paths: &[&StorePath]) -> BTreeSet<StorePath> {
    paths.iter().map(|p| (*p).clone()).collect()
}

#[test]
fn open_creates_the_layout() {
    let (tmp, s) = store();
    let root = tmp.path().join("root");
    assert_eq!(s.root(), root);
    for d in [
        "store",
        "var/rocmx/gcroots/auto",
        "var/rocmx/temproots",
        "var/rocmx/locks",
    ] {
        assert!(root.join(d).is_dir(), "{d}");
    }
    assert!(root.join("var/rocmx/db.sqlite").is_file());
    assert!(LocalStore::default_root().is_absolute());
    // Reopening is fine.
    LocalStore::open(&root).expect("reopen");
}

#[test]
fn the_store_and_builds_directories_spread_their_subdirectories() {
    use rustix::fs::IFlags;
    let (tmp, _s) = store();
    let root = tmp.path().join("root");
    let flags = |d: &Path| {
        rustix::fs::ioctl_getflags(std::fs::File::open(d).expect("open")).expect("flags")
    };
    // Whether this filesystem keeps the flag at all (ext2/3/4 do, tmpfs does not).
    let probe = tmp.path().join("probe");
    std::fs::create_dir(&probe).expect("mkdir");
    let supported = super::fsutil::spread_subdirectories(&probe);
    if supported {
        assert!(flags(&probe).contains(IFlags::TOPDIR));
    }
    for d in ["store", "var/rocmx/builds", "var/rocmx/log"] {
        let set = supported && flags(&root.join(d)).contains(IFlags::TOPDIR);
        // Only the directories whose children are unrelated trees.
        assert_eq!(set, supported && d != "var/rocmx/log", "{d}");
    }
    // Opening again with the flag already set is fine and keeps it.
    LocalStore::open(&root).expect("reopen");
    if supported {
        assert!(flags(&root.join("store")).contains(IFlags::TOPDIR));
    }
}

#[test]
fn add_path_single_file_gives_the_documented_path() {
    let (tmp, s) = store();
    let f = tmp.path().join("hello.txt");
    fs::write(&f, "hello").expect("write");
    let p = s.add_path(&f, "hello.txt").expect("add");
    let (nar_hash, _) = nar::hash_path(&f, HashAlgo::Blake3).expect("hash");
    let expected = StorePath::from_ca(
        "hello.txt",
        &crate::ContentAddress::Source {
            nar_hash,
            references: BTreeSet::new(),
        },
    )
    .expect("path");
    assert_eq!(p, expected);
    assert_eq!(
        p.to_string(),
        "/rocmx/store/4imp6rzb2s7asq3225s7n3291kzjqdrm-hello.txt"
    );
    let info = s.path_info(&p).expect("info").expect("valid");
    assert_eq!(info.nar_size, 120);
    assert_eq!(info.nar_hash, nar_hash);
    assert_eq!(
        info.ca,
        Some(format!("source:blake3:{}", nar_hash.to_nix32()))
    );
    assert_eq!(info.references, BTreeSet::new());
    let m = fs::metadata(s.real_path(&p)).expect("stat");
    assert_eq!((m.mode() & 0o7777, m.mtime()), (0o444, 1));
}

#[test]
fn add_same_tree_twice_is_the_same_path_and_does_not_copy_again() {
    let (tmp, s) = store();
    let src = tree(tmp.path());
    let p = s.add_path(&src, "src").expect("add");
    let real = s.real_path(&p);
    let ino = fs::metadata(&real).expect("stat").ino();
    let m = |rel: &str| fs::symlink_metadata(real.join(rel)).expect("stat");
    assert_eq!(m("sub/run").mode() & 0o7777, 0o555);
    assert_eq!(m("a").mode() & 0o7777, 0o444);
    assert_eq!(m("sub").mode() & 0o7777, 0o555);
    assert_eq!(m("sub/empty").mode() & 0o7777, 0o555);
    assert_eq!(
        fs::read_link(real.join("sub/link")).expect("link"),
        Path::new("../a")
    );
    assert_eq!(
        [
            m("").mtime(),
            m("a").mtime(),
            m("sub").mtime(),
            m("sub/link").mtime()
        ],
        [1, 1, 1, 1]
    );
    // The NAR of the stored copy is the NAR of the source.
    assert_eq!(
        nar::hash_path(&real, HashAlgo::Blake3).expect("hash").0,
        nar::hash_path(&src, HashAlgo::Blake3).expect("hash").0
    );
    let again = s.add_path(&src, "src").expect("again");
    assert_eq!(again, p);
    assert_eq!(
        fs::metadata(&real).expect("stat").ino(),
        ino,
        "not copied again"
    );
    assert_eq!(s.all_valid().expect("all"), vec![p.clone()]);
    // Another name is another path.
    assert_ne!(s.add_path(&src, "other").expect("other"), p);
    // No scratch directory is left.
    let names: Vec<String> = fs::read_dir(s.store_dir())
        .expect("ls")
        .map(|e| e.expect("e").file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().all(|n| !n.starts_with(".tmp-")), "{names:?}");
}

#[test]
fn add_new_path_is_add_path_copied_while_hashed() {
    let (tmp, s) = store();
    let src = tree(tmp.path());
    fs::write(src.join("big"), vec![3u8; 300 * 1024 + 7]).expect("write");
    let leftovers = |s: &LocalStore| {
        fs::read_dir(s.store_dir())
            .expect("ls")
            .filter(|e| {
                let n = e.as_ref().expect("entry").file_name();
                n.to_string_lossy().starts_with(super::fsutil::TMP_PREFIX)
            })
            .count()
    };
    let p = s.add_new_path(&src, "src").expect("add");
    // The same path, registration and normalised content as the hash-first add.
    let (other_tmp, other) = store();
    let q = other.add_path(&src, "src").expect("add");
    assert_eq!(p, q);
    let info = s.path_info(&p).expect("info").expect("valid");
    let (h, n) = nar::hash_path(&s.real_path(&p), HashAlgo::Blake3).expect("hash");
    assert_eq!((info.nar_hash, info.nar_size), (h, n));
    let mut theirs = other.path_info(&q).expect("info").expect("valid");
    theirs.registration_time = info.registration_time;
    assert_eq!(info, theirs);
    let m = fs::symlink_metadata(s.real_path(&p).join("sub/run")).expect("stat");
    assert_eq!((m.mode() & 0o7777, m.mtime()), (0o555, 1));
    assert_eq!(leftovers(&s), 0);
    // Valid already: the speculative copy is discarded, the placed path untouched.
    let ino = fs::metadata(s.real_path(&p)).expect("stat").ino();
    assert_eq!(s.add_new_path(&src, "src").expect("again"), p);
    assert_eq!(fs::metadata(s.real_path(&p)).expect("stat").ino(), ino);
    assert_eq!(leftovers(&s), 0);
    // A single file, and the errors `add_path` gives, with nothing left behind.
    let f = tmp.path().join("hello.txt");
    fs::write(&f, "hello").expect("write");
    assert_eq!(
        s.add_new_path(&f, "hello.txt").expect("file").to_string(),
        "/rocmx/store/4imp6rzb2s7asq3225s7n3291kzjqdrm-hello.txt"
    );
    let sock = tmp.path().join("sock");
    let _l = std::os::unix::net::UnixListener::bind(&sock).expect("bind");
    let e = s.add_new_path(&sock, "sock").expect_err("socket");
    assert!(matches!(e, StoreError::UnsupportedFileType { .. }), "{e}");
    assert!(s.add_new_path(&src, "bad/name").is_err());
    assert!(s
        .add_new_path(&tmp.path().join("missing"), "missing")
        .is_err());
    assert_eq!(leftovers(&s), 0);
    drop(other_tmp);
}

#[test]
fn add_refuses_special_files_and_bad_names() {
    let (tmp, s) = store();
    let dir = tmp.path().join("d");
    fs::create_dir(&dir).expect("mkdir");
    let _l = std::os::unix::net::UnixListener::bind(dir.join("s")).expect("bind");
    let e = s.add_path(&dir, "d").expect_err("socket");
    assert!(
        matches!(e, StoreError::UnsupportedFileType { kind: "socket", .. }),
        "{e}"
    );
    let e = s.add_path(&tree(tmp.path()), ".hidden").expect_err("name");
    assert_eq!(e.to_string(), "store path name \".hidden\" starts with '.'");
    assert_eq!(s.all_valid().expect("all"), vec![]);
}

#[test]
fn text_objects_record_references_closure_and_referrers() {
    let (tmp, s) = store();
    let src = s.add_path(&tree(tmp.path()), "src").expect("src");
    let t1 = s.add_text("one", b"uses src", &set(&[&src])).expect("t1");
    let t2 = s.add_text("two", b"uses one", &set(&[&t1])).expect("t2");
    let expected = StorePath::from_ca(
        "one",
        &crate::ContentAddress::text(b"uses src", set(&[&src])),
    )
    .expect("p");
    assert_eq!(t1, expected);
    assert_eq!(fs::read(s.real_path(&t1)).expect("read"), b"uses src");
    let info = s.path_info(&t1).expect("info").expect("valid");
    assert_eq!(info.references, set(&[&src]));
    assert_eq!(info.nar_size, 120);
    assert_eq!(
        info.ca,
        Some(format!(
            "text:blake3:{}",
            crate::Hash::digest(HashAlgo::Blake3, b"uses src").to_nix32()
        ))
    );
    assert_eq!(s.references(&t2).expect("refs"), set(&[&t1]));
    assert_eq!(s.referrers(&src).expect("referrers"), set(&[&t1]));
    assert_eq!(s.referrers(&t2).expect("referrers"), set(&[]));
    assert_eq!(
        s.closure(std::slice::from_ref(&t2)).expect("closure"),
        set(&[&t2, &t1, &src])
    );
    assert_eq!(
        s.closure(std::slice::from_ref(&t1)).expect("closure"),
        set(&[&t1, &src])
    );
    // References must be valid.
    let ghost: StorePath = "/rocmx/store/00bgd045z0d4icpbc2yyz4gx48ak44la-ghost"
        .parse()
        .expect("p");
    let e = s
        .add_text("three", b"x", &set(&[&ghost]))
        .expect_err("invalid ref");
    assert!(
        e.to_string()
            .ends_with(&format!("its reference {ghost} is not valid; add it first")),
        "{e}"
    );
    assert!(matches!(
        s.closure(std::slice::from_ref(&ghost)),
        Err(StoreError::NotValid { .. })
    ));
    assert_eq!(s.path_info(&ghost).expect("info"), None);
}

/// The closure of several paths at once: shared parts once, starting paths that are
/// in another's closure, the same path twice, none at all, a deep chain.
#[test]
fn closure_of_several_paths_is_the_union_of_their_closures() {
    let (_tmp, s) = store();
    let a = s.add_text("a", b"a", &set(&[])).expect("a");
    let b = s.add_text("b", b"b uses a", &set(&[&a])).expect("b");
    let c = s.add_text("c", b"c uses a b", &set(&[&a, &b])).expect("c");
    let d = s.add_text("d", b"d", &set(&[])).expect("d");
    let mut chain = vec![d.clone()];
    for i in 0..60 {
        let prev = chain.last().expect("one").clone();
        let next = s
            .add_text(&format!("l{i}"), format!("l{i}").as_bytes(), &set(&[&prev]))
            .expect("link");
        chain.push(next);
    }
    assert_eq!(
        s.closure(&[c.clone(), d.clone(), a.clone(), c.clone()])
            .expect("closure"),
        set(&[&a, &b, &c, &d])
    );
    assert_eq!(s.closure(&[]).expect("closure"), set(&[]));
    let top = chain.last().expect("top").clone();
    let all: BTreeSet<StorePath> = chain.iter().cloned().collect();
    assert_eq!(s.closure(std::slice::from_ref(&top)).expect("closure"), all);
    let mut with_b = all.clone();
    with_b.extend([a.clone(), b.clone()]);
    assert_eq!(s.closure(&[b, top]).expect("closure"), with_b);
}

#[test]
fn texts_added_together_are_the_texts_added_one_by_one() {
    let (tmp, s) = store();
    let (_tmp2, one_by_one) = store();
    let src = s.add_path(&tree(tmp.path()), "src").expect("src");
    one_by_one
        .add_path(&tree(_tmp2.path()), "src")
        .expect("src");
    let h = crate::Hash::digest(HashAlgo::Sha256, b"x");
    let out = crate::DerivationOutput::fixed("f", IngestionMethod::Flat, h).expect("fixed");
    let mut drv = crate::Derivation::default();
    drv.outputs.insert("out".into(), out.clone());
    let drv_text = drv.to_aterm();
    let t0 = StorePath::from_ca(
        "t0",
        &crate::ContentAddress::text(b"uses src", set(&[&src])),
    )
    .expect("t0");
    // 20 texts (more than a syncfs is worth), each referring to the one before, one to a
    // valid path, a derivation, and one text twice.
    let mut texts: Vec<(String, Vec<u8>, BTreeSet<StorePath>)> =
        vec![("t0".into(), b"uses src".to_vec(), set(&[&src]))];
    let mut prev = t0.clone();
    for i in 1..20 {
        let text = format!("text {i} uses {prev}").into_bytes();
        let refs = set(&[&prev]);
        prev = StorePath::from_ca(
            &format!("t{i}"),
            &crate::ContentAddress::text(&text, refs.clone()),
        )
        .expect("p");
        texts.push((format!("t{i}"), text, refs));
    }
    texts.push(("f.drv".into(), drv_text.into_bytes(), BTreeSet::new()));
    texts.push(texts[3].clone());
    let items: Vec<(&str, &[u8], &BTreeSet<StorePath>)> = texts
        .iter()
        .map(|(n, t, r)| (n.as_str(), t.as_slice(), r))
        .collect();
    let got = s.add_texts(&items).expect("add_texts");
    let want: Vec<StorePath> = texts
        .iter()
        .map(|(n, t, r)| one_by_one.add_text(n, t, r).expect("add_text"))
        .collect();
    assert_eq!(got, want);
    for (p, (_, t, r)) in got.iter().zip(&texts) {
        assert_eq!(fs::read(s.real_path(p)).expect("read"), *t);
        let mode = fs::metadata(s.real_path(p)).expect("stat").mode() & 0o7777;
        assert_eq!(mode, 0o444);
        let info = s.path_info(p).expect("info").expect("valid");
        // Everything but the registration time, which may fall in another second.
        let mut other = one_by_one.path_info(p).expect("info").expect("valid");
        other.registration_time = info.registration_time;
        assert_eq!(info, other);
        assert_eq!(info.references, *r);
    }
    let drv_path = &got[20];
    assert_eq!(
        s.derivation_outputs(drv_path).expect("outputs").get("out"),
        out.path()
    );
    let names: Vec<String> = fs::read_dir(s.store_dir())
        .expect("ls")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().all(|n| !n.starts_with(".tmp-")), "{names:?}");
    // Again: nothing to do. A reference that is neither valid nor earlier is refused,
    // and then nothing of the batch is added.
    assert_eq!(s.add_texts(&items).expect("again"), got);
    let ghost: StorePath = "/rocmx/store/00bgd045z0d4icpbc2yyz4gx48ak44la-ghost"
        .parse()
        .expect("p");
    let bad = set(&[&ghost]);
    let new = set(&[]);
    let e = s
        .add_texts(&[("fine", b"fine", &new), ("bad", b"x", &bad)])
        .expect_err("invalid ref");
    assert!(matches!(e, StoreError::InvalidReference { .. }), "{e}");
    let fine =
        StorePath::from_ca("fine", &crate::ContentAddress::text(b"fine", new.clone())).expect("p");
    assert!(!s.is_valid(&fine).expect("valid?"));
    // A later text may not be referred to by an earlier one.
    let later = set(&[&fine]);
    let e = s
        .add_texts(&[("early", b"early", &later), ("fine", b"fine", &new)])
        .expect_err("forward ref");
    assert!(matches!(e, StoreError::InvalidReference { .. }), "{e}");
    s.verify(true, false).expect("verify");
    assert!(s.verify(true, false).expect("verify").problems.is_empty());
}

#[test]
fn derivation_texts_record_fixed_outputs() {
    let (_tmp, s) = store();
    let h = crate::Hash::digest(HashAlgo::Sha256, b"x");
    let out = crate::DerivationOutput::fixed("f", IngestionMethod::Flat, h).expect("fixed");
    let mut drv = crate::Derivation::default();
    drv.outputs.insert("out".into(), out.clone());
    let text = drv.to_aterm();
    let p = s
        .add_text("f.drv", text.as_bytes(), &BTreeSet::new())
        .expect("drv");
    assert_eq!(p, drv.store_path("f").expect("path"));
    let outs = s.derivation_outputs(&p).expect("outputs");
    assert_eq!(outs.get("out"), out.path());
}

#[test]
fn to_store_path_accepts_logical_physical_and_links() {
    let (tmp, s) = store();
    let p = s.add_text("t", b"x", &BTreeSet::new()).expect("t");
    let logical = PathBuf::from(p.to_string());
    assert_eq!(
        s.to_store_path(&logical).expect("logical"),
        (p.clone(), None)
    );
    assert_eq!(
        s.to_store_path(&logical.join("bin/sh")).expect("sub"),
        (p.clone(), Some(PathBuf::from("bin/sh")))
    );
    assert_eq!(
        s.to_store_path(&s.real_path(&p)).expect("physical"),
        (p.clone(), None)
    );
    let link = tmp.path().join("result");
    s.add_root(&link, &p).expect("root");
    assert_eq!(fs::read_link(&link).expect("link"), s.real_path(&p));
    assert_eq!(s.to_store_path(&link).expect("via link"), (p.clone(), None));
    let e = s
        .to_store_path(Path::new("/etc/passwd"))
        .expect_err("outside");
    assert!(matches!(e, StoreError::NotInStore { .. }), "{e}");
    assert!(s.to_store_path(&logical.join("../x")).is_err());
}

#[test]
fn roots_keep_paths_alive_through_gc() {
    let (tmp, s) = store();
    let src = s.add_path(&tree(tmp.path()), "src").expect("src");
    let kept = s.add_text("kept", b"k", &set(&[&src])).expect("kept");
    let dead = s.add_text("dead", b"d", &set(&[&src])).expect("dead");
    let direct = s
        .add_text("direct", b"r", &BTreeSet::new())
        .expect("direct");
    let orphan = s
        .add_text("orphan", b"o", &BTreeSet::new())
        .expect("orphan");
    let link = tmp.path().join("result");
    s.add_root(&link, &kept).expect("indirect root");
    let gcroot = s.state_dir().join("gcroots/mine");
    symlink(direct.to_string(), &gcroot).expect("direct root");
    let roots = s.roots().expect("roots");
    let canon_link = fs::canonicalize(tmp.path()).expect("canon").join("result");
    assert_eq!(roots.get(&canon_link), Some(&kept));
    assert_eq!(roots.get(&gcroot), Some(&direct));
    assert_eq!(roots.len(), 2);

    // Dry run: reports, deletes nothing.
    let dry = s
        .gc(&GcOptions {
            dry_run: true,
            max_freed: None,
        })
        .expect("dry");
    let names: BTreeSet<StorePath> = dry.deleted.iter().map(|(p, _)| p.clone()).collect();
    assert_eq!(names, set(&[&dead, &orphan]));
    assert!(dry.freed > 0);
    assert_eq!(s.all_valid().expect("all").len(), 5);

    // max_freed stops after the first path.
    let one = s
        .gc(&GcOptions {
            dry_run: false,
            max_freed: Some(1),
        })
        .expect("gc");
    assert_eq!(one.deleted.len(), 1);
    let rest = s.gc(&GcOptions::default()).expect("gc");
    assert_eq!(rest.deleted.len(), 1);
    for p in [&dead, &orphan] {
        assert!(!s.is_valid(p).expect("valid"));
        assert!(!s.real_path(p).exists());
    }
    for p in [&src, &kept, &direct] {
        assert!(s.is_valid(p).expect("valid"));
        assert!(s.real_path(p).exists());
    }
    // Removing the user's link makes the indirect root dangling: gc cleans it.
    fs::remove_file(&link).expect("rm result");
    fs::remove_file(&gcroot).expect("rm root");
    let all = s.gc(&GcOptions::default()).expect("gc");
    let order: Vec<StorePath> = all.deleted.iter().map(|(p, _)| p.clone()).collect();
    assert_eq!(order.len(), 3);
    let pos = |p: &StorePath| order.iter().position(|q| q == p).expect("deleted");
    assert!(pos(&kept) < pos(&src), "referrers go first: {order:?}");
    assert_eq!(
        fs::read_dir(s.state_dir().join("gcroots/auto"))
            .expect("ls")
            .count(),
        0
    );
    assert_eq!(s.all_valid().expect("all"), vec![]);
}

#[test]
fn temp_roots_of_another_handle_protect_paths() {
    let (tmp, s) = store();
    let other = LocalStore::open(s.root()).expect("second handle");
    let p = other.add_text("busy", b"b", &BTreeSet::new()).expect("add");
    let report = s.gc(&GcOptions::default()).expect("gc");
    assert_eq!(report.deleted, vec![]);
    let e = s.delete(std::slice::from_ref(&p)).expect_err("in use");
    assert!(matches!(e, StoreError::InUse { .. }), "{e}");
    drop(other);
    assert_eq!(s.gc(&GcOptions::default()).expect("gc").deleted.len(), 1);
    drop(tmp);
}

#[test]
fn a_held_gc_lock_keeps_collections_out_and_its_roots_protect_paths() {
    let (tmp, s) = store();
    let p = s.add_text("planned", b"p", &BTreeSet::new()).expect("add");
    let planner = LocalStore::open(s.root()).expect("second handle");
    let collector = LocalStore::open(s.root()).expect("third handle");
    let gc_lock = s.state_dir().join(lock::GC_LOCK);
    let held = planner.hold_gc_shared().expect("hold");
    planner.add_temp_root_held(&p, &held).expect("root");
    // The adder's own root goes with its handle: only the planner's protects `p`.
    drop(s);
    assert!(
        lock::FileLock::try_acquire(&gc_lock)
            .expect("try")
            .is_none(),
        "a collection could start while the lock is held"
    );
    drop(held);
    drop(
        lock::FileLock::try_acquire(&gc_lock)
            .expect("try")
            .expect("free again"),
    );
    assert_eq!(
        collector.gc(&GcOptions::default()).expect("gc").deleted,
        vec![]
    );

    // A lock held on another store is not this one's: the root takes this store's.
    let (_other_tmp, other) = store();
    let foreign = other.hold_gc_shared().expect("hold other");
    let q = collector
        .add_text("also", b"q", &BTreeSet::new())
        .expect("add q");
    planner.add_temp_root_held(&q, &foreign).expect("root q");
    drop(collector);
    drop(foreign);
    let last = LocalStore::open(planner.root()).expect("fourth handle");
    assert_eq!(last.gc(&GcOptions::default()).expect("gc").deleted, vec![]);
    drop(planner);
    assert_eq!(last.gc(&GcOptions::default()).expect("gc").deleted.len(), 2);
    drop(tmp);
}

#[test]
fn a_checkpoint_empties_the_log_unless_someone_reads_it() {
    let (tmp, s) = store();
    s.add_text("logged", b"l", &BTreeSet::new()).expect("add");
    let wal = s.state_dir().join("db.sqlite-wal");
    let size = || fs::metadata(&wal).map(|m| m.len()).unwrap_or(0);
    assert!(size() > 0, "the write went to the log");
    // Another connection in a read transaction: the checkpoint gives up at once.
    let reader = rusqlite::Connection::open(s.state_dir().join("db.sqlite")).expect("open");
    reader.execute_batch("BEGIN").expect("begin");
    let n: i64 = reader
        .query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))
        .expect("read");
    assert!(n > 0);
    s.checkpoint();
    assert!(size() > 0, "emptied under a reader");
    reader.execute_batch("COMMIT").expect("commit");
    drop(reader);
    s.checkpoint();
    assert_eq!(size(), 0);
    // The store reads and writes on after it.
    let p = s
        .add_text("after", b"a", &BTreeSet::new())
        .expect("add after");
    assert!(s.is_valid(&p).expect("valid"));
    drop(tmp);
}

#[test]
fn delete_refuses_referenced_and_rooted_paths() {
    let (tmp, s) = store();
    let a = s.add_text("a", b"a", &BTreeSet::new()).expect("a");
    let b = s.add_text("b", b"b", &set(&[&a])).expect("b");
    let e = s.delete(std::slice::from_ref(&a)).expect_err("referenced");
    assert_eq!(
        e.to_string(),
        format!("cannot delete {a}: it is referenced by {b}; delete that one too (or first), or let `rocmx store gc` decide")
    );
    let link = tmp.path().join("result");
    s.add_root(&link, &b).expect("root");
    let e = s.delete(std::slice::from_ref(&b)).expect_err("rooted");
    let canon = fs::canonicalize(tmp.path()).expect("canon").join("result");
    assert_eq!(
        e.to_string(),
        format!("cannot delete {b}: it is a GC root through {canon:?}; remove that link first")
    );
    assert!(s.is_valid(&a).expect("a") && s.is_valid(&b).expect("b"));
    fs::remove_file(&link).expect("unlink");
    let freed = s.delete(&[a.clone(), b.clone()]).expect("both at once");
    assert!(freed > 0);
    assert_eq!(s.all_valid().expect("all"), vec![]);
    assert!(!s.real_path(&a).exists());
    let e = s.delete(std::slice::from_ref(&a)).expect_err("gone");
    assert!(matches!(e, StoreError::NotValid { .. }));
}

#[test]
fn verify_finds_each_corruption_and_repair_fixes_the_fixable() {
    let (tmp, s) = store();
    let src = s.add_path(&tree(tmp.path()), "src").expect("src");
    let user = s.add_text("user", b"u", &set(&[&src])).expect("user");
    let flipped = s
        .add_text("flipped", b"original", &BTreeSet::new())
        .expect("flipped");
    let perms = s.add_text("perms", b"p", &BTreeSet::new()).expect("perms");
    let fine = s.add_text("fine", b"f", &BTreeSet::new()).expect("fine");
    assert_eq!(s.verify(true, false).expect("clean").problems, vec![]);

    // Delete content, flip a byte, loosen permissions, leave an unregistered entry and a
    // scratch directory.
    fsutil::remove_tree(&s.real_path(&src)).expect("rm");
    let f = s.real_path(&flipped);
    fsutil::chmod(&f, 0o644).expect("chmod");
    fs::write(&f, b"originaL").expect("flip");
    fsutil::chmod(&f, 0o444).expect("chmod");
    fsutil::set_canonical_times(&f).expect("times");
    fsutil::chmod(&s.real_path(&perms), 0o666).expect("chmod");
    let stray = s.store_dir().join("00bgd045z0d4icpbc2yyz4gx48ak44la-stray");
    fs::create_dir(&stray).expect("stray");
    let leftover = s.store_dir().join(".tmp-1-2-abc");
    fs::create_dir(&leftover).expect("leftover");

    let quick = s.verify(false, false).expect("verify");
    let kinds: Vec<String> = quick.problems.iter().map(|p| p.to_string()).collect();
    assert_eq!(
        kinds,
        vec![
            format!(
                "missing content: {src} is valid but {:?} does not exist",
                s.real_path(&src)
            ),
            format!("broken closure: {user} depends on {src}, which is damaged"),
            format!("leftover scratch directory in store: {leftover:?}"),
            format!("unregistered entry in store: {stray:?} (left by an interrupted add)"),
        ]
    );
    let full = s.verify(true, false).expect("verify");
    let mismatch = full
        .problems
        .iter()
        .find(|p| matches!(p, Problem::HashMismatch { path, .. } if *path == flipped));
    assert!(mismatch.is_some(), "{:?}", full.problems);
    assert!(mismatch
        .expect("m")
        .to_string()
        .starts_with(&format!("hash mismatch: {flipped} has NAR hash blake3-")));
    assert!(full.problems.contains(&Problem::BadMetadata {
        path: perms.clone(),
        file: s.real_path(&perms),
        what: "mode 0666, expected 0444".into()
    }));
    assert_eq!(full.problems.len(), 6);
    assert_eq!(full.remaining_damage().len(), 4);
    assert!(s.is_valid(&src).expect("nothing changed without repair"));

    let repaired = s.verify(true, true).expect("repair");
    assert_eq!(repaired.repaired, {
        let mut v = vec![src.clone(), user.clone(), perms.clone()];
        v.sort();
        v
    });
    assert_eq!(repaired.removed, vec![leftover.clone(), stray.clone()]);
    let left: Vec<&Problem> = repaired.remaining_damage();
    assert_eq!(left.len(), 1, "{left:?}");
    assert!(matches!(left[0], Problem::HashMismatch { .. }));
    assert!(!stray.exists() && !leftover.exists());
    assert!(!s.is_valid(&user).expect("user invalidated") && !s.real_path(&user).exists());

    let after = s.verify(true, false).expect("verify");
    assert_eq!(after.problems.len(), 1, "{:?}", after.problems);
    assert!(s.is_valid(&fine).expect("fine") && s.is_valid(&flipped).expect("reported only"));
}

#[test]
fn an_unregistered_entry_at_the_final_name_is_replaced_by_the_next_add() {
    let (tmp, s) = store();
    let src = tree(tmp.path());
    let expected = {
        let (nar_hash, _) = nar::hash_path(&src, HashAlgo::Blake3).expect("hash");
        StorePath::from_ca(
            "src",
            &crate::ContentAddress::Source {
                nar_hash,
                references: BTreeSet::new(),
            },
        )
        .expect("p")
    };
    // A crash after the rename and before the commit, with partial content.
    let real = s.real_path(&expected);
    fs::create_dir(&real).expect("mkdir");
    fs::write(real.join("a"), "hel").expect("partial");
    fsutil::chmod(&real, 0o555).expect("chmod");
    assert!(!s.is_valid(&expected).expect("valid"));
    assert_eq!(s.add_path(&src, "src").expect("add"), expected);
    assert_eq!(fs::read(real.join("a")).expect("read"), b"hello");
    assert_eq!(s.verify(true, false).expect("verify").problems, vec![]);
}

#[test]
fn add_nar_and_register_built() {
    let (tmp, s) = store();
    let src = tree(tmp.path());
    let mut nar_bytes = Vec::new();
    nar::dump_path(&src, &mut nar_bytes).expect("dump");
    let via_nar = s
        .add_nar("src", NarCa::Source, &nar_bytes[..], &BTreeSet::new(), None)
        .expect("add_nar");
    assert_eq!(via_nar, s.add_path(&src, "src").expect("add_path"));
    let sha = crate::Hash::digest(HashAlgo::Sha256, &nar_bytes);
    let fixed = s
        .add_nar(
            "fixed",
            NarCa::Fixed(IngestionMethod::Nar, HashAlgo::Sha256),
            &nar_bytes[..],
            &BTreeSet::new(),
            None,
        )
        .expect("fixed");
    assert_eq!(
        fixed,
        crate::derivation::fixed_output_path("fixed", IngestionMethod::Nar, sha).expect("p")
    );
    assert_eq!(s.verify(true, false).expect("verify").problems, vec![]);
    let bad = s.add_nar(
        "bad",
        NarCa::Source,
        &nar_bytes[..nar_bytes.len() - 8],
        &BTreeSet::new(),
        None,
    );
    assert!(
        matches!(bad, Err(StoreError::Nar(crate::NarError::Truncated { .. }))),
        "{bad:?}"
    );

    // A build result: normalised scratch tree with a self-reference.
    let scratch = tmp.path().join("build-out");
    fs::create_dir(&scratch).expect("mkdir");
    fs::write(scratch.join("f"), "out").expect("write");
    normalise_tree(&scratch).expect("normalise");
    let (nar_hash, nar_size) = nar::hash_path(&scratch, HashAlgo::Blake3).expect("hash");
    let out: StorePath = "/rocmx/store/00bgd045z0d4icpbc2yyz4gx48ak44la-out"
        .parse()
        .expect("p");
    let refs = set(&[&out, &via_nar]);
    s.register_built(BuiltPath {
        scratch: Some(&scratch),
        path: &out,
        refs: &refs,
        nar_hash,
        nar_size,
        deriver: Some(&fixed),
        ca: None,
        built: None,
    })
    .expect("register");
    assert!(!scratch.exists());
    let info = s.path_info(&out).expect("info").expect("valid");
    assert_eq!(
        (info.references, info.deriver, info.nar_size),
        (refs.clone(), Some(fixed.clone()), nar_size)
    );
    assert_eq!(
        fs::metadata(s.real_path(&out)).expect("stat").mode() & 0o7777,
        0o555
    );
    assert_eq!(s.verify(true, false).expect("verify").problems, vec![]);
    // Self-references do not keep a path alive or block its deletion.
    assert!(s.delete(std::slice::from_ref(&out)).expect("delete") > 0);
}

#[test]
fn realisations_are_recorded_merged_and_dropped_with_their_path() {
    let (_tmp, s) = store();
    let a = s.add_text("a", b"a", &BTreeSet::new()).expect("a");
    let b = s.add_text("b", b"b", &BTreeSet::new()).expect("b");
    assert_eq!(s.query_realisation("h1", "out").expect("q"), None);
    s.add_realisation("h1", "out", &a, &["k1:sig".into()])
        .expect("add");
    s.add_realisation("h1", "out", &a, &["k2:sig".into(), "k1:sig".into()])
        .expect("merge");
    assert_eq!(
        s.query_realisation_signed("h1", "out").expect("q"),
        Some((a.clone(), vec!["k1:sig".into(), "k2:sig".into()]))
    );
    let e = s
        .add_realisation("h1", "out", &b, &[])
        .expect_err("conflict");
    assert!(matches!(e, StoreError::RealisationConflict { .. }), "{e}");
    s.delete(std::slice::from_ref(&a)).expect("delete");
    assert_eq!(s.query_realisation("h1", "out").expect("q"), None);
    let e = s
        .add_realisation("h2", "out", &a, &[])
        .expect_err("not valid");
    assert!(matches!(e, StoreError::NotValid { .. }));
}

#[test]
fn concurrent_adds_of_one_tree_from_two_handles_give_one_path() {
    let (tmp, s) = store();
    let src = tmp.path().join("big");
    fs::create_dir(&src).expect("mkdir");
    for i in 0..64 {
        fs::write(src.join(format!("f{i}")), vec![i as u8; 64 * 1024]).expect("write");
    }
    let root = s.root().to_path_buf();
    let results: Vec<StorePath> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..2)
            .map(|_| {
                let (root, src) = (root.clone(), src.clone());
                sc.spawn(move || {
                    LocalStore::open(&root)
                        .expect("open")
                        .add_path(&src, "big")
                        .expect("add")
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().expect("thread")).collect()
    });
    assert_eq!(results[0], results[1]);
    assert_eq!(s.all_valid().expect("all"), vec![results[0].clone()]);
    assert_eq!(s.verify(true, false).expect("verify").problems, vec![]);
}

/// Child half of the two-process test: adds `ROCMX_TEST_SRC` to `ROCMX_TEST_ROOT` and
/// prints the path. Does nothing when run on its own.
#[test]
fn child_process_add() {
    if let (Some(root), Some(src)) = (
        std::env::var_os("ROCMX_TEST_ROOT"),
        std::env::var_os("ROCMX_TEST_SRC"),
    ) {
        let s = LocalStore::open(Path::new(&root)).expect("open");
        println!("ADDED {}", s.add_path(Path::new(&src), "big").expect("add"));
    }
}

#[test]
fn concurrent_adds_from_two_processes_give_one_path() {
    let (tmp, s) = store();
    let src = tmp.path().join("big");
    fs::create_dir(&src).expect("mkdir");
    for i in 0..32 {
        fs::write(src.join(format!("f{i}")), vec![i as u8; 128 * 1024]).expect("write");
    }
    let exe = std::env::current_exe().expect("exe");
    let children: Vec<_> = (0..2)
        .map(|_| {
            std::process::Command::new(&exe)
                .args([
                    "--exact",
                    "local::tests::child_process_add",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env("ROCMX_TEST_ROOT", s.root())
                .env("ROCMX_TEST_SRC", &src)
                .stdout(std::process::Stdio::piped())
                .spawn()
                .expect("spawn")
        })
        .collect();
    let mut paths = BTreeSet::new();
    for c in children {
        let out = c.wait_with_output().expect("wait");
        assert!(out.status.success());
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let line = text
            .lines()
            .find_map(|l| l.split_once("ADDED ").map(|(_, p)| p.trim()))
            .expect("child printed its path")
            .to_string();
        paths.insert(line);
    }
    assert_eq!(paths.len(), 1, "{paths:?}");
    assert_eq!(s.all_valid().expect("all").len(), 1);
    assert_eq!(s.verify(true, false).expect("verify").problems, vec![]);
}

/// Manual benchmark: `ROCMX_BENCH_SRC=<tree> cargo test --release -p rocmx-store
/// local::tests::bench_add -- --ignored --nocapture`.
#[test]
#[ignore]
fn bench_add() {
    let Some(src) = std::env::var_os("ROCMX_BENCH_SRC") else {
        return;
    };
    let base = std::env::var_os("ROCMX_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let tmp = tempfile::tempdir_in(base).expect("tmp");
    let s = LocalStore::open(&tmp.path().join("root")).expect("open");
    let t = std::time::Instant::now();
    let scanned = ingest::scan(Path::new(&src)).expect("scan");
    println!(
        "scan only: {:?} ({} entries, NAR {} bytes)",
        t.elapsed(),
        scanned.entries.len(),
        scanned.nar_size
    );
    let t = std::time::Instant::now();
    let p = s.add_path(Path::new(&src), "bench").expect("add");
    println!("fresh add: {:?} -> {p}", t.elapsed());
    let t = std::time::Instant::now();
    s.add_path(Path::new(&src), "bench").expect("add");
    println!("re-add:    {:?}", t.elapsed());
}

#[test]
fn sigkill_during_add_leaves_no_damage_and_the_next_add_succeeds() {
    let (tmp, s) = store();
    let src = tmp.path().join("big");
    fs::create_dir(&src).expect("mkdir");
    for d in 0..8 {
        fs::create_dir(src.join(format!("d{d}"))).expect("mkdir");
        for i in 0..40 {
            fs::write(
                src.join(format!("d{d}/f{i}")),
                vec![(d * 40 + i) as u8; 24 * 1024],
            )
            .expect("write");
        }
    }
    let exe = std::env::current_exe().expect("exe");
    for round in 0u64..12 {
        let mut child = std::process::Command::new(&exe)
            .args([
                "--exact",
                "local::tests::child_process_add",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("ROCMX_TEST_ROOT", s.root())
            .env("ROCMX_TEST_SRC", &src)
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("spawn");
        std::thread::sleep(std::time::Duration::from_millis(3 + round * 4));
        let _ = child.kill(); // SIGKILL
        let _ = child.wait();
        let report = s.verify(true, false).expect("verify");
        assert_eq!(
            report.remaining_damage(),
            Vec::<&Problem>::new(),
            "round {round}"
        );
        if round % 3 == 2 {
            // Let gc clear what the kill left, then add for real.
            let p = s.add_path(&src, "big").expect("add after a kill");
            s.delete(std::slice::from_ref(&p)).expect("delete");
            s.gc(&GcOptions::default()).expect("gc");
        }
    }
    let p = s.add_path(&src, "big").expect("add");
    assert_eq!(
        s.verify(true, true).expect("repair").remaining_damage(),
        Vec::<&Problem>::new()
    );
    assert!(s.is_valid(&p).expect("valid"));
    assert_eq!(s.verify(true, false).expect("verify").problems, vec![]);
}

/// A valid `.drv` and two valid paths its outputs can be recorded as.
fn drv_and_two_paths(s: &LocalStore) -> (StorePath, StorePath, StorePath) {
    let drv = s
        .add_text("d.drv", b"Derive([])", &BTreeSet::new())
        .expect("drv");
    let a = s.add_text("a", b"a", &BTreeSet::new()).expect("a");
    let b = s.add_text("b", b"b", &BTreeSet::new()).expect("b");
    (drv, a, b)
}

/// Recording a derivation output that is already recorded writes nothing (a no-op
/// rebuild looks up, and records, every output again); a different path is recorded.
#[test]
fn recording_a_known_derivation_output_writes_nothing() {
    let (_tmp, s) = store();
    let (drv, a, b) = drv_and_two_paths(&s);
    let wal = s.root().join("var/rocmx/db.sqlite-wal");
    let wal_len = || fs::metadata(&wal).map(|m| m.len()).unwrap_or(0);
    s.add_derivation_output(&drv, "out", &a).expect("record");
    let after_first = wal_len();
    for _ in 0..3 {
        s.add_derivation_output(&drv, "out", &a).expect("again");
    }
    assert_eq!(wal_len(), after_first, "a write for a known output");
    assert_eq!(
        s.derivation_outputs(&drv).expect("outputs").get("out"),
        Some(&a)
    );
    s.add_derivation_output(&drv, "out", &b)
        .expect("another path");
    assert!(wal_len() > after_first);
    assert_eq!(
        s.derivation_outputs(&drv).expect("outputs").get("out"),
        Some(&b)
    );
    s.add_derivation_output(&drv, "dev", &a)
        .expect("another output");
    assert_eq!(s.derivation_outputs(&drv).expect("outputs").len(), 2);
}

/// A build's record, in one transaction: the realisation (the first kept when a
/// rebuild gives another path, signatures merged when it gives the same) and the
/// derivation's output; a fixed output gets no realisation; the derivation must be
/// valid, and then nothing is recorded.
#[test]
fn a_build_records_its_realisation_and_derivation_output_together() {
    let (_tmp, s) = store();
    let (drv, a, b) = drv_and_two_paths(&s);
    s.record_built_output(&drv, "h1", "out", &a, &["k1:sig".into()], true)
        .expect("record");
    assert_eq!(
        s.query_realisation_signed("h1", "out").expect("q"),
        Some((a.clone(), vec!["k1:sig".into()]))
    );
    assert_eq!(
        s.derivation_outputs(&drv).expect("outputs").get("out"),
        Some(&a)
    );
    // The same path again: signatures merged.
    s.record_built_output(&drv, "h1", "out", &a, &["k2:sig".into()], true)
        .expect("again");
    assert_eq!(
        s.query_realisation_signed("h1", "out").expect("q"),
        Some((a.clone(), vec!["k1:sig".into(), "k2:sig".into()]))
    );
    // A rebuild that gave other bytes: the realisation stays, the output is recorded.
    s.record_built_output(&drv, "h1", "out", &b, &[], true)
        .expect("rebuild");
    assert_eq!(
        s.query_realisation("h1", "out").expect("q"),
        Some(a.clone())
    );
    assert_eq!(
        s.derivation_outputs(&drv).expect("outputs").get("out"),
        Some(&b)
    );
    // A fixed output: no realisation.
    s.record_built_output(&drv, "h2", "dev", &b, &[], false)
        .expect("fixed");
    assert_eq!(s.query_realisation("h2", "dev").expect("q"), None);
    assert_eq!(
        s.derivation_outputs(&drv).expect("outputs").get("dev"),
        Some(&b)
    );
    // An invalid derivation: an error, and the realisation is not left behind.
    let gone = s
        .add_text("gone.drv", b"Derive([])", &BTreeSet::new())
        .expect("gone");
    s.delete(std::slice::from_ref(&gone)).expect("delete");
    let e = s
        .record_built_output(&gone, "h3", "out", &a, &[], true)
        .expect_err("not valid");
    assert!(matches!(e, StoreError::NotValid { .. }), "{e}");
    assert_eq!(s.query_realisation("h3", "out").expect("q"), None);
}

/// A build's output registered with its realisation and the derivation's output in one
/// transaction: all three recorded; with a derivation that is not valid, none (the path
/// is not registered either, and its tree is gone); a path that is valid already gets
/// the two records only; a fixed output gets no realisation.
#[test]
fn a_built_output_is_registered_with_its_records_or_not_at_all() {
    let (tmp, s) = store();
    let (drv, _, _) = drv_and_two_paths(&s);
    let out: StorePath = "/rocmx/store/00bgd045z0d4icpbc2yyz4gx48ak44la-out"
        .parse()
        .expect("p");
    let built = |drv: &StorePath, hash: &str, realise: bool| -> (StorePath, String, bool) {
        (drv.clone(), hash.to_string(), realise)
    };
    let register = |dir: &Path, h, n, path: &StorePath, b: &(StorePath, String, bool)| {
        s.register_built(BuiltPath {
            scratch: Some(dir),
            path,
            refs: &BTreeSet::new(),
            nar_hash: h,
            nar_size: n,
            deriver: Some(&b.0),
            ca: None,
            built: Some(BuiltOutput {
                drv: &b.0,
                drv_hash: &b.1,
                output: "out",
                realise: b.2,
            }),
        })
    };

    // A derivation that is not valid: nothing at all.
    let gone = s
        .add_text("gone.drv", b"Derive([1])", &BTreeSet::new())
        .expect("gone");
    s.delete(std::slice::from_ref(&gone)).expect("delete");
    let (dir, h, n) = scratch(tmp.path(), "one", "1");
    let e = register(&dir, h, n, &out, &built(&gone, "h0", true)).expect_err("not valid");
    assert!(matches!(e, StoreError::NotValid { .. }), "{e}");
    assert_eq!(s.path_info(&out).expect("info"), None);
    assert!(!s.real_path(&out).exists());
    assert_eq!(s.query_realisation("h0", "out").expect("q"), None);

    // All three.
    let (dir, h, n) = scratch(tmp.path(), "two", "2");
    register(&dir, h, n, &out, &built(&drv, "h1", true)).expect("register");
    assert!(!dir.exists());
    assert_eq!(
        s.path_info(&out).expect("info").expect("valid").deriver,
        Some(drv.clone())
    );
    assert_eq!(
        s.query_realisation("h1", "out").expect("q"),
        Some(out.clone())
    );
    assert_eq!(
        s.derivation_outputs(&drv).expect("outputs").get("out"),
        Some(&out)
    );

    // Valid already (another key gave the same path): the records, the copy removed.
    let (dir, h, n) = scratch(tmp.path(), "three", "2");
    register(&dir, h, n, &out, &built(&drv, "h2", true)).expect("again");
    assert!(!dir.exists());
    assert_eq!(
        s.query_realisation("h2", "out").expect("q"),
        Some(out.clone())
    );

    // A fixed output: no realisation, the derivation's output recorded.
    let fixed: StorePath = "/rocmx/store/11bgd045z0d4icpbc2yyz4gx48ak44la-fixed"
        .parse()
        .expect("p");
    let (dir, h, n) = scratch(tmp.path(), "four", "4");
    register(&dir, h, n, &fixed, &built(&drv, "h3", false)).expect("fixed");
    assert_eq!(s.query_realisation("h3", "out").expect("q"), None);
    assert_eq!(
        s.derivation_outputs(&drv).expect("outputs").get("out"),
        Some(&fixed)
    );
    assert_eq!(s.verify(true, false).expect("verify").problems, vec![]);
}

/// A build result is renamed to its final name before the `syncfs` that makes it
/// durable, then registered: a crash in between leaves an unregistered entry there
/// (here: other bytes), which is never valid and which the next registration replaces.
#[test]
fn a_build_result_left_unregistered_at_its_name_is_replaced() {
    let (tmp, s) = store();
    let out: StorePath = "/rocmx/store/00bgd045z0d4icpbc2yyz4gx48ak44la-out"
        .parse()
        .expect("p");
    let real = s.real_path(&out);
    fs::create_dir(&real).expect("leftover");
    fs::write(real.join("f"), "half").expect("write");
    assert_eq!(s.path_info(&out).expect("info"), None);
    let scratch = tmp.path().join("result");
    fs::create_dir(&scratch).expect("mkdir");
    fs::write(scratch.join("f"), "whole").expect("write");
    normalise_tree(&scratch).expect("normalise");
    let (h, n) = nar::hash_path(&scratch, HashAlgo::Blake3).expect("hash");
    s.register_built(BuiltPath {
        scratch: Some(&scratch),
        path: &out,
        refs: &BTreeSet::new(),
        nar_hash: h,
        nar_size: n,
        deriver: None,
        ca: None,
        built: None,
    })
    .expect("register");
    assert_eq!(fs::read(real.join("f")).expect("read"), b"whole");
    assert!(!scratch.exists());
    assert_eq!(s.verify(true, false).expect("verify").problems, vec![]);
}
mod built;
