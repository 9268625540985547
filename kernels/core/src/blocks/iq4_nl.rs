//! `block_iq4_nl`: 32 values, an f16 scale, 4-bit indices into the non-linear table
//! [`KVALUES_IQ4NL`] (`kvalues_iq4nl`), laid out as q4_0's nibbles.
//!
//! Value = `d * table[index]` (`dequantize_row_iq4_nl`; one rounding).

use super::{half, QK};

/// ggml's `kvalues_iq4nl`: the 16 levels of IQ4_NL and IQ4_XS.
pub const KVALUES_IQ4NL: [i8; 16] =
    [-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113];

/// `block_iq4_nl` (18 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockIq4Nl {
    /// Scale (f16 bits).
    pub d: [u8; 2],
    /// Packed 4-bit indices (element j low nibble, element j + 16 high nibble).
    pub qs: [u8; QK / 2],
}
const _: () = assert!(core::mem::size_of::<BlockIq4Nl>() == 18);

impl BlockIq4Nl {
    /// The scale as f32.
    #[inline]
    pub fn d(&self) -> f32 {
        half(self.d)
    }
}

/// 32 values `dl * table[index]` from 16 bytes of packed indices.
#[inline]
pub(crate) fn dequantize_32(dl: f32, qs: &[u8], y: &mut [f32]) {
    for j in 0..QK / 2 {
        y[j] = dl * KVALUES_IQ4NL[(qs[j] & 0xF) as usize] as f32;
        y[j + QK / 2] = dl * KVALUES_IQ4NL[(qs[j] >> 4) as usize] as f32;
    }
}

/// `dequantize_row_iq4_nl`.
pub(crate) fn dequantize(blocks: &[BlockIq4Nl], out: &mut [f32]) {
    for (b, y) in blocks.iter().zip(out.chunks_exact_mut(QK)) {
        dequantize_32(b.d(), &b.qs, y);
    }
}
