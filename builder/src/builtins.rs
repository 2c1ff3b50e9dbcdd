//! Built-in builders provided from outside this crate.
//!
//! `builtin:fetchurl` is the builder's own. Others need formats that belong
//! to other crates: `builtin:unpack-debs` reads `.deb` archives, which is the
//! Debian crate's business, and the builder may not depend on it (crates
//! depend on `store` only). So the binary registers them here
//! ([`Builtins`], carried by `BuildOptions::builtins`) and the realiser calls
//! them like `fetchurl`: in process, with the derivation's environment, its
//! inputs readable, and a host directory for each output.
//!
//! A built-in builder runs rocmx's own code, outside the sandbox, on inputs
//! that are already in the store; it must write only below its outputs'
//! host paths and must not touch the network (only fixed-output fetches may).
//! Its outputs are post-processed (normalised, scanned, content-addressed)
//! like any build's.

use std::collections::BTreeMap;
use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What a built-in builder is given.
pub struct BuiltinContext<'a> {
    /// The derivation's environment, with output placeholders already replaced
    /// by the (scratch) store paths the outputs will get.
    pub env: &'a BTreeMap<String, String>,
    /// Output name → the host directory to write it to (it does not exist yet).
    pub outputs: &'a BTreeMap<String, PathBuf>,
    /// The store's logical directory (`/rocmx/store`) and where it is on this
    /// machine, to read inputs named by their logical paths.
    pub store_dir: &'a str,
    pub physical_store: &'a Path,
    /// Cores the build may use.
    pub cores: u32,
}

impl BuiltinContext<'_> {
    /// Where a logical path (`/rocmx/store/…`, maybe with a subpath) can be
    /// read; `None` for a path outside the store.
    pub fn physical(&self, logical: &str) -> Option<PathBuf> {
        let rest = logical.strip_prefix(self.store_dir)?.strip_prefix('/')?;
        if rest.is_empty() || rest.split('/').any(|c| c == ".." || c == ".") {
            return None;
        }
        Some(self.physical_store.join(rest))
    }
}

/// A `builtin:NAME` builder.
pub trait BuiltinBuilder: Send + Sync {
    /// Builds the outputs. Progress goes to `log`; the error is the one line
    /// the build failure shows.
    fn build(&self, ctx: &BuiltinContext<'_>, log: &mut dyn Write) -> Result<(), String>;
}

/// The registered built-in builders, by name (without `builtin:`).
#[derive(Clone, Default)]
pub struct Builtins(BTreeMap<String, Arc<dyn BuiltinBuilder>>);

impl Builtins {
    /// Registers `builder` as `builtin:NAME`.
    pub fn register(&mut self, name: &str, builder: Arc<dyn BuiltinBuilder>) {
        self.0.insert(name.to_string(), builder);
    }

    pub fn get(&self, name: &str) -> Option<&Arc<dyn BuiltinBuilder>> {
        self.0.get(name)
    }

    /// The names, for "rocmx knows …" messages.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }
}

impl fmt::Debug for Builtins {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.0.keys()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn physical_paths() {
        let env = BTreeMap::new();
        let outs = BTreeMap::new();
        let c = BuiltinContext {
            env: &env,
            outputs: &outs,
            store_dir: "/rocmx/store",
            physical_store: Path::new("/data/rocmx/store"),
            cores: 1,
        };
        assert_eq!(
            c.physical("/rocmx/store/abc-x.deb"),
            Some(PathBuf::from("/data/rocmx/store/abc-x.deb"))
        );
        assert_eq!(
            c.physical("/rocmx/store/abc-x/sub/f"),
            Some(PathBuf::from("/data/rocmx/store/abc-x/sub/f"))
        );
        assert_eq!(c.physical("/rocmx/store/../etc/passwd"), None);
        assert_eq!(c.physical("/rocmx/storex/a"), None);
        assert_eq!(c.physical("/etc/passwd"), None);
    }
}
