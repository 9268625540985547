//! The `q4_0_8x8` kernel of ggml's 256-bit SVE build (`ggml_gemv_q4_0_8x8_q8_0` and, row
//! by row, `ggml_gemm_q4_0_8x8_q8_0` in `ggml-cpu/arch/arm/repack.cpp`), natively. Twin:
//! `tiercheck_core::arch::x86_64::avx2_repack::kernels::gemv_q4_0_8x8`, whose float
//! order ggml's SVE assembly shares: per block and output column j,
//! `acc[j] = fma(float(isum_j), f16(d_j) * d_y, acc[j])`. The twin's integer products
//! follow x86's `_mm256_sign_epi8`, which differs from a plain product only for an
//! activation of -128, a value ggml's Q8_0 quantizer never writes (its codes lie in
//! -127..=127).
//!
//! Here each column's integer sum is plain integer code (exact), and the float step is
//! `vfmaq_f32` on columns 0-3 and 4-7 (ggml's one 8-lane `fmla`, lane for lane).

use core::arch::aarch64::*;

use crate::simd::{ldf, ldi, st};

use tiercheck_core::blocks::BlockQ8_0;
use tiercheck_core::fp16::f16_bits_to_f32;
use tiercheck_core::repack::BlockQ4_0x8;

/// `ggml_gemv_q4_0_8x8_q8_0` for one group of 8 columns and one activation row.
///
/// # Safety
/// The CPU must support NEON.
#[target_feature(enable = "neon")]
pub unsafe fn gemv_q4_0_8x8(blocks: &[BlockQ4_0x8], y: &[BlockQ8_0]) -> [f32; 8] {
    let mut acc = [vdupq_n_f32(0.0); 2];
    for (x, yb) in blocks.iter().zip(y) {
        let isum: [i32; 8] = core::array::from_fn(|j| {
            (0..16)
                .map(|o| {
                    let q = x.q(j, o);
                    ((q & 0xF) as i32 - 8) * yb.q(o) as i32
                        + ((q >> 4) as i32 - 8) * yb.q(o + 16) as i32
                })
                .sum()
        });
        let dy = vdupq_n_f32(yb.d());
        for (h, a) in acc.iter_mut().enumerate() {
            let d = vmulq_f32(
                ldf(core::array::from_fn(|t| f16_bits_to_f32(u16::from_le_bytes(x.d[4 * h + t])))),
                dy,
            );
            let s = vcvtq_f32_s32(ldi(core::array::from_fn(|t| isum[4 * h + t])));
            *a = vfmaq_f32(*a, s, d);
        }
    }
    let (a, b) = (st(acc[0]), st(acc[1]));
    core::array::from_fn(|j| if j < 4 { a[j] } else { b[j - 4] })
}
