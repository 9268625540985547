//! Portable twin of the two-rows-at-a-time vec_dot of ggml's aarch64 i8mm build
//! (`ggml-cpu/arch/arm/quants.c` with `__ARM_FEATURE_MATMUL_INT8`, the `nrc == 2` branch
//! of `ggml_vec_dot_q4_0_q8_0`, `ggml_vec_dot_q8_0_q8_0`, `ggml_vec_dot_q4_K_q8_K` and
//! `ggml_vec_dot_q6_K_q8_K`). One call multiplies two weight rows x0, x1 by two
//! activation rows y0, y1: the four dot products of the 2x2 tile, their integer parts by
//! `smmla` (`vmmlaq_s32`, exact for these ranges, so only the float order matters).
//!
//! Per output (x, y) and block (Q4_0, Q8_0: 32 values) or superblock (Q4_K, Q6_K: 256),
//! with every product of two scales one f32 multiply and GCC's `vmlaq_f32` /
//! `vmlsq_f32` kept unfused (a multiply then an add, each rounded):
//!
//! - Q4_0, Q8_0: `acc = acc + round(float(isum) * round(f16(d_x) * f16(d_y)))`, isum the
//!   block's integer dot (Q4_0 codes minus 8);
//! - Q4_1 (`ggml_vec_dot_q4_1_q8_1`): the same with the unsigned codes 0..15 (the scale
//!   product of two f16 values is exact), and beside it `summ = summ + f16(m_x) *
//!   f16(s_y)` per block (exact products, `vaddq_f32`); the output is `acc + summ`;
//! - Q4_K: `acc = acc - round(float(bias) * round(f16(dmin_x) * d_y))`, then
//!   `acc = acc + round(float(isum) * round(f16(d_x) * d_y))`, isum = sum over the 8
//!   sub-blocks of sc_s * dot_s, bias = sum of min_s * (`bsums[2s] + bsums[2s+1]`);
//! - Q6_K: `acc = acc + round(float(isum) * round(f16(d_x) * d_y))`, isum = sum over the
//!   16 sub-blocks of sc_s * sum (q - 32) * a (ggml: the unsigned 6-bit dot minus
//!   `32 * sum sc_s * bsum_s`).
//!
//! The nrc == 1 kernels of the same build are the `aarch64-neon` ones (the dotprod build
//! compiles the same source). Native counterpart: `tiercheck-aarch64` (`i8mm::vec_dot2`).

use crate::arch::aarch64::neon::vec_dot::q6_k_isum;
use crate::blocks::q4_k::scale_min_k4;
use crate::blocks::{BlockQ4K, BlockQ4_0, BlockQ4_1, BlockQ6K, BlockQ8K, BlockQ8_0, BlockQ8_1};

/// The 2x2 tile `[[x0·y0, x1·y0], [x0·y1, x1·y1]]` (activation row outer, as ggml
/// stores it: `s[0], s[1]` then `s[bs], s[bs + 1]`).
pub type Tile = [[f32; 2]; 2];

/// The exact integer dot product of one Q4_0 block (values minus 8) with one Q8_0 block.
pub fn q4_0_isum(x: &BlockQ4_0, y: &BlockQ8_0) -> i32 {
    crate::accelerated!(slots::Q4_0_ISUM, (x, y));
    (0..16)
        .map(|o| {
            ((x.qs[o] & 0xF) as i32 - 8) * y.q(o) as i32
                + ((x.qs[o] >> 4) as i32 - 8) * y.q(o + 16) as i32
        })
        .sum()
}

/// The exact integer dot product of two Q8_0 blocks.
pub fn q8_0_isum(x: &BlockQ8_0, y: &BlockQ8_0) -> i32 {
    crate::accelerated!(slots::Q8_0_ISUM, (x, y));
    (0..32).map(|o| x.q(o) as i32 * y.q(o) as i32).sum()
}

/// `ggml_vec_dot_q4_1_q8_1` with `nrc == 2`.
pub fn vec_dot2_q4_1_q8_1(x: [&[BlockQ4_1]; 2], y: [&[BlockQ8_1]; 2]) -> Tile {
    let mut t = [[0.0f32; 2]; 2];
    let mut summ = [[0.0f32; 2]; 2];
    for b in 0..x[0].len() {
        for yi in 0..2 {
            for xi in 0..2 {
                let (xb, yb) = (&x[xi][b], &y[yi][b]);
                let isum: i32 = (0..16)
                    .map(|o| {
                        (xb.qs[o] & 0xF) as i32 * yb.qs[o] as i8 as i32
                            + (xb.qs[o] >> 4) as i32 * yb.qs[o + 16] as i8 as i32
                    })
                    .sum();
                t[yi][xi] += isum as f32 * (xb.d() * yb.d());
                summ[yi][xi] += xb.m() * yb.s();
            }
        }
    }
    core::array::from_fn(|yi| core::array::from_fn(|xi| t[yi][xi] + summ[yi][xi]))
}

