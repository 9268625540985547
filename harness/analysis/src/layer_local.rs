//! Layer-local comparison: a lane's layer `L` is fed exactly the input (and KV cache)
//! the other side's layer `L` received, separating each layer's own contribution from
//! what it inherited; per layer, a verdict against the layer-local floor.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use tiercheck_gguf::tensorfile::Tensor;
use tiercheck_lanes::Chosen;
use tiercheck_model::sequence::{graphs, Graph, RunOutput, Trace};
use tiercheck_model::{Decoder, Model, TapSink};

use crate::flips::{flips, Flip, NEAR_BOUNDARY};
use crate::free_running::{compare, Divergence};
use crate::result_cache::{self, Ctx};
use crate::results::Replay;
use crate::side::{decoder, DeltaOptions, SideRun, Source};
use crate::trace::{tap_order, trace_of};

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

/// Smallest part of the observed change of a matmul's output that its flipped input codes
/// must cause alone (the other side's codes through this side's kernel) for the flip to
/// explain the layer.
pub const FLIP_SHARE: f64 = 0.1;

/// The first output tap of the matmul that `input` (a quantized matmul input) feeds
/// (`moe`: a mixture-of-experts model, whose `ffn_norm` feeds the experts' up projection
/// first; its router reads `ffn_norm` unquantized).
fn flip_output(input: &str, moe: bool) -> Option<String> {
    let (kind, l) = input.rsplit_once('-')?;
    let out = match kind {
        "attn_norm" => "Qcur",
        "kqv_out" => "ffn_inp",
        "ffn_norm" if moe => "ffn_moe_up",
        "ffn_norm" => "ffn_swiglu",
        "ffn_swiglu" => "ffn_out",
        "ffn_moe_swiglu" => "ffn_moe_down",
        _ => return None,
    };
    Some(format!("{out}-{l}"))
}

