//! End-to-end tests of the local-store commands: `rocmx store add|gc|delete|verify`,
//! `rocmx path-info` and `rocmx why-depends`, each run against a store in a temporary
//! directory (`--store DIR`, never /rocmx). Objects with references are made through the
//! library (`LocalStore::add_text`); the handle is dropped before a command that must not
//! see its temporary roots (gc, delete) runs.

use std::collections::BTreeSet;
mod common;
use common::fixture::{succeeded, Work};
use common::{err, make_writable, out, source_path};

use std::fs;
use std::ops::Deref;
use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use rocmx_store::{HashAlgo, LocalStore, StorePath};

/// A store root in a temporary directory ([`Work`]), whose commands must not panic.
struct TestStore(Work);

impl Deref for TestStore {
    type Target = Work;
    fn deref(&self) -> &Work {
        &self.0
    }
}

impl TestStore {
    fn new() -> TestStore {
        TestStore(Work::empty())
    }

    /// A scratch directory next to the store, for source trees and links.
    fn scratch(&self, name: &str) -> PathBuf {
        let p = self.path(name);
        fs::create_dir_all(&p).expect("mkdir scratch");
        p
    }

    /// Runs and requires success (and no panic); stdout.
    fn ok(&self, args: &[&str]) -> String {
        let o = self.run(args);
        let stdout = succeeded(&format!("rocmx {args:?}"), &o);
        assert!(!err(&o).contains("panicked"), "{}", err(&o));
        stdout
    }

    /// Runs and requires exit 1 with an `error: …` message; stderr.
    fn fails(&self, args: &[&str]) -> String {
        let o = self.run(args);
        assert_eq!(
            o.status.code(),
            Some(1),
            "rocmx {args:?} should fail with exit 1:\nstdout: {}\nstderr: {}",
            out(&o),
            err(&o)
        );
        let e = err(&o);
        assert!(e.contains("error: "), "no error message: {e}");
        assert!(!e.contains("panicked"), "{e}");
        e
    }

    fn open(&self) -> LocalStore {
        LocalStore::open(&self.root()).expect("open store")
    }
}

fn lines(s: &str) -> Vec<String> {
    s.lines().map(str::to_string).collect()
}

/// `/rocmx/store/<32 nix32 chars>-<name>`.
fn is_store_path(s: &str, name: &str) -> bool {
    let Some(rest) = s.strip_prefix("/rocmx/store/") else {
        return false;
    };
    rest.len() == 33 + name.len()
        && rest[..32]
            .chars()
            .all(|c| "0123456789abcdfghijklmnpqrsvwxyz".contains(c))
        && &rest[32..33] == "-"
        && &rest[33..] == name
}

/// A small source tree: files (one executable, one empty), a subdirectory, a symlink.
fn make_tree(dir: &Path, salt: &str) {
    fs::create_dir_all(dir.join("sub/deeper")).expect("mkdir");
    fs::write(dir.join("hello.txt"), format!("hello {salt}\n")).expect("write");
    fs::write(dir.join("empty"), "").expect("write");
    fs::write(dir.join("run.sh"), "#!/bin/sh\necho hi\n").expect("write");
    fs::set_permissions(dir.join("run.sh"), fs::Permissions::from_mode(0o755)).expect("chmod");
    fs::write(dir.join("sub/data.bin"), vec![7u8; 10_000]).expect("write");
    fs::write(dir.join("sub/deeper/x"), salt).expect("write");
    symlink("hello.txt", dir.join("link")).expect("symlink");
}

fn json(s: &str) -> serde_json::Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("invalid JSON ({e}): {s}"))
}

/// a ← b ← c (c refers to b, b to a), d → a, and a lone e. Texts mention what they refer
/// to, as real store objects do.
struct Graph {
    a: StorePath,
    b: StorePath,
    c: StorePath,
    d: StorePath,
    e: StorePath,
}

