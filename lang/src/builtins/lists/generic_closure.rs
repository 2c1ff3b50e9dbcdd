//! `builtins.genericClosure`: the closure of a start set under an operator,
//! each element unique by its `key` attribute.
//!
//! Owns the work queue and the set of keys seen (hashed while they are all ints,
//! all strings or all paths, otherwise kept sorted by Nix's `<`), and Nix's
//! traces for keys that cannot be compared. It must not order keys by anything
//! but the language's `<` (`Evaluator::less_than`), so mixed or incomparable
//! keys fail as they do in Nix.

use std::collections::HashSet;
use std::path::PathBuf;

use crate::eval::{raise, show_value, EResult, ErrorExt, ErrorKind, EvalError, Evaluator, RResult};
use crate::value::{Args, Value};

/// The keys `genericClosure` has seen: hashed while they are all ints, all
/// strings or all paths (the common cases), otherwise a vector kept sorted by
/// Nix's `<`, holding each key's element for error messages.
enum KeySet {
    Empty,
    Ints(HashSet<i64>),
    Strings(HashSet<String>),
    Paths(HashSet<PathBuf>),
    Sorted(Vec<(Value, Value)>),
}

struct KeyTracker {
    keys: KeySet,
    /// The first key and its element, the other side of a type-mismatch error.
    first: Option<(Value, Value)>,
}

impl KeyTracker {
    /// Records `key` (forced); false if an equal key was seen before.
    fn insert(&mut self, ev: &mut Evaluator, key: &Value, elem: &Value) -> EResult<bool> {
        match (&mut self.keys, key) {
            (KeySet::Empty, _) => {
                self.first = Some((key.clone(), elem.clone()));
                self.keys = match key {
                    Value::Int(i) => KeySet::Ints(HashSet::from([*i])),
                    Value::String(s) => KeySet::Strings(HashSet::from([s.as_str().to_string()])),
                    Value::Path(p) => KeySet::Paths(HashSet::from([(**p).clone()])),
                    _ => {
                        let mut v = Vec::new();
                        let r = insert_sorted(ev, &mut v, key, elem);
                        self.keys = KeySet::Sorted(v);
                        return r;
                    }
                };
                Ok(true)
            }
            (KeySet::Ints(s), Value::Int(i)) => Ok(s.insert(*i)),
            (KeySet::Strings(s), Value::String(k)) => {
                if s.contains(k.as_str()) {
                    Ok(false)
                } else {
                    s.insert(k.as_str().to_string());
                    Ok(true)
                }
            }
            (KeySet::Paths(s), Value::Path(p)) => {
                if s.contains(p.as_path()) {
                    Ok(false)
                } else {
                    s.insert((**p).clone());
                    Ok(true)
                }
            }
            (KeySet::Ints(s), Value::Float(_)) => {
                // Mixed numbers: fall back to comparisons.
                let elem0 = self
                    .first
                    .as_ref()
                    .map(|f| f.1.clone())
                    .unwrap_or(Value::Null);
                let mut ints: Vec<i64> = s.iter().copied().collect();
                ints.sort_unstable();
                let mut v: Vec<(Value, Value)> = ints
                    .into_iter()
                    .map(|i| (Value::Int(i), elem0.clone()))
                    .collect();
                let r = insert_sorted(ev, &mut v, key, elem);
                self.keys = KeySet::Sorted(v);
                r
            }
            (KeySet::Sorted(v), _) => insert_sorted(ev, v, key, elem),
            // A key of another type than the first: the comparison fails.
            _ => {
                let (k0, e0) = self.first.clone().unwrap_or((Value::Null, Value::Null));
                let r = ev.less_than(key, &k0);
                let err = match r {
                    Err(e) => e.take(),
                    Ok(_) => {
                        EvalError::new(ErrorKind::Eval, "cannot compare keys of different types")
                    }
                };
                Err(compare_traces(err, elem, &e0))
            }
        }
    }
}

