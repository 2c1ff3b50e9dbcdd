//! Tests of the evaluator's own machinery: scopes, selections, copies of
//! sources, interruption. The language's behaviour is tested against Nix by
//! the conformance suite and by each builtin's tests.

use std::cell::Cell;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use super::{EResult, EvalSettings, Evaluator};
use crate::store::{EvalStore, MemStore, PathFilter};
use rocmx_store::StorePath;

/// A store that counts copies of sources.
struct Counting {
    inner: MemStore,
    adds: Cell<usize>,
}

impl EvalStore for Counting {
    fn add_path(
        &self,
        src: &Path,
        name: &str,
        filter: Option<&mut PathFilter<'_>>,
    ) -> EResult<StorePath> {
        self.adds.set(self.adds.get() + 1);
        self.inner.add_path(src, name, filter)
    }
    fn add_fixed(
        &self,
        src: &Path,
        name: &str,
        method: rocmx_store::IngestionMethod,
        expected: &rocmx_store::Hash,
    ) -> EResult<StorePath> {
        self.inner.add_fixed(src, name, method, expected)
    }
    fn add_text(&self, name: &str, text: &str, refs: &BTreeSet<StorePath>) -> EResult<StorePath> {
        self.inner.add_text(name, text, refs)
    }
    fn realise_path(&self, p: &Path) -> Option<PathBuf> {
        self.inner.realise_path(p)
    }
}

/// Regression: every interpolation of the same path literal copied and
/// hashed it again (50 derivations with `${./bb}` hashed busybox 50 times).
#[test]
fn a_path_is_copied_once_per_evaluation() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("f");
    std::fs::write(&f, "x").unwrap();
    let store = Rc::new(Counting {
        inner: MemStore::new(),
        adds: Cell::new(0),
    });
    let mut ev = Evaluator::new(EvalSettings::default(), store.clone());
    let expr = format!(
        "let p = {}; in [ \"${{p}}\" \"${{p}}\" \"${{p}}\" ]",
        f.display()
    );
    let v = ev.eval_string(&expr, dir.path()).unwrap();
    ev.force_deep(&v).unwrap();
    assert_eq!(store.adds.get(), 1);
}

/// A raised interrupt flag stops an evaluation that would run for ages, `tryEval`
/// does not catch it, and the evaluator works again once the flag is lowered.
#[test]
fn the_interrupt_flag_stops_an_evaluation() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let flag = Arc::new(AtomicBool::new(false));
    let f2 = flag.clone();
    std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(200));
        f2.store(true, Ordering::Relaxed);
    });
    let mut ev = Evaluator::new(EvalSettings::default(), Rc::new(MemStore::new()));
    ev.interrupt = Some(flag.clone());
    let endless = "let f = n: if n == 0 then 0 else f (n - 1) + f (n - 1); in \
                   builtins.tryEval (f 60)";
    let e = ev.eval_string(endless, Path::new("/")).unwrap_err();
    assert_eq!(e.kind, super::ErrorKind::Interrupted);
    assert_eq!(e.msg, "interrupted by the user");
    flag.store(false, Ordering::Relaxed);
    let v = ev
        .eval_string(
            "let f = n: if n == 0 then 0 else f (n - 1) + 1; in f 10000",
            Path::new("/"),
        )
        .unwrap();
    assert_eq!(
        crate::value::print::print_value(&ev.force(&v).unwrap()),
        "10000"
    );
    // Calls evaluated without a scope (`eval/direct.rs`) see it too: the
    // elements made by 100,000 direct calls of `i: i`, then a fold of as
    // many (its elements already evaluated), the flag raised from the start.
    flag.store(true, Ordering::Relaxed);
    let folds = "let xs = builtins.genList (i: i) 100000; in \
                 builtins.seq (builtins.deepSeq xs null) (builtins.foldl' (a: b: a + b) 0 xs)";
    let e = ev.eval_string(folds, Path::new("/")).unwrap_err();
    assert_eq!(e.kind, super::ErrorKind::Interrupted);
    flag.store(false, Ordering::Relaxed);
    let v = ev.eval_string(folds, Path::new("/")).unwrap();
    assert_eq!(
        crate::value::print::print_value(&ev.force(&v).unwrap()),
        "4999950000"
    );
}

fn eval_print(src: &str) -> String {
    let mut ev = Evaluator::new(EvalSettings::default(), Rc::new(MemStore::new()));
    let v = ev.eval_string(src, Path::new("/")).unwrap();
    ev.force_deep(&v).unwrap();
    crate::value::print::print_value(&v)
}

