//! `builtin:unpack-debs`: the glue between the realiser's built-in builders
//! (`rocmx_builder::builtins`) and the Debian crate's root filesystem
//! (`rocmx_debian::rootfs`).
//!
//! Owns: reading the derivation's `debs` attribute (the `.deb` store paths,
//! space separated, in lock order; fixed-output fetch results), checking that
//! there is exactly one output `out`, and reporting errors with logical store
//! paths. The format work is `rocmx_debian`'s.
//!
//! Must not: read anything outside the store paths it is given, or touch the
//! network.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use rocmx_builder::builtins::{BuiltinBuilder, BuiltinContext, Builtins};
use rocmx_debian::rootfs::{self, RootfsError};

/// Registers `builtin:unpack-debs`.
pub fn register(builtins: &mut Builtins) {
    builtins.register("unpack-debs", Arc::new(UnpackDebs));
}

struct UnpackDebs;

impl BuiltinBuilder for UnpackDebs {
    fn build(&self, ctx: &BuiltinContext<'_>, log: &mut dyn Write) -> Result<(), String> {
        let names: Vec<&String> = ctx.outputs.keys().collect();
        let Some(out) = ctx.outputs.get("out").filter(|_| names.len() == 1) else {
            return Err(format!(
                "builtin:unpack-debs has exactly one output, 'out' (this derivation has {})",
                names
                    .iter()
                    .map(|n| format!("'{n}'"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        };
        let debs = ctx.env.get("debs").map(String::as_str).unwrap_or("");
        let logical: Vec<&str> = debs.split_whitespace().collect();
        if logical.is_empty() {
            return Err(
                "builtin:unpack-debs needs 'debs': the .deb store paths, space separated, in order"
                    .into(),
            );
        }
        let mut physical: Vec<PathBuf> = Vec::with_capacity(logical.len());
        for p in &logical {
            physical.push(
                ctx.physical(p)
                    .ok_or_else(|| format!("'{p}' in 'debs' is not a store path"))?,
            );
        }
        let r = rootfs::build(&physical, out, log).map_err(|e| match e {
            // Name the .deb by its store path, not where this machine keeps it.
            RootfsError::Deb(mut d) => {
                if let Some(i) = physical.iter().position(|p| *p == d.deb) {
                    d.deb = PathBuf::from(logical[i]);
                }
                d.to_string()
            }
            other => other.to_string(),
        })?;
        writeln!(
            log,
            "root filesystem: {} packages, {} links made",
            r.packages.len(),
            r.links.len()
        )
        .ok();
        Ok(())
    }
}
