//! The exact value of a quantized dot product and a rigorous bound on the float error
//! any lane may make computing it.
//!
//! A lane multiplies weight blocks (integers times f16 scales) by activation blocks
//! (integers times an f16 or f32 scale). The integer parts are exact on every tier;
//! only the float stage differs. We compute here, in f64:
//!
//! - `exact` = sum over elements i of (weight term_i) * a_i, where the weight term is
//!   `d*(q-8)` (q4_0), `d*(q-16)` (q5_0), `d*q` (q8_0), `d*table[q]` (IQ4_NL),
//!   `d*sc*q - dmin*m` (q2_K, q4_K, q5_K), `d*sc*q` (q3_K, q6_K, IQ4_XS with the table
//!   value), and a_i = d_y * q_y. Q4_1 and Q5_1 (`d*q + m`) pair with q8_1, whose
//!   kernels take the min term per block as `m * s_y` with the stored f16 `s_y`: their
//!   exact value is `sum_i d*q_i*a_i + sum_blocks m*s_y`, with the min term's magnitude
//!   counted once per block (Q5_0 with q8_1, on the GPU lanes only, likewise with
//!   `-16 d * s_y`); every factor is exactly representable in f64 and products of
//!   at most 11+11+24 significant bits plus small integers round only in the last bit
//!   of the f64 sum (negligible against f32 rounding);
//! - `magnitude` S = the sum over elements of the absolute values of every product
//!   term above (scale term and min term separately).
//!
//! Error bound. A lane's float stage forms each of its T float terms with at most 3
//! roundings (e.g. `d = x.d * y.d`, `float(isum)` exact below 2^24, `d * float(isum)`,
//! or one more scale product), then adds the T terms in some order or tree. Whatever
//! the order, grouping and fusing (an FMA only removes roundings), the computed sum s
//! satisfies |s - exact| <= gamma_{T+3} * S', where u = 2^-24, gamma_n = n u/(1 - n u)
//! (Higham, Accuracy and Stability, Lemma 3.1 and Section 4.2), and S' is the sum of
//! the absolute values of the lane's terms. A lane's terms are sums of the elementwise
//! products above, so S' <= S. We take T = k/16 + 64, which covers every schedule we
//! reproduce (at most two float terms per 32 values — a scale and a min term — plus
//! horizontal-reduction partials), so the bound holds for all lanes:
//!
//! `bound = gamma_{k/16 + 67} * S`.
//!
//! This bound is loose but rigorous, so a tolerance failure is a real bug: a wrong
//! scale, a dropped block or a mis-decoded nibble moves the result by O(S).
//! Calibration (`cargo run --release -p tiercheck-golden --example calibrate_bounds`, 200
//! seeds x k in {256, 4096, 17408} x the twelve weight types): the `ref` lane's largest
//! |err| is 4.4e-2 of the bound (q5_0; 3.9e-2 q4_0, 1.3e-2 to 2.6e-2 for the others) and
//! at most 5.0e-7 of S (iq4_nl).

use tiercheck_core::blocks::iq4_nl::KVALUES_IQ4NL;
use tiercheck_core::blocks::q2_k::crumb;
use tiercheck_core::blocks::q4_k::scale_min_k4;
use tiercheck_core::blocks::q5_0::quants5;
use tiercheck_core::blocks::{
    BlockIq4Nl, BlockIq4Xs, BlockQ2K, BlockQ3K, BlockQ4K, BlockQ4_0, BlockQ4_1, BlockQ5K,
    BlockQ5_0, BlockQ5_1, BlockQ6K, BlockQ8K, BlockQ8_0, BlockQ8_1,
};
use tiercheck_core::GgmlType;

/// Unit roundoff of binary32.
pub(crate) const U: f64 = 1.0 / (1u64 << 24) as f64;

/// Activation values of one row: (scale per element, integer code per element).
fn activation_terms(fmt: GgmlType, act: &[u8]) -> Option<Vec<(f64, i32)>> {
    let mut out = Vec::new();
    match fmt {
        GgmlType::Q8_K => {
            for b in bytemuck::try_cast_slice::<u8, BlockQ8K>(act).ok()? {
                out.extend(b.qs.iter().map(|&q| (b.d() as f64, q as i8 as i32)));
            }
        }
        GgmlType::Q8_0 => {
            for b in bytemuck::try_cast_slice::<u8, BlockQ8_0>(act).ok()? {
                out.extend(b.qs.iter().map(|&q| (b.d() as f64, q as i8 as i32)));
            }
        }
        GgmlType::Q8_1 => {
            for b in bytemuck::try_cast_slice::<u8, BlockQ8_1>(act).ok()? {
                out.extend(b.qs.iter().map(|&q| (b.d() as f64, q as i8 as i32)));
            }
        }
        _ => return None,
    }
    Some(out)
}