/// An argument selecting from an evaluated set is taken without a thunk
/// (`peek_select`); every case where it may not be (a scope slot still
/// being filled, an unevaluated step, a dynamic name, a default, a
/// missing or failing attribute) must still give what a thunk gives.
#[test]
fn selections_from_evaluated_sets_stay_lazy_where_they_must() {
    let id = "let id = x: x; in";
    assert_eq!(
        eval_print(&format!(
            "{id} let s = {{ a.b = 1; }}; in builtins.seq s (id s.a.b)"
        )),
        "1"
    );
    assert_eq!(
        eval_print(&format!(
            "{id} let s = {{ a = {{ b = 2; }}; }}; in builtins.seq s.a (id s.a.b)"
        )),
        "2"
    );
    // A default naming a later formal: its slot is not set yet.
    assert_eq!(
        eval_print("let f = { d ? c.x, c ? { x = 3; } }: d; in f { }"),
        "3"
    );
    assert_eq!(eval_print("(rec { b = a.x; a = { x = 4; }; }).b"), "4");
    // A default naming `@args`, which is pushed after the defaults.
    assert_eq!(
        eval_print("({ x ? 0, z ? args.x }@args: z) { x = 9; }"),
        "9"
    );
    // The same for arithmetic, which is computed early when it can be: this
    // panicked (index out of bounds) before the slot was looked up with `get`.
    assert_eq!(eval_print("({ x ? 0, z ? args + 1 }@args: x) { }"), "0");
    assert_eq!(eval_print("({ x ? 0, z ? x + 1 }: z) { }"), "1");
    assert_eq!(
        eval_print(&format!(
            "{id} let n = \"x\"; s = {{ x = 5; }}; in builtins.seq s (id s.${{n}})"
        )),
        "5"
    );
    assert_eq!(
        eval_print(&format!(
            "{id} let s = {{ }}; in builtins.seq s (id s.z or 6)"
        )),
        "6"
    );
    // Missing and failing attributes fail only when the argument is used.
    assert_eq!(
        eval_print(&format!(
            "{id} let s = {{ }}; k = _: 7; in builtins.seq s (k s.z)"
        )),
        "7"
    );
    assert_eq!(
        eval_print(&format!(
            "{id} let s = {{ a = throw \"no\"; }}; k = _: 8; in builtins.seq s (k s.a)"
        )),
        "8"
    );
    let mut ev = Evaluator::new(EvalSettings::default(), Rc::new(MemStore::new()));
    let err = ev
        .eval_string(
            "let s = { }; id = x: x; in builtins.seq s (id s.z)",
            Path::new("/"),
        )
        .expect_err("selecting a missing attribute fails");
    assert!(err.to_string().contains("attribute 'z' missing"), "{err}");
}

/// `with` scopes are found by the depths the compiler records, not by a
/// mark on the scope: lexical names win, the innermost `with` that has the
/// name wins, scopes between the `with`s are skipped, and a `with` scope
/// made inside a call survives the recycling of the call's scope.
#[test]
fn with_lookups_follow_the_compiled_depths() {
    assert_eq!(
        eval_print("with { a = 1; b = 2; }; let c = 3; in with { a = 10; }; [ a b c ]"),
        "[ 10 2 3 ]"
    );
    assert_eq!(eval_print("let a = 0; in with { a = 1; }; a"), "0");
    assert_eq!(
        eval_print("with { x = 1; }; (y: let z = y; in with { w = z; }; (v: x + w + v) 100) 10"),
        "111"
    );
    assert_eq!(
        eval_print(
            "let f = x: with { a = x; }; (y: a + y); in \
             builtins.foldl' (acc: x: acc + f x 1) 0 [ 1 2 3 ]"
        ),
        "9"
    );
    assert_eq!(
        eval_print("let fs = map (x: with { inherit x; }; _: x) [ 1 2 ]; in map (f: f null) fs"),
        "[ 1 2 ]"
    );
}

