//! A binary `Packages` index: one deb822 paragraph per package version.
//!
//! ```text
//! Package: librocsparse1
//! Source: rocsparse
//! Version: 6.4.3-3
//! Architecture: amd64
//! Depends: libamdhip64-6 (>= 6.1.5), libc6 (>= 2.38)
//! Pre-Depends: dpkg (>= 1.17)
//! Provides: librocsparse-abi (= 1)
//! Essential: yes
//! Priority: optional
//! Multi-Arch: same
//! X-ROCm-GPU-Architecture: gfx803 gfx900 gfx906 gfx908 gfx90a
//! Filename: pool/main/r/rocsparse/librocsparse1_6.4.3-3_amd64.deb
//! Size: 362092640
//! SHA256: eab66063fc7d128cc7386243f91a79078f5cedefd235e826d21c2e324f75b695
//! ```
//!
//! Field names are case-insensitive (sid writes `X-Rocm-Gpu-Architecture`).
//! Only the fields above are kept, in a compact [`PackageEntry`]: `Depends`
//! and `Pre-Depends` stay as text and are parsed when the resolver reaches
//! the package, so the ~77,000 paragraphs of sid's amd64 index cost tens of
//! megabytes, not the hundreds a full parse would. Paragraphs of other
//! architectures than the host's and `all` are skipped.
//!
//! The index is decompressed as a stream and read one paragraph at a time
//! (its lines up to a blank one), each parsed with `deb822-fast`'s borrowed
//! parser: the 65 MB of sid's text are never held at once. Measured on sid
//! amd64 (76,808 paragraphs kept): a whole `rocmx debian lock` peaks at
//! about 120 MB resident (214 MB when the text was held whole) and takes
//! under 2 s with the index downloaded.
//!
//! Owns: decompressing `Packages.xz`, reading the paragraphs into entries,
//! naming the paragraph of any defect. Must not: fetch, check index
//! checksums (`index` does), or resolve.

use std::io::{BufRead, Read};

use debversion::Version;

use crate::relation::{self, Dependency, RelationError};

/// One package version of the index, with the fields a lock needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackageEntry {
    /// `Package`.
    pub name: String,
    /// `Version`.
    pub version: Version,
    /// `Architecture` (the host's, or `all`).
    pub architecture: String,
    /// `Depends`, unparsed (see [`PackageEntry::depends`]).
    pub depends_text: String,
    /// `Pre-Depends`, unparsed.
    pub pre_depends_text: String,
    /// `Provides`, parsed: virtual names with their optional `=` version.
    pub provides: Vec<(String, Option<Version>)>,
    /// `Essential: yes`.
    pub essential: bool,
    /// `Priority` (`required`, `important`, `standard`, `optional`, `extra`).
    pub priority: String,
    /// `Multi-Arch` (`same`, `foreign`, `allowed`, `no`), when given.
    pub multi_arch: Option<String>,
    /// `Filename`: the pool path relative to the archive root.
    pub filename: String,
    /// `Size` in bytes.
    pub size: u64,
    /// `SHA256`, lower-case hex.
    pub sha256: String,
    /// `X-ROCm-GPU-Architecture`, split on white space and commas: the gfx
    /// targets a ROCm library was built for.
    pub gfx_architectures: Option<Vec<String>>,
}

impl PackageEntry {
    /// `Pre-Depends` then `Depends`, parsed.
    pub fn dependencies(&self) -> Result<Vec<(&'static str, Dependency)>, RelationError> {
        let mut out = Vec::new();
        for d in relation::parse_dependencies(&self.pre_depends_text)? {
            out.push(("Pre-Depends", d));
        }
        for d in relation::parse_dependencies(&self.depends_text)? {
            out.push(("Depends", d));
        }
        Ok(out)
    }
}

/// A `Packages` index that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PackagesError(pub String);

/// The largest decompressed index accepted (sid's amd64 one is 65 MB).
pub const MAX_INDEX_SIZE: u64 = 1 << 30;

