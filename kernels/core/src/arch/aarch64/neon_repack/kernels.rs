//! Portable twin of ggml's NEON dotprod repacked kernels (`ggml-cpu/arch/arm/repack.cpp`,
//! built by GCC with `-march=armv8.2-a+dotprod`): q4_K 8x4, q4_0 4x4 and q8_0 4x4 gemv
//! and gemm. Integer parts (`sdot` by lane, `vmlal_s16`, `vmulq_s32`) are exact for
//! these operand ranges. GCC keeps `vmlaq_f32` / `vmlsq_f32` unfused (`arm_neon.h`
//! implements them with `__builtin_aarch64_float_mla/mls`), `vfmaq_f32` is one fused
//! multiply-add. Per output column j the float order is:
//!
//! - `ggml_gemv_q4_K_8x4_q8_K` and, per activation row, `ggml_gemm_q4_K_8x4_q8_K`: per
//!   superblock, s = f16(d_j) * d_y and m = f16(dmin_j) * d_y; for each pair p (0..4) of
//!   sub-blocks acc = fma(s, float(sc_2p * dot_2p + sc_2p+1 * dot_2p+1), acc); then
//!   acc = acc - round(float(bias) * m) (`vmlsq_f32`, unfused), bias = sum over the 8
//!   sub-blocks of min_s * S_s (S_s = `bsums[2s] + bsums[2s+1]`).
//! - `ggml_gemv_q4_0_4x4_q8_0` and `ggml_gemm_q4_0_4x4_q8_0` (inline assembly, the same
//!   `fmul` + `fmla` per block): acc = fma(float(isum), f16(d_y) * f16(d_j), acc).
//! - `ggml_gemv_q8_0_4x4_q8_0`: acc = fma(float(isum), f16(d_y) * f16(d_j), acc).
//! - `ggml_gemm_q8_0_4x4_q8_0`: acc = acc + round((f16(d_j) * f16(d_y)) * float(isum))
//!   (`vmlaq_f32`, unfused).
//! - `ggml_gemv_q6_K_8x4_q8_K`: per superblock, isum = sum over the 16 sub-blocks of
//!   sc_s * sum (q - 32) * a (exact; ggml forms it as the unsigned 6-bit dot minus
//!   `32 * sum sc_s * bsum_s`), then acc = fma(float(isum), f16(d_j) * d_y, acc): the
//!   source writes `vmulq_f32` then `vaddq_f32`, which GCC contracts into one `fmla`
//!   (read off the dotprod library's disassembly), so it equals the plain
//!   `ggml_vec_dot_q6_K_q8_K`.
//! - `ggml_gemm_q6_K_8x4_q8_K`: the same isum (the weights shifted by -32 before the
//!   `sdot`s), then acc = acc + round(float(isum) * round(f16(d_j) * d_y)) (`vmlaq_f32`,
//!   unfused: no `fmla` in the function's disassembly).
//!
//! The gemm rows' activations: q8_0 by `ggml_quantize_mat_q8_0_4x4` (NEON), which equals
//! the NEON row quantizer row by row; q8_K by the generic `ggml_quantize_mat_q8_K_4x4`,
//! whose `nearest_int(x * iscale)` GCC contracts as in `quantize_row_q8_K_ref`, so it
//! equals the aarch64 row rule row by row (checked against the oracle).
//! The integer stages (Q4_K, Q5_K and Q6_K eight rows, Q4_0, Q8_0 and IQ4_NL four rows
//! per block) and the Q4_K, Q5_K, Q6_K, Q4_0, Q8_0 and IQ4_NL gemv run their accelerated
//! form where [`crate::accel`] allows; the float operations are the same in both forms.
//! Native counterpart: `tiercheck-aarch64` (`neon_repack::kernels`), same names.

use crate::arch::aarch64::neon::vec_dot::q6_k_isum;
use crate::blocks::iq4_nl::KVALUES_IQ4NL;
use crate::blocks::{BlockQ8K, BlockQ8_0};
use crate::fp16::f16_bits_to_f32;
use crate::repack::{BlockIq4Nlx4, BlockQ4Kx8, BlockQ4_0x4, BlockQ5Kx8, BlockQ6Kx8, BlockQ8_0x4};

