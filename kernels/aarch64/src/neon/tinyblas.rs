//! llamafile's `tinyBLAS_Q0_ARM` (the dotprod build's plain Q4_0 / Q8_0 matmul from two
//! activation rows), natively: per block two `sdot`s (or, without dotprod, the same
//! four lane sums by widening multiplies and pairwise adds), `vmulq_n_f32` by the scale
//! product then `vaddq_f32` (GCC's `vmlaq_n_f32` is unfused), and `vaddvq_f32` at the
//! end. Twin (float order in words): `tiercheck_core::arch::aarch64::neon::tinyblas`.

use core::arch::aarch64::*;

use crate::simd::ld;

use tiercheck_core::blocks::{BlockQ4_0, BlockQ8_0};

use super::vec_dot::sdot;

/// One output of `tinyBLAS_Q0_ARM<block_q4_0>`.
///
/// # Safety
/// The CPU must support NEON, and dotprod when `dot` is true.
#[target_feature(enable = "neon")]
pub unsafe fn dot_q4_0(x: &[BlockQ4_0], y: &[BlockQ8_0], dot: bool) -> f32 {
    let (m4b, s8b) = (vdupq_n_u8(0x0F), vdupq_n_s8(8));
    let mut c = vdupq_n_f32(0.0);
    for (xb, yb) in x.iter().zip(y) {
        let q = ld(&xb.qs);
        let lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, m4b)), s8b);
        let hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8::<4>(q)), s8b);
        let (ylo, yhi) = (vreinterpretq_s8_u8(ld(&yb.qs)), vreinterpretq_s8_u8(ld(&yb.qs[16..])));
        // `sdot` runs the dotprod instruction only when `dot` (the caller's guarantee).
        let isum = sdot(sdot(vdupq_n_s32(0), lo, ylo, dot), hi, yhi, dot);
        c = vaddq_f32(c, vmulq_n_f32(vcvtq_f32_s32(isum), xb.d() * yb.d()));
    }
    vaddvq_f32(c)
}

/// One output of `tinyBLAS_Q0_ARM<block_q8_0>`.
///
/// # Safety
/// The CPU must support NEON, and dotprod when `dot` is true.
#[target_feature(enable = "neon")]
pub unsafe fn dot_q8_0(x: &[BlockQ8_0], y: &[BlockQ8_0], dot: bool) -> f32 {
    let mut c = vdupq_n_f32(0.0);
    for (xb, yb) in x.iter().zip(y) {
        let s = |b: &BlockQ8_0, o: usize| vreinterpretq_s8_u8(ld(&b.qs[o..]));
        // `sdot` runs the dotprod instruction only when `dot` (the caller's guarantee).
        let isum = sdot(sdot(vdupq_n_s32(0), s(xb, 0), s(yb, 0), dot), s(xb, 16), s(yb, 16), dot);
        c = vaddq_f32(c, vmulq_n_f32(vcvtq_f32_s32(isum), xb.d() * yb.d()));
    }
    vaddvq_f32(c)
}
