//! A seccomp filter that keeps the builder from creating setuid or setgid files, as
//! Nix's sandbox does: `chmod`-family calls and file-creating calls whose mode has
//! `S_ISUID` or `S_ISGID` fail with `EPERM`. `openat2` (its mode hides behind a
//! pointer) and `io_uring_setup` (io_uring opens files without syscalls) fail with
//! `ENOSYS`, which callers treat as "not supported". So do the kernel keyring calls
//! (`add_key`, `request_key`, `keyctl`): keyrings are not namespaced, and a builder
//! must not reach the keys of the user who started the build (init also gives each
//! build a fresh anonymous session keyring before the filter is installed).
//!
//! This is the first line; the sandbox also mounts the writable places `nosuid` and
//! clears the bits in the output after the build. On architectures without a table
//! here no filter is installed (the other two lines still hold).

/// `struct sock_filter`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct SockFilter {
    code: u16,
    jt: u8,
    jf: u8,
    k: u32,
}

const LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
const JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
const JSET_K: u16 = 0x45; // BPF_JMP | BPF_JSET | BPF_K
const AND_K: u16 = 0x54; // BPF_ALU | BPF_AND | BPF_K
const RET_K: u16 = 0x06; // BPF_RET | BPF_K

const RET_ALLOW: u32 = 0x7fff_0000;
const RET_ERRNO: u32 = 0x0005_0000;

const OFF_NR: u32 = 0;
const OFF_ARCH: u32 = 4;
/// Low 32 bits of `args[i]` (little-endian).
const fn off_arg(i: u32) -> u32 {
    16 + 8 * i
}

const SETID_BITS: u32 = 0o6000;

#[derive(Debug, Clone, Copy)]
enum Rule {
    /// Fail with EPERM when argument `n` has S_ISUID or S_ISGID.
    ModeArg(u32),
    /// Always fail with this errno.
    Deny(i32),
}

struct ArchTable {
    audit_arch: u32,
    /// Mask applied to the syscall number first (x32 sets bit 30 on x86_64).
    nr_mask: Option<u32>,
    rules: &'static [(u32, Rule)],
}

use Rule::{Deny, ModeArg};

const ENOSYS: i32 = libc::ENOSYS;

#[cfg(target_arch = "x86_64")]
const TABLES: &[ArchTable] = &[
    ArchTable {
        audit_arch: 0xc000_003e, // AUDIT_ARCH_X86_64
        nr_mask: Some(!0x4000_0000),
        rules: &[
            (90, ModeArg(1)),    // chmod
            (91, ModeArg(1)),    // fchmod
            (268, ModeArg(2)),   // fchmodat
            (452, ModeArg(2)),   // fchmodat2
            (2, ModeArg(2)),     // open
            (257, ModeArg(3)),   // openat
            (85, ModeArg(1)),    // creat
            (133, ModeArg(1)),   // mknod
            (259, ModeArg(2)),   // mknodat
            (437, Deny(ENOSYS)), // openat2
            (425, Deny(ENOSYS)), // io_uring_setup
            (248, Deny(ENOSYS)), // add_key
            (249, Deny(ENOSYS)), // request_key
            (250, Deny(ENOSYS)), // keyctl
        ],
    },
    ArchTable {
        audit_arch: 0x4000_0003, // AUDIT_ARCH_I386
        nr_mask: None,
        rules: &[
            (15, ModeArg(1)),    // chmod
            (94, ModeArg(1)),    // fchmod
            (306, ModeArg(2)),   // fchmodat
            (452, ModeArg(2)),   // fchmodat2
            (5, ModeArg(2)),     // open
            (295, ModeArg(3)),   // openat
            (8, ModeArg(1)),     // creat
            (14, ModeArg(1)),    // mknod
            (297, ModeArg(2)),   // mknodat
            (437, Deny(ENOSYS)), // openat2
            (425, Deny(ENOSYS)), // io_uring_setup
            (286, Deny(ENOSYS)), // add_key
            (287, Deny(ENOSYS)), // request_key
            (288, Deny(ENOSYS)), // keyctl
        ],
    },
];

