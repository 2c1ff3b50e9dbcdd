//! Unit tests of the mount plan: literal action lists for typical specs.
use std::ffi::CString;

use super::*;

/// The actions' descriptions, without those protecting `/proc` (they depend on the
/// host's kernel; `planner::tests::proc_is_protected` checks them).
fn describe(actions: &[PlannedAction]) -> Vec<String> {
    actions
        .iter()
        .map(|a| String::from_utf8_lossy(&a.what).into_owned())
        .filter(|d| !d.starts_with("making read-only /proc/") && !d.starts_with("hiding /proc/"))
        .collect()
}

/// A file input at host path `h`, inside path `i`.
fn file_at(h: &str, i: &str) -> (PathBuf, PathBuf, InputKind) {
    (PathBuf::from(h), PathBuf::from(i), InputKind::File)
}

/// A directory input at host path `h`, inside path `i`.
fn dir_at(h: &str, i: &str) -> (PathBuf, PathBuf, InputKind) {
    (PathBuf::from(h), PathBuf::from(i), InputKind::Dir)
}

/// A plan input with no rootfs, no resolv.conf, no `/dev/shm` size: the output
/// `/rocmx/store/zzz-out`, its directory bound from descriptor 7.
fn input<'a>(
    root: &'a Path,
    inputs: Vec<(PathBuf, PathBuf, InputKind)>,
    build_dir: &'a Path,
    variant: &'a super::super::Variant,
    work_dirs: Option<(&'a Path, &'a Path)>,
    shared: Option<&'a SharedRw>,
) -> PlanInput<'a> {
    PlanInput {
        root,
        inputs,
        output_parent_host: Path::new("/proc/self/fd/7"),
        output_inside: Path::new("/rocmx/store/zzz-out"),
        build_dir,
        rootfs: None,
        resolv_conf: None,
        shm_size: None,
        variant,
        work_dirs,
        shared,
    }
}

#[test]
fn inside_paths_are_checked() {
    for ok in ["/rocmx/store/abc-x", "/a"] {
        check_inside_path(Path::new(ok), "input").unwrap();
    }
    let cases = [
        ("rocmx/x", "input rocmx/x: not an absolute path"),
        ("/", "input /: not a normalised path below /"),
        ("/a/../b", "input /a/../b: not a normalised path"),
        ("/a/", "input /a/: not a normalised path below /"),
        (
            "/dev/x",
            "input /dev/x: the sandbox provides /dev, /proc, /etc and /build itself",
        ),
        (
            "/build",
            "input /build: the sandbox provides /dev, /proc, /etc and /build itself",
        ),
    ];
    for (p, msg) in cases {
        let e = check_inside_path(Path::new(p), "input").unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("invalid sandbox specification: {msg}")
        );
    }
}

