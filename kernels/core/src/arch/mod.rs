//! The portable twins, one folder per tier, at the same paths and with the same file and
//! function names as the native crates (`arch/x86_64/avx2/vec_dot.rs` here beside
//! `kernels/x86_64/src/avx2/vec_dot.rs` there), so a reader opens one path in two crates
//! and compares them line by line.
//!
//! - [`generic`]: ggml's portable C kernels, the `ref` lane (the specification);
//! - [`x86_64`]: the haswell tier (`avx2`), its repack buffer (`avx2_repack`) and ggml's
//!   AVX-512 tier (`avx512`: the zen4 variant, haswell's matmuls with 16-wide f32 loops);
//! - [`aarch64`]: the GCC-built NEON tier (`neon`) and its two repack buffers
//!   (`neon_repack`: dotprod, `i8mm_repack`: i8mm);
//! - [`hip`]: ggml's CUDA/HIP MMVQ path (the float order lives in [`crate::gpu`]).
//!
//! Each lane folder's `mod.rs` holds the lane constant (name, arch, status, recipe) and
//! its portable [`Kernels`](crate::Kernels) implementation; the kernel files beside it
//! hold the float schedules.

pub mod aarch64;
pub mod generic;
pub mod hip;
pub mod x86_64;

use crate::lane::Lane;

/// Every lane, in a stable order: the portable registry (one row per lane; each
/// architecture crate's `NATIVE` table is the native one).
pub static LANES: &[&Lane] = &[
    &generic::REF,
    &x86_64::avx2::X86_64_AVX2,
    &x86_64::avx2_repack::X86_64_AVX2_REPACK,
    &x86_64::avx512::X86_64_AVX512,
    &aarch64::neon::AARCH64_NEON,
    &aarch64::neon_repack::AARCH64_NEON_REPACK,
    &aarch64::i8mm::AARCH64_I8MM,
    &aarch64::i8mm_repack::AARCH64_I8MM_REPACK,
    &aarch64::sve::AARCH64_SVE128,
    &aarch64::sve_repack::AARCH64_SVE128_REPACK,
    &aarch64::sve::AARCH64_SVE256,
    &aarch64::sve_repack::AARCH64_SVE256_REPACK,
    &hip::HIP_WAVE32,
    &hip::HIP_WAVE64,
    &hip::CUDA_SM90,
];

/// The lane with this name.
pub fn lane(name: &str) -> Option<&'static Lane> {
    LANES.iter().copied().find(|l| l.name == name)
}
