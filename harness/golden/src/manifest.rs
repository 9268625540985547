//! The golden manifest: one JSON file per lane (`golden/lanes/<lane>/manifest.json`),
//! keys in a stable order, one entry per output tensor, each on its own line.
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
    /// JSON with one entry per line, compact within the line, and a trailing newline
    /// (stable: keys are sorted maps or fixed struct order). A refresh's diff is then one
    /// line per case that moved, and the file a third smaller than indented JSON.
    pub fn to_json(&self) -> String {
        let text = |v: &str| serde_json::to_string(v).expect("strings serialize");
        let mut s = format!(
            "{{\n\"format\": {},\n\"lane\": {},\n\"outputs_file\": {},\n\"entries\": {{",
            self.format,
            text(&self.lane),
            text(&self.outputs_file)
        );
        for (i, (name, e)) in self.entries.iter().enumerate() {
            let entry = serde_json::to_string(e).expect("entries serialize");
            s += &format!("{}\n{}: {entry}", if i == 0 { "" } else { "," }, text(name));
        }
        s += "\n}\n}\n";
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_one_entry_per_line_layout_reads_back_as_written() {
        let prov = Provenance {
            lane: "ref".into(),
            implementation: "portable".into(),
            cpu_features: "avx2".into(),
            qemu_cpu: None,
            tiercheck_version: "0".into(),
            git_revision: "r".into(),
        };
        let e = |sha: &str| {
            Entry {
                sha256: sha.into(),
                shape: vec![2],
                dtype: "f32".into(),
                stored: 2,
                stored_sha256: sha.into(),
                stats: Stats { min: -1.5, max: 2.0, mean: 0.25, nonfinite: 0 },
                provenance: prov.clone(),
                check: String::new(),
            }
            .seal("a")
        };
        let m = Manifest {
            format: FORMAT,
            lane: "ref".into(),
            outputs_file: "outputs-0.safetensors".into(),
            entries: [("a/\"q\"".to_string(), e("00")), ("b".to_string(), e("11"))].into(),
        };
        let text = m.to_json();
        assert_eq!(text.lines().count(), 9, "{text}");
        assert_eq!(serde_json::from_str::<Manifest>(&text).unwrap(), m);
        let empty = Manifest { entries: BTreeMap::new(), ..m };
        assert_eq!(serde_json::from_str::<Manifest>(&empty.to_json()).unwrap(), empty);
    }
}
