//! Accelerated forms of `tiercheck_core::arch::aarch64::neon::vec_dot` (the aarch64
//! twins' `nrc == 1` vec_dot kernels and the Q6_K integer sum every aarch64 twin shares):
//! on x86-64 with AVX2 and FMA, the integer stages by [`crate::x86`] (exact), the float
//! operations of the scalar twins one for one (`vmlaq_n_f32`'s separate multiply and add
//! as `_mm_mul_ps` and `_mm_add_ps` on the same four lanes, `fma` as FMA3).

#[allow(unused_imports)]
use tiercheck_core::arch::aarch64::neon::vec_dot::{slots, *};
#[allow(unused_imports)]
use tiercheck_core::blocks::{BlockQ4K, BlockQ4_0, BlockQ6K, BlockQ8K, BlockQ8_0};

use crate::Host;

/// Fills this file's slots where `host` serves them.
pub(crate) fn install(host: Host) {
    #[cfg(target_arch = "x86_64")]
    if host.avx2_fma {
        // SAFETY: installed only where the CPU has AVX2 and FMA.
        slots::VEC_DOT_Q4_0_Q8_0.set_fast(|x, y| unsafe { fast::vec_dot_q4_0_q8_0(x, y) });
        // SAFETY: as above.
        slots::VEC_DOT_Q8_0_Q8_0.set_fast(|x, y| unsafe { fast::vec_dot_q8_0_q8_0(x, y) });
        // SAFETY: as above.
        slots::VEC_DOT_Q4_K_Q8_K.set_fast(|x, y| unsafe { fast::vec_dot_q4_k_q8_k(x, y) });
        // SAFETY: as above.
        slots::Q6_K_ISUM.set_fast(|x, y| unsafe { fast::q6_k_isum(x, y) });
        // SAFETY: as above.
        slots::VEC_DOT_Q6_K_Q8_K.set_fast(|x, y| unsafe { fast::vec_dot_q6_k_q8_k(x, y) });
    }
    let _ = host;
}

/// The accelerated forms (see [`crate`]): the integer stages of
/// [`crate::x86`], the float operations of the scalar functions above one for one.
#[cfg(target_arch = "x86_64")]
mod fast {
    use super::*;
    use crate::x86;
    use core::arch::x86_64::*;

    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn lanes(v: __m128) -> [f32; 4] {
        let mut a = [0.0f32; 4];
        // SAFETY: `a` holds four floats; the store is unaligned.
        unsafe { _mm_storeu_ps(a.as_mut_ptr(), v) };
        a
    }

