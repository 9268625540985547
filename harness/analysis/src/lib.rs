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
//! [`delta`] runs the two sides and then each layer of the report in turn; [`attribute`]
//! answers the next question (which recipe component accounts for the divergence), and
//! [`plot`] draws the per-layer profile.

pub mod attribute;
pub mod flips;
pub mod floor;
pub mod free_running;
pub mod identify;
pub mod layer_local;
pub mod metrics;
pub mod plot;
pub mod reuse;
pub mod teacher_forced;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use reuse::{Costs, Ctx, Run};
use tiercheck_gguf::tensorfile::Tensor;
use tiercheck_lanes::{self as lanes, Chosen, Impl};
use tiercheck_model::run::{self, RunOutput, RunSpec, Trace};
use tiercheck_model::state::KvState;
use tiercheck_model::{
    Arith, Attention, Batching, Decoder, FlashAttn, KvType, Logits, Mode, Model, Residual, TapSink,
};

pub use flips::Flip;
pub use free_running::{Divergence, Jump, TapRow};
pub use layer_local::{LayerVerdict, Replay, NEAR_BOUNDARY, NOISE_RATIO};
pub use reuse::{Cache, OnResult, StageCost};
pub use teacher_forced::{StepMetric, TeacherForced};

/// One side of a comparison.
#[derive(Clone)]
pub enum Source {
    /// A lane, run on the fly.
    Lane(Chosen),
    /// A trace file (tiercheck's, an oracle's, another engine's dump with the same tap
    /// names).
    Trace(PathBuf),
}

impl Source {
    /// A trace file when `arg` names an existing file, else a lane name.
    pub fn parse(arg: &str, imp: Impl) -> anyhow::Result<Source> {
        let p = Path::new(arg);
        if p.is_file() {
            return Ok(Source::Trace(p.to_owned()));
        }
        if arg.ends_with(".safetensors") || arg.contains('/') {
            anyhow::bail!("{arg}: no such trace file");
        }
        let lane = lanes::find(arg).map_err(|e| anyhow::anyhow!("{e} (or give a trace file)"))?;
        Ok(Source::Lane(lanes::choose(lane, imp).map_err(anyhow::Error::msg)?))
    }

    /// A short label.
    pub fn label(&self) -> String {
        match self {
            Source::Lane(c) => format!("{} ({})", c.lane.name, c.impl_name()),
            Source::Trace(p) => p.display().to_string(),
        }
    }

    pub(crate) fn chosen(&self) -> Option<&Chosen> {
        match self {
            Source::Lane(c) => Some(c),
            Source::Trace(_) => None,
        }
    }
}

/// Options of a delta run.
#[derive(Clone, Debug)]
pub struct DeltaOptions {
    /// Prompt ids (for lanes; a trace brings its own).
    pub ids: Vec<u32>,
    /// Greedy steps (for lanes).
    pub steps: usize,
    /// Batching mode (for lanes).
    pub mode: Mode,
    /// Batch and ubatch sizes and output rows of a prompt step (for lanes; a trace's
    /// own, where it records them, for a lane that follows it).
    pub batching: Batching,
    /// Residual stream type.
    pub residual: Residual,
    /// Context length.
    pub n_ctx: usize,
    /// K/V cache type and attention path (for lanes).
    pub attn: Attention,
    /// Near-tie threshold on the top-1/top-2 gap, in nats (logit units).
    pub threshold: f32,
    /// Dither seeds for the floor (0: no floor).
    pub floor_seeds: u64,
    /// Threads per matmul of the lanes' decoders (results do not depend on it).
    pub threads: usize,
    /// How a trace side that is a plain dump (no tiercheck metadata) is imported: its
    /// ids and mode where the file does not say them.
    pub dump: tiercheck_model::import::ImportOptions,
    /// The saved K/V cache the runs start from (a trace side that continued from one
    /// needs it: [`check_trace_state`]).
    pub state: Option<Arc<KvState>>,
}

