//! Native AVX2 kernels of the repacked layouts, one group of 8 columns at a time.
//! Twin: `tiercheck_core::arch::x86_64::avx2_repack::kernels` (same names, same float order).
//!
//! Integer stage: for each 8-byte chunk row t of an interleaved superblock (the 8
//! columns' plain bytes [8t, 8t + 8)), `maddubs` of the column bytes against the
//! activation bytes they multiply (broadcast to every column), `madd` with ones, and
//! per-sub-block accumulation; `hadd` folds each column's two i32 lanes. All exact.
//! Float stage, vectorized across the 8 columns: `acc = fma(float(isum), d_j * d_y,
//! acc)` once per superblock (gemv) or once per sub-block pair (gemm), the same for the
//! min term, output `acc - acc_min`.

use core::arch::x86_64::*;

use tiercheck_core::blocks::iq4_nl::KVALUES_IQ4NL;
use tiercheck_core::blocks::{BlockQ8K, BlockQ8_0};
use tiercheck_core::repack::{BlockIq4Nlx8, BlockQ4Kx8, BlockQ4_0x8};

/// Eight f16 values to f32 (F16C, exact).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn load_f16x8(h: &[[u8; 2]; 8]) -> __m256 {
    // SAFETY: `h` is 16 readable bytes; the load is unaligned.
    _mm256_cvtph_ps(unsafe { _mm_loadu_si128(h.as_ptr().cast()) })
}

/// For one interleaved superblock: per sub-block s, the 8 columns' dots (i32 x 8).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn q4_kx8_dots(x: &BlockQ4Kx8, y: &BlockQ8K) -> [__m256i; 8] {
    let m4 = _mm256_set1_epi8(0xF);
    let ones = _mm256_set1_epi16(1);
    let mut out = [_mm256_setzero_si256(); 8];
    for c in 0..4 {
        // columns 0-3 and 4-7, two i32 lanes per column
        let (mut lo03, mut lo47, mut hi03, mut hi47) = (
            _mm256_setzero_si256(),
            _mm256_setzero_si256(),
            _mm256_setzero_si256(),
            _mm256_setzero_si256(),
        );
        for u in 0..4 {
            let t = 4 * c + u;
            // SAFETY: 64 bytes at offset 64t lie inside the 1024-byte `qs`.
            let (b03, b47) = unsafe {
                let p = x.qs.as_ptr().add(64 * t);
                (_mm256_loadu_si256(p.cast()), _mm256_loadu_si256(p.add(32).cast()))
            };
            let l0 = 8 * u;
            let ylo =
                i64::from_le_bytes(y.qs[64 * c + l0..64 * c + l0 + 8].try_into().expect("8 bytes"));
            let yhi = i64::from_le_bytes(
                y.qs[64 * c + 32 + l0..64 * c + 40 + l0].try_into().expect("8 bytes"),
            );
            let (ylo, yhi) = (_mm256_set1_epi64x(ylo), _mm256_set1_epi64x(yhi));
            let lo = |b: __m256i| {
                _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_and_si256(b, m4), ylo), ones)
            };
            let hi = |b: __m256i| {
                _mm256_madd_epi16(
                    _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16::<4>(b), m4), yhi),
                    ones,
                )
            };
            lo03 = _mm256_add_epi32(lo03, lo(b03));
            lo47 = _mm256_add_epi32(lo47, lo(b47));
            hi03 = _mm256_add_epi32(hi03, hi(b03));
            hi47 = _mm256_add_epi32(hi47, hi(b47));
        }
        // hadd gives [c0 c1 c4 c5 | c2 c3 c6 c7]; permute to column order.
        let order = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);
        out[2 * c] = _mm256_permutevar8x32_epi32(_mm256_hadd_epi32(lo03, lo47), order);
        out[2 * c + 1] = _mm256_permutevar8x32_epi32(_mm256_hadd_epi32(hi03, hi47), order);
    }
    out
}