/// Reads the paragraphs of a `Packages.xz` (see [`read_packages`]), decompressing
/// as it goes: at most [`MAX_INDEX_SIZE`] bytes of text, never all held at once.
pub fn read_packages_xz(bytes: &[u8], host: &str) -> Result<Vec<PackageEntry>, PackagesError> {
    let decoder = xz2::read::XzDecoder::new(bytes).take(MAX_INDEX_SIZE + 1);
    let mut reader = std::io::BufReader::with_capacity(1 << 16, decoder);
    let entries = read_packages(&mut reader, host)
        .map_err(|e| PackagesError(e.0.replace("Packages:", "Packages.xz:")))?;
    if reader.into_inner().limit() == 0 {
        return Err(PackagesError(format!(
            "Packages.xz decompresses to more than {MAX_INDEX_SIZE} bytes"
        )));
    }
    Ok(entries)
}

/// [`read_packages`] over text in memory.
pub fn parse_packages(text: &str, host: &str) -> Result<Vec<PackageEntry>, PackagesError> {
    read_packages(text.as_bytes(), host)
}

/// Reads the paragraphs whose architecture is `host` or `all`, one
/// paragraph in memory at a time (the lines up to a blank one, then
/// `deb822-fast`'s borrowed parser over them).
/// A paragraph missing `Package`, `Version`, `Architecture`, `Filename`,
/// `Size` or `SHA256`, or with a bad version, size, checksum or `Provides`,
/// is an error naming the package (or the paragraph's number from 1).
pub fn read_packages(
    mut input: impl BufRead,
    host: &str,
) -> Result<Vec<PackageEntry>, PackagesError> {
    let mut out = Vec::new();
    let mut buf = String::new();
    let mut number = 0;
    loop {
        let start = buf.len();
        let n = input.read_line(&mut buf).map_err(|e| {
            PackagesError(format!("Packages: reading paragraph {}: {e}", number + 1))
        })?;
        let blank = n == 0 || buf[start..].trim().is_empty();
        if !blank {
            continue;
        }
        if !buf.trim().is_empty() {
            number += 1;
            if let Some(e) = entry(&buf, number, host)? {
                out.push(e);
            }
        }
        buf.clear();
        if n == 0 {
            return Ok(out);
        }
    }
}

/// The entry of one paragraph's text (`None`: another architecture).
fn entry(text: &str, number: usize, host: &str) -> Result<Option<PackageEntry>, PackagesError> {
    {
        let para = match deb822_fast::borrowed::iter_paragraphs_borrowed(text).next() {
            Some(p) => p.map_err(|e| {
                PackagesError(format!("Packages: paragraph {number} does not parse: {e}"))
            })?,
            None => return Ok(None),
        };
        let mut f = Fields::default();
        for field in para.iter() {
            let slot = match field.name().to_ascii_lowercase().as_str() {
                "package" => &mut f.package,
                "version" => &mut f.version,
                "architecture" => &mut f.architecture,
                "depends" => &mut f.depends,
                "pre-depends" => &mut f.pre_depends,
                "provides" => &mut f.provides,
                "essential" => &mut f.essential,
                "priority" => &mut f.priority,
                "multi-arch" => &mut f.multi_arch,
                "filename" => &mut f.filename,
                "size" => &mut f.size,
                "sha256" => &mut f.sha256,
                "x-rocm-gpu-architecture" => &mut f.gfx,
                _ => continue,
            };
            let lines = field.lines();
            *slot = Some(if lines.len() == 1 {
                lines[0].trim().to_string()
            } else {
                lines
                    .iter()
                    .map(|l| l.trim())
                    .collect::<Vec<_>>()
                    .join(" ")
                    .trim()
                    .to_string()
            });
        }
        let what = match &f.package {
            Some(p) => format!("package '{p}'"),
            None => format!("paragraph {number}"),
        };
        let need = |v: Option<String>, field: &str| {
            v.filter(|s| !s.is_empty())
                .ok_or_else(|| PackagesError(format!("Packages: {what} has no '{field}' field")))
        };
        let architecture = need(f.architecture, "Architecture")?;
        if architecture != host && architecture != "all" {
            return Ok(None);
        }
        let name = need(f.package, "Package")?;
        let version = crate::version::parse(&name, &need(f.version, "Version")?)
            .map_err(|e| PackagesError(format!("Packages: {e}")))?;
        let size_text = need(f.size, "Size")?;
        let size = size_text
            .parse()
            .map_err(|_| PackagesError(format!("Packages: {what} has a bad Size '{size_text}'")))?;
        let sha256 = need(f.sha256, "SHA256")?.to_ascii_lowercase();
        if sha256.len() != 64 || !sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(PackagesError(format!(
                "Packages: {what} has a bad SHA256 '{sha256}'"
            )));
        }
        let provides = relation::parse_provides(f.provides.as_deref().unwrap_or(""))
            .map_err(|e| PackagesError(format!("Packages: {what}: Provides: {e}")))?;
        let gfx = f.gfx.map(|g| {
            g.split(|c: char| c.is_whitespace() || c == ',')
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect()
        });
        Ok(Some(PackageEntry {
            filename: need(f.filename, "Filename")?,
            name,
            version,
            architecture,
            depends_text: f.depends.unwrap_or_default(),
            pre_depends_text: f.pre_depends.unwrap_or_default(),
            provides,
            essential: f.essential.is_some_and(|e| e.eq_ignore_ascii_case("yes")),
            priority: f.priority.unwrap_or_default(),
            multi_arch: f.multi_arch,
            size,
            sha256,
            gfx_architectures: gfx,
        }))
    }
}