fn make_graph(store: &LocalStore) -> Graph {
    let none = BTreeSet::new();
    let a = store.add_text("a", b"I am a leaf\n", &none).expect("a");
    let b = store
        .add_text(
            "b",
            format!("b uses {a}/lib\n").as_bytes(),
            &[a.clone()].into(),
        )
        .expect("b");
    let c = store
        .add_text(
            "c",
            format!("#!{b}/bin/sh\n").as_bytes(),
            &[b.clone()].into(),
        )
        .expect("c");
    let d = store
        .add_text("d", format!("d: {a}\n").as_bytes(), &[a.clone()].into())
        .expect("d");
    let e = store.add_text("e", b"alone\n", &none).expect("e");
    Graph { a, b, c, d, e }
}

// ---------------------------------------------------------------------------------------

#[test]
fn add_prints_the_path_and_path_info_shows_it() {
    let t = TestStore::new();
    let src = t.scratch("src").join("mytree");
    make_tree(&src, "one");
    let p = t.ok(&["store", "add", src.to_str().unwrap()]);
    let p = p.trim_end().to_string();
    assert!(is_store_path(&p, "mytree"), "{p}");
    assert_eq!(p, source_path(&src, "mytree").to_string());

    // Content is in place, normalised.
    let phys = t.physical(&p);
    let meta = |rel: &str| fs::symlink_metadata(phys.join(rel)).expect("stat");
    assert_eq!(
        fs::read_to_string(phys.join("hello.txt")).unwrap(),
        "hello one\n"
    );
    assert_eq!(meta("").mode() & 0o7777, 0o555);
    assert_eq!(meta("hello.txt").mode() & 0o7777, 0o444);
    assert_eq!(meta("run.sh").mode() & 0o7777, 0o555);
    assert_eq!(meta("sub/data.bin").mtime(), 1);
    assert_eq!(
        fs::read_link(phys.join("link")).unwrap(),
        Path::new("hello.txt")
    );

    // path-info: logical and physical spellings, and a symlink to it.
    assert_eq!(t.ok(&["path-info", &p]), format!("{p}\n"));
    assert_eq!(
        t.ok(&["path-info", phys.to_str().unwrap()]),
        format!("{p}\n")
    );
    let link = t.scratch("links").join("result");
    symlink(&phys, &link).unwrap();
    assert_eq!(
        t.ok(&["path-info", link.to_str().unwrap()]),
        format!("{p}\n")
    );

    // Same content again: same path. Another name: another path.
    assert_eq!(t.ok(&["store", "add", src.to_str().unwrap()]).trim_end(), p);
    let copy = t.scratch("src2").join("mytree");
    make_tree(&copy, "one");
    assert_eq!(
        t.ok(&["store", "add", copy.to_str().unwrap()]).trim_end(),
        p
    );
    let renamed = t.scratch("src3").join("other");
    make_tree(&renamed, "one");
    let q = t.ok(&["store", "add", renamed.to_str().unwrap()]);
    assert!(is_store_path(q.trim_end(), "other"), "{q}");
    assert_ne!(q.trim_end(), p);

    // Several arguments, one line each, in order; a single file too.
    let f = t.scratch("files").join("note.txt");
    fs::write(&f, "note").unwrap();
    let both = lines(&t.ok(&["store", "add", f.to_str().unwrap(), src.to_str().unwrap()]));
    assert_eq!(both.len(), 2);
    assert!(is_store_path(&both[0], "note.txt"), "{both:?}");
    assert_eq!(both[1], p);
    assert_eq!(fs::read(t.physical(&both[0])).unwrap(), b"note");

    // `.` is named after the directory.
    let o = t
        .command(&["store", "add", "."])
        .current_dir(&src)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(out(&o).trim_end(), p);
}

#[test]
fn add_errors_are_clean() {
    let t = TestStore::new();
    let missing = t.dir.path().join("does-not-exist");
    let e = t.fails(&["store", "add", missing.to_str().unwrap()]);
    assert!(e.contains("does-not-exist"), "{e}");
    let bad = t.scratch("bad").join("has space");
    fs::write(&bad, "x").unwrap();
    let e = t.fails(&["store", "add", bad.to_str().unwrap()]);
    assert!(e.contains("has space"), "{e}");
    // Nothing valid was left behind.
    assert_eq!(t.ok(&["store", "verify"]), "");
    assert!(t.open().all_valid().unwrap().is_empty());
}

