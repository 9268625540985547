//! Twins of ggml's AVX2 vec_dot kernels for the K-quant types beside Q4_K/Q6_K and for
//! IQ4_XS (`ggml_vec_dot_q2_K_q8_K`, `_q3_K_q8_K`, `_q5_K_q8_K`, `_iq4_xs_q8_K` in
//! `ggml-cpu/arch/x86/quants.c`, `__AVX2__` branches, compiled with FMA and GCC's
//! default contraction). Native counterparts with the same names: `tiercheck-x86_64`'s
//! `avx2::vec_dot`.
//!
//! Integer stage, exact for every input: lane t (of eight) of a superblock is the sum
//! over the 32-byte runs r of the scale of the sub-block holding byte b times the
//! products code x activation byte, over bytes b = 4t..4t+3 of each run. Q2_K codes
//! are 0..3 and Q5_K codes 0..31 (`maddubs` straight); Q3_K is `maddubs(low 2 bits) -
//! maddubs(4 where the high bit is clear)`; IQ4_XS takes the sign trick on its table
//! values (`maddubs(|x|, sign(y, x))`, see `mul_sum_i8_lanes`). Sub-blocks of 16 values
//! (Q2_K, Q3_K) give bytes 0..16 and 16..32 of a run different scales. No `maddubs`
//! pair saturates.
//!
//! Float order, per superblock (`d_y` the q8_K block's f32 scale):
//! - Q2_K: `d = d_y * d_x`, `dmin = -d_y * dmin_x`; first `acc[t] = fma(dmin,
//!   (float)(m_2t * bsum_2t + m_2t+1 * bsum_2t+1), acc[t])` (the 4-bit mins times the
//!   activation's 16-value sums, `madd_epi16`), then `acc[t] = fma(d, lane_t, acc[t])`;
//!   result `hsum_float_8(acc)`.
//! - Q3_K: `acc[t] = fma(d_y * d_x, lane_t, acc[t])` (scales `code - 32`);
//!   `hsum_float_8(acc)`.
//! - Q5_K: `summs = fma(dmin, (float)S, summs)` with `dmin = -d_y * dmin_x` and S =
//!   `(p0 + p1) + (p2 + p3)`, `p_i = m_2i * s_2i + m_2i+1 * s_2i+1`, s_j the wrapping
//!   i16 sum of bsums 2j and 2j+1 (`_mm_hadd_epi16`); then `acc[t] = fma(d_y * d_x,
//!   lane_t, acc[t])`; result `hsum_float_8(acc) + summs`.
//! - IQ4_XS: sub-blocks 0, 2, 4, 6 and 1, 3, 5, 7 sum into two integer vectors, added
//!   (exact); `acc[t] = fma(d_x * d_y, lane_t, acc[t])` (scales `code - 32`);
//!   `hsum_float_8(acc)`.

use super::{fma_lanes, hsum_float_8, mul_sum_i8_lanes};
use crate::blocks::iq4_nl::KVALUES_IQ4NL;
use crate::blocks::q2_k::crumb;
use crate::blocks::q4_k::scale_min_k4;
use crate::blocks::{BlockIq4Xs, BlockQ2K, BlockQ3K, BlockQ5K, BlockQ8K, QK_K};

/// Lanes of a superblock from its 256 signed codes (value order), each value's scale
/// (by 16-value sub-block, `scale16[i / 16]`) and the activation bytes: lane t =
/// sum over runs r of sum over b in 4t..4t+3 of scale * code * y. Exact (wrapping i32).
#[inline(always)]
fn scaled_lanes(code: &[i32; QK_K], scale16: &[i32; 16], y: &BlockQ8K) -> [i32; 8] {
    let mut lanes = [0i32; 8];
    for run in 0..QK_K / 32 {
        for b in 0..32 {
            let i = 32 * run + b;
            let p = scale16[i / 16] * (code[i] * y.qs[i] as i8 as i32);
            lanes[b / 4] = lanes[b / 4].wrapping_add(p);
        }
    }
    lanes
}

