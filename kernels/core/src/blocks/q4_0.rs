//! `block_q4_0`: 32 values, one f16 scale, 4-bit quants with an offset of 8.
//!
//! Element j (j < 16) is `(qs[j] & 15) - 8`, element j + 16 is `(qs[j] >> 4) - 8`;
//! the value is `q * d` (one rounding: the int converts exactly to f32).

use super::{half, QK};

/// `block_q4_0` (18 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockQ4_0 {
    /// Scale (f16 bits, little-endian).
    pub d: [u8; 2],
    /// Packed nibbles.
    pub qs: [u8; QK / 2],
}
const _: () = assert!(core::mem::size_of::<BlockQ4_0>() == 18);

impl BlockQ4_0 {
    /// The scale as f32.
    #[inline]
    pub fn d(&self) -> f32 {
        half(self.d)
    }
}

/// `dequantize_row_q4_0`: y = (q - 8) * d.
pub(crate) fn dequantize(blocks: &[BlockQ4_0], out: &mut [f32]) {
    for (b, y) in blocks.iter().zip(out.chunks_exact_mut(QK)) {
        let d = b.d();
        for j in 0..QK / 2 {
            let x0 = (b.qs[j] & 0x0F) as i32 - 8;
            let x1 = (b.qs[j] >> 4) as i32 - 8;
            y[j] = x0 as f32 * d;
            y[j + QK / 2] = x1 as f32 * d;
        }
    }
}
