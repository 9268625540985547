//! Portable twin of ggml's aarch64 i8mm repacked kernels (`ggml-cpu/arch/arm/repack.cpp`,
//! built by GCC with `-march=armv8.6-a+dotprod+i8mm`): q4_K 8x8, q4_0 4x8 and q8_0 4x8
//! gemv and gemm, and q6_K 8x8. The integer parts (`sdot`, `smmla` 2x2 tiles, `vmlaq_s32`,
//! `vmlal_s16`) are exact for these operand ranges, so only the float order matters.
//! GCC keeps `vmlaq_f32` / `vmlsq_f32` unfused; `vfmaq_f32` (and the `fmla` of the
//! inline-assembly kernels) is one fused multiply-add. Per output column j the float
//! order is:
//!
//! - `ggml_gemv_q4_K_8x8_q8_K` (dotprod even on i8mm machines): per superblock,
//!   s = f16(d_j) * d_y and m = f16(dmin_j) * d_y; for each pair p (0..4) of sub-blocks
//!   acc = fma(s, float(sc_2p * dot_2p), acc), then acc = fma(s, float(sc_2p+1 *
//!   dot_2p+1), acc) (two fused steps, unlike the 8x4 kernel); then acc = acc -
//!   round(float(bias) * m) (`vmlsq_f32`), bias = sum over the 8 sub-blocks of
//!   min_s * S_s (S_s = `bsums[2s] + bsums[2s+1]`).
//! - `ggml_gemm_q4_K_8x8_q8_K` (i8mm, per activation row): per superblock the whole
//!   superblock's i32 sum isum = sum over the 8 sub-blocks of sc_s * dot_s and bias as
//!   above; acc = acc - round(float(bias) * m) (`vmlsq_f32`), then
//!   acc = acc + round(float(isum) * s) (`vmlaq_f32`), once per superblock.
//! - `ggml_gemv_q4_0_4x8_q8_0` and `ggml_gemm_q4_0_4x8_q8_0` (inline assembly, `fmul` of
//!   the scales then `fmla`): acc = fma(float(isum), f16(d_y) * f16(d_j), acc).
//! - `ggml_gemv_q8_0_4x8_q8_0` and `ggml_gemm_q8_0_4x8_q8_0` (`vfmaq_f32`):
//!   acc = fma(float(isum), f16(d_y) * f16(d_j), acc).
//! - `ggml_gemv_q6_K_8x8_q8_K` (dotprod) and `ggml_gemm_q6_K_8x8_q8_K` (`smmla`): per
//!   superblock the exact isum = sum over the 16 sub-blocks of sc_s * sum (q - 32) * a,
//!   then acc = acc + round(float(isum) * round(f16(d_j) * d_y)), unfused in both
//!   (the gemv's `vmul_f32` halves are combined before the `vaddq_f32`, so GCC does not
//!   contract them: neither function has an `fmla`), unlike the dotprod build's
//!   `ggml_gemv_q6_K_8x4_q8_K`. The twin is the dotprod twin's
//!   `neon_repack::kernels::gemm_q6_k_8xil` with an 8-byte interleave.
//!
//! The gemm rows' activations: q8_0 by `ggml_quantize_mat_q8_0_4x8` (NEON, the same
//! arithmetic as the NEON row quantizer, row by row); q8_K by the generic
//! `ggml_quantize_mat_q8_K_4x8`, whose per-row arithmetic is the 4x4 one's (the aarch64
//! row rule). Native counterpart: `tiercheck-aarch64` (`i8mm_repack::kernels`). The
//! Q4_K and Q5_K gemv and gemm run their accelerated form where [`crate::accel`] allows
//! (the same float operations, the integer stages by byte instructions).

use crate::blocks::{BlockQ8K, BlockQ8_0};
use crate::fp16::f16_bits_to_f32;
use crate::repack::{BlockQ4Kx8, BlockQ4_0x4, BlockQ5Kx8, BlockQ8_0x4};

#[inline]
pub(crate) fn f16(b: [u8; 2]) -> f32 {
    f16_bits_to_f32(u16::from_le_bytes(b))
}

