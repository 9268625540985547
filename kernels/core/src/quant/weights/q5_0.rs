//! `quantize_row_q5_0_ref`: per 32 values, `max` = the signed value of largest magnitude
//! (first occurrence wins), d = max / -16, id = d ? 1/d : 0; each quant is
//! min(31, (int8_t)(x*id + 16.5)) (truncation toward zero); its low four bits go to the
//! nibbles as q4_0's, its fifth bit to bit j of `qh` for element j.

use crate::blocks::{to_half, BlockQ5_0, QK};
use crate::quant::round::f32_to_i8_c;

use super::signed_absmax;

/// Nibbles and fifth bits of 32 five-bit quants (q5_0 and q5_1 alike).
pub(super) fn pack5(q: &[u8; QK]) -> ([u8; QK / 2], [u8; 4]) {
    let mut qs = [0u8; QK / 2];
    let mut qh = 0u32;
    for j in 0..QK / 2 {
        let (q0, q1) = (q[j], q[j + QK / 2]);
        qs[j] = (q0 & 0x0F) | ((q1 & 0x0F) << 4);
        qh |= (((q0 & 0x10) >> 4) as u32) << j;
        qh |= (((q1 & 0x10) >> 4) as u32) << (j + QK / 2);
    }
    (qs, qh.to_le_bytes())
}

pub(super) fn quantize(x: &[f32], out: &mut [BlockQ5_0]) {
    for (xb, y) in x.chunks_exact(QK).zip(out.iter_mut()) {
        let (max, _) = signed_absmax(xb);
        let d = max / -16.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        y.d = to_half(d);
        let mut q = [0u8; QK];
        for (q, &v) in q.iter_mut().zip(xb) {
            *q = (f32_to_i8_c(v * id + 16.5) as i32).min(31) as u8;
        }
        (y.qs, y.qh) = pack5(&q);
    }
}
