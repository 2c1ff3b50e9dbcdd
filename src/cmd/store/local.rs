//! `rocmx store add|gc|delete|verify`: the commands that change or check the local store.
//!
//! Store paths are printed in their logical form (`/rocmx/store/<hash>-<name>`) on standard
//! output; progress and diagnostics go to standard error. Failures print `error: …` and
//! exit 1.
//!
//! - `add PATH…` prints one store path per argument, in order, as each is added (named
//!   after the file name of PATH).
//! - `gc [--dry-run] [--max-freed BYTES] [--option NAME VALUE]` prints each deleted (or,
//!   dry, deletable) path, then `N store paths deleted, X MiB freed` (`… would be deleted,
//!   X MiB would be freed`). Crash leftovers it removes are named on standard error. The
//!   settings `keep-derivations` (default true: the `.drv` of a live path stays) and
//!   `keep-outputs` (default false) come from `rocmx.conf` or `--option`.
//! - `delete PATH…` deletes all or nothing: it refuses, naming the referrer or the root,
//!   when a path is still referenced from outside the set or rooted; then prints the paths
//!   and the same summary line as `gc`.
//! - `verify [--check-contents] [--repair]` names every problem on standard error. Leftovers
//!   of interrupted adds (scratch directories, unregistered entries) are warnings, not
//!   damage: a crash may leave them and they are never valid. It exits 1 when damage
//!   remains (after repair, if asked); `--repair` prints what it fixed on standard output.

use std::collections::BTreeSet;
use std::io::{self, Write};
use std::path::{Component, Path, PathBuf};

use clap::Args;
use rocmx_store::{GcOptions, Problem, StorePath};

use crate::cmd::common::{mib, open_store, store_msg, store_path_arg};
use crate::cmd::fail::Fail;
use crate::cmd::StoreOpt;

#[derive(Args, Debug)]
pub struct AddArgs {
    /// Files or directories to copy into the store; each is named after its file name.
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
}

#[derive(Args, Debug)]
pub struct GcArgs {
    /// Only print what would be deleted.
    #[arg(long)]
    pub dry_run: bool,
    /// Stop once this many bytes are freed (a number, optionally with K, M, G or T).
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes)]
    pub max_freed: Option<u64>,
}

#[derive(Args, Debug)]
pub struct DeleteArgs {
    /// Store paths to delete (all or none).
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
}

#[derive(Args, Debug)]
pub struct VerifyArgs {
    /// Also hash every valid path's content and check modes and times.
    #[arg(long)]
    pub check_contents: bool,
    /// Fix what can be fixed: remove leftovers, invalidate paths whose content is missing
    /// (with their referrers), reset modes and times.
    #[arg(long)]
    pub repair: bool,
}

/// `123`, `4K`, `5M`, `6G`, `7T` (powers of 1024; `KiB`, `MB`… are accepted too).
fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(digits);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("'{s}' is not a number of bytes"))?;
    let mult: u64 = match unit.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 1,
        "K" | "KB" | "KIB" => 1 << 10,
        "M" | "MB" | "MIB" => 1 << 20,
        "G" | "GB" | "GIB" => 1 << 30,
        "T" | "TB" | "TIB" => 1 << 40,
        _ => return Err(format!("'{s}': unknown unit '{unit}' (use K, M, G or T)")),
    };
    n.checked_mul(mult)
        .ok_or_else(|| format!("'{s}' is too large"))
}

fn println_out(out: &mut impl Write, line: &str) -> Result<(), Fail> {
    out.write_all(line.as_bytes())
        .and_then(|()| out.write_all(b"\n"))
        .and_then(|()| out.flush())
        .map_err(|e| Fail::write(&e))
}

// ---------------------------------------------------------------------------------------
// add

pub fn add(a: AddArgs, s: &StoreOpt) -> i32 {
    Fail::exit_code(add_inner(&a, s))
}

