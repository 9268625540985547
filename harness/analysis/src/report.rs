//! The report of a delta run ([`DeltaReport`]) and its overall verdict ([`Headline`]).

use serde::{Deserialize, Serialize};

use tiercheck_model::Mode;

use crate::flips::Flip;
use crate::free_running::Divergence;
use crate::layer_local::LayerVerdict;
use crate::result_cache::StageCost;
use crate::results::Floor;
use crate::teacher_forced::TeacherForced;

/// The whole report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeltaReport {
    /// Side A.
    pub a: String,
    /// Side B.
    pub b: String,
    /// Model sha256.
    pub model_sha256: String,
    /// Prompt ids.
    pub prompt: Vec<u32>,
    /// Mode.
    pub mode: Mode,
    /// The lanes' attention options (`kv=f16 fa=on`; a trace side's when there is one,
    /// as identified when it does not record them; `unknown` when neither).
    pub attention: String,
    /// How each trace side was matched to a lane (its provenance, or `identify`), or why
    /// it was not: the lanes the layer-local comparison and the floor ran with.
    #[serde(default)]
    pub sides: Vec<String>,
    /// Near-tie threshold.
    pub threshold: f32,
    /// A's greedy tokens.
    pub tokens_a: Vec<u32>,
    /// B's greedy tokens.
    pub tokens_b: Vec<u32>,
    /// Greedy tokens equal before the first difference.
    pub tokens_agree: usize,
    /// Free-running tap comparison (steps with identical inputs).
    pub free: Divergence,
    /// Free-running verdict.
    pub free_verdict: String,
    /// Teacher-forced comparison.
    pub teacher: Option<TeacherForced>,
    /// Teacher-forced verdict.
    pub teacher_verdict: String,
    /// Layer-local comparison, when one side is a lane.
    pub layer_local: Option<Divergence>,
    /// Which lane ran layer-locally on whose inputs.
    pub layer_local_how: String,
    /// Activation-code comparisons (layer-local), where codes differ.
    pub flips: Vec<Flip>,
    /// Per layer, the layer-local verdict against the floor.
    pub layer_verdicts: Vec<LayerVerdict>,
    /// The floor: lane, seeds, per tap.
    pub floor: Option<Floor>,
    /// The overall verdict: the worst of the parts below.
    #[serde(default)]
    pub headline: Headline,
    /// Taps A has and B lacks, summarised by kind (`Qcur (28 layers)`, `inp_embd`): a
    /// partial trace is compared on the taps both sides have.
    #[serde(default)]
    pub taps_only_a: Vec<String>,
    /// Taps B has and A lacks, summarised by kind.
    #[serde(default)]
    pub taps_only_b: Vec<String>,
    /// A mixture-of-experts model: the first step, layer and token whose experts differ
    /// between the sides (free-running steps with identical inputs), and whether the
    /// router made it a near-tie; `None` where the experts agree or the model is dense.
    #[serde(default)]
    pub routing: Option<crate::routing::RoutingChange>,
    /// Each stage's wall time and the results it computed and reused (not part of the
    /// analysis: two reports of the same comparison differ here).
    #[serde(default)]
    pub costs: Vec<StageCost>,
}

impl DeltaReport {
    /// The report without its stage costs (what two runs of one comparison agree on).
    pub fn without_costs(&self) -> DeltaReport {
        DeltaReport { costs: Vec::new(), ..self.clone() }
    }
}

/// The overall verdict of a delta report: the worst of its parts.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Headline {
    /// From worst to best: `not-lane` (a trace that says it is lane L differs from L),
    /// `discrepancy` (a layer exceeds its layer-local floor with no flip to explain it),
    /// `not-near-tie` (tokens part where neither side had a near-tie), `flips`
    /// (near-boundary activation flips), `noise` (within the floor), `identical`.
    pub kind: String,
    /// In words, with the teacher-forced divergence's size.
    pub text: String,
}
