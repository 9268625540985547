//! Portable twin of ggml's AVX2 vec_dot kernels (`ggml-cpu/arch/x86/quants.c`, built
//! with AVX2 + FMA and without AVX-512 VNNI / AVX-VNNI, i.e. the haswell tier), and of
//! the integer instructions they use. Each function here has a native counterpart with
//! the same name in `tiercheck-x86_64` (`avx2::vec_dot`), loop for loop.
//!
//! Integer stage (exact, but with the instructions' own wrap-around and saturation):
//! `_mm256_sign_epi8`, `_mm256_maddubs_epi16` (u8 x i8 pairs, saturating i16 sum),
//! `_mm256_madd_epi16` (i16 pairs to i32). A 256-bit register of 32 bytes gives eight
//! i32 lanes; lane t sums bytes 4t..4t+3.
//!
//! Float order:
//! - `ggml_vec_dot_q4_0_q8_0` / `ggml_vec_dot_q8_0_q8_0`: per block, `d = f16(x.d) *
//!   f16(y.d)` (one rounding), then on eight lanes `acc[t] = fma(d, float(lane_t),
//!   acc[t])`; at the end [`hsum_float_8`].
//! - `ggml_vec_dot_q4_K_q8_K`: per superblock `d = y.d * f16(x.d)`, `dmin = -y.d *
//!   f16(x.dmin)`; four min lanes `acc_m[i] = fma(dmin, float(m_2i*S_2i +
//!   m_2i+1*S_2i+1), acc_m[i])` with S_j the sub-block sums from bsums; eight scale
//!   lanes `acc[t] = fma(d, float(sumi_t), acc[t])`. End: `hsum_float_8(acc) + ((m0 +
//!   m2) + (m1 + m3))`.
//! - `ggml_vec_dot_q6_K_q8_K`: quants taken unsigned (0..63); the -32 offset enters as
//!   `32 * (bsum_2t * sc_2t + bsum_2t+1 * sc_2t+1)` subtracted from integer lane t; then
//!   `acc[t] = fma(y.d * f16(x.d), float(lane_t), acc[t])`; end `hsum_float_8(acc)`.
//!
//! The kernels compute the integer stage regrouped per byte position (see
//! `vec_dot_q4_k_q8_k`): equal to the instructions' results because no `maddubs` pair
//! sum can saturate on their inputs and the rest is exact (wrapping) integer addition,
//! which any grouping gives alike; the tests keep the instruction-by-instruction forms
//! as the oracle. The float operations are the ones above, in that order.
//!
//! Each kernel runs its accelerated form where [`crate::accel`] allows (x86-64 with AVX2
//! and FMA, not under `with_scalar`): the tier's integer lanes by the same byte
//! instructions, the float operations above one for one on eight lanes. Under
//! `with_scalar` the scalar code runs, compiled with AVX2 and FMA where the CPU has them.

use crate::blocks::q4_k::scale_min_k4;
use crate::blocks::{BlockQ4K, BlockQ4_0, BlockQ6K, BlockQ8K, BlockQ8_0, QK_K};

mod kquants;
mod legacy;

pub use kquants::{vec_dot_iq4_xs_q8_k, vec_dot_q2_k_q8_k, vec_dot_q3_k_q8_k, vec_dot_q5_k_q8_k};
pub use legacy::{
    tinyblas_iq4_nl_q8_0, vec_dot_iq4_nl_q8_0, vec_dot_q4_1_q8_1, vec_dot_q5_0_q8_0,
    vec_dot_q5_1_q8_1,
};

/// `hsum_float_8`: (hi128 + lo128), then lanes (0+2, 1+3), then (0+1).
#[inline]
pub fn hsum_float_8(a: [f32; 8]) -> f32 {
    let r = [a[4] + a[0], a[5] + a[1], a[6] + a[2], a[7] + a[3]];
    let s0 = r[0] + r[2];
    let s1 = r[1] + r[3];
    s0 + s1
}

/// `_mm256_sign_epi8` for one byte: y negated where x < 0 (wrapping: -(-128) = -128),
/// zero where x == 0.
#[inline]
pub fn sign_epi8(y: i8, x: i8) -> i8 {
    match x {
        0 => 0,
        x if x < 0 => y.wrapping_neg(),
        _ => y,
    }
}

/// `_mm256_maddubs_epi16` for one pair: u8 * i8 + u8 * i8, saturated to i16.
#[inline]
pub fn maddubs_pair(a0: u8, b0: i8, a1: u8, b1: i8) -> i16 {
    let s = a0 as i32 * b0 as i32 + a1 as i32 * b1 as i32;
    s.clamp(i16::MIN as i32, i16::MAX as i32) as i16
}

