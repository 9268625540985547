//! Accelerated forms of `tiercheck_core::arch::x86_64::avx2_repack::kernels` (the
//! repacked AVX2 lane's Q4_K 8x8 integer sums and gemv; the aarch64 repacked twins share
//! the integer stage): with AVX2 the sums by [`crate::x86::q4kx8_dots`], with FMA and
//! F16C as well the gemv with the eight columns in the lanes of AVX vectors.

#[allow(unused_imports)]
use tiercheck_core::arch::x86_64::avx2_repack::kernels::{slots, sub_block_sums};
#[allow(unused_imports)]
use tiercheck_core::blocks::BlockQ8K;
#[allow(unused_imports)]
use tiercheck_core::blocks::BlockQ8_0;
#[allow(unused_imports)]
use tiercheck_core::repack::{BlockIq4Nlx8, BlockQ4Kx8, BlockQ4_0x8};

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
        // SAFETY: as above.
        slots::GEMV_Q4_0_8X8.set_fast(|b, y| unsafe {
            let table: [i8; 16] = core::array::from_fn(|n| n as i8 - 8);
            avx::gemv_b32_8x8_avx2(b.iter().map(|x| (&x.qs, &x.d)), y, 0x88, &table)
        });
        // SAFETY: as above.
        slots::GEMV_IQ4_NL_8X8.set_fast(|b, y| unsafe {
            let table = &tiercheck_core::blocks::iq4_nl::KVALUES_IQ4NL;
            avx::gemv_b32_8x8_avx2(b.iter().map(|x| (&x.qs, &x.d)), y, 0, table)
        });
    }
    let _ = host;
}

/// The gemv with the columns in AVX lanes.
#[cfg(target_arch = "x86_64")]
mod avx {
    use super::*;

    /// The 32-value 8x8 template (`gemv_q4_0_8x8`, `gemv_iq4_nl_8x8`) with the eight
    /// columns in AVX lanes: the rows' sums by [`crate::x86::b32x8_isums`] (the scalar
    /// form's wrapping `sign` products, exact otherwise), `f16(d_j) * d_y` one `vmulps`
    /// after `vcvtph2ps` (exact), then `acc_j = fma(float(isum_j), d_j * d_y, acc_j)`
    /// one `vfmadd`: the scalar form's float operations lane by lane. Each block is its
    /// stored quants (XOR `flip`) and eight f16 scales; `table` maps a nibble to its value.
    ///
    /// # Safety
    /// The CPU must have AVX2, FMA and F16C.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn gemv_b32_8x8_avx2<'a>(
        blocks: impl Iterator<Item = (&'a [u8; 128], &'a [[u8; 2]; 8])>,
        y: &[BlockQ8_0],
        flip: u8,
        table: &[i8; 16],
    ) -> [f32; 8] {
        use std::arch::x86_64::*;
        let table = crate::x86::table16(table);
        let mut acc = _mm256_setzero_ps();
        for ((qs, d), yb) in blocks.zip(y) {
            let isum = crate::x86::b32x8_isums(qs, flip, table, &yb.qs);
            // SAFETY: `d` is 16 readable bytes; the load is unaligned.
            let d = _mm256_cvtph_ps(unsafe { _mm_loadu_si128(d.as_ptr().cast()) });
            let dd = _mm256_mul_ps(d, _mm256_set1_ps(yb.d()));
            acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), dd, acc);
        }
        let mut out = [0.0f32; 8];
        // SAFETY: `out` holds eight floats; the store is unaligned.
        unsafe { _mm256_storeu_ps(out.as_mut_ptr(), acc) };
        out
    }

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
            let (sc, mn) = crate::q4kx8_scales_mins(&x.scales);
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