#[cfg(target_arch = "aarch64")]
const TABLES: &[ArchTable] = &[
    ArchTable {
        audit_arch: 0xc000_00b7, // AUDIT_ARCH_AARCH64
        nr_mask: None,
        rules: &[
            (52, ModeArg(1)),    // fchmod
            (53, ModeArg(2)),    // fchmodat
            (452, ModeArg(2)),   // fchmodat2
            (56, ModeArg(3)),    // openat
            (33, ModeArg(2)),    // mknodat
            (437, Deny(ENOSYS)), // openat2
            (425, Deny(ENOSYS)), // io_uring_setup
            (217, Deny(ENOSYS)), // add_key
            (218, Deny(ENOSYS)), // request_key
            (219, Deny(ENOSYS)), // keyctl
        ],
    },
    ArchTable {
        audit_arch: 0x4000_0028, // AUDIT_ARCH_ARM
        nr_mask: None,
        rules: &[
            (15, ModeArg(1)),    // chmod
            (94, ModeArg(1)),    // fchmod
            (333, ModeArg(2)),   // fchmodat
            (452, ModeArg(2)),   // fchmodat2
            (5, ModeArg(2)),     // open
            (322, ModeArg(3)),   // openat
            (8, ModeArg(1)),     // creat
            (14, ModeArg(1)),    // mknod
            (324, ModeArg(2)),   // mknodat
            (437, Deny(ENOSYS)), // openat2
            (425, Deny(ENOSYS)), // io_uring_setup
            (309, Deny(ENOSYS)), // add_key
            (310, Deny(ENOSYS)), // request_key
            (311, Deny(ENOSYS)), // keyctl
        ],
    },
];

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const TABLES: &[ArchTable] = &[];

fn ins(code: u16, jt: u8, jf: u8, k: u32) -> SockFilter {
    SockFilter { code, jt, jf, k }
}

fn block_len(r: Rule) -> usize {
    match r {
        ModeArg(_) => 4,
        Deny(_) => 1,
    }
}

fn section(t: &ArchTable) -> Vec<SockFilter> {
    let mut out = vec![ins(LD_W_ABS, 0, 0, OFF_NR)];
    if let Some(m) = t.nr_mask {
        out.push(ins(AND_K, 0, 0, m));
    }
    let n = t.rules.len();
    // Dispatch: rule k's jeq at index base+k; blocks start after the final "allow".
    let base = out.len();
    let mut block_start = base + n + 1;
    for (k, (nr, rule)) in t.rules.iter().enumerate() {
        let at = base + k;
        let jt = block_start - (at + 1);
        out.push(ins(JEQ_K, u8::try_from(jt).expect("small filter"), 0, *nr));
        block_start += block_len(*rule);
    }
    out.push(ins(RET_K, 0, 0, RET_ALLOW));
    for (_, rule) in t.rules {
        match *rule {
            ModeArg(i) => {
                out.push(ins(LD_W_ABS, 0, 0, off_arg(i)));
                out.push(ins(JSET_K, 0, 1, SETID_BITS));
                out.push(ins(RET_K, 0, 0, RET_ERRNO | libc::EPERM as u32));
                out.push(ins(RET_K, 0, 0, RET_ALLOW));
            }
            Deny(e) => out.push(ins(RET_K, 0, 0, RET_ERRNO | e as u32)),
        }
    }
    out
}

/// The BPF program (empty when this architecture has no table).
pub(super) fn program() -> Vec<SockFilter> {
    if TABLES.is_empty() {
        return Vec::new();
    }
    let sections: Vec<Vec<SockFilter>> = TABLES.iter().map(section).collect();
    let m = TABLES.len();
    let mut out = vec![ins(LD_W_ABS, 0, 0, OFF_ARCH)];
    // jeq arch_i at index 1+i; "allow" at 1+m; section i after the previous ones.
    let mut start = 1 + m + 1;
    for (i, t) in TABLES.iter().enumerate() {
        let jt = start - (1 + i + 1);
        out.push(ins(
            JEQ_K,
            u8::try_from(jt).expect("small filter"),
            0,
            t.audit_arch,
        ));
        start += sections[i].len();
    }
    out.push(ins(RET_K, 0, 0, RET_ALLOW));
    for s in sections {
        out.extend(s);
    }
    out
}

/// `struct sock_fprog`.
#[repr(C)]
struct SockFprog {
    len: u16,
    filter: *const SockFilter,
}

