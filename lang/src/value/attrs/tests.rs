//! Tests of the attribute-set representations and of `//`'s policy.

use std::cell::Cell;

use super::*;

fn set(keys: &[(&str, i64)]) -> Rc<Attrs> {
    Rc::new(Attrs::from_unsorted(
        keys.iter()
            .map(|(k, v)| (Sym::new(k), Value::Int(*v)))
            .collect(),
    ))
}

fn ints(a: &Attrs) -> Vec<(String, i64)> {
    a.iter()
        .map(|(k, v)| match v {
            Value::Int(i) => (k.to_string(), *i),
            _ => unreachable!(),
        })
        .collect()
}

/// A set built whole stays a vector up to BUILT_MAX entries; `//` makes a
/// persistent map of anything past SMALL_MAX, and the entries are the same
/// either way.
#[test]
fn built_sets_are_vectors_and_updates_past_small_max_are_maps() {
    let keys: Vec<String> = (0..100).map(|i| format!("k{i:03}")).collect();
    let pairs: Vec<(&str, i64)> = keys.iter().map(|k| (k.as_str(), 1)).collect();
    let built = set(&pairs);
    assert!(matches!(*built, Attrs::Small(_)));
    let big = set(&(0..BUILT_MAX + 1)
        .map(|i| (Box::leak(format!("b{i:04}").into_boxed_str()) as &str, 1))
        .collect::<Vec<_>>());
    assert!(matches!(*big, Attrs::Large(_)));
    // A small update over it is a layer; one close in size is merged
    // into a persistent map.
    let updated = built.update(&set(&[("k000", 2), ("new", 3)]));
    assert!(matches!(*updated, Attrs::Layered(_)));
    let mut want = ints(&built);
    want[0].1 = 2;
    want.push(("new".to_string(), 3));
    want.sort();
    assert_eq!(ints(&updated), want);
    let close: Vec<String> = (0..40).map(|i| format!("k{:03}", i * 3)).collect();
    let close = set(&close.iter().map(|k| (k.as_str(), 7)).collect::<Vec<_>>());
    let merged = built.update(&close);
    assert!(matches!(*merged, Attrs::Large(_)));
    assert_eq!(merged.len(), 106);
    let small = set(&[("a", 1)]).update(&set(&[("b", 2)]));
    assert!(matches!(*small, Attrs::Small(_)));
}

/// Random sequences of updates of every shape (a few names over many, a
/// medium set over a big one, layers past the deepest, many names over
/// few, overlapping names), with inserts and removals in between, agree
/// with a `BTreeMap` in every lookup, in order and in size.
#[test]
fn updates_of_every_shape_agree_with_a_model() {
    use std::collections::BTreeMap;
    let state = Cell::new(0x9e37_79b9_7f4a_7c15_u64);
    let rand = |n: usize| {
        let mut x = state.get();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        state.set(x);
        (x % n as u64) as usize
    };
    let names: Vec<String> = (0..1500).map(|i| format!("n{i}")).collect();
    let from = |size: usize, value: i64| {
        let mut m = BTreeMap::new();
        for _ in 0..size {
            m.insert(names[rand(names.len())].clone(), value);
        }
        m
    };
    let build = |m: &BTreeMap<String, i64>| {
        Rc::new(Attrs::from_unsorted(
            m.iter()
                .map(|(k, v)| (Sym::new(k), Value::Int(*v)))
                .collect(),
        ))
    };
    let check = |a: &Attrs, m: &BTreeMap<String, i64>, what: &str| {
        assert!(a.len_at_least() <= m.len(), "{what}");
        assert_eq!(a.len(), m.len(), "{what}");
        let got = ints(a);
        let want: Vec<(String, i64)> = m.iter().map(|(k, v)| (k.clone(), *v)).collect();
        assert_eq!(got, want, "{what}");
        for (k, v) in m {
            assert!(
                matches!(a.get(Sym::new(k)), Some(Value::Int(x)) if x == v),
                "{what} {k}"
            );
            assert!(
                matches!(a.get(k.as_str()), Some(Value::Int(x)) if x == v),
                "{what} {k}"
            );
        }
        for missing in ["n-1", "zz", ""] {
            assert!(a.get(missing).is_none() && a.get(Sym::new(missing)).is_none());
        }
        assert!(a.depth() <= LAYER_DEPTH_MAX, "{what}");
    };
    let sizes = [0, 1, 2, 3, 8, 9, 20, 40, 150, 400, 900];
    for round in 0..40 {
        let mut model = from(sizes[round % sizes.len()], -1);
        let mut cur = build(&model);
        for step in 0..25 {
            let what = format!("round {round} step {step}");
            let upd_model = from(sizes[rand(sizes.len())], (round * 100 + step) as i64);
            let upd = build(&upd_model);
            if rand(6) == 0 {
                // The update on the left: the current set wins.
                cur = upd.update(&cur);
                let mut m = upd_model;
                m.extend(model);
                model = m;
            } else {
                cur = cur.update(&upd);
                model.extend(upd_model);
            }
            check(&cur, &model, &what);
            if rand(8) == 0 {
                // A change in place of a (possibly layered) copy.
                let mut changed = (*cur).clone();
                let gone = names[rand(names.len())].clone();
                changed.remove(&gone);
                changed.insert(Sym::new("n7"), Value::Int(77));
                let mut m = model.clone();
                m.remove(&gone);
                m.insert("n7".into(), 77);
                check(&changed, &m, &format!("{what}, changed"));
                check(&cur, &model, &format!("{what}, after the change"));
            }
        }
    }
}

