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
