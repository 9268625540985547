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
//! - `ggml_vec_dot_q4_0_q8_0` / `ggml_vec_dot_q8_0_q8_0`: per block, d = f16(x.d) *
//!   f16(y.d) (one rounding), then on eight lanes acc[t] = fma(d, float(lane_t), acc[t]);
//!   at the end [`hsum_float_8`].
//! - `ggml_vec_dot_q4_K_q8_K`: per superblock d = y.d * f16(x.d), dmin = -y.d *
//!   f16(x.dmin); four min lanes acc_m[i] = fma(dmin, float(m_2i*S_2i + m_2i+1*S_2i+1),
//!   acc_m[i]) with S_j the sub-block sums from bsums; eight scale lanes acc[t] =
//!   fma(d, float(sumi_t), acc[t]). End: hsum_float_8(acc) + ((m0 + m2) + (m1 + m3)).
//! - `ggml_vec_dot_q6_K_q8_K`: quants taken unsigned (0..63); the -32 offset enters as
//!   32 * (bsum_2t * sc_2t + bsum_2t+1 * sc_2t+1) subtracted from integer lane t; then
//!   acc[t] = fma(y.d * f16(x.d), float(lane_t), acc[t]); end hsum_float_8(acc).

use crate::blocks::q4_k::scale_min_k4;
use crate::blocks::{BlockQ4K, BlockQ4_0, BlockQ6K, BlockQ8K, BlockQ8_0, QK_K};

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

/// `ggml_vec_dot_q4_0_q8_0`, AVX2 path.
pub fn vec_dot_q4_0_q8_0(x: &[BlockQ4_0], y: &[BlockQ8_0]) -> f32 {
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
pub fn vec_dot_q8_0_q8_0(x: &[BlockQ8_0], y: &[BlockQ8_0]) -> f32 {
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
pub fn vec_dot_q4_k_q8_k(x: &[BlockQ4K], y: &[BlockQ8K]) -> f32 {
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
        for i in 0..4 {
            let prod =
                mn[2 * i] as i32 * s[2 * i] as i32 + mn[2 * i + 1] as i32 * s[2 * i + 1] as i32;
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
                    pl += maddubs_pair(q4[b] & 0xF, q8l[b] as i8, q4[b + 1] & 0xF, q8l[b + 1] as i8)
                        as i32;
                    ph += maddubs_pair(q4[b] >> 4, q8h[b] as i8, q4[b + 1] >> 4, q8h[b + 1] as i8)
                        as i32;
                }
                // madd_epi16(scale, p16): each i16 pair times the scale, summed.
                sumi[t] = sumi[t]
                    .wrapping_add((sc[2 * j] as i32 * pl).wrapping_add(sc[2 * j + 1] as i32 * ph));
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
pub fn vec_dot_q6_k_q8_k(x: &[BlockQ6K], y: &[BlockQ8K]) -> f32 {
    let mut acc = [0.0f32; 8];
    for (xb, yb) in x.iter().zip(y) {
        let d = yb.d() * xb.d();
        let sc: [i32; 16] = core::array::from_fn(|i| xb.scale(i) as i32);
        // q8sclsub: madd(bsums, scales) << 5
        let sub: [i32; 8] = core::array::from_fn(|t| {
            (yb.bsum(2 * t) as i32 * sc[2 * t] + yb.bsum(2 * t + 1) as i32 * sc[2 * t + 1]) << 5
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
                        p += maddubs_pair(q6(b), q8[b] as i8, q6(b + 1), q8[b + 1] as i8) as i32;
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
