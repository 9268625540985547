//! ggml's x86 tiled K-quant matmul with the haswell build's AVX2 microkernel
//! (`tiled_run_microtile_avx2` in `ggml-cpu/tiled/tiled-kernel.cpp`), natively. The
//! portable twin with the same names and the same float order is
//! `tiercheck_core::arch::x86_64::avx2::tiled`; its module doc gives the order in words.
//!
//! As in ggml: the integer sums of one (weight row, activation row, superblock) are
//! `_mm256_maddubs_epi16` products of the weight codes and the activation codes,
//! widened by `_mm256_madd_epi16` against the sub-block scale and summed in eight i32
//! lanes (Q6_K: the activation biased by +128 against the weight code minus 32, the bias
//! subtracted afterwards); the min term of Q4_K is `_mm256_mullo_epi32` of the
//! activation's 32-value sums by the mins, eight activation rows at a time; the float
//! chain runs eight activation rows at a time: `_mm256_mul_ps`, `_mm256_fnmadd_ps`
//! (Q4_K), `_mm256_fmadd_ps` into the accumulator. Rows beyond a multiple of eight take
//! the same operations one at a time (`f32::mul_add` is the same fused operation).
//!
//! Q2_K, Q3_K, Q5_K and IQ4_XS (the twin's `TiledBlock`): each code times its sub-block
//! scale as i16 (at most 4064 in magnitude), `_mm256_madd_epi16` against the widened
//! activation codes gives the same exact s1; s2 and the float step are the twin's
//! (`tiled_float_step`), one activation row at a time.

use core::arch::x86_64::*;

use super::vec_dot::load256;

use tiercheck_core::arch::x86_64::avx2::tiled::{
    q4_k_s2, q4_k_scales_mins, q4_k_step, q6_k_scales, q6_k_step, tiled_block, tiled_float_step,
};
use tiercheck_core::blocks::{cast_blocks, BlockQ4K, BlockQ6K, BlockQ8K, QK_K};
use tiercheck_core::{GgmlType, KernelError, WeightMatrix};

/// Load eight i32 from the start of `p` (which has at least eight).
#[inline]
#[target_feature(enable = "avx2,fma")]
fn load_i32x8(p: &[i32]) -> __m256i {
    assert!(p.len() >= 8);
    // SAFETY: the assertion above guarantees 32 readable bytes; the load is unaligned.
    unsafe { _mm256_loadu_si256(p.as_ptr().cast()) }
}

/// Load eight f32 from the start of `p` (which has at least eight).
#[inline]
#[target_feature(enable = "avx2,fma")]
fn load_f32x8(p: &[f32]) -> __m256 {
    assert!(p.len() >= 8);
    // SAFETY: the assertion above guarantees 32 readable bytes; the load is unaligned.
    unsafe { _mm256_loadu_ps(p.as_ptr()) }
}

/// Store eight f32 at the start of `p` (which has room for eight).
#[inline]
#[target_feature(enable = "avx2,fma")]
fn store_f32x8(p: &mut [f32], v: __m256) {
    assert!(p.len() >= 8);
    // SAFETY: the assertion above guarantees 32 writable bytes; the store is unaligned.
    unsafe { _mm256_storeu_ps(p.as_mut_ptr(), v) }
}

/// The horizontal i32 sum of the microkernel (`hsum256_epi32`): lo128 + hi128, then
/// two shuffled adds (exact in any order).
#[inline]
#[target_feature(enable = "avx2,fma")]
fn hsum_i32x8(v: __m256i) -> i32 {
    let mut s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
    s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b10_11_00_01>(s));
    s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b01_00_11_10>(s));
    _mm_cvtsi128_si32(s)
}

/// Q4_K codes of one block in value order, as `tiled_unpk_nib4` writes them: for each
/// 32-byte chunk c, the low nibbles are values 64c..64c+32 and the high 64c+32..64c+64.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn unpack_q4_k(qs: &[u8; QK_K / 2], out: &mut [u8; QK_K]) {
    let lo_mask = _mm256_set1_epi8(0x0F);
    let hi_mask = _mm256_set1_epi8(0xF0u8 as i8);
    for c in 0..4 {
        let v = load256(&qs[32 * c..]);
        let lo = _mm256_and_si256(v, lo_mask);
        let hi = _mm256_srli_epi32::<4>(_mm256_and_si256(v, hi_mask));
        // SAFETY: out[64c..64c+64] is in bounds (c < 4); the stores are unaligned.
        unsafe {
            _mm256_storeu_si256(out[64 * c..].as_mut_ptr().cast(), lo);
            _mm256_storeu_si256(out[64 * c + 32..].as_mut_ptr().cast(), hi);
        }
    }
}