/// A trace and the saved cache a replay of it starts from agree: a trace that records
/// `state_sha256` needs that very file; a trace that records none starts where the given
/// cache ends (at position 0 without one).
pub fn check_trace_state(path: &Path, t: &Trace, state: Option<&KvState>) -> anyhow::Result<()> {
    let first = t.steps.first().and_then(|s| s.positions.first()).copied().unwrap_or(0);
    let p = path.display();
    match (t.meta.get("state_sha256"), state) {
        (Some(want), Some(s)) if *want != s.sha256 => anyhow::bail!(
            "{p} continued from a saved cache with sha256 {want}; {} has sha256 {}",
            s.path.display(),
            s.sha256
        ),
        (Some(want), None) => {
            let cells = t.meta.get("state_cells").map_or("?", String::as_str);
            anyhow::bail!(
                "{p} continued from a saved cache of {cells} cells (sha256 {want}{}): pass it with --state",
                t.meta.get("state_path").map(|q| format!(", saved as {q}")).unwrap_or_default()
            )
        }
        _ => {}
    }
    let start = state.map_or(0, |s| s.cells);
    if first != start {
        match state {
            Some(s) => anyhow::bail!(
                "{p} starts at position {first}; the saved cache {} ends at {start}",
                s.path.display()
            ),
            None => anyhow::bail!(
                "{p} starts at position {first}: pass the saved cache it continued with --state"
            ),
        }
    }
    Ok(())
}

/// A side's run: its trace, prompt, mode and greedy tokens.
pub(crate) struct SideRun {
    run: Arc<Run>,
    prompt: Vec<u32>,
    mode: Mode,
    generated: Vec<u32>,
    /// The run's cache key (a lane's run; `None` for a trace file).
    key: Option<String>,
}

impl SideRun {
    pub(crate) fn trace(&self) -> &Trace {
        &self.run.trace
    }
}

/// Convert a run into the in-memory form of a trace.
pub fn trace_of(out: RunOutput) -> Trace {
    let mut taps = BTreeMap::new();
    for t in out.taps {
        let width = t.data.len() / t.rows.max(1);
        taps.insert(
            (t.step, t.name.clone()),
            Tensor {
                name: run::tap_key(t.step, &t.name),
                shape: vec![t.rows, width],
                data: t.data,
            },
        );
    }
    Trace { taps, steps: out.steps, meta: BTreeMap::new() }
}

/// A decoder running lane `c` with `o.threads` threads per matmul.
pub(crate) fn decoder<'m>(
    model: &'m Model,
    c: &Chosen,
    o: &DeltaOptions,
) -> anyhow::Result<Decoder<'m>> {
    let threads = o.threads.max(1);
    let arith = Arith::from_chosen(c, threads);
    let mut dec = Decoder::new(model, arith, o.residual, o.n_ctx, o.attn)?;
    dec.set_state(o.state.clone())?;
    Ok(dec)
}

/// Run `spec` keeping every tap.
pub(crate) fn run_spec(dec: &Decoder<'_>, spec: &RunSpec) -> anyhow::Result<RunOutput> {
    Ok(run::run(dec, spec, TapSink::new(true, false))?)
}

/// A lane's run of `spec` as a cached [`Run`].
pub(crate) fn lane_run(dec: &Decoder<'_>, spec: &RunSpec) -> anyhow::Result<Run> {
    let out = run_spec(dec, spec)?;
    let generated = out.generated.clone();
    Ok(Run { trace: trace_of(out), generated })
}

fn side_run(
    ctx: &Ctx<'_>,
    model: &Model,
    src: &Source,
    o: &DeltaOptions,
    prompt: &[u32],
    steps: usize,
    mode: Mode,
) -> anyhow::Result<SideRun> {
    match src {
        Source::Lane(c) => {
            let lane = reuse::lane_key(c, o);
            let key = reuse::run_key(&lane, prompt, mode, steps, &[], None);
            let run = ctx.run(Some(&key), || {
                let dec = decoder(model, c, o)?;
                lane_run(
                    &dec,
                    &RunSpec {
                        ids: prompt.to_vec(),
                        steps,
                        mode,
                        batching: o.batching,
                        forced: Vec::new(),
                    },
                )
            })?;
            // Replaying the tokens it chose itself is the same computation.
            ctx.alias(&reuse::replay_key(&lane, prompt, mode, &run.generated), &run);
            let generated = run.generated.clone();
            Ok(SideRun { run, prompt: prompt.to_vec(), mode, generated, key: Some(key) })
        }
        Source::Trace(p) => {
            let trace = tiercheck_model::import::load(model, p, &o.dump)?;
            check_trace_state(p, &trace, o.state.as_deref())?;
            let (prompt, mode, generated) = trace_shape(p, &trace)?;
            let run = Arc::new(Run { trace, generated: generated.clone() });
            Ok(SideRun { run, prompt, mode, generated, key: None })
        }
    }
}

