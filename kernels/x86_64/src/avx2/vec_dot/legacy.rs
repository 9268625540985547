//! ggml's AVX2 `ggml_vec_dot_q4_1_q8_1`, `_q5_0_q8_0`, `_q5_1_q8_1` and
//! `_iq4_nl_q8_0` (and llamafile's `tinyBLAS_Q0_AVX` output for IQ4_NL), natively. The
//! portable twin with the same names and the float order in words:
//! `tiercheck_core::arch::x86_64::avx2::vec_dot` (its `legacy` part).

use core::arch::x86_64::*;

use super::{f16c, hsum_float_8, load128, load256, mul_sum_i8_pairs_float};
use tiercheck_core::blocks::iq4_nl::KVALUES_IQ4NL;
use tiercheck_core::blocks::{BlockIq4Nl, BlockQ4_1, BlockQ5_0, BlockQ5_1, BlockQ8_0, BlockQ8_1};

/// `bytes_from_nibbles_32`: low nibbles in bytes 0..16, high nibbles in 16..32.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn nibbles32(qs: &[u8; 16]) -> __m256i {
    let tmp = load128(qs);
    _mm256_and_si256(_mm256_set1_epi8(0xF), _mm256_set_m128i(_mm_srli_epi16::<4>(tmp), tmp))
}

/// `bytes_from_bits_32`: byte j is 0xFF where bit j of `qh` is set, else 0.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn bytes_from_bits_32(qh: [u8; 4]) -> __m256i {
    let x32 = u32::from_le_bytes(qh) as i32;
    let shuf =
        _mm256_set_epi64x(0x0303_0303_0303_0303, 0x0202_0202_0202_0202, 0x0101_0101_0101_0101, 0);
    let bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(x32), shuf);
    let bytes = _mm256_or_si256(bytes, _mm256_set1_epi64x(0x7fbf_dfef_f7fb_fdfe));
    _mm256_cmpeq_epi8(bytes, _mm256_set1_epi64x(-1))
}

/// `mul_sum_us8_pairs_float`: madd(1, maddubs(ax, sy)) as floats (unsigned x signed).
#[inline]
#[target_feature(enable = "avx2,fma")]
fn mul_sum_us8_pairs_float(ax: __m256i, sy: __m256i) -> __m256 {
    let dot = _mm256_maddubs_epi16(ax, sy);
    _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_set1_epi16(1), dot))
}

/// `ggml_vec_dot_q4_1_q8_1`, AVX2 path.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn vec_dot_q4_1_q8_1(x: &[BlockQ4_1], y: &[BlockQ8_1]) -> f32 {
    let mut acc = _mm256_setzero_ps();
    let mut summs = 0.0f32;
    for (xb, yb) in x.iter().zip(y) {
        let (d0, d1) = (f16c(xb.d), f16c(yb.d));
        summs = f16c(xb.m).mul_add(f16c(yb.s), summs);
        let d0d1 = _mm256_mul_ps(_mm256_set1_ps(d0), _mm256_set1_ps(d1));
        let qx = nibbles32(&xb.qs);
        let qy = load256(&yb.qs);
        let xy = mul_sum_us8_pairs_float(qx, qy);
        acc = _mm256_fmadd_ps(d0d1, xy, acc);
    }
    hsum_float_8(acc) + summs
}

/// `ggml_vec_dot_q5_0_q8_0`, AVX2 path.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn vec_dot_q5_0_q8_0(x: &[BlockQ5_0], y: &[BlockQ8_0]) -> f32 {
    let mut acc = _mm256_setzero_ps();
    for (xb, yb) in x.iter().zip(y) {
        let d = _mm256_set1_ps(f16c(xb.d) * f16c(yb.d));
        let bxhi = _mm256_andnot_si256(bytes_from_bits_32(xb.qh), _mm256_set1_epi8(0xF0u8 as i8));
        let qx = _mm256_or_si256(nibbles32(&xb.qs), bxhi);
        let qy = load256(&yb.qs);
        let q = mul_sum_i8_pairs_float(qx, qy);
        acc = _mm256_fmadd_ps(d, q, acc);
    }
    hsum_float_8(acc)
}

