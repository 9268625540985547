//! Accelerated forms of `tiercheck_core::arch::aarch64::neon_repack::kernels` (the
//! aarch64 repacked twins' integer stages and float sides; the i8mm and SVE repacked
//! twins share them): on x86-64 with AVX2 and FMA, Q4_K eight rows at a time
//! ([`crate::x86::q4kx8_dots`]), Q8_0 and Q4_0 four rows at a time
//! ([`crate::x86::q8_0x4_isums`], [`crate::x86::q4_0x4_isums`], 4- and 8-byte
//! interleaves), Q6_K eight rows ([`crate::x86::q6kx8_isums`]), Q5_K eight rows
//! ([`crate::x86::q5kx8_dots`]), IQ4_NL four rows ([`crate::x86::nib4x4_isums`]); with
//! F16C as well, the Q4_0/Q8_0/IQ4_NL and Q6_K gemv and Q6_K gemm with the rows in
//! SSE/AVX lanes and the f16 scales converted by `vcvtph2ps` (exact).

#[allow(unused_imports)]
use tiercheck_core::arch::aarch64::neon_repack::kernels::slots;
#[allow(unused_imports)]
use tiercheck_core::blocks::{BlockQ8K, BlockQ8_0};
#[allow(unused_imports)]
use tiercheck_core::repack::{BlockQ4Kx8, BlockQ4_0x4, BlockQ5Kx8, BlockQ6Kx8, BlockQ8_0x4};

use crate::Host;

#[allow(unused_imports)]
use crate::f16;

/// Fills this file's slots where `host` serves them.
pub(crate) fn install(host: Host) {
    #[cfg(target_arch = "x86_64")]
    if host.avx2_fma {
        // SAFETY: installed only where the CPU has AVX2 and FMA.
        slots::GEMV_Q4_K_8X4.set_fast(|b, y| unsafe { fast::gemv_q4_k_8x4(b, y) });
        // SAFETY: as above.
        slots::GEMV_Q5_K_8X4.set_fast(|b, y| unsafe { fast::gemv_q5_k_8x4(b, y) });
        // SAFETY: as above (AVX2: the same exact integers).
        slots::Q4_0X4_ISUMS
            .set_fast(|x, il, y| unsafe { crate::x86::q4_0x4_isums(&x.qs, il, &y.qs) });
        // SAFETY: as above.
        slots::Q8_0X4_ISUMS
            .set_fast(|x, il, y| unsafe { crate::x86::q8_0x4_isums(&x.qs, il, &y.qs) });
        // SAFETY: as above; the twin calls it for interleaves 4 and 8 only.
        slots::Q6_K_X8_ISUMS
            .set_fast(|x, il, y| unsafe { crate::x86::q6kx8_isums(x, il, &y.qs, &y.bsums) });
        // SAFETY: as above; the twins call it for interleaves 4 and 8 only.
        slots::Q5_KX8_DOTS
            .set_fast(|x, il, y| unsafe { crate::x86::q5kx8_dots(&x.qs, &x.qh, &y.qs, il) });
        // SAFETY: as above.
        slots::IQ4_NLX4_ISUMS.set_fast(|x, y| unsafe {
            let table = &tiercheck_core::blocks::iq4_nl::KVALUES_IQ4NL;
            crate::x86::nib4x4_isums(&x.qs, 4, &y.qs, 0, table)
        });
    }
    #[cfg(target_arch = "x86_64")]
    if host.avx2_fma && host.f16c {
        // SAFETY: installed only where the CPU has AVX2, FMA and F16C.
        slots::GEMV_Q4_0_4XIL.set_fast(|b, il, y| unsafe {
            avx::gemv_legacy_x4_avx2::<_, true>(b, y, |x, yb| {
                (crate::x86::q4_0x4_isums(&x.qs, il, &yb.qs), x.d)
            })
        });
        // SAFETY: as above.
        slots::GEMV_Q8_0_4XIL.set_fast(|b, il, y| unsafe {
            avx::gemv_legacy_x4_avx2::<_, true>(b, y, |x, yb| {
                (crate::x86::q8_0x4_isums(&x.qs, il, &yb.qs), x.d)
            })
        });
        // SAFETY: as above.
        slots::GEMV_Q6_K_8X4.set_fast(|b, y| unsafe { avx::q6_k_x8_avx2::<true>(b, 4, y) });
        // SAFETY: as above.
        slots::GEMV_IQ4_NL_4X4.set_fast(|b, y| unsafe {
            let table = &tiercheck_core::blocks::iq4_nl::KVALUES_IQ4NL;
            avx::gemv_legacy_x4_avx2::<_, false>(b, y, |x, yb| {
                (crate::x86::nib4x4_isums(&x.qs, 4, &yb.qs, 0, table), x.d)
            })
        });
        // SAFETY: as above; the twin calls it for interleaves 4 and 8 only.
        slots::GEMM_Q6_K_8XIL.set_fast(|b, il, y| unsafe { avx::q6_k_x8_avx2::<false>(b, il, y) });
    }
    let _ = host;
}

