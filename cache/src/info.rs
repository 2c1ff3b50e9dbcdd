//! `rocmx-cache-info`: what a cache says about itself.
//!
//! ```text
//! StoreDir: /rocmx/store
//! WantMassQuery: 1
//! Priority: 40
//! ```
//!
//! `StoreDir` must be rocmx's logical store directory (a cache for another store
//! directory holds paths this store cannot use). `Priority`: lower is asked first
//! among caches of the same list position policy (default 50). Unknown keys are
//! ignored. Must not: fetch anything.

use rocmx_store::STORE_DIR;

/// A parsed `rocmx-cache-info`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheInfo {
    pub store_dir: String,
    pub want_mass_query: bool,
    pub priority: u32,
}

impl Default for CacheInfo {
    fn default() -> Self {
        CacheInfo {
            store_dir: STORE_DIR.to_string(),
            want_mass_query: true,
            priority: 50,
        }
    }
}

impl CacheInfo {
    /// Parses the text; a different `StoreDir` is an error.
    pub fn parse(text: &str) -> Result<CacheInfo, String> {
        let mut info = CacheInfo::default();
        let mut store_dir = None;
        for (i, line) in text.lines().enumerate() {
            let Some((k, v)) = line.split_once(':') else {
                if line.trim().is_empty() {
                    continue;
                }
                return Err(format!(
                    "rocmx-cache-info line {}: '{line}' is not 'Key: value'",
                    i + 1
                ));
            };
            let v = v.trim();
            match k.trim() {
                "StoreDir" => store_dir = Some(v.to_string()),
                "WantMassQuery" => info.want_mass_query = v == "1",
                "Priority" => {
                    info.priority = v.parse().map_err(|_| {
                        format!(
                            "rocmx-cache-info line {}: Priority '{v}' is not a number",
                            i + 1
                        )
                    })?
                }
                _ => {}
            }
        }
        let store_dir = store_dir.ok_or("rocmx-cache-info has no StoreDir line")?;
        if store_dir != STORE_DIR {
            return Err(format!(
                "the cache holds paths of the store '{store_dir}', not '{STORE_DIR}'"
            ));
        }
        info.store_dir = store_dir;
        Ok(info)
    }

    /// The text.
    pub fn to_text(&self) -> String {
        format!(
            "StoreDir: {}\nWantMassQuery: {}\nPriority: {}\n",
            self.store_dir,
            u8::from(self.want_mass_query),
            self.priority
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literal_form() {
        let t = "StoreDir: /rocmx/store\nWantMassQuery: 1\nPriority: 40\n";
        let i = CacheInfo::parse(t).unwrap();
        assert_eq!(i.priority, 40);
        assert_eq!(i.to_text(), t);
        let e = CacheInfo::parse("StoreDir: /nix/store\n").unwrap_err();
        assert!(e.contains("'/nix/store', not '/rocmx/store'"), "{e}");
        assert!(CacheInfo::parse("Priority: x\nStoreDir: /rocmx/store")
            .unwrap_err()
            .contains("line 1"));
    }
}