fn compare_traces(err: Box<EvalError>, elem: &Value, other: &Value) -> Box<EvalError> {
    let r: EResult<()> = Err(err);
    let r = r.frame(None, || format!("with element {}", show_value(other)));
    let r = r.frame(None, || {
        format!("while comparing element {}", show_value(elem))
    });
    match r {
        Err(e) => e,
        Ok(()) => unreachable!("an error stays an error"),
    }
}

/// Inserts into a vector sorted by Nix's `<`; false if an equal key exists.
fn insert_sorted(
    ev: &mut Evaluator,
    v: &mut Vec<(Value, Value)>,
    key: &Value,
    elem: &Value,
) -> EResult<bool> {
    let (mut lo, mut hi) = (0, v.len());
    let mut step = || -> EResult<bool> {
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if ev.less_than(&v[mid].0, key)? {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        Ok(lo < v.len() && !ev.less_than(key, &v[lo].0)?)
    };
    match step() {
        Ok(true) => Ok(false),
        Ok(false) => {
            v.insert(lo, (key.clone(), elem.clone()));
            Ok(true)
        }
        Err(e) => {
            // Find an element the key cannot be compared with, for the trace.
            let other = v
                .iter()
                .find(|(k, _)| ev.less_than(key, k).is_err())
                .map(|(_, e)| e.clone());
            Err(match other {
                Some(o) => compare_traces(e, elem, &o),
                None => {
                    let r: EResult<()> = Err(e);
                    match r.frame(None, || {
                        format!("while checking key of element {}", show_value(elem))
                    }) {
                        Err(e) => e,
                        Ok(()) => unreachable!("an error stays an error"),
                    }
                }
            })
        }
    }
}

/// Compute the transitive closure of attrset.startSet under attrset.operator, each element unique by its key attribute.
pub(super) fn generic_closure(ev: &mut Evaluator, a: Args) -> RResult<Value> {
    let args = ev.expect_attrs(&a[0]).frame(None, || {
        "while evaluating the first argument passed to builtins.genericClosure".into()
    })?;
    let missing = |name: &str| -> Box<EvalError> {
        let r: EResult<()> = Err(EvalError::missing_attribute(name, None));
        match r.frame(None, || {
            "in the attrset passed as argument to builtins.genericClosure".into()
        }) {
            Err(e) => e,
            Ok(()) => unreachable!("an error stays an error"),
        }
    };
    let start = args
        .get("startSet")
        .cloned()
        .ok_or_else(|| missing("startSet"))?;
    let start = ev.expect_list(&start).frame(None, || {
        "while evaluating the 'startSet' attribute passed as argument to builtins.genericClosure".into()
    })?;
    if start.is_empty() {
        return Ok(Value::List(start));
    }
    let op = args
        .get("operator")
        .cloned()
        .ok_or_else(|| missing("operator"))?;
    let op = ev.expect_function(&op).frame(None, || {
        "while evaluating the 'operator' attribute passed as argument to builtins.genericClosure".into()
    })?;

    let mut queue: Vec<Value> = start.iter().cloned().collect();
    let mut res = Vec::with_capacity(queue.len());
    let mut keys = KeyTracker {
        keys: KeySet::Empty,
        first: None,
    };
    let mut head = 0;
    while head < queue.len() {
        let e = queue[head].clone();
        head += 1;
        let e = ev.force(&e)?;
        let in_elem = || format!("in genericClosure element {}", show_value(&e));
        let set = match &e {
            Value::Attrs(s) => s.clone(),
            other => return raise(ev.type_error("a set", other)).frame(None, in_elem),
        };
        let Some(key) = set.get("key").cloned() else {
            return raise(EvalError::missing_attribute("key", None)).frame(None, in_elem);
        };
        let key = ev.force(&key)?;
        if !keys.insert(ev, &key, &e)? {
            continue;
        }
        res.push(e.clone());
        let step = (|| -> EResult<()> {
            let r = ev.call(&op, e.clone())?;
            let new = ev.expect_list(&r).frame(None, || {
                "while evaluating the return value of the `operator` passed to builtins.genericClosure".into()
            })?;
            for x in new.iter() {
                queue.push(ev.force(x)?);
            }
            Ok(())
        })();
        step.frame(None, || {
            format!(
                "while calling operator on genericClosure element {}",
                show_value(&e)
            )
        })?;
        // Drop consumed entries now and then so the queue does not hold the whole closure twice.
        if head > 4096 && head * 2 > queue.len() {
            queue.drain(..head);
            head = 0;
        }
    }
    Ok(Value::list(res))
}

#[cfg(test)]
mod tests {
    use crate::eval::testing::{fails, ok};

    #[test]
    fn generic_closure() {
        assert_eq!(
            ok("builtins.genericClosure { startSet = [ { key = 5; } ]; operator = item: [ { key = if (item.key / 2) * 2 == item.key then item.key / 2 else 3 * item.key + 1; } ]; }"),
            "[ { key = 5; } { key = 16; } { key = 8; } { key = 4; } { key = 2; } { key = 1; } ]"
        );
        assert_eq!(ok("builtins.genericClosure { startSet = [ ]; }"), "[ ]");
        assert_eq!(
            ok("map (x: x.key) (builtins.genericClosure { startSet = [ { key = \"a\"; } { key = \"a\"; } ]; operator = x: [ { key = \"b\"; } ]; })"),
            "[ \"a\" \"b\" ]"
        );
        // Mixed ints and floats, and lists as keys.
        assert_eq!(
            ok("map (x: x.key) (builtins.genericClosure { startSet = [ { key = 1; } { key = 1.0; } { key = 2.5; } ]; operator = x: [ ]; })"),
            "[ 1 2.5 ]"
        );
        assert_eq!(
            ok("map (x: x.key) (builtins.genericClosure { startSet = [ { key = [ 1 2 ]; } { key = [ 1 ]; } { key = [ 1 2 ]; } ]; operator = x: [ ]; })"),
            "[ [ 1 2 ] [ 1 ] ]"
        );
        assert_eq!(
            ok("builtins.length (builtins.genericClosure { startSet = [ { key = 0; } ]; operator = x: if x.key < 10000 then [ { key = x.key + 1; } ] else [ ]; })"),
            "10001"
        );
        fails(
            "builtins.genericClosure { startSet = [ { nokey = 1; } ]; operator = x: [ ]; }",
            "error: attribute 'key' missing",
        );
        fails(
            "builtins.genericClosure { startSet = [ \"x\" ]; operator = x: [ ]; }",
            "error: expected a set but found a string: \"x\"",
        );
        fails(
            "builtins.genericClosure { startSet = [ { key = 1; } { key = \"string\"; } ]; operator = x: [ ]; }",
            "error: cannot compare a string with an integer; values are \"string\" and 1",
        );
        fails(
            "builtins.genericClosure { startSet = [ { key = { }; } { key = { }; } ]; operator = x: [ ]; }",
            "values of that type are incomparable",
        );
        fails(
            "builtins.genericClosure { startSet = [ { key = 1; } ]; }",
            "error: attribute 'operator' missing",
        );
        fails(
            "builtins.genericClosure { operator = x: [ ]; }",
            "error: attribute 'startSet' missing",
        );
        fails(
            "builtins.genericClosure \"x\"",
            "error: expected a set but found a string: \"x\"",
        );
        fails(
            "builtins.genericClosure { startSet = [ { key = 1; } ]; operator = \"f\"; }",
            "error: expected a function but found a string: \"f\"",
        );
        fails(
            "builtins.genericClosure { startSet = [ { key = 1; } ]; operator = x: \"l\"; }",
            "error: expected a list but found a string: \"l\"",
        );
        fails(
            "builtins.genericClosure { startSet = \"l\"; operator = x: [ ]; }",
            "error: expected a list but found a string: \"l\"",
        );
    }
}