/// The accelerated forms (see [`crate`]): integer stages by
/// [`crate::x86::q4kx8_dots`], the float operations of the scalar kernels one for
/// one.
#[cfg(target_arch = "x86_64")]
mod fast {
    use super::*;

    #[target_feature(enable = "avx2,fma")]
    pub(super) fn gemv_q4_k_8x4(blocks: &[BlockQ4Kx8], y: &[BlockQ8K]) -> [f32; 8] {
        gemv_8x4(
            blocks,
            y,
            |x, yb| crate::x86::q4kx8_dots(&x.qs, &yb.qs, 4),
            |x| (x.d, x.dmin, crate::q4kx8_scales_mins(&x.scales)),
        )
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) fn gemv_q5_k_8x4(blocks: &[BlockQ5Kx8], y: &[BlockQ8K]) -> [f32; 8] {
        gemv_8x4(
            blocks,
            y,
            |x, yb| crate::x86::q5kx8_dots(&x.qs, &x.qh, &yb.qs, 4),
            |x| (x.d, x.dmin, crate::q4kx8_scales_mins(&x.scales)),
        )
    }

    /// The 8x4 K-quant gemv of Q4_K and Q5_K from each block's sub-block dots
    /// (`dot[s][j]`) and its f16 scales, f16 mins and (scale, min) pairs by sub-block then
    /// row.
    #[allow(clippy::type_complexity)]
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn gemv_8x4<B>(
        blocks: &[B],
        y: &[BlockQ8K],
        dots: impl Fn(&B, &BlockQ8K) -> [[i32; 8]; 8],
        head: impl Fn(&B) -> ([[u8; 2]; 8], [[u8; 2]; 8], ([[u8; 8]; 8], [[u8; 8]; 8])),
    ) -> [f32; 8] {
        let mut acc = [0.0f32; 8];
        for (x, yb) in blocks.iter().zip(y) {
            let s: [i32; 8] =
                core::array::from_fn(|sb| yb.bsum(2 * sb).wrapping_add(yb.bsum(2 * sb + 1)) as i32);
            let dot = dots(x, yb);
            let (d, dmin, sm) = head(x);
            for (j, a) in acc.iter_mut().enumerate() {
                let scale = f16(d[j]) * yb.d();
                let min = f16(dmin[j]) * yb.d();
                let mut bias = 0i32;
                for p in 0..4 {
                    let (sc0, m0) = (sm.0[2 * p][j], sm.1[2 * p][j]);
                    let (sc1, m1) = (sm.0[2 * p + 1][j], sm.1[2 * p + 1][j]);
                    let isum = sc0 as i32 * dot[2 * p][j] + sc1 as i32 * dot[2 * p + 1][j];
                    *a = scale.mul_add(isum as f32, *a);
                    bias += m0 as i32 * s[2 * p] + m1 as i32 * s[2 * p + 1];
                }
                *a -= bias as f32 * min;
            }
        }
        acc
    }
}

/// The float sides with the rows in SSE/AVX lanes.
#[cfg(target_arch = "x86_64")]
mod avx {
    use super::*;

