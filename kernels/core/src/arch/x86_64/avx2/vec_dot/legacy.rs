//! Twins of ggml's AVX2 vec_dot kernels for the 32-value block types beside Q4_0/Q8_0
//! (`ggml_vec_dot_q4_1_q8_1`, `_q5_0_q8_0`, `_q5_1_q8_1`, `_iq4_nl_q8_0` in
//! `ggml-cpu/arch/x86/quants.c`, `__AVX2__` branches, compiled with FMA and GCC's
//! default contraction). Native counterparts with the same names:
//! `tiercheck-x86_64`'s `avx2::vec_dot`.
//!
//! Integer stage, exact for every input: lane t (of eight) is the sum over bytes
//! 4t..4t+3 of the products weight code x activation byte. For Q4_1 and Q5_1 the codes
//! are unsigned (0..15, 0..31) and go straight into `maddubs`; for Q5_0 (codes - 16)
//! and IQ4_NL (the 16-entry table) the signed codes take the sign trick
//! (`maddubs(|x|, sign(y, x))`, see `mul_sum_i8_lanes`). No `maddubs` pair can
//! saturate (at most 2 * 127 * 128 in magnitude). On the AVX-512 VNNI build (zen4)
//! `dpbusd` sums the same four products without the i16 step: the same integers.
//!
//! Float order, per block b (f16 fields widened exactly):
//! - Q4_1: `summs = fma(m_x, s_y, summs)` (GCC contracts the scalar `summs += m * s`;
//!   the product of two f16 values is exact in f32, so the fused and the unfused form
//!   agree), `acc[t] = fma(d_x * d_y, lane_t, acc[t])`; result `hsum_float_8(acc) +
//!   summs`.
//! - Q5_1: the same with codes `nibble | high bit << 4`: `summs = fma(m_x, s_y, summs)`,
//!   `acc[t] = fma(lane_t, d_x * d_y, acc[t])`; `hsum_float_8(acc) + summs`.
//! - Q5_0: `acc[t] = fma(d_x * d_y, lane_t, acc[t])`; `hsum_float_8(acc)`.
//! - IQ4_NL: blocks in pairs, even blocks into `acc1`, odd into `acc2`, each
//!   `fma(d_y * d_x, lane_t, acc)`; then `s = hsum_float_8(acc1 + acc2)` (lane-wise sum
//!   first) and, for an odd block count, the last block by the scalar tail:
//!   `s = fma(d_y * d_x, (float)(sumi_lo + sumi_hi), s)`.

use super::{fma_lanes, hsum_float_8, mul_sum_i8_lanes, quad_sums};
use crate::blocks::iq4_nl::KVALUES_IQ4NL;
use crate::blocks::q5_0::quants5;
use crate::blocks::{BlockIq4Nl, BlockQ4_1, BlockQ5_0, BlockQ5_1, BlockQ8_0, BlockQ8_1, QK};

/// The eight lanes of `madd_epi16(1, maddubs_epi16(u, y))` for unsigned codes of at
/// most 5 bits (no pair sum saturates: 2 * 31 * 128 < 32767).
#[inline(always)]
fn small_unsigned_lanes(u: &[u8; QK], y: &[u8; QK]) -> [i32; 8] {
    let p: [i16; 32] = core::array::from_fn(|b| u[b] as i16 * y[b] as i8 as i16);
    quad_sums(&p)
}

/// The codes of a 4-bit block in byte order: low nibbles (values 0..16), then high
/// nibbles (values 16..32), as `bytes_from_nibbles_32` lays them out.
#[inline(always)]
fn nibbles(qs: &[u8; QK / 2]) -> [u8; QK] {
    core::array::from_fn(|b| if b < 16 { qs[b] & 0xF } else { qs[b - 16] >> 4 })
}

/// `ggml_vec_dot_q4_1_q8_1`, AVX2 path.
pub fn vec_dot_q4_1_q8_1(x: &[BlockQ4_1], y: &[BlockQ8_1]) -> f32 {
    crate::accelerated!(super::slots::VEC_DOT_Q4_1_Q8_1, (x, y));
    let mut acc = [0.0f32; 8];
    let mut summs = 0.0f32;
    for (xb, yb) in x.iter().zip(y) {
        summs = xb.m().mul_add(yb.s(), summs);
        let d = xb.d() * yb.d();
        let lanes = small_unsigned_lanes(&nibbles(&xb.qs), &yb.qs);
        fma_lanes(d, &lanes.map(|v| v as f32), &mut acc);
    }
    hsum_float_8(acc) + summs
}

