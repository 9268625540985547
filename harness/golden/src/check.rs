//! The three checks a trial makes: a lane's output against its golden (bitwise), a
//! native implementation against its portable twin (bitwise), and a lane against `ref`
//! and the exact answer (tolerance).
//!
//! Tolerances, by op (each a bound derived from the arithmetic, never fitted):
//! - **vec_dot, gemv, gemm**: every output within `gamma_{k/16+67} * S` of the exact
//!   value of the lane's own quantized operands (see [`super::exact`] for the
//!   derivation); within `|exact - exact_ref| + bound + bound_ref` of `ref`'s output
//!   (the difference the activation codes make, plus both rounding bounds); and NMSE at
//!   most [`NMSE_SAME_CODES`] against `ref` when the lane quantizes activations by
//!   `ref`'s rule, or against `ref`'s kernel run on the lane's own codes when only the
//!   rounding rule differs, or against the exact value of the lane's own codes when its
//!   activation format is another (the GPU lanes' q8_1). The GPU lanes' Q4_1 and Q5_1
//!   round their scale products to f16 (ggml's `__hmul2`): their bounds add that error
//!   ([`super::exact::mmvq_half_product_slack`]) and they have no NMSE check, the f16
//!   products being another precision rather than another schedule. (A raw NMSE against `ref` across different rounding rules is
//!   not bounded: on rows made of exact ties it reaches 3.8e-2 over 4096-long rows, and
//!   on a single deeply cancelling dot any relative difference; the calibration example
//!   prints it.)
//! - **dequantize**: |lane - ref| <= 2^-22 * B per element, B = the block's largest
//!   |value| plus |dmin| * 63 (q4_K). A fused `d1*q - m1` differs from the unfused one
//!   by the skipped rounding of `d1*q`, at most u * |d1*q| <= u * B; 4u leaves room for
//!   one more rounding of the scale product;
//! - **activation quantize**: every dequantized value within one quantization step
//!   (max of the two blocks' |d|, times 1 + 2^-10 for an f16 scale's last bit) of
//!   `ref`'s: lanes may differ in the scale's last ulp and in rounding at ties, never by
//!   more than one code. Blocks whose inputs hold NaN or infinities are excluded: there
//!   each lane reproduces its own tier's bits (checked bitwise), and tiers differ.

use tiercheck_core::blocks::{
    BlockQ2K, BlockQ4K, BlockQ4_1, BlockQ5K, BlockQ5_1, BlockQ8K, BlockQ8_0, BlockQ8_1,
};
use tiercheck_core::quant::ActRule;
use tiercheck_core::{GgmlType, Kernels, Lane};

use super::cases::{Case, ElemKind, Input, Op};
use super::exact::{dot_with_bound, mmvq_half_product_slack};
use super::output::Output;
use super::run::{elem_rows, quantized_activation, rope_pos};
use super::store::{bless_command, Inputs, LaneGolden};
use crate::compare::{bitwise_bytes, bitwise_f32, failure_message, tolerance, within_bounds};

/// NMSE limit between a lane's dot products and `ref`'s when both multiply the *same*
/// activation codes, so that only the float schedule differs (accumulation order,
/// fusing). Calibrated (`cargo run --release -p tiercheck-golden --example calibrate_bounds`):
/// the worst case over 100 seeds x 9 row kinds x 4 weight types is 1.2e-8 (x86_64-avx2,
/// q4_K, constant rows); the limit leaves a factor of ~80.
pub const NMSE_SAME_CODES: f64 = 1e-6;

/// Bitwise check of `got` against the lane's golden for `case`.
pub fn check_golden(
    lane: &str,
    case: &Case,
    got: &Output,
    golden: &LaneGolden,
) -> Result<(), String> {
    let (entry, want) = match golden.expected(&case.name) {
        Ok(Some(x)) => x,
        Ok(None) => {
            return Err(format!(
                "no golden entry for `{}` on lane `{lane}`; create it with `{}`",
                case.name,
                bless_command(lane, Some(&case.name))
            ))
        }
        Err(corruption) => {
            return Err(format!("{corruption} (a damaged golden, not a kernel failure)"))
        }
    };
    if got.sha256() == entry.sha256 {
        return Ok(());
    }
    let refresh = bless_command(lane, Some(&case.name));
    if entry.stored < got.len() {
        // Only a leading sample is stored: compare it, and say what the digest proves.
        let head = got.stored_part();
        if head.sha256() == want.sha256() {
            return Err(format!(
                "mismatch in case `{}` on lane `{lane}`: the output's sha256 {} differs from the \
                 golden's {}, but its first {} of {} values agree (only those are stored)\n\
                 to refresh this golden (only if the change is intended): {refresh}",
                case.name,
                got.sha256(),
                entry.sha256,
                entry.stored,
                got.len()
            ));
        }
        return Err(diff_message(&case.name, lane, &head, want, &refresh));
    }
    Err(diff_message(&case.name, lane, got, want, &refresh))
}

