//! `quantize_row_q5_K_ref` (`ggml-quants.c`): q4_K's fit ([`super::search::fit_scales_mins`])
//! with `make_qkx2_quants(nmax = 31, rmin = -0.5, rdelta = 0.1, nstep = 15)` and levels
//! clamped to 0..=31; a level above 15 stores `l - 16` in its nibble and sets its bit of
//! `qh` (bit 2c for value 64c + l, bit 2c + 1 for value 64c + 32 + l).

use crate::blocks::{BlockQ5K, QK_K};

use super::search::fit_scales_mins;

pub(super) fn quantize(x: &[f32], out: &mut [BlockQ5K]) {
    for (xs, y) in x.chunks_exact(QK_K).zip(out.iter_mut()) {
        let fit = fit_scales_mins(xs, 31, -0.5, 0.1, 15);
        (y.d, y.dmin, y.scales) = (fit.d, fit.dmin, fit.scales);
        y.qh = [0; QK_K / 8];
        for c in 0..4 {
            for l in 0..32 {
                let (mut lo, mut hi) = (fit.levels[2 * c][l], fit.levels[2 * c + 1][l]);
                if lo > 15 {
                    lo -= 16;
                    y.qh[l] |= 1 << (2 * c);
                }
                if hi > 15 {
                    hi -= 16;
                    y.qh[l] |= 2 << (2 * c);
                }
                y.qs[32 * c + l] = lo | (hi << 4);
            }
        }
    }
}
