//! Tests of [`super`]: trees far deeper than `PATH_MAX` allows to name, walked on small
//! stacks.

use super::*;
use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};

/// Runs `f` on a thread with a 256 KiB stack: native recursion over thousands of levels
/// would overflow it.
fn on_small_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(f)
        .expect("spawn")
        .join()
        .expect("no panic")
}

#[test]
fn removes_a_20000_level_tree_with_locked_directories() {
    let tmp = tempfile::tempdir().expect("tmp");
    let root = tmp.path().join("deep");
    let bottom = make_chain(&root, 20_000, "a");
    rustix::fs::mkdirat(&bottom, "locked", Mode::from_raw_mode(0o000)).expect("mkdir");
    let f = rustix::fs::openat(
        &bottom,
        "f",
        OFlags::CREATE | OFlags::WRONLY,
        Mode::from_raw_mode(0o444),
    )
    .expect("file");
    drop(f);
    rustix::fs::symlinkat("/", &bottom, "up").expect("symlink");
    rustix::fs::fchmod(&bottom, Mode::from_raw_mode(0o500)).expect("chmod");
    drop(bottom);
    let r = root.clone();
    on_small_stack(move || remove_tree(&r)).expect("removed");
    assert!(fs::symlink_metadata(&root).is_err());
    assert!(fs::read_dir(tmp.path()).expect("list").next().is_none());
}

#[test]
fn removes_files_and_symlinks_without_following_and_ignores_missing_paths() {
    let tmp = tempfile::tempdir().expect("tmp");
    let outside = tmp.path().join("outside");
    fs::create_dir(&outside).expect("mkdir");
    fs::write(outside.join("keep"), "x").expect("write");
    let tree = tmp.path().join("t");
    fs::create_dir_all(tree.join("d/e")).expect("mkdir");
    symlink(&outside, tree.join("d/link")).expect("symlink");
    fs::set_permissions(tree.join("d"), fs::Permissions::from_mode(0o555)).expect("chmod");
    remove_tree(&tree).expect("tree");
    assert!(!tree.exists());
    assert!(
        outside.join("keep").exists(),
        "the symlink was not followed"
    );
    let link = tmp.path().join("l");
    symlink(&outside, &link).expect("symlink");
    remove_tree(&link).expect("link");
    assert!(fs::symlink_metadata(&link).is_err() && outside.join("keep").exists());
    remove_tree(&outside.join("keep")).expect("file");
    assert!(!outside.join("keep").exists());
    remove_tree(&tmp.path().join("missing")).expect("missing is fine");
    remove_tree(&tmp.path().join("missing/below")).expect("missing parent is fine");
}

#[test]
fn walks_up_to_the_limit_and_refuses_one_level_more() {
    let tmp = tempfile::tempdir().expect("tmp");
    let root = tmp.path().join("limit");
    // Directories down to level MAX_DEPTH - 1 and a file at MAX_DEPTH: accepted.
    let bottom = make_chain(&root, MAX_DEPTH - 1, "a");
    let f = rustix::fs::openat(&bottom, "f", OFlags::CREATE | OFlags::WRONLY, Mode::RUSR)
        .expect("file");
    drop(f);
    let r = root.clone();
    on_small_stack(move || check_depth(&r)).expect("at the limit");
    // One more level: refused, naming the root and the limit.
    rustix::fs::mkdirat(&bottom, "b", Mode::RWXU).expect("mkdir");
    let b = rustix::fs::openat(&bottom, "b", dir_flags(), Mode::empty()).expect("open");
    rustix::fs::mkdirat(&b, "c", Mode::RWXU).expect("mkdir");
    let r = root.clone();
    let e = on_small_stack(move || check_depth(&r)).expect_err("too deep");
    assert!(
        matches!(e, TreeError::TooDeep { max: MAX_DEPTH, .. }),
        "{e}"
    );
    assert_eq!(
        e.to_string(),
        format!(
            "{root:?} is nested deeper than 2048 levels, the most a store object may have \
             (its root is level 1)"
        )
    );
    remove_tree(&root).expect("cleanup");
}

#[test]
fn refuses_a_20000_level_tree_and_clears_setid_bits_past_path_max() {
    let tmp = tempfile::tempdir().expect("tmp");
    let deep = tmp.path().join("deep");
    drop(make_chain(&deep, 20_000, "a"));
    let d = deep.clone();
    let e = on_small_stack(move || clear_setid_bits(&d)).expect_err("too deep");
    assert!(matches!(e, TreeError::TooDeep { .. }), "{e}");
    remove_tree(&deep).expect("cleanup");

    // 1500 levels of 8-byte names: 13 KB paths, within the depth limit.
    let root = tmp.path().join("long");
    let bottom = make_chain(&root, 1500, "abcdefgh");
    let f = rustix::fs::openat(
        &bottom,
        "suid",
        OFlags::CREATE | OFlags::WRONLY,
        Mode::from_raw_mode(0o755),
    )
    .expect("file");
    rustix::fs::fchmod(&f, Mode::from_raw_mode(0o4755)).expect("setuid");
    rustix::fs::fchmod(&bottom, Mode::from_raw_mode(0o2755)).expect("setgid");
    let r = root.clone();
    on_small_stack(move || clear_setid_bits(&r)).expect("cleared");
    let mode = |fd: BorrowedFd<'_>| rustix::fs::fstat(fd).expect("stat").st_mode & 0o7777;
    assert_eq!(mode(f.as_fd()), 0o755);
    assert_eq!(mode(bottom.as_fd()), 0o755);
    remove_tree(&root).expect("cleanup");
}

#[test]
fn long_paths_in_messages_are_shortened() {
    let frames: Vec<Frame> = (0..3000)
        .map(|i| Frame {
            name: OsString::from(if i == 2999 { "last" } else { "a" }),
            id: (0, 0),
            todo: Vec::new(),
        })
        .collect();
    let p = shown(Path::new("/r"), &frames, Some(OsStr::new("x")));
    assert_eq!(p, Path::new("/r/…2997 levels…/a/last/x"));
    assert_eq!(
        shown(Path::new("/r"), &frames[..2], None),
        Path::new("/r/a")
    );
}

#[test]
fn errors_convert_to_io_errors_of_the_same_kind_naming_the_path() {
    let tmp = tempfile::tempdir().expect("tmp");
    let file = tmp.path().join("f");
    fs::write(&file, "x").expect("write");
    // A path below a file: its parent cannot be opened as a directory.
    let below = file.join("x");
    let e: io::Error = remove_tree(&below).expect_err("not a directory").into();
    assert_eq!(e.kind(), io::ErrorKind::NotADirectory);
    assert!(e.to_string().contains(&format!("{file:?}")), "{e}");
    let e: io::Error = TreeError::TooDeep {
        path: file.clone(),
        max: MAX_DEPTH,
    }
    .into();
    assert_eq!(e.kind(), io::ErrorKind::Other);
    assert!(e.to_string().contains("nested deeper than 2048"), "{e}");
}