/// `ggml_vec_dot_q5_1_q8_1`, AVX2 path.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn vec_dot_q5_1_q8_1(x: &[BlockQ5_1], y: &[BlockQ8_1]) -> f32 {
    let mut acc = _mm256_setzero_ps();
    let mut summs = 0.0f32;
    for (xb, yb) in x.iter().zip(y) {
        let dx = _mm256_set1_ps(f16c(xb.d));
        summs = f16c(xb.m).mul_add(f16c(yb.s), summs);
        let bxhi = _mm256_and_si256(bytes_from_bits_32(xb.qh), _mm256_set1_epi8(0x10));
        let qx = _mm256_or_si256(nibbles32(&xb.qs), bxhi);
        let dy = _mm256_set1_ps(f16c(yb.d));
        let qy = load256(&yb.qs);
        let q = mul_sum_us8_pairs_float(qx, qy);
        acc = _mm256_fmadd_ps(q, _mm256_mul_ps(dx, dy), acc);
    }
    hsum_float_8(acc) + summs
}

/// The IQ4_NL table lookup of 16 packed bytes: low nibbles' values in bytes 0..16,
/// high nibbles' in 16..32.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn iq4_nl_values(qs: &[u8; 16]) -> __m256i {
    // SAFETY: the table is 16 readable bytes; the load is unaligned.
    let values = unsafe { _mm_loadu_si128(KVALUES_IQ4NL.as_ptr().cast()) };
    let m4b = _mm_set1_epi8(0x0f);
    let bits = load128(qs);
    _mm256_set_m128i(
        _mm_shuffle_epi8(values, _mm_and_si128(_mm_srli_epi16::<4>(bits), m4b)),
        _mm_shuffle_epi8(values, _mm_and_si128(bits, m4b)),
    )
}

/// `mul_add_epi8` then `madd_epi16(., 1)`: the sign-trick lanes as i32.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn sign_trick_lanes(x: __m256i, y: __m256i) -> __m256i {
    let p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
    _mm256_madd_epi16(p16, _mm256_set1_epi16(1))
}

/// `ggml_vec_dot_iq4_nl_q8_0`, AVX2 path (two accumulators, scalar tail).
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn vec_dot_iq4_nl_q8_0(x: &[BlockIq4Nl], y: &[BlockQ8_0]) -> f32 {
    let nb = x.len().min(y.len());
    let mut accum1 = _mm256_setzero_ps();
    let mut accum2 = _mm256_setzero_ps();
    let mut ib = 0;
    while ib + 1 < nb {
        let p1 = sign_trick_lanes(iq4_nl_values(&x[ib].qs), load256(&y[ib].qs));
        let p2 = sign_trick_lanes(iq4_nl_values(&x[ib + 1].qs), load256(&y[ib + 1].qs));
        accum1 = _mm256_fmadd_ps(
            _mm256_set1_ps(f16c(y[ib].d) * f16c(x[ib].d)),
            _mm256_cvtepi32_ps(p1),
            accum1,
        );
        accum2 = _mm256_fmadd_ps(
            _mm256_set1_ps(f16c(y[ib + 1].d) * f16c(x[ib + 1].d)),
            _mm256_cvtepi32_ps(p2),
            accum2,
        );
        ib += 2;
    }
    let mut sumf = hsum_float_8(_mm256_add_ps(accum1, accum2));
    while ib < nb {
        let d = f16c(y[ib].d) * f16c(x[ib].d);
        let (mut lo, mut hi) = (0i32, 0i32);
        for j in 0..16 {
            lo += y[ib].qs[j] as i8 as i32 * KVALUES_IQ4NL[(x[ib].qs[j] & 0xf) as usize] as i32;
            hi += y[ib].qs[j + 16] as i8 as i32 * KVALUES_IQ4NL[(x[ib].qs[j] >> 4) as usize] as i32;
        }
        sumf = d.mul_add((lo + hi) as f32, sumf);
        ib += 1;
    }
    sumf
}

/// One output of `tinyBLAS_Q0_AVX` for IQ4_NL weights: one accumulator, `hsum`.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn tinyblas_iq4_nl_q8_0(x: &[BlockIq4Nl], y: &[BlockQ8_0]) -> f32 {
    let mut acc = _mm256_setzero_ps();
    for (xb, yb) in x.iter().zip(y) {
        let a = iq4_nl_values(&xb.qs);
        let u = _mm256_sign_epi8(a, a);
        let s = _mm256_sign_epi8(load256(&yb.qs), a);
        let dot = _mm256_madd_epi16(_mm256_set1_epi16(1), _mm256_maddubs_epi16(u, s));
        let d = _mm256_set1_ps(f16c(xb.d) * f16c(yb.d));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dot), acc);
    }
    hsum_float_8(acc)
}
