//! Twins of ggml's NEON vec_dot kernels (`nrc == 1`) for Q4_1, Q5_0, Q5_1, IQ4_NL,
//! IQ4_XS, Q2_K, Q3_K and Q5_K (`ggml-cpu/arch/arm/quants.c`, `__ARM_NEON` branches), as
//! GCC 12 builds them for aarch64 (`-ffp-contract=fast`: a product whose only use is an
//! add becomes one fused multiply-add; `vmlaq_n_f32` stays a separate multiply and add).
//! Integer parts (`sdot`, `vaddvq_s32`, `vmull_s16`) are exact, so they are computed here
//! in the plainest order.
//!
//! Float order (`d_x`, `m_x` the weight block's f16 fields widened, `d_y`/`s_y` the
//! activation's):
//! - Q4_1, Q5_0, Q5_1: blocks in pairs (2i, 2i+1), four i32 lanes per block (lane t:
//!   bytes 4t..4t+3 of each 16-byte half), `sumv[t] = sumv[t] + round(float(p[t]) *
//!   (d_x * d_y))` into `sumv0` (even block) and `sumv1` (odd); Q4_1 adds
//!   `summs = summs + (m_x0 * s_y0 + m_x1 * s_y1)` per pair, Q5_1 `summs0 += m_x0 * s_y0`
//!   and `summs1 += m_x1 * s_y1` (products of two f16 values: exact in f32, so GCC's
//!   contraction cannot change them). Then `sumf = vaddvq(sumv0) + vaddvq(sumv1)` (Q4_1:
//!   `+ summs`; Q5_1: `+ summs0 + summs1`, left to right). An odd last block by the
//!   scalar tail: Q5_0 `sumf = fma(d_x * d_y, float(sumi), sumf)`; Q4_1 and Q5_1 `sumf =
//!   sumf + fma(d_x * d_y, float(sumi), m_x * s_y)`.
//! - IQ4_NL: per pair `sumf = sumf + fma(d_x0 * d_y0, float(p0), (d_x1 * d_y1) *
//!   float(p1))` (p the block's integer dot); an odd last block `sumf = fma(d_y * d_x,
//!   float(sumi), sumf)`.
//! - IQ4_XS: per superblock `sumf = fma(d_x * d_y, float(sumi), sumf)` (sumi over the
//!   eight sub-blocks, each dot times its `code - 32` scale).
//! - Q2_K: per superblock `sum = fma(-d_y * dmin_x, float(sum_s m_s * bsum_s), sum)`,
//!   then `sum = fma(d_y * d_x, float(isum), sum)`.
//! - Q3_K: per superblock `sum = fma(d_y * d_x, float(isum), sum)` (scales `code - 32`).
//! - Q5_K: per superblock `sumf = sumf + fma(d_y * d_x, float(sumi), -((d_y * dmin_x) *
//!   float(mins)))`, mins = `sum_s m_s * S_s` with S_s the wrapping i16 sum of `bsums`
//!   2s and 2s+1 (`vpaddq_s16`).
//!
//! Each function runs its accelerated form where [`crate::accel`] allows (x86-64 with
//! AVX2 and FMA; Q4_1 and Q5_1 with F16C as well): for Q4_1, Q5_0 and Q5_1 the pair
//! loop (`q4_1_pairs`, ...; the scalar tails stay here), for the others the whole
//! kernel; the integer stages by byte instructions (exact), the float operations above
//! one for one. Native counterpart: `tiercheck-aarch64` (`neon::more`), same names.

use super::vaddvq_f32;
use crate::blocks::iq4_nl::KVALUES_IQ4NL;
use crate::blocks::q2_k::crumb;
use crate::blocks::q4_k::scale_min_k4;
use crate::blocks::q5_0::quants5;
use crate::blocks::{
    BlockIq4Nl, BlockIq4Xs, BlockQ2K, BlockQ3K, BlockQ4_1, BlockQ5K, BlockQ5_0, BlockQ5_1,
    BlockQ8K, BlockQ8_0, BlockQ8_1, QK, QK_K,
};

/// The four `sdot` lanes of one 32-value block: lane t sums the products of bytes
/// 4t..4t+3 of the low half (values 0..16) and of the high half (values 16..32).
#[inline]
fn block_lanes(x: &[i32; QK], y: &[u8; QK]) -> [i32; 4] {
    core::array::from_fn(|t| {
        (4 * t..4 * t + 4)
            .map(|b| x[b] * y[b] as i8 as i32 + x[16 + b] * y[16 + b] as i8 as i32)
            .sum()
    })
}

