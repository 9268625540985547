//! Provenance metadata recorded in every file tiercheck writes.

use std::collections::BTreeMap;

use crate::host;

/// tiercheck's version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// `tiercheck --version`: the version and the git revision this build was made from.
pub const VERSION_LONG: &str =
    concat!(env!("CARGO_PKG_VERSION"), " (git ", env!("TIERCHECK_GIT_REV"), ")");

/// The git revision this binary was built from, if the build could tell.
pub fn git_revision() -> &'static str {
    option_env!("TIERCHECK_GIT_REV").unwrap_or("unknown")
}

/// Version, git revision, architecture, CPU features and qemu model.
pub fn base() -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    m.insert("tiercheck_version".into(), VERSION.to_string());
    m.insert("git_revision".into(), git_revision().to_string());
    m.insert("arch".into(), host::arch().to_string());
    m.insert("cpu_features".into(), host::cpu_feature_string());
    if let Some(q) = host::qemu_cpu() {
        m.insert("qemu_cpu".into(), q);
    }
    m
}