fn add_inner(a: &AddArgs, s: &StoreOpt) -> Result<(), Fail> {
    let store = open_store(s)?;
    let mut out = io::stdout().lock();
    for p in &a.paths {
        let name = add_name(p)?;
        // What the user adds is usually new: copied while it is hashed.
        let sp = store.add_new_path(p, &name).map_err(|e| {
            Fail::Msg(format!(
                "adding '{}' to the store: {}",
                p.display(),
                store_msg(&e)
            ))
        })?;
        println_out(&mut out, &sp.to_string())?;
    }
    Ok(())
}

/// The name a path is stored under: its file name (`.` and `..` are resolved first, as Nix's
/// `baseNameOf(absPath(p))` does; the final symlink, if any, is not followed).
fn add_name(p: &Path) -> Result<String, Fail> {
    let abs = std::path::absolute(p).map_err(|e| Fail::Msg(format!("'{}': {e}", p.display())))?;
    let mut clean = PathBuf::new();
    for c in abs.components() {
        match c {
            Component::ParentDir => {
                clean.pop();
            }
            Component::CurDir => {}
            other => clean.push(other),
        }
    }
    match clean.file_name() {
        Some(n) => n.to_str().map(str::to_string).ok_or_else(|| {
            Fail::Msg(format!(
                "cannot add '{}': its name is not valid UTF-8, so it cannot name a store path",
                p.display()
            ))
        }),
        None => Err(Fail::Msg(format!(
            "cannot add '{}': it has no file name to name the store path after",
            p.display()
        ))),
    }
}

// ---------------------------------------------------------------------------------------
// gc

pub fn gc(a: GcArgs, s: &StoreOpt) -> i32 {
    Fail::exit_code(gc_inner(&a, s))
}

/// The `keep-derivations` (default true) and `keep-outputs` (default false) settings,
/// which decide what `gc` keeps and so what `delete` refuses.
fn keep_settings() -> Result<(bool, bool), Fail> {
    let cfg = crate::config::read().map_err(Fail::Msg)?;
    let keep_derivations = cfg.flag("keep-derivations", true).map_err(Fail::Msg)?;
    let keep_outputs = cfg.flag("keep-outputs", false).map_err(Fail::Msg)?;
    Ok((keep_derivations, keep_outputs))
}

fn gc_inner(a: &GcArgs, s: &StoreOpt) -> Result<(), Fail> {
    let (keep_derivations, keep_outputs) = keep_settings()?;
    let store = open_store(s)?;
    let opts = GcOptions {
        dry_run: a.dry_run,
        max_freed: a.max_freed,
    };
    let report = store
        .gc_keeping(&opts, keep_derivations, keep_outputs)
        .map_err(|e| Fail::Msg(store_msg(&e)))?;
    for (entry, bytes) in &report.leftovers {
        let verb = if a.dry_run { "would remove" } else { "removed" };
        eprintln!(
            "{verb} leftover of an interrupted add '{}' ({})",
            entry.display(),
            mib(*bytes)
        );
    }
    let mut out = io::BufWriter::new(io::stdout().lock());
    let mut text = String::new();
    for (p, _) in &report.deleted {
        text.push_str(&format!("{p}\n"));
    }
    let n = report.deleted.len();
    if a.dry_run {
        text.push_str(&format!(
            "{n} store paths would be deleted, {} would be freed\n",
            mib(report.freed)
        ));
    } else {
        text.push_str(&format!(
            "{n} store paths deleted, {} freed\n",
            mib(report.freed)
        ));
    }
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| Fail::write(&e))
}

// ---------------------------------------------------------------------------------------
// delete

pub fn delete(a: DeleteArgs, s: &StoreOpt) -> i32 {
    Fail::exit_code(delete_inner(&a, s))
}

fn delete_inner(a: &DeleteArgs, s: &StoreOpt) -> Result<(), Fail> {
    let (keep_derivations, keep_outputs) = keep_settings()?;
    let store = open_store(s)?;
    let mut set = BTreeSet::new();
    for p in &a.paths {
        set.insert(store_path_arg(&store, p)?);
    }
    let paths: Vec<StorePath> = set.into_iter().collect();
    let freed = store
        .delete_keeping(&paths, keep_derivations, keep_outputs)
        .map_err(|e| Fail::Msg(store_msg(&e)))?;
    let mut text = String::new();
    for p in &paths {
        text.push_str(&format!("{p}\n"));
    }
    text.push_str(&format!(
        "{} store paths deleted, {} freed\n",
        paths.len(),
        mib(freed)
    ));
    let mut out = io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| Fail::write(&e))
}

