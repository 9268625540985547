//! `tiercheck_core::arch::aarch64::sve_repack`.

pub(crate) mod kernels;
