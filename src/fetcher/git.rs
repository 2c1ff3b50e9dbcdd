//! Local git repositories through the `git` CLI: exporting one commit's tree
//! for `git+file:` inputs ([`export`]) and describing the work tree around a
//! local flake ([`work_tree`]).
//!
//! Owns: running `git` so that nothing from the repository runs. Every command
//! gets `--no-pager`, an environment without the caller's `GIT_*` variables,
//! `GIT_CONFIG_NOSYSTEM=1`, no lazy fetching of missing objects, and
//! configuration overrides that turn off `core.fsmonitor`, hooks and every
//! filter driver the repository's configuration defines (a `clean` filter is
//! what `git status` would run on a modified file). The tree is exported with
//! `git ls-tree` and `git cat-file --batch`, raw blobs, not with `git archive`:
//! `git archive` runs the repository's `smudge` filters.
//!
//! Must not: read untracked files (describing a work tree reads git's index
//! and `git status --untracked-files=no`, never the tree itself), write into
//! the repository (`GIT_OPTIONAL_LOCKS=0`: `status` does not refresh the
//! index), or write outside the scratch directory it exports into (`tree`
//! checks the repository's paths like a hostile archive's).

use std::ffi::OsStr;
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use rocmx_lang::flake::fetch::{FetchError, GitInfo, TrackedTree};
use rocmx_lang::flake::source::{is_rev, Source};

use super::{fail, Scratch};

/// A commit's tracked files, exported.
pub(super) struct Exported {
    /// The files (a private scratch directory).
    pub tree: Scratch,
    /// The commit.
    pub rev: String,
    /// The commit's committer time.
    pub commit_time: u64,
}

/// How `git` is run on one repository.
struct Git {
    dir: PathBuf,
    /// When set, discovery stops below it (the repository must be `dir`).
    ceiling: Option<PathBuf>,
    /// Configuration overrides (`GIT_CONFIG_KEY_n`/`GIT_CONFIG_VALUE_n`).
    overrides: Vec<(String, String)>,
}

impl Git {
    fn new(dir: &Path, exact: bool) -> Git {
        Git {
            dir: dir.to_path_buf(),
            ceiling: exact.then(|| dir.parent().map(Path::to_path_buf)).flatten(),
            overrides: [
                ("core.fsmonitor", "false"),
                ("core.hooksPath", "/dev/null"),
                ("log.showSignature", "false"),
                ("status.submoduleSummary", "false"),
            ]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new("git");
        for (k, _) in std::env::vars_os() {
            if k.as_bytes().starts_with(b"GIT_") {
                c.env_remove(k);
            }
        }
        c.env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_OPTIONAL_LOCKS", "0")
            .env("GIT_NO_LAZY_FETCH", "1")
            .env("GIT_NO_REPLACE_OBJECTS", "1")
            .env("GIT_PAGER", "cat")
            .env("PAGER", "cat")
            .env("LC_ALL", "C")
            .env("GIT_CONFIG_COUNT", self.overrides.len().to_string());
        for (i, (k, v)) in self.overrides.iter().enumerate() {
            c.env(format!("GIT_CONFIG_KEY_{i}"), k)
                .env(format!("GIT_CONFIG_VALUE_{i}"), v);
        }
        if let Some(ceiling) = &self.ceiling {
            c.env("GIT_CEILING_DIRECTORIES", ceiling);
        }
        c.arg("--no-pager").arg("-C").arg(&self.dir).args(args);
        c.stdin(Stdio::null());
        c
    }

    /// Runs `git ARGS`; `Err` holds the spawn error or git's first error line.
    fn run(&self, args: &[&str]) -> Result<Vec<u8>, GitFailure> {
        let out: Output = self.command(args).output().map_err(GitFailure::Spawn)?;
        if out.status.success() {
            return Ok(out.stdout);
        }
        let stderr = String::from_utf8_lossy(&out.stderr);
        let line = stderr
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .unwrap_or("")
            .trim_start_matches("fatal: ")
            .trim_start_matches("error: ")
            .to_string();
        Err(GitFailure::Failed {
            code: out.status.code(),
            message: if line.is_empty() {
                format!("'git {}' failed ({})", args.join(" "), out.status)
            } else {
                line
            },
        })
    }

    /// Adds overrides that disable every filter driver the repository's
    /// configuration (with what it includes) defines.
    fn disarm_filters(&mut self) -> Result<(), GitFailure> {
        let out = match self.run(&["config", "-z", "--get-regexp", r"^filter\."]) {
            Ok(out) => out,
            // Exit status 1: no such key.
            Err(GitFailure::Failed { code: Some(1), .. }) => return Ok(()),
            Err(e) => return Err(e),
        };
        for item in out.split(|&b| b == 0).filter(|i| !i.is_empty()) {
            let key = item.split(|&b| b == b'\n').next().unwrap_or_default();
            let key = String::from_utf8_lossy(key);
            let Some(rest) = key.strip_prefix("filter.") else {
                continue;
            };
            let Some((name, _)) = rest.rsplit_once('.') else {
                continue;
            };
            for (var, value) in [
                ("clean", ""),
                ("smudge", ""),
                ("process", ""),
                ("required", "false"),
            ] {
                let k = format!("filter.{name}.{var}");
                if !self.overrides.iter().any(|(have, _)| *have == k) {
                    self.overrides.push((k, value.to_string()));
                }
            }
        }
        Ok(())
    }
}

enum GitFailure {
    Spawn(io::Error),
    /// `git` ran and failed: its exit code and first error line.
    Failed {
        code: Option<i32>,
        message: String,
    },
}

impl std::fmt::Display for GitFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GitFailure::Spawn(e) if e.kind() == io::ErrorKind::NotFound => {
                f.write_str("the 'git' command is not installed")
            }
            GitFailure::Spawn(e) => write!(f, "cannot run 'git': {e}"),
            GitFailure::Failed { message, .. } => f.write_str(message),
        }
    }
}

