//! The `x86_64-avx512` vec_dot kernels: our own schedule with AVX-512 F/BW and VNNI
//! (`_mm512_dpbusd_epi32`) intrinsics. The portable twin with the same names, the same
//! loops and the same float order is `tiercheck_core::arch::x86_64::avx512::vec_dot`; see its docs for
//! the lane assignment and the reduction tree in words.
//!
//! Every function here carries `#[target_feature(enable = "avx512f,avx512bw,avx512vnni,
//! avx2,fma,f16c")]`; 256-bit steps use AVX2 encodings (no AVX-512 VL), and the
//! 512 -> 256 split uses `extractf64x4` (AVX-512 F, not DQ).

use core::arch::x86_64::*;

use tiercheck_core::blocks::q4_k::scale_min_k4;
use tiercheck_core::blocks::{BlockQ4K, BlockQ4_0, BlockQ6K, BlockQ8K, BlockQ8_0, QK_K};

/// Lanes 0..8 of a 16-lane mask (the low 256 bits).
const LOW_HALF: __mmask16 = 0x00FF;

/// The 16-lane horizontal sum: (hi256 + lo256), then `hsum_float_8`'s tree:
/// (hi128 + lo128), then lanes (0 + 2, 1 + 3), then (0 + 1).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
fn hsum_float_16(x: __m512) -> f32 {
    let hi = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(x)));
    let v = _mm256_add_ps(hi, _mm512_castps512_ps256(x));
    let mut res = _mm256_extractf128_ps::<1>(v);
    res = _mm_add_ps(res, _mm256_castps256_ps128(v));
    res = _mm_add_ps(res, _mm_movehl_ps(res, res));
    res = _mm_add_ss(res, _mm_movehdup_ps(res));
    _mm_cvtss_f32(res)
}

/// Load 32 bytes from the start of `p` (which has at least 32).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
fn load256(p: &[u8]) -> __m256i {
    assert!(p.len() >= 32);
    // SAFETY: the assertion above guarantees 32 readable bytes; the load is unaligned.
    unsafe { _mm256_loadu_si256(p.as_ptr().cast()) }
}

/// Load 64 bytes from the start of `p` (which has at least 64).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
fn load512(p: &[u8]) -> __m512i {
    assert!(p.len() >= 64);
    // SAFETY: the assertion above guarantees 64 readable bytes; the load is unaligned.
    unsafe { _mm512_loadu_si512(p.as_ptr().cast()) }
}

/// `lo` in bytes 0..32, `hi` in bytes 32..64.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
fn join(lo: __m256i, hi: __m256i) -> __m512i {
    _mm512_inserti64x4::<1>(_mm512_castsi256_si512(lo), hi)
}

/// `lo` in bytes 0..32, zeros in bytes 32..64.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
fn join_zero(lo: __m256i) -> __m512i {
    _mm512_zextsi256_si512(lo)
}

/// The 32 q4_0 nibble codes (0..16) in value order: low nibbles, then high nibbles.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
fn q4_0_codes(qs: &[u8; 16]) -> __m256i {
    // SAFETY: `qs` is 16 readable bytes; the load is unaligned.
    let tmp = unsafe { _mm_loadu_si128(qs.as_ptr().cast()) };
    let bytes = _mm256_set_m128i(_mm_srli_epi16::<4>(tmp), tmp);
    _mm256_and_si256(_mm256_set1_epi8(0xF), bytes)
}

/// Lane t = dpbusd(u, y)_t - dpbusd(o, y)_t: the exact integer dot of four values.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
fn offset_dot(u: __m512i, o: __m512i, y: __m512i) -> __m512i {
    let zero = _mm512_setzero_si512();
    _mm512_sub_epi32(_mm512_dpbusd_epi32(zero, u, y), _mm512_dpbusd_epi32(zero, o, y))
}

/// d0 in lanes 0..8, d1 in lanes 8..16.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
fn pair_scales(d0: f32, d1: f32) -> __m512 {
    _mm512_mask_blend_ps(!LOW_HALF, _mm512_set1_ps(d0), _mm512_set1_ps(d1))
}

