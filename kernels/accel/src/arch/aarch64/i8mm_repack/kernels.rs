//! Accelerated forms of `tiercheck_core::arch::aarch64::i8mm_repack::kernels` (the i8mm
//! repacked Q4_K 8x8 gemv and gemm; the SVE-256 gemm shares them): on x86-64 with AVX2
//! and FMA, the integer stages by [`crate::x86::q4kx8_dots`], the float operations of
//! the scalar kernels (and of the SVE-256 gemm, `FUSED`) one for one.

#[allow(unused_imports)]
use tiercheck_core::arch::aarch64::i8mm_repack::kernels::{slots, *};
#[allow(unused_imports)]
use tiercheck_core::blocks::BlockQ8K;
#[allow(unused_imports)]
use tiercheck_core::repack::BlockQ4Kx8;

#[allow(unused_imports)]
use crate::f16;

use crate::Host;

/// Fills this file's slots where `host` serves them.
pub(crate) fn install(host: Host) {
    #[cfg(target_arch = "x86_64")]
    if host.avx2_fma {
        // SAFETY: installed only where the CPU has AVX2 and FMA.
        slots::GEMV_Q4_K_8X8.set_fast(|a, b| unsafe { fast::gemv_q4_k_8x8(a, b) });
        // SAFETY: as above.
        slots::GEMM_Q4_K_8X8.set_fast(|a, b| unsafe { fast::gemm_q4_k_8x8::<false>(a, b) });
    }
    let _ = host;
}

/// The accelerated forms (see [`crate`]): integer stages by
/// [`crate::x86::q4kx8_dots`], the float operations of the scalar kernels (and of
/// the SVE-256 gemm, `FUSED`) one for one.
#[cfg(target_arch = "x86_64")]
pub(crate) mod fast {
    use super::*;

    /// Per row of the group: the bias `sum_s min_s * S_s` and isum `sum_s sc_s * dot_s`.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn ints(x: &BlockQ4Kx8, yb: &BlockQ8K) -> ([[i32; 8]; 8], [[u8; 8]; 8], [i32; 8]) {
        let dot = crate::x86::q4kx8_dots(&x.qs, &yb.qs, 8);
        let (sc, mn) = crate::q4kx8_scales_mins(x);
        let sums: [i32; 8] =
            core::array::from_fn(|s| yb.bsum(2 * s).wrapping_add(yb.bsum(2 * s + 1)) as i32);
        let mut bias = [0i32; 8];
        for s in 0..8 {
            for j in 0..8 {
                bias[j] += mn[s][j] as i32 * sums[s];
            }
        }
        (dot, sc, bias)
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) fn gemv_q4_k_8x8(blocks: &[BlockQ4Kx8], y: &[BlockQ8K]) -> [f32; 8] {
        let mut acc = [0.0f32; 8];
        for (x, yb) in blocks.iter().zip(y) {
            let (dot, sc, bias) = ints(x, yb);
            for (j, a) in acc.iter_mut().enumerate() {
                let scale = f16(x.d[j]) * yb.d();
                let min = f16(x.dmin[j]) * yb.d();
                for s in 0..8 {
                    *a = scale.mul_add((sc[s][j] as i32 * dot[s][j]) as f32, *a);
                }
                *a -= bias[j] as f32 * min;
            }
        }
        acc
    }

    /// `FUSED = false`: the i8mm gemm (`vmlsq_f32`, `vmlaq_f32`, unfused); `true`: the
    /// SVE-256 gemm (`svmls`, `svmla`, fused).
    #[target_feature(enable = "avx2,fma")]
    pub(crate) fn gemm_q4_k_8x8<const FUSED: bool>(
        blocks: &[BlockQ4Kx8],
        y: &[BlockQ8K],
    ) -> [f32; 8] {
        let mut acc = [0.0f32; 8];
        for (x, yb) in blocks.iter().zip(y) {
            let (dot, sc, bias) = ints(x, yb);
            for (j, a) in acc.iter_mut().enumerate() {
                let isum: i32 = (0..8).map(|s| sc[s][j] as i32 * dot[s][j]).sum();
                let min = f16(x.dmin[j]) * yb.d();
                let scale = f16(x.d[j]) * yb.d();
                if FUSED {
                    *a = (-(bias[j] as f32)).mul_add(min, *a);
                    *a = (isum as f32).mul_add(scale, *a);
                } else {
                    *a -= bias[j] as f32 * min;
                    *a += isum as f32 * scale;
                }
            }
        }
        acc
    }
}
