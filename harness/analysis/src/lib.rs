//! Divergence analysis between two lanes or traces (`tiercheck delta`).
//!
//! The question is always the same: two tiers ran one model and disagree somewhere. Is
//! the disagreement the noise two legitimate reduction orders make (a near-tie decided
//! by the last bits), or is one tier wrong, and where? The report answers in layers:
//!
//! - **free-running**: both sides decode greedily; their taps are compared step by step
//!   while their inputs are still the same (up to the first differing token), giving
//!   the first step and tap whose bits differ and a per-tap profile;
//! - **teacher-forced**: one side replays the other's token sequence, so every step has
//!   the same context: per-step KLD, top-1 agreement, max |Δlogit|, and the near-tie
//!   table (tokens that differ or gaps below a threshold);
//! - **layer-local**: a lane's layer `L` is fed exactly the input (and KV cache) the
//!   other side's layer `L` received, separating each layer's own contribution from
//!   what it inherited;
//! - **activation-quantization flips**: at each quantized matmul input of the layer-local run
//!   (`attn_norm`, `kqv_out`, `ffn_norm`, `ffn_swiglu`, `result_norm`),
//!   the two sides' int8 activation codes are compared, with the distance of each
//!   flipped value from its rounding boundary and the output change the flips alone
//!   cause;
//! - **the floor** ([`floor`]): the divergence one lane has against itself when the
//!   residual stream after layer 0 is dithered by one ulp; every divergence is also
//!   given as a ratio to it.

pub mod attribute;
pub mod floor;
pub mod metrics;
pub mod plot;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use metrics::{Acc, Stat, Summary};
use tiercheck_gguf::tensorfile::Tensor;
use tiercheck_lanes::{self as lanes, Chosen, Impl};
use tiercheck_model::run::{self, read_trace, RunOutput, RunSpec, StepRecord, Trace};
use tiercheck_model::{Arith, Decoder, Mode, Model, Residual, TapSink};

/// One side of a comparison.
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

    fn chosen(&self) -> Option<&Chosen> {
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
    /// Residual stream type.
    pub residual: Residual,
    /// Context length.
    pub n_ctx: usize,
    /// Near-tie threshold on the top-1/top-2 gap, in nats (logit units).
    pub threshold: f32,
    /// Dither seeds for the floor (0: no floor).
    pub floor_seeds: u64,
}

/// A side's run: its trace, prompt, mode and greedy tokens.
struct SideRun {
    trace: Trace,
    prompt: Vec<u32>,
    mode: Mode,
    generated: Vec<u32>,
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

fn decoder<'m>(model: &'m Model, c: &Chosen, o: &DeltaOptions) -> anyhow::Result<Decoder<'m>> {
    let arith = Arith::Lane { kernels: c.kernels, elem: lanes::elem_ops(c), threads: 1 };
    Ok(Decoder::new(model, arith, o.residual, o.n_ctx)?)
}

fn run_spec(dec: &Decoder<'_>, spec: &RunSpec) -> anyhow::Result<RunOutput> {
    Ok(run::run(dec, spec, TapSink::new(true, false))?)
}

