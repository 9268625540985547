//! Native aarch64 lanes of tiercheck.
//!
//! Same conventions as `tiercheck-x86_64`: runtime detection cached once, kernels handed
//! out only where the CPU has every feature, `unsafe` `#[target_feature]` kernels, and a
//! portable twin of the same name in `tiercheck-core` (`dot::neon`). The dotprod
//! instruction (`sdot`) is reached through stable inline assembly, since its intrinsic
//! is still unstable; CPUs without dotprod compute the same integer sums with plain NEON
//! widening multiplies, so the bits do not depend on the path.
//!
//! On other architectures this crate is empty.

#![cfg(target_arch = "aarch64")]

pub mod elem;
pub mod i8mm_repack;
pub mod neon;
pub mod neon_repack;
