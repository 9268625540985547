//! Taps: the named per-layer tensors a decoder step produces (llama.cpp's eval-callback
//! names), and where they go while the decoder runs.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

use super::hex;

/// The per-layer tap kinds of a dense model (llama.cpp's eval-callback names, suffixed
/// `-L`), in graph order.
pub const LAYER_TAPS: [&str; 10] = [
    "attn_norm",
    "Qcur",
    "Kcur",
    "Vcur",
    "kqv_out",
    "ffn_inp",
    "ffn_norm",
    "ffn_swiglu",
    "ffn_out",
    "l_out",
];

/// Every per-layer tap kind of every architecture, in graph order (dense and
/// mixture-of-experts feed-forward taps between `ffn_norm` and `l_out`).
pub const ALL_LAYER_TAPS: [&str; 22] = [
    "attn_norm",
    "Qcur",
    "Kcur",
    "Vcur",
    "kqv_out",
    "ffn_inp",
    "ffn_norm",
    "ffn_moe_logits",
    "ffn_moe_probs",
    "ffn_moe_topk",
    "ffn_moe_weights",
    "ffn_moe_weights_sum",
    "ffn_moe_weights_norm",
    "ffn_moe_up",
    "ffn_moe_gate",
    "ffn_moe_swiglu",
    "ffn_moe_down",
    "ffn_moe_weighted",
    "ffn_moe_out",
    "ffn_swiglu",
    "ffn_out",
    "l_out",
];

/// The per-layer tap kinds of a model with hyper-parameters `hp`, in graph order: a
/// dense model's [`LAYER_TAPS`]; a `qwen3moe` model's `build_moe_ffn` names in place of
/// `ffn_swiglu` and `ffn_out` (the router's logits and softmax, the selected experts
/// `ffn_moe_topk` stored as floats, their weights before and after normalisation and the
/// weights' sum, each expert's up, gate, SwiGLU and down rows, one row per token with the
/// selected experts side by side, the down rows times their weights, and their sum).
pub fn layer_taps(hp: &crate::HParams) -> Vec<&'static str> {
    let moe = hp.moe.is_some();
    ALL_LAYER_TAPS
        .into_iter()
        .filter(|k| {
            let of_moe = k.starts_with("ffn_moe_");
            let of_dense = matches!(*k, "ffn_swiglu" | "ffn_out");
            !(of_moe && !moe || of_dense && moe)
        })
        .collect()
}

/// Whether tap `name` of a model of `n_layer` layers is one llama.cpp computes for the
/// output rows only (after `get_rows(inp_out_ids)` in the last layer): every tap from
/// `ffn_inp` on of the last layer, `result_norm`, `result_output`.
pub fn is_pruned(name: &str, n_layer: usize) -> bool {
    if name == "result_norm" || name == "result_output" {
        return true;
    }
    let Some((kind, layer)) = name.rsplit_once('-') else { return false };
    let last = n_layer.checked_sub(1).map(|l| l.to_string());
    let from_ffn_inp = ALL_LAYER_TAPS.iter().position(|k| *k == kind).is_some_and(|i| i >= 5);
    from_ffn_inp && Some(layer.to_string()) == last
}

/// One named per-layer tensor of one step.
#[derive(Clone, Debug, PartialEq)]
pub struct Tap {
    /// Step number.
    pub step: usize,
    /// llama.cpp eval-callback name (`attn_norm-3`, `result_output`, ...).
    pub name: String,
    /// Rows (tokens of the step; its output rows for a pruned tap).
    pub rows: usize,
    /// Values, row-major.
    pub data: Vec<f32>,
}

/// Where taps go: kept whole (for traces), hashed (for goldens), or dropped.
#[derive(Default)]
pub struct TapSink {
    step: usize,
    keep: bool,
    hash: bool,
    taps: Vec<Tap>,
    /// Index into `taps` of each (step, name) kept, so the graphs (ubatches) of a step
    /// append their rows to one tap.
    index: BTreeMap<(usize, String), usize>,
    digests: BTreeMap<String, Sha256>,
}

impl TapSink {
    /// Drop every tap.
    pub fn none() -> TapSink {
        TapSink::default()
    }

    /// Keep every tap and/or hash each tap name's bytes over all steps.
    pub fn new(keep: bool, hash: bool) -> TapSink {
        TapSink { keep, hash, ..TapSink::default() }
    }

    /// Set the step that following taps belong to.
    pub fn set_step(&mut self, step: usize) {
        self.step = step;
    }

    /// The kept taps so far, removed from the sink (a caller comparing as it goes).
    pub fn take(&mut self) -> Vec<Tap> {
        self.index.clear();
        std::mem::take(&mut self.taps)
    }

    /// Record one tap: `rows` rows of a graph of the current step. A step evaluated as
    /// several graphs puts each tap once per graph; the rows are appended in order (a
    /// graph with no rows of a tap adds nothing).
    pub fn put(&mut self, name: &str, rows: usize, data: &[f32]) {
        if rows == 0 {
            return;
        }
        if self.hash {
            let h = self.digests.entry(name.to_string()).or_default();
            for v in data {
                h.update(v.to_bits().to_le_bytes());
            }
        }
        if self.keep {
            let key = (self.step, name.to_string());
            if let Some(&i) = self.index.get(&key) {
                let t = &mut self.taps[i];
                t.rows += rows;
                t.data.extend_from_slice(data);
                return;
            }
            self.index.insert(key, self.taps.len());
            self.taps.push(Tap {
                step: self.step,
                name: name.to_string(),
                rows,
                data: data.to_vec(),
            });
        }
    }

    /// The kept taps.
    pub fn into_taps(self) -> (Vec<Tap>, BTreeMap<String, String>) {
        let d = self.digests.into_iter().map(|(k, h)| (k, hex(&h.finalize()))).collect();
        (self.taps, d)
    }
}