#[inline]
fn f16(b: [u8; 2]) -> f32 {
    f16_bits_to_f32(u16::from_le_bytes(b))
}

/// `ggml_gemv_q4_K_8x4_q8_K` for one group of 8 columns (and, per activation row,
/// `ggml_gemm_q4_K_8x4_q8_K`, whose arithmetic per row is the same).
pub fn gemv_q4_k_8x4(blocks: &[BlockQ4Kx8], y: &[BlockQ8K]) -> [f32; 8] {
    crate::accelerated!(slots::GEMV_Q4_K_8X4, (blocks, y));
    let mut acc = [0.0f32; 8];
    for (x, yb) in blocks.iter().zip(y) {
        let s: [i32; 8] =
            core::array::from_fn(|sb| yb.bsum(2 * sb).wrapping_add(yb.bsum(2 * sb + 1)) as i32);
        for (j, a) in acc.iter_mut().enumerate() {
            let scale = f16(x.d[j]) * yb.d();
            let min = f16(x.dmin[j]) * yb.d();
            let mut bias = 0i32;
            for p in 0..4 {
                let (mut lo, mut hi) = (0i32, 0i32);
                for l in 0..32 {
                    let q = x.q_il4(j, 32 * p + l);
                    lo += (q & 0xF) as i32 * yb.q(64 * p + l) as i32;
                    hi += (q >> 4) as i32 * yb.q(64 * p + 32 + l) as i32;
                }
                let (sc0, m0) = x.scale_min(j, 2 * p);
                let (sc1, m1) = x.scale_min(j, 2 * p + 1);
                *a = scale.mul_add((sc0 as i32 * lo + sc1 as i32 * hi) as f32, *a);
                bias += m0 as i32 * s[2 * p] + m1 as i32 * s[2 * p + 1];
            }
            *a -= bias as f32 * min;
        }
    }
    acc
}

/// `ggml_gemv_q5_K_8x4_q8_K` for one group of 8 columns (and, per activation row,
/// `ggml_gemm_q5_K_8x4_q8_K`): [`gemv_q4_k_8x4`]'s order with the 5-bit codes (the low
/// nibble and the `qh` bit 2p of the pair's low half, bit 2p + 1 of its high half).
pub fn gemv_q5_k_8x4(blocks: &[BlockQ5Kx8], y: &[BlockQ8K]) -> [f32; 8] {
    crate::accelerated!(slots::GEMV_Q5_K_8X4, (blocks, y));
    let mut acc = [0.0f32; 8];
    for (x, yb) in blocks.iter().zip(y) {
        let s: [i32; 8] =
            core::array::from_fn(|sb| yb.bsum(2 * sb).wrapping_add(yb.bsum(2 * sb + 1)) as i32);
        let dot = q5_kx8_dots(x, 4, yb);
        for (j, a) in acc.iter_mut().enumerate() {
            let scale = f16(x.d[j]) * yb.d();
            let min = f16(x.dmin[j]) * yb.d();
            let mut bias = 0i32;
            for p in 0..4 {
                let (lo, hi) = (dot[2 * p][j], dot[2 * p + 1][j]);
                let (sc0, m0) = x.scale_min(j, 2 * p);
                let (sc1, m1) = x.scale_min(j, 2 * p + 1);
                *a = scale.mul_add((sc0 as i32 * lo + sc1 as i32 * hi) as f32, *a);
                bias += m0 as i32 * s[2 * p] + m1 as i32 * s[2 * p + 1];
            }
            *a -= bias as f32 * min;
        }
    }
    acc
}

/// The sub-block dots of the eight rows of one `block_q5_Kx8` (interleave `il`, 4 or 8)
/// with one Q8_K block: `dot[s][r]` = sum over sub-block s's 32 values (32s..32s+32) of
/// row r of the 5-bit code times the activation (exact).
pub fn q5_kx8_dots(x: &BlockQ5Kx8, il: usize, yb: &BlockQ8K) -> [[i32; 8]; 8] {
    crate::accelerated!(slots::Q5_KX8_DOTS, (x, il, yb));
    let mut dot = [[0i32; 8]; 8];
    for r in 0..8 {
        let row = x.row(r, il);
        for (s, d) in dot.iter_mut().enumerate() {
            d[r] = (32 * s..32 * s + 32).map(|i| row.quant(i) as i32 * yb.q(i) as i32).sum();
        }
    }
    dot
}

