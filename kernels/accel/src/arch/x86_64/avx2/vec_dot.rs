//! Accelerated forms of `tiercheck_core::arch::x86_64::avx2::vec_dot` (the x86 lanes'
//! vec_dot twins): on x86-64 with AVX2 and FMA the tier's own integer lanes by the byte
//! instructions of [`crate::x86`] and its eight-lane FMA accumulation; under
//! `with_scalar` the scalar code compiled with AVX2 and FMA; on aarch64 the same lanes
//! from NEON widening products with the accumulation as two four-float `fmla` vectors.

#[allow(unused_imports)]
use tiercheck_core::arch::x86_64::avx2::vec_dot::{slots, *};
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
        slots::VEC_DOT_Q4_0_Q8_0.set_fast(|x, y| unsafe { fast::vec_dot_q4_0_q8_0(x, y) });
        // SAFETY: installed only where the CPU has AVX2 and FMA.
        slots::VEC_DOT_Q8_0_Q8_0.set_fast(|x, y| unsafe { fast::vec_dot_q8_0_q8_0(x, y) });
        // SAFETY: installed only where the CPU has AVX2 and FMA.
        slots::VEC_DOT_Q4_K_Q8_K.set_fast(|x, y| unsafe { fast::vec_dot_q4_k_q8_k(x, y) });
        // SAFETY: installed only where the CPU has AVX2 and FMA.
        slots::VEC_DOT_Q6_K_Q8_K.set_fast(|x, y| unsafe { fast::vec_dot_q6_k_q8_k(x, y) });
        // SAFETY: installed only where the CPU has AVX2 and FMA.
        slots::VEC_DOT_Q5_0_Q8_0.set_fast(|x, y| unsafe { fast::vec_dot_q5_0_q8_0(x, y) });
        // SAFETY: installed only where the CPU has AVX2 and FMA.
        slots::VEC_DOT_Q2_K_Q8_K.set_fast(|x, y| unsafe { fast::vec_dot_q2_k_q8_k(x, y) });
        // SAFETY: installed only where the CPU has AVX2 and FMA.
        slots::VEC_DOT_Q3_K_Q8_K.set_fast(|x, y| unsafe { fast::vec_dot_q3_k_q8_k(x, y) });
        // SAFETY: installed only where the CPU has AVX2 and FMA.
        slots::VEC_DOT_Q5_K_Q8_K.set_fast(|x, y| unsafe { fast::vec_dot_q5_k_q8_k(x, y) });
        // SAFETY: installed only where the CPU has AVX2 and FMA.
        slots::VEC_DOT_IQ4_XS_Q8_K.set_fast(|x, y| unsafe { fast::vec_dot_iq4_xs_q8_k(x, y) });
        // SAFETY: installed only where the CPU has AVX2 and FMA.
        slots::VEC_DOT_Q4_0_Q8_0.set_spec(|x, y| unsafe { wide::vec_dot_q4_0_q8_0(x, y) });
        // SAFETY: installed only where the CPU has AVX2 and FMA.
        slots::VEC_DOT_Q8_0_Q8_0.set_spec(|x, y| unsafe { wide::vec_dot_q8_0_q8_0(x, y) });
        // SAFETY: installed only where the CPU has AVX2 and FMA.
        slots::VEC_DOT_Q4_K_Q8_K.set_spec(|x, y| unsafe { wide::vec_dot_q4_k_q8_k(x, y) });
        // SAFETY: installed only where the CPU has AVX2 and FMA.
        slots::VEC_DOT_Q6_K_Q8_K.set_spec(|x, y| unsafe { wide::vec_dot_q6_k_q8_k(x, y) });
    }
    #[cfg(target_arch = "x86_64")]
    if host.avx2_fma && host.f16c {
        // SAFETY: installed only where the CPU has AVX2, FMA and F16C.
        slots::VEC_DOT_Q4_1_Q8_1.set_fast(|x, y| unsafe { fast::vec_dot_q4_1_q8_1(x, y) });
        // SAFETY: as above.
        slots::VEC_DOT_Q5_1_Q8_1.set_fast(|x, y| unsafe { fast::vec_dot_q5_1_q8_1(x, y) });
        // SAFETY: as above.
        slots::VEC_DOT_IQ4_NL_Q8_0.set_fast(|x, y| unsafe { fast::vec_dot_iq4_nl_q8_0(x, y) });
    }
    #[cfg(target_arch = "aarch64")]
    if host.neon {
        slots::VEC_DOT_Q4_0_Q8_0.set_fast(neon::vec_dot_q4_0_q8_0);
        slots::VEC_DOT_Q8_0_Q8_0.set_fast(neon::vec_dot_q8_0_q8_0);
        slots::VEC_DOT_Q4_K_Q8_K.set_fast(neon::vec_dot_q4_k_q8_k);
        slots::VEC_DOT_Q6_K_Q8_K.set_fast(neon::vec_dot_q6_k_q8_k);
    }
    let _ = host;
}