/// `mul_sum_i8_pairs_float` without the final conversion: for 32 signed bytes x and y,
/// the eight i32 lanes of madd(1, maddubs(|x|, sign(y, x))).
#[inline]
pub fn mul_sum_i8_pairs(x: &[i8; 32], y: &[i8; 32]) -> [i32; 8] {
    let mut lanes = [0i32; 8];
    for (t, lane) in lanes.iter_mut().enumerate() {
        let mut sum = 0i32;
        for p in 0..2 {
            let b = 4 * t + 2 * p;
            let (a0, a1) = (sign_epi8(x[b], x[b]) as u8, sign_epi8(x[b + 1], x[b + 1]) as u8);
            let (s0, s1) = (sign_epi8(y[b], x[b]), sign_epi8(y[b + 1], x[b + 1]));
            sum += maddubs_pair(a0, s0, a1, s1) as i32;
        }
        *lane = sum;
    }
    lanes
}

/// `acc[t] = fma(a, x[t], acc[t])` for every lane: `a * x + acc` with one rounding per
/// lane, what `_mm256_fmadd_ps` computes (the same value as [`f32::mul_add`]).
///
/// On x86-64 without FMA at compile time, `f32::mul_add` is a call to libm's `fmaf`.
/// There the lanes are computed in binary64 instead, where the product is exact (24 +
/// 24 significant bits) and the sum rounds once. Rounding that sum again to binary32
/// gives the correctly rounded result unless it lies exactly halfway between two
/// binary32 numbers (low 29 significand bits `1000...0`): every binary32 rounding
/// boundary is a binary64 number, so the first rounding cannot carry the sum across one,
/// only onto one. When any lane is halfway, zero, in binary32's subnormal range (whose
/// halfway points sit elsewhere) or not finite (NaN propagation), every lane takes
/// `f32::mul_add` instead.
#[inline(always)]
pub fn fma_lanes<const N: usize>(a: f32, x: &[f32; N], acc: &mut [f32; N]) {
    fma_lanes_in::<N, false>(a, x, acc)
}

/// [`fma_lanes`]; with `FUSED`, always `f32::mul_add` (for code compiled with FMA
/// enabled, where it is one instruction).
#[inline(always)]
pub fn fma_lanes_in<const N: usize, const FUSED: bool>(a: f32, x: &[f32; N], acc: &mut [f32; N]) {
    #[cfg(all(target_arch = "x86_64", not(target_feature = "fma")))]
    if !FUSED {
        let r: [f64; N] = core::array::from_fn(|t| a as f64 * x[t] as f64 + acc[t] as f64);
        let mut fallback = false;
        for v in r {
            let halfway = (v.to_bits() as u32) & 0x1FFF_FFFF == 0x1000_0000;
            // False for zeros, subnormal-range values, infinities and NaN.
            let normal = v.abs() >= f32::MIN_POSITIVE as f64 && v.abs() < f64::INFINITY;
            fallback |= halfway | !normal;
        }
        if !fallback {
            for t in 0..N {
                acc[t] = r[t] as f32;
            }
            return;
        }
    }
    for t in 0..N {
        acc[t] = a.mul_add(x[t], acc[t]);
    }
}

/// The lanes of [`mul_sum_i8_pairs`], computed per byte: lane t is the sum over bytes
/// 4t..4t+3 of |x| * sign(y, x). Equal for every input: |x| <= 128 and sign(y, x) is
/// in -128..=127, so a `maddubs` pair sum lies in -32768..=32512 and never saturates,
/// and the products fit i16.
#[inline(always)]
fn mul_sum_i8_lanes(x: &[i8; 32], y: &[i8; 32]) -> [i32; 8] {
    let mut p = [0i16; 32];
    for b in 0..32 {
        let sy = if x[b] < 0 { y[b].wrapping_neg() } else { y[b] };
        p[b] = x[b].unsigned_abs() as i16 * sy as i16;
    }
    quad_sums(&p)
}

/// `madd_epi16(1, p)` summed pairwise again: lane t = p[4t] + ... + p[4t+3].
#[inline(always)]
fn quad_sums(p: &[i16; 32]) -> [i32; 8] {
    core::array::from_fn(|t| {
        p[4 * t] as i32 + p[4 * t + 1] as i32 + p[4 * t + 2] as i32 + p[4 * t + 3] as i32
    })
}

/// The 32 bytes at `i` of `s`.
#[inline(always)]
fn bytes32(s: &[u8], i: usize) -> &[u8; 32] {
    s[i..i + 32].try_into().expect("32 bytes")
}

/// Products u8 * i8 of 32 byte pairs as i16, for u8 values of at most 6 bits (so no
/// product leaves i16 and no `maddubs` pair sum of them saturates: 2 * 63 * 128 <
/// 32767); their [`quad_sums`] are the lanes of `madd_epi16(1, maddubs_epi16(u, s))`.
#[inline(always)]
fn small_u8_i8_products(u: &[u8; 32], s: &[u8; 32]) -> [i16; 32] {
    core::array::from_fn(|b| u[b] as i16 * s[b] as i8 as i16)
}

/// `ggml_vec_dot_q4_0_q8_0`, AVX2 path.
pub fn vec_dot_q4_0_q8_0(x: &[BlockQ4_0], y: &[BlockQ8_0]) -> f32 {
    crate::accelerated!(slots::VEC_DOT_Q4_0_Q8_0, (x, y));
    vec_dot_q4_0_q8_0_in::<false>(x, y)
}