/// `let … in` builds only a scope: `__overrides` is an ordinary binding
/// there, while a `rec` set's and a legacy `let { }`'s still apply.
/// Expected values from Nix 2.8.
#[test]
fn let_bindings_are_a_scope_and_only_rec_sets_take_overrides() {
    use super::testing::ok_all;
    let cases = [
        ("let __overrides = { x = 1; }; x = 2; in x", "2"),
        ("let __overrides = { x = 1; }; x = 2; in __overrides.x", "1"),
        (
            "let s = rec { __overrides = { x = 1; }; x = 2; y = x; }; in [ s.x s.y ]",
            "[ 1 1 ]",
        ),
        (
            "let s = rec { ${\"__overrides\"} = { x = 1; }; x = 2; y = x; }; in [ s.x s.y ]",
            "[ 1 1 ]",
        ),
        ("let { __overrides = { body = 1; }; body = 2; }", "1"),
        (
            "let a = b; b = 1; inherit ({ c = 3; }) c; in [ a c ]",
            "[ 1 3 ]",
        ),
        (
            "let f = x: let y = x + 1; in let z = y * 2; in z; in f 4",
            "10",
        ),
        (
            "let xs = [ a b ]; a = 1; b = builtins.length xs; in xs",
            "[ 1 2 ]",
        ),
    ];
    ok_all(&cases);
}

/// A curried chain `a: b: …` runs in one scope (`LambdaDef::extends`):
/// calls with all, some or one argument at a time, partial applications
/// reused after later calls, shadowing names, closures and thunks made
/// between the arguments, `with` and formals in the chain, and chains long
/// enough to spill the scope's inline slots must all see the right values.
#[test]
fn curried_chains_share_one_scope_and_partial_applications_stay_apart() {
    let cases = [
        ("(a: b: c: [ a b c ]) 1 2 3", "[ 1 2 3 ]"),
        (
            "let f = a: b: c: [ a b c ]; g = f 1; h = g 2; in \
             [ (h 3) (h 4) (g 5 6) (f 7 8 9) (h 10) ]",
            "[ [ 1 2 3 ] [ 1 2 4 ] [ 1 5 6 ] [ 7 8 9 ] [ 1 2 10 ] ]",
        ),
        (
            "let f = a: b: a * 10 + b; g = f 1; in [ (g 2) (f 3 4) (g 5) ]",
            "[ 12 34 15 ]",
        ),
        ("(x: x: x) 1 2", "2"),
        ("(x: y: x: [ x y ]) 1 2 3", "[ 3 2 ]"),
        ("let x = 0; in (a: x: a + x) 1 2", "3"),
        ("let f = a: b: { g = c: a + b + c; }; in (f 1 2).g 3", "6"),
        (
            "let f = a: b: [ (_: a) (_: b) ]; l = f 1 2; in \
             [ ((builtins.elemAt l 0) 0) ((builtins.elemAt l 1) 0) ]",
            "[ 1 2 ]",
        ),
        ("(a: { b }: c: a + b + c) 1 { b = 2; } 3", "6"),
        ("(a: with { z = 5; }; b: a + b + z) 1 2", "8"),
        ("(a: b: c: d: e: a + b + c + d + e) 1 2 3 4 5", "15"),
        (
            "let f = a: b: c: d: e: [ a b c d e ]; g = f 1 2; in [ (g 3 4 5) (g 6 7 8) ]",
            "[ [ 1 2 3 4 5 ] [ 1 2 6 7 8 ] ]",
        ),
        (
            "let f = a: b: c: [ a b c ]; in map (g: g 9) (map (f 1) [ 2 3 ])",
            "[ [ 1 2 9 ] [ 1 3 9 ] ]",
        ),
        (
            "builtins.foldl' (acc: x: acc + x) 0 [ 1 2 3 ] + \
             builtins.length (builtins.sort (a: b: a < b) [ 3 1 2 ])",
            "9",
        ),
        (
            "builtins.attrValues (builtins.mapAttrs (n: v: n + toString v) { a = 1; b = 2; })",
            "[ \"a1\" \"b2\" ]",
        ),
        ("let f = a: b: a; in builtins.functionArgs (f 1)", "{ }"),
    ];
    for (expr, want) in cases {
        assert_eq!(eval_print(expr), want, "{expr}");
    }
}