fn text(out: Vec<u8>) -> String {
    String::from_utf8_lossy(&out).trim().to_string()
}

/// Exports the commit `rev`, or the one `ref` (default `HEAD`) names, of the
/// repository at the `file://` URL `url`.
pub(super) fn export(
    source: &Source,
    url: &str,
    r#ref: Option<&str>,
    rev: Option<&str>,
) -> Result<Exported, FetchError> {
    let dir = Source::git_dir(url);
    let dir = fs::canonicalize(&dir).map_err(|e| {
        let why = if e.kind() == io::ErrorKind::NotFound {
            "does not exist".to_string()
        } else {
            e.to_string()
        };
        fail(source, format!("'{}' {why}", dir.display()))
    })?;
    let mut git = Git::new(&dir, true);
    let not_repo = |e: GitFailure| match e {
        GitFailure::Failed { message, .. } if message.contains("not a git repository") => fail(
            source,
            format!("'{}' is not a git repository", dir.display()),
        ),
        e => fail(source, e),
    };
    git.run(&["rev-parse", "--git-dir"]).map_err(not_repo)?;
    git.disarm_filters().map_err(|e| fail(source, e))?;
    let wanted = match (rev, r#ref) {
        (Some(r), _) => {
            if !is_rev(r) {
                return Err(fail(source, format!("'{r}' is not a commit hash")));
            }
            r.to_string()
        }
        (None, Some(r)) if r.starts_with('-') || r.is_empty() => {
            return Err(fail(source, format!("'{r}' is not a valid ref")));
        }
        (None, r) => r.unwrap_or("HEAD").to_string(),
    };
    let spec = format!("{wanted}^{{commit}}");
    let commit = git
        .run(&["rev-parse", "--verify", "--end-of-options", &spec])
        .map(text)
        .map_err(|e| {
            let what = if rev.is_some() { "commit" } else { "ref" };
            fail(
                source,
                format!(
                    "{what} '{wanted}' does not name a commit in '{}' ({e})",
                    dir.display()
                ),
            )
        })?;
    if !is_rev(&commit) {
        return Err(fail(
            source,
            format!("unexpected commit id '{commit}' from git"),
        ));
    }
    let header = git
        .run(&["cat-file", "commit", &commit])
        .map_err(|e| fail(source, e))?;
    let commit_time = committer_time(&header).ok_or_else(|| {
        fail(
            source,
            format!("commit {commit} has no readable committer time"),
        )
    })?;
    let listing = git
        .run(&["ls-tree", "-r", "-z", "--full-tree", &commit])
        .map_err(|e| fail(source, e))?;
    let tree =
        Scratch::new().map_err(|e| fail(source, format!("creating a scratch directory: {e}")))?;
    tree::write_tree(&git, &listing, tree.path()).map_err(|e| fail(source, e))?;
    Ok(Exported {
        tree,
        rev: commit,
        commit_time,
    })
}