/// A bitwise difference report between two outputs, as failure text.
pub(crate) fn diff_message(
    case: &str,
    lane: &str,
    got: &Output,
    want: &Output,
    refresh: &str,
) -> String {
    match (got, want) {
        (Output::F32 { data: g, .. }, Output::F32 { data: w, .. }) => {
            failure_message(case, lane, &bitwise_f32(g, w), refresh)
        }
        (Output::Blocks { ty, data: g }, Output::Blocks { data: w, .. }) => {
            failure_message(case, lane, &bitwise_bytes(g, w, ty.type_size()), refresh)
        }
        _ => format!(
            "case `{case}` on lane `{lane}`: output kind {} differs from the golden's {}",
            got.dtype(),
            want.dtype()
        ),
    }
}

/// Bitwise check of a native output against the portable twin's.
pub fn check_twin(
    lane: &str,
    case: &Case,
    native: &Output,
    portable: &Output,
) -> Result<(), String> {
    if native.sha256() == portable.sha256() {
        return Ok(());
    }
    let msg = diff_message(
        &case.name,
        lane,
        native,
        portable,
        "(none: the native kernel and its portable twin must agree; fix one of them)",
    );
    Err(format!("native != portable twin\n{msg}"))
}

/// Tolerance check of `got` (from `kernels`, an implementation of `lane`) against
/// `ref`'s output and, for dot products, the exact answer. Elementwise cases are checked
/// against the exact answer alone, so `reference` may be `None` for them (a kernel only
/// GPU flavours have, [`crate::run::reference_output`]); every other case needs it.
pub fn check_tolerance(
    lane: &Lane,
    kernels: &dyn Kernels,
    case: &Case,
    got: &Output,
    reference: Option<&Output>,
    inputs: &Inputs,
) -> Result<(), String> {
    let fail = |what: &str, report: &dyn std::fmt::Display| {
        Err(format!("case `{}` on lane `{}`: {what}\n{report}", case.name, lane.name))
    };
    let need_ref = || reference.ok_or_else(|| format!("case `{}`: no output of ref", case.name));
    match case.op {
        Op::VecDot(ty) | Op::Gemv(ty) | Op::Gemm(ty) => {
            let reference = need_ref()?;
            let (mut exact, mut bound) = exact_matmul(kernels, case, ty, inputs)?;
            let mut g = got.values();
            // Outputs of activation rows with NaN or infinite values: each tier does its
            // own thing there (a GPU's q8_1 scale becomes inf and inf*0 = NaN, a CPU's
            // q8_K scale 0), checked bitwise against the tier and the golden; no
            // tolerance. The same outputs are dropped from every comparison below.
            // Also outputs whose exact value for this lane's own codes is not finite (a
            // GPU's f16 q8_1 scale overflows above 65504 where a CPU's f32 q8_K does not).
            let keep = match finite_rows(case, inputs)? {
                Some(k) => Some(k),
                None if exact.iter().chain(&bound).any(|v| !v.is_finite()) => {
                    Some(vec![true; exact.len()])
                }
                None => None,
            }
            .map(|k: Vec<bool>| {
                k.iter()
                    .zip(exact.iter().zip(&bound))
                    .map(|(k, (e, b))| *k && e.is_finite() && b.is_finite())
                    .collect::<Vec<bool>>()
            });
            let mut reference = reference.clone();
            if let Some(keep) = &keep {
                let pick = |v: &mut Vec<f32>| {
                    *v = v.iter().zip(keep).filter(|(_, k)| **k).map(|(x, _)| *x).collect()
                };
                let pick64 = |v: &mut Vec<f64>| {
                    *v = v.iter().zip(keep).filter(|(_, k)| **k).map(|(x, _)| *x).collect()
                };
                pick(&mut g);
                pick64(&mut exact);
                pick64(&mut bound);
                if let Output::F32 { data, shape } = &mut reference {
                    pick(data);
                    *shape = vec![data.len()];
                }
            }
            let reference = &reference;
            let report = within_bounds(&g, &exact, &bound);
            if !report.is_ok() {
                return fail("outside the error bound of the exact result", &report);
            }
            let ref_lane = tiercheck_lanes::find("ref")?;
            let rule = kernels.act_rule(ty).map_err(|e| e.to_string())?;
            let ref_rule = ref_lane.portable.act_rule(ty).map_err(|e| e.to_string())?;
            // Max-abs bound against ref: both sides are within their rigorous bounds of
            // the exact values of their own codes, so they differ by at most the exact
            // difference the codes make plus both bounds.
            let (mut ref_exact, mut ref_bound) = exact_matmul(ref_lane.portable, case, ty, inputs)?;
            if let Some(keep) = &keep {
                ref_exact =
                    ref_exact.iter().zip(keep).filter(|(_, k)| **k).map(|(x, _)| *x).collect();
                ref_bound =
                    ref_bound.iter().zip(keep).filter(|(_, k)| **k).map(|(x, _)| *x).collect();
            }
            let explained: Vec<f64> = (0..exact.len())
                .map(|i| (exact[i] - ref_exact[i]).abs() + bound[i] + ref_bound[i])
                .collect();
            let ref_vals: Vec<f64> = reference.values().iter().map(|&v| v as f64).collect();
            let report = within_bounds(&g, &ref_vals, &explained);
            if !report.is_ok() {
                return fail(
                    "further from ref than activation codes and rounding explain",
                    &report,
                );
            }
            // NMSE with only the float schedule differing. Not for the GPU lanes' Q4_1
            // and Q5_1: their f16 scale products (`__hmul2`) are another precision, not
            // another schedule; the bounds above carry that error explicitly.
            let mmvq = rule == ActRule::Q8_1HipMmvq || rule == ActRule::Q8_1CudaMmvq;
            if mmvq && matches!(ty, GgmlType::Q4_1 | GgmlType::Q5_1) {
                return Ok(());
            }
            let (against, what) = if rule == ref_rule {
                (reference.values(), "ref")
            } else if rule.format() == ref_rule.format() {
                let mut v = ref_kernel_on_lane_codes(kernels, ref_lane.portable, case, ty, inputs)?;
                if let Some(keep) = &keep {
                    v = v.iter().zip(keep).filter(|(_, k)| **k).map(|(x, _)| *x).collect();
                }
                (v, "ref's kernel on this lane's activation codes")
            } else {
                // Another activation format (the GPU lanes' q8_1): ref cannot multiply
                // these codes, so the float schedule is measured against the exact value
                // of the lane's own codes instead.
                (exact.iter().map(|&v| v as f32).collect(), "the exact value of this lane's codes")
            };
            let stats = tolerance(&g, &against);
            if stats.nmse.is_nan()
                || stats.nmse > NMSE_SAME_CODES
                || stats.nan_mismatch > 0
                || stats.inf_mismatch > 0
            {
                return fail(&format!("NMSE against {what} above {NMSE_SAME_CODES:e}"), &stats);
            }
            Ok(())
        }
        Op::Elem(kind) => {
            let rows = elem_rows(case, inputs)?;
            let (want, bound) = elem_exact(kind, case, &rows, lane.recipe.elem);
            let report = within_bounds(&got.values(), &want, &bound);
            if report.is_ok() {
                Ok(())
            } else {
                fail("outside the error bound of the exact result", &report)
            }
        }
        Op::Dequantize(ty) => {
            let w = weight_input(case, inputs)?;
            let want = need_ref()?.values();
            let bound = dequant_bounds(ty, w, &want);
            let want64: Vec<f64> = want.iter().map(|&v| v as f64).collect();
            let report = within_bounds(&got.values(), &want64, &bound);
            if report.is_ok() {
                Ok(())
            } else {
                fail(
                    "dequantized values differ from ref by more than 2^-22 of the block scale",
                    &report,
                )
            }
        }
        Op::Quantize(fmt) => {
            let reference = need_ref()?;
            let (Output::Blocks { data: g, .. }, Output::Blocks { data: r, .. }) = (got, reference)
            else {
                return Err("quantize outputs must be blocks".into());
            };
            let xname = case.activation_input().ok_or("case has no activations")?;
            let Some(Input::F32 { data: x, .. }) = inputs.get(&xname) else {
                return Err(format!("input {xname} missing or not f32"));
            };
            let (gv, rv) = (got.values(), reference.values());
            let (gs, rs) = (block_steps(fmt, g), block_steps(fmt, r));
            let per_block = fmt.block_size();
            let (mut gsel, mut want, mut bound) = (Vec::new(), Vec::new(), Vec::new());
            for (bi, xb) in x.chunks(per_block).enumerate() {
                // Blocks with NaN or infinite inputs: each tier does its own thing there
                // (checked bitwise against the tier and the golden), so no tolerance.
                if xb.iter().any(|v| !v.is_finite()) {
                    continue;
                }
                for i in bi * per_block..((bi + 1) * per_block).min(rv.len()).min(gv.len()) {
                    gsel.push(gv[i]);
                    want.push(rv[i] as f64);
                    bound.push(gs[i].max(rs[i]) * (1.0 + 1.0 / 1024.0));
                }
            }
            let report = within_bounds(&gsel, &want, &bound);
            if report.is_ok() && gv.len() == rv.len() {
                Ok(())
            } else {
                fail("quantized activations differ from ref by more than one step", &report)
            }
        }
    }
}