/// The accelerated forms (see [`crate`]): the integer lanes by the byte
/// instructions of [`crate::x86`] (exact; for Q4_0/Q8_0 the tier's own `sign` /
/// `maddubs` / `madd` sequence), the scalar functions' float operations one for one on
/// the same eight lanes (`fma` as FMA3, [`hsum_float_8`] on the stored lanes).
#[cfg(target_arch = "x86_64")]
mod fast {
    use super::*;
    use crate::x86;
    use core::arch::x86_64::*;

    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn lanes(v: __m256) -> [f32; 8] {
        let mut a = [0.0f32; 8];
        // SAFETY: `a` holds eight floats; the store is unaligned.
        unsafe { _mm256_storeu_ps(a.as_mut_ptr(), v) };
        a
    }

    /// The Q4_0/Q8_0 loop over blocks whose 32 signed values `bytes` gives, scale
    /// `d(x) * d(y)`: `acc = fma(d, float(lanes), acc)` on eight lanes, `hsum_float_8`.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn legacy<B>(
        x: &[B],
        y: &[BlockQ8_0],
        bytes: impl Fn(&B) -> __m256i,
        d: impl Fn(&B) -> f32,
    ) -> f32 {
        let mut acc = _mm256_setzero_ps();
        for (xb, yb) in x.iter().zip(y) {
            let d = _mm256_set1_ps(d(xb) * yb.d());
            let q = x86::mul_sum_i8_lanes(bytes(xb), x86::q8_0_bytes(&yb.qs));
            acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(q), acc);
        }
        hsum_float_8(lanes(acc))
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) fn vec_dot_q4_0_q8_0(x: &[BlockQ4_0], y: &[BlockQ8_0]) -> f32 {
        legacy(x, y, |b| x86::q4_0_bytes(&b.qs), |b| b.d())
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) fn vec_dot_q8_0_q8_0(x: &[BlockQ8_0], y: &[BlockQ8_0]) -> f32 {
        legacy(x, y, |b| x86::q8_0_bytes(&b.qs), |b| b.d())
    }

    /// The Q4_1/Q5_1 loop: `summs = fma(m_x, s_y, summs)` (scalar, as the twin),
    /// `acc = fma(d_x * d_y, float(lanes), acc)` on the unsigned codes `codes` gives,
    /// `hsum_float_8(acc) + summs`; the f16 headers widened by `vcvtph2ps` (exact).
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn offset<B>(
        x: &[B],
        y: &[BlockQ8_1],
        codes: impl Fn(&B) -> __m256i,
        dm: impl Fn(&B) -> ([u8; 2], [u8; 2]),
    ) -> f32 {
        let mut acc = _mm256_setzero_ps();
        let mut summs = 0.0f32;
        for (xb, yb) in x.iter().zip(y) {
            let (xd, xm) = dm(xb);
            let [d, m, dy, s] = x86::heads4(xd, xm, yb.d, yb.s);
            summs = m.mul_add(s, summs);
            let q = x86::unsigned_lanes(codes(xb), x86::q8_0_bytes(&yb.qs));
            acc = _mm256_fmadd_ps(_mm256_set1_ps(d * dy), _mm256_cvtepi32_ps(q), acc);
        }
        hsum_float_8(lanes(acc)) + summs
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) fn vec_dot_q4_1_q8_1(x: &[BlockQ4_1], y: &[BlockQ8_1]) -> f32 {
        offset(x, y, |b| x86::nibbles32(&b.qs), |b| (b.d, b.m))
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) fn vec_dot_q5_1_q8_1(x: &[BlockQ5_1], y: &[BlockQ8_1]) -> f32 {
        // Codes nibble | high bit << 4.
        let codes = |b: &BlockQ5_1| {
            let hi = _mm256_and_si256(x86::bit_bytes32(b.qh), _mm256_set1_epi8(0x10));
            _mm256_or_si256(x86::nibbles32(&b.qs), hi)
        };
        offset(x, y, codes, |b| (b.d, b.m))
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) fn vec_dot_q5_0_q8_0(x: &[BlockQ5_0], y: &[BlockQ8_0]) -> f32 {
        // Signed codes (nibble | high bit << 4) - 16: the nibble with 0xF0 set where the
        // high bit is clear (two's complement nibble - 16).
        let bytes = |b: &BlockQ5_0| {
            let clear = _mm256_andnot_si256(x86::bit_bytes32(b.qh), _mm256_set1_epi8(0xF0u8 as i8));
            _mm256_or_si256(x86::nibbles32(&b.qs), clear)
        };
        legacy(x, y, bytes, |b| b.d())
    }

    /// IQ4_NL: blocks in pairs, even ones into `acc0`, odd ones into `acc1` (`fma(d_y *
    /// d_x, float(lanes), acc)`), `hsum_float_8(acc0 + acc1)`; an odd last block by the
    /// scalar tail, `s = fma(d_y * d_x, (float)sum, s)` with its 32 products' exact sum
    /// (the scalar loop has no `sign` wrap-around of an activation byte of -128). The
    /// f16 scales widened by `vcvtph2ps` (exact).
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) fn vec_dot_iq4_nl_q8_0(x: &[BlockIq4Nl], y: &[BlockQ8_0]) -> f32 {
        let table = x86::table16(&tiercheck_core::blocks::iq4_nl::KVALUES_IQ4NL);
        let codes = |b: &BlockIq4Nl| _mm256_shuffle_epi8(table, x86::nibbles32(&b.qs));
        let nb = x.len().min(y.len());
        let mut acc = [_mm256_setzero_ps(); 2];
        for ib in 0..nb / 2 * 2 {
            let (xb, yb) = (&x[ib], &y[ib]);
            let q = x86::mul_sum_i8_lanes(codes(xb), x86::q8_0_bytes(&yb.qs));
            let (dy, dx) = x86::halves2(yb.d, xb.d);
            let d = _mm256_set1_ps(dy * dx);
            acc[ib % 2] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(q), acc[ib % 2]);
        }
        let mut s = hsum_float_8(lanes(_mm256_add_ps(acc[0], acc[1])));
        for ib in nb / 2 * 2..nb {
            let (xb, yb) = (&x[ib], &y[ib]);
            let sum = x86::dot_i8_exact(codes(xb), x86::q8_0_bytes(&yb.qs));
            s = (yb.d() * xb.d()).mul_add(sum as f32, s);
        }
        s
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) fn vec_dot_q4_k_q8_k(x: &[BlockQ4K], y: &[BlockQ8K]) -> f32 {
        let mut acc = _mm256_setzero_ps();
        let mut acc_m = _mm_setzero_ps();
        for (xb, yb) in x.iter().zip(y) {
            let d = yb.d() * xb.d();
            let dmin = -yb.d() * xb.dmin();
            let (sc, mn) = crate::q4k_scales_mins(&xb.scales);
            // _mm_hadd_epi16 of the bsums: wrapping i16 pair sums, then madd with mins.
            let s: [i16; 8] =
                core::array::from_fn(|j| yb.bsum(2 * j).wrapping_add(yb.bsum(2 * j + 1)));
            let prod: [f32; 4] = core::array::from_fn(|i| {
                (mn[2 * i] as i32 * s[2 * i] as i32 + mn[2 * i + 1] as i32 * s[2 * i + 1] as i32)
                    as f32
            });
            // SAFETY: `prod` holds four floats; the load is unaligned.
            let prod = unsafe { _mm_loadu_ps(prod.as_ptr()) };
            acc_m = _mm_fmadd_ps(_mm_set1_ps(dmin), prod, acc_m);
            let sumi = x86::q4k_lanes(&xb.qs, &yb.qs, &sc);
            acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
        }
        let mut m = [0.0f32; 4];
        // SAFETY: `m` holds four floats; the store is unaligned.
        unsafe { _mm_storeu_ps(m.as_mut_ptr(), acc_m) };
        let m01 = m[0] + m[2];
        let m23 = m[1] + m[3];
        hsum_float_8(lanes(acc)) + (m01 + m23)
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) fn vec_dot_q6_k_q8_k(x: &[BlockQ6K], y: &[BlockQ8K]) -> f32 {
        let mut acc = _mm256_setzero_ps();
        for (xb, yb) in x.iter().zip(y) {
            let d = _mm256_set1_ps(yb.d() * xb.d());
            let sub = _mm256_slli_epi32::<5>(x86::bsums_lanes(&yb.bsums, &xb.scales));
            let q = x86::q6k_lanes(&xb.ql, &xb.qh, &yb.qs, &xb.scales);
            let l = _mm256_cvtepi32_ps(_mm256_sub_epi32(q, sub));
            acc = _mm256_fmadd_ps(d, l, acc);
        }
        hsum_float_8(lanes(acc))
    }

    /// `acc[t] = fma(d, float(l[t]), acc[t])` on eight lanes.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn fma_int(d: f32, l: __m256i, acc: __m256) -> __m256 {
        _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(l), acc)
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) fn vec_dot_q2_k_q8_k(x: &[BlockQ2K], y: &[BlockQ8K]) -> f32 {
        let mut acc = _mm256_setzero_ps();
        for (xb, yb) in x.iter().zip(y) {
            let d = yb.d() * xb.d();
            let dmin = -yb.d() * xb.dmin();
            let mins: [u8; 16] = core::array::from_fn(|s| xb.scales[s] >> 4);
            acc = fma_int(dmin, x86::bsums_lanes(&yb.bsums, &mins), acc);
            acc = fma_int(d, x86::q2k_lanes(&xb.qs, &xb.scales, &yb.qs), acc);
        }
        hsum_float_8(lanes(acc))
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) fn vec_dot_q3_k_q8_k(x: &[BlockQ3K], y: &[BlockQ8K]) -> f32 {
        let mut acc = _mm256_setzero_ps();
        for (xb, yb) in x.iter().zip(y) {
            let sc: [i16; 16] = core::array::from_fn(|s| xb.scale(s) as i16 - 32);
            let l = x86::q3k_lanes(&xb.qs, &xb.hmask, &sc, &yb.qs);
            acc = fma_int(yb.d() * xb.d(), l, acc);
        }
        hsum_float_8(lanes(acc))
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) fn vec_dot_q5_k_q8_k(x: &[BlockQ5K], y: &[BlockQ8K]) -> f32 {
        let mut acc = _mm256_setzero_ps();
        let mut summs = 0.0f32;
        for (xb, yb) in x.iter().zip(y) {
            let d = yb.d() * xb.d();
            let dmin = -yb.d() * xb.dmin();
            let (sc, mn) = crate::q4k_scales_mins(&xb.scales);
            // _mm_hadd_epi16 of the bsums: wrapping i16 pair sums, then madd with mins.
            let s: [i32; 8] =
                core::array::from_fn(|j| yb.bsum(2 * j).wrapping_add(yb.bsum(2 * j + 1)) as i32);
            let p: [i32; 4] = core::array::from_fn(|i| {
                mn[2 * i] as i32 * s[2 * i] + mn[2 * i + 1] as i32 * s[2 * i + 1]
            });
            let hsum = p[0].wrapping_add(p[1]).wrapping_add(p[2].wrapping_add(p[3]));
            summs = dmin.mul_add(hsum as f32, summs);
            acc = fma_int(d, x86::q5k_lanes(&xb.qs, &xb.qh, &sc, &yb.qs), acc);
        }
        hsum_float_8(lanes(acc)) + summs
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) fn vec_dot_iq4_xs_q8_k(x: &[BlockIq4Xs], y: &[BlockQ8K]) -> f32 {
        let mut acc = _mm256_setzero_ps();
        for (xb, yb) in x.iter().zip(y) {
            let ls: [i32; 8] = core::array::from_fn(|s| xb.scale(s) as i32 - 32);
            acc = fma_int(xb.d() * yb.d(), x86::iq4xs_lanes(&xb.qs, &ls, &yb.qs), acc);
        }
        hsum_float_8(lanes(acc))
    }
}