/// A variable read forces its thunk once and keeps the value in the scope's slot
/// (later reads skip the thunk); a thunk that fails stays in the slot, so the
/// next read fails the same way.
#[test]
fn a_forced_variable_keeps_its_value_in_its_slot() {
    use super::ir::{Env, Ir, Pos};
    use crate::value::{Thunk, ThunkState, Value};
    let mut ev = Evaluator::new(EvalSettings::default(), Rc::new(MemStore::new()));
    let var = Ir::Var {
        up: 0,
        idx: 0,
        pos: Pos::default(),
    };
    let t = Thunk::new(ThunkState::Native(Rc::new(|_| Ok(Value::Int(7)))));
    let env = Env::new(None, smallvec::smallvec![Value::Thunk(t.clone())]);
    assert!(matches!(ev.eval(&var, &env), Ok(Value::Int(7))));
    assert!(
        matches!(env.get(0), Value::Int(7)),
        "the slot holds the value"
    );
    assert!(
        matches!(t.value(), Some(Value::Int(7))),
        "the thunk is done too"
    );
    assert!(matches!(ev.eval(&var, &env), Ok(Value::Int(7))));

    let bad = Thunk::new(ThunkState::Native(Rc::new(|_| {
        super::raise(super::EvalError::new(
            super::ErrorKind::Type,
            "no".to_string(),
        ))
    })));
    let env = Env::new(None, smallvec::smallvec![Value::Thunk(bad)]);
    assert!(ev.eval(&var, &env).is_err());
    assert!(
        matches!(env.get(0), Value::Thunk(_)),
        "a failed thunk stays"
    );
}

/// A lambda with two formals (or one and `@`) runs in a pooled scope, put
/// back when the call is done unless something captured it: closures and
/// defaults made in one call keep that call's arguments, whatever later calls
/// bind. Checked against Nix 2.8.
#[test]
fn scopes_of_formals_are_reused_only_when_nothing_holds_them() {
    use super::testing::ok_all;
    ok_all(&[
        (
            "let f = { x, y }: z: x + y + z; g = f { x = 1; y = 2; }; h = f { x = 10; y = 20; }; \
             in [ (g 0) (h 0) (g 100) (f { x = 3; y = 4; } 0) ]",
            "[ 3 30 103 7 ]",
        ),
        (
            "let f = { x, ... }@a: [ x a.y ]; in [ (f { x = 1; y = 2; }) (f { x = 3; y = 4; }) ]",
            "[ [ 1 2 ] [ 3 4 ] ]",
        ),
        (
            "let f = { x, y ? x * 2 }: { inherit y; }; a = f { x = 1; }; b = f { x = 5; }; \
             in [ a.y b.y (f { x = 2; y = 0; }).y ]",
            "[ 2 10 0 ]",
        ),
        (
            "builtins.foldl' (acc: i: acc + ({ x, y }: x * y) { x = i; y = i; }) 0 (builtins.genList (i: i) 10)",
            "285",
        ),
    ]);
}

/// `x.a` with `x` a variable holding an evaluated set is read in place
/// (`select_in_place`), and `v == "const"` compares in place: values,
/// defaults, the missing-attribute error, the frame of a failing attribute
/// and non-string operands must be what the general paths give (values
/// checked against Nix 2.8).
#[test]
fn selections_and_string_comparisons_in_place_match_the_general_paths() {
    use super::testing::{fails, ok_all};
    ok_all(&[
        // A set in the slot, and a forced thunk holding one (an argument).
        ("let s = { a = 1; b = 2; }; in s.a + s.b", "3"),
        (
            "let f = s: builtins.seq s (s.a + s.b); in f (builtins.listToAttrs [ { name = \"a\"; value = 1; } { name = \"b\"; value = 2; } ])",
            "3",
        ),
        ("let s = { a = 1; }; in [ (s.z or 5) (s.a or 5) ]", "[ 5 1 ]"),
        ("let s = 3; in s.a or 4", "4"),
        ("let s = { a.b = 7; }; in s.a.b", "7"),
        ("let s = { a = x: x + 1; }; in s.a 1", "2"),
        (
            "let t = \"merge\"; u = 1; in [ (t == \"merge\") (t != \"merge\") (t == \"if\") (u == \"1\") (u != \"1\") ]",
            "[ true false false false true ]",
        ),
        // Context does not take part in equality.
        (
            "let t = \"${builtins.toFile \"f\" \"x\"}\"; in t == t && (builtins.unsafeDiscardStringContext t) == t",
            "true",
        ),
    ]);
    fails("let s = { a = 1; }; in s.b", "attribute 'b' missing");
    let mut ev = Evaluator::new(EvalSettings::default(), Rc::new(MemStore::new()));
    let err = ev
        .eval_string("let s = { a = throw \"boom\"; }; in s.a", Path::new("/"))
        .expect_err("the attribute throws");
    assert!(
        err.frames
            .iter()
            .any(|f| f.msg == "while evaluating the attribute 'a'"),
        "{err:?}"
    );
}