/// A layered set at the deepest is merged once, however many layers are
/// then made over it (a package set shared by every `callPackage`).
#[test]
fn a_set_at_the_deepest_is_merged_once() {
    let big: Vec<String> = (0..400).map(|i| format!("p{i:03}")).collect();
    let mut s = set(&big.iter().map(|k| (k.as_str(), 1)).collect::<Vec<_>>());
    for d in 0..LAYER_DEPTH_MAX {
        let mid: Vec<String> = (0..50).map(|i| format!("p{:03}", i * 7 + d)).collect();
        s = s.update(&set(&mid
            .iter()
            .map(|k| (k.as_str(), 2))
            .collect::<Vec<_>>()));
    }
    assert_eq!(s.depth(), LAYER_DEPTH_MAX);
    let scope = |k: &str| {
        set(&(0..20)
            .map(|i| (Box::leak(format!("{k}{i}").into_boxed_str()) as &str, 3))
            .collect::<Vec<_>>())
    };
    let a = s.update(&scope("a"));
    let b = s.update(&scope("b"));
    let base = |x: &Attrs| match x {
        Attrs::Layered(l) => l.base.clone(),
        _ => panic!("not layered"),
    };
    assert!(Rc::ptr_eq(&base(&a), &base(&b)));
    assert_eq!(a.depth(), 1);
    assert_eq!(a.len(), 420);
    assert!(matches!(a.get("p007"), Some(Value::Int(2))));
    assert!(matches!(a.get("a3"), Some(Value::Int(3))));
}

/// A lookup by symbol (the evaluator's) and by string (builtins') find
/// the same entries in each representation: the linear scan of a small
/// set, its binary search, and the B-tree.
#[test]
fn lookups_by_symbol_and_by_string_agree() {
    for n in [3usize, 20, 100, 300] {
        let names: Vec<String> = (0..n).map(|i| format!("attr-{}", i * 7 % n)).collect();
        let a = set(&names
            .iter()
            .enumerate()
            .map(|(i, k)| (k.as_str(), i as i64))
            .collect::<Vec<_>>());
        assert_eq!(matches!(*a, Attrs::Large(_)), n > BUILT_MAX, "{n}");
        for (i, k) in names.iter().enumerate() {
            let by_sym = a.get(Sym::new(k));
            let by_str = a.get(k.as_str());
            assert!(
                matches!(by_sym, Some(Value::Int(x)) if *x == i as i64),
                "{k}"
            );
            assert!(
                matches!(by_str, Some(Value::Int(x)) if *x == i as i64),
                "{k}"
            );
        }
        for missing in ["attr-", "attr-1000", "", "zzz"] {
            assert!(a.get(Sym::new(missing)).is_none(), "{missing}");
            assert!(a.get(missing).is_none(), "{missing}");
        }
    }
}

