//! The table of known gfx targets (`exprs/lib/gfx-targets.json`, embedded) and
//! the typed target with feature suffixes.
//!
//! Owns: the serde model of the table, [`GfxTarget`] and its canonical text
//! (`gfx90a:sramecc+:xnack-`: LLVM orders sramecc before xnack), and parsing
//! targets and lists against the table. Must not: read the machine.

use std::fmt;
use std::sync::OnceLock;

use rocmx_lang::eval::error::edit_distance;
use serde::{Deserialize, Serialize};

use super::GfxError;

/// The table's text, shared with the package set (`exprs/lib/gpu.nix`).
const TABLE_JSON: &str = include_str!("../../exprs/lib/gfx-targets.json");

/// How a target supports a feature (xnack, sramecc).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FeatureSupport {
    /// Supported and selectable: `:f+`, `:f-`, or neither (code for both).
    Any,
    /// Always on: `:f+` is allowed (and redundant), `:f-` is an error.
    On,
    /// Always off: `:f-` is allowed (and redundant), `:f+` is an error.
    Off,
    /// Not in the hardware: any suffix is an error.
    Unsupported,
}

impl FeatureSupport {
    /// As written in the table.
    pub fn as_str(self) -> &'static str {
        match self {
            FeatureSupport::Any => "any",
            FeatureSupport::On => "on",
            FeatureSupport::Off => "off",
            FeatureSupport::Unsupported => "unsupported",
        }
    }
}

/// A target's feature support.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Features {
    pub xnack: FeatureSupport,
    pub sramecc: FeatureSupport,
}

/// One entry of the table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetInfo {
    /// `gfx90a`.
    pub name: String,
    /// `gfx9`, `gfx10`, `gfx11`, `gfx12` (`gfx8` for gfx803).
    pub family: String,
    /// The LLVM generic target covering it (`gfx9-4-generic`), if any.
    pub generic: Option<String>,
    pub features: Features,
    /// The KFD number: major*10000 + minor*100 + stepping.
    pub gfx_target_version: u32,
    /// Example products.
    pub products: Vec<String>,
    /// ROCm release series ("6.4") that support it officially.
    pub rocm: Vec<String>,
    /// Whether Debian's ROCm libraries are built for it.
    pub debian: bool,
}

/// The whole table.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GfxTable {
    /// Where the data comes from.
    #[serde(rename = "_comment")]
    pub comment: String,
    /// In family order, then by version.
    pub targets: Vec<TargetInfo>,
}

/// A target with optional feature settings: `None` = not specified (code that
/// runs with the feature on or off), `Some(true)` = `:f+`, `Some(false)` = `:f-`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct GfxTarget {
    pub name: String,
    pub xnack: Option<bool>,
    pub sramecc: Option<bool>,
}

impl GfxTarget {
    /// The target without feature suffixes.
    pub fn plain(name: impl Into<String>) -> GfxTarget {
        GfxTarget {
            name: name.into(),
            xnack: None,
            sramecc: None,
        }
    }
}

impl fmt::Display for GfxTarget {
    /// The canonical form, as LLVM writes target IDs: sramecc before xnack.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)?;
        for (feature, v) in [("sramecc", self.sramecc), ("xnack", self.xnack)] {
            if let Some(on) = v {
                write!(f, ":{feature}{}", if on { '+' } else { '-' })?;
            }
        }
        Ok(())
    }
}