/// Integer dot products of row `j`'s 8 sub-blocks with the activation block.
pub(crate) fn q4_k_8x8_dots(x: &BlockQ4Kx8, j: usize, yb: &BlockQ8K) -> [i32; 8] {
    let mut dots = [0i32; 8];
    for p in 0..4 {
        let (mut lo, mut hi) = (0i32, 0i32);
        for l in 0..32 {
            let q = x.q(j, 32 * p + l);
            lo += (q & 0xF) as i32 * yb.q(64 * p + l) as i32;
            hi += (q >> 4) as i32 * yb.q(64 * p + 32 + l) as i32;
        }
        dots[2 * p] = lo;
        dots[2 * p + 1] = hi;
    }
    dots
}

pub(crate) fn q4_k_bias(x: &BlockQ4Kx8, j: usize, yb: &BlockQ8K) -> i32 {
    (0..8)
        .map(|s| {
            let sum = yb.bsum(2 * s).wrapping_add(yb.bsum(2 * s + 1)) as i32;
            x.scale_min(j, s).1 as i32 * sum
        })
        .sum()
}

/// `ggml_gemv_q4_K_8x8_q8_K` for one group of 8 columns.
pub fn gemv_q4_k_8x8(blocks: &[BlockQ4Kx8], y: &[BlockQ8K]) -> [f32; 8] {
    crate::accelerated!(slots::GEMV_Q4_K_8X8, (blocks, y));
    let mut acc = [0.0f32; 8];
    for (x, yb) in blocks.iter().zip(y) {
        for (j, a) in acc.iter_mut().enumerate() {
            let scale = f16(x.d[j]) * yb.d();
            let min = f16(x.dmin[j]) * yb.d();
            let dots = q4_k_8x8_dots(x, j, yb);
            for (s, dot) in dots.iter().enumerate() {
                let sc = x.scale_min(j, s).0 as i32;
                *a = scale.mul_add((sc * dot) as f32, *a);
            }
            *a -= q4_k_bias(x, j, yb) as f32 * min;
        }
    }
    acc
}

/// `ggml_gemm_q4_K_8x8_q8_K` for one group of 8 columns and one activation row (the
/// kernel computes four rows at once; each row's arithmetic is independent).
pub fn gemm_q4_k_8x8(blocks: &[BlockQ4Kx8], y: &[BlockQ8K]) -> [f32; 8] {
    crate::accelerated!(slots::GEMM_Q4_K_8X8, (blocks, y));
    let mut acc = [0.0f32; 8];
    for (x, yb) in blocks.iter().zip(y) {
        for (j, a) in acc.iter_mut().enumerate() {
            let dots = q4_k_8x8_dots(x, j, yb);
            let isum: i32 =
                dots.iter().enumerate().map(|(s, d)| x.scale_min(j, s).0 as i32 * d).sum();
            let min = f16(x.dmin[j]) * yb.d();
            let scale = f16(x.d[j]) * yb.d();
            *a -= q4_k_bias(x, j, yb) as f32 * min;
            *a += isum as f32 * scale;
        }
    }
    acc
}

/// A row's sub-block dots and (scale, min) pairs.
type RowParts = ([i32; 8], [(u8, u8); 8]);

/// Per row j of one `block_q5_Kx8` (8-byte interleave): its five-bit codes dotted with
/// the activation, per sub-block, and its (scale, min) pairs.
fn q5_k_8x8_parts(x: &BlockQ5Kx8, y: &BlockQ8K) -> [RowParts; 8] {
    let dot = crate::arch::aarch64::neon_repack::kernels::q5_kx8_dots(x, 8, y);
    core::array::from_fn(|j| {
        (core::array::from_fn(|s| dot[s][j]), core::array::from_fn(|s| x.scale_min(j, s)))
    })
}

/// `ggml_gemv_q5_K_8x8_q8_K` for one group of 8 columns: per pair p of sub-blocks,
/// `acc = fma(d_c d_y, float(sc_2p * dot_2p), acc)`, `acc = fma(d_c d_y, float(sc_2p+1 *
/// dot_2p+1), acc)` (`vfmaq_f32`), then `acc = acc - round(dmin_c d_y * float(m_2p *
/// S_2p + m_2p+1 * S_2p+1))` (`vmlsq_f32`, unfused), S the wrapping i16 pair sums of
/// `bsums`.
pub fn gemv_q5_k_8x8(blocks: &[BlockQ5Kx8], y: &[BlockQ8K]) -> [f32; 8] {
    crate::accelerated!(slots::GEMV_Q5_K_8X8, (blocks, y));
    let mut acc = [0.0f32; 8];
    for (x, yb) in blocks.iter().zip(y) {
        let s: [i32; 8] =
            core::array::from_fn(|sb| yb.bsum(2 * sb).wrapping_add(yb.bsum(2 * sb + 1)) as i32);
        let parts = q5_k_8x8_parts(x, yb);
        for (j, a) in acc.iter_mut().enumerate() {
            let (dots, sm) = parts[j];
            let scale = f16(x.d[j]) * yb.d();
            let min = f16(x.dmin[j]) * yb.d();
            for p in 0..4 {
                *a = scale.mul_add((sm[2 * p].0 as i32 * dots[2 * p]) as f32, *a);
                *a = scale.mul_add((sm[2 * p + 1].0 as i32 * dots[2 * p + 1]) as f32, *a);
                let bias = sm[2 * p].1 as i32 * s[2 * p] + sm[2 * p + 1].1 as i32 * s[2 * p + 1];
                *a -= min * bias as f32;
            }
        }
    }
    acc
}