#[test]
fn path_info_json_has_nix_fields() {
    let t = TestStore::new();
    let src = t.scratch("src").join("tree");
    make_tree(&src, "json");
    let p = t
        .ok(&["store", "add", src.to_str().unwrap()])
        .trim_end()
        .to_string();
    let (nar_hash, nar_size) = rocmx_store::nar::hash_path(&src, HashAlgo::Blake3).unwrap();

    let v = json(&t.ok(&["path-info", "--json", &p]));
    let arr = v.as_array().expect("array");
    assert_eq!(arr.len(), 1);
    let o = &arr[0];
    assert_eq!(o["path"], p.as_str());
    assert_eq!(o["narHash"], nar_hash.to_sri().as_str());
    assert!(o["narHash"].as_str().unwrap().starts_with("blake3-"));
    assert_eq!(o["narSize"], nar_size);
    assert_eq!(o["references"], serde_json::json!([]));
    assert!(o["registrationTime"].as_i64().unwrap() > 1_600_000_000);
    assert!(o["deriver"].is_null());
    assert_eq!(o["signatures"], serde_json::json!([]));
    assert!(
        o["ca"].as_str().unwrap().starts_with("source:blake3:"),
        "{o}"
    );
    assert!(o.get("closureSize").is_none());

    let v = json(&t.ok(&["path-info", "--json", "-S", &p]));
    assert_eq!(v[0]["closureSize"], nar_size);
    // -s / -S columns in Nix's layout.
    assert_eq!(
        t.ok(&["path-info", "-sS", &p]),
        format!("{p}\t{nar_size:>11}\t{nar_size:>11}\n")
    );

    // An invalid path is an error naming it, also among valid ones.
    let bogus = "/rocmx/store/00000000000000000000000000000000-bogus";
    let e = t.fails(&["path-info", &p, bogus]);
    assert!(e.contains(&format!("path '{bogus}' is not valid")), "{e}");
    let e = t.fails(&["path-info", "--json", bogus]);
    assert!(e.contains(&format!("path '{bogus}' is not valid")), "{e}");
    let e = t.fails(&["path-info", "/etc/passwd"]);
    assert!(e.contains("not in the store"), "{e}");
    let e = t.fails(&["path-info", "/rocmx/store/not-a-store-path"]);
    assert!(e.contains("not-a-store-path"), "{e}");
}

#[test]
fn path_info_recursive_and_closure_sizes() {
    let t = TestStore::new();
    let (g, sizes) = {
        let s = t.open();
        let g = make_graph(&s);
        let size = |p: &StorePath| s.path_info(p).unwrap().unwrap().nar_size;
        let sizes = [size(&g.a), size(&g.b), size(&g.c), size(&g.d)];
        (g, sizes)
    };
    let [sa, sb, sc, _sd] = sizes;
    let (a, b, c) = (g.a.to_string(), g.b.to_string(), g.c.to_string());

    // -r: the closure, dependencies first.
    assert_eq!(
        lines(&t.ok(&["path-info", "-r", &c])),
        vec![a.clone(), b.clone(), c.clone()]
    );
    assert_eq!(
        lines(&t.ok(&["path-info", "--recursive", &b])),
        vec![a.clone(), b.clone()]
    );
    // Several paths without -r: each once, references first (among those given).
    assert_eq!(
        lines(&t.ok(&["path-info", &c, &b, &c])),
        vec![b.clone(), c.clone()]
    );
    let mut unrelated = vec![a.clone(), c.clone()];
    unrelated.sort(); // c does not refer to a directly: path order, as Nix
    assert_eq!(lines(&t.ok(&["path-info", &c, &a])), unrelated);

    // -S: closure sizes.
    let want = vec![
        format!("{a}\t{sa:>11}"),
        format!("{b}\t{:>11}", sa + sb),
        format!("{c}\t{:>11}", sa + sb + sc),
    ];
    assert_eq!(lines(&t.ok(&["path-info", "-r", "-S", &c])), want);
    assert_eq!(
        lines(&t.ok(&["path-info", "--closure-size", &c])),
        vec![want[2].clone()]
    );

    // JSON: references and closure sizes.
    let v = json(&t.ok(&["path-info", "--json", "-r", "-S", &c]));
    let arr = v.as_array().unwrap();
    assert_eq!(arr.len(), 3);
    assert_eq!(arr[0]["path"], a.as_str());
    assert_eq!(arr[2]["path"], c.as_str());
    assert_eq!(arr[2]["references"], serde_json::json!([b.as_str()]));
    assert_eq!(arr[1]["references"], serde_json::json!([a.as_str()]));
    assert_eq!(arr[2]["closureSize"], sa + sb + sc);
    assert_eq!(arr[0]["closureSize"], sa);
    assert!(arr[2]["ca"].as_str().unwrap().starts_with("text:blake3:"));
}