#[inline(always)]
pub fn vec_dot_q4_0_q8_0_in<const FUSED: bool>(x: &[BlockQ4_0], y: &[BlockQ8_0]) -> f32 {
    let mut acc = [0.0f32; 8];
    for (xb, yb) in x.iter().zip(y) {
        let d = xb.d() * yb.d();
        let mut qx = [0i8; 32];
        for j in 0..16 {
            qx[j] = (xb.qs[j] & 0xF) as i8 - 8;
            qx[j + 16] = (xb.qs[j] >> 4) as i8 - 8;
        }
        let qy: [i8; 32] = core::array::from_fn(|j| yb.qs[j] as i8);
        let q = mul_sum_i8_lanes(&qx, &qy);
        fma_lanes_in::<8, FUSED>(d, &q.map(|v| v as f32), &mut acc);
    }
    hsum_float_8(acc)
}

/// `ggml_vec_dot_q8_0_q8_0`, AVX2 path.
pub fn vec_dot_q8_0_q8_0(x: &[BlockQ8_0], y: &[BlockQ8_0]) -> f32 {
    crate::accelerated!(slots::VEC_DOT_Q8_0_Q8_0, (x, y));
    vec_dot_q8_0_q8_0_in::<false>(x, y)
}

#[inline(always)]
pub fn vec_dot_q8_0_q8_0_in<const FUSED: bool>(x: &[BlockQ8_0], y: &[BlockQ8_0]) -> f32 {
    let mut acc = [0.0f32; 8];
    for (xb, yb) in x.iter().zip(y) {
        let d = xb.d() * yb.d();
        let qx: [i8; 32] = core::array::from_fn(|j| xb.qs[j] as i8);
        let qy: [i8; 32] = core::array::from_fn(|j| yb.qs[j] as i8);
        let q = mul_sum_i8_lanes(&qx, &qy);
        fma_lanes_in::<8, FUSED>(d, &q.map(|v| v as f32), &mut acc);
    }
    hsum_float_8(acc)
}

/// `ggml_vec_dot_q4_K_q8_K`, AVX2 path.
pub fn vec_dot_q4_k_q8_k(x: &[BlockQ4K], y: &[BlockQ8K]) -> f32 {
    crate::accelerated!(slots::VEC_DOT_Q4_K_Q8_K, (x, y));
    vec_dot_q4_k_q8_k_in::<false>(x, y)
}

#[inline(always)]
pub fn vec_dot_q4_k_q8_k_in<const FUSED: bool>(x: &[BlockQ4K], y: &[BlockQ8K]) -> f32 {
    let mut acc = [0.0f32; 8];
    let mut acc_m = [0.0f32; 4];
    for (xb, yb) in x.iter().zip(y) {
        let d = yb.d() * xb.d();
        let dmin = -yb.d() * xb.dmin();
        let mut sc = [0i16; 8];
        let mut mn = [0i16; 8];
        for j in 0..8 {
            let (s, m) = scale_min_k4(j, &xb.scales);
            sc[j] = s as i16;
            mn[j] = m as i16;
        }
        // _mm_hadd_epi16 of bsums[0..8] and bsums[8..16]: wrapping i16 pair sums.
        let s: [i16; 8] = core::array::from_fn(|j| yb.bsum(2 * j).wrapping_add(yb.bsum(2 * j + 1)));
        let prod: [f32; 4] = core::array::from_fn(|i| {
            (mn[2 * i] as i32 * s[2 * i] as i32 + mn[2 * i + 1] as i32 * s[2 * i + 1] as i32) as f32
        });
        fma_lanes_in::<4, FUSED>(dmin, &prod, &mut acc_m);
        // Integer stage per byte position b of the 32-byte runs: the products of run j's
        // low and high nibbles with their q8 bytes, times the runs' scales (the i16 lanes
        // of `maddubs`, then `madd_epi16`), summed over the runs; lane t is then bytes
        // 4t..4t+3. Nibbles are 4-bit, so `maddubs` cannot saturate (see
        // small_u8_i8_products) and the exact integer sums may be regrouped.
        let mut by_byte = [0i32; 32];
        for j in 0..QK_K / 64 {
            let q4 = bytes32(&xb.qs, 32 * j);
            let lo: [u8; 32] = core::array::from_fn(|b| q4[b] & 0xF);
            let hi: [u8; 32] = core::array::from_fn(|b| q4[b] >> 4);
            let pl = small_u8_i8_products(&lo, bytes32(&yb.qs, 64 * j));
            let ph = small_u8_i8_products(&hi, bytes32(&yb.qs, 64 * j + 32));
            let (sl, sh) = (sc[2 * j] as i32, sc[2 * j + 1] as i32);
            for b in 0..32 {
                by_byte[b] = by_byte[b].wrapping_add(pl[b] as i32 * sl + ph[b] as i32 * sh);
            }
        }
        let sumi: [i32; 8] = core::array::from_fn(|t| {
            let q = &by_byte[4 * t..4 * t + 4];
            q[0].wrapping_add(q[1]).wrapping_add(q[2]).wrapping_add(q[3])
        });
        fma_lanes_in::<8, FUSED>(d, &sumi.map(|v| v as f32), &mut acc);
    }
    let m01 = acc_m[0] + acc_m[2];
    let m23 = acc_m[1] + acc_m[3];
    hsum_float_8(acc) + (m01 + m23)
}

