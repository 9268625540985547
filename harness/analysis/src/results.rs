//! What an analysis computes and a [`Cache`](crate::result_cache::Cache) keeps: a lane's run of
//! a sequence, a layer-local replay's account of what it used, a floor.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use tiercheck_model::sequence::Trace;

/// A lane's run of one sequence: its trace and its greedy choices after the prompt.
pub(crate) struct Run {
    pub(crate) trace: Trace,
    pub(crate) generated: Vec<u32>,
}

/// What a layer-local replay could use of the other side's trace: which layers had
/// their input at every step, and where the K/V cache came from.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Replay {
    /// Layers not replayed: the trace lacks their input (`l_out` of the layer before)
    /// at some step.
    pub layers_without_input: Vec<usize>,
    /// Layers whose K/V cache the replaying lane computed itself from the earlier
    /// steps' inputs (the trace lacks `Kcur`/`Vcur` there); the others use the trace's.
    pub own_kv_layers: Vec<usize>,
    /// Whether the embedding rows were recomputed from the ids (no `inp_embd`).
    pub embedding_recomputed: bool,
    /// Whether the head ran (the trace has the last layer's `l_out` at every step).
    pub head: bool,
}

/// A measured floor.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Floor {
    /// The lane it was measured with.
    pub lane: String,
    /// Dither seeds (1..=seeds).
    pub seeds: u64,
    /// Steps of the replayed sequence.
    pub steps: usize,
    /// Per tap name: the floor (relative L2).
    pub per_tap: BTreeMap<String, f64>,
    /// Per tap name: the layer-local floor (relative L2).
    pub layer_local: BTreeMap<String, f64>,
}