/// The tiled matmul: `out[i*n + j]` for plain Q4_K or Q6_K weights and the q8_K
/// activation rows `act` (the caller decides that ggml takes this path).
///
/// # Safety
/// The CPU must have AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub unsafe fn matmul(w: &WeightMatrix<'_>, act: &[&[u8]]) -> Result<Vec<f32>, KernelError> {
    let (n, m) = (w.n(), act.len());
    let nb = w.k() / QK_K;
    let ys: Vec<&[BlockQ8K]> =
        act.iter().map(|a| cast_blocks(GgmlType::Q8_K, a)).collect::<Result<_, _>>()?;
    // The activation tile, block-major so eight rows load at once: d8[b*m + i].
    let d8: Vec<f32> = (0..nb).flat_map(|b| ys.iter().map(move |y| y[b].d())).collect();
    let mut out = vec![0.0f32; m * n];
    let mut acc = vec![0.0f32; m];
    let mut s1 = vec![0i32; m];
    match w.ty() {
        GgmlType::Q4_K => {
            // bs32[(b*8 + s)*m + i] = bsums[2s] + bsums[2s+1] of row i, block b.
            let mut bs32 = vec![0i32; nb * 8 * m];
            for (i, y) in ys.iter().enumerate() {
                for (b, y) in y.iter().enumerate() {
                    for s in 0..8 {
                        bs32[(b * 8 + s) * m + i] = y.bsum(2 * s) as i32 + y.bsum(2 * s + 1) as i32;
                    }
                }
            }
            let mut q = [0u8; QK_K];
            for j in 0..n {
                let row: &[BlockQ4K] = cast_blocks(GgmlType::Q4_K, w.row(j))?;
                acc.fill(0.0);
                for (b, x) in row.iter().enumerate() {
                    let (sc, mn) = q4_k_scales_mins(x);
                    unpack_q4_k(&x.qs, &mut q);
                    let (d, dmin) = (x.d(), x.dmin());
                    for (s1, y) in s1.iter_mut().zip(&ys) {
                        let a = &y[b].qs;
                        let mut v = _mm256_setzero_si256();
                        for s in 0..8 {
                            let p =
                                _mm256_maddubs_epi16(load256(&q[32 * s..]), load256(&a[32 * s..]));
                            v = _mm256_add_epi32(
                                v,
                                _mm256_madd_epi16(_mm256_set1_epi16(sc[s] as i16), p),
                            );
                        }
                        *s1 = hsum_i32x8(v);
                    }
                    let bs = &bs32[b * 8 * m..(b + 1) * 8 * m];
                    let d8 = &d8[b * m..(b + 1) * m];
                    let mut i = 0;
                    while i + 8 <= m {
                        let mut s2 = _mm256_setzero_si256();
                        for s in 0..8 {
                            let v = load_i32x8(&bs[s * m + i..]);
                            s2 = _mm256_add_epi32(
                                s2,
                                _mm256_mullo_epi32(v, _mm256_set1_epi32(mn[s])),
                            );
                        }
                        let mut r = _mm256_mul_ps(
                            _mm256_set1_ps(d),
                            _mm256_cvtepi32_ps(load_i32x8(&s1[i..])),
                        );
                        r = _mm256_fnmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(s2), r);
                        let upd = _mm256_fmadd_ps(r, load_f32x8(&d8[i..]), load_f32x8(&acc[i..]));
                        store_f32x8(&mut acc[i..], upd);
                        i += 8;
                    }
                    for i in i..m {
                        acc[i] = q4_k_step(acc[i], d, dmin, s1[i], q4_k_s2(&mn, &ys[i][b]), d8[i]);
                    }
                }
                for (i, v) in acc.iter().enumerate() {
                    out[i * n + j] = *v;
                }
            }
        }
        GgmlType::Q6_K => {
            // The activation codes biased by +128 (`tiled_repack_src1`: xor 0x80).
            let biased: Vec<Vec<u8>> = ys
                .iter()
                .map(|y| y.iter().flat_map(|b| b.qs.iter().map(|q| q ^ 0x80)).collect())
                .collect();
            for j in 0..n {
                let row: &[BlockQ6K] = cast_blocks(GgmlType::Q6_K, w.row(j))?;
                acc.fill(0.0);
                for (b, x) in row.iter().enumerate() {
                    let sc = q6_k_scales(x);
                    let wq: [u8; QK_K] = x.quants().map(|v| v as u8); // q - 32, as i8 bytes
                                                                      // corr = 128 * sum_s sc_s * sum_{e in s} (q_e - 32) (`tiled_repack_src0`).
                    let corr: i32 = (0..16)
                        .map(|s| {
                            128 * sc[s]
                                * wq[16 * s..16 * s + 16]
                                    .iter()
                                    .map(|&v| v as i8 as i32)
                                    .sum::<i32>()
                        })
                        .sum();
                    for (s1, a) in s1.iter_mut().zip(&biased) {
                        let a = &a[b * QK_K..(b + 1) * QK_K];
                        let mut v = _mm256_setzero_si256();
                        for sp in (0..16).step_by(2) {
                            let scales = _mm256_set_m128i(
                                _mm_set1_epi16(sc[sp + 1] as i16),
                                _mm_set1_epi16(sc[sp] as i16),
                            );
                            let p = _mm256_maddubs_epi16(
                                load256(&a[16 * sp..]),
                                load256(&wq[16 * sp..]),
                            );
                            v = _mm256_add_epi32(v, _mm256_madd_epi16(scales, p));
                        }
                        *s1 = hsum_i32x8(v) - corr;
                    }
                    let d = x.d();
                    let d8 = &d8[b * m..(b + 1) * m];
                    let mut i = 0;
                    while i + 8 <= m {
                        let r = _mm256_mul_ps(
                            _mm256_set1_ps(d),
                            _mm256_cvtepi32_ps(load_i32x8(&s1[i..])),
                        );
                        let upd = _mm256_fmadd_ps(r, load_f32x8(&d8[i..]), load_f32x8(&acc[i..]));
                        store_f32x8(&mut acc[i..], upd);
                        i += 8;
                    }
                    for i in i..m {
                        acc[i] = q6_k_step(acc[i], d, s1[i], d8[i]);
                    }
                }
                for (i, v) in acc.iter().enumerate() {
                    out[i * n + j] = *v;
                }
            }
        }
        ty @ (GgmlType::Q2_K | GgmlType::Q3_K | GgmlType::Q5_K | GgmlType::IQ4_XS) => {
            // The activation codes widened to i16 once per row.
            let a16: Vec<Vec<i16>> = ys
                .iter()
                .map(|y| y.iter().flat_map(|b| b.qs.iter().map(|&q| q as i8 as i16)).collect())
                .collect();
            let mut c = [0i16; QK_K];
            for j in 0..n {
                acc.fill(0.0);
                for b in 0..nb {
                    // The twin's unpacked block; each code times its sub-block's scale fits
                    // i16 (at most 127 * 32, IQ4_XS), so s1 is one `madd` sum per 16
                    // values (pairs at most 2 * 4064 * 128, 256 products inside i32).
                    let x = tiled_block(ty, w.row(j), b)?;
                    for (e, c) in c.iter_mut().enumerate() {
                        *c = (x.codes[e] * x.scales[e / x.sub]) as i16;
                    }
                    for (i, y) in ys.iter().enumerate() {
                        let a = &a16[i][b * QK_K..(b + 1) * QK_K];
                        let mut v = _mm256_setzero_si256();
                        for t in 0..QK_K / 16 {
                            v = _mm256_add_epi32(
                                v,
                                _mm256_madd_epi16(
                                    load_i16x16(&c[16 * t..]),
                                    load_i16x16(&a[16 * t..]),
                                ),
                            );
                        }
                        acc[i] = tiled_float_step(acc[i], &x, hsum_i32x8(v), &y[b]);
                    }
                }
                for (i, v) in acc.iter().enumerate() {
                    out[i * n + j] = *v;
                }
            }
        }
        other => return Err(KernelError::Unsupported { op: "x86 tiled matmul", ty: other.name() }),
    }
    Ok(out)
}

/// Load sixteen i16 from the start of `p` (which has at least sixteen).
#[inline]
#[target_feature(enable = "avx2,fma")]
fn load_i16x16(p: &[i16]) -> __m256i {
    assert!(p.len() >= 16);
    // SAFETY: the assertion above guarantees 32 readable bytes; the load is unaligned.
    unsafe { _mm256_loadu_si256(p.as_ptr().cast()) }
}
