//! Native x86-64 lanes of tiercheck.
//!
//! Each lane module (`avx2`, ...) offers `is_available()` (runtime detection, cached
//! once per process), `unsafe` `#[target_feature]` kernels, and `kernels()`, which
//! returns the lane's [`Kernels`](tiercheck_core::Kernels) only when the CPU has every
//! feature they need. Nothing here can execute an instruction the CPU lacks: the only
//! way to reach a `#[target_feature]` function from safe code is through `kernels()`.
//!
//! Every kernel has a portable twin of the same name in `tiercheck-core` (module
//! `dot::avx2`, ...) that performs the same float operations in the same order; the
//! test harness checks that the two agree bitwise on every golden case.
//!
//! On other architectures this crate is empty.

#![cfg(target_arch = "x86_64")]

pub mod avx2;
pub mod avx2_repack;
pub mod avx512;
pub mod elem;

mod detect;