/// `ggml_gemv_iq4_nl_4x4_q8_0` (and, per row, `ggml_gemm_iq4_nl_4x4_q8_0`) for one group
/// of 4 columns: per block, each column's exact integer dot of the table values with the
/// q8_0 bytes, then `acc[c] = acc[c] + round(round(d_y * d_c) * float(isum_c))`
/// (`vmlaq_f32`, unfused; the gemm's `vmulq_laneq_f32(b_d, a_d, m)` is the same product).
pub fn gemv_iq4_nl_4x4(blocks: &[BlockIq4Nlx4], y: &[BlockQ8_0]) -> [f32; 4] {
    crate::accelerated!(slots::GEMV_IQ4_NL_4X4, (blocks, y));
    let mut acc = [0.0f32; 4];
    for (x, yb) in blocks.iter().zip(y) {
        let isum = iq4_nlx4_isums(x, yb);
        for (c, a) in acc.iter_mut().enumerate() {
            *a += yb.d() * f16(x.d[c]) * isum[c] as f32;
        }
    }
    acc
}

/// The four columns' exact integer dots of one `block_iq4_nlx4` (4-byte interleave) with
/// one Q8_0 block: `sum_o v(lo_o) * y[o] + v(hi_o) * y[o + 16]`, v the IQ4_NL table.
pub fn iq4_nlx4_isums(x: &BlockIq4Nlx4, yb: &BlockQ8_0) -> [i32; 4] {
    crate::accelerated!(slots::IQ4_NLX4_ISUMS, (x, yb));
    core::array::from_fn(|c| {
        let mut isum = 0i32;
        for o in 0..16 {
            let q = x.q(c, o);
            isum += KVALUES_IQ4NL[(q & 0xF) as usize] as i32 * yb.q(o) as i32;
            isum += KVALUES_IQ4NL[(q >> 4) as usize] as i32 * yb.q(o + 16) as i32;
        }
        isum
    })
}

/// `ggml_gemv_q4_0_4x4_q8_0` (and, per row, `ggml_gemm_q4_0_4x4_q8_0`) for one group of
/// 4 columns.
pub fn gemv_q4_0_4x4(blocks: &[BlockQ4_0x4], y: &[BlockQ8_0]) -> [f32; 4] {
    gemv_q4_0_4xil(blocks, 4, y)
}

/// The four rows' exact integer dots of one `block_q4_0x4` (interleave `il`, 4 or 8)
/// with one Q8_0 block (accelerated: [`slots::Q4_0X4_ISUMS`]).
#[inline]
pub fn q4_0x4_isums(x: &BlockQ4_0x4, il: usize, yb: &BlockQ8_0) -> [i32; 4] {
    crate::accelerated!(slots::Q4_0X4_ISUMS, (x, il, yb));
    core::array::from_fn(|j| {
        let mut isum = 0i32;
        for o in 0..16 {
            let q = if il == 4 { x.q(j, o) } else { x.q_il8(j, o) };
            isum += ((q & 0xF) as i32 - 8) * yb.q(o) as i32;
            isum += ((q >> 4) as i32 - 8) * yb.q(o + 16) as i32;
        }
        isum
    })
}

/// The four rows' exact integer dots of one `block_q8_0x4` (interleave `il`, 4 or 8)
/// with one Q8_0 block (accelerated: [`slots::Q8_0X4_ISUMS`]).
#[inline]
pub fn q8_0x4_isums(x: &BlockQ8_0x4, il: usize, yb: &BlockQ8_0) -> [i32; 4] {
    crate::accelerated!(slots::Q8_0X4_ISUMS, (x, il, yb));
    core::array::from_fn(|j| {
        (0..32)
            .map(|o| if il == 4 { x.q(j, o) } else { x.q_il8(j, o) } as i32 * yb.q(o) as i32)
            .sum()
    })
}

