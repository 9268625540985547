//! The noise floor: how far one lane drifts from itself under a minimal perturbation.
//!
//! Definition: the lane replays a fixed token sequence (teacher-forced) twice, once
//! as is and once with the residual stream after layer 0 dithered by one ulp (each
//! value moved one ulp down, kept, or moved one ulp up, by a seeded hash; see
//! [`tiercheck_model::Decoder::set_dither`]). For every tap, the relative L2 divergence
//! between the two runs over all steps is that seed's floor; the floor is the largest
//! over the seeds. It is the divergence that rounding noise of the size a different
//! reduction order makes produces downstream of layer 0, through this model, on this
//! sequence: a divergence near it (ratio ~1) is reduction-order noise; one far above it
//! at some layer localizes a real discrepancy there.
//!
//! Taps upstream of the dither (the embedding and layer 0) have no floor of their own;
//! they take layer 1's floor of the same tap kind (`inp_embd` takes `attn_norm-1`'s).
//!
//! The **layer-local floor** answers the same question for one layer alone: every
//! layer's input (`inp_embd`, each `l_out`) of the undithered run is dithered by one ulp
//! and each layer is run on it layer-locally (with the undithered KV cache); per tap, the
//! divergence from the undithered run, largest over the seeds. It is what one layer's
//! own arithmetic turns a one-ulp input difference into.

use std::collections::BTreeMap;

use tiercheck_lanes::Chosen;
use tiercheck_model::sequence::Trace;
use tiercheck_model::{Mode, Model};

use crate::layer_local;
use crate::metrics::Acc;
use crate::result_cache::Ctx;
use crate::results::Floor;
use crate::side::DeltaOptions;
use crate::teacher_forced;

/// Measure the floor of lane `c` replaying `generated` after `prompt` (the undithered
/// replay through `ctx`'s cache; the dithered ones computed).
pub(crate) fn measure(
    ctx: &Ctx<'_>,
    model: &Model,
    c: &Chosen,
    o: &DeltaOptions,
    prompt: &[u32],
    mode: Mode,
    generated: &[u32],
) -> anyhow::Result<Floor> {
    let replay = |d| teacher_forced::replay(ctx, model, c, o, prompt, mode, generated, d);
    let base_run = replay(None)?;
    let base: &Trace = &base_run.trace;
    let mut layer_local: BTreeMap<String, f64> = BTreeMap::new();
    for seed in 1..=o.floor_seeds {
        let mut dithered = base.clone();
        for ((step, name), t) in dithered.taps.iter_mut() {
            if name == "inp_embd" || name.starts_with("l_out-") {
                for (i, v) in t.data.iter_mut().enumerate() {
                    *v = dither(*v, seed, *step, name, i);
                }
            }
        }
        let local = ctx.local(None, || layer_local::layer_local(model, c, o, &dithered))?;
        let mine = &local.0;
        let mut accs: BTreeMap<String, Acc> = BTreeMap::new();
        for ((s, name), x) in &mine.taps {
            if let Some(y) = base.taps.get(&(*s, name.clone())) {
                accs.entry(name.clone()).or_default().add(&x.data, &y.data);
            }
        }
        for (name, acc) in accs {
            let e = layer_local.entry(name).or_insert(0.0);
            *e = e.max(acc.stat().rel_l2);
        }
    }
    let mut per_tap: BTreeMap<String, f64> = BTreeMap::new();
    for seed in 1..=o.floor_seeds {
        let run = replay(Some(seed))?;
        let t = &run.trace;
        let mut accs: BTreeMap<String, Acc> = BTreeMap::new();
        for ((s, name), x) in &t.taps {
            if let Some(y) = base.taps.get(&(*s, name.clone())) {
                accs.entry(name.clone()).or_default().add(&x.data, &y.data);
            }
        }
        for (name, acc) in accs {
            let r = acc.stat().rel_l2;
            let e = per_tap.entry(name).or_insert(0.0);
            *e = e.max(r);
        }
    }
    let upstream: Vec<String> =
        per_tap.keys().filter(|n| n.as_str() == "inp_embd" || n.ends_with("-0")).cloned().collect();
    for n in upstream {
        let proxy = if n == "inp_embd" {
            "attn_norm-1".to_string()
        } else {
            n.trim_end_matches("-0").to_string() + "-1"
        };
        if let Some(&v) = per_tap.get(&proxy) {
            per_tap.insert(n, v);
        }
    }
    Ok(Floor {
        lane: c.lane.name.to_string(),
        seeds: o.floor_seeds,
        steps: generated.len(),
        per_tap,
        layer_local,
    })
}

/// One value moved one ulp down, kept, or moved one ulp up, by a seeded hash.
fn dither(v: f32, seed: u64, step: usize, name: &str, i: usize) -> f32 {
    let mut h = seed ^ 0x243f_6a88_85a3_08d3;
    for b in name.bytes().chain((step as u64).to_le_bytes()).chain((i as u64).to_le_bytes()) {
        h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
    }
    h ^= h >> 29;
    if !v.is_finite() {
        return v;
    }
    match h % 3 {
        0 => v.next_down(),
        1 => v,
        _ => v.next_up(),
    }
}
