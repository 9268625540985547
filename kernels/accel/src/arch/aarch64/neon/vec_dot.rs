//! Accelerated forms of `tiercheck_core::arch::aarch64::neon::vec_dot` (the aarch64
//! twins' `nrc == 1` vec_dot kernels and the Q6_K integer sum every aarch64 twin shares):
//! on x86-64 with AVX2 and FMA, the integer stages by [`crate::x86`] (exact), the float
//! operations of the scalar twins one for one (`vmlaq_n_f32`'s separate multiply and add
//! as `_mm_mul_ps` and `_mm_add_ps` on the same four lanes, `fma` as FMA3).

#[allow(unused_imports)]
use tiercheck_core::arch::aarch64::neon::vec_dot::{slots, *};
#[allow(unused_imports)]
use tiercheck_core::blocks::{
    BlockIq4Nl, BlockIq4Xs, BlockQ2K, BlockQ3K, BlockQ4K, BlockQ4_0, BlockQ4_1, BlockQ5K,
    BlockQ5_0, BlockQ5_1, BlockQ6K, BlockQ8K, BlockQ8_0, BlockQ8_1,
};

use crate::Host;

/// Fills this file's slots where `host` serves them.
pub(crate) fn install(host: Host) {
    #[cfg(target_arch = "x86_64")]
    if host.avx2_fma {
        // SAFETY: installed only where the CPU has AVX2 and FMA.
        slots::VEC_DOT_Q4_K_Q8_K.set_fast(|x, y| unsafe { fast::vec_dot_q4_k_q8_k(x, y) });
        // SAFETY: as above.
        slots::Q6_K_ISUM.set_fast(|x, y| unsafe { fast::q6_k_isum(x, y) });
        // SAFETY: as above.
        slots::VEC_DOT_Q6_K_Q8_K.set_fast(|x, y| unsafe { fast::vec_dot_q6_k_q8_k(x, y) });
        // SAFETY: as above.
        slots::VEC_DOT_IQ4_XS_Q8_K.set_fast(|x, y| unsafe { fast::vec_dot_iq4_xs_q8_k(x, y) });
        // SAFETY: as above.
        slots::VEC_DOT_Q2_K_Q8_K.set_fast(|x, y| unsafe { fast::vec_dot_q2_k_q8_k(x, y) });
        // SAFETY: as above.
        slots::VEC_DOT_Q3_K_Q8_K.set_fast(|x, y| unsafe { fast::vec_dot_q3_k_q8_k(x, y) });
        // SAFETY: as above.
        slots::VEC_DOT_Q5_K_Q8_K.set_fast(|x, y| unsafe { fast::vec_dot_q5_k_q8_k(x, y) });
    }
    #[cfg(target_arch = "x86_64")]
    if host.avx2_fma && host.f16c {
        // SAFETY: installed only where the CPU has AVX2, FMA and F16C.
        slots::Q4_1_PAIRS.set_fast(|x, y| unsafe { fast::q4_1_pairs(x, y) });
        // SAFETY: as above.
        slots::Q5_1_PAIRS.set_fast(|x, y| unsafe { fast::q5_1_pairs(x, y) });
        // SAFETY: as above.
        slots::VEC_DOT_Q4_0_Q8_0.set_fast(|x, y| unsafe { fast::vec_dot_q4_0_q8_0(x, y) });
        // SAFETY: as above.
        slots::VEC_DOT_Q8_0_Q8_0.set_fast(|x, y| unsafe { fast::vec_dot_q8_0_q8_0(x, y) });
        // SAFETY: as above.
        slots::Q5_0_PAIRS.set_fast(|x, y| unsafe { fast::q5_0_pairs(x, y) });
        // SAFETY: as above.
        slots::VEC_DOT_IQ4_NL_Q8_0.set_fast(|x, y| unsafe { fast::vec_dot_iq4_nl_q8_0(x, y) });
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
    /// (separate multiply and add, as `vmlaq_n_f32`; `d = d_x * d_y`, the f16 scales
    /// widened by `vcvtph2ps`), then `vaddvq(sumv0) + vaddvq(sumv1)`; an odd last block
    /// by the scalar tail.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn pairs<B>(
        x: &[B],
        y: &[BlockQ8_0],
        halves: impl Fn(&B) -> (__m128i, __m128i),
        d: impl Fn(&B) -> [u8; 2],
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
                let (dx, dy) = x86::halves2(d(&x[b]), y[b].d);
                let db = _mm_set1_ps(dx * dy);
                *sumv = _mm_add_ps(*sumv, _mm_mul_ps(_mm_cvtepi32_ps(p), db));
            }
            ib += 2;
        }
        (ib, vaddvq_f32(lanes(sumv0)) + vaddvq_f32(lanes(sumv1)))
    }

    /// The two 16-value halves of a 5-bit block's codes, `nibble | high bit << 4`
    /// (bit i of `qh` is value i's), minus `offset`.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn q5_halves(qs: &[u8; 16], qh: [u8; 4], offset: i8) -> (__m128i, __m128i) {
        let (lo, hi) = x86::nibble_halves(qs);
        let bits = _mm256_and_si256(x86::bit_bytes32(qh), _mm256_set1_epi8(0x10));
        let off = _mm_set1_epi8(offset);
        let code = |n: __m128i, b: __m128i| _mm_sub_epi8(_mm_or_si128(n, b), off);
        (code(lo, _mm256_castsi256_si128(bits)), code(hi, _mm256_extracti128_si256::<1>(bits)))
    }

    /// The pair loop of Q4_1 (`SPLIT` false: `summs = summs + (m_x0 * s_y0 + m_x1 *
    /// s_y1)`) or Q5_1 (`SPLIT`: `summs0 += m_x0 * s_y0`, `summs1 += m_x1 * s_y1`) with
    /// [`pairs`]'s lanes, the block headers widened by `vcvtph2ps` (exact); then
    /// `vaddvq(sumv0) + vaddvq(sumv1)` plus the min sums, 0 without a pair.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn offset_pairs<B, const SPLIT: bool>(
        x: &[B],
        y: &[BlockQ8_1],
        halves: impl Fn(&B) -> (__m128i, __m128i),
        dm: impl Fn(&B) -> ([u8; 2], [u8; 2]),
    ) -> f32 {
        let nb = x.len().min(y.len());
        if nb < 2 {
            return 0.0;
        }
        let mut sumv = [_mm_setzero_ps(); 2];
        let (mut summs, mut summs0, mut summs1) = (0.0f32, 0.0f32, 0.0f32);
        for b in (0..2 * (nb / 2)).step_by(2) {
            let h: [[f32; 4]; 2] = core::array::from_fn(|k| {
                let ((xd, xm), yb) = (dm(&x[b + k]), &y[b + k]);
                x86::heads4(xd, xm, yb.d, yb.s)
            });
            if SPLIT {
                summs0 += h[0][1] * h[0][3];
                summs1 += h[1][1] * h[1][3];
            } else {
                summs += h[0][1] * h[0][3] + h[1][1] * h[1][3];
            }
            for (k, v) in sumv.iter_mut().enumerate() {
                let (xl, xh) = halves(&x[b + k]);
                let p = _mm_cvtepi32_ps(x86::sdot_lanes(xl, xh, &y[b + k].qs));
                *v = _mm_add_ps(*v, _mm_mul_ps(p, _mm_set1_ps(h[k][0] * h[k][2])));
            }
        }
        let sumf = vaddvq_f32(lanes(sumv[0])) + vaddvq_f32(lanes(sumv[1]));
        if SPLIT {
            sumf + summs0 + summs1
        } else {
            sumf + summs
        }
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) fn q4_1_pairs(x: &[BlockQ4_1], y: &[BlockQ8_1]) -> f32 {
        offset_pairs::<_, false>(x, y, |b| x86::nibble_halves(&b.qs), |b| (b.d, b.m))
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) fn q5_0_pairs(x: &[BlockQ5_0], y: &[BlockQ8_0]) -> f32 {
        pairs(x, y, |b| q5_halves(&b.qs, b.qh, 16), |b| b.d).1
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) fn q5_1_pairs(x: &[BlockQ5_1], y: &[BlockQ8_1]) -> f32 {
        offset_pairs::<_, true>(x, y, |b| q5_halves(&b.qs, b.qh, 0), |b| (b.d, b.m))
    }

    /// Per pair `sumf = sumf + fma(d_x0 * d_y0, float(p0), (d_x1 * d_y1) * float(p1))`,
    /// an odd last block `sumf = fma(d_y * d_x, float(p), sumf)`; p the block's exact
    /// dot. The f16 scales widened by `vcvtph2ps` (exact).
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) fn vec_dot_iq4_nl_q8_0(x: &[BlockIq4Nl], y: &[BlockQ8_0]) -> f32 {
        let table = x86::table16(&tiercheck_core::blocks::iq4_nl::KVALUES_IQ4NL);
        let dot = |b: usize| {
            let v = _mm256_shuffle_epi8(table, x86::nibbles32(&x[b].qs));
            x86::dot_i8_exact(v, x86::q8_0_bytes(&y[b].qs)) as f32
        };
        let nb = x.len().min(y.len());
        let d = |b: usize| x86::halves2(x[b].d, y[b].d);
        let mut sumf = 0.0f32;
        for b in (0..2 * (nb / 2)).step_by(2) {
            let ((dx0, dy0), (dx1, dy1)) = (d(b), d(b + 1));
            let second = (dx1 * dy1) * dot(b + 1);
            sumf += (dx0 * dy0).mul_add(dot(b), second);
        }
        for b in 2 * (nb / 2)..nb {
            let (dx, dy) = d(b);
            sumf = (dy * dx).mul_add(dot(b), sumf);
        }
        sumf
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) fn vec_dot_iq4_xs_q8_k(x: &[BlockIq4Xs], y: &[BlockQ8K]) -> f32 {
        let mut sumf = 0.0f32;
        for (xb, yb) in x.iter().zip(y) {
            let ls: [i32; 8] = core::array::from_fn(|s| xb.scale(s) as i32 - 32);
            let sumi = x86::iq4xs_isum(&xb.qs, &ls, &yb.qs);
            sumf = (xb.d() * yb.d()).mul_add(sumi as f32, sumf);
        }
        sumf
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) fn vec_dot_q2_k_q8_k(x: &[BlockQ2K], y: &[BlockQ8K]) -> f32 {
        let mut sum = 0.0f32;
        for (xb, yb) in x.iter().zip(y) {
            let d = yb.d() * xb.d();
            let dmin = -yb.d() * xb.dmin();
            let m: [u8; 16] = core::array::from_fn(|s| xb.scales[s] >> 4);
            sum = dmin.mul_add(x86::hsum_i32(x86::bsums_lanes(&yb.bsums, &m)) as f32, sum);
            let isum = x86::hsum_i32(x86::q2k_lanes(&xb.qs, &xb.scales, &yb.qs));
            sum = d.mul_add(isum as f32, sum);
        }
        sum
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) fn vec_dot_q3_k_q8_k(x: &[BlockQ3K], y: &[BlockQ8K]) -> f32 {
        let mut sum = 0.0f32;
        for (xb, yb) in x.iter().zip(y) {
            let sc: [i16; 16] = core::array::from_fn(|s| xb.scale(s) as i16 - 32);
            let isum = x86::hsum_i32(x86::q3k_lanes(&xb.qs, &xb.hmask, &sc, &yb.qs));
            sum = (yb.d() * xb.d()).mul_add(isum as f32, sum);
        }
        sum
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) fn vec_dot_q5_k_q8_k(x: &[BlockQ5K], y: &[BlockQ8K]) -> f32 {
        let mut sumf = 0.0f32;
        for (xb, yb) in x.iter().zip(y) {
            let d = yb.d() * xb.d();
            let dmin = yb.d() * xb.dmin();
            let (sc, mn) = crate::q4k_scales_mins(&xb.scales);
            let mut mins = 0i32;
            for s in 0..8 {
                let pair = yb.bsum(2 * s).wrapping_add(yb.bsum(2 * s + 1));
                mins = mins.wrapping_add(mn[s] as i32 * pair as i32);
            }
            let sumi = x86::hsum_i32(x86::q5k_lanes(&xb.qs, &xb.qh, &sc, &yb.qs));
            sumf += d.mul_add(sumi as f32, -(dmin * mins as f32));
        }
        sumf
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) fn vec_dot_q4_0_q8_0(x: &[BlockQ4_0], y: &[BlockQ8_0]) -> f32 {
        let (ib, sumf) = pairs(x, y, |b| x86::q4_0_halves(&b.qs), |b| b.d);
        q4_0_tail(x, y, ib, x.len().min(y.len()), sumf)
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) fn vec_dot_q8_0_q8_0(x: &[BlockQ8_0], y: &[BlockQ8_0]) -> f32 {
        let (ib, sumf) = pairs(x, y, |b| x86::q8_halves(&b.qs), |b| b.d);
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
        let f16c = x86 && crate::Host::detect().f16c;
        installed("q4_0", &slots::VEC_DOT_Q4_0_Q8_0, f16c);
        installed("q8_0", &slots::VEC_DOT_Q8_0_Q8_0, f16c);
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
