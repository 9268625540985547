//! `quantize_row_q4_1_ref`: per 32 values, min and max (starting from +/-FLT_MAX, strict
//! comparisons), d = (max - min)/15, id = d ? 1/d : 0, m = min; each quant is
//! min(15, (int8_t)((x - min)*id + 0.5)): truncation toward zero after adding a half.

use crate::blocks::{to_half, BlockQ4_1, QK};
use crate::quant::round::f32_to_i8_c;

/// min and max of a block as the reference quantizers of q4_1 and q5_1 find them.
pub(super) fn min_max(xb: &[f32]) -> (f32, f32) {
    let (mut min, mut max) = (f32::MAX, -f32::MAX);
    for &v in xb {
        if v < min {
            min = v;
        }
        if v > max {
            max = v;
        }
    }
    (min, max)
}

pub(super) fn quantize(x: &[f32], out: &mut [BlockQ4_1]) {
    for (xb, y) in x.chunks_exact(QK).zip(out.iter_mut()) {
        let (min, max) = min_max(xb);
        let d = (max - min) / 15.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        y.d = to_half(d);
        y.m = to_half(min);
        for j in 0..QK / 2 {
            let x0 = (xb[j] - min) * id;
            let x1 = (xb[QK / 2 + j] - min) * id;
            let xi0 = (f32_to_i8_c(x0 + 0.5) as i32).min(15) as u8;
            let xi1 = (f32_to_i8_c(x1 + 0.5) as i32).min(15) as u8;
            y.qs[j] = xi0 | (xi1 << 4);
        }
    }
}
