//! Tests of `git+file:` fetching and local work trees, on repositories made
//! with the `git` CLI in temporary directories. Skipped (with a message) when
//! `git` is not installed.

use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::Path;
use std::process::Command;

use rocmx_lang::flake::fetch::{InputFetcher, Tracked};
use rocmx_lang::flake::source::Source;

use crate::fetcher::tests::{fetcher, nix_hash};

/// The commit times of the test commits.
const T1: u64 = 1_700_000_000;
const T2: u64 = 1_700_000_100;

pub(crate) fn have_git() -> bool {
    let ok = Command::new("git").arg("--version").output().is_ok();
    if !ok {
        eprintln!("skipped: git is not installed");
    }
    ok
}

/// Runs `git ARGS` in `dir` for the test's own set-up; returns its output.
pub(crate) fn git(dir: &Path, args: &[&str], time: u64) -> String {
    let date = format!("@{time} +0000");
    let out = Command::new("git")
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
        .env("GIT_AUTHOR_DATE", &date)
        .env("GIT_COMMITTER_DATE", &date)
        .args([
            "-c",
            "init.defaultBranch=main",
            "-c",
            "commit.gpgSign=false",
        ])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// A repository with two commits on `main`, a tag `v1` on the first, a filter
/// driver that would leave a marker file if it ever ran, and an untracked file.
/// Returns (repo, marker, first commit, second commit).
pub(crate) fn repo() -> (tempfile::TempDir, std::path::PathBuf, String, String) {
    let d = tempfile::tempdir().unwrap();
    let r = d.path().join("repo");
    fs::create_dir_all(r.join("sub/deep")).unwrap();
    git(&r, &["init", "-q"], T1);
    fs::write(r.join("a.txt"), "one\n").unwrap();
    fs::write(r.join("sub/deep/b.txt"), "bee\n").unwrap();
    fs::write(r.join("run.sh"), "#!/bin/sh\n").unwrap();
    fs::set_permissions(r.join("run.sh"), fs::Permissions::from_mode(0o755)).unwrap();
    symlink("a.txt", r.join("link")).unwrap();
    fs::write(r.join(".gitattributes"), "*.txt filter=evil\n").unwrap();
    git(&r, &["add", "."], T1);
    git(&r, &["commit", "-q", "-m", "first"], T1);
    git(&r, &["tag", "v1"], T1);
    let first = git(&r, &["rev-parse", "HEAD"], T1);
    fs::write(r.join("a.txt"), "two\n").unwrap();
    git(&r, &["commit", "-q", "-am", "second"], T2);
    let second = git(&r, &["rev-parse", "HEAD"], T2);
    let marker = d.path().join("PWNED");
    let cmd = format!("touch '{}'; cat", marker.display());
    git(&r, &["config", "filter.evil.smudge", &cmd], T2);
    git(&r, &["config", "filter.evil.clean", &cmd], T2);
    git(&r, &["config", "filter.evil.required", "true"], T2);
    fs::write(r.join("untracked.bin"), "not mine\n").unwrap();
    (d, r, first, second)
}

fn source(r: &Path, r#ref: Option<&str>, rev: Option<&str>) -> Source {
    Source::Git {
        url: format!("file://{}", r.display()),
        r#ref: r#ref.map(str::to_string),
        rev: rev.map(str::to_string),
    }
}

#[test]
fn fetch_by_ref_and_rev() {
    if !have_git() {
        return;
    }
    let (d, r, first, second) = repo();
    let (_root, f) = fetcher();

    let head = f
        .fetch(&source(&r, None, None), Path::new("/"), None)
        .unwrap();
    assert_eq!(head.locked, source(&r, None, Some(&second)));
    assert_eq!(head.last_modified, Some(T2));
    let p = &head.physical;
    assert_eq!(fs::read_to_string(p.join("a.txt")).unwrap(), "two\n");
    assert_eq!(
        fs::read_to_string(p.join("sub/deep/b.txt")).unwrap(),
        "bee\n"
    );
    assert_eq!(fs::read_link(p.join("link")).unwrap(), Path::new("a.txt"));
    let mode = fs::metadata(p.join("run.sh")).unwrap().permissions().mode();
    assert_ne!(mode & 0o111, 0, "run.sh keeps its executable bit");
    assert!(!p.join("untracked.bin").exists());
    assert!(!p.join(".git").exists());
    if let Some(n) = nix_hash(p) {
        assert_eq!(head.nar_hash.to_nix32(), n);
    }

    let main = f
        .fetch(&source(&r, Some("main"), None), Path::new("/"), None)
        .unwrap();
    assert_eq!(main.locked, source(&r, Some("main"), Some(&second)));
    assert_eq!(main.store_path, head.store_path);

    let v1 = f
        .fetch(&source(&r, Some("v1"), None), Path::new("/"), None)
        .unwrap();
    assert_eq!(v1.locked, source(&r, Some("v1"), Some(&first)));
    let old = f
        .fetch(&source(&r, None, Some(&first)), Path::new("/"), None)
        .unwrap();
    assert_eq!(old.locked, source(&r, None, Some(&first)));
    assert_eq!(old.last_modified, Some(T1));
    assert_eq!(
        fs::read_to_string(old.physical.join("a.txt")).unwrap(),
        "one\n"
    );
    assert_eq!(old.store_path, v1.store_path);
    assert_ne!(old.nar_hash, head.nar_hash);

    // Pinned and checked: the same object again.
    let again = f
        .fetch(
            &source(&r, None, Some(&first)),
            Path::new("/"),
            Some(&old.nar_hash),
        )
        .unwrap();
    assert_eq!(again, old);
    let e = f
        .fetch(
            &source(&r, None, Some(&first)),
            Path::new("/"),
            Some(&head.nar_hash),
        )
        .unwrap_err();
    assert!(e.0.contains("has changed"), "{e}");

    // The repository's filter driver never ran.
    assert!(!d.path().join("PWNED").exists());
}

#[test]
fn git_errors_are_one_line_and_name_the_source() {
    if !have_git() {
        return;
    }
    let (_d, r, _, _) = repo();
    let (_root, f) = fetcher();
    let base = Path::new("/");
    let cases = [
        (source(&r.join("nope"), None, None), "does not exist"),
        (source(&r.join("sub"), None, None), "not a git repository"),
        (
            source(&r, Some("no-such-branch"), None),
            "ref 'no-such-branch'",
        ),
        (source(&r, Some("--output=/tmp/x"), None), "not a valid ref"),
        (
            source(&r, None, Some("0123456789abcdef0123456789abcdef01234567")),
            "commit '0123456789abcdef0123456789abcdef01234567'",
        ),
    ];
    for (src, needle) in cases {
        let e = f.fetch(&src, base, None).unwrap_err();
        assert!(e.0.contains(needle), "{src}: {e}");
        assert!(e.0.contains(&src.to_string()), "{e}");
        assert!(!e.0.contains('\n'), "{e}");
    }
    assert!(f.store().all_valid().unwrap().is_empty());
}

#[test]
fn local_tree_lists_tracked_files_and_detects_changes() {
    if !have_git() {
        return;
    }
    let (d, r, _, second) = repo();
    let (_root, f) = fetcher();

    let t = f.local_tree(&r.join("sub")).unwrap();
    assert_eq!(t.dir, fs::canonicalize(r.join("sub")).unwrap());
    let g = t.git.expect("in a work tree");
    let top = fs::canonicalize(&r).unwrap();
    assert_eq!(g.top, top);
    assert_eq!(g.rev.as_deref(), Some(second.as_str()));
    assert_eq!(g.dirty_rev, None);
    assert_eq!(g.tracked.len(), 5);
    assert_eq!(g.tracked.check(&top.join("a.txt")), Tracked::Yes);
    assert_eq!(g.tracked.check(&top.join("sub/deep")), Tracked::Yes);
    assert_eq!(g.tracked.check(&top.join("untracked.bin")), Tracked::No);

    // An untracked file does not make the tree dirty; a changed tracked one does.
    fs::write(r.join("more-untracked"), "x").unwrap();
    assert!(f.local_tree(&r).unwrap().git.unwrap().rev.is_some());
    fs::write(r.join("a.txt"), "three\n").unwrap();
    let g = f.local_tree(&r).unwrap().git.unwrap();
    assert_eq!(
        (g.rev, g.dirty_rev.as_deref()),
        (None, Some(second.as_str()))
    );

    // The clean filter was disabled while git compared the changed file.
    assert!(!d.path().join("PWNED").exists());

    // A staged new file is tracked.
    fs::write(r.join("new.nix"), "n\n").unwrap();
    git(&r, &["add", "new.nix"], T2);
    let g = f.local_tree(&r).unwrap().git.unwrap();
    assert_eq!(g.tracked.check(&top.join("new.nix")), Tracked::Yes);
    assert_eq!(g.tracked.len(), 6);
}

#[test]
fn local_tree_without_commits_or_outside_git() {
    if !have_git() {
        return;
    }
    let (_root, f) = fetcher();
    let plain = tempfile::tempdir().unwrap();
    let t = f.local_tree(plain.path()).unwrap();
    assert_eq!(t.git, None);
    assert_eq!(t.dir, fs::canonicalize(plain.path()).unwrap());

    let d = tempfile::tempdir().unwrap();
    git(d.path(), &["init", "-q"], T1);
    fs::write(d.path().join("flake.nix"), "{ }\n").unwrap();
    fs::write(d.path().join("junk"), "j").unwrap();
    git(d.path(), &["add", "flake.nix"], T1);
    let g = f.local_tree(d.path()).unwrap().git.unwrap();
    assert_eq!((g.rev, g.dirty_rev), (None, None));
    assert_eq!(g.tracked.len(), 1);
    let top = fs::canonicalize(d.path()).unwrap();
    assert_eq!(g.tracked.check(&top.join("flake.nix")), Tracked::Yes);
    assert_eq!(g.tracked.check(&top.join("junk")), Tracked::No);

    let e = f.local_tree(&d.path().join("missing")).unwrap_err();
    assert!(e.0.contains("missing"), "{e}");
}

#[test]
fn committer_time_and_paths() {
    let c = b"tree abc\nauthor a <a> 1 +0000\ncommitter c <c> 1700000000 +0100\n\nmsg 5 +0000\n";
    assert_eq!(super::committer_time(c), Some(1_700_000_000));
    assert!(super::tree::safe_path(b"a/b").is_ok());
    for bad in [
        &b"../x"[..],
        b"a/../b",
        b"/abs",
        b"a//b",
        b".git/config",
        b"x/.GIT/y",
        b"",
    ] {
        assert!(
            super::tree::safe_path(bad).is_err(),
            "{}",
            String::from_utf8_lossy(bad)
        );
    }
}