fn side_run(
    model: &Model,
    src: &Source,
    o: &DeltaOptions,
    prompt: &[u32],
    steps: usize,
    mode: Mode,
) -> anyhow::Result<SideRun> {
    match src {
        Source::Lane(c) => {
            let dec = decoder(model, c, o)?;
            let spec = RunSpec { ids: prompt.to_vec(), steps, mode, forced: Vec::new() };
            let out = run_spec(&dec, &spec)?;
            let generated = out.generated.clone();
            Ok(SideRun { trace: trace_of(out), prompt: prompt.to_vec(), mode, generated })
        }
        Source::Trace(p) => {
            let trace = read_trace(p)?;
            let (prompt, mode, generated) = trace_shape(p, &trace)?;
            Ok(SideRun { trace, prompt, mode, generated })
        }
    }
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
pub fn tap_order(name: &str) -> (i64, usize) {
    const KINDS: [&str; 10] = [
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
pub fn tap_layer(name: &str) -> Option<usize> {
    name.rsplit_once('-').and_then(|(_, l)| l.parse().ok())
}

/// Per-tap divergence.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TapRow {
    /// Tap name.
    pub name: String,
    /// At the first divergent step (when there is one).
    pub first: Option<Stat>,
    /// Over every compared step.
    pub all: Stat,
    /// The floor for this tap (relative L2), when measured.
    pub floor: Option<f64>,
    /// `all.rel_l2 / floor`.
    pub ratio: Option<f64>,
}

/// A single-op jump of the divergence: the signature of an activation-quantization flip.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Jump {
    /// Step.
    pub step: usize,
    /// Tap before the jump.
    pub from: String,
    /// Tap where it jumped.
    pub to: String,
    /// Relative L2 before.
    pub from_rel: f64,
    /// Relative L2 after.
    pub to_rel: f64,
    /// The activation codes entering the matmul that produced `to`, compared between
    /// the two sides (when `to` is a matmul output and a lane side can quantize).
    pub codes: Option<Flip>,
}

/// A tap-by-tap comparison over some steps.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Divergence {
    /// Steps compared.
    pub steps_compared: usize,
    /// First step where any tap's bits differ.
    pub first_step: Option<usize>,
    /// There, the first tap (graph order) whose bits differ.
    pub first_tap: Option<String>,
    /// Per tap, graph order.
    pub rows: Vec<TapRow>,
    /// Jumps of at least 100x between consecutive taps at the first divergent step.
    pub jumps: Vec<Jump>,
}

fn compare(
    a: &Trace,
    b: &Trace,
    steps: &[usize],
    floor: Option<&BTreeMap<String, f64>>,
) -> Divergence {
    let mut names: Vec<String> = Vec::new();
    for (s, n) in a.taps.keys() {
        if steps.contains(s) && b.taps.contains_key(&(*s, n.clone())) && !names.contains(n) {
            names.push(n.clone());
        }
    }
    names.sort_by_key(|n| tap_order(n));
    let mut first_step = None;
    let mut first_tap = None;
    'outer: for &s in steps {
        for n in &names {
            if let (Some(x), Some(y)) = (a.taps.get(&(s, n.clone())), b.taps.get(&(s, n.clone()))) {
                if x.data.iter().zip(&y.data).any(|(p, q)| p.to_bits() != q.to_bits()) {
                    first_step = Some(s);
                    first_tap = Some(n.clone());
                    break 'outer;
                }
            }
        }
    }
    let mut rows = Vec::new();
    for n in &names {
        let mut acc = Acc::default();
        let mut first = None;
        for &s in steps {
            if let (Some(x), Some(y)) = (a.taps.get(&(s, n.clone())), b.taps.get(&(s, n.clone()))) {
                acc.add(&x.data, &y.data);
                if Some(s) == first_step {
                    first = Some(metrics::stat(&x.data, &y.data));
                }
            }
        }
        let all = acc.stat();
        let fl = floor.and_then(|f| f.get(n).copied());
        let ratio = fl.filter(|f| *f > 0.0).map(|f| all.rel_l2 / f);
        rows.push(TapRow { name: n.clone(), first, all, floor: fl, ratio });
    }
    let mut jumps = Vec::new();
    if let Some(s) = first_step {
        let seq: Vec<(&str, f64)> =
            rows.iter().filter_map(|r| r.first.map(|f| (r.name.as_str(), f.rel_l2))).collect();
        for w in seq.windows(2) {
            let ((n0, r0), (n1, r1)) = (w[0], w[1]);
            if r0 > 0.0 && r1 >= 100.0 * r0 && r1 >= 1e-5 {
                jumps.push(Jump {
                    step: s,
                    from: n0.into(),
                    to: n1.into(),
                    from_rel: r0,
                    to_rel: r1,
                    codes: None,
                });
            }
        }
    }
    Divergence { steps_compared: steps.len(), first_step, first_tap, rows, jumps }
}

