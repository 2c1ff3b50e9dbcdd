//! Interruption: what the binary does on Ctrl-C (SIGINT), SIGTERM and SIGHUP.
//!
//! Owns: one watcher thread that waits for those signals and, on the first one, runs
//! the registered hooks (newest first: the live progress display registers one that
//! erases its status area), prints `error: interrupted by the user` (Nix's words) and
//! exits with 128 + the signal's number (130 for Ctrl-C, 143 for SIGTERM, 129 for
//! SIGHUP), as a shell reports a process killed by that signal.
//!
//! Nothing else is needed to leave no process behind: every sandboxed build's init
//! holds `PR_SET_PDEATHSIG` (re-armed after it changes user), so builds die with
//! this process (or with the zygote that made them, which holds it too), and build locks are `flock`s the kernel releases. Build directories
//! left behind are removed by the next build (`realise::job::remove_stale`).
//!
//! Must not: run for `rocmx repl` (its line editor handles Ctrl-C itself) or `rocmx
//! serve` (which stops cleanly on SIGTERM/SIGINT on its own), block an exit on a hook
//! (a hook that cannot take its lock in time is skipped), or print anything but the
//! one line.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};

type Hook = Arc<dyn Fn() + Send + Sync>;

/// Registered hooks with their ids, oldest first.
static HOOKS: Mutex<Vec<(u64, Hook)>> = Mutex::new(Vec::new());
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

/// Starts the watcher thread. Without it (the signals cannot be caught, the thread
/// cannot start) the default dispositions stay: the process is killed by the signal.
pub fn install() {
    let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]) else {
        return;
    };
    let _ = std::thread::Builder::new()
        .name("rocmx-signals".into())
        .spawn(move || {
            if let Some(sig) = signals.forever().next() {
                interrupted(sig);
            }
        });
}

/// Runs the hooks, says so and exits with `128 + sig`.
fn interrupted(sig: i32) -> ! {
    let hooks: Vec<Hook> = match HOOKS.try_lock() {
        Ok(h) => h.iter().rev().map(|(_, f)| f.clone()).collect(),
        Err(_) => Vec::new(),
    };
    for hook in hooks {
        hook();
    }
    eprintln!("error: interrupted by the user");
    std::process::exit(128 + sig);
}

/// Runs `f` if the process is interrupted while the returned guard lives.
pub fn on_interrupt(f: impl Fn() + Send + Sync + 'static) -> HookGuard {
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    HOOKS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push((id, Arc::new(f)));
    HookGuard(id)
}

/// Unregisters its hook when dropped.
pub struct HookGuard(u64);

impl Drop for HookGuard {
    fn drop(&mut self) {
        HOOKS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|(id, _)| *id != self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn hooks_are_registered_and_removed_with_their_guard() {
        static RAN: AtomicUsize = AtomicUsize::new(0);
        let g = on_interrupt(|| {
            RAN.fetch_add(1, Ordering::SeqCst);
        });
        let find = |id| HOOKS.lock().unwrap().iter().any(|(i, _)| *i == id);
        assert!(find(g.0));
        let hook = HOOKS
            .lock()
            .unwrap()
            .iter()
            .find(|(i, _)| *i == g.0)
            .unwrap()
            .1
            .clone();
        hook();
        assert_eq!(RAN.load(Ordering::SeqCst), 1);
        let id = g.0;
        drop(g);
        assert!(!find(id));
    }
}
