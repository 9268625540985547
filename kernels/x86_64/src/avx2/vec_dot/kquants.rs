//! ggml's AVX2 `ggml_vec_dot_q2_K_q8_K`, `_q3_K_q8_K`, `_q5_K_q8_K` and `_iq4_xs_q8_K`,
//! natively. The portable twin with the same names and the float order in words:
//! `tiercheck_core::arch::x86_64::avx2::vec_dot` (its `kquants` part).

use core::arch::x86_64::*;

use super::{f16c, hsum_float_8, load128, load256, scale_shuffle_k4, scales_and_min_products};
use tiercheck_core::blocks::iq4_nl::KVALUES_IQ4NL;
use tiercheck_core::blocks::{BlockIq4Xs, BlockQ2K, BlockQ3K, BlockQ5K, BlockQ8K, QK_K};

/// `get_scale_shuffle_q3k(i)`: the low 128 bits select 16-bit scale 2i, the high 128
/// bits scale 2i + 1 (of the eight in each half of the register).
#[inline]
#[target_feature(enable = "avx2,fma")]
fn scale_shuffle_q3k(i: usize) -> __m256i {
    let lo = ((4 * i) | ((4 * i + 1) << 8)) as i16;
    let hi = ((4 * i + 2) | ((4 * i + 3) << 8)) as i16;
    _mm256_set_m128i(_mm_set1_epi16(hi), _mm_set1_epi16(lo))
}

/// `l_scales`/`h_scales` of the Q2_K/Q3_K kernels: sixteen i16 scales split into two
/// registers, each half repeated in both 128-bit lanes.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn split_scales(scales8: __m128i) -> [__m256i; 2] {
    let all = _mm256_cvtepi8_epi16(scales8);
    let l = _mm256_extracti128_si256::<0>(all);
    let h = _mm256_extracti128_si256::<1>(all);
    [_mm256_set_m128i(l, l), _mm256_set_m128i(h, h)]
}

/// `ggml_vec_dot_q2_K_q8_K`, AVX2 path.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn vec_dot_q2_k_q8_k(x: &[BlockQ2K], y: &[BlockQ8K]) -> f32 {
    let m3 = _mm256_set1_epi8(3);
    let m4 = _mm_set1_epi8(0xF);
    let mut acc = _mm256_setzero_ps();
    for (xb, yb) in x.iter().zip(y) {
        let d = yb.d() * f16c(xb.d);
        let dmin = -yb.d() * f16c(xb.dmin);
        let mins_and_scales = load128(&xb.scales);
        let scales8 = _mm_and_si128(mins_and_scales, m4);
        let mins8 = _mm_and_si128(_mm_srli_epi16::<4>(mins_and_scales), m4);
        let mins = _mm256_cvtepi8_epi16(mins8);
        let prod = _mm256_madd_epi16(mins, load256(&yb.bsums));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(prod), acc);
        let scales = split_scales(scales8);
        let mut sumi = _mm256_setzero_si256();
        for (j, sc) in scales.iter().enumerate() {
            let q2bits = load256(&xb.qs[32 * j..]);
            let q8 = &yb.qs[128 * j..];
            let q2_0 = _mm256_and_si256(q2bits, m3);
            let q2_1 = _mm256_and_si256(_mm256_srli_epi16::<2>(q2bits), m3);
            let q2_2 = _mm256_and_si256(_mm256_srli_epi16::<4>(q2bits), m3);
            let q2_3 = _mm256_and_si256(_mm256_srli_epi16::<6>(q2bits), m3);
            let p0 = _mm256_maddubs_epi16(q2_0, load256(q8));
            let p1 = _mm256_maddubs_epi16(q2_1, load256(&q8[32..]));
            let p2 = _mm256_maddubs_epi16(q2_2, load256(&q8[64..]));
            let p3 = _mm256_maddubs_epi16(q2_3, load256(&q8[96..]));
            let p0 = _mm256_madd_epi16(_mm256_shuffle_epi8(*sc, scale_shuffle_q3k(0)), p0);
            let p1 = _mm256_madd_epi16(_mm256_shuffle_epi8(*sc, scale_shuffle_q3k(1)), p1);
            let p2 = _mm256_madd_epi16(_mm256_shuffle_epi8(*sc, scale_shuffle_q3k(2)), p2);
            let p3 = _mm256_madd_epi16(_mm256_shuffle_epi8(*sc, scale_shuffle_q3k(3)), p3);
            let p01 = _mm256_add_epi32(p0, p1);
            let p23 = _mm256_add_epi32(p2, p3);
            sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p01, p23));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    hsum_float_8(acc)
}

