//! Accelerated forms of `tiercheck_core::arch::x86_64::avx2_repack::kernels` (the
//! repacked AVX2 lane's Q4_K 8x8 integer sums and gemv; the aarch64 repacked twins share
//! the integer stage): with AVX2 the sums by [`crate::x86::q4kx8_dots`], with FMA and
//! F16C as well the gemv with the eight columns in the lanes of AVX vectors.

#[allow(unused_imports)]
use tiercheck_core::arch::x86_64::avx2_repack::kernels::{slots, sub_block_sums};
#[allow(unused_imports)]
use tiercheck_core::blocks::BlockQ8K;
#[allow(unused_imports)]
use tiercheck_core::repack::BlockQ4Kx8;

use crate::Host;

/// Fills this file's slots where `host` serves them.
pub(crate) fn install(host: Host) {
    #[cfg(target_arch = "x86_64")]
    if host.avx2_fma {
        slots::Q4_KX8_DOTS.set_fast(|x, y| {
            // SAFETY: installed only where the CPU has AVX2 (the same exact integers).
            let by_sub = unsafe { crate::x86::q4kx8_dots(&x.qs, &y.qs, 8) };
            core::array::from_fn(|j| core::array::from_fn(|s| by_sub[s][j]))
        });
    }
    #[cfg(target_arch = "x86_64")]
    if host.avx2_fma && host.f16c {
        // SAFETY: installed only where the CPU has AVX2, FMA and F16C.
        slots::GEMV_Q4_K_8X8.set_fast(|b, y| unsafe { avx::gemv_q4_k_8x8_avx2(b, y) });
    }
    let _ = host;
}

/// The gemv with the columns in AVX lanes.
#[cfg(target_arch = "x86_64")]
mod avx {
    use super::*;

    /// `gemv_q4_k_8x8` with the eight columns in the lanes of AVX vectors: the same
    /// exact integers (`isum_j`, `imin_j`; bounds: a sub-block dot at most 32 * 15 * 128, a
    /// scale or min at most 63, eight sub-blocks far inside i32), `f16(d_j) * d_y` one
    /// `vmulps` after `vcvtph2ps` (exact conversions), each accumulation one `vfmadd` per
    /// superblock, the output one `vsubps`: the scalar form's float operations lane by
    /// lane.
    ///
    /// # Safety
    /// The CPU must have AVX2, FMA and F16C.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn gemv_q4_k_8x8_avx2(blocks: &[BlockQ4Kx8], y: &[BlockQ8K]) -> [f32; 8] {
        use std::arch::x86_64::*;
        let mut acc = _mm256_setzero_ps();
        let mut acc_min = _mm256_setzero_ps();
        for (x, yb) in blocks.iter().zip(y) {
            // dot[s][j] and the (scale, min) of row j's sub-block s by sub-block then row.
            let dot = crate::x86::q4kx8_dots(&x.qs, &yb.qs, 8);
            let (sc, mn) = crate::q4kx8_scales_mins(x);
            let s = sub_block_sums(yb);
            let (mut isum, mut imin) = (_mm256_setzero_si256(), _mm256_setzero_si256());
            for sb in 0..8 {
                let bytes =
                    |b: [u8; 8]| _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(i64::from_le_bytes(b)));
                // SAFETY: 8 i32 of `dot[sb]`.
                let d = unsafe { _mm256_loadu_si256(dot[sb].as_ptr().cast()) };
                isum = _mm256_add_epi32(isum, _mm256_mullo_epi32(bytes(sc[sb]), d));
                let sv = _mm256_set1_epi32(s[sb] as i32);
                imin = _mm256_add_epi32(imin, _mm256_mullo_epi32(bytes(mn[sb]), sv));
            }
            let half8 = |h: &[[u8; 2]; 8]| {
                // SAFETY: 16 bytes of eight f16 fields.
                _mm256_cvtph_ps(unsafe { _mm_loadu_si128(h.as_ptr().cast()) })
            };
            let dy = _mm256_set1_ps(yb.d());
            acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(half8(&x.d), dy), acc);
            let dmin = _mm256_mul_ps(half8(&x.dmin), dy);
            acc_min = _mm256_fmadd_ps(_mm256_cvtepi32_ps(imin), dmin, acc_min);
        }
        let mut out = [0.0f32; 8];
        // SAFETY: 8 floats of `out`.
        unsafe { _mm256_storeu_ps(out.as_mut_ptr(), _mm256_sub_ps(acc, acc_min)) };
        out
    }
}
