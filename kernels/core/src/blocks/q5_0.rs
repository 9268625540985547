//! `block_q5_0`: 32 values, an f16 scale, 5-bit quants with an offset of 16: the low four
//! bits in nibbles as q4_0 lays them out, the fifth bits in a little-endian `u32` `qh`
//! (bit j for element j).
//!
//! Element j (j < 16) is `((qs[j] & 15) | bit j of qh << 4) - 16`, element j + 16 is
//! `((qs[j] >> 4) | bit j + 16 of qh << 4) - 16`; the value is `q * d` (one rounding: the
//! int converts exactly).

use super::{half, QK};

/// `block_q5_0` (22 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockQ5_0 {
    /// Scale (f16 bits, little-endian).
    pub d: [u8; 2],
    /// The fifth bit of every quant (little-endian `u32`).
    pub qh: [u8; 4],
    /// Packed low nibbles.
    pub qs: [u8; QK / 2],
}
const _: () = assert!(core::mem::size_of::<BlockQ5_0>() == 22);

impl BlockQ5_0 {
    /// The scale as f32.
    #[inline]
    pub fn d(&self) -> f32 {
        half(self.d)
    }
}

/// The 5-bit quants (0..=31) of a q5_0 or q5_1 block, in element order.
#[inline]
pub fn quants5(qs: &[u8; QK / 2], qh: [u8; 4]) -> [u8; QK] {
    let qh = u32::from_le_bytes(qh);
    let mut q = [0u8; QK];
    for j in 0..QK / 2 {
        q[j] = (qs[j] & 0x0F) | ((((qh >> j) << 4) & 0x10) as u8);
        q[j + QK / 2] = (qs[j] >> 4) | (((qh >> (j + 12)) & 0x10) as u8);
    }
    q
}

/// `dequantize_row_q5_0`: y = (q - 16) * d.
pub(crate) fn dequantize(blocks: &[BlockQ5_0], out: &mut [f32]) {
    for (b, y) in blocks.iter().zip(out.chunks_exact_mut(QK)) {
        let d = b.d();
        for (y, q) in y.iter_mut().zip(quants5(&b.qs, b.qh)) {
            *y = (q as i32 - 16) as f32 * d;
        }
    }
}
