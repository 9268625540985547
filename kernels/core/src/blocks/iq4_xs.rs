//! `block_iq4_xs`: a 256-value superblock of eight 32-value sub-blocks with signed 6-bit
//! scales (offset 32) times the superblock's f16 `d`; 4-bit indices into
//! [`super::iq4_nl::KVALUES_IQ4NL`], each sub-block laid out as an IQ4_NL block.
//!
//! Sub-block s's scale code: low nibble `(scales_l[s/2] >> 4*(s%2)) & 15`, top two bits
//! `(scales_h >> 2s) & 3`. Value = `dl * table[index]` with `dl = d*(code - 32)`
//! (`dequantize_row_iq4_xs`; two roundings).

use super::iq4_nl::dequantize_32;
use super::{half, QK_K};

/// `block_iq4_xs` (136 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockIq4Xs {
    /// Superblock scale (f16 bits).
    pub d: [u8; 2],
    /// Top two bits of the eight scale codes (little-endian `u16`).
    pub scales_h: [u8; 2],
    /// Low four bits of the scale codes, two per byte.
    pub scales_l: [u8; QK_K / 64],
    /// Packed 4-bit indices, 16 bytes per sub-block.
    pub qs: [u8; QK_K / 2],
}
const _: () = assert!(core::mem::size_of::<BlockIq4Xs>() == 136);

impl BlockIq4Xs {
    /// `d` as f32.
    #[inline]
    pub fn d(&self) -> f32 {
        half(self.d)
    }
    /// The 6-bit scale code (0..64) of sub-block `s` (0..8).
    #[inline]
    pub fn scale(&self, s: usize) -> u8 {
        let h = u16::from_le_bytes(self.scales_h);
        ((self.scales_l[s / 2] >> (4 * (s % 2))) & 0xF) | ((((h >> (2 * s)) & 3) as u8) << 4)
    }
}

/// `dequantize_row_iq4_xs`.
pub(crate) fn dequantize(blocks: &[BlockIq4Xs], out: &mut [f32]) {
    for (b, y) in blocks.iter().zip(out.chunks_exact_mut(QK_K)) {
        let d = b.d();
        for (s, y) in y.chunks_exact_mut(32).enumerate() {
            let dl = d * (b.scale(s) as i32 - 32) as f32;
            dequantize_32(dl, &b.qs[16 * s..16 * s + 16], y);
        }
    }
}