/// The accelerated forms on aarch64 hosts: the tier's integer lanes by the NEON
/// primitives of `accel::neon` (the same exact integers as the AVX2 instructions), the
/// scalar functions' float operations one for one on the same eight lanes as two
/// four-float NEON vectors (each `fma` one `fmla`, the products' operands in either
/// order being the same exact product), [`hsum_float_8`] on the stored lanes.
#[cfg(target_arch = "aarch64")]
mod neon {
    use super::*;
    use crate::neon as n;
    use core::arch::aarch64::*;

    /// `acc[t] = fma(d, x[t], acc[t])` on eight lanes.
    #[inline(always)]
    fn fma8(d: f32, x: [i32; 8], acc: &mut [float32x4_t; 2]) {
        // SAFETY: NEON is part of every aarch64 CPU; two loads of four i32 from `x`.
        unsafe {
            for (h, a) in acc.iter_mut().enumerate() {
                let v = vcvtq_f32_s32(vld1q_s32(x.as_ptr().add(4 * h)));
                *a = vfmaq_n_f32(*a, v, d);
            }
        }
    }

    #[inline(always)]
    fn stored(acc: [float32x4_t; 2]) -> [f32; 8] {
        let mut out = [0.0f32; 8];
        // SAFETY: two stores of four floats into `out`.
        unsafe {
            vst1q_f32(out.as_mut_ptr(), acc[0]);
            vst1q_f32(out.as_mut_ptr().add(4), acc[1]);
        }
        out
    }

