//! `block_q8_K`: the CPU activation format of the K-quants. 256 signed 8-bit quants,
//! an **f32** scale d, and `bsums[g]` = the integer sum of quants 16g..16g+15.
//! Value = d * q (`dequantize_row_q8_K`).

use super::QK_K;

/// `block_q8_K` (292 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockQ8K {
    /// Scale (f32 bits, little-endian).
    pub d: [u8; 4],
    /// Quants (read as i8).
    pub qs: [u8; QK_K],
    /// Sums of each group of 16 quants (i16, little-endian).
    pub bsums: [u8; QK_K / 8],
}
const _: () = assert!(core::mem::size_of::<BlockQ8K>() == 292);

impl BlockQ8K {
    /// The scale.
    #[inline]
    pub fn d(&self) -> f32 {
        f32::from_le_bytes(self.d)
    }
    /// Quant j.
    #[inline]
    pub fn q(&self, j: usize) -> i8 {
        self.qs[j] as i8
    }
    /// Group sum g (0..16).
    #[inline]
    pub fn bsum(&self, g: usize) -> i16 {
        i16::from_le_bytes([self.bsums[2 * g], self.bsums[2 * g + 1]])
    }
}

/// `dequantize_row_q8_K`: y = d * q.
pub(crate) fn dequantize(blocks: &[BlockQ8K], out: &mut [f32]) {
    for (b, y) in blocks.iter().zip(out.chunks_exact_mut(QK_K)) {
        let d = b.d();
        for (j, y) in y.iter_mut().enumerate() {
            *y = d * b.q(j) as f32;
        }
    }
}
