//! Interleaved activations of ggml's repacked gemm kernels (`block_q8_Kx4`,
//! `block_q8_0x4` in `ggml-cpu/repack.h`; written by `ggml_quantize_mat_*_4xB`).
//!
//! Four activation rows are quantized one row at a time (each row's codes and scale are
//! exactly those of the row quantizer the lane names), then interleaved with block
//! length B (4 for the dotprod kernels, 8 for the AVX2 and i8mm ones): byte j of the
//! interleaved quants comes from row `(j % 4B) / B`, element `(j / 4B) * B + j % B`.
//! `block_q8_Kx4` also interleaves the 16-value group sums: group g of row r lands at
//! index `16 * (g / 4) + 4 * r + g % 4`. This is a byte permutation, so the arithmetic
//! of a lane does not depend on it; the twins compute from the row-major codes and these
//! functions give the exact layout (with an inverse) for tools that exchange bytes with
//! an engine.

use crate::blocks::{BlockQ8K, BlockQ8_0, QK, QK_K};

/// `block_q8_Kx4` (1168 bytes): `d[4]` (f32), `qs[1024]`, `bsums[64]` (i16).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockQ8Kx4 {
    /// Four f32 scales, little-endian.
    pub d: [[u8; 4]; 4],
    /// Interleaved quants.
    pub qs: [u8; 4 * QK_K],
    /// Interleaved group sums (i16, little-endian).
    pub bsums: [u8; 128],
}
const _: () = assert!(core::mem::size_of::<BlockQ8Kx4>() == 1168);

/// `block_q8_0x4` (136 bytes): `d[4]` (f16), `qs[128]`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockQ8_0x4 {
    /// Four f16 scales.
    pub d: [[u8; 2]; 4],
    /// Interleaved quants.
    pub qs: [u8; 4 * QK],
}
const _: () = assert!(core::mem::size_of::<BlockQ8_0x4>() == 136);

#[inline]
fn source(j: usize, b: usize) -> (usize, usize) {
    ((j % (4 * b)) / b, (j / (4 * b)) * b + j % b)
}

/// Interleave one superblock of four q8_K rows with block length `b` (4 or 8).
pub fn interleave_q8_k(rows: [&BlockQ8K; 4], b: usize) -> BlockQ8Kx4 {
    let mut out = BlockQ8Kx4 { d: [[0; 4]; 4], qs: [0; 4 * QK_K], bsums: [0; 128] };
    for r in 0..4 {
        out.d[r] = rows[r].d;
        for g in 0..16 {
            let i = 16 * (g / 4) + 4 * r + g % 4;
            out.bsums[2 * i..2 * i + 2].copy_from_slice(&rows[r].bsums[2 * g..2 * g + 2]);
        }
    }
    for j in 0..4 * QK_K {
        let (r, e) = source(j, b);
        out.qs[j] = rows[r].qs[e];
    }
    out
}

/// The exact inverse of [`interleave_q8_k`].
pub fn deinterleave_q8_k(x: &BlockQ8Kx4, b: usize) -> [BlockQ8K; 4] {
    let mut rows = [BlockQ8K { d: [0; 4], qs: [0; QK_K], bsums: [0; 32] }; 4];
    for (r, row) in rows.iter_mut().enumerate() {
        row.d = x.d[r];
        for g in 0..16 {
            let i = 16 * (g / 4) + 4 * r + g % 4;
            row.bsums[2 * g..2 * g + 2].copy_from_slice(&x.bsums[2 * i..2 * i + 2]);
        }
    }
    for j in 0..4 * QK_K {
        let (r, e) = source(j, b);
        rows[r].qs[e] = x.qs[j];
    }
    rows
}

/// Interleave one block of four q8_0 rows with block length `b` (4 or 8).
pub fn interleave_q8_0(rows: [&BlockQ8_0; 4], b: usize) -> BlockQ8_0x4 {
    let mut out = BlockQ8_0x4 { d: [[0; 2]; 4], qs: [0; 4 * QK] };
    for r in 0..4 {
        out.d[r] = rows[r].d;
    }
    for j in 0..4 * QK {
        let (r, e) = source(j, b);
        out.qs[j] = rows[r].qs[e];
    }
    out
}

/// The exact inverse of [`interleave_q8_0`].
pub fn deinterleave_q8_0(x: &BlockQ8_0x4, b: usize) -> [BlockQ8_0; 4] {
    let mut rows = [BlockQ8_0 { d: [0; 2], qs: [0; QK] }; 4];
    for (r, row) in rows.iter_mut().enumerate() {
        row.d = x.d[r];
    }
    for j in 0..4 * QK {
        let (r, e) = source(j, b);
        rows[r].qs[e] = x.qs[j];
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::ActRule;

    fn rows_q8k() -> Vec<BlockQ8K> {
        let x: Vec<f32> = (0..4 * QK_K).map(|i| ((i * 37 % 251) as f32 - 125.0) * 0.1).collect();
        let bytes = ActRule::Q8KRef.quantize(&x).unwrap();
        bytemuck::cast_slice(&bytes).to_vec()
    }

    #[test]
    fn q8_k_interleave_round_trips_and_follows_the_index_formula() {
        let rows = rows_q8k();
        for b in [4, 8] {
            let x = interleave_q8_k([&rows[0], &rows[1], &rows[2], &rows[3]], b);
            assert_eq!(deinterleave_q8_k(&x, b), [rows[0], rows[1], rows[2], rows[3]]);
            // byte 9 with b = 8: row 1, element 1; byte 40: row 1, element 8 + 0.
            if b == 8 {
                assert_eq!(x.qs[9], rows[1].qs[1]);
                assert_eq!(x.qs[40], rows[1].qs[8]);
            }
            // ggml's bsums index for b = 8: (((j & 31) >> 3) << 2) + ((j >> 8) << 4) + ((j >> 6) & 3)
            if b == 8 {
                for j in 0..4 * QK_K {
                    let i = (((j & 31) >> 3) << 2) + ((j >> 8) << 4) + ((j >> 6) & 3);
                    let (r, e) = source(j, 8);
                    assert_eq!(i, 16 * ((e / 16) / 4) + 4 * r + (e / 16) % 4, "j = {j}");
                }
            }
        }
    }

    #[test]
    fn q8_0_interleave_round_trips() {
        let x: Vec<f32> = (0..4 * QK).map(|i| (i as f32 - 60.0) * 0.3).collect();
        let bytes = ActRule::Q8_0Ref.quantize(&x).unwrap();
        let rows: &[BlockQ8_0] = bytemuck::cast_slice(&bytes);
        for b in [4, 8] {
            let y = interleave_q8_0([&rows[0], &rows[1], &rows[2], &rows[3]], b);
            assert_eq!(deinterleave_q8_0(&y, b), [rows[0], rows[1], rows[2], rows[3]]);
        }
    }
}