/// The arithmetic of `ggml_gemv_q4_0_4x4_q8_0` (`il` 4) and the i8mm build's
/// `ggml_gemv_q4_0_4x8_q8_0` (`il` 8): `acc = fma(float(isum), d_y * d_j, acc)`.
pub fn gemv_q4_0_4xil(blocks: &[BlockQ4_0x4], il: usize, y: &[BlockQ8_0]) -> [f32; 4] {
    crate::accelerated!(slots::GEMV_Q4_0_4XIL, (blocks, il, y));
    gemv_legacy_x4(blocks, y, |x, yb| (q4_0x4_isums(x, il, yb), x.d))
}

/// `acc[j] = fma(float(isum[j]), d_y * f16(d[j]), acc[j])` over the blocks, with
/// `isums(x, y)` giving a block's four integer sums and its four f16 scales.
#[inline(always)]
fn gemv_legacy_x4<B>(
    blocks: &[B],
    y: &[BlockQ8_0],
    isums: impl Fn(&B, &BlockQ8_0) -> ([i32; 4], [[u8; 2]; 4]),
) -> [f32; 4] {
    let mut acc = [0.0f32; 4];
    for (x, yb) in blocks.iter().zip(y) {
        let (isum, d) = isums(x, yb);
        for (j, a) in acc.iter_mut().enumerate() {
            *a = (isum[j] as f32).mul_add(yb.d() * f16(d[j]), *a);
        }
    }
    acc
}

/// The arithmetic of `ggml_gemv_q8_0_4x4_q8_0` (`il` 4) and the i8mm build's
/// `ggml_gemv_q8_0_4x8_q8_0` (`il` 8): `acc = fma(float(isum), d_y * d_j, acc)`.
pub fn gemv_q8_0_4xil(blocks: &[BlockQ8_0x4], il: usize, y: &[BlockQ8_0]) -> [f32; 4] {
    crate::accelerated!(slots::GEMV_Q8_0_4XIL, (blocks, il, y));
    gemv_legacy_x4(blocks, y, |x, yb| (q8_0x4_isums(x, il, yb), x.d))
}

/// `ggml_gemv_q8_0_4x4_q8_0` for one group of 4 columns.
pub fn gemv_q8_0_4x4(blocks: &[BlockQ8_0x4], y: &[BlockQ8_0]) -> [f32; 4] {
    gemv_q8_0_4xil(blocks, 4, y)
}

/// `ggml_gemm_q8_0_4x4_q8_0` for one group of 4 columns and one activation row (the
/// kernel computes four rows at once; each row's arithmetic is independent).
pub fn gemm_q8_0_4x4(blocks: &[BlockQ8_0x4], y: &[BlockQ8_0]) -> [f32; 4] {
    let mut acc = [0.0f32; 4];
    for (x, yb) in blocks.iter().zip(y) {
        let isum = q8_0x4_isums(x, 4, yb);
        for (j, a) in acc.iter_mut().enumerate() {
            *a += (f16(x.d[j]) * yb.d()) * isum[j] as f32;
        }
    }
    acc
}

/// Per-superblock integer sums of the 8 columns of one `block_q6_Kx8` (interleave `il`)
/// against one Q8_K block.
pub fn q6_k_x8_isums(x: &BlockQ6Kx8, il: usize, yb: &BlockQ8K) -> [i32; 8] {
    if il == 4 || il == 8 {
        crate::accelerated!(slots::Q6_K_X8_ISUMS, (x, il, yb));
    }
    core::array::from_fn(|j| q6_k_isum(&x.row(j, il), yb))
}

/// `ggml_gemv_q6_K_8x4_q8_K` for one group of 8 columns.
pub fn gemv_q6_k_8x4(blocks: &[BlockQ6Kx8], y: &[BlockQ8K]) -> [f32; 8] {
    crate::accelerated!(slots::GEMV_Q6_K_8X4, (blocks, y));
    let mut acc = [0.0f32; 8];
    for (x, yb) in blocks.iter().zip(y) {
        let isum = q6_k_x8_isums(x, 4, yb);
        for (j, a) in acc.iter_mut().enumerate() {
            *a = (isum[j] as f32).mul_add(f16(x.d[j]) * yb.d(), *a);
        }
    }
    acc
}