/// q4_0 times q8_0, 16 lanes: block pairs, an odd final block in lanes 0..8.
///
/// # Safety
/// The CPU must support AVX-512 F, BW and VNNI, AVX2, FMA and F16C.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
pub unsafe fn vec_dot_q4_0_q8_0(x: &[BlockQ4_0], y: &[BlockQ8_0]) -> f32 {
    let nb = x.len().min(y.len());
    let (x, y) = (&x[..nb], &y[..nb]);
    let eight = _mm512_set1_epi8(8);
    let mut acc = _mm512_setzero_ps();
    for (xp, yp) in x.chunks_exact(2).zip(y.chunks_exact(2)) {
        let d = pair_scales(xp[0].d() * yp[0].d(), xp[1].d() * yp[1].d());
        let qx = join(q4_0_codes(&xp[0].qs), q4_0_codes(&xp[1].qs));
        let qy = join(load256(&yp[0].qs), load256(&yp[1].qs));
        let q = _mm512_cvtepi32_ps(offset_dot(qx, eight, qy));
        acc = _mm512_fmadd_ps(d, q, acc);
    }
    if let ([xb], [yb]) = (x.chunks_exact(2).remainder(), y.chunks_exact(2).remainder()) {
        let d = _mm512_set1_ps(xb.d() * yb.d());
        let qx = join_zero(q4_0_codes(&xb.qs));
        let qy = join_zero(load256(&yb.qs));
        let q = _mm512_cvtepi32_ps(offset_dot(qx, eight, qy));
        acc = _mm512_mask3_fmadd_ps(d, q, acc, LOW_HALF);
    }
    hsum_float_16(acc)
}

/// q8_0 times q8_0, 16 lanes: block pairs, an odd final block in lanes 0..8. Weight
/// codes enter dpbusd as q XOR 0x80 = q + 128 (unsigned), and 128 * sum(y) comes off.
///
/// # Safety
/// The CPU must support AVX-512 F, BW and VNNI, AVX2, FMA and F16C.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
pub unsafe fn vec_dot_q8_0_q8_0(x: &[BlockQ8_0], y: &[BlockQ8_0]) -> f32 {
    let nb = x.len().min(y.len());
    let (x, y) = (&x[..nb], &y[..nb]);
    let bias = _mm512_set1_epi8(-128);
    let mut acc = _mm512_setzero_ps();
    for (xp, yp) in x.chunks_exact(2).zip(y.chunks_exact(2)) {
        let d = pair_scales(xp[0].d() * yp[0].d(), xp[1].d() * yp[1].d());
        let qx = _mm512_xor_si512(join(load256(&xp[0].qs), load256(&xp[1].qs)), bias);
        let qy = join(load256(&yp[0].qs), load256(&yp[1].qs));
        let q = _mm512_cvtepi32_ps(offset_dot(qx, bias, qy));
        acc = _mm512_fmadd_ps(d, q, acc);
    }
    if let ([xb], [yb]) = (x.chunks_exact(2).remainder(), y.chunks_exact(2).remainder()) {
        let d = _mm512_set1_ps(xb.d() * yb.d());
        // The zero upper half of qy gives 0 in lanes 8..16; the mask leaves them alone.
        let qx = _mm512_xor_si512(join_zero(load256(&xb.qs)), bias);
        let qy = join_zero(load256(&yb.qs));
        let q = _mm512_cvtepi32_ps(offset_dot(qx, bias, qy));
        acc = _mm512_mask3_fmadd_ps(d, q, acc, LOW_HALF);
    }
    hsum_float_16(acc)
}

