//! `quantize_row_q6_K_ref` and its search `make_qx_quants` (`ggml-quants.c`).
//!
//! Per superblock, per 16-value sub-block: `make_qx_quants(16, nmax = 32, rmse_type = 1)`
//! picks iscale = -32/max (max = signed value of largest magnitude), computes the
//! least-squares scale with weights x^2, then tries iscale = -(32 + 0.1*is)/max for
//! is in -9..=9 (is != 0) and keeps a candidate when sumlx^2 > best*suml2. The
//! sixteen scales are quantized to i8 against the one of largest magnitude
//! (iscale = -128/max_scale, d = f16(1/iscale)), and the levels recomputed as
//! clamp(nearest_int(x/(d*sc)), -32, 31) + 32; a sub-block whose d*sc is 0 keeps the
//! levels of the search (0 for an all-zero sub-block). A superblock whose largest
//! |scale| is below 1e-15 is all zero bytes.
//!
//! Every operation is binary32 in C evaluation order, never fused.

use crate::blocks::{half, to_half, BlockQ6K, QK_K};
use crate::quant::round::nearest_int;

use super::{signed_absmax, GROUP_MAX_EPS};

/// `make_qx_quants` for n = 16, nmax = 32, rmse_type = 1, no importance weights.
fn make_qx_quants(x: &[f32], l_out: &mut [i8]) -> f32 {
    let nmax = 32i32;
    let (max, amax) = signed_absmax(x);
    if amax < GROUP_MAX_EPS {
        l_out.fill(0);
        return 0.0;
    }
    let mut iscale = -(nmax as f32) / max;
    let mut sumlx = 0.0f32;
    let mut suml2 = 0.0f32;
    for (i, &v) in x.iter().enumerate() {
        let l = nearest_int(iscale * v).clamp(-nmax, nmax - 1);
        l_out[i] = (l + nmax) as i8;
        let w = v * v;
        let lf = l as f32;
        sumlx += w * v * lf;
        suml2 += w * lf * lf;
    }
    let mut scale = if suml2 != 0.0 { sumlx / suml2 } else { 0.0 };
    let mut best = scale * sumlx;
    for is in -9i32..=9 {
        if is == 0 {
            continue;
        }
        iscale = -(nmax as f32 + 0.1 * is as f32) / max;
        sumlx = 0.0;
        suml2 = 0.0;
        for &v in x {
            let l = nearest_int(iscale * v).clamp(-nmax, nmax - 1);
            let w = v * v;
            let lf = l as f32;
            sumlx += w * v * lf;
            suml2 += w * lf * lf;
        }
        if suml2 > 0.0 && sumlx * sumlx > best * suml2 {
            for (i, &v) in x.iter().enumerate() {
                let l = nearest_int(iscale * v);
                l_out[i] = (nmax + l.clamp(-nmax, nmax - 1)) as i8;
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    scale
}

pub(super) fn quantize(x: &[f32], out: &mut [BlockQ6K]) {
    for (xs, y) in x.chunks_exact(QK_K).zip(out.iter_mut()) {
        let mut levels = [0i8; QK_K];
        let mut scales = [0.0f32; 16];
        let mut max_scale = 0.0f32;
        let mut max_abs_scale = 0.0f32;
        for ib in 0..16 {
            let scale =
                make_qx_quants(&xs[16 * ib..16 * ib + 16], &mut levels[16 * ib..16 * ib + 16]);
            scales[ib] = scale;
            let abs_scale = scale.abs();
            if abs_scale > max_abs_scale {
                max_abs_scale = abs_scale;
                max_scale = scale;
            }
        }
        if max_abs_scale < GROUP_MAX_EPS {
            *y = bytemuck::Zeroable::zeroed();
            y.d = to_half(0.0);
            continue;
        }
        let iscale = -128.0f32 / max_scale;
        y.d = to_half(1.0 / iscale);
        for ib in 0..16 {
            y.scales[ib] = nearest_int(iscale * scales[ib]).min(127) as i8 as u8;
        }
        for j in 0..16 {
            let d = half(y.d) * (y.scales[j] as i8) as f32;
            if d == 0.0 {
                continue;
            }
            for ii in 0..16 {
                let l = nearest_int(xs[16 * j + ii] / d).clamp(-32, 31);
                levels[16 * j + ii] = (l + 32) as i8;
            }
        }
        for h in 0..2 {
            let lv = &levels[128 * h..128 * h + 128];
            let ql = &mut y.ql[64 * h..64 * h + 64];
            for l in 0..32 {
                let q1 = lv[l] as u8 & 0xF;
                let q2 = lv[l + 32] as u8 & 0xF;
                let q3 = lv[l + 64] as u8 & 0xF;
                let q4 = lv[l + 96] as u8 & 0xF;
                ql[l] = q1 | (q3 << 4);
                ql[l + 32] = q2 | (q4 << 4);
            }
            let qh = &mut y.qh[32 * h..32 * h + 32];
            for l in 0..32 {
                qh[l] = ((lv[l] as u8) >> 4)
                    | (((lv[l + 32] as u8) >> 4) << 2)
                    | (((lv[l + 64] as u8) >> 4) << 4)
                    | (((lv[l + 96] as u8) >> 4) << 6);
            }
        }
    }
}