/// Whether a trace's tier ran NUMA-aware: tiercheck's `tier_numa = on`, or the capture
/// tool's `numa` naming a strategy (`distribute`, `isolate`, `numactl`: ggml found
/// several nodes; `off` where it found one).
pub fn trace_numa(t: &Trace) -> bool {
    t.meta.get("tier_numa").is_some_and(|v| v == "on")
        || t.meta.get("numa").is_some_and(|v| !v.is_empty() && v != "off")
}

/// The attention options a trace records (`kv`, `fa`, `tier_threads` metadata; a trace
/// of llama.cpp records its `threads`), each one it lacks taken from `default`.
fn trace_attention(path: &Path, t: &Trace, default: Attention) -> anyhow::Result<Attention> {
    let mut a = default;
    match t.meta.get("kv").map(String::as_str) {
        Some("f16") => a.kv = KvType::F16,
        Some("f32") => a.kv = KvType::F32,
        Some(other) => {
            anyhow::bail!("{}: metadata kv = '{other}' (known: f16, f32)", path.display())
        }
        None => {}
    }
    match t.meta.get("fa").map(String::as_str) {
        Some("on") => a.fa = FlashAttn::On,
        Some("off") => a.fa = FlashAttn::Off,
        Some(other) => {
            anyhow::bail!("{}: metadata fa = '{other}' (known: on, off)", path.display())
        }
        None => {}
    }
    let threads = t.meta.get("tier_threads").or_else(|| t.meta.get("threads"));
    if let Some(v) = threads {
        a.tier_threads = match v.parse::<usize>() {
            Ok(n) if n >= 1 => n,
            _ => {
                anyhow::bail!("{}: metadata threads = '{v}' is not a thread count", path.display())
            }
        };
    }
    if t.meta.contains_key("tier_numa") || t.meta.contains_key("numa") {
        a.tier_numa = trace_numa(t);
    }
    Ok(a)
}

/// The batching a trace records: `n_batch`, `n_ubatch` and `logits` metadata, each one
/// it lacks taken from its step records (a prompt step's recorded graphs and output
/// rows; a trace whose records say neither ran its prompt as one graph, and its pruned
/// taps tell whether every row was an output), else from `default`.
pub fn trace_batching(
    path: &Path,
    t: &Trace,
    default: Batching,
    n_layer: usize,
) -> anyhow::Result<Batching> {
    let mut b = default;
    let num = |key: &str| -> anyhow::Result<Option<usize>> {
        match t.meta.get(key) {
            None => Ok(None),
            Some(v) => match v.parse::<usize>() {
                Ok(n) if n >= 1 => Ok(Some(n)),
                _ => anyhow::bail!("{}: metadata {key} = '{v}' is not a size", path.display()),
            },
        }
    };
    let first = t.steps.first();
    let rows = first.map_or(1, |s| s.rows().max(1));
    // Without metadata: the first step's graphs (their largest is the ubatch size, the
    // whole step one batch), or one graph of the whole step.
    let graphs = first.map(|s| s.ubatch_rows()).unwrap_or_default();
    let widest = graphs.iter().copied().max().unwrap_or(rows).max(1);
    b.n_batch = num("n_batch")?.unwrap_or(rows.max(widest));
    b.n_ubatch = num("n_ubatch")?.unwrap_or(widest);
    b.logits = match t.meta.get("logits").map(String::as_str) {
        Some("last") => Logits::Last,
        Some("all") => Logits::All,
        Some(other) => {
            anyhow::bail!("{}: metadata logits = '{other}' (known: last, all)", path.display())
        }
        None => match first {
            Some(s) if s.outputs.is_some() => Logits::Last,
            Some(s) => {
                let pruned = t
                    .taps
                    .iter()
                    .find(|((step, name), _)| *step == s.step && run::is_pruned(name, n_layer));
                match pruned {
                    Some((_, tensor)) if tensor.shape[0] < s.rows() => Logits::Last,
                    Some(_) => Logits::All,
                    None => default.logits,
                }
            }
            None => default.logits,
        },
    };
    Ok(b)
}