/// The sixteen 6-bit Q3_K scales, unpacked as ggml's AVX2 kernel does (`kmask1`,
/// `kmask2`), minus 32.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn q3_k_scales(scales: &[u8; 12]) -> __m128i {
    const KMASK1: u32 = 0x0303_0303;
    const KMASK2: u32 = 0x0f0f_0f0f;
    let w = |i: usize| {
        u32::from_le_bytes([scales[4 * i], scales[4 * i + 1], scales[4 * i + 2], scales[4 * i + 3]])
    };
    let aux = [w(0), w(1), w(2)];
    let s = _mm_set_epi32(
        (((aux[1] >> 4) & KMASK2) | (((aux[2] >> 6) & KMASK1) << 4)) as i32,
        (((aux[0] >> 4) & KMASK2) | (((aux[2] >> 4) & KMASK1) << 4)) as i32,
        ((aux[1] & KMASK2) | (((aux[2] >> 2) & KMASK1) << 4)) as i32,
        ((aux[0] & KMASK2) | ((aux[2] & KMASK1) << 4)) as i32,
    );
    _mm_sub_epi8(s, _mm_set1_epi8(32))
}

/// `ggml_vec_dot_q3_K_q8_K`, AVX2 path.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn vec_dot_q3_k_q8_k(x: &[BlockQ3K], y: &[BlockQ8K]) -> f32 {
    let m3 = _mm256_set1_epi8(3);
    let mone = _mm256_set1_epi8(1);
    let mut acc = _mm256_setzero_ps();
    for (xb, yb) in x.iter().zip(y) {
        let d = yb.d() * f16c(xb.d);
        let scales = split_scales(q3_k_scales(&xb.scales));
        let hbits = load256(&xb.hmask);
        let mut sumi = _mm256_setzero_si256();
        for (j, sc) in scales.iter().enumerate() {
            let q3bits = load256(&xb.qs[32 * j..]);
            let q8 = &yb.qs[128 * j..];
            let mut p = [_mm256_setzero_si256(); 4];
            for (c, pc) in p.iter_mut().enumerate() {
                let bit = 4 * j + c;
                let low = match c {
                    0 => q3bits,
                    1 => _mm256_srli_epi16::<2>(q3bits),
                    2 => _mm256_srli_epi16::<4>(q3bits),
                    _ => _mm256_srli_epi16::<6>(q3bits),
                };
                let q3l = _mm256_and_si256(low, m3);
                let cnt = _mm_cvtsi32_si128(bit as i32);
                let sel = _mm256_sll_epi16(mone, cnt);
                let q3h =
                    _mm256_slli_epi16::<2>(_mm256_srl_epi16(_mm256_andnot_si256(hbits, sel), cnt));
                let q8c = load256(&q8[32 * c..]);
                let p16 = _mm256_sub_epi16(
                    _mm256_maddubs_epi16(q3l, q8c),
                    _mm256_maddubs_epi16(q3h, q8c),
                );
                *pc = _mm256_madd_epi16(_mm256_shuffle_epi8(*sc, scale_shuffle_q3k(c)), p16);
            }
            let p01 = _mm256_add_epi32(p[0], p[1]);
            let p23 = _mm256_add_epi32(p[2], p[3]);
            sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p01, p23));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    hsum_float_8(acc)
}

