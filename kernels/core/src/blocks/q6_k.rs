//! `block_q6_K`: a 256-value superblock of sixteen 16-value sub-blocks with signed
//! 8-bit scales and one f16 `d` (stored last).
//!
//! Two halves of 128 (n = 0, 1) use `ql[64n..]`, `qh[32n..]`, `scales[8n..]`. For
//! l in 0..32 with is = l/16, the four values l, l+32, l+64, l+96 of a half take the
//! low nibble of `ql[l]`, low nibble of `ql[l+32]`, high nibble of `ql[l]`, high nibble
//! of `ql[l+32]`, with `qh[l]` bits (0-1, 2-3, 4-5, 6-7) on top, minus 32, and scales
//! is, is+2, is+4, is+6. Value = (d * sc) * q, left to right (`dequantize_row_q6_K`).

use super::{half, QK_K};

/// `block_q6_K` (210 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockQ6K {
    /// Low 4 bits of the quants.
    pub ql: [u8; QK_K / 2],
    /// High 2 bits of the quants.
    pub qh: [u8; QK_K / 4],
    /// Sub-block scales (read as i8).
    pub scales: [u8; QK_K / 16],
    /// Superblock scale (f16 bits).
    pub d: [u8; 2],
}
const _: () = assert!(core::mem::size_of::<BlockQ6K>() == 210);

impl BlockQ6K {
    /// `d` as f32.
    #[inline]
    pub fn d(&self) -> f32 {
        half(self.d)
    }
    /// Sub-block scale i.
    #[inline]
    pub fn scale(&self, i: usize) -> i8 {
        self.scales[i] as i8
    }

    /// All 256 signed quants (-32..=31) in value order.
    pub fn quants(&self) -> [i8; QK_K] {
        let mut a = [0i8; QK_K];
        for n in 0..2 {
            let ql = &self.ql[64 * n..];
            let qh = &self.qh[32 * n..];
            let a = &mut a[128 * n..];
            for l in 0..32 {
                a[l] = ((ql[l] & 0xF) | ((qh[l] & 3) << 4)) as i8 - 32;
                a[l + 32] = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) as i8 - 32;
                a[l + 64] = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i8 - 32;
                a[l + 96] = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i8 - 32;
            }
        }
        a
    }
}

/// `dequantize_row_q6_K`.
pub(crate) fn dequantize(blocks: &[BlockQ6K], out: &mut [f32]) {
    for (b, y) in blocks.iter().zip(out.chunks_exact_mut(QK_K)) {
        let d = b.d();
        let q = b.quants();
        for n in 0..2 {
            for l in 0..32 {
                let is = 8 * n + l / 16;
                for (k, s) in [(0usize, 0usize), (32, 2), (64, 4), (96, 6)] {
                    let i = 128 * n + k + l;
                    y[i] = d * b.scale(is + s) as f32 * q[i] as f32;
                }
            }
        }
    }
}
