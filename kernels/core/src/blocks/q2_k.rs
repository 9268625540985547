//! `block_q2_K`: a 256-value superblock of sixteen 16-value sub-blocks, each with a 4-bit
//! scale (low nibble of `scales[s]`) and a 4-bit min (high nibble), times the superblock's
//! f16 `d` and `dmin`; 2-bit quants.
//!
//! Quants: two 128-value halves h; half h reads `qs[32h..32h+32]`; value 128h + 32j + l
//! (j in 0..4, l in 0..32) is bits 2j..2j+2 of `qs[32h + l]`, in sub-block 8h + 2j + l/16.
//! Value = `dl*q - ml` with `dl = d*sc`, `ml = dmin*m` (`dequantize_row_q2_K`; three
//! roundings, no fused multiply-add).

use super::{half, QK_K};

/// `block_q2_K` (84 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockQ2K {
    /// Per sub-block: scale in the low nibble, min in the high nibble.
    pub scales: [u8; QK_K / 16],
    /// 2-bit quants.
    pub qs: [u8; QK_K / 4],
    /// Superblock scale of the scales (f16 bits).
    pub d: [u8; 2],
    /// Superblock scale of the mins (f16 bits).
    pub dmin: [u8; 2],
}
const _: () = assert!(core::mem::size_of::<BlockQ2K>() == 84);

impl BlockQ2K {
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
}

/// The 2-bit field of value `i` (0..256) in a q2_K or q3_K `qs` array.
#[inline]
pub fn crumb(qs: &[u8; QK_K / 4], i: usize) -> u8 {
    let (h, r) = (i / 128, i % 128);
    (qs[32 * h + r % 32] >> (2 * (r / 32))) & 3
}

/// `dequantize_row_q2_K`.
pub(crate) fn dequantize(blocks: &[BlockQ2K], out: &mut [f32]) {
    for (b, y) in blocks.iter().zip(out.chunks_exact_mut(QK_K)) {
        let (d, min) = (b.d(), b.dmin());
        for (s, y) in y.chunks_exact_mut(16).enumerate() {
            // Sub-block s holds values 16s..16s+16.
            let sc = b.scales[s];
            let dl = d * (sc & 0xF) as f32;
            let ml = min * (sc >> 4) as f32;
            for (l, y) in y.iter_mut().enumerate() {
                *y = dl * crumb(&b.qs, 16 * s + l) as f32 - ml;
            }
        }
    }
}
