//! `block_q8_1`: like q8_0 plus a second f16 field `s`. On the CPU
//! (`quantize_row_q8_1_ref`) s = f16(d * sum of quants); the GPU's `quantize_q8_1`
//! stores the sum of the unquantized values instead. ggml has no q8_1 dequantizer;
//! ours is defined as y = q * d, exactly like q8_0 (s is not used).

use super::{half, QK};

/// `block_q8_1` (36 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockQ8_1 {
    /// Scale (f16 bits).
    pub d: [u8; 2],
    /// Sum field (f16 bits); see the module docs for what it holds.
    pub s: [u8; 2],
    /// Quants (read as i8).
    pub qs: [u8; QK],
}
const _: () = assert!(core::mem::size_of::<BlockQ8_1>() == 36);

impl BlockQ8_1 {
    /// The scale as f32.
    #[inline]
    pub fn d(&self) -> f32 {
        half(self.d)
    }
    /// The sum field as f32.
    pub fn s(&self) -> f32 {
        half(self.s)
    }
}

/// y = q * d.
pub(crate) fn dequantize(blocks: &[BlockQ8_1], out: &mut [f32]) {
    for (b, y) in blocks.iter().zip(out.chunks_exact_mut(QK)) {
        let d = b.d();
        for (j, y) in y.iter_mut().enumerate() {
            *y = (b.qs[j] as i8) as f32 * d;
        }
    }
}
