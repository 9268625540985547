//! Divergence analysis between two lanes or traces (`tiercheck delta`).
//!
//! The question is always the same: two tiers ran one model and disagree somewhere. Is
//! the disagreement the noise two legitimate reduction orders make (a near-tie decided
//! by the last bits), or is one tier wrong, and where? The report answers in layers:
//!
//! - **free-running** ([`free_running`]): both sides decode greedily; their taps are compared step by step
//!   while their inputs are still the same (up to the first differing token), giving
//!   the first step and tap whose bits differ and a per-tap profile;
//! - **teacher-forced** ([`teacher_forced`]): one side replays the other's token sequence, so every step has
//!   the same context: per-step KLD, top-1 agreement, max |Δlogit|, and the near-tie
//!   table (tokens that differ or gaps below a threshold);
//! - **layer-local** ([`layer_local`]): a lane's layer `L` is fed exactly the input (and KV cache) the
//!   other side's layer `L` received, separating each layer's own contribution from
//!   what it inherited;
//! - **activation-quantization flips** ([`flips`]): at each quantized matmul input of the layer-local run
//!   (`attn_norm`, `kqv_out`, `ffn_norm`, `ffn_swiglu`, `result_norm`),
//!   the two sides' int8 activation codes are compared, with the distance of each
//!   flipped value from its rounding boundary and the output change the flips alone
//!   cause;
//! - **the floor** ([`floor`]): the divergence one lane has against itself when the
//!   residual stream after layer 0 is dithered by one ulp; every divergence is also
//!   given as a ratio to it.
//!
//! [`delta()`] runs the two sides and then each layer of the report in turn; [`attribute`]
//! answers the next question (which recipe component accounts for the divergence), and
//! [`plot`] draws the per-layer profile.
//!
//! The modules, from the bottom up (each uses only modules above it in this list):
//! `trace` (what a trace records, the order of tap names), `results` (what an analysis
//! computes and the cache keeps), [`metrics`], `side` (one side of a comparison and its
//! lane's runs), [`flips`], [`result_cache`] (the cache), [`free_running`], [`teacher_forced`],
//! [`layer_local`], [`floor`], [`identify`], [`attribute`], `report` ([`DeltaReport`]),
//! `delta` (the orchestration of [`delta()`]) and [`plot`].

pub mod attribute;
mod delta;
pub mod flips;
pub mod floor;
pub mod free_running;
pub mod identify;
pub mod layer_local;
pub mod metrics;
pub mod plot;
mod report;
pub mod result_cache;
mod results;
pub mod routing;
mod side;
pub mod teacher_forced;
mod trace;

pub use delta::{delta, delta_cached, delta_results};
pub use flips::Flip;
pub use flips::NEAR_BOUNDARY;
pub use free_running::{Divergence, Jump, TapRow};
pub use layer_local::{LayerVerdict, NOISE_RATIO};
pub use report::{DeltaReport, Headline};
pub use result_cache::{Cache, OnResult, StageCost};
pub use results::{Floor, Replay};
pub use side::{DeltaOptions, Source};
pub use teacher_forced::{StepMetric, TeacherForced};
pub use trace::{check_trace_state, trace_batching, trace_ctx, trace_numa, trace_of, trace_prompt};