#[test]
fn why_depends_prints_the_shortest_chain() {
    let t = TestStore::new();
    let (top, long1, long2, short, dep, other) = {
        let s = t.open();
        let none = BTreeSet::new();
        let dep = s.add_text("dep", b"the dependency\n", &none).unwrap();
        let long2 = s
            .add_text(
                "long2",
                format!("-> {dep}\n").as_bytes(),
                &[dep.clone()].into(),
            )
            .unwrap();
        let long1 = s
            .add_text(
                "long1",
                format!("-> {long2}\n").as_bytes(),
                &[long2.clone()].into(),
            )
            .unwrap();
        let short = s
            .add_text(
                "short",
                format!("0123456789012345678901234567890123456789{dep}\nmore").as_bytes(),
                &[dep.clone()].into(),
            )
            .unwrap();
        let top = s
            .add_text(
                "top",
                format!("{long1} {short}\n").as_bytes(),
                &[long1.clone(), short.clone()].into(),
            )
            .unwrap();
        let other = s.add_text("other", b"unrelated\n", &none).unwrap();
        (top, long1, long2, short, dep, other)
    };
    let _ = (long1, long2);
    let o = t.ok(&["why-depends", &top.to_string(), &dep.to_string()]);
    assert_eq!(o, format!("{top}\n└───{short}\n    └───{dep}\n"));

    // --precise names the file and shows the hash in context.
    let o = t.ok(&[
        "why-depends",
        "--precise",
        &top.to_string(),
        &dep.to_string(),
    ]);
    let l = lines(&o);
    assert_eq!(l.len(), 5, "{o}");
    assert_eq!(l[0], top.to_string());
    assert!(l[1].starts_with("└───/: …"), "{o}");
    assert!(l[1].contains(&short.hash_part()), "{o}");
    assert_eq!(l[2], format!("    → {short}"));
    // 32 bytes of context before the hash part, what there is after it; `\n` shown as `.`.
    let digits = "0123456789012345678901234567890123456789";
    assert_eq!(l[3], format!("    └───/: …{}{dep}.more…", &digits[21..]));
    assert_eq!(l[4], format!("        → {dep}"));

    // Physical spellings work; a path depends on itself.
    let phys = t.physical(&top.to_string());
    let o = t.ok(&["why-depends", phys.to_str().unwrap(), &top.to_string()]);
    assert_eq!(o, format!("{top}\n"));

    // No dependency: exit 1, clear message.
    let e = t.fails(&["why-depends", &top.to_string(), &other.to_string()]);
    assert!(
        e.contains(&format!("'{top}' does not depend on '{other}'")),
        "{e}"
    );
    let e = t.fails(&["why-depends", &dep.to_string(), &top.to_string()]);
    assert!(e.contains("does not depend on"), "{e}");
    let bogus = "/rocmx/store/00000000000000000000000000000000-bogus";
    let e = t.fails(&["why-depends", &top.to_string(), bogus]);
    assert!(e.contains(&format!("path '{bogus}' is not valid")), "{e}");
}