/// For a matmul case: which outputs (`m` rows of `n`) come from an activation row that
/// is entirely finite; `None` when all are.
fn finite_rows(case: &Case, inputs: &Inputs) -> Result<Option<Vec<bool>>, String> {
    let xname = case.activation_input().ok_or("case has no activations")?;
    let Some(Input::F32 { data: x, .. }) = inputs.get(&xname) else {
        return Err(format!("input {xname} missing or not f32"));
    };
    let (m, n, k) = (case.m.max(1), case.n.max(1), case.k);
    if k == 0 || x.iter().all(|v| v.is_finite()) {
        return Ok(None);
    }
    let rows: Vec<bool> = x.chunks(k).map(|r| r.iter().all(|v| v.is_finite())).collect();
    let per_out = if matches!(case.op, Op::VecDot(_)) { 1 } else { n };
    Ok(Some((0..m.min(rows.len())).flat_map(|i| std::iter::repeat_n(rows[i], per_out)).collect()))
}

fn weight_input<'a>(case: &Case, inputs: &'a Inputs) -> Result<&'a [u8], String> {
    let name = case.weight_input().ok_or("case has no weights")?;
    match inputs.get(&name) {
        Some(Input::Blocks { data, .. }) => Ok(data),
        _ => Err(format!("input {name} missing or not blocks")),
    }
}