// ---------------------------------------------------------------------------------------
// verify

pub fn verify(a: VerifyArgs, s: &StoreOpt) -> i32 {
    Fail::exit_code(verify_inner(&a, s))
}

fn verify_inner(a: &VerifyArgs, s: &StoreOpt) -> Result<(), Fail> {
    let store = open_store(s)?;
    let report = store
        .verify(a.check_contents, a.repair)
        .map_err(|e| Fail::Msg(store_msg(&e)))?;
    let checked = store.all_valid().map(|v| v.len()).unwrap_or(0);
    for p in &report.problems {
        if p.is_damage() {
            eprintln!("error: {p}");
        } else if !a.repair {
            eprintln!(
                "warning: {p}; harmless (never valid), removed by `rocmx store verify --repair` \
                 or `rocmx store gc`"
            );
        }
    }
    if a.repair {
        let mut text = String::new();
        for e in &report.removed {
            text.push_str(&format!("removed leftover '{}'\n", e.display()));
        }
        for p in &report.repaired {
            text.push_str(&format!(
                "repaired {p}: {}\n",
                repair_action(&report.problems, p)
            ));
        }
        let mut out = io::stdout().lock();
        out.write_all(text.as_bytes())
            .and_then(|()| out.flush())
            .map_err(|e| Fail::write(&e))?;
    }
    let remaining = report.remaining_damage();
    let what = if a.check_contents {
        "valid paths, contents included"
    } else {
        "valid paths"
    };
    if remaining.is_empty() {
        let fixed = if a.repair && !report.repaired.is_empty() {
            format!(" ({} repaired)", report.repaired.len())
        } else {
            String::new()
        };
        eprintln!("checked {checked} {what}: no damage{fixed}");
        return Ok(());
    }
    let hint = if a.repair {
        "; hash mismatches cannot be repaired (there is no other copy): delete the damaged \
         paths and their referrers with `rocmx store delete`, then add or build them again"
    } else {
        "; `rocmx store verify --repair` fixes what can be fixed"
    };
    eprintln!(
        "error: store at '{}' is damaged: {} problem{} remain{}{hint}",
        store.root().display(),
        remaining.len(),
        if remaining.len() == 1 { "" } else { "s" },
        if remaining.len() == 1 { "s" } else { "" },
    );
    Err(Fail::Reported)
}

/// What repair did to `p`, judged from its problems.
fn repair_action(problems: &[Problem], p: &StorePath) -> &'static str {
    let mut reset = false;
    for pr in problems.iter().filter(|pr| pr.store_path() == Some(p)) {
        match pr {
            Problem::MissingContent { .. } => return "invalidated (its content was missing)",
            Problem::DanglingReference { .. } => {
                return "invalidated (it referred to a path that is not valid)"
            }
            Problem::BrokenClosure { .. } => {
                return "invalidated and removed (it depends on a damaged path)"
            }
            Problem::BadMetadata { .. } => reset = true,
            _ => {}
        }
    }
    if reset {
        "reset modes and times to the canonical ones"
    } else {
        "fixed"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_sizes() {
        assert_eq!(parse_bytes("123"), Ok(123));
        assert_eq!(parse_bytes("4K"), Ok(4096));
        assert_eq!(parse_bytes("2MiB"), Ok(2 << 20));
        assert!(parse_bytes("x").is_err());
        assert!(parse_bytes("1Q").is_err());
        assert!(parse_bytes("99999999999T").is_err());
    }

    #[test]
    fn names_resolve_dots() {
        assert_eq!(add_name(Path::new("/a/b/c")).ok(), Some("c".to_string()));
        assert_eq!(add_name(Path::new("/a/b/c/..")).ok(), Some("b".to_string()));
        assert_eq!(add_name(Path::new("/a/b/./")).ok(), Some("b".to_string()));
        assert!(add_name(Path::new("/")).is_err());
    }
}