/// Per sub-block s, the 8 columns' 6-bit scales and mins as i32 x 8.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn scales_mins(x: &BlockQ4Kx8, s: usize) -> (__m256i, __m256i) {
    let mut sc = [0i32; 8];
    let mut mn = [0i32; 8];
    for j in 0..8 {
        let (a, b) = x.scale_min(j, s);
        sc[j] = a as i32;
        mn[j] = b as i32;
    }
    // SAFETY: both arrays are 32 readable bytes.
    unsafe { (_mm256_loadu_si256(sc.as_ptr().cast()), _mm256_loadu_si256(mn.as_ptr().cast())) }
}

/// `ggml_gemv_q4_K_8x8_q8_K` for one group of 8 columns.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn gemv_q4_k_8x8(blocks: &[BlockQ4Kx8], y: &[BlockQ8K]) -> [f32; 8] {
    let mut acc = _mm256_setzero_ps();
    let mut acc_min = _mm256_setzero_ps();
    for (x, yb) in blocks.iter().zip(y) {
        let dots = q4_kx8_dots(x, yb);
        let mut isum = _mm256_setzero_si256();
        let mut imin = _mm256_setzero_si256();
        for (s, dot) in dots.iter().enumerate() {
            let (sc, mn) = scales_mins(x, s);
            let ss = yb.bsum(2 * s).wrapping_add(yb.bsum(2 * s + 1)) as i32;
            isum = _mm256_add_epi32(isum, _mm256_mullo_epi32(sc, *dot));
            imin = _mm256_add_epi32(imin, _mm256_mullo_epi32(mn, _mm256_set1_epi32(ss)));
        }
        let dy = _mm256_set1_ps(yb.d());
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(load_f16x8(&x.d), dy), acc);
        acc_min = _mm256_fmadd_ps(
            _mm256_cvtepi32_ps(imin),
            _mm256_mul_ps(load_f16x8(&x.dmin), dy),
            acc_min,
        );
    }
    let mut out = [0.0f32; 8];
    // SAFETY: `out` is 32 writable bytes.
    unsafe { _mm256_storeu_ps(out.as_mut_ptr(), _mm256_sub_ps(acc, acc_min)) };
    out
}

/// `ggml_gemm_q4_K_8x8_q8_K` for one group of 8 columns and one of the four rows.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn gemm_q4_k_8x8(blocks: &[BlockQ4Kx8], y: &[BlockQ8K]) -> [f32; 8] {
    let mut acc = _mm256_setzero_ps();
    let mut acc_min = _mm256_setzero_ps();
    for (x, yb) in blocks.iter().zip(y) {
        let dots = q4_kx8_dots(x, yb);
        let dy = _mm256_set1_ps(yb.d());
        let dcol = _mm256_mul_ps(load_f16x8(&x.d), dy);
        let mcol = _mm256_mul_ps(load_f16x8(&x.dmin), dy);
        for p in 0..4 {
            let (sc0, mn0) = scales_mins(x, 2 * p);
            let (sc1, mn1) = scales_mins(x, 2 * p + 1);
            let isum = _mm256_add_epi32(
                _mm256_mullo_epi32(sc0, dots[2 * p]),
                _mm256_mullo_epi32(sc1, dots[2 * p + 1]),
            );
            let s0 = yb.bsum(4 * p).wrapping_add(yb.bsum(4 * p + 1)) as i32;
            let s1 = yb.bsum(4 * p + 2).wrapping_add(yb.bsum(4 * p + 3)) as i32;
            let imin = _mm256_add_epi32(
                _mm256_mullo_epi32(mn0, _mm256_set1_epi32(s0)),
                _mm256_mullo_epi32(mn1, _mm256_set1_epi32(s1)),
            );
            acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), dcol, acc);
            acc_min = _mm256_fmadd_ps(_mm256_cvtepi32_ps(imin), mcol, acc_min);
        }
    }
    let mut out = [0.0f32; 8];
    // SAFETY: `out` is 32 writable bytes.
    unsafe { _mm256_storeu_ps(out.as_mut_ptr(), _mm256_sub_ps(acc, acc_min)) };
    out
}

