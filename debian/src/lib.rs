//! rocmx-debian: Debian's formats and the policy rocmx applies to them.
//!
//! Owns: the archive's indices (`InRelease`/`Release`, `Packages`), dpkg
//! version ordering and package relations, resolving a set of packages into
//! a lock (as apt would for a build chroot), the lock file format, and
//! reading `.deb` archives (ar members, `control.tar.*`, `data.tar.*`) into a
//! merged-`/usr` root without running maintainer scripts.
//!
//! Must not: touch the network or the store database itself (I/O goes through
//! the traits the modules define, implemented by the binary), evaluate the
//! language, or run builds. Depends on `rocmx-store` only (hashes, formats).

// No unsafe code here: what needs it (the sandbox) lives in rocmx-builder.
#![forbid(unsafe_code)]

pub mod deb;
pub mod index;
pub mod lock;
pub mod packages;
pub mod relation;
pub mod release;
pub mod resolve;
pub mod rootfs;
pub mod signature;
pub mod version;