impl GfxTable {
    /// The table built into the binary. Parsed once; a parse failure is a bug
    /// of the embedded file (a unit test parses it).
    pub fn builtin() -> &'static GfxTable {
        static TABLE: OnceLock<GfxTable> = OnceLock::new();
        TABLE.get_or_init(|| {
            GfxTable::from_json(TABLE_JSON).expect("bug: exprs/lib/gfx-targets.json does not parse")
        })
    }

    /// Parses a table from its JSON text.
    pub fn from_json(text: &str) -> Result<GfxTable, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// The entry named `name`.
    pub fn get(&self, name: &str) -> Option<&TargetInfo> {
        self.targets.iter().find(|t| t.name == name)
    }

    /// The entry whose KFD number is `version`.
    pub fn by_version(&self, version: u32) -> Option<&TargetInfo> {
        self.targets
            .iter()
            .find(|t| t.gfx_target_version == version)
    }

    /// Every target of the table, without feature suffixes.
    pub fn all(&self) -> Vec<GfxTarget> {
        self.targets
            .iter()
            .map(|t| GfxTarget::plain(&t.name))
            .collect()
    }

    /// The known names, comma-separated (for error messages).
    fn known(&self) -> String {
        let names: Vec<&str> = self.targets.iter().map(|t| t.name.as_str()).collect();
        names.join(", ")
    }

    /// Up to three known names closest to `name` by edit distance (at most 2
    /// edits, case ignored), closest first, table order among equals.
    pub fn closest(&self, name: &str) -> Vec<&str> {
        let lower = name.to_ascii_lowercase();
        let mut ranked: Vec<(usize, usize, &str)> = self
            .targets
            .iter()
            .enumerate()
            .map(|(i, t)| (edit_distance(&lower, &t.name), i, t.name.as_str()))
            .filter(|&(d, _, _)| d <= 2)
            .collect();
        ranked.sort();
        ranked.into_iter().take(3).map(|(_, _, n)| n).collect()
    }

    /// Parses `name[:feature±]…` and checks the name and the suffixes against
    /// the table.
    pub fn parse_target(&self, item: &str) -> Result<GfxTarget, GfxError> {
        let mut parts = item.split(':');
        let name = parts.next().unwrap_or_default();
        let Some(info) = self.get(name) else {
            let close = self.closest(name);
            let hint = if close.is_empty() {
                String::new()
            } else {
                let (last, rest) = close.split_last().unwrap_or((&"", &[]));
                if rest.is_empty() {
                    format!(" (did you mean {last}?)")
                } else {
                    format!(" (did you mean {} or {last}?)", rest.join(", "))
                }
            };
            return Err(GfxError::UnknownTarget {
                name: name.to_string(),
                hint,
                known: self.known(),
            });
        };
        let mut target = GfxTarget::plain(name);
        for suffix in parts {
            let (feature, on) = match suffix.as_bytes().last() {
                Some(b'+') => (&suffix[..suffix.len() - 1], true),
                Some(b'-') => (&suffix[..suffix.len() - 1], false),
                _ => {
                    return Err(GfxError::MalformedSuffix {
                        item: item.to_string(),
                        suffix: suffix.to_string(),
                    })
                }
            };
            let (support, slot) = match feature {
                "xnack" => (info.features.xnack, &mut target.xnack),
                "sramecc" => (info.features.sramecc, &mut target.sramecc),
                "" => {
                    return Err(GfxError::MalformedSuffix {
                        item: item.to_string(),
                        suffix: suffix.to_string(),
                    })
                }
                _ => {
                    return Err(GfxError::UnknownFeature {
                        item: item.to_string(),
                        feature: feature.to_string(),
                    })
                }
            };
            if slot.is_some() {
                return Err(GfxError::DuplicateFeature {
                    item: item.to_string(),
                    feature: feature.to_string(),
                });
            }
            match (support, on) {
                (FeatureSupport::Unsupported, _) => {
                    return Err(GfxError::UnsupportedFeature {
                        item: item.to_string(),
                        target: name.to_string(),
                        feature: feature.to_string(),
                        valid: valid_suffixes(info),
                    })
                }
                (FeatureSupport::On, false) | (FeatureSupport::Off, true) => {
                    let always_on = support == FeatureSupport::On;
                    return Err(GfxError::FixedFeature {
                        item: item.to_string(),
                        target: name.to_string(),
                        feature: feature.to_string(),
                        state: if always_on { "on" } else { "off" },
                        sign: if always_on { '+' } else { '-' },
                    });
                }
                _ => *slot = Some(on),
            }
        }
        Ok(target)
    }

    /// Parses a comma-separated list: items trimmed, empty items refused,
    /// duplicates (same canonical target) dropped, first occurrence kept.
    pub fn parse_list(&self, list: &str) -> Result<Vec<GfxTarget>, GfxError> {
        let mut out: Vec<GfxTarget> = Vec::new();
        for item in list.split(',') {
            let item = item.trim();
            if item.is_empty() {
                return Err(GfxError::EmptyItem {
                    list: list.to_string(),
                });
            }
            let t = self.parse_target(item)?;
            if !out.contains(&t) {
                out.push(t);
            }
        }
        Ok(out)
    }
}