/// `ggml_gemv_q4_0_8x8_q8_0` (per row also the gemm) for one group of 8 columns.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn gemv_q4_0_8x8(blocks: &[BlockQ4_0x8], y: &[BlockQ8_0]) -> [f32; 8] {
    let m4 = _mm256_set1_epi8(0xF);
    let eight = _mm256_set1_epi8(8);
    let x88 = _mm256_set1_epi8(0x88u8 as i8);
    let values = |b: __m256i| {
        let plain = _mm256_xor_si256(b, x88);
        let lo = _mm256_sub_epi8(_mm256_and_si256(plain, m4), eight);
        let hi = _mm256_sub_epi8(_mm256_and_si256(_mm256_srli_epi16::<4>(plain), m4), eight);
        (lo, hi)
    };
    gemv_b32_8x8(blocks.iter().map(|x| (&x.d, &x.qs)), y, values)
}

/// `ggml_gemv_iq4_nl_8x8_q8_0` (per row also the gemm) for one group of 8 columns: the
/// `q4_0_8x8` body with the IQ4_NL table (`_mm256_shuffle_epi8`) in place of the XOR and
/// offset.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn gemv_iq4_nl_8x8(blocks: &[BlockIq4Nlx8], y: &[BlockQ8_0]) -> [f32; 8] {
    let m4 = _mm256_set1_epi8(0xF);
    // SAFETY: the table is 16 readable bytes; the load is unaligned.
    let table = unsafe { _mm_loadu_si128(KVALUES_IQ4NL.as_ptr().cast()) };
    let lut = _mm256_set_m128i(table, table);
    let values = |b: __m256i| {
        let lo = _mm256_shuffle_epi8(lut, _mm256_and_si256(b, m4));
        let hi = _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi16::<4>(b), m4));
        (lo, hi)
    };
    gemv_b32_8x8(blocks.iter().map(|x| (&x.d, &x.qs)), y, values)
}

/// `gemv_q4_b32_8x8_q8_0_lut_avx` (the template of both): each block as its eight f16
/// scales and 128 interleaved bytes; `values` turns 32 stored bytes into their low and
/// high nibbles' signed values.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn gemv_b32_8x8<'a>(
    blocks: impl Iterator<Item = (&'a [[u8; 2]; 8], &'a [u8; 128])>,
    y: &[BlockQ8_0],
    values: impl Fn(__m256i) -> (__m256i, __m256i),
) -> [f32; 8] {
    let ones = _mm256_set1_epi16(1);
    let order = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);
    let mut acc = _mm256_setzero_ps();
    for ((d, qs), yb) in blocks.zip(y) {
        let (mut s03, mut s47) = (_mm256_setzero_si256(), _mm256_setzero_si256());
        for t in 0..2 {
            // SAFETY: 64 bytes at offset 64t lie inside the 128-byte `qs`.
            let (b03, b47) = unsafe {
                let p = qs.as_ptr().add(64 * t);
                (_mm256_loadu_si256(p.cast()), _mm256_loadu_si256(p.add(32).cast()))
            };
            let ylo = _mm256_set1_epi64x(i64::from_le_bytes(
                yb.qs[8 * t..8 * t + 8].try_into().expect("8 bytes"),
            ));
            let yhi = _mm256_set1_epi64x(i64::from_le_bytes(
                yb.qs[16 + 8 * t..24 + 8 * t].try_into().expect("8 bytes"),
            ));
            let dot = |b: __m256i| {
                let (lo, hi) = values(b);
                let p = |xv: __m256i, yv: __m256i| {
                    _mm256_madd_epi16(
                        _mm256_maddubs_epi16(_mm256_sign_epi8(xv, xv), _mm256_sign_epi8(yv, xv)),
                        ones,
                    )
                };
                _mm256_add_epi32(p(lo, ylo), p(hi, yhi))
            };
            s03 = _mm256_add_epi32(s03, dot(b03));
            s47 = _mm256_add_epi32(s47, dot(b47));
        }
        let isum = _mm256_permutevar8x32_epi32(_mm256_hadd_epi32(s03, s47), order);
        let dcol = _mm256_mul_ps(load_f16x8(d), _mm256_set1_ps(yb.d()));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), dcol, acc);
    }
    let mut out = [0.0f32; 8];
    // SAFETY: `out` is 32 writable bytes.
    unsafe { _mm256_storeu_ps(out.as_mut_ptr(), acc) };
    out
}