/// One teacher-forced step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepMetric {
    /// Step.
    pub step: usize,
    /// Greedy choice of side A.
    pub token_a: u32,
    /// Greedy choice of side B.
    pub token_b: u32,
    /// A's top-1 minus top-2 logit.
    pub gap_a: f32,
    /// B's gap.
    pub gap_b: f32,
    /// Rank of A's token in B's logits (0 = B's own choice).
    pub rank_a_in_b: usize,
    /// Rank of B's token in A's logits.
    pub rank_b_in_a: usize,
    /// KL(B || A) of the next-token distributions, nats.
    pub kld: f64,
    /// Largest |logit A - logit B|.
    pub max_abs_dlogit: f64,
}

/// Teacher-forced comparison.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TeacherForced {
    /// What was replayed through what.
    pub how: String,
    /// Per step.
    pub steps: Vec<StepMetric>,
    /// KLD summary.
    pub kld: Summary,
    /// Max |Δlogit| summary.
    pub max_abs_dlogit: Summary,
    /// Fraction of steps with the same greedy token.
    pub top1_agreement: f64,
    /// Steps where the tokens differ or a gap is below the threshold.
    pub near_ties: Vec<StepMetric>,
    /// Tokens that differ at a gap above the threshold on both sides.
    pub unexplained: Vec<usize>,
}

/// Activation codes at one quantized matmul input, layer-local.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Flip {
    /// Step.
    pub step: usize,
    /// The input tap (`attn_norm-3`, `kqv_out-3`, `ffn_norm-3`, `result_norm`).
    pub input: String,
    /// The weights it multiplies.
    pub weights: Vec<String>,
    /// int8 codes that differ.
    pub codes_differ: usize,
    /// Codes compared.
    pub codes: usize,
    /// Smallest distance of a flipped value from its rounding boundary (in code units).
    pub min_boundary: f64,
    /// Largest such distance.
    pub max_boundary: f64,
    /// Relative L2 change of the first weight's output caused by the flips alone (the
    /// other side's codes through this side's kernel).
    pub flip_effect: f64,
    /// Relative L2 between the two sides' outputs of that matmul (each side's codes
    /// through its own kernel), when the other side is a lane.
    pub observed: Option<f64>,
}

/// The layer-local verdict for one layer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LayerVerdict {
    /// Layer.
    pub layer: usize,
    /// The tap with the largest ratio to its layer-local floor.
    pub worst_tap: String,
    /// That ratio.
    pub ratio: f64,
    /// Activation codes that differ at this layer's matmul inputs (all steps).
    pub flipped_codes: usize,
    /// The largest distance from its rounding boundary of a value flipped at the first
    /// flipped input of a step (later inputs of the layer inherit that change).
    pub max_boundary: f64,
    /// `noise`, `flip` (above the floor, but every flip sat within
    /// [`NEAR_BOUNDARY`] of a rounding boundary) or `discrepancy`.
    pub verdict: String,
}

/// Ratio to the floor up to which a divergence counts as reduction-order noise.
pub const NOISE_RATIO: f64 = 4.0;
/// Distance from a rounding boundary (code units) within which a flipped activation
/// code counts as decided by last-bit noise.
pub const NEAR_BOUNDARY: f64 = 0.05;

fn layer_verdicts(d: &Divergence, flips: &[Flip], n_layer: usize) -> Vec<LayerVerdict> {
    let mut out = Vec::new();
    for l in 0..n_layer {
        let suffix = format!("-{l}");
        let worst = d
            .rows
            .iter()
            .filter(|r| r.name.ends_with(&suffix))
            .filter_map(|r| r.ratio.map(|q| (r.name.clone(), q)))
            .max_by(|a, b| a.1.total_cmp(&b.1));
        let Some((worst_tap, ratio)) = worst else { continue };
        let here: Vec<&Flip> = flips.iter().filter(|f| f.input.ends_with(&suffix)).collect();
        let flipped_codes = here.iter().map(|f| f.codes_differ).sum();
        // Only the first flipped input of each step counts: later inputs of the layer
        // inherit its change, and their flips are consequences, not boundary luck.
        let mut primary: BTreeMap<usize, &Flip> = BTreeMap::new();
        for f in &here {
            let e = primary.entry(f.step).or_insert(f);
            if tap_order(&f.input) < tap_order(&e.input) {
                *e = f;
            }
        }
        let max_boundary = primary.values().map(|f| f.max_boundary).fold(0.0, f64::max);
        let verdict = if ratio <= NOISE_RATIO {
            "noise"
        } else if flipped_codes > 0 && max_boundary <= NEAR_BOUNDARY {
            "flip"
        } else {
            "discrepancy"
        };
        out.push(LayerVerdict {
            layer: l,
            worst_tap,
            ratio,
            flipped_codes,
            max_boundary,
            verdict: verdict.into(),
        });
    }
    out
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
}