/// `ggml_vec_dot_q4_0_q8_0` with `nrc == 2`.
pub fn vec_dot2_q4_0_q8_0(x: [&[BlockQ4_0]; 2], y: [&[BlockQ8_0]; 2]) -> Tile {
    let mut t = [[0.0f32; 2]; 2];
    for b in 0..x[0].len() {
        for (yi, row) in t.iter_mut().enumerate() {
            for (xi, acc) in row.iter_mut().enumerate() {
                let (xb, yb) = (&x[xi][b], &y[yi][b]);
                *acc += q4_0_isum(xb, yb) as f32 * (xb.d() * yb.d());
            }
        }
    }
    t
}

/// `ggml_vec_dot_q8_0_q8_0` with `nrc == 2`.
pub fn vec_dot2_q8_0_q8_0(x: [&[BlockQ8_0]; 2], y: [&[BlockQ8_0]; 2]) -> Tile {
    let mut t = [[0.0f32; 2]; 2];
    for b in 0..x[0].len() {
        for (yi, row) in t.iter_mut().enumerate() {
            for (xi, acc) in row.iter_mut().enumerate() {
                let (xb, yb) = (&x[xi][b], &y[yi][b]);
                *acc += q8_0_isum(xb, yb) as f32 * (xb.d() * yb.d());
            }
        }
    }
    t
}

/// The exact (isum, bias) of one Q4_K superblock against one Q8_K block.
pub fn q4_k_isum_bias(x: &BlockQ4K, y: &BlockQ8K) -> (i32, i32) {
    crate::accelerated!(slots::Q4_K_ISUM_BIAS, (x, y));
    let (mut isum, mut bias) = (0i32, 0i32);
    for s in 0..8 {
        let (sc, mn) = scale_min_k4(s, &x.scales);
        let q = &x.qs[32 * (s / 2)..32 * (s / 2) + 32];
        let dot: i32 = (0..32)
            .map(|l| {
                let v = if s % 2 == 0 { q[l] & 0xF } else { q[l] >> 4 };
                v as i32 * y.q(32 * s + l) as i32
            })
            .sum();
        isum += sc as i32 * dot;
        bias += mn as i32 * (y.bsum(2 * s) as i32 + y.bsum(2 * s + 1) as i32);
    }
    (isum, bias)
}

/// `ggml_vec_dot_q4_K_q8_K` with `nrc == 2`.
pub fn vec_dot2_q4_k_q8_k(x: [&[BlockQ4K]; 2], y: [&[BlockQ8K]; 2]) -> Tile {
    let mut t = [[0.0f32; 2]; 2];
    for b in 0..x[0].len() {
        for (yi, row) in t.iter_mut().enumerate() {
            for (xi, acc) in row.iter_mut().enumerate() {
                let (xb, yb) = (&x[xi][b], &y[yi][b]);
                let (isum, bias) = q4_k_isum_bias(xb, yb);
                *acc -= bias as f32 * (xb.dmin() * yb.d());
                *acc += isum as f32 * (xb.d() * yb.d());
            }
        }
    }
    t
}

/// `ggml_vec_dot_q6_K_q8_K` with `nrc == 2`.
pub fn vec_dot2_q6_k_q8_k(x: [&[BlockQ6K]; 2], y: [&[BlockQ8K]; 2]) -> Tile {
    let mut t = [[0.0f32; 2]; 2];
    for b in 0..x[0].len() {
        for (yi, row) in t.iter_mut().enumerate() {
            for (xi, acc) in row.iter_mut().enumerate() {
                let (xb, yb) = (&x[xi][b], &y[yi][b]);
                *acc += q6_k_isum(xb, yb) as f32 * (xb.d() * yb.d());
            }
        }
    }
    t
}

/// The slots of this file's entry points (see [`crate::accel`]), filled by
/// `tiercheck-accel` (its `src/arch/aarch64/i8mm/vec_dot2.rs`).
pub mod slots {
    // A slot's type is its entry point's signature, spelt out.
    #![allow(clippy::type_complexity)]

    use super::*;
    use crate::accel::Slot;

    /// [`q4_0_isum`].
    pub static Q4_0_ISUM: Slot<fn(&BlockQ4_0, &BlockQ8_0) -> i32> = Slot::new();
    /// [`q8_0_isum`].
    pub static Q8_0_ISUM: Slot<fn(&BlockQ8_0, &BlockQ8_0) -> i32> = Slot::new();
    /// [`q4_k_isum_bias`].
    pub static Q4_K_ISUM_BIAS: Slot<fn(&BlockQ4K, &BlockQ8K) -> (i32, i32)> = Slot::new();
}
