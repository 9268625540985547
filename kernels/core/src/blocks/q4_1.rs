//! `block_q4_1`: 32 values, an f16 scale `d` and an f16 offset `m`, unsigned 4-bit quants.
//!
//! Element j (j < 16) is `qs[j] & 15`, element j + 16 is `qs[j] >> 4`; the value is
//! `q*d + m` (`dequantize_row_q4_1`): the product rounds, then the sum (two roundings; the
//! x86-64 build of ggml-base has no FMA to contract them into).

use super::{half, QK};

/// `block_q4_1` (20 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockQ4_1 {
    /// Scale (f16 bits, little-endian).
    pub d: [u8; 2],
    /// Offset, the block's minimum (f16 bits).
    pub m: [u8; 2],
    /// Packed nibbles.
    pub qs: [u8; QK / 2],
}
const _: () = assert!(core::mem::size_of::<BlockQ4_1>() == 20);

impl BlockQ4_1 {
    /// The scale as f32.
    #[inline]
    pub fn d(&self) -> f32 {
        half(self.d)
    }
    /// The offset as f32.
    #[inline]
    pub fn m(&self) -> f32 {
        half(self.m)
    }
}

/// `dequantize_row_q4_1`: y = q*d + m.
pub(crate) fn dequantize(blocks: &[BlockQ4_1], out: &mut [f32]) {
    for (b, y) in blocks.iter().zip(out.chunks_exact_mut(QK)) {
        let (d, m) = (b.d(), b.m());
        for j in 0..QK / 2 {
            y[j] = (b.qs[j] & 0x0F) as f32 * d + m;
            y[j + QK / 2] = (b.qs[j] >> 4) as f32 * d + m;
        }
    }
}
