//! `tiercheck_core::arch::aarch64::neon_repack`.

pub(crate) mod kernels;