/// The signed dot of a block's 32 codes with 32 activation bytes.
#[inline]
fn block_dot(x: &[i32; QK], y: &[u8; QK]) -> i32 {
    (0..QK).map(|j| x[j] * y[j] as i8 as i32).sum()
}

/// The codes of a 4-bit block: low nibbles (values 0..16), then high nibbles.
#[inline]
fn nibbles(qs: &[u8; QK / 2]) -> [i32; QK] {
    core::array::from_fn(|j| if j < 16 { qs[j] & 0xF } else { qs[j - 16] >> 4 } as i32)
}

/// The pair loop of Q4_1/Q5_0/Q5_1 over the first `2 * (nb / 2)` blocks: block b's
/// lanes times `scale(b)` (`vmlaq_n_f32`: rounded product, then the add) into `sumv0`
/// (even b) or `sumv1` (odd b); returns `vaddvq(sumv0) + vaddvq(sumv1)` (0 when there is
/// no pair, as the C code's `sumf` stays 0).
#[inline]
fn pairs(nb: usize, lanes: impl Fn(usize) -> [i32; 4], scale: impl Fn(usize) -> f32) -> f32 {
    if nb < 2 {
        return 0.0;
    }
    let mut sumv = [[0.0f32; 4]; 2];
    for b in 0..2 * (nb / 2) {
        let (p, d) = (lanes(b), scale(b));
        for t in 0..4 {
            sumv[b % 2][t] += p[t] as f32 * d;
        }
    }
    vaddvq_f32(sumv[0]) + vaddvq_f32(sumv[1])
}

/// `ggml_vec_dot_q4_1_q8_1`, NEON path, nrc = 1.
pub fn vec_dot_q4_1_q8_1(x: &[BlockQ4_1], y: &[BlockQ8_1]) -> f32 {
    let nb = x.len().min(y.len());
    let mut sumf = q4_1_pairs(x, y);
    for b in 2 * (nb / 2)..nb {
        let sumi = block_dot(&nibbles(&x[b].qs), &y[b].qs);
        sumf += (x[b].d() * y[b].d()).mul_add(sumi as f32, x[b].m() * y[b].s());
    }
    sumf
}

/// [`vec_dot_q4_1_q8_1`] before its scalar tail: the pair loop (`pairs`) of Q4_1 (codes
/// its nibbles, scale `d_x * d_y`) plus, where there is a pair, `summs` (per pair
/// `summs = summs + (m_x0 * s_y0 + m_x1 * s_y1)`).
pub fn q4_1_pairs(x: &[BlockQ4_1], y: &[BlockQ8_1]) -> f32 {
    crate::accelerated!(super::slots::Q4_1_PAIRS, (x, y));
    let nb = x.len().min(y.len());
    let mut summs = 0.0f32;
    for b in (0..2 * (nb / 2)).step_by(2) {
        summs += x[b].m() * y[b].s() + x[b + 1].m() * y[b + 1].s();
    }
    let lanes = |b: usize| block_lanes(&nibbles(&x[b].qs), &y[b].qs);
    let mut sumf = pairs(nb, lanes, |b| x[b].d() * y[b].d());
    if nb >= 2 {
        sumf += summs;
    }
    sumf
}

/// The pair loop (`pairs`) of Q5_0 (codes `q - 16`, scale `d_x * d_y`) of
/// [`vec_dot_q5_0_q8_0`] and [`vec_dot_q5_0_q8_0_i8mm`].
pub fn q5_0_pairs(x: &[BlockQ5_0], y: &[BlockQ8_0]) -> f32 {
    crate::accelerated!(super::slots::Q5_0_PAIRS, (x, y));
    let codes = |b: usize| quants5(&x[b].qs, x[b].qh).map(|q| q as i32 - 16);
    pairs(x.len().min(y.len()), |b| block_lanes(&codes(b), &y[b].qs), |b| x[b].d() * y[b].d())
}

