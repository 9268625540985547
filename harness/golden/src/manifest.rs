//! The golden manifest: one JSON file per lane (`golden/lanes/<lane>/manifest.json`),
//! keys in a stable order, one entry per output tensor.
//!
//! Each entry holds the sha256 of the output's exact bits (f32 little-endian or raw
//! block bytes), its shape and dtype, summary statistics of its finite values (for a
//! reviewer: a refresh shows which cases moved and by how much), the provenance of the
//! run that produced it, and `check`: the sha256 of the entry itself without `check`.
//! A manifest whose entry no longer matches its `check` was edited or damaged: that is
//! reported as corruption, never as a kernel failure.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Manifest format version.
pub const FORMAT: u32 = 1;

/// Outputs with more f32 values than this are stored as their first [`SAMPLE`] values
/// plus the digest of the whole (keeps golden/ small; the sample locates most
/// differences, and the digest proves any).
pub(crate) const STORE_FULL_MAX: usize = 4096;
/// Values kept of a large output.
pub const SAMPLE: usize = 1024;

/// Who produced an output.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Provenance {
    /// Lane name.
    pub lane: String,
    /// `native` or `portable`.
    #[serde(rename = "impl")]
    pub implementation: String,
    /// Detected CPU features of the producing host.
    pub cpu_features: String,
    /// qemu CPU model, when produced under qemu-user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qemu_cpu: Option<String>,
    /// tiercheck version.
    pub tiercheck_version: String,
    /// Git revision of the producing build.
    pub git_revision: String,
}

/// Summary statistics of the finite values of an output (f32 outputs directly, block
/// outputs after dequantization).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    /// Smallest finite value (0 when there is none).
    pub min: f64,
    /// Largest finite value (0 when there is none).
    pub max: f64,
    /// Mean of the finite values (0 when there is none).
    pub mean: f64,
    /// Count of NaN and infinite values.
    pub nonfinite: usize,
}

impl Stats {
    /// Statistics of `values`.
    pub fn of(values: &[f32]) -> Stats {
        let finite: Vec<f64> = values.iter().filter(|v| v.is_finite()).map(|&v| v as f64).collect();
        let nonfinite = values.len() - finite.len();
        if finite.is_empty() {
            return Stats { min: 0.0, max: 0.0, mean: 0.0, nonfinite };
        }
        let min = finite.iter().copied().fold(f64::INFINITY, f64::min);
        let max = finite.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let mean = finite.iter().sum::<f64>() / finite.len() as f64;
        Stats { min, max, mean, nonfinite }
    }
}

/// One output tensor's record.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// sha256 of the output's exact bytes, lowercase hex.
    pub sha256: String,
    /// Shape, outermost first.
    pub shape: Vec<usize>,
    /// `f32`, or the block type name (`q8_K`, ...) for quantized outputs.
    pub dtype: String,
    /// How many leading elements (values, or bytes for blocks) the outputs file keeps:
    /// all of them, or for a large output only the first [`SAMPLE`] (the digest covers
    /// the whole output either way).
    pub stored: usize,
    /// sha256 of the stored elements' bytes.
    pub stored_sha256: String,
    /// Statistics for review.
    pub stats: Stats,
    /// Who produced it.
    pub provenance: Provenance,
    /// sha256 of this entry serialized without `check`.
    #[serde(default)]
    pub check: String,
}

impl Entry {
    /// The digest `check` must hold.
    pub(crate) fn expected_check(&self, name: &str) -> String {
        let mut e = self.clone();
        e.check = String::new();
        let json = serde_json::to_string(&e).expect("entries serialize");
        hex(&Sha256::digest(format!("{name}\n{json}").as_bytes()))
    }

    /// Fill in `check`.
    pub fn seal(mut self, name: &str) -> Entry {
        self.check = self.expected_check(name);
        self
    }
}

/// A lane's manifest.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// [`FORMAT`].
    pub format: u32,
    /// The lane whose outputs these are.
    pub lane: String,
    /// File name (in the same folder) of the safetensors file with the outputs.
    pub outputs_file: String,
    /// Entries by case name.
    pub entries: BTreeMap<String, Entry>,
}

impl Manifest {
    /// Pretty JSON with a trailing newline (stable: keys are sorted maps or fixed
    /// struct order).
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).expect("manifests serialize");
        s.push('\n');
        s
    }
}

/// Lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// sha256 of `bytes`, lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}