/// The prompt, mode and greedy tokens a trace records (`path` names it in errors).
pub fn trace_prompt(path: &Path, t: &Trace) -> anyhow::Result<(Vec<u32>, Mode, Vec<u32>)> {
    trace_shape(path, t)
}

/// The prompt, mode and greedy tokens a trace file records.
fn trace_shape(path: &Path, t: &Trace) -> anyhow::Result<(Vec<u32>, Mode, Vec<u32>)> {
    let first = t
        .steps
        .first()
        .ok_or_else(|| anyhow::anyhow!("{}: the trace has no steps", path.display()))?;
    let mode = match t.meta.get("mode").map(String::as_str) {
        Some("decode") => Mode::Decode,
        Some("prompt") => Mode::Prompt,
        Some(other) => anyhow::bail!("{}: unknown mode '{other}'", path.display()),
        None if first.input_ids.len() > 1 => Mode::Prompt,
        None => Mode::Decode,
    };
    let prompt: Vec<u32> = match t.meta.get("prompt_ids") {
        Some(s) => serde_json::from_str(s)
            .map_err(|e| anyhow::anyhow!("{}: metadata prompt_ids: {e}", path.display()))?,
        None => first.input_ids.clone(),
    };
    let prompt_steps = match mode {
        Mode::Prompt => 1,
        Mode::Decode => prompt.len(),
    };
    if prompt_steps == 0 || prompt_steps > t.steps.len() {
        anyhow::bail!(
            "{}: {} steps do not cover a prompt of {} ids",
            path.display(),
            t.steps.len(),
            prompt.len()
        );
    }
    let generated = t.steps[prompt_steps - 1..].iter().map(|s| s.emitted).collect();
    Ok((prompt, mode, generated))
}

/// Position of a tap name in the graph (for "first divergent tap" and plots).
pub(crate) fn tap_order(name: &str) -> (i64, usize) {
    use tiercheck_model::taps::LAYER_TAPS as KINDS;
    match name {
        "inp_embd" => (-1, 0),
        "result_norm" => (i64::MAX, 0),
        "result_output" => (i64::MAX, 1),
        _ => {
            let (kind, l) = name.rsplit_once('-').unwrap_or((name, "0"));
            let l: i64 = l.parse().unwrap_or(0);
            (l, KINDS.iter().position(|k| *k == kind).unwrap_or(KINDS.len()))
        }
    }
}

/// Layer of a tap (`None` for the embedding and the head).
pub(crate) fn tap_layer(name: &str) -> Option<usize> {
    name.rsplit_once('-').and_then(|(_, l)| l.parse().ok())
}

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
    pub floor: Option<floor::Floor>,
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

/// What the headline is made of.
struct Parts<'r> {
    free: &'r Divergence,
    free_verdict: &'r str,
    teacher: Option<&'r TeacherForced>,
    layer_verdicts: &'r [LayerVerdict],
    /// A trace side whose provenance names a lane that does not reproduce it: (side,
    /// lane, step, tap).
    not_lane: Option<(String, String, usize, String)>,
}

