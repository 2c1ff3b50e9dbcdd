//! Running many small cache requests at once: the narinfo and realisation queries of a
//! substitution and the downloads of a fetch are network round trips, so dozens are
//! kept in flight.
//!
//! Owns: [`map`] (a bounded pool of scoped threads over a slice) and [`dag`] (items
//! that depend on each other, each started once the items it needs are done).
//!
//! Must not: know what the items are.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};

/// Queries in flight at most, by default (Nix keeps up to 25 HTTP connections).
pub const DEFAULT_JOBS: usize = 32;

/// `f` of every item, on up to `jobs` threads; results in the order of `items`.
pub fn map<T: Sync, R: Send>(items: &[T], jobs: usize, f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let jobs = jobs.clamp(1, items.len().max(1));
    if jobs == 1 {
        return items.iter().map(f).collect();
    }
    let next = AtomicUsize::new(0);
    let results: Vec<Mutex<Option<R>>> = items.iter().map(|_| Mutex::new(None)).collect();
    std::thread::scope(|s| {
        for _ in 0..jobs {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(item) = items.get(i) else { break };
                let r = f(item);
                *results[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
            });
        }
    });
    results
        .into_iter()
        .map(|m| {
            m.into_inner()
                .unwrap_or_else(|e| e.into_inner())
                .expect("every item was done")
        })
        .collect()
}

/// How a [`dag`] item ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome<K, E> {
    /// `f` succeeded.
    Done,
    /// `f` failed.
    Failed(E),
    /// Not attempted: the item it needs failed.
    Blocked(K),
}

