//! Target tables (`targets/<triple>.toml`): which lanes exist on a target and which
//! CPU models (qemu-user models, or the host itself) serve them. The CI script reads
//! them through `tiercheck targets`, and the golden harness through
//! [`required_lanes_for`], so the table is written once.

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// One CPU model a target's suite runs on.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Model {
    /// Short name.
    pub name: String,
    /// `QEMU_CPU` value; empty for the host itself.
    pub qemu_cpu: String,
    /// Native lanes that must run on this model (their ignores become failures).
    pub require: Vec<String>,
    /// Free text.
    #[serde(default)]
    pub note: Option<String>,
}

/// A target table.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct TargetTable {
    /// Target triple; must match the file name.
    pub triple: String,
    /// Test runner for cross targets.
    #[serde(default)]
    pub runner: Option<String>,
    /// Lanes with a native implementation or a meaning on this target.
    pub lanes: Vec<String>,
    /// The model of each lane's own tier (`lane = "model name"`): the CPU model a lane
    /// runs on when the tool runs it under qemu (`tiercheck matrix`, the decoder stage of
    /// CI). A lane not listed takes the first model that requires it.
    #[serde(default)]
    pub tier_model: std::collections::BTreeMap<String, String>,
    /// CPU models.
    #[serde(rename = "model", default)]
    pub models: Vec<Model>,
}

impl TargetTable {
    /// The CPU model of `lane`'s own tier (see [`TargetTable::tier_model`]), if the table
    /// has one for it.
    pub fn model_for(&self, lane: &str) -> Option<&Model> {
        match self.tier_model.get(lane) {
            Some(name) => self.models.iter().find(|m| &m.name == name),
            None => self.models.iter().find(|m| m.require.iter().any(|r| r == lane)),
        }
    }
}

/// Errors reading a target table.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The file is not a valid table.
    #[error("{path}: {problem}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
}

/// The target triple this binary was built for.
pub const TRIPLE: &str = env!("TIERCHECK_TARGET");

/// The repository's `targets/` folder (as built), or `$TIERCHECK_TARGETS_DIR`.
pub fn targets_dir() -> PathBuf {
    match std::env::var_os("TIERCHECK_TARGETS_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../targets")),
    }
}

/// Read and validate `dir/<triple>.toml`.
pub fn load(dir: &Path, triple: &str) -> Result<TargetTable, TargetError> {
    let path = dir.join(format!("{triple}.toml"));
    let text = std::fs::read_to_string(&path)
        .map_err(|source| TargetError::Io { path: path.clone(), source })?;
    parse(&path, &text)
}

/// Parse and validate a table's text (`path` names it in errors).
pub fn parse(path: &Path, text: &str) -> Result<TargetTable, TargetError> {
    let invalid = |problem: String| TargetError::Invalid { path: path.to_owned(), problem };
    let t: TargetTable = toml::from_str(text).map_err(|e| invalid(e.to_string()))?;
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
    if t.triple != stem {
        return Err(invalid(format!(
            "triple `{}` does not match the file name `{stem}`",
            t.triple
        )));
    }
    for l in &t.lanes {
        if tiercheck_core::lane(l).is_none() {
            return Err(invalid(format!("unknown lane `{l}`")));
        }
    }
    if t.models.is_empty() {
        return Err(invalid("no [[model]] entries".into()));
    }
    let mut names = std::collections::HashSet::new();
    for m in &t.models {
        if !names.insert(&m.name) {
            return Err(invalid(format!("duplicate model `{}`", m.name)));
        }
        for l in &m.require {
            if !t.lanes.contains(l) {
                return Err(invalid(format!(
                    "model `{}` requires `{l}`, which is not in `lanes`",
                    m.name
                )));
            }
        }
    }
    for (lane, model) in &t.tier_model {
        if !t.lanes.contains(lane) {
            return Err(invalid(format!("tier_model names `{lane}`, which is not in `lanes`")));
        }
        match t.models.iter().find(|m| &m.name == model) {
            None => {
                return Err(invalid(format!("tier_model `{lane}`: no [[model]] named `{model}`")))
            }
            Some(m) if !m.require.contains(lane) => {
                return Err(invalid(format!(
                    "tier_model `{lane}`: model `{model}` does not require `{lane}`"
                )))
            }
            Some(_) => {}
        }
    }
    Ok(t)
}

/// The target table of the CPU architecture `arch` (`x86_64`, `aarch64`) on Linux.
pub fn load_arch(arch: &str) -> Result<TargetTable, TargetError> {
    load(&targets_dir(), &format!("{arch}-unknown-linux-gnu"))
}

/// The lanes that must run natively here, from this build's target table and the
/// `QEMU_CPU` in effect (empty: the host model). `None` when no table or model applies.
pub fn required_lanes_for(triple: &str, qemu_cpu: Option<&str>) -> Option<Vec<String>> {
    let table = load(&targets_dir(), triple).ok()?;
    let cpu = qemu_cpu.unwrap_or("");
    table.models.iter().find(|m| m.qemu_cpu == cpu).map(|m| m.require.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn committed_tables_parse_and_errors_name_the_file() {
        for triple in ["x86_64-unknown-linux-gnu", "aarch64-unknown-linux-gnu"] {
            let t = load(&targets_dir(), triple).unwrap();
            assert!(!t.models.is_empty());
        }
        let p = Path::new("targets/x86_64-unknown-linux-gnu.toml");
        let bad = |text: &str| parse(p, text).unwrap_err().to_string();
        assert!(bad("triple = 3").contains("x86_64-unknown-linux-gnu.toml"));
        let base = "triple = \"x86_64-unknown-linux-gnu\"\nlanes = [\"ref\"]\n";
        assert!(bad(base).contains("no [[model]]"));
        assert!(bad(&format!(
            "{base}[[model]]\nname = \"a\"\nqemu_cpu = \"\"\nrequire = [\"x86_64-avx2\"]\n"
        ))
        .contains("not in `lanes`"));
        assert!(bad(
            "triple = \"x\"\nlanes = []\n[[model]]\nname = \"a\"\nqemu_cpu = \"\"\nrequire = []\n"
        )
        .contains("does not match"));
        assert!(bad(&format!("{base}lanes2 = 1\n")).contains("unknown field"));
        assert!(bad("triple = \"x86_64-unknown-linux-gnu\"\nlanes = [\"nope\"]\n[[model]]\nname = \"a\"\nqemu_cpu = \"\"\nrequire = []\n")
            .contains("unknown lane"));
    }
}
