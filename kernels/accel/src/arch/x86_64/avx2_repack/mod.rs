//! `tiercheck_core::arch::x86_64::avx2_repack`.

pub(crate) mod kernels;
