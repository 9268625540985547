//! ggml's AVX2 vec_dot kernels (`ggml-cpu/arch/x86/quants.c`, `__AVX2__` branches, no
//! AVX-512 VNNI / AVX-VNNI), natively. The portable twin with the same names and the
//! same float order is `tiercheck_core::arch::x86_64::avx2::vec_dot`; see its docs for the order in words.

use core::arch::x86_64::*;

use tiercheck_core::blocks::{BlockQ4K, BlockQ4_0, BlockQ6K, BlockQ8K, BlockQ8_0, QK_K};

mod kquants;
mod legacy;

pub use kquants::{vec_dot_iq4_xs_q8_k, vec_dot_q2_k_q8_k, vec_dot_q3_k_q8_k, vec_dot_q5_k_q8_k};
pub use legacy::{
    tinyblas_iq4_nl_q8_0, vec_dot_iq4_nl_q8_0, vec_dot_q4_1_q8_1, vec_dot_q5_0_q8_0,
    vec_dot_q5_1_q8_1,
};

/// `hsum_float_8`: (hi128 + lo128), then lanes (0+2, 1+3), then (0+1).
#[inline]
#[target_feature(enable = "avx2,fma")]
fn hsum_float_8(x: __m256) -> f32 {
    let mut res = _mm256_extractf128_ps::<1>(x);
    res = _mm_add_ps(res, _mm256_castps256_ps128(x));
    res = _mm_add_ps(res, _mm_movehl_ps(res, res));
    res = _mm_add_ss(res, _mm_movehdup_ps(res));
    _mm_cvtss_f32(res)
}

/// An f16 scale to f32 with F16C (`vcvtph2ps`, exact), as the tier's
/// `GGML_CPU_FP16_TO_FP32` does.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn f16c(h: [u8; 2]) -> f32 {
    _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(u16::from_le_bytes(h) as i32)))
}

/// `mul_sum_i8_pairs_float`: madd(1, maddubs(|x|, sign(y, x))) as floats.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn mul_sum_i8_pairs_float(x: __m256i, y: __m256i) -> __m256 {
    let ax = _mm256_sign_epi8(x, x);
    let sy = _mm256_sign_epi8(y, x);
    let dot = _mm256_maddubs_epi16(ax, sy);
    _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_set1_epi16(1), dot))
}

/// Load 16 bytes from `p`.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn load128(p: &[u8; 16]) -> __m128i {
    // SAFETY: `p` is 16 readable bytes; the load is unaligned.
    unsafe { _mm_loadu_si128(p.as_ptr().cast()) }
}

/// Load 32 bytes from the start of `p` (which has at least 32).
#[inline]
#[target_feature(enable = "avx2,fma")]
pub(crate) fn load256(p: &[u8]) -> __m256i {
    assert!(p.len() >= 32);
    // SAFETY: the assertion above guarantees 32 readable bytes; the load is unaligned.
    unsafe { _mm256_loadu_si256(p.as_ptr().cast()) }
}

/// `bytes_from_nibbles_32`: low nibbles in bytes 0..16, high nibbles in 16..32.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn bytes_from_nibbles_32(qs: &[u8; 16]) -> __m256i {
    let tmp = load128(qs);
    let bytes = _mm256_set_m128i(_mm_srli_epi16::<4>(tmp), tmp);
    _mm256_and_si256(_mm256_set1_epi8(0xF), bytes)
}

/// `ggml_vec_dot_q4_0_q8_0`, AVX2 path.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn vec_dot_q4_0_q8_0(x: &[BlockQ4_0], y: &[BlockQ8_0]) -> f32 {
    let mut acc = _mm256_setzero_ps();
    for (xb, yb) in x.iter().zip(y) {
        let d = _mm256_set1_ps(f16c(xb.d) * f16c(yb.d));
        let qx = _mm256_sub_epi8(bytes_from_nibbles_32(&xb.qs), _mm256_set1_epi8(8));
        let qy = load256(&yb.qs);
        let q = mul_sum_i8_pairs_float(qx, qy);
        acc = _mm256_fmadd_ps(d, q, acc);
    }
    hsum_float_8(acc)
}