/// Weight terms of one row: per element (scale term factor, min term), so that the
/// weight value is `scale * q - min` with q folded into the scale factor.
fn weight_terms(ty: GgmlType, w: &[u8]) -> Option<Vec<(f64, f64)>> {
    let mut out = Vec::new();
    match ty {
        GgmlType::Q4_0 => {
            for b in bytemuck::try_cast_slice::<u8, BlockQ4_0>(w).ok()? {
                let d = b.d() as f64;
                let mut v = [0.0f64; 32];
                for j in 0..16 {
                    v[j] = d * ((b.qs[j] & 15) as f64 - 8.0);
                    v[j + 16] = d * ((b.qs[j] >> 4) as f64 - 8.0);
                }
                out.extend(v.iter().map(|&x| (x, 0.0)));
            }
        }
        GgmlType::Q8_0 => {
            for b in bytemuck::try_cast_slice::<u8, BlockQ8_0>(w).ok()? {
                let d = b.d() as f64;
                out.extend(b.qs.iter().map(|&q| (d * (q as i8) as f64, 0.0)));
            }
        }
        GgmlType::Q4_K => {
            for b in bytemuck::try_cast_slice::<u8, BlockQ4K>(w).ok()? {
                let (d, dmin) = (b.d() as f64, b.dmin() as f64);
                for c in 0..4 {
                    for half in 0..2 {
                        let (sc, m) = scale_min_k4(2 * c + half, &b.scales);
                        for l in 0..32 {
                            let byte = b.qs[32 * c + l];
                            let q = if half == 0 { byte & 15 } else { byte >> 4 };
                            out.push((d * sc as f64 * q as f64, dmin * m as f64));
                        }
                    }
                }
            }
        }
        GgmlType::Q6_K => {
            for b in bytemuck::try_cast_slice::<u8, BlockQ6K>(w).ok()? {
                let d = b.d() as f64;
                let q = b.quants();
                for (i, &q) in q.iter().enumerate() {
                    out.push((d * b.scale(i / 16) as f64 * q as f64, 0.0));
                }
            }
        }
        GgmlType::Q5_0 => {
            for b in bytemuck::try_cast_slice::<u8, BlockQ5_0>(w).ok()? {
                let d = b.d() as f64;
                out.extend(quants5(&b.qs, b.qh).iter().map(|&q| (d * (q as f64 - 16.0), 0.0)));
            }
        }
        GgmlType::IQ4_NL => {
            for b in bytemuck::try_cast_slice::<u8, BlockIq4Nl>(w).ok()? {
                out.extend(iq4_values(b.d() as f64, &b.qs).map(|v| (v, 0.0)));
            }
        }
        GgmlType::IQ4_XS => {
            for b in bytemuck::try_cast_slice::<u8, BlockIq4Xs>(w).ok()? {
                for s in 0..8 {
                    let dl = b.d() as f64 * (b.scale(s) as f64 - 32.0);
                    out.extend(iq4_values(dl, &b.qs[16 * s..16 * s + 16]).map(|v| (v, 0.0)));
                }
            }
        }
        GgmlType::Q5_K => {
            for b in bytemuck::try_cast_slice::<u8, BlockQ5K>(w).ok()? {
                let (d, dmin) = (b.d() as f64, b.dmin() as f64);
                for i in 0..256 {
                    let (sc, m) = scale_min_k4(i / 32, &b.scales);
                    out.push((d * sc as f64 * b.quant(i) as f64, dmin * m as f64));
                }
            }
        }
        GgmlType::Q3_K => {
            for b in bytemuck::try_cast_slice::<u8, BlockQ3K>(w).ok()? {
                let d = b.d() as f64;
                for i in 0..256 {
                    let sc = b.scale(i / 16) as f64 - 32.0;
                    out.push((d * sc * b.quant(i) as f64, 0.0));
                }
            }
        }
        GgmlType::Q2_K => {
            for b in bytemuck::try_cast_slice::<u8, BlockQ2K>(w).ok()? {
                let (d, dmin) = (b.d() as f64, b.dmin() as f64);
                for i in 0..256 {
                    let code = b.scales[i / 16];
                    let q = crumb(&b.qs, i) as f64;
                    out.push((d * (code & 15) as f64 * q, dmin * (code >> 4) as f64));
                }
            }
        }
        _ => return None,
    }
    Some(out)
}

/// The 32 values `d * table[index]` of 16 bytes of packed IQ4 indices.
fn iq4_values(d: f64, qs: &[u8]) -> impl Iterator<Item = f64> + '_ {
    let lo = qs.iter().map(move |&q| d * KVALUES_IQ4NL[(q & 15) as usize] as f64);
    lo.chain(qs.iter().map(move |&q| d * KVALUES_IQ4NL[(q >> 4) as usize] as f64))
}

