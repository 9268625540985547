//! Accelerated forms of `tiercheck_core::arch::aarch64::i8mm::vec_dot2` (the i8mm lanes'
//! two-row dots): the integer sums by [`crate::x86`] (exact: the same integers).

#[allow(unused_imports)]
use tiercheck_core::arch::aarch64::i8mm::vec_dot2::{slots, *};
#[allow(unused_imports)]
use tiercheck_core::blocks::{BlockQ4K, BlockQ4_0, BlockQ6K, BlockQ8K, BlockQ8_0};

use crate::Host;

/// Fills this file's slots where `host` serves them.
pub(crate) fn install(host: Host) {
    #[cfg(target_arch = "x86_64")]
    if host.avx2_fma {
        // SAFETY: installed only where the CPU has AVX2 and FMA.
        slots::Q4_0_ISUM.set_fast(|a, b| unsafe { fast::q4_0_isum(a, b) });
        // SAFETY: as above.
        slots::Q8_0_ISUM.set_fast(|a, b| unsafe { fast::q8_0_isum(a, b) });
        // SAFETY: as above.
        slots::Q4_K_ISUM_BIAS.set_fast(|a, b| unsafe { fast::q4_k_isum_bias(a, b) });
    }
    let _ = host;
}

/// The integer sums above by [`crate::x86`] (exact: the same integers).
#[cfg(target_arch = "x86_64")]
mod fast {
    use super::*;
    use crate::x86;
    use core::arch::x86_64::*;

    #[inline]
    #[target_feature(enable = "avx2")]
    fn sum4(v: __m128i) -> i32 {
        let s = _mm_add_epi32(v, _mm_shuffle_epi32::<0b01_00_11_10>(v));
        _mm_cvtsi128_si32(_mm_add_epi32(s, _mm_shuffle_epi32::<0b10_11_00_01>(s)))
    }

    #[target_feature(enable = "avx2")]
    pub(super) fn q4_0_isum(x: &BlockQ4_0, y: &BlockQ8_0) -> i32 {
        let (xl, xh) = x86::q4_0_halves(&x.qs);
        sum4(x86::sdot_lanes(xl, xh, &y.qs))
    }

    #[target_feature(enable = "avx2")]
    pub(super) fn q8_0_isum(x: &BlockQ8_0, y: &BlockQ8_0) -> i32 {
        let (xl, xh) = x86::q8_halves(&x.qs);
        sum4(x86::sdot_lanes(xl, xh, &y.qs))
    }

    #[target_feature(enable = "avx2")]
    pub(super) fn q4_k_isum_bias(x: &BlockQ4K, y: &BlockQ8K) -> (i32, i32) {
        let (sc, mn) = crate::q4k_scales_mins(&x.scales);
        let bias =
            (0..8).map(|s| mn[s] as i32 * (y.bsum(2 * s) as i32 + y.bsum(2 * s + 1) as i32)).sum();
        (x86::q4k_sumi(&x.qs, &y.qs, &sc), bias)
    }
}
