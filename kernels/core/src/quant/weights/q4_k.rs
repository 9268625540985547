//! `quantize_row_q4_K_ref` (`ggml-quants.c`), through the search shared with q5_K
//! ([`super::search::fit_scales_mins`]).
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

use crate::blocks::{BlockQ4K, QK_K};

use super::search::fit_scales_mins;

pub(super) fn quantize(x: &[f32], out: &mut [BlockQ4K]) {
    for (xs, y) in x.chunks_exact(QK_K).zip(out.iter_mut()) {
        let fit = fit_scales_mins(xs, 15, -1.0, 0.1, 20);
        (y.d, y.dmin, y.scales) = (fit.d, fit.dmin, fit.scales);
        for c in 0..4 {
            for l in 0..32 {
                let lo = fit.levels[2 * c][l];
                let hi = fit.levels[2 * c + 1][l];
                y.qs[32 * c + l] = lo | (hi << 4);
            }
        }
    }
}
