//! `block_q4_K`: a 256-value superblock of eight 32-value sub-blocks, each with a
//! 6-bit scale and a 6-bit min, times the superblock's f16 `d` and `dmin`.
//!
//! Quants: four 64-value chunks c; chunk c reads `qs[32c..32c+32]`; the low nibbles are
//! values 64c+l (sub-block 2c), the high nibbles values 64c+32+l (sub-block 2c+1).
//! Value = d*sc_s*q - dmin*m_s with q in 0..=15, evaluated as
//! `d1 = d*sc; m1 = dmin*m; y = d1*q - m1` (`dequantize_row_q4_K`; three roundings,
//! no fused multiply-add: the x86-64 build of ggml-base does not contract).

use super::{half, QK_K};

/// Bytes of packed 6-bit scales and mins (`K_SCALE_SIZE`).
pub const K_SCALE_SIZE: usize = 12;

/// `block_q4_K` (144 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockQ4K {
    /// Superblock scale of the scales (f16 bits).
    pub d: [u8; 2],
    /// Superblock scale of the mins (f16 bits).
    pub dmin: [u8; 2],
    /// Eight 6-bit scales and eight 6-bit mins, packed.
    pub scales: [u8; K_SCALE_SIZE],
    /// 4-bit quants.
    pub qs: [u8; QK_K / 2],
}
const _: () = assert!(core::mem::size_of::<BlockQ4K>() == 144);

impl BlockQ4K {
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

/// `get_scale_min_k4`: the 6-bit (scale, min) of sub-block j (0..8).
///
/// `j < 4`: `sc = q[j] & 63`, `m = q[j+4] & 63`. `j >= 4`: the low 4 bits come from
/// `q[j+4]` (scale low nibble, min high nibble) and the top 2 bits from the top bits of
/// `q[j-4]` (scale) and `q[j]` (min).
#[inline]
pub fn scale_min_k4(j: usize, q: &[u8; K_SCALE_SIZE]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        ((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4), (q[j + 4] >> 4) | ((q[j] >> 6) << 4))
    }
}

/// `dequantize_row_q4_K`.
pub(crate) fn dequantize(blocks: &[BlockQ4K], out: &mut [f32]) {
    for (b, y) in blocks.iter().zip(out.chunks_exact_mut(QK_K)) {
        let d = b.d();
        let min = b.dmin();
        for c in 0..4 {
            let (sc, m) = scale_min_k4(2 * c, &b.scales);
            let d1 = d * sc as f32;
            let m1 = min * m as f32;
            let (sc, m) = scale_min_k4(2 * c + 1, &b.scales);
            let d2 = d * sc as f32;
            let m2 = min * m as f32;
            let q = &b.qs[32 * c..32 * c + 32];
            let y = &mut y[64 * c..64 * c + 64];
            for l in 0..32 {
                y[l] = d1 * (q[l] & 0xF) as f32 - m1;
            }
            for l in 0..32 {
                y[32 + l] = d2 * (q[l] >> 4) as f32 - m2;
            }
        }
    }
}
