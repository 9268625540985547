//! `block_q3_K`: a 256-value superblock of sixteen 16-value sub-blocks with signed 6-bit
//! scales (offset 32) times the superblock's f16 `d`; 3-bit quants (offset 4).
//!
//! Quants: the low two bits as q2_K's ([`super::q2_k::crumb`]); the third bit of value i
//! is bit i/32 of `hmask[i % 32]`, and a clear bit subtracts 4. Scales: sub-block s's low
//! nibble is `scales[s] & 15` (s < 8) or `scales[s - 8] >> 4`, its top two bits
//! `(scales[8 + s % 4] >> 2*(s/4)) & 3`. Value = `dl*q` with `dl = d*(sc - 32)` and
//! q = crumb - (bit ? 0 : 4) (`dequantize_row_q3_K`; two roundings).

use super::q2_k::crumb;
use super::{half, QK_K};

/// `block_q3_K` (110 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockQ3K {
    /// The third bits: bit b of `hmask[l]` belongs to value 32b + l.
    pub hmask: [u8; QK_K / 8],
    /// Low two bits of the quants.
    pub qs: [u8; QK_K / 4],
    /// Sixteen 6-bit scales, packed.
    pub scales: [u8; 12],
    /// Superblock scale (f16 bits).
    pub d: [u8; 2],
}
const _: () = assert!(core::mem::size_of::<BlockQ3K>() == 110);

impl BlockQ3K {
    /// `d` as f32.
    #[inline]
    pub fn d(&self) -> f32 {
        half(self.d)
    }
    /// The 6-bit scale code (0..64) of sub-block `s` (0..16).
    #[inline]
    pub fn scale(&self, s: usize) -> u8 {
        let low = if s < 8 { self.scales[s] & 0xF } else { self.scales[s - 8] >> 4 };
        low | (((self.scales[8 + s % 4] >> (2 * (s / 4))) & 3) << 4)
    }
    /// The signed quant (-4..=3) of value `i` (0..256).
    #[inline]
    pub fn quant(&self, i: usize) -> i32 {
        let high = (self.hmask[i % 32] >> (i / 32)) & 1;
        crumb(&self.qs, i) as i32 - if high == 1 { 0 } else { 4 }
    }
}

/// `dequantize_row_q3_K`.
pub(crate) fn dequantize(blocks: &[BlockQ3K], out: &mut [f32]) {
    for (b, y) in blocks.iter().zip(out.chunks_exact_mut(QK_K)) {
        let d = b.d();
        for (s, y) in y.chunks_exact_mut(16).enumerate() {
            let dl = d * (b.scale(s) as i32 - 32) as f32;
            for (l, y) in y.iter_mut().enumerate() {
                *y = dl * b.quant(16 * s + l) as f32;
            }
        }
    }
}