#[test]
fn plan_without_rootfs() {
    let pi = PlanInput {
        root: Path::new("/s/root"),
        inputs: vec![
            (
                PathBuf::from("/h/in1"),
                PathBuf::from("/rocmx/store/aaa-in1"),
                InputKind::Dir,
            ),
            (
                PathBuf::from("/h/f"),
                PathBuf::from("/rocmx/store/bbb-f"),
                InputKind::File,
            ),
            (
                PathBuf::from("/h/l"),
                PathBuf::from("/rocmx/store/ccc-l"),
                InputKind::Symlink(PathBuf::from("aaa-in1")),
            ),
        ],
        output_parent_host: Path::new("/s/out"),
        output_inside: Path::new("/rocmx/store/zzz-out"),
        build_dir: Path::new("/b"),
        rootfs: None,
        resolv_conf: None,
        shm_size: None,
        variant: &super::super::Variant::default(),
        work_dirs: None,
        shared: None,
    };
    let plan = build(&pi).unwrap();
    let expected = [
        "mounting the root tmpfs",
        "entering the root tmpfs",
        "creating /.rocmx-tmp",
        "mounting /.rocmx-tmp (tmpfs)",
        "creating /.rocmx-tmp/empty",
        "creating /.rocmx-tmp/inputs-0",
        "mounting /.rocmx-tmp/inputs-0 (inputs, read-only)",
        "creating /etc",
        "writing /etc/passwd",
        "writing /etc/group",
        "writing /etc/hosts",
        "creating /dev",
        "creating mount point /dev/null",
        "binding /dev/null from the host",
        "creating mount point /dev/zero",
        "binding /dev/zero from the host",
        "creating mount point /dev/full",
        "binding /dev/full from the host",
        "creating mount point /dev/random",
        "binding /dev/random from the host",
        "creating mount point /dev/urandom",
        "binding /dev/urandom from the host",
        "creating mount point /dev/tty",
        "binding /dev/tty from the host",
        "creating /dev/pts",
        "mounting /dev/pts (devpts)",
        "creating symlink /dev/ptmx",
        "creating /dev/shm",
        "mounting /dev/shm (tmpfs)",
        "creating symlink /dev/fd",
        "creating symlink /dev/stdin",
        "creating symlink /dev/stdout",
        "creating symlink /dev/stderr",
        "creating /proc",
        "mounting /proc (proc)",
        "creating /build",
        "binding /build (the build directory)",
        "creating /rocmx",
        "creating /rocmx/store",
        "binding /rocmx/store (the output's directory)",
        "creating /rocmx/store/aaa-in1",
        "binding /rocmx/store/aaa-in1 (input) read-only",
        "creating mount point /rocmx/store/bbb-f",
        "binding /rocmx/store/bbb-f (input) read-only",
        "creating symlink /rocmx/store/ccc-l",
        "detaching /.rocmx-tmp (and what the set-up mounted in it)",
        "removing /.rocmx-tmp",
    ];
    assert_eq!(describe(&plan), expected);
    // Init enters the root once it is mounted; every later path below the root is
    // relative to it, so no action names the root's host path again.
    assert!(
        matches!(&plan[1].action, Action::EnterRoot { path } if path.to_str() == Ok("/s/root"))
    );
    for a in &plan[2..] {
        let shown = format!("{:?}", a.action);
        assert!(!shown.contains("/s/root"), "{shown}");
    }
    // Inputs come from the overlay of their host directory, named by descriptor.
    match &plan[6].action {
        Action::Overlay {
            lower,
            empty,
            target,
        } => {
            assert_eq!(lower.to_str().unwrap(), "/h");
            assert_eq!(empty.to_str().unwrap(), ".rocmx-tmp/empty");
            assert_eq!(target.to_str().unwrap(), ".rocmx-tmp/inputs-0");
        }
        other => panic!("unexpected {other:?}"),
    }
    let bbb = plan
        .iter()
        .find(|a| matches!(&a.action, Action::BindFrom { target, .. } if target.to_str() == Ok("rocmx/store/bbb-f")))
        .unwrap();
    match &bbb.action {
        Action::BindFrom {
            source,
            fallback,
            flags,
            ..
        } => {
            assert_eq!(source.to_str().unwrap(), ".rocmx-tmp/inputs-0/f");
            assert_eq!(fallback.to_str().unwrap(), "/h/f");
            assert_eq!(*flags, ro_flags());
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn file_inputs_in_the_output_directory_get_linked_mount_points() {
    let file = |h: &str, i: &str| (PathBuf::from(h), PathBuf::from(i), InputKind::File);
    let pi = PlanInput {
        root: Path::new("/s"),
        inputs: vec![
            file("/h/a", "/rocmx/store/aaa-a"),
            file("/g/b", "/rocmx/store/bbb-b"),
            file("/h/c", "/elsewhere/ccc-c"),
            (
                PathBuf::from("/h/d"),
                PathBuf::from("/rocmx/store/ddd-d"),
                InputKind::Dir,
            ),
        ],
        output_parent_host: Path::new("/proc/self/fd/7"),
        output_inside: Path::new("/rocmx/store/zzz-out"),
        build_dir: Path::new("/b"),
        rootfs: None,
        resolv_conf: None,
        shm_size: None,
        variant: &super::super::Variant::default(),
        work_dirs: None,
        shared: None,
    };
    let plan = build(&pi).unwrap();
    let tail: Vec<String> = describe(&plan)
        .into_iter()
        .skip_while(|s| s != "creating /elsewhere")
        .collect();
    assert_eq!(
        tail,
        [
            "creating /elsewhere",
            "creating mount point /elsewhere/ccc-c",
            "binding /elsewhere/ccc-c (input) read-only",
            "creating /rocmx",
            "creating /rocmx/store",
            "binding /rocmx/store (the output's directory)",
            "creating /rocmx/store/.rocmx-mount-point (for mount points)",
            "creating mount point /rocmx/store/aaa-a",
            "binding /rocmx/store/aaa-a (input) read-only",
            "creating mount point /rocmx/store/bbb-b",
            "binding /rocmx/store/bbb-b (input) read-only",
            "creating /rocmx/store/ddd-d",
            "binding /rocmx/store/ddd-d (input) read-only",
            "detaching /.rocmx-tmp (and what the set-up mounted in it)",
            "removing /.rocmx-tmp",
            "removing /rocmx/store/.rocmx-mount-point (for mount points)",
        ]
    );
    let kinds: Vec<&Action> = plan.iter().map(|a| &a.action).collect();
    let links: Vec<(String, String)> = kinds
        .iter()
        .filter_map(|a| match a {
            Action::Link { target, path } => Some((
                target.to_str().unwrap().to_string(),
                path.to_str().unwrap().to_string(),
            )),
            _ => None,
        })
        .collect();
    let t = "rocmx/store/.rocmx-mount-point".to_string();
    assert_eq!(
        links,
        [
            (t.clone(), "rocmx/store/aaa-a".to_string()),
            (t.clone(), "rocmx/store/bbb-b".to_string()),
        ]
    );
    assert!(kinds
        .iter()
        .any(|a| matches!(a, Action::Touch { path } if path.to_str() == Ok("elsewhere/ccc-c"))));
    assert!(kinds.iter().any(
        |a| matches!(a, Action::Bind { source, .. } if source.to_str() == Ok("/proc/self/fd/7"))
    ));
    // Every input comes from its directory's overlay (/g and /h).
    assert_eq!(
        kinds
            .iter()
            .filter(|a| matches!(a, Action::Overlay { .. }))
            .count(),
        2
    );
    assert_eq!(
        kinds
            .iter()
            .filter(|a| matches!(a, Action::BindFrom { .. }))
            .count(),
        4
    );
}

#[test]
fn inputs_are_bound_from_an_overlay_of_their_directory() {
    let mut inputs: Vec<(PathBuf, PathBuf, InputKind)> = ["aaa-a", "bbb-b", "ccc-c"]
        .iter()
        .map(|n| {
            (
                PathBuf::from("/st").join(n),
                PathBuf::from("/rocmx/store").join(n),
                InputKind::File,
            )
        })
        .collect();
    inputs.push((
        PathBuf::from("/st/ddd-d"),
        PathBuf::from("/rocmx/store/ddd-d"),
        InputKind::Dir,
    ));
    inputs.push((
        PathBuf::from("/st/eee-e"),
        PathBuf::from("/rocmx/store/eee-e"),
        InputKind::Symlink(PathBuf::from("ddd-d")),
    ));
    inputs.push((
        PathBuf::from("/other/fff-f"),
        PathBuf::from("/rocmx/store/fff-f"),
        InputKind::Dir,
    ));
    let pi = PlanInput {
        root: Path::new("/s"),
        inputs,
        output_parent_host: Path::new("/proc/self/fd/7"),
        output_inside: Path::new("/rocmx/store/zzz-out"),
        build_dir: Path::new("/b"),
        rootfs: None,
        resolv_conf: None,
        shm_size: None,
        variant: &super::super::Variant::default(),
        work_dirs: None,
        shared: None,
    };
    let plan = build(&pi).unwrap();
    let tail: Vec<String> = describe(&plan)
        .into_iter()
        .skip_while(|s| s != "creating /.rocmx-tmp/inputs-0")
        .take(8)
        .collect();
    assert_eq!(
        tail,
        [
            "creating /.rocmx-tmp/inputs-0",
            "mounting /.rocmx-tmp/inputs-0 (inputs, read-only)",
            "creating /.rocmx-tmp/inputs-1",
            "mounting /.rocmx-tmp/inputs-1 (inputs, read-only)",
            "creating /etc",
            "writing /etc/passwd",
            "writing /etc/group",
            "writing /etc/hosts",
        ]
    );
    let tail: Vec<String> = describe(&plan)
        .into_iter()
        .skip_while(|s| s != "creating /rocmx")
        .collect();
    assert_eq!(
        tail,
        [
            "creating /rocmx",
            "creating /rocmx/store",
            "binding /rocmx/store (the output's directory)",
            "creating /rocmx/store/.rocmx-mount-point (for mount points)",
            "creating mount point /rocmx/store/aaa-a",
            "binding /rocmx/store/aaa-a (input) read-only",
            "creating mount point /rocmx/store/bbb-b",
            "binding /rocmx/store/bbb-b (input) read-only",
            "creating mount point /rocmx/store/ccc-c",
            "binding /rocmx/store/ccc-c (input) read-only",
            "creating /rocmx/store/ddd-d",
            "binding /rocmx/store/ddd-d (input) read-only",
            "creating symlink /rocmx/store/eee-e",
            "creating /rocmx/store/fff-f",
            "binding /rocmx/store/fff-f (input) read-only",
            "detaching /.rocmx-tmp (and what the set-up mounted in it)",
            "removing /.rocmx-tmp",
            "removing /rocmx/store/.rocmx-mount-point (for mount points)",
        ]
    );
    let binds: Vec<String> = plan
        .iter()
        .filter_map(|a| match &a.action {
            Action::Bind { source, target, .. } => Some(format!(
                "bind {} {}",
                source.to_str().unwrap(),
                target.to_str().unwrap()
            )),
            Action::BindFrom {
                source,
                target,
                fallback,
                flags,
            } => {
                assert_eq!(*flags, ro_flags());
                Some(format!(
                    "from {} {} {}",
                    source.to_str().unwrap(),
                    target.to_str().unwrap(),
                    fallback.to_str().unwrap()
                ))
            }
            _ => None,
        })
        .filter(|b| b.contains("rocmx/store/"))
        .filter(|b| !b.contains("/proc/self/fd"))
        .collect();
    assert_eq!(
        binds,
        [
            "from .rocmx-tmp/inputs-1/aaa-a rocmx/store/aaa-a /st/aaa-a",
            "from .rocmx-tmp/inputs-1/bbb-b rocmx/store/bbb-b /st/bbb-b",
            "from .rocmx-tmp/inputs-1/ccc-c rocmx/store/ccc-c /st/ccc-c",
            "from .rocmx-tmp/inputs-1/ddd-d rocmx/store/ddd-d /st/ddd-d",
            "from .rocmx-tmp/inputs-0/fff-f rocmx/store/fff-f /other/fff-f",
        ]
    );
}

/// With overlays, the inputs directly in the output's directory get their mount points
/// (and symlinks) in a tmpfs under that directory's overlay, none through the overlay
/// on the host's disk; if the overlay cannot be mounted, the same entries are made in
/// the bound directory instead.
#[test]
fn mount_points_in_the_output_directory_live_in_the_overlays_lower_layer() {
    let variant = super::super::Variant::default();
    let pi = input(
        Path::new("/s"),
        vec![
            file_at("/st/aaa-a", "/rocmx/store/aaa-a"),
            file_at("/st/bbb-b", "/rocmx/store/bbb-b"),
            dir_at("/st/ddd-d", "/rocmx/store/ddd-d"),
            (
                PathBuf::from("/st/eee-e"),
                PathBuf::from("/rocmx/store/eee-e"),
                InputKind::Symlink(PathBuf::from("ddd-d")),
            ),
            file_at("/h/c", "/elsewhere/ccc-c"),
        ],
        Path::new("/b"),
        &variant,
        Some((Path::new("/w/build"), Path::new("/w/out"))),
        None,
    );
    let plan = build(&pi).unwrap();
    let tail: Vec<String> = describe(&plan)
        .into_iter()
        .skip_while(|s| s != "creating /elsewhere")
        .collect();
    assert_eq!(
        tail,
        [
            "creating /elsewhere",
            "creating mount point /elsewhere/ccc-c",
            "binding /elsewhere/ccc-c (input) read-only",
            "creating /.rocmx-tmp/lower",
            "creating mount point /rocmx/store/aaa-a (in the overlay's lower layer)",
            "creating mount point /rocmx/store/bbb-b (in the overlay's lower layer)",
            "creating mount point /rocmx/store/ddd-d (in the overlay's lower layer)",
            "creating symlink /rocmx/store/eee-e (in the overlay's lower layer)",
            "creating /rocmx",
            "creating /rocmx/store",
            "mounting /rocmx/store (the output's directory)",
            "binding /rocmx/store/aaa-a (input) read-only",
            "binding /rocmx/store/bbb-b (input) read-only",
            "binding /rocmx/store/ddd-d (input) read-only",
            "detaching /.rocmx-tmp (and what the set-up mounted in it)",
            "removing /.rocmx-tmp",
        ]
    );
    let kinds: Vec<&Action> = plan.iter().map(|a| &a.action).collect();
    // No hard-linked mount points, nothing made below the overlay's target but binds.
    assert!(!kinds.iter().any(|a| matches!(a, Action::Link { .. })));
    let made_in = |a: &Action| -> Option<String> {
        match a {
            Action::Mkdir { path, .. } | Action::Touch { path } | Action::Symlink { path, .. } => {
                Some(path.to_str().unwrap().to_string())
            }
            _ => None,
        }
    };
    assert!(!kinds
        .iter()
        .filter_map(|a| made_in(a))
        .any(|p| p.starts_with("rocmx/store/")));
    let (lower, fallback) = kinds
        .iter()
        .find_map(|a| match a {
            Action::OverlayRw {
                empty,
                target,
                fallback,
                ..
            } if target.to_str() == Ok("rocmx/store") => {
                Some((empty.to_str().unwrap().to_string(), fallback))
            }
            _ => None,
        })
        .unwrap();
    assert_eq!(lower, ".rocmx-tmp/lower");
    let fallback: Vec<String> = fallback.iter().filter_map(made_in).collect();
    assert_eq!(
        fallback,
        [
            "rocmx/store/aaa-a",
            "rocmx/store/bbb-b",
            "rocmx/store/ddd-d",
            "rocmx/store/eee-e",
        ]
    );
    // /build's overlay has nothing to fall back to.
    assert!(kinds
        .iter()
        .any(|a| matches!(a, Action::OverlayRw { target, fallback, .. }
        if target.to_str() == Ok("build") && fallback.is_empty())));
}

/// With a shared layout, `/build` and the output's directory come from one writable
/// overlay of their common host directory, mounted aside and detached; the inputs
/// beside the output have their mount points below the lower layer's `stage/`. Its
/// fallback binds both host directories and makes the mount points in the bound one.
#[test]
fn build_and_output_directories_can_share_one_overlay() {
    let sh = SharedRw {
        upper: PathBuf::from("/b/rw"),
        work: PathBuf::from("/b/work"),
        build_sub: PathBuf::from("build"),
        stage_sub: PathBuf::from("stage"),
    };
    let variant = super::super::Variant::default();
    let mut pi = input(
        Path::new("/s"),
        vec![
            file_at("/st/aaa-a", "/rocmx/store/aaa-a"),
            dir_at("/st/ddd-d", "/rocmx/store/ddd-d"),
        ],
        Path::new("/b/rw/build"),
        &variant,
        Some((Path::new("/b/work"), Path::new("/b/work-stage"))),
        Some(&sh),
    );
    let plan = build(&pi).unwrap();
    let tail: Vec<String> = describe(&plan)
        .into_iter()
        .skip_while(|s| s != "creating /.rocmx-tmp/lower")
        .collect();
    assert_eq!(
        tail,
        [
            "creating /.rocmx-tmp/lower",
            "creating /.rocmx-tmp/lower/stage",
            "creating mount point /rocmx/store/aaa-a (in the overlay's lower layer)",
            "creating mount point /rocmx/store/ddd-d (in the overlay's lower layer)",
            "creating /.rocmx-tmp/rw",
            "creating /build",
            "creating /rocmx",
            "creating /rocmx/store",
            "mounting /build and /rocmx/store (the build and output directories, one overlay)",
            "binding /rocmx/store/aaa-a (input) read-only",
            "binding /rocmx/store/ddd-d (input) read-only",
            "detaching /.rocmx-tmp (and what the set-up mounted in it)",
            "removing /.rocmx-tmp",
        ]
    );
    let kinds: Vec<&Action> = plan.iter().map(|a| &a.action).collect();
    assert!(!kinds.iter().any(|a| matches!(a, Action::OverlayRw { .. })));
    // The set-up's own mounts (the inputs' overlay, the shared overlay) go with the
    // scratch tmpfs they are in: one detach, one RCU grace period.
    let detaches: Vec<&str> = kinds
        .iter()
        .filter_map(|a| match a {
            Action::Umount { path } => path.to_str().ok(),
            _ => None,
        })
        .collect();
    assert_eq!(detaches, [".rocmx-tmp"]);
    let shared = kinds
        .iter()
        .find_map(|a| match a {
            Action::SharedOverlay {
                upper,
                work,
                lower,
                target,
                binds,
                fallback,
                ..
            } => Some((upper, work, lower, target, binds, fallback)),
            _ => None,
        })
        .unwrap();
    let s = |c: &CString| c.to_str().unwrap().to_string();
    assert_eq!(
        (s(shared.0), s(shared.1), s(shared.2), s(shared.3)),
        (
            "/b/rw".to_string(),
            "/b/work".to_string(),
            ".rocmx-tmp/lower".to_string(),
            ".rocmx-tmp/rw".to_string()
        )
    );
    let binds: Vec<(String, String, String)> = shared
        .4
        .iter()
        .map(|(a, b, c)| (s(a), s(b), s(c)))
        .collect();
    assert_eq!(
        binds,
        [
            (
                ".rocmx-tmp/rw/build".to_string(),
                "build".to_string(),
                "/b/rw/build".to_string()
            ),
            (
                ".rocmx-tmp/rw/stage".to_string(),
                "rocmx/store".to_string(),
                "/proc/self/fd/7".to_string()
            ),
        ]
    );
    assert_eq!(shared.5.len(), 2);
    // Without inputs beside the output the lower layer is the empty directory.
    pi.inputs.clear();
    let plan = build(&pi).unwrap();
    assert!(plan
        .iter()
        .any(|a| matches!(&a.action, Action::SharedOverlay { lower, .. }
        if lower.to_str() == Ok(".rocmx-tmp/empty"))));
    assert!(!describe(&plan)
        .iter()
        .any(|d| d.contains(".rocmx-tmp/lower")));
    // A build directory on a tmpfs keeps its own overlay: no sharing.
    let tmpfs = super::super::Variant {
        build_on_tmpfs: true,
        ..Default::default()
    };
    pi.variant = &tmpfs;
    let plan = build(&pi).unwrap();
    assert!(!plan
        .iter()
        .any(|a| matches!(&a.action, Action::SharedOverlay { .. })));
}

#[test]
fn plan_with_rootfs_skips_reserved_entries() {
    let dir = tempfile::tempdir().unwrap();
    let rootfs = dir.path();
    for d in ["usr/bin", "etc/apt", "dev", "proc", "rocmx", "tmp"] {
        std::fs::create_dir_all(rootfs.join(d)).unwrap();
    }
    std::os::unix::fs::symlink("usr/bin", rootfs.join("bin")).unwrap();
    for f in ["etc/passwd", "etc/os-release", "etc/hosts"] {
        std::fs::write(rootfs.join(f), "x").unwrap();
    }
    let pi = PlanInput {
        root: Path::new("/s/root"),
        inputs: vec![],
        output_parent_host: Path::new("/s/out"),
        output_inside: Path::new("/rocmx/store/zzz-out"),
        build_dir: Path::new("/b"),
        rootfs: Some(rootfs),
        resolv_conf: Some(b"nameserver 10.0.0.1\n".to_vec()),
        shm_size: None,
        variant: &super::super::Variant::default(),
        work_dirs: None,
        shared: None,
    };
    let plan = describe(&build(&pi).unwrap());
    let before_etc: Vec<&str> = plan
        .iter()
        .take_while(|s| !s.contains("/etc/passwd"))
        .map(|s| s.as_str())
        .collect();
    assert_eq!(
        before_etc,
        [
            "mounting the root tmpfs",
            "entering the root tmpfs",
            "creating symlink /bin",
            "creating /tmp",
            "binding /tmp from the rootfs read-only",
            "creating /usr",
            "binding /usr from the rootfs read-only",
            "creating /etc",
            "creating /etc/apt",
            "binding /etc/apt from the rootfs read-only",
            "creating mount point /etc/os-release",
            "binding /etc/os-release from the rootfs read-only",
        ]
    );
    assert!(plan.contains(&"writing /etc/resolv.conf".to_string()));
    assert!(!plan
        .iter()
        .any(|s| s.contains("/etc/hosts from the rootfs")));
}