/// The committer time of a raw commit object.
fn committer_time(header: &[u8]) -> Option<u64> {
    let header = String::from_utf8_lossy(header);
    let line = header
        .lines()
        .take_while(|l| !l.is_empty())
        .find(|l| l.starts_with("committer "))?;
    let mut words = line.rsplit(' ');
    let _zone = words.next()?;
    words.next()?.parse().ok()
}

/// Describes the git work tree holding `dir` (canonical), if any: its top,
/// what it tracks, `HEAD` and whether tracked files have changes. `None` when
/// `dir` is in no work tree or `git` is not installed.
pub(super) fn work_tree(dir: &Path) -> Result<Option<GitInfo>, FetchError> {
    let err = |e: GitFailure| FetchError(format!("local flake '{}': git: {e}", dir.display()));
    // The top is the nearest directory holding `.git` (a directory, or a file
    // for linked work trees): found without running git, since this runs on
    // every evaluation of a local flake (`rev-parse --show-toplevel` costs a
    // process). `dir` is canonical, so its ancestors are too.
    let Some(top) = dir.ancestors().find(|a| a.join(".git").exists()) else {
        return Ok(None);
    };
    let top = top.to_path_buf();
    let mut git = Git::new(&top, false);
    let lister = Git::new(&top, false);
    // The filter table (for `status`) and the index listing, concurrently:
    // `ls-files` runs no filters.
    let (disarmed, listed) = std::thread::scope(|s| {
        let h = s.spawn(|| lister.run(&["ls-files", "-z", "--cached"]));
        let d = git.disarm_filters();
        (d, h.join())
    });
    let listed = match listed {
        Ok(r) => r,
        Err(_) => {
            return Err(FetchError(format!(
                "local flake '{}': git ls-files failed",
                dir.display()
            )))
        }
    };
    match (&disarmed, &listed) {
        (Err(GitFailure::Spawn(e)), _) | (_, Err(GitFailure::Spawn(e)))
            if e.kind() == io::ErrorKind::NotFound =>
        {
            return Ok(None)
        }
        _ => {}
    }
    disarmed.map_err(err)?;
    let listed = listed.map_err(err)?;
    let files = listed
        .split(|&b| b == 0)
        .filter(|p| !p.is_empty())
        .map(|p| PathBuf::from(OsStr::from_bytes(p)));
    let tracked = TrackedTree::new(top.clone(), files);
    // One `status` gives both HEAD (`# branch.oid`) and whether tracked files
    // changed (any line that is not a `#` header).
    let status = git
        .run(&[
            "status",
            "--porcelain=v2",
            "--branch",
            "--untracked-files=no",
            "--ignore-submodules=dirty",
        ])
        .map_err(err)?;
    let status = String::from_utf8_lossy(&status);
    let head = status
        .lines()
        .find_map(|l| l.strip_prefix("# branch.oid "))
        .map(str::to_string)
        .filter(|r| is_rev(r));
    let dirty = status.lines().any(|l| !l.is_empty() && !l.starts_with('#'));
    let (rev, dirty_rev) = if dirty { (None, head) } else { (head, None) };
    Ok(Some(GitInfo {
        top,
        rev,
        dirty_rev,
        tracked,
    }))
}

mod tree;

#[cfg(test)]
pub(crate) mod tests;
