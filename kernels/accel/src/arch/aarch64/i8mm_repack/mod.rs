//! `tiercheck_core::arch::aarch64::i8mm_repack`.

pub(crate) mod kernels;
