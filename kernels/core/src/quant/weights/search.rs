//! ggml's iterative scale searches shared by the K-quant quantizers (`ggml-quants.c`),
//! every float operation in the C source's order, never fused.
//!
//! `make_qkx2_quants(n, nmax, x, weights, L, &the_min, Laux, rmin, rdelta, nstep,
//! use_mad)`: min = min(0, min x), max = max x (equal: all levels 0, scale 0);
//! the first fit is iscale = nmax/(max - min), scale = 1/iscale, levels
//! clamp(nearest_int(iscale*(x - min)), 0, nmax) and its weighted squared error
//! (diff = scale*l + min - x; |diff| instead of diff^2 with `use_mad`). Then for is = 0..=nstep, iscale = (rmin + rdelta*is + nmax)
//! / (max - min) gives candidate levels and a weighted least-squares fit (sums of w*l,
//! w*l*l, w*l*x in index order; det = sum_w*sum_l2 - sum_l*sum_l; only det > 0 counts;
//! a positive min is set to 0 with scale = sum_xl/sum_l2); a candidate replaces the best
//! only when its error is strictly smaller. Returns (scale, -min) and the levels.

use crate::blocks::q4_k::{scale_min_k4, K_SCALE_SIZE};
use crate::blocks::{half, to_half};
use crate::quant::round::nearest_int;

/// The result of `make_qkx2_quants`: scale and `the_min` (= -min, so >= 0).
pub(super) struct Fit {
    pub(super) scale: f32,
    pub(super) the_min: f32,
}

/// `make_qkx2_quants` for n = `x.len()` values (at most 32): `use_mad` measures the error
/// as the weighted sum of |diff| instead of diff^2.
#[allow(clippy::too_many_arguments)]
pub(super) fn make_qkx2_quants(
    nmax: i32,
    x: &[f32],
    weights: &[f32],
    l_out: &mut [u8],
    rmin: f32,
    rdelta: f32,
    nstep: i32,
    use_mad: bool,
) -> Fit {
    let n = x.len();
    debug_assert!(n <= 32 && weights.len() == n && l_out.len() == n);
    let err = |diff: f32| if use_mad { diff.abs() } else { diff * diff };
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
        best_error += weights[i] * err(diff);
    }
    if nstep < 1 {
        return Fit { scale, the_min: -min };
    }
    let mut laux = [0u8; 32];
    let laux = &mut laux[..n];
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
                cur_error += weights[i] * err(diff);
            }
            if cur_error < best_error {
                l_out.copy_from_slice(laux);
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    Fit { scale, the_min: -min }
}

/// A K-quant superblock with 6-bit scales and mins (q4_K, q5_K): the packed scales, `d`,
/// `dmin` and every sub-block's levels, before the quants are packed.
pub(super) struct SuperblockFit {
    pub(super) d: [u8; 2],
    pub(super) dmin: [u8; 2],
    pub(super) scales: [u8; K_SCALE_SIZE],
    pub(super) levels: [[u8; 32]; 8],
}

/// The scales, mins and levels `quantize_row_q4_K_ref` and `quantize_row_q5_K_ref` give one
/// superblock `xs` (256 values), with `make_qkx2_quants(nmax, rmin, rdelta, nstep)`:
/// 1. per sub-block, weights av_x + |x| with av_x = sqrtf(sum x^2 / 32) (index order), and
///    the search's (scale, -min, levels);
/// 2. the scales and mins to 6 bits against their maxima: `(uint8_t)nearest_int(63/max *
///    v)` capped at 63 (the int is truncated to 8 bits first), packed as
///    `get_scale_min_k4` reads them; d = f16(max_scale/63), dmin = f16(max_min/63);
/// 3. each sub-block's levels again from the stored d*sc and dmin*m:
///    clamp(nearest_int((x + dm)/d), 0, nmax), except a sub-block whose d*sc is 0, which
///    keeps step 1's.
pub(super) fn fit_scales_mins(
    xs: &[f32],
    nmax: i32,
    rmin: f32,
    rdelta: f32,
    nstep: i32,
) -> SuperblockFit {
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
        let fit = make_qkx2_quants(nmax, xj, &weights, &mut levels[j], rmin, rdelta, nstep, false);
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
    let mut packed = [0u8; K_SCALE_SIZE];
    for j in 0..8 {
        let ls = (nearest_int(inv_scale * scales[j]) as u8).min(63);
        let lm = (nearest_int(inv_min * mins[j]) as u8).min(63);
        if j < 4 {
            packed[j] = ls;
            packed[j + 4] = lm;
        } else {
            packed[j + 4] = (ls & 0xF) | ((lm & 0xF) << 4);
            packed[j - 4] |= (ls >> 4) << 6;
            packed[j] |= (lm >> 4) << 6;
        }
    }
    let d = to_half(max_scale / 63.0);
    let dmin = to_half(max_min / 63.0);

    for j in 0..8 {
        let (sc, m) = scale_min_k4(j, &packed);
        let dj = half(d) * sc as f32;
        if dj == 0.0 {
            continue;
        }
        let dm = half(dmin) * m as f32;
        for ii in 0..32 {
            let l = nearest_int((xs[32 * j + ii] + dm) / dj);
            levels[j][ii] = l.clamp(0, nmax) as u8;
        }
    }
    SuperblockFit { d, dmin, scales: packed, levels }
}