    /// `gemv_legacy_x4` with AVX2, FMA and F16C: the four columns in the lanes of one SSE
    /// vector, `d_y * f16(d_j)` one `vmulps` (the four f16 scales converted by
    /// `vcvtph2ps`, exact), the accumulation one `vfmadd` per block (lane j:
    /// `fma(float(isum_j), d_y * d_j, acc_j)`, the scalar form's operations) or, with
    /// `FUSED` false, one `vmulps` and one `vaddps` (`acc_j + (d_y * d_j) * float(isum_j)`,
    /// `gemv_iq4_nl_4x4`'s).
    ///
    /// # Safety
    /// The CPU must have AVX2, FMA and F16C.
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    pub(super) unsafe fn gemv_legacy_x4_avx2<B, const FUSED: bool>(
        blocks: &[B],
        y: &[BlockQ8_0],
        isums: impl Fn(&B, &BlockQ8_0) -> ([i32; 4], [[u8; 2]; 4]),
    ) -> [f32; 4] {
        use std::arch::x86_64::*;
        let mut acc = _mm_setzero_ps();
        for (x, yb) in blocks.iter().zip(y) {
            let (isum, d) = isums(x, yb);
            let d = u64::from_le_bytes([
                d[0][0], d[0][1], d[1][0], d[1][1], d[2][0], d[2][1], d[3][0], d[3][1],
            ]);
            let dj = _mm_cvtph_ps(_mm_cvtsi64_si128(d as i64));
            let dy = _mm_cvtph_ps(_mm_set1_epi16(u16::from_le_bytes(yb.d) as i16));
            // SAFETY: 16 bytes of `isum`.
            let fi = _mm_cvtepi32_ps(unsafe { _mm_loadu_si128(isum.as_ptr().cast()) });
            acc = if FUSED {
                _mm_fmadd_ps(fi, _mm_mul_ps(dy, dj), acc)
            } else {
                _mm_add_ps(acc, _mm_mul_ps(_mm_mul_ps(dy, dj), fi))
            };
        }
        let mut out = [0.0f32; 4];
        // SAFETY: 16 bytes of `out`.
        unsafe { _mm_storeu_ps(out.as_mut_ptr(), acc) };
        out
    }

    /// `gemv_q6_k_8x4` (`FUSED`: `acc = fma(float(isum), f16(d_j) * d_y, acc)`) and
    /// `gemm_q6_k_8xil` (not `FUSED`: `acc = acc + round(float(isum) * round(f16(d_j) *
    /// d_y))`) with the eight columns in the lanes of AVX vectors: the exact integer sums
    /// of `accel::x86::q6kx8_isums`, the f16 scales by `vcvtph2ps` (exact), then the
    /// scalar forms' float operations lane by lane.
    ///
    /// # Safety
    /// The CPU must have AVX2, FMA and F16C; `il` must be 4 or 8.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn q6_k_x8_avx2<const FUSED: bool>(
        blocks: &[BlockQ6Kx8],
        il: usize,
        y: &[BlockQ8K],
    ) -> [f32; 8] {
        use std::arch::x86_64::*;
        let mut acc = _mm256_setzero_ps();
        for (x, yb) in blocks.iter().zip(y) {
            let isum = crate::x86::q6kx8_isums(x, il, &yb.qs, &yb.bsums);
            // SAFETY: 8 i32 of `isum`, 16 bytes of eight f16 fields.
            let (fi, dj) = unsafe {
                (
                    _mm256_cvtepi32_ps(_mm256_loadu_si256(isum.as_ptr().cast())),
                    _mm256_cvtph_ps(_mm_loadu_si128(x.d.as_ptr().cast())),
                )
            };
            let s = _mm256_mul_ps(dj, _mm256_set1_ps(yb.d()));
            acc = if FUSED {
                _mm256_fmadd_ps(fi, s, acc)
            } else {
                _mm256_add_ps(acc, _mm256_mul_ps(fi, s))
            };
        }
        let mut out = [0.0f32; 8];
        // SAFETY: 8 floats of `out`.
        unsafe { _mm256_storeu_ps(out.as_mut_ptr(), acc) };
        out
    }
}