/// `ref`'s vec_dot of every (weight row, activation row) pair, on the activation codes
/// that `kernels` produced.
fn ref_kernel_on_lane_codes(
    kernels: &dyn Kernels,
    reference: &dyn Kernels,
    case: &Case,
    ty: GgmlType,
    inputs: &Inputs,
) -> Result<Vec<f32>, String> {
    let w = weight_input(case, inputs)?;
    let xname = case.activation_input().ok_or("case has no activations")?;
    let Some(Input::F32 { data: x, .. }) = inputs.get(&xname) else {
        return Err(format!("input {xname} missing or not f32"));
    };
    let row_bytes = ty.row_bytes(case.k).ok_or("bad row length")?;
    let mut out = Vec::new();
    for i in 0..case.m {
        let act = quantized_activation(kernels, ty, &x[i * case.k..(i + 1) * case.k])?;
        for j in 0..case.n {
            let row = &w[j * row_bytes..(j + 1) * row_bytes];
            out.push(reference.vec_dot(ty, row, &act).map_err(|e| e.to_string())?);
        }
    }
    Ok(out)
}

/// Exact values and bounds of every output of a dot-product case.
fn exact_matmul(
    kernels: &dyn Kernels,
    case: &Case,
    ty: GgmlType,
    inputs: &Inputs,
) -> Result<(Vec<f64>, Vec<f64>), String> {
    let w = weight_input(case, inputs)?;
    let xname = case.activation_input().ok_or("case has no activations")?;
    let Some(Input::F32 { data: x, .. }) = inputs.get(&xname) else {
        return Err(format!("input {xname} missing or not f32"));
    };
    let rule = kernels.act_rule(ty).map_err(|e| e.to_string())?;
    let fmt = rule.format();
    let mmvq = rule == ActRule::Q8_1HipMmvq || rule == ActRule::Q8_1CudaMmvq;
    let row_bytes = ty.row_bytes(case.k).ok_or("bad row length")?;
    let (mut exact, mut bound) = (Vec::new(), Vec::new());
    for i in 0..case.m {
        let act = quantized_activation(kernels, ty, &x[i * case.k..(i + 1) * case.k])?;
        for j in 0..case.n {
            let row = &w[j * row_bytes..(j + 1) * row_bytes];
            let (e, _, b) = dot_with_bound(ty, row, fmt, &act)
                .ok_or_else(|| format!("no exact model for {} x {}", ty.name(), fmt.name()))?;
            exact.push(e);
            bound.push(if mmvq { b + mmvq_half_product_slack(ty, row, &act) } else { b });
        }
    }
    Ok((exact, bound))
}