    fn zero() -> [float32x4_t; 2] {
        // SAFETY: NEON is part of every aarch64 CPU.
        unsafe { [vdupq_n_f32(0.0), vdupq_n_f32(0.0)] }
    }

    pub(super) fn vec_dot_q4_0_q8_0(x: &[BlockQ4_0], y: &[BlockQ8_0]) -> f32 {
        let mut acc = zero();
        for (xb, yb) in x.iter().zip(y) {
            let d = xb.d() * yb.d();
            let mut qx = [0u8; 32];
            for j in 0..16 {
                qx[j] = ((xb.qs[j] & 0xF) as i8 - 8) as u8;
                qx[j + 16] = ((xb.qs[j] >> 4) as i8 - 8) as u8;
            }
            fma8(d, n::mul_sum_i8_lanes(&qx, &yb.qs), &mut acc);
        }
        hsum_float_8(stored(acc))
    }

    pub(super) fn vec_dot_q8_0_q8_0(x: &[BlockQ8_0], y: &[BlockQ8_0]) -> f32 {
        let mut acc = zero();
        for (xb, yb) in x.iter().zip(y) {
            let d = xb.d() * yb.d();
            fma8(d, n::mul_sum_i8_lanes(&xb.qs, &yb.qs), &mut acc);
        }
        hsum_float_8(stored(acc))
    }