/// Per layer: the tap with the largest ratio to its layer-local floor, the flips at
/// the layer's matmul inputs, and the verdict.
pub(crate) fn layer_verdicts(d: &Divergence, flips: &[Flip], n_layer: usize) -> Vec<LayerVerdict> {
    let mut out = Vec::new();
    let moe = d.rows.iter().any(|r| r.name.starts_with("ffn_moe_"));
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
        // A flip explains only what lies downstream of the matmul whose input codes
        // flipped: the first tap of the layer above the floor must be that matmul's output
        // or later (an excess at `attn_norm`, which no quantization precedes, is the
        // layer's own arithmetic), and the flips alone must move that matmul's output by a
        // fair part of what the two sides' outputs differ (where that was measured).
        let first_excess = d
            .rows
            .iter()
            .filter(|r| r.name.ends_with(&suffix))
            .filter(|r| r.ratio.is_some_and(|q| q > NOISE_RATIO))
            .map(|r| r.name.as_str())
            .min_by_key(|n| tap_order(n));
        let first_flip_output = primary
            .values()
            .filter_map(|f| flip_output(&f.input, moe))
            .min_by_key(|n| tap_order(n));
        let downstream = match (first_excess, &first_flip_output) {
            (Some(e), Some(o)) => tap_order(e) >= tap_order(o),
            _ => false,
        };
        let reproduced = primary
            .values()
            .all(|f| f.observed.is_none_or(|obs| obs <= 0.0 || f.flip_effect >= FLIP_SHARE * obs));
        let verdict = if ratio <= NOISE_RATIO {
            "noise"
        } else if flipped_codes > 0 && max_boundary <= NEAR_BOUNDARY && downstream && reproduced {
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

/// Layer-local: `c`'s layers fed `other`'s inputs, step by step. A layer needs only its
/// input at every step (`l_out` of the layer before; for layer 0 `inp_embd`, else the
/// embedding rows of the step's ids by `c`'s own dequantizer). Its K/V cache is the
/// trace's `Kcur`/`Vcur` of the earlier steps where the trace has them at every step,
/// else what `c` computed from the earlier steps' inputs. Layers without input are not
/// replayed ([`Replay`]).
pub(crate) fn layer_local(
    model: &Model,
    c: &Chosen,
    o: &DeltaOptions,
    other: &Trace,
) -> anyhow::Result<(Trace, Replay)> {
    layer_local_on(&decoder(model, c, o)?, other, None)
}

/// [`layer_local`] with decoder `dec`, on `only` these layers when given (then the head
/// is not replayed).
pub(crate) fn layer_local_on(
    dec: &Decoder<'_>,
    other: &Trace,
    only: Option<&[usize]>,
) -> anyhow::Result<(Trace, Replay)> {
    let hp = dec.hp;
    let nsteps = other.steps.len();
    let has = |step: usize, name: &str| other.taps.contains_key(&(step, name.to_string()));
    let every = |name: &str| (0..nsteps).all(|s| has(s, name));
    let get = |step: usize, name: &str| -> anyhow::Result<&Tensor> {
        other
            .taps
            .get(&(step, name.to_string()))
            .ok_or_else(|| anyhow::anyhow!("the other trace lacks tap {step:03}/{name}"))
    };
    let input_name = |il: usize| format!("l_out-{}", il.wrapping_sub(1));
    let mut replay = Replay {
        embedding_recomputed: !every("inp_embd"),
        head: only.is_none() && every(&input_name(hp.n_layer)),
        ..Replay::default()
    };
    let chosen = |il: usize| only.is_none_or(|l| l.contains(&il));
    let replayed: Vec<bool> =
        (0..hp.n_layer).map(|il| chosen(il) && (il == 0 || every(&input_name(il)))).collect();
    let trace_kv: Vec<bool> = (0..hp.n_layer)
        .map(|il| every(&format!("Kcur-{il}")) && every(&format!("Vcur-{il}")))
        .collect();
    for il in 0..hp.n_layer {
        if !chosen(il) {
            continue;
        } else if !replayed[il] {
            replay.layers_without_input.push(il);
        } else if !trace_kv[il] {
            replay.own_kv_layers.push(il);
        }
    }
    let mut sink = TapSink::new(true, false);
    let mut cache = dec.new_cache()?;
    // A tap's rows of one graph (ubatch) of a step, checked to be whole.
    let rows_of = |step: usize, name: &str, g: &Graph| -> anyhow::Result<&[f32]> {
        let t = get(step, name)?;
        let width = t.shape.last().copied().unwrap_or(0);
        let (row0, rows) = g.rows_in(name, hp.n_layer);
        t.data.get(row0 * width..(row0 + rows) * width).ok_or_else(|| {
            anyhow::anyhow!(
                "the other trace's {step:03}/{name} has {} rows, fewer than its step records",
                t.shape[0]
            )
        })
    };
    for (step, rec) in other.steps.iter().enumerate() {
        let pos0 = rec.positions[0];
        sink.set_step(step);
        // Each graph of the step in order (llama.cpp's ubatches), with the K/V of the
        // earlier steps and of the earlier graphs of this step.
        for g in graphs(rec) {
            let m = g.rows;
            for il in (0..hp.n_layer).filter(|&il| replayed[il]) {
                let embedded;
                let input: &[f32] = if il == 0 {
                    if replay.embedding_recomputed {
                        embedded = dec.embed(&rec.input_ids[g.start..g.start + m])?;
                        &embedded
                    } else {
                        rows_of(step, "inp_embd", &g)?
                    }
                } else {
                    rows_of(step, &input_name(il), &g)?
                };
                if input.len() != m * hp.n_embd {
                    anyhow::bail!(
                        "the other trace's input of layer {il} at step {step} has {} values, not {m} rows of {}",
                        input.len(),
                        hp.n_embd
                    );
                }
                // The KV cache of earlier steps and graphs: the other side's own K and V
                // where it has them; else what this lane stored replaying them.
                if trace_kv[il] {
                    for earlier in 0..=step {
                        let (k, v) = (
                            get(earlier, &format!("Kcur-{il}"))?,
                            get(earlier, &format!("Vcur-{il}"))?,
                        );
                        let kvd = k.shape[1];
                        let positions = &other.steps[earlier].positions;
                        let n = if earlier == step { g.start } else { positions.len() };
                        for (r, p) in positions[..n].iter().enumerate() {
                            cache.store(
                                il,
                                *p,
                                &k.data[r * kvd..(r + 1) * kvd],
                                &v.data[r * kvd..(r + 1) * kvd],
                            );
                        }
                    }
                }
                let outputs = (il + 1 == hp.n_layer).then_some(&g.outputs[..]);
                dec.eval_layer_out(il, &mut cache, input, pos0 + g.start, m, outputs, &mut sink)?;
            }
            if replay.head && !g.outputs.is_empty() {
                let last = rows_of(step, &input_name(hp.n_layer), &g)?;
                dec.head(last, g.outputs.len(), &mut sink)?;
            }
        }
    }
    let (taps, _) = sink.into_taps();
    let mut t = trace_of(RunOutput {
        steps: other.steps.clone(),
        generated: Vec::new(),
        taps,
        digests: BTreeMap::new(),
    });
    t.meta.insert("layer_local".into(), "1".into());
    Ok((t, replay))
}

/// `c`'s layers fed `other`'s inputs, through `ctx`'s cache when `other` is a lane's run.
fn cached(
    ctx: &Ctx<'_>,
    model: &Model,
    c: &Chosen,
    o: &DeltaOptions,
    other: &SideRun,
) -> anyhow::Result<std::sync::Arc<(Trace, Replay)>> {
    let key = other.key.as_ref().map(|k| format!("{} fed {k}", result_cache::lane_key(c, o)));
    ctx.local(key.as_deref(), || layer_local(model, c, o, other.trace()))
}

/// The layer-local comparison of two side runs, when one is a lane: its layers fed the
/// other side's inputs and compared with them tap by tap (without ratios: the caller
/// sets the layer-local floor when it measures one), and the activation codes at every quantized matmul input.
pub(crate) fn analyse(
    ctx: &Ctx<'_>,
    model: &Model,
    a: &Source,
    b: &Source,
    ra: &SideRun,
    rb: &SideRun,
    o: &DeltaOptions,
) -> anyhow::Result<(Option<Divergence>, String, Vec<Flip>)> {
    // Layer-local: a lane's layers fed the other side's inputs.
    Ok(match (a, b) {
        (Source::Lane(c), _) => {
            let local = cached(ctx, model, c, o, rb)?;
            let (mine, replay) = (&local.0, &local.1);
            let steps: Vec<usize> = (0..rb.trace().steps.len()).collect();
            let d = compare(mine, rb.trace(), &steps, None);
            let fl = flips(model, c, mine, rb.trace(), b.chosen(), None)?;
            let how =
                format!("A's layers ({}) fed B's inputs{}", c.lane.name, replay_note(replay, "B"));
            (Some(d), how, fl)
        }
        (Source::Trace(_), Source::Lane(c)) => {
            let local = cached(ctx, model, c, o, ra)?;
            let (mine, replay) = (&local.0, &local.1);
            let steps: Vec<usize> = (0..ra.trace().steps.len()).collect();
            let d = compare(ra.trace(), mine, &steps, None);
            let fl = flips(model, c, mine, ra.trace(), None, None)?;
            let how =
                format!("B's layers ({}) fed A's inputs{}", c.lane.name, replay_note(replay, "A"));
            (Some(d), how, fl)
        }
        _ => (None, "no lane side: layer-local comparison needs one".into(), Vec::new()),
    })
}

/// What a replay on `side`'s partial trace could not use, for the report (empty when the
/// trace had every input and K/V tap).
fn replay_note(r: &Replay, side: &str) -> String {
    let mut parts = Vec::new();
    if r.embedding_recomputed {
        parts.push(format!("{side} has no inp_embd: layer 0 fed the ids' embedding rows"));
    }
    if !r.own_kv_layers.is_empty() {
        parts.push(format!(
            "{side} has no Kcur/Vcur: the K/V cache of {} recomputed from the earlier steps' inputs",
            layer_list(&r.own_kv_layers)
        ));
    }
    if !r.layers_without_input.is_empty() {
        parts.push(format!(
            "{} not replayed ({side} lacks their input)",
            layer_list(&r.layers_without_input)
        ));
    }
    if !r.head {
        parts.push(format!("head not replayed ({side} lacks the last l_out)"));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!(" ({})", parts.join("; "))
    }
}

/// `layer 3`, `layers 0-27`, `layers 1, 4, 7`.
fn layer_list(l: &[usize]) -> String {
    match l {
        [one] => format!("layer {one}"),
        [first, .., last] if last - first + 1 == l.len() => format!("layers {first}-{last}"),
        _ => format!("layers {}", l.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(", ")),
    }
}