/// The 8-byte form keeps file and start, and the length up to 255; a
/// file index past 24 bits is not kept; the default is "no position".
#[test]
fn attr_positions_round_trip_within_their_bounds() {
    use crate::syntax::ast::Span;
    let pos = |file, start, end| Pos {
        file,
        span: Span { start, end },
    };
    for p in [
        pos(0, 0, 0),
        pos(1, 0, 1),
        pos(7, 1234, 1250),
        pos((1 << 24) - 1, u32::MAX - 255, u32::MAX),
        pos(3, 10, 265),
    ] {
        assert_eq!(AttrPos::from(p).to_pos(), p);
    }
    assert_eq!(AttrPos::from(pos(3, 10, 266)).to_pos(), pos(3, 10, 265));
    assert_eq!(AttrPos::from(pos(1 << 24, 5, 9)), AttrPos::NONE);
    assert_eq!(AttrPos::from(Pos::default()), AttrPos::NONE);
    assert_eq!(AttrPos::NONE.to_pos(), Pos::default());
    assert_eq!(std::mem::size_of::<Entry>(), 32);

    let mut a = Attrs::new();
    a.insert_pos(Sym::new("x"), Value::Int(1), pos(2, 40, 45));
    a.insert(Sym::new("y"), Value::Int(2));
    assert_eq!(a.get_pos("x"), Some(pos(2, 40, 45)));
    assert_eq!(a.get_pos("y"), None);
    let kept: Vec<_> = a.iter_pos().map(|(k, _, p)| (k.to_string(), p)).collect();
    assert_eq!(
        kept,
        [
            ("x".to_string(), pos(2, 40, 45)),
            ("y".into(), Pos::default())
        ]
    );
}

#[test]
fn merged_len_counts_each_name_once() {
    let entries = |names: &[&str]| match Attrs::from_unsorted(
        names.iter().map(|n| (Sym::new(n), Value::Null)).collect(),
    ) {
        Attrs::Small(v) => v,
        _ => unreachable!(),
    };
    let cases: [(&[&str], &[&str], usize); 5] = [
        (&[], &[], 0),
        (&["a"], &[], 1),
        (&["a", "b", "c"], &["b", "d"], 4),
        (&["a", "b"], &["a", "b"], 2),
        (&["x1", "x2", "x3"], &["a", "x2", "z"], 5),
    ];
    for (a, b, n) in cases {
        assert_eq!(merged_len(&entries(a), &entries(b)), n, "{a:?} {b:?}");
        assert_eq!(merged_len(&entries(b), &entries(a)), n, "{b:?} {a:?}");
        let u = Rc::new(Attrs::Small(entries(a))).update(&Rc::new(Attrs::Small(entries(b))));
        assert_eq!(u.len(), n);
    }
}

#[test]
fn sorted_and_last_wins() {
    let a = set(&[("b", 1), ("a", 2), ("b", 3)]);
    assert_eq!(ints(&a), vec![("a".into(), 2), ("b".into(), 3)]);
}

#[test]
fn update_small_and_large_agree() {
    let big: Vec<(String, i64)> = (0..300).map(|i| (format!("k{i:03}"), i)).collect();
    let big = set(&big
        .iter()
        .map(|(k, v)| (k.as_str(), *v))
        .collect::<Vec<_>>());
    assert!(matches!(*big, Attrs::Large(_)));
    let small = set(&[("k005", -5), ("zz", 7)]);
    let u = big.update(&small);
    assert_eq!(u.len(), 301);
    assert!(matches!(u.get("k005"), Some(Value::Int(-5))));
    let u2 = small.update(&big);
    assert!(matches!(u2.get("k005"), Some(Value::Int(5))));
    assert!(matches!(u2.get("zz"), Some(Value::Int(7))));
    let keys: Vec<_> = u2.keys().cloned().collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted);
}