    pub(super) fn vec_dot_q4_k_q8_k(x: &[BlockQ4K], y: &[BlockQ8K]) -> f32 {
        let mut acc = zero();
        let mut acc_m = [0.0f32; 4];
        for (xb, yb) in x.iter().zip(y) {
            let d = yb.d() * xb.d();
            let dmin = -yb.d() * xb.dmin();
            let (sc, mn) = crate::q4k_scales_mins(&xb.scales);
            // _mm_hadd_epi16 of the bsums: wrapping i16 pair sums, then madd with mins.
            let s: [i16; 8] =
                core::array::from_fn(|j| yb.bsum(2 * j).wrapping_add(yb.bsum(2 * j + 1)));
            for (i, a) in acc_m.iter_mut().enumerate() {
                let p =
                    mn[2 * i] as i32 * s[2 * i] as i32 + mn[2 * i + 1] as i32 * s[2 * i + 1] as i32;
                *a = dmin.mul_add(p as f32, *a);
            }
            fma8(d, n::q4k_lanes(&xb.qs, &yb.qs, &sc), &mut acc);
        }
        let m01 = acc_m[0] + acc_m[2];
        let m23 = acc_m[1] + acc_m[3];
        hsum_float_8(stored(acc)) + (m01 + m23)
    }

    pub(super) fn vec_dot_q6_k_q8_k(x: &[BlockQ6K], y: &[BlockQ8K]) -> f32 {
        let mut acc = zero();
        for (xb, yb) in x.iter().zip(y) {
            let d = yb.d() * xb.d();
            let sub = n::bsums_lanes(&yb.bsums, &xb.scales);
            let q = n::q6k_lanes(&xb.ql, &xb.qh, &yb.qs, &xb.scales);
            let lanes: [i32; 8] = core::array::from_fn(|t| q[t].wrapping_sub(sub[t] << 5));
            fma8(d, lanes, &mut acc);
        }
        hsum_float_8(stored(acc))
    }
}

