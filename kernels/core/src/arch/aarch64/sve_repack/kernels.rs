//! Portable twin of the repacked kernel that ggml's aarch64 SVE builds run differently
//! from the i8mm build: `ggml_gemm_q4_K_8x8_q8_K`'s SVE + i8mm branch (`svcntb() * 8 ==
//! 256`). Integer parts as in the i8mm kernel (`svmmla` tiles, exact); per output column
//! j and activation row, per superblock, with s = f16(d_j) * d_y and m = f16(dmin_j) * d_y:
//! `acc = fma(-float(bias), m, acc)` (`svmls`, fused), then `acc = fma(float(isum), s,
//! acc)` (`svmla`, fused), isum and bias as in
//! [`crate::arch::aarch64::i8mm_repack::kernels::gemm_q4_k_8x8`] (whose NEON `vmlsq` /
//! `vmlaq` steps are unfused). The other kernels an SVE build runs are the i8mm build's
//! (at 128 bits all of them; at 256 bits also the x86 twin's `q4_0_8x8`, whose order
//! ggml's SVE assembly shares: `fmul` of the two scales, then `fmla`). Native counterpart:
//! `tiercheck-aarch64` (`i8mm_repack::kernels::gemm_q4_k_8x8::<true>`, `sve_repack::kernels`).

use crate::arch::aarch64::i8mm_repack::kernels::{f16, q4_k_8x8_dots, q4_k_bias};
use crate::blocks::BlockQ8K;
use crate::repack::BlockQ4Kx8;

/// `ggml_gemm_q4_K_8x8_q8_K` at 256-bit SVE, one activation row of the gemm, for one
/// group of 8 columns.
pub fn gemm_q4_k_8x8_sve256(blocks: &[BlockQ4Kx8], y: &[BlockQ8K]) -> [f32; 8] {
    crate::accelerated!(slots::GEMM_Q4_K_8X8_SVE256, (blocks, y));
    let mut acc = [0.0f32; 8];
    for (x, yb) in blocks.iter().zip(y) {
        for (j, a) in acc.iter_mut().enumerate() {
            let dots = q4_k_8x8_dots(x, j, yb);
            let isum: i32 =
                dots.iter().enumerate().map(|(s, d)| x.scale_min(j, s).0 as i32 * d).sum();
            let min = f16(x.dmin[j]) * yb.d();
            let scale = f16(x.d[j]) * yb.d();
            *a = (-(q4_k_bias(x, j, yb) as f32)).mul_add(min, *a);
            *a = (isum as f32).mul_add(scale, *a);
        }
    }
    acc
}

/// The slots of this file's entry points (see [`crate::accel`]), filled by
/// `tiercheck-accel` (its `src/arch/aarch64/sve_repack/kernels.rs`).
pub mod slots {
    // A slot's type is its entry point's signature, spelt out.
    #![allow(clippy::type_complexity)]

    use super::*;
    use crate::accel::Slot;

    /// [`gemm_q4_k_8x8_sve256`].
    pub static GEMM_Q4_K_8X8_SVE256: Slot<fn(&[BlockQ4Kx8], &[BlockQ8K]) -> [f32; 8]> = Slot::new();
}