#[test]
fn why_depends_precise_finds_files_in_trees() {
    let t = TestStore::new();
    let (top, dep) = {
        let s = t.open();
        let dep = s.add_text("libfoo", b"lib\n", &BTreeSet::new()).unwrap();
        // A tree-shaped object referring to dep: build it as a NAR through add_nar.
        let tree = t.scratch("tree").join("pkg");
        fs::create_dir_all(tree.join("bin")).unwrap();
        fs::create_dir_all(tree.join("a-first")).unwrap();
        fs::write(tree.join("a-first/readme"), "nothing here").unwrap();
        let mut big = vec![0u8; 3 << 20];
        let at = (1 << 20) - 5; // straddles a chunk boundary of the scanner
        let needle = format!("{dep}/lib/libfoo.so");
        big[at..at + needle.len()].copy_from_slice(needle.as_bytes());
        fs::write(tree.join("bin/prog"), &big).unwrap();
        symlink(format!("{dep}/lib"), tree.join("zlink")).unwrap();
        let mut nar = Vec::new();
        rocmx_store::nar::dump_path(&tree, &mut nar).unwrap();
        let top = s
            .add_nar(
                "pkg",
                rocmx_store::NarCa::Source,
                &nar[..],
                &[dep.clone()].into(),
                None,
            )
            .unwrap();
        (top, dep)
    };
    let o = t.ok(&[
        "why-depends",
        "--precise",
        &top.to_string(),
        &dep.to_string(),
    ]);
    let l = lines(&o);
    assert_eq!(l.len(), 3, "{o}");
    // The hash part is preceded by 19 NUL bytes and `/rocmx/store/`, followed by 21 bytes
    // of the needle and 11 NUL bytes; the file is found before the symlink.
    assert_eq!(l[0], top.to_string());
    assert_eq!(
        l[1],
        format!(
            "└───bin/prog: …{}{dep}/lib/libfoo.so{}…",
            ".".repeat(19),
            ".".repeat(11)
        )
    );
    assert_eq!(l[2], format!("    → {dep}"));
}

#[test]
fn gc_keeps_the_rooted_closure_and_deletes_the_rest() {
    let t = TestStore::new();
    let link = t.scratch("proj").join("result");
    let g = {
        let s = t.open();
        let g = make_graph(&s);
        s.add_root(&link, &g.c).unwrap();
        g
    };
    let src = t.scratch("src").join("loose");
    make_tree(&src, "loose");
    let loose = t
        .ok(&["store", "add", src.to_str().unwrap()])
        .trim_end()
        .to_string();
    let dead: BTreeSet<String> = [g.d.to_string(), g.e.to_string(), loose.clone()].into();

    // Dry run: lists the dead, deletes nothing.
    let o = lines(&t.ok(&["store", "gc", "--dry-run"]));
    assert_eq!(o.len(), 4, "{o:?}");
    assert_eq!(o[..3].iter().cloned().collect::<BTreeSet<_>>(), dead);
    assert!(
        o[3].starts_with("3 store paths would be deleted, ")
            && o[3].ends_with(" MiB would be freed"),
        "{o:?}"
    );
    for p in &dead {
        t.ok(&["path-info", p]);
        assert!(t.physical(p).exists());
    }

    // d refers to a: d goes before a could; a stays, as c's closure needs it.
    let o = lines(&t.ok(&["store", "gc"]));
    assert_eq!(o[..3].iter().cloned().collect::<BTreeSet<_>>(), dead);
    assert!(
        o[3].starts_with("3 store paths deleted, ") && o[3].ends_with(" MiB freed"),
        "{o:?}"
    );
    let freed: f64 = o[3]
        .split(", ")
        .nth(1)
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(freed > 0.0, "{o:?}");
    for p in &dead {
        let e = t.fails(&["path-info", p]);
        assert!(e.contains("is not valid"), "{e}");
        assert!(!t.physical(p).exists(), "{p} still on disk");
    }
    for p in [&g.a, &g.b, &g.c] {
        t.ok(&["path-info", &p.to_string()]);
        assert!(t.physical(&p.to_string()).exists());
    }
    t.ok(&["store", "verify", "--check-contents"]);

    // Nothing more to collect while the root lives.
    assert_eq!(
        t.ok(&["store", "gc"]),
        "0 store paths deleted, 0.00 MiB freed\n"
    );

    // --max-freed stops early: removing the root frees a, b, c, one at a time.
    fs::remove_file(&link).unwrap();
    let o = lines(&t.ok(&["store", "gc", "--max-freed", "1"]));
    assert_eq!(o.len(), 2, "{o:?}");
    assert_eq!(o[0], g.c.to_string(), "referrers go first");
    let o = lines(&t.ok(&["store", "gc"]));
    assert_eq!(o, vec![g.b.to_string(), g.a.to_string(), o[2].clone()]);
    assert!(o[2].starts_with("2 store paths deleted"), "{o:?}");
    assert!(t.open().all_valid().unwrap().is_empty());
}

