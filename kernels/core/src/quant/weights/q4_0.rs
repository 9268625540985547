//! `quantize_row_q4_0_ref`: per 32 values, `max` = the signed value of largest
//! magnitude (first occurrence wins), d = max / -8, id = d ? 1/d : 0, and each quant
//! is min(15, (int8_t)(x*id + 8.5)): truncation toward zero, not rounding.

use crate::blocks::{to_half, BlockQ4_0, QK};
use crate::quant::round::f32_to_i8_c;

use super::signed_absmax;

pub(super) fn quantize(x: &[f32], out: &mut [BlockQ4_0]) {
    for (xb, y) in x.chunks_exact(QK).zip(out.iter_mut()) {
        let (max, _) = signed_absmax(xb);
        let d = max / -8.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        y.d = to_half(d);
        for j in 0..QK / 2 {
            let x0 = xb[j] * id;
            let x1 = xb[QK / 2 + j] * id;
            let xi0 = (f32_to_i8_c(x0 + 8.5) as i32).min(15) as u8;
            let xi1 = (f32_to_i8_c(x1 + 8.5) as i32).min(15) as u8;
            y.qs[j] = xi0 | (xi1 << 4);
        }
    }
}
