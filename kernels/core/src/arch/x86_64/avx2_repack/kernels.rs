//! Portable twin of ggml's AVX2 repacked kernels (`ggml-cpu/arch/x86/repack.cpp`,
//! haswell tier, AVX-512 branches compiled out): q4_K 8x8 and q4_0 8x8 gemv and gemm.
//! Integer parts are exact (no saturation can occur for these operand ranges); per
//! output column j the float order is:
//!
//! - `ggml_gemv_q4_K_8x8_q8_K` (one row, plain q8_K activations): per superblock,
//!   isum_j = sum over sub-blocks s of sc_js * dot_s, imin_j = sum over s of
//!   m_js * S_s (S_s = `bsums[2s] + bsums[2s+1]`, i16); then
//!   A_j = fma(float(isum_j), f16(d_j) * d_y, A_j) and
//!   M_j = fma(float(imin_j), f16(dmin_j) * d_y, M_j); output A_j - M_j.
//! - `ggml_gemm_q4_K_8x8_q8_K` (four rows, q8_K activations from
//!   `ggml_quantize_mat_q8_K_4x8`): the same, but the FMAs happen once per pair of
//!   sub-blocks (four times per superblock): A = fma(float(sc_2p*dot_2p +
//!   sc_2p+1*dot_2p+1), f16(d_j) * d_r, A), M = fma(float(m_2p*S_2p + m_2p+1*S_2p+1),
//!   f16(dmin_j) * d_r, M).
//! - `ggml_gemv_q4_0_8x8_q8_0` / `ggml_gemm_q4_0_8x8_q8_0`: per 32-value block,
//!   acc_j = fma(float(isum_j), f16(d_j) * f16(d_y), acc_j).
//! - `ggml_gemv_iq4_nl_8x8_q8_0` / `ggml_gemm_iq4_nl_8x8_q8_0`: the same template
//!   (`gemv/gemm_q4_b32_8x8_q8_0_lut_avx`) with the IQ4_NL table in place of q4_0's
//!   sign-extension table, so the same order: per block acc_j = fma(float(isum_j),
//!   f16(d_j) * f16(d_y), acc_j), isum_j the table values times the q8_0 bytes by the
//!   sign trick.

use crate::arch::x86_64::avx2::vec_dot::sign_epi8;
use crate::blocks::iq4_nl::KVALUES_IQ4NL;
use crate::blocks::{BlockQ8K, BlockQ8_0};
use crate::repack::{BlockIq4Nlx8, BlockQ4Kx8, BlockQ4_0x8};

/// Integer sums of one `block_q4_Kx8` against one q8_K block: per column j and
/// sub-block s, `dot[j][s]` = sum of q4 * q8 over the sub-block's 32 values.
#[inline]
pub fn q4_kx8_dots(x: &BlockQ4Kx8, y: &BlockQ8K) -> [[i32; 8]; 8] {
    crate::accelerated!(slots::Q4_KX8_DOTS, (x, y));
    // Integer sums are exact, so the bytes are visited in memory order: interleaved
    // chunk i (8 bytes) is column i % 8, plain bytes [(i/8)*8, (i/8)*8 + 8).
    let mut dot = [[0i32; 8]; 8];
    let yq: &[i8; 256] = bytemuck::cast_ref(&y.qs);
    for (i, chunk) in x.qs.chunks_exact(8).enumerate() {
        let (j, o) = (i % 8, (i / 8) * 8);
        let (c, l0) = (o / 32, o % 32);
        let ylo = &yq[64 * c + l0..64 * c + l0 + 8];
        let yhi = &yq[64 * c + 32 + l0..64 * c + 32 + l0 + 8];
        let (mut lo, mut hi) = (0i32, 0i32);
        for b in 0..8 {
            lo += (chunk[b] & 0xF) as i32 * ylo[b] as i32;
            hi += (chunk[b] >> 4) as i32 * yhi[b] as i32;
        }
        dot[j][2 * c] += lo;
        dot[j][2 * c + 1] += hi;
    }
    dot
}

/// `S_s` = `bsums[2s] + bsums[2s+1]` as i16 (the `_mm_hadd_epi16` of the kernels).
#[inline]
pub fn sub_block_sums(y: &BlockQ8K) -> [i16; 8] {
    core::array::from_fn(|s| y.bsum(2 * s).wrapping_add(y.bsum(2 * s + 1)))
}

/// `ggml_gemv_q4_K_8x8_q8_K` for one group of 8 columns: `blocks` are the group's
/// interleaved superblocks, `y` the row's q8_K blocks.
pub fn gemv_q4_k_8x8(blocks: &[BlockQ4Kx8], y: &[BlockQ8K]) -> [f32; 8] {
    crate::accelerated!(slots::GEMV_Q4_K_8X8, (blocks, y));
    let mut acc = [0.0f32; 8];
    let mut acc_min = [0.0f32; 8];
    for (x, yb) in blocks.iter().zip(y) {
        let dot = q4_kx8_dots(x, yb);
        let s = sub_block_sums(yb);
        for j in 0..8 {
            let mut isum = 0i32;
            let mut imin = 0i32;
            for sb in 0..8 {
                let (sc, m) = x.scale_min(j, sb);
                isum += sc as i32 * dot[j][sb];
                imin += m as i32 * s[sb] as i32;
            }
            let d = crate::fp16::f16_bits_to_f32(u16::from_le_bytes(x.d[j]));
            let dmin = crate::fp16::f16_bits_to_f32(u16::from_le_bytes(x.dmin[j]));
            acc[j] = (isum as f32).mul_add(d * yb.d(), acc[j]);
            acc_min[j] = (imin as f32).mul_add(dmin * yb.d(), acc_min[j]);
        }
    }
    core::array::from_fn(|j| acc[j] - acc_min[j])
}

