//! Tests of `tarball` and `github` inputs against a one-shot HTTP server on
//! the loopback address, with archives made by the `tar` and `git` CLIs.

use std::fs;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};

use rocmx_lang::flake::fetch::InputFetcher;
use rocmx_lang::flake::source::Source;
use rocmx_store::{Hash, HashAlgo};

use super::{github_base, GITHUB_URL};
use crate::fetcher::git::tests::{git, have_git, repo};
use crate::fetcher::tests::{fetcher, nix_hash};

/// Serves `routes` (path → body; anything else is a 404) on 127.0.0.1 for
/// `n` connections, recording the request paths.
fn serve(routes: Vec<(String, Vec<u8>)>, n: usize) -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    std::thread::spawn(move || {
        for _ in 0..n {
            let Ok((mut s, _)) = listener.accept() else {
                return;
            };
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && head.len() < 16384 {
                if s.read(&mut byte).unwrap_or(0) == 0 {
                    break;
                }
                head.push(byte[0]);
            }
            let head = String::from_utf8_lossy(&head);
            let path = head.split(' ').nth(1).unwrap_or("").to_string();
            log.lock().unwrap().push(path.clone());
            let (status, body) = match routes.iter().find(|(p, _)| *p == path) {
                Some((_, b)) => ("200 OK", b.clone()),
                None => ("404 Not Found", b"not found".to_vec()),
            };
            let _ = write!(
                s,
                "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = s.write_all(&body);
        }
    });
    (addr, seen)
}

fn run(cmd: &mut Command) -> Vec<u8> {
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{cmd:?}: {out:?}");
    out.stdout
}

/// `pkg-1.0/{README,src/main.c,link}` as a `.tar.gz` made by `tar`, entries
/// dated `mtime`.
fn tarball(mtime: u64) -> Vec<u8> {
    let d = tempfile::tempdir().unwrap();
    let top = d.path().join("pkg-1.0");
    fs::create_dir_all(top.join("src")).unwrap();
    fs::write(top.join("README"), "read me\n").unwrap();
    fs::write(top.join("src/main.c"), "int main(void) { return 0; }\n").unwrap();
    std::os::unix::fs::symlink("src/main.c", top.join("link")).unwrap();
    let out = d.path().join("pkg.tar.gz");
    run(Command::new("tar")
        .arg("-czf")
        .arg(&out)
        .arg(format!("--mtime=@{mtime}"))
        .arg("-C")
        .arg(d.path())
        .arg("pkg-1.0"));
    fs::read(out).unwrap()
}

#[test]
fn tarball_over_http_and_file() {
    let tgz = tarball(1_650_000_000);
    let (addr, seen) = serve(vec![("/pkg-1.0.tar.gz".into(), tgz.clone())], 3);
    let (_root, f) = fetcher();
    let src = Source::Tarball {
        url: format!("http://{addr}/pkg-1.0.tar.gz"),
    };
    let got = f.fetch(&src, Path::new("/"), None).unwrap();
    assert_eq!(got.locked, src);
    assert_eq!(got.last_modified, Some(1_650_000_000));
    assert_eq!(
        fs::read_to_string(got.physical.join("README")).unwrap(),
        "read me\n"
    );
    assert_eq!(
        fs::read_link(got.physical.join("link")).unwrap(),
        Path::new("src/main.c")
    );
    if let Some(n) = nix_hash(&got.physical) {
        assert_eq!(got.nar_hash.to_nix32(), n);
    }

    // A wrong locked hash: refused before anything is added.
    let before = f.store().all_valid().unwrap();
    let wrong = Hash::digest(HashAlgo::Sha256, b"x");
    let e = f.fetch(&src, Path::new("/"), Some(&wrong)).unwrap_err();
    assert!(
        e.0.contains("has changed") && e.0.contains(&src.to_string()),
        "{e}"
    );
    assert_eq!(f.store().all_valid().unwrap(), before);

    // A missing archive: one line naming the input and the cause.
    let missing = Source::Tarball {
        url: format!("http://{addr}/nope.tar.gz"),
    };
    let e = f.fetch(&missing, Path::new("/"), None).unwrap_err();
    assert!(
        e.0.contains(&missing.to_string()) && e.0.contains("404"),
        "{e}"
    );
    assert!(!e.0.contains('\n'));
    assert_eq!(
        *seen.lock().unwrap(),
        ["/pkg-1.0.tar.gz", "/pkg-1.0.tar.gz", "/nope.tar.gz"]
    );

    // The same archive from a file:// URL: the same object.
    let d = tempfile::tempdir().unwrap();
    fs::write(d.path().join("pkg.tar.gz"), &tgz).unwrap();
    let local = Source::Tarball {
        url: format!("file://{}/pkg.tar.gz", d.path().display()),
    };
    let again = f
        .fetch(&local, Path::new("/"), Some(&got.nar_hash))
        .unwrap();
    assert_eq!(again.store_path, got.store_path);
}

