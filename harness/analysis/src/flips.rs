//! Activation-quantization flips: at each quantized matmul input of a layer-local run
//! (`attn_norm`, `kqv_out`, `ffn_norm`, `ffn_swiglu`, `result_norm`; a mixture of
//! experts' `ffn_norm` and `ffn_moe_swiglu` through the experts each token was routed
//! to), the two sides' int8
//! activation codes are compared, with the distance of each flipped value from its
//! rounding boundary and the output change the flips alone cause.

use serde::{Deserialize, Serialize};

use tiercheck_lanes::Chosen;
use tiercheck_model::sequence::Trace;
use tiercheck_model::Model;

use crate::metrics::Acc;
use crate::trace::tap_order;

/// Distance from a rounding boundary (code units) within which a flipped activation
/// code counts as decided by last-bit noise.
pub const NEAR_BOUNDARY: f64 = 0.05;

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

/// The quantized-matmul input tap whose matmul produces `out` (through norms, RoPE or
/// the residual add that follow it in the same op group).
pub(crate) fn matmul_input(out: &str) -> Option<String> {
    if out == "result_output" {
        return Some("result_norm".into());
    }
    let (kind, l) = out.rsplit_once('-')?;
    let input = match kind {
        "Qcur" | "Kcur" | "Vcur" => "attn_norm",
        "ffn_inp" => "kqv_out",
        "ffn_swiglu" => "ffn_norm",
        "ffn_out" => "ffn_swiglu",
        // A mixture of experts: the router and the experts' up/gate read ffn_norm, the
        // experts' down the SwiGLU rows.
        "ffn_moe_logits" | "ffn_moe_up" | "ffn_moe_gate" => "ffn_norm",
        "ffn_moe_down" => "ffn_moe_swiglu",
        _ => return None,
    };
    Some(format!("{input}-{l}"))
}

/// Weights each quantized-matmul input tap feeds (`moe`: a mixture-of-experts model,
/// whose `ffn_norm` feeds the experts' up and gate projections and whose SwiGLU rows
/// feed their down projections).
fn consumers(input: &str, n_layer: usize, moe: bool) -> Option<Vec<String>> {
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
        "ffn_norm" if moe => Some(vec![w("ffn_up_exps"), w("ffn_gate_exps")]),
        "ffn_norm" => Some(vec![w("ffn_up"), w("ffn_gate")]),
        "ffn_swiglu" => Some(vec![w("ffn_down")]),
        "ffn_moe_swiglu" if moe => Some(vec![w("ffn_down_exps")]),
        _ => None,
    }
}

/// The experts each token of `step` was routed to in layer `layer` of `t` (its
/// `ffn_moe_topk` tap), one list per row.
fn routed(t: &Trace, step: usize, layer: &str) -> Option<Vec<Vec<usize>>> {
    let topk = t.taps.get(&(step, format!("ffn_moe_topk-{layer}")))?;
    let used = *topk.shape.last()?;
    Some(
        topk.data
            .chunks_exact(used.max(1))
            .map(|r| r.iter().map(|&v| v as usize).collect())
            .collect(),
    )
}

/// Compare activation codes at every quantized matmul input of a layer-local run
/// (`mine`, computed by `c`) against the other side's taps, each side's values
/// quantized by its own rule (the other side's by `c`'s rule when it is a trace). On a
/// mixture-of-experts model each activation row's flip effect is taken through the
/// experts this side routed it to.
pub(crate) fn flips(
    model: &Model,
    c: &Chosen,
    mine: &Trace,
    other: &Trace,
    other_lane: Option<&Chosen>,
    only: Option<&[(usize, String)]>,
) -> anyhow::Result<Vec<Flip>> {
    let moe = model.hp.moe.is_some();
    let mut out = Vec::new();
    for ((step, name), t_mine) in &mine.taps {
        if only.is_some_and(|o| !o.iter().any(|(s, n)| s == step && n == name)) {
            continue;
        }
        let Some(weights) = consumers(name, model.hp.n_layer, moe) else { continue };
        let Some(t_other) = other.taps.get(&(*step, name.clone())) else { continue };
        // A tied output reads the embedding.
        let Some(info) = model.file.tensor(&weights[0]).or_else(|| {
            (name == "result_norm").then(|| model.file.tensor("token_embd.weight")).flatten()
        }) else {
            continue;
        };
        let ty = info.ty;
        if !tiercheck_core::quant::weights::QUANTIZABLE.contains(&ty) {
            continue;
        }
        // The weight matrices of activation row `r`: the 2-D tensor, or the experts it
        // was routed to (a token's `ffn_norm` row goes to all of them, each SwiGLU row
        // of a token to its slot's expert).
        let (wk, wn) = (info.dims[0] as usize, info.dims[1] as usize);
        let data = model.file.tensor_data(info);
        let experts = if info.dims.len() == 3 {
            let layer = name.rsplit_once('-').map_or("", |(_, l)| l);
            let Some(r) = routed(mine, *step, layer) else { continue };
            Some(r)
        } else {
            None
        };
        let matrices = |r: usize| -> anyhow::Result<Vec<tiercheck_core::WeightMatrix<'_>>> {
            let Some(ex) = &experts else {
                return Ok(vec![tiercheck_core::WeightMatrix::new(ty, wn, wk, data)?]);
            };
            let bytes = data.len() / info.dims[2] as usize;
            let per_token = t_mine.shape[1] / wk;
            let token = &ex[(r / per_token).min(ex.len().saturating_sub(1))];
            let chosen: Vec<usize> =
                if per_token == 1 { token.clone() } else { vec![token[r % per_token]] };
            chosen
                .into_iter()
                .map(|e| {
                    Ok(tiercheck_core::WeightMatrix::new(
                        ty,
                        wn,
                        wk,
                        &data[e * bytes..(e + 1) * bytes],
                    )?)
                })
                .collect()
        };
        let k = wk;
        if !t_mine.shape[1].is_multiple_of(k) {
            continue;
        }
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
        for (r, (xm, xo)) in
            t_mine.data.chunks_exact(k).zip(t_other.data.chunks_exact(k)).enumerate()
        {
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
                for w in matrices(r)? {
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