fn logits_row(t: &Trace, step: usize) -> Option<&[f32]> {
    let x = t.taps.get(&(step, "result_output".to_string()))?;
    let w = x.shape[1];
    Some(&x.data[x.data.len() - w..])
}

fn teacher(a: &Trace, b: &Trace, how: String, threshold: f32) -> TeacherForced {
    let mut steps = Vec::new();
    for (i, (sa, sb)) in a.steps.iter().zip(&b.steps).enumerate() {
        let (Some(la), Some(lb)) = (logits_row(a, i), logits_row(b, i)) else { continue };
        let max_abs =
            la.iter().zip(lb).map(|(x, y)| (*x as f64 - *y as f64).abs()).fold(0.0, f64::max);
        steps.push(StepMetric {
            step: i,
            token_a: sa.emitted,
            token_b: sb.emitted,
            gap_a: sa.gap,
            gap_b: sb.gap,
            rank_a_in_b: metrics::rank(lb, sa.emitted),
            rank_b_in_a: metrics::rank(la, sb.emitted),
            kld: metrics::kld(lb, la),
            max_abs_dlogit: max_abs,
        });
    }
    let kl: Vec<f64> = steps.iter().map(|s| s.kld).collect();
    let md: Vec<f64> = steps.iter().map(|s| s.max_abs_dlogit).collect();
    let agree = steps.iter().filter(|s| s.token_a == s.token_b).count();
    let near_ties: Vec<StepMetric> = steps
        .iter()
        .filter(|s| s.token_a != s.token_b || s.gap_a < threshold || s.gap_b < threshold)
        .cloned()
        .collect();
    let unexplained = steps
        .iter()
        .filter(|s| s.token_a != s.token_b && s.gap_a >= threshold && s.gap_b >= threshold)
        .map(|s| s.step)
        .collect();
    TeacherForced {
        how,
        top1_agreement: if steps.is_empty() { 1.0 } else { agree as f64 / steps.len() as f64 },
        kld: metrics::summary(&kl),
        max_abs_dlogit: metrics::summary(&md),
        near_ties,
        unexplained,
        steps,
    }
}

/// Replay `seq`'s prompt and tokens through `lane`.
fn replay(
    model: &Model,
    c: &Chosen,
    o: &DeltaOptions,
    prompt: &[u32],
    mode: Mode,
    generated: &[u32],
    dither: Option<u64>,
) -> anyhow::Result<Trace> {
    let mut dec = decoder(model, c, o)?;
    dec.set_dither(dither);
    let forced = generated[..generated.len().saturating_sub(1)].to_vec();
    let spec = RunSpec { ids: prompt.to_vec(), steps: generated.len(), mode, forced };
    Ok(trace_of(run_spec(&dec, &spec)?))
}