/// `ggml_vec_dot_q5_0_q8_0`, AVX2 path.
pub fn vec_dot_q5_0_q8_0(x: &[BlockQ5_0], y: &[BlockQ8_0]) -> f32 {
    crate::accelerated!(super::slots::VEC_DOT_Q5_0_Q8_0, (x, y));
    let mut acc = [0.0f32; 8];
    for (xb, yb) in x.iter().zip(y) {
        let d = xb.d() * yb.d();
        let q = quants5(&xb.qs, xb.qh);
        let qx: [i8; QK] = core::array::from_fn(|b| q[b] as i8 - 16);
        let qy: [i8; QK] = core::array::from_fn(|b| yb.qs[b] as i8);
        let lanes = mul_sum_i8_lanes(&qx, &qy);
        fma_lanes(d, &lanes.map(|v| v as f32), &mut acc);
    }
    hsum_float_8(acc)
}

/// `ggml_vec_dot_q5_1_q8_1`, AVX2 path.
pub fn vec_dot_q5_1_q8_1(x: &[BlockQ5_1], y: &[BlockQ8_1]) -> f32 {
    crate::accelerated!(super::slots::VEC_DOT_Q5_1_Q8_1, (x, y));
    let mut acc = [0.0f32; 8];
    let mut summs = 0.0f32;
    for (xb, yb) in x.iter().zip(y) {
        summs = xb.m().mul_add(yb.s(), summs);
        let q = quants5(&xb.qs, xb.qh);
        let lanes = small_unsigned_lanes(&q, &yb.qs).map(|v| v as f32);
        // fma(q, dx * dy, acc): the product of the lane and the scale, one rounding.
        let dxy = xb.d() * yb.d();
        fma_lanes(dxy, &lanes, &mut acc);
    }
    hsum_float_8(acc) + summs
}

/// The signed IQ4_NL codes of a block in byte order (low nibbles, then high).
#[inline(always)]
fn iq4_nl_codes(qs: &[u8; QK / 2]) -> [i8; QK] {
    nibbles(qs).map(|n| KVALUES_IQ4NL[n as usize])
}

/// `ggml_vec_dot_iq4_nl_q8_0`, AVX2 path (two accumulators, scalar tail).
pub fn vec_dot_iq4_nl_q8_0(x: &[BlockIq4Nl], y: &[BlockQ8_0]) -> f32 {
    crate::accelerated!(super::slots::VEC_DOT_IQ4_NL_Q8_0, (x, y));
    let mut acc = [[0.0f32; 8]; 2];
    let nb = x.len().min(y.len());
    let pairs = nb / 2;
    for ib in 0..2 * pairs {
        let (xb, yb) = (&x[ib], &y[ib]);
        let qy: [i8; QK] = core::array::from_fn(|b| yb.qs[b] as i8);
        let lanes = mul_sum_i8_lanes(&iq4_nl_codes(&xb.qs), &qy);
        fma_lanes(yb.d() * xb.d(), &lanes.map(|v| v as f32), &mut acc[ib % 2]);
    }
    let sum: [f32; 8] = core::array::from_fn(|t| acc[0][t] + acc[1][t]);
    let mut s = hsum_float_8(sum);
    for ib in 2 * pairs..nb {
        let (xb, yb) = (&x[ib], &y[ib]);
        let d = yb.d() * xb.d();
        let (mut lo, mut hi) = (0i32, 0i32);
        for j in 0..QK / 2 {
            lo += yb.qs[j] as i8 as i32 * KVALUES_IQ4NL[(xb.qs[j] & 0xF) as usize] as i32;
            hi += yb.qs[j + QK / 2] as i8 as i32 * KVALUES_IQ4NL[(xb.qs[j] >> 4) as usize] as i32;
        }
        s = d.mul_add((lo + hi) as f32, s);
    }
    s
}

/// One output of llamafile's `tinyBLAS_Q0_AVX` for IQ4_NL weights (`sgemm.cpp`), which
/// ggml's x86 builds take for IQ4_NL at two or more activation rows instead of
/// [`vec_dot_iq4_nl_q8_0`]: the same integer lanes, one accumulator over all blocks,
/// `acc[t] = fma(d_x * d_y, lane_t, acc[t])`, then `hsum` (the same tree as
/// `hsum_float_8`). No scalar tail.
pub fn tinyblas_iq4_nl_q8_0(x: &[BlockIq4Nl], y: &[BlockQ8_0]) -> f32 {
    let mut acc = [0.0f32; 8];
    for (xb, yb) in x.iter().zip(y) {
        let qy: [i8; QK] = core::array::from_fn(|b| yb.qs[b] as i8);
        let lanes = mul_sum_i8_lanes(&iq4_nl_codes(&xb.qs), &qy);
        fma_lanes(xb.d() * yb.d(), &lanes.map(|v| v as f32), &mut acc);
    }
    hsum_float_8(acc)
}