/// Per element: 2^-22 * (the block's largest |value| + the largest min term: |dmin| * 63
/// for q4_K and q5_K, |dmin| * 15 for q2_K, |m| for q4_1 and q5_1).
fn dequant_bounds(ty: GgmlType, w: &[u8], values: &[f32]) -> Vec<f64> {
    let per_block = ty.block_size();
    let mut out = Vec::with_capacity(values.len());
    for (bi, vals) in values.chunks(per_block).enumerate() {
        let mut b = vals.iter().fold(0.0f64, |a, &v| a.max((v as f64).abs()));
        if let Some(blk) = w.get(bi * ty.type_size()..(bi + 1) * ty.type_size()) {
            // The min term's largest magnitude, which the value may cancel.
            b += match ty {
                GgmlType::Q4_K => {
                    (bytemuck::from_bytes::<BlockQ4K>(blk).dmin() as f64).abs() * 63.0
                }
                GgmlType::Q5_K => {
                    (bytemuck::from_bytes::<BlockQ5K>(blk).dmin() as f64).abs() * 63.0
                }
                GgmlType::Q2_K => {
                    (bytemuck::from_bytes::<BlockQ2K>(blk).dmin() as f64).abs() * 15.0
                }
                GgmlType::Q4_1 => (bytemuck::from_bytes::<BlockQ4_1>(blk).m() as f64).abs(),
                GgmlType::Q5_1 => (bytemuck::from_bytes::<BlockQ5_1>(blk).m() as f64).abs(),
                _ => 0.0,
            };
        }
        out.extend(std::iter::repeat_n(b * f64::powi(2.0, -22), vals.len()));
    }
    out
}

/// Per element: the block's quantization step |d|.
fn block_steps(fmt: GgmlType, bytes: &[u8]) -> Vec<f64> {
    let mut out = Vec::new();
    match fmt {
        GgmlType::Q8_K => {
            for b in bytemuck::cast_slice::<u8, BlockQ8K>(bytes) {
                out.extend(std::iter::repeat_n((b.d() as f64).abs(), 256));
            }
        }
        GgmlType::Q8_0 => {
            for b in bytemuck::cast_slice::<u8, BlockQ8_0>(bytes) {
                out.extend(std::iter::repeat_n((b.d() as f64).abs(), 32));
            }
        }
        GgmlType::Q8_1 => {
            for b in bytemuck::cast_slice::<u8, BlockQ8_1>(bytes) {
                out.extend(std::iter::repeat_n((b.d() as f64).abs(), 32));
            }
        }
        _ => {}
    }
    out
}