/// Layer-local: `c`'s layers fed `other`'s inputs and KV cache, step by step.
pub fn layer_local(
    model: &Model,
    c: &Chosen,
    o: &DeltaOptions,
    other: &Trace,
) -> anyhow::Result<Trace> {
    let dec = decoder(model, c, o)?;
    let hp = &model.hp;
    let get = |step: usize, name: &str| -> anyhow::Result<&Tensor> {
        other
            .taps
            .get(&(step, name.to_string()))
            .ok_or_else(|| anyhow::anyhow!("the other trace lacks tap {step:03}/{name}"))
    };
    let mut sink = TapSink::new(true, false);
    let mut cache = dec.new_cache();
    for (step, rec) in other.steps.iter().enumerate() {
        let m = rec.input_ids.len();
        let pos0 = rec.positions[0];
        sink.set_step(step);
        for il in 0..hp.n_layer {
            let input = if il == 0 {
                get(step, "inp_embd")?
            } else {
                get(step, &format!("l_out-{}", il - 1))?
            };
            // The KV cache of earlier steps: the other side's own K and V.
            for earlier in 0..step {
                let (k, v) =
                    (get(earlier, &format!("Kcur-{il}"))?, get(earlier, &format!("Vcur-{il}"))?);
                let kvd = k.shape[1];
                for (r, p) in other.steps[earlier].positions.iter().enumerate() {
                    cache.store(
                        il,
                        *p,
                        &k.data[r * kvd..(r + 1) * kvd],
                        &v.data[r * kvd..(r + 1) * kvd],
                    );
                }
            }
            dec.eval_layer(il, &mut cache, &input.data, pos0, m, &mut sink)?;
        }
        let last = get(step, &format!("l_out-{}", hp.n_layer - 1))?;
        dec.head(&last.data, m, &mut sink)?;
    }
    let (taps, _) = sink.into_taps();
    let mut t = trace_of(RunOutput {
        steps: other.steps.clone(),
        generated: Vec::new(),
        taps,
        digests: BTreeMap::new(),
    });
    t.meta.insert("layer_local".into(), "1".into());
    Ok(t)
}

/// The quantized-matmul input tap whose matmul produces `out` (through norms, RoPE or
/// the residual add that follow it in the same op group).
fn matmul_input(out: &str) -> Option<String> {
    if out == "result_output" {
        return Some("result_norm".into());
    }
    let (kind, l) = out.rsplit_once('-')?;
    let input = match kind {
        "Qcur" | "Kcur" | "Vcur" => "attn_norm",
        "ffn_inp" => "kqv_out",
        "ffn_swiglu" => "ffn_norm",
        "ffn_out" => "ffn_swiglu",
        _ => return None,
    };
    Some(format!("{input}-{l}"))
}

/// Weights each quantized-matmul input tap feeds.
fn consumers(input: &str, n_layer: usize) -> Option<Vec<String>> {
    if input == "result_norm" {
        return Some(vec!["output.weight".into()]);
    }
    let (kind, l) = input.rsplit_once('-')?;
    let l: usize = l.parse().ok()?;
    if l >= n_layer {
        return None;
    }
    let w = |s: &str| format!("blk.{l}.{s}.weight");
    match kind {
        "attn_norm" => Some(vec![w("attn_v"), w("attn_q"), w("attn_k")]),
        "kqv_out" => Some(vec![w("attn_output")]),
        "ffn_norm" => Some(vec![w("ffn_up"), w("ffn_gate")]),
        "ffn_swiglu" => Some(vec![w("ffn_down")]),
        _ => None,
    }
}