/// Set and list literals that evaluate nothing to be built (`delay` builds
/// them at once instead of making thunks) keep every value lazy, and inside a
/// `let` or `rec` still being filled they read its variables only when forced.
/// Expected values from Nix 2.8.
#[test]
fn literals_built_without_thunks_stay_lazy_and_see_their_whole_scope() {
    use super::testing::ok_all;
    ok_all(&[
        ("let a = { b = c; }; c = 1; in a.b", "1"),
        ("let xs = [ y ]; y = 2; in builtins.head xs", "2"),
        (
            "let a = { b = { c = d; }; e = [ d ]; }; d = 3; in [ a.b.c (builtins.head a.e) ]",
            "[ 3 3 ]",
        ),
        ("rec { a = { b = c; }; c = 5; }.a.b", "5"),
        ("let a = [ { x = b; } ]; b = 4; in (builtins.head a).x", "4"),
        ("builtins.length [ (throw \"no\") (abort \"no\") ]", "2"),
        ("(x: 1) { a = throw \"no\"; }", "1"),
        (
            "builtins.attrNames ((s: s) { b = abort \"x\"; a = throw \"y\"; })",
            "[ \"a\" \"b\" ]",
        ),
        ("let x = [ x ]; in builtins.length (builtins.head x)", "1"),
        ("let s = { me = s; }; in s.me.me ? me", "true"),
        (
            "let f = n: { v = n; l = [ n (n + 1) ]; }; in (f 2).l",
            "[ 2 3 ]",
        ),
    ]);
}

/// `//` keeps a small or medium update as a layer over a bigger set
/// (`value::attrs`): every read of such a set — selection, `?`, names,
/// values, equality, `removeAttrs`, `intersectAttrs`, positions, laziness,
/// layers over layers and a set on the left — gives what a merged set gives.
/// Expected values from Nix 2.8.
#[test]
fn layered_updates_read_as_merged_sets() {
    use super::testing::ok_all;
    let b = "b = builtins.listToAttrs (builtins.genList (i: { name = \"k${toString i}\"; value = i; }) 20);";
    let big = "big = builtins.listToAttrs (builtins.genList (i: { name = \"p${toString i}\"; value = i; }) 400);";
    let cases = [
        (format!("let {b} s = b // {{ k3 = \"x\"; z = 1; }}; in [ s.k3 s.k4 s.z (builtins.attrNames s == builtins.sort builtins.lessThan (builtins.attrNames s)) (builtins.length (builtins.attrNames s)) ]"),
         "[ \"x\" 4 1 true 21 ]"),
        (format!("let {b} s = ((b // {{ a = 1; }}) // {{ a = 2; k0 = 0.5; }}) // {{ b = 3; }}; in [ s.a s.b s.k0 s.k19 (s ? a) (s ? nope) (builtins.length (builtins.attrValues s)) ]"),
         "[ 2 3 0.5 19 true false 22 ]"),
        (format!("let {b} l = b // {{ k1 = 10; new = 1; }}; f = builtins.listToAttrs (builtins.genList (i: {{ name = \"k${{toString i}}\"; value = if i == 1 then 10 else i; }}) 20) // {{ new = 1; }}; in [ (l == f) (f == l) (l == b) ]"),
         "[ true true false ]"),
        (format!("let {b} l = b // {{ k1 = 10; new = 1; }}; in [ (builtins.attrNames (builtins.removeAttrs l [ \"k1\" \"new\" \"k5\" \"absent\" ])) (builtins.intersectAttrs {{ k1 = null; new = null; q = null; }} l) (builtins.mapAttrs (n: v: v * 2) (builtins.intersectAttrs {{ k2 = 0; new = 0; }} l)) ]"),
         "[ [ \"k0\" \"k10\" \"k11\" \"k12\" \"k13\" \"k14\" \"k15\" \"k16\" \"k17\" \"k18\" \"k19\" \"k2\" \"k3\" \"k4\" \"k6\" \"k7\" \"k8\" \"k9\" ] { k1 = 10; new = 1; } { k2 = 4; new = 2; } ]"),
        (format!("let {big} mid = builtins.listToAttrs (builtins.genList (i: {{ name = \"p${{toString (i * 7)}}\"; value = -i; }}) 60); s = big // mid; t = s // {{ p0 = \"top\"; extra = true; }}; in [ t.p0 t.p7 t.p8 t.p399 t.extra (builtins.length (builtins.attrNames t)) (builtins.foldl' (a: b: a + b) 0 (builtins.filter builtins.isInt (builtins.attrValues s))) ]"),
         "[ \"top\" -1 8 -57 true 403 66459 ]"),
        (format!("let {big} layers = builtins.genList (j: builtins.listToAttrs (builtins.genList (i: {{ name = \"p${{toString (i * 13 + j)}}\"; value = j * 1000 + i; }}) 20)) 9; r = builtins.foldl' (acc: l: acc // l) big layers; in [ r.p0 r.p13 r.p27 r.p399 (builtins.length (builtins.attrNames r)) (builtins.foldl' (a: b: a + b) 0 (builtins.attrValues r)) ]"),
         "[ 0 1 1002 399 400 778560 ]"),
        ("let big = builtins.listToAttrs (builtins.genList (i: { name = \"p${toString i}\"; value = i; }) 40); s = { p1 = \"left\"; only = 1; } // (big // { p2 = \"top\"; }); in [ s.p1 s.p2 s.only s.p39 (builtins.length (builtins.attrNames s)) ]".to_string(),
         "[ 1 \"top\" 1 39 41 ]"),
        ("let b = { a = 1; b = 2; c = 3; d = 4; e = 5; f = 6; g = 7; h = 8; i = 9; }; s = b // { c = 30; } // { z = 1; }; in [ (builtins.unsafeGetAttrPos \"z\" s).column (builtins.unsafeGetAttrPos \"c\" s).column (builtins.unsafeGetAttrPos \"d\" s).column ]".to_string(),
         "[ 103 88 32 ]"),
        (format!("let {b} s = b // {{ k3 = throw \"lazy\"; z = 1; }}; in [ s.z (builtins.length (builtins.attrNames s)) (builtins.tryEval s.k3).success ]"),
         "[ 1 21 false ]"),
    ];
    let cases: Vec<(&str, &str)> = cases.iter().map(|(e, w)| (e.as_str(), *w)).collect();
    ok_all(&cases);
}