/// `ggml_vec_dot_q6_K_q8_K`, AVX2 path.
pub fn vec_dot_q6_k_q8_k(x: &[BlockQ6K], y: &[BlockQ8K]) -> f32 {
    crate::accelerated!(slots::VEC_DOT_Q6_K_Q8_K, (x, y));
    vec_dot_q6_k_q8_k_in::<false>(x, y)
}

#[inline(always)]
pub fn vec_dot_q6_k_q8_k_in<const FUSED: bool>(x: &[BlockQ6K], y: &[BlockQ8K]) -> f32 {
    let mut acc = [0.0f32; 8];
    for (xb, yb) in x.iter().zip(y) {
        let d = yb.d() * xb.d();
        let sc: [i32; 16] = core::array::from_fn(|i| xb.scale(i) as i32);
        // q8sclsub: madd(bsums, scales) << 5
        let sub: [i32; 8] = core::array::from_fn(|t| {
            (yb.bsum(2 * t) as i32 * sc[2 * t] + yb.bsum(2 * t + 1) as i32 * sc[2 * t + 1]) << 5
        });
        // Integer stage per byte position b of the 32-byte chunks: each chunk's products
        // (the i16 lanes of `maddubs`; 6-bit values, so no saturation, see
        // small_u8_i8_products) times the scale of its half (bytes 0..16 take scale
        // 2*is, bytes 16..32 scale 2*is+1, as the lanes t / 4 do), summed over the
        // chunks; lane t is then bytes 4t..4t+3. Exact integer sums may be regrouped.
        let sc16: [i16; 16] = core::array::from_fn(|i| xb.scale(i) as i16);
        let mut by_byte = [0i32; 32];
        for j in 0..2 {
            let (ql0, ql1, qh) =
                (bytes32(&xb.ql, 64 * j), bytes32(&xb.ql, 64 * j + 32), bytes32(&xb.qh, 32 * j));
            // chunk c: values 128j + 32c + b, unsigned 0..63
            let q6: [[u8; 32]; 4] = [
                core::array::from_fn(|b| (ql0[b] & 0xF) | ((qh[b] & 3) << 4)),
                core::array::from_fn(|b| (ql1[b] & 0xF) | ((qh[b] & 12) << 2)),
                core::array::from_fn(|b| (ql0[b] >> 4) | (qh[b] & 48)),
                core::array::from_fn(|b| (ql1[b] >> 4) | ((qh[b] & 0xC0) >> 2)),
            ];
            let q8 = |c: usize| bytes32(&yb.qs, 128 * j + 32 * c);
            let p = [
                small_u8_i8_products(&q6[0], q8(0)),
                small_u8_i8_products(&q6[1], q8(1)),
                small_u8_i8_products(&q6[2], q8(2)),
                small_u8_i8_products(&q6[3], q8(3)),
            ];
            // Chunks in pairs (c, c + 1), the shape of `madd_epi16`.
            for c in [0, 2] {
                let is = 4 * j + c;
                let (a0, a1, b0, b1) =
                    (sc16[2 * is], sc16[2 * is + 1], sc16[2 * is + 2], sc16[2 * is + 3]);
                for b in 0..32 {
                    let (sa, sb) = if b < 16 { (a0, b0) } else { (a1, b1) };
                    by_byte[b] = by_byte[b]
                        .wrapping_add(p[c][b] as i32 * sa as i32 + p[c + 1][b] as i32 * sb as i32);
                }
            }
        }
        let sumi: [i32; 8] = core::array::from_fn(|t| {
            let q = &by_byte[4 * t..4 * t + 4];
            q[0].wrapping_add(q[1]).wrapping_add(q[2]).wrapping_add(q[3])
        });
        let lanes: [f32; 8] = core::array::from_fn(|t| sumi[t].wrapping_sub(sub[t]) as f32);
        fma_lanes_in::<8, FUSED>(d, &lanes, &mut acc);
    }
    hsum_float_8(acc)
}

/// The slots of this file's entry points (see [`crate::accel`]), filled by
/// `tiercheck-accel` (its `src/arch/x86_64/avx2/vec_dot.rs`).
pub mod slots {
    // A slot's type is its entry point's signature, spelt out.
    #![allow(clippy::type_complexity)]

    use super::*;
    use crate::accel::Slot;
    use crate::blocks::{
        BlockIq4Nl, BlockIq4Xs, BlockQ2K, BlockQ3K, BlockQ4_1, BlockQ5K, BlockQ5_0, BlockQ5_1,
        BlockQ8_1,
    };

