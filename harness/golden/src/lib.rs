//! The golden store: shared kernel inputs, per-lane expected outputs checked bitwise,
//! tolerance checks against `ref` and the exact answer, and the safe refresh.
//!
//! - [`cases`]: the case catalogue and its seeded input generator;
//! - [`store`]: the files under `golden/` and their integrity checks;
//! - [`manifest`]: per-lane manifests (digest, shape, dtype, stats, provenance);
//! - [`run`]: running one case on one lane implementation;
//! - [`check`]: the bitwise, twin and tolerance checks;
//! - [`exact`]: exact dot products and rigorous float error bounds;
//! - [`compare`]: bitwise, tolerance and per-element bound comparisons of outputs;
//! - [`bless`]: refreshing goldens ("bless");
//! - [`model`]: the decoder's per-lane goldens (tokens and tap digests);
//! - [`fuzzing`]: the parser entry points the fuzz targets and the corpus replay share.

pub mod bless;
pub mod cases;
pub mod check;
pub mod compare;
pub mod exact;
pub mod fuzzing;
pub mod manifest;
pub mod model;
pub mod output;
pub mod run;
pub mod store;

pub use cases::{catalogue, Case, Op};
pub use output::Output;
pub use store::{GoldenDir, GoldenError, Inputs, LaneGolden};

/// What `tiercheck golden verify` found.
#[derive(Debug, Default)]
pub struct VerifyReport {
    /// Lines describing what was checked and found sound.
    pub checked: Vec<String>,
    /// Corruption found, one line each.
    pub problems: Vec<String>,
}

impl std::fmt::Display for VerifyReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for c in &self.checked {
            writeln!(f, "ok: {c}")?;
        }
        for p in &self.problems {
            writeln!(f, "CORRUPT: {p}")?;
        }
        Ok(())
    }
}

/// Check the inputs against their manifest and every lane's manifest against its
/// outputs, entry by entry.
pub fn verify(dir: &GoldenDir) -> VerifyReport {
    let mut r = VerifyReport::default();
    match dir.load_inputs() {
        Ok(inputs) => {
            r.checked.push(format!("inputs: {} tensors match their manifest", inputs.len()))
        }
        Err(e) => r.problems.push(e.to_string()),
    }
    let lanes_dir = dir.root().join("lanes");
    let mut names: Vec<String> = std::fs::read_dir(&lanes_dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    for name in names {
        if tiercheck_core::lane(&name).is_none() {
            r.problems.push(format!(
                "{}: folder for unknown lane `{name}`",
                lanes_dir.join(&name).display()
            ));
            continue;
        }
        match dir.load_lane(&name) {
            Ok(g) => {
                let mut bad = 0;
                for case in g.manifest.entries.keys() {
                    if let Err(e) = g.expected(case) {
                        r.problems.push(e.to_string());
                        bad += 1;
                    }
                }
                if bad == 0 {
                    r.checked.push(format!(
                        "lane {name}: {} entries match their outputs",
                        g.manifest.entries.len()
                    ));
                }
            }
            Err(e) => r.problems.push(e.to_string()),
        }
    }
    r
}