/// Compare activation codes at every quantized matmul input of a layer-local run
/// (`mine`, computed by `c`) against the other side's taps, each side's values
/// quantized by its own rule (the other side's by `c`'s rule when it is a trace).
fn flips(
    model: &Model,
    c: &Chosen,
    mine: &Trace,
    other: &Trace,
    other_lane: Option<&Chosen>,
    only: Option<&[(usize, String)]>,
) -> anyhow::Result<Vec<Flip>> {
    let mut out = Vec::new();
    for ((step, name), t_mine) in &mine.taps {
        if only.is_some_and(|o| !o.iter().any(|(s, n)| s == step && n == name)) {
            continue;
        }
        let Some(weights) = consumers(name, model.hp.n_layer) else { continue };
        let Some(t_other) = other.taps.get(&(*step, name.clone())) else { continue };
        let Some(info) =
            model.file.tensor(&weights[0]).or_else(|| model.file.tensor("token_embd.weight"))
        else {
            continue;
        };
        let ty = info.ty;
        if !tiercheck_core::lane::WEIGHT_TYPES.contains(&ty) {
            continue;
        }
        let k = t_mine.shape[1];
        let rule = c.kernels.act_rule(ty)?;
        let other_rule = match other_lane {
            Some(o) => o.kernels.act_rule(ty)?,
            None => rule,
        };
        if other_rule.format() != rule.format() {
            continue;
        }
        let (mut differ, mut total) = (0usize, 0usize);
        let (mut min_b, mut max_b) = (f64::INFINITY, 0.0f64);
        let mut acc = Acc::default();
        let mut obs = Acc::default();
        for (xm, xo) in t_mine.data.chunks_exact(k).zip(t_other.data.chunks_exact(k)) {
            // Through the kernels' own quantize_act (a lane may override its rule).
            let qm = c.kernels.quantize_act(ty, xm)?;
            let qo = match other_lane {
                Some(o) => o.kernels.quantize_act(ty, xo)?,
                None => c.kernels.quantize_act(ty, xo)?,
            };
            let (cm, dm) = codes(rule.format(), &qm, k);
            let (co, _) = codes(rule.format(), &qo, k);
            total += cm.len();
            let mut any = false;
            for i in 0..cm.len() {
                if cm[i] != co[i] {
                    any = true;
                    differ += 1;
                    let d = dm[i / dm_block(rule.format())];
                    if d != 0.0 {
                        let v = (xo[i] / d).abs() as f64;
                        let dist = (v - v.floor() - 0.5).abs();
                        min_b = min_b.min(dist);
                        max_b = max_b.max(dist);
                    }
                }
            }
            if any {
                let (wk, wn) = (info.dims[0] as usize, info.dims[1] as usize);
                let w =
                    tiercheck_core::WeightMatrix::new(ty, wn, wk, model.file.tensor_data(info))?;
                let ym: Vec<f32> = (0..wn)
                    .map(|j| c.kernels.vec_dot(ty, w.row(j), &qm))
                    .collect::<Result<_, _>>()?;
                let yo: Vec<f32> = (0..wn)
                    .map(|j| c.kernels.vec_dot(ty, w.row(j), &qo))
                    .collect::<Result<_, _>>()?;
                acc.add(&yo, &ym);
                if let Some(ol) = other_lane {
                    let yoo: Vec<f32> = (0..wn)
                        .map(|j| ol.kernels.vec_dot(ty, w.row(j), &qo))
                        .collect::<Result<_, _>>()?;
                    obs.add(&ym, &yoo);
                }
            }
        }
        if differ > 0 {
            out.push(Flip {
                step: *step,
                input: name.clone(),
                weights,
                codes_differ: differ,
                codes: total,
                min_boundary: min_b,
                max_boundary: max_b,
                flip_effect: acc.stat().rel_l2,
                observed: other_lane.map(|_| obs.stat().rel_l2),
            });
        }
    }
    out.sort_by_key(|f| (f.step, tap_order(&f.input)));
    Ok(out)
}

fn dm_block(ty: tiercheck_core::GgmlType) -> usize {
    ty.block_size()
}

/// The int8 codes and per-block scales of a q8_K / q8_0 / q8_1 activation row.
fn codes(ty: tiercheck_core::GgmlType, bytes: &[u8], k: usize) -> (Vec<i8>, Vec<f32>) {
    use tiercheck_core::GgmlType as T;
    let bs = ty.block_size();
    let tsz = ty.type_size();
    let mut c = Vec::with_capacity(k);
    let mut d = Vec::new();
    for b in bytes.chunks_exact(tsz) {
        match ty {
            T::Q8_K => {
                d.push(f32::from_le_bytes([b[0], b[1], b[2], b[3]]));
                c.extend(b[4..4 + bs].iter().map(|&x| x as i8));
            }
            T::Q8_0 => {
                d.push(tiercheck_core::fp16::f16_bits_to_f32(u16::from_le_bytes([b[0], b[1]])));
                c.extend(b[2..2 + bs].iter().map(|&x| x as i8));
            }
            _ => {
                d.push(tiercheck_core::fp16::f16_bits_to_f32(u16::from_le_bytes([b[0], b[1]])));
                c.extend(b[4..4 + bs].iter().map(|&x| x as i8));
            }
        }
    }
    (c, d)
}