/// q4_K times q8_K: 16 scale lanes plus 16 min lanes, added lane by lane at the end.
///
/// # Safety
/// The CPU must support AVX-512 F, BW and VNNI, AVX2, FMA and F16C.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
pub unsafe fn vec_dot_q4_k_q8_k(x: &[BlockQ4K], y: &[BlockQ8K]) -> f32 {
    let m4 = _mm256_set1_epi8(0xF);
    // Byte t of the result is byte t/2 of the source: min j for bsums 2j and 2j + 1.
    let dup = _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
    let mut acc = _mm512_setzero_ps();
    let mut acc_m = _mm512_setzero_ps();
    for (xb, yb) in x.iter().zip(y) {
        let d = yb.d() * xb.d();
        let dmin = -yb.d() * xb.dmin();
        let mut sc = [0i32; 8];
        let mut mn = [0u8; 8];
        for j in 0..8 {
            let (s, m) = scale_min_k4(j, &xb.scales);
            sc[j] = s as i32;
            mn[j] = m;
        }
        let mins = _mm_set_epi64x(0, i64::from_le_bytes(mn));
        let mins = _mm512_cvtepu8_epi32(_mm_shuffle_epi8(mins, dup));
        let bsums = _mm512_cvtepi16_epi32(load256(&yb.bsums));
        let mprod = _mm512_mullo_epi32(mins, bsums);

        let mut sumi = _mm512_setzero_si512();
        for c in 0..QK_K / 64 {
            let q4bits = load256(&xb.qs[32 * c..]);
            let q4l = _mm256_and_si256(q4bits, m4);
            let q4h = _mm256_and_si256(_mm256_srli_epi16::<4>(q4bits), m4);
            let qx = join(q4l, q4h);
            let qy = load512(&yb.qs[64 * c..]);
            let raw = _mm512_dpbusd_epi32(_mm512_setzero_si512(), qx, qy);
            let scale = _mm512_mask_blend_epi32(
                !LOW_HALF,
                _mm512_set1_epi32(sc[2 * c]),
                _mm512_set1_epi32(sc[2 * c + 1]),
            );
            sumi = _mm512_add_epi32(sumi, _mm512_mullo_epi32(scale, raw));
        }
        acc = _mm512_fmadd_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(sumi), acc);
        acc_m = _mm512_fmadd_ps(_mm512_set1_ps(dmin), _mm512_cvtepi32_ps(mprod), acc_m);
    }
    hsum_float_16(_mm512_add_ps(acc, acc_m))
}

/// The q6_K scales of lanes t = 0..16 for chunk (n, p): scale 8n + 4p + t/4.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
fn q6_k_scale_lanes(scales: __m128i, first: usize) -> __m512i {
    let s = first as i8;
    let idx = _mm_setr_epi8(
        s,
        s,
        s,
        s,
        s + 1,
        s + 1,
        s + 1,
        s + 1,
        s + 2,
        s + 2,
        s + 2,
        s + 2,
        s + 3,
        s + 3,
        s + 3,
        s + 3,
    );
    _mm512_cvtepi8_epi32(_mm_shuffle_epi8(scales, idx))
}

/// q6_K times q8_K, 16 lanes. Codes enter dpbusd unsigned (q + 32, 0..64); the offset
/// comes off per lane as dpbusd(32, y).
///
/// # Safety
/// The CPU must support AVX-512 F, BW and VNNI, AVX2, FMA and F16C.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
pub unsafe fn vec_dot_q6_k_q8_k(x: &[BlockQ6K], y: &[BlockQ8K]) -> f32 {
    let m15 = _mm512_set1_epi8(15);
    let m48 = _mm512_set1_epi8(48);
    let thirty_two = _mm512_set1_epi8(32);
    let mut acc = _mm512_setzero_ps();
    for (xb, yb) in x.iter().zip(y) {
        let d = yb.d() * xb.d();
        // SAFETY: `xb.scales` is 16 readable bytes; the load is unaligned.
        let scales = unsafe { _mm_loadu_si128(xb.scales.as_ptr().cast()) };
        let mut sumi = _mm512_setzero_si512();
        for n in 0..QK_K / 128 {
            // Bytes 0..32: ql[l], bytes 32..64: ql[32 + l] (l < 32) of this half.
            let ql = load512(&xb.ql[64 * n..]);
            let qh = load256(&xb.qh[32 * n..]);
            // qh bit pairs (0-1, 2-3) for chunk p = 0 and (4-5, 6-7) for p = 1, moved to
            // bits 4-5 of each byte (16-bit shifts; the mask drops what crossed bytes).
            let hi = [
                join(_mm256_slli_epi16::<4>(qh), _mm256_slli_epi16::<2>(qh)),
                join(qh, _mm256_srli_epi16::<2>(qh)),
            ];
            let lo = [_mm512_and_si512(ql, m15), _mm512_and_si512(_mm512_srli_epi16::<4>(ql), m15)];
            for p in 0..2 {
                let qx = _mm512_or_si512(lo[p], _mm512_and_si512(hi[p], m48));
                let qy = load512(&yb.qs[128 * n + 64 * p..]);
                let lane = offset_dot(qx, thirty_two, qy);
                let scale = q6_k_scale_lanes(scales, 8 * n + 4 * p);
                sumi = _mm512_add_epi32(sumi, _mm512_mullo_epi32(scale, lane));
            }
        }
        acc = _mm512_fmadd_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(sumi), acc);
    }
    hsum_float_16(acc)
}