/// The kernels above compiled a second time with AVX2 and FMA enabled, for CPUs that
/// have them: the same Rust, so the same float operations in the same order (Rust
/// neither contracts nor reassociates float arithmetic, whatever the target features),
/// and `f32::mul_add` is then one instruction instead of the binary64 route. Only the
/// code generation differs (wider autovectorization of the integer stage). CPUs
/// without them (and every other architecture) run the baseline build.
#[cfg(target_arch = "x86_64")]
mod wide {
    use super::*;

    #[target_feature(enable = "avx2,fma")]
    pub(super) fn vec_dot_q4_0_q8_0(x: &[BlockQ4_0], y: &[BlockQ8_0]) -> f32 {
        super::vec_dot_q4_0_q8_0_in::<true>(x, y)
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) fn vec_dot_q8_0_q8_0(x: &[BlockQ8_0], y: &[BlockQ8_0]) -> f32 {
        super::vec_dot_q8_0_q8_0_in::<true>(x, y)
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) fn vec_dot_q4_k_q8_k(x: &[BlockQ4K], y: &[BlockQ8K]) -> f32 {
        super::vec_dot_q4_k_q8_k_in::<true>(x, y)
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) fn vec_dot_q6_k_q8_k(x: &[BlockQ6K], y: &[BlockQ8K]) -> f32 {
        super::vec_dot_q6_k_q8_k_in::<true>(x, y)
    }
}