/// Runs `f` on every item on up to `jobs` threads, an item only after every item it
/// `needs` (among `items`; others are taken as done) succeeded. Gives each item's
/// outcome, in the order of `items`. A cycle among the items blocks them.
pub fn dag<K, T, E>(
    items: &[T],
    jobs: usize,
    key: impl Fn(&T) -> K + Sync,
    needs: impl Fn(&T) -> Vec<K>,
    f: impl Fn(&T) -> Result<(), E> + Sync,
) -> Vec<Outcome<K, E>>
where
    K: Eq + Hash + Clone + Send + Sync,
    T: Sync,
    E: Send,
{
    let index: HashMap<K, usize> = items.iter().enumerate().map(|(i, t)| (key(t), i)).collect();
    let mut waiting = vec![0usize; items.len()];
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); items.len()];
    for (i, t) in items.iter().enumerate() {
        let k = key(t);
        for n in needs(t) {
            if n == k {
                continue;
            }
            if let Some(&j) = index.get(&n) {
                waiting[i] += 1;
                dependents[j].push(i);
            }
        }
    }
    struct State<K, E> {
        ready: Vec<usize>,
        waiting: Vec<usize>,
        outcomes: Vec<Option<Outcome<K, E>>>,
        running: usize,
        left: usize,
    }
    let ready: Vec<usize> = (0..items.len())
        .rev()
        .filter(|&i| waiting[i] == 0)
        .collect();
    let state = Mutex::new(State {
        ready,
        waiting,
        outcomes: (0..items.len()).map(|_| None).collect(),
        running: 0,
        left: items.len(),
    });
    let cv = Condvar::new();
    let lock = || state.lock().unwrap_or_else(|e| e.into_inner());
    let jobs = jobs.clamp(1, items.len().max(1));
    std::thread::scope(|s| {
        for _ in 0..jobs {
            s.spawn(|| {
                let mut st = lock();
                loop {
                    if let Some(i) = st.ready.pop() {
                        st.running += 1;
                        drop(st);
                        let r = f(&items[i]);
                        st = lock();
                        st.running -= 1;
                        st.left -= 1;
                        match r {
                            Ok(()) => {
                                st.outcomes[i] = Some(Outcome::Done);
                                for &d in &dependents[i] {
                                    st.waiting[d] -= 1;
                                    if st.waiting[d] == 0 && st.outcomes[d].is_none() {
                                        st.ready.push(d);
                                    }
                                }
                            }
                            Err(e) => {
                                st.outcomes[i] = Some(Outcome::Failed(e));
                                // Everything that needs it, transitively, is blocked.
                                let root = key(&items[i]);
                                let mut stack = dependents[i].clone();
                                while let Some(d) = stack.pop() {
                                    if st.outcomes[d].is_none() {
                                        st.outcomes[d] = Some(Outcome::Blocked(root.clone()));
                                        st.left -= 1;
                                        stack.extend(dependents[d].iter().copied());
                                    }
                                }
                            }
                        }
                        cv.notify_all();
                    } else if st.left == 0 || st.running == 0 {
                        // Done, or only a cycle is left.
                        cv.notify_all();
                        break;
                    } else {
                        st = cv.wait(st).unwrap_or_else(|e| e.into_inner());
                    }
                }
            });
        }
    });
    let st = state.into_inner().unwrap_or_else(|e| e.into_inner());
    st.outcomes
        .into_iter()
        .zip(items)
        .map(|(o, t)| o.unwrap_or_else(|| Outcome::Blocked(key(t))))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn map_keeps_order_and_runs_everything() {
        let items: Vec<u32> = (0..100).collect();
        for jobs in [1, 4, 32, 1000] {
            let r = map(&items, jobs, |x| x * 2);
            assert_eq!(r, items.iter().map(|x| x * 2).collect::<Vec<_>>());
        }
        assert!(map(&[] as &[u32], 8, |x| *x).is_empty());
    }

    #[test]
    fn map_keeps_many_in_flight() {
        // Items that each wait until 16 are running at once: finishes only if they run
        // concurrently (a serial map would wait forever, so the wait gives up after
        // a while and the assertion fails instead).
        let in_flight = std::sync::atomic::AtomicUsize::new(0);
        let items: Vec<u32> = (0..64).collect();
        let peaks = map(&items, DEFAULT_JOBS, |_| {
            let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            let mut peak = now;
            for _ in 0..2000 {
                peak = peak.max(in_flight.load(Ordering::SeqCst));
                if peak >= 16 {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            in_flight.fetch_sub(1, Ordering::SeqCst);
            peak
        });
        assert!(peaks.iter().copied().max().unwrap() >= 16, "{peaks:?}");
    }

    #[test]
    fn dag_runs_needs_first_and_blocks_after_failure() {
        // (name, needs)
        let items = vec![
            ("c", vec!["b"]),
            ("b", vec!["a", "outside"]),
            ("a", vec!["a"]),
            ("d", vec![]),
            ("e", vec!["x"]),
            ("x", vec!["e"]),
        ];
        let order = Mutex::new(Vec::new());
        let out = dag(
            &items,
            4,
            |t| t.0,
            |t| t.1.clone(),
            |t| {
                order.lock().unwrap().push(t.0);
                Ok::<(), String>(())
            },
        );
        let order = order.into_inner().unwrap();
        let pos = |n: &str| order.iter().position(|x| *x == n).unwrap();
        assert!(pos("a") < pos("b") && pos("b") < pos("c"), "{order:?}");
        assert_eq!(
            out[..4],
            [Outcome::Done, Outcome::Done, Outcome::Done, Outcome::Done]
        );
        // A cycle is never started.
        assert!(matches!(out[4], Outcome::Blocked(_)) && matches!(out[5], Outcome::Blocked(_)));

        let out = dag(
            &items[..4],
            2,
            |t| t.0,
            |t| t.1.clone(),
            |t| if t.0 == "a" { Err("broken") } else { Ok(()) },
        );
        assert_eq!(
            out,
            vec![
                Outcome::Blocked("a"),
                Outcome::Blocked("a"),
                Outcome::Failed("broken"),
                Outcome::Done
            ]
        );
    }
}