/// "gfx1100 accepts no feature suffix" / "gfx900 accepts :xnack+ and :xnack-".
fn valid_suffixes(info: &TargetInfo) -> String {
    let mut ok = Vec::new();
    for (feature, support) in [
        ("sramecc", info.features.sramecc),
        ("xnack", info.features.xnack),
    ] {
        match support {
            FeatureSupport::Any => {
                ok.push(format!(":{feature}+"));
                ok.push(format!(":{feature}-"));
            }
            FeatureSupport::On => ok.push(format!(":{feature}+")),
            FeatureSupport::Off => ok.push(format!(":{feature}-")),
            FeatureSupport::Unsupported => {}
        }
    }
    if ok.is_empty() {
        format!("{} accepts no feature suffix", info.name)
    } else {
        format!("{} accepts {}", info.name, ok.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::super::name_of_version;
    use super::*;

    fn table() -> &'static GfxTable {
        GfxTable::builtin()
    }

    #[test]
    fn builtin_table_parses_and_is_consistent() {
        let t = GfxTable::from_json(TABLE_JSON).expect("the embedded table parses");
        assert!(t.targets.len() >= 27, "{} targets", t.targets.len());
        assert!(t.comment.contains("AMDGPUUsage"));
        let generics = [
            "gfx9-generic",
            "gfx9-4-generic",
            "gfx10-1-generic",
            "gfx10-3-generic",
            "gfx11-generic",
            "gfx12-generic",
        ];
        let mut prev = 0;
        for (i, e) in t.targets.iter().enumerate() {
            // Names are unique, the version spells the name, the family is its prefix.
            assert!(
                t.targets[..i].iter().all(|o| o.name != e.name),
                "{} twice",
                e.name
            );
            assert_eq!(name_of_version(e.gfx_target_version), e.name);
            let major = e.gfx_target_version / 10000;
            assert_eq!(e.family, format!("gfx{major}"), "{}", e.name);
            assert!(e.gfx_target_version > prev, "{} out of order", e.name);
            prev = e.gfx_target_version;
            if let Some(g) = &e.generic {
                assert!(generics.contains(&g.as_str()), "{}: {g}", e.name);
            }
            // Only GFX8/9 and GFX10.1 have xnack; only GFX9 data-centre parts sramecc.
            if major >= 11 || e.name.starts_with("gfx103") {
                assert_eq!(e.features.xnack, FeatureSupport::Unsupported, "{}", e.name);
                assert_eq!(
                    e.features.sramecc,
                    FeatureSupport::Unsupported,
                    "{}",
                    e.name
                );
            }
            assert!(!e.products.is_empty(), "{}", e.name);
        }
        for required in [
            "gfx900", "gfx906", "gfx908", "gfx90a", "gfx90c", "gfx940", "gfx941", "gfx942",
            "gfx950", "gfx1010", "gfx1011", "gfx1012", "gfx1030", "gfx1031", "gfx1032", "gfx1034",
            "gfx1035", "gfx1036", "gfx1100", "gfx1101", "gfx1102", "gfx1103", "gfx1150", "gfx1151",
            "gfx1200", "gfx1201",
        ] {
            assert!(t.get(required).is_some(), "{required} missing");
        }
        let a = t.get("gfx90a").unwrap();
        assert_eq!(a.gfx_target_version, 90010);
        assert_eq!(a.features.xnack, FeatureSupport::Any);
        assert_eq!(a.features.sramecc, FeatureSupport::Any);
        assert_eq!(a.generic, None);
        assert_eq!(
            t.get("gfx942").unwrap().generic.as_deref(),
            Some("gfx9-4-generic")
        );
        assert_eq!(
            t.get("gfx906").unwrap().generic.as_deref(),
            Some("gfx9-generic")
        );
        assert_eq!(
            t.get("gfx900").unwrap().features.sramecc,
            FeatureSupport::Unsupported
        );
        assert_eq!(t.by_version(110000).unwrap().name, "gfx1100");
    }

    #[test]
    fn version_to_name_vectors() {
        for (v, n) in [
            (90010, "gfx90a"),
            (90402, "gfx942"),
            (110000, "gfx1100"),
            (100300, "gfx1030"),
            (120001, "gfx1201"),
            (90008, "gfx908"),
            (90012, "gfx90c"),
            (80003, "gfx803"),
        ] {
            assert_eq!(name_of_version(v), n, "{v}");
        }
    }

    #[test]
    fn parse_plain_and_suffixed() {
        let t = table();
        assert_eq!(
            t.parse_target("gfx90a").unwrap(),
            GfxTarget::plain("gfx90a")
        );
        let x = t.parse_target("gfx90a:xnack-").unwrap();
        assert_eq!(x.xnack, Some(false));
        assert_eq!(x.sramecc, None);
        assert_eq!(x.to_string(), "gfx90a:xnack-");
        // Canonical order: sramecc before xnack, whatever the input order.
        let y = t.parse_target("gfx90a:xnack-:sramecc+").unwrap();
        assert_eq!(y.to_string(), "gfx90a:sramecc+:xnack-");
        assert_eq!(
            t.parse_target("gfx942:sramecc-").unwrap().to_string(),
            "gfx942:sramecc-"
        );
        assert_eq!(t.parse_target("gfx1010:xnack+").unwrap().xnack, Some(true));
    }

    #[test]
    fn unknown_name_suggests_closest() {
        let e = table().parse_target("gfx91a").unwrap_err();
        let m = e.to_string();
        assert!(matches!(e, GfxError::UnknownTarget { .. }));
        assert!(
            m.starts_with("unknown gfx target 'gfx91a' (did you mean gfx90a, "),
            "{m}"
        );
        assert!(m.contains("known targets: gfx803, gfx900"), "{m}");
        assert!(!m.contains('\n'));
        assert_eq!(table().closest("GFX1100")[0], "gfx1100");
        assert!(table().closest("vega").is_empty());
        let far = table().parse_target("sm_90").unwrap_err().to_string();
        assert!(
            far.starts_with("unknown gfx target 'sm_90'; known targets:"),
            "{far}"
        );
    }

    #[test]
    fn feature_errors() {
        let t = table();
        let m = t.parse_target("gfx1100:xnack-").unwrap_err().to_string();
        assert_eq!(
            m,
            "gfx1100 does not support xnack (in 'gfx1100:xnack-'); gfx1100 accepts no feature suffix"
        );
        let m = t.parse_target("gfx900:sramecc+").unwrap_err().to_string();
        assert!(m.contains("gfx900 does not support sramecc"), "{m}");
        assert!(m.contains("gfx900 accepts :xnack+, :xnack-"), "{m}");
        let e = t.parse_target("gfx90a:foo+").unwrap_err();
        assert!(matches!(&e, GfxError::UnknownFeature { feature, .. } if feature == "foo"));
        assert!(e
            .to_string()
            .contains("unknown feature 'foo' in 'gfx90a:foo+'"));
        for bad in ["gfx90a:xnack", "gfx90a:", "gfx90a:+", "gfx90a:xnack+-x"] {
            let e = t.parse_target(bad).unwrap_err();
            assert!(
                matches!(
                    e,
                    GfxError::MalformedSuffix { .. } | GfxError::UnknownFeature { .. }
                ),
                "{bad}: {e}"
            );
        }
        assert!(matches!(
            t.parse_target("gfx90a:xnack+:xnack-").unwrap_err(),
            GfxError::DuplicateFeature { .. }
        ));
    }

    #[test]
    fn fixed_features() {
        let mut t = table().clone();
        t.targets[0].features.xnack = FeatureSupport::On;
        let name = t.targets[0].name.clone();
        assert!(t.parse_target(&format!("{name}:xnack+")).is_ok());
        let m = t
            .parse_target(&format!("{name}:xnack-"))
            .unwrap_err()
            .to_string();
        assert!(m.contains("always has xnack on"), "{m}");
    }

    #[test]
    fn lists() {
        let t = table();
        let l = t
            .parse_list(" gfx90a , gfx1100,gfx90a,gfx90a:xnack-,gfx1100 ")
            .unwrap();
        let s: Vec<String> = l.iter().map(|x| x.to_string()).collect();
        assert_eq!(s, ["gfx90a", "gfx1100", "gfx90a:xnack-"]);
        for bad in ["", "gfx90a,,gfx942", "gfx90a,", " , "] {
            assert!(
                matches!(t.parse_list(bad), Err(GfxError::EmptyItem { .. })),
                "{bad:?}"
            );
        }
        assert!(matches!(
            t.parse_list("gfx90a,gfx91a"),
            Err(GfxError::UnknownTarget { .. })
        ));
    }

    #[test]
    fn resolve_all_and_list() {
        let all = super::super::resolve("all").unwrap();
        assert_eq!(all.len(), table().targets.len());
        let l = super::super::resolve("gfx942,gfx1201").unwrap();
        assert_eq!(l[1].to_string(), "gfx1201");
    }
}
