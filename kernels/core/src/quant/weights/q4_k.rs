//! `quantize_row_q4_K_ref` and its search `make_qkx2_quants` (`ggml-quants.c`).
//!
//! Per superblock, per 32-value sub-block j:
//! 1. weights w_l = av_x + |x_l| with av_x = sqrtf(sum x^2 / 32) (sum in index order);
//! 2. `make_qkx2_quants(32, nmax = 15, rmin = -1, rdelta = 0.1, nstep = 20, mad = false)`
//!    fits scale and min by weighted least squares over 21 candidate inverse scales and
//!    keeps the best (strictly smaller weighted squared error); it returns (scale,
//!    -min) and the levels L;
//! 3. the eight scales and mins are quantized to 6 bits against their maxima
//!    (ls = min(63, nearest_int(63/max_scale * scale))), d = f16(max_scale/63),
//!    dmin = f16(max_min/63);
//! 4. the levels are recomputed from the stored (rounded) d*sc and dmin*m:
//!    l = clamp(nearest_int((x + dm)/d), 0, 15); a sub-block whose d*sc is 0 keeps the
//!    levels from step 2.
//!
//! Every operation is binary32 in C evaluation order, never fused.

use crate::blocks::q4_k::scale_min_k4;
use crate::blocks::{half, to_half, BlockQ4K, QK_K};
use crate::quant::round::nearest_int;

/// The result of `make_qkx2_quants`: scale and `the_min` (= -min, so >= 0).
struct Fit {
    scale: f32,
    the_min: f32,
}

/// `make_qkx2_quants` for n = 32, with `use_mad = false` (squared error).
#[allow(clippy::too_many_arguments)]
fn make_qkx2_quants(
    nmax: i32,
    x: &[f32; 32],
    weights: &[f32; 32],
    l_out: &mut [u8; 32],
    rmin: f32,
    rdelta: f32,
    nstep: i32,
) -> Fit {
    let n = 32;
    let mut min = x[0];
    let mut max = x[0];
    let mut sum_w = weights[0];
    let mut sum_x = sum_w * x[0];
    for i in 1..n {
        if x[i] < min {
            min = x[i];
        }
        if x[i] > max {
            max = x[i];
        }
        let w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if min > 0.0 {
        min = 0.0;
    }
    if max == min {
        l_out.fill(0);
        return Fit { scale: 0.0, the_min: -min };
    }
    let mut iscale = nmax as f32 / (max - min);
    let mut scale = 1.0 / iscale;
    let mut best_error = 0.0f32;
    for i in 0..n {
        let l = nearest_int(iscale * (x[i] - min));
        let l = l.clamp(0, nmax);
        l_out[i] = l as u8;
        let diff = scale * l_out[i] as f32 + min - x[i];
        let diff = diff * diff;
        best_error += weights[i] * diff;
    }
    if nstep < 1 {
        return Fit { scale, the_min: -min };
    }
    let mut laux = [0u8; 32];
    for is in 0..=nstep {
        iscale = (rmin + rdelta * is as f32 + nmax as f32) / (max - min);
        let (mut sum_l, mut sum_l2, mut sum_xl) = (0.0f32, 0.0f32, 0.0f32);
        for i in 0..n {
            let l = nearest_int(iscale * (x[i] - min));
            let l = l.clamp(0, nmax);
            laux[i] = l as u8;
            let w = weights[i];
            let lf = l as f32;
            sum_l += w * lf;
            sum_l2 += w * lf * lf;
            sum_xl += w * lf * x[i];
        }
        let det = sum_w * sum_l2 - sum_l * sum_l;
        if det > 0.0 {
            let mut this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
            let mut this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
            if this_min > 0.0 {
                this_min = 0.0;
                this_scale = sum_xl / sum_l2;
            }
            let mut cur_error = 0.0f32;
            for i in 0..n {
                let diff = this_scale * laux[i] as f32 + this_min - x[i];
                let diff = diff * diff;
                cur_error += weights[i] * diff;
            }
            if cur_error < best_error {
                *l_out = laux;
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    Fit { scale, the_min: -min }
}

pub(super) fn quantize(x: &[f32], out: &mut [BlockQ4K]) {
    for (xs, y) in x.chunks_exact(QK_K).zip(out.iter_mut()) {
        let mut levels = [[0u8; 32]; 8];
        let mut scales = [0.0f32; 8];
        let mut mins = [0.0f32; 8];
        let mut max_scale = 0.0f32;
        let mut max_min = 0.0f32;
        for j in 0..8 {
            let xj: &[f32; 32] = xs[32 * j..32 * j + 32].try_into().expect("32 values");
            let mut sum_x2 = 0.0f32;
            for &v in xj {
                sum_x2 += v * v;
            }
            let av_x = (sum_x2 / 32.0).sqrt();
            let mut weights = [0.0f32; 32];
            for (w, &v) in weights.iter_mut().zip(xj) {
                *w = av_x + v.abs();
            }
            let fit = make_qkx2_quants(15, xj, &weights, &mut levels[j], -1.0, 0.1, 20);
            scales[j] = fit.scale;
            mins[j] = fit.the_min;
            if fit.scale > max_scale {
                max_scale = fit.scale;
            }
            if fit.the_min > max_min {
                max_min = fit.the_min;
            }
        }

        let inv_scale = if max_scale > 0.0 { 63.0 / max_scale } else { 0.0 };
        let inv_min = if max_min > 0.0 { 63.0 / max_min } else { 0.0 };
        y.scales = [0; 12];
        for j in 0..8 {
            // uint8_t ls = nearest_int(...): the int is truncated to 8 bits first.
            let ls = (nearest_int(inv_scale * scales[j]) as u8).min(63);
            let lm = (nearest_int(inv_min * mins[j]) as u8).min(63);
            if j < 4 {
                y.scales[j] = ls;
                y.scales[j + 4] = lm;
            } else {
                y.scales[j + 4] = (ls & 0xF) | ((lm & 0xF) << 4);
                y.scales[j - 4] |= (ls >> 4) << 6;
                y.scales[j] |= (lm >> 4) << 6;
            }
        }
        y.d = to_half(max_scale / 63.0);
        y.dmin = to_half(max_min / 63.0);

        for j in 0..8 {
            let (sc, m) = scale_min_k4(j, &y.scales);
            let d = half(y.d) * sc as f32;
            if d == 0.0 {
                continue;
            }
            let dm = half(y.dmin) * m as f32;
            for ii in 0..32 {
                let l = nearest_int((xs[32 * j + ii] + dm) / d);
                levels[j][ii] = l.clamp(0, 15) as u8;
            }
        }

        for c in 0..4 {
            for l in 0..32 {
                let lo = levels[2 * c][l];
                let hi = levels[2 * c + 1][l];
                y.qs[32 * c + l] = lo | (hi << 4);
            }
        }
    }
}