/// [`vec_dot_q5_1_q8_1`] before its scalar tail: the pair loop (`pairs`) of Q5_1 (codes
/// `q`, scale `d_x * d_y`) then, where there is a pair, `+ summs0 + summs1` (the even
/// and the odd blocks' `m_x * s_y` summed apart).
pub fn q5_1_pairs(x: &[BlockQ5_1], y: &[BlockQ8_1]) -> f32 {
    crate::accelerated!(super::slots::Q5_1_PAIRS, (x, y));
    let nb = x.len().min(y.len());
    let (mut summs0, mut summs1) = (0.0f32, 0.0f32);
    for b in (0..2 * (nb / 2)).step_by(2) {
        summs0 += x[b].m() * y[b].s();
        summs1 += x[b + 1].m() * y[b + 1].s();
    }
    let codes = |b: usize| quants5(&x[b].qs, x[b].qh).map(|q| q as i32);
    let mut sumf = pairs(nb, |b| block_lanes(&codes(b), &y[b].qs), |b| x[b].d() * y[b].d());
    if nb >= 2 {
        sumf = sumf + summs0 + summs1;
    }
    sumf
}

/// `ggml_vec_dot_q5_0_q8_0`, NEON path, nrc = 1.
pub fn vec_dot_q5_0_q8_0(x: &[BlockQ5_0], y: &[BlockQ8_0]) -> f32 {
    q5_0(x, y, |q| q - 16)
}

/// `ggml_vec_dot_q5_0_q8_0` as GCC builds it with i8mm (`-march=armv8.6-a+...+i8mm`,
/// ggml's i8mm and SVE builds): the NEON pair loop as [`vec_dot_q5_0_q8_0`], but the
/// scalar tail of an odd last block takes each code `(int8_t)(q - 16)` as its unsigned
/// byte, `(q - 16) & 0xFF` (a negative code -16..-1 counts as 240..255). Measured: on
/// these builds a block of codes -16 dotted with ones gives 240 per value, where the
/// dotprod build gives -16. The loop's widening dot product is vectorized with the
/// mixed-sign `usdot` that i8mm adds, the weight operand taken unsigned.
pub fn vec_dot_q5_0_q8_0_i8mm(x: &[BlockQ5_0], y: &[BlockQ8_0]) -> f32 {
    q5_0(x, y, |q| (q - 16) & 0xFF)
}

/// The Q5_0 kernel with `tail_code` mapping a 5-bit code (0..31) to the value the
/// scalar tail multiplies.
#[inline]
fn q5_0(x: &[BlockQ5_0], y: &[BlockQ8_0], tail_code: impl Fn(i32) -> i32) -> f32 {
    let nb = x.len().min(y.len());
    let mut sumf = q5_0_pairs(x, y);
    for b in 2 * (nb / 2)..nb {
        let tail = quants5(&x[b].qs, x[b].qh).map(|q| tail_code(q as i32));
        sumf = (x[b].d() * y[b].d()).mul_add(block_dot(&tail, &y[b].qs) as f32, sumf);
    }
    sumf
}

/// `ggml_vec_dot_q5_1_q8_1`, NEON path, nrc = 1.
pub fn vec_dot_q5_1_q8_1(x: &[BlockQ5_1], y: &[BlockQ8_1]) -> f32 {
    let nb = x.len().min(y.len());
    let codes = |b: usize| quants5(&x[b].qs, x[b].qh).map(|q| q as i32);
    let mut sumf = q5_1_pairs(x, y);
    for b in 2 * (nb / 2)..nb {
        let sumi = block_dot(&codes(b), &y[b].qs);
        sumf += (x[b].d() * y[b].d()).mul_add(sumi as f32, x[b].m() * y[b].s());
    }
    sumf
}

/// The signed IQ4_NL values of a 16-byte run: low nibbles, then high nibbles.
#[inline]
fn iq4_values(qs: &[u8]) -> [i32; QK] {
    core::array::from_fn(|j| {
        KVALUES_IQ4NL[if j < 16 { qs[j] & 0xF } else { qs[j - 16] >> 4 } as usize] as i32
    })
}

/// `ggml_vec_dot_iq4_nl_q8_0`, NEON path, nrc = 1.
pub fn vec_dot_iq4_nl_q8_0(x: &[BlockIq4Nl], y: &[BlockQ8_0]) -> f32 {
    crate::accelerated!(super::slots::VEC_DOT_IQ4_NL_Q8_0, (x, y));
    let nb = x.len().min(y.len());
    let dot = |b: usize| block_dot(&iq4_values(&x[b].qs), &y[b].qs) as f32;
    let mut sumf = 0.0f32;
    for b in (0..2 * (nb / 2)).step_by(2) {
        let second = (x[b + 1].d() * y[b + 1].d()) * dot(b + 1);
        sumf += (x[b].d() * y[b].d()).mul_add(dot(b), second);
    }
    for b in 2 * (nb / 2)..nb {
        sumf = (y[b].d() * x[b].d()).mul_add(dot(b), sumf);
    }
    sumf
}

