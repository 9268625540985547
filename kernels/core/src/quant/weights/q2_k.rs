//! `quantize_row_q2_K_ref` (`ggml-quants.c`). Per superblock:
//! 1. per 16-value sub-block, weights |x| and `make_qkx2_quants(16, nmax = 3, rmin = -0.5,
//!    rdelta = 0.1, nstep = 15, use_mad = true)`: (scale, -min, levels);
//! 2. when the largest scale is positive, each scale's code is `nearest_int(15/max_scale *
//!    scale)` stored as a byte (low nibble) and d = f16(max_scale/15), else codes 0 and
//!    d = 0; likewise the mins' codes `| code << 4` (the byte keeps the low 8 bits) and
//!    dmin;
//! 3. levels again from the stored d*sc and dmin*m: clamp(nearest_int((x + dm)/d), 0, 3),
//!    except a sub-block whose d*sc is 0, which keeps step 1's;
//! 4. value 128h + 32j + l goes to bits 2j of `qs[32h + l]`.

use crate::blocks::{half, to_half, BlockQ2K, QK_K};
use crate::quant::round::nearest_int;

use super::search::make_qkx2_quants;

/// Pack 256 two-bit levels as q2_K and q3_K store their low bits.
pub(super) fn pack_crumbs(levels: &[u8; QK_K]) -> [u8; QK_K / 4] {
    let mut qs = [0u8; QK_K / 4];
    for h in 0..2 {
        for l in 0..32 {
            let at = |j: usize| levels[128 * h + 32 * j + l];
            qs[32 * h + l] = at(0) | (at(1) << 2) | (at(2) << 4) | (at(3) << 6);
        }
    }
    qs
}

pub(super) fn quantize(x: &[f32], out: &mut [BlockQ2K]) {
    for (xs, y) in x.chunks_exact(QK_K).zip(out.iter_mut()) {
        let mut levels = [0u8; QK_K];
        let mut scales = [0.0f32; 16];
        let mut mins = [0.0f32; 16];
        let (mut max_scale, mut max_min) = (0.0f32, 0.0f32);
        for j in 0..16 {
            let xj = &xs[16 * j..16 * j + 16];
            let mut weights = [0.0f32; 16];
            for (w, &v) in weights.iter_mut().zip(xj) {
                *w = v.abs();
            }
            let lj = &mut levels[16 * j..16 * j + 16];
            let fit = make_qkx2_quants(3, xj, &weights, lj, -0.5, 0.1, 15, true);
            scales[j] = fit.scale;
            mins[j] = fit.the_min;
            if fit.scale > max_scale {
                max_scale = fit.scale;
            }
            if fit.the_min > max_min {
                max_min = fit.the_min;
            }
        }
        if max_scale > 0.0 {
            let iscale = 15.0 / max_scale;
            for j in 0..16 {
                y.scales[j] = nearest_int(iscale * scales[j]) as u8;
            }
            y.d = to_half(max_scale / 15.0);
        } else {
            y.scales = [0; 16];
            y.d = to_half(0.0);
        }
        if max_min > 0.0 {
            let iscale = 15.0 / max_min;
            for j in 0..16 {
                y.scales[j] |= (nearest_int(iscale * mins[j]) << 4) as u8;
            }
            y.dmin = to_half(max_min / 15.0);
        } else {
            y.dmin = to_half(0.0);
        }
        for j in 0..16 {
            let d = half(y.d) * (y.scales[j] & 0xF) as f32;
            if d == 0.0 {
                continue;
            }
            let dm = half(y.dmin) * (y.scales[j] >> 4) as f32;
            for ii in 0..16 {
                let l = nearest_int((xs[16 * j + ii] + dm) / d);
                levels[16 * j + ii] = l.clamp(0, 3) as u8;
            }
        }
        y.qs = pack_crumbs(&levels);
    }
}