    /// [`vec_dot_q4_0_q8_0`].
    pub static VEC_DOT_Q4_0_Q8_0: Slot<fn(&[BlockQ4_0], &[BlockQ8_0]) -> f32> = Slot::new();
    /// [`vec_dot_q8_0_q8_0`].
    pub static VEC_DOT_Q8_0_Q8_0: Slot<fn(&[BlockQ8_0], &[BlockQ8_0]) -> f32> = Slot::new();
    /// [`vec_dot_q4_k_q8_k`].
    pub static VEC_DOT_Q4_K_Q8_K: Slot<fn(&[BlockQ4K], &[BlockQ8K]) -> f32> = Slot::new();
    /// [`vec_dot_q6_k_q8_k`].
    pub static VEC_DOT_Q6_K_Q8_K: Slot<fn(&[BlockQ6K], &[BlockQ8K]) -> f32> = Slot::new();
    /// [`vec_dot_q4_1_q8_1`].
    pub static VEC_DOT_Q4_1_Q8_1: Slot<fn(&[BlockQ4_1], &[BlockQ8_1]) -> f32> = Slot::new();
    /// [`vec_dot_q5_0_q8_0`].
    pub static VEC_DOT_Q5_0_Q8_0: Slot<fn(&[BlockQ5_0], &[BlockQ8_0]) -> f32> = Slot::new();
    /// [`vec_dot_q5_1_q8_1`].
    pub static VEC_DOT_Q5_1_Q8_1: Slot<fn(&[BlockQ5_1], &[BlockQ8_1]) -> f32> = Slot::new();
    /// [`vec_dot_iq4_nl_q8_0`].
    pub static VEC_DOT_IQ4_NL_Q8_0: Slot<fn(&[BlockIq4Nl], &[BlockQ8_0]) -> f32> = Slot::new();
    /// [`vec_dot_q2_k_q8_k`].
    pub static VEC_DOT_Q2_K_Q8_K: Slot<fn(&[BlockQ2K], &[BlockQ8K]) -> f32> = Slot::new();
    /// [`vec_dot_q3_k_q8_k`].
    pub static VEC_DOT_Q3_K_Q8_K: Slot<fn(&[BlockQ3K], &[BlockQ8K]) -> f32> = Slot::new();
    /// [`vec_dot_q5_k_q8_k`].
    pub static VEC_DOT_Q5_K_Q8_K: Slot<fn(&[BlockQ5K], &[BlockQ8K]) -> f32> = Slot::new();
    /// [`vec_dot_iq4_xs_q8_k`].
    pub static VEC_DOT_IQ4_XS_Q8_K: Slot<fn(&[BlockIq4Xs], &[BlockQ8K]) -> f32> = Slot::new();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernels as first written, instruction by instruction (`maddubs_pair` with its
    /// saturation, `sign_epi8`, `f32::mul_add`): the oracle for the regrouped ones.
    mod literal {
        use super::super::*;

        /// `ggml_vec_dot_q4_0_q8_0`, AVX2 path.
        pub(super) fn vec_dot_q4_0_q8_0(x: &[BlockQ4_0], y: &[BlockQ8_0]) -> f32 {
            let mut acc = [0.0f32; 8];
            for (xb, yb) in x.iter().zip(y) {
                let d = xb.d() * yb.d();
                let mut qx = [0i8; 32];
                for j in 0..16 {
                    qx[j] = (xb.qs[j] & 0xF) as i8 - 8;
                    qx[j + 16] = (xb.qs[j] >> 4) as i8 - 8;
                }
                let qy: [i8; 32] = core::array::from_fn(|j| yb.qs[j] as i8);
                let q = mul_sum_i8_pairs(&qx, &qy);
                for t in 0..8 {
                    acc[t] = d.mul_add(q[t] as f32, acc[t]);
                }
            }
            hsum_float_8(acc)
        }

        /// `ggml_vec_dot_q8_0_q8_0`, AVX2 path.
        pub(super) fn vec_dot_q8_0_q8_0(x: &[BlockQ8_0], y: &[BlockQ8_0]) -> f32 {
            let mut acc = [0.0f32; 8];
            for (xb, yb) in x.iter().zip(y) {
                let d = xb.d() * yb.d();
                let qx: [i8; 32] = core::array::from_fn(|j| xb.qs[j] as i8);
                let qy: [i8; 32] = core::array::from_fn(|j| yb.qs[j] as i8);
                let q = mul_sum_i8_pairs(&qx, &qy);
                for t in 0..8 {
                    acc[t] = d.mul_add(q[t] as f32, acc[t]);
                }
            }
            hsum_float_8(acc)
        }

        /// `ggml_vec_dot_q4_K_q8_K`, AVX2 path.
        pub(super) fn vec_dot_q4_k_q8_k(x: &[BlockQ4K], y: &[BlockQ8K]) -> f32 {
            let mut acc = [0.0f32; 8];
            let mut acc_m = [0.0f32; 4];
            for (xb, yb) in x.iter().zip(y) {
                let d = yb.d() * xb.d();
                let dmin = -yb.d() * xb.dmin();
                let mut sc = [0i16; 8];
                let mut mn = [0i16; 8];
                for j in 0..8 {
                    let (s, m) = scale_min_k4(j, &xb.scales);
                    sc[j] = s as i16;
                    mn[j] = m as i16;
                }
                // _mm_hadd_epi16 of bsums[0..8] and bsums[8..16]: wrapping i16 pair sums.
                let s: [i16; 8] =
                    core::array::from_fn(|j| yb.bsum(2 * j).wrapping_add(yb.bsum(2 * j + 1)));
                for i in 0..4 {
                    let prod = mn[2 * i] as i32 * s[2 * i] as i32
                        + mn[2 * i + 1] as i32 * s[2 * i + 1] as i32;
                    acc_m[i] = dmin.mul_add(prod as f32, acc_m[i]);
                }
                let mut sumi = [0i32; 8];
                for j in 0..QK_K / 64 {
                    let q4 = &xb.qs[32 * j..32 * j + 32];
                    let q8l = &yb.qs[64 * j..64 * j + 32];
                    let q8h = &yb.qs[64 * j + 32..64 * j + 64];
                    for t in 0..8 {
                        let mut pl = 0i32;
                        let mut ph = 0i32;
                        for p in 0..2 {
                            let b = 4 * t + 2 * p;
                            pl += maddubs_pair(
                                q4[b] & 0xF,
                                q8l[b] as i8,
                                q4[b + 1] & 0xF,
                                q8l[b + 1] as i8,
                            ) as i32;
                            ph += maddubs_pair(
                                q4[b] >> 4,
                                q8h[b] as i8,
                                q4[b + 1] >> 4,
                                q8h[b + 1] as i8,
                            ) as i32;
                        }
                        // madd_epi16(scale, p16): each i16 pair times the scale, summed.
                        sumi[t] = sumi[t].wrapping_add(
                            (sc[2 * j] as i32 * pl).wrapping_add(sc[2 * j + 1] as i32 * ph),
                        );
                    }
                }
                for t in 0..8 {
                    acc[t] = d.mul_add(sumi[t] as f32, acc[t]);
                }
            }
            let m01 = acc_m[0] + acc_m[2];
            let m23 = acc_m[1] + acc_m[3];
            hsum_float_8(acc) + (m01 + m23)
        }

        /// `ggml_vec_dot_q6_K_q8_K`, AVX2 path.
        pub(super) fn vec_dot_q6_k_q8_k(x: &[BlockQ6K], y: &[BlockQ8K]) -> f32 {
            let mut acc = [0.0f32; 8];
            for (xb, yb) in x.iter().zip(y) {
                let d = yb.d() * xb.d();
                let sc: [i32; 16] = core::array::from_fn(|i| xb.scale(i) as i32);
                // q8sclsub: madd(bsums, scales) << 5
                let sub: [i32; 8] = core::array::from_fn(|t| {
                    (yb.bsum(2 * t) as i32 * sc[2 * t] + yb.bsum(2 * t + 1) as i32 * sc[2 * t + 1])
                        << 5
                });
                let mut sumi = [0i32; 8];
                for j in 0..2 {
                    let ql = &xb.ql[64 * j..64 * j + 64];
                    let qh = &xb.qh[32 * j..32 * j + 32];
                    for c in 0..4 {
                        // chunk c: values 128j + 32c + b, unsigned 0..63
                        let q6 = |b: usize| -> u8 {
                            match c {
                                0 => (ql[b] & 0xF) | ((qh[b] & 3) << 4),
                                1 => (ql[32 + b] & 0xF) | ((qh[b] & 12) << 2),
                                2 => (ql[b] >> 4) | (qh[b] & 48),
                                _ => (ql[32 + b] >> 4) | ((qh[b] & 0xC0) >> 2),
                            }
                        };
                        let q8 = &yb.qs[128 * j + 32 * c..128 * j + 32 * c + 32];
                        let is = 4 * j + c;
                        for t in 0..8 {
                            let scale = sc[2 * is + t / 4];
                            let mut p = 0i32;
                            for pp in 0..2 {
                                let b = 4 * t + 2 * pp;
                                p += maddubs_pair(q6(b), q8[b] as i8, q6(b + 1), q8[b + 1] as i8)
                                    as i32;
                            }
                            sumi[t] = sumi[t].wrapping_add(scale * p);
                        }
                    }
                }
                for t in 0..8 {
                    let lane = sumi[t].wrapping_sub(sub[t]);
                    acc[t] = d.mul_add(lane as f32, acc[t]);
                }
            }
            hsum_float_8(acc)
        }
    }

    /// Test bytes from the project's seeded generator ([`crate::rng::Rng`]).
    struct Bytes {
        g: crate::rng::Rng,
    }
    #[allow(non_snake_case)]
    fn Bytes(seed: u64) -> Bytes {
        Bytes { g: crate::rng::Rng::new(seed) }
    }
    impl Bytes {
        fn next(&mut self) -> u8 {
            self.g.next_u8()
        }
        fn u32(&mut self) -> u32 {
            u32::from_le_bytes([self.next(), self.next(), self.next(), self.next()])
        }
        fn fill(&mut self, out: &mut [u8]) {
            out.iter_mut().for_each(|b| *b = self.next());
        }
        /// Mostly extreme bytes (0, 1, 127, 128, 255), else random.
        fn fill_extreme(&mut self, out: &mut [u8]) {
            for b in out.iter_mut() {
                *b = match self.next() % 8 {
                    0 => 0x80,
                    1 => 0x7F,
                    2 => 0xFF,
                    3 => 0,
                    4 => 0x81,
                    _ => self.next(),
                };
            }
        }
        /// An f16 scale: mostly ordinary, sometimes zero, subnormal, huge, inf or NaN.
        fn half(&mut self) -> [u8; 2] {
            let v: u16 = match self.next() % 16 {
                0 => 0,
                1 => 0x0001 + (self.next() as u16), // subnormal
                2 => 0x7BFF,                        // 65504
                3 => 0x7C00 | ((self.next() as u16 & 1) << 15), // +-inf
                4 => 0x7E00 | (self.next() as u16), // NaN with payload
                _ => 0x2000 + (self.next() as u16) * 37, // ~2^-7 .. 2^2
            };
            v.to_le_bytes()
        }
    }

    fn f32_bits_eq(a: f32, b: f32) -> bool {
        a.to_bits() == b.to_bits()
    }

    /// Bitwise equal, or both NaN: which payload a product of two NaNs keeps depends on
    /// the operand order the compiler picks for the (commutative) multiply, which Rust
    /// leaves unspecified, in the literal forms as much as here.
    fn same(a: f32, b: f32) -> bool {
        f32_bits_eq(a, b) || (a.is_nan() && b.is_nan())
    }

    fn check_fma_lanes(a: f32, x: [f32; 8], acc: [f32; 8]) {
        let mut got = acc;
        fma_lanes(a, &x, &mut got);
        for t in 0..8 {
            let want = a.mul_add(x[t], acc[t]);
            // Both NaN counts as equal (see `same`): an optimized aarch64 build fuses
            // the lanes as one vector `fmla`, whose NaN operand choice differs.
            assert!(
                same(got[t], want),
                "fma({a:e}, {:e}, {:e}) = {:e}, want {want:e}",
                x[t],
                acc[t],
                got[t]
            );
        }
    }

    #[test]
    fn fma_lanes_equals_mul_add() {
        let mut r = Bytes(0x9E37_79B9_7F4A_7C15);
        // Random finite values, integer-valued multiplicands as in the kernels.
        for _ in 0..200_000 {
            let a = f32::from_bits(r.u32() & 0x3FFF_FFFF | (r.u32() & 0x8000_0000));
            let x: [f32; 8] = core::array::from_fn(|_| (r.u32() as i32 >> (r.next() % 31)) as f32);
            let acc: [f32; 8] = core::array::from_fn(|_| f32::from_bits(r.u32() & 0xCFFF_FFFF));
            check_fma_lanes(a, x, acc);
        }
        // Sums that binary64 rounds onto a binary32 halfway point (double rounding would
        // go wrong), exact halfway points, and sums just beside them.
        for i in 0..20_000u32 {
            let c = f32::from_bits(0x3F80_0000 + (r.u32() & 0x7F_FFFF))
                * if i % 2 == 0 { 1.0 } else { -1.0 };
            let ulp = f32::from_bits(c.abs().to_bits() + 1) - c.abs();
            let h = ulp / 2.0;
            let e = f32::from_bits(0x3400_0000); // 2^-23
            let one_up = 1.0 + e;
            let cases = [
                (one_up, h * (1.0 - e)), // h (1 - 2^-46): binary64 rounds to h
                (one_up, -h * (1.0 - e)),
                (1.0, h),
                (1.0, -h),
                (one_up, h),
                (1.0 - e / 2.0, h),
            ];
            for (a, b) in cases {
                let x = [b; 8];
                let acc = [c; 8];
                check_fma_lanes(a, x, acc);
            }
        }
        // The same in binary32's subnormal range, where halfway points have other low
        // bits: c = (2^23 - 1) 2^-149 (odd), a b = 2^-150 (1 - 2^-46); binary64 rounds
        // the sum onto c + 2^-150, halfway to 2^-126, which rounds up, not down to c.
        let c = f32::from_bits(0x007F_FFFF);
        let a = f32::from_bits(0x3300_0001); // 2^-25 (1 + 2^-23)
        let b = f32::from_bits(0x00FF_FFFE); // 2^-125 (1 - 2^-23)
        assert_eq!(b as f64, 2f64.powi(-125) * (1.0 - 2f64.powi(-23)));
        assert_eq!(a as f64, 2f64.powi(-25) * (1.0 + 2f64.powi(-23)));
        for (c, b) in [(c, b), (-c, -b)] {
            check_fma_lanes(a, [b; 8], [c; 8]);
            assert_ne!(((a as f64 * b as f64) + c as f64) as f32, a.mul_add(b, c));
        }
        // Zeros (signs), subnormal and overflowing results, infinities and NaN.
        let tiny = f32::from_bits(1);
        let specials = [
            0.0,
            -0.0,
            tiny,
            -tiny,
            f32::MIN_POSITIVE,
            1.0e-30,
            3.0e38,
            -3.0e38,
            f32::MAX,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            f32::from_bits(0x7FA0_0001),
            f32::from_bits(0xFFC0_1234),
            1.0,
            -1.0,
            0.5,
            2.0e-20,
        ];
        for &a in &specials {
            for &b in &specials {
                for &c in &specials {
                    let mut x = [b; 8];
                    x[3] = 1.0;
                    check_fma_lanes(a, x, [c; 8]);
                    check_fma_lanes(a, [b; 8], [c; 8]);
                }
            }
        }
    }

    #[test]
    fn mul_sum_i8_lanes_equals_instructions() {
        // All pairs of byte values in every position of a pair.
        for x0 in 0..=255u8 {
            for y0 in 0..=255u8 {
                let mut x = [0i8; 32];
                let mut y = [0i8; 32];
                for b in 0..32 {
                    x[b] = x0.wrapping_add((b as u8).wrapping_mul(67)) as i8;
                    y[b] = y0.wrapping_add((b as u8).wrapping_mul(29)) as i8;
                }
                x[5] = x0 as i8;
                y[5] = y0 as i8;
                x[4] = x0 as i8;
                y[4] = y0 as i8;
                assert_eq!(mul_sum_i8_lanes(&x, &y), mul_sum_i8_pairs(&x, &y));
            }
        }
    }

    fn blocks<B: bytemuck::Pod>(r: &mut Bytes, n: usize, extreme: bool) -> Vec<B> {
        let mut bytes = vec![0u8; n * core::mem::size_of::<B>()];
        if extreme {
            r.fill_extreme(&mut bytes);
        } else {
            r.fill(&mut bytes);
        }
        bytemuck::cast_slice(&bytes).to_vec()
    }

    fn q8k_blocks(r: &mut Bytes, n: usize, extreme: bool) -> Vec<BlockQ8K> {
        let mut y: Vec<BlockQ8K> = blocks(r, n, extreme);
        for b in &mut y {
            // d: an ordinary f32, sometimes a special one.
            let d = match r.next() % 16 {
                0 => 0.0,
                1 => f32::NAN,
                2 => f32::INFINITY,
                _ => (r.next() as f32 - 128.0) / 1024.0,
            };
            b.d = d.to_le_bytes();
        }
        y
    }

    /// The public kernels (the AVX2 + FMA build where this CPU has them) and the
    /// baseline build, against the literal forms.
    /// The accelerated form (where this CPU runs it), the scalar form compiled with AVX2
    /// and FMA (`wide`, under `with_scalar`) and the baseline build all equal the
    /// instruction-literal oracle.
    #[test]
    fn kernels_equal_instruction_literal_forms() {
        let mut r = Bytes(0x1234_5678_9ABC_DEF1);
        for case in 0..400 {
            let extreme = case % 2 == 1;
            let n = 1 + case % 7;

            let mut x: Vec<BlockQ8_0> = blocks(&mut r, 8 * n, extreme);
            let mut y: Vec<BlockQ8_0> = blocks(&mut r, 8 * n, extreme);
            x.iter_mut().for_each(|b| b.d = r.half());
            y.iter_mut().for_each(|b| b.d = r.half());
            let b = literal::vec_dot_q8_0_q8_0(&x, &y);
            let scalar = crate::accel::with_scalar(|| vec_dot_q8_0_q8_0(&x, &y));
            for a in [vec_dot_q8_0_q8_0(&x, &y), scalar, vec_dot_q8_0_q8_0_in::<false>(&x, &y)] {
                assert!(same(a, b), "q8_0 case {case}: {a:e} vs {b:e}");
            }

            let mut x4: Vec<BlockQ4_0> = blocks(&mut r, 8 * n, extreme);
            x4.iter_mut().for_each(|b| b.d = r.half());
            let b = literal::vec_dot_q4_0_q8_0(&x4, &y);
            let scalar = crate::accel::with_scalar(|| vec_dot_q4_0_q8_0(&x4, &y));
            for a in [vec_dot_q4_0_q8_0(&x4, &y), scalar, vec_dot_q4_0_q8_0_in::<false>(&x4, &y)] {
                assert!(same(a, b), "q4_0 case {case}: {a:e} vs {b:e}");
            }

            let yk = q8k_blocks(&mut r, n, extreme);
            let mut xk: Vec<BlockQ4K> = blocks(&mut r, n, extreme);
            for b in &mut xk {
                b.d = r.half();
                b.dmin = r.half();
            }
            let b = literal::vec_dot_q4_k_q8_k(&xk, &yk);
            let scalar = crate::accel::with_scalar(|| vec_dot_q4_k_q8_k(&xk, &yk));
            for a in [vec_dot_q4_k_q8_k(&xk, &yk), scalar, vec_dot_q4_k_q8_k_in::<false>(&xk, &yk)]
            {
                assert!(same(a, b), "q4_K case {case}: {a:e} vs {b:e}");
            }

            let mut x6: Vec<BlockQ6K> = blocks(&mut r, n, extreme);
            x6.iter_mut().for_each(|b| b.d = r.half());
            let b = literal::vec_dot_q6_k_q8_k(&x6, &yk);
            let scalar = crate::accel::with_scalar(|| vec_dot_q6_k_q8_k(&x6, &yk));
            for a in [vec_dot_q6_k_q8_k(&x6, &yk), scalar, vec_dot_q6_k_q8_k_in::<false>(&x6, &yk)]
            {
                assert!(same(a, b), "q6_K case {case}: {a:e} vs {b:e}");
            }
        }
    }
}
