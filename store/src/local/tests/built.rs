//! Build results placed first and committed later (`built.rs`).

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use super::{drv_and_two_paths, scratch, set, store};
use crate::hash::Hash;
use crate::local::{BuiltOutput, BuiltPath, LocalStore, StoreError};
use crate::path::StorePath;

/// Two paths, `a` and `b`, with a scratch tree each.
type Pair = (
    StorePath,
    StorePath,
    (PathBuf, Hash, u64),
    (PathBuf, Hash, u64),
);
fn pair(dir: &Path) -> Pair {
    (
        path("/rocmx/store/00bgd045z0d4icpbc2yyz4gx48ak44la-a"),
        path("/rocmx/store/1cbgd045z0d4icpbc2yyz4gx48ak44la-b"),
        scratch(dir, "a", "a"),
        scratch(dir, "b", "b"),
    )
}

fn path(s: &str) -> StorePath {
    s.parse().expect("store path")
}

fn output<'a>(
    dir: &'a Path,
    p: &'a StorePath,
    refs: &'a BTreeSet<StorePath>,
    h: Hash,
    n: u64,
) -> BuiltPath<'a> {
    BuiltPath {
        scratch: Some(dir),
        path: p,
        refs,
        nar_hash: h,
        nar_size: n,
        deriver: None,
        ca: None,
        built: None,
    }
}

fn valid(s: &LocalStore, p: &StorePath) -> bool {
    s.path_info(p).expect("info").is_some()
}

/// Placed outputs are at their names but not valid; one commit of a batch registers
/// them in order (a dependent after its reference) with their records.
#[test]
fn placed_outputs_become_valid_at_their_commit_in_order() {
    let (tmp, s) = store();
    let (drv, _, _) = drv_and_two_paths(&s);
    let (a, b, (da, ha, na), (db, hb, nb)) = pair(tmp.path());
    let none = BTreeSet::new();
    let on_a = set(&[&a]);
    let placed_a = s.place_built(&[output(&da, &a, &none, ha, na)]).expect("a");
    let mut ob = output(&db, &b, &on_a, hb, nb);
    ob.deriver = Some(&drv);
    ob.built = Some(BuiltOutput {
        drv: &drv,
        drv_hash: "kb",
        output: "out",
        realise: true,
    });
    let placed_b = s.place_built(&[ob]).expect("b");
    assert_eq!(
        placed_b.paths().cloned().collect::<Vec<_>>(),
        vec![b.clone()]
    );
    for p in [&a, &b] {
        assert!(s.real_path(p).join("f").exists(), "{p} placed");
        assert!(!valid(&s, p), "{p} not valid before its commit");
    }
    assert!(!da.exists() && !db.exists());
    let results = s.commit_built(vec![placed_a, placed_b]);
    assert_eq!(results.len(), 2);
    for r in results {
        r.expect("committed");
    }
    assert!(valid(&s, &a) && valid(&s, &b));
    assert_eq!(s.references(&b).expect("refs"), on_a);
    assert_eq!(
        s.query_realisation("kb", "out").expect("q"),
        Some(b.clone())
    );
    assert_eq!(
        s.derivation_outputs(&drv).expect("outputs").get("out"),
        Some(&b)
    );
    assert_eq!(s.verify(true, false).expect("verify").problems, vec![]);
}

/// A reference whose build was dropped before its commit is not valid: the dependent's
/// commit fails and removes what it placed; the dropped one removed its own.
#[test]
fn a_commit_fails_when_its_reference_was_never_committed() {
    let (tmp, s) = store();
    let (a, b, (da, ha, na), (db, hb, nb)) = pair(tmp.path());
    let none = BTreeSet::new();
    let on_a = set(&[&a]);
    let placed_a = s.place_built(&[output(&da, &a, &none, ha, na)]).expect("a");
    let placed_b = s.place_built(&[output(&db, &b, &on_a, hb, nb)]).expect("b");
    drop(placed_a);
    assert!(!s.real_path(&a).exists(), "a dropped placement is removed");
    let e = s
        .commit_built(vec![placed_b])
        .pop()
        .expect("one result")
        .expect_err("a is not valid");
    assert!(
        matches!(&e, StoreError::InvalidReference { reference, .. } if *reference == a),
        "{e}"
    );
    assert!(
        !s.real_path(&b).exists(),
        "a failed commit removes what it placed"
    );
    assert!(!valid(&s, &a) && !valid(&s, &b));
    assert_eq!(s.verify(true, false).expect("verify").problems, vec![]);
}

