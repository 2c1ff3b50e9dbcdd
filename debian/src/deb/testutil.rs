//! Builders of test `.deb` files: tar entries written byte for byte (so that
//! hostile paths the tar crate would refuse can be made), `ar` archives with
//! any members, and a small data tree exercising every entry kind.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use tar::EntryType;

/// A tar header for `path` written byte-for-byte, so that paths the tar
/// crate's builder would refuse (`..`, absolute) can be tested.
pub fn raw_entry(
    out: &mut Vec<u8>,
    path: &str,
    kind: EntryType,
    link: &str,
    mode: u32,
    data: &[u8],
) {
    let mut h = tar::Header::new_ustar();
    h.as_old_mut().name[..path.len()].copy_from_slice(path.as_bytes());
    h.as_old_mut().linkname[..link.len()].copy_from_slice(link.as_bytes());
    h.set_entry_type(kind);
    h.set_mode(mode);
    h.set_size(data.len() as u64);
    h.set_cksum();
    out.extend_from_slice(h.as_bytes());
    out.extend_from_slice(data);
    out.resize(out.len().div_ceil(512) * 512, 0);
}

pub fn finish(mut v: Vec<u8>) -> Vec<u8> {
    v.extend_from_slice(&[0u8; 1024]);
    v
}

pub fn control_tar(pkg: &str) -> Vec<u8> {
    let text = format!("Package: {pkg}\nVersion: 1.0-1\nArchitecture: amd64\nDescription: test\n");
    let mut t = Vec::new();
    raw_entry(&mut t, "./", EntryType::Directory, "", 0o755, b"");
    raw_entry(
        &mut t,
        "./control",
        EntryType::Regular,
        "",
        0o644,
        text.as_bytes(),
    );
    finish(t)
}

/// A `.deb` with the given members (name, bytes) after `debian-binary`.
pub fn deb(dir: &Path, file: &str, version: &[u8], members: &[(&str, Vec<u8>)]) -> PathBuf {
    let path = dir.join(file);
    let mut b = ar::Builder::new(File::create(&path).unwrap());
    let mut add = |name: &str, data: &[u8]| {
        let h = ar::Header::new(name.as_bytes().to_vec(), data.len() as u64);
        b.append(&h, data).unwrap();
    };
    add("debian-binary", version);
    for (name, data) in members {
        add(name, data);
    }
    path
}

pub fn xz(data: &[u8]) -> Vec<u8> {
    let mut e = xz2::write::XzEncoder::new(Vec::new(), 1);
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

pub fn simple_data() -> Vec<u8> {
    let mut t = Vec::new();
    raw_entry(&mut t, "./", EntryType::Directory, "", 0o755, b"");
    raw_entry(&mut t, "./bin/", EntryType::Directory, "", 0o755, b"");
    raw_entry(
        &mut t,
        "./bin/foo",
        EntryType::Regular,
        "",
        0o4755,
        b"#!/bin/sh\n",
    );
    raw_entry(
        &mut t,
        "./bin/foo-link",
        EntryType::Symlink,
        "foo",
        0o777,
        b"",
    );
    raw_entry(
        &mut t,
        "./usr/share/doc/x/",
        EntryType::Directory,
        "",
        0o755,
        b"",
    );
    raw_entry(
        &mut t,
        "./usr/share/doc/x/a",
        EntryType::Regular,
        "",
        0o644,
        b"a",
    );
    raw_entry(
        &mut t,
        "./usr/share/doc/x/b",
        EntryType::Link,
        "./usr/share/doc/x/a",
        0o644,
        b"",
    );
    raw_entry(&mut t, "./dev/null", EntryType::Char, "", 0o666, b"");
    finish(t)
}