/// `ggml_gemm_q6_K_8x4_q8_K` for one group of 8 columns and one activation row (the
/// kernel computes four rows at once; each row's arithmetic is independent). Also the
/// arithmetic of the i8mm build's `ggml_gemv_q6_K_8x8_q8_K` and `ggml_gemm_q6_K_8x8_q8_K`
/// with `il` = 8.
pub fn gemm_q6_k_8xil(blocks: &[BlockQ6Kx8], il: usize, y: &[BlockQ8K]) -> [f32; 8] {
    if il == 4 || il == 8 {
        crate::accelerated!(slots::GEMM_Q6_K_8XIL, (blocks, il, y));
    }
    let mut acc = [0.0f32; 8];
    for (x, yb) in blocks.iter().zip(y) {
        let isum = q6_k_x8_isums(x, il, yb);
        for (j, a) in acc.iter_mut().enumerate() {
            *a += isum[j] as f32 * (f16(x.d[j]) * yb.d());
        }
    }
    acc
}

/// `ggml_gemm_q6_K_8x4_q8_K` (see [`gemm_q6_k_8xil`]).
pub fn gemm_q6_k_8x4(blocks: &[BlockQ6Kx8], y: &[BlockQ8K]) -> [f32; 8] {
    gemm_q6_k_8xil(blocks, 4, y)
}

/// The slots of this file's entry points (see [`crate::accel`]), filled by
/// `tiercheck-accel` (its `src/arch/aarch64/neon_repack/kernels.rs`).
pub mod slots {
    // A slot's type is its entry point's signature, spelt out.
    #![allow(clippy::type_complexity)]

    use super::*;
    use crate::accel::Slot;

    /// [`gemv_q4_k_8x4`].
    pub static GEMV_Q4_K_8X4: Slot<fn(&[BlockQ4Kx8], &[BlockQ8K]) -> [f32; 8]> = Slot::new();
    /// [`q4_0x4_isums`].
    pub static Q4_0X4_ISUMS: Slot<fn(&BlockQ4_0x4, usize, &BlockQ8_0) -> [i32; 4]> = Slot::new();
    /// [`q8_0x4_isums`].
    pub static Q8_0X4_ISUMS: Slot<fn(&BlockQ8_0x4, usize, &BlockQ8_0) -> [i32; 4]> = Slot::new();
    /// [`gemv_q4_0_4xil`].
    pub static GEMV_Q4_0_4XIL: Slot<fn(&[BlockQ4_0x4], usize, &[BlockQ8_0]) -> [f32; 4]> =
        Slot::new();
    /// [`gemv_q8_0_4xil`].
    pub static GEMV_Q8_0_4XIL: Slot<fn(&[BlockQ8_0x4], usize, &[BlockQ8_0]) -> [f32; 4]> =
        Slot::new();
    /// [`q6_k_x8_isums`] (interleave 4 or 8).
    pub static Q6_K_X8_ISUMS: Slot<fn(&BlockQ6Kx8, usize, &BlockQ8K) -> [i32; 8]> = Slot::new();
    /// [`gemv_q5_k_8x4`].
    pub static GEMV_Q5_K_8X4: Slot<fn(&[BlockQ5Kx8], &[BlockQ8K]) -> [f32; 8]> = Slot::new();
    /// [`q5_kx8_dots`].
    pub static Q5_KX8_DOTS: Slot<fn(&BlockQ5Kx8, usize, &BlockQ8K) -> [[i32; 8]; 8]> = Slot::new();
    /// [`gemv_iq4_nl_4x4`].
    pub static GEMV_IQ4_NL_4X4: Slot<fn(&[BlockIq4Nlx4], &[BlockQ8_0]) -> [f32; 4]> = Slot::new();
    /// [`iq4_nlx4_isums`].
    pub static IQ4_NLX4_ISUMS: Slot<fn(&BlockIq4Nlx4, &BlockQ8_0) -> [i32; 4]> = Slot::new();
    /// [`gemv_q6_k_8x4`].
    pub static GEMV_Q6_K_8X4: Slot<fn(&[BlockQ6Kx8], &[BlockQ8K]) -> [f32; 8]> = Slot::new();
    /// [`gemm_q6_k_8xil`] (interleave 4 or 8).
    pub static GEMM_Q6_K_8XIL: Slot<fn(&[BlockQ6Kx8], usize, &[BlockQ8K]) -> [f32; 8]> =
        Slot::new();
}
