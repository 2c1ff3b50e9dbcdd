use std::ffi::{CStr, CString};

use nix::mount::MsFlags;
use nix::sched::CloneFlags;

use super::*;

fn c(s: &str) -> CString {
    CString::new(s).unwrap()
}

fn pa(action: Action, what: &str) -> PlannedAction {
    PlannedAction {
        action,
        what: what.as_bytes().to_vec(),
    }
}

/// A prepared sandbox with the given actions and arguments (every other field set to
/// something recognisable).
fn prepared(actions: Vec<PlannedAction>, argv: &[&str], envp: &[&str]) -> Prepared {
    let argv_c: Vec<CString> = argv.iter().map(|s| c(s)).collect();
    let envp_c: Vec<CString> = envp.iter().map(|s| c(s)).collect();
    Prepared {
        flags: CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNET,
        clear_groups: true,
        switch_ids: false,
        max_processes: 7,
        root: c("/r"),
        actions,
        loopback_up: true,
        all_caps: vec![caps::Capability::CAP_CHOWN, caps::Capability::CAP_SYS_ADMIN],
        last_cap: 40,
        builder: c("/b"),
        argv: crate::sandbox::child::pointers(&argv_c),
        envp: crate::sandbox::child::pointers(&envp_c),
        _argv: argv_c,
        _envp: envp_c,
        seccomp: Vec::new(),
        log_write: 11,
        status_write: 12,
        devnull: 13,
        go_read: 14,
        staging_path: c("/s"),
        staging: 15,
        build_uid: 1000,
        build_gid: 100,
        hostname: c("h"),
        domainname: None,
        umask: 0o22,
        build_top: c("/build"),
        cpus: None,
        uname26: false,
    }
}

/// One of every action, with a fallback nested in a fallback.
fn every_action() -> Vec<PlannedAction> {
    let flags = MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV;
    vec![
        pa(Action::EnterRoot { path: c("/root") }, "entering"),
        pa(
            Action::Mkdir {
                path: c("a"),
                mode: 0o755,
            },
            "mkdir",
        ),
        pa(Action::Touch { path: c("t") }, "touch"),
        pa(
            Action::Link {
                target: c("t"),
                path: c("l"),
            },
            "link",
        ),
        pa(Action::Unlink { path: c("l") }, "unlink"),
        pa(
            Action::Symlink {
                target: c("x"),
                path: c("y"),
            },
            "symlink",
        ),
        pa(
            Action::WriteFile {
                path: c("etc/passwd"),
                data: b"root:x:0:0\n\0bin".to_vec(),
            },
            "write",
        ),
        pa(
            Action::Mount {
                source: c("proc"),
                target: c("proc"),
                fstype: c("proc"),
                flags,
                data: None,
                proc: true,
            },
            "proc",
        ),
        pa(
            Action::Mount {
                source: c("tmpfs"),
                target: c("dev/shm"),
                fstype: c("tmpfs"),
                flags: MsFlags::empty(),
                data: Some(c("size=1m")),
                proc: false,
            },
            "shm",
        ),
        pa(
            Action::Bind {
                source: c("/dev/null"),
                target: c("dev/null"),
                flags,
            },
            "bind",
        ),
        pa(
            Action::BindFrom {
                source: c("s"),
                target: c("t"),
                fallback: c("/f"),
                flags,
            },
            "bind from",
        ),
        pa(
            Action::Overlay {
                lower: c("/l"),
                empty: c("e"),
                target: c("o"),
            },
            "overlay",
        ),
        pa(
            Action::OverlayRw {
                upper: c("/u"),
                work: c("/w"),
                empty: c("e"),
                target: c("build"),
                flags,
                fallback: vec![Action::Mkdir {
                    path: c("build/x"),
                    mode: 0o700,
                }],
            },
            "overlay rw",
        ),
        pa(
            Action::SharedOverlay {
                upper: c("/u"),
                work: c("/w"),
                lower: c("/lo"),
                target: c("rw"),
                flags,
                binds: vec![
                    (c("rw/a"), c("build"), c("/u/a")),
                    (c("rw/b"), c("out"), c("/u/b")),
                ],
                fallback: vec![Action::OverlayRw {
                    upper: c("/u2"),
                    work: c("/w2"),
                    empty: c("e"),
                    target: c("t2"),
                    flags: MsFlags::empty(),
                    fallback: vec![Action::Touch { path: c("t2/f") }],
                }],
            },
            "shared",
        ),
        pa(
            Action::Chown {
                path: c("build"),
                uid: 1000,
                gid: 100,
            },
            "chown",
        ),
        pa(Action::Umount { path: c("rw") }, "umount"),
        pa(Action::Rmdir { path: c("rw") }, "rmdir"),
    ]
}

fn full() -> Prepared {
    let mut p = prepared(every_action(), &["sh", "-c", "echo é"], &["out=/o", "A="]);
    p.domainname = Some(c("d.example"));
    // SAFETY: cpu_set_t is a plain bit array, valid when zeroed.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: CPU_SET on a set we own, below CPU_SETSIZE.
    unsafe { libc::CPU_SET(3, &mut set) };
    p.cpus = Some(set);
    p.uname26 = true;
    p.switch_ids = true;
    p
}