/// The exact answer (f64) of an elementwise case and a rigorous bound on any flavour's
/// f32 result, `u = 2^-24` the f32 unit roundoff. Every flavour computes the same
/// formula with a different vector width, reduction order, fusion or `expf`, so one
/// bound serves all: soft_max `exp(x - max)` with the subtraction in f32 (the input of
/// every `expf`), each value within 4u (ggml's `ggml_v_expf` is good to about 1.5 ulp,
/// glibc's `expf` to under 1) and the sum (hi, lo) within the sum of those bounds plus
/// k u of the total; soft_max_row's probabilities within their `exp` bounds (4u, plus
/// 1.25 |x - max| u for CUDA's fast `expf`, or a flushed subnormal), the sum's relative
/// bound (those plus k u) and 3u more; swiglu `silu(x) * g` within (8 + max(0, -x)) u (an `expf`, an add,
/// a divide, a multiply; the `-x` term is CUDA's fast `expf`, which rounds `x * log2 e`
/// before the exponential and so errs by up to `|x|` u relative in `exp(-x)`, which
/// dominates `1 + exp(-x)` for negative x), and anywhere between 0 and the exact value
/// where `expf(-x)` overflows (x < -87); the dots within (k + 2) u of the sum of
/// |products|; RMSNorm within (3 + (ceil(k/256) + 14)/2) u: the GPU flavours sum the
/// squares in f32 (a thread's chain of at most ceil(k/256) fused squares, then two
/// 5-level butterflies), so the mean carries up to ceil(k/256) + 13 roundings with the
/// division (or reciprocal), `+ eps` and the f32 rounding of a CPU's f64 mean all
/// counted; the reciprocal square root halves that relative error and adds at most one
/// rounding (a true `1/sqrtf` two), and two products follow — the CPU's f64 sum fits the
/// same bound; RoPE with the flavour's own f32 cos/sin cache (`flavour`: CUDA's differs),
/// within 3u of |x0 c| + |x1 s| (fused or not). A tiny absolute term covers results in
/// the subnormal range.
pub fn elem_exact(
    kind: ElemKind,
    case: &Case,
    rows: &[&[f32]],
    flavour: tiercheck_core::elem::ElemFlavour,
) -> (Vec<f64>, Vec<f64>) {
    const U: f64 = 1.0 / (1u64 << 24) as f64;
    const TINY: f64 = 4.0e-45;
    let k = case.k;
    match kind {
        ElemKind::SoftMax => {
            let x = rows[0];
            let max = x.iter().copied().fold(f32::NEG_INFINITY, |a, b| if a > b { a } else { b });
            let e: Vec<f64> = x.iter().map(|&v| f64::from(v - max).exp()).collect();
            let mut bound: Vec<f64> = e.iter().map(|v| 4.0 * U * v + TINY).collect();
            let sum: f64 = e.iter().sum();
            let sum_bound: f64 = bound.iter().sum::<f64>() + k as f64 * U * sum;
            let mut want = e;
            want.push(sum);
            bound.push(sum_bound);
            // `lo` is the residual of the f64 sum below its f32 rounding.
            want.push(0.0);
            bound.push(sum * U + sum_bound);
            (want, bound)
        }
        ElemKind::SoftMaxRow => {
            // p_j = e_j / sum, e_j = exp(x_j - max) with the subtraction in f32. Each
            // e_j within (4 + 1.25 |x_j - max|) u (the CPU's and HIP's expf within 4u,
            // CUDA's `ex2(RN(d * log2 e))` losing 1.25 |d| u more to the rounded product
            // and log2 e), or flushed by 2^-126 at most (CUDA); the sum (at least 1: the
            // maximum's own term) within those plus k roundings; `1/sum` and the product
            // one rounding each.
            const MIN_NORMAL: f64 = 1.1754944e-38;
            let scores = crate::cases::soft_max_row_scores(rows[0]);
            let x = &scores[..];
            let max = x.iter().copied().fold(f32::NEG_INFINITY, |a, b| if a > b { a } else { b });
            let d: Vec<f64> = x.iter().map(|&v| f64::from(v - max)).collect();
            let e: Vec<f64> = d.iter().map(|v| v.exp()).collect();
            let rel_e: Vec<f64> = d
                .iter()
                .map(|v| if v.is_finite() { (4.0 + 1.25 * v.abs()) * U } else { 0.0 })
                .collect();
            let sum: f64 = e.iter().sum();
            let sum_err: f64 = e.iter().zip(&rel_e).map(|(a, r)| a * r + MIN_NORMAL).sum::<f64>()
                + k as f64 * U * sum;
            let rel_sum = sum_err / sum;
            let want: Vec<f64> = e.iter().map(|v| v / sum).collect();
            let bound = want
                .iter()
                .zip(&rel_e)
                .map(|(p, r)| p * (r + rel_sum + 3.0 * U) * 1.001 + MIN_NORMAL + TINY)
                .collect();
            (want, bound)
        }
        ElemKind::SwiGlu => {
            let (x, g) = (rows[0], rows[1]);
            let want: Vec<f64> = x
                .iter()
                .zip(g)
                .map(|(&a, &b)| f64::from(a) / (1.0 + (-f64::from(a)).exp()) * f64::from(b))
                .collect();
            let bound = x
                .iter()
                .zip(&want)
                .map(|(&a, w)| {
                    if a < -87.0 {
                        w.abs() + TINY
                    } else {
                        (8.0 + f64::from(-a).max(0.0)) * U * w.abs() + TINY
                    }
                })
                .collect();
            (want, bound)
        }
        ElemKind::DotF32 | ElemKind::SgemmDot => {
            let (x, y) = (rows[0], rows[1]);
            let dot: f64 = x.iter().zip(y).map(|(&a, &b)| f64::from(a) * f64::from(b)).sum();
            let abs: f64 =
                x.iter().zip(y).map(|(&a, &b)| (f64::from(a) * f64::from(b)).abs()).sum();
            (vec![dot], vec![(k as f64 + 2.0) * U * abs + TINY])
        }
        ElemKind::MmvfF32 | ElemKind::MmvfF16 => {
            // Every term passes through at most (its thread's pairs) x 2 + 13 roundings
            // (within k + 2 for these lengths) in f32; the F16 accumulator rounds the
            // activation and each partial to F16 (relative 2^-11 each, a thread's chain of
            // c = ceil(k / 2B) pairs) or, in F16's subnormal range, by 2^-25 absolutely
            // per operation, then joins the f32 reduction.
            let (x, y) = crate::cases::mmvf_operands(kind, rows);
            let dot: f64 = x.iter().zip(&y).map(|(&a, &b)| f64::from(a) * f64::from(b)).sum();
            let abs: f64 =
                x.iter().zip(&y).map(|(&a, &b)| (f64::from(a) * f64::from(b)).abs()).sum();
            let f32_bound = (k as f64 + 2.0) * U * abs + TINY;
            let bound = if kind == ElemKind::MmvfF32 {
                f32_bound
            } else {
                const U16: f64 = 1.0 / 2048.0;
                let b = flavour.mmvf().map_or(32, |c| c.block_size(k));
                let c = (k / 2).div_ceil(b) as i32;
                let sub: f64 = x.iter().map(|&a| f64::from(a).abs()).sum::<f64>() + k as f64;
                ((1.0 + U16).powi(c + 1) - 1.0) * abs * 1.001 + f32_bound + sub * 2f64.powi(-25)
            };
            (vec![dot], vec![bound])
        }
        ElemKind::RmsNorm => {
            let (x, w) = (rows[0], rows[1]);
            let mean = x.iter().map(|&v| f64::from(v) * f64::from(v)).sum::<f64>() / k as f64;
            let scale = 1.0 / (mean + f64::from(1e-6f32)).sqrt();
            let want: Vec<f64> =
                x.iter().zip(w).map(|(&a, &b)| f64::from(a) * scale * f64::from(b)).collect();
            let ulps = 3.0 + (k.div_ceil(256) as f64 + 14.0) / 2.0;
            let bound = want.iter().map(|v| ulps * U * v.abs() + TINY).collect();
            (want, bound)
        }
        ElemKind::Rope => {
            let x = rows[0];
            let cache = flavour.rope_cache(rope_pos(case), k, 1e6);
            let half = k / 2;
            let (mut want, mut bound) = (vec![0.0; k], vec![0.0; k]);
            for (i, [c, s]) in cache.iter().map(|p| [f64::from(p[0]), f64::from(p[1])]).enumerate()
            {
                let (x0, x1) = (f64::from(x[i]), f64::from(x[i + half]));
                want[i] = x0 * c - x1 * s;
                want[i + half] = x0 * s + x1 * c;
                bound[i] = 3.0 * U * ((x0 * c).abs() + (x1 * s).abs()) + TINY;
                bound[i + half] = 3.0 * U * ((x0 * s).abs() + (x1 * c).abs()) + TINY;
            }
            (want, bound)
        }
        ElemKind::AttnFaChunk
        | ElemKind::AttnFaSplit2
        | ElemKind::AttnFaSplit4
        | ElemKind::AttnFaTiled
        | ElemKind::AttnF32
        | ElemKind::AttnF16 => attention_exact(kind, case, rows),
    }
}