/// The headline of the parts (see [`Headline`]).
fn headline(p: &Parts<'_>) -> Headline {
    let size = match p.teacher {
        Some(t) => {
            let floor = p
                .free
                .rows
                .iter()
                .find(|r| r.name == "result_output")
                .and_then(|r| r.ratio)
                .map(|q| format!(", logits x{q:.1} the floor"))
                .unwrap_or_default();
            format!(
                "; teacher-forced: mean KLD {:.1e}, max |dlogit| {:.2e}{floor}",
                t.kld.mean, t.max_abs_dlogit.max
            )
        }
        None => String::new(),
    };
    let h =
        |kind: &str, text: String| Headline { kind: kind.into(), text: format!("{text}{size}") };
    if let Some((side, lane, st, tap)) = &p.not_lane {
        return h(
            "not-lane",
            format!(
                "NOT {lane}: {side} says it is {lane} (its provenance) but {lane} does not reproduce it from step {st} tap {tap}"
            ),
        );
    }
    let bad: Vec<&LayerVerdict> =
        p.layer_verdicts.iter().filter(|v| v.verdict == "discrepancy").collect();
    if let Some(first) = bad.first() {
        let layers: Vec<String> = bad.iter().map(|v| v.layer.to_string()).collect();
        return h(
            "discrepancy",
            format!(
                "DISCREPANCY at layer{} {}: beyond the layer-local floor with no activation flip to explain it (first: layer {}, {} x{:.0})",
                if bad.len() > 1 { "s" } else { "" },
                layers.join(", "),
                first.layer,
                first.worst_tap,
                first.ratio
            ),
        );
    }
    let teacher_bad = p.teacher.is_some_and(|t| !t.unexplained.is_empty());
    if p.free_verdict.contains("NOT a near-tie") || teacher_bad {
        return h(
            "not-near-tie",
            "tokens part where neither side had a near-tie: a wrong tier is suspected".into(),
        );
    }
    let flips: Vec<String> = p
        .layer_verdicts
        .iter()
        .filter(|v| v.verdict == "flip")
        .map(|v| v.layer.to_string())
        .collect();
    if !flips.is_empty() {
        return h(
            "flips",
            format!(
                "explained: near-boundary activation flips at layer{} {} (decided by the last bits), every other layer within the floor",
                if flips.len() > 1 { "s" } else { "" },
                flips.join(", ")
            ),
        );
    }
    if p.free.first_step.is_none() && p.free.steps_compared > 0 {
        return h("identical", "identical: every compared tap bitwise equal".into());
    }
    h("noise", "explained by reduction-order noise: every layer within its floor".into())
}

/// Severity of a layer verdict, for combining the two directions.
fn severity(v: &LayerVerdict) -> (u8, u64) {
    let s = match v.verdict.as_str() {
        "discrepancy" => 2,
        "flip" => 1,
        _ => 0,
    };
    (s, v.ratio.to_bits())
}

/// A provenance lane that does not reproduce its trace: the lane, step and tap.
type NotLane = (String, usize, String);

/// A trace side whose provenance (`lane` metadata) names a lane: whether that lane
/// reproduces it bitwise layer-locally (then the side is that lane for the analysis),
/// or where it stops.
fn verify_provenance(
    model: &Model,
    src: &Source,
    run: &SideRun,
    o: &DeltaOptions,
) -> anyhow::Result<(Option<Chosen>, Option<NotLane>)> {
    let Source::Trace(_) = src else { return Ok((None, None)) };
    let Some(name) = run.trace().meta.get("lane") else { return Ok((None, None)) };
    let Ok(lane) = lanes::find(name) else { return Ok((None, None)) };
    let c = lanes::choose(lane, Impl::Auto).map_err(anyhow::Error::msg)?;
    let (_, first) = identify::replay(model, &c, o, run.trace())?;
    Ok(match first {
        None => (Some(c), None),
        Some((st, tap, _)) => (None, Some((name.clone(), st, tap))),
    })
}

/// The tap names of `x` that `y` lacks (at any step), summarised by kind in graph
/// order: `Kcur (28 layers)`, `inp_embd`, `attn_norm (layers 3, 5)`.
pub(crate) fn taps_lacking(x: &Trace, y: &Trace) -> Vec<String> {
    let names = |t: &Trace| -> std::collections::BTreeSet<String> {
        t.taps.keys().map(|(_, n)| n.clone()).collect()
    };
    let ny = names(y);
    let mut missing: Vec<String> = names(x).into_iter().filter(|n| !ny.contains(n)).collect();
    missing.sort_by_key(|n| tap_order(n));
    let mut kinds: Vec<(String, Vec<usize>)> = Vec::new();
    for n in &missing {
        let (kind, layer) = match tap_layer(n) {
            Some(l) => (n.rsplit_once('-').map_or(n.as_str(), |(k, _)| k).to_string(), Some(l)),
            None => (n.clone(), None),
        };
        match kinds.iter_mut().find(|(k, _)| *k == kind) {
            Some((_, ls)) => ls.extend(layer),
            None => kinds.push((kind, layer.into_iter().collect())),
        }
    }
    kinds.sort_by_key(|(k, _)| match k.as_str() {
        "inp_embd" | "result_norm" | "result_output" => tap_order(k),
        _ => tap_order(&format!("{k}-0")),
    });
    kinds
        .into_iter()
        .map(|(k, ls)| match ls.len() {
            0 => k,
            1 => format!("{k} (layer {})", ls[0]),
            n => format!("{k} ({n} layers)"),
        })
        .collect()
}