/// Two outputs of one build whose locks share a file are placed together: taken one
/// by one, the second would wait forever for the first.
#[test]
fn outputs_sharing_a_lock_file_are_placed_without_waiting_for_each_other() {
    let (tmp, s) = store();
    let out = path("/rocmx/store/00bgd045z0d4icpbc2yyz4gx48ak44la-x");
    let dev = path("/rocmx/store/0c1bgd045z0d4icpbc2yyz4gx48ak44l-x-dev");
    let (d1, h1, n1) = scratch(tmp.path(), "out", "1");
    let (d2, h2, n2) = scratch(tmp.path(), "dev", "2");
    let none = BTreeSet::new();
    let (tx, rx) = mpsc::channel();
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let placed = s.place_built(&[
                output(&d1, &out, &none, h1, n1),
                output(&d2, &dev, &none, h2, n2),
            ]);
            let _ = tx.send(placed.map(|p| s.commit_built(vec![p])));
        });
        let results = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("placed within 20 s (no lock waits for another of the same build)")
            .expect("placed");
        for r in results {
            r.expect("committed");
        }
    });
    assert!(valid(&s, &out) && valid(&s, &dev));
}

/// An output valid already keeps its content: its scratch copy is removed at once and
/// the commit writes only its records.
#[test]
fn a_placed_output_valid_already_gets_its_records_only() {
    let (tmp, s) = store();
    let (drv, _, _) = drv_and_two_paths(&s);
    let out = path("/rocmx/store/00bgd045z0d4icpbc2yyz4gx48ak44la-out");
    let none = BTreeSet::new();
    let (d1, h, n) = scratch(tmp.path(), "first", "same");
    s.register_built(output(&d1, &out, &none, h, n))
        .expect("first");
    let (d2, h2, n2) = scratch(tmp.path(), "second", "same");
    let mut o = output(&d2, &out, &none, h2, n2);
    o.built = Some(BuiltOutput {
        drv: &drv,
        drv_hash: "again",
        output: "out",
        realise: true,
    });
    let placed = s.place_built(&[o]).expect("place");
    assert!(!d2.exists(), "the copy is removed");
    assert_eq!(s.query_realisation("again", "out").expect("q"), None);
    s.commit_built(vec![placed])
        .pop()
        .expect("one")
        .expect("commit");
    assert_eq!(
        s.query_realisation("again", "out").expect("q"),
        Some(out.clone())
    );
    assert_eq!(
        fs::read(s.real_path(&out).join("f")).expect("read"),
        b"same"
    );
}

/// An output the caller found valid and did not keep (`scratch: None`: a self-referencing
/// one is then not rewritten) gets its records only; if the path has gone meanwhile
/// (collected), placing fails instead of registering anything.
#[test]
fn an_output_without_a_tree_must_still_be_valid() {
    let (tmp, s) = store();
    let (drv, _, _) = drv_and_two_paths(&s);
    let out = path("/rocmx/store/00bgd045z0d4icpbc2yyz4gx48ak44la-out");
    let none = BTreeSet::new();
    let (d, h, n) = scratch(tmp.path(), "first", "x");
    let records = |key| BuiltPath {
        scratch: None,
        path: &out,
        refs: &none,
        nar_hash: h,
        nar_size: n,
        deriver: Some(&drv),
        ca: None,
        built: Some(BuiltOutput {
            drv: &drv,
            drv_hash: key,
            output: "out",
            realise: true,
        }),
    };
    let e = s.place_built(&[records("gone")]).expect_err("not valid");
    assert!(matches!(e, StoreError::NotValid { .. }), "{e}");
    assert!(!s.real_path(&out).exists());
    s.register_built(output(&d, &out, &none, h, n))
        .expect("registered");
    let placed = s.place_built(&[records("kept")]).expect("valid");
    for r in s.commit_built(vec![placed]) {
        r.expect("records");
    }
    assert_eq!(
        s.query_realisation("kept", "out").expect("q"),
        Some(out.clone())
    );
    assert_eq!(s.query_realisation("gone", "out").expect("q"), None);
}
