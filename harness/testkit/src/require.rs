//! Which lanes a run must run natively: `TIERCHECK_REQUIRE_LANES`, read the same way by
//! every test suite of the workspace (the golden harness, the thread and model suites,
//! and the architecture crates' own tests).
//!
//! - unset or empty: no lane is required; a native trial that cannot run here is
//!   reported ignored with the reason;
//! - `a,b,...`: the named lanes are required: their native trials fail instead of
//!   being ignored;
//! - `auto`: the `require` list of this target's table (`targets/<triple>.toml`, read by
//!   `tiercheck_targets`) for the CPU model in `QEMU_CPU` (unset or empty: the model
//!   whose `qemu_cpu` is `""`, the host itself). No such model is an error.

use std::path::PathBuf;

/// The target triple of this build as the tables name it (`x86_64-unknown-linux-gnu`,
/// `aarch64-unknown-linux-gnu`, ...).
pub fn triple() -> String {
    tiercheck_targets::TRIPLE.to_string()
}

/// The repository's `targets/` folder, or `$TIERCHECK_TARGETS_DIR`.
pub fn targets_dir() -> PathBuf {
    tiercheck_targets::targets_dir()
}

/// The lanes that must run natively in this run, from `TIERCHECK_REQUIRE_LANES` and
/// (for `auto`) `QEMU_CPU`; an error names what is wrong with the setting.
pub fn required_lanes() -> Result<Vec<String>, String> {
    let spec = std::env::var("TIERCHECK_REQUIRE_LANES").unwrap_or_default();
    let qemu_cpu = std::env::var("QEMU_CPU").unwrap_or_default();
    resolve(&spec, &qemu_cpu)
}

/// Whether `lane` must run natively in this run (see [`required_lanes`]).
pub fn lane_required(lane: &str) -> Result<bool, String> {
    Ok(required_lanes()?.iter().any(|l| l == lane))
}

/// [`required_lanes`] for a given setting and CPU model.
pub fn resolve(spec: &str, qemu_cpu: &str) -> Result<Vec<String>, String> {
    let spec = spec.trim();
    if spec != "auto" {
        return Ok(spec
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect());
    }
    let table = tiercheck_targets::load(&targets_dir(), &triple())
        .map_err(|e| format!("TIERCHECK_REQUIRE_LANES=auto: {e}"))?;
    table.models.into_iter().find(|m| m.qemu_cpu == qemu_cpu).map(|m| m.require).ok_or_else(|| {
        format!(
            "TIERCHECK_REQUIRE_LANES=auto: no model for QEMU_CPU={qemu_cpu:?} in {}",
            targets_dir().join(format!("{}.toml", triple())).display()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explicit_specs_are_lists() {
        assert_eq!(resolve("", "").unwrap(), Vec::<String>::new());
        assert_eq!(resolve(" a , b,", "").unwrap(), vec!["a".to_string(), "b".to_string()]);
    }

    #[test]
    fn auto_reads_the_committed_table_of_this_target() {
        match tiercheck_targets::load(&targets_dir(), &triple()) {
            Ok(table) => {
                for m in &table.models {
                    assert_eq!(resolve("auto", &m.qemu_cpu).unwrap(), m.require);
                }
                assert!(resolve("auto", "no-such-cpu-model").unwrap_err().contains("no model"));
            }
            Err(e) => assert!(resolve("auto", "").unwrap_err().contains(&e.to_string())),
        }
    }
}