/// The raw values of the fields kept, for one paragraph.
#[derive(Default)]
struct Fields {
    package: Option<String>,
    version: Option<String>,
    architecture: Option<String>,
    depends: Option<String>,
    pre_depends: Option<String>,
    provides: Option<String>,
    essential: Option<String>,
    priority: Option<String>,
    multi_arch: Option<String>,
    filename: Option<String>,
    size: Option<String>,
    sha256: Option<String>,
    gfx: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHA: &str = "eab66063fc7d128cc7386243f91a79078f5cedefd235e826d21c2e324f75b695";

    #[test]
    fn keeps_the_fields_and_skips_other_arches() {
        let text = format!(
            "Package: librocsparse1\nVersion: 6.4.3-3\nArchitecture: amd64\n\
Depends: libc6 (>= 2.38)\nX-Rocm-Gpu-Architecture: gfx803 gfx90a\nPriority: optional\n\
Description: x\n long\n .\nFilename: pool/main/r/x.deb\nSize: 10\nSHA256: {SHA}\n\n\
Package: armonly\nVersion: 1\nArchitecture: arm64\n\n\
Package: base-files\nVersion: 14\nArchitecture: all\nEssential: yes\nPriority: required\n\
Provides: base (= 1), other\nPre-Depends: awk\nFilename: pool/b.deb\nSize: 5\nSHA256: {SHA}\n"
        );
        let p = parse_packages(&text, "amd64").unwrap();
        assert_eq!(p.len(), 2);
        assert_eq!(p[0].name, "librocsparse1");
        assert_eq!(
            p[0].gfx_architectures.as_deref().unwrap(),
            ["gfx803", "gfx90a"]
        );
        assert_eq!(p[0].dependencies().unwrap().len(), 1);
        assert!(p[1].essential);
        assert_eq!(p[1].priority, "required");
        assert_eq!(p[1].provides.len(), 2);
        assert_eq!(p[1].dependencies().unwrap()[0].0, "Pre-Depends");
    }

    #[test]
    fn defects_name_the_package() {
        let e = parse_packages("Package: x\nVersion: 1\nArchitecture: all\n", "amd64")
            .unwrap_err()
            .0;
        assert!(e.contains("package 'x' has no 'Size' field"), "{e}");
        let t = format!(
            "Package: y\nVersion: 1\nArchitecture: all\nFilename: f\nSize: big\nSHA256: {SHA}\n"
        );
        assert!(parse_packages(&t, "amd64")
            .unwrap_err()
            .0
            .contains("bad Size 'big'"));
    }
}