/// `ggml_gemm_q4_K_8x8_q8_K` for one group of 8 columns and one activation row (the
/// kernel computes four rows at once; each row's arithmetic is independent).
pub fn gemm_q4_k_8x8(blocks: &[BlockQ4Kx8], y: &[BlockQ8K]) -> [f32; 8] {
    let mut acc = [0.0f32; 8];
    let mut acc_min = [0.0f32; 8];
    for (x, yb) in blocks.iter().zip(y) {
        let dot = q4_kx8_dots(x, yb);
        let s = sub_block_sums(yb);
        for p in 0..4 {
            for j in 0..8 {
                let (sc0, m0) = x.scale_min(j, 2 * p);
                let (sc1, m1) = x.scale_min(j, 2 * p + 1);
                let isum = sc0 as i32 * dot[j][2 * p] + sc1 as i32 * dot[j][2 * p + 1];
                let imin = m0 as i32 * s[2 * p] as i32 + m1 as i32 * s[2 * p + 1] as i32;
                let d = crate::fp16::f16_bits_to_f32(u16::from_le_bytes(x.d[j]));
                let dmin = crate::fp16::f16_bits_to_f32(u16::from_le_bytes(x.dmin[j]));
                acc[j] = (isum as f32).mul_add(d * yb.d(), acc[j]);
                acc_min[j] = (imin as f32).mul_add(dmin * yb.d(), acc_min[j]);
            }
        }
    }
    core::array::from_fn(|j| acc[j] - acc_min[j])
}

/// `ggml_gemv_q4_0_8x8_q8_0` (and, per row, `ggml_gemm_q4_0_8x8_q8_0`) for one group of
/// 8 columns.
pub fn gemv_q4_0_8x8(blocks: &[BlockQ4_0x8], y: &[BlockQ8_0]) -> [f32; 8] {
    crate::accelerated!(slots::GEMV_Q4_0_8X8, (blocks, y));
    let blocks = blocks.iter().map(|x| (&x.d, |j, o| x.q(j, o)));
    gemv_b32_8x8(blocks, y, |n| n as i8 - 8)
}

/// `ggml_gemv_iq4_nl_8x8_q8_0` (and, per row, `ggml_gemm_iq4_nl_8x8_q8_0`) for one group
/// of 8 columns.
pub fn gemv_iq4_nl_8x8(blocks: &[BlockIq4Nlx8], y: &[BlockQ8_0]) -> [f32; 8] {
    crate::accelerated!(slots::GEMV_IQ4_NL_8X8, (blocks, y));
    let blocks = blocks.iter().map(|x| (&x.d, |j, o| x.q(j, o)));
    gemv_b32_8x8(blocks, y, |n| KVALUES_IQ4NL[n as usize])
}

/// The 32-value 8x8 template (`gemv_q4_b32_8x8_q8_0_lut_avx`): each block as its eight
/// f16 scales and a reader of row j's plain byte o; `value` maps a nibble to its signed
/// value (the kernel's table).
fn gemv_b32_8x8<'a, Q: Fn(usize, usize) -> u8>(
    blocks: impl Iterator<Item = (&'a [[u8; 2]; 8], Q)>,
    y: &[BlockQ8_0],
    value: impl Fn(u8) -> i8,
) -> [f32; 8] {
    let mut acc = [0.0f32; 8];
    for ((d, q), yb) in blocks.zip(y) {
        for j in 0..8 {
            let mut isum = 0i32;
            for o in 0..16 {
                let b = q(j, o);
                // `mul_sum_i8_pairs_acc_int32x8`: |x| times sign(y, x), as the kernel's
                // `_mm256_sign_epi8` computes it (wrapping for y = -128).
                for (xv, yv) in [(value(b & 0xF), yb.q(o)), (value(b >> 4), yb.q(o + 16))] {
                    isum += sign_epi8(xv, xv) as u8 as i32 * sign_epi8(yv, xv) as i32;
                }
            }
            let d = crate::fp16::f16_bits_to_f32(u16::from_le_bytes(d[j]));
            acc[j] = (isum as f32).mul_add(d * yb.d(), acc[j]);
        }
    }
    acc
}

/// The slots of this file's entry points (see [`crate::accel`]), filled by
/// `tiercheck-accel` (its `src/arch/x86_64/avx2_repack/kernels.rs`).
pub mod slots {
    // A slot's type is its entry point's signature, spelt out.
    #![allow(clippy::type_complexity)]

    use super::*;
    use crate::accel::Slot;

    /// [`q4_kx8_dots`].
    pub static Q4_KX8_DOTS: Slot<fn(&BlockQ4Kx8, &BlockQ8K) -> [[i32; 8]; 8]> = Slot::new();
    /// [`gemv_q4_k_8x8`].
    pub static GEMV_Q4_K_8X8: Slot<fn(&[BlockQ4Kx8], &[BlockQ8K]) -> [f32; 8]> = Slot::new();
    /// [`gemv_q4_0_8x8`].
    pub static GEMV_Q4_0_8X8: Slot<fn(&[BlockQ4_0x8], &[BlockQ8_0]) -> [f32; 8]> = Slot::new();
    /// [`gemv_iq4_nl_8x8`].
    pub static GEMV_IQ4_NL_8X8: Slot<fn(&[BlockIq4Nlx8], &[BlockQ8_0]) -> [f32; 8]> = Slot::new();
}
