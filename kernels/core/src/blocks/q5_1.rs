//! `block_q5_1`: 32 values, an f16 scale `d` and an f16 offset `m`, unsigned 5-bit quants
//! laid out as q5_0's ([`super::q5_0::quants5`]).
//!
//! The value is `q*d + m` (`dequantize_row_q5_1`; two roundings, no fused multiply-add).

use super::q5_0::quants5;
use super::{half, QK};

/// `block_q5_1` (24 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockQ5_1 {
    /// Scale (f16 bits, little-endian).
    pub d: [u8; 2],
    /// Offset, the block's minimum (f16 bits).
    pub m: [u8; 2],
    /// The fifth bit of every quant (little-endian `u32`).
    pub qh: [u8; 4],
    /// Packed low nibbles.
    pub qs: [u8; QK / 2],
}
const _: () = assert!(core::mem::size_of::<BlockQ5_1>() == 24);

impl BlockQ5_1 {
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

/// `dequantize_row_q5_1`: y = q*d + m.
pub(crate) fn dequantize(blocks: &[BlockQ5_1], out: &mut [f32]) {
    for (b, y) in blocks.iter().zip(out.chunks_exact_mut(QK)) {
        let (d, m) = (b.d(), b.m());
        for (y, q) in y.iter_mut().zip(quants5(&b.qs, b.qh)) {
            *y = q as f32 * d + m;
        }
    }
}