/// `ggml_vec_dot_q8_0_q8_0`, AVX2 path.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn vec_dot_q8_0_q8_0(x: &[BlockQ8_0], y: &[BlockQ8_0]) -> f32 {
    let mut acc = _mm256_setzero_ps();
    for (xb, yb) in x.iter().zip(y) {
        let d = _mm256_set1_ps(f16c(xb.d) * f16c(yb.d));
        let qx = load256(&xb.qs);
        let qy = load256(&yb.qs);
        let q = mul_sum_i8_pairs_float(qx, qy);
        acc = _mm256_fmadd_ps(d, q, acc);
    }
    hsum_float_8(acc)
}

/// The q4_K 6-bit scales and mins unpacked as ggml does with `kmask1..3`:
/// words 0-1 hold the eight scales, words 2-3 the eight mins.
#[inline]
fn unpack_q4_k_scales(scales: &[u8; 12]) -> [u32; 4] {
    const KMASK1: u32 = 0x3f3f_3f3f;
    const KMASK2: u32 = 0x0f0f_0f0f;
    const KMASK3: u32 = 0x0303_0303;
    let w = |i: usize| {
        u32::from_le_bytes([scales[4 * i], scales[4 * i + 1], scales[4 * i + 2], scales[4 * i + 3]])
    };
    let mut utmp = [w(0), w(1), w(2), 0];
    utmp[3] = ((utmp[2] >> 4) & KMASK2) | (((utmp[1] >> 6) & KMASK3) << 4);
    let uaux = utmp[1] & KMASK1;
    utmp[1] = (utmp[2] & KMASK2) | (((utmp[0] >> 6) & KMASK3) << 4);
    utmp[2] = uaux;
    utmp[0] &= KMASK1;
    utmp
}

/// The Q4_K/Q5_K head of a superblock: the eight scales and eight mins widened to i16
/// (`mins_and_scales`, scales in the low half) and the four i32 products of the mins with
/// the wrapping i16 sums of adjacent `bsums` (`_mm_hadd_epi16`, `_mm_madd_epi16`).
#[inline]
#[target_feature(enable = "avx2,fma")]
pub(crate) fn scales_and_min_products(scales: &[u8; 12], y: &BlockQ8K) -> (__m256i, __m128i) {
    let utmp = unpack_q4_k_scales(scales);
    let mins_and_scales = _mm256_cvtepu8_epi16(_mm_set_epi32(
        utmp[3] as i32,
        utmp[2] as i32,
        utmp[1] as i32,
        utmp[0] as i32,
    ));
    let q8sums = load256(&y.bsums);
    let q8s = _mm_hadd_epi16(
        _mm256_extracti128_si256::<0>(q8sums),
        _mm256_extracti128_si256::<1>(q8sums),
    );
    (mins_and_scales, _mm_madd_epi16(_mm256_extracti128_si256::<1>(mins_and_scales), q8s))
}

/// `get_scale_shuffle_k4(i)`: every 16-bit lane selects bytes (2i, 2i+1).
#[inline]
#[target_feature(enable = "avx2,fma")]
fn scale_shuffle_k4(i: usize) -> __m256i {
    let pair = ((2 * i) | ((2 * i + 1) << 8)) as i16;
    _mm256_set1_epi16(pair)
}

/// `ggml_vec_dot_q4_K_q8_K`, AVX2 path.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn vec_dot_q4_k_q8_k(x: &[BlockQ4K], y: &[BlockQ8K]) -> f32 {
    let m4 = _mm256_set1_epi8(0xF);
    let mut acc = _mm256_setzero_ps();
    let mut acc_m = _mm_setzero_ps();
    for (xb, yb) in x.iter().zip(y) {
        let d = yb.d() * f16c(xb.d);
        let dmin = -yb.d() * f16c(xb.dmin);
        let (mins_and_scales, prod) = scales_and_min_products(&xb.scales, yb);
        acc_m = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(prod), acc_m);

        let sc128 = _mm256_extracti128_si256::<0>(mins_and_scales);
        let scales = _mm256_set_m128i(sc128, sc128);
        let mut sumi = _mm256_setzero_si256();
        for j in 0..QK_K / 64 {
            let scale_l = _mm256_shuffle_epi8(scales, scale_shuffle_k4(2 * j));
            let scale_h = _mm256_shuffle_epi8(scales, scale_shuffle_k4(2 * j + 1));
            let q4bits = load256(&xb.qs[32 * j..]);
            let q4l = _mm256_and_si256(q4bits, m4);
            let q4h = _mm256_and_si256(_mm256_srli_epi16::<4>(q4bits), m4);
            let q8l = load256(&yb.qs[64 * j..]);
            let p16l = _mm256_madd_epi16(scale_l, _mm256_maddubs_epi16(q4l, q8l));
            let q8h = load256(&yb.qs[64 * j + 32..]);
            let p16h = _mm256_madd_epi16(scale_h, _mm256_maddubs_epi16(q4h, q8h));
            sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p16l, p16h));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    acc_m = _mm_add_ps(acc_m, _mm_movehl_ps(acc_m, acc_m));
    acc_m = _mm_add_ss(acc_m, _mm_movehdup_ps(acc_m));
    hsum_float_8(acc) + _mm_cvtss_f32(acc_m)
}