#[test]
fn gc_roots_under_gcroots_count() {
    let t = TestStore::new();
    let g = {
        let s = t.open();
        make_graph(&s)
    };
    let roots = t.root().join("var/rocmx/gcroots/manual");
    fs::create_dir_all(&roots).unwrap();
    symlink(t.physical(&g.d.to_string()), roots.join("keep-d")).unwrap();
    let o = lines(&t.ok(&["store", "gc"]));
    let deleted: BTreeSet<String> = o[..o.len() - 1].iter().cloned().collect();
    assert_eq!(
        deleted,
        [g.b.to_string(), g.c.to_string(), g.e.to_string()].into()
    );
    t.ok(&["path-info", "-r", &g.d.to_string()]);
}

#[test]
fn delete_refuses_referenced_and_rooted_paths() {
    let t = TestStore::new();
    let link = t.scratch("proj").join("result");
    let g = {
        let s = t.open();
        let g = make_graph(&s);
        s.add_root(&link, &g.d).unwrap();
        g
    };
    // Referenced: names the referrer.
    let e = t.fails(&["store", "delete", &g.a.to_string()]);
    assert!(e.contains(&format!("cannot delete {}", g.a)), "{e}");
    assert!(e.contains("referenced by"), "{e}");
    assert!(
        e.contains(&g.b.to_string()) || e.contains(&g.d.to_string()),
        "{e}"
    );
    let e = t.fails(&["store", "delete", &g.b.to_string()]);
    assert!(e.contains(&format!("referenced by {}", g.c)), "{e}");
    // Rooted: names the root.
    let e = t.fails(&["store", "delete", &g.d.to_string()]);
    assert!(e.contains("GC root"), "{e}");
    assert!(e.contains("result"), "{e}");
    // All or nothing: c may go, but d (rooted) may not, so nothing goes.
    let e = t.fails(&["store", "delete", &g.c.to_string(), &g.d.to_string()]);
    assert!(e.contains("GC root"), "{e}");
    t.ok(&["path-info", &g.c.to_string()]);
    // Invalid paths are named.
    let bogus = "/rocmx/store/00000000000000000000000000000000-bogus";
    let e = t.fails(&["store", "delete", bogus]);
    assert!(e.contains(&format!("path '{bogus}' is not valid")), "{e}");

    // A referrer and its reference together are fine; so is a lone path.
    let o = lines(&t.ok(&["store", "delete", &g.c.to_string(), &g.b.to_string()]));
    assert_eq!(o.len(), 3, "{o:?}");
    assert!(o[2].starts_with("2 store paths deleted, "), "{o:?}");
    for p in [&g.b, &g.c] {
        assert!(t
            .fails(&["path-info", &p.to_string()])
            .contains("is not valid"));
        assert!(!t.physical(&p.to_string()).exists());
    }
    t.ok(&["store", "delete", &g.e.to_string()]);
    // a is still referenced by d.
    let e = t.fails(&["store", "delete", &g.a.to_string()]);
    assert!(e.contains(&format!("referenced by {}", g.d)), "{e}");
    // Once the root is gone, d and then a can go.
    fs::remove_file(&link).unwrap();
    t.ok(&["store", "delete", &g.d.to_string()]);
    t.ok(&["store", "delete", &g.a.to_string()]);
    assert!(t.open().all_valid().unwrap().is_empty());
    t.ok(&["store", "verify", "--check-contents"]);
}

