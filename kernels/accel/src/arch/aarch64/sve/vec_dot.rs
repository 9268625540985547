//! Accelerated forms of `tiercheck_core::arch::aarch64::sve::vec_dot` (the SVE lanes'
//! Q4_0/Q8_0 `nrc == 1` kernels at 128 and 256 bits): on x86-64 with AVX2 and FMA, the
//! `svdot` lanes by [`crate::x86`], the scalar twins' float operations one for one.

#[allow(unused_imports)]
use tiercheck_core::arch::aarch64::sve::vec_dot::{slots, *};
#[allow(unused_imports)]
use tiercheck_core::blocks::{BlockQ2K, BlockQ4K, BlockQ4_0, BlockQ6K, BlockQ8K, BlockQ8_0};
#[allow(unused_imports)]
use tiercheck_core::elem::faddv;

use crate::Host;

/// Fills this file's slots where `host` serves them.
pub(crate) fn install(host: Host) {
    #[cfg(target_arch = "x86_64")]
    if host.avx2_fma {
        // SAFETY: installed only where the CPU has AVX2 and FMA.
        slots::VEC_DOT_Q4_0_Q8_0_SVE128
            .set_fast(|x, y| unsafe { fast::vec_dot_q4_0_q8_0_sve128(x, y) });
        // SAFETY: as above.
        slots::VEC_DOT_Q8_0_Q8_0_SVE128
            .set_fast(|x, y| unsafe { fast::vec_dot_q8_0_q8_0_sve128(x, y) });
        // SAFETY: as above.
        slots::VEC_DOT_Q4_0_Q8_0_SVE256
            .set_fast(|x, y| unsafe { fast::vec_dot_q4_0_q8_0_sve256(x, y) });
        // SAFETY: as above.
        slots::VEC_DOT_Q8_0_Q8_0_SVE256
            .set_fast(|x, y| unsafe { fast::vec_dot_q8_0_q8_0_sve256(x, y) });
        // SAFETY: as above.
        slots::VEC_DOT_Q2_K_Q8_K_SVE128
            .set_fast(|x, y| unsafe { fast::vec_dot_q2_k_q8_k_sve128(x, y) });
        // SAFETY: as above.
        slots::VEC_DOT_Q2_K_Q8_K_SVE256
            .set_fast(|x, y| unsafe { fast::vec_dot_q2_k_q8_k_sve256(x, y) });
    }
    let _ = host;
}

/// The accelerated forms of the Q4_0/Q8_0 `nrc == 1` twins (see [`crate`]): the
/// `svdot` lanes of [`crate::x86`], the scalar functions' float operations one for
/// one (`svmla`'s fused multiply-add as FMA3 on the same lanes).
#[cfg(target_arch = "x86_64")]
mod fast {
    use super::*;
    use crate::x86;
    use core::arch::x86_64::*;