/// `ggml_vec_dot_q2_K_q8_K`, AVX2 path.
pub fn vec_dot_q2_k_q8_k(x: &[BlockQ2K], y: &[BlockQ8K]) -> f32 {
    crate::accelerated!(super::slots::VEC_DOT_Q2_K_Q8_K, (x, y));
    let mut acc = [0.0f32; 8];
    for (xb, yb) in x.iter().zip(y) {
        let d = yb.d() * xb.d();
        let dmin = -yb.d() * xb.dmin();
        let mins: [i32; 16] = core::array::from_fn(|s| (xb.scales[s] >> 4) as i32);
        let prod: [f32; 8] = core::array::from_fn(|t| {
            (mins[2 * t] * yb.bsum(2 * t) as i32 + mins[2 * t + 1] * yb.bsum(2 * t + 1) as i32)
                as f32
        });
        fma_lanes(dmin, &prod, &mut acc);
        let scale16: [i32; 16] = core::array::from_fn(|s| (xb.scales[s] & 0xF) as i32);
        let code: [i32; QK_K] = core::array::from_fn(|i| crumb(&xb.qs, i) as i32);
        let lanes = scaled_lanes(&code, &scale16, yb);
        fma_lanes(d, &lanes.map(|v| v as f32), &mut acc);
    }
    hsum_float_8(acc)
}

/// `ggml_vec_dot_q3_K_q8_K`, AVX2 path.
pub fn vec_dot_q3_k_q8_k(x: &[BlockQ3K], y: &[BlockQ8K]) -> f32 {
    crate::accelerated!(super::slots::VEC_DOT_Q3_K_Q8_K, (x, y));
    let mut acc = [0.0f32; 8];
    for (xb, yb) in x.iter().zip(y) {
        let d = yb.d() * xb.d();
        let scale16: [i32; 16] = core::array::from_fn(|s| xb.scale(s) as i32 - 32);
        let code: [i32; QK_K] = core::array::from_fn(|i| xb.quant(i));
        let lanes = scaled_lanes(&code, &scale16, yb);
        fma_lanes(d, &lanes.map(|v| v as f32), &mut acc);
    }
    hsum_float_8(acc)
}

/// `ggml_vec_dot_q5_K_q8_K`, AVX2 path.
pub fn vec_dot_q5_k_q8_k(x: &[BlockQ5K], y: &[BlockQ8K]) -> f32 {
    crate::accelerated!(super::slots::VEC_DOT_Q5_K_Q8_K, (x, y));
    let mut acc = [0.0f32; 8];
    let mut summs = 0.0f32;
    for (xb, yb) in x.iter().zip(y) {
        let d = yb.d() * xb.d();
        let dmin = -yb.d() * xb.dmin();
        let (mut sc, mut mn) = ([0i32; 8], [0i32; 8]);
        for j in 0..8 {
            let (s, m) = scale_min_k4(j, &xb.scales);
            (sc[j], mn[j]) = (s as i32, m as i32);
        }
        let s: [i32; 8] =
            core::array::from_fn(|j| yb.bsum(2 * j).wrapping_add(yb.bsum(2 * j + 1)) as i32);
        let p: [i32; 4] =
            core::array::from_fn(|i| mn[2 * i] * s[2 * i] + mn[2 * i + 1] * s[2 * i + 1]);
        let hsum = p[0].wrapping_add(p[1]).wrapping_add(p[2].wrapping_add(p[3]));
        summs = dmin.mul_add(hsum as f32, summs);
        let scale16: [i32; 16] = core::array::from_fn(|s| sc[s / 2]);
        let code: [i32; QK_K] = core::array::from_fn(|i| xb.quant(i) as i32);
        let lanes = scaled_lanes(&code, &scale16, yb);
        fma_lanes(d, &lanes.map(|v| v as f32), &mut acc);
    }
    hsum_float_8(acc) + summs
}

/// `ggml_vec_dot_iq4_xs_q8_K`, AVX2 path.
pub fn vec_dot_iq4_xs_q8_k(x: &[BlockIq4Xs], y: &[BlockQ8K]) -> f32 {
    crate::accelerated!(super::slots::VEC_DOT_IQ4_XS_Q8_K, (x, y));
    let mut acc = [0.0f32; 8];
    for (xb, yb) in x.iter().zip(y) {
        let mut lanes = [0i32; 8];
        for s in 0..QK_K / 32 {
            let qs = &xb.qs[16 * s..16 * s + 16];
            let qx: [i8; 32] = core::array::from_fn(|b| {
                KVALUES_IQ4NL[if b < 16 { qs[b] & 0xF } else { qs[b - 16] >> 4 } as usize]
            });
            let qy: [i8; 32] = core::array::from_fn(|b| yb.qs[32 * s + b] as i8);
            let ls = xb.scale(s) as i32 - 32;
            let l = mul_sum_i8_lanes(&qx, &qy);
            for t in 0..8 {
                lanes[t] = lanes[t].wrapping_add(ls * l[t]);
            }
        }
        fma_lanes(xb.d() * yb.d(), &lanes.map(|v| v as f32), &mut acc);
    }
    hsum_float_8(acc)
}