/// Installs `prog` on the calling thread (after `PR_SET_NO_NEW_PRIVS`). Async-signal
/// safe: one prctl on prepared memory.
pub(super) fn install(prog: &[SockFilter]) -> Result<(), nix::errno::Errno> {
    if prog.is_empty() {
        return Ok(());
    }
    let fprog = SockFprog {
        len: prog.len() as u16,
        filter: prog.as_ptr(),
    };
    // SAFETY: PR_SET_SECCOMP with SECCOMP_MODE_FILTER reads the `sock_fprog` and the
    // instructions it points to, both alive for the call; the kernel copies them.
    let r = unsafe {
        libc::prctl(
            libc::PR_SET_SECCOMP,
            libc::SECCOMP_MODE_FILTER,
            &fprog as *const SockFprog,
            0,
            0,
        )
    };
    nix::errno::Errno::result(r).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tiny interpreter for the instructions we emit, to check the jumps.
    fn eval(prog: &[SockFilter], arch: u32, nr: u32, args: [u64; 6]) -> u32 {
        let mut data = [0u8; 64];
        data[0..4].copy_from_slice(&nr.to_le_bytes());
        data[4..8].copy_from_slice(&arch.to_le_bytes());
        for (i, a) in args.iter().enumerate() {
            data[16 + 8 * i..24 + 8 * i].copy_from_slice(&a.to_le_bytes());
        }
        let (mut pc, mut acc) = (0usize, 0u32);
        loop {
            let i = prog[pc];
            match i.code {
                LD_W_ABS => {
                    let o = i.k as usize;
                    acc = u32::from_le_bytes(data[o..o + 4].try_into().unwrap());
                    pc += 1;
                }
                AND_K => {
                    acc &= i.k;
                    pc += 1;
                }
                JEQ_K => pc += 1 + if acc == i.k { i.jt } else { i.jf } as usize,
                JSET_K => pc += 1 + if acc & i.k != 0 { i.jt } else { i.jf } as usize,
                RET_K => return i.k,
                c => panic!("unknown opcode {c:#x}"),
            }
        }
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn filter_denies_setid_modes_only() {
        let p = program();
        let x86_64 = 0xc000_003e;
        let eperm = RET_ERRNO | libc::EPERM as u32;
        assert_eq!(eval(&p, x86_64, 90, [0, 0o4755, 0, 0, 0, 0]), eperm); // chmod u+s
        assert_eq!(eval(&p, x86_64, 90, [0, 0o755, 0, 0, 0, 0]), RET_ALLOW);
        assert_eq!(eval(&p, x86_64, 91, [0, 0o2755, 0, 0, 0, 0]), eperm); // fchmod g+s
        assert_eq!(eval(&p, x86_64, 268, [0, 0, 0o4700, 0, 0, 0]), eperm); // fchmodat
        assert_eq!(
            eval(&p, x86_64, 268, [0, 0o4700, 0o700, 0, 0, 0]),
            RET_ALLOW
        );
        assert_eq!(eval(&p, x86_64, 257, [0, 0, 0o101, 0o4755, 0, 0]), eperm); // openat
        assert_eq!(
            eval(&p, x86_64, 257, [0, 0, 0o101, 0o1777, 0, 0]),
            RET_ALLOW
        ); // sticky ok
        assert_eq!(
            eval(&p, x86_64, 0x4000_0000 | 90, [0, 0o4755, 0, 0, 0, 0]),
            eperm
        ); // x32
        assert_eq!(
            eval(&p, x86_64, 437, [0; 6]),
            RET_ERRNO | libc::ENOSYS as u32
        );
        assert_eq!(eval(&p, x86_64, 0, [0, 0o4755, 0, 0, 0, 0]), RET_ALLOW); // read
        assert_eq!(eval(&p, 0x4000_0003, 15, [0, 0o4755, 0, 0, 0, 0]), eperm); // i386 chmod
        assert_eq!(
            eval(&p, 0x4000_0003, 90, [0, 0o4755, 0, 0, 0, 0]),
            RET_ALLOW
        ); // i386 90 = mmap
        assert_eq!(eval(&p, 0x1234, 90, [0, 0o4755, 0, 0, 0, 0]), RET_ALLOW);
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn filter_denies_the_kernel_keyring() {
        let p = program();
        let enosys = RET_ERRNO | libc::ENOSYS as u32;
        for (arch, nrs) in [
            (0xc000_003e, [248, 249, 250]),
            (0x4000_0003, [286, 287, 288]),
        ] {
            for nr in nrs {
                assert_eq!(eval(&p, arch, nr, [0; 6]), enosys, "arch {arch:#x} nr {nr}");
            }
        }
        assert_eq!(eval(&p, 0xc000_003e, 247, [0; 6]), RET_ALLOW); // waitid
    }
}