/// `ggml_vec_dot_iq4_xs_q8_K`, NEON path.
pub fn vec_dot_iq4_xs_q8_k(x: &[BlockIq4Xs], y: &[BlockQ8K]) -> f32 {
    crate::accelerated!(super::slots::VEC_DOT_IQ4_XS_Q8_K, (x, y));
    let mut sumf = 0.0f32;
    for (xb, yb) in x.iter().zip(y) {
        let mut sumi = 0i32;
        for s in 0..QK_K / 32 {
            let q8: &[u8; QK] = yb.qs[32 * s..32 * s + 32].try_into().expect("32 bytes");
            let dot = block_dot(&iq4_values(&xb.qs[16 * s..16 * s + 16]), q8);
            sumi = sumi.wrapping_add(dot * (xb.scale(s) as i32 - 32));
        }
        sumf = (xb.d() * yb.d()).mul_add(sumi as f32, sumf);
    }
    sumf
}

/// `sum over 16-value sub-blocks s of scale(s) * (codes . activation)` of a superblock.
#[inline]
fn scaled_sum16(code: impl Fn(usize) -> i32, scale: impl Fn(usize) -> i32, y: &BlockQ8K) -> i32 {
    let mut isum = 0i32;
    for s in 0..QK_K / 16 {
        let dot: i32 = (16 * s..16 * s + 16).map(|i| code(i) * y.q(i) as i32).sum();
        isum = isum.wrapping_add(dot * scale(s));
    }
    isum
}

/// `ggml_vec_dot_q2_K_q8_K`, NEON path.
pub fn vec_dot_q2_k_q8_k(x: &[BlockQ2K], y: &[BlockQ8K]) -> f32 {
    crate::accelerated!(super::slots::VEC_DOT_Q2_K_Q8_K, (x, y));
    let mut sum = 0.0f32;
    for (xb, yb) in x.iter().zip(y) {
        let d = yb.d() * xb.d();
        let dmin = -yb.d() * xb.dmin();
        let mins: i32 = (0..16).map(|s| (xb.scales[s] >> 4) as i32 * yb.bsum(s) as i32).sum();
        sum = dmin.mul_add(mins as f32, sum);
        let isum = scaled_sum16(|i| crumb(&xb.qs, i) as i32, |s| (xb.scales[s] & 0xF) as i32, yb);
        sum = d.mul_add(isum as f32, sum);
    }
    sum
}

/// `ggml_vec_dot_q3_K_q8_K`, NEON path.
pub fn vec_dot_q3_k_q8_k(x: &[BlockQ3K], y: &[BlockQ8K]) -> f32 {
    crate::accelerated!(super::slots::VEC_DOT_Q3_K_Q8_K, (x, y));
    let mut sum = 0.0f32;
    for (xb, yb) in x.iter().zip(y) {
        let d = yb.d() * xb.d();
        let isum = scaled_sum16(|i| xb.quant(i), |s| xb.scale(s) as i32 - 32, yb);
        sum = d.mul_add(isum as f32, sum);
    }
    sum
}

/// `ggml_vec_dot_q5_K_q8_K`, NEON path.
pub fn vec_dot_q5_k_q8_k(x: &[BlockQ5K], y: &[BlockQ8K]) -> f32 {
    crate::accelerated!(super::slots::VEC_DOT_Q5_K_Q8_K, (x, y));
    let mut sumf = 0.0f32;
    for (xb, yb) in x.iter().zip(y) {
        let d = yb.d() * xb.d();
        let dmin = yb.d() * xb.dmin();
        let mut mins = 0i32;
        let mut sumi = 0i32;
        for s in 0..8 {
            let (sc, m) = scale_min_k4(s, &xb.scales);
            let pair = yb.bsum(2 * s).wrapping_add(yb.bsum(2 * s + 1));
            mins = mins.wrapping_add(m as i32 * pair as i32);
            let dot: i32 = (32 * s..32 * s + 32).map(|i| xb.quant(i) as i32 * yb.q(i) as i32).sum();
            sumi = sumi.wrapping_add(dot * sc as i32);
        }
        sumf += d.mul_add(sumi as f32, -(dmin * mins as f32));
    }
    sumf
}