/// `ggml_vec_dot_q5_K_q8_K`, AVX2 path.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn vec_dot_q5_k_q8_k(x: &[BlockQ5K], y: &[BlockQ8K]) -> f32 {
    let m4 = _mm256_set1_epi8(0xF);
    let mone = _mm256_set1_epi8(1);
    let mut acc = _mm256_setzero_ps();
    let mut summs = 0.0f32;
    for (xb, yb) in x.iter().zip(y) {
        let d = yb.d() * f16c(xb.d);
        let dmin = -yb.d() * f16c(xb.dmin);
        let (mins_and_scales, prod) = scales_and_min_products(&xb.scales, yb);
        let zero = _mm_setzero_si128();
        let hsum = _mm_hadd_epi32(_mm_hadd_epi32(prod, zero), zero);
        summs = dmin.mul_add(_mm_cvtsi128_si32(hsum) as f32, summs);

        let sc128 = _mm256_extracti128_si256::<0>(mins_and_scales);
        let scales = _mm256_set_m128i(sc128, sc128);
        let hbits = load256(&xb.qh);
        let mut hmask = mone;
        let mut sumi = _mm256_setzero_si256();
        for j in 0..QK_K / 64 {
            let scale_0 = _mm256_shuffle_epi8(scales, scale_shuffle_k4(2 * j));
            let scale_1 = _mm256_shuffle_epi8(scales, scale_shuffle_k4(2 * j + 1));
            let q5bits = load256(&xb.qs[32 * j..]);
            let b0 = _mm_cvtsi32_si128((2 * j) as i32);
            let b1 = _mm_cvtsi32_si128((2 * j + 1) as i32);
            let q5l_0 = _mm256_and_si256(q5bits, m4);
            let q5h_0 =
                _mm256_slli_epi16::<4>(_mm256_srl_epi16(_mm256_and_si256(hbits, hmask), b0));
            let q5_0 = _mm256_add_epi8(q5l_0, q5h_0);
            hmask = _mm256_slli_epi16::<1>(hmask);
            let q5l_1 = _mm256_and_si256(_mm256_srli_epi16::<4>(q5bits), m4);
            let q5h_1 =
                _mm256_slli_epi16::<4>(_mm256_srl_epi16(_mm256_and_si256(hbits, hmask), b1));
            let q5_1 = _mm256_add_epi8(q5l_1, q5h_1);
            hmask = _mm256_slli_epi16::<1>(hmask);
            let q8_0 = load256(&yb.qs[64 * j..]);
            let q8_1 = load256(&yb.qs[64 * j + 32..]);
            let p16_0 = _mm256_madd_epi16(scale_0, _mm256_maddubs_epi16(q5_0, q8_0));
            let p16_1 = _mm256_madd_epi16(scale_1, _mm256_maddubs_epi16(q5_1, q8_1));
            sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p16_0, p16_1));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    hsum_float_8(acc) + summs
}

/// `ggml_vec_dot_iq4_xs_q8_K`, AVX2 path.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn vec_dot_iq4_xs_q8_k(x: &[BlockIq4Xs], y: &[BlockQ8K]) -> f32 {
    // SAFETY: the table is 16 readable bytes; the load is unaligned.
    let values = unsafe { _mm_loadu_si128(KVALUES_IQ4NL.as_ptr().cast()) };
    let m4b = _mm_set1_epi8(0x0f);
    let lookup = |bits: __m128i| {
        _mm256_set_m128i(
            _mm_shuffle_epi8(values, _mm_and_si128(_mm_srli_epi16::<4>(bits), m4b)),
            _mm_shuffle_epi8(values, _mm_and_si128(bits, m4b)),
        )
    };
    let mul_add = |x: __m256i, y: __m256i| {
        _mm256_maddubs_epi16(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x))
    };
    let mut accum = _mm256_setzero_ps();
    for (xb, yb) in x.iter().zip(y) {
        let mut sh = u16::from_le_bytes(xb.scales_h);
        let mut sumi1 = _mm256_setzero_si256();
        let mut sumi2 = _mm256_setzero_si256();
        for ib in (0..QK_K / 32).step_by(2) {
            let q4b_1 = lookup(load128(xb.qs[16 * ib..16 * ib + 16].try_into().expect("16")));
            let q4b_2 = lookup(load128(xb.qs[16 * ib + 16..16 * ib + 32].try_into().expect("16")));
            let q8b_1 = load256(&yb.qs[32 * ib..]);
            let q8b_2 = load256(&yb.qs[32 * ib + 32..]);
            let p16_1 = mul_add(q4b_1, q8b_1);
            let p16_2 = mul_add(q4b_2, q8b_2);
            let sl = xb.scales_l[ib / 2] as u16;
            let ls1 = ((sl & 0xf) | ((sh << 4) & 0x30)) as i16 - 32;
            let ls2 = ((sl >> 4) | ((sh << 2) & 0x30)) as i16 - 32;
            sh >>= 4;
            let p_1 = _mm256_madd_epi16(p16_1, _mm256_set1_epi16(ls1));
            let p_2 = _mm256_madd_epi16(p16_2, _mm256_set1_epi16(ls2));
            sumi1 = _mm256_add_epi32(p_1, sumi1);
            sumi2 = _mm256_add_epi32(p_2, sumi2);
        }
        accum = _mm256_fmadd_ps(
            _mm256_set1_ps(f16c(xb.d) * yb.d()),
            _mm256_cvtepi32_ps(_mm256_add_epi32(sumi1, sumi2)),
            accum,
        );
    }
    hsum_float_8(accum)
}
