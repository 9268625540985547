//! Portable twin of llamafile's `tinyBLAS_Q0_ARM` (`ggml-cpu/llamafile/sgemm.cpp`) as GCC
//! compiles it in ggml's aarch64 dotprod build: the plain Q4_0 and Q8_0 matmul when the
//! activation has at least two rows (`llamafile_sgemm` refuses `n < 2`; ggml-cpu calls
//! it after quantizing the activations to Q8_0 by the row rule).
//!
//! Per output (weight row, activation row) a 4-float accumulator `c`; per block, the
//! two `sdot`s of the low and high 16 quants give four integer sums, lane t covering the
//! values 4t..4t+4 and 16+4t..16+4t+4 (Q4_0 codes minus 8); then, per lane,
//! `c[t] = c[t] + round(float(isum_t) * round(f16(d_x) * f16(d_y)))` — the source's
//! `vmlaq_n_f32` is `a + b * c` in GCC's `arm_neon.h`, and the dotprod library's code is
//! an `fmul` by the scalar then an `fadd` (no `fmla`); at the end `hsum` =
//! `vaddvq_f32` = `(c0 + c1) + (c2 + c3)`. Tiling (3x3 down to 1x1 tiles, split over
//! threads) changes which outputs are computed together, never an output's arithmetic.
//! Native counterpart: `tiercheck-aarch64` (`neon::tinyblas`).

use crate::blocks::{BlockQ4_0, BlockQ8_0};
use crate::GgmlType;

/// Whether the dotprod build multiplies plain `ty` weights by `m` activation rows with
/// `tinyBLAS_Q0_ARM`.
pub fn applies(ty: GgmlType, m: usize) -> bool {
    matches!(ty, GgmlType::Q4_0 | GgmlType::Q8_0) && m >= 2
}

fn finish(lanes: impl Iterator<Item = ([i32; 4], f32)>) -> f32 {
    let mut c = [0.0f32; 4];
    for (isum, d) in lanes {
        for t in 0..4 {
            c[t] += isum[t] as f32 * d;
        }
    }
    (c[0] + c[1]) + (c[2] + c[3])
}

/// One output of `tinyBLAS_Q0_ARM<block_q4_0>`.
pub fn dot_q4_0(x: &[BlockQ4_0], y: &[BlockQ8_0]) -> f32 {
    finish(x.iter().zip(y).map(|(xb, yb)| {
        let isum = core::array::from_fn(|t| {
            (4 * t..4 * t + 4)
                .map(|b| {
                    ((xb.qs[b] & 0xF) as i32 - 8) * yb.q(b) as i32
                        + ((xb.qs[b] >> 4) as i32 - 8) * yb.q(16 + b) as i32
                })
                .sum()
        });
        (isum, xb.d() * yb.d())
    }))
}

/// One output of `tinyBLAS_Q0_ARM<block_q8_0>`.
pub fn dot_q8_0(x: &[BlockQ8_0], y: &[BlockQ8_0]) -> f32 {
    finish(x.iter().zip(y).map(|(xb, yb)| {
        let isum = core::array::from_fn(|t| {
            (4 * t..4 * t + 4)
                .map(|b| {
                    xb.q(b) as i32 * yb.q(b) as i32 + xb.q(16 + b) as i32 * yb.q(16 + b) as i32
                })
                .sum()
        });
        (isum, xb.d() * yb.d())
    }))
}