    /// Two blocks at a time on two 4-lane accumulators, `sumv = sumv + float(p) * d`
    /// (separate multiply and add, as `vmlaq_n_f32`), then `vaddvq(sumv0) +
    /// vaddvq(sumv1)`; an odd last block by the scalar tail.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn pairs<B>(
        x: &[B],
        y: &[BlockQ8_0],
        halves: impl Fn(&B) -> (__m128i, __m128i),
        d: impl Fn(&B) -> f32,
    ) -> (usize, f32) {
        let nb = x.len().min(y.len());
        if nb < 2 {
            return (0, 0.0);
        }
        let (mut sumv0, mut sumv1) = (_mm_setzero_ps(), _mm_setzero_ps());
        let mut ib = 0;
        while ib + 1 < nb {
            for (sumv, b) in [(&mut sumv0, ib), (&mut sumv1, ib + 1)] {
                let (xl, xh) = halves(&x[b]);
                let p = x86::sdot_lanes(xl, xh, &y[b].qs);
                let db = _mm_set1_ps(d(&x[b]) * y[b].d());
                *sumv = _mm_add_ps(*sumv, _mm_mul_ps(_mm_cvtepi32_ps(p), db));
            }
            ib += 2;
        }
        (ib, vaddvq_f32(lanes(sumv0)) + vaddvq_f32(lanes(sumv1)))
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) fn vec_dot_q4_0_q8_0(x: &[BlockQ4_0], y: &[BlockQ8_0]) -> f32 {
        let (ib, sumf) = pairs(x, y, |b| x86::q4_0_halves(&b.qs), |b| b.d());
        q4_0_tail(x, y, ib, x.len().min(y.len()), sumf)
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) fn vec_dot_q8_0_q8_0(x: &[BlockQ8_0], y: &[BlockQ8_0]) -> f32 {
        let (ib, sumf) = pairs(x, y, |b| x86::q8_halves(&b.qs), |b| b.d());
        q8_0_tail(x, y, ib, x.len().min(y.len()), sumf)
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) fn vec_dot_q4_k_q8_k(x: &[BlockQ4K], y: &[BlockQ8K]) -> f32 {
        let mut sumf = 0.0f32;
        for (xb, yb) in x.iter().zip(y) {
            let d = yb.d() * xb.d();
            let dmin = yb.d() * xb.dmin();
            let (sc, mn) = crate::q4k_scales_mins(&xb.scales);
            let mut minsum = 0i32;
            for s in 0..8 {
                minsum += (yb.bsum(2 * s) as i32 + yb.bsum(2 * s + 1) as i32) * mn[s] as i32;
            }
            sumf = (-dmin).mul_add(minsum as f32, sumf);
            sumf = d.mul_add(x86::q4k_sumi(&xb.qs, &yb.qs, &sc) as f32, sumf);
        }
        sumf
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) fn q6_k_isum(xb: &BlockQ6K, yb: &BlockQ8K) -> i32 {
        x86::q6k_dot(&xb.ql, &xb.qh, &yb.qs, &xb.scales)
            - 32 * x86::bsums_dot(&yb.bsums, &xb.scales)
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) fn vec_dot_q6_k_q8_k(x: &[BlockQ6K], y: &[BlockQ8K]) -> f32 {
        let mut sum = 0.0f32;
        for (xb, yb) in x.iter().zip(y) {
            sum = (xb.d() * yb.d()).mul_add(q6_k_isum(xb, yb) as f32, sum);
        }
        sum
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{blocks, installed, same, same_int};
    use tiercheck_core::blocks::cast_blocks;
    use tiercheck_core::rng::Rng;
    use tiercheck_core::GgmlType;

    #[test]
    fn accelerated_forms_equal_the_scalar_twin_bitwise() {
        let x86 = crate::testing::avx2_here() && cfg!(target_arch = "x86_64");
        installed("q4_0", &slots::VEC_DOT_Q4_0_Q8_0, x86);
        installed("q8_0", &slots::VEC_DOT_Q8_0_Q8_0, x86);
        installed("q4_K", &slots::VEC_DOT_Q4_K_Q8_K, x86);
        installed("q6_K isum", &slots::Q6_K_ISUM, x86);
        installed("q6_K", &slots::VEC_DOT_Q6_K_Q8_K, x86);
        let mut rng = Rng::new(17);
        for round in 0..400 {
            let extreme = round % 10 == 9;
            let nb = 1 + (round % 9);
            let (x4, x8, y8) = (
                blocks(&mut rng, GgmlType::Q4_0, nb, extreme),
                blocks(&mut rng, GgmlType::Q8_0, nb, extreme),
                blocks(&mut rng, GgmlType::Q8_0, nb, extreme),
            );
            let y8b: &[BlockQ8_0] = cast_blocks(GgmlType::Q8_0, &y8).unwrap();
            same("q4_0", || vec_dot_q4_0_q8_0(cast_blocks(GgmlType::Q4_0, &x4).unwrap(), y8b));
            same("q8_0", || vec_dot_q8_0_q8_0(cast_blocks(GgmlType::Q8_0, &x8).unwrap(), y8b));
            let nk = 1 + round % 4;
            let (x4k, x6k, yk) = (
                blocks(&mut rng, GgmlType::Q4_K, nk, extreme),
                blocks(&mut rng, GgmlType::Q6_K, nk, extreme),
                blocks(&mut rng, GgmlType::Q8_K, nk, extreme),
            );
            let ykb: &[BlockQ8K] = cast_blocks(GgmlType::Q8_K, &yk).unwrap();
            same("q4_K", || vec_dot_q4_k_q8_k(cast_blocks(GgmlType::Q4_K, &x4k).unwrap(), ykb));
            same("q6_K", || vec_dot_q6_k_q8_k(cast_blocks(GgmlType::Q6_K, &x6k).unwrap(), ykb));
            let x6: &[BlockQ6K] = cast_blocks(GgmlType::Q6_K, &x6k).unwrap();
            same_int("q6_K isum", || q6_k_isum(&x6[0], &ykb[0]));
        }
    }
}