#[test]
fn github_archive_is_locked_to_its_commit() {
    if !have_git() {
        return;
    }
    let (_d, r, first, second) = repo();
    let (_root, f) = fetcher();
    // What `git+file:` gives for the same commit.
    let by_git = f
        .fetch(
            &Source::Git {
                url: format!("file://{}", r.display()),
                r#ref: None,
                rev: Some(second.clone()),
            },
            Path::new("/"),
            None,
        )
        .unwrap();
    let archive = |rev: &str| {
        let prefix = format!("--prefix=repo-{rev}/");
        run(Command::new("git")
            .current_dir(&r)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .args(["archive", "--format=tar.gz", &prefix, rev]))
    };
    let (addr, seen) = serve(
        vec![
            ("/ROCm/repo/archive/main.tar.gz".into(), archive(&second)),
            (
                format!("/ROCm/repo/archive/{first}.tar.gz"),
                archive(&second),
            ),
        ],
        2,
    );
    let f = f.with_github_base(&format!("http://{addr}/"));
    let src = Source::GitHub {
        owner: "ROCm".into(),
        repo: "repo".into(),
        r#ref: Some("main".into()),
        rev: None,
    };
    let got = f.fetch(&src, Path::new("/"), None).unwrap();
    assert_eq!(
        got.locked,
        Source::GitHub {
            owner: "ROCm".into(),
            repo: "repo".into(),
            r#ref: None,
            rev: Some(second.clone()),
        }
    );
    assert_eq!(got.nar_hash, by_git.nar_hash);
    assert_eq!(got.store_path, by_git.store_path);
    assert_eq!(got.last_modified, by_git.last_modified);

    // An archive of another commit than the one asked for is refused.
    let pinned = Source::GitHub {
        owner: "ROCm".into(),
        repo: "repo".into(),
        r#ref: None,
        rev: Some(first.clone()),
    };
    let e = f.fetch(&pinned, Path::new("/"), None).unwrap_err();
    assert!(e.0.contains(&format!("not {first}")), "{e}");
    assert_eq!(
        *seen.lock().unwrap(),
        [
            "/ROCm/repo/archive/main.tar.gz".to_string(),
            format!("/ROCm/repo/archive/{first}.tar.gz")
        ]
    );
    let _ = git(&r, &["status", "--short"], 0);
}

#[test]
fn github_base_and_bad_names() {
    assert_eq!(github_base(None), GITHUB_URL);
    assert_eq!(github_base(Some(String::new())), GITHUB_URL);
    assert_eq!(
        github_base(Some("http://127.0.0.1:9/".into())),
        "http://127.0.0.1:9"
    );
    let (_root, f) = fetcher();
    let f = f.with_github_base("http://127.0.0.1:9");
    for (owner, r#ref) in [("a/b", None), ("ok", Some("../x")), ("ok", Some("x?y"))] {
        let src = Source::GitHub {
            owner: owner.into(),
            repo: "r".into(),
            r#ref: r#ref.map(str::to_string),
            rev: None,
        };
        let e = f.fetch(&src, Path::new("/"), None).unwrap_err();
        assert!(e.0.contains("invalid GitHub"), "{e}");
    }
}