/// Run the whole analysis (a fresh [`Cache`]: each run, replay and floor computed once).
pub fn delta(
    model: &Model,
    a: &Source,
    b: &Source,
    o: &DeltaOptions,
) -> anyhow::Result<DeltaReport> {
    delta_cached(model, a, b, o, &Cache::new())
}

/// The most results (decoder runs, layer-local replays, floors) a [`delta`] of two lanes
/// computes with `o` (fewer where they are reused or not needed): a progress display's
/// total.
pub fn delta_results(o: &DeltaOptions) -> usize {
    // Two free runs, the teacher-forced replay, two layer-local replays; the floor: its
    // undithered replay, per seed a dithered replay and a layer-local run, and itself.
    5 + if o.floor_seeds > 0 { 2 + 2 * o.floor_seeds as usize } else { 0 }
}

/// [`delta`] reusing, and adding to, what `cache` holds (a caller comparing many pairs
/// computes each lane's runs once; [`reuse`]).
pub fn delta_cached(
    model: &Model,
    a: &Source,
    b: &Source,
    o: &DeltaOptions,
    cache: &Cache,
) -> anyhow::Result<DeltaReport> {
    let ctx = Ctx::new(cache);
    let mut costs = Costs::start(&ctx);
    // Free-running runs. A trace brings its prompt, mode and attention options; a lane
    // follows it.
    let mut own = o.clone();
    let (prompt, steps, mode) = match (a, b) {
        (_, Source::Trace(p)) | (Source::Trace(p), _) => {
            let t = tiercheck_model::import::load(model, p, &o.dump)?;
            let (pr, md, gen) = trace_shape(p, &t)?;
            own.attn = trace_attention(p, &t, o.attn)?;
            own.batching = trace_batching(p, &t, o.batching, model.hp.n_layer)?;
            (pr, gen.len(), md)
        }
        _ => (o.ids.clone(), o.steps, o.mode),
    };
    let o = &own;
    let ra = side_run(&ctx, model, a, o, &prompt, steps, mode)?;
    let rb = side_run(&ctx, model, b, o, &prompt, steps, mode)?;
    if ra.prompt != rb.prompt {
        anyhow::bail!("the two sides ran different prompts ({:?} vs {:?})", ra.prompt, rb.prompt);
    }
    let tokens_agree = ra.generated.iter().zip(&rb.generated).take_while(|(x, y)| x == y).count();
    costs.stage(&ctx, "free-running runs", None);

    // A trace whose provenance names a lane that reproduces it bitwise is that lane for
    // the analysis, so a verdict does not depend on whether a side is given as a lane or
    // as its trace.
    let prov_a = verify_provenance(model, a, &ra, o)?;
    let prov_b = verify_provenance(model, b, &rb, o)?;
    let (label_a, label_b) = (a.label(), b.label());
    let mut sides = Vec::new();
    let mut recorded = true;
    for (side, src, prov) in [("A", a, &prov_a), ("B", b, &prov_b)] {
        if let (Source::Trace(p), Some(c)) = (src, &prov.0) {
            sides.push(format!(
                "{side} ({}): its provenance lane {}, which reproduces it bitwise",
                p.display(),
                c.lane.name
            ));
        }
        if let Source::Trace(_) = src {
            let t = if side == "A" { ra.trace() } else { rb.trace() };
            recorded &= t.meta.contains_key("kv") && t.meta.contains_key("fa");
        }
    }
    // Two trace sides: each one with no lane of its own (no provenance, as an engine's
    // dump) is the lane `identify` finds for it, with the attention setting and thread
    // count it found (with a lane side, that lane measures the floor and replays the
    // trace's layers itself).
    let both_traces = matches!((a, b), (Source::Trace(_), Source::Trace(_)));
    let mut identified = Vec::new();
    for (side, src, prov) in [("A", a, &prov_a), ("B", b, &prov_b)] {
        let Source::Trace(p) = src else {
            identified.push(None);
            continue;
        };
        if !both_traces {
            identified.push(None);
            continue;
        }
        if prov.0.is_some() || prov.1.is_some() {
            identified.push(None);
            continue;
        }
        let io = identify::IdentifyOptions {
            lanes: None,
            imp: Impl::Auto,
            residual: o.residual,
            n_ctx: o.n_ctx,
            floor_seeds: 0,
            dump: o.dump.clone(),
            threads: o.threads,
            state: o.state.clone(),
        };
        let r = identify::identify(model, p, &io)?;
        if r.explained {
            let lane = lanes::find(&r.best_lane).map_err(anyhow::Error::msg)?;
            let c = lanes::choose(lane, Impl::Auto).map_err(anyhow::Error::msg)?;
            let ambiguous = if r.ambiguous {
                format!(" (ambiguously: {})", r.best_lanes.join(", "))
            } else {
                String::new()
            };
            sides.push(format!(
                "{side} ({}): identified as {}{ambiguous}",
                p.display(),
                r.best_candidate
            ));
            let kv = if r.best_kv == "f32" { KvType::F32 } else { KvType::F16 };
            let fa = if r.best_fa == "off" { FlashAttn::Off } else { FlashAttn::On };
            let threads = r.best_tier_threads.first().copied();
            identified.push(Some((c, kv, fa, threads)));
        } else {
            sides.push(format!(
                "{side} ({}): no lane reproduces it ({}): no layer-local comparison or floor with it",
                p.display(),
                r.verdict
            ));
            identified.push(None);
        }
    }
    // The identified settings stand for a trace's unrecorded ones (both sides ran the
    // same settings if both are dumps of one comparison; the first identified wins).
    if !recorded {
        if let Some((_, kv, fa, threads)) = identified.iter().flatten().next() {
            own.attn.kv = *kv;
            own.attn.fa = *fa;
            if let Some(n) = threads {
                own.attn.tier_threads = *n;
            }
        }
    }
    let o = &own;
    let side_of = |prov: &(Option<Chosen>, Option<NotLane>),
                   id: &Option<(Chosen, KvType, FlashAttn, Option<usize>)>,
                   src: &Source| {
        prov.0.or(id.as_ref().map(|x| x.0)).map(Source::Lane).unwrap_or_else(|| src.clone())
    };
    let ea = side_of(&prov_a, &identified[0], a);
    let eb = side_of(&prov_b, &identified[1], b);
    let attention_known = recorded
        || identified.iter().flatten().next().is_some()
        || matches!((a, b), (Source::Lane(_), _) | (_, Source::Lane(_)));
    let (a, b) = (&ea, &eb);
    costs.stage(&ctx, "provenance", None);

    let teacher = teacher_forced::analyse(&ctx, model, a, b, &ra, &rb, o)?;
    let teacher_verdict = teacher_forced::verdict(teacher.as_ref(), o.threshold);
    costs.stage(&ctx, "teacher-forced", None);

    let mut free = free_running::analyse(model, a, b, &ra, &rb)?;
    let free_verdict = free_running::verdict(&ra, &rb, tokens_agree, o.threshold);
    let (mut layer_local, layer_local_how, flips) =
        layer_local::analyse(&ctx, model, a, b, &ra, &rb, o)?;
    // Two lanes: each side's layers fed the other's inputs too.
    let mut reverse = match (a, b) {
        (Source::Lane(_), Source::Lane(_)) => {
            let (rev, _, rev_flips) = layer_local::analyse(&ctx, model, b, a, &rb, &ra, o)?;
            rev.map(|d| (d, rev_flips))
        }
        _ => None,
    };
    costs.stage(&ctx, "layer-local", None);

    // The floor, from a lane side teacher-forced on the other side's sequence; with two
    // lanes, the one whose name sorts first (the order of the sides does not matter). It
    // is measured only when a verdict needs it: when some compared tap differs.
    let differs = free.first_step.is_some()
        || layer_local.as_ref().is_some_and(|d| d.first_step.is_some())
        || reverse.as_ref().is_some_and(|(d, _)| d.first_step.is_some());
    let (floor_lane, seq) = match (a.chosen(), b.chosen()) {
        (Some(x), Some(y)) if y.lane.name < x.lane.name => (Some(y), &ra),
        (Some(x), _) => (Some(x), &rb),
        (None, Some(y)) => (Some(y), &ra),
        (None, None) => (None, &rb),
    };
    let (floor, floor_skipped) = match floor_lane {
        Some(_) if o.floor_seeds == 0 => (None, Some("--floor-seeds 0".to_string())),
        Some(_) if !differs => {
            (None, Some("not needed: every compared tap is bitwise equal".to_string()))
        }
        Some(c) => {
            let key = format!(
                "{}|{:?}|{:?}|{:?}|{}",
                reuse::lane_key(c, o),
                seq.prompt,
                seq.mode,
                seq.generated,
                o.floor_seeds
            );
            let f = ctx.floor(&key, || {
                floor::measure(&ctx, model, c, o, &seq.prompt, seq.mode, &seq.generated)
            })?;
            (Some((*f).clone()), None)
        }
        None => (None, Some("no lane side to measure it with".to_string())),
    };
    let floor_skip_reason = floor_skipped.clone();
    costs.stage(&ctx, "floor", floor_skipped);
    let fmap = floor.as_ref().map(|f| &f.per_tap);
    let llmap = floor.as_ref().map(|f| &f.layer_local);
    free_running::set_floor(&mut free.rows, fmap);
    if let Some(d) = layer_local.as_mut() {
        free_running::set_floor(&mut d.rows, llmap);
    }
    if let Some((d, _)) = reverse.as_mut() {
        free_running::set_floor(&mut d.rows, llmap);
    }

    let mut layer_verdicts = match &layer_local {
        Some(d) => layer_local::layer_verdicts(d, &flips, model.hp.n_layer),
        None => Vec::new(),
    };
    // Two lanes: per layer the worse verdict of both directions, so the verdict does not
    // depend on the order of the sides.
    if let Some((d, rev_flips)) = &reverse {
        for v in layer_local::layer_verdicts(d, rev_flips, model.hp.n_layer) {
            match layer_verdicts.iter_mut().find(|w| w.layer == v.layer) {
                Some(w) if severity(&v) > severity(w) => *w = v,
                Some(_) => {}
                None => layer_verdicts.push(v),
            }
        }
        layer_verdicts.sort_by_key(|v| v.layer);
    }
    let not_lane = match (&prov_a.1, &prov_b.1) {
        (Some((l, st, tap)), _) => Some(("A".to_string(), l.clone(), *st, tap.clone())),
        (None, Some((l, st, tap))) => Some(("B".to_string(), l.clone(), *st, tap.clone())),
        _ => None,
    };
    let mut headline = headline(&Parts {
        free: &free,
        free_verdict: &free_verdict,
        teacher: teacher.as_ref(),
        layer_verdicts: &layer_verdicts,
        not_lane,
    });
    // A verdict that leans on a floor needs one that was measured.
    if floor.is_none() && matches!(headline.kind.as_str(), "noise" | "flips") {
        let why = floor_skip_reason.clone().unwrap_or_default();
        headline = Headline {
            kind: "not-judged".into(),
            text: format!(
                "not judged: the sides differ (first at step {} tap {}), and no floor was measured ({why}) to tell reduction-order noise from a wrong tier",
                free.first_step.map_or("?".into(), |s| s.to_string()),
                free.first_tap.clone().unwrap_or_else(|| "?".into())
            ),
        };
    }
    let taps_only_a = taps_lacking(ra.trace(), rb.trace());
    let taps_only_b = taps_lacking(rb.trace(), ra.trace());
    costs.stage(&ctx, "verdicts", None);
    Ok(DeltaReport {
        costs: costs.into_stages(),
        headline,
        taps_only_a,
        taps_only_b,
        attention: if attention_known { o.attn.label() } else { "unknown".into() },
        sides,
        layer_verdicts,
        a: label_a,
        b: label_b,
        model_sha256: model.sha256.clone(),
        prompt: ra.prompt.clone(),
        mode: ra.mode,
        threshold: o.threshold,
        tokens_a: ra.generated.clone(),
        tokens_b: rb.generated.clone(),
        tokens_agree,
        free,
        free_verdict,
        teacher,
        teacher_verdict,
        layer_local,
        layer_local_how,
        flips,
        floor,
    })
}