/// The exact answer of an attention case and a rigorous bound on any flavour's result.
/// K and V are taken as the cache holds them (rounded to F16 for an F16 cache or flash
/// attention); per query row at position p and head h, the scores `s_j = q·k_j / sqrt(d)`
/// over cells j <= p, the weights `w_j = exp(s_j - max)`, `S = sum w_j`, and the output
/// `sum w_j v_j / S`, all in f64. The bound adds, per output element:
/// - the scores' errors: each score within `delta_j = |q|·|k_j| / sqrt(d) * (2^-10 + (d +
///   4) u)` (the query rounded to F16 where the path does, the products and sums in f32),
///   which moves each weight by a factor within `exp(+-2 delta)` after normalization, so
///   the output by at most `(exp(2 delta_max) - 1) * 2 * sum w_j |v_j| / S`;
/// - the accumulation's errors: the F16 accumulator (or F16 weights) rounds each step's
///   partial sum, relative 2^-11, twice a step where a new maximum rescales it; every
///   partial sum of a chunk is at most `B_t = sum_{i <= t} w_i |v_i|` in the final scale,
///   so `2 * 2^-11 * sum_t B_t / S`, plus 2^-24 per cell for F16's subnormal range, plus
///   16u of `sum w_j |v_j| / S` for the exponentials and the final division.
fn attention_exact(kind: ElemKind, case: &Case, rows: &[&[f32]]) -> (Vec<f64>, Vec<f64>) {
    const U: f64 = 1.0 / (1u64 << 24) as f64;
    const U16: f64 = 1.0 / 2048.0;
    let (nh, nkv, hd) = crate::cases::ATTN_GEOMETRY;
    let attn = kind.attention().expect("an attention kind");
    let f16 = attn.kv == tiercheck_model::KvType::F16 || attn.fa == tiercheck_model::FlashAttn::On;
    let stored = |x: f32| -> f64 {
        if f16 {
            f64::from(tiercheck_core::fp16::f16_bits_to_f32(tiercheck_core::fp16::f32_to_f16_bits(
                x,
            )))
        } else {
            f64::from(x)
        }
    };
    let (k, v, q) = (rows[0], rows[1], rows[2]);
    let cells = case.k;
    let kd = nkv * hd;
    let scale = 1.0 / (hd as f64).sqrt();
    let (mut want, mut bound) = (Vec::new(), Vec::new());
    for i in 0..case.m {
        let p = cells - case.m + i;
        for h in 0..nh {
            let g = h / (nh / nkv);
            let qh = &q[(i * nh + h) * hd..(i * nh + h + 1) * hd];
            let kj = |j: usize| (0..hd).map(move |d| stored(k[j * kd + g * hd + d]));
            let vj = |j: usize, d: usize| stored(v[j * kd + g * hd + d]);
            let s: Vec<f64> = (0..=p)
                .map(|j| kj(j).zip(qh).map(|(a, &b)| a * f64::from(b)).sum::<f64>() * scale)
                .collect();
            let delta = (0..=p)
                .map(|j| {
                    let mag: f64 = kj(j).zip(qh).map(|(a, &b)| (a * f64::from(b)).abs()).sum();
                    mag * scale * (2.0 * U16 + (hd as f64 + 4.0) * U)
                })
                .fold(0.0f64, f64::max);
            let max = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let w: Vec<f64> = s.iter().map(|x| (x - max).exp()).collect();
            let sum: f64 = w.iter().sum();
            for d in 0..hd {
                let out: f64 = (0..=p).map(|j| w[j] * vj(j, d)).sum::<f64>() / sum;
                let abs: f64 = (0..=p).map(|j| w[j] * vj(j, d).abs()).sum::<f64>() / sum;
                let mut b_t = 0.0f64;
                let mut partials = 0.0f64;
                for (j, wj) in w.iter().enumerate() {
                    b_t += wj * vj(j, d).abs();
                    partials += b_t;
                }
                let b = ((2.0 * delta).exp() - 1.0) * 2.0 * abs
                    + 2.0 * U16 * partials / sum
                    + (p + 1) as f64 * 2f64.powi(-24)
                    + 16.0 * U * abs;
                want.push(out);
                bound.push(b * 1.001 + 1e-30);
            }
        }
    }
    (want, bound)
}
