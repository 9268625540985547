//! `block_q8_0`: 32 signed 8-bit quants and one f16 scale; value = q * d.

use super::{half, QK};

/// `block_q8_0` (34 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockQ8_0 {
    /// Scale (f16 bits).
    pub d: [u8; 2],
    /// Quants (stored as u8, read as i8).
    pub qs: [u8; QK],
}
const _: () = assert!(core::mem::size_of::<BlockQ8_0>() == 34);

impl BlockQ8_0 {
    /// The scale as f32.
    #[inline]
    pub fn d(&self) -> f32 {
        half(self.d)
    }
    /// Quant j as a signed value.
    #[inline]
    pub fn q(&self, j: usize) -> i8 {
        self.qs[j] as i8
    }
}

/// `dequantize_row_q8_0`: y = q * d.
pub(crate) fn dequantize(blocks: &[BlockQ8_0], out: &mut [f32]) {
    for (b, y) in blocks.iter().zip(out.chunks_exact_mut(QK)) {
        let d = b.d();
        for (j, y) in y.iter_mut().enumerate() {
            *y = b.q(j) as f32 * d;
        }
    }
}