/// Makes a store file or directory writable (to damage it on purpose).
fn unlock(p: &Path) {
    let m = fs::symlink_metadata(p).unwrap();
    let mode = if m.is_dir() { 0o755 } else { 0o644 };
    fs::set_permissions(p, fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn verify_detects_missing_content_and_repair_invalidates_it() {
    let t = TestStore::new();
    let src = t.scratch("src").join("victim");
    make_tree(&src, "victim");
    let victim = t
        .ok(&["store", "add", src.to_str().unwrap()])
        .trim_end()
        .to_string();
    let src2 = t.scratch("src2").join("bystander");
    make_tree(&src2, "bystander");
    let bystander = t
        .ok(&["store", "add", src2.to_str().unwrap()])
        .trim_end()
        .to_string();
    // A referrer of the victim, through the library.
    let referrer = {
        let s = t.open();
        let v: StorePath = victim.parse().unwrap();
        s.add_text(
            "uses-victim",
            format!("{v}\n").as_bytes(),
            &[v.clone()].into(),
        )
        .unwrap()
    };
    t.ok(&["store", "verify", "--check-contents"]);

    // Remove the victim's content behind the store's back.
    let phys = t.physical(&victim);
    make_writable(&phys);
    fs::remove_dir_all(&phys).unwrap();

    let e = t.fails(&["store", "verify"]);
    assert!(e.contains("missing content") && e.contains(&victim), "{e}");
    assert!(
        e.contains("broken closure") && e.contains(&referrer.to_string()),
        "{e}"
    );
    assert!(!e.contains(&bystander), "{e}");
    let e = t.fails(&["store", "verify", "--check-contents"]);
    assert!(e.contains(&victim), "{e}");
    // Nothing changed without --repair.
    t.ok(&["path-info", &victim]);

    let o = t.run(&["store", "verify", "--repair"]);
    assert!(o.status.success(), "{}", err(&o));
    let fixed = out(&o);
    assert!(fixed.contains(&format!("repaired {victim}")), "{fixed}");
    assert!(fixed.contains(&format!("repaired {referrer}")), "{fixed}");
    assert!(t.fails(&["path-info", &victim]).contains("is not valid"));
    assert!(t
        .fails(&["path-info", &referrer.to_string()])
        .contains("is not valid"));
    t.ok(&["path-info", &bystander]);
    t.ok(&["store", "verify", "--check-contents"]);
    // Adding it again brings it back.
    assert_eq!(
        t.ok(&["store", "add", src.to_str().unwrap()]).trim_end(),
        victim
    );
    t.ok(&["store", "verify", "--check-contents"]);
}

#[test]
fn verify_detects_a_flipped_byte_with_check_contents() {
    let t = TestStore::new();
    let src = t.scratch("src").join("flip");
    make_tree(&src, "flip");
    let p = t
        .ok(&["store", "add", src.to_str().unwrap()])
        .trim_end()
        .to_string();
    let file = t.physical(&p).join("sub/data.bin");
    let dir = file.parent().unwrap().to_path_buf();
    unlock(&file);
    let mut bytes = fs::read(&file).unwrap();
    bytes[1234] ^= 0x01;
    fs::write(&file, &bytes).unwrap();
    // Restore the canonical metadata: only the content differs.
    fs::set_permissions(&file, fs::Permissions::from_mode(0o444)).unwrap();
    let one = std::process::Command::new("touch")
        .args(["-h", "-d", "@1"])
        .arg(&file)
        .status()
        .unwrap();
    assert!(one.success());
    let _ = std::process::Command::new("touch")
        .args(["-h", "-d", "@1"])
        .arg(&dir)
        .status();

    // Without --check-contents the damage is invisible (content exists).
    t.ok(&["store", "verify"]);
    let e = t.fails(&["store", "verify", "--check-contents"]);
    assert!(e.contains("hash mismatch") && e.contains(&p), "{e}");
    assert!(e.contains("damaged"), "{e}");
    // Repair cannot restore content: still an error, with advice.
    let e = t.fails(&["store", "verify", "--check-contents", "--repair"]);
    assert!(
        e.contains("hash mismatch") && e.contains("rocmx store delete"),
        "{e}"
    );
    // Deleting it clears the damage; adding it again restores it.
    t.ok(&["store", "delete", &p]);
    t.ok(&["store", "verify", "--check-contents"]);
    assert_eq!(t.ok(&["store", "add", src.to_str().unwrap()]).trim_end(), p);
    t.ok(&["store", "verify", "--check-contents"]);
}

#[test]
fn verify_repairs_modes_and_times() {
    let t = TestStore::new();
    let src = t.scratch("src").join("meta");
    make_tree(&src, "meta");
    let p = t
        .ok(&["store", "add", src.to_str().unwrap()])
        .trim_end()
        .to_string();
    let file = t.physical(&p).join("hello.txt");
    fs::set_permissions(&file, fs::Permissions::from_mode(0o644)).unwrap();
    let e = t.fails(&["store", "verify", "--check-contents"]);
    assert!(
        e.contains("bad permissions or times") && e.contains("hello.txt"),
        "{e}"
    );
    let o = t.ok(&["store", "verify", "--check-contents", "--repair"]);
    assert!(o.contains(&format!("repaired {p}")), "{o}");
    assert_eq!(fs::symlink_metadata(&file).unwrap().mode() & 0o7777, 0o444);
    t.ok(&["store", "verify", "--check-contents"]);
}

#[test]
fn verify_treats_leftovers_as_harmless_and_repair_removes_them() {
    let t = TestStore::new();
    let src = t.scratch("src").join("kept");
    make_tree(&src, "kept");
    let p = t
        .ok(&["store", "add", src.to_str().unwrap()])
        .trim_end()
        .to_string();
    let store_dir = t.root().join("store");
    let tmp = store_dir.join(".tmp-99999-0-abcdef");
    fs::create_dir_all(tmp.join("content")).unwrap();
    fs::write(tmp.join("content/partial"), "half").unwrap();
    // An unregistered entry at a final name (killed between rename and registration).
    let unreg = store_dir.join("00000000000000000000000000000000-orphan");
    fs::create_dir(&unreg).unwrap();
    let o = t.run(&["store", "verify", "--check-contents"]);
    assert!(o.status.success(), "{}", err(&o));
    assert!(
        err(&o).contains("warning:") && err(&o).contains(".tmp-99999"),
        "{}",
        err(&o)
    );
    assert!(err(&o).contains("orphan"), "{}", err(&o));
    assert!(
        tmp.exists() && unreg.exists(),
        "verify without --repair must not touch anything"
    );
    let o = t.ok(&["store", "verify", "--repair"]);
    assert!(
        o.contains("removed leftover") && o.contains(".tmp-99999"),
        "{o}"
    );
    assert!(!tmp.exists() && !unreg.exists());
    t.ok(&["path-info", &p]);
    let o = t.run(&["store", "verify", "--check-contents"]);
    assert!(
        o.status.success() && !err(&o).contains("warning"),
        "{}",
        err(&o)
    );
}

#[test]
fn usage_errors_exit_2() {
    let t = TestStore::new();
    for args in [
        &["path-info"][..],
        &["why-depends", "/rocmx/store/x"],
        &["store", "add"],
        &["store", "delete"],
        &["store", "gc", "--max-freed", "lots"],
    ] {
        let o = t.run(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", err(&o));
    }
}