/// Per 32-value block of a Q4_1 or Q5_1 row: d and m and the unsigned quants; of a
/// Q5_0 row (which only the GPU lanes pair with q8_1: ggml's MMVQ takes its `- 16` as
/// `-16 d * s_y` per block): d, -16 d and the unsigned quants.
fn offset_blocks(ty: GgmlType, w: &[u8]) -> Option<Vec<(f64, f64, [u8; 32])>> {
    let mut out = Vec::new();
    match ty {
        GgmlType::Q5_0 => {
            for b in bytemuck::try_cast_slice::<u8, BlockQ5_0>(w).ok()? {
                let d = b.d() as f64;
                out.push((d, -16.0 * d, quants5(&b.qs, b.qh)));
            }
        }
        GgmlType::Q4_1 => {
            for b in bytemuck::try_cast_slice::<u8, BlockQ4_1>(w).ok()? {
                let mut q = [0u8; 32];
                for j in 0..16 {
                    (q[j], q[j + 16]) = (b.qs[j] & 15, b.qs[j] >> 4);
                }
                out.push((b.d() as f64, b.m() as f64, q));
            }
        }
        GgmlType::Q5_1 => {
            for b in bytemuck::try_cast_slice::<u8, BlockQ5_1>(w).ok()? {
                out.push((b.d() as f64, b.m() as f64, quants5(&b.qs, b.qh)));
            }
        }
        _ => return None,
    }
    Some(out)
}

/// [`dot_with_bound`] of a Q4_1 or Q5_1 row and a q8_1 row (module doc): the scale terms
/// per element, the min term `m * s_y` per block.
fn offset_dot(w: &[(f64, f64, [u8; 32])], act: &[u8]) -> Option<(f64, f64, f64)> {
    let a = bytemuck::try_cast_slice::<u8, BlockQ8_1>(act).ok()?;
    if a.len() != w.len() {
        return None;
    }
    let (mut exact, mut mag) = (0.0f64, 0.0f64);
    for ((d, m, q), y) in w.iter().zip(a) {
        for (j, &qj) in q.iter().enumerate() {
            let t = d * qj as f64 * y.d() as f64 * (y.qs[j] as i8) as f64;
            exact += t;
            mag += t.abs();
        }
        let t = m * y.s() as f64;
        exact += t;
        mag += t.abs();
    }
    let n = (32 * w.len() / 16 + 67) as f64;
    let gamma = n * U / (1.0 - n * U);
    Some((exact, mag, gamma * mag))
}

/// The extra error of ggml's GPU MMVQ for Q4_1 and Q5_1 (0 for other types): with
/// FAST_FP16_AVAILABLE it forms `d * d_y` and `m * s_y` as f16 products (`__hmul2`),
/// each within 2^-11 of itself or 2^-25 absolutely (half the f16 subnormal step); the
/// first multiplies the block's integer dot, at most `sum |q_j * q_y_j|` in size. Added
/// to [`dot_with_bound`]'s bound for the GPU lanes' activation rules only.
pub fn mmvq_half_product_slack(wtype: GgmlType, w_row: &[u8], act: &[u8]) -> f64 {
    if !matches!(wtype, GgmlType::Q4_1 | GgmlType::Q5_1) {
        return 0.0;
    }
    let (Some(w), Ok(a)) =
        (offset_blocks(wtype, w_row), bytemuck::try_cast_slice::<u8, BlockQ8_1>(act))
    else {
        return 0.0;
    };
    let (half, sub) = (2f64.powi(-11), 2f64.powi(-25));
    let slack: f64 = w
        .iter()
        .zip(a)
        .map(|((d, m, q), y)| {
            let isum: f64 =
                q.iter().zip(&y.qs).map(|(&q, &v)| (q as f64 * (v as i8) as f64).abs()).sum();
            (half * (d * y.d() as f64).abs() + sub) * isum + half * (m * y.s() as f64).abs() + sub
        })
        .sum();
    slack * 1.01
}

/// (exact, magnitude S, bound) for one weight row and one quantized activation row in
/// format `fmt`; `None` for a type pair this module does not model.
pub fn dot_with_bound(
    wtype: GgmlType,
    w_row: &[u8],
    fmt: GgmlType,
    act: &[u8],
) -> Option<(f64, f64, f64)> {
    if fmt == GgmlType::Q8_1 {
        if let Some(blocks) = offset_blocks(wtype, w_row) {
            return offset_dot(&blocks, act);
        }
    }
    let w = weight_terms(wtype, w_row)?;
    let a = activation_terms(fmt, act)?;
    if w.len() != a.len() {
        return None;
    }
    let mut exact = 0.0f64;
    let mut mag = 0.0f64;
    for (&(ws, wm), &(ad, aq)) in w.iter().zip(&a) {
        let av = ad * aq as f64;
        exact += ws * av - wm * av;
        mag += (ws * av).abs() + (wm * av).abs();
    }
    let n = (w.len() / 16 + 67) as f64;
    let gamma = n * U / (1.0 - n * U);
    Some((exact, mag, gamma * mag))
}