/// `get_scale_shuffle(i)`: bytes 0..8 select scale 2i, bytes 8..16 scale 2i+1.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn scale_shuffle(i: usize) -> __m128i {
    let (a, b) = ((2 * i) as i8, (2 * i + 1) as i8);
    _mm_set_epi8(b, b, b, b, b, b, b, b, a, a, a, a, a, a, a, a)
}

/// `ggml_vec_dot_q6_K_q8_K`, AVX2 path.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn vec_dot_q6_k_q8_k(x: &[BlockQ6K], y: &[BlockQ8K]) -> f32 {
    let m3 = _mm256_set1_epi8(3);
    let m15 = _mm256_set1_epi8(15);
    let mut acc = _mm256_setzero_ps();
    for (xb, yb) in x.iter().zip(y) {
        let d = yb.d() * f16c(xb.d);
        let q8sums = load256(&yb.bsums);
        let scales = load128(&xb.scales);
        let scales_16 = _mm256_cvtepi8_epi16(scales);
        let q8sclsub = _mm256_slli_epi32::<5>(_mm256_madd_epi16(q8sums, scales_16));
        let mut sumi = _mm256_setzero_si256();
        let mut is = 0;
        for j in 0..QK_K / 128 {
            let q4bits1 = load256(&xb.ql[64 * j..]);
            let q4bits2 = load256(&xb.ql[64 * j + 32..]);
            let q4bits_h = load256(&xb.qh[32 * j..]);

            let q4h_0 = _mm256_slli_epi16::<4>(_mm256_and_si256(q4bits_h, m3));
            let q4h_1 = _mm256_slli_epi16::<2>(_mm256_and_si256(q4bits_h, _mm256_set1_epi8(12)));
            let q4h_2 = _mm256_and_si256(q4bits_h, _mm256_set1_epi8(48));
            let q4h_3 = _mm256_srli_epi16::<2>(_mm256_and_si256(q4bits_h, _mm256_set1_epi8(-64)));

            let q4_0 = _mm256_or_si256(_mm256_and_si256(q4bits1, m15), q4h_0);
            let q4_1 = _mm256_or_si256(_mm256_and_si256(q4bits2, m15), q4h_1);
            let q4_2 =
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16::<4>(q4bits1), m15), q4h_2);
            let q4_3 =
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16::<4>(q4bits2), m15), q4h_3);

            let q8 = &yb.qs[128 * j..];
            let p16_0 = _mm256_maddubs_epi16(q4_0, load256(q8));
            let p16_1 = _mm256_maddubs_epi16(q4_1, load256(&q8[32..]));
            let p16_2 = _mm256_maddubs_epi16(q4_2, load256(&q8[64..]));
            let p16_3 = _mm256_maddubs_epi16(q4_3, load256(&q8[96..]));

            let p16_0 = _mm256_madd_epi16(
                _mm256_cvtepi8_epi16(_mm_shuffle_epi8(scales, scale_shuffle(is))),
                p16_0,
            );
            let p16_1 = _mm256_madd_epi16(
                _mm256_cvtepi8_epi16(_mm_shuffle_epi8(scales, scale_shuffle(is + 1))),
                p16_1,
            );
            let p16_2 = _mm256_madd_epi16(
                _mm256_cvtepi8_epi16(_mm_shuffle_epi8(scales, scale_shuffle(is + 2))),
                p16_2,
            );
            let p16_3 = _mm256_madd_epi16(
                _mm256_cvtepi8_epi16(_mm_shuffle_epi8(scales, scale_shuffle(is + 3))),
                p16_3,
            );
            is += 4;

            sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p16_0, p16_1));
            sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p16_2, p16_3));
        }
        sumi = _mm256_sub_epi32(sumi, q8sclsub);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    hsum_float_8(acc)
}
