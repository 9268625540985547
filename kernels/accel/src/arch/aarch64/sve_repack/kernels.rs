//! Accelerated form of `tiercheck_core::arch::aarch64::sve_repack::kernels` (the
//! SVE-256 Q4_K 8x8 gemm): the i8mm repacked gemm's AVX2 form with the fused float
//! steps (`svmls`, `svmla`).

#[allow(unused_imports)]
use tiercheck_core::arch::aarch64::sve_repack::kernels::slots;

use crate::Host;

/// Fills this file's slots where `host` serves them.
pub(crate) fn install(host: Host) {
    #[cfg(target_arch = "x86_64")]
    if host.avx2_fma {
        // SAFETY: installed only where the CPU has AVX2 and FMA.
        slots::GEMM_Q4_K_8X8_SVE256.set_fast(|b, y| unsafe {
            crate::arch::aarch64::i8mm_repack::kernels::fast::gemm_q4_k_8x8::<true>(b, y)
        });
    }
    let _ = host;
}
