//! GPU (gfx) targets: the table of known targets, parsing of `--gfx` lists,
//! and detection of the machine's GPUs from the KFD topology.
//!
//! Owns: reading `exprs/lib/gfx-targets.json` (embedded at compile time, the
//! single source of truth that the package set reads too), the typed
//! [`GfxTarget`] with its canonical `name[:sramecc±][:xnack±]` form, checking
//! names and feature suffixes against the table ([`GfxTable::parse_target`],
//! [`GfxTable::parse_list`]), detection like `rocm_agent_enumerator`
//! ([`detect`]), and [`resolve`], which turns `--gfx LIST|native|all` into
//! targets.
//!
//! Must not: print (the commands render), or read the machine unless asked:
//! the target list is an explicit input of evaluation, so only [`detect`] and
//! `resolve("native")` look at sysfs, and nothing here is called implicitly.

mod detect;
mod table;

// The module's public API; not every item has a caller in the binary yet
// (the `--gfx` option of evaluation is wired separately).
#[allow(unused_imports)]
pub use detect::{detect, detect_in, name_of_version, parse_override, Detection, GpuNode};
#[allow(unused_imports)]
pub use table::{FeatureSupport, Features, GfxTable, GfxTarget, TargetInfo};

/// What can go wrong with gfx targets. Every message is one line, names the
/// bad value and says what would be valid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GfxError {
    /// A target name that is not in the table.
    #[error("unknown gfx target '{name}'{hint}; known targets: {known}")]
    UnknownTarget {
        name: String,
        /// `" (did you mean gfx90a?)"` or empty.
        hint: String,
        known: String,
    },
    /// A feature suffix the target's hardware does not have.
    #[error("{target} does not support {feature} (in '{item}'); {valid}")]
    UnsupportedFeature {
        item: String,
        target: String,
        feature: String,
        /// What suffixes the target accepts.
        valid: String,
    },
    /// A feature that is fixed on (or off) for this target, requested the other way.
    #[error("{target} always has {feature} {state}, so '{item}' cannot be built; write {target} or {target}:{feature}{sign}")]
    FixedFeature {
        item: String,
        target: String,
        feature: String,
        state: &'static str,
        sign: char,
    },
    /// A feature name that is not `xnack` or `sramecc`.
    #[error("unknown feature '{feature}' in '{item}'; the features are sramecc and xnack, written :sramecc+, :sramecc-, :xnack+ or :xnack-")]
    UnknownFeature { item: String, feature: String },
    /// A suffix that is not `:name+` or `:name-`.
    #[error("malformed feature suffix ':{suffix}' in '{item}'; write :xnack+, :xnack-, :sramecc+ or :sramecc- (e.g. gfx90a:xnack-)")]
    MalformedSuffix { item: String, suffix: String },
    /// The same feature twice in one target.
    #[error(
        "feature {feature} is given twice in '{item}'; give each of sramecc and xnack at most once"
    )]
    DuplicateFeature { item: String, feature: String },
    /// An empty item in a comma-separated list (or an empty list).
    #[error("empty gfx target in the list '{list}'; separate targets with single commas, e.g. gfx90a,gfx1100")]
    EmptyItem { list: String },
    /// `native` found no GPU.
    #[error("no AMD GPU found in {topology} ({reason}); name the targets with --gfx LIST, e.g. --gfx gfx1100")]
    NoGpu { topology: String, reason: String },
    /// `HSA_OVERRIDE_GFX_VERSION` is not `MAJOR.MINOR.STEPPING`.
    #[error("HSA_OVERRIDE_GFX_VERSION='{value}' is not MAJOR.MINOR.STEPPING with decimal numbers (major 1-99, minor and stepping 0-15), e.g. 11.0.0 or 9.0.10")]
    BadOverride { value: String },
}

/// The targets a `--gfx` value names: `all` (every target of the table),
/// `native` (the GPUs [`detect`] finds, unknown ones included: the machine is
/// what it is), or a comma-separated list checked by [`GfxTable::parse_list`].
pub fn resolve(spec: &str) -> Result<Vec<GfxTarget>, GfxError> {
    let table = GfxTable::builtin();
    match spec.trim() {
        "all" => Ok(table.all()),
        "native" => {
            let d = detect()?;
            Ok(d.targets().into_iter().map(GfxTarget::plain).collect())
        }
        _ => table.parse_list(spec),
    }
}
