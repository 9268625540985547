//! `quantize_row_q5_1_ref`: per 32 values, min and max as q4_1's, d = (max - min)/31,
//! id = d ? 1/d : 0, m = min; each quant is `(uint8_t)((x - min)*id + 0.5)` (truncation
//! toward zero, no cap), packed as q5_0's.

use crate::blocks::{to_half, BlockQ5_1, QK};

use super::q4_1::min_max;
use super::q5_0::pack5;

pub(super) fn quantize(x: &[f32], out: &mut [BlockQ5_1]) {
    for (xb, y) in x.chunks_exact(QK).zip(out.iter_mut()) {
        let (min, max) = min_max(xb);
        let d = (max - min) / 31.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        y.d = to_half(d);
        y.m = to_half(min);
        let mut q = [0u8; QK];
        for (q, &v) in q.iter_mut().zip(xb) {
            // (uint8_t) of a float: truncation to an int, then its low 8 bits.
            *q = ((v - min) * id + 0.5) as i32 as u8;
        }
        (y.qs, y.qh) = pack5(&q);
    }
}