/// Run the whole analysis.
pub fn delta(
    model: &Model,
    a: &Source,
    b: &Source,
    o: &DeltaOptions,
) -> anyhow::Result<DeltaReport> {
    // Free-running runs. A trace brings its prompt; a lane follows it.
    let (prompt, steps, mode) = match (a, b) {
        (_, Source::Trace(p)) | (Source::Trace(p), _) => {
            let t = read_trace(p)?;
            let (pr, md, gen) = trace_shape(p, &t)?;
            (pr, gen.len(), md)
        }
        _ => (o.ids.clone(), o.steps, o.mode),
    };
    let ra = side_run(model, a, o, &prompt, steps, mode)?;
    let rb = side_run(model, b, o, &prompt, steps, mode)?;
    if ra.prompt != rb.prompt {
        anyhow::bail!("the two sides ran different prompts ({:?} vs {:?})", ra.prompt, rb.prompt);
    }
    let tokens_agree = ra.generated.iter().zip(&rb.generated).take_while(|(x, y)| x == y).count();

    // The floor, from a lane side, teacher-forced on B's sequence.
    let floor_lane = a.chosen().or(b.chosen());
    let seq = if b.chosen().is_none() || a.chosen().is_some() { &rb } else { &ra };
    let floor = match floor_lane {
        Some(c) if o.floor_seeds > 0 => Some(floor::measure(model, c, o, &seq.generated, |d| {
            replay(model, c, o, &seq.prompt, seq.mode, &seq.generated, d)
        })?),
        _ => None,
    };
    let fmap = floor.as_ref().map(|f| &f.per_tap);
    let llmap = floor.as_ref().map(|f| &f.layer_local);

    // Free-running: steps whose inputs are identical so far.
    let mut same = Vec::new();
    for (i, (x, y)) in ra.trace.steps.iter().zip(&rb.trace.steps).enumerate() {
        if x.input_ids != y.input_ids || x.positions != y.positions {
            break;
        }
        same.push(i);
    }
    let mut free = compare(&ra.trace, &rb.trace, &same, fmap);
    // A jump at a matmul output: compare the codes that entered that matmul.
    if let Some(c) = a.chosen().or(b.chosen()) {
        let a_is_lane = a.chosen().is_some();
        for j in free.jumps.iter_mut() {
            let Some(input) = matmul_input(&j.to) else { continue };
            let key = [(j.step, input.clone())];
            let found = if a_is_lane {
                flips(model, c, &ra.trace, &rb.trace, b.chosen(), Some(&key))?
            } else {
                flips(model, c, &rb.trace, &ra.trace, None, Some(&key))?
            };
            j.codes = Some(found.into_iter().next().unwrap_or(Flip {
                step: j.step,
                input,
                weights: Vec::new(),
                codes_differ: 0,
                codes: 0,
                min_boundary: f64::NAN,
                max_boundary: f64::NAN,
                flip_effect: 0.0,
                observed: None,
            }));
        }
    }
    let free_verdict = free_verdict(&ra, &rb, tokens_agree, o.threshold);

    // Teacher-forced: a lane replays the other side's tokens.
    let (teacher, teacher_how_trace) = match (a, b) {
        (Source::Lane(c), _) => {
            let t = replay(model, c, o, &rb.prompt, rb.mode, &rb.generated, None)?;
            (
                Some((
                    t,
                    format!("A ({}) replayed B's {} tokens", c.lane.name, rb.generated.len()),
                )),
                true,
            )
        }
        (Source::Trace(_), Source::Lane(c)) => {
            let t = replay(model, c, o, &ra.prompt, ra.mode, &ra.generated, None)?;
            (
                Some((
                    t,
                    format!("B ({}) replayed A's {} tokens", c.lane.name, ra.generated.len()),
                )),
                false,
            )
        }
        _ => (None, false),
    };
    let teacher = match teacher {
        Some((t, how)) if teacher_how_trace => Some(self::teacher(&t, &rb.trace, how, o.threshold)),
        Some((t, how)) => Some(self::teacher(&ra.trace, &t, how, o.threshold)),
        None if ra
            .trace
            .steps
            .iter()
            .zip(&rb.trace.steps)
            .all(|(x, y)| x.input_ids == y.input_ids) =>
        {
            Some(self::teacher(
                &ra.trace,
                &rb.trace,
                "both traces ran the same tokens".into(),
                o.threshold,
            ))
        }
        None => None,
    };
    let teacher_verdict = match &teacher {
        None => "no teacher-forced comparison: two traces of different token sequences".into(),
        Some(t) if t.unexplained.is_empty() && t.top1_agreement == 1.0 => format!(
            "same greedy token at all {} steps (max |Δlogit| {:.3e}, mean KLD {:.3e})",
            t.steps.len(),
            t.max_abs_dlogit.max,
            t.kld.mean
        ),
        Some(t) if t.unexplained.is_empty() => format!(
            "{} of {} steps choose differently, all at near-ties (gap < {}): explained by reduction-order noise",
            t.steps.iter().filter(|s| s.token_a != s.token_b).count(),
            t.steps.len(),
            o.threshold
        ),
        Some(t) => format!(
            "tokens differ at steps {:?} where both gaps exceed {}: not a near-tie, look at the layer-local profile",
            t.unexplained, o.threshold
        ),
    };

    // Layer-local: a lane's layers fed the other side's inputs.
    let (layer_local, layer_local_how, flips) = match (a, b) {
        (Source::Lane(c), _) => {
            let mine = layer_local(model, c, o, &rb.trace)?;
            let steps: Vec<usize> = (0..rb.trace.steps.len()).collect();
            let d = compare(&mine, &rb.trace, &steps, llmap);
            let fl = flips(model, c, &mine, &rb.trace, b.chosen(), None)?;
            (Some(d), format!("A's layers ({}) fed B's inputs", c.lane.name), fl)
        }
        (Source::Trace(_), Source::Lane(c)) => {
            let mine = layer_local(model, c, o, &ra.trace)?;
            let steps: Vec<usize> = (0..ra.trace.steps.len()).collect();
            let d = compare(&ra.trace, &mine, &steps, llmap);
            let fl = flips(model, c, &mine, &ra.trace, None, None)?;
            (Some(d), format!("B's layers ({}) fed A's inputs", c.lane.name), fl)
        }
        _ => (None, "no lane side: layer-local comparison needs one".into(), Vec::new()),
    };

    let layer_verdicts = match &layer_local {
        Some(d) => layer_verdicts(d, &flips, model.hp.n_layer),
        None => Vec::new(),
    };
    Ok(DeltaReport {
        layer_verdicts,
        a: a.label(),
        b: b.label(),
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

fn free_verdict(a: &SideRun, b: &SideRun, agree: usize, threshold: f32) -> String {
    let n = a.generated.len().min(b.generated.len());
    if agree >= n {
        return format!("identical greedy tokens for all {n} steps");
    }
    // Generated token `agree` comes from step (prompt steps - 1 + agree).
    let step_of = |r: &SideRun| r.trace.steps.len() + agree + 1 - r.generated.len() - 1;
    let (sa, sb): (&StepRecord, &StepRecord) =
        (&a.trace.steps[step_of(a)], &b.trace.steps[step_of(b)]);
    let near = sa.gap < threshold || sb.gap < threshold;
    format!(
        "tokens diverge at generated token {agree} (step {}): A {} (gap {:.3}), B {} (gap {:.3}) — {}",
        step_of(a),
        sa.emitted,
        sa.gap,
        sb.emitted,
        sb.gap,
        if near { "a near-tie: explained by reduction-order noise" } else { "NOT a near-tie: a wrong tier is suspected" }
    )
}
