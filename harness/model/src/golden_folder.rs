//! The repository's golden folder, as this build finds it, and whether this environment
//! may rewrite what is in it. The embedded model's recipe and the prompts live there, as
//! do the kernel and model goldens (the `tiercheck-golden` crate).

use std::path::{Path, PathBuf};

/// `$TIERCHECK_GOLDEN_DIR`, else the repository's `golden/` (as built).
pub fn golden_dir() -> PathBuf {
    match std::env::var_os("TIERCHECK_GOLDEN_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => {
            let built = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../golden"));
            // Show a clean path where the parent exists.
            built
                .parent()
                .and_then(|p| p.canonicalize().ok())
                .map(|p| p.join("golden"))
                .unwrap_or_else(|| built.to_owned())
        }
    }
}

/// Whether refreshing goldens, or the recipe's sha256, is allowed here (`CI` unset or
/// empty).
pub fn refresh_allowed() -> bool {
    std::env::var_os("CI").is_none_or(|v| v.is_empty())
}