/// A type predicate called with its argument is answered where it is called
/// (`PrimOp::tests`); passed as a value (`map builtins.isInt`) it runs its
/// function. Both give Nix 2.8's answer for a value of every type, evaluated
/// or not, and a failing argument keeps the builtin's frame.
#[test]
fn type_predicates_answer_alike_inline_and_through_their_function() {
    use super::testing::{fails, ok};
    let vals = "[ null 1 1.5 true \"s\" ./. [ ] { } (x: x) builtins.map (1 + 1) ]";
    for (p, true_at) in [
        ("isNull", &[0][..]),
        ("isInt", &[1, 10]),
        ("isFloat", &[2]),
        ("isBool", &[3]),
        ("isString", &[4]),
        ("isPath", &[5]),
        ("isList", &[6]),
        ("isAttrs", &[7]),
        ("isFunction", &[8, 9]),
    ] {
        let want: Vec<&str> = (0..11)
            .map(|i| {
                if true_at.contains(&i) {
                    "true"
                } else {
                    "false"
                }
            })
            .collect();
        let want = format!("[ {} ]", want.join(" "));
        let inline = format!("let vs = {vals}; in map (v: builtins.{p} v) vs");
        let through = format!("let vs = {vals}; in map builtins.{p} vs");
        assert_eq!(ok(&inline), want, "{p} inline");
        assert_eq!(ok(&through), want, "{p} through its function");
    }
    // The frame ("while calling the 'isInt' builtin") is there, hidden
    // without --show-trace.
    fails(
        "builtins.isInt (throw \"boom\")",
        "error: boom\n       at «string»:1:17:",
    );
    fails(
        "builtins.isInt (throw \"boom\")",
        "show 1 more frame of context",
    );
}

