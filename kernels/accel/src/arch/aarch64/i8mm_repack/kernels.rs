//! Accelerated forms of `tiercheck_core::arch::aarch64::i8mm_repack::kernels` (the i8mm
//! repacked Q4_K and Q5_K 8x8 gemv and gemm; the SVE-256 Q4_K gemm shares them): on
//! x86-64 with AVX2 and FMA, the integer stages by [`crate::x86::q4kx8_dots`] and
//! [`crate::x86::q5kx8_dots`], the float operations of the scalar kernels (and of the
//! SVE-256 gemm, `FUSED`) one for one.

#[allow(unused_imports)]
use tiercheck_core::arch::aarch64::i8mm_repack::kernels::{slots, *};
#[allow(unused_imports)]
use tiercheck_core::blocks::BlockQ8K;
#[allow(unused_imports)]
use tiercheck_core::repack::{BlockQ4Kx8, BlockQ5Kx8};

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
        // SAFETY: as above.
        slots::GEMV_Q5_K_8X8.set_fast(|a, b| unsafe { fast::gemv_q5_k_8x8(a, b) });
        // SAFETY: as above.
        slots::GEMM_Q5_K_8X8.set_fast(|a, b| unsafe { fast::gemm_kx8::<_, false>(a, b) });
    }
    let _ = host;
}

/// The accelerated forms (see [`crate`]): integer stages by
/// [`crate::x86::q4kx8_dots`], the float operations of the scalar kernels (and of
/// the SVE-256 gemm, `FUSED`) one for one.
#[cfg(target_arch = "x86_64")]
pub(crate) mod fast {
    use super::*;

    /// An 8-row K-quant block in the 8-byte interleave: its f16 scales and its exact
    /// sub-block dots with one Q8_K block (`dot[s][row]`).
    pub(crate) trait Kx8 {
        fn d(&self) -> &[[u8; 2]; 8];
        fn dmin(&self) -> &[[u8; 2]; 8];
        fn scales(&self) -> &[u8; 96];
        /// # Safety
        /// The CPU must have AVX2.
        unsafe fn dots(&self, yb: &BlockQ8K) -> [[i32; 8]; 8];
    }

    /// [`Kx8`] for a block type whose sub-block dots `$dots` gives.
    macro_rules! kx8 {
        ($t:ty, $dots:expr) => {
            impl Kx8 for $t {
                fn d(&self) -> &[[u8; 2]; 8] {
                    &self.d
                }
                fn dmin(&self) -> &[[u8; 2]; 8] {
                    &self.dmin
                }
                fn scales(&self) -> &[u8; 96] {
                    &self.scales
                }
                unsafe fn dots(&self, yb: &BlockQ8K) -> [[i32; 8]; 8] {
                    // SAFETY: the caller's CPU has AVX2.
                    unsafe { $dots(self, yb) }
                }
            }
        };
    }
    kx8!(BlockQ4Kx8, |x: &BlockQ4Kx8, yb: &BlockQ8K| crate::x86::q4kx8_dots(&x.qs, &yb.qs, 8));
    kx8!(BlockQ5Kx8, |x: &BlockQ5Kx8, yb: &BlockQ8K| {
        crate::x86::q5kx8_dots(&x.qs, &x.qh, &yb.qs, 8)
    });

    /// Per row of the group: the bias `sum_s min_s * S_s` and isum `sum_s sc_s * dot_s`.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn ints<B: Kx8>(x: &B, yb: &BlockQ8K) -> ([[i32; 8]; 8], [[u8; 8]; 8], [i32; 8]) {
        // SAFETY: this function runs only where the CPU has AVX2.
        let dot = unsafe { x.dots(yb) };
        let (sc, mn) = crate::q4kx8_scales_mins(x.scales());
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

    /// `gemv_q5_k_8x8`: per pair p of sub-blocks two fused steps, then the pair's bias
    /// subtracted (unfused).
    #[target_feature(enable = "avx2,fma")]
    pub(super) fn gemv_q5_k_8x8(blocks: &[BlockQ5Kx8], y: &[BlockQ8K]) -> [f32; 8] {
        let mut acc = [0.0f32; 8];
        for (x, yb) in blocks.iter().zip(y) {
            // SAFETY: this function runs only where the CPU has AVX2.
            let dot = unsafe { x.dots(yb) };
            let (sc, mn) = crate::q4kx8_scales_mins(&x.scales);
            let s: [i32; 8] =
                core::array::from_fn(|t| yb.bsum(2 * t).wrapping_add(yb.bsum(2 * t + 1)) as i32);
            for (j, a) in acc.iter_mut().enumerate() {
                let scale = f16(x.d[j]) * yb.d();
                let min = f16(x.dmin[j]) * yb.d();
                for p in 0..4 {
                    let (s0, s1) = (2 * p, 2 * p + 1);
                    *a = scale.mul_add((sc[s0][j] as i32 * dot[s0][j]) as f32, *a);
                    *a = scale.mul_add((sc[s1][j] as i32 * dot[s1][j]) as f32, *a);
                    let bias = mn[s0][j] as i32 * s[s0] + mn[s1][j] as i32 * s[s1];
                    *a -= min * bias as f32;
                }
            }
        }
        acc
    }

    /// The Q4_K gemm of [`gemm_kx8`].
    #[target_feature(enable = "avx2,fma")]
    pub(crate) fn gemm_q4_k_8x8<const FUSED: bool>(
        blocks: &[BlockQ4Kx8],
        y: &[BlockQ8K],
    ) -> [f32; 8] {
        gemm_kx8::<_, FUSED>(blocks, y)
    }

    /// `FUSED = false`: the i8mm gemm of Q4_K and Q5_K (`vmlsq_f32`, `vmlaq_f32`,
    /// unfused); `true`: the SVE-256 Q4_K gemm (`svmls`, `svmla`, fused).
    #[target_feature(enable = "avx2,fma")]
    pub(crate) fn gemm_kx8<B: Kx8, const FUSED: bool>(blocks: &[B], y: &[BlockQ8K]) -> [f32; 8] {
        let mut acc = [0.0f32; 8];
        for (x, yb) in blocks.iter().zip(y) {
            let (dot, sc, bias) = ints(x, yb);
            for (j, a) in acc.iter_mut().enumerate() {
                let isum: i32 = (0..8).map(|s| sc[s][j] as i32 * dot[s][j]).sum();
                let min = f16(x.dmin()[j]) * yb.d();
                let scale = f16(x.d()[j]) * yb.d();
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