    /// [`pairs_sve`] at 128 bits: `lanes(b)` gives block b's four `svdot` lanes.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn pairs4(
        nb: usize,
        lanes: impl Fn(usize) -> __m128i,
        d: impl Fn(usize) -> f32,
    ) -> (usize, f32) {
        let (mut sumv0, mut sumv1) = (_mm_setzero_ps(), _mm_setzero_ps());
        let mut ib = 0;
        while ib + 1 < nb {
            for (sumv, b) in [(&mut sumv0, ib), (&mut sumv1, ib + 1)] {
                let p = _mm_cvtepi32_ps(lanes(b));
                *sumv = _mm_fmadd_ps(p, _mm_set1_ps(d(b)), *sumv);
            }
            ib += 2;
        }
        let mut s = [0.0f32; 4];
        // SAFETY: `s` holds four floats; the store is unaligned.
        unsafe { _mm_storeu_ps(s.as_mut_ptr(), _mm_add_ps(sumv0, sumv1)) };
        (ib, faddv(&s))
    }

    /// [`pairs_sve`] at 256 bits: `lanes(b)` gives block b's eight `svdot` lanes.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn pairs8(
        nb: usize,
        lanes: impl Fn(usize) -> __m256i,
        d: impl Fn(usize) -> f32,
    ) -> (usize, f32) {
        let (mut sumv0, mut sumv1) = (_mm256_setzero_ps(), _mm256_setzero_ps());
        let mut ib = 0;
        while ib + 1 < nb {
            for (sumv, b) in [(&mut sumv0, ib), (&mut sumv1, ib + 1)] {
                let p = _mm256_cvtepi32_ps(lanes(b));
                *sumv = _mm256_fmadd_ps(p, _mm256_set1_ps(d(b)), *sumv);
            }
            ib += 2;
        }
        let mut s = [0.0f32; 8];
        // SAFETY: `s` holds eight floats; the store is unaligned.
        unsafe { _mm256_storeu_ps(s.as_mut_ptr(), _mm256_add_ps(sumv0, sumv1)) };
        (ib, faddv(&s))
    }

    /// The pair loop at 128 (`WIDE` false) or 256 bits over blocks whose two 16-value
    /// halves `halves` gives, scale `d(x) * d(y)`, an odd last block by `tail`.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn legacy<B, const WIDE: bool>(
        x: &[B],
        y: &[BlockQ8_0],
        halves: impl Fn(&B) -> (__m128i, __m128i),
        d: impl Fn(&B) -> f32,
        tail: impl Fn(&B, &BlockQ8_0, f32) -> f32,
    ) -> f32 {
        let nb = x.len().min(y.len());
        let db = |b: usize| d(&x[b]) * y[b].d();
        let (ib, mut sumf) = if WIDE {
            let lanes = |b: usize| {
                let (xl, xh) = halves(&x[b]);
                x86::sdot_lanes8(xl, xh, &y[b].qs)
            };
            pairs8(nb, lanes, db)
        } else {
            let lanes = |b: usize| {
                let (xl, xh) = halves(&x[b]);
                x86::sdot_lanes(xl, xh, &y[b].qs)
            };
            pairs4(nb, lanes, db)
        };
        for b in ib..nb {
            sumf = tail(&x[b], &y[b], sumf);
        }
        sumf
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) fn vec_dot_q4_0_q8_0_sve128(x: &[BlockQ4_0], y: &[BlockQ8_0]) -> f32 {
        legacy::<_, false>(x, y, |b| x86::q4_0_halves(&b.qs), |b| b.d(), q4_0_tail)
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) fn vec_dot_q8_0_q8_0_sve128(x: &[BlockQ8_0], y: &[BlockQ8_0]) -> f32 {
        legacy::<_, false>(x, y, |b| x86::q8_halves(&b.qs), |b| b.d(), q8_0_tail)
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) fn vec_dot_q4_0_q8_0_sve256(x: &[BlockQ4_0], y: &[BlockQ8_0]) -> f32 {
        legacy::<_, true>(x, y, |b| x86::q4_0_halves(&b.qs), |b| b.d(), q4_0_tail)
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) fn vec_dot_q8_0_q8_0_sve256(x: &[BlockQ8_0], y: &[BlockQ8_0]) -> f32 {
        legacy::<_, true>(x, y, |b| x86::q8_halves(&b.qs), |b| b.d(), q8_0_tail)
    }

    /// Q2_K's mins of the W lanes: `sum over s = t, t + W, ... of (scales[s] >> 4) *
    /// bsum_s` (exact).
    #[inline]
    fn q2_k_mins<const W: usize>(xb: &BlockQ2K, yb: &BlockQ8K) -> [i32; W] {
        core::array::from_fn(|t| {
            (t..16).step_by(W).map(|s| (xb.scales[s] >> 4) as i32 * yb.bsum(s) as i32).sum()
        })
    }

    /// Q2_K at 256 bits: the eight `svdot` lanes are the AVX2 kernel's (lane t: values
    /// i with `i mod 32` in 4t..4t+3, scaled per sub-block); `acc = fma(float(mins),
    /// dmin, acc)`, then `acc = fma(float(sumi), d, acc)`; one FADDV.
    #[target_feature(enable = "avx2,fma")]
    pub(super) fn vec_dot_q2_k_q8_k_sve256(x: &[BlockQ2K], y: &[BlockQ8K]) -> f32 {
        let mut acc = _mm256_setzero_ps();
        for (xb, yb) in x.iter().zip(y) {
            let d = yb.d() * xb.d();
            let dmin = -yb.d() * xb.dmin();
            let mins = q2_k_mins::<8>(xb, yb);
            // SAFETY: `mins` holds eight i32; the load is unaligned.
            let mins = unsafe { _mm256_loadu_si256(mins.as_ptr() as *const __m256i) };
            acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mins), _mm256_set1_ps(dmin), acc);
            let sumi = x86::q2k_lanes(&xb.qs, &xb.scales, &yb.qs);
            acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), _mm256_set1_ps(d), acc);
        }
        let mut s = [0.0f32; 8];
        // SAFETY: `s` holds eight floats; the store is unaligned.
        unsafe { _mm256_storeu_ps(s.as_mut_ptr(), acc) };
        faddv(&s)
    }

    /// Q2_K at 128 bits: lane t of four sums the 256-bit lanes t and t + 4 (values with
    /// `i mod 16` in 4t..4t+3); otherwise as [`vec_dot_q2_k_q8_k_sve256`].
    #[target_feature(enable = "avx2,fma")]
    pub(super) fn vec_dot_q2_k_q8_k_sve128(x: &[BlockQ2K], y: &[BlockQ8K]) -> f32 {
        let mut acc = _mm_setzero_ps();
        for (xb, yb) in x.iter().zip(y) {
            let d = yb.d() * xb.d();
            let dmin = -yb.d() * xb.dmin();
            let mins = q2_k_mins::<4>(xb, yb);
            // SAFETY: `mins` holds four i32; the load is unaligned.
            let mins = unsafe { _mm_loadu_si128(mins.as_ptr() as *const __m128i) };
            acc = _mm_fmadd_ps(_mm_cvtepi32_ps(mins), _mm_set1_ps(dmin), acc);
            let l8 = x86::q2k_lanes(&xb.qs, &xb.scales, &yb.qs);
            let sumi = _mm_add_epi32(_mm256_castsi256_si128(l8), _mm256_extracti128_si256::<1>(l8));
            acc = _mm_fmadd_ps(_mm_cvtepi32_ps(sumi), _mm_set1_ps(d), acc);
        }
        let mut s = [0.0f32; 4];
        // SAFETY: `s` holds four floats; the store is unaligned.
        unsafe { _mm_storeu_ps(s.as_mut_ptr(), acc) };
        faddv(&s)
    }
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::testing::{blocks, installed, same};
    use tiercheck_core::blocks::cast_blocks;
    use tiercheck_core::rng::Rng;
    use tiercheck_core::GgmlType;

    #[test]
    fn accelerated_forms_equal_the_scalar_twin_bitwise() {
        let x86 = crate::testing::avx2_here() && cfg!(target_arch = "x86_64");
        installed("q4_0 sve128", &slots::VEC_DOT_Q4_0_Q8_0_SVE128, x86);
        installed("q8_0 sve128", &slots::VEC_DOT_Q8_0_Q8_0_SVE128, x86);
        installed("q4_0 sve256", &slots::VEC_DOT_Q4_0_Q8_0_SVE256, x86);
        installed("q8_0 sve256", &slots::VEC_DOT_Q8_0_Q8_0_SVE256, x86);
        let mut rng = Rng::new(29);
        for round in 0..400 {
            let extreme = round % 10 == 9;
            let nb = 1 + (round % 9);
            let (x4, x8, y8) = (
                blocks(&mut rng, GgmlType::Q4_0, nb, extreme),
                blocks(&mut rng, GgmlType::Q8_0, nb, extreme),
                blocks(&mut rng, GgmlType::Q8_0, nb, extreme),
            );
            let x4b: &[BlockQ4_0] = cast_blocks(GgmlType::Q4_0, &x4).unwrap();
            let x8b: &[BlockQ8_0] = cast_blocks(GgmlType::Q8_0, &x8).unwrap();
            let y8b: &[BlockQ8_0] = cast_blocks(GgmlType::Q8_0, &y8).unwrap();
            same("q4_0 sve128", || vec_dot_q4_0_q8_0_sve128(x4b, y8b));
            same("q8_0 sve128", || vec_dot_q8_0_q8_0_sve128(x8b, y8b));
            same("q4_0 sve256", || vec_dot_q4_0_q8_0_sve256(x4b, y8b));
            same("q8_0 sve256", || vec_dot_q8_0_q8_0_sve256(x8b, y8b));
        }
    }

    #[test]
    fn q2_k_accelerated_forms_equal_the_scalar_twin_bitwise() {
        let x86 = crate::testing::avx2_here() && cfg!(target_arch = "x86_64");
        installed("q2_K sve128", &slots::VEC_DOT_Q2_K_Q8_K_SVE128, x86);
        installed("q2_K sve256", &slots::VEC_DOT_Q2_K_Q8_K_SVE256, x86);
        let mut rng = Rng::new(31);
        for round in 0..300 {
            let (extreme, nb) = (round % 10 == 9, 1 + round % 5);
            let x2 = blocks(&mut rng, GgmlType::Q2_K, nb, extreme);
            let yk = blocks(&mut rng, GgmlType::Q8_K, nb, extreme);
            let x2b: &[BlockQ2K] = cast_blocks(GgmlType::Q2_K, &x2).unwrap();
            let ykb: &[BlockQ8K] = cast_blocks(GgmlType::Q8_K, &yk).unwrap();
            same("q2_K sve128", || vec_dot_q2_k_q8_k_sve128(x2b, ykb));
            same("q2_K sve256", || vec_dot_q2_k_q8_k_sve256(x2b, ykb));
        }
    }
}