/// Two-argument callbacks entered directly (`call2`: a curried `a: b: …`,
/// also one partially applied; anything else through the general spine),
/// Booleans returned to `sort` and `filter` matched without a drop, and
/// selections that read a forced thunk of a set through to its value. Expected
/// values from Nix 2.8.
#[test]
fn callbacks_and_forced_selections_keep_their_values() {
    use super::testing::{fails, ok_all};
    let prelude = "let cmp = k: a: b: a.${k} < b.${k}; \
        xs = map (i: { k = 7 - i; v = i * 2; }) [ 0 3 1 5 2 ]; \
        s = { a = 1 + 1; b = { c = 2 * 3; }; }; in";
    let cases = [
        (format!("{prelude} map (p: p.v) (builtins.sort (cmp \"k\") xs)"), "[ 10 6 4 2 0 ]"),
        (format!("{prelude} map (p: p.v) (builtins.sort (a: b: a.v > b.v || (a.v == b.v && a.k < b.k)) xs)"), "[ 10 6 4 2 0 ]"),
        (format!("{prelude} builtins.mapAttrs (n: v: \"${{n}}=${{toString v}}\") {{ x = 1; y = 2; }}"), "{ x = \"x=1\"; y = \"y=2\"; }"),
        (format!("{prelude} builtins.mapAttrs (n: let g = v: v + 1; in g) {{ x = 1; }}"), "{ x = 2; }"),
        (format!("{prelude} builtins.foldl' (acc: x: acc + x.k + s.a + s.b.c) 0 xs"), "64"),
        (format!("{prelude} [ s.a s.a s.b.c s.b.c ]"), "[ 2 2 6 6 ]"),
        (format!("{prelude} (builtins.tryEval (builtins.sort (a: b: throw \"no\") [ 1 2 ])).success"), "false"),
        (format!("{prelude} builtins.filter (x: x.v > 4) xs"), "[ { k = 4; v = 6; } { k = 2; v = 10; } ]"),
    ];
    let cases: Vec<(&str, &str)> = cases.iter().map(|(e, w)| (e.as_str(), *w)).collect();
    ok_all(&cases);
    fails(
        "builtins.sort (a: b: 1) [ 1 2 ]",
        "expected a Boolean but found an integer",
    );
    fails(
        "builtins.filter (x: 1) [ 1 2 ]",
        "expected a Boolean but found an integer",
    );
}

/// `x.a` compiled as [`Ir::SelectVar`]: read inline when the set and the
/// attribute are evaluated, else the general selection (a thunk to force, a
/// slot of a `let`, `rec` or formals scope not filled yet, `or`, errors).
/// Expected values and messages from Nix 2.8 (rocmx's wording of the type
/// error).
#[test]
fn variable_selections_read_inline_or_fall_back() {
    use super::testing::{fails, ok_all};
    let prelude = "let lazy = { x = 1 + 1; y = throw \"never\"; }; f = s: s.x; \
        g = { a, b ? a.x }: b; r = rec { p = { x = 5; }; q = p.x; }; in";
    let cases = [
        ("let b = a.x; a = { x = 2; }; in b".to_string(), "2"),
        ("let a = { x = 3; }; b = a.x; in b".to_string(), "3"),
        (
            format!("{prelude} [ r.q (f lazy) lazy.x lazy.x (g {{ a = {{ x = 7; }}; }}) ]"),
            "[ 5 2 2 2 7 ]",
        ),
        (
            format!("{prelude} (builtins.tryEval lazy.y).success"),
            "false",
        ),
        (
            "let s = { a = 1; }; in [ (s.a or 9) (s.b or 9) ]".to_string(),
            "[ 1 9 ]",
        ),
    ];
    let cases: Vec<(&str, &str)> = cases.iter().map(|(e, w)| (e.as_str(), *w)).collect();
    ok_all(&cases);
    fails(
        "let s = 3; in s.a",
        "expected a set but found an integer: 3 while selecting attribute 'a'",
    );
    fails(
        "let s = { abc = 1; }; in s.abd",
        "attribute 'abd' missing; did you mean 'abc'?",
    );
}

/// The traces `src` prints, in order, and its printed value or its error.
fn traced(src: &str) -> (Vec<String>, Result<String, super::EvalError>) {
    let lines = Rc::new(std::cell::RefCell::new(Vec::new()));
    let mut ev = Evaluator::new(EvalSettings::default(), Rc::new(MemStore::new()));
    let sink = lines.clone();
    ev.on_trace = Box::new(move |m| sink.borrow_mut().push(m.to_string()));
    let r = ev.eval_string(src, Path::new("/")).and_then(|v| {
        ev.force_deep(&v)
            .map(|_| crate::value::print::print_value(&v))
    });
    let out = lines.borrow().clone();
    (out, r.map_err(|e| *e))
}

