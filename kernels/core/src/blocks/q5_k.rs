//! `block_q5_K`: a 256-value superblock of eight 32-value sub-blocks, each with a 6-bit
//! scale and a 6-bit min packed as q4_K's ([`super::q4_k::scale_min_k4`]), times the
//! superblock's f16 `d` and `dmin`; 5-bit quants.
//!
//! Quants: four 64-value chunks c; chunk c reads `qs[32c..32c+32]` (low nibbles: values
//! 64c+l, sub-block 2c; high nibbles: values 64c+32+l, sub-block 2c+1) and the fifth
//! bits from `qh[l]`: bit 2c for value 64c+l, bit 2c+1 for value 64c+32+l.
//! Value = d*sc_s*q - dmin*m_s with q in 0..=31, evaluated as
//! `d1 = d*sc; m1 = dmin*m; y = d1*q - m1` (`dequantize_row_q5_K`; three roundings, no
//! fused multiply-add).

use super::q4_k::{scale_min_k4, K_SCALE_SIZE};
use super::{half, QK_K};

/// `block_q5_K` (176 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockQ5K {
    /// Superblock scale of the scales (f16 bits).
    pub d: [u8; 2],
    /// Superblock scale of the mins (f16 bits).
    pub dmin: [u8; 2],
    /// Eight 6-bit scales and eight 6-bit mins, packed.
    pub scales: [u8; K_SCALE_SIZE],
    /// The fifth bits: bit b of `qh[l]` belongs to value 32b + l.
    pub qh: [u8; QK_K / 8],
    /// Low 4 bits of the quants.
    pub qs: [u8; QK_K / 2],
}
const _: () = assert!(core::mem::size_of::<BlockQ5K>() == 176);

impl BlockQ5K {
    /// `d` as f32.
    #[inline]
    pub fn d(&self) -> f32 {
        half(self.d)
    }
    /// `dmin` as f32.
    #[inline]
    pub fn dmin(&self) -> f32 {
        half(self.dmin)
    }
    /// The 5-bit quant (0..=31) of value `i` (0..256).
    #[inline]
    pub fn quant(&self, i: usize) -> u8 {
        let (c, r) = (i / 64, i % 64);
        let (l, hi) = (r % 32, r / 32);
        let low = if hi == 0 { self.qs[32 * c + l] & 0xF } else { self.qs[32 * c + l] >> 4 };
        low | (((self.qh[l] >> (2 * c + hi)) & 1) << 4)
    }
}

/// `dequantize_row_q5_K`.
pub(crate) fn dequantize(blocks: &[BlockQ5K], out: &mut [f32]) {
    for (b, y) in blocks.iter().zip(out.chunks_exact_mut(QK_K)) {
        let d = b.d();
        let min = b.dmin();
        for c in 0..4 {
            let (sc, m) = scale_min_k4(2 * c, &b.scales);
            let (d1, m1) = (d * sc as f32, min * m as f32);
            let (sc, m) = scale_min_k4(2 * c + 1, &b.scales);
            let (d2, m2) = (d * sc as f32, min * m as f32);
            let y = &mut y[64 * c..64 * c + 64];
            for l in 0..32 {
                y[l] = d1 * b.quant(64 * c + l) as f32 - m1;
                y[32 + l] = d2 * b.quant(64 * c + 32 + l) as f32 - m2;
            }
        }
    }
}