#[test]
fn every_field_and_action_survives_the_trip() {
    let p = full();
    let bytes = encode(&p);
    let q = decode(&bytes).unwrap();
    assert_eq!(
        encode(&q),
        bytes,
        "decoding then encoding gives the same bytes"
    );
    assert_eq!(format!("{:?}", q.actions), format!("{:?}", p.actions));
    assert_eq!(q.flags, p.flags);
    assert_eq!(q.all_caps, p.all_caps);
    assert_eq!(q.domainname.as_deref(), Some(c"d.example"));
    // SAFETY: CPU_ISSET on a set we own, below CPU_SETSIZE.
    assert!(unsafe { libc::CPU_ISSET(3, q.cpus.as_ref().unwrap()) });
    assert!(q.uname26 && q.switch_ids && q.clear_groups && q.loopback_up);
    assert_eq!(
        fds(&q),
        [11, 12, 13, 14, 15],
        "the descriptors are numbered as in the sender (the plan's paths name them)"
    );
    // The pointer arrays point into the decoded strings and end with NULL.
    assert_eq!(q.argv.len(), 4);
    assert!(q.argv[3].is_null() && q.envp[2].is_null());
    // SAFETY: pointers into `q._argv`, alive with `q`.
    let arg2 = unsafe { CStr::from_ptr(q.argv[2]) };
    assert_eq!(arg2.to_str().unwrap(), "echo é");
    assert_eq!(q.argv[0], q._argv[0].as_ptr());
    // The seccomp program is the constant one, not sent.
    assert_eq!(q.seccomp.len(), crate::sandbox::seccomp::program().len());
}

/// The format, byte for byte, for a sandbox with one action.
#[test]
fn a_small_sandbox_encodes_to_these_bytes() {
    let mut p = prepared(
        vec![pa(
            Action::Mkdir {
                path: c("d"),
                mode: 0o755,
            },
            "m",
        )],
        &["sh"],
        &[],
    );
    p.all_caps = vec![caps::Capability::CAP_SYS_ADMIN];
    let flags = (libc::CLONE_NEWUSER | libc::CLONE_NEWNET) as u64;
    let mut want: Vec<u8> = b"RXSB".to_vec();
    want.extend_from_slice(&flags.to_le_bytes());
    for fd in [11u8, 12, 13, 14, 15] {
        want.extend_from_slice(&[fd, 0, 0, 0]); // log, status, /dev/null, go-ahead, staging
    }
    want.extend_from_slice(&[1, 0]); // clear_groups, switch_ids
    want.extend_from_slice(&[7, 0, 0, 0]); // max_processes
    want.extend_from_slice(&[2, 0, 0, 0, b'/', b'r']); // root
    want.extend_from_slice(&[1, 0, 0, 0]); // one action
    want.extend_from_slice(&[1, 1, 0, 0, 0, b'd', 0xed, 1, 0, 0]); // Mkdir "d" 0o755
    want.extend_from_slice(&[1, 0, 0, 0, b'm']); // what
    want.push(1); // loopback_up
    want.extend_from_slice(&[40, 0, 0, 0]); // last_cap
    want.extend_from_slice(&[1, 0, 0, 0, 21]); // caps: CAP_SYS_ADMIN
    want.extend_from_slice(&[2, 0, 0, 0, b'/', b'b']); // builder
    want.extend_from_slice(&[1, 0, 0, 0, 2, 0, 0, 0, b's', b'h']); // argv
    want.extend_from_slice(&[0, 0, 0, 0]); // envp
    want.extend_from_slice(&[2, 0, 0, 0, b'/', b's']); // staging_path
    want.extend_from_slice(&[0xe8, 3, 0, 0, 100, 0, 0, 0]); // 1000, 100
    want.extend_from_slice(&[1, 0, 0, 0, b'h']); // hostname
    want.push(0); // no domain name
    want.extend_from_slice(&[0o22, 0, 0, 0]); // umask
    want.extend_from_slice(&[6, 0, 0, 0]);
    want.extend_from_slice(b"/build");
    want.extend_from_slice(&[0, 0]); // no CPU set, not UNAME26
    assert_eq!(encode(&p), want);
}

#[test]
fn cut_or_altered_bytes_are_refused_without_panicking() {
    let bytes = encode(&full());
    for n in 0..bytes.len() {
        assert!(decode(&bytes[..n]).is_err(), "cut at {n}");
    }
    let mut longer = bytes.clone();
    longer.push(0);
    assert_eq!(
        decode(&longer).err(),
        Some(Malformed("bytes after the end"))
    );
    let mut magic = bytes.clone();
    magic[0] = b'X';
    assert_eq!(
        decode(&magic).err(),
        Some(Malformed("not a prepared sandbox"))
    );
    // Every single-byte change either decodes or is refused; none panics or allocates
    // past the message (counts are bounded by the bytes left).
    for i in 0..bytes.len() {
        for v in [0u8, 0x7f, 0xff] {
            let mut b = bytes.clone();
            b[i] = v;
            let _ = decode(&b);
        }
    }
}

#[test]
fn unknown_actions_nul_bytes_and_deep_nesting_are_named() {
    let small = |action: Action| encode(&prepared(vec![pa(action, "w")], &["sh"], &[]));
    // The action's tag is right after the action count, which follows the root.
    let at = 4 + 8 + 5 * 4 + 2 + 4 + (4 + 2) + 4;
    let mut b = small(Action::Touch { path: c("t") });
    b[at] = 99;
    assert_eq!(decode(&b).err(), Some(Malformed("an unknown action")));
    let mut b = small(Action::Touch { path: c("t") });
    b[at + 5] = 0; // the path's one byte
    assert_eq!(decode(&b).err(), Some(Malformed("a NUL inside a C string")));
    let mut deep = Action::Touch { path: c("t") };
    for _ in 0..5 {
        deep = Action::OverlayRw {
            upper: c("u"),
            work: c("w"),
            empty: c("e"),
            target: c("t"),
            flags: MsFlags::empty(),
            fallback: vec![deep],
        };
    }
    assert_eq!(
        decode(&small(deep)).err(),
        Some(Malformed("fallback actions nested too deep"))
    );
}