/// `ggml_gemm_q5_K_8x8_q8_K` for one group of 8 columns and one activation row: per
/// superblock `acc = acc - round(float(bias) * dmin_c d_y)`, then `acc = acc +
/// round(float(isum) * d_c d_y)` (`vmlsq_f32`, `vmlaq_f32`, unfused), as
/// [`gemm_q4_k_8x8`].
pub fn gemm_q5_k_8x8(blocks: &[BlockQ5Kx8], y: &[BlockQ8K]) -> [f32; 8] {
    crate::accelerated!(slots::GEMM_Q5_K_8X8, (blocks, y));
    let mut acc = [0.0f32; 8];
    for (x, yb) in blocks.iter().zip(y) {
        let s: [i32; 8] =
            core::array::from_fn(|sb| yb.bsum(2 * sb).wrapping_add(yb.bsum(2 * sb + 1)) as i32);
        let parts = q5_k_8x8_parts(x, yb);
        for (j, a) in acc.iter_mut().enumerate() {
            let (dots, sm) = parts[j];
            let isum: i32 = (0..8).map(|t| sm[t].0 as i32 * dots[t]).sum();
            let bias: i32 = (0..8).map(|t| sm[t].1 as i32 * s[t]).sum();
            let min = f16(x.dmin[j]) * yb.d();
            let scale = f16(x.d[j]) * yb.d();
            *a -= bias as f32 * min;
            *a += isum as f32 * scale;
        }
    }
    acc
}

/// `ggml_gemv_q4_0_4x8_q8_0` (and, per row, `ggml_gemm_q4_0_4x8_q8_0`) for one group of
/// 4 columns.
pub fn gemv_q4_0_4x8(blocks: &[BlockQ4_0x4], y: &[BlockQ8_0]) -> [f32; 4] {
    crate::arch::aarch64::neon_repack::kernels::gemv_q4_0_4xil(blocks, 8, y)
}

/// `ggml_gemv_q8_0_4x8_q8_0` (and, per row, `ggml_gemm_q8_0_4x8_q8_0`) for one group of
/// 4 columns.
pub fn gemv_q8_0_4x8(blocks: &[BlockQ8_0x4], y: &[BlockQ8_0]) -> [f32; 4] {
    crate::arch::aarch64::neon_repack::kernels::gemv_q8_0_4xil(blocks, 8, y)
}

/// The slots of this file's entry points (see [`crate::accel`]), filled by
/// `tiercheck-accel` (its `src/arch/aarch64/i8mm_repack/kernels.rs`).
pub mod slots {
    // A slot's type is its entry point's signature, spelt out.
    #![allow(clippy::type_complexity)]

    use super::*;
    use crate::accel::Slot;

    /// [`gemv_q4_k_8x8`].
    pub static GEMV_Q4_K_8X8: Slot<fn(&[BlockQ4Kx8], &[BlockQ8K]) -> [f32; 8]> = Slot::new();
    /// [`gemm_q4_k_8x8`].
    pub static GEMM_Q4_K_8X8: Slot<fn(&[BlockQ4Kx8], &[BlockQ8K]) -> [f32; 8]> = Slot::new();
    /// [`gemv_q5_k_8x8`].
    pub static GEMV_Q5_K_8X8: Slot<fn(&[BlockQ5Kx8], &[BlockQ8K]) -> [f32; 8]> = Slot::new();
    /// [`gemm_q5_k_8x8`].
    pub static GEMM_Q5_K_8X8: Slot<fn(&[BlockQ5Kx8], &[BlockQ8K]) -> [f32; 8]> = Slot::new();
}