/// An argument its callee forces first, and a `let` binding its body forces
/// first and no binding reads, are evaluated at once instead of delayed
/// (`eval::strict`). Every way to tell would show here: the order of
/// traces, which of two errors wins, the error's position and frames, an
/// infinite recursion, a self-reference, a partial application. Values and
/// trace orders as Nix 2.8 gives them.
#[test]
fn values_evaluated_at_once_cannot_be_told_from_thunks() {
    let t = |src: &str, traces: &[&str], value: &str| {
        let (got, r) = traced(src);
        assert_eq!(got, traces, "{src}");
        assert_eq!(r.map_err(|e| e.msg).as_deref(), Ok(value), "{src}");
    };
    t(
        "let f = x: builtins.trace \"body\" x; in f (builtins.trace \"arg\" 1)",
        &["trace: body", "trace: arg"],
        "1",
    );
    t(
        "let f = x: x + builtins.trace \"body\" 1; in f (builtins.trace \"arg\" 1)",
        &["trace: arg", "trace: body"],
        "2",
    );
    t(
        "let f = a: b: b + a; in f (builtins.trace \"a\" 1) (builtins.trace \"b\" 2)",
        &["trace: b", "trace: a"],
        "3",
    );
    t(
        "let t = builtins.trace \"t\" 1; u = builtins.trace \"u\" 2; in u + t",
        &["trace: u", "trace: t"],
        "3",
    );
    t(
        "let f = { a, b }: b; in f (builtins.trace \"set\" { a = 1; b = 2; })",
        &["trace: set"],
        "2",
    );
    use super::testing::{fails, ok_all};
    ok_all(&[
        ("let a = { b = a; }; in a.b.b ? b", "true"),
        ("let a = f a; f = x: { y = x; }; in a.y.y ? y", "true"),
        ("let a = b + 1; b = 2; in a", "3"),
        (
            "let f = x: x + 1; in builtins.tryEval (f (throw \"z\"))",
            "{ success = false; value = false; }",
        ),
        ("let f = a: b: c: c + 1; g = f 1 2; in g 3", "4"),
        ("let f = a: a: a + 1; in f (throw \"first\") 1", "2"),
        (
            "let p = s: let t = s._type or \"\"; in if t == \"a\" then 1 else 2; in [ (p { _type = \"a\"; }) (p 3) ]",
            "[ 1 2 ]",
        ),
    ]);
    // Which of two errors wins.
    fails("let f = x: y: x + y; in f (throw \"a\") (throw \"b\")", "a");
    fails("let f = x: y: y + x; in f (throw \"a\") (throw \"b\")", "b");
    fails("let f = a: b: c: b + 1; in (f 1) (throw \"mid\") 3", "mid");
    fails(
        "let f = x: x + 1; a = f (a + 1); in a",
        "infinite recursion",
    );
    fails("rec { a = (x: x + 1) (a + 1); }.a", "infinite recursion");
    fails("let t = x; x = t; in t", "infinite recursion");
    // The same error, position and frames as the delayed argument gives:
    // `if true then … else 0` forces nothing first, so its argument is
    // delayed, and `if` adds no frame of its own; a variable is never
    // evaluated at once.
    for (now, later) in [
        (
            "let f = x: x + 1; in f (1 + \"a\")",
            "let f = x: if true then x + 1 else 0; in f (1 + \"a\")",
        ),
        (
            "let f = x: y: y.a; in f 1 (throw \"t\")",
            "let f = x: y: if true then y.a else 0; in f 1 (throw \"t\")",
        ),
        (
            "let f = x: let t = x.a; in t + 1; in f { a = throw \"in let\"; }",
            "let f = x: let t = x.a; in if true then t + 1 else 0; in f { a = throw \"in let\"; }",
        ),
        (
            "let f = { a }: a; in f ({ a = 1; } // throw \"formals\")",
            // A variable is passed as it is, its thunk forced by the call.
            "let f = { a }: a; x = { a = 1; } // throw \"formals\"; in f x",
        ),
    ] {
        let mut ev = Evaluator::new(EvalSettings::default(), Rc::new(MemStore::new()));
        let e1 = ev.eval_string(now, Path::new("/")).expect_err(now);
        let e2 = ev.eval_string(later, Path::new("/")).expect_err(later);
        assert_eq!(e1.msg, e2.msg, "{now}");
        let at = |e: &super::EvalError| e.pos.map(|p| ev.source_text(p));
        assert_eq!(at(&e1), at(&e2), "{now}");
        let frames =
            |e: &super::EvalError| e.frames.iter().map(|f| f.msg.clone()).collect::<Vec<_>>();
        assert_eq!(frames(&e1), frames(&e2), "{now}");
    }
}
